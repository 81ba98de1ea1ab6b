"""ReLinear: train a quadratic network by letting each neuron grow out of its linear self.

- :func:`init_` sets every quadratic term to its reference value, so each quadratic
  layer computes exactly its linear branch (:func:`random_init_` draws them instead, as a
  network trained without ReLinear starts).
- :func:`param_groups` (ReLinear-sg, shrinking gradients) gives the gate terms
  (``weight_g``, ``bias_g``) and the power terms (``weight_b``, ``bias_b``) their own
  learning rates, as ordinary torch parameter groups.
- :class:`Shrink` (ReLinear-sw, shrinking weights) pulls the quadratic terms toward their
  reference after every optimiser step, by an l1 or l2 rule.
- :func:`transfer_weights_` starts the linear branches from a trained conventional model.

Parameters are selected by the module that owns them (:class:`~quadnn.QuadraticLayer`)
and the attribute name, never by substrings of their qualified names.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator

import torch
from torch import nn

from .layers import QuadraticLayer

__all__ = [
    "init_",
    "random_init_",
    "quadratic_terms",
    "param_groups",
    "QUADRATIC_DECAY",
    "Shrink",
    "ReferenceWeightDecay",
    "transfer_weights_",
]


def quadratic_terms(model: nn.Module) -> Iterator[tuple[str, nn.Parameter, str, float]]:
    """Yield ``(qualified_name, parameter, group, reference)`` for every quadratic term."""
    for mod_name, module in model.named_modules():
        if isinstance(module, QuadraticLayer):
            for name, p, group, ref in module.quadratic_terms():
                yield (f"{mod_name}.{name}" if mod_name else name), p, group, ref


@torch.no_grad()
def init_(model: nn.Module) -> nn.Module:
    """ReLinear initialisation of every quadratic layer in ``model`` (in place); returns it."""
    for module in model.modules():
        if isinstance(module, QuadraticLayer):
            module.relinear_init_()
    return model


@torch.no_grad()
def random_init_(model: nn.Module) -> nn.Module:
    """Draw every quadratic term of ``model`` as torch draws its layer's linear weight,
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (in place, in module order); returns it. The start of a
    quadratic network trained without ReLinear, the baseline its initialisation is compared with."""
    for module in model.modules():
        if isinstance(module, QuadraticLayer):
            bound = 1.0 / math.sqrt(module.weight[0].numel())  # fan_in: in_features (x kernel / groups)
            for _, p, _, _ in module.quadratic_terms():
                p.uniform_(-bound, bound)
    return model


QUADRATIC_DECAY = ("reference", "zero")


def _check_number(name: str, value, lo: float, hi: float, where: str = "") -> None:
    """A real, finite number in [lo, hi] (hi = inf: any finite value >= lo), else ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number{where}, got {value!r} ({type(value).__name__})")
    if not math.isfinite(value) or not lo <= value <= hi:
        bound = f"[{lo:g}, {hi:g}]" if math.isfinite(hi) else f"[{lo:g}, inf), finite"
        raise ValueError(f"{name} must lie in {bound}{where}, got {value!r}")


