"""The CIFAR tuning experiments of the paper (Sec. "Image Classification"): QResNet20 trained with
ReLinear-sg, ReLinear-sw (l1, l2), weight transfer from each stage of a conventional ResNet20,
and ReLinear + ReZero.

:data:`PROTOCOLS` holds one protocol per profile (``full`` is the paper's), :data:`GRIDS` the
hyperparameter values the paper sweeps, :data:`PAPER` the numbers it reports. Every sweep runs
at the protocol's ``grid_seeds`` (the figures); the settings the paper's claims name run at every
one of its ``seeds`` as pairs with the conventional ResNet20 of the same seed: the quadratic
network starts from the ResNet20's initial weights (``RunConfig.init_twin``, quadratic terms at
their ReLinear reference) and sees the same batches, so each claim is decided from per-seed
differences (:mod:`quadnn_paper.analysis.stats`). :func:`gamma_zero_trajectory` is the exact
check behind the paper's "guaranteed performance" argument.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
from collections.abc import Callable
from typing import NamedTuple

from quadnn_paper.analysis import errors, paired, stats
from quadnn_paper.analysis.claim_tables import CLAIMS_HEADER, claim_rows, claims_table
from quadnn_paper.common import published
from quadnn_paper.common.cells import number_word
from quadnn_paper.common.outputs import Figure, Lines, Table, Variables
from quadnn_paper.common.profiles import data_text, protocols
from quadnn_paper.engine import Computation, Results, RunConfig, stage_ends
from quadnn_paper.engine.tiny import capped
from quadnn_paper.experiments import cifar as cs
from quadnn_paper.experiments.cifar import param_count
from quadnn_paper.experiments.cifar_tuning import gamma_zero_trajectory
from quadnn_paper.figures import cifar_tuning as figures

__all__ = ["NAME", "PROTOCOLS", "protocol", "data", "plan", "outputs"]  # the section's contract (execution.sections)

NAME = "cifar_tuning"
PAPER = published.CIFAR_TUNING  # errors (%) on CIFAR-10 printed in the paper

GRIDS = {
    "sg": [1e-1, 1e-2, 1e-3, 1e-4, 1e-5],  # gamma_g = gamma_b
    "sw-l1": [1e-1, 1e-2, 1e-3, 1e-4, 1e-5],  # alpha_g = alpha_b
    "sw-l2": [0.1, 0.5, 0.9, 0.99],  # beta_g = beta_b
    "transfer": [1e-1, 1e-2, 1e-3, 1e-4, 1e-5],  # gamma_g = gamma_b after transfer
    "rezero": [1e-1, 1e-2, 1e-3, 1e-4],  # gamma_g = gamma_b with ReZero
}
# The settings the paper's claims name (its best values) and the largest gamma of its sweep.
SG_BEST = float(published.CIFAR_TUNING_BEST["sg"])
SW_BEST = float(published.CIFAR_TUNING_BEST["sw"])
SG_LARGE = max(GRIDS["sg"])
REZERO_LARGE = max(GRIDS["rezero"])
# The gammas at which the paper sees ReLinear-sg alone oscillate and ReLinear+ReZero not.
REZERO_NAMED = (1e-2, 1e-3)
TRANSFER_LARGE = max(GRIDS["transfer"])

# full: the paper's protocol. Batch 128, gamma_r = 0.1, 200 epochs, all lrs / 10 at epochs 100 and
# 150; the paper names Adam as the optimiser ("stochastic gradient descent using Adam"), while
# following He et al.'s configuration otherwise (weight decay 1e-4, momentum 0.9 -> Adam's beta1).
# cpu / smoke: the same protocol on a stand-in (cpu: Fashion-MNIST at 16x16, _cifar.STANDIN; smoke:
# scikit-learn's 8x8 digits), one channel, fewer epochs, a narrower QResNet20, each sweep at its
# two ends plus the values the claims name (the budget goes to seeds: every claim needs several
# pairs for an interval), and He et al.'s SGD (momentum 0.9) instead of Adam: at gamma_r = 0.1 Adam
# leaves even the conventional network far from converged on a short stand-in run (the section
# measures both and reports them). Below full, each seed also draws its own training images
# (``split_per_seed``), shared by the two runs of a pair.
# Weight decay of the quadratic terms: full follows the official code (coupled L2 toward 0 on
# every group); cpu/smoke keep quadnn's default (toward the ReLinear reference, decoupled).
_COMMON = dict(
    model="cifar_qresnet20",
    conventional="cifar_resnet20",
    batch_size=128,
    lr=0.1,
    milestones=(0.5, 0.75),
    lr_decay=0.1,
    weight_decay=1e-4,
    momentum=0.9,
)
PROTOCOLS = cs.stating_gamma(  # each profile also states gamma_scale: experiments.cifar.gamma_scale of its recipe
    {
        "smoke": dict(
            _COMMON,
            dataset="digits",
            width=0.25,
            epochs=4,
            train_limit=128,
            eval_every_epoch=True,
            seeds=[0, 1],
            rest_seeds=[0, 1],  # every profile has the same keys (one protocol shape)
            grid_seeds=[0],
            optimizer="sgd",
            grid="ends",
            full_sweeps=(),
            quadratic_decay="reference",
            split_per_seed=True,
        ),
        # cpu: the stand-in protocol the comparison section shares (experiments.cifar.STANDIN): its ResNet20,
        # QResNet20 (sg) and stage-1 transfer runs are the comparison's, trained once. The settings of
        # the headline claims (sg and stage-1 transfer against their baselines) run at ``seeds``, the
        # other claimed settings at ``rest_seeds``, every sweep's two ends at ``grid_seeds``.
        "cpu": dict(
            _COMMON,
            dataset=cs.STANDIN["dataset"],
            lr=cs.STANDIN["lr"],
            width=cs.STANDIN_WIDTH,
            epochs=cs.STANDIN["epochs"],
            batch_size=cs.STANDIN["batch_size"],
            train_limit=cs.STANDIN["train_limit"],
            eval_every_epoch=cs.STANDIN["eval_every_epoch"],
            seeds=list(cs.HEADLINE_SEEDS),
            rest_seeds=list(cs.REST_SEEDS),
            grid_seeds=[0],
            optimizer="sgd",
            grid="ends",
            full_sweeps=("sg",),  # the curve of departure and error against gamma, at the grid seed
            quadratic_decay="reference",
            split_per_seed=True,
        ),
        "full": dict(
            _COMMON,
            dataset="cifar10",
            width=1.0,
            epochs=200,
            train_limit=0,
            eval_every_epoch=True,
            seeds=[0, 1, 2],
            rest_seeds=[0, 1, 2],
            grid_seeds=[0],
            optimizer="adam",
            grid="all",
            full_sweeps=(),  # every sweep is whole already
            quadratic_decay="zero",
            split_per_seed=False,
        ),
    }
)
_RUN_KEYS = (
    "dataset",
    "width",
    "epochs",
    "train_limit",
    "batch_size",
    "lr",
    "milestones",
    "lr_decay",
    "weight_decay",
    "momentum",
    "optimizer",
    "eval_every_epoch",
)


protocol = protocols(PROTOCOLS)


def grid(proto: dict, name: str) -> list:
    """The values of sweep ``name`` a protocol runs: all of them (full, or a sweep the protocol names
    in ``full_sweeps``), or the two ends. Values are the paper's; :func:`rate` scales them."""
    values = sorted(GRIDS[name])  # ascending, so figures read from weak to strong
    if proto["grid"] == "all" or name in proto.get("full_sweeps", ()):
        return values
    return [values[0], values[-1]]


