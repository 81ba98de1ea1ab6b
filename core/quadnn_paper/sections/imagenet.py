"""The ImageNet section: (quadratic) ResNet-18/34 and plain-18/34, 10-crop top-1/top-5 errors (top-5
only on data with at least :data:`TOP5_MIN_CLASSES` classes).

The paper's protocol (its Sec. V, "ImageNet"): the models and schedule of He et al. 2016, batch 256,
SGD with lr 0.1, momentum 0.9, weight decay 1e-4, ReLinear-sg with 1e-5 for the quadratic terms,
and the standard 10-crop validation. Its labels "ResNet20/32" and "plain-20/32" stand for the 18-
and 34-layer ImageNet models (:mod:`quadnn.models.imagenet_resnet`). :func:`runs` makes them
configurations of the engine's ``"imagefolder"`` task (data: :mod:`quadnn_paper.data.imagefolder`);
:func:`plan` adds the parameter counts at ImageNet size and a look at the data (:func:`data_sample`);
:func:`summary` turns results into the error table and the text's numbers, :func:`outputs` into the
section's table, figures and variables. One run under torchrun (DDP):
``python -m quadnn_paper.execution.imagenet --model ...``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from quadnn_paper.analysis import errors, paired, stats
from quadnn_paper.analysis.claim_tables import CLAIMS_HEADER, claim_rows, claims_table
from quadnn_paper.common import published
from quadnn_paper.common.outputs import PENDING, Column, Figure, Lines, Table, Variables
from quadnn_paper.common.profiles import data_text, protocols
from quadnn_paper.engine import Computation, Results
from quadnn_paper.engine.tiny import capped
from quadnn_paper.experiments import imagenet as experiment
from quadnn_paper.figures import imagenet as figures

__all__ = ["NAME", "PROTOCOLS", "protocol", "data", "plan", "outputs"]  # the section's contract (execution.sections)


# The ten networks of the paper's ImageNet table, in its row order (plain, ResNet, Parabolic, Poly, Q).
MODELS = {
    d: [
        f"imagenet_plain{d}",
        f"imagenet_resnet{d}",
        f"imagenet_parabolic_resnet{d}",
        f"imagenet_poly_resnet{d}",
        f"imagenet_qresnet{d}",
    ]
    for d in (18, 34)
}

# The paper's table (top-1 error, %, 10-crop; it reports no top-5). Keys are our model names.
# plain/ResNet rows are He et al.'s Table 2 values (option-A shortcuts); the rest are the paper's own runs.
PAPER = published.IMAGENET
# What each of our names is called in the paper's table.
PAPER_LABEL = {
    f"imagenet_{p}{d}": f"{q}{label}"
    for d, label in ((18, 20), (34, 32))
    for p, q in (
        ("plain", "plain-"),
        ("resnet", "ResNet"),
        ("parabolic_resnet", "Parabolic-ResNet"),
        ("poly_resnet", "Poly-ResNet"),
        ("qresnet", "QResNet"),
    )
}

# What each of our names is, as trained (family and depth; the width where it is not the paper's).
_FAMILY = {
    "plain": "plain",
    "resnet": "ResNet",
    "parabolic_resnet": "Parabolic-ResNet",
    "poly_resnet": "Poly-ResNet",
    "qresnet": "QResNet",
}

# Top-5 error is printed only for data with at least this many classes: with the stand-in's ten digits
# five guesses are half of all labels (and with five classes or fewer, top-5 is 0 by construction),
# so a top-5 error there reads as an ImageNet number and means nothing.
TOP5_MIN_CLASSES = 20
_STANDIN_CLASSES = 10  # digits and Fashion-MNIST (the notebook checks it against the folder it reads)
_STANDIN_WORDS = {"digits": "scikit-learn digits", "fashion_mnist": "Fashion-MNIST"}

# One protocol per profile. full = the paper's: He et al.'s models with option-A shortcuts (the
# setting of the numbers it quotes), batch 256, lr 0.1 / 0.9 / 1e-4, ReLinear-sg 1e-5, 10-crop at
# 256/224. The paper gives no epoch count; we use the common 90 epochs with /10 at 30 and 60.
# cpu/smoke: digits rendered as 24x24 PNGs (crop 21 inside 24, the 224-in-256 ratio), narrow
# networks (width 1/8: 8..64 channels), batch 64 with lr scaled linearly (0.1 * 64/256).
# RandomResizedCrop keeps at least 35% of a digit (ImageNet's 8% would often cut the digit away).
# full trains in float32 (amp=False), as the paper's runs did: bf16 rounds the quadratic terms'
# x*x products to 8 bits of mantissa, which is not the neuron the paper measures. TF32 stays on
# (RunConfig.tf32; torch already runs convolutions in TF32 by default).
# What every profile shares: He et al.'s SGD recipe with ReLinear-sg at 1e-5 and option-A shortcuts.
_RECIPE = dict(shortcut="A", seeds=[0], momentum=0.9, weight_decay=1e-4, relinear="sg", lr_g=1e-5, lr_b=1e-5)
_DIGITS = dict(
    _RECIPE,
    data="digits",
    image_size=24,
    resize=24,
    crop=21,
    scale=(0.35, 1.0),
    width=0.125,
    batch_size=64,
    lr=0.025,
    milestones=(0.5, 0.75),
    threads=1,  # small networks: one thread, the other core left to concurrent work
)
PROTOCOLS = {
    "smoke": dict(
        _DIGITS, models=["imagenet_plain18", "imagenet_resnet18", "imagenet_qresnet18"], epochs=1, max_per_class=20
    ),
    # cpu: Fashion-MNIST at 24x24, 300 training images a class, every one of its 10,000 test images;
    # one seed: a run takes minutes (the ten-crop evaluation of 10,000 images more than its training),
    # and at this scale the quadratic terms change about 0.1 % of the predictions, so the claims'
    # departure gate answers "not tested" whatever the number of seeds
    "cpu": dict(_DIGITS, data="fashion_mnist", models=MODELS[18] + MODELS[34], epochs=5, max_per_class=300),
    "full": dict(
        _RECIPE,
        data="imagenet",
        image_size=None,
        resize=256,
        crop=224,
        scale=(0.08, 1.0),
        width=1.0,
        models=MODELS[18] + MODELS[34],
        epochs=90,
        batch_size=256,
        lr=0.1,
        milestones=(1 / 3, 2 / 3),
        max_per_class=None,
        workers="auto",
        amp=False,
    ),
}


NAME = "imagenet"


protocol = protocols(PROTOCOLS)


# -- runs ------------------------------------------------------------------------------------------


def folder_name(P: dict) -> str:
    """The folder of a protocol's data: ``imagenet`` or the generated stand-in tree."""
    if P["data"] == "imagenet":
        return "imagenet"
    prefix = "digits" if P["data"] == "digits" else "fashion"
    return f"{prefix}-imagefolder-{P['image_size']}" + (f"-{P['max_per_class']}" if P.get("max_per_class") else "")


