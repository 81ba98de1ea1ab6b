"""Monocular depth on KITTI: a compact LapDepth, Quadratic-LapDepth, metrics, KITTI-format I/O.

The paper's KITTI experiment (its Sec. V, "KITTI"): LapDepth (Song et al. 2021; a ResNeXt-101
encoder and a Laplacian-pyramid residual decoder) against Quadratic-LapDepth, the same network
whose encoder neurons are quadratic. Trained from scratch for 50 epochs with AdamW (0.9, 0.999),
batch 16, weight decay 5e-4 on the encoder and 0 on the decoder, polynomial lr decay (power 0.5)
from 1e-4 to 1e-5; the Eigen split (23,488 train / 697 test images).

- :class:`LapDepth`: a timm encoder (``features_only=True``; name a parameter) and a decoder that
  predicts a coarse depth at the lowest resolution and refines it, level by level, with predicted
  residuals; each level also sees the Laplacian band of the input image at its scale. Output
  ``sigmoid(logit) * max_depth``. This is a compact re-implementation, not the authors' code.
- :func:`quadratic_lapdepth`: the same with the encoder through :func:`quadnn.quadratize`
  (ReLinear-initialised; weights copied from a conventional model when given).
- :func:`depth_metrics`: AbsRel, SqRel, RMSE, RMSE log, delta < 1.25^k over valid pixels.
- KITTI on-disk format: 16-bit PNG depth in metres * 256 (0 = no measurement), split files with
  one ``<rgb path> <depth path> [focal]`` line per image (paths relative to the data directory),
  the Garg evaluation crop and the 80 m cap (:class:`KittiSplit`). The Eigen split's drives come
  in several image sizes (:data:`KITTI_SIZES`); LapDepth's protocol cuts every image to 352 x 1216
  (the bottom rows, centred: the KB crop) and trains on random 352 x 704 crops of that.
- :func:`write_synthetic_kitti`: driving-like scenes (ground plane, boxes, sky) with known depth
  and a sparse, scan-line LiDAR-like ground-truth mask, written in that format with split files.
- ``PROTOCOLS`` and :func:`runs` (smoke / cpu: a few small synthetic images, resnet18, 1 thread):
  the section's runs as configurations of the training engine (:mod:`quadnn_paper.engine`, task
  ``"depth"``), which trains them with AdamW, polynomial decay and the scale-invariant log loss.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from quadnn.convert import quadratize
from quadnn_paper.common import published
from quadnn_paper.common.profiles import protocol_of

__all__ = ["PROTOCOLS", "PAPER", "METRICS", "MODELS", "LABELS", "DATA_DEFAULTS", "LapDepth", "quadratic_lapdepth",
           "build_model", "depth_metrics", "read_depth_png", "write_depth_png", "garg_crop_mask", "KittiSplit",
           "write_synthetic_kitti", "silog_loss", "protocol", "runs", "KITTI_SIZES", "NAME", "summary"]

METRICS = ("abs_rel", "sq_rel", "rmse", "rmse_log", "d1", "d2", "d3")
# (height, width) of the camera images in the Eigen split's drives (one size per calibration day).
KITTI_SIZES = ((375, 1242), (370, 1224), (374, 1238), (376, 1241))

# The paper's KITTI table: only SqRel and RMSE are given. (It prints RMSE 0.446 for LapDepth;
# LapDepth's own paper reports 2.446 m, so the leading digit seems to have been lost.)
PAPER = published.KITTI

# full = the paper's protocol (LapDepth's KB crop 352x1216, random 352x704 training crops), in
# float32 (amp=False: the paper's runs; with amp on the loss would still be computed in float32).
# smoke / cpu: synthetic scenes at a small size, a resnet18 encoder.
PROTOCOLS = {
    "smoke": dict(data="synthetic", encoder="resnet18", n_train=8, n_test=4, height=64, width=192,
                  epochs=2, batch_size=4, optimizer="AdamW", betas=(0.9, 0.999), lr=1e-4, end_lr=1e-5,
                  lr_power=0.5, weight_decay_encoder=5e-4, weight_decay_decoder=0.0, lr_g=1e-5, lr_b=1e-5,
                  max_depth=80.0, threads=1, seeds=[0]),
    "cpu": dict(data="synthetic", encoder="resnet18", n_train=32, n_test=8, height=64, width=192,
                epochs=4, batch_size=4, optimizer="AdamW", betas=(0.9, 0.999), lr=1e-4, end_lr=1e-5,
                lr_power=0.5, weight_decay_encoder=5e-4, weight_decay_decoder=0.0, lr_g=1e-5, lr_b=1e-5,
                max_depth=80.0, threads=1, seeds=[0]),
    "full": dict(data="kitti", encoder="resnext101_32x8d", n_train=23488, n_test=697, height=352, width=1216,
                 train_height=352, train_width=704, epochs=50, batch_size=16, optimizer="AdamW", betas=(0.9, 0.999),
                 lr=1e-4, end_lr=1e-5,
                 lr_power=0.5, weight_decay_encoder=5e-4, weight_decay_decoder=0.0, lr_g=1e-5, lr_b=1e-5,
                 max_depth=80.0, threads=None, seeds=[0], amp=False),
}


NAME = "kitti_lapdepth"


def protocol(profile: str, tiny: bool = False) -> dict:
    """A copy of the protocol of ``profile`` (TINY=1: the full protocol; :func:`runs` caps its runs)."""
    return protocol_of(PROTOCOLS, profile, tiny)


# -- model -----------------------------------------------------------------------------------------
def _conv(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class LapDepth(nn.Module):
    """timm encoder + Laplacian-pyramid residual decoder; returns depth (N, 1, H, W) in (0, max_depth)."""

    def __init__(self, encoder: str = "resnext101_32x8d", max_depth: float = 80.0, decoder_width: int = 128):
        super().__init__()
        import timm

        self.encoder_name = encoder
        self.max_depth = float(max_depth)
        self.encoder = timm.create_model(encoder, features_only=True, pretrained=False)
        chs = self.encoder.feature_info.channels()
        self.reductions = self.encoder.feature_info.reduction()
        w = int(decoder_width)
        self.top = nn.Sequential(_conv(chs[-1], w), nn.Conv2d(w, 1, 3, padding=1))  # coarse depth logit
        # one refinement block per level, deep to shallow: lateral feature + upsampled decoder
        # state + upsampled depth logit + the image's Laplacian band at that scale -> residual
        self.lateral = nn.ModuleList(nn.Conv2d(c, w, 1) for c in chs[:-1][::-1])
        self.refine = nn.ModuleList(_conv(w + w + 1 + 3, w) for _ in chs[:-1])
        self.residual = nn.ModuleList(nn.Conv2d(w, 1, 3, padding=1) for _ in chs[:-1])
        self.top_state = _conv(chs[-1], w)
        for m in self.modules():  # Kaiming initialisation of the decoder, as the paper states
            if isinstance(m, nn.Conv2d) and not any(m is e for e in self.encoder.modules()):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    @staticmethod
    def _laplacian(image: torch.Tensor, size) -> torch.Tensor:
        """Band-pass of ``image`` at ``size``: the image at that size minus its blurred (half-size) version."""
        x = F.interpolate(image, size=size, mode="bilinear", align_corners=False)
        low = F.interpolate(F.avg_pool2d(x, 2, ceil_mode=True), size=size, mode="bilinear", align_corners=False)
        return x - low

    def encoder_parameters(self):
        return self.encoder.parameters()

    def decoder_parameters(self):
        enc = {id(p) for p in self.encoder.parameters()}
        return [p for p in self.parameters() if id(p) not in enc]

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        feats = self.encoder(image)
        logit = self.top(feats[-1])
        state = self.top_state(feats[-1])
        for lat, ref, res, f in zip(self.lateral, self.refine, self.residual, feats[:-1][::-1]):
            size = f.shape[-2:]
            logit = F.interpolate(logit, size=size, mode="bilinear", align_corners=False)
            state = F.interpolate(state, size=size, mode="bilinear", align_corners=False)
            state = ref(torch.cat([lat(f), state, logit, self._laplacian(image, size)], 1))
            logit = logit + res(state)  # refine the upsampled depth by a predicted residual
        logit = F.interpolate(logit, size=image.shape[-2:], mode="bilinear", align_corners=False)
        return torch.sigmoid(logit) * self.max_depth


def quadratic_lapdepth(encoder: str = "resnext101_32x8d", max_depth: float = 80.0, decoder_width: int = 128,
                       conventional: LapDepth | None = None, neuron: str = "full") -> LapDepth:
    """LapDepth whose encoder's convolutions are quadratic (ReLinear-initialised).

    With ``conventional`` given, all its weights (encoder and decoder) are copied first, so the
    returned model computes what ``conventional`` computes.
    """
    model = LapDepth(encoder, max_depth, decoder_width)
    if conventional is not None:
        model.load_state_dict(conventional.state_dict())
    quadratize(model.encoder, neuron=neuron)
    return model


# -- metrics ---------------------------------------------------------------------------------------
def depth_metrics(pred, gt, min_depth: float = 1e-3, max_depth: float = 80.0, mask=None) -> dict:
    """AbsRel, SqRel, RMSE, RMSE log, d1/d2/d3 over pixels with ``min_depth < gt < max_depth`` (and ``mask``).

    The prediction is clipped to ``[min_depth, max_depth]``. All pixels of the batch are pooled.
    """
    pred = torch.as_tensor(pred, dtype=torch.float64)
    gt = torch.as_tensor(gt, dtype=torch.float64)
    valid = (gt > min_depth) & (gt < max_depth)
    if mask is not None:
        valid &= torch.as_tensor(mask, dtype=torch.bool)
    if not valid.any():
        raise ValueError("depth_metrics: no valid ground-truth pixel")
    p = pred[valid].clamp(min_depth, max_depth)
    g = gt[valid]
    ratio = torch.maximum(p / g, g / p)
    out = dict(abs_rel=((p - g).abs() / g).mean(), sq_rel=((p - g) ** 2 / g).mean(),
               rmse=((p - g) ** 2).mean().sqrt(), rmse_log=((p.log() - g.log()) ** 2).mean().sqrt(),
               d1=(ratio < 1.25).double().mean(), d2=(ratio < 1.25 ** 2).double().mean(),
               d3=(ratio < 1.25 ** 3).double().mean())
    return {k: float(v) for k, v in out.items()}


# -- KITTI on-disk format --------------------------------------------------------------------------
def write_depth_png(path, depth: np.ndarray) -> None:
    """Depth in metres -> 16-bit PNG of ``round(depth * 256)`` (0 = no measurement; at most 255.99 m)."""
    from PIL import Image

    d = np.clip(np.round(np.asarray(depth, dtype=np.float64) * 256.0), 0, 65535).astype(np.uint16)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(d).save(path)


def read_depth_png(path) -> np.ndarray:
    """16-bit KITTI depth PNG -> float32 metres (0 where there is no measurement)."""
    from PIL import Image

    img = Image.open(path)
    if img.mode not in ("I;16", "I;16B", "I"):
        raise ValueError(f"{path}: PNG mode {img.mode}; KITTI depth maps are 16-bit greyscale")
    return np.asarray(img, dtype=np.float32) / 256.0


def garg_crop_mask(height: int, width: int) -> np.ndarray:
    """The Garg et al. evaluation crop used on the Eigen split, as a boolean mask."""
    m = np.zeros((height, width), dtype=bool)
    m[int(0.40810811 * height):int(0.99189189 * height), int(0.03594771 * width):int(0.96405229 * width)] = True
    return m


_WHERE = ("Put KITTI under data/kitti/: the raw images (e.g. data/kitti/2011_09_26/"
          "2011_09_26_drive_0002_sync/image_02/data/*.png), the projected LiDAR ground truth as 16-bit "
          "PNGs, and the Eigen split lists data/kitti/splits/eigen_train_files.txt and "
          "eigen_test_files.txt with one '<rgb path> <depth path> [focal]' line per image, paths "
          "relative to data/kitti/. Offline, write synthetic scenes with quadnn_paper.depth.write_synthetic_kitti.")


class KittiSplit(torch.utils.data.Dataset):
    """Images of one split file: ``(rgb (3,H,W) in [0,1], depth (1,H,W) metres, eval mask (1,H,W))``.

    Ground truth at or beyond ``max_depth`` (the 80 m cap) or at most ``min_depth`` is set to 0
    (invalid); the mask is the Garg crop (``garg=True``, placed on the full image) and the valid
    pixels. ``crop=(h, w)`` cuts every image to its bottom ``h`` rows and centred ``w`` columns (the
    KB crop), so images of different sizes batch together.
    """

    def __init__(self, root, split_file, max_depth: float = 80.0, min_depth: float = 1e-3, garg: bool = True,
                 limit: int | None = None, crop: tuple[int, int] | None = None):
        self.root = Path(root)
        split_file = Path(split_file)
        if not split_file.is_absolute() and not split_file.exists():
            split_file = self.root / split_file
        if not self.root.is_dir():
            raise FileNotFoundError(f"no KITTI data directory at {self.root}. {_WHERE}")
        if not split_file.is_file():
            raise FileNotFoundError(f"no split file at {split_file}. {_WHERE}")
        lines = [ln.split() for ln in split_file.read_text().splitlines() if ln.strip()]
        self.items = [(ln[0], ln[1]) for ln in lines if len(ln) >= 2 and ln[1] != "None"]
        if limit is not None:
            self.items = self.items[:limit]
        self.max_depth, self.min_depth, self.garg = float(max_depth), float(min_depth), garg
        self.crop = tuple(crop) if crop is not None else None

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i):
        from PIL import Image

        rgb_path, depth_path = (self.root / p for p in self.items[i])
        for p in (rgb_path, depth_path):
            if not p.is_file():
                raise FileNotFoundError(f"{p} (listed in the split file) does not exist. {_WHERE}")
        rgb = np.asarray(Image.open(rgb_path).convert("RGB"), dtype=np.float32) / 255.0
        depth = read_depth_png(depth_path)
        depth[(depth >= self.max_depth) | (depth <= self.min_depth)] = 0.0
        mask = depth > 0
        if self.garg:
            mask &= garg_crop_mask(*depth.shape)
        if rgb.shape[:2] != depth.shape:
            raise ValueError(f"{rgb_path} is {rgb.shape[0]}x{rgb.shape[1]} but its depth map {depth_path} is "
                             f"{depth.shape[0]}x{depth.shape[1]}")
        if self.crop is not None:
            (h, w), (H, W) = self.crop, depth.shape
            if h > H or w > W:
                raise ValueError(f"{rgb_path} is {H}x{W}, smaller than the crop {h}x{w}")
            top, left = H - h, (W - w) // 2
            rgb, depth, mask = (a[top:top + h, left:left + w] for a in (rgb, depth, mask))
        return (torch.from_numpy(rgb).permute(2, 0, 1).contiguous(), torch.from_numpy(depth.copy())[None],
                torch.from_numpy(mask.copy())[None])


# -- synthetic scenes ------------------------------------------------------------------------------
def render_scene(rng: np.random.Generator, height: int = 64, width: int = 192, lidar_rows: int = 2,
                 lidar_keep: float = 0.6):
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
    stripes = (np.floor(z / 2.0) % 2)  # 2 m bands on the road: a depth cue
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
        rgb[inside] = (color[None] * shade[inside][:, None])
    rgb = np.clip(rgb + rng.normal(0, 0.02, rgb.shape), 0, 1)
    sparse = np.where(np.isfinite(depth), depth, 0.0)
    rows = (np.arange(height) % lidar_rows == 0)[:, None]
    sparse = sparse * rows * (rng.random((height, width)) < lidar_keep)
    return (rgb * 255).round().astype(np.uint8), depth, sparse


def write_synthetic_kitti(root, n_train: int = 16, n_test: int = 4, height: int = 64, width: int = 192,
                          seed: int = 0, sizes=None) -> Path:
    """Synthetic scenes in the KITTI layout under ``root``; returns ``root``.

    Every image is ``height`` x ``width``, or with ``sizes`` (a list of ``(height, width)``) the
    images cycle through those sizes, as the real split's drives do (:data:`KITTI_SIZES`).

    ``root/synthetic/drive_{train,test}/image_02/data/NNNNNNNNNN.png`` (RGB),
    ``root/synthetic/drive_*/proj_depth/groundtruth/image_02/NNNNNNNNNN.png`` (16-bit depth * 256,
    sparse) and ``root/splits/eigen_{train,test}_files.txt``. Deterministic in ``seed``; an
    existing tree is reused when it was last written with the same settings.
    """
    from PIL import Image

    root = Path(root)
    # One stamp naming the settings of the last write: the split files are shared, so a tree
    # written later with other settings (another profile) must not pass for this one.
    spec = f"{n_train} {n_test} {height} {width} {seed}" + (f" {[tuple(s) for s in sizes]}" if sizes else "") + "\n"
    stamp = root / "synthetic" / "spec.txt"
    if stamp.exists() and stamp.read_text() == spec:
        return root
    rng = np.random.default_rng(seed)
    sizes = [tuple(s) for s in sizes] if sizes else [(height, width)]
    for split, n in (("train", n_train), ("test", n_test)):
        lines = []
        for i in range(n):
            height, width = sizes[i % len(sizes)]
            f = 0.9 * width
            rgb, _, sparse = render_scene(rng, height, width)
            drive = f"synthetic/drive_{split}"
            rgb_rel = f"{drive}/image_02/data/{i:010d}.png"
            dep_rel = f"{drive}/proj_depth/groundtruth/image_02/{i:010d}.png"
            (root / rgb_rel).parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(rgb).save(root / rgb_rel)
            write_depth_png(root / dep_rel, sparse)
            lines.append(f"{rgb_rel} {dep_rel} {f:.4f}")
        (root / "splits").mkdir(parents=True, exist_ok=True)
        (root / "splits" / f"eigen_{split}_files.txt").write_text("\n".join(lines) + "\n")
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(spec)
    return root


# -- models and runs -------------------------------------------------------------------------------
# What the engine's depth task reads from a run's ``task_kwargs`` (with these defaults).
# crop: every image cut to (h, w) (KB crop); train_crop: random (h, w) training crops of that;
# sizes: the synthetic images' mix of sizes (None: all height x width).
DATA_DEFAULTS = dict(n_train=16, n_test=4, height=64, width=192, max_depth=80.0, weight_decay_decoder=0.0,
                     train_split="splits/eigen_train_files.txt", test_split="splits/eigen_test_files.txt",
                     crop=None, train_crop=None, sizes=None)
MODELS = ("lapdepth", "quadratic_lapdepth")
# Display names of the two models in the paper's table.
LABELS = {"lapdepth": "LapDepth", "quadratic_lapdepth": "Quadratic-LapDepth"}


def build_model(name: str, encoder: str = "resnext101_32x8d", max_depth: float = 80.0,
                decoder_width: int = 128, neuron: str = "full") -> LapDepth:
    """``"lapdepth"`` or ``"quadratic_lapdepth"`` (the engine's depth task builds models here).

    Built under the same seed, both start from the same conventional weights: the quadratic one
    draws LapDepth's weights first and then turns its encoder quadratic (ReLinear-initialised).
    """
    if name == "lapdepth":
        return LapDepth(encoder, max_depth, decoder_width)
    if name == "quadratic_lapdepth":
        return quadratic_lapdepth(encoder, max_depth, decoder_width, neuron=neuron)
    raise ValueError(f"depth model must be one of {MODELS}, got {name!r}")


def runs(profile: str, tiny: bool = False, data_dir: str | Path | None = None) -> list:
    """The runs of ``profile``: both models x seeds, as engine configurations.

    ``data_dir``: the KITTI tree (full; default ``data/kitti``) or where the synthetic scenes are
    written (smoke/cpu; default ``build/data/kitti_synthetic``).
    """
    from quadnn_paper.engine import RunConfig
    from quadnn_paper.common.paths import DATA, GENERATED

    P = protocol(profile, tiny)
    if data_dir is None:
        data_dir = DATA / "kitti" if P["data"] == "kitti" else GENERATED / "kitti_synthetic"
    task_kwargs = dict(n_train=P["n_train"], n_test=P["n_test"], height=P["height"], width=P["width"],
                       max_depth=P["max_depth"], weight_decay_decoder=P["weight_decay_decoder"])
    if P["data"] == "kitti":  # the real images, KB-cropped, random training crops
        task_kwargs = dict(max_depth=P["max_depth"], weight_decay_decoder=P["weight_decay_decoder"],
                           crop=[P["height"], P["width"]], train_crop=[P["train_height"], P["train_width"]])
    out = [RunConfig(task="depth", model=m, model_kwargs=dict(encoder=P["encoder"], max_depth=P["max_depth"]),
                      dataset=P["data"], task_kwargs=task_kwargs, epochs=P["epochs"], batch_size=P["batch_size"],
                      optimizer="adamw", lr=P["lr"], momentum=P["betas"][0], beta2=P["betas"][1],
                      weight_decay=P["weight_decay_encoder"], relinear="sg", lr_g=P["lr_g"], lr_b=P["lr_b"],
                      schedule="poly", end_lr=P["end_lr"], lr_power=P["lr_power"], seed=s,
                      data_dir=str(data_dir), threads=P["threads"], progress=False, split_seed=s,
                      amp=P.get("amp", False),
                      train_limit=P.get("train_limit", 0))
            for s in P["seeds"] for m in MODELS]
    if tiny:
        from quadnn_paper.sections._tiny import tiny_runs

        out = tiny_runs(out)
    return out


def silog_loss(pred, gt, mask, lam: float = 0.85) -> torch.Tensor:
    """Scale-invariant log loss (Eigen et al.) over the masked pixels."""
    d = torch.log(pred[mask].clamp_min(1e-3)) - torch.log(gt[mask])
    return torch.sqrt((d ** 2).mean() - lam * d.mean() ** 2 + 1e-8) * 10.0




# -- the section's numbers ---------------------------------------------------------------------------
METRIC_LABELS = dict(abs_rel="AbsRel", sq_rel="SqRel", rmse="RMSE", rmse_log="RMSE log", d1="d<1.25", d2="d<1.25^2",
                     d3="d<1.25^3")
METRIC_TEX = dict(abs_rel="AbsRel", sq_rel="SqRel", rmse="RMSE", rmse_log="RMSE$_{\\log}$", d1="$\\delta_1$",
                  d2="$\\delta_2$", d3="$\\delta_3$")


def summary(results: dict, profile: str, tiny: bool = False, data_dir: str | Path | None = None,
            seed: int | None = None) -> dict:
    """Per model (display name) its result or None (pending), the metrics table's rows (the paper's
    and ours) and the variables the text quotes. ``seed``: only that seed's runs (default: all)."""
    from quadnn_paper.common.cells import Cell

    P = protocol(profile, tiny)
    configs = [c for c in runs(profile, tiny, data_dir) if seed is None or c.seed == seed]
    by_name = {LABELS[c.model]: results.get(c.run_id) for c in configs}

    def cell(v):
        return Cell(v, decimals=3) if isinstance(v, float) else ("pending" if v is None else v)

    rows = [[name, "paper"] + [cell(vals[k]) if k in vals else "--" for k in METRICS] for name, vals in PAPER.items()]
    rows += [[name, f"ours ({profile})"] + [cell(r[k]) if r is not None else "pending" for k in METRICS]
             for name, r in by_name.items()]
    lap, quad = by_name["LapDepth"], by_name["Quadratic-LapDepth"]

    def shown(r, key, spec, scale=1.0, unit=""):
        return "pending" if r is None or r[key] is None else format(r[key] / scale, spec) + unit

    var = dict(Encoder=P["encoder"], Epochs=P["epochs"], BatchSize=P["batch_size"], Height=P["height"], Width=P["width"],
               ParamsLap=shown(lap, "params", ".1f", 1e6, "M"), ParamsQuad=shown(quad, "params", ".1f", 1e6, "M"),
               SqRelLap=shown(lap, "sq_rel", ".3f"), SqRelQuad=shown(quad, "sq_rel", ".3f"),
               RmseLap=shown(lap, "rmse", ".3f"), RmseQuad=shown(quad, "rmse", ".3f"),
               ComputeMinutes=f"{sum(r['epoch_time'] * r['epochs_run'] for r in (lap, quad) if r) / 60:.1f}")
    return dict(protocol=P, configs=configs, results=by_name, rows=rows, variables=var)
