"""LapDepth (Song, Lim and Kim, 2021) and Quadratic-LapDepth, written from the LapDepth paper.

The network has three parts:

- an **encoder**: any timm backbone built with ``features_only=True`` whose five feature maps
  have strides 2, 4, 8, 16, 32 (the paper: ResNeXt101-32x8d, ImageNet-pretrained);
- a **context module** on the stride-32 features: parallel dilated 3x3 convolutions whose
  outputs are concatenated and fused (ASPP-like, for a large receptive field);
- a **Laplacian-pyramid residual decoder**. The input image is split into a Laplacian
  pyramid ``L_k = G_k - up(G_{k+1})`` (``G_k``: the image at stride ``2**k``). The coarsest level
  predicts a depth map ``D_5`` at stride 32; every finer level ``k`` (stride 16, 8, 4, 2, 1)
  sees the upsampled decoder features, the encoder's skip features at that stride, the image's
  Laplacian residual ``L_k`` and the upsampled coarser depth, and predicts a depth *residual*
  ``R_k``, so ``D_k = up(D_{k+1}) + R_k``. Depth is thus restored from coarse to fine.
  The decoder's convolutions are pre-activation blocks (GroupNorm, ELU, then a weight-
  standardised convolution), as the LapDepth paper proposes; they are Kaiming-initialised.

Depth is predicted as a fraction of ``max_depth`` (80 m on KITTI), kept positive by a smooth
floor (:func:`positive_depth`), and returned in metres.

:func:`quadratic_lapdepth` builds Quadratic-LapDepth: the same network whose *encoder* has
every convolution (and linear layer) replaced by quadratic neurons through
:func:`quadnn.quadratize`, ReLinear-initialised; given a conventional LapDepth it transfers
that model's weights, so the two compute the same function before training.
"""
from __future__ import annotations

import copy
from typing import Sequence

import timm
import torch
import torch.nn.functional as F
from torch import nn

from ..convert import quadratize
from ..relinear import transfer_weights_

__all__ = ["LapDepth", "WSConv2d", "positive_depth", "quadratic_lapdepth", "laplacian_pyramid", "DEFAULT_DECODER_CHANNELS"]

# Decoder widths at strides 32, 16, 8, 4, 2, 1 (the ResNeXt101 configuration).
DEFAULT_DECODER_CHANNELS = (512, 256, 128, 64, 32, 16)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class WSConv2d(nn.Conv2d):
    """Weight-standardised convolution: each filter is centred and scaled to unit variance
    before it is applied (Qiao et al.). Kaiming-initialised."""

    def __init__(self, *args, eps: float = 1e-5, **kwargs):
        self.eps = eps
        super().__init__(*args, **kwargs)

    def reset_parameters(self) -> None:
        nn.init.kaiming_normal_(self.weight, mode="fan_out", nonlinearity="relu")
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        mean = w.mean(dim=(1, 2, 3), keepdim=True)
        var = w.var(dim=(1, 2, 3), keepdim=True, unbiased=False)
        return self._conv_forward(x, (w - mean) / torch.sqrt(var + self.eps), self.bias)


def _groups(channels: int) -> int:
    """GroupNorm groups: up to 32, with at least 4 channels per group."""
    for g in (32, 16, 8, 4, 2):
        if channels % g == 0 and channels // g >= 4:
            return g
    return 1


