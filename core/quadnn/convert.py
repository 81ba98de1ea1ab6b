"""One-call conversion of an existing model to quadratic neurons."""
from __future__ import annotations

from fnmatch import fnmatchcase

import torch
from torch import nn

from .layers import QuadraticConv1d, QuadraticConv2d, QuadraticLayer, QuadraticLinear, check_neuron

__all__ = ["quadratize", "SUPPORTED"]

# Conventional layer type -> its quadratic counterpart.
SUPPORTED = {nn.Conv1d: QuadraticConv1d, nn.Conv2d: QuadraticConv2d, nn.Linear: QuadraticLinear}


def _quadratic_like(layer: nn.Module, neuron: str) -> QuadraticLayer:
    # Built on the meta device and then materialised: the random initialisation a new layer
    # would draw is overwritten at once, and on a large layer it costs seconds.
    dd = dict(device="meta", dtype=layer.weight.dtype)
    if isinstance(layer, nn.Linear):
        q = QuadraticLinear(layer.in_features, layer.out_features, layer.bias is not None, neuron=neuron, **dd)
    else:
        cls = SUPPORTED[type(layer)]
        q = cls(layer.in_channels, layer.out_channels, layer.kernel_size, layer.stride, layer.padding,
                layer.dilation, layer.groups, layer.bias is not None, layer.padding_mode, neuron=neuron, **dd)
    q = q.to_empty(device=layer.weight.device)
    with torch.no_grad():
        q.weight.copy_(layer.weight)
        if layer.bias is not None:
            q.bias.copy_(layer.bias)
    q.relinear_init_()
    q.weight.requires_grad_(layer.weight.requires_grad)
    if layer.bias is not None:
        q.bias.requires_grad_(layer.bias.requires_grad)
    q.train(layer.training)
    return q


def _excluded(name: str, exclude) -> bool:
    # A pattern excludes the module it names and everything inside it.
    return any(fnmatchcase(name, pat) or name.startswith(pat + ".") for pat in exclude)


def quadratize(model: nn.Module, neuron: str = "full", include=(nn.Conv1d, nn.Conv2d, nn.Linear),
               exclude=()) -> nn.Module:
    """Replace the layers of ``model`` whose type is in ``include`` by quadratic ones, in place.

    Each new layer carries the original weight and bias as its linear branch and is
    ReLinear-initialised, so before any training the model computes what it computed
    before. Only exact types are replaced (a subclass such as a weight-standardised conv
    has its own forward and is left alone). ``exclude`` holds module names or glob
    patterns (``"conv1"``, ``"fc"``, ``"layer4.*"``); an excluded module keeps its whole
    subtree conventional. Returns ``model``.
    """
    check_neuron(neuron)
    include = tuple(include)
    bad = [t for t in include if t not in SUPPORTED]
    if bad:
        raise ValueError(f"include may hold only {tuple(t.__name__ for t in SUPPORTED)}, got {bad}")
    if isinstance(exclude, str):
        exclude = (exclude,)
    names = {name for name, _ in model.named_modules()}
    unknown = [pat for pat in exclude if not any(fnmatchcase(n, pat) for n in names)]
    if unknown:
        raise ValueError(f"exclude names no module of the model: {unknown}")

    def convert(parent: nn.Module, prefix: str) -> None:
        for child_name, child in parent.named_children():
            name = f"{prefix}{child_name}"
            if _excluded(name, exclude) or isinstance(child, QuadraticLayer):
                continue
            if type(child) in include:
                setattr(parent, child_name, _quadratic_like(child, neuron))
            else:
                convert(child, name + ".")

    if type(model) in include:
        raise ValueError("quadratize works on a model containing layers; to convert a single layer use "
                         f"{SUPPORTED[type(model)].__name__} directly")
    convert(model, "")
    return model
