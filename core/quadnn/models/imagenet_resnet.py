"""ImageNet ResNets and plain nets (He et al. 2016, Sec. 4.1) with conventional or quadratic blocks.

One parameterised family, :class:`ImageNetResNet`: a 7x7/2 stem convolution with 64 channels,
3x3/2 max pooling, four stages of basic blocks (two 3x3 convolutions each) with 64/128/256/512
channels (times ``width``), global average pooling and a linear classifier.
``layers=(2, 2, 2, 2)`` is the 18-layer model, ``(3, 4, 6, 3)`` the 34-layer one.

``shortcut`` chooses the residual connection of every block:

- ``"B"`` (default): identity, and a 1x1/2 projection + batch norm where the shape changes
  (He et al.'s option B, the layout of torchvision's and timm's ``resnet18``/``resnet34``:
  the state_dicts have the same keys, and ResNet-18/34 have 11,689,512 / 21,797,672 parameters);
- ``"A"``: identity, and stride-2 subsampling + zero-padded channels where the shape changes
  (option A, parameter-free; the setting of He et al.'s Table 2, whose 18/34-layer errors the
  quadratic-network paper quotes);
- ``"none"``: no shortcut at all, the "plain" networks of the same depth.

``neuron`` chooses the kind of the two 3x3 convolutions inside every block: ``"conventional"``
(``nn.Conv2d`` without bias) or one of :data:`quadnn.NEURONS` (``QuadraticConv2d`` with ``b_r`` and
``c``, the paper's neuron). The stem, the projection shortcuts and the classifier stay
conventional, as in the CIFAR QResNets of :mod:`quadnn.models.cifar_resnet`. Initialisation as
there: Kaiming-normal (fan_in), and ``zero_init_last=True`` (timm's default; pass False for the
paper's recipe) starts the last batch norm of every residual block at gamma = 0 (plain nets have
no residual to fall back on and are never zeroed).

Registered in timm (the ``imagenet_`` prefix keeps clear of timm's own ``resnet18``):

=========================  ===============================  ====================
name                       paper's label                    neuron
=========================  ===============================  ====================
``imagenet_plain{18,34}``  plain-20 / plain-32              conventional
``imagenet_resnet{18,34}`` ResNet20 / ResNet32              conventional
``imagenet_parabolic_resnet{18,34}`` Parabolic-ResNet20/32  parabolic
``imagenet_poly_resnet{18,34}``      Poly-ResNet20/32       poly
``imagenet_qresnet{18,34}``          QResNet20/32           full
``imagenet_{q,parabolic_,poly_}plain{18,34}``  --           (plain, quadratic)
=========================  ===============================  ====================

Every variant takes ``width=``, ``shortcut=``, ``zero_init_last=``, ``global_pool=``, ``num_classes=``,
``in_chans=``, ``drop_rate=``, ``drop_path_rate=`` (stochastic depth as timm's ResNets; plain nets
refuse a rate above 0), ``bn_momentum=``, ``bn_eps=``, ``recompute_budget=`` (see :func:`quadnn.plan_recompute`; default
``quadnn.recompute.DEFAULT_BUDGET``), and works with ``timm.create_model(name, features_only=True)``
(stem, then the four stages).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from timm.models import build_model_with_cfg, register_model
from torch import nn

from ..recompute import DEFAULT_BUDGET
from .cifar_resnet import ShortcutA
from .common import ConvClassifier, conv3x3, untrained_cfgs

__all__ = ["ImageNetResNet", "ImageNetBasicBlock", "SHORTCUTS", "DEPTHS", "VARIANTS"]

SHORTCUTS = ("B", "A", "none")
DEPTHS = {18: (2, 2, 2, 2), 34: (3, 4, 6, 3)}


class ImageNetBasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm; ``relu(shortcut(x) + F(x))``, or ``relu(F(x))`` when plain."""

    def __init__(
        self,
        cin: int,
        cout: int,
        stride: int = 1,
        neuron: str = "conventional",
        shortcut: str = "B",
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
        self.plain = shortcut == "none"
        reshapes = stride != 1 or cin != cout
        if self.plain or not reshapes:
            self.downsample = None
        elif shortcut == "B":
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False, **dd), nn.BatchNorm2d(cout, **dd)
            )
        else:
            self.downsample = ShortcutA(cin, cout, stride)
        self.drop_path = drop_path or nn.Identity()  # stochastic depth on the residual branch

    def zero_init_last(self) -> None:
        if not self.plain:  # a plain block zeroed would cut the network
            nn.init.zeros_(self.bn2.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.plain:
            return F.relu(out)
        return F.relu(self.drop_path(out) + (x if self.downsample is None else self.downsample(x)))


class ImageNetResNet(ConvClassifier):
    """ImageNet ResNet / plain net with ``layers`` basic blocks per stage; see the module docstring."""

    def __init__(
        self,
        layers=(2, 2, 2, 2),
        num_classes: int = 1000,
        in_chans: int = 3,
        width: float = 1.0,
        neuron: str = "conventional",
        shortcut: str = "B",
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
        layers = tuple(int(n) for n in layers)
        if len(layers) != 4 or min(layers) < 1:
            raise ValueError(f"layers must be four positive block counts, e.g. (2, 2, 2, 2), got {layers}")
        self._check_kind(neuron, width)
        if shortcut not in SHORTCUTS:
            raise ValueError(f"shortcut must be one of {SHORTCUTS}, got {shortcut!r}")
        dd = dict(device=device, dtype=dtype)
        widths = [max(1, round(c * width)) for c in (64, 128, 256, 512)]
        self.layers, self.width, self.neuron, self.shortcut = layers, width, neuron, shortcut
        self.zero_init_last = zero_init_last

        self.conv1 = nn.Conv2d(in_chans, widths[0], 7, 2, 3, bias=False, **dd)
        self.bn1 = nn.BatchNorm2d(widths[0], **dd)
        self.act1 = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.feature_info = [dict(num_chs=widths[0], reduction=2, module="act1")]
        cin = widths[0]
        drop_paths = iter(self.drop_paths(drop_path_rate, sum(layers), has_residual=shortcut != "none"))
        for i, (n, cout) in enumerate(zip(layers, widths)):
            blocks = []
            for j in range(n):
                stride = 2 if (i > 0 and j == 0) else 1
                blocks.append(ImageNetBasicBlock(cin, cout, stride, neuron, shortcut, next(drop_paths), **dd))
                cin = cout
            self.add_module(f"layer{i + 1}", nn.Sequential(*blocks))
            self.feature_info.append(dict(num_chs=cout, reduction=4 * 2**i, module=f"layer{i + 1}"))
        self._init_head(cin, num_classes, global_pool, drop_rate, **dd)
        self.set_norm_args_(bn_momentum, bn_eps)
        self.reset_parameters()
        self.plan_recompute_(recompute_budget, in_chans, 64, **dd)

    def _stem(self, x: torch.Tensor) -> torch.Tensor:
        return self.act1(self.bn1(self.conv1(x)))

    def _stage1(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer1(self.maxpool(x))

    def _feature_stages(self):
        return [self._stem, self._stage1, self.layer2, self.layer3, self.layer4]


# Variant name -> (depth, neuron, shortcut); the paper's "20"/"32" labels are these 18/34-layer models.
VARIANTS = {}
for _d in DEPTHS:
    for _prefix, _neuron in (("", "conventional"), ("q", "full"), ("parabolic_", "parabolic"), ("poly_", "poly")):
        VARIANTS[f"imagenet_{_prefix}resnet{_d}"] = (_d, _neuron, "B")
        VARIANTS[f"imagenet_{_prefix}plain{_d}"] = (_d, _neuron, "none")
del _d, _prefix, _neuron

default_cfgs = untrained_cfgs(
    VARIANTS,
    num_classes=1000,
    input_size=(3, 224, 224),
    pool_size=(7, 7),
    crop_pct=0.875,
    mean=(0.485, 0.456, 0.406),
    std=(0.229, 0.224, 0.225),
)


def _create(variant: str, pretrained: bool = False, **kwargs) -> ImageNetResNet:
    depth, neuron, shortcut = VARIANTS[variant]
    kwargs.setdefault("neuron", neuron)
    kwargs.setdefault("shortcut", shortcut)
    if shortcut == "none" and kwargs["shortcut"] != "none":
        raise ValueError(f"{variant} is a plain network; use the resnet variant for shortcut={kwargs['shortcut']!r}")
    return build_model_with_cfg(
        ImageNetResNet,
        variant,
        pretrained,
        layers=DEPTHS[depth],
        feature_cfg=dict(out_indices=(0, 1, 2, 3, 4)),
        **kwargs,
    )


@register_model
def imagenet_resnet18(pretrained=False, **kwargs) -> ImageNetResNet:
    return _create("imagenet_resnet18", pretrained, **kwargs)


@register_model
def imagenet_resnet34(pretrained=False, **kwargs) -> ImageNetResNet:
    return _create("imagenet_resnet34", pretrained, **kwargs)


@register_model
def imagenet_plain18(pretrained=False, **kwargs) -> ImageNetResNet:
    return _create("imagenet_plain18", pretrained, **kwargs)


@register_model
def imagenet_plain34(pretrained=False, **kwargs) -> ImageNetResNet:
    return _create("imagenet_plain34", pretrained, **kwargs)


@register_model
def imagenet_qresnet18(pretrained=False, **kwargs) -> ImageNetResNet:
    return _create("imagenet_qresnet18", pretrained, **kwargs)


@register_model
def imagenet_qresnet34(pretrained=False, **kwargs) -> ImageNetResNet:
    return _create("imagenet_qresnet34", pretrained, **kwargs)


@register_model
def imagenet_qplain18(pretrained=False, **kwargs) -> ImageNetResNet:
    return _create("imagenet_qplain18", pretrained, **kwargs)


@register_model
def imagenet_qplain34(pretrained=False, **kwargs) -> ImageNetResNet:
    return _create("imagenet_qplain34", pretrained, **kwargs)


@register_model
def imagenet_parabolic_resnet18(pretrained=False, **kwargs) -> ImageNetResNet:
    return _create("imagenet_parabolic_resnet18", pretrained, **kwargs)


@register_model
def imagenet_parabolic_resnet34(pretrained=False, **kwargs) -> ImageNetResNet:
    return _create("imagenet_parabolic_resnet34", pretrained, **kwargs)


@register_model
def imagenet_parabolic_plain18(pretrained=False, **kwargs) -> ImageNetResNet:
    return _create("imagenet_parabolic_plain18", pretrained, **kwargs)


@register_model
def imagenet_parabolic_plain34(pretrained=False, **kwargs) -> ImageNetResNet:
    return _create("imagenet_parabolic_plain34", pretrained, **kwargs)


@register_model
def imagenet_poly_resnet18(pretrained=False, **kwargs) -> ImageNetResNet:
    return _create("imagenet_poly_resnet18", pretrained, **kwargs)


@register_model
def imagenet_poly_resnet34(pretrained=False, **kwargs) -> ImageNetResNet:
    return _create("imagenet_poly_resnet34", pretrained, **kwargs)


@register_model
def imagenet_poly_plain18(pretrained=False, **kwargs) -> ImageNetResNet:
    return _create("imagenet_poly_plain18", pretrained, **kwargs)


@register_model
def imagenet_poly_plain34(pretrained=False, **kwargs) -> ImageNetResNet:
    return _create("imagenet_poly_plain34", pretrained, **kwargs)
