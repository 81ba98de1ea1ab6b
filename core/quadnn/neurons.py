"""Neuron kinds: each kind is one :class:`Neuron`, its terms and how they combine.

A quadratic layer computes up to three linear maps of the conventional layer's shape, ``r = W_r x + b_r``
(the linear branch, always), ``g = W_g x + b_g`` (the gate) and ``p = W_b (x*x) + c`` (the power
term), and the kind's :attr:`Neuron.combine` makes the output of them. What a layer registers
(``weight_g``/``bias_g``, ``weight_b``/``bias_b``), its ReLinear initialisation, its naive forward
and the multiply-accumulates the counters report are read from the kind.

Every kind runs its plain form differentiated by autograd: ``implementation="naive"`` (one operation
per linear map) and ``"fused"`` (the linear branch and the gate as one operation over [W_r; W_g]), both
built from :attr:`Neuron.combine`. The four kinds of the paper also have a hand-written backward (the
custom autograd Function of ``"fast"``, ``"speed"`` and ``"lean"``, :mod:`quadnn.quadratic_function`,
which the property tests hold equal to autograd's) and the batch-norm fusion (:mod:`quadnn.fusion`).
A kind added with :func:`register` runs its plain form under every ``implementation`` ("fused" as
above, the others as "naive"); the conv-BN fusion refuses it by name::

    quadnn.neurons.register(Neuron("gated_poly", lambda r, g, p: r * g + r + p, gate=True, power=True))
    layer = quadnn.QuadraticConv2d(16, 32, 3, neuron="gated_poly")
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

__all__ = ["Neuron", "NEURONS", "register", "unregister", "neuron_kind"]


@dataclass(frozen=True)
class Neuron:
    """One neuron kind.

    ``combine(r, g, p)`` is the output from the linear branch ``r``, the gate ``g`` and the power
    term ``p`` (None where the kind has no such term); ``gate``/``power``/``constant`` say which
    terms it has (``constant``: ``c``, added to ``p``); ``gate_bias`` is the value of ``b_g`` at
    which, with ``W_g = 0`` and ``W_b = 0``, ``c = 0``, the neuron computes ``r`` (ReLinear's start).
    """

    name: str
    combine: Callable[[torch.Tensor, torch.Tensor | None, torch.Tensor | None], torch.Tensor]
    gate: bool = False
    power: bool = False
    constant: bool = False
    gate_bias: float = 1.0

    @property
    def linear_maps(self) -> int:
        """Linear maps of the conventional layer's size a forward runs (what the counters count)."""
        return 1 + self.gate + self.power

    @property
    def hand_written(self) -> bool:
        """Whether quadnn's fused implementations and batch-norm fusion know this kind."""
        return _BUILT_IN.get(self.name) is self


_BUILT_IN = {
    n.name: n
    for n in (
        Neuron("full", lambda r, g, p: r * g + p, gate=True, power=True, constant=True),  # the paper's
        Neuron("compact", lambda r, g, p: r + p, power=True, constant=True),
        Neuron("parabolic", lambda r, g, p: r * g, gate=True),  # product of two affine maps
        Neuron("poly", lambda r, g, p: r * g + r, gate=True, gate_bias=0.0),  # Chrysos et al., order 2
    )
}
NEURONS = tuple(_BUILT_IN)  # the paper's kinds
_KINDS: dict[str, Neuron] = dict(_BUILT_IN)


def neuron_kind(name: str) -> Neuron:
    """The registered kind called ``name``."""
    kind = _KINDS.get(name)
    if kind is None:
        raise ValueError(f"neuron must be one of {tuple(_KINDS)}, got {name!r}")
    return kind


def register(kind: Neuron) -> Neuron:
    """Make ``kind`` available as ``neuron=kind.name`` to every quadratic layer."""
    if kind.name in _KINDS or kind.name == "conventional":
        raise ValueError(f"a neuron kind named {kind.name!r} exists already; choose another name")
    _KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove a kind added with :func:`register` (the paper's kinds stay)."""
    if name in _BUILT_IN:
        raise ValueError(f"{name!r} is one of the paper's kinds {NEURONS}; it cannot be removed")
    neuron_kind(name)
    del _KINDS[name]
