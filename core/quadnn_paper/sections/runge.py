"""The Runge section: the paper's fit of R(x) = 1/(1+16x^2) by a 1-8-8-8-8-1 quadratic ReLU network
under each training strategy (:mod:`quadnn_paper.experiments.runge` trains them), its RMSE and
piecewise-polynomial tables, figures and quoted numbers.

The section declares its work (:func:`plan`): the batched training of every strategy and seed
(``experiment``, cached as ``runge``), the checks of the data set, the network and the
piecewise decomposition (``network_checks``), and the trained networks' pieces (``piece_analysis``);
:func:`outputs` turns their results into the tables, figures and quoted numbers.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from quadnn_paper.analysis import stats
from quadnn_paper.common import published
from quadnn_paper.common.cells import Cell
from quadnn_paper.common.figure_lint import pending_figure
from quadnn_paper.common.outputs import PENDING, Column, Figure, Lines, Table, Variables
from quadnn_paper.common.profiles import protocols
from quadnn_paper.engine import Computation, Results
from quadnn_paper.experiments import runge as experiment
from quadnn_paper.experiments.runge import STRATEGIES, experiment_config, read_piece_analysis, trained_model
from quadnn_paper.figures import runge as figures

__all__ = ["NAME", "PROTOCOLS", "protocol", "data", "plan", "outputs"]  # the section's contract (execution.sections)


# The paper's protocol (Section "Runge Function Approximation") and its reported RMSEs.
PAPER = published.RUNGE
PAPER_RMSE = published.RUNGE_RMSE
PAPER_PIECES = published.RUNGE_PIECES

# smoke: seconds (same network and data, 300 iterations). cpu: the paper's full protocol with
# five seeds. full: the paper's protocol with eight seeds. All runs of a profile train together
# (about 1.5 to 6 minutes on two shared cores, depending on the load).
PROTOCOLS = {
    "smoke": dict(PAPER, iterations=300, seeds=[0, 1]),
    "cpu": dict(PAPER, seeds=list(range(5))),
    "full": dict(PAPER, seeds=list(range(8))),
}


# -- the section interface ----------------------------------------------------------------------
NAME = "runge"
# What the report calls each strategy, in text and in macro names, and as the tables typeset it.
LABEL = {
    "regular": "regular",
    "relinear-init": "ReLinear init only",
    "sw-l1": "ReLinear-sw-l1",
    "sw-l2": "ReLinear-sw-l2",
    "sg": "ReLinear-sg",
}
LABEL_TEX = {
    "regular": "Regular",
    "relinear-init": "ReLinear init only",
    "sw-l1": r"ReLinear$^{sw}$-$\ell_1$",
    "sw-l2": r"ReLinear$^{sw}$-$\ell_2$",
    "sg": r"ReLinear$^{sg}$",
}
MACRO = {"regular": "Regular", "relinear-init": "Init", "sw-l1": "SwLOne", "sw-l2": "SwLTwo", "sg": "Sg"}
BLOWN = 1.0  # test RMSE above 1 on a target within [0, 1]: the fit blew up
PAPER_ORDER = ("sg", "sw-l2", "sw-l1")  # the paper's ranking of the ReLinear strategies, best first
PROBE = ("regular", 0)  # the network the piecewise self-check takes apart: regular init, seed 0
PIECE_TOLERANCE = 1e-10  # the self-check passes when the pieces agree with the network to this relative error
# Training cost: seconds per run and iteration of the batched trainer (cpu: 25 runs x 30,000
# iterations in 112 s on two shared cores), and at least the smoke profile's few seconds.
SECONDS_PER_RUN_ITERATION = 1.5e-4
MIN_SECONDS = 5.0
RMSE_HEADER = [
    Column("strategy", tex="Strategy"),
    Column("RMSE mean", tex=r"mean $\pm$ std"),
    Column("RMSE median", tex="median"),
    Column("blew up", tex=r"RMSE$>$1"),
    "paper",
]
PIECES_HEADER = [
    Column("strategy", tex="Strategy"),
    Column("pieces mean", tex="pieces"),
    "range",
    Column("max |c_k|, k>=3 (median)", tex=r"$\max_{k\ge3}|c_k|$"),
]


# TINY=1 caps the iterations (the code path, not a measurement)
protocol = protocols(PROTOCOLS, caps=lambda P: dict(P, iterations=min(P["iterations"], 300)))


def data(profile: str, tiny: bool = False) -> str:
    """The data the section's numbers come from, in words."""
    P = protocol(profile, tiny)
    return f"Runge function, {P['n_train']} points" + (f", TINY=1: {P['iterations']} iterations" if tiny else "")