def rate(proto: dict, value: float) -> float:
    """The rate a run of the quadratic terms trains at for the paper's ``value`` (gamma_g = gamma_b):
    the paper's times the protocol's ``gamma_scale`` (1 at full, :func:`~quadnn_paper.experiments.cifar.gamma_scale` of a
    stand-in's recipe)."""
    return value * proto["gamma_scale"]


def _base(proto: dict, seed: int, **kw) -> RunConfig:
    fields = {k: proto[k] for k in _RUN_KEYS}
    # One thread: on a shared two-core machine OpenMP threads contend badly; not part of the hash.
    fields.update(model=proto["model"], seed=seed, progress=False, threads=1, quadratic_decay=proto["quadratic_decay"])
    if proto.get("split_per_seed"):
        fields["split_seed"] = seed
    fields.update(kw)
    fields["model_kwargs"] = cs.paper_init(fields["model"])
    if fields["model"] != proto["conventional"] and "transfer_from" not in kw:
        fields["init_twin"] = proto["conventional"]  # the pair: the ResNet20's initial weights
    return RunConfig(**fields)


def conventional_config(proto: dict, seed: int) -> RunConfig:
    """The conventional ResNet20 run whose stage checkpoints feed weight transfer (and the baseline)."""
    return _base(proto, seed, model=proto["conventional"], relinear="none")


def _transfer(proto: dict, seed: int, k: int, v: float) -> RunConfig:
    # The quadratic model inherits the lr the conventional one had in stage k and then decays it
    # 10x at each later milestone of its own schedule.
    lr = proto["lr"] * proto["lr_decay"] ** (k - 1)
    return _base(
        proto,
        seed,
        relinear="sg",
        lr=lr,
        lr_g=rate(proto, v),
        lr_b=rate(proto, v),
        transfer_from=conventional_config(proto, seed),
        transfer_stage=k,
    )


def _values(proto: dict, name: str, full_grid: bool, claimed: list) -> list:
    """The values of sweep ``name`` a seed runs: the claimed ones, plus the grid at a grid seed."""
    return sorted(set(claimed) | set(grid(proto, name))) if full_grid else sorted(claimed)


