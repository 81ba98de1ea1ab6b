"""LapDepth and Quadratic-LapDepth, the loss the depth task trains them with, and the metrics.

- :class:`LapDepth`: a timm encoder (``features_only=True``; name a parameter) and a decoder that
  predicts a coarse depth at the lowest resolution and refines it, level by level, with predicted
  residuals; each level also sees the Laplacian band of the input image at its scale. Output
  ``sigmoid(logit) * max_depth``. A compact re-implementation of Song et al. (2021), not the
  authors' code.
- :func:`quadratic_lapdepth`: the same with the encoder through :func:`quadnn.quadratize`.
- :func:`silog_loss`, :func:`depth_metrics` (AbsRel, SqRel, RMSE, RMSE log, delta < 1.25^k).
- :data:`DATA_DEFAULTS`: what the engine's depth task reads from a run's ``task_kwargs``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from quadnn.convert import quadratize

__all__ = [
    "METRICS",
    "MODELS",
    "DATA_DEFAULTS",
    "LapDepth",
    "quadratic_lapdepth",
    "build_model",
    "depth_metrics",
    "silog_loss",
]

METRICS = ("abs_rel", "sq_rel", "rmse", "rmse_log", "d1", "d2", "d3")

# -- the depth task's data and models -------------------------------------------------------------------------------
# What the engine's depth task reads from a run's ``task_kwargs`` (with these defaults).
# crop: every image cut to (h, w) (KB crop); train_crop: random (h, w) training crops of that;
# sizes: the synthetic images' mix of sizes (None: all height x width).
DATA_DEFAULTS = dict(
    n_train=16,
    n_test=4,
    height=64,
    width=192,
    max_depth=80.0,
    weight_decay_decoder=0.0,
    train_split="splits/eigen_train_files.txt",
    test_split="splits/eigen_test_files.txt",
    crop=None,
    train_crop=None,
    sizes=None,
)
MODELS = ("lapdepth", "quadratic_lapdepth")


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


def quadratic_lapdepth(
    encoder: str = "resnext101_32x8d",
    max_depth: float = 80.0,
    decoder_width: int = 128,
    conventional: LapDepth | None = None,
    neuron: str = "full",
) -> LapDepth:
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
    out = dict(
        abs_rel=((p - g).abs() / g).mean(),
        sq_rel=((p - g) ** 2 / g).mean(),
        rmse=((p - g) ** 2).mean().sqrt(),
        rmse_log=((p.log() - g.log()) ** 2).mean().sqrt(),
        d1=(ratio < 1.25).double().mean(),
        d2=(ratio < 1.25**2).double().mean(),
        d3=(ratio < 1.25**3).double().mean(),
    )
    return {k: float(v) for k, v in out.items()}


def build_model(
    name: str,
    encoder: str = "resnext101_32x8d",
    max_depth: float = 80.0,
    decoder_width: int = 128,
    neuron: str = "full",
) -> LapDepth:
    """``"lapdepth"`` or ``"quadratic_lapdepth"`` (the engine's depth task builds models here).

    Built under the same seed, both start from the same conventional weights: the quadratic one
    draws LapDepth's weights first and then turns its encoder quadratic (ReLinear-initialised).
    """
    if name == "lapdepth":
        return LapDepth(encoder, max_depth, decoder_width)
    if name == "quadratic_lapdepth":
        return quadratic_lapdepth(encoder, max_depth, decoder_width, neuron=neuron)
    raise ValueError(f"depth model must be one of {MODELS}, got {name!r}")


def silog_loss(pred, gt, mask, lam: float = 0.85) -> torch.Tensor:
    """Scale-invariant log loss (Eigen et al.) over the masked pixels."""
    d = torch.log(pred[mask].clamp_min(1e-3)) - torch.log(gt[mask])
    return torch.sqrt((d**2).mean() - lam * d.mean() ** 2 + 1e-8) * 10.0