def _twin(model: str) -> str | None:
    """The conventional ResNet whose initial weights a quadratic ResNet of the section starts from."""
    for kind in ("parabolic_resnet", "poly_resnet", "qresnet"):
        if model.startswith(f"imagenet_{kind}"):
            return "imagenet_resnet" + model[len(f"imagenet_{kind}") :]
    return None


# A run's fields every protocol states, and those a protocol may leave at RunConfig's default
# (workers "auto": JPEG decoding on every CPU of the task).
_RUN_FIELDS = ("epochs", "batch_size", "lr", "momentum", "weight_decay", "relinear", "lr_g", "lr_b", "milestones")
_RUN_OPTIONAL = ("train_limit", "workers", "threads", "amp")


def runs(profile: str, tiny: bool = False, data_root: str | Path | None = None) -> list:
    """The runs of ``profile`` (every model x seed) as engine configurations (task ``imagefolder``).

    ``data_root`` holds the data folder: :data:`~quadnn_paper.common.paths.DATA` for ImageNet
    (``data/imagenet/{train,val}``), :data:`~quadnn_paper.common.paths.GENERATED` for the generated
    digits tree (default by profile).
    """
    from quadnn.models.imagenet_resnet import VARIANTS
    from quadnn_paper.common.paths import DATA, GENERATED
    from quadnn_paper.engine import RunConfig

    P = protocol(profile, tiny)
    if data_root is None:
        data_root = DATA if P["data"] == "imagenet" else GENERATED
    task_kwargs = {k: P[k] for k in ("resize", "crop", "scale")}
    task_kwargs["scale"] = list(task_kwargs["scale"])
    if P["data"] != "imagenet":
        task_kwargs.update(image_size=P["image_size"], max_per_class=P["max_per_class"])
    fields = {k: P[k] for k in _RUN_FIELDS} | {k: P[k] for k in _RUN_OPTIONAL if k in P}
    out = []
    for s in P["seeds"]:
        for m in P["models"]:
            # zero_init_last=False: the paper (He et al.'s recipe) starts every batch norm at gamma = 1.
            kwargs = dict(width=P["width"], zero_init_last=False) if P["width"] != 1.0 else dict(zero_init_last=False)
            if m in VARIANTS and VARIANTS[m][2] != "none":
                kwargs["shortcut"] = P["shortcut"]
            # The paired design: a quadratic ResNet starts from the initial weights the ResNet of its
            # depth draws under the same seed (quadratic terms at their reference).
            out.append(
                RunConfig(
                    task="imagefolder",
                    model=m,
                    model_kwargs=kwargs,
                    dataset=P["data"],
                    task_kwargs=task_kwargs,
                    optimizer="sgd",
                    seed=s,
                    data_dir=str(Path(data_root) / folder_name(P)),
                    progress=False,
                    eval_batch_size=640,
                    init_twin=_twin(m),
                    **fields,
                )
            )
    return capped(out, tiny)


