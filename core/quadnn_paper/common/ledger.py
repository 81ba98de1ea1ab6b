"""The claim ledger: every claim of the paper, and where this build answers it.

Each :class:`Entry` names a claim of the paper (where it is made, in a few words) and one source of
its answer in this build:

- :class:`Claim`: a row of a section's claims table (``paper/tables/<table>.csv``), found by the
  claim's stable id (``<table>.keys.json``, one id per row; the section gives a claim its id where it
  makes it), whose ``Verdict`` the section computed from paired runs;
- :class:`Variable`: a verdict a section wrote as a variable (``paper/variables/<section>.tex``);
- :class:`Counted`: a universal statement checked case by case (a counterexample refutes it);
- :class:`NotTested`: no experiment of this project can answer it, and why;
- :class:`Measured`: the report shows the measurement, but no verdict is possible, and why.

``python -m quadnn_paper.common.ledger --paper paper`` (run by ``make paper`` before LaTeX) reads
what the notebooks wrote, fails when an entry whose answer is computed finds none, and writes the
ledger tables (``tables/ledger_cifar.tex``, ``ledger_other.tex``, all in ``ledger.csv``) and the tally the abstract quotes
(``variables/ledger.tex``).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from . import published
from .cells import latex_escape
from .files import atomic_write_text
from .macros import read_macros, write_macros

__all__ = [
    "Entry",
    "Claim",
    "Variable",
    "Counted",
    "NotTested",
    "Measured",
    "LEDGER",
    "resolve",
    "tally",
    "families",
    "families_text",
    "read_variables",
    "write",
    "main",
]


@dataclass(frozen=True)
class Claim:
    table: str  # e.g. "claims_cifar_tuning"
    id: str  # the id the section gave the claim (its text is the section's alone)


@dataclass(frozen=True)
class Variable:
    section: str
    name: str  # the macro's name without the section prefix


@dataclass(frozen=True)
class Counted:
    """A universal statement checked case by case: the section wrote how many of ``total`` cases
    it computed satisfy it (``holds``) or break it (``fails``). One measured counterexample
    refutes it ("refuted: fails in k of n ..."); none leaves it consistent with every case
    computed, which is a measurement, not a proof."""

    section: str
    count: str  # the variable counting the cases (without the section prefix)
    total: str  # the variable counting every case computed
    counts: str  # "fails" | "holds": what ``count`` counts
    cases: str  # what a case is, in words ("architectures computed")


@dataclass(frozen=True)
class NotTested:
    reason: str


@dataclass(frozen=True)
class Measured:
    reason: str


@dataclass(frozen=True)
class Entry:
    id: str
    where: str  # where the paper makes the claim
    claim: str  # the claim, in a few words
    section: str  # our section that answers it (its notebook's name)
    source: Claim | Variable | Counted | NotTested | Measured


_T, _V, _C = "claims_cifar_tuning", "claims_vgg_stability", "claims_cifar_comparison"
_I = "claims_imagenet"
_FULL_ONLY = "full only: its rows are trained at the full profile, not below"


def _seconds(model: str) -> str:
    """The paper's training seconds per epoch of ``model``, as the ledger quotes them ("10.87 s")."""
    return f"{published.CIFAR_EPOCH_SECONDS[model].text} s"


def _tuning(id_, claim):
    return Entry(id_, "Sec. V-A (CIFAR-10 tuning)", claim, "cifar_tuning", Claim(_T, id_))


def _cmp(id_, claim):
    return Entry(id_, "Sec. V-B (CIFAR-10 comparison)", claim, "cifar_comparison", Claim(_C, id_))


