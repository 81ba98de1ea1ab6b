"""What a quadratic layer does when a tool that acts on ``weight`` meets it.

The layers subclass torch's, so tools that select layers by ``isinstance`` and act on ``weight``
reach them, and would act on the linear branch alone:

- the legacy ``torch.nn.utils.weight_norm(layer)`` registers the weight's magnitude as
  ``weight_g``, the gate's name: refused, naming the clash, with the layer left as it was;
- ``torch.nn.utils.fusion.fuse_conv_bn_eval``/``fuse_linear_bn_eval`` fold batch norm into
  ``weight`` and ``bias`` only: refused, naming :mod:`quadnn.fusion`, which folds it into every
  term (the conventional layer they copy is left as it was);
- torchao's ``quantize_`` quantizes ``weight`` only: the layer stays in float and warns
  (``quadnn.convert.quantize_`` quantizes the three weights, the linear branch's last);
- ``torch.ao.quantization`` marks layers with a ``qconfig`` and has no quantized quadratic layer:
  the layer stays in float and warns.
"""

from __future__ import annotations

import inspect
import sys
import warnings

import torch
from torch import nn
from torch.nn.utils import fusion, parametrize
from torch.nn.utils.weight_norm import WeightNorm as _WeightNorm

__all__ = ["WeightGuards"]

_WEIGHTS = ("weight", "weight_g", "weight_b")
# torch's conv/linear-BN fusion, which rewrites weight and bias alone
_TORCH_FUSERS = (fusion.fuse_conv_bn_eval.__code__, fusion.fuse_linear_bn_eval.__code__)
_WEIGHT_NORM_APPLY = inspect.unwrap(_WeightNorm.apply).__code__  # under torch's deprecation wrapper


def _caller(codes, within: int = 4):
    """The nearest of the frames calling the function that asks (up to ``within`` above it) that
    runs one of ``codes``, or None."""
    frame = sys._getframe(2)
    for _ in range(within):
        if frame is None or frame.f_code in codes:
            return frame
        frame = frame.f_back
    return None


def _quantized(t) -> bool:
    """A quantized weight: torch's quantized dtypes or a torchao tensor subclass (not imported:
    torchao is not a dependency)."""
    return isinstance(t, torch.Tensor) and (t.is_quantized or type(t).__module__.split(".")[0] == "torchao")


class WeightGuards(nn.Module):
    """The guards above, for a layer with ``weight``, ``weight_g`` and ``weight_b``."""

    def register_parameter(self, name: str, param) -> None:
        # The legacy torch.nn.utils.weight_norm(layer, "weight") deletes `weight` and registers
        # its magnitude as `weight_g`, the gate's name: refuse rather than lose the gate.
        if (
            name == "weight_g"
            and "weight_g" in self._parameters
            and "weight" not in self._parameters
            and not parametrize.is_parametrized(self, "weight")
        ):
            self._refuse_legacy_weight_norm()
        if name in ("weight", "bias") and _caller(_TORCH_FUSERS) is not None:
            raise RuntimeError(
                f"{type(self).__name__}: torch.nn.utils.fusion folds batch norm into weight and bias "
                "only, not into this layer's other terms; quadnn.fusion.fuse_conv_bn_eval(layer, bn) "
                "(fuse_linear_bn_eval for a linear layer) folds it exactly"
            )
        if name in _WEIGHTS and _quantized(param) and not self._whole_once_quantized(name):
            # torchao's quantize_ selects layers by isinstance(m, nn.Linear) and quantizes
            # `weight` only: the linear branch alone, a neuron neither float nor quantized
            warnings.warn(
                f"{self!r} left in float: quantizing 'weight' alone would quantize only its linear "
                "branch W_r, not the quadratic terms; quadnn.convert.quantize_(model, config) "
                "quantizes its three weights",
                stacklevel=2,
            )
            return
        super().register_parameter(name, param)
        if name == "weight" and _quantized(param):
            self.implementation = "naive"  # three operations, each on its own quantized weight

    def _refuse_legacy_weight_norm(self) -> None:
        """Put back the `weight` that the legacy weight_norm has just deleted (the one it holds,
        in the position it had: first), then refuse, naming only what this layer has."""
        frame = _caller((_WEIGHT_NORM_APPLY,))  # weight_norm's apply -> register_parameter -> here
        weight = None if frame is None else frame.f_locals.get("weight")
        restored = isinstance(weight, nn.Parameter)
        if restored:
            rest = dict(self._parameters)
            self._parameters.clear()
            self._parameters.update({"weight": weight, **rest})
        # (not found only if torch's weight_norm changes: then say what state the layer is in)
        state = "the layer is left as it was" if restored else "weight_norm has removed 'weight': rebuild the layer"
        clash = (
            "which is this layer's gate W_g (the quadratic term)"
            if self._parameters["weight_g"] is not None
            else "a parameter name this layer keeps (None for a compact neuron)"
        )
        raise RuntimeError(
            f"{type(self).__name__}: torch.nn.utils.weight_norm(layer, 'weight') would register the "
            f"weight's magnitude as 'weight_g', {clash}; {state}. "
            "torch.nn.utils.parametrizations.weight_norm keeps every parameter"
        )

    def _whole_once_quantized(self, name: str) -> bool:
        """Whether quantizing weight `name` leaves the layer whole: the linear branch's weight
        goes last, once the quadratic terms' weights are quantized (quadnn.convert.quantize_)."""
        if name != "weight":
            return True
        return all(_quantized(self._parameters[n]) for n in _WEIGHTS[1:] if self._parameters.get(n) is not None)

    # torch.ao.quantization (eager mode) marks the layers it should quantize with a `qconfig`; it
    # has no quantized counterpart for a quadratic layer and would leave it in float silently.
    @property
    def qconfig(self):
        try:
            return self.__dict__["_qconfig"]
        except KeyError:
            raise AttributeError("qconfig") from None

    @qconfig.setter
    def qconfig(self, value):
        if value is not None:
            warnings.warn(
                f"{self!r} left in float: torch.ao.quantization has no quantized quadratic "
                "layer; quadnn.convert.quantize_ quantizes it with torchao",
                stacklevel=2,
            )
        self.__dict__["_qconfig"] = value

    @qconfig.deleter
    def qconfig(self):
        self.__dict__.pop("_qconfig", None)
