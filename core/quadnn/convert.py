"""One-call conversion of an existing model to quadratic neurons, and what it did.

    model = quadnn.quadratize(torchvision.models.resnet18(), neuron="full", verbose=True)
    print(quadnn.convert.plan_quadratize(vit))   # what would be converted, and why not the rest

:func:`quadratize` logs (``logging.getLogger("quadnn.convert")``, INFO; printed with
``verbose=True``) a :class:`QuadratizeSummary`: how many layers of each type it converted and
which layers it left conventional, with the reason. ``strict=True`` raises ``ValueError`` naming
every layer it could not convert, before changing anything.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

import torch
from torch import nn

from .layers import QuadraticConv1d, QuadraticConv2d, QuadraticConv3d, QuadraticLayer, QuadraticLinear, check_neuron

__all__ = ["quadratize", "plan_quadratize", "QuadratizeSummary", "SUPPORTED", "quantize_"]

log = logging.getLogger(__name__)

# Conventional layer type -> its quadratic counterpart.
SUPPORTED = {
    nn.Conv1d: QuadraticConv1d,
    nn.Conv2d: QuadraticConv2d,
    nn.Conv3d: QuadraticConv3d,
    nn.Linear: QuadraticLinear,
}

# Layers holding linear maps that quadratize cannot make quadratic, and why.
_UNSUPPORTED = {
    nn.MultiheadAttention: "its q/k/v and output projections are read as weights by "
    "F.multi_head_attention_forward, not called as layers",
    nn.ConvTranspose1d: "transposed convolutions have no quadratic counterpart",
    nn.ConvTranspose2d: "transposed convolutions have no quadratic counterpart",
    nn.ConvTranspose3d: "transposed convolutions have no quadratic counterpart",
    nn.Bilinear: "no quadratic counterpart",
}


@dataclass
class QuadratizeSummary:
    """What :func:`quadratize` converts (``converted``: module name -> type name; one name per
    layer, its other names in ``shared``: name -> converted name) and leaves conventional:
    ``unconvertible`` (name -> reason; what ``strict=True`` refuses) and ``left`` (name -> reason:
    excluded, not in ``include``, already quadratic). ``other_kind`` names the layers already
    quadratic with another neuron kind (quadratize refuses them)."""

    neuron: str
    converted: dict[str, str] = field(default_factory=dict)
    unconvertible: dict[str, str] = field(default_factory=dict)
    left: dict[str, str] = field(default_factory=dict)
    shared: dict[str, str] = field(default_factory=dict)  # other name -> the converted name
    other_kind: dict[str, str] = field(default_factory=dict)  # already quadratic, another neuron

    def counts(self) -> dict[str, int]:
        """Converted layers per type, e.g. ``{"Conv2d": 19, "Linear": 1}``."""
        return dict(Counter(self.converted.values()))

    def __str__(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.counts().items())) or "none"
        lines = [f"quadratize(neuron={self.neuron!r}): converted {len(self.converted)} layers ({counts})"]
        if self.shared:
            lines.append(f"the same layer under another name: {len(self.shared)}")
            lines += [f"  {name} is {first}" for name, first in self.shared.items()]
        for title, items in (("could not convert", self.unconvertible), ("left conventional", self.left)):
            if items:
                lines.append(f"{title}: {len(items)}")
                lines += [f"  {name or '(model)'}: {why}" for name, why in items.items()]
        return "\n".join(lines)


def _quadratic_like(layer: nn.Module, neuron: str) -> QuadraticLayer:
    """A quadratic layer computing what ``layer`` computes: its own ``weight``/``bias``
    Parameters become the linear branch (so weights tied to other modules stay tied, and an
    optimizer holding them still does), the quadratic terms are new, at their ReLinear values."""
    # Built on the meta device: the random initialisation a new layer would draw is replaced at
    # once, and on a large layer it costs seconds.
    w = layer.weight
    dd = dict(device="meta", dtype=w.dtype)
    if isinstance(layer, nn.Linear):
        q = QuadraticLinear(layer.in_features, layer.out_features, layer.bias is not None, neuron=neuron, **dd)
    else:
        cls = SUPPORTED[type(layer)]
        q = cls(
            layer.in_channels,
            layer.out_channels,
            layer.kernel_size,
            layer.stride,
            layer.padding,
            layer.dilation,
            layer.groups,
            layer.bias is not None,
            layer.padding_mode,
            neuron=neuron,
            **dd,
        )
    q.weight = w
    if layer.bias is not None:
        q.bias = layer.bias
    # A term is trainable as the tensor it joins is: weight_g/weight_b as the weight, the
    # biases b_g and c as the bias (as the weight without one), so a frozen layer stays frozen.
    for name, p, _, ref in list(q.quadratic_terms()):
        source = w if name.startswith("weight") or layer.bias is None else layer.bias
        term = torch.full(p.shape, ref, device=w.device, dtype=w.dtype)
        setattr(q, name, nn.Parameter(term, requires_grad=source.requires_grad))
    # Hooks (forward, backward, state_dict) move with the layer: the same dictionaries, so the
    # handles the user holds still remove them.
    for attr, value in vars(layer).items():
        if "hook" in attr:
            setattr(q, attr, value)
    q.train(layer.training)
    q._pack_()  # W_g next to W_r in memory (their Parameters kept): no concatenation per forward
    return q


def _excluded(name: str, exclude) -> bool:
    # A pattern excludes the module it names and everything inside it.
    return any(fnmatchcase(name, pat) or name.startswith(pat + ".") for pat in exclude)


def _check_arguments(model, neuron, include, exclude):
    check_neuron(neuron)
    include = tuple(include)
    bad = [t for t in include if t not in SUPPORTED]
    if bad:
        raise ValueError(f"include may hold only {tuple(t.__name__ for t in SUPPORTED)}, got {bad}")
    if exclude is None:
        exclude = ()
    elif isinstance(exclude, str):
        exclude = (exclude,)
    names = {name for name, _ in model.named_modules()}
    unknown = [pat for pat in exclude if not any(fnmatchcase(n, pat) for n in names)]
    if unknown:
        raise ValueError(f"exclude names no module of the model: {unknown}")
    if type(model) in SUPPORTED:
        raise ValueError(
            "quadratize works on a model containing layers; to convert a single layer use "
            f"{SUPPORTED[type(model)].__name__} directly"
        )
    return include, tuple(exclude)


def _walk(model: nn.Module, neuron: str, include, exclude):
    """(summary, [(layer, [(parent, child_name), ...])] to convert), visiting the tree as the
    conversion does. A module reachable under several names (``m.a = m.b = conv``, or inside a
    container shared by two parents) is one layer: converted once and set under every name,
    or, when one of its names is excluded, left conventional under all of them."""
    summary = QuadratizeSummary(neuron)
    places: dict[int, tuple[nn.Module, list]] = {}  # id -> (layer, [(parent, child_name, name)])
    excluded: dict[int, str] = {}  # id of every module inside an excluded subtree -> that name

    def visit(parent: nn.Module, prefix: str) -> None:
        for child_name, child in parent._modules.items():
            if child is None:
                continue
            name = f"{prefix}{child_name}"
            kind = type(child)
            if _excluded(name, exclude):
                summary.left[name] = f"excluded ({kind.__name__})"
                for m in child.modules():
                    excluded.setdefault(id(m), name)
            elif isinstance(child, QuadraticLayer):
                if child.neuron != neuron:
                    summary.other_kind[name] = child.neuron
                summary.left[name] = f"already quadratic ({kind.__name__}, neuron={child.neuron!r})"
            elif kind in SUPPORTED:
                if kind in include:
                    places.setdefault(id(child), (child, []))[1].append((parent, child_name, name))
                else:
                    summary.left[name] = f"{kind.__name__} not in include"
            elif kind in _UNSUPPORTED:
                summary.unconvertible[name] = f"{kind.__name__}: {_UNSUPPORTED[kind]}"
            elif isinstance(child, tuple(SUPPORTED)):
                base = next(t for t in SUPPORTED if isinstance(child, t))
                if base in include:
                    summary.unconvertible[name] = (
                        f"{kind.__name__}: a subclass of {base.__name__} (its own forward would be lost)"
                    )
                else:
                    summary.left[name] = f"{kind.__name__} (a {base.__name__}) not in include"
            else:
                visit(child, name + ".")

    visit(model, "")
    todo = []
    for layer, where in places.values():
        names = [name for _, _, name in where]
        if id(layer) in excluded:
            for name in names:
                summary.left[name] = f"{type(layer).__name__} shared with excluded {excluded[id(layer)]!r}"
            continue
        summary.converted[names[0]] = type(layer).__name__
        for name in names[1:]:
            summary.shared[name] = names[0]
        todo.append((layer, [(parent, child_name) for parent, child_name, _ in where]))
    return summary, todo


def plan_quadratize(model: nn.Module, neuron: str = "full", include=tuple(SUPPORTED), exclude=()) -> QuadratizeSummary:
    """What :func:`quadratize` with these arguments would convert and leave alone; changes nothing."""
    include, exclude = _check_arguments(model, neuron, include, exclude)
    return _walk(model, neuron, include, exclude)[0]


def quadratize(
    model: nn.Module,
    neuron: str = "full",
    include=tuple(SUPPORTED),
    exclude=(),
    strict: bool = False,
    verbose: bool = False,
) -> nn.Module:
    """Replace the layers of ``model`` whose type is in ``include`` by quadratic ones, in place.

    Each new layer carries the original weight and bias as its linear branch and is
    ReLinear-initialised, so before any training the model computes what it computed
    before. ``include`` holds types among ``nn.Conv1d``, ``nn.Conv2d``, ``nn.Conv3d`` and
    ``nn.Linear`` (default: all four). Only exact types are replaced: a subclass (a
    weight-standardised conv, torch's ``NonDynamicallyQuantizableLinear``) has its own forward,
    and ``nn.MultiheadAttention`` reads its projection weights directly; such layers stay
    conventional and are reported. ``exclude`` holds module names or glob patterns (``"conv1"``,
    ``"fc"``, ``"layer4.*"``; None: none); an excluded module keeps its whole subtree conventional.

    What the model had stays: a new layer's linear branch is the old layer's own ``weight`` and
    ``bias`` Parameters (tied weights stay tied); a layer under several names or parents is
    converted once and the same quadratic layer set under each (:attr:`QuadratizeSummary.shared`);
    its hooks move with it; the new terms are trainable only where the old layer's weight (for
    ``weight_g``/``weight_b``) or bias (for ``bias_g``/``bias_b``) is. Layers already quadratic are
    left as they are; with another neuron kind than ``neuron`` it raises ``ValueError``, changing
    nothing (a kind's trained quadratic terms have no counterpart in another).

    The summary (:class:`QuadratizeSummary`: layers converted per type, layers left conventional
    and why) is logged at INFO and printed when ``verbose``; :func:`plan_quadratize` returns it
    without converting. ``strict=True`` raises ``ValueError`` naming every layer that could not be
    converted (exclusions and types left out of ``include`` are deliberate, not errors), before
    changing the model. Returns ``model``.
    """
    include, exclude = _check_arguments(model, neuron, include, exclude)
    summary, todo = _walk(model, neuron, include, exclude)
    if summary.other_kind:
        raise ValueError(
            f"quadratize(neuron={neuron!r}): layers already quadratic with another neuron kind: "
            + ", ".join(f"{n} ({k!r})" for n, k in summary.other_kind.items())
            + "; a neuron kind is not changed (its quadratic terms have no counterpart in another "
            "kind): exclude them, or convert the conventional model"
        )
    if strict and summary.unconvertible:
        raise ValueError(
            "quadratize(strict=True): cannot convert "
            + "; ".join(f"{n}: {why}" for n, why in summary.unconvertible.items())
        )
    for layer, where in todo:
        q = _quadratic_like(layer, neuron)
        for parent, child_name in where:
            setattr(parent, child_name, q)
    log.info("%s", summary)
    if verbose:
        print(summary)
    return model


def quantize_(model: nn.Module, config, filter_fn=None) -> nn.Module:
    """torchao's ``quantize_(model, config, filter_fn)``, with each quadratic linear layer quantized
    as a whole, in place.

    torchao quantizes a linear layer's ``weight``; for a :class:`QuadraticLinear` that is the linear
    branch alone, so the layer refuses it (it stays in float, with a warning). Here each selected
    quadratic layer has its three weights quantized with ``config`` (``weight_g`` and ``weight_b``
    first, then ``weight``) and then computes the neuron from them in three operations
    (``implementation="naive"``); every other layer ``filter_fn`` selects (default: torchao's, the
    ``nn.Linear`` layers) is quantized by torchao as usual. ``config`` is a torchao config whose
    handler takes a parameter name (e.g. ``Int8DynamicActivationInt8WeightConfig``,
    ``Int8WeightOnlyConfig``, ``IntxWeightOnlyConfig``); quadratic convolutions stay in float, as
    torchao leaves ``nn.Conv2d``. Returns ``model``.
    """
    from torchao.quantization import FqnToConfig
    from torchao.quantization import quantize_ as torchao_quantize_
    from torchao.quantization.quant_api import _is_linear

    selected = filter_fn if filter_fn is not None else _is_linear
    quadratic = {name: m for name, m in model.named_modules() if isinstance(m, QuadraticLinear) and selected(m, name)}
    for names in (("weight_g", "weight_b"), ("weight",)):  # see QuadraticLayer.register_parameter
        fqns = {
            f"{name}.{p}" if name else p: config
            for name, m in quadratic.items()
            for p in names
            if getattr(m, p) is not None
        }
        if fqns:
            torchao_quantize_(model, FqnToConfig(fqns), filter_fn=None)
    torchao_quantize_(model, config, filter_fn=lambda m, fqn: not isinstance(m, QuadraticLayer) and selected(m, fqn))
    return model
