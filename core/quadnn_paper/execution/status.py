"""The plan before spending GPU-days: every section's work (engine runs and other computations),
their states, and GPU-hours.

    python -m quadnn_paper.execution.status --profile full          # or: make status PROFILE=full
    python -m quadnn_paper.execution.status --profile full --tiny   # the TINY=1 variant

Prints one line per section: runs, done / running / pending / failed / not submitted, and an
estimate of the GPU-hours still to spend: wall time per epoch times the GPUs each run's submission
requests (:func:`~.execute.resources`). Wall time per epoch is measured on the section's finished
runs; before any has finished it comes from :func:`epoch_seconds`: for a CIFAR run, the engine's
epoch measured on a GPU when one is committed under ``docs/gpu/`` (``make gpu-check``'s epoch rows,
:func:`quadnn_paper.data.gpu_bench.load_epochs`) for the run's model family (conventional or
quadratic), else the paper's ResNet20 epoch; for the other tasks :data:`DEFAULT_SECONDS_PER_EPOCH`.
Either is scaled to each run by its model's forward FLOPs over those of the model it was measured
on (counted by ``torch.utils.flop_counter`` on a small input, so a full quadratic neuron costs what
its arithmetic costs: about 3x a conventional layer, parabolic and poly about 2x). The table says
which source each section's estimate used. Failed runs follow with the last lines of their log and
the command that resubmits them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..common import published
from ..common.files import RefusedFile
from ..common.profiles import PROFILES
from ..data import gpu_bench
from ..engine import RunConfig, RunStore, cached
from .execute import RUNNERS, is_done, make, resources
from .sections import SECTIONS, section_runs, section_work

__all__ = [
    "SECTIONS",
    "section_runs",
    "model_gflops",
    "relative_cost",
    "gpu_hours",
    "epoch_seconds",
    "seconds_note",
    "PAPER_SECONDS",
    "plan_table",
    "training_now",
    "main",
    "DEFAULT_SECONDS_PER_EPOCH",
]


# Stated defaults: wall seconds per epoch of each task's reference model (:data:`REFERENCE`) on the
# GPUs its run requests, used until a section has a finished run to measure. CIFAR: ResNet20 at
# batch 128 on one GPU, the paper's time (a GPU's measured epoch replaces it where committed, see
# epoch_seconds). ImageNet: ResNet-18 on 8 GPUs (~5 min). KITTI: LapDepth with a ResNeXt-101
# encoder over 23,488 images on one GPU.
PAPER_SECONDS = float(published.CIFAR_EPOCH_SECONDS["cifar_resnet20"])
DEFAULT_SECONDS_PER_EPOCH = {"classification": PAPER_SECONDS, "imagefolder": 300.0, "depth": 900.0}
# The data sets whose epoch a committed GPU epoch row (CIFAR-10, 50,000 training images) stands for.
MEASURED_DATASETS = ("cifar10", "cifar100")
REFERENCE = {
    "classification": dict(model="cifar_resnet20", width=1.0, model_kwargs={}),
    "imagefolder": dict(model="imagenet_resnet18", width=1.0, model_kwargs={}),
    "depth": dict(model="lapdepth", model_kwargs=dict(encoder="resnext101_32x8d")),
}
_INPUT = {"classification": (3, 32, 32), "imagefolder": (3, 64, 64), "depth": (3, 64, 64)}


def model_gflops(cfg: RunConfig, cache: str | Path | None = None) -> float:
    """Forward GFLOPs of ``cfg``'s model on a small input of its task (cached under ``cache``)."""
    key = dict(task=cfg.task, model=cfg.model, width=cfg.width, rezero=cfg.rezero, model_kwargs=cfg.model_kwargs)

    def count():

        import torch

        from quadnn.counting import forward_gflops

        from ..engine.tasks import model_for

        # What the task builds, without loading its data (only the output size matters, barely).
        with torch.device("meta"), torch.no_grad():  # shapes only: no memory, no initialisation cost
            model = model_for(cfg).eval()
            return forward_gflops(model, torch.zeros(1, *_INPUT[cfg.task]))

    return cached(cache, "model_gflops", key, count)


def relative_cost(cfg: RunConfig, cache: str | Path | None = None) -> float:
    """Cost of a run's model per epoch against its task's reference model, by forward FLOPs."""
    reference = cfg.replace(**REFERENCE[cfg.task], transfer_from=None)
    return model_gflops(cfg, cache) / model_gflops(reference, cache)


