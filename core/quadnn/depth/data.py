"""KITTI depth data: the on-disk format, the Eigen split, crops, and offline synthetic scenes.

On-disk layout (one ``root``, e.g. ``data/kitti``)::

    root/raw/2011_09_26/2011_09_26_drive_0002_sync/image_02/data/0000000069.png   (RGB)
    root/depth/2011_09_26_drive_0002_sync/proj_depth/groundtruth/image_02/0000000069.png
    root/eigen_train_files.txt   root/eigen_test_files.txt

Split files hold one sample per line, ``<rgb path under raw/> <depth path under depth/> [focal]``
(the format the BTS/LapDepth code bases use); a depth path ``None`` marks a frame without
ground truth, which is skipped. Depth PNGs are 16-bit: metres = value / 256, 0 = no LiDAR return.

Images are cut bottom-centred to multiples of 32 (375x1242 -> 352x1216 on KITTI, the usual
"KB crop"), predictions are evaluated inside the Garg crop (or Eigen crop) of the full frame
and only where 0 < ground truth < ``max_depth`` (80 m).

:func:`write_synthetic_kitti` writes driving-like scenes with exact per-pixel depth (a ground
plane with lane markings, walls along the road, box-shaped vehicles, sky) in this same format,
so the loader, crops and metrics run end to end without the real data.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

__all__ = ["KittiDepth", "eval_crop_mask", "bottom_center_crop_box", "read_depth_png", "write_depth_png",
           "write_synthetic_kitti", "render_scene", "KITTI_HELP", "SPLIT_FILES"]

SPLIT_FILES = {"train": "eigen_train_files.txt", "test": "eigen_test_files.txt"}
# Crops as fractions of the full frame: (top, bottom, left, right).
CROPS = {"garg": (0.40810811, 0.99189189, 0.03594771, 0.96405229),
         "eigen": (0.3324324, 0.91351351, 0.0359477, 0.96405229)}

KITTI_HELP = """KITTI data not found at {root} ({missing}).
Put the data there as follows (paths relative to {root}):
  raw/<date>/<drive>_sync/image_02/data/<frame>.png           KITTI raw RGB images
  depth/<drive>_sync/proj_depth/groundtruth/image_02/<frame>.png  projected LiDAR depth (16-bit PNG, metres*256)
  eigen_train_files.txt  (23,488 lines)  eigen_test_files.txt  (697 lines)