def run_plan(profile: str, tiny: bool = False) -> dict[tuple[str, float, int], RunConfig]:
    """Every run of ``profile``, keyed by ``(experiment, value, seed)``.

    Experiments: ``conventional`` (value 0), ``sg``, ``sw-l1``, ``sw-l2``, ``rezero``,
    ``transfer<k>`` (weight transfer from the conventional run's stage k, a declared dependency)
    and ``adam`` (the conventional network with Adam, below full). Grid seeds run every value;
    the other seeds run the values the claims compare.
    """
    proto = protocol(profile, tiny)
    out: dict[tuple[str, float, int], RunConfig] = {}
    n_stages = len(stage_ends(conventional_config(proto, 0)))
    head, rest = set(proto["seeds"]), set(proto.get("rest_seeds", proto["seeds"]))
    for s in sorted(set(proto["grid_seeds"]) | head | rest):
        full_grid = s in proto["grid_seeds"]
        # headline settings at the headline seeds, the other claimed ones at the rest seeds
        sg_claimed = ([SG_BEST] if s in head else []) + ([0.0, SG_LARGE, *REZERO_NAMED] if s in rest else [])
        conv = conventional_config(proto, s)
        out[("conventional", 0.0, s)] = conv
        # gamma_g = gamma_b = 0 keeps every quadratic term at its reference: a conventional network.
        for v in _values(proto, "sg", full_grid, sg_claimed + ([0.0] if full_grid else [])):
            out[("sg", v, s)] = _base(proto, s, relinear="sg", lr_g=rate(proto, v), lr_b=rate(proto, v))
        if s in rest and proto["gamma_scale"] != 1:  # the headline setting at the paper's own rate
            out[(UNSCALED, SG_BEST, s)] = _base(proto, s, relinear="sg", lr_g=SG_BEST, lr_b=SG_BEST)
        if full_grid:
            for v in grid(proto, "sw-l1"):
                out[("sw-l1", v, s)] = _base(proto, s, relinear="sw-l1", alpha_g=v)
        for v in _values(proto, "sw-l2", full_grid, [SW_BEST] if s in rest else []):
            out[("sw-l2", v, s)] = _base(proto, s, relinear="sw-l2", alpha_g=v)
        # ReZero at the largest gamma at the rest seeds: "ReZero stabilises training" is paired there
        for v in _values(proto, "rezero", full_grid, [REZERO_LARGE, *REZERO_NAMED] if s in rest else []):
            r = rate(proto, v)
            out[("rezero", v, s)] = _base(proto, s, relinear="sg", lr_g=r, lr_b=r, rezero=True)
        for k in range(1, n_stages + 1):
            # Below "all", transfer runs only the claimed value: its three stages triple every value.
            # Each claimed transfer has its control at gamma 0: the same transfer at the same budget
            # with the quadratic terms frozen (a conventional network trained stage + rest epochs).
            claimed = [0.0, SG_BEST] if (s in head if k == 1 else s in rest) else []
            if s in rest:  # "later stages are more robust to gamma": every stage at the largest gamma
                claimed += [0.0, TRANSFER_LARGE]
            for v in _values(proto, "transfer", full_grid and proto["grid"] == "all", claimed):
                out[(f"transfer{k}", v, s)] = _transfer(proto, s, k, v)
        if proto["optimizer"] != "adam" and s == proto["grid_seeds"][0]:
            out[("adam", 0.0, s)] = conv.replace(optimizer="adam")  # the optimiser the paper names
    return capped(out, tiny)


def data(profile: str, tiny: bool = False) -> str:
    """The data the section's numbers come from, in words."""
    words = cs.data_words(protocol(profile, tiny)["dataset"], "CIFAR-10")
    return data_text(words, tiny)


def _error(res: dict | None) -> float:
    return res["test_error"] if res is not None and res["status"] == "finished" else math.nan


class SweepRow(NamedTuple):
    """One value of a sweep over the grid seeds: the mean final test error of the runs that trained,
    how many did not (diverged, ended within :data:`paired.UNTRAINED_MARGIN` of chance, or not
    finished yet), and the quadratic terms' departure (median % of test predictions changed, and the
    terms' norm over W_r; None for the conventional network)."""

    value: float | None
    mean: float
    sd: float
    diverged: int  # runs that did not train
    moved: float | None = None
    terms: float | None = None


class Curve(NamedTuple):
    """One value of a sweep and its run's result (or None) at the first grid seed: a figure's curve."""

    value: float
    result: dict | None


_NO_BEST = SweepRow(None, math.nan, math.nan, 0)  # a sweep without a finished run
UNSCALED = "sg-unscaled"  # ReLinear-sg at the paper's rate, unscaled: the headline verdict checked there
_RESNET20 = "ResNet20"  # the conventional arm's label in the claims

_Results = dict[tuple[str, float, int], dict | None]  # a result (or None) per plan() key


def _sweep_row(got: _Results, e: str, v: float, grid_seeds: list, limit: float) -> SweepRow:
    """Final test error of value ``v`` of sweep ``e`` over the grid seeds (runs at or above ``limit``
    did not train)."""
    res = [got[(e, v, s)] for s in grid_seeds if (e, v, s) in got]
    errs = [_error(r) for r in res]
    ok = [x for x in errs if not math.isnan(x) and x < limit]
    mean = sum(ok) / len(ok) if ok else math.nan
    sd = math.sqrt(sum((x - mean) ** 2 for x in ok) / (len(ok) - 1)) if len(ok) > 1 else math.nan
    terms = [r["departure"]["terms"] for r in res if r is not None and "departure" in r]
    terms = statistics.median(terms) if terms else None
    return SweepRow(v, mean, sd, len(errs) - len(ok), errors.moved(res), terms)


def _sweeps_and_curves(got: _Results, experiments: list[str], grid_seeds: list, limit: float) -> tuple[dict, dict]:
    """``sweeps[e]``: a :class:`SweepRow` per value; ``curves[e]``: a :class:`Curve` per value."""
    g0 = grid_seeds[0]
    sweeps, curves = {}, {}
    for e in experiments:
        values = [v for (x, v, s) in got if x == e and s == g0]
        sweeps[e] = [_sweep_row(got, e, v, grid_seeds, limit) for v in values]
        curves[e] = [Curve(v, got[(e, v, g0)]) for v in values]
    return sweeps, curves


def _best(e: str, rows: list[SweepRow]) -> SweepRow:
    """The value of sweep ``e`` with the lowest mean error (chosen on the test set, as in the paper)."""
    # gamma 0 is the conventional network (a transfer's control), not a setting: never a sweep's best
    frozen = e == "sg" or e.startswith("transfer")
    ok = [r for r in rows if not math.isnan(r.mean) and not (frozen and r.value == 0)]
    return min(ok, key=lambda r: r.mean) if ok else _NO_BEST


