"""Quadratic neurons as drop-in replacements for ``nn.Conv1d``/``nn.Conv2d``/``nn.Linear``.

For an input ``x`` (and ``x*x`` taken elementwise) the neuron kinds are

==============  ==========================================================
``"full"``      ``(W_r x + b_r) * (W_g x + b_g) + W_b (x*x) + c``  (the paper's)
``"compact"``   ``W_r x + b_r + W_b (x*x)``                         (the paper's compact form)
``"parabolic"`` ``(W_r x + b_r) * (W_g x + b_g)``                   (Tsapanos et al.)
``"poly"``      ``(W_r x + b_r) * (W_g x + b_g) + W_r x + b_r``     (Chrysos et al., order 2)
==============  ==========================================================

Each layer subclasses the torch layer it extends: ``weight``/``bias`` are the linear
branch ``W_r``/``b_r``, so a conventional state_dict loads into it. The extra terms are
``weight_g``/``bias_g`` (the gate) and ``weight_b``/``bias_b`` (the power term and ``c``);
a kind without a term registers it as ``None``.

``bias=False`` drops the additive biases ``b_r`` and ``c``. The gate bias ``b_g`` is kept
whenever there is a gate: ReLinear needs ``b_g = 1`` for the neuron to start out linear.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "NEURONS",
    "QuadraticConv1d",
    "QuadraticConv2d",
    "QuadraticLinear",
    "QuadraticLayer",
    "Square",
    "relinear_reference",
]

NEURONS = ("full", "compact", "parabolic", "poly")

# Which extra terms each neuron kind has: (gate g, power term W_b, constant c)
_TERMS = {
    "full": (True, True, True),
    "compact": (False, True, False),
    "parabolic": (True, False, False),
    "poly": (True, False, False),
}


def check_neuron(neuron: str) -> str:
    if neuron not in NEURONS:
        raise ValueError(f"neuron must be one of {NEURONS}, got {neuron!r}")
    return neuron


def relinear_reference(neuron: str, name: str) -> float:
    """The value of quadratic term ``name`` at which a ``neuron`` computes its linear branch.

    full/parabolic: w_g = 0, b_g = 1, w_b = 0, c = 0; poly: w_g = 0, b_g = 0
    (its output is r*g + r); compact: w_b = 0.
    """
    if name == "bias_g" and neuron in ("full", "parabolic"):
        return 1.0
    return 0.0


class QuadraticLayer(nn.Module):
    """Shared machinery of the quadratic layers; not used on its own.

    Subclasses set ``_linear_op(x, weight, bias)`` (the conventional op) and
    ``_check_input(x)``.
    """

    neuron: str

    def _init_quadratic(self, neuron: str, bias: bool, factory_kwargs: dict) -> None:
        has_gate, has_power, has_const = _TERMS[neuron]
        shape, out = self.weight.shape, self.weight.shape[0]
        present = {"weight_g": has_gate, "bias_g": has_gate, "weight_b": has_power, "bias_b": has_const and bias}
        for name, here in present.items():
            size = shape if name.startswith("weight") else (out,)
            self.register_parameter(name, nn.Parameter(torch.empty(size, **factory_kwargs)) if here else None)

    # -- parameters -------------------------------------------------------------
    def quadratic_terms(self):
        """Yield ``(name, parameter, group, reference)`` for each quadratic term present.

        ``group`` is ``"g"`` (the gate: weight_g, bias_g) or ``"b"`` (the power term and
        constant: weight_b, bias_b); ``reference`` is the ReLinear value of that term.
        """
        for name, group in (("weight_g", "g"), ("bias_g", "g"), ("weight_b", "b"), ("bias_b", "b")):
            p = getattr(self, name, None)
            if p is not None:
                yield name, p, group, relinear_reference(self.neuron, name)

    @torch.no_grad()
    def relinear_init_(self) -> None:
        """Set the quadratic terms so the layer computes exactly its linear branch."""
        for _, p, _, ref in self.quadratic_terms():
            p.fill_(ref)

    def reset_parameters(self) -> None:
        super().reset_parameters()  # the linear branch, as torch initialises it
        if hasattr(self, "weight_g"):  # torch's __init__ calls us before the terms exist
            self.relinear_init_()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        # A conventional checkpoint (no quadratic term at all) loads, strictly, as the linear
        # branch with the quadratic terms at their ReLinear reference; a checkpoint holding
        # only some of the terms is still reported as incomplete.
        names = [prefix + name for name, *_ in self.quadratic_terms()]
        conventional = not any(n in state_dict for n in names)
        before = len(missing_keys)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)
        if conventional and names:
            missing_keys[before:] = [k for k in missing_keys[before:] if k not in names]
            self.relinear_init_()

    # -- forward ----------------------------------------------------------------
    def _check_input(self, x: torch.Tensor) -> None:
        if x.dtype != self.weight.dtype and not torch.is_autocast_enabled(x.device.type):
            raise ValueError(
                f"{type(self).__name__}: input dtype {x.dtype} does not match the weight dtype "
                f"{self.weight.dtype}; cast the input or the layer (valid: {self.weight.dtype})"
            )

    def _gated(self, x: torch.Tensor):
        """Return (r, g): the linear branch and the gate, from one fused op."""
        n = self.weight.shape[0]
        groups = getattr(self, "groups", 1)
        if groups == 1:
            w = torch.cat([self.weight, self.weight_g], 0)
            b = torch.cat([self.bias if self.bias is not None else self.bias_g.new_zeros(n), self.bias_g])
            r, g = self._linear_op(x, w, b).split(n, dim=self._channel_dim)
            return r, g
        # Grouped convolution: interleave r and g per group so each group sees its own input slice.
        w = torch.stack([self.weight.unflatten(0, (groups, -1)), self.weight_g.unflatten(0, (groups, -1))], 1)
        b_r = self.bias if self.bias is not None else self.bias_g.new_zeros(n)
        b = torch.stack([b_r.unflatten(0, (groups, -1)), self.bias_g.unflatten(0, (groups, -1))], 1)
        y = self._linear_op(x, w.flatten(0, 2), b.flatten())
        y = y.unflatten(1, (groups, 2, -1))
        return y[:, :, 0].flatten(1, 2), y[:, :, 1].flatten(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input(x)
        neuron = self.neuron
        if neuron == "compact":
            return self._linear_op(x, self.weight, self.bias) + self._linear_op(x * x, self.weight_b, None)
        r, g = self._gated(x)
        if neuron == "parabolic":
            return r * g
        if neuron == "poly":
            return r * (g + 1)
        return r * g + self._linear_op(x * x, self.weight_b, self.bias_b)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, neuron={self.neuron!r}"


class _QuadraticConvNd(QuadraticLayer):
    _channel_dim = 1

    def _linear_op(self, x, weight, bias):
        return self._conv_forward(x, weight, bias)

    def _check_input(self, x):
        nd = len(self.kernel_size)
        if x.dim() not in (nd + 1, nd + 2) or x.shape[-nd - 1] != self.in_channels:
            raise ValueError(
                f"{type(self).__name__}: expected input of shape (N, {self.in_channels}, "
                f"{', '.join('*' * nd)}) or unbatched ({self.in_channels}, {', '.join('*' * nd)}), "
                f"got {tuple(x.shape)}"
            )
        super()._check_input(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == len(self.kernel_size) + 1:  # unbatched, as torch's convolutions accept
            self._check_input(x)
            return super().forward(x.unsqueeze(0)).squeeze(0)
        return super().forward(x)


class QuadraticConv1d(_QuadraticConvNd, nn.Conv1d):
    """``nn.Conv1d`` whose neurons are quadratic; see the module docstring for ``neuron``."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", neuron="full", device=None, dtype=None):
        self.neuron = check_neuron(neuron)
        dd = dict(device=device, dtype=dtype)
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, **dd)
        self._init_quadratic(neuron, bias, dd)
        self.reset_parameters()