def param_groups(
    model: nn.Module,
    lr: float,
    lr_g: float,
    lr_b: float,
    weight_decay: float = 0.0,
    quadratic_decay: str = "reference",
    verbose: bool = False,
) -> list[dict]:
    """ReLinear-sg as torch parameter groups, usable with any optimiser.

    Returns three groups, named ``"linear"`` (everything that is not a quadratic term:
    linear branches, norms, classifier, conventional layers) at ``lr``, ``"g"`` at ``lr_g``
    and ``"b"`` at ``lr_b``. Schedulers that scale every group's lr by the same factor
    (StepLR, MultiStepLR, cosine with ``eta_min=0``) keep the ratios between them.

    ``weight_decay`` applies to all three groups; ``quadratic_decay`` says how on the g- and
    b-groups:

    - ``"reference"``: toward each term's ReLinear reference value (b_g toward 1), decoupled.
      Those groups carry torch's ``weight_decay=0`` and a ``reference_weight_decay`` entry, which
      :class:`ReferenceWeightDecay` applies after each optimiser step.
    - ``"zero"``: the official ReLinear code's, ordinary (coupled, L2) weight decay toward 0 on
      every group, b_g included: the g- and b-groups carry torch's ``weight_decay``.
    """
    for name, value in (("lr", lr), ("lr_g", lr_g), ("lr_b", lr_b), ("weight_decay", weight_decay)):
        _check_number(name, value, 0.0, math.inf)
    if quadratic_decay not in QUADRATIC_DECAY:
        raise ValueError(f"quadratic_decay must be one of {QUADRATIC_DECAY}, got {quadratic_decay!r}")
    g, b, refs = [], [], {}
    for _, p, which, ref in quadratic_terms(model):
        if p not in refs:  # a layer shared between two places is listed once
            (g if which == "g" else b).append(p)
            refs[p] = ref
    quadratic = {id(p) for p in g + b}
    linear = [p for p in model.parameters() if id(p) not in quadratic]

    def group(name, params, rate):
        if name == "linear" or quadratic_decay == "zero":
            return dict(name=name, params=params, lr=rate, weight_decay=weight_decay)
        toward = dict(reference_weight_decay=weight_decay, references=[refs[p] for p in params])
        return dict(name=name, params=params, lr=rate, weight_decay=0.0, **toward)

    groups = [group("linear", linear, lr), group("g", g, lr_g), group("b", b, lr_b)]
    if verbose:
        print(describe_groups(groups))
    return groups


def describe_groups(groups: list[dict]) -> str:
    """One line per group: name, tensors, parameters, lr, weight decay (and toward what)."""

    def decay(grp):
        if grp.get("reference_weight_decay"):
            return f"{grp['reference_weight_decay']:g} toward the reference (decoupled)"
        return f"{grp.get('weight_decay', 0.0):g} toward 0"

    return "\n".join(
        f"param group {grp.get('name', i)!s:>6}: {len(grp['params']):4d} tensors, "
        f"{sum(p.numel() for p in grp['params']):>10,d} parameters, lr {grp['lr']:g}, weight decay {decay(grp)}"
        for i, grp in enumerate(groups)
    )


class ReferenceWeightDecay:
    """Decoupled weight decay toward the ReLinear reference for groups made by :func:`param_groups`.

    Call ``.step()`` right after ``optimizer.step()``: every parameter of a group with a
    nonzero ``reference_weight_decay`` wd moves as ``theta <- ref + (1 - lr * wd) (theta - ref)``,
    with the group's current lr (so schedulers act on it too).
    """

    def __init__(self, optimizer: torch.optim.Optimizer):
        self.optimizer = optimizer

    @torch.no_grad()
    def step(self) -> None:
        params, refs, keeps = [], [], []
        for group in self.optimizer.param_groups:
            wd = group.get("reference_weight_decay", 0.0)
            if wd:
                params += group["params"]
                refs += group["references"]
                keeps += [1.0 - group["lr"] * wd] * len(group["params"])
        _toward_reference_(params, refs, keeps)


def _toward_reference_(params: list, refs: list, keeps: list) -> None:
    """``theta <- ref + keep (theta - ref)`` for every parameter, in three multi-tensor operations
    whatever their number: each parameter's arithmetic is that of ``p.sub_(ref).mul_(keep).add_(ref)``,
    bit for bit (on a GPU each per-parameter operation would be a kernel launch)."""
    if params:
        torch._foreach_sub_(params, refs)
        torch._foreach_mul_(params, keeps)
        torch._foreach_add_(params, refs)