LEDGER: list[Entry] = [
    # -- expressivity (Sec. III) and trainability (Sec. IV, appendix)
    Entry(
        "spline-exact",
        "Sec. III-A, Prop. 1",
        "A quadratic ReLU network expresses any univariate polynomial spline exactly; a conventional one cannot",
        "expressivity",
        Measured("a proposition: the construction is checked numerically (error at rounding), not an experiment"),
    ),
    Entry(
        "spline-rates",
        "Sec. III-A, Lemma (Hall and Meyer)",
        "Polynomial splines approximate more accurately than linear splines",
        "expressivity",
        Measured("the error bounds and the measured convergence rates are tabled side by side; a bound has no verdict"),
    ),
    Entry(
        "variety",
        "Sec. III-B, Proposition 2",
        "A quadratic network's function variety has a larger dimension than a network with quadratic activation",
        "expressivity",
        Counted("expressivity", "VarPropTwoHolds", "VarArchs", "holds", "architectures computed"),
    ),
    Entry(
        "variety-lemma",
        "Sec. III-B, Lemma (upper bound on the quadratic network's dimension)",
        "The dimension of the quadratic network's variety is at most the Lemma's bound",
        "expressivity",
        Counted("expressivity", "VarLemmaFails", "VarArchs", "fails", "architectures computed"),
    ),
    Entry(
        "variety-kileel",
        "Sec. III-B (the bound attributed to Kileel et al.)",
        "The dimension of the quadratic-activation network's variety is at most the quoted bound",
        "expressivity",
        Counted("expressivity", "VarKileelFails", "VarArchs", "fails", "architectures computed"),
    ),
    Entry(
        "erratum-params",
        "Sec. V-B, CIFAR-10 table (parameter column)",
        "Every Parabolic-/PolyResNet (depths 20-56) has 0.54M parameters",
        "cifar_comparison",
        Variable("cifar_comparison", "ParamsErratum"),
    ),
    Entry(
        "collapse",
        "Sec. IV",
        "A quadratic network trained without care risks collapse (its output's magnitude explodes)",
        "expressivity",
        Measured("the amplification of the quadratic terms is measured; VGG16's claims below test the training"),
    ),
    Entry(
        "convergence",
        "Appendix",
        "Training with ReLinear converges (the appendix's convergence theorems)",
        "cifar_tuning",
        NotTested("a proof about the optimisation; no run of this project can confirm or refute it"),
    ),
    # -- Runge (Sec. V-A)
    Entry(
        "runge-fit",
        "Sec. V-A (Runge)",
        "A quadratic ReLU network fits the Runge function without oscillation at the edges, however trained",
        "runge",
        Measured("shown in the fits' figure; 'without oscillation' is read off the curves, no test decides it"),
    ),
    Entry(
        "runge-suppress",
        "Sec. V-A (Runge)",
        "ReLinear suppresses the high-degree coefficients of the network's pieces",
        "runge",
        Measured("the coefficients per degree are tabled; the paper gives no quantity to test against"),
    ),
    Entry(
        "runge-order",
        "Sec. V-A (Runge), RMSE table",
        "ReLinear-sg reaches the lowest RMSE, then sw-l2, then sw-l1",
        "runge",
        Variable("runge", "OrderMatches"),
    ),
    Entry(
        "oscillation",
        "Sec. V-A (CIFAR-10 tuning, prose)",
        "l1 is not good at stabilising; beta 0.9 and 0.99 remove the oscillation",
        "expressivity",
        Measured("the oscillation of the training curves is tabled per setting; the paper gives no measure of it"),
    ),
    # -- CIFAR-10 tuning (Sec. V-A)
    _tuning("sg-beats-conv", "ReLinear-sg beats the conventional ResNet20"),
    _tuning("sw-beats-conv", "ReLinear-sw beats the conventional ResNet20"),
    _tuning("sg-beats-sw", "ReLinear-sg beats ReLinear-sw"),
    _tuning("terms-help", "The quadratic terms help (gamma beats gamma 0)"),
    _tuning("large-gamma", "Too large a gamma hurts"),
    _tuning("rezero", "ReZero stabilises training at large gamma"),
    _tuning("rezero-named", "With ReZero, ReLinear-sg stops oscillating at gamma 0.01 and 0.001"),
    *(
        _tuning(
            f"transfer-{k}",
            f"Weight transfer from stage {k} beats random initialisation",
        )
        for k in (1, 2, 3)
    ),
    _tuning("transfer-best", "Transfer from stage 1 gives the best result"),
    _tuning("transfer-robust", "Later transfer stages are more robust to gamma"),
    # -- VGG16 on CIFAR-100 (Sec. V-A)
    *(
        Entry(
            f"vgg-square-{lr}",
            "Sec. V-A (VGG16, CIFAR-100)",
            f"VGG16 with square activation does not converge at lr {lr}; Quadratic-VGG16 does",
            "vgg_stability",
            Claim(_V, f"vgg-square-{lr}"),
        )
        for lr in ("0.05", "0.03", "0.01")
    ),
    # -- CIFAR-10 comparison (Sec. V-B)
    _cmp("q20-ri", "QResNet20 (r.i.) beats ResNet20"),
    _cmp("q20-wt", "QResNet20 (w.t.) beats ResNet20"),
    _cmp("q-depth", "Every QResNet beats the ResNet of its depth"),
    _cmp("wt-beats-ri", "Weight transfer beats random initialisation"),
    _cmp("q-beats-poly", "QResNet beats Parabolic-/PolyResNet of its depth"),
    _cmp("q32-r110", "QResNet32 beats ResNet110 with fewer parameters"),
    _cmp("cq32-r110", "Compact-QResNet32 beats ResNet110 with fewer parameters"),
    _cmp("compact-worse", "Compact-QResNet is worse than QResNet"),
    _cmp("depth-helps-more", "ResNet56 beats QResNet20: depth helps more"),
    _cmp("r1202-worse", "ResNet1202 is worse than the shallower ResNets"),
    _cmp("q-beats-wide", "QResNet beats every widened ResNet of its depth"),
    # the pairs of the multi-pair claims above that the cpu profile trains, decided on their own
    _cmp("q32-wt-r32", "At depth 32: QResNet32 (w.t.) beats ResNet32"),
    _cmp("wt-beats-ri-20", "At depth 20: weight transfer beats random initialisation"),
    _cmp("q-beats-poly-20", "At depth 20: QResNet20 beats Parabolic-/PolyResNet20"),
    _cmp("q32-beats-wide", "At depth 32: QResNet32 beats the twice-wide ResNet32"),
    _cmp("poly-no-converge", "Parabolic- and PolyResNets trained normally (without ReLinear) do not converge"),
    _cmp("poly-no-converge-20", "At depth 20: Parabolic-/PolyResNet20 trained normally do not converge"),
    Entry(
        "poly-no-depth",
        "Sec. V-B (CIFAR-10 comparison)",
        "Parabolic- and PolyResNets do not improve with depth",
        "cifar_comparison",
        NotTested(_FULL_ONLY + " (only depth 20 runs below full)"),
    ),
    # -- ImageNet, KITTI, efficiency (Sec. V-B, Sec. VI)
    Entry(
        "imagenet-q-beats-r",
        "Sec. V-B (ImageNet)",
        "QResNets beat the ResNets of their depth on ImageNet",
        "imagenet",
        Claim(_I, "imagenet-q-beats-r"),
    ),
    Entry(
        "imagenet-q-beats-poly",
        "Sec. V-B (ImageNet)",
        "QResNets beat the Poly-/Parabolic networks of their depth on ImageNet",
        "imagenet",
        Claim(_I, "imagenet-q-beats-poly"),
    ),
    Entry(
        "kitti",
        "Sec. V-B (KITTI depth)",
        "Quadratic-LapDepth improves on LapDepth's depth errors",
        "kitti_lapdepth",
        Measured("one run per network, no paired verdict; the metrics are tabled"),
    ),
    Entry(
        "time-ratio",
        "Sec. V-B (training time)",
        "A QResNet epoch costs about as long as a ResNet epoch ("
        + f"{_seconds('cifar_qresnet20')} vs {_seconds('cifar_resnet20')})",
        "efficiency",
        Variable("efficiency", "PaperRatioVerdict"),
    ),
    *(
        Entry(
            f"time-ratio-{model.removeprefix('cifar_').replace('_', '-')}",
            "Sec. V-B (training time)",
            f"{name}'s epoch against ResNet{depth}'s: {_seconds(model)} vs {_seconds(f'cifar_resnet{depth}')}",
            "efficiency",
            Variable("efficiency", f"PaperRatio{word}"),
        )
        for word, name, depth, model in (
            ("ParabolicTwenty", "Parabolic-ResNet20", 20, "cifar_parabolic_resnet20"),
            ("PolyTwenty", "PolyResNet20", 20, "cifar_poly_resnet20"),
            ("QResFiftySix", "QResNet56", 56, "cifar_qresnet56"),
            ("ParabolicFiftySix", "Parabolic-ResNet56", 56, "cifar_parabolic_resnet56"),
            ("PolyFiftySix", "PolyResNet56", 56, "cifar_poly_resnet56"),
        )
    ),
    Entry(
        "time-ratio-32-110",
        "Sec. V-B (training time)",
        "QResNet32, Parabolic-/PolyResNet32 and QResNet110 epochs against their ResNets' ("
        + ", ".join(
            f"{_seconds(f'cifar_{k}{d}')} vs {_seconds(f'cifar_resnet{d}')}"
            for k, d in (("qresnet", 32), ("parabolic_resnet", 32), ("poly_resnet", 32), ("qresnet", 110))
        )
        + ")",
        "efficiency",
        NotTested(
            "no profile times depths 32 and 110: the efficiency section times the depth-20 and depth-56 "
            "families (its table of models lists the paper's times)"
        ),
    ),
]

