"""Quadratic neurons as drop-in replacements for ``nn.Conv1d``/``nn.Conv2d``/``nn.Conv3d``/``nn.Linear``.

For an input ``x`` (and ``x*x`` taken elementwise) the neuron kinds are

==============  ==========================================================
``"full"``      ``(W_r x + b_r) * (W_g x + b_g) + W_b (x*x) + c``  (the paper's)
``"compact"``   ``W_r x + b_r + W_b (x*x) + c``                     (the paper's compact form)
``"parabolic"`` ``(W_r x + b_r) * (W_g x + b_g)``                   (product of two affine maps)
``"poly"``      ``(W_r x + b_r) * (W_g x + b_g) + W_r x + b_r``     (Chrysos et al., order 2)
==============  ==========================================================

"parabolic" is the name the paper uses for its Parabolic-ResNet: the product of two affine
maps, QuadraLib's corresponding neuron type. It is *not* the paraboloid neuron of Tsapanos et
al., ``(h^T x + h_0)^2 - ||x - p||^2``, which is a different function family.

The compact form has two additive constants, ``b_r`` and ``c``, as the official ReLinear code
builds it (one bias per convolution); they are redundant (only ``b_r + c`` matters), and the
paper writes a single ``c``. Keeping both makes the parameter counts those of the official code.

Each layer subclasses the torch layer it extends: ``weight``/``bias`` are the linear
branch ``W_r``/``b_r``, so a conventional state_dict loads into it. The extra terms are
``weight_g``/``bias_g`` (the gate) and ``weight_b``/``bias_b`` (the power term and ``c``);
a kind without a term registers it as ``None``.

``bias=False`` drops the additive biases ``b_r`` and ``c``. The gate bias ``b_g`` is kept
whenever there is a gate: ReLinear needs ``b_g = 1`` for the neuron to start out linear.

Compilers and tracers. Under ``torch.compile``, ``torch.fx.symbolic_trace`` and
``torch.jit.trace`` the layer computes the same function in plain torch operations (one
convolution for [r, g], see ``QuadraticLayer._forward_plain``) instead of its custom autograd
Function, so traces save and load, and FLOP counters that trace (fvcore, timm's benchmark) count
every convolution; timm's fx feature extraction treats the layers as leaf modules
(``timm.models.register_notrace_module``, done in :mod:`quadnn.models.common`), and so does torch.ao's
FX graph-mode quantization (``prepare_fx``), which then leaves them in float.
``torch.jit.script`` is not supported (TorchScript is deprecated in PyTorch).

Second derivatives (``create_graph=True``: gradient penalties, Hessian-vector products) work
for every kind and implementation: the Function's backward then runs in differentiable
operations; the first-order backward is unchanged.

Tools that act on ``weight`` (the legacy ``weight_norm``, torch's conv-BN fusion, quantizers)
would reach the linear branch alone; what the layers do about each is :mod:`quadnn.weight_guards`
(``torch.nn.utils.parametrizations.weight_norm`` and both spectral norms work, evaluated once per
forward as on torch's layers). How the layers compute, the custom autograd Function and its
implementations, is :mod:`quadnn.quadratic_function`.
"""

from __future__ import annotations

import sys

import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F
from torch import nn
from torch._prims_common import suggest_memory_format
from torch.nn.utils import parametrize
from torch.nn.utils._expanded_weights import ExpandedWeight

from .neurons import NEURONS, neuron_kind
from .quadratic_function import (
    _KEEP,
    _Adjacent,
    _adjacent,
    _apply,
    _autocast_on,
    _batched,
    _flatten,
    _functorch_wrapped,
    _laid_out,
    _Op,
    _quadratic_forward,
    _unflatten,
)
from .weight_guards import WeightGuards

__all__ = [
    "NEURONS",
    "QuadraticConv1d",
    "QuadraticConv2d",
    "QuadraticConv3d",
    "QuadraticLinear",
    "QuadraticLayer",
    "Square",
    "relinear_reference",
]


def check_neuron(neuron: str) -> str:
    neuron_kind(neuron)
    return neuron