def _setting_errors(got: _Results, dataset: str, e: str, v: float) -> dict:
    """Per-seed errors of a setting the paper names, for the paired claims (diverged = chance)."""
    seeds = sorted({s for (x, y, s) in got if x == e and y == v})
    return {s: errors.seed_errors(got[(e, v, s)], dataset) for s in seeds}


def _setting_moved(got: _Results, e: str, v: float) -> float | None:
    """The departure (:func:`~quadnn_paper.analysis.errors.moved`) of a setting over every seed it ran at."""
    return errors.moved([r for (x, y, _), r in got.items() if x == e and y == v])


class _Arm(NamedTuple):
    """One arm of a claim: its label and the setting it trains (``experiment``, paper's value)."""

    label: str
    experiment: str
    value: float


def _claim(arms_of: Callable, text: str, pairs: list[tuple], **kw) -> paired.Claim:
    """:func:`paired.pair_claim` over pairs of arms (``arms_of(arm) -> (errors by seed, departure)``);
    a pair ``(a, b, (a0, b0))`` is measured against its controls (the same budget, terms frozen)."""
    arms = {a: arms_of(a) for pair in pairs for a in (*pair[:2], *(pair[2] if len(pair) > 2 else ()))}
    measured = []
    for a, b, *ctl in pairs:
        pair = (a.label, arms[a][0], b.label, arms[b][0])
        if ctl:
            a0, b0 = ctl[0]
            pair += ((a0.label, arms[a0][0], b0.label, arms[b0][0]),)
        measured.append(pair)
    return paired.pair_claim(text, measured, moved_by={a.label: m for a, (_, m) in arms.items()}, **kw)


def _rate_label(proto: dict, name: str, value: float) -> str:
    """An arm's label with the rate its quadratic terms trained at beside the paper's, where they
    differ: "sg 0.0001 (trained 0.0015)"."""
    k = proto["gamma_scale"]
    if value == 0 or k == 1:
        return f"{name} {value:g}"
    return f"{name} {value:g} (trained {rate(proto, value):.2g})"


# ReLinear-sw shrinks the quadratic terms toward their reference every step by a factor the paper
# fixes (beta), whatever the number of steps: at beta 0.9 it holds them there at any scale, so an
# arm of it whose terms did not move measures the method, not the stand-in's scale.
PINNING = ("sw-l2",)


def _margins(*pairs) -> list:
    """The equivalence margin of each pair of the paper's printed errors ``(better, worse)``."""
    return [stats.margin_of(paired.paper_effect(a, b)) for a, b in pairs]


def _setting_claims(arms_of: Callable, proto: dict) -> list[paired.Claim]:
    """The claims on the settings the paper names, before Holm adjustment: its best ReLinear-sg and
    -sw against the conventional network and each other, gamma against 0 and a large gamma, ReZero."""
    dataset = proto["dataset"]
    conv, zero = _Arm(_RESNET20, "conventional", 0.0), _Arm("sg 0", "sg", 0.0)
    sg = _Arm(_rate_label(proto, "sg", SG_BEST), "sg", SG_BEST)
    sw = _Arm(f"sw-l2 {SW_BEST:g}", "sw-l2", SW_BEST)
    large = _Arm(_rate_label(proto, "sg", SG_LARGE), "sg", SG_LARGE)
    rezero = _Arm(_rate_label(proto, "ReZero", REZERO_LARGE), "rezero", REZERO_LARGE)
    resnet20 = published.CIFAR_MAIN["ResNet20"]
    pinned = tuple(a.label for a in (sg, sw, large, rezero) if a.experiment in PINNING)
    claim = functools.partial(_claim, arms_of, dataset=dataset, pinned=pinned)
    return [
        claim(
            f"ReLinear-sg (gamma {SG_BEST:g}) beats the conventional ResNet20",
            [(sg, conv)],
            paper=f"{PAPER['sg'].text} vs {resnet20}",
            margins=_margins((PAPER["sg"], resnet20)),
            id="sg-beats-conv",
        ),
        claim(
            f"ReLinear-sw (l2, beta {SW_BEST:g}) beats the conventional ResNet20",
            [(sw, conv)],
            paper=f"{PAPER['sw'].text} vs {resnet20}",
            margins=_margins((PAPER["sw"], resnet20)),
            id="sw-beats-conv",
        ),
        claim(
            f"ReLinear-sg beats ReLinear-sw (gamma {SG_BEST:g} vs l2 beta {SW_BEST:g})",
            [(sg, sw)],
            paper=f"{PAPER['sg'].text} vs {PAPER['sw'].text}",
            margins=_margins((PAPER["sg"], PAPER["sw"])),
            id="sg-beats-sw",
        ),
        claim(
            f"The quadratic terms help: gamma {SG_BEST:g} beats gamma 0 (the same network, terms frozen)",
            [(sg, zero)],
            paper=f"{PAPER['sg'].text} vs {resnet20} (gamma 0: conventional)",
            margins=_margins((PAPER["sg"], resnet20)),
            id="terms-help",
        ),
        claim(
            f"Too large a gamma hurts: {SG_BEST:g} beats {SG_LARGE:g}",
            [(sg, large)],
            paper="error rises for large gamma (Fig. 2 sketch)",
            id="large-gamma",
        ),
        claim(
            f"ReZero stabilises training: with ReZero beats without at gamma {REZERO_LARGE:g}",
            [(rezero, large)],
            paper="with ReZero the curves train at every gamma of its sweep (the paper's ReZero figure)",
            id="rezero",
        ),
        claim(
            "ReZero stabilises training where ReLinear-sg alone oscillates: with ReZero beats without at gamma "
            + " and ".join(f"{v:g}" for v in REZERO_NAMED),
            [
                (_Arm(_rate_label(proto, "ReZero", v), "rezero", v), _Arm(_rate_label(proto, "sg", v), "sg", v))
                for v in REZERO_NAMED
            ],
            paper="the paper's curves: sg alone oscillates at these gammas, with ReZero it does not",
            note="the paper's measure is the curves' oscillation; the paired one here is the final error",
            id="rezero-named",
        ),
    ]


