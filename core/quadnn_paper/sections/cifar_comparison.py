"""The comparative CIFAR-10 study: ResNets, Parabolic-/PolyResNets, QResNets (random
initialisation + ReLinear, + ReZero, weight transfer), compact QResNets and widened ResNets.

Every claim compares rows that are trained as pairs at each seed (see :mod:`quadnn_paper.experiments.cifar`): a
randomly initialised quadratic row starts from the initial weights of the ResNet of its depth,
a weight-transfer row from that ResNet's first stage, and all of them see the same batches and
are evaluated on the same images. A claim's verdict comes from the t-interval of the per-seed
differences of final test error (:mod:`quadnn_paper.analysis.stats`).
"""

from __future__ import annotations

import dataclasses
import math

from quadnn.models.cifar_resnet import STAGE_CHANNELS
from quadnn_paper.analysis import errors, paired, stats
from quadnn_paper.analysis.claim_tables import CLAIMS_HEADER, claim_rows, claims_table
from quadnn_paper.common import published
from quadnn_paper.common.cells import Cell, number_word, power_of_ten
from quadnn_paper.common.machine import compute_device
from quadnn_paper.common.outputs import Lines, Overview, Table, Variables
from quadnn_paper.common.profiles import data_text, protocols
from quadnn_paper.engine import Computation, Results
from quadnn_paper.engine.tiny import capped
from quadnn_paper.experiments import cifar as cs
from quadnn_paper.experiments.cifar import param_count

__all__ = ["NAME", "PROTOCOLS", "protocol", "data", "plan", "outputs"]  # the section's contract (execution.sections)

NAME = "cifar_comparison"


def _key(model: str, method: str = "conventional") -> tuple:
    return (model, 1.0, method, None)  # Row.key at width 1 with the recipe's lr


# Rows trained below full, with the seeds each runs at (the others are "full only"). cpu: the
# stand-in protocol the tuning section shares (experiments.cifar.STANDIN), the rows of the headline claims
# (depth 20) at HEADLINE_SEEDS, the rest (QResNet32 and Compact-QResNet32 against ResNet32, ResNet56, ResNet110, the ResNet32
# twice as wide) at REST_SEEDS; every arm has the same channel multiplier, times its row's width.
_H, _R = cs.HEADLINE_SEEDS, cs.REST_SEEDS
_CPU_ROWS = {
    _key("cifar_resnet20"): _H,
    _key("cifar_parabolic_resnet20", "ri"): _H,
    _key("cifar_poly_resnet20", "ri"): _H,
    _key("cifar_parabolic_resnet20", cs.NORMAL): _H,  # "trained normally, they do not converge"
    _key("cifar_poly_resnet20", cs.NORMAL): _H,
    _key("cifar_qresnet20", "ri"): _H,
    _key("cifar_qresnet20", "ri+rezero"): _H,
    _key("cifar_qresnet20", "wt"): _H,
    _key("cifar_qresnet20_compact", "wt"): _H,
    _key("cifar_qresnet20", "wt0"): _H,  # the w.t. rows' controls (the tuning's stage-1 gamma-0 runs)
    _key("cifar_qresnet32", "wt0"): _R,
    _key("cifar_resnet32"): _R,
    _key("cifar_qresnet32", "wt"): _R,
    _key("cifar_qresnet32_compact", "wt"): _R,  # "Compact-QResNet32 beats ResNet110 with fewer parameters"
    _key("cifar_resnet110"): _R,
    _key("cifar_resnet56"): _R,  # "Depth helps more than the quadratic neuron: ResNet56 beats QResNet20"
    ("cifar_resnet32", 2.0, "conventional", None): _R,
}
_SMOKE_ROWS = (
    _key("cifar_resnet20"),
    _key("cifar_qresnet20", "ri"),
    _key("cifar_qresnet20", "wt"),
    _key("cifar_qresnet20", "wt0"),
)
PROTOCOLS = cs.stating_gamma(  # each profile also states gamma_scale: experiments.cifar.gamma_scale of its recipe
    {
        "smoke": dict(
            recipe={**cs.RESNET_RECIPE, **cs.DIGITS, "epochs": 2, "train_limit": 160},
            rows=_SMOKE_ROWS,
            seeds=(0, 1),
            threads=1,
        ),
        "cpu": dict(
            recipe={**cs.RESNET_RECIPE, **cs.STANDIN},
            rows=_CPU_ROWS,
            seeds=_H,
            threads=1,
            width=cs.STANDIN_WIDTH,
            split_per_seed=True,
            warmup={"cifar_resnet110": 1},  # an epoch at a tenth of the rate (cs.WARMUP_EPOCHS)
        ),
        "full": dict(
            recipe=dict(cs.RESNET_RECIPE),
            rows=None,
            seeds=(0, 1, 2),
            threads=None,
            quadratic_decay="zero",
            warmup=cs.WARMUP_EPOCHS,
        ),
    }
)


