"""Training-step cost of quadratic networks against their conventional baseline and against the
fastest a quadratic layer could be on the same machine.

    python -m quadnn.bench [--models ...] [--batch-size 128] [--input 3x32x32] [--steps N]
                           [--implementations ...] [--device cpu|cuda] [--compile] [--json]

For each model (default: the CIFAR QResNet20 family) and each implementation of its quadratic
layers (``default``: the model as quadnn builds it; ``naive``: three separate convolutions, as
the original code writes the neuron; ``fast``, ``speed``, ``lean``, ``fused``: that
implementation in every layer, see ``QuadraticLayer``; ``budget=B``: every layer planned by
``quadnn.plan_recompute`` at budget ``B``) one row reports

- ``step_ms``: the median training-step time (forward, backward, SGD step) after warm-up, with
  ``step_ms_q1``/``step_ms_q3`` (quartiles). Every row of a run is timed in the same process,
  interleaved: each *round* times every row once, so machine load hits all rows alike;
- ``time_ratio``: the median over rounds of the row's step time over its conventional
  baseline's step in the same round, with quartiles ``time_ratio_q1``/``time_ratio_q3``;
- ``limit_ratio`` (quadratic rows): the **limit**, the fastest step a quadratic network of this
  shape could take here, over the baseline's step (median and quartiles over rounds). In each
  round it is the baseline's measured step plus, per quadratic layer, the measured time of the
  convolutions (forward and backward, at the layer's shapes and batch) the neuron cannot avoid
  beyond the conventional one (full: one Cin->2C convolution for [r, g], since the Cin->C one
  for W_b(x*x) replaces the conventional convolution; parabolic, poly: Cin->2C minus Cin->C;
  compact: 2Cin->C minus Cin->C), plus the neuron's minimal elementwise traffic (see
  :func:`elementwise_elements`) and the SGD step over the extra parameters at the memory
  bandwidth measured in that round. It assumes everything else (batch norm, activations) costs
  what it costs in the baseline; ``limit_conv_ms``/``limit_elem_ms`` are the two added parts.
  ``vs_limit`` is the row's step over the limit (median and quartiles over rounds);
- ``gflops``: forward FLOPs (convolutions and matrix products) by ``torch.utils.flop_counter``;
- ``launches`` (eager rows): the ATen operations one training step runs that launch a kernel
  (forward, backward, the multi-tensor SGD step; views and allocations left out; see
  :func:`aten_launches`), the same count on the CPU and on CUDA, and ``launch_ratio`` over the
  baseline's. At CIFAR size a GPU step is bound by launches more than by arithmetic. On CUDA,
  ``cuda_launches`` (every row, compiled ones too) counts the kernel launches themselves
  (``torch.profiler``) and ``cuda_launch_ratio`` compares them;
- ``conv_share``: the fraction of the step spent in convolutions, forward and backward
  (``torch.profiler``), for conventional and compiled rows;
- ``extra_mb``: peak memory of one training step above the memory held before it (model,
  optimiser state, batch) and ``mem_ratio``. On the CPU, measured row after row in one fresh
  process as the rise of the resident-set high-water mark (``VmHWM``, reset just before the
  step, after the row's warm-up step); on CUDA, ``torch.cuda.max_memory_allocated`` above
  ``memory_allocated`` before the step;
- ``max_rel_err``: for quadratic rows, the largest difference (relative to the tensor's largest
  entry) between this implementation's output and parameter gradients and the naive
  formulation's, on the same weights with random quadratic terms; ``equal`` says whether it is
  within float32 tolerance.

Two rows are ranked only when their quartile intervals of ``time_ratio`` do not overlap
(:func:`compare`); otherwise their difference is unresolved at this number of rounds.

``--device cuda[:N]`` runs everything on that GPU (made the current device): CUDA events time each step (the device is
synchronised before the first and after every timed call, so no work leaks between intervals),
memory comes from the caching allocator's statistics, and the rows are the same as on the CPU.

``--compile`` adds, for the conventional baseline and each quadratic model's first
implementation, a row for the same model under ``torch.compile`` (inductor), timed in the same
interleaved loop: ``compiled`` is true, ``compile_s`` is the time of the first (compiling) step,
``eager_ratio`` the compiled step time over the same model's eager one, and ``time_ratio``,
``flops_ratio``, ``limit_ratio`` and ``vs_limit`` are taken against the *compiled* baseline (its
``conv_share`` measured on the compiled step). Compiled quadratic rows also split their step by
the profiler into convolutions and the rest: ``conv_ratio`` and ``other_ratio`` are each part's
time over the compiled baseline's same part. ``max_rel_err`` of a compiled row compares its first
step with the eager model's on the same weights, both with TF32 off (:func:`no_tf32`; the timed
steps keep torch's defaults). With cuDNN's default TF32 the two differed by 3-5 % on an H100 while
the compiled step with TF32 off equalled float64 to 7e-7 (docs/gpu/2026-11-25-h100-gpu-check).
Memory is not measured for compiled rows.

``--json`` prints one JSON object per row; otherwise a table.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from .layers import QuadraticLayer, check_neuron

__all__ = [
    "main",
    "run",
    "Row",
    "plan_rows",
    "create",
    "baseline_name",
    "batch",
    "make_step",
    "forward_gflops",
    "format_table",
    "set_implementation",
    "compare_implementations",
    "compare",
    "step_memory",
    "machine",
    "Clock",
    "elementwise_elements",
    "unavoidable_convolutions",
    "aten_launches",
    "launch_floor",
    "extra_launches_floor",
    "cuda_launches",
    "no_tf32",
]

DEFAULT_MODELS = ("cifar_qresnet20", "cifar_qresnet20_compact", "cifar_parabolic_resnet20", "cifar_poly_resnet20")
EQUAL_RTOL = 1e-3  # float32 tolerance, relative to each tensor's largest entry, for a whole network:
# 20+ layers of float32 rounding and batch norm over small batches (single layers agree to 1e-5)


# -- models -------------------------------------------------------------------------------
def create(name: str, num_classes: int = 10, in_chans: int = 3) -> nn.Module:
    import timm

    from . import models  # noqa: F401  (registers the CIFAR models in timm)

    return timm.create_model(name, pretrained=False, num_classes=num_classes, in_chans=in_chans)


def baseline_name(name: str) -> str:
    """The conventional model of the same shape as ``name`` (CIFAR family: same depth)."""
    model = create(name)
    depth = getattr(model, "depth", None)
    if name.startswith("cifar_") and depth is not None:
        return f"cifar_resnet{depth}"
    raise ValueError(f"no conventional baseline known for {name!r}; pass --baseline")


# "default": the model as quadnn builds it; "budget=B": every layer planned by plan_recompute at
# budget B; the others set every quadratic layer to that implementation.
IMPLEMENTATIONS = ("default",) + QuadraticLayer.IMPLEMENTATIONS


def check_implementation(implementation: str) -> str:
    if implementation in IMPLEMENTATIONS:
        return implementation
    if implementation.startswith("budget="):
        try:
            budget = float(implementation[len("budget=") :])
        except ValueError:
            budget = float("nan")
        if 0 <= budget <= 2:
            return implementation
    raise ValueError(
        f"implementation must be one of {IMPLEMENTATIONS} or 'budget=B' with B in [0, 2], got {implementation!r}"
    )


def set_implementation(model: nn.Module, implementation: str, example: torch.Tensor | None = None) -> nn.Module:
    """Set every quadratic layer of ``model`` to ``implementation`` (one of :data:`IMPLEMENTATIONS`;
    "default" leaves the model as it is; "budget=B" runs :func:`quadnn.plan_recompute` at budget B
    on ``example``, one input, 3x32x32 when None)."""
    check_implementation(implementation)
    if implementation == "default":
        return model
    if implementation.startswith("budget="):
        from .recompute import plan_recompute

        example = torch.zeros(1, 3, 32, 32) if example is None else example[:1]
        plan_recompute(model, example, budget=float(implementation[len("budget=") :]))
        return model
    for m in model.modules():
        if isinstance(m, QuadraticLayer):
            m.implementation = implementation
    return model


def is_quadratic(model: nn.Module) -> bool:
    return any(isinstance(m, QuadraticLayer) for m in model.modules())


def parse_input(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(v) for v in text.lower().split("x"))
    except ValueError:
        shape = ()
    if len(shape) != 3 or min(shape) < 1:
        raise ValueError(f"--input must look like 3x32x32 (channels x height x width), got {text!r}")
    if max(shape[1:]) > MAX_INPUT_SIDE or shape[0] > MAX_INPUT_CHANNELS:
        raise ValueError(
            f"--input {text!r} is larger than a benchmark input may be (at most {MAX_INPUT_CHANNELS} channels and "
            f"{MAX_INPUT_SIDE} pixels a side; ImageNet's is 3x224x224)"
        )
    return shape


MAX_INPUT_SIDE, MAX_INPUT_CHANNELS = 1024, 64  # (a batch of 3x4000x4000 images needs tens of GB)


def _input_type(text: str) -> tuple[int, ...]:
    """``--input`` as argparse reads it: a bad value is argparse's one line, not a traceback."""
    try:
        return parse_input(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--input ")) from None


def _at_least(low: int):
    def read(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {text!r}")
        return value

    read.__name__ = f"integer >= {low}"
    return read


def batch(batch_size: int, shape: tuple[int, ...], num_classes: int = 10, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn((batch_size, *shape), generator=gen), torch.randint(0, num_classes, (batch_size,), generator=gen)


def to_device(obj, device):
    """``obj.to(device)`` (a seam: tests of the CUDA path replace it on CPU-only machines)."""
    return obj.to(device)


def make_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
    # foreach: the multi-tensor SGD torch picks on CUDA, also on the CPU, so a step issues the same
    # operations on both (torch's CPU default loops over the parameters, 4 operations each)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, weight_decay=5e-4, foreach=True)

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    return step


def forward_gflops(model: nn.Module, x: torch.Tensor) -> float:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(x)
    return counter.get_total_flops() / 1e9


# -- timing --------------------------------------------------------------------------------------
class Clock:
    """Times a callable on ``device``: the wall clock on the CPU; on CUDA, a pair of events around
    the call on the current stream, read after the end event has completed.

    ``time(fn)`` returns seconds. On CUDA the device is synchronised once by :meth:`start` and
    after every call, so each interval holds exactly the work ``fn`` queued.
    """

    def __init__(self, device="cpu"):
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"

    def start(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def time(self, fn: Callable[[], object]) -> float:
        if not self.cuda:
            t = time.perf_counter()
            fn()
            return time.perf_counter() - t
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        end.synchronize()  # elapsed_time needs both events completed
        return begin.elapsed_time(end) / 1e3


def conv_share(step: Callable[[], None], steps: int = 2, device="cpu") -> float:
    """Fraction of ``step``'s time spent in convolutions (forward and backward): CPU time of the
    convolution operators over wall time on the CPU, their kernels' device time on CUDA."""
    from torch.profiler import ProfilerActivity, profile

    clock = Clock(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if clock.cuda else [])
    with profile(activities=activities) as prof:
        clock.start()
        wall = sum(clock.time(step) for _ in range(steps))
    keys = ("aten::convolution", "aten::convolution_backward")
    field = "device_time_total" if clock.cuda else "cpu_time_total"
    conv = sum(getattr(e, field) for e in prof.key_averages() if e.key in keys)
    return conv / 1e6 / wall


# Operations that allocate or read back without running a kernel; views are left out by their schema.
_NO_KERNEL = (
    "empty.memory_format",
    "empty_strided.default",
    "empty_like.default",
    "new_empty.default",
    "new_empty_strided.default",
    "lift_fresh.default",
    "_local_scalar_dense.default",
)


def _no_kernel() -> set:
    return {getattr(getattr(torch.ops.aten, n.split(".")[0]), n.split(".")[1]) for n in _NO_KERNEL}


class _LaunchCount(TorchDispatchMode):
    """Counts the kernel-launching ATen operations that pass the dispatcher while it is active."""

    def __init__(self):
        super().__init__()
        self.n, self.skip = 0, _no_kernel()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "aten" and not func.is_view and func not in self.skip:  # not profiler marks
            self.n += 1
        return func(*args, **(kwargs or {}))


def aten_launches(step: Callable[[], None]) -> int:
    """ATen operations one call of ``step`` runs that launch a kernel (forward, backward and the
    optimiser, as the dispatcher sees them): views (``func.is_view``) and allocations left out.
    The count is a property of the model and the step, the same on the CPU and on CUDA; on a GPU
    at CIFAR size each is one or a few kernel launches, and launches bound the step."""
    with _LaunchCount() as count:
        step()
    return count.n


def cuda_launches(step: Callable[[], None]) -> int:
    """CUDA kernel launches (runtime and driver launch calls, CUDA graph launches) of one call of
    ``step``, from ``torch.profiler``: what a compiled step launches, where ATen operations are not
    what runs."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    names = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx", "cudaGraphLaunch")
    return sum(e.count for e in prof.key_averages() if e.key in names)


def quartiles(values) -> tuple[float, float, float]:
    """(first quartile, median, third quartile), interpolated within the data."""
    v = list(values)
    if len(v) == 1:
        return v[0], v[0], v[0]
    q1, q2, q3 = statistics.quantiles(v, n=4, method="inclusive")
    return q1, q2, q3


def compare(a: dict, b: dict, key: str = "time_ratio") -> str:
    """ "lower", "higher" or "unresolved": ``a[key]`` against ``b[key]``, resolved only when the
    quartile intervals ``[key_q1, key_q3]`` of the two rows do not overlap."""
    if a[key + "_q3"] < b[key + "_q1"]:
        return "lower"
    if a[key + "_q1"] > b[key + "_q3"]:
        return "higher"
    return "unresolved"


# -- the limit -----------------------------------------------------------------------------------
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


def extra_launches_floor(neuron: str) -> int:
    """Kernel-launching operations a quadratic layer of kind ``neuron`` needs in one eager training
    step beyond a conventional layer's two (its convolution and that convolution's backward), keeping
    no more for backward than the default does (x and the product's two factors).

    full, forward: the [r, g] convolution, x*x, the W_b convolution, y = r*g + W_b(x*x) (4);
    backward: [dy*g, dy*r] (2: one product, then one swap: the weight order that produced [r, g]
    pairs each factor with itself, and no strided view swaps two halves), x*x again (not kept:
    one more input-sized tensor per layer), the two convolution backwards, dx += 2x * dx_b (6).
    parabolic: [r, g] convolution and r*g; [dy*g, dy*r] (2) and one convolution backward (5).
    poly: as parabolic, and dr += dy (6). compact: x*x, [x, x*x], the convolution; again x*x and
    [x, x*x], the convolution backward, dx = dx_x + 2x*dx_xx (7). Keeping x*x saves one launch
    per layer (full, compact) for one more input-sized tensor."""
    return {"full": 8, "parabolic": 3, "poly": 4, "compact": 5}[check_neuron(neuron)]


def launch_floor(model: nn.Module, baseline_launches: int) -> int:
    """The fewest kernel-launching operations an eager training step of ``model`` can run with what
    the default keeps: the conventional twin's count plus :func:`extra_launches_floor` per layer."""
    return baseline_launches + sum(
        extra_launches_floor(m.neuron) for m in model.modules() if isinstance(m, QuadraticLayer)
    )


SGD_ELEMENTS_PER_PARAMETER = 5  # momentum SGD: read parameter, gradient, buffer; write buffer, parameter


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
        x, w, b, dy = (to_device(t, device) if t is not None else None for t in (x, w, b, dy))

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
    x, w, b = (to_device(t, device) if t is not None else None for t in (x, w, b))
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
    a, b, c = (to_device(torch.randn(numel), device) for _ in range(3))
    return (lambda: torch.mul(a, b, out=c)), 3 * a.element_size() * numel


def compare_implementations(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, implementation: str, reference: str = "naive"
) -> float:
    """Largest relative difference of output and parameter gradients between two implementations."""
    a = set_implementation(randomise_terms_(copy.deepcopy(model)), implementation, x).train()
    b = set_implementation(copy.deepcopy(a), reference, x).train()
    outs = []
    for m in (a, b):
        out = m(x)
        F.cross_entropy(out, y).backward()
        outs.append([out.detach()] + [p.grad if p.grad is not None else torch.zeros_like(p) for p in m.parameters()])
    err = 0.0
    for u, v in zip(*outs):
        if not (torch.isfinite(u).all() and torch.isfinite(v).all()):
            return float("inf")  # a NaN would otherwise compare as "no difference"
        scale = v.abs().max().item() or 1.0
        err = max(err, (u - v).abs().max().item() / scale)
    return err


def randomise_terms_(model: nn.Module, scale: float = 0.05, seed: int = 0) -> nn.Module:
    """Move the quadratic terms off their ReLinear reference so every term takes part."""
    from .relinear import quadratic_terms

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p, _, _ in quadratic_terms(model):
            p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype).to(p.device) * scale)
    return model


# -- memory --------------------------------------------------------------------------------------
def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def step_memory(
    name: str, implementation: str, batch_size: int, shape: tuple[int, ...], threads: int | None = None
) -> float:
    """Peak extra resident memory (MB) of one training step on the CPU, measured in this process.

    One warm-up step first (gradients and optimiser state then exist, as in training), then
    the high-water mark is reset (``/proc/self/clear_refs``) and one more step is taken.
    Meant to run in a fresh process: :func:`run` starts one for all its rows.
    """
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    x, y = batch(batch_size, shape)
    model = set_implementation(create(name, in_chans=shape[0]), implementation, x).train()
    step = make_step(model, x, y)
    step()
    import gc

    gc.collect()
    before = _status_kb("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current RSS
        reset = True
    except OSError:
        reset = False
    step()
    peak = _status_kb("VmHWM") if reset else None
    if before is None or peak is None:
        import resource

        return float("nan") if before is None else (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    return (peak - before) / 1024


def cuda_step_memory(step: Callable[[], None], device) -> float:
    """Peak memory (MB) the caching allocator hands out during one call of ``step`` above what is
    allocated before it. The device is synchronised first, so no earlier work frees or allocates
    inside the window, and again before the peak is read."""
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    step()
    torch.cuda.synchronize(device)
    return (torch.cuda.max_memory_allocated(device) - before) / 2**20


def _memory_in_subprocess(rows, batch_size, shape, threads) -> list[float]:
    """:func:`step_memory` of each ``(model, implementation)`` in ``rows``, one after the other in
    one fresh process (each row's peak is taken above the resident set after its own warm-up step,
    so what earlier rows leave behind does not count; one process instead of one per row saves
    torch's import per row)."""
    cmd = [sys.executable, "-m", "quadnn.bench", "--_memory", *[str(v) for row in rows for v in row]]
    cmd += ["--batch-size", str(batch_size), "--input", "x".join(map(str, shape))]
    if threads:
        cmd += ["--threads", str(threads)]
    # A fixed mmap threshold makes glibc hand every large block back to the system when it is
    # freed (by default the threshold grows and freed activations stay in the heap), so the
    # resident set follows the memory actually in use.
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="65536")
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    values = [float(v) for v in out.stdout.split()[-len(rows) :]]
    if len(values) != len(rows):
        raise RuntimeError(f"the memory subprocess printed {out.stdout!r} for {len(rows)} rows")
    return values


# -- the benchmark ------------------------------------------------------------------------------
def machine(device="cpu") -> str:
    if torch.device(device).type == "cuda":
        return f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}, CUDA {torch.version.cuda}"
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {torch.get_num_threads()} threads, torch {torch.__version__}"


def _compiled_row(name: str, shape, x, y, seed: int, quadratic: bool, device):
    """(compiled model, its step, compile seconds, max_rel_err against eager on the same weights)."""
    torch.manual_seed(seed)
    model = to_device(create(name, in_chans=shape[0]), device).train()
    if quadratic:
        randomise_terms_(model)
    eager = copy.deepcopy(model)
    compiled = torch.compile(model)
    outs = []
    clock = Clock(device)
    clock.start()
    for m in (compiled, eager):

        def first(m=m):
            out = m(x)
            F.cross_entropy(out, y).backward()
            outs.append([out.detach()] + [p.grad for p in (model if m is compiled else eager).parameters()])

        # Compared in float32 proper: with cuDNN's default TF32 on, this comparison gave 3-5 % at
        # batch 128 on an H100, while the compiled step with TF32 off equalled the float64 step to
        # 7e-7 there (docs/gpu/2026-11-25-h100-gpu-check). The timed steps use torch's defaults.
        with no_tf32():
            t = clock.time(first)
        if m is compiled:
            compile_s = t
    err = 0.0
    for u, v in zip(*outs):
        if u is None or v is None:
            continue
        scale = v.abs().max().item() or 1.0
        err = max(err, (u - v).abs().max().item() / scale)
    model.zero_grad(set_to_none=True)
    return model, make_step(compiled, x, y), compile_s, err


@contextlib.contextmanager
def no_tf32():
    """TF32 off in cuBLAS and cuDNN (cuDNN's is on by default), restored after."""
    flags = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags


def _summary(values, prefix: str, scale: float = 1.0) -> dict:
    q1, q2, q3 = quartiles(values)
    return {prefix: scale * q2, prefix + "_q1": scale * q1, prefix + "_q3": scale * q3}


class Row(NamedTuple):
    """One measured row before its numbers: a timm model, its implementation (None: the
    conventional baseline itself), the baseline it is compared with, and whether it is compiled."""

    model: str
    implementation: str | None
    baseline: str
    compiled: bool


def plan_rows(models, implementations, baseline: str | None = None, compile: bool = False) -> list[Row]:
    """The rows :func:`run` measures: each model's conventional baseline once (before its first
    model), then the model at each implementation; ``compile`` adds every model's first row compiled."""
    rows = []
    for name in models:
        base = baseline or baseline_name(name)
        if Row(base, None, base, False) not in rows:
            rows.append(Row(base, None, base, False))
        impls = implementations[name] if isinstance(implementations, dict) else implementations
        rows += [Row(name, check_implementation(impl), base, False) for impl in impls]
    if compile:
        firsts = {}
        for r in rows:
            firsts.setdefault(r.model, r)
        rows += [r._replace(compiled=True) for r in firsts.values()]
    return rows


def _build_rows(rows: list[Row], shape, x, y, seed: int, device) -> tuple[dict, dict, dict]:
    """Each row's model, its training step and what building it measured (compile time, error)."""
    steps, built, extra = {}, {}, {}
    for row in rows:
        quadratic = row.implementation is not None
        if row.compiled:
            model, steps[row], compile_s, err = _compiled_row(row.model, shape, x, y, seed, quadratic, device)
            built[row], extra[row] = model, dict(compile_s=compile_s)
            if quadratic:
                extra[row].update(max_rel_err=err, equal=err <= EQUAL_RTOL)
            continue
        torch.manual_seed(seed)
        model = create(row.model, in_chans=shape[0]).train()
        if quadratic:
            if not is_quadratic(model):
                raise ValueError(
                    f"{row.model!r} has no quadratic layers: pass quadratic models to --models "
                    "(each one's conventional baseline is added by itself)"
                )
            set_implementation(model, row.implementation, x.cpu())
        built[row] = model = to_device(model, device)
        steps[row] = make_step(model, x, y)
    return steps, built, extra


def _limit_parts(rows: list[Row], built: dict, x, batch_size: int, device) -> tuple[dict, dict, int]:
    """The limit's parts: each quadratic model's :class:`_Limit`, the convolution calls they time
    (and a copy of ``moved`` bytes that measures the bandwidth), timed in the rounds beside the steps."""
    limits, calls = {}, {}
    for row in rows:
        if row.implementation is None or row.model in limits:
            continue
        base_model = built[Row(row.baseline, None, row.baseline, False)]
        limits[row.model] = _Limit(built[row], base_model, x, batch_size)
        for spec in limits[row.model].convs:
            calls.setdefault(spec, _conv_call(spec, batch_size, device))
    moved = 0
    if limits:
        numel = max(x.numel(), *(math.prod(s[1]) * batch_size for s in calls))
        calls["bandwidth"], moved = _bandwidth_call(numel, device)
    return limits, calls, moved


def _time_rounds(clock: Clock, steps: dict, calls: dict, warmup: int, rounds: int) -> tuple[dict, dict]:
    """Seconds of every step and call in each timed round: every row once per round, interleaved,
    so that load on the machine hits all rows alike."""
    times = {key: [] for key in steps}
    call_s = {c: [] for c in calls}
    clock.start()
    for i in range(warmup + rounds):
        for timed, fns in ((times, steps), (call_s, calls)):
            for key, fn in fns.items():
                t = clock.time(fn)
                if i >= warmup:
                    timed[key].append(t)
    return times, call_s


def _measure_row(
    row: Row, model, step, times, base_times, limit_parts, *, bandwidth_s, moved, x, y, seed, device, clock
):
    """One row's numbers: timings and ratios over the rounds, FLOPs, launches, the agreement with
    the naive formulation and the limit (see the module docstring)."""
    out = dict(
        model=row.model,
        implementation=row.implementation or "conventional",
        baseline=row.baseline,
        compiled=row.compiled,
        params=sum(p.numel() for p in model.parameters()),
        gflops=forward_gflops(model, x),
        batch_size=x.shape[0],
        input="x".join(map(str, x.shape[1:])),
        steps=len(times),
        device=str(device),
    )
    out.update(_summary(times, "step_ms", 1000))
    out["step_ms_iqr"] = out["step_ms_q3"] - out["step_ms_q1"]
    out.update(_summary([t / b for t, b in zip(times, base_times)], "time_ratio"))
    if limit_parts is not None:
        lims = [b + c + e for b, (c, e) in zip(base_times, limit_parts)]
        out.update(_summary([lim / b for lim, b in zip(lims, base_times)], "limit_ratio"))
        out.update(_summary([t / lim for t, lim in zip(times, lims)], "vs_limit"))
        out["limit_conv_ms"] = 1000 * statistics.median(c for c, _ in limit_parts)
        out["limit_elem_ms"] = 1000 * statistics.median(e for _, e in limit_parts)
    if bandwidth_s:
        out["bandwidth_gbs"] = moved / statistics.median(bandwidth_s) / 1e9
    if not row.compiled:  # inductor's kernels do not pass the dispatcher: compiled rows count on CUDA only
        out["launches"] = aten_launches(step)
    if clock.cuda:
        out["cuda_launches"] = cuda_launches(step)
    if row.implementation is None or row.compiled:
        out["conv_share"] = conv_share(step, device=device)
    if row.implementation is not None and not row.compiled:
        torch.manual_seed(seed)
        ref = to_device(create(row.model, in_chans=x.shape[1]), device)
        ex, ey = x[: min(8, x.shape[0])], y[: min(8, x.shape[0])]
        out["max_rel_err"] = compare_implementations(ref, ex, ey, row.implementation)
        out["equal"] = out["max_rel_err"] <= EQUAL_RTOL
    return out


def _relate_to_baselines(results: list[dict], memory: bool, device) -> None:
    """Ratios of every row to its baseline (FLOPs, launches, memory) and of compiled rows to eager."""
    base_rows = {(r["model"], r["compiled"]): r for r in results if r["implementation"] == "conventional"}
    eager_rows = {(r["model"], r["implementation"]): r for r in results if not r["compiled"]}
    for r in results:
        b = base_rows[(r["baseline"], r["compiled"])]
        r["flops_ratio"] = r["gflops"] / b["gflops"]
        for k in ("launches", "cuda_launches"):
            if k in r and b.get(k):
                r[k.replace("launches", "launch_ratio")] = r[k] / b[k]
        if r["compiled"] and r["implementation"] != "conventional":
            r["conv_ratio"] = r["time_ratio"] * r["conv_share"] / b["conv_share"]
            r["other_ratio"] = r["time_ratio"] * (1 - r["conv_share"]) / (1 - b["conv_share"])
        if r["compiled"]:
            r["eager_ratio"] = r["step_ms"] / eager_rows[(r["model"], r["implementation"])]["step_ms"]
        if memory and "extra_mb" in r:
            r["mem_ratio"] = r["extra_mb"] / b["extra_mb"] if b["extra_mb"] > 0 else float("nan")
        r["machine"] = machine(device)


def run(
    models=DEFAULT_MODELS,
    batch_size: int = 128,
    input_shape=(3, 32, 32),
    steps: int = 10,
    warmup: int = 2,
    implementations=("default", "naive"),
    baseline: str | None = None,
    memory: bool = True,
    threads: int | None = None,
    seed: int = 0,
    compile: bool = False,
    device="cpu",
    limit: bool = True,
) -> list[dict]:
    """Measure every (model, implementation) against its baseline; return one dict per row.

    ``steps`` is the number of timed rounds (each times every row once) after ``warmup`` rounds.
    ``implementations`` is a tuple for every model or a dict ``{model: tuple}``.
    ``compile=True`` adds the compiled rows, ``limit=False`` skips the limit's measurements;
    see the module docstring."""
    if threads:
        torch.set_num_threads(threads)
    if steps < 1:
        raise ValueError(f"steps must be at least 1 (timed rounds), got {steps!r}")
    device = torch.device(device)
    if device.type == "cuda":  # events and the allocator's statistics follow the current device
        device = torch.device("cuda", torch.cuda.current_device() if device.index is None else device.index)
        torch.cuda.set_device(device)
    clock = Clock(device)
    shape = tuple(input_shape)
    x, y = batch(batch_size, shape)
    x, y = to_device(x, device), to_device(y, device)
    rows = plan_rows(models, implementations, baseline, compile)
    step_fns, built, extra = _build_rows(rows, shape, x, y, seed, device)
    limits, calls, moved = _limit_parts(rows, built, x, batch_size, device) if limit else ({}, {}, 0)
    times, call_s = _time_rounds(clock, step_fns, calls, warmup, steps)
    # per model and round: the limit's (convolutions, elementwise) seconds beyond the baseline's step
    limit_parts = {
        name: [lim.extra({s: call_s[s][i] for s in lim.convs}, moved / call_s["bandwidth"][i]) for i in range(steps)]
        for name, lim in limits.items()
    }
    results = []
    for row in rows:
        base_row = Row(row.baseline, None, row.baseline, row.compiled)
        measured = _measure_row(
            row,
            built[row],
            step_fns[row],
            times[row],
            times[base_row],
            limit_parts.get(row.model) if row.implementation is not None else None,
            bandwidth_s=call_s.get("bandwidth"),
            moved=moved,
            x=x,
            y=y,
            seed=seed,
            device=device,
            clock=clock,
        )
        measured.update(extra.get(row, {}))
        if memory and not row.compiled and clock.cuda:
            measured["extra_mb"] = cuda_step_memory(step_fns[row], device)
        results.append(measured)
    if memory and not clock.cuda:
        eager = [r for r in results if not r["compiled"]]
        rows_mem = [
            (r["model"], "default" if r["implementation"] == "conventional" else r["implementation"]) for r in eager
        ]
        for r, mb in zip(eager, _memory_in_subprocess(rows_mem, batch_size, shape, threads)):
            r["extra_mb"] = mb
    _relate_to_baselines(results, memory, device)
    return results


def format_table(rows: list[dict]) -> str:
    cols = [
        ("model", "{}"),
        ("implementation", "{}"),
        ("compiled", "{}"),
        ("params", "{:,}"),
        ("gflops", "{:.3f}"),
        ("launches", "{}"),
        ("launch_ratio", "{:.2f}"),
        ("cuda_launches", "{}"),
        ("step_ms", "{:.1f}"),
        ("time_ratio", "{:.3f}"),
        ("time_ratio_iqr", "{}"),
        ("limit_ratio", "{:.3f}"),
        ("vs_limit", "{:.3f}"),
        ("vs_limit_iqr", "{}"),
        ("conv_share", "{:.2f}"),
        ("conv_ratio", "{:.2f}"),
        ("other_ratio", "{:.2f}"),
        ("eager_ratio", "{:.2f}"),
        ("compile_s", "{:.0f}"),
        ("extra_mb", "{:.0f}"),
        ("mem_ratio", "{:.2f}"),
        ("max_rel_err", "{:.1e}"),
        ("equal", "{}"),
    ]
    rows = [
        dict(
            r,
            **{
                k + "_iqr": f"{r[k + '_q1']:.3f}-{r[k + '_q3']:.3f}"
                for k in ("time_ratio", "vs_limit")
                if k + "_q1" in r
            },
        )
        for r in rows
    ]
    cols = [(c, f) for c, f in cols if any(c in r for r in rows) and (c != "compiled" or any(r.get(c) for r in rows))]
    cells = [[c for c, _ in cols]] + [[f.format(r[c]) if c in r else "-" for c, f in cols] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    lines = ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m quadnn.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS), help="timm names of quadratic models")
    p.add_argument("--baseline", default=None, help="conventional model to compare with (default: same depth)")
    p.add_argument("--batch-size", type=_at_least(1), default=128)
    p.add_argument("--input", type=_input_type, default="3x32x32", help="CxHxW")
    p.add_argument(
        "--steps", type=_at_least(1), default=10, help="timed rounds (each times every row once) after warm-up"
    )
    p.add_argument("--warmup", type=_at_least(0), default=2)
    p.add_argument(
        "--implementations",
        nargs="+",
        default=["default", "naive"],
        help=f"any of {', '.join(IMPLEMENTATIONS)}, or budget=B (plan_recompute at budget B)",
    )
    p.add_argument("--device", default="cpu", help="cpu or cuda[:index]")
    p.add_argument("--threads", type=_at_least(1), default=None, help="torch intra-op threads (default: torch's)")
    p.add_argument("--no-memory", action="store_true", help="skip the memory measurement")
    p.add_argument("--no-limit", action="store_true", help="skip the limit's convolution and bandwidth timings")
    p.add_argument(
        "--compile",
        action="store_true",
        help="also time the baseline and each model's first implementation under torch.compile",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per row")
    p.add_argument("--_memory", nargs="+", metavar="MODEL IMPL", help=argparse.SUPPRESS)  # pairs
    args = p.parse_args(argv)
    try:
        shape = args.input  # (parsed and bounded by argparse)
        for impl in args.implementations:
            check_implementation(impl)
        device = torch.device(args.device)
        if device.type not in ("cpu", "cuda"):
            raise ValueError(f"--device must be cpu or cuda[:index], got {args.device!r}")
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"--device {args.device}: CUDA is not available here (valid: cpu)")
    except (ValueError, RuntimeError) as e:
        p.error(str(e))
    if args._memory:
        pairs = args._memory
        if len(pairs) % 2:
            p.error(f"--_memory takes MODEL IMPL pairs, got {pairs}")
        for name, impl in zip(pairs[::2], pairs[1::2]):
            print(step_memory(name, impl, args.batch_size, shape, args.threads), flush=True)
        return 0
    try:
        rows = run(
            args.models,
            args.batch_size,
            shape,
            args.steps,
            args.warmup,
            tuple(args.implementations),
            args.baseline,
            not args.no_memory,
            args.threads,
            compile=args.compile,
            device=device,
            limit=not args.no_limit,
        )
    except ValueError as e:  # a bad model name or baseline: say it like argparse does
        p.error(str(e))
    if args.json:
        for r in rows:
            print(json.dumps(r))
    else:
        print(
            f"# {machine(device)}; batch {args.batch_size}, input {'x'.join(map(str, shape))}, median and quartiles over "
            f"{args.steps} rounds"
        )
        print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
