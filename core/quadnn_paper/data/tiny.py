"""TINY=1: the full profile's code paths on tiny data written in the real on-disk formats.

No CIFAR, ImageNet or KITTI exists on the machines this project is tested on, so the full
profile is proven by running its exact protocols (models, optimisers, schedules, resolutions,
10-crop evaluation, DDP-ready jobs, weight-transfer dependencies) on data the project writes
in the same layouts the real loaders read:

- ``cifar-10-batches-py/`` and ``cifar-100-python/``: torchvision's pickled batches;
- ``imagenet/{train,val}/<class>/<image>.png``: an ImageFolder tree;
- ``kitti/``: RGB PNGs, 16-bit depth PNGs (metres x 256) and the Eigen split files, in the
  real split's mix of image sizes scaled down by :data:`KITTI_SCALE` (so the KB crop and the
  random training crops, scaled alike, do the work they do on real KITTI).

:func:`tiny_runs` keeps every field of a full-profile run but caps epochs and training images
and points it at that data. The caps keep each schedule's stages (so stage-k weight transfer
still has its stage k). Numbers from TINY runs say nothing about the paper's results; the
report labels them as such.
"""

from __future__ import annotations

import pickle
import tempfile
from pathlib import Path

import numpy as np

from quadnn_paper.common.paths import GENERATED

__all__ = ["TINY_ROOT", "CAPS", "KITTI_SCALE", "write_tiny_data", "write_cifar"]

TINY_ROOT = GENERATED / "tiny"
# Epochs: the fewest that keep every stage of the run's schedule (at least 2); training images.
CAPS = dict(
    classification_images=32,
    classification_test=16,
    imagenet_per_class=2,
    imagenet_classes=4,
    kitti_train=4,
    kitti_test=2,
)
# TINY KITTI: the real images' sizes and the protocol's crops divided by this.
KITTI_SCALE = 4

# Written into the stamp: a tree of another layout (older sizes) is rewritten, not reused.
_LAYOUT = "layout 3: CIFAR 32+16 images, KITTI in mixed sizes"


def write_cifar(root: Path, name: str, n_train: int = 64, n_test: int = 32, seed: int = 0) -> Path:
    """Random images in torchvision's CIFAR-10/100 "python version" layout under ``root``."""
    folder = root / {"cifar10": "cifar-10-batches-py", "cifar100": "cifar-100-python"}[name]
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    classes, label = (10, b"labels") if name == "cifar10" else (100, b"fine_labels")
    files = (
        {f"data_batch_{i}": n_train // 5 for i in range(1, 6)} | {"test_batch": n_test}
        if name == "cifar10"
        else {"train": n_train, "test": n_test}
    )
    for fname, n in files.items():
        d = {
            b"batch_label": fname.encode(),
            label: rng.integers(0, classes, n).tolist(),
            b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
            b"filenames": [b"x.png"] * n,
        }
        if name == "cifar100":
            d[b"coarse_labels"] = [y // 5 for y in d[label]]
        with open(folder / fname, "wb") as f:
            pickle.dump(d, f)
    return folder


def write_tiny_data(root: str | Path = TINY_ROOT) -> Path:
    """Write (once) every data set the full profile reads, tiny, under ``root``; returns ``root``."""
    from quadnn_paper.data import imagefolder as imagenet
    from quadnn_paper.data import kitti as depth
    from quadnn_paper.data.standin import claim

    owned = claim(root, "TINY")
    root = owned.root
    stamp = root / "written"
    if stamp.exists() and owned.owns("written") and _LAYOUT in stamp.read_text():  # older layouts: rewritten
        return root
    n = dict(n_train=CAPS["classification_images"], n_test=CAPS["classification_test"])
    blobs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("cifar10", "cifar100"):
            folder = write_cifar(Path(tmp), name, **n)
            blobs |= {f"{folder.name}/{f.name}": f.read_bytes() for f in sorted(folder.iterdir())}
    # ImageNet: digits rendered as 64x64 RGB-readable PNGs in ImageFolder layout (the full
    # protocol's Resize(256) + TenCrop(224) then run on them unchanged).
    tree = imagenet.write_digits_folder(root / "imagenet-digits", size=64, max_per_class=CAPS["imagenet_per_class"])
    for split in ("train", "val"):
        for c in sorted((tree / split).iterdir())[: CAPS["imagenet_classes"]]:
            for png in sorted(c.glob("*.png")):
                blobs[f"imagenet/{split}/n{int(c.name):08d}/{png.name}"] = png.read_bytes()
    depth.write_synthetic_kitti(
        root / "kitti",
        CAPS["kitti_train"],
        CAPS["kitti_test"],
        seed=0,
        sizes=[(h // KITTI_SCALE, w // KITTI_SCALE) for h, w in depth.KITTI_SIZES],
    )
    blobs["written"] = f"tiny format-identical data for the full profile, {_LAYOUT}\n".encode()  # last
    owned.replace_all(blobs)
    return root
