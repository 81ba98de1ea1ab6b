"""How a quadratic layer computes (:mod:`quadnn.layers` holds the layers themselves).

:class:`_QuadraticFunction` is the custom autograd Function of the "fast", "speed" and "lean"
implementations: one operation for [r, g] (one over [x, x*x] for the compact neuron), x*x
recomputed in backward, and what it keeps besides x chosen per implementation (:data:`_KEEP`).
:func:`_quadratic_forward` is the same computation in plain torch operations, for whoever
differentiates it (``torch.compile``, tracers, the "fused" implementation, no-grad inference).
:class:`_Op` adapts it to the layer's linear operation (a convolution of any dimension, with its
padding, strides and groups, or a linear map). Its backward supports forward-mode AD (``jvp``)
and second derivatives (``create_graph=True``).
"""

from __future__ import annotations

import math

import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F
from torch import nn
from torch._prims_common import suggest_memory_format


def _unflatten(t, dim: int, sizes):
    """``t.unflatten(dim, sizes)`` as a reshape (a view: one dimension split): the legacy vmap of
    batched gradients (``gradcheck(check_batched_grad=True)``, ``is_grads_batched=True``) has no
    rule for ``unflatten`` or ``flatten``, and the backward passes run them on batched gradients."""
    if isinstance(t, torch.fx.Proxy):  # torch.fx.symbolic_trace: no sizes to work with
        return t.unflatten(dim, sizes)
    dim = dim % t.dim()
    sizes = list(sizes)
    if -1 in sizes:  # worked out here: reshape cannot infer it for an empty tensor
        known = math.prod([s for s in sizes if s != -1])
        sizes[sizes.index(-1)] = t.shape[dim] // known if known else 0
    return t.reshape(*t.shape[:dim], *sizes, *t.shape[dim + 1 :])


def _flatten(t, start: int = 0, end: int = -1):
    """``t.flatten(start, end)`` as a reshape; see :func:`_unflatten`."""
    if isinstance(t, torch.fx.Proxy):
        return t.flatten(start, end)
    start, end = start % t.dim(), end % t.dim()
    return t.reshape(*t.shape[:start], math.prod(t.shape[start : end + 1]), *t.shape[end + 1 :])


def _laid_out(t, fmt):
    """``t`` laid out in memory format ``fmt`` as the convolution reads a layout
    (``suggest_memory_format``); ``t.contiguous(memory_format=fmt)`` would keep strides that are
    ambiguous (a dimension of size 1) and read as contiguous."""
    if fmt == torch.contiguous_format or torch.jit.is_tracing() or suggest_memory_format(t) == fmt:
        return t  # torch.jit.trace: sizes are traced tensors, which suggest_memory_format cannot read
    return torch.empty_like(t, memory_format=fmt).copy_(t)