def relinear_reference(neuron: str, name: str) -> float:
    """The value of quadratic term ``name`` at which a ``neuron`` computes its linear branch.

    full/parabolic: w_g = 0, b_g = 1, w_b = 0, c = 0; poly: w_g = 0, b_g = 0
    (its output is r*g + r); compact: w_b = 0 (:attr:`quadnn.neurons.Neuron.gate_bias`).
    """
    return neuron_kind(neuron).gate_bias if name == "bias_g" else 0.0


class QuadraticLayer(WeightGuards):
    """Shared machinery of the quadratic layers; not used on its own.

    Subclasses set ``_linear_op(x, weight, bias)`` (the conventional op) and
    ``_check_input(x)``.
    """

    neuron: str

    @property
    def _out(self) -> int:
        return self.out_features if isinstance(self, nn.Linear) else self.out_channels

    def _init_quadratic(self, neuron: str, bias: bool, factory_kwargs: dict) -> None:
        kind = neuron_kind(neuron)
        shape, out = self.weight.shape, self._out
        present = {"weight_g": kind.gate, "bias_g": kind.gate, "weight_b": kind.power, "bias_b": kind.constant and bias}
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
            self._pack_()

    @torch.no_grad()
    def _pack_(self) -> None:
        """Place W_g right after W_r in one block of memory, and b_g after b_r, so the fused
        [r, g] operation reads them as one tensor (a view) instead of concatenating them on every
        forward (two kernel launches a layer per step). The Parameters stay the same objects
        (``.data`` is moved), so optimizers and tied references are untouched. Done at
        construction and after ``to``/``cuda``/``double``/``to_empty``; what else separates them
        (``load_state_dict(assign=True)`` keeps the checkpoint's own tensors, ``quadratize`` the
        conventional layer's Parameters) costs the concatenation, not correctness."""
        if getattr(self, "groups", 1) != 1 or getattr(self, "weight_g", None) is None:
            return  # (a kind without a gate has no W_g)
        # Done on the meta device too, so a layer built there has the storage layout of one built
        # on the CPU (torch's test_device_ctx_init): W_g at an offset after W_r, not at 0.
        b_g = self.bias_g
        if self.bias is None and type(b_g) is nn.Parameter:
            # No b_r: zeros stored right before b_g stand in for it, so [0; b_g] is a view too.
            # They belong to no Parameter, so no optimizer or initialiser writes them.
            if not _adjacent(self.__dict__.get("_zero_bias_r"), b_g):
                both = torch.cat([torch.zeros_like(b_g), b_g])
                self.__dict__["_zero_bias_r"], b_g.data = both[: len(b_g)], both[len(b_g) :]
        for a, b in ((self.weight, self.weight_g), (self.bias, self.bias_g)):
            if (
                type(a) is nn.Parameter
                and type(b) is nn.Parameter
                and a.shape == b.shape
                and a.dtype == b.dtype
                and a.device == b.device
                and not _adjacent(a, b)
            ):
                both = torch.cat([a, b])
                a.data, b.data = both[: len(a)], both[len(a) :]

    def _apply(self, fn, recurse=True):
        super()._apply(fn, recurse)
        self._pack_()
        return self

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ):
        # A conventional checkpoint (no quadratic term at all) loads, strictly, as the linear
        # branch with the quadratic terms at their ReLinear reference (and b_r = 0 when the
        # conventional layer had no bias); a checkpoint holding only some of the terms is still
        # reported as incomplete.
        names = [prefix + name for name, *_ in self.quadratic_terms()]
        conventional = not any(n in state_dict for n in names)
        no_bias = conventional and self.bias is not None and prefix + "bias" not in state_dict
        before = len(missing_keys)
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )
        if conventional and names:
            if no_bias:
                names.append(prefix + "bias")
            missing_keys[before:] = [k for k in missing_keys[before:] if k not in names]
            # load_state_dict(assign=True) into a layer built on the meta device gives the linear
            # branch the checkpoint's tensors; the terms it did not hold are made alike (device,
            # dtype) rather than left on meta
            for name in [n[len(prefix) :] for n in names]:
                p = getattr(self, name)
                if p.device != self.weight.device or p.dtype != self.weight.dtype:
                    new = torch.empty_like(p, device=self.weight.device, dtype=self.weight.dtype)
                    setattr(self, name, nn.Parameter(new, requires_grad=p.requires_grad))
            with torch.no_grad():
                if no_bias:
                    self.bias.zero_()
                self.relinear_init_()

    # -- forward ----------------------------------------------------------------
    def _check_input(self, x: torch.Tensor) -> None:
        if x.dtype != self.weight.dtype and not _autocast_on(x.device.type):
            raise ValueError(
                f"{type(self).__name__}: input dtype {x.dtype} does not match the weight dtype "
                f"{self.weight.dtype}; cast the input or the layer (valid: {self.weight.dtype})"
            )

    # Ways to compute the same function (``layer.implementation``). The first three share one
    # custom autograd Function: one convolution for [r, g] (one over [x, x*x] for the compact
    # neuron), x*x recomputed in backward rather than stored; they differ in what they keep
    # for backward besides x (which the preceding activation keeps anyway):
    #   "fast"  keeps r and recomputes the gate g (a convolution with half the outputs): one
    #           output-sized tensor more than a conventional layer, about 1.5x the activations
    #           of a conv-BN-ReLU network;
    #   "speed" (default) keeps r and g: no recomputation, about 2x the activation memory. It
    #           dominates "naive": the same tensors less x*x, and one Cin->2C convolution where
    #           naive runs two Cin->C ones (quadnn_paper.bench measures both);
    #   "lean"  keeps nothing and recomputes [r, g]: the conventional layer's memory, one more
    #           r/g convolution per step;
    #   "fused" the single r/g convolution differentiated by autograd (keeps x*x too);
    #   "naive" three separate convolutions, as the original code writes the neuron.
    # Without autograd (inference, torch.no_grad) the first three run the same forward and
    # keep nothing. All give the same outputs and gradients up to float rounding (tests check it).
    #
    # Kernel launches per eager step (docs/speed-and-memory.md; tests/test_launches.py counts them):
    # a conventional conv launches 2, a "full" layer at least 8, "speed" 10 (x*x recomputed, and
    # the halves of dy*[r, g] swapped by a roll); [W_r; W_g] is a view, not a per-forward
    # concatenation (_pack_). cifar_qresnet20 at batch 8: 333 against 189 for cifar_resnet20.
    IMPLEMENTATIONS = ("fast", "speed", "lean", "fused", "naive")
    implementation = "speed"

    def _fused_gate_params(self, view: bool = True):
        """Weight and bias of the single operation computing [r, g] (per group, r then g).

        With one group, W_g lies right after W_r in memory (and b_g after b_r; see
        :meth:`_pack_`), so [W_r; W_g] is a view of both, not a concatenation made on every call;
        when something has moved them apart the concatenation is made instead. Tracers and
        compilers see the concatenation."""
        n = self._out
        groups = getattr(self, "groups", 1)
        b_r = self.bias
        if b_r is None:
            zero = self.__dict__.get("_zero_bias_r")  # not looked at by tracers (fx has no values)
            b_r = zero if view and _adjacent(zero, self.bias_g) else self.bias_g.new_zeros(n)
        if groups == 1:
            # a forward-mode AD level open: the concatenation, whose tangent autograd knows
            view = view and not (torch.compiler.is_compiling() or torch.jit.is_tracing() or fwAD._current_level >= 0)
            return tuple(
                _Adjacent.apply(a, b) if view and _adjacent(a, b) else torch.cat([a, b])
                for a, b in ((self.weight, self.weight_g), (b_r, self.bias_g))
            )

        # Grouped convolution: interleave r and g per group so each group sees its own input slice.
        def join(a, b):
            return _flatten(torch.stack([_unflatten(a, 0, (groups, -1)), _unflatten(b, 0, (groups, -1))], 1), 0, 2)

        def split(w):
            v = _unflatten(w, 0, (groups, 2, -1))
            return _flatten(v.select(1, 0), 0, 1), _flatten(v.select(1, 1), 0, 1)

        return _joined(join, split, self.weight, self.weight_g, view), join(b_r, self.bias_g)

    def _compact_params(self, view: bool = True):
        """Weight of the single operation computing W_r x + W_b (x*x) from [x, x*x] (per group)."""
        groups, n_in = getattr(self, "groups", 1), self.weight.shape[1]
        if groups == 1:
            join = lambda a, b: torch.cat([a, b], 1)
        else:  # (out, 2 * in/groups, *k): per group [x, x*x]
            join = lambda a, b: _flatten(
                _flatten(torch.stack([_unflatten(a, 0, (groups, -1)), _unflatten(b, 0, (groups, -1))], 2), 0, 1), 1, 2
            )

        def split(w):
            if groups == 1:
                return w.narrow(1, 0, n_in), w.narrow(1, n_in, n_in)
            v = _unflatten(w, 1, (2, n_in))
            return v.select(1, 0), v.select(1, 1)

        return _joined(join, split, self.weight, self.weight_b, view)

    def _op(self) -> _Op:
        return _Op(self, keep=_KEEP.get(self.implementation, "rg"))

    def _forward_naive(self, x):
        """The kind's plain form: one operation per linear map, combined (:mod:`quadnn.neurons`)."""
        op, kind = self._linear_op, neuron_kind(self.neuron)
        g = op(x, self.weight_g, self.bias_g) if kind.gate else None
        p = op(x * x, self.weight_b, self.bias_b) if kind.power else None
        return kind.combine(op(x, self.weight, self.bias), g, p)

    def _forward_fused(self, x):
        """The kind's plain form (:mod:`quadnn.neurons`) with the linear branch and the gate as one
        operation over [W_r; W_g] (a view, :meth:`_pack_`), differentiated by autograd."""
        kind = neuron_kind(self.neuron)
        p = self._linear_op(x * x, self.weight_b, self.bias_b) if kind.power else None
        if not kind.gate:
            return kind.combine(self._linear_op(x, self.weight, self.bias), None, p)
        op = self._op()
        rg = self._linear_op(x, *self._fused_gate_params())
        r, g = op.split(rg)
        return op.ungrouped(kind.combine(r, g, None if p is None else op.grouped(p)), like=rg)

    def _fused_params(self, view: bool = True):
        """(w, b, w_b, b_b) of :func:`_quadratic_forward`: the fused [r, g] (or compact [x, x*x])
        operation's weight and bias, and the power term's."""
        if self.neuron == "compact":  # b_r and c act as one constant
            b = None if self.bias is None else self.bias + self.bias_b
            return self._compact_params(view), b, None, None
        w, b = self._fused_gate_params(view)
        return w, b, self.weight_b, self.bias_b

    def _forward_fast(self, x):
        op = self._op()
        x = op.pad(x)  # a non-zero padding mode is applied here; autograd differentiates it
        w, b, w_b, b_b = self._fused_params()
        device = x.device.type
        if _autocast_on(device):
            # Cast as autocast would (differentiably, so the gradients come back in the
            # parameters' dtype), then run the Function in that dtype with autocast off.
            dtype = torch.get_autocast_dtype(device)
            x, w, b, w_b, b_b = (t.to(dtype) if t is not None else None for t in (x, w, b, w_b, b_b))
            with torch.autocast(device, enabled=False):
                return _apply(x, w, b, w_b, b_b, op)
        return _apply(x, w, b, w_b, b_b, op)

    def _forward_plain(self, x):
        """The fast implementation's forward in plain torch operations, differentiated by whoever
        runs it. Under ``torch.compile`` this is what the layer computes: the custom Function
        would break the graph, while AOTAutograd differentiates these operations and its
        partitioner chooses what to keep for backward and what to recompute (x*x, the gate),
        the job the Function's ``keep`` policy does by hand in eager mode; inductor can then fuse
        r*g + W_b(x*x) with the neighbouring batch norm and activation. Under
        ``torch.fx.symbolic_trace`` it records these operations as the graph."""
        op = self._op()
        return _quadratic_forward(op.pad(x), *self._fused_params(view=False), op)[0]

    def forward(self, input: torch.Tensor) -> torch.Tensor:  # torch's name: layer(input=x) works
        # A parametrization on a weight (spectral_norm, orthogonal, weight_norm) runs on every read
        # of it, and a forward reads each weight several times (checks, then the implementation's
        # path): cached, it runs once per forward, as for torch's layers. The compiler needs no
        # cache (it computes a repeated expression once) and would break its graph on it.
        if "parametrizations" in self._modules and not torch.compiler.is_compiling():
            with parametrize.cached():
                return self._forward(input)
        return self._forward(input)

    def _forward(self, input: torch.Tensor) -> torch.Tensor:
        x = input
        if not neuron_kind(self.neuron).hand_written:  # a kind of one's own: its plain form
            if isinstance(x, torch.fx.Proxy):
                return self._forward_naive(x)
            self._check_input(x)
            return self._forward_fused(x) if self.implementation == "fused" else self._forward_naive(x)
        if isinstance(x, torch.fx.Proxy):  # torch.fx.symbolic_trace: no values to check
            if _quantization_tracer(x.tracer):
                # torch.ao's FX graph-mode quantization (prepare_fx, prepare_qat_fx) records the
                # layer as a leaf module, which it leaves in float: its observers and quantized
                # operations know torch's layers only, and would quantize the linear branch alone
                return x.tracer.create_proxy("call_module", x.tracer.path_of_module(self), (x,), {})
            return self._forward_plain(x)
        self._check_input(x)
        impl = self.implementation
        if impl not in self.IMPLEMENTATIONS:
            raise ValueError(f"implementation must be one of {self.IMPLEMENTATIONS}, got {impl!r}")
        if impl == "naive":
            return self._forward_naive(x)
        # torch.jit.trace (and what traces through it: fvcore's FLOP counter, timm's
        # benchmark) records the plain operations too, so the trace passes its check, saves,
        # and shows the convolutions a FLOP counter counts; see _forward_plain
        if torch.compiler.is_compiling() or torch.jit.is_tracing():
            return self._forward_fused(x) if impl == "fused" else self._forward_plain(x)
        if self._needs_plain_ops(x):
            return self._forward_naive(x)
        return self._forward_fused(x) if impl == "fused" else self._forward_fast(x)

    def _needs_plain_ops(self, x) -> bool:
        """Whether a transform that sees only torch's own ops is at work: torch.func transforms
        (jacrev, vmap, ...) cannot trace the custom Function's backward, and ExpandedWeights
        (per-sample gradients) know the conventional layers' ops only. The naive formulation
        computes the same function for both. A transform may act on any parameter alone
        (fine-tuning the gates only), so every one is looked at."""
        params = [
            p for p in (self.weight, self.bias, self.weight_g, self.bias_g, self.weight_b, self.bias_b) if p is not None
        ]
        return _functorch_wrapped(x, *params) or any(isinstance(p, ExpandedWeight) for p in params)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, neuron={self.neuron!r}"