# a section's verdict words that decide (Runge's ranking answers "yes, ..." or "no: ...")
CIFAR_SECTIONS = ("cifar_tuning", "vgg_stability", "cifar_comparison")
# the sections that decide claims on paired seeds, each with a Holm family of its own
PAIRED_SECTIONS = (*CIFAR_SECTIONS, "imagenet")
# a section's verdict words that decide (Runge's ranking answers "yes, ..." or "no: ...")
DECIDED_WORDS = (
    "supported",
    "contradicted",
    "refuted",
    "no difference",
    "yes",
    "no:",
    "reproduced",
    "not reproduced",
)
KINDS = ("decided", "undecided", "not tested", "measured")
HEADER = ["Paper", "Claim", "Our section", "Answer", "Kind"]


class LedgerError(RuntimeError):
    pass


def _kind(answer: str) -> str:
    if answer.startswith(DECIDED_WORDS):
        return "decided"
    if answer.startswith("not tested"):
        return "not tested"
    return "undecided"


def _claims_table(paper: Path, table: str) -> dict[str, str]:
    """The verdicts of ``table``'s rows by their claims' ids."""
    path, keys = paper / "tables" / f"{table}.csv", paper / "tables" / f"{table}.keys.json"
    if not path.is_file() or not keys.is_file():
        raise LedgerError(f"{path} or its keys are missing: run its section's notebook (make paper)")
    with path.open(newline="") as f:
        verdicts = [row["Verdict"] for row in csv.DictReader(f)]
    ids = json.loads(keys.read_text())
    if len(ids) != len(verdicts):
        raise LedgerError(f"{keys} names {len(ids)} rows, {path.name} has {len(verdicts)}")
    return {k: v for k, v in zip(ids, verdicts) if k}


