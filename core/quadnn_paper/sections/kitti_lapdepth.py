"""The KITTI section: LapDepth against Quadratic-LapDepth on monocular depth (the paper's Sec. V).

Trained from scratch for 50 epochs with AdamW (0.9, 0.999), batch 16, weight decay 5e-4 on the
encoder and 0 on the decoder, polynomial lr decay (power 0.5) from 1e-4 to 1e-5, on the Eigen split
(23,488 train / 697 test images), LapDepth's KB crop (352 x 1216) with random 352 x 704 training
crops. ``PROTOCOLS`` (smoke / cpu: a few small synthetic images, a resnet18 encoder, 1 thread),
:func:`runs` (the engine's ``"depth"`` task; the models are :mod:`quadnn_paper.engine.lapdepth`, the
data :mod:`quadnn_paper.data.kitti`), :func:`plan` (the runs and a look at the data,
:func:`data_sample`), :func:`summary` (the metrics table and the text's numbers) and :func:`outputs`
(the section's table, figures and variables).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from quadnn_paper.common import published
from quadnn_paper.common.cells import power_of_ten
from quadnn_paper.common.outputs import PENDING, Column, Figure, Lines, Table, Variables
from quadnn_paper.common.profiles import data_text, protocols
from quadnn_paper.data.kitti import DEPTH_SCALE, MIN_DEPTH
from quadnn_paper.engine import Computation, Results
from quadnn_paper.engine.lapdepth import METRICS, MODELS
from quadnn_paper.engine.tiny import capped
from quadnn_paper.experiments import kitti as experiment
from quadnn_paper.figures import kitti_lapdepth as figures

__all__ = ["NAME", "PROTOCOLS", "protocol", "data", "plan", "outputs"]  # the section's contract (execution.sections)

# The paper's KITTI table: only SqRel and RMSE are given. (It prints RMSE 0.446 for LapDepth;
# LapDepth's own paper reports 2.446 m, so the leading digit seems to have been lost.)
PAPER = published.KITTI

# full = the paper's protocol (LapDepth's KB crop 352x1216, random 352x704 training crops), in
# float32 (amp=False: the paper's runs; with amp on the loss would still be computed in float32).
# smoke / cpu: synthetic scenes at a small size, a resnet18 encoder.
# What every profile shares: LapDepth's recipe (AdamW, polynomial decay, decoupled decay of the decoder).
_RECIPE = dict(
    optimizer="AdamW",
    betas=(0.9, 0.999),
    lr=1e-4,
    end_lr=1e-5,
    lr_power=0.5,
    weight_decay_encoder=5e-4,
    weight_decay_decoder=0.0,
    lr_g=1e-5,
    lr_b=1e-5,
    max_depth=80.0,
    seeds=[0],
)
_SYNTHETIC = dict(_RECIPE, data="synthetic", encoder="resnet18", height=64, width=192, batch_size=4, threads=1)
PROTOCOLS = {
    "smoke": dict(_SYNTHETIC, n_train=8, n_test=4, epochs=2),
    "cpu": dict(_SYNTHETIC, n_train=32, n_test=8, epochs=4),
    "full": dict(
        _RECIPE,
        data="kitti",
        encoder="resnext101_32x8d",
        n_train=23488,
        n_test=697,
        height=352,
        width=1216,
        train_height=352,
        train_width=704,
        epochs=50,
        batch_size=16,
        threads=None,
        workers="auto",  # PNG decoding in the task's other CPUs (engine.tasks.loader_workers), not in the trainer
        amp=False,
    ),
}


NAME = "kitti_lapdepth"


protocol = protocols(PROTOCOLS)


# -- runs ---------------------------------------------------------------------------------------
# Display names of the two models in the paper's table.
LABELS = {"lapdepth": "LapDepth", "quadratic_lapdepth": "Quadratic-LapDepth"}


def trained_what(P: dict, tiny: bool = False) -> str:
    """What a protocol trains where it is not the paper's network on KITTI (its encoder, data and
    image size), for figure titles; "" for the paper's own."""
    if P["data"] == "kitti" and P["encoder"] == PROTOCOLS["full"]["encoder"] and not tiny:
        return ""
    data = "KITTI" if P["data"] == "kitti" else "synthetic scenes"
    return f"trained: {P['encoder']} encoder, {data} {P['height']}x{P['width']}"