class PreActConv(nn.Sequential):
    """GroupNorm -> ELU -> weight-standardised conv (a pre-activation block)."""

    def __init__(self, cin: int, cout: int, kernel_size: int = 3, dilation: int = 1):
        pad = dilation * (kernel_size // 2)
        super().__init__(nn.GroupNorm(_groups(cin), cin), nn.ELU(inplace=False),
                         WSConv2d(cin, cout, kernel_size, padding=pad, dilation=dilation, bias=False))


class ContextModule(nn.Module):
    """Parallel dilated convolutions on the deepest features, concatenated with the input and fused."""

    def __init__(self, cin: int, cout: int, rates: Sequence[int]):
        super().__init__()
        branch = max(cout // 2, 8)
        self.reduce = PreActConv(cin, cout, 1)
        self.branches = nn.ModuleList(PreActConv(cout, branch, 3, dilation=r) for r in rates)
        self.fuse = PreActConv(cout + branch * len(rates), cout, 1)

    def forward(self, x):
        x = self.reduce(x)
        return self.fuse(torch.cat([x] + [b(x) for b in self.branches], 1))


def _zero_conv(cin: int) -> nn.Conv2d:
    """3x3 conv to one channel, zero-initialised: every level starts by passing the coarser depth on."""
    conv = nn.Conv2d(cin, 1, 3, padding=1)
    nn.init.zeros_(conv.weight)
    nn.init.zeros_(conv.bias)
    return conv


def positive_depth(d: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    """``d`` where ``d >= eps``, ``eps * exp(d / eps - 1)`` below: positive and smooth, so a
    prediction that overshoots below zero still receives gradient (a clamp would stop it)."""
    return torch.where(d >= eps, d, eps * torch.exp(torch.clamp(d / eps - 1.0, max=0.0)))


class PyramidLevel(nn.Module):
    """One decoder level: upsample features, join skip / Laplacian residual / coarser depth,
    and predict the depth residual at this scale."""

    def __init__(self, cin: int, cskip: int, cout: int):
        super().__init__()
        self.up = PreActConv(cin, cout, 3)
        self.body = nn.Sequential(PreActConv(cout + cskip + 3 + 1, cout, 3), PreActConv(cout, cout, 3))
        self.residual = nn.Sequential(nn.GroupNorm(_groups(cout), cout), nn.ELU(), _zero_conv(cout))

    def forward(self, x, skip, lap, depth_coarse):
        size = lap.shape[-2:]
        x = self.up(F.interpolate(x, size=size, mode="bilinear", align_corners=False))
        depth_up = F.interpolate(depth_coarse, size=size, mode="bilinear", align_corners=False)
        parts = [x] + ([skip] if skip is not None else []) + [lap, depth_up]
        x = self.body(torch.cat(parts, 1))
        return x, depth_up + self.residual(x)


def laplacian_pyramid(image: torch.Tensor, levels: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Return ``([L_0, ..., L_{levels-1}], G_levels)``: Laplacian residuals at strides 1..2**(levels-1)
    and the coarsest Gaussian level (stride ``2**levels``). Downsampling is 2x2 averaging."""
    gauss = [image]
    for _ in range(levels):
        gauss.append(F.avg_pool2d(gauss[-1], 2, ceil_mode=True))
    laps = [g - F.interpolate(g_next, size=g.shape[-2:], mode="bilinear", align_corners=False)
            for g, g_next in zip(gauss[:-1], gauss[1:])]
    return laps, gauss[-1]


class LapDepth(nn.Module):
    """LapDepth with a timm encoder; ``forward(image in [0, 1]) -> depth in metres`` (N, 1, H, W).

    ``H`` and ``W`` must be multiples of 32. ``return_pyramid=True`` also returns the depth
    maps ``[D_5, ..., D_0]`` (coarse to fine, in metres).
    """

    def __init__(self, encoder: str = "resnext101_32x8d", pretrained: bool = False, max_depth: float = 80.0,
                 decoder_channels: Sequence[int] = DEFAULT_DECODER_CHANNELS,
                 context_rates: Sequence[int] = (3, 6, 12, 18, 24)):
        super().__init__()
        if len(decoder_channels) != 6:
            raise ValueError(f"decoder_channels needs 6 widths (strides 32..1), got {tuple(decoder_channels)}")
        if not max_depth > 0:
            raise ValueError(f"max_depth must be positive, got {max_depth!r}")
        self.config = dict(encoder=encoder, pretrained=pretrained, max_depth=max_depth,
                           decoder_channels=tuple(decoder_channels), context_rates=tuple(context_rates))
        self.max_depth = float(max_depth)
        self.encoder = timm.create_model(encoder, pretrained=pretrained, features_only=True)
        reductions = list(self.encoder.feature_info.reduction())
        if reductions != [2, 4, 8, 16, 32]:
            raise ValueError(f"encoder {encoder!r} must give features at strides [2, 4, 8, 16, 32], got {reductions}")
        enc = list(self.encoder.feature_info.channels())
        c = list(decoder_channels)
        self.context = ContextModule(enc[4], c[0], context_rates)
        self.coarse = PreActConv(c[0], 1, 3)
        # levels at strides 16, 8, 4, 2 (with encoder skips) and 1 (no skip)
        skips = [enc[3], enc[2], enc[1], enc[0], 0]
        self.levels = nn.ModuleList(PyramidLevel(c[i], skips[i], c[i + 1]) for i in range(5))
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1), persistent=False)

    def encoder_parameters(self):
        return self.encoder.parameters()

    def decoder_parameters(self):
        enc = {id(p) for p in self.encoder.parameters()}
        return [p for p in self.parameters() if id(p) not in enc]

    def forward(self, image: torch.Tensor, return_pyramid: bool = False):
        if image.dim() != 4 or image.shape[1] != 3:
            raise ValueError(f"expected images of shape (N, 3, H, W), got {tuple(image.shape)}")
        h, w = image.shape[-2:]
        if h % 32 or w % 32:
            raise ValueError(f"image height and width must be multiples of 32, got {h}x{w}")
        x = (image - self.mean) / self.std
        feats = self.encoder(x)
        laps, _ = laplacian_pyramid(x, 5)  # strides 1, 2, 4, 8, 16
        top = self.context(feats[4])
        depth = torch.sigmoid(self.coarse(top))  # D_5 as a fraction of max_depth
        pyramid = [depth]
        skips = [feats[3], feats[2], feats[1], feats[0], None]
        for level, skip, lap in zip(self.levels, skips, reversed(laps)):
            top, depth = level(top, skip, lap, depth)
            pyramid.append(depth)
        out = self.max_depth * positive_depth(depth)
        if return_pyramid:
            return out, [self.max_depth * d for d in pyramid]
        return out


def quadratic_lapdepth(conventional: LapDepth | None = None, neuron: str = "full", **kwargs) -> LapDepth:
    """Quadratic-LapDepth: a LapDepth whose encoder neurons are quadratic (ReLinear-initialised).

    With ``conventional`` given, its configuration is used (``kwargs`` must be empty), its encoder
    weights are transferred into the linear branches (:func:`quadnn.relinear.transfer_weights_`)
    and its decoder is copied, so at initialisation the quadratic model computes exactly what
    ``conventional`` computes. Otherwise a fresh LapDepth is built from ``kwargs``.
    """
    if conventional is not None:
        if kwargs:
            raise ValueError(f"give either a conventional model or LapDepth arguments, not both (got {sorted(kwargs)})")
        cfg = dict(conventional.config, pretrained=False)
        model = LapDepth(**cfg)
        quadratize(model.encoder, neuron=neuron)
        transfer_weights_(conventional.encoder, model.encoder)
        decoder = {k: v for k, v in conventional.state_dict().items() if not k.startswith("encoder.")}
        missing, unexpected = model.load_state_dict(decoder, strict=False)
        assert not unexpected and all(k.startswith("encoder.") for k in missing)
        model.config = dict(conventional.config, neuron=neuron)
        return model
    model = LapDepth(**kwargs)
    quadratize(model.encoder, neuron=neuron)
    model.config = dict(model.config, neuron=neuron)
    return model
