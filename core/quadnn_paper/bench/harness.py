"""The benchmark's rows: every (model, implementation) against its conventional baseline, timed
in one process, interleaved, and the numbers each row reports.

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
  shape could take here (:mod:`quadnn_paper.bench.limit`: the baseline's step plus, per
  quadratic layer, the convolutions the neuron cannot avoid beyond the conventional one and its
  minimal elementwise traffic, all measured in the same round), over the baseline's step (median
  and quartiles over rounds); ``limit_conv_ms``/``limit_elem_ms`` are the two added parts.
  ``vs_limit`` is the row's step over the limit (median and quartiles over rounds);
- ``gflops``: forward FLOPs (convolutions and matrix products) by ``torch.utils.flop_counter``;
- ``launches`` (eager rows): the ATen operations one training step runs that launch a kernel
  (forward, backward, the multi-tensor SGD step; views and allocations left out; see
  :func:`quadnn_paper.bench.launches.aten_launches`), the same count on the CPU and on CUDA, and
  ``launch_ratio`` over the baseline's. At CIFAR size a GPU step is bound by launches more than
  by arithmetic. On CUDA, ``cuda_launches`` (every row, compiled ones too) counts the kernel
  launches themselves (``torch.profiler``) and ``cuda_launch_ratio`` compares them;
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
(:func:`quadnn_paper.bench.timing.compare`); otherwise their difference is unresolved at this
number of rounds.

``device="cuda[:N]"`` (``--device``) runs everything on that GPU (made the current device): CUDA
events time each step (the device is synchronised before the first and after every timed call, so
no work leaks between intervals), memory comes from the caching allocator's statistics, and the
rows are the same as on the CPU.

``compile=True`` (``--compile``) adds, for the conventional baseline and each quadratic
model's first implementation, a row for the same model under ``torch.compile`` (inductor), timed
in the same interleaved loop: ``compiled`` is true, ``compile_s`` is the time of the first (compiling) step,
``eager_ratio`` the compiled step time over the same model's eager one, and ``time_ratio``,
``flops_ratio``, ``limit_ratio`` and ``vs_limit`` are taken against the *compiled* baseline (its
``conv_share`` measured on the compiled step). Compiled quadratic rows also split their step by
the profiler into convolutions and the rest: ``conv_ratio`` and ``other_ratio`` are each part's
time over the compiled baseline's same part. ``max_rel_err`` of a compiled row compares its first
step with the eager model's on the same weights, both with TF32 off
(:func:`quadnn_paper.bench.timing.no_tf32`; the timed steps keep torch's defaults). With cuDNN's
default TF32 the two differed by 3-5 % on an H100 while the compiled step with TF32 off equalled
float64 to 7e-7 (docs/gpu/2026-11-25-h100-gpu-check).
Memory is not measured for compiled rows.
"""

from __future__ import annotations

import copy
import math
import statistics
from typing import NamedTuple

import torch
import torch.nn.functional as F

from quadnn.counting import forward_gflops
from quadnn_paper.common.machine import machine

from . import timing
from .launches import aten_launches, cuda_launches
from .limit import _bandwidth_call, _conv_call, _Limit
from .memory import cuda_step_memory, memory_in_subprocess
from .models import (
    DEFAULT_MODELS,
    EQUAL_RTOL,
    baseline_name,
    check_implementation,
    compare_implementations,
    create,
    is_quadratic,
    randomise_terms_,
    set_implementation,
)
from .timing import Clock, batch, conv_share, make_step, no_tf32, summarise

__all__ = ["Row", "plan_rows", "run", "format_table"]


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


def _compiled_row(name: str, shape, x, y, seed: int, quadratic: bool, device):
    """(compiled model, its step, compile seconds, max_rel_err against eager on the same weights)."""
    torch.manual_seed(seed)
    model = timing.to_device(create(name, in_chans=shape[0]), device).train()
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
        built[row] = model = timing.to_device(model, device)
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
    out.update(summarise(times, "step_ms", 1000))
    out["step_ms_iqr"] = out["step_ms_q3"] - out["step_ms_q1"]
    out.update(summarise([t / b for t, b in zip(times, base_times)], "time_ratio"))
    if limit_parts is not None:
        lims = [b + c + e for b, (c, e) in zip(base_times, limit_parts)]
        out.update(summarise([lim / b for lim, b in zip(lims, base_times)], "limit_ratio"))
        out.update(summarise([t / lim for t, lim in zip(times, lims)], "vs_limit"))
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
        ref = timing.to_device(create(row.model, in_chans=x.shape[1]), device)
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
    x, y = timing.to_device(x, device), timing.to_device(y, device)
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
        for r, mb in zip(eager, memory_in_subprocess(rows_mem, batch_size, shape, threads)):
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