_CIFAR10_TRAIN = 50_000  # CIFAR-10's training images (the full protocol's warm-up is one epoch of them)
_CIFAR_SECTIONS = 3  # cifar_tuning, vgg_stability, cifar_comparison: Holm's method runs within each


def rows() -> list[cs.Row]:
    """The rows of the section's tables (full protocol), keyed by what they train."""
    return cs.comparison_rows()


protocol = protocols(PROTOCOLS)


def data(profile: str, tiny: bool = False) -> str:
    """The data the section's numbers come from, in words."""
    dataset = protocol(profile, tiny)["recipe"]["dataset"]
    words = cs.data_words(dataset, "CIFAR-10")
    return data_text(words, tiny)


def param_counts(rows: list[list]) -> dict[str, int]:
    """Parameters of each row ``[model, width, method]`` at the paper's setting (CIFAR-10 head, 3
    input channels), computed from the models, by the row's key (as text)."""
    table_rows = cs.comparison_rows()
    return {
        str(cs.row_for(table_rows, model, method, width).key): param_count(
            model, width=width, rezero=method == "ri+rezero"
        )
        for model, width, method in rows
    }


def plan(profile: str, tiny: bool = False) -> dict:
    """The parameter counts the tables quote (``"params"``) and every run, by ``(row, seed)``
    (conventional ResNets first: their stage-1 checkpoints start the weight-transfer rows of their
    depth and seed)."""
    P = protocol(profile, tiny)
    config = {"rows": [[r.model, r.width, r.method] for r in rows()]}
    params = Computation("comparison_params", f"{__name__}:param_counts", config, seconds=30)
    return {"params": params, **capped(cs.plan(cs.comparison_rows(), P, width=P.get("width")), tiny)}


def outputs(results: Results) -> list:
    """The section's tables, variables and printed lines from its plan's ``results``."""
    params = {r: results["params"][str(r.key)] for r in rows()}
    S = summary(results, params)
    P = S.protocol
    rows_run = "all" if P["rows"] is None else len(P["rows"])
    intro = (
        f"profile {results.profile} | data {data(results.profile, results.tiny)} | rows {rows_run} | seeds {P['seeds']}"
    )
    runs_text = [
        f"{r.label:38s} {errors.error_cell(s):>22s}  {s.epoch_time or 0:.2f} s/epoch  {s.reasons}"
        for r, s in S.summaries.items()
    ]
    runs_text += [f"{c.verdict:13s} {c.text}: {c.evidence()}" for c in S.claims]
    return [
        Overview(),  # the report's overview is printed in this section
        Lines([intro]),
        Lines([f"{r.label:38s} {n:>12,d}" for r, n in params.items()], check=True),
        Lines(runs_text),
        *tables(S, params),
        Variables(variables(S, params)),
    ]


def transfer_budget(protocol: dict) -> str:
    """What a weight-transfer arm has trained that a randomly initialised one has not: the source's
    first stage ("8+15 epochs, the other 15"), which its control arm trains too."""
    R = protocol["recipe"]
    stage = round(R["milestones"][0] * R["epochs"])
    return f"w.t. trained {stage}+{R['epochs']} epochs, the other {R['epochs']}"


