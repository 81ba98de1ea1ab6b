"""Protocols, rows and claims of two report sections: VGG16 training stability on CIFAR-100
(section "vgg") and the comparative CIFAR-10 study of ResNets and quadratic ResNets
(section "comparison").

``PROTOCOLS[profile] = {"vgg": ..., "comparison": ...}`` (pick with
``quadnn_paper.profiles.select(PROTOCOLS, profile)``). ``full`` is the paper's protocol; ``smoke``
and ``cpu`` train the same models on the 8x8 digits stand-in, with fewer images, epochs,
seeds and rows (a row not in a profile's ``rows`` is marked "full only"; ``rows=None``: all of them).
Training goes through the engine (:mod:`quadnn_paper.engine`); this module only says *what* to run.
Weight decay of the quadratic terms: ``full`` follows the official code (coupled L2 toward 0,
``quadratic_decay="zero"``); smoke/cpu keep quadnn's default (toward the ReLinear reference).

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
from quadnn_paper.common.profiles import select

__all__ = ["PROTOCOLS", "VGG_RECIPE", "RESNET_RECIPE", "Row", "vgg_rows", "comparison_rows", "runs_at",
           "row_for", "paper_init", "config_for", "plan", "vgg_runs", "comparison_runs", "summarise", "claims", "LR_G", "LR_G_REZERO", "LR_B_COMPACT"]

# -- the paper's protocols ------------------------------------------------------------------
VGG_RECIPE = dict(dataset="cifar100", epochs=200, batch_size=128, optimizer="sgd", lr=0.1, momentum=0.9,
                  weight_decay=5e-4, schedule="multistep", milestones=(0.3, 0.6, 0.8), lr_decay=0.2)
RESNET_RECIPE = dict(dataset="cifar10", epochs=200, batch_size=128, optimizer="sgd", lr=0.1, momentum=0.9,
                     weight_decay=1e-4, schedule="multistep", milestones=(0.5, 0.75), lr_decay=0.1)
# The paper's lr_g = lr_b per QResNet depth: ReLinear-sg, ReLinear-sg + ReZero, compact (lr_b).
LR_G = {20: 1e-4, 32: 1e-5, 56: 1e-5, 110: 1e-5}
LR_G_REZERO = {20: 1e-5, 32: 1e-4, 56: 1e-4, 110: 1e-6}
LR_B_COMPACT = {20: 1e-4, 32: 1e-5, 56: 1e-5}
SQUARE_LRS = (0.05, 0.03, 0.01)
QVGG_LR_G = 1e-6

_DIGITS = dict(dataset="digits", batch_size=32)
# Rows trained below full (keys of :func:`comparison_rows`' rows); the others are "full only". On the
# stand-in at a few epochs a ResNet32 is far from trained (60-80% error in a trial with six
# epochs), so the cheap profiles spend their minutes on depth 20.
def _key(model: str, method: str = "conventional") -> tuple:
    return (model, 1.0, method, None)  # Row.key at width 1 with the recipe's lr


_CPU_ROWS = (_key("cifar_resnet20"), _key("cifar_parabolic_resnet20", "ri"), _key("cifar_poly_resnet20", "ri"),
             _key("cifar_qresnet20", "ri"), _key("cifar_qresnet20", "ri+rezero"), _key("cifar_qresnet20", "wt"),
             _key("cifar_qresnet20_compact", "wt"))
_SMOKE_ROWS = (_key("cifar_resnet20"), _key("cifar_qresnet20", "ri"), _key("cifar_qresnet20", "wt"))
PROTOCOLS = {
    "smoke": dict(
        vgg=dict(recipe={**VGG_RECIPE, **_DIGITS, "epochs": 2, "train_limit": 192}, width=0.125, seeds=(0,), threads=1),
        comparison=dict(recipe={**RESNET_RECIPE, **_DIGITS, "epochs": 2, "train_limit": 160}, rows=_SMOKE_ROWS,
                        seeds=(0,), threads=1),
    ),
    "cpu": dict(
        vgg=dict(recipe={**VGG_RECIPE, **_DIGITS, "epochs": 6, "train_limit": 512}, width=0.25, seeds=(0,), threads=1),
        comparison=dict(recipe={**RESNET_RECIPE, **_DIGITS, "epochs": 6, "train_limit": 512}, rows=_CPU_ROWS,
                        seeds=(0, 1, 2), threads=1),
    ),
    "full": dict(
        vgg=dict(recipe=dict(VGG_RECIPE), width=1.0, seeds=(0,), threads=None, quadratic_decay="zero"),
        comparison=dict(recipe=dict(RESNET_RECIPE), rows=None, seeds=(0, 1, 2), threads=None,
                        quadratic_decay="zero"),
    ),
}


# -- rows -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    """One row of a table: a model and how it is trained, with the paper's value."""

    table: str                      # "vgg" | "main" | "compact" | "width"
    label: str
    model: str
    depth: int = 0                  # 0 for VGG
    width: float = 1.0
    method: str = "conventional"    # conventional | ri | ri+rezero | wt
    lr: float | None = None         # None: the recipe's
    lr_g: float | None = None       # ReLinear-sg rates (None: no ReLinear)
    lr_b: float | None = None
    paper: str = "--"               # the paper's error (%) or "no converge"
    source: str | None = None       # model of the conventional row a "wt" row transfers from

    @property
    def key(self) -> tuple:
        """What identifies the row (never its display label): model, width, method, learning rate."""
        return (self.model, self.width, self.method, self.lr)