# -- the section's other work ------------------------------------------------------------------------
def data(profile: str, tiny: bool = False) -> str:
    """The data the section's numbers come from, in words."""
    P = protocol(profile, tiny)
    if P["data"] == "imagenet":
        words = "ImageNet ILSVRC-2012 (ImageFolder)"
    else:
        words = (
            f"{_STANDIN_WORDS[P['data']]} as {P['image_size']}x{P['image_size']} PNG ImageFolder (ImageNet stand-in)"
        )
    return data_text(words, tiny)


def parameter_counts(models: list[str]) -> dict[str, int]:
    """Parameters of each of ``models`` at ImageNet size (the paper's option-A shortcuts where there
    are shortcuts) and of the option-B ResNet-18/34 (``option_b_18``, ``option_b_34``), counted on
    the meta device (nothing is allocated)."""
    import timm

    import quadnn.models  # noqa: F401  (registers the imagenet_* models)
    from quadnn.models.imagenet_resnet import VARIANTS

    def count(name, **kw):
        return sum(p.numel() for p in timm.create_model(name, device="meta", **kw).parameters())

    out = {m: count(m, **({} if VARIANTS[m][2] == "none" else dict(shortcut="A"))) for m in models}
    out.update({f"option_b_{d}": count(f"imagenet_resnet{d}") for d in (18, 34)})
    return out


def plan(profile: str, tiny: bool = False) -> dict:
    """The parameter counts at ImageNet size (``"params"``), the look at the data (``"data"``) and
    every run, by ``(model, seed)``."""
    configs = runs(profile, tiny)
    params = {"models": MODELS[18] + MODELS[34]}
    return {
        "params": Computation("imagenet_params", f"{__name__}:parameter_counts", params, seconds=10),
        "data": _data_sample(protocol(profile, tiny), configs[0].data_dir, tiny),
        **{(cfg.model, cfg.seed): cfg for cfg in configs},
    }


def _data_sample(P: dict, root: str, tiny: bool) -> Computation:
    config = dict(
        root=root,
        data=P["data"],
        image_size=P["image_size"],
        max_per_class=P["max_per_class"],
        crop=P["crop"],
        resize=P["resize"],
        scale=list(P["scale"]),
    )
    # Writing the digits tree: seconds; indexing ImageNet's 1.28M training files: about a minute.
    seconds = 60 if P["data"] == "imagenet" and not tiny else 10
    return Computation("imagenet_data", f"{experiment.__name__}:data_sample", config, seconds=seconds)


# -- the section's numbers ---------------------------------------------------------------------------
def depth_of(model: str) -> int:
    """A network's depth, from the model registry."""
    from quadnn.models.imagenet_resnet import VARIANTS

    return VARIANTS[model][0]


def classes(P: dict, tiny: bool = False) -> int:
    """How many classes a protocol's data has: 1000 on ImageNet, the ten digits on the stand-in, the
    TINY=1 tree's classes at TINY=1 (the notebook checks it against the folder it reads)."""
    from quadnn_paper.data.tiny import CAPS

    if tiny:
        return CAPS["imagenet_classes"]
    return 1000 if P["data"] == "imagenet" else _STANDIN_CLASSES