def _control_of(rows: list[cs.Row], a: cs.Row, b: cs.Row) -> tuple[cs.Row, cs.Row] | None:
    """The controls of a pair whose first arm is a weight transfer and whose second is not: ``a0``, the
    same QResNet transferred from the same source with its terms frozen (the same budget, the
    quadratic terms not trained), and ``b0``, the conventional ResNet of ``a``'s depth at ``b``'s
    budget. Their difference is what the budget alone gives; None where the arms share a budget."""
    if a.method != "wt" or b.method in cs.TRANSFER_METHODS:
        return None
    return cs.row_for(rows, f"cifar_qresnet{a.depth}", "wt0"), cs.row_for(rows, f"cifar_resnet{a.depth}")


def _claim(
    errs: dict,
    text: str,
    pairs: list[tuple[cs.Row, cs.Row]],
    extra: str = "",
    *,
    dataset: str = "cifar10",
    moved: dict | None = None,
    never: bool = False,
    id: str = "",
) -> paired.Claim:
    """The claim "each first row beats its second" over all its ``pairs`` (``errs``: per-seed errors
    by row key; a row absent did not run at this profile, and its pairs count as not tested). A
    pair with a weight-transfer arm against an arm of another budget is measured against its
    controls (:func:`_control_of`); against the conventional ResNet of its own depth that is the
    w.t. arm against its frozen-terms twin. ``extra`` is ours (e.g. our parameter counts): it
    follows the evidence, never the paper's numbers."""
    rows = cs.comparison_rows()
    ran = [(a, b) for a, b in pairs if a.key in errs and b.key in errs]
    # the paper's numbers of the first pair that ran (the like of ours), then how many pairs more
    a0, b0 = (ran or pairs)[0]
    more = len(pairs) - 1
    paper = f"{a0.paper} vs {b0.paper}" + (
        f" ({a0.label} vs {b0.label}; +{more} pair{'s' * (more > 1)})" if more else ""
    )
    moved = moved or {}
    measured, margins = [], []
    for a, b in pairs:
        margins.append(stats.margin_of(paired.paper_effect(a.paper, b.paper)))
        ctl = _control_of(rows, a, b)
        if ctl is not None and ctl[1].key == b.key:  # against its own depth's ResNet: the frozen twin
            b, ctl = ctl[0], None
        pair = (a.label, errs.get(a.key, {}), b.label, errs.get(b.key, {}))
        if ctl is not None:
            pair += ((ctl[0].label, errs.get(ctl[0].key, {}), ctl[1].label, errs.get(ctl[1].key, {})),)
        measured.append(pair)
    note = extra.lstrip("; ")  # the controls a pair is measured net of are pair_claim's note
    # a frozen-terms control holds its terms at the reference by construction: not a failed departure
    moved_by = {r.label: (None if r.method == "wt0" else moved.get(r.key)) for r in rows}
    return paired.pair_claim(
        text,
        measured,
        paper=paper,
        note=note,
        dataset=dataset,
        moved_by=moved_by,
        margins=margins,
        never=never,
        id=id,
    )


def _fewer_parameters_claim(
    errs: dict, params: dict, rows: list[cs.Row], model: str = "cifar_qresnet32", **kw
) -> paired.Claim:
    """``model`` (w.t.) beats ResNet110 with fewer parameters: contradicted, whatever the errors say,
    where it has not fewer (``params`` by row key)."""
    q32, r110 = cs.row_for(rows, model, "wt"), cs.row_for(rows, "cifar_resnet110")
    fewer = params.get(q32.key, 0) < params.get(r110.key, 0)
    name = "Compact-QResNet32" if model.endswith("_compact") else "QResNet32"
    c = _claim(
        errs,
        f"{name} beats ResNet110 with fewer parameters",
        [(q32, r110)],
        f"ours: params {params.get(q32.key, 0):,} vs {params.get(r110.key, 0):,} (full width)",
        id="cq32-r110" if model.endswith("_compact") else "q32-r110",
        **kw,
    )
    if not fewer and c.intervals:
        c = dataclasses.replace(c, verdict=stats.CONTRADICTED, note=c.note + " (not fewer)")
    return c


