"""Training stability of VGG16 (the paper's CIFAR-100 experiment): the square activation
``z -> z*z`` at three learning rates against quadratic neurons trained with ReLinear, with the
conventional VGG16 as reference.

The claim is decided per learning rate from paired runs: at every seed the square-activation
network and the quadratic one start from the initial weights the conventional VGG16 draws under
that seed and see the same batches; "the quadratic VGG16 trains where the square one does not"
is supported when the interval of ``err(square) - err(quadratic)`` lies above zero.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

from quadnn.models.cifar_vgg import VGG16 as VGG16_CHANNELS
from quadnn_paper.analysis import errors, paired, stats
from quadnn_paper.analysis.claim_tables import CLAIMS_HEADER, claim_rows, claims_table
from quadnn_paper.common.cells import Cell, power_of_ten
from quadnn_paper.common.outputs import PENDING, Column, Figure, Lines, Table, Variables, pending_text
from quadnn_paper.common.profiles import data_text, protocols
from quadnn_paper.engine import Computation, Results, RunConfig
from quadnn_paper.engine.tiny import capped
from quadnn_paper.experiments import cifar as cs
from quadnn_paper.experiments.cifar import param_count
from quadnn_paper.figures import vgg_stability as figures

__all__ = ["NAME", "PROTOCOLS", "protocol", "data", "plan", "outputs"]  # the section's contract (execution.sections)

NAME = "vgg_stability"
# smoke/cpu: the same models and learning rates on the 8x8 digits stand-in, all channel counts
# scaled by ``width``, more seeds than the paper's one so each claim gets an interval.
PROTOCOLS = cs.stating_gamma(  # each profile also states gamma_scale: experiments.cifar.gamma_scale of its recipe
    {
        "smoke": dict(
            recipe={**cs.VGG_RECIPE, **cs.DIGITS, "epochs": 2, "train_limit": 192}, width=0.125, seeds=(0,), threads=1
        ),
        # cpu: the CIFAR stand-in's data (Fashion-MNIST at 16x16, every test image), a per-seed subset of
        # 5,000 training images, batch 64, 6 epochs (470 steps), HEADLINE_SEEDS: a trains-or-not claim is
        # decided on counts, and 4 of 4 against 0 of 4 (Fisher's p 0.029) does not survive Holm over three.
        "cpu": dict(
            recipe={
                **cs.VGG_RECIPE,
                "dataset": cs.STANDIN["dataset"],
                "epochs": 6,
                "train_limit": 5_000,
                "batch_size": 64,
                "eval_every_epoch": False,
            },
            width=0.125,
            seeds=cs.HEADLINE_SEEDS,
            threads=1,
            split_per_seed=True,
        ),
        # full: the paper's recipe; three seeds (the paper reports one run) so the claims get intervals.
        "full": dict(recipe=dict(cs.VGG_RECIPE), width=1.0, seeds=(0, 1, 2), threads=None, quadratic_decay="zero"),
    }
)
MARGIN = paired.UNTRAINED_MARGIN  # "learned": final test error at least this many points below chance


def rows() -> list[cs.Row]:
    """The rows of the section's tables (full protocol), keyed by what they train."""
    return cs.vgg_rows()


protocol = protocols(PROTOCOLS)


def data(profile: str, tiny: bool = False) -> str:
    """The data the section's numbers come from, in words."""
    dataset = protocol(profile, tiny)["recipe"]["dataset"]
    words = cs.data_words(dataset, "CIFAR-100")
    return data_text(words, tiny)


def param_counts(models: list[str]) -> dict[str, int]:
    """Parameters of each model at the paper's width, with CIFAR-100's hundred classes."""
    return {m: param_count(m, num_classes=100) for m in models}


def plan(profile: str, tiny: bool = False) -> dict:
    """The parameter counts the table quotes (``"params"``) and every run, by ``(row, seed)``."""
    P = protocol(profile, tiny)
    models = sorted({row.model for row in rows()})
    params = Computation("vgg_params", f"{__name__}:param_counts", {"models": models}, seconds=5)
    return {"params": params, **capped(cs.plan(cs.vgg_rows(), P, width=P["width"]), tiny)}


def outputs(results: Results) -> list:
    """The section's tables, figure, variables and printed lines from its plan's ``results``."""
    params = {row: results["params"][row.model] for row in rows()}
    S = summary(results)
    P = results.protocol
    intro = f"profile {results.profile} | data {data(results.profile, results.tiny)} | width {P['width']} | epochs {P['recipe']['epochs']} | seeds {P['seeds']}"
    runs_text = [f"{t.row.label:40s} {errors.error_cell(S.summaries[t.row]):>24s}  {t.engine}" for t in S.table]
    runs_text += [f"{c.verdict:13s} {c.text}: {c.evidence()}" for c in S.claims + [S.vs_vgg]]
    table = [[t.row.label, f"{params[t.row] / 1e6:.2f}M", t.engine, t.ours, t.paper] for t in S.table]
    return [
        Lines([intro]),
        Lines([f"{row.label:40s} {n:>12,d}" for row, n in params.items()], check=True),
        Lines(runs_text),
        Table(
            "vgg_stability", ["Network", "Params", Column("Engine", align="l"), "Error ours (%)", "Paper (%)"], table
        ),
        Table("vgg_claims", CLAIMS_HEADER, claim_rows(S.claims)),
        claims_table(NAME, "VGG", S.claims + [S.vs_vgg]),
        Figure(
            "vgg_stability_loss",
            lambda: figures.loss(
                {r.label: S.history[r][0] for r in S.rows if S.history[r]},
                S.loss_limit,
                P,
                cs.DATA_WORDS[P["recipe"]["dataset"]],
            ),
        ),
        Variables(variables(S, params)),
    ]


