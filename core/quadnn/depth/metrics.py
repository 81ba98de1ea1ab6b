"""The standard monocular-depth error measures, over valid pixels only.

For one image, with ground truth ``g`` and prediction ``p`` restricted to the valid pixels
(``min_depth < g < max_depth`` and inside the evaluation mask), ``p`` clipped to
``[min_depth, max_depth]``:

- AbsRel = mean(|p - g| / g)          - SqRel = mean((p - g)^2 / g)
- RMSE = sqrt(mean((p - g)^2))        - RMSE log = sqrt(mean((ln p - ln g)^2))
- delta_k = fraction of pixels with max(p/g, g/p) < 1.25^k, k = 1, 2, 3

A data set's figure is the mean of the per-image figures (as the KITTI Eigen-split
evaluation scripts compute it).
"""
from __future__ import annotations

import math

import torch

__all__ = ["METRICS", "LOWER_IS_BETTER", "depth_metrics", "mean_metrics", "valid_mask"]

METRICS = ("abs_rel", "sq_rel", "rmse", "rmse_log", "d1", "d2", "d3")
LOWER_IS_BETTER = {"abs_rel": True, "sq_rel": True, "rmse": True, "rmse_log": True,
                   "d1": False, "d2": False, "d3": False}


def valid_mask(gt: torch.Tensor, mask: torch.Tensor | None = None, min_depth: float = 1e-3,
               max_depth: float = 80.0) -> torch.Tensor:
    valid = (gt > min_depth) & (gt < max_depth)
    return valid if mask is None else valid & mask.bool()


def depth_metrics(pred: torch.Tensor, gt: torch.Tensor, mask: torch.Tensor | None = None,
                  min_depth: float = 1e-3, max_depth: float = 80.0) -> dict[str, float]:
    """Metrics of one image (any shape; ``pred``, ``gt`` and ``mask`` broadcastable to each other).

    Returns NaN for every metric when the image has no valid pixel.
    """
    pred, gt = torch.as_tensor(pred, dtype=torch.float64), torch.as_tensor(gt, dtype=torch.float64)
    if pred.shape != gt.shape:
        raise ValueError(f"prediction {tuple(pred.shape)} and ground truth {tuple(gt.shape)} differ in shape")
    valid = valid_mask(gt, None if mask is None else torch.as_tensor(mask).expand_as(gt), min_depth, max_depth)
    if not valid.any():
        return {k: math.nan for k in METRICS}
    g = gt[valid]
    p = pred[valid].clamp(min_depth, max_depth)
    ratio = torch.maximum(p / g, g / p)
    err = p - g
    return dict(
        abs_rel=(err.abs() / g).mean().item(),
        sq_rel=(err ** 2 / g).mean().item(),
        rmse=err.pow(2).mean().sqrt().item(),
        rmse_log=(p.log() - g.log()).pow(2).mean().sqrt().item(),
        d1=(ratio < 1.25).double().mean().item(),
        d2=(ratio < 1.25 ** 2).double().mean().item(),
        d3=(ratio < 1.25 ** 3).double().mean().item(),
    )


def mean_metrics(per_image: list[dict[str, float]]) -> dict[str, float]:
    """Mean over images of per-image metrics, skipping images without valid pixels."""
    rows = [m for m in per_image if not math.isnan(m["abs_rel"])]
    if not rows:
        return {k: math.nan for k in METRICS}
    return {k: sum(m[k] for m in rows) / len(rows) for k in METRICS}
