"""Monocular depth on KITTI: LapDepth, Quadratic-LapDepth, the data, the metrics, the protocol.

- :mod:`.model`: :class:`LapDepth` (timm encoder + Laplacian-pyramid residual decoder) and
  :func:`quadratic_lapdepth`;
- :mod:`.data`: the KITTI on-disk format, Eigen split, crops, and synthetic scenes;
- :mod:`.metrics`: AbsRel, SqRel, RMSE, RMSE log, delta < 1.25^k over valid pixels;
- :mod:`.train`: ``PROTOCOLS`` (smoke / cpu / full), training, evaluation, cached runs.
"""
from .data import KittiDepth, eval_crop_mask, read_depth_png, render_scene, write_depth_png, write_synthetic_kitti
from .metrics import METRICS, depth_metrics, mean_metrics
from .model import LapDepth, laplacian_pyramid, quadratic_lapdepth
from .train import KINDS, PAPER, PROTOCOLS, LAPDEPTH_OFFICIAL, build_model, evaluate, protocol, run, train

__all__ = ["KittiDepth", "eval_crop_mask", "read_depth_png", "render_scene", "write_depth_png",
           "write_synthetic_kitti", "METRICS", "depth_metrics", "mean_metrics", "LapDepth",
           "laplacian_pyramid", "quadratic_lapdepth", "KINDS", "PAPER", "PROTOCOLS", "LAPDEPTH_OFFICIAL",
           "build_model", "evaluate", "protocol", "run", "train"]
