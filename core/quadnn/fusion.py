"""Folding an eval-mode batch norm into the quadratic layer before it (conv-BN fusion for inference).

    fused = quadnn.fusion.fuse_conv_bn_eval(conv.eval(), bn.eval())   # fused(x) == bn(conv(x))

In eval mode batch norm is an affine map per channel, ``bn(y) = s * y + t`` with
``s = gamma / sqrt(running_var + eps)`` and ``t = beta - s * running_mean``. A conventional layer
takes it into ``weight`` and ``bias``; a quadratic neuron's output is a sum of terms, so every term
takes the scale and the constant takes the shift:

- full, ``r*g + W_b(x*x) + c``: ``s*r`` (W_r, b_r scaled), ``s*W_b``, ``s*c + t``;
- compact, ``r + W_b(x*x) + c``: every weight and bias scaled, ``t`` added to ``c``;
- parabolic ``r*g`` and poly ``r*g + r = r*(g + 1)`` have no constant to take ``t``: the fused
  layer is a full neuron (``s*r``, the gate, ``W_b = 0``, ``c = t``; poly's ``b_g`` + 1), one
  convolution more than the parabolic layer, still one layer.

torch's ``torch.nn.utils.fusion.fuse_conv_bn_eval`` folds into ``weight``/``bias`` only, which is
wrong for these layers: the layers refuse it, naming this module (:mod:`quadnn.weight_guards`).
``torch.ao.quantization.fuse_modules`` finds its fuser methods by type: quadnn registers these
functions for the quadratic layers with it (conv-BN, conv-BN-ReLU, linear-BN), so
``fuse_modules(model, [["conv", "bn"]])`` is exact. ``torch.fx.experimental.optimization.fuse``
matches exact torch layer types and traces through quadratic layers: it leaves their batch norm
unfused (exact, not faster).
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.nn.utils import parametrize

from .layers import QuadraticConv1d, QuadraticConv2d, QuadraticConv3d, QuadraticLayer, QuadraticLinear
from .neurons import NEURONS, neuron_kind

__all__ = ["fuse_conv_bn_eval", "fuse_linear_bn_eval", "register_with_torch_ao"]


def fuse_conv_bn_eval(conv: QuadraticLayer, bn: nn.modules.batchnorm._BatchNorm) -> QuadraticLayer:
    """A new quadratic convolution computing ``bn(conv(x))`` of the eval-mode ``conv`` and ``bn``
    (a full neuron for a parabolic or poly ``conv``; see the module docstring)."""
    if isinstance(conv, nn.Linear):
        raise TypeError(f"{type(conv).__name__} is a linear layer: use quadnn.fusion.fuse_linear_bn_eval")
    return _fold(conv, bn)


def fuse_linear_bn_eval(linear: QuadraticLinear, bn: nn.modules.batchnorm._BatchNorm) -> QuadraticLinear:
    """A new quadratic linear layer computing ``bn(linear(x))`` of the eval-mode ``linear`` and ``bn``."""
    if not isinstance(linear, nn.Linear):
        raise TypeError(f"{type(linear).__name__} is not a linear layer: use quadnn.fusion.fuse_conv_bn_eval")
    return _fold(linear, bn)


def _bn_affine(bn, out: int, like: torch.Tensor):
    """(s, t) with ``bn(y) = s * y + t`` per channel, in ``like``'s dtype (computed in float64
    where the device has it)."""
    if not isinstance(bn, nn.modules.batchnorm._BatchNorm):
        raise TypeError(f"expected a batch norm layer, got {type(bn).__name__}")
    if bn.training:
        raise ValueError("fusion is for eval mode: call .eval() on the batch norm (and the layer)")
    if bn.running_mean is None or bn.running_var is None:
        raise ValueError("the batch norm has no running statistics (track_running_stats=False): nothing to fold")
    if bn.num_features != out:
        raise ValueError(f"the batch norm has {bn.num_features} channels, the layer {out} outputs")
    wide = torch.float32 if like.device.type == "mps" else torch.float64
    with torch.no_grad():
        s = torch.rsqrt(bn.running_var.to(wide) + bn.eps)
        if bn.weight is not None:
            s = s * bn.weight.to(wide)
        t = -bn.running_mean.to(wide) * s
        if bn.bias is not None:
            t = t + bn.bias.to(wide)
    return s, t


_ORDER = ("weight", "bias", "weight_g", "bias_g", "weight_b", "bias_b")


def _plain_copy(layer: QuadraticLayer) -> QuadraticLayer:
    """A deep copy of ``layer`` whose weights are plain Parameters holding their current values
    (parametrizations evaluated and dropped)."""
    values = {}
    if parametrize.is_parametrized(layer):
        with torch.no_grad():
            values = {n: getattr(layer, n) for n in layer.parametrizations}
    fused = copy.deepcopy(layer)
    if values:
        # not parametrize.remove_parametrizations: the copy shares its parametrized class with
        # `layer`, and removing deletes the class's properties, breaking `layer` too
        fused.__class__ = parametrize.type_before_parametrizations(layer)
        del fused._modules["parametrizations"]
        for n, v in values.items():
            fused.register_parameter(n, nn.Parameter(v.clone()))
        ordered = {n: fused._parameters[n] for n in _ORDER if n in fused._parameters}
        ordered.update(fused._parameters)  # the parameters' order of a layer built as it is
        fused._parameters.clear()
        fused._parameters.update(ordered)
    for name in _ORDER:
        p = getattr(fused, name, None)
        if p is not None and not isinstance(p, nn.Parameter):
            raise ValueError(
                f"{type(layer).__name__}.{name} is computed by a hook (the legacy weight_norm?), not a "
                "parameter: remove it (torch.nn.utils.remove_weight_norm) before fusing"
            )
    return fused


def _fold(layer: QuadraticLayer, bn) -> QuadraticLayer:
    if not isinstance(layer, QuadraticLayer):
        raise TypeError(f"expected a quadratic layer, got {type(layer).__name__}: use torch.nn.utils.fusion")
    if layer.training:
        raise ValueError("fusion is for eval mode: call .eval() on the layer (and the batch norm)")
    if not neuron_kind(layer.neuron).hand_written:
        raise ValueError(
            f"{type(layer).__name__}: batch norm folds into the kinds {NEURONS}, not into neuron={layer.neuron!r}; "
            "keep the batch norm as a layer"
        )
    fused = _plain_copy(layer)
    s, t = _bn_affine(bn, layer._out, layer.weight)
    kind = fused.neuron

    def param(value, like):
        return nn.Parameter(value.to(like.dtype), requires_grad=like.requires_grad)

    def scaled(p):  # p * s along the output channels
        return None if p is None else param(p.to(s.dtype) * s.view(-1, *[1] * (p.dim() - 1)), p)

    with torch.no_grad():
        w = fused.weight
        zeros = torch.zeros(layer._out, dtype=s.dtype, device=w.device)
        fused.weight, fused.bias = scaled(fused.weight), scaled(fused.bias)
        if kind in ("parabolic", "poly"):  # no constant: a full neuron with W_b = 0 takes t
            if kind == "poly":  # r*g + r = r*(g + 1)
                fused.bias_g = param(fused.bias_g + 1, fused.bias_g)
            fused.neuron = "full"
            fused.weight_b = param(torch.zeros_like(w), w)
        else:
            fused.weight_b = scaled(fused.weight_b)
        if kind == "compact" and fused.bias is None:  # compact adds b_r and c together: both or none
            fused.bias = param(zeros, w)
        c = fused.bias_b.to(s.dtype) if fused.bias_b is not None else zeros
        fused.bias_b = param(c * s + t if kind in ("full", "compact") else t, w)
    fused._pack_()
    return fused


# -- torch.ao.quantization.fuse_modules ---------------------------------------------------------
def _ao_fuse_bn(is_qat, layer, bn):
    if is_qat:
        raise NotImplementedError(
            f"{type(layer).__name__}: torch.ao's QAT fusion has no quadratic layer; "
            "fuse for inference (fuse_modules) or with quadnn.fusion.fuse_conv_bn_eval"
        )
    return _fold(layer, bn)


def _ao_fuse_bn_relu(is_qat, layer, bn, relu):
    return nn.Sequential(_ao_fuse_bn(is_qat, layer, bn), relu)


_BN = {
    QuadraticConv1d: nn.BatchNorm1d,
    QuadraticConv2d: nn.BatchNorm2d,
    QuadraticConv3d: nn.BatchNorm3d,
    QuadraticLinear: nn.BatchNorm1d,
}


def register_with_torch_ao(mappings) -> None:
    """Add the quadratic layers' conv-BN, conv-BN-ReLU and linear-BN fusions to torch.ao's table
    of fuser methods (``mappings``: ``torch.ao.quantization.fuser_method_mappings``)."""
    table = mappings._DEFAULT_OP_LIST_TO_FUSER_METHOD
    for layer, bn in _BN.items():
        table.setdefault((layer, bn), _ao_fuse_bn)
        if layer is not QuadraticLinear:
            table.setdefault((layer, bn, nn.ReLU), _ao_fuse_bn_relu)