def plan(profile: str, tiny: bool = False) -> dict[str, Computation]:
    """The section's work: the checks of its data, network and piecewise decomposition
    (``"checks"``), the batched training of every strategy and seed (``"training"``, cache entry
    ``runge``), and the trained networks taken apart into their polynomial pieces (``"pieces"``)."""
    P = protocol(profile, tiny)
    checks = {k: P[k] for k in ("interval", "n_train", "n_test", "width", "depth")}
    checks.update(probe_strategy=PROBE[0], probe_seed=PROBE[1])
    runs = len(STRATEGIES) * len(P["seeds"])
    training = Computation(
        "runge",
        f"{experiment.__name__}:experiment",
        experiment_config(P),
        seconds=round(max(MIN_SECONDS, SECONDS_PER_RUN_ITERATION * runs * P["iterations"])),
    )
    pieces = {k: P[k] for k in ("interval", "width", "depth")}
    return {
        "checks": Computation("runge_checks", f"{experiment.__name__}:network_checks", checks, seconds=2),
        "training": training,
        "pieces": Computation(
            "runge_pieces",
            f"{experiment.__name__}:piece_analysis",
            pieces,
            max(2, round(0.05 * runs)),
            needs=(training,),
        ),
    }


def _strategy_cell(s: str) -> Cell:
    """The strategy's label, as the tables' first column shows it."""
    return Cell(LABEL[s], tex=LABEL_TEX[s])


def _blown(v: np.ndarray) -> int:
    """How many fits blew up (test RMSE above :data:`BLOWN`)."""
    return int((v > BLOWN).sum())


def _rmse_cell(v: np.ndarray, paper: float | None) -> Cell:
    """Mean and std of the test RMSEs ``v``, judged against the paper's RMSE (None: not in the paper)."""
    # flagged only when ours is worse than the paper's by more than 2 std; a better fit is not a
    # failure to reproduce, and says so in a note
    better = paper is not None and v.mean() < paper - 2 * v.std()
    return Cell(
        float(v.mean()),
        float(v.std()),
        reproduced=None if paper is None or better else bool(v.mean() - paper <= 2 * v.std()),
        note="(better than the paper)" if better else "",
    )


def _rmse_row(s: str, v: np.ndarray) -> list:
    """A row of the RMSE table: strategy, mean +- std, median, blown fits, the paper's RMSE."""
    paper = PAPER_RMSE[s]
    return [_strategy_cell(s), _rmse_cell(v, paper), float(np.median(v)), f"{_blown(v)}/{len(v)}", paper]


def _piece_row(s: str, n_pieces: np.ndarray, high: np.ndarray) -> list:
    """A row of the pieces table: strategy, pieces mean +- std, their range, median largest |c_k|."""
    return [
        _strategy_cell(s),
        Cell(float(n_pieces.mean()), float(n_pieces.std()), decimals=1),
        f"{n_pieces.min()}--{n_pieces.max()}",
        float(np.median(high)),
    ]


