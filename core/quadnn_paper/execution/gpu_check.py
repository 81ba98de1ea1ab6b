"""``make gpu-check``: first contact with one GPU node in one command, a few minutes, one report.

    python -m quadnn_paper.execution.gpu_check [--out build/gpu-check] [--device cuda:0]
                                                [--skip CHECK ...] [--section kitti_lapdepth]

Runs with our venv or with a PyTorch the machine already has (``PYTHONPATH=core python3 -m ...``;
nothing is installed). Each check passes, fails or is skipped, with its message and, for a failure,
what to do; ``report.json`` and ``report.md`` go to ``--out``, with each subprocess's log under
``logs/`` and the benchmark's rows in ``bench.json`` (``python -m quadnn_paper.bench --json`` lines).
The checks, in order:

- ``environment``: the GPUs, driver, torch, CUDA, cuDNN and library versions;
- ``smoke_train``: step 1 of the first contact (``docs/gpu.md``), ``quadnn-train --profile smoke --device cuda``;
- ``layers``: every neuron kind x implementation, one training step (forward, backward, SGD) of a
  quadratic convolution on the GPU against the same step in float64 on the CPU, in fp32 (TF32
  off), TF32, bf16 autocast and channels_last, within :data:`LAYER_TOLERANCE`;
- ``network``: the same for a whole QResNet20 step, plus ``torch.compile`` (fp32), within
  :data:`NETWORK_TOLERANCE`;
- ``ddp``: ``torchrun`` over the GPUs present with NCCL (skipped, saying so, with one GPU);
- ``tiny_section``: one section's full-profile runs on TINY data through the local runner;
- ``bench``: ``python -m quadnn_paper.bench --device cuda`` rows (conventional, default, naive, lean,
  compiled): time ratio, peak memory, launches per step;
- ``epoch``: the engine's CIFAR-10 epoch over full-size generated data (50,000 + 10,000 images in
  the real on-disk format) for ResNet20 and QResNet20 (ReLinear-sg), eager and compiled, in
  seconds beside the paper's (:data:`PAPER_EPOCH_SECONDS`), with each compiled run's compile
  seconds and, as the floor, the plain step (forward, cross-entropy, backward, multi-tensor SGD)
  under CUDA graphs times the epoch's steps. Each run in a child process of its own; each
  finished run's row goes to ``epoch.json`` at once (a check cut off keeps the rows it finished),
  naming its GPU (``machine``), ``device`` and, compiled, whether the inductor cache was cold or
  warm: the folder is committable under ``docs/gpu/`` as it is (``quadnn_paper.data.gpu_bench``),
  and the report's GPU-hours then use these seconds.

Without CUDA it prints one line and exits with status 2; with a failed check, status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import importlib
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "Check",
    "CHECKS",
    "LAYER_TOLERANCE",
    "NETWORK_TOLERANCE",
    "main",
    "run_checks",
    "layer_step_errors",
    "network_step_errors",
    "write_report",
    "check_epoch",
    "cuda_graph_step_seconds",
    "PAPER_EPOCH_SECONDS",
    "epoch_row",
]

FAILURES = "docs/gpu.md#what-each-failure-looks-like"  # the table of failures and their meaning

# Largest difference, relative to each tensor's largest entry, between the GPU step and float64 on
# the CPU (output, input and parameter gradients, parameters after one SGD step). One layer: fp32
# rounding (2^-24) over sums of tens of products is far below 1e-4; TF32 rounds the convolution's
# inputs to 10 mantissa bits (2^-11 = 4.9e-4, doubled by the product r*g); bf16 to 7 (2^-8 = 3.9e-3).
LAYER_TOLERANCE = {"fp32": 1e-4, "channels_last": 1e-4, "tf32": 1e-2, "bf16": 5e-2}
# A whole QResNet20 (20 quadratic layers, batch norm over 8 images): float32 as in quadnn_paper.bench's
# EQUAL_RTOL. TF32 and bf16 errors compound through the layers and their random quadratic terms:
# bf16 autocast on the CPU measured 0.22 (gpu_check.network_step_errors(["bf16"], "cpu")), so the
# bound for bf16 only catches a broken step, not a loss of accuracy.
NETWORK_TOLERANCE = {"fp32": 1e-3, "channels_last": 1e-3, "compiled": 1e-3, "tf32": 5e-2, "bf16": 0.5}
MODES = ("fp32", "tf32", "bf16", "channels_last")
# The paper's seconds per CIFAR-10 epoch (batch 128) of the conventional and the quadratic ResNet20.
PAPER_EPOCH_SECONDS = {"cifar_resnet20": 10.43, "cifar_qresnet20": 10.87}
EPOCH_RUNS = 2  # epochs per timed run: the last one is timed (the first pays cuDNN's autotuning, compiling)
EPOCH_DATA = (50000, 10000)  # training and test images of the generated CIFAR-10: the real one's


@dataclasses.dataclass
class Check:
    """One check's outcome: ``status`` is "pass", "fail" or "skip"; ``todo`` says what to do."""

    name: str
    status: str
    message: str
    todo: str = ""
    seconds: float = 0.0
    data: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Context:
    device: str  # "cuda:N" (or "cpu" in the tests of this module)
    out: Path
    python: str = sys.executable
    section: str = "kitti_lapdepth"
    timeout: float = 300.0  # per subprocess
    compile: bool = True