class _Claims:
    """The helpers the claim lists share: rows by what they train, a claim over pairs of rows."""

    def __init__(self, errs: dict, rows: list[cs.Row], **kw):
        self.errs, self.rows, self.kw = errs, rows, kw

    def row(self, model, method="conventional", width=1.0):
        return cs.row_for(self.rows, model, method, width)

    def claim(self, text, pairs, **more):
        return _claim(self.errs, text, pairs, **self.kw, **more)

    def normally(self, depths):  # each kind with ReLinear against the same network trained normally
        kinds = ("parabolic", "poly")
        row = self.row
        return [
            (row(f"cifar_{k}_resnet{d}", "ri"), row(f"cifar_{k}_resnet{d}", cs.NORMAL)) for d in depths for k in kinds
        ]


def _paper_claims(errs: dict, params: dict, rows: list[cs.Row], **kw) -> list[paired.Claim]:
    """The paper's claims in its order, before Holm adjustment (``errs``, ``params`` by row key), then
    the pairs of its multi-pair claims that the cpu profile trains (:func:`_pair_claims`)."""
    C = _Claims(errs, rows, **kw)
    row, claim, normally = C.row, C.claim, C.normally
    return [
        claim(
            "QResNet20 (r.i., with and without ReZero) beats ResNet20",
            [(row("cifar_qresnet20", m), row("cifar_resnet20")) for m in ("ri", "ri+rezero")],
            id="q20-ri",
        ),
        claim(
            "QResNet20 (w.t.) beats ResNet20",
            [(row("cifar_qresnet20", "wt"), row("cifar_resnet20"))],
            id="q20-wt",
        ),
        claim(
            "Every QResNet beats the ResNet of its depth (depths 32-110)",
            [
                (row(f"cifar_qresnet{d}", m), row(f"cifar_resnet{d}"))
                for d in (32, 56, 110)
                for m in ("wt", "ri", "ri+rezero")
            ],
            id="q-depth",
        ),
        claim(
            "Weight transfer beats random initialisation (QResNet, ReLinear)",
            [(row(f"cifar_qresnet{d}", "wt"), row(f"cifar_qresnet{d}", "ri")) for d in (20, 32, 56, 110)],
            id="wt-beats-ri",
        ),
        claim(
            "QResNet beats Parabolic-/PolyResNet of the same depth (r.i.)",
            [
                (row(f"cifar_qresnet{d}", "ri"), row(f"cifar_{k}_resnet{d}", "ri"))
                for d in (20, 32, 56)
                for k in ("parabolic", "poly")
            ],
            id="q-beats-poly",
        ),
        _fewer_parameters_claim(errs, params, rows, **kw),
        _fewer_parameters_claim(errs, params, rows, model="cifar_qresnet32_compact", **kw),
        claim(
            "Parabolic-/PolyResNets trained normally (without ReLinear) do not converge; with ReLinear they do",
            normally((20, 32, 56)),
            never=True,
            id="poly-no-converge",
        ),
        claim(
            "Compact-QResNet is worse than QResNet (both w.t.)",
            [(row(f"cifar_qresnet{d}", "wt"), row(f"cifar_qresnet{d}_compact", "wt")) for d in (20, 32, 56)],
            id="compact-worse",
        ),
        claim(
            "Depth helps more than the quadratic neuron: ResNet56 beats QResNet20 (r.i.)",
            [(row("cifar_resnet56"), row("cifar_qresnet20", "ri"))],
            id="depth-helps-more",
        ),
        claim(
            "ResNet1202 is worse than the shallower ResNets",
            [(row(f"cifar_resnet{d}"), row("cifar_resnet1202")) for d in (20, 32, 56, 110)],
            id="r1202-worse",
        ),
        claim(
            "QResNet beats every widened ResNet of its depth",
            [
                (row(f"cifar_qresnet{d}", "wt"), row(f"cifar_resnet{d}", width=w))
                for d in (32, 56)
                for w in (1.5, 2.0, 2.5)
            ],
            id="q-beats-wide",
        ),
    ] + _pair_claims(C)