def gpu_hours(cfg: RunConfig, seconds_per_epoch: float, cache: str | Path | None = None) -> float:
    """GPU-hours of ``cfg``: its epochs at ``seconds_per_epoch`` (wall time of its task's reference
    model on the GPUs the run requests), scaled by its model's FLOPs, times those GPUs (a CPU run,
    ``QUADNN_GPUS_PER_RUN=0``, counts as one)."""
    gpus = max(1, resources(cfg)["gpus"])
    return seconds_per_epoch * relative_cost(cfg, cache) * cfg.epochs * gpus / 3600.0


def _measured_row(cfg: RunConfig, measured: gpu_bench.GpuEpochs) -> dict | None:
    """The committed epoch row ``cfg``'s estimate scales from: of its model family, in its mode
    (compiled or eager; eager where its mode was not measured), its own model's where measured,
    else the family's first measured model's; None when its family has no row."""
    fam = gpu_bench.family(cfg.model)
    if fam is None or cfg.task != "classification" or cfg.dataset not in MEASURED_DATASETS:
        return None
    for compiled in dict.fromkeys([bool(cfg.compile), False]):
        models = [m for m in measured.models() if gpu_bench.family(m) == fam and measured.row(m, compiled)]
        if models:
            return measured.row(cfg.model if cfg.model in models else models[0], compiled)
    return None


def epoch_seconds(
    cfg: RunConfig, measured: gpu_bench.GpuEpochs | None = None, cache: str | Path | None = None
) -> tuple[float, str]:
    """``(seconds, source)``: the seconds per epoch of ``cfg``'s task reference model to pass to
    :func:`gpu_hours` before any run of its section has finished, and where they come from.

    A CIFAR run whose model family (conventional or quadratic, :func:`gpu_bench.family`) has a
    committed GPU epoch row in ``measured`` (:func:`gpu_bench.load_epochs`): that row's seconds
    (:func:`_measured_row`) over its model's FLOP cost against the reference, so that the run's
    estimate is the measured epoch times the run's FLOPs over the measured model's; source
    ``"<seconds> <model>"``, with `` compiled`` for a compiled row (the GPU: :func:`seconds_note`). Any other CIFAR run: the
    paper's ResNet20 epoch, source ``"<seconds> paper"``; the other tasks:
    :data:`DEFAULT_SECONDS_PER_EPOCH`, source ``"<seconds> stated"``."""
    row = _measured_row(cfg, measured) if measured is not None else None
    if row is not None:
        model = RunConfig(model=row["model"], relinear="none")
        mode = " compiled" if row["compiled"] else ""
        source = f"{row['epoch_seconds']:.2f} {gpu_bench.label(row['model'])}{mode}"
        return row["epoch_seconds"] / relative_cost(model, cache), source
    if cfg.task == "classification":
        return PAPER_SECONDS, f"{PAPER_SECONDS:g} paper"
    return DEFAULT_SECONDS_PER_EPOCH[cfg.task], f"{DEFAULT_SECONDS_PER_EPOCH[cfg.task]:g} stated"


def seconds_note(measured: gpu_bench.GpuEpochs | None) -> str:
    """One sentence: where a CIFAR run's seconds per epoch come from before it has finished runs."""
    if measured is None:
        return (
            f"CIFAR: the paper's {PAPER_SECONDS:g} s per ResNet20 epoch (no GPU epoch rows committed under "
            "docs/gpu/), scaled to each run by its forward FLOPs"
        )
    return (
        f"CIFAR: the engine's epoch measured on {gpu_bench.gpu_name(measured.machine)} "
        f"({', '.join(measured.folders)}) for the run's family (conventional or quadratic, eager unless the "
        "run compiles), scaled to each run by its forward FLOPs over the measured model's"
    )


def training_now(cache: str | Path, run_id: str) -> bool:
    """Whether some process holds the run's lock in the store (it trains the run now), whichever
    runner started it, or none (an inline run keeps no job record)."""
    from ..common.files import lock_held

    return lock_held(Path(cache) / f"{run_id}.lock")