# The per-strategy numbers the text quotes, and of which strategies (tools/paper_check.py fails a
# build that writes one nobody reads; the tables carry the rest).
_QUOTED = {
    "Rmse": ("relinear-init", "sg"),
    "RmseMedian": ("regular", "sw-l1", "sw-l2", "sg"),
    "Blown": ("regular",),
    "Pieces": ("sw-l1", "sw-l2", "sg"),
    "PiecesMin": ("sg",),
    "PiecesMax": ("sg",),
    "High": tuple(STRATEGIES),
}


def _strategy_variables(rmse_: dict, n_pieces: dict, high: dict) -> dict:
    """Per strategy the RMSE, pieces and coefficient numbers the text quotes (:data:`_QUOTED`)."""
    numbers = {
        "Rmse": lambda s: float(rmse_[s].mean()),
        "RmseMedian": lambda s: float(np.median(rmse_[s])),
        "Blown": lambda s: _blown(rmse_[s]),
        "Pieces": lambda s: (float(n_pieces[s].mean()), 3),
        "PiecesMin": lambda s: int(n_pieces[s].min()),
        "PiecesMax": lambda s: int(n_pieces[s].max()),
        "High": lambda s: (float(np.median(high[s])), 2),
    }
    return {f"{k}{MACRO[s]}": numbers[k](s) for k, strategies in _QUOTED.items() for s in strategies}


def _ranking_verdict(rmse_: dict) -> str:
    """Whether our RMSEs rank the ReLinear strategies as the paper does, in words."""
    # The ranking is decided from paired intervals (the seeds share the linear branch), by the
    # report's one verdict rule; no equivalence margin applies to an RMSE (margin 0).
    steps = [
        stats.verdict(stats.interval(list(rmse_[b] - rmse_[a])), margin=0.0)
        for a, b in zip(PAPER_ORDER, PAPER_ORDER[1:])
    ]
    if all(v == stats.SUPPORTED for v in steps):
        return "yes, each step decided by its paired interval"
    if stats.CONTRADICTED in steps:
        return "no: at least one step is reversed beyond its paired interval"
    return "not decided: the paired intervals of the steps include zero"


def _ranking_variables(order: list[str], rmse_: dict) -> dict:
    """Our ranking of the ReLinear strategies (``order``, best first) against the paper's, and how
    often sg beats the others."""
    var = dict(
        OrderFirst=LABEL[order[0]],
        OrderSecond=LABEL[order[1]],
        OrderThird=LABEL[order[2]],
        OrderMatches=_ranking_verdict(rmse_),
        SgBest="yes" if order[0] == "sg" else "no",
    )
    # the seeds share the linear branch across strategies, so they compare seed by seed
    for other in ("sw-l1", "sw-l2", "relinear-init"):
        var[f"SgBeats{MACRO[other]}"] = int((rmse_["sg"] < rmse_[other]).sum())
    return var


def _paper_rmse_variables(rmse_: dict) -> dict:
    """Per ReLinear strategy of the paper: its RMSE over ours, and whether ours reproduces it."""
    var = {}
    for s in PAPER_ORDER:
        var[f"Ratio{MACRO[s]}"] = (float(PAPER_RMSE[s] / rmse_[s].mean()), 2)
        d = rmse_[s].mean() - PAPER_RMSE[s]
        var[f"Reproduced{MACRO[s]}"] = "yes" if abs(d) <= 2 * rmse_[s].std() else ("better" if d < 0 else "no")
    return var


def _gap_and_spread(rmse_: dict) -> tuple[float, float]:
    """The range of the ReLinear strategies' mean RMSEs, and their largest std."""
    gap = max(rmse_[s].mean() for s in PAPER_ORDER) - min(rmse_[s].mean() for s in PAPER_ORDER)
    spread = max(rmse_[s].std() for s in PAPER_ORDER)
    return gap, spread


