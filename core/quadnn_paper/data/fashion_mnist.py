"""Fashion-MNIST (Xiao, Rasul and Vollgraf 2017; Zalando, MIT/Expat licence): 60,000 training and
10,000 test images, 28x28 grey, ten classes of clothing, in the four IDX files of its publication.

The files are looked for, in this order, in ``<data_dir>/fashion-mnist/`` (a copy of the user's),
``build/data/fashion-mnist/`` (where ``make paper`` unpacks Debian's ``dataset-fashion-mnist``) and
``/usr/share/datasets/fashion-mnist/`` (that package installed); each as ``<name>`` or ``<name>.gz``.

Every file is checked before it is used, and anything else refused in one line naming it:

- a regular file (no link, FIFO or device; opened without following a link and without blocking);
- its IDX header (magic number, dimensions) equal to the published one, before anything is
  allocated; read at most its known size plus one byte (a longer file is refused, not truncated);
- the SHA-256 of its IDX bytes (decompressed: the same for the published ``.gz`` and Debian's
  recompressed copy) equal to :data:`FILES`.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path

import numpy as np

from quadnn_paper.common.files import RefusedFile, open_own
from quadnn_paper.common.paths import GENERATED

__all__ = [
    "FOLDER",
    "FILES",
    "INSTALLED",
    "CLASSES",
    "BadFile",
    "Missing",
    "find",
    "read_split",
    "fingerprint",
    "resize",
    "PUBLISHED_ACCURACY",
]

FOLDER = "fashion-mnist"
INSTALLED = Path("/usr/share/datasets") / FOLDER  # Debian's dataset-fashion-mnist
CLASSES = 10
# name -> (IDX magic, dimensions, SHA-256 of the IDX bytes): the published data, checked against
# its class counts (6,000 / 1,000 each) and first labels.
FILES = {
    "train-images-idx3-ubyte": (
        0x0803,
        (60_000, 28, 28),
        "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    ),
    "train-labels-idx1-ubyte": (0x0801, (60_000,), "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9"),
    "t10k-images-idx3-ubyte": (
        0x0803,
        (10_000, 28, 28),
        "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    ),
    "t10k-labels-idx1-ubyte": (0x0801, (10_000,), "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"),
}
SPLITS = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
_CHUNK = 1 << 20
# Test accuracies the data set's README tables for full-size networks at 28x28 (submitted by their
# authors, not re-tested by the data set's): what a trained conventional network reaches on it.
PUBLISHED_ACCURACY = {"ResNet18": 0.949, "WRN-28-10": 0.959, "WRN40-4": 0.967}


class BadFile(ValueError):
    """A Fashion-MNIST file that is not the published one (kind of file, header, size or bytes)."""


class Missing(FileNotFoundError):
    """The Fashion-MNIST files are in none of the places they are looked for."""


def _places(data_dir: str | os.PathLike | None) -> list[Path]:
    first = [Path(data_dir) / FOLDER] if data_dir else []
    return [*first, GENERATED / FOLDER, INSTALLED]


def find(data_dir: str | os.PathLike | None = None) -> Path:
    """The first folder of :func:`_places` that holds all four files (as given or gzipped)."""
    for folder in _places(data_dir):
        if all((folder / n).exists() or (folder / f"{n}.gz").exists() for n in FILES):
            return folder
    where = ", ".join(str(p) for p in _places(data_dir))
    raise Missing(
        f"Fashion-MNIST not found in {where}. `make data` fetches it (Debian's dataset-fashion-mnist, "
        f"no root needed): `apt-get download dataset-fashion-mnist && dpkg-deb -x dataset-fashion-mnist_*.deb <dir>`, "
        f"then copy <dir>/usr/share/datasets/{FOLDER}/ to {GENERATED / FOLDER}/"
    )


def _open_regular(path: Path) -> int:
    """A read-only descriptor of ``path``, a regular file (:func:`~quadnn_paper.common.files.open_own`:
    a link, FIFO or device is refused; the open neither follows a link nor blocks on a FIFO)."""
    try:
        return open_own(path, where="where Fashion-MNIST's files are read as regular files only")
    except RefusedFile as e:
        raise BadFile(str(e)) from None
    except OSError as e:
        raise BadFile(f"{path}: cannot be opened ({e.strerror})") from None


def _read_idx(folder: Path, name: str) -> np.ndarray:
    """The array of IDX file ``name`` in ``folder``, checked as the module says."""
    magic, dims, digest = FILES[name]
    path = folder / name if (folder / name).exists() or (folder / name).is_symlink() else folder / f"{name}.gz"
    header = 4 + 4 * len(dims)
    size = header + int(np.prod(dims))
    fd = _open_regular(path)
    with os.fdopen(fd, "rb") as raw:
        stream = gzip.GzipFile(fileobj=raw, mode="rb") if path.suffix == ".gz" else raw
        try:
            head = stream.read(header)
            got_magic = int.from_bytes(head[:4], "big") if len(head) >= 4 else None
            got = tuple(int.from_bytes(head[4 + 4 * i : 8 + 4 * i], "big") for i in range(len(dims)))
            if len(head) < header or got_magic != magic or got != dims:
                raise BadFile(
                    f"{path}: its IDX header says magic {got_magic!r}, dimensions {got}; Fashion-MNIST's "
                    f"{name} has magic {magic:#06x} and dimensions {dims}"
                )
            body = bytearray()
            while len(body) <= size - header:  # at most the known size plus one byte
                chunk = stream.read(min(_CHUNK, size - header + 1 - len(body)))
                if not chunk:
                    break
                body += chunk
        except (OSError, EOFError, gzip.BadGzipFile) as e:
            raise BadFile(f"{path}: not a readable {'gzip' if path.suffix == '.gz' else 'IDX'} file ({e})") from None
    if len(body) != size - header:
        raise BadFile(
            f"{path}: holds {'more' if len(body) > size - header else 'fewer'} bytes than its header's {dims}"
        )
    h = hashlib.sha256(head)
    h.update(body)
    if h.hexdigest() != digest:
        raise BadFile(f"{path}: its SHA-256 {h.hexdigest()[:16]}... is not the published file's {digest[:16]}...")
    return np.frombuffer(body, dtype=np.uint8).reshape(dims)  # (a bytearray: a writable array)


def read_split(split: str, data_dir: str | os.PathLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(images (N, 28, 28) uint8, labels (N,) int64)`` of ``split`` (``train`` or ``test``)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {sorted(SPLITS)}, got {split!r}")
    folder = find(data_dir)
    images, labels = (_read_idx(folder, n) for n in SPLITS[split])
    return images, labels.astype(np.int64)


def fingerprint(size: int) -> str:
    """What identifies the data at ``size`` pixels: the published files (every read is checked
    against their digests, so these name the bytes) and the resolution they are resized to."""
    h = hashlib.sha256("".join(f"{n} {d}\n" for n, (_, _, d) in sorted(FILES.items())).encode() + f"{size}".encode())
    return f"fashion_mnist{size}:{h.hexdigest()[:16]}"


def resize(images: np.ndarray, size: int) -> np.ndarray:
    """``images`` (N, 28, 28) uint8 at ``size`` x ``size`` (area-weighted when shrinking), uint8."""
    import torch

    x = torch.from_numpy(np.ascontiguousarray(images))[:, None].float()
    if size != images.shape[-1]:
        x = torch.nn.functional.interpolate(x, size=(size, size), mode="bilinear", antialias=True, align_corners=False)
    return x.round_().clamp_(0, 255).to(torch.uint8)[:, 0].numpy()