def plan_table(
    profile: str, cache: str | Path, tiny: bool = False, measured: gpu_bench.GpuEpochs | None = None
) -> tuple[str, list]:
    """The table (text) and the failed runs ``[(section, cfg, log tail)]``; ``measured``: the GPU
    epoch rows the estimates use before a section has finished runs (:func:`epoch_seconds`)."""
    store = RunStore(cache)
    runner = make("inline", cache)
    done_fn = is_done(cache)
    flops_cache = Path(cache).parent
    lines = [
        f"{'section':<18} {'runs':>5} {'done':>5} {'running':>8} {'pending':>8} {'failed':>7} "
        f"{'not sub.':>8} {'computed':>9} {'GPU-h left':>11}  estimate from"
    ]
    failed, total = [], 0.0
    for section in SECTIONS:
        work = section_work(section, profile, tiny)
        runs = [w for w in work if isinstance(w, RunConfig)]
        computations = [w for w in work if not isinstance(w, RunConfig)]
        missing = [c for c in computations if c.result(Path(cache).parent) is None]
        counts = dict(done=0, running=0, pending=0, failed=0, missing=0)
        finished = []  # seconds per epoch per unit of model size, from finished runs
        states = {}
        for cfg in runs:
            try:
                res = store.result(cfg)
            except RefusedFile as e:  # a link or a stranger's file in the run's place: said, never followed
                counts["failed"] += 1
                failed.append((section, cfg, f"refused: {e}"))
                continue
            if res is not None:
                counts["done"] += 1
                if res.get("epoch_time"):
                    finished.append(res["epoch_time"] / relative_cost(cfg, flops_cache))
                continue
            state, _ = runner.state(cfg.run_id, done_fn)
            if state not in ("running", "pending") and training_now(cache, cfg.run_id):
                state = "running"  # trained by a process of its own (inline, a notebook) without a record
            states[cfg.run_id] = state
            counts[state if state in counts else "missing"] += 1
            if state == "failed":
                failed.append((section, cfg, runner.log_tail(cfg.run_id, 8)))
        per_unit = sum(finished) / len(finished) if finished else None
        left, sources = 0.0, {}
        for cfg in runs:
            if cfg.run_id in states:
                unit, src = (per_unit, "") if per_unit is not None else epoch_seconds(cfg, measured, flops_cache)
                sources[src] = None
                left += gpu_hours(cfg, unit, flops_cache)
        # A computation on a GPU adds its own estimate (Computation.seconds); one on the CPU none.
        left += sum(c.seconds for c in missing if c.device == "cuda") / 3600
        total += left
        source = f"{len(finished)} finished run(s)" if finished else "; ".join(s for s in sources if s) or "--"
        computed = f"{len(computations) - len(missing)}/{len(computations)}"
        lines.append(
            f"{section:<18} {len(runs):>5} {counts['done']:>5} {counts['running']:>8} {counts['pending']:>8} "
            f"{counts['failed']:>7} {counts['missing']:>8} {computed:>9} {left:>11.1f}  {source}"
        )
    lines.append(f"{'total':<18} {'':>5} {'':>5} {'':>8} {'':>8} {'':>7} {'':>8} {'':>9} {total:>11.1f}")
    lines.append(f"Seconds per epoch before a section has finished runs: {seconds_note(measured)}.")
    return "\n".join(lines), failed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m quadnn_paper.execution.status", description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", choices=PROFILES, default="full")
    p.add_argument("--tiny", action="store_true", help="the TINY=1 variant of the full profile")
    p.add_argument("--cache", default="build/cache/runs", help="the run cache (default build/cache/runs)")
    p.add_argument("--runner", choices=RUNNERS, default="slurm", help="runner named in the resubmit hint")
    p.add_argument(
        "--paper-seconds",
        action="store_true",
        help="estimate CIFAR runs from the paper's epoch time even where a GPU's is committed under docs/gpu/",
    )
    ns = p.parse_args(argv)
    measured = None if ns.paper_seconds else gpu_bench.load_epochs()
    table, failed = plan_table(ns.profile, ns.cache, ns.tiny, measured)
    tiny = " TINY=1" if ns.tiny else ""
    print(f"profile {ns.profile}{tiny}; cache {ns.cache}")
    print(table)
    for section, cfg, tail in failed:
        print(f"\nFAILED {section}: {cfg.describe()} (run {cfg.run_id})\n{tail}")
    if failed:
        print(
            f"\nResubmit the failed runs (finished ones are kept, failed ones resume from their "
            f"last checkpoint): make paper PROFILE={ns.profile}{tiny} RUNNER={ns.runner}"
        )
    print(f"\nSee this again: make status PROFILE={ns.profile}{tiny}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