def is_pair_claim(claim: paired.Claim) -> bool:
    """Whether ``claim`` is one of the pairs of a multi-pair claim decided on its own (:func:`_pair_claims`)."""
    return bool(claim.pair_of)


def _pair_claims(C: _Claims) -> list[paired.Claim]:
    """The pairs of the paper's multi-pair claims that the cpu profile trains, each a claim of its
    own: a claim of several pairs is decided only with all of them (stats.combine); its pairs, being
    the same pairs, count once in the Holm family (paired.adjust)."""
    row, normally = C.row, C.normally

    def claim(pair_of: str, *args, **kw) -> paired.Claim:
        return dataclasses.replace(C.claim(*args, **kw), pair_of=pair_of)

    return [
        claim(
            "q-depth",
            "At depth 32: QResNet32 (w.t.) beats ResNet32",
            [(row("cifar_qresnet32", "wt"), row("cifar_resnet32"))],
            id="q32-wt-r32",
        ),
        claim(
            "wt-beats-ri",
            "At depth 20: weight transfer beats random initialisation (QResNet20, ReLinear)",
            [(row("cifar_qresnet20", "wt"), row("cifar_qresnet20", "ri"))],
            id="wt-beats-ri-20",
        ),
        claim(
            "q-beats-poly",
            "At depth 20: QResNet20 beats Parabolic-ResNet20 and PolyResNet20 (r.i.)",
            [(row("cifar_qresnet20", "ri"), row(f"cifar_{k}_resnet20", "ri")) for k in ("parabolic", "poly")],
            id="q-beats-poly-20",
        ),
        claim(
            "poly-no-converge",
            "At depth 20: Parabolic-ResNet20 and PolyResNet20 trained normally do not converge; with ReLinear they do",
            normally((20,)),
            never=True,
            id="poly-no-converge-20",
        ),
        claim(
            "q-beats-wide",
            "At depth 32: QResNet32 (w.t.) beats the twice-wide ResNet32",
            [(row("cifar_qresnet32", "wt"), row("cifar_resnet32", width=2.0))],
            id="q32-beats-wide",
        ),
    ]


def claims(
    errs: dict[cs.Row, dict],
    params: dict[cs.Row, int],
    protocol: dict | None = None,
    moved: dict[cs.Row, float | None] | None = None,
) -> list[paired.Claim]:
    """The paper's claims, each from the paired per-seed errors ``errs[row] = {seed: error}`` (a row
    absent from ``errs`` did not run at this profile), Holm-adjusted over the section's pairs. Rows
    are found by what they train; ``protocol`` gives the data set (default: full)."""
    errs = {r.key: e for r, e in errs.items()}  # by what a row trains, never by its label
    params = {r.key: n for r, n in params.items()}
    protocol = protocol or PROTOCOLS["full"]
    kw = dict(dataset=protocol["recipe"]["dataset"], moved={r.key: m for r, m in (moved or {}).items()})
    return paired.adjust(_paper_claims(errs, params, cs.comparison_rows(), **kw))


@dataclasses.dataclass(frozen=True)
class Summary:
    """What the section's outputs are made of: per row its errors and the terms' departure, per
    seed its row of the seeds table, and the claims."""

    protocol: dict
    test_images: int | None
    rows: list[cs.Row]  # every row of the full protocol
    summaries: dict[cs.Row, errors.Errors]  # the rows this profile trains
    moved: dict[cs.Row, float | None]
    seed_rows: list[list]
    claims: list[paired.Claim]
    runs: int
    rows_run: int


