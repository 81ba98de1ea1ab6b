"""Training-step cost of quadratic networks against their conventional baseline.

    python -m quadnn.bench [--models ...] [--batch-size 128] [--input 3x32x32] [--steps N] [--compile] [--json]

For each model (default: the CIFAR QResNet20 family) and for each implementation of its
quadratic layers (``default``: the model as quadnn builds it, each layer's backward memory
planned by ``quadnn.plan_recompute``; ``naive``: three separate convolutions, as the original
code writes the neuron; ``fast``, ``speed``, ``lean``, ``fused``: that implementation in every
layer, see ``QuadraticLayer``) one row reports

- ``step_ms``: the median training-step time (forward, backward, SGD step) after warm-up,
  and ``time_ratio`` to the conventional baseline's median. All rows of a run are timed in
  the same process, interleaved step by step, so machine load affects them alike;
- ``gflops``: forward FLOPs (convolutions and matrix products) by ``torch.utils.flop_counter``;
- ``conv_share`` (conventional rows): the fraction of the training step spent in convolutions,
  forward and backward (``torch.profiler``), and ``arith_ratio`` (quadratic rows):
  ``1 + (flops_ratio - 1) * conv_share``, the time ratio the extra arithmetic alone implies if
  it ran at the baseline's convolution speed and everything else cost nothing more. An
  implementation near ``arith_ratio`` has little left to gain without faster convolutions;
- ``extra_mb``: peak memory of one training step above the memory held before it (model,
  optimiser state, batch), measured for each row in its own process as the rise of the
  resident-set high-water mark (``VmHWM``, reset just before the step), and ``mem_ratio``;
- ``max_rel_err``: for quadratic rows, the largest difference (relative to the tensor's
  largest entry) between this implementation's output and parameter gradients and the naive
  formulation's, on the same weights with random quadratic terms; ``equal`` says whether it
  is within float32 tolerance.

``--compile`` adds, for the conventional baseline and each quadratic model's first
implementation (``default``), a row for the same model under ``torch.compile`` (inductor),
timed in the same interleaved loop: ``compiled`` is true, ``compile_s`` is the time of the
first (compiling) step, ``eager_ratio`` the compiled step time over the same model's eager one,
and ``time_ratio``/``flops_ratio``/``arith_ratio`` are taken against the *compiled* baseline (its
``conv_share`` measured on the compiled step); ``vs_arith`` is ``time_ratio / arith_ratio``.
Compiled quadratic rows also split their step by the profiler into convolutions and the rest:
``conv_ratio`` and ``other_ratio`` are each part's time over the compiled baseline's same part
(``arith_ratio`` assumes the first equals ``flops_ratio`` and the second 1). ``compile_s`` uses
inductor's on-disk cache when it is warm.
``max_rel_err`` of a compiled row compares its first step (output and parameter gradients) with
the eager model's on the same weights. Memory is not measured for compiled rows.

``--json`` prints one JSON object per row; otherwise a table.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from .layers import QuadraticLayer

__all__ = ["main", "run", "set_implementation", "compare_implementations", "step_memory", "machine"]

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


# "default": the model as quadnn builds it (its layers planned by plan_recompute at budget 1);
# the others set every quadratic layer to that implementation.
IMPLEMENTATIONS = ("default",) + QuadraticLayer.IMPLEMENTATIONS


def set_implementation(model: nn.Module, implementation: str) -> nn.Module:
    """Set every quadratic layer of ``model`` to ``implementation`` (one of :data:`IMPLEMENTATIONS`;
    "default" leaves the model as it is)."""
    if implementation not in IMPLEMENTATIONS:
        raise ValueError(f"implementation must be one of {IMPLEMENTATIONS}, got {implementation!r}")
    if implementation == "default":
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
    return shape


def batch(batch_size: int, shape: tuple[int, ...], num_classes: int = 10, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn((batch_size, *shape), generator=gen), torch.randint(0, num_classes, (batch_size,), generator=gen)


def make_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, weight_decay=5e-4)

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


def conv_share(step: Callable[[], None], steps: int = 2) -> float:
    """Fraction of ``step``'s wall time spent in convolutions (forward and backward), on the CPU."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t = time.perf_counter()
        for _ in range(steps):
            step()
        wall = time.perf_counter() - t
    conv = sum(e.cpu_time_total for e in prof.key_averages()
               if e.key in ("aten::convolution", "aten::convolution_backward"))
    return conv / 1e6 / wall


def randomise_terms_(model: nn.Module, scale: float = 0.05, seed: int = 0) -> nn.Module:
    """Move the quadratic terms off their ReLinear reference so every term takes part."""
    from .relinear import quadratic_terms

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p, _, _ in quadratic_terms(model):
            p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * scale)
    return model


