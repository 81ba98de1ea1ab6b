"""What the report says about itself: the environment that built it, the stand-in settings of each
section at a profile, and what the full profile would cost and could detect.

The comparison notebook writes these (its tables ``standin``, ``full_cost`` and the variable
``Environment``); the closing section of the report prints them.
"""

from __future__ import annotations

import datetime
import math
import os
import platform
import subprocess

from quadnn_paper.analysis import stats
from quadnn_paper.common.machine import cpu_name

__all__ = [
    "environment",
    "STANDIN_HEADER",
    "standin_rows",
    "FULL_COST_HEADER",
    "full_cost_rows",
    "full_detect_factor",
    "conventional_flops_share",
]


def environment(repo: str | os.PathLike = "..") -> str:
    """ "commit abc1234 (+ local changes); Python 3.11.7, torch 2.14.1; 2026-11-25 14:00 UTC; <CPU>, N cores"."""
    import torch

    def git(*args):
        try:
            return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            return ""

    commit = git("rev-parse", "--short", "HEAD").strip() or "unknown"
    dirty = " (+ local changes)" if git("status", "--porcelain", "--untracked-files=no").strip() else ""
    cpu = cpu_name()
    gpu = f", {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ""
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"commit {commit}{dirty}; Python {platform.python_version()}, torch {torch.__version__}, "
        f"{_versions()}; {when}; {cpu}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads{gpu}"
    )


# The packages whose versions can change a number of the report (data, models, statistics).
_NUMERIC_PACKAGES = ("torchvision", "timm", "numpy", "scipy", "scikit-learn")


def _versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    def one(name):
        try:
            return f"{name} {version(name)}"
        except PackageNotFoundError:
            return f"{name} (absent)"

    return ", ".join(one(n) for n in _NUMERIC_PACKAGES)


# Images: training images (short headers: the table fits a column at 6 pt and more)
# gamma: the factor on the paper's rates of the quadratic terms (_cifar.gamma_scale)
STANDIN_HEADER = ["Section", "Data", "Width", "Images", "Epochs", "Batch", "Optimiser", "gamma", "Seeds"]


def _seeds(p: dict) -> str:
    rows = p.get("rows")
    if isinstance(rows, dict):
        counts = sorted({len(s) for s in rows.values()}, reverse=True)
        return " / ".join(str(c) for c in counts)
    head, rest = len(p.get("seeds", ())), len(p.get("rest_seeds", p.get("seeds", ())))
    return f"{head} / {rest}" if head != rest else str(head)


def _optimiser(name: str, lr: float, weight_decay: float) -> str:
    mantissa, exponent = f"{weight_decay:.0e}".split("e")
    return f"{name.upper() if name == 'sgd' else name.capitalize()} {lr:g}, wd {mantissa}e{int(exponent)}"


def standin_rows(profile: str) -> list[list]:
    """One row per CIFAR section: the settings its runs use at ``profile``."""
    from quadnn_paper.sections import _cifar, cifar_comparison, cifar_tuning, vgg_stability

    def scale(recipe):
        return f"x{_cifar.gamma_scale(recipe):.3g}"

    out = []
    t = cifar_tuning.protocol(profile)
    out.append(
        [
            "Tuning",
            t["dataset"],
            f"x{t['width']:g}",
            t["train_limit"] or "all",
            t["epochs"],
            t["batch_size"],
            _optimiser(t["optimizer"], t["lr"], t["weight_decay"]),
            scale(t),
            _seeds(t),
        ]
    )
    for name, mod in (("Comparison", cifar_comparison), ("VGG16", vgg_stability)):
        p = mod.protocol(profile)
        R = p["recipe"]
        out.append(
            [
                name,
                R["dataset"],
                f"x{p.get('width') or 1:g}",
                R.get("train_limit") or "all",
                R["epochs"],
                R["batch_size"],
                _optimiser(R["optimizer"], R["lr"], R["weight_decay"]),
                scale(R),
                _seeds(p),
            ]
        )
    return out


FULL_COST_HEADER = ["Section", "Runs", "GPU-hours", "Seconds per epoch assumed"]


def full_cost_rows(status) -> list[list]:
    """GPU-hours of every section at the full profile: each run's epochs times its seconds per epoch,
    times the GPUs it requests. The seconds come from ``status.epoch_seconds(cfg)``: for a CIFAR run
    the engine's epoch measured on a GPU for its model family (conventional or quadratic) where
    ``docs/gpu/`` holds one, else the paper's ResNet20 epoch; ImageNet and KITTI: the status
    module's stated defaults; each scaled by the run's forward FLOPs against the model it was
    measured on. The last column names each section's sources: "3.89 ResNet20, 10.61 QResNet20"
    (measured, the GPU in :func:`status.seconds_note`), "10.43 paper", "300 stated".

    ``status``: an object with ``SECTIONS``, ``section_runs(name, profile)``, ``epoch_seconds(cfg)``
    (``(seconds, source)``) and ``gpu_hours(cfg, seconds)`` (the notebook passes
    :mod:`quadnn_paper.execution.status`'s functions with its FLOP cache and the committed GPU
    epoch rows bound; the execution layer sits above the sections)."""
    out = []
    for name in status.SECTIONS:
        runs = status.section_runs(name, "full")
        hours, sources = 0.0, {}
        for cfg in runs:
            seconds, source = status.epoch_seconds(cfg)
            hours += status.gpu_hours(cfg, seconds)
            sources[source] = None
        out.append([name, len(runs), round(hours, 1), ", ".join(sources)])
    return out


def conventional_flops_share(model_gflops) -> float:
    """A CIFAR ResNet20's forward FLOPs as a share (%) of a QResNet20's (the paper's 20 % argument);
    ``model_gflops(cfg)``: the status module's FLOP count (cache bound)."""
    from quadnn_paper.engine import RunConfig

    conv, quad = (RunConfig(model=m, relinear="none") for m in ("cifar_resnet20", "cifar_qresnet20"))
    return 100.0 * model_gflops(conv) / model_gflops(quad)


def full_detect_factor(seeds: int = 3) -> float:
    """The detectable paired difference at ``seeds`` seeds, in units of the paired standard deviation."""
    d = stats.detectable(1.0, seeds)
    return d if math.isfinite(d) else math.nan