def summary(results: Results, params: dict | None = None) -> Summary:
    """Per-row summaries, per-seed errors and the claims from the section's ``results``;
    ``params``: parameter counts by row (for the QResNet32/ResNet110 claim)."""
    P = results.protocol
    per_row: dict[cs.Row, list] = {}
    errs: dict[cs.Row, dict] = {}
    seeds: list[list] = []
    for (row, seed), res in results.runs().items():
        per_row.setdefault(row, []).append(res)
        errs.setdefault(row, {})[seed] = errors.seed_errors(res, P["recipe"]["dataset"])
        seeds.append(errors.seed_row(row.label, f"x{row.width:g}", seed, res))
    sums = {r: errors.summarise(v, paired.trained_limit(P["recipe"]["dataset"])) for r, v in per_row.items()}
    moved = {r: errors.moved(v) for r, v in per_row.items()}
    verdicts = claims(errs, params or {}, P, moved)
    return Summary(
        protocol=P,
        test_images=errors.test_images(x for v in per_row.values() for x in v),
        rows=cs.comparison_rows(),
        summaries=sums,
        moved=moved,
        seed_rows=seeds,
        claims=verdicts,
        runs=len(seeds),
        rows_run=len(per_row),
    )


def _error_cell(S: Summary, r: cs.Row):
    """Our error of a row: a :class:`Cell`, or a text where there is no number."""
    s = S.summaries.get(r)
    if s is None:
        return "full only"
    if s.pending or s.finished == 0:
        return errors.error_cell(s)
    return errors.error_value(s, note=f"({s.diverged}/{s.n} untrained)" if s.diverged else "")


def _paper_params_cell(model: str, ours: int):
    """The paper's parameter count of ``model`` beside ours, marked where it is not ours rounded (the
    paper's Compact-QResNet56: 1.92M, ours computed from the model: 1.70M)."""
    paper = published.CIFAR_COMPACT_PARAMS[model]
    return Cell(f"{paper.text}M", reproduced=abs(paper - ours / 1e6) < 0.015)


# Parameters of the network trained here, then the paper's (full-width) count where the two differ
# (a stand-in trains narrower); "--": not trained at this profile.
PARAMS_TRAINED = "Params (trained / full width)"


def tables(S: Summary, params: dict) -> list[Table]:
    """The section's tables: main, compact, width, claims, its line of the claims summary, seeds."""
    rows = S.rows

    def row(model, method="conventional", width=1.0):
        return cs.row_for(rows, model, method, width)

    def mparams(r):  # the paper's width (the architecture compared)
        return f"{params[r] / 1e6:.2f}M"

    def trained_params(r):  # what was trained here, then the paper's width where they differ
        s = S.summaries.get(r)
        trained = f"{s.params / 1e6:.2f}M" if s and s.params else "--"
        return mparams(r) if trained == mparams(r) else f"{trained} / {mparams(r)}"

    def time_cell(r):
        s = S.summaries.get(r)
        return f"{s.epoch_time:.2f}" if s and s.epoch_time else "--"

    def moved_cell(r):
        m = S.moved.get(r)
        return "--" if m is None else round(m, 1)

    main = [
        [r.label, trained_params(r), time_cell(r), _error_cell(S, r), moved_cell(r), r.paper]
        for r in rows
        if r.table in ("main", "control")  # the w.t. rows' frozen-terms controls close the table
    ]
    compact = [
        [r.label, mparams(r), _paper_params_cell(r.model, params[r]), _error_cell(S, r), r.paper]
        for d in (20, 32, 56)
        for r in (row(f"cifar_qresnet{d}", "wt"), row(f"cifar_qresnet{d}_compact", "wt"))
    ]
    width = []
    for d in (32, 56):
        for w in (1.0, 1.5, 2.0, 2.5):
            r = row(f"cifar_resnet{d}", width=w)
            width.append([f"ResNet{d} ({round(16 * w)})", f"x{w:g}", trained_params(r), _error_cell(S, r), r.paper])
        q = row(f"cifar_qresnet{d}", "wt")
        width.append([q.label, "--", trained_params(q), _error_cell(S, q), q.paper])

    return [
        Table(
            "comparison_main",
            ["Network", PARAMS_TRAINED, "Time/epoch (s)", "Error ours (%)", "Terms moved (%)", "Paper (%)"],
            main,
        ),
        Table(
            "comparison_compact",
            ["Network", "Params (full width)", "Paper params", "Error ours (%)", "Paper (%)"],
            compact,
        ),
        Table("comparison_width", ["Network", "Channels", PARAMS_TRAINED, "Error ours (%)", "Paper (%)"], width),
        # two floats: with every pair tested (full) one table of all the claims outgrew a page
        Table("comparison_claims", CLAIMS_HEADER, claim_rows([c for c in S.claims if not is_pair_claim(c)])),
        Table("comparison_pair_claims", CLAIMS_HEADER, claim_rows([c for c in S.claims if is_pair_claim(c)])),
        claims_table(NAME, "Comparison", S.claims),
        Table("cifarcomparison_seeds", errors.SEED_HEADER, S.seed_rows),
        Table("comparison_calibration", CALIBRATION_HEADER, calibration_rows(S)),
    ]


