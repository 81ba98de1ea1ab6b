"""Image-classification data held in memory as tensors, with batch-wise augmentation.

Data sets (``load(name, data_dir, download, split_seed)``):

- ``cifar10`` / ``cifar100``: read from torchvision's on-disk "python version"
  (``data/cifar-10-batches-py/``, ``data/cifar-100-python/``: pickled dicts with ``data``
  (N x 3072 uint8) and ``labels`` / ``fine_labels``). ``download=True`` fetches them with
  torchvision. Augmentation: 4-pixel zero padding + random 32x32 crop + horizontal flip
  (He et al. 2016), then per-channel normalisation.
- ``digits``: scikit-learn's 8x8 handwritten digits (1,797 images, ships with scikit-learn,
  so it works offline) as a small stand-in: one channel, values scaled to [0, 1] and
  normalised, a stratified 80/20 train/test split fixed by ``split_seed``. Augmentation:
  1-pixel zero padding + random 8x8 crop (shifts of at most one pixel; no flips, which
  would change digits). The CIFAR ResNets run on 8x8 inputs (stages at 8, 4, 2 pixels).
- ``fashion_mnist<size>`` (e.g. ``fashion_mnist16``): Fashion-MNIST's 60,000 training and 10,000
  test images (:mod:`quadnn_paper.data.fashion_mnist`, every file checked), resized from 28 to
  ``size`` pixels, one channel; with a ``split_seed`` the training images come in an order drawn
  from it (so ``train_limit`` takes a subset per seed), the test set is always all 10,000.
  Augmentation: 2-pixel zero padding + random crop + horizontal flip (clothes keep their class).

Augmentation draws from an explicit ``torch.Generator``, so an epoch's batches are a pure
function of (seed, epoch): a resumed run sees exactly the batches the interrupted one saw,
and every DDP rank can cut its share out of the same global batch.
"""

from __future__ import annotations

import functools
import hashlib
import io
import pickle
import pickletools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..common.files import RefusedFile, read_bounded

__all__ = [
    "DATASETS",
    "Data",
    "load",
    "load_cifar_batch",
    "UnsafePickle",
    "BadData",
    "fingerprint",
    "augment",
    "batches",
    "to_device",
]

DATASETS = ("cifar10", "cifar100", "digits", "fashion_mnist16", "fashion_mnist28")
_FASHION_SIZES = {"fashion_mnist16": 16, "fashion_mnist28": 28}  # name -> pixels

_CIFAR = {
    "cifar10": dict(
        folder="cifar-10-batches-py",
        train=[f"data_batch_{i}" for i in range(1, 6)],
        test=["test_batch"],
        label=b"labels",
        classes=10,
        tv="CIFAR10",
        url="https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
    ),
    "cifar100": dict(
        folder="cifar-100-python",
        train=["train"],
        test=["test"],
        label=b"fine_labels",
        classes=100,
        tv="CIFAR100",
        url="https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
    ),
}


@dataclass
class Data:
    """A data set in memory: uint8 or float images (N, C, H, W), int64 labels."""

    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int
    mean: torch.Tensor  # (C,)
    std: torch.Tensor  # (C,)
    pad: int  # random-crop padding
    flip: bool  # random horizontal flips

    @property
    def in_chans(self) -> int:
        return self.x_train.shape[1]

    def normalise(self, x: torch.Tensor) -> torch.Tensor:
        # uint8 / 255.0 promotes to float32 and divides in one operation (a launch less than
        # .float() then / 255.0, the same values)
        x = x / 255.0 if self.x_train.dtype == torch.uint8 else x.float()
        return (x - self.mean[:, None, None]) / self.std[:, None, None]


