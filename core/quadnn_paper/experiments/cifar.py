"""The CIFAR study's design, shared by the sections that report it (``cifar_tuning``,
``vgg_stability``, ``cifar_comparison``): the paper's recipes, the stand-ins below ``full``, the
rule that scales the quadratic terms' rates on a stand-in, the rows of the comparison's tables and
the engine configuration of a row. Their errors and claims are :mod:`quadnn_paper.analysis`'s.

The sections (``vgg_stability``, ``cifar_comparison``, ``cifar_tuning``) hold their own
``PROTOCOLS``; ``full`` is the paper's protocol, ``cpu`` trains the same models on Fashion-MNIST
at 16x16 pixels (all 10,000 test images), ``smoke`` on scikit-learn's 8x8 digits. Training goes
through the engine (:mod:`quadnn_paper.engine`); this module only says *what* to run. Weight decay
of the quadratic terms: ``full`` follows the official code (coupled L2 toward 0,
``quadratic_decay="zero"``); smoke/cpu keep quadnn's default (toward the ReLinear reference).

The paired design (every profile): a network compared with another one is trained at every seed
as a pair that shares all but the difference under test. Data order, augmentation draws and the
evaluation set are functions of the seed already (the engine's batches, ``split_seed``); a
quadratic or square-activation row starts from the initial weights its conventional twin draws
under the same seed (``RunConfig.init_twin``), and a weight-transfer row from the conventional
run of the same seed. A claim "A beats B" is then decided from the per-seed differences
``err(B) - err(A)`` (:mod:`quadnn_paper.analysis.stats`).

Reading of the paper used here (it does not spell these out):

- VGG16 recipe ("the authentic VGG16" protocol): SGD, momentum 0.9, batch 128, 200 epochs,
  lr 0.1, weight decay 5e-4, lr times 0.2 at epochs 60/120/160 (the common CIFAR-100 VGG
  recipe); the square-activation runs change only lr, the quadratic VGG16 adds ReLinear-sg
  with lr_g = lr_b = 1e-6.
- ResNet recipe (He et al., with the paper's three stages 1-100/101-150/151-200): SGD,
  momentum 0.9, batch 128, 200 epochs, lr 0.1, weight decay 1e-4, lr / 10 at epochs 100, 150.
- Weight transfer ("w. t."): the quadratic net starts from the conventional ResNet of the
  same depth and seed at the end of its first stage (epoch 100) and is then trained with the
  same recipe as a randomly initialised one.
- Parabolic-/PolyResNets are trained with ReLinear-sg at the QResNet's lr_g of their depth
  (the paper gives no values for them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from quadnn_paper.common import published
from quadnn_paper.engine import RunConfig

# -- the paper's protocols ------------------------------------------------------------------
VGG_RECIPE = dict(
    dataset="cifar100",
    epochs=200,
    batch_size=128,
    optimizer="sgd",
    lr=0.1,
    momentum=0.9,
    weight_decay=5e-4,
    schedule="multistep",
    milestones=(0.3, 0.6, 0.8),
    lr_decay=0.2,
)
RESNET_RECIPE = dict(
    dataset="cifar10",
    epochs=200,
    batch_size=128,
    optimizer="sgd",
    lr=0.1,
    momentum=0.9,
    weight_decay=1e-4,
    schedule="multistep",
    milestones=(0.5, 0.75),
    lr_decay=0.1,
)
# He et al. (2016, section 4.2) train ResNet110 (and 1202) with a tenth of the rate until the
# training error is below 80 % (about 400 iterations, one CIFAR epoch), then the schedule: the full
# profile's warm-up (a protocol's "warmup": model -> epochs). Without one, the cpu profile's
# ResNet110 ended at 51 % error over 5 seeds (12-69 %; first-epoch loss about 3, above ln 10), a
# broken baseline for "QResNet32 beats ResNet110"; there two epochs (46 iterations) measured better
# than one (seeds 0/3: 8.6/27.2 % against 12.5/46.4 %).
WARMUP_EPOCHS = {"cifar_resnet110": 1, "cifar_resnet1202": 1}
# The paper's lr_g = lr_b per QResNet depth: ReLinear-sg, ReLinear-sg + ReZero, compact (lr_b).
LR_G = {20: 1e-4, 32: 1e-5, 56: 1e-5, 110: 1e-5}
LR_G_REZERO = {20: 1e-5, 32: 1e-4, 56: 1e-4, 110: 1e-6}
LR_B_COMPACT = {20: 1e-4, 32: 1e-5, 56: 1e-5}
SQUARE_LRS = (0.05, 0.03, 0.01)
QVGG_LR_G = 1e-6
# The smoke profile's stand-in (scikit-learn's 8x8 digits, ten classes: seconds, nothing to fetch).
DIGITS = dict(dataset="digits", batch_size=32)
# The cpu profile's one protocol for every CIFAR-10 ResNet (tuning and comparison share its runs,
# which the cache then trains once): Fashion-MNIST resized to 16x16 (a CPU step costs a quarter of
# one at 28 or 32 pixels), a per-seed subset of STANDIN_IMAGES training images, every one of the
# 10,000 test images, batch 64, channel multiplier 0.25, milestones at 1/2 and 3/4. The images,
# epochs and seeds were chosen by measurement of the headline pair's paired spread per CPU-second
# (tools/standin_protocol.py; docs/standin-protocol.md).
STANDIN_IMAGES = 4_000
# evaluated once, after the last epoch: the 10,000 test images every epoch would cost a third of a run
# The paper's rate at batch 128, scaled linearly to batch 64: at 0.1 a ResNet20 ended 5 points worse
# at one seed of six (paired spread about 2.5 points against 1.0 at 0.05; docs/standin-protocol.md).
STANDIN = dict(
    dataset="fashion_mnist16",
    batch_size=64,
    lr=RESNET_RECIPE["lr"] * 64 / RESNET_RECIPE["batch_size"],
    epochs=6,
    train_limit=STANDIN_IMAGES,
    eval_every_epoch=False,
)
STANDIN_WIDTH = 0.25
HEADLINE_SEEDS = tuple(range(6))  # the headline pairs (depth 20)
REST_SEEDS = tuple(range(4))  # the other claims
# What the data sets are, as tables and figures name them (``stands_for``: the data a stand-in replaces).
DATA_WORDS = {
    "cifar10": "CIFAR-10",
    "cifar100": "CIFAR-100",
    "digits": "scikit-learn 8x8 digits",
    "fashion_mnist16": "Fashion-MNIST at 16x16",
}


# How the quadratic terms' weight decay acts (a protocol's ``quadratic_decay``), as the text says it.
DECAY_WORDS = {
    "reference": "toward their ReLinear reference values, decoupled (quadnn's default)",
    "zero": "as ordinary coupled L2 toward zero on every group (the official code)",
}


def data_words(dataset: str, stands_for: str) -> str:
    """``dataset`` in words, with the data set it stands in for (``"CIFAR-10"``) when it is a stand-in."""
    words = DATA_WORDS[dataset]
    return words if words == stands_for else f"{words} (stand-in for {stands_for})"


# -- the quadratic terms' room to act below full ------------------------------------------------
# The paper's rates of the quadratic terms (gamma_g = gamma_b) act over 200 epochs x 391 steps; the
# stand-ins train a few hundred steps, where the paper's gamma leaves the terms at 0.3 % of
# W_r. Below full every such rate is the paper's times sqrt(paper's steps / the stand-in's): the
# geometric middle between the paper's per-step rate (factor 1: the terms barely move) and its
# total displacement (factor = the step ratio: 35-50 % of W_r and an unstable seed in a probe of
# the cpu QResNet20). ReLinear-sw's shrink factors act per step toward a fixed point and are not
# scaled. The full profile trains at the paper's rates (factor 1).
_TRAIN_IMAGES = {
    "cifar10": 50_000,
    "cifar100": 50_000,
    "digits": 1437,  # the 80 % split of 1,797
    "fashion_mnist16": 60_000,
    "fashion_mnist28": 60_000,
}


def training_steps(recipe: dict) -> int:
    """Optimiser steps of a recipe (``epochs`` x batches of ``batch_size`` over its training images,
    ``train_limit`` of them when set)."""
    images = _TRAIN_IMAGES[recipe["dataset"]]
    if recipe.get("train_limit"):
        images = min(images, recipe["train_limit"])
    return recipe["epochs"] * math.ceil(images / recipe["batch_size"])


PAPER_STEPS = training_steps(RESNET_RECIPE)  # 78,200 (VGG's recipe: the same)


def gamma_scale(recipe: dict) -> float:
    """The factor on the paper's rates of the quadratic terms at ``recipe``: 1 on CIFAR (the paper's
    data, every full run), ``sqrt(PAPER_STEPS / training_steps)`` on a stand-in."""
    if recipe["dataset"].startswith("cifar"):
        return 1.0
    return math.sqrt(PAPER_STEPS / training_steps(recipe))


def stating_gamma(protocols: dict) -> dict:
    """``protocols`` (a CIFAR section's table), each profile's entry stating ``gamma_scale``, the factor
    its runs train the paper's rates of the quadratic terms at (:func:`gamma_scale` of its recipe):
    what the plan, the text and the overview read."""
    return {p: dict(P, gamma_scale=gamma_scale(P.get("recipe", P))) for p, P in protocols.items()}


# -- rows -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    """One row of a table: a model and how it is trained, with the paper's value."""

    table: str  # "vgg" | "main" | "compact" | "width"
    label: str
    model: str
    depth: int = 0  # 0 for VGG
    width: float = 1.0
    method: str = "conventional"  # conventional | ri | ri+rezero | wt | wt0 (w.t., terms frozen) | normal
    lr: float | None = None  # None: the recipe's
    lr_g: float | None = None  # ReLinear-sg rates (None: no ReLinear)
    lr_b: float | None = None
    paper: str = "--"  # the paper's error (%) or "no converge"
    source: str | None = None  # model of the conventional row a "wt"/"wt0" row transfers from
    twin: str | None = None  # conventional model whose initial weights a r.i. row starts from

    @property
    def key(self) -> tuple:
        """What identifies the row (never its display label): model, width, method, learning rate."""
        return (self.model, self.width, self.method, self.lr)


TRANSFER_METHODS = ("wt", "wt0")  # rows that start from a conventional run's first stage
# A quadratic network trained normally, as the paper says Parabolic-/PolyResNets do not converge:
# its quadratic terms drawn as torch draws a weight, every parameter at the one rate, weight decay
# the ordinary L2 toward 0 (no ReLinear in its initialisation, its rates or its decay).
NORMAL = "normal"


def row_for(
    rows: list[Row], model: str, method: str = "conventional", width: float = 1.0, lr: float | None = None
) -> Row:
    """The row training ``model`` with ``method`` at ``width`` (and ``lr``); a KeyError names a
    combination that no row has, so a renamed or mistyped row fails loudly."""
    for row in rows:
        if row.key == (model, width, method, lr):
            return row
    raise KeyError(f"no row trains {model} with method={method!r}, width={width}, lr={lr}")


def vgg_rows() -> list[Row]:
    rows = [Row("vgg", "VGG16 (ReLU)", "cifar_vgg16")]
    rows += [
        Row(
            "vgg",
            f"VGG16 (square activation), lr {lr:g}",
            "cifar_vgg16_square",
            lr=lr,
            paper="no converge",
            twin="cifar_vgg16",
        )
        for lr in SQUARE_LRS
    ]
    rows.append(
        Row(
            "vgg",
            "Quadratic-VGG16 (ReLinear)",
            "cifar_qvgg16",
            lr=0.1,
            lr_g=QVGG_LR_G,
            lr_b=QVGG_LR_G,
            paper=published.VGG["Quadratic-VGG16 (ReLinear)"].text,
            twin="cifar_vgg16",
        )
    )
    return rows


_PAPER_MAIN = published.CIFAR_MAIN
_PAPER_COMPACT = published.CIFAR_COMPACT
_PAPER_WIDTH = published.CIFAR_WIDTH


def _qresnet_rows(d: int) -> list[Row]:
    """The QResNet rows of depth ``d``: random initialisation with ReLinear, with ReZero, weight transfer."""
    q, r = f"cifar_qresnet{d}", f"cifar_resnet{d}"
    variants = (  # (label, method, the paper's rate of the terms, where the row's weights start)
        (f"QResNet{d} (r.i., ReLinear)", "ri", LR_G[d], dict(twin=r)),
        (f"QResNet{d} (r.i., ReLinear+ReZero)", "ri+rezero", LR_G_REZERO[d], dict(twin=r)),
        (f"QResNet{d} (w.t., ReLinear)", "wt", LR_G[d], dict(source=r)),
    )
    return [
        Row("main", label, q, d, method=method, lr_g=rate, lr_b=rate, paper=_PAPER_MAIN[label], **start)
        for label, method, rate, start in variants
    ]


def _transfer_controls() -> list[Row]:
    """The weight-transfer rows' controls: the same QResNet transferred from the same source at the
    same budget (stage + rest epochs) with its quadratic terms frozen (gamma = 0): a conventional
    network (the float64 check of the tuning section) that differs from the w.t. row only in the
    terms' training. A claim whose arms differ in budget as well is measured against them."""
    return [
        Row(
            "control",
            f"QResNet{d} (w.t., gamma 0)",
            f"cifar_qresnet{d}",
            d,
            method="wt0",
            lr_g=0.0,
            lr_b=0.0,
            source=f"cifar_resnet{d}",
        )
        for d in (20, 32, 56, 110)
    ]


def comparison_rows() -> list[Row]:
    """All rows of the three CIFAR-10 tables, in table order (full protocol)."""
    P = _PAPER_MAIN
    rows = [Row("main", f"ResNet{d}", f"cifar_resnet{d}", d, paper=P[f"ResNet{d}"]) for d in (20, 32, 56, 110, 1202)]
    for kind, name in (("parabolic", "Parabolic-ResNet"), ("poly", "PolyResNet")):
        rows += [
            Row(
                "main",
                f"{name}{d}",
                f"cifar_{kind}_resnet{d}",
                d,
                method="ri",
                lr_g=LR_G[d],
                lr_b=LR_G[d],
                paper=P[f"{name}{d}"],
                twin=f"cifar_resnet{d}",
            )
            for d in (20, 32, 56)
        ]
    for d in (20, 32, 56, 110):
        rows += _qresnet_rows(d)
    rows += _transfer_controls()
    rows += [  # "normally-trained Parabolic-ResNet and PolyResNet do not converge": no row of the paper
        Row(
            "control",
            f"{name}{d} (trained normally)",
            f"cifar_{kind}_resnet{d}",
            d,
            method=NORMAL,
            paper="no converge",
            twin=f"cifar_resnet{d}",
        )
        for kind, name in (("parabolic", "Parabolic-ResNet"), ("poly", "PolyResNet"))
        for d in (20, 32, 56)
    ]
    rows += [
        Row(
            "compact",
            f"Compact-QResNet{d} (w.t., ReLinear)",
            f"cifar_qresnet{d}_compact",
            d,
            method="wt",
            lr_g=LR_B_COMPACT[d],
            lr_b=LR_B_COMPACT[d],
            paper=_PAPER_COMPACT[d],
            source=f"cifar_resnet{d}",
        )
        for d in (20, 32, 56)
    ]
    rows += [
        Row("width", f"ResNet{d} (x{w:g})", f"cifar_resnet{d}", d, width=w, paper=_PAPER_WIDTH[(d, w)])
        for d in (32, 56)
        for w in (1.5, 2.0, 2.5)
    ]
    return rows


def runs_at(row: Row, protocol: dict) -> bool:
    """Whether ``row`` is trained at this profile's ``protocol`` (else it is "full only")."""
    if row.table == "vgg" or protocol.get("rows") is None:
        return True
    return row.key in protocol["rows"]


def seeds_for(row: Row, protocol: dict) -> tuple:
    """The seeds ``row`` trains at: ``protocol["rows"][row.key]`` when the protocol gives a row its
    own (a dict of key -> seeds), else ``protocol["seeds"]``."""
    rows = protocol.get("rows")
    if isinstance(rows, dict) and rows.get(row.key) is not None:
        return tuple(rows[row.key])
    return tuple(protocol["seeds"])


def paper_init(model: str) -> dict:
    """Model keyword arguments of the paper's initialisation: the official code leaves every batch
    norm at gamma = 1, where timm's ResNets (and ours, by default) zero the last one of each block."""
    return {} if "vgg" in model else {"zero_init_last": False}


def config_for(
    row: Row, protocol: dict, seed: int, source: RunConfig | None = None, width: float | None = None
) -> RunConfig:
    """The engine configuration that trains ``row`` at ``protocol`` (``source``: the conventional
    run a weight-transfer row starts from, at the end of its first stage). The seed also picks
    the stand-in's train/test split when the protocol says ``split_per_seed``, so seeds replicate
    over splits as well as initialisations; the two runs of a pair always share it."""
    cfg = dict(
        protocol["recipe"],
        model=row.model,
        seed=seed,
        progress=False,
        threads=protocol.get("threads"),
        quadratic_decay=protocol.get("quadratic_decay", "reference"),
        model_kwargs=paper_init(row.model),
    )
    cfg["milestones"] = tuple(cfg["milestones"])
    if protocol.get("split_per_seed"):
        cfg["split_seed"] = seed
    w = row.width * (width if width is not None else 1.0)  # the profile's multiplier times the row's
    if w != 1.0:
        cfg["width"] = w
    if row.lr is not None:
        cfg["lr"] = row.lr
    if row.lr_g is None:
        cfg["relinear"] = "none"
    else:
        k = protocol["gamma_scale"]
        cfg.update(relinear="sg", lr_g=row.lr_g * k, lr_b=row.lr_b * k)
    if row.method == NORMAL:  # without ReLinear: terms drawn, one rate, ordinary L2 toward 0
        cfg.update(quadratic_init="random", quadratic_decay="zero")
    if protocol.get("warmup", {}).get(row.model):
        cfg["warmup_epochs"] = protocol["warmup"][row.model]
    if row.method == "ri+rezero":
        cfg["rezero"] = True
    if row.twin is not None:
        cfg["init_twin"] = row.twin
    if row.method in TRANSFER_METHODS:
        if source is None:
            raise ValueError(f"{row.label}: weight transfer needs the conventional run of {row.source}")
        cfg.update(transfer_from=source, transfer_stage=1)
    return RunConfig(**cfg)


def plan(rows: list[Row], protocol: dict, width: float | None = None) -> dict[tuple[Row, int], RunConfig]:
    """Every run of ``rows`` trained at ``protocol``, keyed by ``(row, seed)``; a weight-transfer
    row depends on the conventional row it names (``row.source``) at the same seed."""
    out: dict[tuple[Row, int], RunConfig] = {}
    for row in rows:
        if not runs_at(row, protocol):
            continue
        for seed in seeds_for(row, protocol):
            transfer = row.method in TRANSFER_METHODS
            source = config_for(row_for(rows, row.source), protocol, seed, width=width) if transfer else None
            out[(row, seed)] = config_for(row, protocol, seed, source, width=width)
    return out


def param_count(model: str, num_classes: int = 10, **kwargs) -> int:
    """Parameters of ``model`` (a registered timm name) built with ``kwargs``."""
    import timm

    import quadnn.models  # noqa: F401  (registers quadnn's models)

    return sum(p.numel() for p in timm.create_model(model, num_classes=num_classes, **kwargs).parameters())