# -- helpers ------------------------------------------------------------------------------------
def _env() -> dict:
    """The environment of a child process: it imports quadnn as this process does."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), PYTHONUNBUFFERED="1")


def _subprocess(ctx: Context, name: str, cmd: list[str], timeout: float | None = None) -> tuple[int, str]:
    """Run ``cmd`` with its output in ``logs/<name>.log``; (exit status, last lines). A timeout is exit 124."""
    log = ctx.out / "logs" / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        try:
            code = subprocess.call(
                cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=_env(), timeout=timeout
            )
        except subprocess.TimeoutExpired:
            code = 124
    lines = log.read_text(errors="replace").splitlines()
    return code, "\n".join(lines[-8:])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rel_err(got, want) -> float:
    """Largest |got - want| relative to want's largest entry (inf for a non-finite value)."""
    import torch

    got = got.detach().to("cpu", torch.float64)
    want = want.detach().to("cpu", torch.float64)
    if not torch.isfinite(got).all():
        return float("inf")
    scale = want.abs().max().item() or 1.0
    return (got - want).abs().max().item() / scale


@contextlib.contextmanager
def _tf32(on: bool):
    """TF32 in cuBLAS and cuDNN on or off (on CUDA cuDNN's is on by default), restored after."""
    import torch

    flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = on
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags


def _train_step(model, x, target, device, mode: str, lr: float = 0.1) -> list:
    """Output, input gradient, parameter gradients and parameters after one SGD step, in this order.
    ``mode``: TF32 on for the whole step only in "tf32"; bf16 autocast around the forward in "bf16"."""
    import torch
    import torch.nn.functional as F

    from ..engine.optim import make_optimizer  # the engine's one builder

    x = x.detach().clone().requires_grad_(True)
    opt = make_optimizer("sgd", model.parameters(), lr=lr)
    kind = "cuda" if device.type == "cuda" else "cpu"
    with _tf32(mode == "tf32"):
        with torch.autocast(kind, dtype=torch.bfloat16, enabled=mode == "bf16"):
            out = model(x)
        loss = (out.float() * target).sum() if target.is_floating_point() else F.cross_entropy(out.float(), target)
        loss.backward()
        grads = [p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p) for p in model.parameters()]
        opt.step()
    return [out.detach(), x.grad.detach()] + grads + [p.detach().clone() for p in model.parameters()]


# -- the numerical checks ---------------------------------------------------------------------------
def layer_step_errors(neuron: str, implementation: str, modes, device, seed: int = 0) -> dict[str, float]:
    """Per mode, the relative error of one training step of a quadratic 3x3 convolution (terms off
    their ReLinear reference, so each takes part) on ``device`` against float64 on the CPU."""
    import torch

    from quadnn import QuadraticConv2d
    from quadnn_paper.bench import randomise_terms_

    torch.manual_seed(seed)
    ref = randomise_terms_(QuadraticConv2d(6, 8, 3, padding=1, neuron=neuron), seed=seed).double()
    ref.implementation = implementation
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(4, 6, 9, 9, generator=gen, dtype=torch.float64)
    target = torch.randn(4, 8, 9, 9, generator=gen, dtype=torch.float64)
    return _errors(ref, x, target, modes, torch.device(device))


