"""The plan before spending GPU-days: every section's runs, their states, and GPU-hours.

    python -m quadnn_paper.status --profile full            # or: make status PROFILE=full
    python -m quadnn_paper.status --profile full --tiny     # the TINY=1 variant (format-identical data)

Prints one line per section: runs, done / running / pending / failed / not submitted, and an
estimate of the GPU-hours still to spend, from the measured time per epoch of the section's
finished runs (scaled to each run's epochs and model size) or, before any has finished, from
the stated defaults in :data:`DEFAULT_SECONDS_PER_EPOCH`. Failed runs follow with the last lines
of their log and the command that resubmits them.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from .engine import RunConfig, RunStore
from .execute import RUNNERS, gpus_per_run, is_done, resources, with_dependencies
from .common.profiles import PROFILES

__all__ = ["SECTIONS", "section_runs", "plan_table", "main", "DEFAULT_SECONDS_PER_EPOCH"]


def _sections():
    from .sections import cifar_comparison, cifar_tuning, kitti_lapdepth as depth, imagenet, vgg_stability

    return {"cifar_tuning": cifar_tuning.runs, "vgg_stability": vgg_stability.runs,
            "cifar_comparison": cifar_comparison.runs, "imagenet": imagenet.runs, "kitti_lapdepth": depth.runs}


SECTIONS = ("cifar_tuning", "vgg_stability", "cifar_comparison", "imagenet", "kitti_lapdepth")

# Stated defaults (seconds per epoch on one current data-centre GPU, for the reference model of
# each task) used until a section has a finished run to measure. CIFAR: ResNet20 at batch 128
# (about the paper's 10 s/epoch), scaled by depth, width^2 and 2x for quadratic neurons.
# ImageNet: ResNet-18, GPU-seconds per epoch (8 GPUs x ~5 min), scaled by depth. KITTI: LapDepth with a
# ResNeXt-101 encoder over 23,488 images.
DEFAULT_SECONDS_PER_EPOCH = {"classification": 10.0, "imagefolder": 8 * 300.0, "depth": 900.0}


def section_runs(section: str, profile: str, tiny: bool = False) -> list[RunConfig]:
    """Every run of ``section`` at ``profile`` (dependencies included), TINY-capped when asked."""
    from .sections._tiny import tiny_runs

    runs = _sections()[section](profile)
    return with_dependencies(tiny_runs(runs) if tiny else runs)


def _size(cfg: RunConfig) -> float:
    """Relative cost of a run's model against its task's reference model (depth, width, neuron)."""
    m = re.search(r"(\d+)", cfg.model)
    depth = int(m.group(1)) if m else 20
    ref = {"classification": 20, "imagefolder": 18, "depth": 1}[cfg.task]
    scale = (depth / ref if cfg.task != "depth" else 1.0) * cfg.width ** 2
    quadratic = any(k in cfg.model for k in ("qresnet", "qvgg", "quadratic", "parabolic", "poly"))
    return scale * (2.0 if quadratic else 1.0)


def plan_table(profile: str, cache: str | Path, tiny: bool = False, gpus: int | None = None) -> tuple[str, list]:
    """The table (text) and the failed runs ``[(section, cfg, log tail)]``."""
    from .execute import make

    store = RunStore(cache)
    runner = make("inline", cache)
    done_fn = is_done(cache)
    gpus = gpus_per_run(gpus) or 1  # estimate GPU-hours as if each run had its GPU(s)
    lines = [f"{'section':<18} {'runs':>5} {'done':>5} {'running':>8} {'pending':>8} {'failed':>7} "
             f"{'not sub.':>8} {'GPU-h left':>11}  estimate from"]
    failed, total = [], 0.0
    for section in SECTIONS:
        runs = section_runs(section, profile, tiny)
        counts = dict(done=0, running=0, pending=0, failed=0, missing=0)
        measured = []  # seconds per epoch per unit of model size, from finished runs
        states = {}
        for cfg in runs:
            res = store.result(cfg)
            if res is not None:
                counts["done"] += 1
                if res.get("epoch_time"):
                    measured.append(res["epoch_time"] * max(1, resources(cfg, gpus)["gpus"]) / _size(cfg))
                continue
            state, _ = runner.state(cfg.run_id, done_fn)
            states[cfg.run_id] = state
            counts[state if state in counts else "missing"] += 1
            if state == "failed":
                failed.append((section, cfg, runner.log_tail(cfg.run_id, 8)))
        per_unit = sum(measured) / len(measured) if measured else None
        left = 0.0
        for cfg in runs:
            if cfg.run_id in states:
                unit = per_unit if per_unit is not None else DEFAULT_SECONDS_PER_EPOCH[cfg.task]
                left += unit * _size(cfg) * cfg.epochs / 3600.0
        total += left
        source = f"{len(measured)} finished run(s)" if measured else "stated default"
        lines.append(f"{section:<18} {len(runs):>5} {counts['done']:>5} {counts['running']:>8} {counts['pending']:>8} "
                     f"{counts['failed']:>7} {counts['missing']:>8} {left:>11.1f}  {source}")
    lines.append(f"{'total':<18} {'':>5} {'':>5} {'':>8} {'':>8} {'':>7} {'':>8} {total:>11.1f}")
    return "\n".join(lines), failed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m quadnn_paper.status", description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", choices=PROFILES, default="full")
    p.add_argument("--tiny", action="store_true", help="the TINY=1 variant of the full profile")
    p.add_argument("--cache", default="build/cache/runs", help="the run cache (default build/cache/runs)")
    p.add_argument("--gpus", type=int, default=None, help="GPUs per run (default: QUADNN_GPUS_PER_RUN or 1)")
    p.add_argument("--runner", choices=RUNNERS, default="slurm", help="runner named in the resubmit hint")
    ns = p.parse_args(argv)
    table, failed = plan_table(ns.profile, ns.cache, ns.tiny, ns.gpus)
    tiny = " TINY=1" if ns.tiny else ""
    print(f"profile {ns.profile}{tiny}; cache {ns.cache}")
    print(table)
    for section, cfg, tail in failed:
        print(f"\nFAILED {section}: {cfg.describe()} (run {cfg.run_id})\n{tail}")
    if failed:
        print(f"\nResubmit the failed runs (finished ones are kept, failed ones resume from their "
              f"last checkpoint): make paper PROFILE={ns.profile}{tiny} RUNNER={ns.runner}")
    print(f"\nSee this again: make status PROFILE={ns.profile}{tiny}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