class _Op:
    """What the autograd Function needs to know about a layer's linear operation.

    ``forward(x, w, b)`` / ``backward(dy, x, w, mask)`` are the conventional op and its
    three gradients (input, weight, bias); ``split``/``grouped``/``ungrouped`` handle the
    layout of the fused [r, g] output (per group: the group's r channels, then its g channels).
    """

    def __init__(self, layer, keep: str = "r"):
        self.neuron, self.keep = layer.neuron, keep
        self.conv = not isinstance(layer, nn.Linear)
        self.groups = getattr(layer, "groups", 1)
        self.n = layer._out
        if self.conv:
            self.stride, self.dilation = layer.stride, layer.dilation
            self.padding, self.pre_pad, self.pad_mode = _conv_padding(layer)
            self.conv_fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[len(layer.kernel_size)]

    # -- the conventional op ----------------------------------------------------------
    def pad(self, x):
        """``x`` with the padding that the convolution does not apply itself (see :func:`_conv_padding`)."""
        if self.conv and self.pre_pad is not None:
            return F.pad(x, self.pre_pad, mode=self.pad_mode)
        return x

    def forward(self, x, w, b):
        if self.conv:
            return self.conv_fn(x, w, b, self.stride, self.padding, self.dilation, self.groups)
        return F.linear(x, w, b)

    def backward(self, dy, x, w, mask):
        if self.conv:
            return torch.ops.aten.convolution_backward(
                dy,
                x,
                w,
                [w.shape[0]] if mask[2] else None,
                self.stride,
                self.padding,
                self.dilation,
                False,
                [0] * len(self.stride),
                self.groups,
                mask,
            )
        dy2, x2 = dy.reshape(-1, dy.shape[-1]), x.reshape(-1, x.shape[-1])
        dx = (dy @ w) if mask[0] else None
        dw = (dy2.T @ x2) if mask[1] else None
        db = dy2.sum(0) if mask[2] else None
        return dx, dw, db

    # -- layouts ------------------------------------------------------------------------
    def gate_params(self, w, b):
        """The gate's weight and bias (W_g, b_g) out of the fused [r, g] parameters."""
        if self.groups == 1:
            return w.narrow(0, self.n, self.n), b.narrow(0, self.n, self.n)
        return (
            _flatten(_unflatten(w, 0, (self.groups, 2, -1)).select(1, 1), 0, 1),
            _flatten(_unflatten(b, 0, (self.groups, 2, -1)).select(1, 1)),
        )

    def cross(self, dy, rg):
        """[dy*g, dy*r] in the fused layout, from the fused [r, g]: dy times [r, g] in one
        product, its two halves swapped by one roll (per group)."""
        if not self.conv:
            v = _unflatten(rg, -1, (2, self.n))
            return _flatten((dy.unsqueeze(-2) * v).roll(1, -2), -2, -1)
        v = _unflatten(rg, 1, (self.groups, 2, -1))
        d = _unflatten(dy, 1, (self.groups, 1, -1))
        return _flatten((d * v).roll(1, 2), 1, 3)

    def new_fused(self, y):
        """An empty tensor shaped like [r, g] for an output like ``y`` (same memory format)."""
        dim = 1 if self.conv else y.dim() - 1
        shape = list(y.shape)
        shape[dim] *= 2
        channels_last = (
            self.conv and y.dim() == 4 and not y.is_contiguous() and y.is_contiguous(memory_format=torch.channels_last)
        )
        fmt = torch.channels_last if channels_last else torch.contiguous_format
        return torch.empty(shape, dtype=y.dtype, device=y.device, memory_format=fmt)

    def split(self, rg):
        """Views (r, g) of a fused output, in the grouped shape when groups > 1."""
        if self.groups == 1:
            dim = 1 if self.conv else -1
            return rg.narrow(dim, 0, self.n), rg.narrow(dim, self.n, self.n)
        v = _unflatten(rg, 1, (self.groups, 2, -1))
        return v.select(2, 0), v.select(2, 1)

    def fuse(self, r, g):
        """The fused [r, g] tensor of (r, g) as :meth:`split` returns them (a new tensor)."""
        if self.groups == 1:
            return torch.cat([r, g], 1 if self.conv else -1)
        return _flatten(torch.stack([r, g], 2), 1, 3)

    def grouped(self, y):
        return y if self.groups == 1 else _unflatten(y, 1, (self.groups, -1))

    def ungrouped(self, y, like=None):
        """``y`` in the layer's output shape; a grouped output laid out as ``like`` (the fused
        [r, g]) where the product per group lost its layout (sizes of 1 make strides ambiguous)."""
        if self.groups == 1:
            return y
        y = _flatten(y, 1, 2)
        if like is None or isinstance(y, torch.fx.Proxy) or torch.jit.is_tracing():
            return y
        return _laid_out(y, suggest_memory_format(like))

    def cat_square(self, x):
        """[x, x*x] along channels (per group for grouped convolutions)."""
        return self.cat_pair(x, x * x)

    def cat_pair(self, a, b):
        """[a, b] along channels in the layout of :meth:`cat_square`."""
        dim = 1 if self.conv else -1
        if self.groups == 1:
            return torch.cat([a, b], dim)
        out = _flatten(torch.stack([_unflatten(a, 1, (self.groups, -1)), _unflatten(b, 1, (self.groups, -1))], 2), 1, 3)
        # stacking per group gives channels-first memory; a channels-last input keeps its layout,
        # so the convolution's output is laid out as torch's layer would lay it out
        fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(a.dim())
        if fmt is not None and not a.is_contiguous() and a.is_contiguous(memory_format=fmt):
            out = out.contiguous(memory_format=fmt)
        return out

    def uncat(self, t):
        """Inverse layout of :meth:`cat_square`: views (part for x, part for x*x)."""
        dim = 1 if self.conv else -1
        if self.groups == 1:
            half = t.shape[dim] // 2
            return t.narrow(dim, 0, half), t.narrow(dim, half, half)
        v = _unflatten(t, 1, (self.groups, 2, -1))
        return _flatten(v.select(2, 0), 1, 2), _flatten(v.select(2, 1), 1, 2)