def _quantization_tracer(tracer) -> bool:
    """Whether ``tracer`` is torch.ao's FX quantization tracer (looked up only once torch.ao's FX
    quantization is imported: importing it here would load all of torch.ao)."""
    module = sys.modules.get("torch.ao.quantization.fx.tracer")
    return module is not None and isinstance(tracer, module.QuantizationTracer)


class _Joined(torch.autograd.Function):
    """``join(a, b)``: two weights joined into one operation's (compact's [W_r, W_b] along input
    channels, grouped [W_r; W_g] interleaved per group), whose gradients ``split`` gives back laid
    out as the joint gradient is (contiguous, or channels-last as the convolution chose), not as
    strided slices of it. ``.backward()`` would lay them out when accumulating; this gives
    ``torch.autograd.grad`` the layout torch's layers give it too."""

    @staticmethod
    def forward(ctx, join, split, a, b):
        ctx.split = split
        return join(a, b)

    @staticmethod
    def backward(ctx, grad):
        parts = ctx.split(grad)
        fmt = None if _batched(grad) else _layout(grad)  # vmap (batched gradients) cannot ask
        if fmt is not None:
            parts = [p if p.is_contiguous(memory_format=fmt) else p.contiguous(memory_format=fmt) for p in parts]
        return (None, None, *parts)