def row_for(rows: list[Row], model: str, method: str = "conventional", width: float = 1.0,
            lr: float | None = None) -> Row:
    """The row training ``model`` with ``method`` at ``width`` (and ``lr``); a KeyError names a
    combination that no row has, so a renamed or mistyped row fails loudly."""
    for row in rows:
        if row.key == (model, width, method, lr):
            return row
    raise KeyError(f"no row trains {model} with method={method!r}, width={width}, lr={lr}")


def vgg_rows() -> list[Row]:
    rows = [Row("vgg", "VGG16 (ReLU)", "cifar_vgg16")]
    rows += [Row("vgg", f"VGG16 (square activation), lr {lr:g}", "cifar_vgg16_square", lr=lr, paper="no converge")
             for lr in SQUARE_LRS]
    rows.append(Row("vgg", "Quadratic-VGG16 (ReLinear)", "cifar_qvgg16", lr=0.1, lr_g=QVGG_LR_G, lr_b=QVGG_LR_G,
                    paper="28.33"))
    return rows


_PAPER_MAIN = published.CIFAR_MAIN
_PAPER_COMPACT = published.CIFAR_COMPACT
_PAPER_WIDTH = published.CIFAR_WIDTH


def comparison_rows() -> list[Row]:
    """All rows of the three CIFAR-10 tables, in table order (full protocol)."""
    P = _PAPER_MAIN
    rows = [Row("main", f"ResNet{d}", f"cifar_resnet{d}", d, paper=P[f"ResNet{d}"]) for d in (20, 32, 56, 110, 1202)]
    for kind, name in (("parabolic", "Parabolic-ResNet"), ("poly", "PolyResNet")):
        rows += [Row("main", f"{name}{d}", f"cifar_{kind}_resnet{d}", d, method="ri", lr_g=LR_G[d], lr_b=LR_G[d],
                     paper=P[f"{name}{d}"]) for d in (20, 32, 56)]
    for d in (20, 32, 56, 110):
        q = f"cifar_qresnet{d}"
        rows += [
            Row("main", f"QResNet{d} (r.i., ReLinear)", q, d, method="ri", lr_g=LR_G[d], lr_b=LR_G[d],
                paper=P[f"QResNet{d} (r.i., ReLinear)"]),
            Row("main", f"QResNet{d} (r.i., ReLinear+ReZero)", q, d, method="ri+rezero", lr_g=LR_G_REZERO[d],
                lr_b=LR_G_REZERO[d], paper=P[f"QResNet{d} (r.i., ReLinear+ReZero)"]),
            Row("main", f"QResNet{d} (w.t., ReLinear)", q, d, method="wt", lr_g=LR_G[d], lr_b=LR_G[d],
                paper=P[f"QResNet{d} (w.t., ReLinear)"], source=f"cifar_resnet{d}"),
        ]
    rows += [Row("compact", f"Compact-QResNet{d} (w.t., ReLinear)", f"cifar_qresnet{d}_compact", d, method="wt",
                 lr_g=LR_B_COMPACT[d], lr_b=LR_B_COMPACT[d], paper=_PAPER_COMPACT[d], source=f"cifar_resnet{d}")
             for d in (20, 32, 56)]
    rows += [Row("width", f"ResNet{d} (x{w:g})", f"cifar_resnet{d}", d, width=w, paper=_PAPER_WIDTH[(d, w)])
             for d in (32, 56) for w in (1.5, 2.0, 2.5)]
    return rows