CALIBRATION_HEADER = ["Network", "Trained on", "Test error (%)", "Source"]


def calibration_rows(S: Summary) -> list[list]:
    """Where the stand-in's conventional networks stand: their errors beside the errors the data
    set's own README lists for full-size networks trained on it (at profiles on Fashion-MNIST)."""
    from quadnn_paper.data import fashion_mnist

    R = S.protocol["recipe"]
    if not R["dataset"].startswith("fashion_mnist"):
        return [["--", cs.DATA_WORDS[R["dataset"]], "--", "calibrated at the cpu profile (Fashion-MNIST)"]]
    size = R["dataset"].removeprefix("fashion_mnist")
    images = f"{R['train_limit']:,}" if R.get("train_limit") else "60,000"
    ours = [
        [
            f"{r.label} (x{S.protocol.get('width', 1.0) * r.width:g})",
            f"{size}x{size}, {images} images, {R['epochs']} epochs",
            _error_cell(S, r),
            "ours",
        ]
        for r in S.rows
        if r.method == "conventional" and r.width == 1.0 and r in S.summaries
    ]
    published = [
        [name, "28x28, 60,000 images", round(100 * (1 - acc), 1), "Fashion-MNIST README (submitted)"]
        for name, acc in fashion_mnist.PUBLISHED_ACCURACY.items()
    ]
    return ours + published


def _params_erratum(params: dict, rows: list[cs.Row]) -> str:
    """Whether the paper's one parameter count for every Parabolic-/PolyResNet row holds: our counts
    are computed from the models (at the paper's width)."""
    paper = published.CIFAR_PARAMS_QUADRATIC_BASELINES
    ours = [
        params[cs.row_for(rows, f"cifar_{k}_resnet{d}", "ri")] / 1e6
        for k in ("parabolic", "poly")
        for d in (20, 32, 56)
    ]
    wrong = sum(round(x, 2) != float(paper) for x in ours)
    if not wrong:
        return f"reproduced: every row has {paper}M"
    return f"not reproduced: {wrong} of {len(ours)} rows differ ({min(ours):.2f}M to {max(ours):.2f}M, computed from the models)"


NORMALLY = "trained normally"  # the words every claim on the networks trained without ReLinear has


def normally_sentence(claims: list[paired.Claim]) -> str:
    """What the networks trained without ReLinear did, from the claim on them this profile tests
    most of (every depth where all ran, else depth 20): how many runs trained and their errors beside
    the ReLinear rows', then the verdict."""
    about = [c for c in claims if NORMALLY in c.text]
    claim = max(about, key=lambda c: (len(c.intervals), -len(c.pairs)))
    counts = [(a, iv) for a, _, iv in claim.pairs if isinstance(iv, stats.Counts)]
    if not counts:
        return "No run trained without ReLinear has finished at this profile."
    trained, n = sum(iv.trained_b for _, iv in counts), sum(iv.n for _, iv in counts)

    def err(e):
        return "none trained" if math.isnan(e) else f"{e:.1f}%"

    means = "; ".join(f"{a}: {err(iv.error_b)} against {err(iv.error_a)} with ReLinear" for a, iv in counts)
    runs = f"{trained} of {n} run" + ("s" if n != 1 else "")
    return f"Trained normally, {runs} trained (mean final error of those that did, {means}): {claim.verdict}."