def transfer_budget(proto: dict, k: str) -> str:
    """What weight transfer from stage ``k`` has trained that random initialisation has not (its
    gamma-0 control trains it too): the source's epochs."""
    own = proto["epochs"]
    return f"w.t. trained {stage_ends(conventional_config(proto, 0))[int(k) - 1]}+{own} epochs, r.i. {own}"


def _transfer_claims(arms_of: Callable, proto: dict, stages: list[str]) -> list[paired.Claim]:
    """Weight transfer from each stage against random initialisation, then the robustness claim
    (not a paired difference), before Holm adjustment. Transfer trains the source's stage first:
    each pair is measured against its controls at the same budgets (the transfer at gamma 0 and the
    conventional ResNet20), so what is left is the quadratic terms' doing under each start."""
    sg = _Arm(_rate_label(proto, "sg", SG_BEST), "sg", SG_BEST)
    conv = _Arm(_RESNET20, "conventional", 0.0)

    def arm(e, v=SG_BEST):
        return _Arm(_rate_label(proto, f"transfer {e[len('transfer') :]}", v), e, v)

    claims = []
    for e in stages:
        k = e[len("transfer") :]
        claims.append(
            _claim(
                arms_of,
                f"Weight transfer from stage {k} beats random initialisation (sg {SG_BEST:g})",
                [(arm(e), sg, (arm(e, 0.0), conv))],
                paper=f"{PAPER['transfer'][k].text} vs {PAPER['sg'].text}",
                note=f"control: {transfer_budget(proto, k)}; the gamma-0 transfer trains as long",
                dataset=proto["dataset"],
                margins=_margins((PAPER["transfer"][k], PAPER["sg"])),
                id=f"transfer-{k}",
            )
        )
    if len(stages) > 1:  # the paper's best transfer result is stage 1's
        first = stages[0]
        claims.append(
            _claim(
                arms_of,
                "Weight transfer from stage 1 gives the best result (beats stages 2 and 3)",
                [(arm(first), arm(e), (arm(first, 0.0), arm(e, 0.0))) for e in stages[1:]],
                paper=" vs ".join(PAPER["transfer"][e[-1]].text for e in stages),
                note="controls: each stage's transfer at gamma 0 (its source trained as long)",
                dataset=proto["dataset"],
                margins=_margins(*((PAPER["transfer"][first[-1]], PAPER["transfer"][e[-1]]) for e in stages[1:])),
                id="transfer-best",
            )
        )
    if len(stages) > 1:
        # "For the same gamma, weights transferred from a later stage train more robustly": at the
        # sweep's largest gamma each later stage against the one before, net of the same two
        # transfers with their terms frozen (a later stage's source trained longer: that is the
        # budget, not robustness).
        claims.append(
            _claim(
                arms_of,
                f"Later transfer stages are more robust to gamma (at gamma {TRANSFER_LARGE:g}, each stage "
                "beats the one before)",
                [
                    (arm(later, TRANSFER_LARGE), arm(earlier, TRANSFER_LARGE), (arm(later, 0.0), arm(earlier, 0.0)))
                    for earlier, later in zip(stages, stages[1:])
                ],
                paper="the transfer figure: at the same gamma, later stages oscillate less",
                note="controls: each stage's transfer at gamma 0 (its source trained as long)",
                dataset=proto["dataset"],
                id="transfer-robust",
            )
        )
    return claims


def _gamma_zero_pair(arms_of: Callable, dataset: str) -> paired.Claim:
    # gamma = 0 in float32: a conventional network whose trajectory differs from its twin's by rounding.
    return _claim(
        arms_of,
        "gamma 0 against its conventional twin (float32)",
        [(_Arm(_RESNET20, "conventional", 0.0), _Arm("sg 0", "sg", 0.0))],
        dataset=dataset,
    )


def _epoch_time(res: dict | None) -> float:
    # the median training seconds per epoch (the upper one of an even count): robust to a busy machine and warm-up
    times = [h["epoch_time"] for h in res["history"]] if res else []
    return statistics.median_high(times) if times else math.nan


def _epoch_times(curves: dict) -> dict:
    """Seconds per epoch of the QResNet20 (the median over the sg sweep's runs) and of the ResNet20."""
    q = [_epoch_time(c.result) for c in curves.get("sg", []) if c.result is not None]
    return dict(
        epoch_time_q=statistics.median_high(q) if q else math.nan,
        epoch_time_conv=_epoch_time(curves["conventional"][0].result),
    )


@dataclasses.dataclass(frozen=True)
class Summary:
    """What the section's outputs are made of (:func:`summary`)."""

    protocol: dict
    sweeps: dict[str, list[SweepRow]]  # per sweep, a row per value over the grid seeds
    curves: dict[str, list[Curve]]  # per sweep, its runs at the first grid seed (the figures)
    best: dict[str, SweepRow]  # per sweep, its value of lowest mean error
    stages: list[str]  # the weight-transfer experiments, by stage
    conventional: dict | None  # the conventional ResNet20's result at the first grid seed
    conv_error: float
    claims: list[paired.Claim]
    gamma0: paired.Claim  # float32: the conventional ResNet20 against sg at gamma 0 (rounding apart)
    moved_claimed: float | None  # the departure of the claimed sg setting
    unscaled: paired.Claim  # the headline claim at the paper's unscaled rate
    adam_error: float | None  # the conventional network with Adam (below full), None where not run
    diverged: dict[str, int]  # per sweep, its runs that did not train
    runs: int
    seed_rows: list[list]
    pending: int
    epoch_time_q: float
    epoch_time_conv: float
    test_images: int | None