def runs_at(row: Row, protocol: dict) -> bool:
    """Whether ``row`` is trained at this profile's ``protocol`` (else it is "full only")."""
    if row.table == "vgg" or protocol.get("rows") is None:
        return True
    return row.key in protocol["rows"]


def paper_init(model: str) -> dict:
    """Model keyword arguments of the paper's initialisation: the official code leaves every batch
    norm at gamma = 1, where timm's ResNets (and ours, by default) zero the last one of each block."""
    return {} if "vgg" in model else {"zero_init_last": False}


def config_for(row: Row, protocol: dict, seed: int, source: RunConfig | None = None,
               width: float | None = None) -> RunConfig:
    """The engine configuration that trains ``row`` at ``protocol`` (``source``: the conventional
    run a weight-transfer row starts from, at the end of its first stage)."""
    cfg = dict(protocol["recipe"], model=row.model, seed=seed, progress=False, threads=protocol.get("threads"),
               quadratic_decay=protocol.get("quadratic_decay", "reference"), model_kwargs=paper_init(row.model))
    cfg["milestones"] = tuple(cfg["milestones"])
    w = width if width is not None else row.width
    if w != 1.0:
        cfg["width"] = w
    if row.lr is not None:
        cfg["lr"] = row.lr
    if row.lr_g is None:
        cfg["relinear"] = "none"
    else:
        cfg.update(relinear="sg", lr_g=row.lr_g, lr_b=row.lr_b)
    if row.method == "ri+rezero":
        cfg["rezero"] = True
    if row.method == "wt":
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
        for seed in protocol["seeds"]:
            source = (config_for(row_for(rows, row.source), protocol, seed, width=width)
                      if row.method == "wt" else None)
            out[(row, seed)] = config_for(row, protocol, seed, source, width=width)
    return out


def vgg_runs(profile: str) -> list[RunConfig]:
    """The runs of the VGG stability section at ``profile``."""
    P = select(PROTOCOLS, profile)["vgg"]
    return list(plan(vgg_rows(), P, width=P["width"]).values())


def comparison_runs(profile: str) -> list[RunConfig]:
    """The runs of the CIFAR comparison section at ``profile`` (transfer sources included via deps)."""
    P = select(PROTOCOLS, profile)["comparison"]
    return list(plan(comparison_rows(), P).values())


# -- summaries --------------------------------------------------------------------------------
def summarise(results: list[dict | None]) -> dict:
    """Mean/std of final test error over the finished seeds; counts of diverged and pending runs
    (None: a run a cluster runner has not finished yet)."""
    pending = sum(r is None for r in results)
    results = [r for r in results if r is not None]
    done = [r["test_error"] for r in results if r["status"] == "finished"]
    n, k = len(results), len(done)
    mean = sum(done) / k if k else None
    std = math.sqrt(sum((e - mean) ** 2 for e in done) / (k - 1)) if k > 1 else (0.0 if k else None)
    times = [r["epoch_time"] for r in results if r.get("epoch_time")]
    return dict(n=n, finished=k, diverged=n - k, pending=pending, mean=mean, std=std,
                epoch_time=sum(times) / len(times) if times else None,
                reasons=sorted({r["diverged_reason"] for r in results if r["status"] != "finished"}))


def error_cell(s: dict | None, run: bool = True) -> str:
    """Text of an error cell: "7.21 +- 0.30", "no converge" (all seeds diverged), "full only"."""
    if not run or s is None:
        return "full only"
    if s.get("pending"):
        return f"pending ({s['pending']} of {s['n'] + s['pending']} runs)"
    if s["finished"] == 0:
        return "no converge" + (f" ({s['diverged']}/{s['n']})" if s["n"] > 1 else "")
    text = f"{s['mean']:.2f}" + (f" +- {s['std']:.2f}" if s["finished"] > 1 else "")
    if s["diverged"]:
        text += f" ({s['diverged']}/{s['n']} diverged)"
    return text


