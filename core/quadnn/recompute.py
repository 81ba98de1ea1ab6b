"""Choose, layer by layer, what a quadratic network keeps for backward under a memory budget.

A quadratic layer's backward pass needs r and g, two tensors the size of its output. Each layer
can keep both (``implementation="speed"``), keep r and recompute g (``"fast"``), or recompute
both (``"lean"``); every tensor not kept costs one convolution with that many outputs in the
backward pass. Memory saved per recomputed FLOP is highest where a layer's output is large
and its convolution cheap per output value: few input channels, small kernels (in a CIFAR
ResNet, the 16-channel stage at full resolution).

:func:`plan_recompute` spends a budget of kept tensors where they save the most time:

    plan = quadnn.plan_recompute(model, torch.randn(1, 3, 32, 32), budget=1.0)

``budget`` is the average number of extra output-sized tensors a quadratic layer may keep.
``budget=1.0`` keeps as much as ``"fast"`` everywhere, but recomputes in the layers where
recomputing is cheapest, so the same memory costs fewer recomputed convolutions.
``budget=2.0`` is ``"speed"`` (a lone layer's default) everywhere, ``0`` is ``"lean"`` everywhere.

:data:`DEFAULT_BUDGET` is the budget the registered models are built with. It is chosen from the
measured frontier (``quadnn_paper.bench`` rows ``budget=B``; the efficiency notebook re-derives it on
every run and reports whether it still agrees): the least memory among the budgets that beat
the naive formulation in memory and, resolved over rounds, in time; the fastest when none does.
On a CPU (batch 128, 32x32, ResNet20, budgets 1 to 2) budget 2 had the lowest median time, and
no lower budget was resolved faster than naive: every recomputed gate costs a convolution. So the
default keeps r and g everywhere, at about 0.8x naive's extra memory with no recomputation.
Pass ``recompute_budget=1.0`` to a model for the memory of one tensor per layer, at some time.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .layers import QuadraticLayer

__all__ = ["plan_recompute", "DEFAULT_BUDGET"]

DEFAULT_BUDGET = 2.0  # see the module docstring: where the measured frontier puts the default


def _cost_per_output(layer: QuadraticLayer) -> int:
    """Multiply-adds of the layer's linear branch per output value (its recompute cost per unit)."""
    return layer.weight[0].numel()  # in_channels / groups * prod(kernel_size), or in_features


@torch.no_grad()
def plan_recompute(
    model: nn.Module, *example_inputs, budget: float = DEFAULT_BUDGET, apply: bool = True
) -> dict[str, str]:
    """Set each quadratic layer's implementation so the layers keep at most ``budget`` extra
    output-sized tensors on average, recomputing where it costs the fewest FLOPs per byte.

    ``example_inputs`` are run once through ``model`` (batch size 1 is enough: only relative
    sizes matter) to learn each layer's output size. Compact neurons keep nothing extra in any
    case and are left alone. Returns ``{module name: implementation}``; with ``apply=False`` the
    model is left unchanged.
    """
    if not (isinstance(budget, (int, float)) and 0 <= budget <= 2 and not math.isnan(budget)):
        raise ValueError(f"budget must be a number of kept tensors per layer in [0, 2], got {budget!r}")
    layers = {name: m for name, m in model.named_modules() if isinstance(m, QuadraticLayer) and m.neuron != "compact"}
    if not layers:
        return {}
    sizes, hooks = {}, []
    for name, m in layers.items():
        hooks.append(m.register_forward_hook(lambda mod, inp, out, name=name: sizes.__setitem__(name, out.numel())))
    was_training = model.training
    try:
        model.eval()  # no batch-norm statistics updated by the probe
        model(*example_inputs)
    finally:
        model.train(was_training)
        for h in hooks:
            h.remove()
    unused = sorted(set(layers) - set(sizes))
    if unused:
        raise ValueError(f"the example input did not reach quadratic layers {unused}")
    # Start from keeping everything; give up kept tensors where recomputing is cheapest.
    plan = {name: "speed" for name in layers}
    allowance = budget * sum(sizes.values())
    kept = 2 * sum(sizes.values())
    for name in sorted(layers, key=lambda n: (_cost_per_output(layers[n]), n)):
        if kept <= allowance:
            break
        drop = 1 if kept - sizes[name] <= allowance else 2  # keep r when that is enough
        plan[name] = "fast" if drop == 1 else "lean"
        kept -= drop * sizes[name]
    if apply:
        for name, impl in plan.items():
            layers[name].implementation = impl
    return plan