def _macro(section: str, name: str) -> str:
    """The LaTeX macro a section writes for its variable ``name`` (``cifar_tuning``, ``X`` -> ``cifartuningX``)."""
    return section.replace("_", "") + name


def _variable(paper: Path, section: str, name: str) -> str:
    path = paper / "variables" / f"{section}.tex"
    macro = _macro(section, name)
    value = read_macros(path.read_text()).get(macro) if path.is_file() else None
    if value is not None:
        return value
    raise LedgerError(f"{path}: no \\{macro} (run the {section} notebook)")


def resolve(entry: Entry, paper: Path) -> tuple[str, str]:
    """``(kind, answer)`` of ``entry`` in the build under ``paper``; a computed answer that the
    build does not hold raises :class:`LedgerError` naming the entry."""
    src = entry.source
    if isinstance(src, NotTested):
        return "not tested", src.reason
    if isinstance(src, Measured):
        return "measured", src.reason
    if isinstance(src, Counted):
        try:
            k, n = (int(_variable(paper, src.section, name)) for name in (src.count, src.total))
        except (LedgerError, ValueError) as e:
            raise LedgerError(f"ledger entry {entry.id!r}: {e}") from None
        fails = k if src.counts == "fails" else n - k
        if fails:
            return "decided", f"refuted: fails in {fails} of {n} {src.cases} (Sec. {src.section})"
        return "measured", f"holds in all {n} {src.cases}; a statement for every size is not proved by cases"
    try:
        if isinstance(src, Claim):
            verdicts = _claims_table(paper, src.table)
            if src.id not in verdicts:
                raise LedgerError(f"{src.table}.csv has no claim with id {src.id!r}")
            answer = verdicts[src.id]
        else:
            answer = _variable(paper, src.section, src.name)
    except LedgerError as e:
        raise LedgerError(f"ledger entry {entry.id!r}: {e}") from None
    if not answer or answer == "--":
        raise LedgerError(f"ledger entry {entry.id!r}: its section wrote no verdict")
    return _kind(answer), answer