def trained_label(model: str, width: float = 1.0) -> str:
    """What was trained, for legends and tables: family and depth ("QResNet-18"), and the channel
    width where it is not the full one ("QResNet-18 x0.125")."""
    kind = model.removeprefix("imagenet_").rstrip("0123456789")
    label = f"{_FAMILY[kind]}-{depth_of(model)}"
    return label if width == 1.0 else f"{label} x{width:g}"


def _mean_sd(values):
    values = [v for v in values if v is not None]
    if not values:
        return None, None
    return float(np.mean(values)), (float(np.std(values, ddof=1)) if len(values) > 1 else None)


# The conventional networks whose error and loss the text quotes (the quadratic ones it compares
# through their gaps and the claims).
_MACROS = {
    "PlainEighteen": "imagenet_plain18",
    "ResEighteen": "imagenet_resnet18",
    "PlainThirtyFour": "imagenet_plain34",
    "ResThirtyFour": "imagenet_resnet34",
}


def _gather(runs: dict, models: list[str]) -> tuple[dict[str, list[dict]], list]:
    """Per model its finished results (in run order), and the ``(model, seed)`` of the runs pending."""
    by_model = {m: [] for m in models}
    pending = []
    for (model, seed), r in runs.items():
        if r is None:
            pending.append((model, seed))
        else:
            by_model[model].append(r)
    return by_model, pending


def _top(by_model: dict[str, list[dict]], model: str, key: str) -> tuple[float | None, float | None]:
    """Mean and standard deviation of an error (``top1_error``/``top5_error``) over a model's runs
    that report one (None: none does; a model outside the profile counts as not run)."""
    return _mean_sd([r[key] for r in by_model.get(model, [])])


def _top1(by_model: dict[str, list[dict]], model: str) -> float | None:
    """A model's mean top-1 error (None: no run reports one)."""
    return _top(by_model, model, "top1_error")[0]


def _error_cell(by_model: dict[str, list[dict]], model: str, key: str):
    """A table cell of a model's error: a ``Cell``, or "diverged" (runs, none with an error) or "pending"."""
    from quadnn_paper.common.cells import Cell

    mean, sd = _top(by_model, model, key)
    if mean is None:
        return "diverged" if by_model.get(model) else PENDING
    return Cell(mean, sd, decimals=2)


def _table_rows(
    models: list[str], by_model: dict[str, list[dict]], full_params: dict[str, int], width: float, top5: bool
) -> list[list]:
    """The error table's rows (lists: the notebook prints them): the paper's label, the network
    trained (with its width), parameters at ImageNet size and in the run (millions), the paper's
    top-1, ours top-1 and, where the data has enough classes (``top5``), top-5."""
    rows = []
    for m in models:
        run_params = by_model[m][0]["params"] / 1e6 if by_model[m] else None
        row = [
            PAPER_LABEL[m],
            trained_label(m, width),
            full_params[m] / 1e6,
            run_params,
            PAPER[m],
            _error_cell(by_model, m, "top1_error"),
        ]
        rows.append(row + [_error_cell(by_model, m, "top5_error")] if top5 else row)
    return rows


def table_header(top5: bool) -> list[Column]:
    """The error table's columns, with or without the top-5 column: two labels, then numbers."""
    header = [
        Column("paper label", tex="paper"),
        Column("trained", align="l"),
        Column("params (ImageNet)", tex=r"params\,(M)"),
        Column("params (run)", tex=r"run\,(M)"),
        Column("paper top-1"),
        Column("ours top-1", tex="top-1"),
    ]
    return header + [Column("ours top-5", tex="top-5")] if top5 else header


def _top5_note(n_classes: int, top5: bool) -> str:
    """The caption's words on the top-5 column: there, or why not."""
    if top5:
        return f"``top-5'': ours, the {n_classes} classes' five best guesses"
    return (
        f"no top-5 error: the data has {n_classes} classes, and top-5 is printed only from "
        f"{TOP5_MIN_CLASSES} classes on (five guesses of {n_classes} labels say little)"
    )


