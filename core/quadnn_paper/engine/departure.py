"""How far a trained quadratic network has moved from its linear twin, recorded in its result.

ReLinear starts every quadratic term at its reference value (:func:`quadnn.relinear.init_`), where
each layer computes its linear branch alone. After training, two measures tell whether the
quadratic terms did anything:

- weight-space, :func:`term_norms`: the terms' departure from their reference, relative to the
  linear weights;
- function-space, :func:`measure`: the share of test images whose predicted class changes when the
  trained network is replaced by its :func:`linear_twin` (every quadratic term reset to its
  reference), and that twin's own error.

A network whose terms moved by 0.3 % of ``W_r`` and changes no prediction of its twin is a linear
network in all but name: a comparison of it with a conventional one tests nothing quadratic. The
sections read the measure to say whether a claim about the quadratic terms was tested where the
terms acted.
"""

from __future__ import annotations

import copy
import math

import torch
from torch import nn

from quadnn.layers import QuadraticLayer

__all__ = ["measure", "term_norms", "linear_twin"]

# families of quadratic terms, by the attribute that holds them
_FAMILIES = {"weight_g": "gate", "weight_b": "power", "bias_g": "gate_bias", "bias_b": "constant"}


@torch.no_grad()
def term_norms(model: nn.Module) -> dict[str, float]:
    """The quadratic terms' distance from their ReLinear reference, over every quadratic layer.

    Returns ``gate`` (``||W_g - 0|| / ||W_r||``), ``power`` (``||W_b|| / ||W_r||``), ``terms``
    (both weights together over ``||W_r||``; Frobenius norms summed over layers), and the root mean
    square move of the gate bias and of the constant from their references (``gate_bias``:
    ``rms(b_g - 1)`` for the full neuron, ``constant``: ``rms(c)``). A family that no layer has is
    left out; a model without quadratic layers gives ``{}``.
    """
    sq = dict.fromkeys(_FAMILIES.values(), 0.0)
    count = dict.fromkeys(_FAMILIES.values(), 0)
    linear = 0.0
    seen: set[int] = set()
    for module in model.modules():
        if not isinstance(module, QuadraticLayer) or id(module) in seen:
            continue
        seen.add(id(module))  # a layer used twice is counted once
        linear += float(module.weight.double().pow(2).sum())
        for name, p, _, ref in module.quadratic_terms():
            fam = _FAMILIES[name]
            sq[fam] += float((p.double() - ref).pow(2).sum())
            count[fam] += p.numel()
    if not seen:
        return {}
    lin = math.sqrt(linear) or math.inf
    out = {}
    for fam in ("gate", "power"):
        if count[fam]:
            out[fam] = math.sqrt(sq[fam]) / lin
    out["terms"] = math.sqrt(sq["gate"] + sq["power"]) / lin
    for fam in ("gate_bias", "constant"):
        if count[fam]:
            out[fam] = math.sqrt(sq[fam] / count[fam])
    return out


@torch.no_grad()
def linear_twin(model: nn.Module) -> nn.Module:
    """A copy of ``model`` with every quadratic term at its ReLinear reference: each quadratic layer
    computes its trained linear branch alone; everything else (norms and their statistics, the
    classifier, conventional layers) is the trained model's. ``model`` is left as it is."""
    twin = copy.deepcopy(model)
    for module in twin.modules():
        if isinstance(module, QuadraticLayer):
            module.relinear_init_()
    return twin


def measure(model: nn.Module, task, device, amp: bool) -> dict | None:
    """``{gate, power, terms, gate_bias, constant, changed, twin_error}`` of a trained ``model`` (norm
    ratios as fractions, ``changed`` and ``twin_error`` in % of the test images); None for a model
    without quadratic layers. ``changed``/``twin_error`` are left out where the task has no
    predictions (:meth:`Task.predictions`)."""
    out = term_norms(model)
    if not out:
        return None
    ours = task.predictions(model, device, amp)
    if ours is not None:
        twin = task.predictions(linear_twin(model), device, amp)
        (pred, label), (twin_pred, _) = ours, twin
        out["changed"] = 100.0 * float((pred != twin_pred).double().mean())
        out["twin_error"] = 100.0 * float((twin_pred != label).double().mean())
    return out