def tally(rows: list[tuple[Entry, str, str]]) -> dict[str, int]:
    return {k: sum(kind == k for _, kind, _ in rows) for k in KINDS}


FAMILY = "HolmFamily"  # the variable each paired section writes for :func:`families`


def read_variables() -> set[str]:
    """The macros (section prefix and name) the ledger reads from the sections' variables."""
    names = {_macro(section, FAMILY) for section in PAIRED_SECTIONS}
    for src in (e.source for e in LEDGER):
        if isinstance(src, Variable):
            names.add(_macro(src.section, src.name))
        elif isinstance(src, Counted):
            names.update(_macro(src.section, n) for n in (src.count, src.total))
    return names


def families(paper: Path) -> dict[str, int]:
    """The size of each paired section's Holm family (its distinct pairs with a p-value), as the
    section wrote it (:data:`FAMILY`); a section that wrote none is left out."""
    out = {}
    for section in PAIRED_SECTIONS:
        try:
            out[section] = int(_variable(paper, section, FAMILY))
        except (LedgerError, ValueError):
            continue
    return out


def families_text(sizes: dict[str, int]) -> str:
    """ "cifar tuning: 9 pairs; vgg stability: 4 pairs" (the families the verdicts are adjusted in)."""
    if not sizes:
        return "(not built)"
    return "; ".join(f"{s.replace('_', ' ')}: {n} pair{'s' * (n != 1)}" for s, n in sizes.items())


def write(paper: Path) -> dict[str, int]:
    """Resolve every entry and write the ledger table, the tally and the Holm families; returns the
    tally."""
    rows = [(e, *resolve(e, paper)) for e in LEDGER]
    counts = tally(rows)
    (paper / "tables").mkdir(parents=True, exist_ok=True)
    (paper / "variables").mkdir(parents=True, exist_ok=True)
    f = io.StringIO(newline="")  # (written by rename: no link in the paper folder is followed)
    w = csv.writer(f)
    w.writerow(["id", *HEADER])
    w.writerows([e.id, e.where, e.claim, e.section, answer, kind] for e, kind, answer in rows)
    atomic_write_text(paper / "tables" / "ledger.csv", f.getvalue())
    for part, cifar in (("cifar", True), ("other", False)):  # two floats: one would overrun a page
        body = [
            " & ".join(latex_escape(x) for x in (e.where, e.claim, e.section.replace("_", " "), answer, kind)) + r" \\"
            for e, kind, answer in rows
            if (e.section in CIFAR_SECTIONS) == cifar
        ]
        atomic_write_text(paper / "tables" / f"ledger_{part}.tex", "\n".join(body) + "\n")
    names = {"decided": "Decided", "undecided": "Undecided", "not tested": "NotTested", "measured": "Measured"}
    macros = {f"ledger{names[k]}": v for k, v in counts.items()}
    macros.update(ledgerAll=len(rows), ledgerHolmFamilies=latex_escape(families_text(families(paper))))
    write_macros(paper / "variables" / "ledger.tex", "written by quadnn_paper.common.ledger; do not edit", macros)
    return counts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m quadnn_paper.common.ledger",
        description="Resolve every claim of the paper against a built paper/ and write the ledger table and tally.",
    )
    ap.add_argument("--paper", required=True, type=Path, help="the paper directory the notebooks wrote into")
    args = ap.parse_args(argv)
    if not args.paper.is_dir():
        ap.error(f"--paper {args.paper}: not a directory")
    try:
        counts = write(args.paper)
    except LedgerError as e:
        print(f"claim ledger: {e}", file=sys.stderr)
        return 1
    print("claim ledger: " + ", ".join(f"{v} {k}" for k, v in counts.items()) + f" of {len(LEDGER)} claims")
    print("Holm families (verdicts adjusted within each): " + families_text(families(args.paper)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