def _missing(name: str, root: Path) -> FileNotFoundError:
    spec = _CIFAR[name]
    return FileNotFoundError(
        f"{name} not found: expected torchvision's python version under {root / spec['folder']}/ "
        f"(files {', '.join(spec['train'] + spec['test'])}). Either pass --download (needs internet; "
        f"torchvision fetches it into {root}/), or download {spec['url']} elsewhere and unpack it with "
        f"`tar xzf {spec['url'].rsplit('/', 1)[1]} -C {root}/`. Offline, use --dataset digits."
    )


class UnsafePickle(ValueError):
    """A data file whose unpickling would build something other than plain data."""


class BadData(ValueError):
    """A data file that reads but does not hold what its format says (counts, labels, image sizes)."""


class _DataOnlyUnpickler(pickle.Unpickler):
    """Unpickles only what a CIFAR batch holds: dicts, lists, bytes, str, numbers and numpy arrays.

    Plain ``pickle.load`` calls whatever a file names (``os.system`` included), so a crafted
    ``data_batch_1`` on a mirror or a shared disk would run code. Containers and scalars need no
    global; the globals admitted here are the ones numpy uses to rebuild an array under every
    pickle protocol (0-4: ``_reconstruct``; 5: ``_frombuffer``, which refuses object dtypes).
    """

    ALLOWED = {
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.numeric", "_frombuffer"),
        ("_codecs", "encode"),
    }

    def __init__(self, file, path):
        super().__init__(file, encoding="bytes")
        self.path = path

    def find_class(self, module: str, name: str):
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise UnsafePickle(
            f"{self.path}: refuses to unpickle {module}.{name}; a CIFAR batch holds only "
            "dicts, lists, bytes, numbers and numpy arrays (is this file what it claims to be?)"
        )


MAX_BATCH_BYTES = 1 << 30  # a CIFAR batch file is at most 160 MB (CIFAR-100's train); refused above 1 GiB


def load_cifar_batch(path: str | Path, label_key: bytes = b"labels") -> dict:
    """One CIFAR batch file (torchvision's "python version"), read without executing anything and
    bounded before anything is built: the file at most :data:`MAX_BATCH_BYTES`, its memo indices
    checked before the unpickler sizes its memo by them, and the arrays made of its images and
    labels (``label_key``) at most as many values as the file has bytes. Other entries (file
    names, which honest writers may share) are never built into arrays, so they are not counted."""
    path = Path(path)
    try:  # read, never trusting its reported size: a link to /dev/zero says 0 bytes, a FIFO blocks
        blob = read_bounded(path, MAX_BATCH_BYTES, "CIFAR batch file")
    except RefusedFile as e:
        raise BadData(str(e)) from None
    size = len(blob)
    try:
        _check_memo(path, blob)
        d = _DataOnlyUnpickler(io.BytesIO(blob), path).load()
    except (UnsafePickle, BadData):
        raise
    except Exception as e:  # noqa: BLE001  (truncated or not a pickle at all)
        raise ValueError(f"{path}: not a readable CIFAR batch ({type(e).__name__}: {e})") from None
    if not isinstance(d, dict) or b"data" not in d:
        raise ValueError(f"{path}: not a CIFAR batch (expected a dict with b'data' and labels)")
    try:
        values = _values(d[b"data"]) + (_values(d[label_key]) if label_key in d else 0)
    except RecursionError:
        raise BadData(f"{path}: objects nested too deeply for a CIFAR batch (a pickle bomb?)") from None
    if values > size:
        raise BadData(
            f"{path}: its objects hold {values} values, more than its {size} bytes can store (an honest "
            f"pickle spends at least a byte on each): repeated references or ragged entries, a pickle bomb; "
            f"refused before they are built into arrays"
        )
    return d


_PUTS = ("PUT", "BINPUT", "LONG_BINPUT")