Each split line: '<rgb path under raw/> <depth path under depth/> [focal]' ('None' = no ground truth).
Without the real data, use the offline synthetic scenes: quadnn.depth.write_synthetic_kitti(root, ...)."""


def read_depth_png(path) -> np.ndarray:
    """16-bit KITTI depth PNG -> float32 metres (0 where there is no measurement)."""
    with Image.open(path) as im:
        if im.mode not in ("I;16", "I;16B", "I"):
            raise ValueError(f"{path}: expected a 16-bit depth PNG, got PIL mode {im.mode!r}")
        raw = np.asarray(im)
    return raw.astype(np.float32) / 256.0


def write_depth_png(path, depth_m: np.ndarray) -> None:
    """float metres (0 or non-finite = invalid) -> 16-bit PNG of round(metres*256), capped at 65535."""
    d = np.where(np.isfinite(depth_m) & (depth_m > 0), depth_m, 0.0)
    Image.fromarray(np.clip(np.round(d * 256.0), 0, 65535).astype(np.uint16)).save(path)


def bottom_center_crop_box(height: int, width: int, multiple: int = 32) -> tuple[int, int, int, int]:
    """(top, left, h, w) of the bottom-centred crop to multiples of ``multiple`` (KITTI: the KB crop)."""
    h, w = height - height % multiple, width - width % multiple
    if h == 0 or w == 0:
        raise ValueError(f"image {height}x{width} is smaller than {multiple} pixels")
    return height - h, (width - w) // 2, h, w


def eval_crop_mask(height: int, width: int, crop: str | None = "garg") -> np.ndarray:
    """Boolean mask of the evaluation crop of a full ``height x width`` frame (all True for ``None``)."""
    mask = np.zeros((height, width), bool)
    if crop is None:
        mask[:] = True
        return mask
    if crop not in CROPS:
        raise ValueError(f"crop must be one of {sorted(CROPS)} or None, got {crop!r}")
    t, b, l, r = CROPS[crop]
    mask[int(t * height):int(b * height), int(l * width):int(r * width)] = True
    return mask


class KittiDepth(Dataset):
    """KITTI (or synthetic KITTI-format) depth samples of the Eigen split.

    Returns dicts with ``image`` (3, h, w) float in [0, 1], ``depth`` (1, h, w) metres with 0 where
    invalid (ground truth beyond ``max_depth`` also set to 0, the 80 m cap), and ``mask`` (1, h, w),
    the evaluation crop. For ``split="train"`` with ``train_crop=(h, w)``: random crop, horizontal
    flip and brightness/gamma/colour jitter.
    """

    def __init__(self, root, split: str = "train", train_crop: tuple[int, int] | None = None,
                 max_depth: float = 80.0, eval_crop: str | None = "garg", limit: int | None = None, seed: int = 0):
        self.root = Path(root)
        if split not in SPLIT_FILES:
            raise ValueError(f"split must be one of {sorted(SPLIT_FILES)}, got {split!r}")
        list_file = self.root / SPLIT_FILES[split]
        if not list_file.exists():
            raise FileNotFoundError(KITTI_HELP.format(root=self.root, missing=f"no {list_file.name}"))
        samples, self.skipped = [], 0
        for line in list_file.read_text().splitlines():
            parts = line.split()
            if not parts:
                continue
            if len(parts) < 2 or parts[1] == "None":
                self.skipped += 1
                continue
            samples.append((parts[0], parts[1]))
        if limit is not None:
            samples = samples[:limit]
        if not samples:
            raise FileNotFoundError(KITTI_HELP.format(root=self.root, missing=f"{list_file.name} lists no samples"))
        first = self.root / "raw" / samples[0][0]
        if not first.exists():
            raise FileNotFoundError(KITTI_HELP.format(root=self.root, missing=f"missing {first}"))
        self.samples, self.split, self.train_crop = samples, split, train_crop
        self.max_depth, self.eval_crop = float(max_depth), eval_crop
        self.rng = np.random.default_rng(seed)

    def __len__(self):
        return len(self.samples)

    def load(self, index: int):
        """Full-frame (image uint8 HxWx3, depth float metres HxW) of sample ``index``, uncropped."""
        rgb, dep = self.samples[index]
        image = np.asarray(Image.open(self.root / "raw" / rgb).convert("RGB"))
        depth = read_depth_png(self.root / "depth" / dep)
        if depth.shape != image.shape[:2]:
            raise ValueError(f"sample {rgb}: image {image.shape[:2]} and depth {depth.shape} differ in size")
        return image, depth

    def __getitem__(self, index: int):
        image, depth = self.load(index)
        H, W = depth.shape
        mask = eval_crop_mask(H, W, self.eval_crop)
        t, l, h, w = bottom_center_crop_box(H, W)
        image, depth, mask = image[t:t + h, l:l + w], depth[t:t + h, l:l + w], mask[t:t + h, l:l + w]
        image = image.astype(np.float32) / 255.0
        depth = np.where(depth <= self.max_depth, depth, 0.0).astype(np.float32)  # the 80 m cap
        if self.split == "train" and self.train_crop is not None:
            ch, cw = self.train_crop
            if ch > h or cw > w:
                raise ValueError(f"train_crop {self.train_crop} exceeds the {h}x{w} image")
            y, x = self.rng.integers(0, h - ch + 1), self.rng.integers(0, w - cw + 1)
            image, depth, mask = image[y:y + ch, x:x + cw], depth[y:y + ch, x:x + cw], mask[y:y + ch, x:x + cw]
            if self.rng.random() < 0.5:
                image, depth, mask = image[:, ::-1], depth[:, ::-1], mask[:, ::-1]
            gamma, bright = self.rng.uniform(0.9, 1.1), self.rng.uniform(0.9, 1.1)
            colour = self.rng.uniform(0.9, 1.1, size=3).astype(np.float32)
            image = np.clip(image ** gamma * bright * colour, 0.0, 1.0)
        return dict(image=torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))),
                    depth=torch.from_numpy(np.ascontiguousarray(depth))[None],
                    mask=torch.from_numpy(np.ascontiguousarray(mask))[None])


# ----------------------------------------------------------------------------------------
# Synthetic driving scenes
# ----------------------------------------------------------------------------------------
@np.errstate(divide="ignore", invalid="ignore")
def render_scene(height: int, width: int, rng: np.random.Generator, cam_height: float = 1.65):
    """One driving-like scene: returns (image uint8 HxWx3, dense depth float32 HxW, inf = sky).

    Pinhole camera with KITTI's proportions (focal 0.58 W, principal row 0.46 H) 1.65 m above a
    flat road. Surfaces: the ground plane (road with dashed lane markings, pavements), walls
    parallel to the road on both sides with gaps, and box-shaped vehicles standing on the road.
    Colours fade toward a haze colour with distance, as in real outdoor images.
    """
    f, cx, cy = 0.58 * width, width / 2.0, 0.46 * height
    u = np.arange(width, dtype=np.float64) + 0.5
    v = np.arange(height, dtype=np.float64) + 0.5
    U, V = np.meshgrid((u - cx) / f, (v - cy) / f)  # ray directions x/z, y/z
    depth = np.full((height, width), np.inf)
    colour = np.zeros((height, width, 3))
    tex = rng.normal(0.0, 1.0, size=(height, width))

    # ground: y = cam_height
    zg = np.where(V > 1e-6, cam_height / V, np.inf)
    xg = U * zg
    road_half = rng.uniform(3.5, 6.0)
    lane = rng.uniform(-1.0, 1.0)
    road = np.abs(xg) < road_half
    grey = rng.uniform(0.28, 0.42)
    ground = np.where(road[..., None], [grey, grey, grey * 1.03], [0.55, 0.52, 0.47])
    marking = road & (np.abs(xg - lane) < 0.08) & (np.mod(zg, 6.0) < 3.0)
    edge = np.abs(np.abs(xg) - road_half) < 0.1
    ground = np.where((marking | edge)[..., None], [0.85, 0.85, 0.8], ground)
    ground = ground + 0.03 * tex[..., None]
    hit = np.isfinite(zg)
    depth[hit], colour[hit] = zg[hit], ground[hit]

    # walls at x = +-x_w, between z0 and z1, height hw
    for side in (-1.0, 1.0):
        x_w = side * (road_half + rng.uniform(1.5, 5.0))
        base = rng.uniform(0.3, 0.8, size=3)
        z = 2.0
        while z < 150.0:
            length, gap = rng.uniform(8.0, 40.0), rng.uniform(0.0, 12.0)
            hw = rng.uniform(3.0, 15.0)
            tint = base * rng.uniform(0.7, 1.2, size=3)
            zw = np.where(U * side > 1e-6, x_w / U, np.inf)
            yw = V * zw  # downward height coordinate at the hit point
            m = (zw >= z) & (zw < z + length) & (yw <= cam_height) & (yw >= cam_height - hw) & (zw < depth)
            windows = (np.mod(zw, 3.0) < 1.6) & (np.mod(yw, 3.0) < 1.5)
            c = np.clip(tint * np.where(windows, 0.6, 1.0)[..., None] + 0.04 * tex[..., None], 0, 1)
            depth[m], colour[m] = zw[m], c[m]
            z += length + gap

    # vehicles: fronto-parallel boxes standing on the road (front face and one side face)
    for _ in range(rng.integers(2, 7)):
        zb, xb = rng.uniform(5.0, 60.0), rng.uniform(-road_half + 1.0, road_half - 1.0)
        bw, bh, bl = rng.uniform(1.6, 2.2), rng.uniform(1.3, 2.8), rng.uniform(3.5, 6.0)
        body = rng.uniform(0.05, 0.95, size=3)
        yb = V * zb
        front = (np.abs(U * zb - xb) <= bw / 2) & (yb <= cam_height) & (yb >= cam_height - bh) & (zb < depth)
        shade = np.where((yb > cam_height - 0.35 * bh), 0.45, 1.0)[..., None]
        depth[front] = zb
        colour[front] = np.clip(body * shade + 0.03 * tex[..., None], 0, 1)[front]
        # the side face nearer the image centre line
        xs = xb - np.sign(xb) * bw / 2 if abs(xb) > bw / 2 else None
        if xs is not None:
            zs = np.where(np.abs(U) > 1e-6, xs / U, np.inf)
            ys = V * zs
            side = (zs > zb) & (zs <= zb + bl) & (ys <= cam_height) & (ys >= cam_height - bh) & (zs < depth)
            depth[side] = zs[side]
            colour[side] = np.clip(0.7 * body * np.where(ys > cam_height - 0.35 * bh, 0.45, 1.0)[..., None], 0, 1)[side]

    # sky and haze
    sky = np.isinf(depth)
    horizon = np.clip(1.0 - (cy - v[:, None]) / max(cy, 1.0), 0, 1)
    sky_col = np.stack([0.45 + 0.4 * horizon, 0.6 + 0.3 * horizon, np.full_like(horizon, 0.95)], -1)
    sky_col = np.broadcast_to(sky_col, (height, width, 3))
    haze = np.array([0.75, 0.8, 0.85])
    fog = np.where(sky, 0.0, 1.0 - np.exp(-np.where(sky, 0.0, depth) / 120.0))[..., None]
    colour = np.where(sky[..., None], sky_col, colour * (1 - fog) + haze * fog)
    image = np.clip(colour + rng.normal(0, 0.01, size=colour.shape), 0, 1)
    return (image * 255 + 0.5).astype(np.uint8), depth.astype(np.float32)


def lidar_sample(depth: np.ndarray, rng: np.random.Generator, density: float = 0.3, top: float = 0.3,
                 max_range: float = 120.0) -> np.ndarray:
    """Sparse LiDAR-like ground truth from a dense depth map: no returns from the sky, beyond
    ``max_range`` metres or in the top ``top`` of the frame; elsewhere a random ``density`` of pixels."""
    h = depth.shape[0]
    keep = rng.random(depth.shape) < density
    keep[: int(top * h)] = False
    keep &= np.isfinite(depth) & (depth < max_range)
    return np.where(keep, depth, 0.0).astype(np.float32)


def write_synthetic_kitti(root, n_train: int = 64, n_test: int = 16, size: tuple[int, int] = (72, 240),
                          seed: int = 0, frames_per_drive: int = 8, density: float = 0.3) -> Path:
    """Write synthetic scenes in the KITTI on-disk format under ``root``; returns ``root``.

    Idempotent: a ``synthetic.json`` stamp records the configuration, and a directory already
    holding the same configuration is left as it is. Train and test use disjoint drives.
    Dense depth maps are also kept (``dense/``, float16 ``.npy``) for figures.
    """
    root = Path(root)
    config = dict(n_train=n_train, n_test=n_test, size=list(size), seed=seed,
                  frames_per_drive=frames_per_drive, density=density, version=1)
    stamp = root / "synthetic.json"
    if stamp.exists() and json.loads(stamp.read_text()) == config:
        return root
    rng = np.random.default_rng(seed)
    height, width = size
    focal = 0.58 * width
    drive = 0
    for split, n in (("train", n_train), ("test", n_test)):
        lines = []
        for i in range(n):
            if i % frames_per_drive == 0:
                drive += 1
            name = f"2011_09_26_drive_{drive:04d}_sync"
            frame = f"{i % frames_per_drive:010d}.png"
            rgb_rel = f"2011_09_26/{name}/image_02/data/{frame}"
            dep_rel = f"{name}/proj_depth/groundtruth/image_02/{frame}"
            image, dense = render_scene(height, width, rng)
            for rel, base in ((rgb_rel, "raw"), (dep_rel, "depth")):
                (root / base / rel).parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(image).save(root / "raw" / rgb_rel)
            write_depth_png(root / "depth" / dep_rel, lidar_sample(dense, rng, density))
            dense_path = root / "dense" / dep_rel.replace(".png", ".npy")
            dense_path.parent.mkdir(parents=True, exist_ok=True)
            np.save(dense_path, np.where(np.isfinite(dense), dense, 0).astype(np.float16))
            lines.append(f"{rgb_rel} {dep_rel} {focal:.4f}")
        (root / SPLIT_FILES[split]).write_text("\n".join(lines) + "\n")
    stamp.write_text(json.dumps(config))
    return root
