"""KITTI depth in its on-disk format, and synthetic scenes written in it.

16-bit PNG depth in metres * 256 (0 = no measurement); split files with one
``<rgb path> <depth path> [focal]`` line per image, paths relative to the data directory; the
Garg evaluation crop and the 80 m cap (:class:`KittiSplit`). The Eigen split's drives come in
several image sizes (:data:`KITTI_SIZES`); LapDepth's protocol cuts every image to 352 x 1216 (the
bottom rows, centred: the KB crop). :func:`write_synthetic_kitti` writes driving-like scenes
(ground plane, boxes, sky) with known depth and a sparse, scan-line LiDAR-like mask in that format.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import torch

from ..common.files import RefusedFile, read_bounded

__all__ = [
    "KITTI_SIZES",
    "KittiSplit",
    "read_depth_png",
    "write_depth_png",
    "garg_crop_mask",
    "render_scene",
    "write_synthetic_kitti",
    "split_path",
    "read_split",
    "EIGHT_BIT",
    "fingerprint",
]


METRICS = ("abs_rel", "sq_rel", "rmse", "rmse_log", "d1", "d2", "d3")
# (height, width) of the camera images in the Eigen split's drives (one size per calibration day).
KITTI_SIZES = ((375, 1242), (370, 1224), (374, 1238), (376, 1241))


# -- KITTI on-disk format --------------------------------------------------------------------------
MAX_IMAGE_BYTES = 1 << 28  # an image file of the data sets (ImageNet, KITTI) is read to at most 256 MiB
MAX_SPLIT_BYTES = 1 << 26  # a split file (46 k lines for Eigen's) to at most 64 MiB


def image_bytes(path) -> io.BytesIO:
    """An image file's bytes, read bounded (:data:`MAX_IMAGE_BYTES`): a regular file only, so a FIFO
    or a link to a device is one line naming it, never a hang or an endless read."""
    try:
        return io.BytesIO(read_bounded(path, MAX_IMAGE_BYTES, "image file"))
    except RefusedFile as e:
        raise ValueError(str(e)) from None


DEPTH_SCALE = 256  # KITTI's depth PNGs hold metres times this
MIN_DEPTH = 1e-3  # metres: ground truth at or below is no measurement, predictions are clipped up to it


def write_depth_png(path, depth: np.ndarray) -> None:
    """Depth in metres -> 16-bit PNG of ``round(depth * 256)`` (0 = no measurement; at most 255.99 m)."""
    from PIL import Image

    d = np.clip(np.round(np.asarray(depth, dtype=np.float64) * DEPTH_SCALE), 0, 65535).astype(np.uint16)
    if isinstance(path, (str, os.PathLike)):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(d).save(path, format="PNG")  # (``path`` may be an open file)


def _decoded(path):
    """The image at ``path``, decoded now: a truncated or undecodable file is one line naming it,
    and so is one of more pixels than PIL's limit (``PIL.Image.MAX_IMAGE_PIXELS``), refused from
    its header before any pixel is decoded (PIL alone only warns up to twice the limit)."""
    import warnings

    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(image_bytes(path))
            img.load()
        return img
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise ValueError(
            f"{path}: refused, more pixels than the limit of {Image.MAX_IMAGE_PIXELS} (PIL.Image.MAX_IMAGE_PIXELS)"
        ) from None
    except (OSError, ValueError, SyntaxError) as e:  # PIL's kinds for damaged or unknown files
        raise ValueError(f"{path}: not a readable image ({type(e).__name__}: {e})") from None


EIGHT_BIT = ("1", "L", "LA", "P", "PA", "RGB", "RGBA", "RGBX", "CMYK", "YCbCr", "LAB", "HSV")


def _eight_bit(img, path):
    """``img`` if its pixels are 8 bits a channel; a 16-bit or float image (which RGB conversion
    would clip to 0 or 255) is one line naming it."""
    if img.mode not in EIGHT_BIT:
        raise ValueError(
            f"{path}: PIL mode {img.mode} (16-bit or float pixels); colour images here are 8 bits a channel "
            f"(modes {', '.join(EIGHT_BIT)}): converting it would clip its values to 0 or 255"
        )
    return img


def read_depth_png(path) -> np.ndarray:
    """16-bit KITTI depth PNG -> float32 metres (0 where there is no measurement)."""
    img = _decoded(path)
    if img.mode not in ("I;16", "I;16B", "I"):
        raise ValueError(f"{path}: PNG mode {img.mode}; KITTI depth maps are 16-bit greyscale")
    return np.asarray(img, dtype=np.float32) / DEPTH_SCALE


def garg_crop_mask(height: int, width: int) -> np.ndarray:
    """The Garg et al. evaluation crop used on the Eigen split, as a boolean mask."""
    m = np.zeros((height, width), dtype=bool)
    m[int(0.40810811 * height) : int(0.99189189 * height), int(0.03594771 * width) : int(0.96405229 * width)] = True
    return m


_WHERE = (
    "Put KITTI under data/kitti/: the raw images (e.g. data/kitti/2011_09_26/"
    "2011_09_26_drive_0002_sync/image_02/data/*.png), the projected LiDAR ground truth as 16-bit "
    "PNGs, and the Eigen split lists data/kitti/splits/eigen_train_files.txt and "
    "eigen_test_files.txt with one '<rgb path> <depth path> [focal]' line per image, paths "
    "relative to data/kitti/. Offline, write synthetic scenes with quadnn_paper.data.kitti.write_synthetic_kitti."
)


class KittiSplit(torch.utils.data.Dataset):
    """Images of one split file: ``(rgb (3,H,W) in [0,1], depth (1,H,W) metres, eval mask (1,H,W))``.

    Ground truth at or beyond ``max_depth`` (the 80 m cap) or at most ``min_depth`` is set to 0
    (invalid); the mask is the Garg crop (``garg=True``, placed on the full image) and the valid
    pixels. ``crop=(h, w)`` cuts every image to its bottom ``h`` rows and centred ``w`` columns (the
    KB crop), so images of different sizes batch together.
    """

    def __init__(
        self,
        root,
        split_file,
        max_depth: float = 80.0,
        min_depth: float = MIN_DEPTH,
        garg: bool = True,
        limit: int | None = None,
        crop: tuple[int, int] | None = None,
    ):
        self.root = Path(root)
        if not self.root.is_dir():
            raise FileNotFoundError(f"no KITTI data directory at {self.root}. {_WHERE}")
        self.items = read_split(self.root, split_file)
        if limit is not None:
            self.items = self.items[:limit]
        # every file the split will read, named now rather than when an epoch (or the test after
        # the last one) reaches it
        missing = [p for item in self.items for p in item if not (self.root / p).is_file()]
        odd = [p for p in missing if os.path.lexists(self.root / p) and (self.root / p).exists()]
        if odd:  # a FIFO or a device would hang or never end at the first epoch
            raise ValueError(
                f"{self.root / odd[0]}, listed in {split_path(self.root, split_file)}, is not a regular file; "
                f"an image or depth map is a file"
            )
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise FileNotFoundError(
                f"{self.root / missing[0]}{more}, listed in {split_path(self.root, split_file)}, does not exist. "
                f"{_WHERE}"
            )
        self.max_depth, self.min_depth, self.garg = float(max_depth), float(min_depth), garg
        self.crop = tuple(crop) if crop is not None else None

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i):
        rgb_path, depth_path = (self.root / p for p in self.items[i])
        for p in (rgb_path, depth_path):
            if not p.is_file():
                raise FileNotFoundError(f"{p} (listed in the split file) does not exist. {_WHERE}")
        rgb = np.asarray(_eight_bit(_decoded(rgb_path), rgb_path).convert("RGB"), dtype=np.float32) / 255.0
        depth = read_depth_png(depth_path)
        depth[(depth >= self.max_depth) | (depth <= self.min_depth)] = 0.0
        mask = depth > 0
        if self.garg:
            mask &= garg_crop_mask(*depth.shape)
        if rgb.shape[:2] != depth.shape:
            raise ValueError(
                f"{rgb_path} is {rgb.shape[0]}x{rgb.shape[1]} but its depth map {depth_path} is "
                f"{depth.shape[0]}x{depth.shape[1]}"
            )
        if self.crop is not None:
            (h, w), (H, W) = self.crop, depth.shape
            if h > H or w > W:
                raise ValueError(f"{rgb_path} is {H}x{W}, smaller than the crop {h}x{w}")
            top, left = H - h, (W - w) // 2
            rgb, depth, mask = (a[top : top + h, left : left + w] for a in (rgb, depth, mask))
        return (
            torch.from_numpy(rgb).permute(2, 0, 1).contiguous(),
            torch.from_numpy(depth.copy())[None],
            torch.from_numpy(mask.copy())[None],
        )


def split_path(root, split_file) -> Path:
    """Where a split file named in a run's settings is: as given when it exists, else under ``root``."""
    split_file = Path(split_file)
    if not split_file.is_absolute() and not split_file.exists():
        split_file = Path(root) / split_file
    return split_file


