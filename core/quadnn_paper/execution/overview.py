"""What the report says about itself: the environment that built it, the stand-in settings of each
CIFAR section at a profile, and what the full profile would cost and could detect.

:func:`run_section` puts :func:`outputs` where a section declares
:class:`~quadnn_paper.common.outputs.Overview` (the comparison section: the tables ``standin`` and,
outside smoke, ``full_cost``; the variables ``Environment``, ``FullDetectFactor``, ``FlopsShare``
...); the closing section of the report prints them. It lives in the execution layer because the
full cost counts every section's runs (:mod:`.status`).
"""

from __future__ import annotations

import datetime
import math
import os
import platform
import subprocess
from pathlib import Path

from ..analysis import stats
from ..common.machine import cpu_name
from ..common.outputs import Column, Lines, Output, Table, Variables
from ..data import gpu_bench
from . import status
from .sections import section_module

__all__ = [
    "outputs",
    "environment",
    "STANDIN_HEADER",
    "standin_rows",
    "FULL_COST_HEADER",
    "full_cost_rows",
    "full_detect_factor",
    "conventional_flops_share",
]

# The companion's own folder: git reads the commit of the checkout that holds it.
_CHECKOUT = Path(__file__).resolve().parent


def outputs(profile: str, cache_dir: str | os.PathLike) -> list[Output]:
    """The overview at ``profile``: the environment line, the stand-in table, the detectable factor
    and the conventional network's FLOP share; outside smoke, where counting every model's FLOPs
    would dominate the section's time, also the full profile's cost."""
    flops = f"{cache_dir}/flops"  # forward FLOPs by model (status.model_gflops's cache)
    values = dict(
        Environment=environment(),
        FullDetectFactor=full_detect_factor(len(section_module("cifar_comparison").PROTOCOLS["full"]["seeds"])),
        FlopsShare=round(conventional_flops_share(flops)),
    )
    out: list[Output] = [Table("standin", STANDIN_HEADER, standin_rows(profile))]
    if profile != "smoke":
        # seconds per CIFAR epoch: the engine's epoch measured on a GPU (docs/gpu/ epoch*.json) per
        # model family where committed, else the paper's (status.epoch_seconds); each row names its source
        measured = gpu_bench.load_epochs()
        cost = full_cost_rows(measured, flops)
        out += [Table("full_cost", FULL_COST_HEADER, cost), Lines([str(cost)])]
        values.update(FullGpuHours=round(sum(r[2] for r in cost)), FullSecondsSource=status.seconds_note(measured))
    return [Variables(values), *out]


def environment(repo: str | os.PathLike = _CHECKOUT) -> str:
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
# gamma: the factor on the paper's rates of the quadratic terms (the protocol's gamma_scale)
_TEXT = dict(align="l")  # a column of words
STANDIN_HEADER = [
    "Section",
    Column("Data", **_TEXT),
    Column("Width", **_TEXT),
    Column("Images", **_TEXT),
    "Epochs",
    "Batch",
    Column("Optimiser", **_TEXT),
    "gamma",
    "Seeds",
]


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


def _standin_row(name: str, recipe: dict, width: float, seeds: str, gamma: float) -> list:
    return [
        name,
        recipe["dataset"],
        f"x{width:g}",
        recipe.get("train_limit") or "all",
        recipe["epochs"],
        recipe["batch_size"],
        _optimiser(recipe["optimizer"], recipe["lr"], recipe["weight_decay"]),
        f"x{gamma:.3g}",
        seeds,
    ]


def standin_rows(profile: str) -> list[list]:
    """One row per CIFAR section: the settings its runs use at ``profile``."""
    t = section_module("cifar_tuning").protocol(profile)  # the tuning protocol is its recipe
    out = [_standin_row("Tuning", t, t["width"], _seeds(t), t["gamma_scale"])]
    for name, module in (("Comparison", "cifar_comparison"), ("VGG16", "vgg_stability")):
        p = section_module(module).protocol(profile)
        out.append(_standin_row(name, p["recipe"], p.get("width") or 1, _seeds(p), p["gamma_scale"]))
    return out


FULL_COST_HEADER = ["Section", "Runs", "GPU-hours", Column("Seconds per epoch assumed", **_TEXT)]


def full_cost_rows(measured: gpu_bench.GpuEpochs | None, cache: str | os.PathLike | None = None) -> list[list]:
    """GPU-hours of every section that trains at the full profile: each run's epochs times its seconds
    per epoch, times the GPUs it requests. The seconds come from :func:`status.epoch_seconds`: for a CIFAR run
    the engine's epoch measured on a GPU for its model family (conventional or quadratic) where
    ``measured`` (the committed rows of ``docs/gpu/``) holds one, else the paper's ResNet20 epoch;
    ImageNet and KITTI: the status module's stated defaults; each scaled by the run's forward FLOPs
    (cached under ``cache``) against the model it was measured on. The last column names each
    section's sources: "3.89 ResNet20, 10.61 QResNet20" (measured, the GPU in
    :func:`status.seconds_note`), "10.43 paper", "300 stated"."""
    out = []
    for name in status.SECTIONS:
        runs = status.section_runs(name, "full")
        if not runs:  # a section that trains nothing (expressivity, runge, efficiency) costs no GPU-hours here
            continue
        hours, sources = 0.0, {}
        for cfg in runs:
            seconds, source = status.epoch_seconds(cfg, measured, cache)
            hours += status.gpu_hours(cfg, seconds, cache)
            sources[source] = None
        out.append([name, len(runs), round(hours, 1), ", ".join(sources)])
    return out


def conventional_flops_share(cache: str | os.PathLike | None = None) -> float:
    """A CIFAR ResNet20's forward FLOPs as a share (%) of a QResNet20's (the paper's 20 % argument),
    counted by :func:`status.model_gflops` (cached under ``cache``)."""
    from ..engine import RunConfig

    conv, quad = (RunConfig(model=m, relinear="none") for m in ("cifar_resnet20", "cifar_qresnet20"))
    return 100.0 * status.model_gflops(conv, cache) / status.model_gflops(quad, cache)


def full_detect_factor(seeds: int = 3) -> float:
    """The detectable paired difference at ``seeds`` seeds, in units of the paired standard deviation."""
    d = stats.detectable(1.0, seeds)
    return d if math.isfinite(d) else math.nan
