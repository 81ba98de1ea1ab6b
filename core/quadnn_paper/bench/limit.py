"""The limit: the fastest step a quadratic network of a given shape could take on this machine.

In each timed round it is the baseline's measured step plus, per quadratic layer, the measured time
of the convolutions (forward and backward, at the layer's shapes and batch) the neuron cannot avoid
beyond the conventional one (:func:`unavoidable_convolutions`), plus the neuron's minimal
elementwise traffic (:func:`elementwise_elements`) and the SGD step over the extra parameters at
the memory bandwidth measured in that round. It assumes everything else (batch norm, activations)
costs what it costs in the baseline.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from quadnn.layers import QuadraticLayer

from . import timing

__all__ = ["unavoidable_convolutions", "elementwise_elements", "SGD_ELEMENTS_PER_PARAMETER"]

SGD_ELEMENTS_PER_PARAMETER = 5  # momentum SGD: read parameter, gradient, buffer; write buffer, parameter


def unavoidable_convolutions(neuron: str) -> tuple[tuple[int, int, int], ...]:
    """The convolutions a quadratic layer of kind ``neuron`` needs beyond a conventional one's, as
    ``(sign, input-width factor, output-width factor)``: full adds one Cin->2C convolution ([r, g];
    its Cin->C convolution of x*x takes the conventional one's place), parabolic and poly replace
    Cin->C by Cin->2C, compact replaces it by 2Cin->C (over [x, x*x])."""
    return {
        "full": ((1, 1, 2),),
        "parabolic": ((1, 1, 2), (-1, 1, 1)),
        "poly": ((1, 1, 2), (-1, 1, 1)),
        "compact": ((1, 2, 1), (-1, 1, 1)),
    }[neuron]


def elementwise_elements(neuron: str, n_in: int, n_out: int) -> int:
    """Elements a quadratic layer must read or write beyond its convolutions in one training
    step, with every elementwise pass fused and nothing recomputed (``n_in``/``n_out``: elements of
    its input and output).

    full: x*x (read x, write: 2 n_in), y = r*g + W_b(x*x) (read 3, write 1: 4 n_out), dr = dy*g and
    dg = dy*r (read 3, write 2: 5 n_out), dx += 2x * dx_b (read 3, write 1: 4 n_in); parabolic and
    poly: the product (3 n_out) and its two gradients (5 n_out); compact: x*x and dx (6 n_in).
    """
    return {"full": 6 * n_in + 9 * n_out, "parabolic": 8 * n_out, "poly": 8 * n_out, "compact": 6 * n_in}[neuron]


def _layer_records(model: nn.Module, example: torch.Tensor) -> list[dict]:
    """Each quadratic layer's operation, neuron and input/output shapes (batch 1)."""
    records, hooks = [], []

    def hook(mod, inp, out):
        records.append(
            dict(
                layer=mod,
                neuron=mod.neuron,
                in_shape=tuple(inp[0].shape[1:]),
                out_shape=tuple(out.shape[1:]),
                need_dx=inp[0].requires_grad,
            )
        )

    for m in model.modules():
        if isinstance(m, QuadraticLayer):
            hooks.append(m.register_forward_hook(hook))
    was_training = model.training
    try:
        model.eval()
        model(example[:1])  # with autograd, so need_dx says whether the input needs a gradient
    finally:
        model.train(was_training)
        for h in hooks:
            h.remove()
    return records


def _conv_spec(rec: dict, cin_factor: int, cout_factor: int) -> tuple:
    """A hashable description of one convolution (or linear map) a layer needs, widened."""
    m = rec["layer"]
    cin, cout = (
        rec["in_shape"][0] * cin_factor,
        (m.out_features if isinstance(m, nn.Linear) else m.out_channels) * cout_factor,
    )
    if isinstance(m, nn.Linear):
        return (
            "linear",
            rec["in_shape"][:-1] + (m.in_features * cin_factor,),
            cout,
            m.bias is not None,
            rec["need_dx"],
        )
    in_shape = (cin,) + rec["in_shape"][1:]
    return (
        "conv",
        in_shape,
        cout,
        tuple(m.kernel_size),
        tuple(m.stride),
        tuple(m.padding),
        tuple(m.dilation),
        m.groups,
        m.bias is not None,
        rec["need_dx"],
    )


def _conv_call(spec: tuple, batch_size: int, device, dtype=torch.float32) -> Callable[[], None]:
    """One forward and backward (input gradient if needed, weight and bias gradients) of ``spec``."""
    kw = dict(dtype=dtype)
    if spec[0] == "linear":
        _, in_shape, cout, bias, need_dx = spec
        x = torch.randn((batch_size,) + in_shape, **kw)
        w = torch.randn(cout, in_shape[-1], **kw)
        b = torch.randn(cout, **kw) if bias else None
        dy = torch.randn((batch_size,) + in_shape[:-1] + (cout,), **kw)
        x, w, b, dy = (timing.to_device(t, device) if t is not None else None for t in (x, w, b, dy))

        def call():
            F.linear(x, w, b)
            dy2, x2 = dy.reshape(-1, cout), x.reshape(-1, x.shape[-1])
            if need_dx:
                dy @ w
            dy2.T @ x2
            if bias:
                dy2.sum(0)

        return call
    _, in_shape, cout, k, stride, padding, dilation, groups, bias, need_dx = spec
    x = torch.randn((batch_size,) + in_shape, **kw)
    w = torch.randn((cout, in_shape[0] // groups) + k, **kw)
    b = torch.randn(cout, **kw) if bias else None
    x, w, b = (timing.to_device(t, device) if t is not None else None for t in (x, w, b))
    y = torch.ops.aten.convolution(x, w, b, stride, padding, dilation, False, [0] * len(k), groups)
    dy = torch.randn_like(y)

    def call():
        torch.ops.aten.convolution(x, w, b, stride, padding, dilation, False, [0] * len(k), groups)
        torch.ops.aten.convolution_backward(
            dy,
            x,
            w,
            [cout] if bias else None,
            stride,
            padding,
            dilation,
            False,
            [0] * len(k),
            groups,
            [need_dx, True, bias],
        )

    return call


class _Limit:
    """What a model's limit is made of: the signed convolutions of its quadratic layers and its
    minimal elementwise traffic in bytes (see the module docstring)."""

    def __init__(self, model: nn.Module, baseline: nn.Module, example: torch.Tensor, batch_size: int):
        self.convs: dict[tuple, int] = {}  # spec -> signed count
        elements = 0
        for rec in _layer_records(model, example):
            for sign, fin, fout in unavoidable_convolutions(rec["neuron"]):
                spec = _conv_spec(rec, fin, fout)
                self.convs[spec] = self.convs.get(spec, 0) + sign
            elements += batch_size * elementwise_elements(
                rec["neuron"], math.prod(rec["in_shape"]), math.prod(rec["out_shape"])
            )
        extra_params = sum(p.numel() for p in model.parameters()) - sum(p.numel() for p in baseline.parameters())
        elements += SGD_ELEMENTS_PER_PARAMETER * max(extra_params, 0)
        self.bytes = elements * next(model.parameters()).element_size()
        self.convs = {s: n for s, n in self.convs.items() if n}

    def extra(self, conv_s: dict, bandwidth: float) -> tuple[float, float]:
        """(convolution seconds, elementwise seconds) added to the baseline's step in one round."""
        return sum(n * conv_s[s] for s, n in self.convs.items()), self.bytes / bandwidth


def _bandwidth_call(numel: int, device) -> tuple[Callable[[], None], int]:
    """An elementwise product over tensors of ``numel`` elements and the bytes it moves."""
    a, b, c = (timing.to_device(torch.randn(numel), device) for _ in range(3))
    return (lambda: torch.mul(a, b, out=c)), 3 * a.element_size() * numel