def _conv_padding(layer):
    """``(padding, pre_pad, mode)`` of a convolution layer: the symmetric integer padding the
    convolution applies itself, and the padding ``F.pad(x, pre_pad, mode)`` applies before it
    (None when there is none).

    The custom Function's backward (``aten::convolution_backward``) takes integer padding only:
    ``"valid"`` is 0, and ``"same"`` is its smaller side inside the convolution plus, where the
    total padding ``dilation * (kernel - 1)`` is odd, one more row or column on the far side
    padded beforehand (what ``F.conv2d(padding="same")`` does itself). A padding mode other than
    ``"zeros"`` is all applied beforehand, as torch's layers do.
    """
    nd = len(layer.kernel_size)
    reversed_twice = list(layer._reversed_padding_repeated_twice)  # F.pad order: last dim first
    if layer.padding_mode != "zeros":
        return (0,) * nd, reversed_twice, layer.padding_mode
    if layer.padding == "valid":
        return (0,) * nd, None, "constant"
    if layer.padding == "same":
        near, far = reversed_twice[0::2], reversed_twice[1::2]
        padding = tuple(reversed(near))
        extra = [v for n, f in zip(near, far) for v in (0, f - n)]
        return padding, (extra if any(extra) else None), "constant"
    return tuple(layer.padding), None, "constant"


# What the custom Function keeps for backward, per implementation (see quadnn.layers.QuadraticLayer).
_KEEP = {"fast": "r", "lean": "none", "speed": "rg"}


def _autocast_available(device_type: str) -> bool:
    try:
        return torch.amp.is_autocast_available(device_type)
    except RuntimeError:  # not a device type this torch knows
        return False


# Whether torch has autocast for a device type, asked once per type outside compiled code: some
# torch versions' dynamo (2.11) cannot trace torch._C._is_autocast_available, while a dict of
# constants it reads, and torch.is_autocast_enabled(device_type), it traces in every version.
_AUTOCAST_AVAILABLE = {t: _autocast_available(t) for t in ("cpu", "cuda", "xpu", "mps", "hpu", "mtia", "meta")}


def _autocast_on(device_type: str) -> bool:
    available = _AUTOCAST_AVAILABLE.get(device_type)
    if available is None:  # another backend: asked once, then a constant too
        available = _AUTOCAST_AVAILABLE[device_type] = _autocast_available(device_type)
    # torch.is_autocast_enabled raises for device types without autocast (e.g. "meta")
    return available and torch.is_autocast_enabled(device_type)


def _functorch_wrapped(*tensors) -> bool:
    is_wrapped = torch._C._functorch.is_functorch_wrapped_tensor
    return any(is_wrapped(t) for t in tensors)


def _adjacent(a, b) -> bool:
    """Whether ``b`` lies right after ``a`` in one storage, both contiguous and alike: then
    [a; b] along the first dimension is a view."""
    return (
        a is not None
        and a.is_contiguous()
        and b.is_contiguous()
        and a.shape == b.shape
        and a.dtype == b.dtype
        and a.device == b.device
        and not a.is_meta
        and a.numel() > 0
        and type(a) in (torch.Tensor, nn.Parameter)
        and type(b) in (torch.Tensor, nn.Parameter)
        and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
        and b.storage_offset() == a.storage_offset() + a.numel()
    )