def claims(summary: dict[Row, dict], params: dict[Row, int]) -> list[tuple[str, str, str]]:
    """The paper's claims checked against ``summary`` (row -> :func:`summarise` output).

    Rows are found by what they train (:func:`row_for`), never by their labels. Returns
    ``(claim, verdict, evidence)``. A claim orders pairs of rows ("A is better than B"); per
    pair the spread is ``sqrt(std_A**2 + std_B**2)`` over seeds. Verdicts: "supported" (every
    pair that ran orders as claimed by more than its spread), "not supported" (some pair orders
    the other way by more than its spread), "within noise" (neither), "not tested" (no pair ran,
    or a row of every pair diverged or is pending, at this profile).
    """
    rows = comparison_rows()
    by_key = {r.key: s for r, s in summary.items()}
    params = {r.key: n for r, n in params.items()}

    def row(model, method="conventional", width=1.0):
        return row_for(rows, model, method, width)

    def stat(r):
        s = by_key.get(r.key)
        return (s["mean"], s["std"] or 0.0) if s and s["finished"] and not s.get("pending") else None

    def compare(pairs):
        """pairs: (better row, worse row)."""
        vals = [(a, b, stat(a), stat(b)) for a, b in pairs]
        tested = [(a, b, x, y) for a, b, x, y in vals if x is not None and y is not None]
        if not tested:
            return "not tested", "rows did not run at this profile"
        margins = [(y[0] - x[0], math.hypot(x[1], y[1])) for _, _, x, y in tested]
        if any(d < -sp or (d < 0 and sp == 0) for d, sp in margins):
            verdict = "not supported"
        elif all(d > sp for d, sp in margins):
            verdict = "supported"
        else:
            verdict = "within noise"
        ev = "; ".join(f"{a.label} {x[0]:.2f} vs {b.label} {y[0]:.2f}" for a, b, x, y in tested)
        if len(tested) < len(vals):
            ev += f" ({len(vals) - len(tested)} of {len(vals)} pairs not run)"
        return verdict, ev

    out = []
    q_vs_r = [(row(f"cifar_qresnet{d}", m), row(f"cifar_resnet{d}")) for d in (20, 32, 56, 110)
              for m in ("ri", "ri+rezero", "wt")]
    out.append(("Every QResNet beats the ResNet of its depth", *compare(q_vs_r)))
    wt = [(row(f"cifar_qresnet{d}", "wt"), row(f"cifar_qresnet{d}", "ri")) for d in (20, 32, 56, 110)]
    out.append(("Weight transfer beats random initialisation (QResNet, ReLinear)", *compare(wt)))
    others = [(row(f"cifar_qresnet{d}", "ri"), row(f"cifar_{k}_resnet{d}", "ri")) for d in (20, 32, 56)
              for k in ("parabolic", "poly")]
    out.append(("QResNet beats Parabolic-/PolyResNet of the same depth (r.i.)", *compare(others)))
    q32, r110 = row("cifar_qresnet32", "wt"), row("cifar_resnet110")
    verdict, ev = compare([(q32, r110)])
    if verdict != "not tested":
        fewer = params[q32.key] < params[r110.key]
        ev += f"; params {params[q32.key]:,} vs {params[r110.key]:,}"
        verdict = verdict if fewer else "not supported"
    out.append(("QResNet32 beats ResNet110 with fewer parameters", verdict, ev))
    out.append(("Compact-QResNet is worse than QResNet (both w.t.)",
                *compare([(row(f"cifar_qresnet{d}", "wt"), row(f"cifar_qresnet{d}_compact", "wt"))
                          for d in (20, 32, 56)])))
    widen = [(row(f"cifar_qresnet{d}", "wt"), row(f"cifar_resnet{d}", width=w)) for d in (32, 56)
             for w in (1.5, 2.0, 2.5)]
    out.append(("QResNet beats every widened ResNet of its depth", *compare(widen)))
    return out