def compare_implementations(model: nn.Module, x: torch.Tensor, y: torch.Tensor, implementation: str,
                            reference: str = "naive") -> float:
    """Largest relative difference of output and parameter gradients between two implementations."""
    a = set_implementation(randomise_terms_(copy.deepcopy(model)), implementation).train()
    b = set_implementation(copy.deepcopy(a), reference).train()
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


# -- memory: one row per process ----------------------------------------------------------
def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def step_memory(name: str, implementation: str, batch_size: int, shape: tuple[int, ...],
                threads: int | None = None) -> float:
    """Peak extra resident memory (MB) of one training step, measured in this process.

    One warm-up step first (gradients and optimiser state then exist, as in training), then
    the high-water mark is reset (``/proc/self/clear_refs``) and one more step is taken.
    Meant to run in a fresh process: :func:`run` starts one per row.
    """
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = set_implementation(create(name, in_chans=shape[0]), implementation).train()
    x, y = batch(batch_size, shape)
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


def _memory_in_subprocess(name, implementation, batch_size, shape, threads) -> float:
    cmd = [sys.executable, "-m", "quadnn.bench", "--_memory", name, implementation,
           "--batch-size", str(batch_size), "--input", "x".join(map(str, shape))]
    if threads:
        cmd += ["--threads", str(threads)]
    # A fixed mmap threshold makes glibc hand every large block back to the system when it is
    # freed (by default the threshold grows and freed activations stay in the heap), so the
    # resident set follows the memory actually in use.
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="65536")
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    return float(out.stdout.strip().splitlines()[-1])


# -- the benchmark ------------------------------------------------------------------------------
def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {torch.get_num_threads()} threads, torch {torch.__version__}"


def _compiled_row(name: str, shape, x, y, seed: int, quadratic: bool):
    """(compiled model, its step, compile seconds, max_rel_err against eager on the same weights)."""
    torch.manual_seed(seed)
    model = create(name, in_chans=shape[0]).train()
    if quadratic:
        randomise_terms_(model)
    eager = copy.deepcopy(model)
    compiled = torch.compile(model)
    outs = []
    t = time.perf_counter()
    for m in (compiled, eager):
        out = m(x)
        F.cross_entropy(out, y).backward()
        outs.append([out.detach()] + [p.grad for p in (model if m is compiled else eager).parameters()])
        if m is compiled:
            compile_s = time.perf_counter() - t
    err = 0.0
    for u, v in zip(*outs):
        if u is None or v is None:
            continue
        scale = v.abs().max().item() or 1.0
        err = max(err, (u - v).abs().max().item() / scale)
    model.zero_grad(set_to_none=True)
    return model, make_step(compiled, x, y), compile_s, err


