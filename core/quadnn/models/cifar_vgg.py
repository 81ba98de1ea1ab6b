"""CIFAR VGG16 with batch norm (Simonyan & Zisserman 2015, CIFAR form) in three kinds.

One parameterised family, :class:`CifarVGG`: thirteen 3x3 convolutions (64, 64, M, 128, 128,
M, 256 x3, M, 512 x3, M, 512 x3, M; channels times ``width``), each followed by batch norm
and the activation, five 2x2 max-pools, global average pooling (the identity on the 1x1 map a
32x32 input leaves) and one linear classifier: the usual CIFAR adaptation of VGG16-BN
(about 14.7M parameters for 10 classes).

- ``activation="relu"`` or ``"square"`` (``z -> z*z``, :class:`quadnn.Square`: the paper's
  "VGG16 with quadratic activation");
- ``neuron="conventional"`` or one of :data:`quadnn.NEURONS`: the kind of all thirteen
  convolutions. Quadratic convolutions are ReLinear-initialised by their layer, so a
  quadratic VGG computes a conventional one at the start; the classifier stays conventional,
  as in the paper's QResNets, so :func:`quadnn.relinear.transfer_weights_` maps
  ``cifar_vgg16`` onto ``cifar_qvgg16`` one to one.

The pools use ``ceil_mode=True``, so inputs smaller than 32x32 (the 8x8 digits stand-in:
8, 4, 2, 1, 1, 1) pass through without error; on 32x32 inputs this changes nothing.

Registered in timm: ``cifar_vgg16``, ``cifar_vgg16_square``, ``cifar_qvgg16``; each takes
``width=``, ``num_classes=`` (default 100, CIFAR-100), ``in_chans=``, ``drop_rate=``, ``bn_momentum=``,
``bn_eps=``, ``drop_path_rate=`` (0 only: VGG has no residual branch to drop),
``recompute_budget=`` (see :func:`quadnn.plan_recompute`; default ``quadnn.recompute.DEFAULT_BUDGET``).
"""

from __future__ import annotations

import torch
from timm.models import build_model_with_cfg, register_model
from torch import nn

from ..layers import Square
from ..recompute import DEFAULT_BUDGET
from .common import KINDS, ConvClassifier, conv3x3, untrained_cfgs

__all__ = ["CifarVGG", "VGG16", "ACTIVATIONS", "KINDS"]

# Output channels of the convolutions, "M" = 2x2 max-pool (configuration D of the VGG paper).
VGG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")
ACTIVATIONS = {"relu": nn.ReLU, "square": Square}


class CifarVGG(ConvClassifier):
    """VGG with batch norm for 32x32 inputs; see the module docstring."""

    def __init__(
        self,
        layers=VGG16,
        num_classes: int = 100,
        in_chans: int = 3,
        width: float = 1.0,
        activation: str = "relu",
        neuron: str = "conventional",
        drop_rate: float = 0.0,
        drop_path_rate: float = 0.0,
        global_pool: str = "avg",
        bn_momentum: float | None = None,
        bn_eps: float | None = None,
        recompute_budget: float | None = DEFAULT_BUDGET,
        device=None,
        dtype=None,
    ):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {tuple(ACTIVATIONS)}, got {activation!r}")
        self._check_kind(neuron, width)
        self.drop_paths(drop_path_rate, 0, has_residual=False)  # checks the rate: VGG has no residual
        dd = dict(device=device, dtype=dtype)
        self.activation, self.neuron, self.width = activation, neuron, width

        feats, cin, reduction, self.feature_info = [], in_chans, 1, []
        for v in layers:
            if v == "M":
                reduction *= 2
                feats.append(nn.MaxPool2d(2, 2, ceil_mode=True))
                self.feature_info.append(dict(num_chs=cin, reduction=reduction, module=f"features.{len(feats) - 1}"))
                continue
            cout = max(1, round(v * width))
            feats += [conv3x3(cin, cout, 1, neuron, **dd), nn.BatchNorm2d(cout, **dd), ACTIVATIONS[activation]()]
            cin = cout
        self.features = nn.Sequential(*feats)
        self._init_head(cin, num_classes, global_pool, drop_rate, **dd)
        self.set_norm_args_(bn_momentum, bn_eps)
        self.reset_parameters()
        self.plan_recompute_(recompute_budget, in_chans, 32, **dd)

    # stem: the first convolution and its batch norm; blocks: each later layer of ``features``
    _group_stem = r"^features\.[01]\."
    _group_blocks = (r"^features\.(\d+)", r"^features\.(\d+)")

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        if self.grad_checkpointing:  # stage by stage
            return super().forward_features(x)
        return self.features(x)

    def _feature_stages(self):
        # features up to and including each pool; layers after the last pool join the last stage
        ends = [int(f["module"].split(".")[1]) + 1 for f in self.feature_info]
        ends[-1] = len(self.features)
        return [self.features[a:b] for a, b in zip([0] + ends[:-1], ends)]


# Variant name -> (activation, neuron).
VARIANTS = {
    "cifar_vgg16": ("relu", "conventional"),
    "cifar_vgg16_square": ("square", "conventional"),
    "cifar_qvgg16": ("relu", "full"),
}

default_cfgs = untrained_cfgs(
    VARIANTS,
    num_classes=100,
    input_size=(3, 32, 32),
    pool_size=(1, 1),
    mean=(0.5071, 0.4865, 0.4409),
    std=(0.2673, 0.2564, 0.2762),
    first_conv="features.0",
)


def _create(variant: str, pretrained: bool = False, **kwargs) -> CifarVGG:
    activation, neuron = VARIANTS[variant]
    kwargs.setdefault("activation", activation)
    kwargs.setdefault("neuron", neuron)
    return build_model_with_cfg(
        CifarVGG,
        variant,
        pretrained,
        layers=VGG16,
        feature_cfg=dict(out_indices=(0, 1, 2, 3, 4), flatten_sequential=True),
        **kwargs,
    )


@register_model
def cifar_vgg16(pretrained=False, **kwargs) -> CifarVGG:
    return _create("cifar_vgg16", pretrained, **kwargs)


@register_model
def cifar_vgg16_square(pretrained=False, **kwargs) -> CifarVGG:
    return _create("cifar_vgg16_square", pretrained, **kwargs)


@register_model
def cifar_qvgg16(pretrained=False, **kwargs) -> CifarVGG:
    return _create("cifar_qvgg16", pretrained, **kwargs)