def summary(results: Results) -> Summary:
    """Sweeps, the best setting of each, claims and quoted numbers from the section's ``results``.

    ``sweeps[experiment] = [SweepRow(value, mean error over grid seeds, sd, diverged count)]``;
    ``curves[experiment] = [Curve(value, result)]`` at the first grid seed (for the figures);
    ``best[experiment]``: the sweep's :class:`SweepRow` of lowest mean error.
    """
    proto = results.protocol
    got: _Results = results.runs()
    experiments = list(dict.fromkeys(e for e, _, _ in got))
    limit = paired.trained_limit(proto["dataset"])
    sweeps, curves = _sweeps_and_curves(got, experiments, proto["grid_seeds"], limit)
    stages = sorted(e for e in experiments if e.startswith("transfer"))

    def arms_of(arm: _Arm) -> tuple[dict, float | None]:
        # gamma 0 holds the terms at their reference by construction: a conventional arm, not one
        # whose terms failed to move
        frozen = (arm.experiment == "sg" or arm.experiment.startswith("transfer")) and arm.value == 0
        moved = None if frozen else _setting_moved(got, arm.experiment, arm.value)
        return _setting_errors(got, proto["dataset"], arm.experiment, arm.value), moved

    # the headline claim again at the paper's unscaled rate, in the same Holm family (a measurement:
    # the claim is the scaled one's; this says whether the rescaling decides it)
    conv = _Arm(_RESNET20, "conventional", 0.0)
    unscaled = _claim(
        arms_of,
        f"ReLinear-sg (gamma {SG_BEST:g}) beats the conventional ResNet20, at the paper's unscaled rate",
        [(_Arm(f"sg {SG_BEST:g} (trained {SG_BEST:g}, unscaled)", UNSCALED, SG_BEST), conv)],
        dataset=proto["dataset"],
        margins=_margins((PAPER["sg"], published.CIFAR_MAIN["ResNet20"])),
    )
    *claims, unscaled = paired.adjust(
        _setting_claims(arms_of, proto) + _transfer_claims(arms_of, proto, stages) + [unscaled]
    )
    conventional = curves["conventional"][0].result
    adam = [got[k] for k in got if k[0] == "adam"]
    return Summary(
        protocol=proto,
        sweeps=sweeps,
        curves=curves,
        best={e: _best(e, sweeps[e]) for e in experiments},
        stages=stages,
        conventional=conventional,
        conv_error=sweeps["conventional"][0].mean,
        claims=claims,
        gamma0=_gamma_zero_pair(arms_of, proto["dataset"]),
        moved_claimed=_setting_moved(got, "sg", SG_BEST),
        unscaled=unscaled,
        adam_error=_error(adam[0]) if adam else None,
        diverged={e: sum(r.diverged for r in sweeps[e]) for e in experiments},
        runs=len(got),
        seed_rows=[errors.seed_row(e, f"{v:g}", seed, r) for (e, v, seed), r in got.items()],
        pending=sum(r is None for r in got.values()),
        **_epoch_times(curves),
        test_images=(conventional or {}).get("test_images"),
    )


def gamma_zero_check(steps: int, version: int) -> dict:
    """:func:`~quadnn_paper.experiments.cifar_tuning.gamma_zero_trajectory` over ``steps`` steps at
    the paper's initialisation, as the section's work runs it (``version`` only names the check's
    revision in its cache key)."""
    return gamma_zero_trajectory(steps=steps, model_kwargs=cs.paper_init("cifar_resnet20"))


def param_sizes(models: list[str], width: float, in_chans: int) -> dict[str, list[int]]:
    """Per model ``[parameters at CIFAR-10's size, parameters as trained here]`` (``width``,
    ``in_chans``)."""
    return {m: [param_count(m), param_count(m, width=width, in_chans=in_chans)] for m in models}


def plan(profile: str, tiny: bool = False) -> dict:
    """The model sizes the text quotes (``"sizes"``), the float64 check at gamma 0 (``"exact"``) and
    every run (:func:`run_plan`)."""
    P = protocol(profile, tiny)
    config = dict(models=[P["conventional"], P["model"]], width=P["width"], in_chans=_in_chans(P))
    return {
        "sizes": Computation("cifar_tuning_params", f"{__name__}:param_sizes", config, seconds=5),
        # the cache name and configuration the notebook used (the cached result keeps its key)
        "exact": Computation(
            "gamma_zero_trajectory", f"{__name__}:gamma_zero_check", {"steps": 20, "version": 1}, seconds=30
        ),
        **run_plan(profile, tiny),
    }


SWEEP_SUMMARY_HEADER = [
    "method",
    "paper best setting",
    "paper error (%)",
    "our best setting",
    "our error (%)",
    "did not train",
    "terms moved (%)",
]


def _setting_text(proto: dict, e: str, value: float) -> str:
    """A sweep's value as the tables print it: the paper's, and the rate trained where they differ
    (sg, ReZero and transfer scale theirs; sw's shrink factors are not scaled)."""
    scaled = e in ("sg", "rezero") or e.startswith("transfer")
    if not scaled or value == 0 or proto["gamma_scale"] == 1:
        return f"{value:g}"
    return f"{value:g} (trained {rate(proto, value):.2g})"