# A run's fields every protocol states, those a protocol may leave at RunConfig's default, and the
# synthetic scenes' sizes.
_RUN_FIELDS = ("epochs", "batch_size", "lr", "lr_g", "lr_b", "end_lr", "lr_power", "threads")
_RUN_OPTIONAL = ("workers", "amp", "train_limit")
_SCENES = ("n_train", "n_test", "height", "width")


def runs(profile: str, tiny: bool = False, data_dir: str | Path | None = None) -> list:
    """The runs of ``profile``: both models x seeds, as engine configurations.

    ``data_dir``: the KITTI tree (full; default ``data/kitti``) or where the synthetic scenes are
    written (smoke/cpu; default ``build/data/kitti_synthetic``).
    """
    from quadnn_paper.common.paths import DATA, GENERATED
    from quadnn_paper.engine import RunConfig

    P = protocol(profile, tiny)
    if data_dir is None:
        data_dir = DATA / "kitti" if P["data"] == "kitti" else GENERATED / "kitti_synthetic"
    task_kwargs = {k: P[k] for k in (*_SCENES, "max_depth", "weight_decay_decoder")}
    if P["data"] == "kitti":  # the real images, KB-cropped, random training crops
        task_kwargs = dict(
            max_depth=P["max_depth"],
            weight_decay_decoder=P["weight_decay_decoder"],
            crop=[P["height"], P["width"]],
            train_crop=[P["train_height"], P["train_width"]],
        )
    out = [
        RunConfig(
            task="depth",
            model=m,
            model_kwargs=dict(encoder=P["encoder"], max_depth=P["max_depth"]),
            dataset=P["data"],
            task_kwargs=task_kwargs,
            optimizer="adamw",
            momentum=P["betas"][0],
            beta2=P["betas"][1],
            weight_decay=P["weight_decay_encoder"],
            relinear="sg",
            schedule="poly",
            seed=s,
            data_dir=str(data_dir),
            progress=False,
            split_seed=s,
            **{k: P[k] for k in _RUN_FIELDS},
            **{k: P[k] for k in _RUN_OPTIONAL if k in P},
        )
        for s in P["seeds"]
        for m in MODELS
    ]
    return capped(out, tiny)


# -- the section's other work ------------------------------------------------------------------------
def data(profile: str, tiny: bool = False) -> str:
    """The data the section's numbers come from, in words."""
    P = protocol(profile, tiny)
    words = (
        "KITTI, Eigen split"
        if P["data"] == "kitti"
        else f"synthetic KITTI-format scenes, {P['height']}x{P['width']} px"
    )
    return data_text(words, tiny)


def plan(profile: str, tiny: bool = False) -> dict:
    """The look at the data (``"data"``: the first seed's) and every run, by ``(model, seed)``."""
    P, configs = protocol(profile, tiny), runs(profile, tiny)
    first = configs[0]
    config = dict(
        root=first.data_dir,
        synthetic=P["data"] == "synthetic",
        **{k: P[k] for k in (*_SCENES, "max_depth")},
        seed=first.split_seed,
    )
    data = Computation("kitti_data", f"{experiment.__name__}:data_sample", config, seconds=5)
    return {"data": data, **{(cfg.model, cfg.seed): cfg for cfg in configs}}


# -- the section's numbers ---------------------------------------------------------------------------
# The metrics' columns: their names in the CSV and the text, their heads as typeset.
METRIC_COLUMNS = dict(
    abs_rel=Column("AbsRel"),
    sq_rel=Column("SqRel"),
    rmse=Column("RMSE"),
    rmse_log=Column("RMSE log", tex=r"RMSE$_{\log}$"),
    d1=Column("d<1.25", tex=r"$\delta_1$"),
    d2=Column("d<1.25^2", tex=r"$\delta_2$"),
    d3=Column("d<1.25^3", tex=r"$\delta_3$"),
)


@dataclasses.dataclass(frozen=True)
class Summary:
    """What the section's outputs are made of (:func:`summary`)."""

    protocol: dict
    results: dict[str, dict | None]  # per model (display name) its result, None while pending
    rows: list[list]  # the metrics table's: the paper's and ours
    variables: dict