def network_step_errors(modes, device, model_name: str = "cifar_qresnet20", batch: int = 8, seed: int = 0):
    """Per mode (as in :data:`NETWORK_TOLERANCE`; "compiled" is ``torch.compile`` in fp32), the
    relative error of one training step of a whole network on ``device`` against float64 on the CPU."""
    import torch

    from quadnn_paper.bench import create, randomise_terms_

    torch.manual_seed(seed)
    ref = randomise_terms_(create(model_name), seed=seed).double().train()
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, 3, 32, 32, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 10, (batch,), generator=gen)
    return _errors(ref, x, y, modes, torch.device(device))


def _errors(ref, x, target, modes, device) -> dict[str, float]:
    """``{mode: error}`` of ``ref``'s step on ``device`` (float32) against its float64 step on the CPU;
    a mode that raises maps to its exception."""
    import torch

    want = _train_step(copy.deepcopy(ref), x, target, torch.device("cpu"), "fp32")
    errs = {}
    for mode in modes:
        layout = torch.channels_last if mode == "channels_last" and x.dim() == 4 else torch.preserve_format
        model = copy.deepcopy(ref).float().to(device, memory_format=layout)
        run_mode = "fp32" if mode == "compiled" else mode
        net = torch.compile(model) if mode == "compiled" else model  # its parameters are the model's
        xd = x.float().to(device, memory_format=layout)
        td = (target.float() if target.is_floating_point() else target).to(device)
        try:
            got = _train_step(net, xd, td, device, run_mode)  # compiled: TF32 off while it compiles, too
            errs[mode] = max(_rel_err(g, w) for g, w in zip(got, want))
        except Exception as exc:  # noqa: BLE001 (a crash is a finding, reported with the others)
            errs[mode] = exc
    return errs


# -- the checks -------------------------------------------------------------------------------------
def check_environment(ctx: Context) -> Check:
    import torch

    facts = dict(
        python=platform.python_version(),
        torch=torch.__version__,
        cuda=torch.version.cuda,
        cudnn=torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        host=socket.gethostname(),
    )
    for name in ("torchvision", "timm", "numpy"):
        try:
            facts[name] = importlib.import_module(name).__version__
        except ImportError:
            facts[name] = None
    # optional: what the local runner, SLURM runner and notebooks need; absent ones skip their parts
    facts["optional"] = {n: importlib.util.find_spec(n) is not None for n in ("cloudpickle", "submitit", "papermill")}
    if torch.device(ctx.device).type == "cuda":
        facts["gpus"] = [
            dict(
                name=torch.cuda.get_device_name(i),
                capability=".".join(map(str, torch.cuda.get_device_capability(i))),
                memory_gb=round(torch.cuda.get_device_properties(i).total_memory / 2**30, 1),
            )
            for i in range(torch.cuda.device_count())
        ]
        facts["driver"] = _driver_version()
    n = len(facts.get("gpus", []))
    gpu = facts["gpus"][0]["name"] if n else ctx.device
    msg = f"{n} x {gpu}, driver {facts.get('driver')}, torch {facts['torch']}, CUDA {facts['cuda']}, cuDNN {facts['cudnn']}"
    return Check("environment", "pass", msg, data=facts)


def _driver_version() -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.splitlines()[0].strip() if out.strip() else None


def _last_json(text: str) -> dict | None:
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


def check_smoke_train(ctx: Context) -> Check:
    cmd = [ctx.python, "-m", "quadnn_paper.execution.train", "--profile", "smoke", "--device", ctx.device]
    cmd += ["--out", str(ctx.out / "smoke")]
    code, tail = _subprocess(ctx, "smoke_train", cmd, ctx.timeout)
    res = _last_json(tail)
    if code == 0 and res and res.get("status") == "finished":
        return Check(
            "smoke_train",
            "pass",
            f"finished: test error {res.get('test_error')} %, {res.get('epoch_time'):.1f} s/epoch",
            data=res,
        )
    return Check(
        "smoke_train",
        "fail",
        f"exit {code}: {tail.splitlines()[-1] if tail else 'no output'}",
        f"read logs/smoke_train.log; the first traceback names the cause (see {FAILURES})",
    )


def _judge(errs: dict, tolerance: dict) -> list[str]:
    """What is off in ``errs`` (``{label: error or exception}``; the label ends in its mode)."""
    bad = []
    for label, e in errs.items():
        tol = tolerance[label.rsplit("/", 1)[-1]]
        if isinstance(e, Exception):
            bad.append(f"{label}: {type(e).__name__}: {e}")
        elif not e <= tol:
            bad.append(f"{label}: {e:.1e} > {tol:.0e}")
    return bad