def _top1_text(by_model: dict[str, list[dict]], model: str) -> str:
    """A model's mean top-1 error as the text prints it ("--": no run reports one)."""
    v = _top1(by_model, model)
    return "--" if v is None else f"{v:.2f}"


def _gap_text(by_model: dict[str, list[dict]], a: str, b: str) -> str:
    """Top-1 error of ``a`` minus that of ``b``, signed, in math mode ("--" unless both ran)."""
    x, y = _top1(by_model, a), _top1(by_model, b)
    return "--" if x is None or y is None else f"${x - y:+.2f}$"


def _final_loss_text(by_model: dict[str, list[dict]], model: str) -> str:
    """Mean training loss of a model's runs in their last epoch ("--": not run, or no loss recorded)."""
    rs = by_model.get(model) or []
    if not rs or rs[0]["history"][-1]["train_loss"] is None:
        return "--"
    return f"{np.mean([r['history'][-1]['train_loss'] for r in rs]):.2f}"


def _protocol_variables(P: dict, full_params: dict[str, int]) -> dict:
    """The text's numbers that the protocol and the parameter counts fix."""
    return dict(
        BatchSize=P["batch_size"],
        Lr=P["lr"],
        LrQuad=P["lr_g"],
        Width=P["width"],
        Crop=P["crop"],
        Resize=P["resize"],
        # counts as the prose prints them ("one epoch", "5 epochs"); the depths trained (the text's
        # comparisons across depth need two)
        EpochsText="one epoch" if P["epochs"] == 1 else f"{P['epochs']} epochs",
        Depths=len({depth_of(m) for m in P["models"]}),
        # one run per network cannot tell its difference from seed-to-seed variation
        MarginWords=(
            "With one seed per network we cannot tell a difference of a few points from seed-to-seed "
            "variation, so these rows alone neither confirm nor contradict the paper's margin"
            if len(P["seeds"]) < 2
            else f"With {len(P['seeds'])} seeds per network the paired differences below judge the paper's margin"
        ),
        FullCrop=PROTOCOLS["full"]["crop"],
        FullResize=PROTOCOLS["full"]["resize"],
        FullEpochs=PROTOCOLS["full"]["epochs"],
        FullMilestones=" and ".join(
            str(round(m * PROTOCOLS["full"]["epochs"])) for m in PROTOCOLS["full"]["milestones"]
        ),
        ParamsResEighteenB=f"{full_params['option_b_18'] / 1e6:.2f}M",
        ParamsResThirtyFourB=f"{full_params['option_b_34'] / 1e6:.2f}M",
        ParamsQResThirtyFour=f"{full_params['imagenet_qresnet34'] / 1e6:.2f}M",
    )


def _result_variables(by_model: dict[str, list[dict]]) -> dict:
    """The text's numbers that the results give: errors, losses, the gaps it discusses, compute."""
    var = {}
    for macro, m in _MACROS.items():
        var[f"TopOne{macro}"] = _top1_text(by_model, m)
        var[f"Loss{macro}"] = _final_loss_text(by_model, m)
    eighteen = [_top1(by_model, m) for m in MODELS[18][1:] if _top1(by_model, m) is not None]
    var["SpreadResEighteen"] = f"{max(eighteen) - min(eighteen):.2f}" if len(eighteen) > 1 else "--"
    var["GapPlainDeeper"] = _gap_text(by_model, "imagenet_plain34", "imagenet_plain18")
    r18, r34 = _top1(by_model, "imagenet_resnet18"), _top1(by_model, "imagenet_resnet34")
    var["ResDepthChange"] = "--" if r18 is None or r34 is None else ("rises" if r34 > r18 else "does not rise")
    var["GapQResThirtyFour"] = _gap_text(by_model, "imagenet_qresnet34", "imagenet_resnet34")
    var["GapPolyParabolicEighteen"] = _gap_text(by_model, "imagenet_poly_resnet18", "imagenet_parabolic_resnet18")
    var["ComputeMinutes"] = f"{_compute_seconds(by_model) / 60:.1f}"
    return var


def _claim_variables(decided: list) -> dict:
    """The claims' verdicts and the Holm family, as the text quotes them."""
    by_id = {c.id: c for c in decided}
    return dict(
        QBeatsRVerdict=by_id["imagenet-q-beats-r"].verdict_text,
        QBeatsPolyVerdict=by_id["imagenet-q-beats-poly"].verdict_text,
        HolmFamily=paired.tested_pairs(decided),  # the ledger prints each section's family
        HolmWords=_pairs_words(decided),
    )