def _layout(t):
    """The memory format ``t`` is contiguous in, or None."""
    if t.is_contiguous():
        return torch.contiguous_format
    fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(t.dim())
    return fmt if fmt is not None and t.is_contiguous(memory_format=fmt) else None


def _joined(join, split, a, b, view=True):
    """``join(a, b)``, through :class:`_Joined` where autograd will differentiate it; tracers,
    compilers and forward-mode AD see the plain operations. The joint weight keeps ``a``'s
    channels-last layout (stacking per group makes it contiguous), so the convolution's output
    is laid out as torch's layer lays it out."""
    if (
        not view
        or not torch.is_grad_enabled()
        or not (a.requires_grad or b.requires_grad)
        or torch.compiler.is_compiling()
        or torch.jit.is_tracing()
        or fwAD._current_level >= 0
    ):
        joint = join(a, b)
    else:
        joint = _Joined.apply(join, split, a, b)
    if isinstance(a, torch.fx.Proxy):
        return joint
    return joint if torch.jit.is_tracing() else _laid_out(joint, suggest_memory_format(a))


class _QuadraticConvNd(QuadraticLayer):
    """The quadratic convolutions' shared part: torch's convolution arguments, then ``neuron``."""

    _channel_dim = 1

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups=1,
        bias=True,
        padding_mode="zeros",
        neuron="full",
        device=None,
        dtype=None,
    ):
        self.neuron = check_neuron(neuron)
        dd = dict(device=device, dtype=dtype)
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode, **dd
        )
        self._init_quadratic(neuron, bias, dd)
        self.reset_parameters()

    def _linear_op(self, x, weight, bias):
        return self._conv_forward(x, weight, bias)

    def _check_input(self, x):
        nd = len(self.kernel_size)
        # under torch.jit.trace sizes are traced values, and comparing them warns; the
        # convolution checks the channels itself
        if x.dim() not in (nd + 1, nd + 2) or (not torch.jit.is_tracing() and x.shape[-nd - 1] != self.in_channels):
            raise ValueError(
                f"{type(self).__name__}: expected input of shape (N, {self.in_channels}, "
                f"{', '.join('*' * nd)}) or unbatched ({self.in_channels}, {', '.join('*' * nd)}), "
                f"got {tuple(x.shape)}"
            )
        super()._check_input(x)

    def _forward(self, input: torch.Tensor) -> torch.Tensor:
        x = input
        if not isinstance(x, torch.fx.Proxy) and x.dim() == len(self.kernel_size) + 1:
            # unbatched, as torch's convolutions accept
            self._check_input(x)
            return super()._forward(x.unsqueeze(0)).squeeze(0)
        return super()._forward(x)


class QuadraticConv1d(_QuadraticConvNd, nn.Conv1d):
    """``nn.Conv1d`` whose neurons are quadratic; see the module docstring for ``neuron``."""


class QuadraticConv2d(_QuadraticConvNd, nn.Conv2d):
    """``nn.Conv2d`` whose neurons are quadratic; see the module docstring for ``neuron``."""


class QuadraticConv3d(_QuadraticConvNd, nn.Conv3d):
    """``nn.Conv3d`` whose neurons are quadratic; see the module docstring for ``neuron``."""


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
        if x.dim() == 0 or (not torch.jit.is_tracing() and x.shape[-1] != self.in_features):  # see convolutions
            raise ValueError(
                f"{type(self).__name__}: expected input with last dimension {self.in_features}, "
                f"got shape {tuple(x.shape)}"
            )
        super()._check_input(x)


class Square(nn.Module):
    """The activation ``z -> z*z`` (for "quadratic activation" baselines)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * x