def _gather(results: Results, rows: list[cs.Row], dataset: str) -> tuple[dict[cs.Row, list], dict[cs.Row, dict]]:
    """Per row its results in plan order (None: pending) and, by seed, the error each contributes
    to a paired difference."""
    per_row = {r: [] for r in rows}
    errs = {r: {} for r in rows}
    for (row, seed), res in results.runs().items():
        per_row[row].append(res)
        errs[row][seed] = errors.seed_errors(res, dataset)
    return per_row, errs


def _learned(s: dict, chance: float) -> bool:
    """Whether a row learned: none of its runs pending, some finished, and their mean error at least
    :data:`MARGIN` points below chance."""
    return s.finished > 0 and not s.pending and s.mean < chance - MARGIN


def _engine_cell(s: dict, done: list[dict]) -> str:
    """The table's "Engine" column: pending, finished, or which of the finished runs diverged and when."""
    if s.pending:
        return errors.error_cell(s)
    diverged = [x for x in done if x["status"] != "finished"]
    if not diverged:
        return "finished"
    return f"diverged ({len(diverged)}/{len(done)}), epoch " + ", ".join(str(x["epochs_run"]) for x in diverged)


def _ours_cell(row: cs.Row, s: dict, chance: float) -> str | Cell:
    """The table's "Error ours" column: the pending text, or its :class:`Cell`
    (``reproduced``: whether learning or not agrees with the paper's row; None where it has none)."""
    if s.pending:
        return errors.error_cell(s)
    learned = _learned(s, chance)
    agrees = None if row.paper == "--" else learned != (row.paper == "no converge")
    if not s.finished:
        return Cell("no converge", note=f"({s.diverged}/{s.n})" if s.n > 1 else "", reproduced=agrees)
    notes = (f"({s.diverged}/{s.n} diverged)" if s.diverged else "", "(chance)" if not learned else "")
    return errors.error_value(s, note="; ".join(n for n in notes if n), reproduced=agrees)


class TableRow(NamedTuple):
    """A row of the section's table: what the engine reports, our error, the paper's."""

    row: cs.Row
    engine: str
    ours: str | Cell
    paper: str


def _table(per_row: dict[cs.Row, list], sums: dict[cs.Row, errors.Errors], chance: float) -> list[TableRow]:
    """The section's table, one entry per row: what the engine reports, our error, the paper's."""
    table = []
    for row, res in per_row.items():
        s, done = sums[row], [x for x in res if x is not None]
        table.append(TableRow(row, _engine_cell(s, done), _ours_cell(row, s, chance), row.paper))
    return table


def _claims(
    qvgg: cs.Row, vgg: cs.Row, square: list[cs.Row], errs: dict[cs.Row, dict], dataset: str, moved: float | None
) -> tuple[list[paired.Claim], paired.Claim]:
    """The claims (one per square-activation learning rate) and the measurement against the
    conventional VGG16, Holm-adjusted together."""
    claims = [
        paired.pair_claim(
            f"Quadratic VGG16 (ReLinear) trains where the square-activation VGG16 at lr {r.lr:g} does not",
            [(qvgg.label, errs[qvgg], r.label, errs[r])],
            paper=f"{qvgg.paper} vs no converge",
            dataset=dataset,
            moved_by={qvgg.label: moved},
            never=True,  # "does not converge": decided on counts, whatever the terms did; one that trained refutes it
            id=f"vgg-square-{r.lr:g}",
        )
        for r in square
    ]
    # No claim of the paper: it prints no conventional VGG16 error. Shown as a measurement.
    vs_vgg = paired.pair_claim(
        "Quadratic VGG16 against the conventional VGG16 (no claim in the paper)",
        [(qvgg.label, errs[qvgg], vgg.label, errs[vgg])],
        dataset=dataset,
        moved_by={qvgg.label: moved},
    )
    # One family for Holm: the square-activation claims and the measurement against VGG16.
    *claims, vs_vgg = paired.adjust([*claims, vs_vgg])
    return claims, vs_vgg


@dataclasses.dataclass(frozen=True)
class Summary:
    """What the section's outputs are made of: its rows' errors and table, the claims, the numbers
    the text quotes."""

    protocol: dict
    rows: list[cs.Row]
    table: list[TableRow]
    summaries: dict[cs.Row, errors.Errors]
    claims: list[paired.Claim]
    vs_vgg: paired.Claim  # the measurement against the conventional VGG16 (no claim in the paper)
    chance: float
    pending: int
    runs: int
    square_diverged: int
    square_not_learned: int
    square_runs: int
    qvgg: cs.Row
    vgg: cs.Row
    history: dict[cs.Row, list[dict]]  # each row's delivered results (pending left out), in plan order
    num_classes: int
    loss_limit: float
    test_images: int | None