def read_split(root, split_file) -> list[tuple[str, str]]:
    """The ``(rgb, depth)`` relative paths a split file lists (lines without ground truth skipped).

    Every path must stay inside the data root: absolute paths and ``..`` components are refused
    (checked on the text, so symbolic links the user placed inside the root still work)."""
    path = split_path(root, split_file)
    if not path.is_file():
        raise FileNotFoundError(f"no split file at {path}. {_WHERE}")
    items = []
    try:
        text = read_bounded(path, MAX_SPLIT_BYTES, "split file").decode()
    except (RefusedFile, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not a split file ({e})") from None
    for n, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if len(fields) < 2 or fields[1] == "None":
            continue
        for p in fields[:2]:
            if Path(p).is_absolute() or ".." in Path(p).parts:
                raise ValueError(
                    f"{path}:{n}: {p!r} leaves the data root {root}; split files list paths "
                    "relative to it (no absolute paths, no '..')"
                )
        items.append((fields[0], fields[1]))
    return items


def fingerprint(root, split_files) -> str | None:
    """What identifies the KITTI data a run reads: the SHA-256 of its split files and the relative
    paths and byte sizes of the files they list (one stat each, no reading of the images). None
    when a split file or the root is missing."""
    import hashlib

    from ..common.files import sha256_file_cached

    root = Path(root)
    paths = [split_path(root, s) for s in split_files]
    if not root.is_dir() or not all(p.is_file() for p in paths):
        return None
    h = hashlib.sha256()
    for p in paths:
        h.update(f"{sha256_file_cached(p)}\n".encode())
        for rel in (r for item in read_split(root, p) for r in item):
            f = root / rel
            h.update(f"{rel} {f.stat().st_size if f.is_file() else -1}\n".encode())
    return f"kitti:{h.hexdigest()[:16]}"


# -- synthetic scenes ------------------------------------------------------------------------------
def render_scene(
    rng: np.random.Generator, height: int = 64, width: int = 192, lidar_rows: int = 2, lidar_keep: float = 0.6
):
    """One driving-like scene: ``(rgb uint8 (H,W,3), dense depth (H,W) with inf for sky, sparse gt (H,W))``.

    A pinhole camera 1.65 m above a ground plane (horizon at 40% of the height), 1-4 upright boxes
    standing on the ground at 4-60 m, sky above. The sparse ground truth keeps every
    ``lidar_rows``-th row below the horizon and a random ``lidar_keep`` share of its pixels
    (0 elsewhere and on the sky), as a projected LiDAR scan.
    """
    f = 0.9 * width  # focal length in pixels (KITTI: ~721 px for 1242 px width, ~0.58; wider here)
    cy, cx, cam_h = 0.4 * height, width / 2.0, 1.65
    v, u = np.mgrid[0:height, 0:width].astype(np.float64) + 0.5
    depth = np.full((height, width), np.inf)
    below = v > cy + 0.5
    depth[below] = f * cam_h / (v[below] - cy)
    x_ground = (u - cx) * np.where(below, depth, 0) / f
    z = np.where(below, depth, 1.0)
    rgb = np.zeros((height, width, 3))
    stripes = np.floor(z / 2.0) % 2  # 2 m bands on the road: a depth cue
    lane = (np.abs(np.abs(x_ground) - 1.8) < 0.12).astype(float)
    g = 0.35 + 0.1 * stripes + 0.4 * lane
    rgb[below] = np.stack([g, g, g * 0.95], -1)[below]
    sky = ~below
    rgb[sky] = np.stack([0.5 + 0.3 * v / height, 0.7 + 0.2 * v / height, np.full_like(v, 0.95)], -1)[sky]
    for _ in range(int(rng.integers(1, 5))):
        zb = rng.uniform(4.0, 60.0)
        xb, wb, hb = rng.uniform(-8, 8), rng.uniform(1.5, 4.0), rng.uniform(1.2, 3.5)
        bottom = cy + f * cam_h / zb
        top = cy + f * (cam_h - hb) / zb
        left, right = cx + f * (xb - wb / 2) / zb, cx + f * (xb + wb / 2) / zb
        inside = (v >= top) & (v <= bottom) & (u >= left) & (u <= right) & (zb < depth)
        depth[inside] = zb
        color = rng.uniform(0.1, 0.9, 3)
        shade = 0.7 + 0.3 * (v - top) / max(bottom - top, 1e-6)
        rgb[inside] = color[None] * shade[inside][:, None]
    rgb = np.clip(rgb + rng.normal(0, 0.02, rgb.shape), 0, 1)
    sparse = np.where(np.isfinite(depth), depth, 0.0)
    rows = (np.arange(height) % lidar_rows == 0)[:, None]
    sparse = sparse * rows * (rng.random((height, width)) < lidar_keep)
    return (rgb * 255).round().astype(np.uint8), depth, sparse


def write_synthetic_kitti(
    root, n_train: int = 16, n_test: int = 4, height: int = 64, width: int = 192, seed: int = 0, sizes=None
) -> Path:
    """Synthetic scenes in the KITTI layout under ``root``; returns ``root``.

    Every image is ``height`` x ``width``, or with ``sizes`` (a list of ``(height, width)``) the
    images cycle through those sizes, as the real split's drives do (:data:`KITTI_SIZES`).

    ``root/synthetic/drive_{train,test}/image_02/data/NNNNNNNNNN.png`` (RGB),
    ``root/synthetic/drive_*/proj_depth/groundtruth/image_02/NNNNNNNNNN.png`` (16-bit depth * 256,
    sparse) and ``root/splits/eigen_{train,test}_files.txt``. Deterministic in ``seed``; an
    existing tree is reused when it was last written with the same settings.
    """
    from PIL import Image

    from quadnn_paper.data.standin import claim

    owned = claim(root, "synthetic KITTI")  # never into a folder of someone's own data
    # One stamp naming the settings of the last write: the split files are shared, so a tree
    # written later with other settings (another profile) must not pass for this one.
    spec = f"{n_train} {n_test} {height} {width} {seed}" + (f" {[tuple(s) for s in sizes]}" if sizes else "") + "\n"
    stamp = owned.root / "synthetic" / "spec.txt"
    if stamp.exists() and owned.owns("synthetic/spec.txt") and stamp.read_text() == spec:
        return owned.root
    rng = np.random.default_rng(seed)
    sizes = [tuple(s) for s in sizes] if sizes else [(height, width)]
    blobs = {}
    for split, n in (("train", n_train), ("test", n_test)):
        lines = []
        for i in range(n):
            height, width = sizes[i % len(sizes)]
            f = 0.9 * width
            rgb, _, sparse = render_scene(rng, height, width)
            drive = f"synthetic/drive_{split}"
            rgb_rel = f"{drive}/image_02/data/{i:010d}.png"
            dep_rel = f"{drive}/proj_depth/groundtruth/image_02/{i:010d}.png"
            png, depth_png = io.BytesIO(), io.BytesIO()
            Image.fromarray(rgb).save(png, format="PNG")
            write_depth_png(depth_png, sparse)
            blobs[rgb_rel], blobs[dep_rel] = png.getvalue(), depth_png.getvalue()
            lines.append(f"{rgb_rel} {dep_rel} {f:.4f}")
        blobs[f"splits/eigen_{split}_files.txt"] = ("\n".join(lines) + "\n").encode()
    blobs["synthetic/spec.txt"] = spec.encode()
    owned.replace_all(blobs)  # our earlier scenes go; nobody else's file is touched
    return owned.root