def _check_memo(path: Path, blob: bytes) -> None:
    """Refuse a memo index beyond the opcodes read so far, before the C unpickler sees it: it
    grows its memo table to the largest index given (``}r<2^31>`` in 9 bytes asks for 16 GB),
    while an honest pickler numbers its memo 0, 1, 2, ... as it goes."""
    for ops, (op, arg, _) in enumerate(pickletools.genops(io.BytesIO(blob)), 1):
        if op.name in _PUTS and int(arg) > ops:
            raise BadData(
                f"{path}: memo index {arg} after {ops} opcodes (an honest pickle numbers its memo in order): "
                f"a pickle bomb, refused before the unpickler allocates its memo"
            )


def _values(obj, seen: dict | None = None) -> int:
    """The scalar values ``obj`` expands to when turned into an array, each shared object counted at
    every reference and each list as long as its longest item times its length (``np.asarray``
    pads ragged bytes to the longest), in time linear in the distinct objects."""
    seen = {} if seen is None else seen
    if id(obj) in seen:
        return seen[id(obj)]
    if isinstance(obj, np.ndarray):
        n = obj.size
    elif isinstance(obj, (bytes, bytearray, str)):
        n = len(obj)
    elif isinstance(obj, dict):
        seen[id(obj)] = 0  # (a cycle counts nothing more)
        n = sum(_values(v, seen) for v in obj.values())
    elif isinstance(obj, (list, tuple)):
        seen[id(obj)] = 0
        n = len(obj) * max((_values(v, seen) for v in obj), default=1)
    else:
        n = 1
    seen[id(obj)] = n
    return n


def _checked(path: Path, d: dict, label_key: bytes, classes: int) -> tuple[np.ndarray, np.ndarray]:
    """A batch's images (N, 3, 32, 32) uint8 and labels (N,) int64, or one line naming what is wrong."""
    if label_key not in d:
        raise BadData(f"{path}: no {label_key.decode()!r} entry (keys: {sorted(map(repr, d))})")
    x, y = np.asarray(d[b"data"]), np.asarray(d[label_key])
    if x.ndim != 2 or x.shape[1] != 3 * 32 * 32 or not np.issubdtype(x.dtype, np.integer):
        raise BadData(
            f"{path}: images must be an N x 3072 integer array (3 x 32 x 32 pixels each), "
            f"got shape {x.shape} of {x.dtype}"
        )
    if x.size and (x.min() < 0 or x.max() > 255):
        raise BadData(f"{path}: pixel values must be in 0..255, found {x.min()}..{x.max()}")
    if y.ndim != 1:
        raise BadData(f"{path}: labels must be one integer per image, shape ({len(x)},), got shape {y.shape}")
    if len(y) != len(x) or (y.size and not np.issubdtype(y.dtype, np.integer)):
        raise BadData(
            f"{path}: {len(x)} images but {y.shape[0] if y.ndim else 0} labels of {y.dtype} "
            "(one integer label per image)"
        )
    bad = y[(y < 0) | (y >= classes)]
    if bad.size:
        raise BadData(f"{path}: labels must be in 0..{classes - 1}, found {sorted(set(bad.tolist()))[:5]}")
    return x.astype(np.uint8, copy=False).reshape(-1, 3, 32, 32), y.astype(np.int64, copy=False)


_DIGITS_FINGERPRINT: list[str] = []


def fingerprint(name: str, data_dir: str | Path = "data") -> str | None:
    """What identifies the data ``load(name, data_dir)`` reads, by content (moving it keeps it):
    the SHA-256 of every CIFAR batch file (remembered while a file's size and mtime stay), or of
    scikit-learn's digits arrays. None when the files are not there."""
    from ..common.files import sha256_file_cached

    if name in _FASHION_SIZES:
        from . import fashion_mnist

        try:
            fashion_mnist.find(data_dir)
        except fashion_mnist.Missing:
            return None
        return fashion_mnist.fingerprint(_FASHION_SIZES[name])
    if name == "digits":
        if not _DIGITS_FINGERPRINT:
            from sklearn.datasets import load_digits

            d = load_digits()
            h = hashlib.sha256(np.ascontiguousarray(d.images).tobytes() + np.ascontiguousarray(d.target).tobytes())
            _DIGITS_FINGERPRINT.append(f"digits:{h.hexdigest()[:16]}")
        return _DIGITS_FINGERPRINT[0]
    spec = _CIFAR[name]
    folder = Path(data_dir) / spec["folder"]
    files = spec["train"] + spec["test"]
    if not all((folder / f).is_file() for f in files):
        return None
    h = hashlib.sha256("".join(f"{f} {sha256_file_cached(folder / f)}\n" for f in files).encode())
    return f"{name}:{h.hexdigest()[:16]}"