def _pairs_words(decided: list) -> str:
    """The Holm family in words: "3 pairs have a p-value" (a sentence's clause)."""
    n = paired.tested_pairs(decided)
    return "no pair has a p-value" if n == 0 else f"{n} pair{' has' if n == 1 else 's have'} a p-value"


def _compute_seconds(by_model: dict[str, list[dict]]) -> float:
    """Training and evaluation time of every finished run."""
    return sum(
        sum(h["epoch_time"] for h in r["history"]) + (r.get("eval_time") or 0.0) for rs in by_model.values() for r in rs
    )


@dataclasses.dataclass(frozen=True)
class Summary:
    """What the section's outputs are made of (:func:`summary`)."""

    claims: list[paired.Claim]
    protocol: dict
    by_model: dict[str, list[dict]]  # per model its finished results, in run order
    pending: list[tuple[str, int]]  # the (model, seed) of the runs pending
    params: dict[str, int]  # parameters at ImageNet size (:func:`parameter_counts`)
    classes: int
    top5: bool  # whether the table shows top-5 errors (at least TOP5_MIN_CLASSES classes)
    rows: list[list]  # the error table's
    header: list
    variables: dict


def summary(results: Results) -> Summary:
    """Per model the finished results (``by_model``), the pending ones, the error table's rows
    (:class:`~quadnn_paper.common.cells.Cell`) and the variables the text quotes, from the section's
    ``results``."""
    P, by_run = results.protocol, results.runs()
    by_model, pending = _gather(by_run, P["models"])
    full_params = results["params"]
    n_classes = classes(P, results.tiny)
    top5 = n_classes >= TOP5_MIN_CLASSES
    moved_by = {m: errors.moved(rs) for m, rs in by_model.items()}  # None for a conventional network
    decided = claims(seed_errors(by_run, n_classes), moved_by, n_classes)
    return Summary(
        claims=decided,
        protocol=P,
        by_model=by_model,
        pending=pending,
        params=full_params,
        classes=n_classes,
        top5=top5,
        rows=_table_rows(P["models"], by_model, full_params, P["width"], top5),
        header=table_header(top5),
        variables={
            **_protocol_variables(P, full_params),
            **_result_variables(by_model),
            **_claim_variables(decided),
            "TopFiveNote": _top5_note(n_classes, top5),
        },
    )


# -- the paper's claims, decided on paired seeds ----------------------------------------------------
_DEPTHS = (18, 34)


def seed_errors(runs: dict, n_classes: int) -> dict[str, dict[int, float]]:
    """Per model, each done seed's top-1 error (%) from ``{(model, seed): result or None}``
    (:func:`~quadnn_paper.analysis.errors.seed_errors`: a run that did not finish counts at chance)."""
    out: dict[str, dict[int, float]] = {}
    for (model, seed), r in runs.items():
        if r is not None:
            out.setdefault(model, {})[seed] = errors.seed_errors(r, n_classes, key="top1_error")
    return out


def claims(by_seed: dict[str, dict[int, float]], moved_by: dict[str, float | None], n_classes: int) -> list:
    """The section's claims (:class:`~quadnn_paper.analysis.paired.Claim`), each pair a quadratic
    ResNet against a network of its depth trained from the same initial weights under the same seed,
    decided by the CIFAR sections' rule (the quadratic terms' departure gate, then counts or the
    paired interval) and Holm-adjusted within the section. A network not trained at this profile
    leaves its pair not tested."""

    def pairs(rivals: tuple[str, ...]) -> list[tuple[str, str]]:  # (quadratic, rival) by depth
        return [(f"imagenet_qresnet{d}", f"imagenet_{r}{d}") for d in _DEPTHS for r in rivals]

    def decide(id: str, text: str, rivals: tuple[str, ...]):
        # the arms by what was trained (ResNet-18, not the paper's "ResNet20" label for it)
        arms, name = pairs(rivals), trained_label
        return paired.pair_claim(
            text,
            [(name(q), by_seed.get(q, {}), name(r), by_seed.get(r, {})) for q, r in arms],
            "; ".join(f"{PAPER[q]} vs {PAPER[r]}" for q, r in arms),
            moved_by={name(m): v for m, v in moved_by.items()},
            margins=[stats.margin_of(paired.paper_effect(PAPER[q], PAPER[r])) for q, r in arms],
            limit=paired.trained_limit(n_classes),
            id=id,
        )

    return paired.adjust(
        [
            decide("imagenet-q-beats-r", "QResNets beat the ResNets of their depth on ImageNet", ("resnet",)),
            decide(
                "imagenet-q-beats-poly",
                "QResNets beat the Poly-/Parabolic networks of their depth on ImageNet",
                ("poly_resnet", "parabolic_resnet"),
            ),
        ]
    )


