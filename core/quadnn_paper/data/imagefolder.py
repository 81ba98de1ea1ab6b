"""An ImageFolder tree ``<data_dir>/{train,val}/<class>/<image>`` read with torchvision, the
paper's ImageNet augmentation and 10-crop evaluation, and an offline stand-in in the same layout.

- training: ``RandomResizedCrop(crop, scale)`` + horizontal flip + ImageNet mean/std normalisation;
- evaluation: ``Resize(resize)`` (shorter side) + ``TenCrop(crop)`` (four corners, centre, and their
  mirror images), stacked so a batch holds the ten crops of each image;
- :func:`write_digits_folder` renders scikit-learn's 8x8 digits as ``size`` x ``size`` PNG files in
  the same layout, so the same loader, augmentation and 10-crop path run end to end offline;
  :func:`write_fashion_folder` does the same with Fashion-MNIST (the cpu profile's stand-in).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import torch

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "DATA_DEFAULTS",
    "write_digits_folder",
    "write_fashion_folder",
    "train_transform",
    "eval_transform",
    "datasets",
    "StackCrops",
    "load_rgb",
    "fingerprint",
]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

# What the engine's imagefolder task reads from a run's ``task_kwargs`` (with these defaults).
DATA_DEFAULTS = dict(image_size=None, max_per_class=None, resize=256, crop=224, scale=(0.08, 1.0))


# -- the stand-in ------------------------------------------------------------------------------------------
def write_digits_folder(
    root: str | Path, size: int = 32, split_seed: int = 0, test_size: float = 0.2, max_per_class: int | None = None
) -> Path:
    """Render scikit-learn's digits as ``size`` x ``size`` grey PNGs in ImageFolder layout under ``root``.

    ``root/train/<digit>/<index>.png`` and ``root/val/<digit>/<index>.png`` (a stratified split
    fixed by ``split_seed``; ``max_per_class`` keeps only the first images of each class per
    split). The 8x8 images (values 0..16) are scaled to 0..255 and enlarged bicubically. A
    ``manifest.json`` records the settings; a tree whose manifest matches is left as it is.
    ``root`` must be the project's (:func:`quadnn_paper.data.standin.claim`): a folder of someone's
    own images is refused, never rewritten. Returns ``root``.
    """
    from PIL import Image
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    from quadnn_paper.data.standin import claim

    owned = claim(root, "digits ImageFolder")
    spec = dict(
        source="sklearn.datasets.load_digits",
        size=int(size),
        split_seed=int(split_seed),
        test_size=float(test_size),
        max_per_class=max_per_class,
    )
    manifest = owned.root / "manifest.json"
    if manifest.exists() and owned.owns("manifest.json") and json.loads(manifest.read_text()).get("spec") == spec:
        return owned.root
    d = load_digits()
    idx = np.arange(len(d.target))
    tr, te = train_test_split(idx, test_size=test_size, stratify=d.target, random_state=split_seed)
    counts, blobs = {}, {}
    for split, ids in (("train", tr), ("val", te)):
        kept = {c: 0 for c in range(10)}
        for i in sorted(ids):
            c = int(d.target[i])
            if max_per_class is not None and kept[c] >= max_per_class:
                continue
            kept[c] += 1
            img = Image.fromarray((d.images[i] * (255.0 / 16.0)).round().astype(np.uint8), mode="L")
            png = io.BytesIO()
            img.resize((size, size), Image.BICUBIC).save(png, format="PNG")
            blobs[f"{split}/{c}/{i:04d}.png"] = png.getvalue()
        counts[split] = sum(kept.values())
    blobs["manifest.json"] = json.dumps(dict(spec=spec, counts=counts), indent=1).encode()
    owned.replace_all(blobs)  # our earlier images of other settings go; nobody else's file is touched
    return owned.root


def write_fashion_folder(
    root: str | Path, size: int = 24, train_per_class: int | None = None, source: str | Path | None = None
) -> Path:
    """Fashion-MNIST (:mod:`quadnn_paper.data.fashion_mnist`, every file checked) as ``size`` x
    ``size`` grey PNGs in ImageFolder layout under ``root``: ``train/<class>/<index>.png`` (the first
    ``train_per_class`` training images of each class; None: all) and ``val/<class>/<index>.png``
    (all 10,000 test images). ``source``: the data folder holding ``fashion-mnist/`` (None: where
    the loader finds it). Ownership, manifest and rewrites as :func:`write_digits_folder`."""
    from PIL import Image

    from quadnn_paper.data import fashion_mnist
    from quadnn_paper.data.standin import claim

    owned = claim(root, "Fashion-MNIST ImageFolder")
    spec = dict(source="fashion-mnist", size=int(size), train_per_class=train_per_class)
    manifest = owned.root / "manifest.json"
    if manifest.exists() and owned.owns("manifest.json") and json.loads(manifest.read_text()).get("spec") == spec:
        return owned.root
    counts, blobs = {}, {}
    for split, folder in (("train", "train"), ("test", "val")):
        x, y = fashion_mnist.read_split(split, source)
        x = fashion_mnist.resize(x, size)
        kept = {c: 0 for c in range(fashion_mnist.CLASSES)}
        for i, c in enumerate(y.tolist()):
            if split == "train" and train_per_class is not None and kept[c] >= train_per_class:
                continue
            kept[c] += 1
            png = io.BytesIO()
            Image.fromarray(x[i], mode="L").save(png, format="PNG")
            blobs[f"{folder}/{c}/{i:05d}.png"] = png.getvalue()
        counts[folder] = sum(kept.values())
    blobs["manifest.json"] = json.dumps(dict(spec=spec, counts=counts), indent=1).encode()
    owned.replace_all(blobs)
    return owned.root


def _normalise():
    from torchvision import transforms as T

    return T.Compose([T.ToTensor(), T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])


class StackCrops:
    """Turn the tuple of PIL crops from ``TenCrop`` into one normalised tensor (n_crops, C, H, W)."""

    def __init__(self):
        self.normalise = _normalise()

    def __call__(self, crops):
        return torch.stack([self.normalise(c) for c in crops])

    def __repr__(self) -> str:
        return "StackCrops(ToTensor, Normalize(ImageNet mean/std))"


def train_transform(crop: int = 224, scale=(0.08, 1.0)):
    """RandomResizedCrop + horizontal flip + normalise (images converted to RGB by ImageFolder)."""
    from torchvision import transforms as T

    return T.Compose([T.RandomResizedCrop(crop, scale=tuple(scale)), T.RandomHorizontalFlip(), _normalise()])


def eval_transform(resize: int = 256, crop: int = 224):
    """Resize the shorter side to ``resize``, then ten ``crop`` crops -> tensor (10, C, crop, crop)."""
    from torchvision import transforms as T

    return T.Compose([T.Resize(resize), T.TenCrop(crop), StackCrops()])


def load_rgb(path: str):
    """An image file as RGB, decoded now: a truncated or undecodable file is one line naming it,
    and so is one of more pixels than PIL's limit (``PIL.Image.MAX_IMAGE_PIXELS``, 89 M: a
    decompression bomb, or an image far larger than any of the data set's), refused from its
    header, before any pixel is decoded."""
    import warnings

    from PIL import Image

    from quadnn_paper.data.kitti import EIGHT_BIT, image_bytes

    try:
        with image_bytes(path) as f, warnings.catch_warnings():
            # PIL only warns between the limit and twice it, and decodes anyway: refuse those too.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(f)
            img.load()
            if img.mode not in EIGHT_BIT:  # (converting would clip 16-bit values to 0 or 255)
                raise ValueError(
                    f"{path}: PIL mode {img.mode} (16-bit or float pixels); the ImageFolder reads 8 bits a "
                    f"channel (modes {', '.join(EIGHT_BIT)}): convert it to 8 bits first"
                )
            return img.convert("RGB")
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise ValueError(
            f"{path}: refused, more pixels than the limit of {Image.MAX_IMAGE_PIXELS} (PIL.Image.MAX_IMAGE_PIXELS; "
            f"{str(e).split('pixels')[0].strip()} pixels: a decompression bomb?)"
        ) from None
    except (OSError, SyntaxError) as e:  # PIL's kinds for damaged or unknown files
        raise ValueError(f"{path}: not a readable image ({type(e).__name__}: {e})") from None
    except ValueError as e:
        if str(e).startswith(str(path)):
            raise
        raise ValueError(f"{path}: not a readable image ({type(e).__name__}: {e})") from None


_LISTINGS: dict[tuple, str] = {}


def fingerprint(data_dir: str | Path) -> str | None:
    """What identifies an ImageFolder tree cheaply: the sorted relative paths and byte sizes of
    every file under ``train/`` and ``val/`` (a listing and one stat per file, no reading:
    ImageNet's 1.33 M files, 140 GB, in well under a minute, where hashing would take an hour; another
    copy or version of a data set differs in names or sizes). Remembered in this process while
    no folder's modification time changes (adding, removing or renaming a file changes it; a
    file rewritten in place under its name is seen by the next process). None when there is no tree."""
    import hashlib
    import os

    root = Path(data_dir)
    if not ((root / "train").is_dir() and (root / "val").is_dir()):
        return None
    dirs, names = [], []
    # (folder, its path under root, the (device, inode) of it and of each folder above it): links
    # are followed as torchvision's ImageFolder follows them, and a link back to a folder above
    # is a loop, refused before anything walks it forever or reads its images again and again
    stack = [(str(root / s), f"{s}/", ()) for s in ("train", "val")]
    while stack:
        folder, rel, above = stack.pop()
        st = os.stat(folder)
        here = (st.st_dev, st.st_ino)
        if here in above:
            raise ValueError(
                f"{folder}: a symbolic link back to a folder above it ({os.path.realpath(folder)}), a loop: "
                f"the ImageFolder would read its images again and again without end; remove the link"
            )
        dirs.append((rel, st.st_mtime_ns))
        with os.scandir(folder) as it:
            for e in it:
                if e.is_dir():
                    stack.append((e.path, f"{rel}{e.name}/", (*above, here)))
                elif not e.is_file():  # a FIFO would hang the loader, a device never end
                    raise ValueError(
                        f"{e.path}: not a regular file (a FIFO, a device, or a link to none); an ImageFolder "
                        f"holds image files: remove it"
                    )
                else:
                    names.append((rel + e.name, e))
    key = (str(root.resolve()), tuple(sorted(dirs)))
    if key not in _LISTINGS:
        files = sorted((rel, e.stat().st_size) for rel, e in names)
        h = hashlib.sha256("".join(f"{rel} {size}\n" for rel, size in files).encode())
        _LISTINGS[key] = f"imagefolder:{len(files)}:{h.hexdigest()[:16]}"
    return _LISTINGS[key]


def _has_image(folder: Path) -> bool:
    """Whether ``folder`` (a class) holds at least one file torchvision's ImageFolder would read."""
    from torchvision.datasets.folder import IMG_EXTENSIONS

    return any(p.is_file() and p.name.lower().endswith(IMG_EXTENSIONS) for p in folder.rglob("*"))