def summary(results: Results) -> Summary:
    """Rows, claims and quoted numbers from the section's ``results``."""
    P = results.protocol
    R = P["recipe"]
    rows = cs.vgg_rows()
    chance = paired.chance(R["dataset"])
    per_row, errs = _gather(results, rows, R["dataset"])
    sums = {r: errors.summarise(v) for r, v in per_row.items()}
    learned = {r: _learned(sums[r], chance) for r in rows}
    qvgg = next(r for r in rows if r.model == "cifar_qvgg16")
    vgg = cs.row_for(rows, "cifar_vgg16")
    square = [r for r in rows if r.model == "cifar_vgg16_square"]
    claims, vs_vgg = _claims(qvgg, vgg, square, errs, R["dataset"], errors.moved(per_row[qvgg]))
    num_classes = paired.classes(R["dataset"])
    return Summary(
        protocol=P,
        rows=rows,
        table=_table(per_row, sums, chance),
        summaries=sums,
        claims=claims,
        vs_vgg=vs_vgg,
        chance=chance,
        pending=sum(s.pending for s in sums.values()),
        runs=sum(len(v) for v in per_row.values()),
        square_diverged=sum(sums[r].finished == 0 and not sums[r].pending for r in square),
        square_not_learned=sum(not learned[r] for r in square),
        square_runs=len(square),
        qvgg=qvgg,
        vgg=vgg,
        history={r: [x for x in per_row[r] if x is not None] for r in rows},
        num_classes=num_classes,
        loss_limit=next(c for c in results.plan.values() if isinstance(c, RunConfig)).diverge_factor
        * math.log(num_classes),
        test_images=errors.test_images(x for v in per_row.values() for x in v),
    )


def variables(S: Summary, params: dict) -> dict:
    """The numbers the section's text quotes, by macro name (``params``: counts by row)."""
    P, sums = S.protocol, S.summaries
    R, F = P["recipe"], PROTOCOLS["full"]["recipe"]  # F: the recipe the text describes
    q, v = sums[S.qvgg], sums[S.vgg]
    # Words from the paired verdict, never from the bare means.
    comparison = {
        stats.SUPPORTED: "lower than",
        stats.CONTRADICTED: "higher than",
    }.get(S.vs_vgg.verdict, "not distinguishable from")
    if S.vs_vgg.verdict.startswith(stats.EQUIVALENT):
        comparison = "within the equivalence margin of"
    if q.pending or v.pending:
        comparison = PENDING
    verdicts = [c.verdict for c in S.claims]
    return dict(
        Epochs=R["epochs"],
        FullMomentum=F["momentum"],
        FullLr=F["lr"],
        FullLrDecay=F["lr_decay"],
        FullBatch=F["batch_size"],
        FullEpochs=F["epochs"],
        FullDecay=power_of_ten(F["weight_decay"]),
        Channels=", ".join(str(c) for c in VGG16_CHANNELS if c != "M"),
        FullMilestones=", ".join(f"{round(100 * m)}%" for m in F["milestones"]),
        Width=P["width"],
        Seeds=len(P["seeds"]),
        TrainImages=R.get("train_limit") or "all",
        BatchSize=R["batch_size"],
        TestImages=S.test_images or "--",
        DivergeFactor=RunConfig().diverge_factor,
        LossLimit=S.loss_limit,
        NumClasses=S.num_classes,
        SquareDiverged=S.square_diverged,
        SquareNotLearned=S.square_not_learned,
        Chance=S.chance,
        Margin=MARGIN,
        # the quadratic VGG16's rate of the quadratic terms as trained here (the paper's times its gamma_scale)
        QvggRateTrained=f"{cs.QVGG_LR_G * P['gamma_scale']:.2g}",
        GammaScale=f"{P['gamma_scale']:.3g}",
        SquareRuns=S.square_runs,
        Verdict=pending_text((S.pending, S.runs, "run")) if S.pending else stats.combine(verdicts),
        ClaimsSupported=verdicts.count(stats.SUPPORTED),
        ClaimsAll=len(verdicts),
        HolmFamily=paired.family_size([*S.claims, S.vs_vgg]),
        VggError=errors.error_cell(v) if v.pending else (v.mean if v.finished else "no converge"),
        QvggError=errors.error_cell(q) if q.pending else (q.mean if q.finished else "no converge"),
        QvggComparison=comparison,
        QvggVsVgg=S.vs_vgg.evidence(),
        QvggVsVggVerdict=S.vs_vgg.verdict,
        VggParams=f"{params[S.vgg] / 1e6:.2f}M",
        QvggParams=f"{params[S.qvgg] / 1e6:.2f}M",
        PowerSentence=paired.power_sentence([*S.claims, S.vs_vgg]),
        Level=round(100 * stats.LEVEL),
    )