def _number(e) -> float | str:
    return f"{type(e).__name__}: {e}" if isinstance(e, Exception) else e


def check_layers(ctx: Context) -> Check:
    from quadnn.layers import NEURONS, QuadraticLayer

    errs = {}
    for neuron in NEURONS:
        for impl in QuadraticLayer.IMPLEMENTATIONS:
            for mode, e in layer_step_errors(neuron, impl, MODES, ctx.device).items():
                errs[f"{neuron}/{impl}/{mode}"] = e
    bad = _judge(errs, LAYER_TOLERANCE)
    finite = {k: v for k, v in errs.items() if not isinstance(v, Exception)}
    worst = {m: max((v for k, v in finite.items() if k.endswith("/" + m)), default=float("nan")) for m in MODES}
    summary = ", ".join(f"{m} {worst[m]:.1e} (tol {LAYER_TOLERANCE[m]:.0e})" for m in MODES)
    data = dict(errors={k: _number(v) for k, v in errs.items()}, worst=worst, tolerance=LAYER_TOLERANCE)
    if bad:
        return Check(
            "layers",
            "fail",
            f"{len(bad)} of {len(errs)} off: {'; '.join(bad[:4])}",
            "a quadratic layer computes differently on this GPU: run tests/test_layers.py there and report the "
            "kind, implementation and mode",
            data=data,
        )
    n = len(NEURONS) * len(QuadraticLayer.IMPLEMENTATIONS)
    return Check("layers", "pass", f"{n} kind x implementation pairs; worst: {summary}", data=data)


def check_network(ctx: Context) -> Check:
    modes = list(MODES) + (["compiled"] if ctx.compile else [])
    errs = network_step_errors(modes, ctx.device)
    bad = _judge(errs, NETWORK_TOLERANCE)
    summary = ", ".join(f"{m} {e:.1e}" for m, e in errs.items() if not isinstance(e, Exception))
    data = dict(errors={k: _number(v) for k, v in errs.items()}, tolerance={m: NETWORK_TOLERANCE[m] for m in modes})
    if bad:
        return Check(
            "network",
            "fail",
            "; ".join(bad),
            "the GPU step of QResNet20 differs from float64 beyond rounding: keep the failing mode off "
            "(RunConfig tf32/amp/channels_last/compile) and report it",
            data=data,
        )
    return Check("network", "pass", f"QResNet20 step vs float64 CPU: {summary}", data=data)


def check_ddp(ctx: Context) -> Check:
    import torch

    n = torch.cuda.device_count() if torch.device(ctx.device).type == "cuda" else 0
    if n < 2:
        return Check(
            "ddp", "skip", f"{n} GPU(s) here: DDP over NCCL needs 2 or more; run gpu-check on a multi-GPU node"
        )
    cmd = [ctx.python, "-m", "torch.distributed.run", "--nnodes=1", f"--nproc-per-node={min(n, 8)}"]
    cmd += ["--master-addr=127.0.0.1", f"--master-port={_free_port()}"]
    cmd += ["-m", "quadnn_paper.execution.train", "--profile", "smoke", "--device", "cuda"]
    cmd += ["--out", str(ctx.out / "ddp")]
    code, tail = _subprocess(ctx, "ddp", cmd, ctx.timeout)
    res = _last_json(tail)
    if code == 0 and res and res.get("status") == "finished":
        return Check("ddp", "pass", f"{min(n, 8)} ranks over NCCL: finished, test error {res.get('test_error')} %")
    return Check(
        "ddp",
        "fail",
        f"torchrun exit {code}: {tail.splitlines()[-1] if tail else 'no output'}",
        f"read logs/ddp.log, every rank's traceback (see {FAILURES}: hangs, NCCL, device ordinals)",
    )