@dataclasses.dataclass(frozen=True)
class Summary:
    """The section's numbers (:func:`summary`); per strategy, one entry per seed."""

    protocol: dict
    runs: dict[str, list[dict]]  # the trained runs' results
    models: dict[str, list]  # the trained networks
    rmse: dict[str, np.ndarray]  # test RMSEs
    pieces: dict[str, list]  # each network's exact polynomial pieces
    worst_piece_error: float  # the pieces against the networks: the worst relative error
    n_pieces: dict[str, np.ndarray]
    n_distinct: dict[str, np.ndarray]  # pieces, equal neighbours merged
    high: dict[str, np.ndarray]  # largest |c_k|, k >= 3, over each network's pieces
    order: list[str]  # the ReLinear strategies by mean RMSE, best first
    gap: float  # the range of their mean RMSEs
    spread: float  # their largest standard deviation
    rmse_rows: list[list]
    piece_rows: list[list]
    variables: dict


def summary(results: dict, pieces: dict, P: dict) -> Summary:
    """The section's numbers from :func:`run_experiment`'s ``results`` and :func:`piece_analysis`'s
    ``pieces``: per strategy the test RMSEs, the trained networks and their exact polynomial pieces;
    the RMSE and pieces tables (rows of :class:`~quadnn_paper.common.cells.Cell`); and the variables
    the text quotes (``P``: the protocol they ran)."""
    by = {s: [r for r in results["runs"] if r["strategy"] == s] for s in STRATEGIES}
    models = {s: [trained_model(r, P) for r in rs] for s, rs in by.items()}
    rmse_ = {s: np.array([r["rmse"] for r in rs]) for s, rs in by.items()}
    shape = read_piece_analysis(pieces)
    order = sorted(PAPER_ORDER, key=lambda s: rmse_[s].mean())
    gap, spread = _gap_and_spread(rmse_)
    variables = dict(
        Seeds=len(P["seeds"]),
        Iterations=P["iterations"],
        BlownRmse=BLOWN,
        TrainSeconds=round(results["seconds"]),
        PaperPieces=PAPER_PIECES,
        WorstPieceError=(shape["worst_piece_error"], 1),
        **_strategy_variables(rmse_, shape["n_pieces"], shape["high"]),
        **_ranking_variables(order, rmse_),
        **_paper_rmse_variables(rmse_),
        GapWithinSpread="yes" if gap < spread else "no",
    )
    return Summary(
        protocol=P,
        runs=by,
        models=models,
        rmse=rmse_,
        **shape,  # pieces, worst_piece_error, n_pieces, n_distinct, high
        order=order,
        gap=gap,
        spread=spread,
        rmse_rows=[_rmse_row(s, rmse_[s]) for s in STRATEGIES],
        piece_rows=[_piece_row(s, shape["n_pieces"][s], shape["high"][s]) for s in STRATEGIES],
        variables=variables,
    )


# -- the outputs ---------------------------------------------------------------------------------
def _check_lines(checks: dict, P: dict) -> list[Lines]:
    """What the checks of the data set, the network and the piecewise decomposition print."""
    lo, hi = P["interval"]
    layers = [tuple(layer) for layer in checks["layers"]]
    passed = checks["probe_max_rel_error"] < PIECE_TOLERANCE and checks["probe_max_rel_jump"] < PIECE_TOLERANCE
    network = [
        f"train points: {checks['train_points']} on [{lo:g}, {hi:g}], test points: {checks['test_points']}",
        f"test points that are also training points: {checks['shared_points']}",
        f"layers: {layers}",
        f"parameters per network: {checks['parameters']}; degree of each piece <= {2 ** P['depth']}",
    ]
    probe = (
        f"piecewise self-check: {'pass' if passed else 'FAIL'}; {checks['probe_pieces']} pieces, "
        f"{checks['probe_coefficients']} coefficients each"
    )
    return [Lines(network, check=True), Lines([probe], check=True)]