def _load_cifar(name: str, root: Path, download: bool) -> Data:
    spec = _CIFAR[name]
    folder = root / spec["folder"]
    if download and not folder.exists():
        import torchvision

        getattr(torchvision.datasets, spec["tv"])(str(root), train=True, download=True)
    if not all((folder / f).exists() for f in spec["train"] + spec["test"]):
        raise _missing(name, root)

    def read(files):
        xs, ys = [], []
        for f in files:
            x, y = _checked(folder / f, load_cifar_batch(folder / f, spec["label"]), spec["label"], spec["classes"])
            xs.append(x)
            ys.append(y)
        return torch.from_numpy(np.concatenate(xs)), torch.from_numpy(np.concatenate(ys))

    x_train, y_train = read(spec["train"])
    x_test, y_test = read(spec["test"])
    for split, files, y in (("training", spec["train"], y_train), ("test", spec["test"], y_test)):
        if not len(y):  # (found now, not as a division by zero after the first epoch)
            raise BadData(f"{folder}: its {split} batches ({', '.join(files)}) hold no images")
    mean, std = _channel_stats(x_train)
    return Data(name, x_train, y_train, x_test, y_test, spec["classes"], mean, std, pad=4, flip=True)


def _channel_stats(x: torch.Tensor, chunk: int = 2048) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean and (unbiased) standard deviation of uint8 images scaled to [0, 1], summed in
    float64 over chunks: a full-size CIFAR-10 costs 50 MB here, not three float copies (1.8 GB)."""
    total = torch.zeros(x.shape[1], dtype=torch.float64)
    squares = torch.zeros_like(total)
    for i in range(0, len(x), chunk):
        part = x[i : i + chunk].double()
        total += part.sum((0, 2, 3))
        squares += part.square().sum((0, 2, 3))
    n = x.numel() // x.shape[1]
    mean = total / n
    var = (squares - n * mean.square()) / max(n - 1, 1)
    return (mean / 255.0).float(), (var.clamp(min=0).sqrt() / 255.0).float()


def _load_digits(split_seed: int) -> Data:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None]  # (1797, 1, 8, 8) in [0, 1]
    x_tr, x_te, y_tr, y_te = train_test_split(x, d.target, test_size=0.2, stratify=d.target, random_state=split_seed)
    x_tr, x_te = torch.from_numpy(x_tr), torch.from_numpy(x_te)
    return Data(
        "digits",
        x_tr,
        torch.as_tensor(y_tr, dtype=torch.int64),
        x_te,
        torch.as_tensor(y_te, dtype=torch.int64),
        10,
        x_tr.mean((0, 2, 3)),
        x_tr.std((0, 2, 3)),
        pad=1,
        flip=False,
    )


def _load_fashion(name: str, data_dir: Path, split_seed: int | None) -> Data:
    from . import fashion_mnist

    size = _FASHION_SIZES[name]
    (x_tr, y_tr), (x_te, y_te) = (fashion_mnist.read_split(s, data_dir) for s in ("train", "test"))
    if split_seed is not None:  # the training images in an order of the seed's (train_limit: a subset)
        order = np.random.default_rng(split_seed).permutation(len(y_tr))
        x_tr, y_tr = x_tr[order], y_tr[order]
    x_tr, x_te = (torch.from_numpy(fashion_mnist.resize(x, size))[:, None] for x in (x_tr, x_te))
    mean, std = _channel_stats(x_tr)
    y_tr, y_te = torch.from_numpy(y_tr), torch.from_numpy(y_te)
    return Data(name, x_tr, y_tr, x_te, y_te, fashion_mnist.CLASSES, mean, std, pad=2, flip=True)


def load(name: str, data_dir: str | Path = "data", download: bool = False, split_seed: int = 0) -> Data:
    """Load data set ``name`` (one of :data:`DATASETS`) into memory."""
    if name not in DATASETS:
        raise ValueError(f"dataset must be one of {DATASETS}, got {name!r}")
    if name == "digits":
        return _load_digits(split_seed)
    if name in _FASHION_SIZES:
        return _load_fashion(name, Path(data_dir), split_seed)
    return _load_cifar(name, Path(data_dir), download)


def to_device(data: Data, device: torch.device | str) -> Data:
    """``data`` with its images, labels and statistics on ``device`` (the same object on CPU)."""
    if torch.device(device).type == "cpu":
        return data
    moved = {k: getattr(data, k).to(device) for k in ("x_train", "y_train", "x_test", "y_test", "mean", "std")}
    return Data(data.name, num_classes=data.num_classes, pad=data.pad, flip=data.flip, **moved)


def augment(data: Data, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Random crop after zero padding (+ horizontal flip where the data set allows), batch-wise,
    on ``x``'s device; the draws come from the CPU generator ``gen``, so every device sees the same.

    The crop offsets and flips become one row and one column index per image on the CPU (the flip
    reverses the column index), copied without waiting and applied as one gather: the same pixels as
    cropping, then flipping, in a fixed number of launches and no host wait on a GPU."""
    n, c, h, w = x.shape
    p = data.pad
    dev = x.device
    x = data.normalise(x)
    if not p and not data.flip:
        return x
    # the draws in their fixed order (offsets, then flips): the stream of ``gen`` as it always was
    oy = torch.randint(0, 2 * p + 1, (n,), generator=gen) if p else torch.zeros(n, dtype=torch.long)
    ox = torch.randint(0, 2 * p + 1, (n,), generator=gen) if p else torch.zeros(n, dtype=torch.long)
    flip = torch.rand(n, generator=gen) < 0.5 if data.flip else torch.zeros(n, dtype=torch.bool)
    rows = (oy[:, None] + torch.arange(h))[:, None, :, None]
    cols = (ox[:, None] + torch.where(flip[:, None], torch.arange(w - 1, -1, -1), torch.arange(w)))[:, None, None, :]
    rows, cols = rows.to(dev, non_blocking=True), cols.to(dev, non_blocking=True)
    # Pad the normalised image with zeros (the mean), as the usual ToTensor-Normalize-pad order
    # would pad with black; either is standard, this keeps padding at the data mean.
    xp = torch.nn.functional.pad(x, (p, p, p, p)) if p else x
    return xp[(*_image_channel_index(n, c, dev), rows, cols)]


@functools.lru_cache(maxsize=8)
def _image_channel_index(n: int, c: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The gather's image and channel indices, made once per batch shape and device: two launches
    a step fewer (they never change)."""
    return torch.arange(n, device=device)[:, None, None, None], torch.arange(c, device=device)[None, :, None, None]


def batches(data: Data, batch_size: int, gen: torch.Generator, train: bool = True):
    """Yield ``(x, y)`` global batches: shuffled and augmented from ``gen`` when ``train``."""
    if train:
        order = torch.randperm(len(data.y_train), generator=gen)
        for i in range(0, len(order), batch_size):
            idx = order[i : i + batch_size].to(data.x_train.device, non_blocking=True)
            yield augment(data, data.x_train[idx], gen), data.y_train[idx]
    else:
        for i in range(0, len(data.y_test), batch_size):
            yield data.normalise(data.x_test[i : i + batch_size]), data.y_test[i : i + batch_size]