def check_tiny_section(ctx: Context) -> Check:
    cmd = [ctx.python, "-m", "quadnn_paper.execution.gpu_check", "--_tiny", ctx.section, "--out", str(ctx.out)]
    code, tail = _subprocess(ctx, "tiny_section", cmd, ctx.timeout)
    res = _last_json(tail)
    if code == 0 and res and res.get("finished") == res.get("runs"):
        return Check(
            "tiny_section",
            "pass",
            f"{ctx.section}: {res['runs']} full-profile runs on TINY data finished through the local runner "
            f"({res['gpus']} GPU slot(s))",
            data=res,
        )
    return Check(
        "tiny_section",
        "fail",
        f"exit {code}: {tail.splitlines()[-1] if tail else 'no output'}",
        f"read logs/tiny_section.log and the job logs under {ctx.out}/tiny/ (see {FAILURES})",
        data=res or {},
    )


def _tiny_section(section: str, out: Path) -> int:
    """Child process of :func:`check_tiny_section`: the section's runs on TINY data, local runner."""
    from ..engine.tiny import tiny_runs
    from .execute import execute
    from .runners import visible_gpus
    from .sections import section_runs

    runs = tiny_runs(section_runs(section, "full"), out / "tiny" / "data")
    results = execute(runs, out / "tiny" / "runs", runner="local", wait=True, progress=False)
    finished = sum(1 for r in results.values() if r is not None and r.get("status") == "finished")
    print(json.dumps(dict(section=section, runs=len(runs), finished=finished, gpus=len(visible_gpus()))))
    return 0 if finished == len(runs) else 1