def _result_lines(result: dict, S: dict) -> list[str]:
    """Per strategy the test RMSEs of its seeds, the pieces of its networks and their largest coefficients."""
    lines = [f"{len(result['runs'])} runs; training took {result['seconds']:.0f} s when computed"]
    lines += [f"{LABEL[s]:>20}: RMSE " + " ".join(f"{v:.3g}" for v in S.rmse[s]) for s in STRATEGIES]
    lines.append(f"worst relative error of the pieces against the networks: {S.worst_piece_error:.2g}")
    lines += [
        f"{LABEL[s]:>20}: pieces {S.n_pieces[s].tolist()} (after merging equal neighbours "
        f"{S.n_distinct[s].tolist()}); max |c_k| (k>=3) median {np.median(S.high[s]):.3g}"
        for s in STRATEGIES
    ]
    return lines


# The quoted numbers that need the trained networks: per strategy (with its MACRO), and overall.
_RANKING_VARIABLES = (
    ("OrderFirst", "OrderSecond", "OrderThird", "OrderMatches", "SgBest")
    + tuple(f"SgBeats{MACRO[s]}" for s in ("sw-l1", "sw-l2", "relinear-init"))
    + tuple(f"{k}{MACRO[s]}" for s in PAPER_ORDER for k in ("Ratio", "Reproduced"))
    + ("GapWithinSpread",)
)


def pending_variables(P: dict) -> dict:
    """The section's variables, named and ordered as :func:`summary` gives them, while its
    training is pending: the protocol's numbers, "pending" for the rest."""
    per_strategy = [f"{k}{MACRO[s]}" for k, strategies in _QUOTED.items() for s in strategies]
    return dict(
        Seeds=len(P["seeds"]),
        Iterations=P["iterations"],
        BlownRmse=BLOWN,
        TrainSeconds=PENDING,
        PaperPieces=PAPER_PIECES,
        WorstPieceError=PENDING,
        **dict.fromkeys([*per_strategy, *_RANKING_VARIABLES], PENDING),
    )


def _pending_outputs(P: dict) -> list:
    """The tables, figures and variables while the training is pending on a runner."""
    runs = len(STRATEGIES) * len(P["seeds"])
    return [
        Lines([f"training pending: {runs} runs ({len(STRATEGIES)} strategies x {len(P['seeds'])} seeds)"]),
        Table("runge_rmse", RMSE_HEADER, [[_strategy_cell(s), *[PENDING] * 3, PAPER_RMSE[s]] for s in STRATEGIES]),
        Variables(pending_variables(P)),
        Figure("runge_fits", lambda: pending_figure((7.2, 3.3))),
        Figure("runge_loss", lambda: pending_figure((3.4, 2.6))),
        Table("runge_pieces", PIECES_HEADER, [[_strategy_cell(s), *[PENDING] * 3] for s in STRATEGIES]),
    ]


def outputs(results: Results) -> list:
    """The section's tables, figures, variables and printed lines from its plan's ``results``."""
    P = results.protocol
    shown = {k: v for k, v in P.items() if k != "seeds"}
    head = [Lines([f"{results.profile} {shown} seeds: {P['seeds']}"]), *_check_lines(results["checks"], P)]
    result = results["training"]
    if result is None:
        return head + _pending_outputs(P)
    S = summary(result, results["pieces"], P)
    order = (
        f"our order: {S.order} | paper: {list(PAPER_ORDER)} | gap {round(S.gap, 4)} largest std {round(S.spread, 4)}"
    )
    return head + [
        Lines(_result_lines(result, S)),
        Table("runge_rmse", RMSE_HEADER, S.rmse_rows, digits=3),
        Variables(S.variables),
        Lines([order]),
        Figure(
            "runge_fits",
            lambda: figures.fits(P, S.rmse, S.models, S.pieces, {s: _blown(S.rmse[s]) for s in STRATEGIES}, LABEL),
        ),
        Figure("runge_loss", lambda: figures.loss(S.runs, result["steps"], LABEL)),
        Table("runge_pieces", PIECES_HEADER, S.piece_rows, digits=2),
    ]