def summary(results: Results, seed: int | None = None) -> Summary:
    """Per model (display name) its result or None (pending), the metrics table's rows (the paper's
    and ours) and the variables the text quotes. ``seed``: only that seed's runs (default: all)."""
    from quadnn_paper.common.cells import Cell

    P = results.protocol
    by_name = {LABELS[m]: r for (m, s), r in results.runs().items() if seed is None or s == seed}

    def cell(v):
        return Cell(v, decimals=3) if isinstance(v, float) else (PENDING if v is None else v)

    rows = [[name, "paper"] + [cell(vals[k]) if k in vals else "--" for k in METRICS] for name, vals in PAPER.items()]
    rows += [
        [name, f"ours ({results.profile})"] + [cell(r[k]) if r is not None else PENDING for k in METRICS]
        for name, r in by_name.items()
    ]
    lap, quad = by_name["LapDepth"], by_name["Quadratic-LapDepth"]

    def shown(r, key, spec, scale=1.0, unit=""):
        return PENDING if r is None or r[key] is None else format(r[key] / scale, spec) + unit

    var = dict(
        Encoder=P["encoder"],
        Epochs=P["epochs"],
        BatchSize=P["batch_size"],
        Height=P["height"],
        Width=P["width"],
        ParamsLap=shown(lap, "params", ".1f", 1e6, "M"),
        ParamsQuad=shown(quad, "params", ".1f", 1e6, "M"),
        SqRelLap=shown(lap, "sq_rel", ".3f"),
        SqRelQuad=shown(quad, "sq_rel", ".3f"),
        RmseLap=shown(lap, "rmse", ".3f"),
        RmseQuad=shown(quad, "rmse", ".3f"),
        MaxDepth=P["max_depth"],
        MinDepth=power_of_ten(MIN_DEPTH),
        DepthScale=DEPTH_SCALE,
        LrQuad=power_of_ten(P["lr_b"]),
        ComputeMinutes=f"{sum(r['epoch_time'] * r['epochs_run'] for r in (lap, quad) if r) / 60:.1f}",
    )
    return Summary(P, by_name, rows, var)


# -- the section's outputs ---------------------------------------------------------------------------
def _loss_curves(S: Summary) -> list[tuple[str, list[dict]]]:
    """The training history of each model's finished run, by its display name."""
    return [(name, r["history"]) for name, r in S.results.items() if r is not None]


def _data_lines(sample: dict) -> list[str]:
    """The data as the runs read it: images, and the shapes and valid pixels of the first test image."""
    return [
        f"{sample['train_images']} training and {sample['test_images']} test images",
        f"rgb {tuple(sample['rgb_shape'])}  depth {tuple(sample['depth_shape'])}  "
        f"valid pixels in image 0: {sample['valid_pixels']}",
    ]


def _run_lines(S: Summary) -> list[str]:
    """One line per model: pending, or its size, metrics and training time."""
    lines = []
    for name, r in S.results.items():
        if r is None:  # a run still pending on a cluster shows as "pending" everywhere
            lines.append(f"{name:<20} pending")
            continue
        metrics = "  ".join(f"{k} {r[k]:.3f}" for k in METRICS)
        lines.append(f"{name:<20} {r['params']:>11,d} params  {metrics}  ({r['epoch_time'] * r['epochs_run']:.1f}s)")
    return lines


def outputs(results: Results) -> list:
    """The section's table, figures, variables and printed lines from its plan's ``results``."""
    S = summary(results, seed=results.protocol["seeds"][0])  # the runs of the data shown
    sample = results["data"]
    header = ["model", Column("source", align="l")] + [METRIC_COLUMNS[k] for k in METRICS]
    return [
        Lines([f"profile {results.profile}", str(S.protocol)]),
        Lines(_data_lines(sample), check=True),
        Lines(_run_lines(S)),
        Table("kitti_metrics", header, S.rows, digits=3),
        Lines([str(r) for r in S.rows]),
        Figure("kitti_scene", lambda: figures.scene(sample)),
        Figure("kitti_curves", lambda: figures.curves(_loss_curves(S), trained_what(S.protocol, results.tiny))),
        Variables({**S.variables, "TrainImages": sample["train_images"], "TestImages": sample["test_images"]}),
    ]
