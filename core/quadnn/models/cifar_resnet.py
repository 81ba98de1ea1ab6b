"""CIFAR ResNets (He et al. 2016, Sec. 4.2) with conventional or quadratic block convolutions.

One parameterised family, :class:`CifarResNet`: a 3x3 stem convolution with 16 channels,
three stages of ``n`` basic blocks with 16/32/64 channels (times ``width``), global average
pooling and a linear classifier; depth = 6n + 2. Downsampling blocks use the parameter-free
"option A" shortcut (stride-2 subsampling and zero-padding of the new channels).

``neuron`` chooses the kind of the two 3x3 convolutions inside every block:
``"conventional"`` (``nn.Conv2d`` without bias, batch norm follows) or one of
:data:`quadnn.NEURONS` (``QuadraticConv2d`` with ``b_r`` and ``c``, the paper's neuron, as the
official QResNets). The stem and the classifier stay conventional, as in the paper's QResNets,
so the parameter counts are the official code's: QResNet20/32/44/56/110 806,266 / 1,389,114 /
1,971,962 / 2,554,810 / 5,177,626, compact QResNet20/32/56 538,330 / 927,194 / 1,704,922.

Initialisation: Kaiming-normal (fan_in) convolutions as the official code, ReLinear quadratic
terms, and, with ``zero_init_last=True`` (the default, as timm's ResNets), the last batch norm
of every block at gamma = 0, so every block starts as the identity (a ResNet1202 is then finite
at initialisation in eval mode). The paper's recipe (He et al.) does not zero them: pass
``zero_init_last=False`` to reproduce it. ReZero blocks ignore it (zeta = 0 already starts them
as the identity; zeroing gamma too would leave zeta without a gradient).

``rezero=True`` gives every block a scalar ``zeta`` (initialised 0) and computes
``relu(shortcut(x) + zeta * F(x))`` (Bachlechner et al.); at initialisation every block is
the identity on the non-negative activations it receives.

Registered in timm: ``cifar_resnet{20,32,44,56,110,1202}``, ``cifar_qresnet{20,32,44,56,110}``,
``cifar_qresnet{20,32,56}_compact``, ``cifar_parabolic_resnet{20,32,56}``,
``cifar_poly_resnet{20,32,56}``; every variant takes ``width=`` (1.5, 2, 2.5 are the
paper's widened ResNets), ``rezero=``, ``zero_init_last=``, ``num_classes=``, ``in_chans=``,
``global_pool=`` (timm's; ``""`` returns the unpooled map), ``drop_rate=``, ``drop_path_rate=``
(stochastic depth as timm's ResNets: rising linearly over the blocks), ``bn_momentum=``, ``bn_eps=``, and
``recompute_budget=`` (what the quadratic layers keep for backward, see
:func:`quadnn.plan_recompute`; default ``quadnn.recompute.DEFAULT_BUDGET``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from timm.models import build_model_with_cfg, register_model
from torch import nn

from ..recompute import DEFAULT_BUDGET
from .common import KINDS, ConvClassifier, conv3x3, untrained_cfgs

__all__ = ["CifarResNet", "BasicBlock", "KINDS", "conv3x3"]

STAGE_CHANNELS = (16, 32, 64)  # He et al.'s CIFAR ResNet: the channels of its three stages at width 1


class ShortcutA(nn.Module):
    """Option A: subsample by ``stride`` and zero-pad the channels from ``cin`` to ``cout``."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.cin, self.cout, self.stride = cin, cout, stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride != 1:
            x = x[:, :, :: self.stride, :: self.stride]
        extra = self.cout - self.cin
        if extra:
            x = F.pad(x, (0, 0, 0, 0, extra // 2, extra - extra // 2))
        return x

    def extra_repr(self) -> str:
        return f"{self.cin}->{self.cout}, stride={self.stride}"


class BasicBlock(nn.Module):
    def __init__(
        self,
        cin: int,
        cout: int,
        stride: int = 1,
        neuron: str = "conventional",
        rezero: bool = False,
        drop_path: nn.Module | None = None,
        device=None,
        dtype=None,
    ):
        super().__init__()
        dd = dict(device=device, dtype=dtype)
        self.conv1 = conv3x3(cin, cout, stride, neuron, **dd)
        self.bn1 = nn.BatchNorm2d(cout, **dd)
        self.conv2 = conv3x3(cout, cout, 1, neuron, **dd)
        self.bn2 = nn.BatchNorm2d(cout, **dd)
        self.shortcut = ShortcutA(cin, cout, stride) if (stride != 1 or cin != cout) else nn.Identity()
        if rezero:
            self.zeta = nn.Parameter(torch.zeros((), **dd))
        else:
            self.register_parameter("zeta", None)
        self.drop_path = drop_path or nn.Identity()  # stochastic depth on the residual branch

    def zero_init_last(self) -> None:
        if self.zeta is None:  # ReZero blocks already start as the identity
            nn.init.zeros_(self.bn2.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.zeta is not None:
            out = self.zeta * out
        return F.relu(self.shortcut(x) + self.drop_path(out))


class CifarResNet(ConvClassifier):
    """CIFAR ResNet of depth ``6n+2``; see the module docstring."""

    def __init__(
        self,
        depth: int = 20,
        num_classes: int = 10,
        in_chans: int = 3,
        width: float = 1.0,
        neuron: str = "conventional",
        rezero: bool = False,
        drop_rate: float = 0.0,
        drop_path_rate: float = 0.0,
        global_pool: str = "avg",
        zero_init_last: bool = True,
        bn_momentum: float | None = None,
        bn_eps: float | None = None,
        recompute_budget: float | None = DEFAULT_BUDGET,
        device=None,
        dtype=None,
    ):
        super().__init__()
        if (depth - 2) % 6 or depth < 8:
            raise ValueError(f"depth must be 6n+2 with n >= 1 (20, 32, 44, 56, 110, 1202, ...), got {depth}")
        self._check_kind(neuron, width)
        dd = dict(device=device, dtype=dtype)
        n = (depth - 2) // 6
        widths = [max(1, round(c * width)) for c in STAGE_CHANNELS]
        self.depth, self.width, self.neuron, self.rezero = depth, width, neuron, rezero
        self.zero_init_last = zero_init_last

        self.conv1 = nn.Conv2d(in_chans, widths[0], 3, 1, 1, bias=False, **dd)
        self.bn1 = nn.BatchNorm2d(widths[0], **dd)
        stages, cin, self.feature_info = [], widths[0], []
        drop_paths = iter(self.drop_paths(drop_path_rate, 3 * n))
        for i, cout in enumerate(widths):
            blocks = []
            for j in range(n):
                stride = 2 if (i > 0 and j == 0) else 1
                blocks.append(BasicBlock(cin, cout, stride, neuron, rezero, next(drop_paths), **dd))
                cin = cout
            stages.append(nn.Sequential(*blocks))
            self.feature_info.append(dict(num_chs=cout, reduction=2**i, module=f"layer{i + 1}"))
        self.layer1, self.layer2, self.layer3 = stages
        self._init_head(cin, num_classes, global_pool, drop_rate, **dd)
        self.set_norm_args_(bn_momentum, bn_eps)
        self.reset_parameters()
        self.plan_recompute_(recompute_budget, in_chans, 32, **dd)

    def _stage1(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer1(F.relu(self.bn1(self.conv1(x))))

    def _feature_stages(self):
        return [self._stage1, self.layer2, self.layer3]


# Variant name -> (depth, neuron). The registered functions below are generated from this table
# by hand-written three-liners so timm's registry sees ordinary module-level functions.
VARIANTS = {
    **{f"cifar_resnet{d}": (d, "conventional") for d in (20, 32, 44, 56, 110, 1202)},
    **{f"cifar_qresnet{d}": (d, "full") for d in (20, 32, 44, 56, 110)},
    **{f"cifar_qresnet{d}_compact": (d, "compact") for d in (20, 32, 56)},
    **{f"cifar_parabolic_resnet{d}": (d, "parabolic") for d in (20, 32, 56)},
    **{f"cifar_poly_resnet{d}": (d, "poly") for d in (20, 32, 56)},
}

default_cfgs = untrained_cfgs(
    VARIANTS,
    num_classes=10,
    input_size=(3, 32, 32),
    pool_size=(8, 8),
    mean=(0.4914, 0.4822, 0.4465),
    std=(0.2470, 0.2435, 0.2616),
)


def _create(variant: str, pretrained: bool = False, **kwargs) -> CifarResNet:
    depth, neuron = VARIANTS[variant]
    kwargs.setdefault("neuron", neuron)
    return build_model_with_cfg(
        CifarResNet, variant, pretrained, depth=depth, feature_cfg=dict(out_indices=(0, 1, 2)), **kwargs
    )


@register_model
def cifar_resnet20(pretrained=False, **kwargs) -> CifarResNet:
    return _create("cifar_resnet20", pretrained, **kwargs)


@register_model
def cifar_resnet32(pretrained=False, **kwargs) -> CifarResNet:
    return _create("cifar_resnet32", pretrained, **kwargs)


@register_model
def cifar_resnet44(pretrained=False, **kwargs) -> CifarResNet:
    return _create("cifar_resnet44", pretrained, **kwargs)


@register_model
def cifar_resnet56(pretrained=False, **kwargs) -> CifarResNet:
    return _create("cifar_resnet56", pretrained, **kwargs)


@register_model
def cifar_resnet110(pretrained=False, **kwargs) -> CifarResNet:
    return _create("cifar_resnet110", pretrained, **kwargs)


@register_model
def cifar_resnet1202(pretrained=False, **kwargs) -> CifarResNet:
    return _create("cifar_resnet1202", pretrained, **kwargs)


@register_model
def cifar_qresnet20(pretrained=False, **kwargs) -> CifarResNet:
    return _create("cifar_qresnet20", pretrained, **kwargs)


@register_model
def cifar_qresnet32(pretrained=False, **kwargs) -> CifarResNet:
    return _create("cifar_qresnet32", pretrained, **kwargs)


@register_model
def cifar_qresnet44(pretrained=False, **kwargs) -> CifarResNet:
    return _create("cifar_qresnet44", pretrained, **kwargs)


@register_model
def cifar_qresnet56(pretrained=False, **kwargs) -> CifarResNet:
    return _create("cifar_qresnet56", pretrained, **kwargs)


@register_model
def cifar_qresnet110(pretrained=False, **kwargs) -> CifarResNet:
    return _create("cifar_qresnet110", pretrained, **kwargs)


@register_model
def cifar_qresnet20_compact(pretrained=False, **kwargs) -> CifarResNet:
    return _create("cifar_qresnet20_compact", pretrained, **kwargs)


@register_model
def cifar_qresnet32_compact(pretrained=False, **kwargs) -> CifarResNet:
    return _create("cifar_qresnet32_compact", pretrained, **kwargs)


@register_model
def cifar_qresnet56_compact(pretrained=False, **kwargs) -> CifarResNet:
    return _create("cifar_qresnet56_compact", pretrained, **kwargs)


@register_model
def cifar_parabolic_resnet20(pretrained=False, **kwargs) -> CifarResNet:
    return _create("cifar_parabolic_resnet20", pretrained, **kwargs)


@register_model
def cifar_parabolic_resnet32(pretrained=False, **kwargs) -> CifarResNet:
    return _create("cifar_parabolic_resnet32", pretrained, **kwargs)


@register_model
def cifar_parabolic_resnet56(pretrained=False, **kwargs) -> CifarResNet:
    return _create("cifar_parabolic_resnet56", pretrained, **kwargs)


@register_model
def cifar_poly_resnet20(pretrained=False, **kwargs) -> CifarResNet:
    return _create("cifar_poly_resnet20", pretrained, **kwargs)


@register_model
def cifar_poly_resnet32(pretrained=False, **kwargs) -> CifarResNet:
    return _create("cifar_poly_resnet32", pretrained, **kwargs)


@register_model
def cifar_poly_resnet56(pretrained=False, **kwargs) -> CifarResNet:
    return _create("cifar_poly_resnet56", pretrained, **kwargs)