def run(models=DEFAULT_MODELS, batch_size: int = 128, input_shape=(3, 32, 32), steps: int = 10,
        warmup: int = 2, implementations=("default", "naive"), baseline: str | None = None,
        memory: bool = True, threads: int | None = None, seed: int = 0, compile: bool = False) -> list[dict]:
    """Measure every (model, implementation) against its baseline; return one dict per row.

    ``compile=True`` adds the compiled rows described in the module docstring."""
    if threads:
        torch.set_num_threads(threads)
    shape = tuple(input_shape)
    x, y = batch(batch_size, shape)
    # rows: (row name, timm name, implementation or None, baseline, compiled)
    rows = []
    for name in models:
        base = baseline or baseline_name(name)
        if not any(r[1] == base and r[2] is None for r in rows):
            rows.append((base, base, None, base, False))
        for impl in implementations:
            rows.append((name, name, impl, base, False))
    if compile:
        firsts = {}
        for r in rows:
            firsts.setdefault(r[1], r)
        rows += [r[:4] + (True,) for r in firsts.values()]
    steps_fn, built, extra = {}, {}, {}
    for key in rows:
        row_name, name, impl, _, compiled = key
        if compiled:
            model, steps_fn[key], compile_s, err = _compiled_row(name, shape, x, y, seed, impl is not None)
            built[key], extra[key] = model, dict(compile_s=compile_s)
            if impl is not None:
                extra[key].update(max_rel_err=err, equal=err <= EQUAL_RTOL)
            continue
        torch.manual_seed(seed)
        model = create(name, in_chans=shape[0]).train()
        if impl is not None:
            if not is_quadratic(model):
                raise ValueError(f"{name!r} has no quadratic layers: pass quadratic models to --models "
                                 "(each one's conventional baseline is added by itself)")
            set_implementation(model, impl)
        built[key] = model
        steps_fn[key] = make_step(model, x, y)
    for _ in range(warmup):
        for key in rows:
            steps_fn[key]()
    times = {key: [] for key in rows}
    for _ in range(steps):  # interleaved, so load changes hit every row alike
        for key in rows:
            t = time.perf_counter()
            steps_fn[key]()
            times[key].append(time.perf_counter() - t)
    ex, ey = x[: min(8, batch_size)], y[: min(8, batch_size)]
    results = []
    for key in rows:
        row_name, name, impl, base, compiled = key
        model = built[key]
        med = statistics.median(times[key])
        q = statistics.quantiles(times[key], n=4) if len(times[key]) >= 2 else (0.0, 0.0, 0.0)
        row = dict(model=name, implementation=impl or "conventional", baseline=base, compiled=compiled,
                   params=sum(p.numel() for p in model.parameters()),
                   gflops=forward_gflops(model, x), step_ms=1000 * med, step_ms_iqr=1000 * (q[2] - q[0]),
                   batch_size=batch_size, input="x".join(map(str, shape)), steps=steps)
        row.update(extra.get(key, {}))
        if impl is None or compiled:
            row["conv_share"] = conv_share(steps_fn[key])
        if impl is not None and not compiled:
            torch.manual_seed(seed)
            row["max_rel_err"] = compare_implementations(create(name, in_chans=shape[0]), ex, ey, impl)
            row["equal"] = row["max_rel_err"] <= EQUAL_RTOL
        if memory and not compiled:
            row["extra_mb"] = _memory_in_subprocess(name, impl or "default", batch_size, shape, threads)
        results.append(row)
    base_rows = {(r["model"], r["compiled"]): r for r in results if r["implementation"] == "conventional"}
    eager_rows = {(r["model"], r["implementation"]): r for r in results if not r["compiled"]}
    for r in results:
        b = base_rows[(r["baseline"], r["compiled"])]
        r["time_ratio"] = r["step_ms"] / b["step_ms"]
        r["flops_ratio"] = r["gflops"] / b["gflops"]
        if r["implementation"] != "conventional":
            r["arith_ratio"] = 1 + (r["flops_ratio"] - 1) * b["conv_share"]
            if r["compiled"]:
                r["vs_arith"] = r["time_ratio"] / r["arith_ratio"]
                r["conv_ratio"] = r["time_ratio"] * r["conv_share"] / b["conv_share"]
                r["other_ratio"] = r["time_ratio"] * (1 - r["conv_share"]) / (1 - b["conv_share"])
        if r["compiled"]:
            r["eager_ratio"] = r["step_ms"] / eager_rows[(r["model"], r["implementation"])]["step_ms"]
        if memory and "extra_mb" in r:
            r["mem_ratio"] = r["extra_mb"] / b["extra_mb"] if b["extra_mb"] > 0 else float("nan")
        r["machine"] = machine()
    return results


def format_table(rows: list[dict]) -> str:
    cols = [("model", "{}"), ("implementation", "{}"), ("compiled", "{}"), ("params", "{:,}"), ("gflops", "{:.3f}"),
            ("step_ms", "{:.1f}"), ("time_ratio", "{:.2f}"), ("conv_share", "{:.2f}"), ("arith_ratio", "{:.2f}"),
            ("vs_arith", "{:.2f}"), ("conv_ratio", "{:.2f}"), ("other_ratio", "{:.2f}"), ("eager_ratio", "{:.2f}"),
            ("compile_s", "{:.0f}"),
            ("extra_mb", "{:.0f}"), ("mem_ratio", "{:.2f}"),
            ("max_rel_err", "{:.1e}"), ("equal", "{}")]
    cols = [(c, f) for c, f in cols if any(c in r for r in rows) and (c != "compiled" or any(r.get(c) for r in rows))]
    cells = [[c for c, _ in cols]] + [[f.format(r[c]) if c in r else "-" for c, f in cols] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    lines = ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m quadnn.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS), help="timm names of quadratic models")
    p.add_argument("--baseline", default=None, help="conventional model to compare with (default: same depth)")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--input", default="3x32x32", help="CxHxW")
    p.add_argument("--steps", type=int, default=10, help="timed steps per row (after warm-up)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--implementations", nargs="+", default=["default", "naive"],
                   choices=list(IMPLEMENTATIONS))
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    p.add_argument("--no-memory", action="store_true", help="skip the per-row memory processes")
    p.add_argument("--compile", action="store_true",
                   help="also time the baseline and each model's first implementation under torch.compile")
    p.add_argument("--json", action="store_true", help="one JSON object per row")
    p.add_argument("--_memory", nargs=2, metavar=("MODEL", "IMPL"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    try:
        shape = parse_input(args.input)
    except ValueError as e:
        p.error(str(e))
    if args._memory:
        print(step_memory(args._memory[0], args._memory[1], args.batch_size, shape, args.threads))
        return 0
    try:
        rows = run(args.models, args.batch_size, shape, args.steps, args.warmup, tuple(args.implementations),
                   args.baseline, not args.no_memory, args.threads, compile=args.compile)
    except ValueError as e:  # a bad model name or baseline: say it like argparse does
        p.error(str(e))
    if args.json:
        for r in rows:
            print(json.dumps(r))
    else:
        print(f"# {machine()}; batch {args.batch_size}, input {args.input}, median of {args.steps} steps")
        print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