def sweep_summary_rows(S: Summary) -> list[list]:
    """The best final error of each sweep beside the paper's (``best`` chosen on the test set, as
    in the paper), at the grid seeds."""

    def row(label, e, paper_err=None, paper_setting=None):
        best = S.best.get(e, _NO_BEST)
        return [
            label,
            paper_setting,
            paper_err,
            None if best.value is None else _setting_text(S.protocol, e, best.value),
            None if math.isnan(best.mean) else round(best.mean, 2),
            S.diverged.get(e, 0),
            "--" if best.moved is None else round(best.moved, 1),
        ]

    rows = [
        # the paper's ResNet20 is the main table's (the tuning table prints none; the claims use it)
        [
            "ResNet20 (conventional)",
            None,
            published.CIFAR_MAIN["ResNet20"],
            None,
            round(S.conv_error, 2),
            S.diverged["conventional"],
            "--",
        ],
        row("ReLinear-sg", "sg", PAPER["sg"], f"{SG_BEST:g}"),
        row("ReLinear-sw l1", "sw-l1"),
        row("ReLinear-sw l2", "sw-l2", PAPER["sw"], f"{SW_BEST:g}"),
    ]
    rows += [row(f"transfer, stage {e[-1]}", e, PAPER["transfer"][e[-1]]) for e in S.stages]
    return rows + [row("ReLinear-sg + ReZero", "rezero")]


def variables(S: Summary, exact: dict) -> dict:
    """The numbers the section's text quotes, by macro name (``exact``: :func:`gamma_zero_trajectory`)."""
    P = S.protocol
    out = dict(ConvError=S.conv_error)
    g0 = S.gamma0.pairs[0][2]
    out.update(
        Runs=S.runs,
        Seeds=len(P["seeds"]),
        GridSeedsText=number_word(len(P["grid_seeds"]), "seed"),
        DivergedText=number_word(sum(S.diverged.values()), "run"),
        QuadraticDecay=cs.DECAY_WORDS[P["quadratic_decay"]],
        FullQuadraticDecay=cs.DECAY_WORDS[PROTOCOLS["full"]["quadratic_decay"]],
        CurveMetric="test error" if P["eval_every_epoch"] else "training error",
        Epochs=P["epochs"],
        Lr=P["lr"],
        Width=P["width"],
        Optimizer={"sgd": "SGD (momentum 0.9)", "adam": "Adam"}[P["optimizer"]],
        GridValues={
            "all": "every value the paper sweeps",
            "ends": "the two ends of each of the paper's sweeps and the values its claims name (weight "
            "transfer: the claimed value only)",
        }[P["grid"]],
        EpochTimeQ=S.epoch_time_q,
        EpochTimeConv=S.epoch_time_conv,
        AdamConvError="--" if S.adam_error is None else S.adam_error,
        AdamCompared=int(S.adam_error is not None),  # whether this profile ran Adam beside SGD
        TestImages=S.test_images or "--",
        TrainImages=P["train_limit"] or "all",
        Level=round(100 * stats.LEVEL),
        Power=round(100 * stats.POWER),
        PowerSentence=paired.power_sentence(S.claims),
        **paired.verdict_counts(S.claims),
        ClaimsAll=len(S.claims),
        RestSeeds=len(P.get("rest_seeds", P["seeds"])),
        GammaZeroFloat="--" if g0 is None else g0.text(),
        ResultsSentence=results_sentence(S),
        **_unscaled_variables(S),
        ExactSteps=exact["steps"],
        ExactLogits=exact["logits"],
        ExactParams=exact["params"],
        ExactScale=exact["scale"],
        ExactLr=exact["lr"],
        ExactDecay=exact["weight_decay"],
        **_scale_variables(S),
    )
    return out


def results_sentence(S: Summary) -> str:
    """The results paragraph's sentence: each sweep's best error and setting (the rate trained beside
    the paper's), from the rows of the summary table; a sweep none of whose runs trained says so
    instead of printing a number."""
    P = S.protocol

    def best(e, name, symbol):
        b = S.best.get(e, _NO_BEST)
        if math.isnan(b.mean):
            return f"no run of {name} trained"
        return f"{name} reaches {b.mean:.2f}% at {symbol} {_setting_text(P, e, b.value)}"

    conv = S.conv_error
    parts = [
        f"The conventional ResNet20 reaches {conv:.2f}%"
        if not math.isnan(conv)
        else "The conventional ResNet20 did not train",
        best("sg", "ReLinear-sg", "gamma"),
        best("sw-l1", "ReLinear-sw (l1)", "alpha"),
        best("sw-l2", "ReLinear-sw (l2)", "beta"),
        *(best(e, f"weight transfer from stage {e[-1]}", "gamma") for e in S.stages),
        best("rezero", "ReLinear-sg with ReZero", "gamma"),
    ]
    return "; ".join(parts) + "."


def _unscaled_variables(S: Summary) -> dict:
    """The headline claim at the paper's unscaled rate beside its verdict at the scaled one, and
    whether the two read the same."""
    u, head = S.unscaled, S.claims[0]
    if not u.pairs or u.pairs[0][2] is None:  # the full profile trains the paper's rate only
        return dict(UnscaledVerdict="not run: this profile trains the paper's rate", UnscaledSame="the same run")
    return dict(
        UnscaledVerdict=f"{u.verdict} ({u.evidence()})",
        UnscaledSame="reads the same" if u.verdict == head.verdict else f"reads differently (scaled: {head.verdict})",
    )