class Shrink:
    """ReLinear-sw: shrink the quadratic terms toward their reference after each step.

    ``mode="l1"``: ``theta <- theta - alpha * sign(theta - ref)`` (the paper's alpha);
    ``mode="l2"``: ``theta <- ref + (1 - alpha) (theta - ref)`` (the paper's beta).
    ``alpha_g`` acts on the gate terms (weight_g, bias_g), ``alpha_b`` on the power terms
    (weight_b, bias_b). The reference is the ReLinear value of each term, so a neuron is
    pulled toward its linear self (b_g toward 1 in the full neuron).

    The l1 rule is the paper's fixed step: an entry closer to its reference than ``alpha``
    steps across it (and oscillates around it thereafter), as with the original code.
    """

    MODES = ("l1", "l2")

    def __init__(self, model: nn.Module, mode: str = "l2", alpha_g: float = 0.0, alpha_b: float = 0.0):
        if mode not in self.MODES:
            raise ValueError(f"mode must be one of {self.MODES}, got {mode!r}")
        for name, a in (("alpha_g", alpha_g), ("alpha_b", alpha_b)):
            # A finite factor in both modes: l1 with alpha = inf would set every term to its
            # reference or, with inf * 0, to NaN after one step.
            _check_number(name, a, 0.0, 1.0 if mode == "l2" else math.inf, f" for mode {mode!r}")
        self.mode, self.alpha_g, self.alpha_b = mode, alpha_g, alpha_b
        self.terms = [(p, group, ref) for _, p, group, ref in quadratic_terms(model)]

    @torch.no_grad()
    def step(self) -> None:
        """One shrink of every term, in multi-tensor operations (l2: three, l1: four), each term's
        arithmetic that of the rule written per tensor, bit for bit."""
        alpha = {"g": self.alpha_g, "b": self.alpha_b}
        moving = [(p, ref, alpha[group]) for p, group, ref in self.terms if alpha[group] != 0.0]
        if not moving:
            return
        params, refs, alphas = (list(column) for column in zip(*moving))
        if self.mode == "l2":
            _toward_reference_(params, refs, [1.0 - a for a in alphas])
            return
        signs = torch._foreach_sub(params, refs)  # p.sub_(alpha * sign(p - ref)), for every term at once
        torch._foreach_sign_(signs)
        torch._foreach_mul_(signs, alphas)
        torch._foreach_sub_(params, signs)

    def __repr__(self) -> str:
        return (
            f"Shrink(mode={self.mode!r}, alpha_g={self.alpha_g:g}, alpha_b={self.alpha_b:g}, terms={len(self.terms)})"
        )


@torch.no_grad()
def transfer_weights_(conventional: nn.Module, quadratic: nn.Module) -> nn.Module:
    """Weight transfer: start ``quadratic`` from a trained ``conventional`` model of the same structure.

    Every parameter and buffer of ``conventional`` (convolutions, norms, classifier, ...) is
    copied into the entry of the same name in ``quadratic``; for a quadratic layer that is
    its linear branch (``b_r = 0`` where the conventional layer has no bias, as before batch
    norm). The quadratic terms are then ReLinear-initialised, so ``quadratic``
    computes what ``conventional`` computes. Returns ``quadratic``.

    Raises ``ValueError`` naming the layer when the two structures or shapes disagree.
    """
    source = conventional.state_dict()
    target = quadratic.state_dict()
    terms = {name for name, *_ in quadratic_terms(quadratic)}
    # b_r of a quadratic layer whose conventional counterpart has no bias starts at 0
    no_bias = {
        f"{name}.bias" if name else "bias"
        for name, m in quadratic.named_modules()
        if isinstance(m, QuadraticLayer) and m.bias is not None
    }
    no_bias -= set(source)
    for key, value in source.items():
        if key not in target:
            raise ValueError(
                f"transfer_weights_: {key!r} of the conventional model has no counterpart in the quadratic model"
            )
        if target[key].shape != value.shape:
            raise ValueError(
                f"transfer_weights_: shape mismatch at {key!r}: conventional {tuple(value.shape)} "
                f"vs quadratic {tuple(target[key].shape)}"
            )
    extra = sorted(set(target) - set(source) - terms - no_bias)
    if extra:
        raise ValueError(f"transfer_weights_: the quadratic model has entries the conventional one lacks: {extra[:5]}")
    for key, value in source.items():
        target[key].copy_(value)
    for key in no_bias:
        target[key].zero_()
    return init_(quadratic)