def datasets(data_dir: str | Path, crop: int = 224, resize: int = 256, scale=(0.08, 1.0)):
    """``(train, val)`` torchvision ImageFolders under ``data_dir`` with the transforms above."""
    from torchvision.datasets import ImageFolder
    from torchvision.datasets.folder import IMG_EXTENSIONS

    root = Path(data_dir)
    for split in ("train", "val"):
        if not (root / split).is_dir():
            raise FileNotFoundError(
                f"no ImageFolder tree at {root / split}/: expected {root}/{{train,val}}/<class>/<image> "
                "(for ImageNet, the validation images sorted into class folders as for torchvision's "
                "ImageFolder). Offline, use the digits stand-in: --data digits."
            )
    fingerprint(root)  # (refuses a symbolic-link loop, which torchvision would follow without end)
    for split in ("train", "val"):  # torchvision's own message names neither the folder nor the split
        empty = sorted(c.name for c in (root / split).iterdir() if c.is_dir() and not _has_image(c))
        if empty:
            raise FileNotFoundError(
                f"{root / split}: class folder(s) {', '.join(empty)} of the {split} split hold no image "
                f"(extensions {', '.join(IMG_EXTENSIONS)}); add images or remove the folder(s)"
            )
    train = ImageFolder(str(root / "train"), train_transform(crop, scale), loader=load_rgb)
    val = ImageFolder(str(root / "val"), eval_transform(resize, crop), loader=load_rgb)
    if train.classes != val.classes:
        raise ValueError(f"train and val class folders differ under {root}")
    return train, val