class _Adjacent(torch.autograd.Function):
    """[a; b] along the first dimension for ``b`` stored right after ``a``: a view, no copy;
    its gradient goes back to a and b as views too."""

    @staticmethod
    def forward(ctx, a, b):
        return a.as_strided((2 * a.shape[0], *a.shape[1:]), a.stride(), a.storage_offset())

    @staticmethod
    def backward(ctx, grad):
        n = grad.shape[0] // 2
        return grad[:n], grad[n:]


def _batched(t) -> bool:
    """A tensor that vmap batches (torch.func's, or the legacy one gradcheck's batched check
    uses): it refuses the first-order backward's ``out=`` operations."""
    return _functorch_wrapped(t) or torch._C._functorch.is_legacy_batchedtensor(t)


def _apply(x, w, b, w_b, b_b, op):
    """The layer's output: through the autograd Function only when a gradient is wanted."""
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, w, b, w_b, b_b)):
        return _QuadraticFunction.apply(x, w, b, w_b, b_b, op)
    return _quadratic_forward(x, w, b, w_b, b_b, op)[0]


def _quadratic_forward(x, w, b, w_b, b_b, op):
    """(output, [r, g]) of a quadratic layer from its fused parameters; [r, g] is None for compact.

    full/parabolic/poly: ``w, b`` compute [r, g] in one op; full adds ``op(x*x, w_b, b_b)``.
    compact: ``w`` acts on [x, x*x] in one op.
    """
    if op.neuron == "compact":
        return op.forward(op.cat_square(x), w, b), None
    rg = op.forward(x, w, b)
    r, g = op.split(rg)
    if op.neuron == "parabolic":
        y = r * g
    elif op.neuron == "poly":
        y = torch.addcmul(r, r, g)
    else:
        y = op.grouped(op.forward(x * x, w_b, b_b)).addcmul_(r, g)
    return op.ungrouped(y, like=rg), rg


class _QuadraticFunction(torch.autograd.Function):
    """A quadratic layer's forward and backward; keeps x and, by ``op.keep``, r or [r, g].

    x*x is recomputed in backward (one elementwise product) rather than stored.
    """

    @staticmethod
    def forward(ctx, x, w, b, w_b, b_b, op):
        ctx.op = op
        y, rg = _quadratic_forward(x, w, b, w_b, b_b, op)
        if fwAD._current_level >= 0:  # a forward-mode AD level is open: jvp may be asked for
            ctx.save_for_forward(x, w, w_b, rg)
        if op.neuron == "compact":
            ctx.save_for_backward(x, w)
            ctx.has_bias = b is not None
            return y
        if op.keep == "rg":
            kept = rg
        elif op.keep == "r":
            kept = op.split(rg)[0].clone()  # r alone, so the memory of [r, g] is freed now
        else:
            kept = None
        ctx.save_for_backward(x, w, b, w_b, kept)
        ctx.has_bias = (b is not None, b_b is not None)
        return y

    @staticmethod
    def backward(ctx, dy):
        op = ctx.op
        need_x, need_w, need_b, need_wb, need_bb, _ = ctx.needs_input_grad
        if op.neuron == "compact":
            x, w = ctx.saved_tensors
            xx = op.cat_square(x)
            dxx, dw, db = op.backward(dy, xx, w, [need_x, need_w, need_b and ctx.has_bias])
            dx = None
            if need_x:
                d1, d2 = op.uncat(dxx)
                dx = torch.addcmul(d1, x, d2, value=2)
            return dx, dw, db, None, None, None
        x, w, b, w_b, kept = ctx.saved_tensors
        # create_graph=True, or a gradient batched by vmap (torch.func.jacrev/vjp over a call
        # made outside the transform, gradcheck's batched check): see _backward_differentiable
        if torch.is_grad_enabled() or _batched(dy):
            return _backward_differentiable(op, dy, x, w, b, w_b, ctx.has_bias, ctx.needs_input_grad)
        dyg = op.grouped(dy)
        if op.keep == "r":  # recompute the gate alone: one convolution with half the outputs
            w_g, b_g = op.gate_params(w, b)
            r, g = kept, op.grouped(op.forward(x, w_g, b_g))
            drg = op.new_fused(dy)
            dr, dg = op.split(drg)
            if op.neuron == "poly":  # y = r*(g+1)
                torch.addcmul(dyg, dyg, g, out=dr)
            else:
                torch.mul(dyg, g, out=dr)
            torch.mul(dyg, r, out=dg)
        else:  # [r, g] kept, or recomputed: [dy*g, dy*r] in two launches (see _Op.cross)
            drg = op.cross(dy, kept if op.keep == "rg" else op.forward(x, w, b))
            if op.neuron == "poly":  # y = r*(g+1): dr = dy*g + dy
                op.split(drg)[0].add_(dyg)
        dx, dw, db = op.backward(drg, x, w, [need_x, need_w, need_b and ctx.has_bias[0]])
        del drg
        dw_b = db_b = None
        if op.neuron == "full":
            dx2, dw_b, db_b = op.backward(dy, x * x, w_b, [need_x, need_wb, need_bb and ctx.has_bias[1]])
            if need_x:
                dx.addcmul_(x, dx2, value=2)
        return dx, dw, db, dw_b, db_b, None

    @staticmethod
    def jvp(ctx, dx, dw, db, dw_b, db_b, _):
        x, w, w_b, rg = ctx.saved_tensors
        return _jvp(ctx.op, x, w, w_b, rg, dx, dw, db, dw_b, db_b)


