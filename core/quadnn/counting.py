"""Counting rules for the FLOP/parameter counters papers quote, so they count quadratic layers.

thop and ptflops find a layer's rule by its exact type, so without one they skip a quadratic layer
(thop then counts neither its operations nor its parameters); torchinfo counts ``weight_g`` and
``weight_b`` as a recurrent layer's weights, once per output channel. ``import quadnn`` registers
the rules below with each of them (:mod:`quadnn.integrations`), so ``thop.profile(model, (x,))``,
``ptflops.get_model_complexity_info`` and ``torchinfo.summary`` count the layers with their
defaults; ``custom_ops=quadnn.counting.thop_ops()`` and ``custom_modules_hooks=ptflops_hooks()``
still work. fvcore and ``torch.utils.flop_counter`` count the operations the layers run and need
none; :func:`macs` and :func:`forward_gflops` are the latter's count.

A quadratic layer's multiply-accumulates are those of its linear maps, each the conventional
layer's: three for "full" (r, g, W_b on x*x), two for the others (compact: W_r x and W_b x*x;
parabolic and poly: r and g), the convention of ``torch.utils.flop_counter`` (which counts the
convolutions, not the elementwise products and sums).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .layers import QuadraticConv1d, QuadraticConv2d, QuadraticConv3d, QuadraticLayer, QuadraticLinear
from .neurons import NEURONS, neuron_kind

__all__ = ["layer_macs", "macs", "forward_gflops", "thop_ops", "ptflops_hooks", "torchinfo_macs", "LINEAR_MAPS"]

# Linear maps of the size of the conventional layer's, per neuron kind of the paper (any kind's:
# quadnn.neurons.neuron_kind(name).linear_maps).
LINEAR_MAPS = {name: neuron_kind(name).linear_maps for name in NEURONS}
_TYPES = (QuadraticConv1d, QuadraticConv2d, QuadraticConv3d, QuadraticLinear)


def layer_macs(layer: QuadraticLayer, output: torch.Tensor) -> int:
    """Multiply-accumulates of one call of ``layer`` that produced ``output``."""
    if isinstance(layer, nn.Linear):
        per_output = layer.in_features
    else:
        per_output = layer.in_channels // layer.groups * math.prod(layer.kernel_size)
    return neuron_kind(layer.neuron).linear_maps * output.numel() * per_output


def _flops(model: nn.Module, *inputs) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(*inputs)
    return counter.get_total_flops()


def macs(model: nn.Module, *inputs) -> int:
    """Multiply-accumulates of ``model(*inputs)`` as ``torch.utils.flop_counter`` counts them (its
    FLOPs / 2: convolutions and matrix products, quadratic layers included)."""
    return _flops(model, *inputs) // 2


def forward_gflops(model: nn.Module, *inputs) -> float:
    """Forward FLOPs of ``model(*inputs)`` in billions, as ``torch.utils.flop_counter`` counts them."""
    return _flops(model, *inputs) / 1e9


def _thop_rule(module, inputs, output):
    module.total_ops += torch.DoubleTensor([layer_macs(module, output)])


def thop_ops() -> dict:
    """``custom_ops`` for ``thop.profile``: each quadratic layer type -> its counting rule."""
    return dict.fromkeys(_TYPES, _thop_rule)


def _ptflops_rule(module, inputs, output):
    module.__flops__ += layer_macs(module, output)


def ptflops_hooks() -> dict:
    """``custom_modules_hooks`` for ``ptflops.get_model_complexity_info`` (its pytorch backend)."""
    return dict.fromkeys(_TYPES, _ptflops_rule)


def torchinfo_macs(info) -> bool:
    """torchinfo's Mult-Adds of a quadratic layer (``info``: its ``LayerInfo``), set as torchinfo
    counts a conventional layer's: every weight and bias as the linear branch's, once per output
    position of a convolution, once per sample of a linear layer. False for any other layer."""
    if not isinstance(info.module, QuadraticLayer):
        return False
    size = info.output_size
    per_param = math.prod(size[:1] + size[2:]) if not isinstance(info.module, nn.Linear) else size[0]
    for name, param in info.module.named_parameters():
        count, _ = info.get_param_count(info.module, name, param)
        info.macs += int(count * per_param)
    return True