def check_bench(ctx: Context) -> Check:
    # depth 20 (the paper's timed pair) and 56 (where the default and naive were closest on an H100)
    cmd = [ctx.python, "-m", "quadnn_paper.bench", "--device", ctx.device]
    cmd += ["--models", "cifar_qresnet20", "cifar_qresnet56"]
    cmd += ["--implementations", "default", "naive", "lean", "--steps", "10", "--json"]
    cmd += ["--compile"] if ctx.compile else []
    code, _ = _subprocess(ctx, "bench", cmd, ctx.timeout)
    log = (ctx.out / "logs" / "bench.log").read_text(errors="replace").splitlines()
    rows = []
    for line in log:
        if line.startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                rows.append(json.loads(line))
    if code != 0 or not rows:
        return Check(
            "bench",
            "fail",
            f"exit {code}: {log[-1] if log else 'no output'}",
            "read logs/bench.log; the rows are the efficiency section's GPU figures",
        )
    (ctx.out / "bench.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    parts = []
    for r in rows:
        label = r["implementation"] + (" compiled" if r["compiled"] else "")
        s = f"{label} {r['time_ratio']:.2f}x"
        if "mem_ratio" in r:
            s += f" mem {r['mem_ratio']:.2f}x"
        if "launches" in r:
            s += f" {r['launches']} launches"
        parts.append(s)
    unequal = [r for r in rows if r.get("equal") is False]
    msg = f"{rows[0]['machine']}, batch {rows[0]['batch_size']}: " + "; ".join(parts)
    if unequal:
        what = ", ".join(
            f"{r['implementation']}{' compiled' if r['compiled'] else ''} {r['max_rel_err']:.1e}" for r in unequal
        )
        return Check(
            "bench",
            "fail",
            msg + f"; differs from naive/eager beyond float32: {what}",
            "the timings hold, the numerics do not: compare with the network check (TF32 off) before trusting them",
            data=dict(rows=len(rows)),
        )
    return Check("bench", "pass", msg, data=dict(rows=len(rows)))


def check_epoch(ctx: Context) -> Check:
    shutil.rmtree(ctx.out / "epoch" / "runs", ignore_errors=True)  # timed now, not read from a cache
    ctx.out.mkdir(parents=True, exist_ok=True)
    (ctx.out / "epoch.json").unlink(missing_ok=True)  # this check's rows only
    rows, failed = [], []
    for model in PAPER_EPOCH_SECONDS:
        for compiled in (False, True) if ctx.compile else (False,):
            name = f"epoch_{model}" + ("_compiled" if compiled else "")
            cmd = [ctx.python, "-m", "quadnn_paper.execution.gpu_check", "--_epoch", model, "--device", ctx.device]
            cmd += ["--out", str(ctx.out)] + (["--_compiled"] if compiled else [])
            code, tail = _subprocess(ctx, name, cmd, 3 * ctx.timeout)
            row = _last_json(tail)
            if code != 0 or not row or row.get("status") != "finished":
                failed.append(f"{name}: exit {code}: {tail.splitlines()[-1] if tail else 'no output'}")
            else:
                rows.append(row)  # written at once: the rows finished so far survive a cut-off
                (ctx.out / "epoch.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if failed:
        return Check("epoch", "fail", "; ".join(failed), "read logs/epoch_*.log (the data is written by the first)")
    return Check("epoch", "pass", "; ".join(_epoch_line(r) for r in rows), data=dict(rows=rows))


def _epoch_line(r: dict) -> str:
    label = r["model"] + (" compiled" if r["compiled"] else "")
    s = f"{label} {r['epoch_seconds']:.2f} s/epoch (paper {PAPER_EPOCH_SECONDS[r['model']]:g})"
    if r.get("compile_seconds") is not None:
        s += f", compiling {r['compile_seconds']:.0f} s"
    if r.get("floor_seconds") is not None:
        s += f", CUDA-graph floor {r['floor_seconds']:.2f} s"
    return s


def _epoch_run(
    model: str, compiled: bool, device: str, out: Path, implementation: str = "auto", time_floor: bool = True
) -> int:
    """Child process of :func:`check_epoch`: one timed run; prints its row as one JSON line.
    ``implementation``: the quadratic layers' (RunConfig.implementation); ``time_floor``: also time the
    plain step under CUDA graphs (eager runs)."""
    from ..data import tiny
    from ..engine import RunConfig, run

    data = out / "epoch" / f"cifar10-{EPOCH_DATA[0]}"
    if not (data / "cifar-10-batches-py" / "test_batch").exists():
        tiny.write_cifar(data, "cifar10", *EPOCH_DATA)
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str((out / "epoch" / "inductor").resolve()))  # kept
    inductor = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
    cold = not (inductor.is_dir() and any(inductor.iterdir()))  # before this run compiles into it
    relinear = "sg" if "qresnet" in model else "none"
    cfg = RunConfig(model=model, dataset="cifar10", data_dir=str(data), epochs=EPOCH_RUNS, relinear=relinear)
    cfg = cfg.replace(device=device, compile=compiled, progress=False, implementation=implementation)
    res = run(cfg, out / "epoch" / "runs")
    floor = None
    if not compiled and time_floor:
        # the floor compiles into a cache of its own: a later compiled run's "cold" means the engine's
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str((out / "epoch" / "inductor-floor").resolve())
        steps = -(-EPOCH_DATA[0] // cfg.batch_size)  # the engine's steps per epoch (the last one partial)
        floor = steps * cuda_graph_step_seconds(model, device, cfg.batch_size)
    print(json.dumps(epoch_row(model, compiled, res, device, floor, cold)))
    return 0


def epoch_row(model: str, compiled: bool, res: dict, device: str, floor: float | None, cold: bool) -> dict:
    """The row :func:`_epoch_run` prints for one run's result ``res``: the format of a committed
    ``epoch*.json`` (:mod:`quadnn_paper.data.gpu_bench`), with the GPU named (``machine``)."""
    from quadnn_paper.common.machine import machine

    row = dict(model=model, compiled=compiled, status=res["status"], compile_seconds=res.get("compile_seconds"))
    if res.get("implementation"):
        row["implementation"] = res["implementation"]  # the quadratic layers' (the engine picks by device)
    row["epoch_seconds"] = res["history"][-1]["epoch_time"] if res.get("history") else None
    if not compiled:
        row["floor_seconds"] = floor
    row.update(machine=machine(device), device=device)
    if compiled:
        row["inductor_cache"] = "cold" if cold else "warm"
    return row


def cuda_graph_step_seconds(model_name: str, device: str, batch: int = 128, steps: int = 30) -> float:
    """Median seconds of the plain training step of ``model_name`` (:func:`quadnn_paper.bench.make_step`:
    forward, cross-entropy, backward, multi-tensor SGD; fp32) under CUDA graphs (``torch.compile``,
    mode ``reduce-overhead``), after three warm-up steps."""
    import statistics

    import timm
    import torch

    from quadnn_paper import bench

    model = timm.create_model(model_name, num_classes=10).to(device).train()
    x = torch.randn(batch, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    plain = bench.make_step(torch.compile(model, mode="reduce-overhead"), x, y)

    def step():
        torch.compiler.cudagraph_mark_step_begin()
        plain()

    for _ in range(3):
        step()
    clock = bench.Clock(device)
    clock.start()
    return statistics.median(clock.time(step) for _ in range(steps))


CHECKS: dict[str, Callable[[Context], Check]] = {
    "environment": check_environment,
    "smoke_train": check_smoke_train,
    "layers": check_layers,
    "network": check_network,
    "ddp": check_ddp,
    "tiny_section": check_tiny_section,
    "bench": check_bench,
    "epoch": check_epoch,
}


def run_checks(ctx: Context, skip=(), echo=print) -> list[Check]:
    """Every check of :data:`CHECKS` not in ``skip``, in order; a check that raises fails with its error."""
    results = []
    for name, fn in CHECKS.items():
        if name in skip:
            results.append(Check(name, "skip", "skipped (--skip)"))
            continue
        echo(f"gpu-check: {name} ...")
        t = time.perf_counter()
        try:
            c = fn(ctx)
        except Exception as exc:  # noqa: BLE001
            c = Check(
                name, "fail", f"{type(exc).__name__}: {exc}", f"a bug in the check or the engine (see {FAILURES})"
            )
        c.seconds = round(time.perf_counter() - t, 1)
        echo(f"gpu-check: {name}: {c.status}: {c.message}")
        results.append(c)
    return results


def write_report(checks: list[Check], out: Path, device: str) -> tuple[Path, Path]:
    """``report.json`` and ``report.md`` under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    env = next((c.data for c in checks if c.name == "environment"), {})
    passed = all(c.status != "fail" for c in checks)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    doc = dict(
        when=stamp, device=device, passed=passed, environment=env, checks=[dataclasses.asdict(c) for c in checks]
    )
    (out / "report.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    lines = [
        f"# gpu-check, {stamp}",
        "",
        f"{'All checks passed' if passed else 'Some checks FAILED'} on {device}"
        f" ({next((c.message for c in checks if c.name == 'environment'), '')}).",
        "",
        "| check | status | seconds | message | what to do |",
        "|---|---|---|---|---|",
    ]
    for c in checks:
        cell = lambda s: s.replace("|", "\\|").replace("\n", " ")  # noqa: E731
        lines.append(f"| {c.name} | {c.status} | {c.seconds:g} | {cell(c.message)} | {cell(c.todo)} |")
    lines += ["", f"Failures and what they mean: the table in {FAILURES}. Logs: `logs/`."]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return out / "report.json", out / "report.md"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m quadnn_paper.execution.gpu_check", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="build/gpu-check", help="where report.json, report.md, bench.json and logs/ go")
    p.add_argument("--device", default="cuda:0", help="the GPU to check, cuda:N")
    p.add_argument(
        "--skip", nargs="*", default=[], choices=list(CHECKS), metavar="CHECK", help=f"any of {', '.join(CHECKS)}"
    )
    p.add_argument(
        "--section", default="kitti_lapdepth", help="the section whose TINY runs go through the local runner"
    )
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per subprocess check")
    p.add_argument("--no-compile", action="store_true", help="leave out torch.compile (network, bench, epoch)")
    p.add_argument("--_tiny", default=None, help=argparse.SUPPRESS)
    p.add_argument("--_epoch", default=None, help=argparse.SUPPRESS)
    p.add_argument("--_compiled", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--_implementation", default="auto", help=argparse.SUPPRESS)
    p.add_argument("--_no_floor", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    out = Path(args.out)
    if args._tiny:
        return _tiny_section(args._tiny, out)
    if args._epoch:
        return _epoch_run(args._epoch, args._compiled, args.device, out, args._implementation, not args._no_floor)
    import torch

    device = args.device
    if not device.startswith("cuda"):
        p.error(f"--device must be cuda or cuda:N, got {device!r}")
    if not torch.cuda.is_available():
        print(
            f"gpu-check: no CUDA device here (torch {torch.__version__}, built for CUDA {torch.version.cuda}): "
            "run it on a GPU node, e.g. srun --gres=gpu:1 make gpu-check PYTHON=python3",
            file=sys.stderr,
        )
        return 2
    if ":" not in device:
        device = "cuda:0"
    ctx = Context(device=device, out=out, section=args.section, timeout=args.timeout, compile=not args.no_compile)
    checks = run_checks(ctx, skip=set(args.skip))
    json_path, md_path = write_report(checks, out, device)
    failed = [c.name for c in checks if c.status == "fail"]
    print(f"gpu-check: {'FAILED: ' + ', '.join(failed) if failed else 'all passed'}; report: {md_path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