class QuadraticConv2d(_QuadraticConvNd, nn.Conv2d):
    """``nn.Conv2d`` whose neurons are quadratic; see the module docstring for ``neuron``."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", neuron="full", device=None, dtype=None):
        self.neuron = check_neuron(neuron)
        dd = dict(device=device, dtype=dtype)
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, **dd)
        self._init_quadratic(neuron, bias, dd)
        self.reset_parameters()


class QuadraticLinear(QuadraticLayer, nn.Linear):
    """``nn.Linear`` whose neurons are quadratic; see the module docstring for ``neuron``."""

    _channel_dim = -1

    def __init__(self, in_features, out_features, bias=True, neuron="full", device=None, dtype=None):
        self.neuron = check_neuron(neuron)
        dd = dict(device=device, dtype=dtype)
        super().__init__(in_features, out_features, bias, **dd)
        self._init_quadratic(neuron, bias, dd)
        self.reset_parameters()

    def _linear_op(self, x, weight, bias):
        return F.linear(x, weight, bias)

    def _check_input(self, x):
        if x.dim() == 0 or x.shape[-1] != self.in_features:
            raise ValueError(
                f"{type(self).__name__}: expected input with last dimension {self.in_features}, "
                f"got shape {tuple(x.shape)}"
            )
        super()._check_input(x)


class Square(nn.Module):
    """The activation ``z -> z*z`` (for "quadratic activation" baselines)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * x