# -- the section's outputs ---------------------------------------------------------------------------
def _loss_curves(S: Summary) -> list[tuple[int, list[tuple[str, list[dict]]]]]:
    """Per depth trained, the training history of each model's first run, labelled by what was trained."""
    P, panels = S.protocol, []
    for d in sorted({depth_of(m) for m in P["models"]}):
        ran = [m for m in P["models"] if depth_of(m) == d and S.by_model[m]]
        # What was trained (family and depth here, width and data in the title); the paper's names: the table.
        panels.append((d, [(trained_label(m), S.by_model[m][0]["history"]) for m in ran]))
    return panels


def _curves_data(P: dict) -> str:
    """The data of the loss curves' titles: ImageNet, or the stand-in at its crop size."""
    return "ImageNet" if P["data"] == "imagenet" else f"{P['crop']}-px {_STANDIN_WORDS[P['data']]} (stand-in)"


def _params_lines(params: dict[str, int]) -> list[str]:
    """The parameter counts at ImageNet size, by the paper's label and ours."""
    lines = [f"{PAPER_LABEL[m]:>18} = {m:<28} {params[m]:>12,d}" for m in MODELS[18] + MODELS[34]]
    return lines + ["option B: " + str({d: f"{params[f'option_b_{d}'] / 1e6:.2f}M" for d in (18, 34)})]


def _data_lines(sample: dict) -> list[str]:
    """The data as the runs read it: classes, images, the shapes of a training and an evaluation sample."""
    return [
        f"{sample['classes']} classes, {sample['train_images']} training and {sample['val_images']} validation images",
        f"training sample {tuple(sample['train_shape'])}  evaluation sample (ten crops) {tuple(sample['eval_shape'])}",
    ]


def _run_lines(S: Summary) -> list[str]:
    """One line per run: pending, or its errors (top-5 only with >= TOP5_MIN_CLASSES classes), size and speed."""
    lines = [f"{model:<28} seed {seed}: {PENDING}" for model, seed in S.pending]
    for m, rs in S.by_model.items():
        for r in rs:
            top5 = f"  top-5 {r['top5_error']:5.2f}%" if S.top5 else ""
            err = "diverged" if r["top1_error"] is None else f"top-1 {r['top1_error']:5.2f}%{top5}"
            lines.append(f"{m:<28}: {err}  ({r['params']:,d} params, {r['epoch_time']:.1f} s/epoch)")
    return lines


def outputs(results: Results) -> list:
    """The section's table, figures, variables and printed lines from its plan's ``results``."""
    S = summary(results)
    sample = results["data"]
    if sample["classes"] != S.classes:  # the data as the section knows it
        raise ValueError(f"{sample['classes']} classes in the data the runs read; the section expects {S.classes}")
    P = S.protocol
    return [
        Lines([f"profile {results.profile}", str({k: v for k, v in P.items() if k != "models"})]),
        Lines(_params_lines(S.params), check=True),
        Lines(_data_lines(sample), check=True),
        Lines(_run_lines(S)),
        # "trained": the network as trained (depth, width); top-5 only with >= TOP5_MIN_CLASSES classes.
        Table("imagenet_errors", S.header, S.rows, digits=4),
        Table("imagenet_claims", CLAIMS_HEADER, claim_rows(S.claims)),
        claims_table(NAME, "ImageNet", S.claims),
        Lines([str(r) for r in S.rows]),
        Figure("imagenet_crops", lambda: figures.crops(sample)),
        Figure("imagenet_curves", lambda: figures.curves(_loss_curves(S), P["width"], _curves_data(P))),
        Variables(
            {
                **S.variables,
                "TrainImages": sample["train_images"],
                "ValImages": sample["val_images"],
                "Classes": sample["classes"],
            }
        ),
    ]