def _jvp(op, x, w, w_b, rg, dx, dw, db, dw_b, db_b):
    """Forward-mode derivative of :func:`_quadratic_forward` along tangents (dx, dw, db, dw_b,
    db_b) of its inputs (None: no tangent). Each term is a product rule over the linear ops:
    d op(x, w, b) = op(dx, w) + op(x, dw, db)."""

    def d_op(x_, w_, dx_, dw_, db_):
        parts = []
        if dx_ is not None:
            parts.append(op.forward(dx_, w_, None))
        if dw_ is not None or db_ is not None:
            parts.append(op.forward(x_, torch.zeros_like(w_) if dw_ is None else dw_, db_))
        return sum(parts[1:], parts[0]) if parts else None

    if op.neuron == "compact":
        d_xx = None if dx is None else op.cat_pair(dx, 2 * x * dx)
        return d_op(op.cat_square(x), w, d_xx, dw, db)
    r, g = op.split(rg)
    drg = d_op(x, w, dx, dw, db)
    dy = None
    if drg is not None:
        dr, dg = op.split(drg)
        dy = dr * (g + 1) + r * dg if op.neuron == "poly" else dr * g + r * dg
    if op.neuron == "full":
        dp = d_op(x * x, w_b, None if dx is None else 2 * x * dx, dw_b, db_b)
        if dp is not None:
            dy = op.grouped(dp) if dy is None else dy + op.grouped(dp)
    return torch.zeros_like(op.ungrouped(r)) if dy is None else op.ungrouped(dy)


def _backward_differentiable(op, dy, x, w, b, w_b, has_bias, needs):
    """:class:`_QuadraticFunction`'s backward in operations autograd can differentiate, for a
    second derivative (``create_graph=True``: gradient penalties, Hessian-vector products).
    [r, g] is recomputed from x and the weights: a kept r would be a constant to autograd. The
    first-order backward writes into preallocated memory (``out=``), which autograd refuses."""
    need_x, need_w, need_b, need_wb, need_bb, _ = needs
    r, g = op.split(op.forward(x, w, b))
    dyg = op.grouped(dy)
    dr = dyg * (g + 1) if op.neuron == "poly" else dyg * g
    dx, dw, db = op.backward(op.fuse(dr, dyg * r), x, w, [need_x, need_w, need_b and has_bias[0]])
    dw_b = db_b = None
    if op.neuron == "full":
        dx2, dw_b, db_b = op.backward(dy, x * x, w_b, [need_x, need_wb, need_bb and has_bias[1]])
        if need_x:
            dx = torch.addcmul(dx, x, dx2, value=2)
    return dx, dw, db, dw_b, db_b, None