def variables(S: Summary, params: dict) -> dict:
    """The numbers the section's text quotes, by macro name."""
    P, R = S.protocol, S.protocol["recipe"]
    F = PROTOCOLS["full"]["recipe"]  # the recipe the text describes
    rows = S.rows

    def mparams(model, method):
        return f"{params[cs.row_for(rows, model, method)] / 1e6:.2f}M"

    return dict(
        Device=compute_device(P["threads"]),
        QuadraticDecay=cs.DECAY_WORDS[P.get("quadratic_decay", "reference")],
        Epochs=R["epochs"],
        FullMomentum=F["momentum"],
        FullLr=F["lr"],
        StageChannels=", ".join(map(str, STAGE_CHANNELS[:-1])) + f" and {STAGE_CHANNELS[-1]}",
        FullBatch=F["batch_size"],
        FullEpochs=F["epochs"],
        FullDecay=power_of_ten(F["weight_decay"]),
        FullLrDivisor=round(1 / F["lr_decay"]),
        FullMilestones=" and ".join(str(round(m * F["epochs"])) for m in F["milestones"]),
        FullWarmupEpochs=number_word(max(cs.WARMUP_EPOCHS.values())),
        FullWarmupSteps=math.ceil(_CIFAR10_TRAIN / F["batch_size"]),
        FullRates="$" + ", ".join(power_of_ten(cs.LR_G[d], math=False) for d in (20, 32, 56, 110)) + "$",
        FullRatesRezero="$" + ", ".join(power_of_ten(cs.LR_G_REZERO[d], math=False) for d in (20, 32, 56, 110)) + "$",
        FullRatesCompact="$" + ", ".join(power_of_ten(cs.LR_B_COMPACT[d], math=False) for d in (20, 32, 56)) + "$",
        # the rates trained at this profile beside the paper's (the stand-in's factor, gamma_scale)
        GammaScale=f"{P['gamma_scale']:.3g}",
        TrainedRates=", ".join(f"{cs.LR_G[d] * P['gamma_scale']:.2g}" for d in (20, 32, 56, 110)),
        WarmupEpochs=number_word(max((P.get("warmup") or {0: 0}).values())),
        Alpha=round(100 * (1 - stats.LEVEL)),
        AlphaCifar=round(100 * (1 - stats.LEVEL)) * _CIFAR_SECTIONS,
        StageEnd=round(R["milestones"][0] * R["epochs"]),
        TrainImages=R.get("train_limit") or "all",
        TestImages=S.test_images or "--",
        BatchSize=R["batch_size"],
        Lr=R["lr"],
        Width=P.get("width") or 1.0,
        FullSeeds=len(PROTOCOLS["full"]["seeds"]),
        RowsRun=S.rows_run,
        RowsAll=len(rows),
        Runs=S.runs,
        **paired.verdict_counts(S.claims),
        HeadlineSeeds=len(cs.HEADLINE_SEEDS),
        RestSeeds=len(cs.REST_SEEDS),
        MarginShare="half" if stats.MARGIN_SHARE == 0.5 else f"{stats.MARGIN_SHARE:g} times",
        Level=round(100 * stats.LEVEL),
        Power=round(100 * stats.POWER),
        PowerSentence=paired.power_sentence(S.claims),
        NormallySentence=normally_sentence(S.claims),
        UntrainedMargin=f"{paired.UNTRAINED_MARGIN:g}",
        ParamsErratum=_params_erratum(params, rows),
        ParabolicParams=", ".join(mparams(f"cifar_parabolic_resnet{d}", "ri") for d in (20, 32, 56)),
        PolyParams=", ".join(mparams(f"cifar_poly_resnet{d}", "ri") for d in (20, 32, 56)),
    )