def _scale_variables(S: Summary) -> dict:
    """The quadratic terms' room to act at this profile: the rule that scales the paper's gamma, the
    departure it gave, and the test set's resolution."""
    P = S.protocol
    moved = S.moved_claimed
    return dict(
        GammaScale=f"{P['gamma_scale']:.3g}",
        PaperSteps=f"{cs.PAPER_STEPS:,}",
        OurSteps=f"{cs.training_steps(P):,}",
        StepRatio=f"{cs.PAPER_STEPS / cs.training_steps(P):.0f}",
        SgRate=f"{rate(P, SG_BEST):.2g}",
        TransferLarge=f"{TRANSFER_LARGE:g}",
        TransferLargeRate=f"{rate(P, TRANSFER_LARGE):.2g}",
        RezeroNamed=" and ".join(f"{v:g}" for v in REZERO_NAMED),
        RezeroNamedRates=" and ".join(f"{rate(P, v):.2g}" for v in REZERO_NAMED),
        MovedThreshold=f"{paired.MOVED_THRESHOLD:g}",
        MovedClaimed="--" if moved is None else f"{moved:.1f}",
        MovedEnough="--" if moved is None else ("at least" if moved >= paired.MOVED_THRESHOLD else "below"),
        UntrainedMargin=f"{paired.UNTRAINED_MARGIN:g}",
        TrainedLimit=f"{paired.trained_limit(P['dataset']):g}",
        Resolution="--" if not S.test_images else f"{100 / S.test_images:.2f}",
    )


# ----------------------------------------------------------------------------- outputs
def _in_chans(P: dict) -> int:
    return 3 if P["dataset"].startswith("cifar") else 1


def _departure_rows(S: Summary) -> list[SweepRow]:
    """The sg sweep's values whose quadratic terms' departure was measured (gamma 0 left out)."""
    return [r for r in S.sweeps["sg"] if r.value and r.moved is not None]


def _checked_lines(sizes: dict, exact: dict, P: dict) -> list[str]:
    """The model sizes (the paper prints 0.27M for ResNet20, 0.81M for QResNet20) and the float64
    check's outcome: what nbval compares."""
    lines = [
        f"{m:16s} CIFAR-10 size {paper:>9,d}   as run here (width {P['width']}, {_in_chans(P)} channel(s)) {ours:>9,d}"
        for m, (paper, ours) in sizes.items()
    ]
    return lines + [
        f"after {exact['steps']} steps: max |logit difference| < 1e-12: {exact['logits'] < 1e-12}, "
        f"max |parameter difference| < 1e-12: {exact['params'] < 1e-12}"
    ]


def _departure_lines(S: Summary) -> list[str]:
    k = S.protocol["gamma_scale"]
    return [
        f"gamma {r.value:g} x{k:.3g}: {r.moved:.1f} % of predictions changed, terms {r.terms:.3g} of W_r, "
        f"error {r.mean:.2f}"
        for r in _departure_rows(S)
    ]


def _figures(S: Summary) -> list[Figure]:
    P = S.protocol
    labels = {e: {v: _setting_text(P, e, v) for v, _ in curves} for e, curves in S.curves.items()}
    curves = (P, S.curves, labels, S.conventional)
    draws = {
        "cifartuning_sg": functools.partial(figures.sg, *curves),
        "cifartuning_sw": functools.partial(figures.sw, *curves),
        "cifartuning_transfer": functools.partial(figures.transfer, *curves, S.stages),
        "cifartuning_rezero": functools.partial(figures.rezero, *curves),
        "cifartuning_guaranteed": functools.partial(figures.guaranteed, P, S.sweeps, S.conv_error),
        "cifartuning_departure": functools.partial(figures.departure, P, _departure_rows(S)),
    }
    return [Figure(name, figures.styled(draw)) for name, draw in draws.items()]


def _tables(S: Summary) -> list[Table]:
    return [
        Table("cifartuning_summary", SWEEP_SUMMARY_HEADER, sweep_summary_rows(S)),
        Table("cifartuning_seeds", errors.SEED_HEADER, S.seed_rows),  # every run, as CSV beside the tables
        Table("cifartuning_claims", CLAIMS_HEADER, claim_rows(S.claims)),
        claims_table(NAME, "Tuning", S.claims),
    ]


def outputs(results: Results) -> list:
    """The section's figures, tables, variables and printed lines from its plan's ``results``."""
    sizes, exact = results["sizes"], results["exact"]
    S = summary(results)
    P = S.protocol
    quoted = dict(
        ParamsResNet=f"{sizes[P['conventional']][0] / 1e6:.2f}M",
        ParamsQResNet=f"{sizes[P['model']][0] / 1e6:.2f}M",
        # The caption says what the bars are, or that there are none.
        GuaranteedBars="bars: one standard deviation over the seeds"
        if figures.has_bars(S.sweeps)
        else "one seed per point, so no bars",
    )
    return [
        Lines([f"{results.profile} {data(results.profile, results.tiny)} {P}"]),
        Lines(_checked_lines(sizes, exact, P), check=True),
        Lines([f"{S.runs} runs, {S.pending} pending; conventional ResNet20 final error {S.conv_error:.2f}"]),
        *_figures(S),
        Lines(_departure_lines(S)),
        *_tables(S),
        Lines([f"{c.verdict:13s} {c.text}: {c.evidence()}" for c in S.claims]),
        Variables({**quoted, **variables(S, exact)}),
    ]
