"""Expressivity of quadratic networks (the paper's Section III and its first figure): the four
experiments of :mod:`quadnn_paper.experiments.expressivity` at each profile, and their tables,
figures and quoted numbers.

Protocols live in :data:`PROTOCOLS` (``smoke`` / ``cpu`` / ``full``); ``full`` holds the values
the paper states (architecture and sigmas of its first figure, unit-variance parameters for
its amplification estimate, the spline degrees m = 1, 2 of its Lemma). :func:`plan` lists the
experiments as cached computations, :func:`outputs` turns their results into outputs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from quadnn_paper.common import published
from quadnn_paper.common.figure_lint import pending_figure
from quadnn_paper.common.outputs import PENDING, Column, Figure, Lines, Table, Variables
from quadnn_paper.common.profiles import protocols
from quadnn_paper.engine import Computation, Results
from quadnn_paper.experiments import expressivity as experiment
from quadnn_paper.experiments.expressivity import NETWORKS
from quadnn_paper.figures import expressivity as figures

__all__ = ["NAME", "PROTOCOLS", "protocol", "data", "plan", "outputs"]  # the section's contract (execution.sections)

# --------------------------------------------------------------------------------------
# Protocols
# --------------------------------------------------------------------------------------
#: Architectures of the variety-dimension table (our choice of small networks; the paper gives no table).
VARIETY_ARCHS = [(1, 1, 1), (1, 2, 1), (2, 2, 1), (2, 3, 1), (3, 3, 1), (2, 2, 2, 1), (3, 2, 2, 1)]
VARIETY_ARCHS_EXTRA = [(1, 1, 1, 1), (4, 2, 1), (5, 2, 1), (4, 4, 1), (2, 2, 2, 2, 1)]

# The paper's network: 1-10-10-10-10-1, ReLU, all parameters ~ N(0, sigma^2), sigma in {0.01, 0.02,
# 0.03}. It states neither the input range nor a number of draws; those two are ours (every profile's).
_NETWORK = dict(widths=(1, 10, 10, 10, 10, 1), sigmas=(0.01, 0.02, 0.03), x_max=100.0, x_max_table=(1.0,))
# The paper's estimate of amplification assumes i.i.d. unit-variance Gaussian parameters.
_AMPLIFIED = dict(width=10, in_features=10, sigma=1.0)
PROTOCOLS = {
    "smoke": dict(
        oscillation=dict(_NETWORK, n_points=201, n_draws=50, seed=0),
        spline=dict(functions=("sin", "runge"), n_knots=12, n_h=5, h_max=0.25, seed=0),
        variety=dict(archs=VARIETY_ARCHS, n_trials=1, seed=0),
        amplification=dict(depths=(1, 2, 3, 4), **_AMPLIFIED, n_draws=50, seed=0),
    ),
    "cpu": dict(
        oscillation=dict(_NETWORK, n_points=401, n_draws=1000, seed=0),
        spline=dict(functions=("sin", "runge", "exp"), n_knots=16, n_h=9, h_max=0.25, seed=0),
        variety=dict(archs=VARIETY_ARCHS + VARIETY_ARCHS_EXTRA, n_trials=3, seed=0),
        amplification=dict(depths=(1, 2, 3, 4, 5, 6), **_AMPLIFIED, n_draws=500, seed=0),
    ),
    "full": dict(
        oscillation=dict(_NETWORK, n_points=1001, n_draws=10000, seed=0),
        spline=dict(functions=("sin", "runge", "exp"), n_knots=32, n_h=13, h_max=0.25, seed=0),
        variety=dict(archs=VARIETY_ARCHS + VARIETY_ARCHS_EXTRA, n_trials=5, seed=0),
        amplification=dict(depths=(1, 2, 3, 4, 5, 6, 7, 8), **_AMPLIFIED, n_draws=2000, seed=0),
    ),
}


#: Values printed in the paper (facts from the paper, used as its column in our tables).
PAPER = published.EXPRESSIVITY


NAME = "expressivity"


def _tiny_caps(P: dict) -> dict:
    """TINY=1 keeps full's architectures, depths and functions (the code paths) on fewer draws,
    points and trials."""
    P["oscillation"].update(
        n_points=min(P["oscillation"]["n_points"], 201), n_draws=min(P["oscillation"]["n_draws"], 100)
    )
    P["spline"].update(n_h=min(P["spline"]["n_h"], 5))
    P["variety"].update(n_trials=1)
    P["amplification"].update(n_draws=min(P["amplification"]["n_draws"], 100))
    return P


protocol = protocols(PROTOCOLS, caps=_tiny_caps)


class OscillationRow(NamedTuple):
    """A row of the oscillation table: ``max_{|x| <= R} |f|`` over the draws of one network and sigma."""

    network: str  # "conventional" | "quadratic"
    sigma: float
    x_range: float  # R
    median: float
    q10: float  # 10% quantile
    q90: float  # 90% quantile


class VarietyRow(NamedTuple):
    """A row of the variety table: per network kind the parameter count, the bounds and the numeric
    dimension (quadratic neurons p2, quadratic activation p1), and whether dim p2 > dim p1."""

    widths: str  # "(d_0,d_1,...)"
    quadratic_params: int
    quadratic_paper: int
    quadratic_corrected: int
    quadratic_layerwise: int
    quadratic_dim: int
    activation_params: int
    activation_paper: int
    activation_corrected: int
    activation_dim: int
    quadratic_larger: bool  # Proposition 2: dim p2 > dim p1


def _median_max_abs(osc: dict, kind: str, s: str, R: str) -> float:
    return float(np.median(osc["max_abs"][kind][s][R]))


def _oscillation_row(osc: dict, kind: str, s: str, R: str) -> OscillationRow:
    max_abs = osc["max_abs"][kind][s][R]
    return OscillationRow(
        kind,
        float(s),
        float(R),
        _median_max_abs(osc, kind, s, R),
        float(np.quantile(max_abs, 0.1)),
        float(np.quantile(max_abs, 0.9)),
    )


def _oscillation_variables(osc: dict, sigmas: list[str], ranges: list[str]) -> dict:
    """The smallest and largest x range, and the growth of the median max |f| from the smallest
    sigma to the largest."""

    def ratio(kind, R):
        return _median_max_abs(osc, kind, sigmas[-1], R) / _median_max_abs(osc, kind, sigmas[0], R)

    rmax, rmin = ranges[-1], ranges[0]
    return dict(
        OscXmax=float(rmax),
        OscXmin=float(rmin),
        OscQuadRatio=(ratio("quadratic", rmax), 2),
        OscConvRatio=(ratio("conventional", rmax), 2),
        OscQuadRatioSmall=(ratio("quadratic", rmin), 2),
    )


def _oscillation_summary(osc: dict) -> tuple[list[OscillationRow], dict]:
    """Rows and variables of the oscillation table from :func:`oscillation`'s output."""
    sigmas = sorted(osc["max_abs"]["conventional"], key=float)
    ranges = sorted(osc["max_abs"]["conventional"][sigmas[0]], key=float)
    rows = [_oscillation_row(osc, kind, s, R) for kind in ("conventional", "quadratic") for s in sigmas for R in ranges]
    return rows, _oscillation_variables(osc, sigmas, ranges)


def _variety_row(r: dict) -> VarietyRow:
    q, a = r["quadratic"], r["quadratic_activation"]
    return VarietyRow(
        "(" + ",".join(map(str, r["widths"])) + ")",
        q["params"],
        q["paper"],
        q["corrected"],
        q["layerwise"],
        q["dim"],
        a["params"],
        a["paper"],
        a["corrected"],
        a["dim"],
        q["dim"] > a["dim"],
    )


def _corrected_words(vd: list[dict]) -> str:
    """Whether our corrected bound is at least the measured dimension, as the text says it: "holds
    in every row" or "fails in k of n rows" (a row: one architecture and network)."""
    cases = [r[n]["corrected"] >= r[n]["dim"] for r in vd for n in NETWORKS]
    fails = cases.count(False)
    return "holds in every row" if not fails else f"fails in {fails} of {len(cases)} rows"


def _variety_variables(vd: list[dict], rows: list[VarietyRow]) -> dict:
    """How often the paper's bounds fail, the corrected and layerwise counts hold and Proposition 2
    holds; the smallest singular-value gap; the (1,1,1) network's dimension and bound."""
    var = dict(
        VarArchs=len(vd),
        VarLemmaFails=sum(r["quadratic"]["paper"] < r["quadratic"]["dim"] for r in vd),
        VarKileelFails=sum(r["quadratic_activation"]["paper"] < r["quadratic_activation"]["dim"] for r in vd),
        VarPropTwoHolds=int(sum(r.quadratic_larger for r in rows)),
        VarLayerwiseExact=int(sum(r["quadratic"]["layerwise"] == r["quadratic"]["dim"] for r in vd)),
        VarMinGap=(float(min(r[n]["gap"] for r in vd for n in NETWORKS)), 3),
        VarCorrectedHold=_corrected_words(vd),
    )
    one = next((r for r in vd if r["widths"] == [1, 1, 1]), None)
    if one is not None:
        var.update(VarOneDim=one["quadratic"]["dim"], VarOnePaper=one["quadratic"]["paper"])
    return var


def _variety_summary(vd: list[dict]) -> tuple[list[VarietyRow], dict]:
    """Rows and variables of the variety table from :func:`variety_table`'s output."""
    rows = [_variety_row(r) for r in vd]
    return rows, _variety_variables(vd, rows)


def _amplification_row(d: str, amp_d: dict, ratio: float) -> list:
    """Depth, the paper's scale, the median gradient norms of the three networks, the median
    quadratic/conventional ratio and the paper's 2^H."""
    return [
        int(d),
        amp_d["scale"],
        float(np.median(amp_d["conventional"])),
        float(np.median(amp_d["quadratic_random"])),
        float(np.median(amp_d["quadratic_relinear"])),
        float(ratio),
        float(2 ** int(d)),
    ]


def _amplification_variables(amp: dict, depths: list[str], normalised: dict, ratio: np.ndarray) -> dict:
    """The ratio at the smallest and largest depth against the paper's 2^H, and whether ReLinear's
    quadratic networks have exactly the conventional networks' gradients."""
    same = all(np.allclose(amp[d]["quadratic_relinear"], amp[d]["conventional"], rtol=1e-12) for d in depths)
    return dict(
        AmpMaxDepth=int(depths[-1]),
        AmpRatioMax=(float(ratio[-1]), 2),
        AmpPaperMax=(float(2 ** int(depths[-1])), 3),
        AmpRatioOne=(float(ratio[0]), 2),
        AmpConvOverScaleMax=(float(normalised["conventional"][-1]), 2),
        AmpRelinearEqual="equal" if same else "not equal",
    )


def _amplification_summary(amp: dict) -> tuple[dict, list[list], dict]:
    """The figure's curves, the rows and the variables of the amplification table from
    :func:`amplification`'s output."""
    depths = sorted(amp, key=int)
    normalised = {
        k: np.array([np.median(amp[d][k]) / amp[d]["scale"] for d in depths])
        for k in ("conventional", "quadratic_random", "quadratic_relinear")
    }
    ratio = np.array(
        [np.median(np.array(amp[d]["quadratic_random"]) / np.array(amp[d]["conventional"])) for d in depths]
    )
    curves = dict(depths=np.array([int(d) for d in depths]), normalised=normalised, ratio=ratio)
    rows = [_amplification_row(d, amp[d], r) for d, r in zip(depths, ratio)]
    return curves, rows, _amplification_variables(amp, depths, normalised, ratio)


# --------------------------------------------------------------------------------------
# The section as a declaration: its data, its work, its outputs
# --------------------------------------------------------------------------------------
#: The Hall--Meyer constants the section quotes: m = 1, 2 (linear, cubic) and those the paper prints.
HALL_MEYER_MS = sorted({1, 2, *PAPER["hall_meyer_printed"]})
EXACT = 1e-12  # "the network equals the spline": relative error below this
SPLINE_EVAL_POINTS = 20001  # where the construction's error is measured
SPLINE_PLOT_EVERY = 20  # the construction's figure draws every 20th of them

# Seconds per unit of work, measured on one thread of a 2-core CPU (what `make status` adds up).
_SECONDS_PER = dict(
    oscillation_point=2.5e-6,  # per draw, sigma, range and point
    amplification_draw=6e-3,  # per draw and depth
    variety_trial=0.05,  # per architecture and trial
    spline_step=0.1,  # per step h
    spline_function=0.6,  # per test function: its derivatives' suprema (sympy) and the spline
)


class Part(NamedTuple):
    """One part of the section's outputs: its tables, figures and variables (what stands in their
    place while the computations it needs are pending). Each table is declared here alone, by its
    name and its columns (names in the CSV, heads as typeset)."""

    tables: dict[str, list]
    figures: tuple[str, ...]
    variables: tuple[str, ...]


PARTS = {
    "oscillation": Part(
        {
            "expressivity_oscillation": [
                "network",
                Column("sigma", tex=r"$\sigma$"),
                Column("x range R", tex=r"$R$"),
                Column("median max|f|", tex=r"median $\max_{|x|\le R}|f|$"),
                Column("10% quantile", tex="10\\%"),
                Column("90% quantile", tex="90\\%"),
            ]
        },
        ("expressivity_oscillation",),
        ("OscXmax", "OscXmin", "OscQuadRatio", "OscConvRatio", "OscQuadRatioSmall", "OscDraws"),
    ),
    "spline_construction": Part(
        {
            "expressivity_spline_exact": [
                Column("function", tex="$f$"),
                "pieces",
                "layers",
                Column("parameters", tex="params"),
                Column("max |Q-S|", tex=r"$\max|Q-S|$"),
                Column("relative", tex="rel."),
                Column("paper formula error", tex=r"$|s_0(x_0)|$"),
            ]
        },
        ("expressivity_spline_construction",),
        ("SplineRelErr", "SplinePieces", "SplineEps", "SplineEpsMultiple"),
    ),
    "spline_error": Part(
        {
            "expressivity_spline_rates": [
                Column("function", tex="$f$"),
                Column("slope linear", tex="slope $m{=}1$"),
                Column("slope cubic", tex="slope $m{=}2$"),
                Column("max ratio linear", tex=r"$\max \frac{\|f-S\|}{\|f''\|h^2}$"),
                Column("max ratio cubic", tex=r"$\max \frac{\|f-S\|}{\|f^{(4)}\|h^4}$"),
            ]
        },
        ("expressivity_spline_error",),
        (
            "SlopeLinearMin",
            "SlopeLinearMax",
            "SlopeCubicMin",
            "SlopeCubicMax",
            "RatioLinearMax",
            "RatioCubicMax",
            "HallMeyerOne",
            "HallMeyerTwo",
            "HallMeyerTwoFrac",
        ),
    ),
    "hall_meyer": Part(
        {
            "expressivity_hall_meyer": [
                Column("m", tex="$m$"),
                Column("|E_2m|", tex=r"$|E_{2m}|$"),
                Column("constant", tex=r"$\frac{|E_{2m}|}{2^{2m}(2m)!}$"),
                Column("paper printed", tex="paper"),
                Column("paper asymptotic", tex=r"paper's $E_{2m}$ approx."),
                Column("asymptotic x8", tex=r"$8\times$ that"),
            ]
        },
        (),
        (),
    ),
    "variety": Part(
        {
            # Two groups of columns: quadratic neurons (p2) and quadratic activation (p1), headed by a row of their own.
            "expressivity_variety": [
                Column(
                    "widths",
                    tex=r"& \multicolumn{5}{c}{quadratic neurons ($p_2$)} & \multicolumn{4}{c}{quadratic activation ($p_1$)} & \\"
                    r" \cmidrule(lr){2-6}\cmidrule(lr){7-10} $\boldsymbol{d}$",
                ),
                Column("P (p2)", tex="$P$"),
                Column("paper (p2)", tex=r"\paperval{paper}"),
                Column("corrected (p2)", tex="corr."),
                Column("layerwise (p2)", tex="layer."),
                Column("numeric (p2)", tex=r"\textbf{num.}"),
                Column("P (p1)", tex="$P$"),
                Column("paper (p1)", tex=r"\paperval{paper}"),
                Column("corrected (p1)", tex="corr."),
                Column("numeric (p1)", tex=r"\textbf{num.}"),
                Column("p2 > p1", tex="$>$"),
            ]
        },
        (),
        (
            "VarArchs",
            "VarLemmaFails",
            "VarKileelFails",
            "VarPropTwoHolds",
            "VarLayerwiseExact",
            "VarMinGap",
            "VarCorrectedHold",
            "VarOneDim",
            "VarOnePaper",
        ),
    ),
    "amplification": Part(
        {
            "expressivity_amplification": [
                Column("H", tex="$H$"),
                Column("prod sqrt(d_h d_h-1)", tex=r"$\prod\sqrt{d_hd_{h-1}}$"),
                Column("conventional", tex="conv."),
                Column("quadratic random", tex="quad. rand."),
                Column("quadratic ReLinear", tex="quad. ReLin."),
                Column("ratio quad/conv", tex="ratio"),
                Column("paper 2^H", tex=r"\paperval{$2^H$}"),
            ]
        },
        ("expressivity_amplification",),
        (
            "AmpDraws",
            "AmpWidth",
            "AmpMaxDepth",
            "AmpRatioMax",
            "AmpPaperMax",
            "AmpRatioOne",
            "AmpConvOverScaleMax",
            "AmpRelinearEqual",
        ),
    ),
}


def data(profile: str, tiny: bool = False) -> str:
    """The data the section's numbers come from, in words."""
    return "synthetic: random networks; sin, Runge, exp splines" + (", TINY=1: fewer draws" if tiny else "")


def spline_steps(spl: dict) -> list[float]:
    """The interpolation steps of the spline error: ``n_h`` of them from ``h_max`` down, each
    ``sqrt(2)`` smaller than the one before."""
    steps = np.geomspace(spl["h_max"], spl["h_max"] / 2 ** ((spl["n_h"] - 1) / 2), spl["n_h"])
    return [float(h) for h in steps]


def _computation(name: str, function: str, config: dict, seconds: float) -> Computation:
    return Computation(name, f"{experiment.__name__}:{function}", config, seconds=max(1, round(seconds)))


def plan(profile: str, tiny: bool = False) -> dict:
    """The section's computations (no engine runs: random draws, splines, ranks), each by the part of
    its outputs that reads it (the spline error: one per function, ``("spline_error", function)``).
    Cache names and configurations are those the notebook passed to ``cached``: the keys are unchanged."""
    P = protocol(profile, tiny)
    osc, spl, var, amp = P["oscillation"], P["spline"], P["variety"], P["amplification"]
    per, hs = _SECONDS_PER, spline_steps(spl)
    ranges = len({float(osc["x_max"]), *map(float, osc["x_max_table"])})
    construction = dict(
        functions=list(spl["functions"]),
        n_pieces=spl["n_knots"] - 1,
        n_eval=SPLINE_EVAL_POINTS,
        plot_every=SPLINE_PLOT_EVERY,
    )
    return {
        "oscillation": _computation(
            "expressivity_oscillation",
            "oscillation",
            osc,
            per["oscillation_point"] * osc["n_draws"] * osc["n_points"] * ranges * len(osc["sigmas"]),
        ),
        "spline_construction": _computation(
            "expressivity_spline_construction",
            "spline_construction",
            construction,
            per["spline_function"] * len(spl["functions"]),
        ),
        **{
            ("spline_error", name): _computation(
                "expressivity_spline_h",
                "spline_error_vs_h",
                dict(name=name, hs=hs),
                per["spline_function"] + per["spline_step"] * len(hs),
            )
            for name in spl["functions"]
        },
        "hall_meyer": _computation("expressivity_hall_meyer", "hall_meyer_table", dict(ms=HALL_MEYER_MS), 0),
        "variety": _computation(
            "expressivity_variety",
            "variety_table",
            {k: [list(a) for a in v] if k == "archs" else v for k, v in var.items()},
            per["variety_trial"] * len(var["archs"]) * var["n_trials"],
        ),
        "amplification": _computation(
            "expressivity_amplification",
            "amplification",
            amp,
            per["amplification_draw"] * amp["n_draws"] * len(amp["depths"]),
        ),
    }


def outputs(results: Results) -> list:
    """The section's tables, figures, variables and printed lines from its plan's ``results``; a
    part whose computations are pending shows as pending."""
    P = results.protocol
    got = {part: [r for k, r in results.items() if (k[0] if isinstance(k, tuple) else k) == part] for part in PARTS}
    (osc,), (con,), (hm,), (vd,), (amp,) = (
        got[p] for p in ("oscillation", "spline_construction", "hall_meyer", "variety", "amplification")
    )
    build = {
        "oscillation": lambda: _oscillation_outputs(osc, P["oscillation"]),
        "spline_construction": lambda: _construction_outputs(con, P["spline"]["functions"]),
        "spline_error": lambda: _spline_error_outputs(dict(zip(P["spline"]["functions"], got["spline_error"])), hm),
        "hall_meyer": lambda: _hall_meyer_outputs(hm),
        "variety": lambda: _variety_outputs(vd),
        "amplification": lambda: _amplification_outputs(amp, P["amplification"]),
    }
    out = [Lines([f"profile {results.profile}"])]
    for part, make in build.items():
        needed = [r for p in _NEEDS.get(part, (part,)) for r in got[p]]
        out += make() if all(r is not None for r in needed) else _pending(part)
    return out


_NEEDS = {"spline_error": ("spline_error", "hall_meyer")}  # a part's computations, where not its own


def _table(name: str, rows: list, **kw) -> Table:
    """Table ``name`` of :data:`PARTS` with its declared header."""
    (head,) = [p.tables[name] for p in PARTS.values() if name in p.tables]
    return Table(name, head, rows, **kw)


def _pending(part: str) -> list:
    """What stands in for a part whose computations are pending on a runner: its tables with one
    pending row, its figures with the word, its variables reading "pending" (the paper builds)."""
    shape = PARTS[part]
    return [
        Lines([f"{part}: {PENDING} (see make status)"]),
        *[Table(t, head, [[PENDING] + [""] * (len(head) - 1)]) for t, head in shape.tables.items()],
        *[Figure(f, pending_figure) for f in shape.figures],
        Variables(dict.fromkeys(shape.variables, PENDING)),
    ]


# -- 1. oscillation ---------------------------------------------------------------------
def _oscillation_outputs(osc: dict, cfg: dict) -> list:
    rows, V = _oscillation_summary(osc)
    return [
        Lines([f"{r[0]:>12} sigma={r[1]:<5} R={r[2]:<6g} median={r[3]:.3g}  [{r[4]:.2g}, {r[5]:.2g}]" for r in rows]),
        Figure("expressivity_oscillation", lambda: figures.oscillation(osc, cfg)),
        _table("expressivity_oscillation", rows, digits=3),
        Variables({**V, "OscDraws": cfg["n_draws"]}),
    ]


# -- 2. the spline construction (Proposition 1) ----------------------------------------------
def _construction_outputs(con: dict, functions: Sequence[str]) -> list:
    """The construction's table, its exactness (checked lines), its figure and variables."""
    eps = float(np.finfo(np.float64).eps)
    relative = {name: c["error"] / c["scale"] for name, c in con.items()}
    rows = [
        [name, c["pieces"], c["layers"], c["parameters"], c["error"], relative[name], c["paper_formula_error"]]
        for name, c in con.items()
    ]
    worst = max(relative.values())
    exact = [
        f"{name}: quadratic net == cubic spline to < {EXACT:g} relative: {rel < EXACT}; "
        f"order of magnitude <= 1e{int(math.ceil(math.log10(max(rel, 1e-17))))}"
        for name, rel in relative.items()
    ]
    return [
        _table("expressivity_spline_exact", rows, digits=2),
        Variables(
            dict(
                SplineRelErr=(worst, 2),
                SplinePieces=next(iter(con.values()))["pieces"],
                SplineEps=(eps, 2),
                SplineEpsMultiple=int(math.ceil(worst / eps)),
            )
        ),
        Lines(exact, check=True),
        Figure("expressivity_spline_construction", lambda: figures.construction(con, functions)),
    ]


# -- 3. spline error against h, the Hall--Meyer constants -------------------------------------
def _slopes(r: dict) -> tuple[float, float]:
    """Log-log slopes of the linear and cubic error, fitted on the smaller half of h (the
    asymptotic regime), the cubic one without errors at round-off level."""
    h = np.array([x["h"] for x in r["rows"]])
    e1 = np.array([x["linear"] for x in r["rows"]])
    e3 = np.array([x["cubic"] for x in r["rows"]])
    small = np.arange(len(h)) >= len(h) // 2
    ok = small & (e3 > 1e-13)
    s1 = np.polyfit(np.log(h[small]), np.log(e1[small]), 1)[0]
    s3 = np.polyfit(np.log(h[ok]), np.log(e3[ok]), 1)[0]
    return float(s1), float(s3)


def _spline_error_outputs(err: dict, hm: dict) -> list:
    """The rates table, its figure, and the slopes, ratios and constants the text quotes."""
    c1, c2 = hm["1"]["constant"], hm["2"]["constant"]
    rows = [
        [
            name,
            *_slopes(r),
            max(x["linear_ratio"] for x in r["rows"]),
            max(x["cubic_ratio"] for x in r["rows"]),
        ]
        for name, r in err.items()
    ]
    return [
        Figure("expressivity_spline_error", lambda: figures.spline_error(err, c1, c2)),
        _table("expressivity_spline_rates", rows, digits=3),
        Lines([str(r) for r in rows]),
        Variables(
            dict(
                SlopeLinearMin=(min(r[1] for r in rows), 3),
                SlopeLinearMax=(max(r[1] for r in rows), 3),
                SlopeCubicMin=(min(r[2] for r in rows), 3),
                SlopeCubicMax=(max(r[2] for r in rows), 3),
                RatioLinearMax=(max(r[3] for r in rows), 3),
                RatioCubicMax=(max(r[4] for r in rows), 3),
                HallMeyerOne=(c1, 4),
                HallMeyerTwo=(c2, 4),
                HallMeyerTwoFrac=f"${hm['2']['numerator']}/{hm['2']['denominator']}$",
            )
        ),
    ]


def _hall_meyer_outputs(hm: dict) -> list:
    """The constants |E_2m| / (2^2m (2m)!) against the values the paper prints, and the asymptotic
    of |E_2m| as printed (factor 1) and with the correct factor 8."""
    rows, lines = [], []
    for m, printed in PAPER["hall_meyer_printed"].items():
        c = hm[str(m)]
        rows.append([m, c["euler"], c["constant"], printed, c["asymptotic_paper"], c["asymptotic_corrected"]])
        lines.append(
            f"m={m}: |E_2m|={c['euler']}, constant={c['constant']:.3g}, paper prints {printed:g}, "
            f"paper's asymptotic {c['asymptotic_paper']:.3g}, with factor 8 {c['asymptotic_corrected']:.3g}"
        )
    return [
        Lines(lines, check=True),
        _table("expressivity_hall_meyer", rows, digits=3),
    ]


# -- 4. the variety's dimension ---------------------------------------------------------------
def _variety_outputs(vd: list[dict]) -> list:
    rows, V = _variety_summary(vd)
    lines = [
        f"{'d':>14} | {'quadratic p2: P paper corr layer NUM':>37} | {'quad. act. p1: P paper corr NUM':>32} | p2>p1"
    ]
    lines += [
        f"{w:>14} | {qp:>8} {qpa:>5} {qc:>4} {ql:>5} {qd:>4}    | {ap:>11} {apa:>5} {ac:>4} {ad:>4}    | {more}"
        for w, qp, qpa, qc, ql, qd, ap, apa, ac, ad, more in rows
    ]
    lines += [
        f"paper's Lemma bound below the numeric dimension in {V['VarLemmaFails']} of {len(vd)} architectures",
        f"paper's quadratic-activation bound below the numeric dimension in {V['VarKileelFails']} of {len(vd)}",
        f"corrected bounds: {V['VarCorrectedHold']}",
        f"layerwise count equals the numeric dimension in {V['VarLayerwiseExact']} of {len(vd)}",
        f"Proposition 2 (dim p2 > dim p1) holds in {V['VarPropTwoHolds']} of {len(rows)}",
        f"smallest singular-value gap (decades): {round(V['VarMinGap'][0]) >= 10}",
    ]
    return [
        Lines(lines, check=True),
        _table("expressivity_variety", rows),
        Variables(V),
    ]


# -- 5. amplification ---------------------------------------------------------------------
def _amplification_outputs(amp: dict, cfg: dict) -> list:
    curves, rows, V = _amplification_summary(amp)
    return [
        Figure("expressivity_amplification", lambda: figures.amplification(curves)),
        _table("expressivity_amplification", rows, digits=3),
        Lines([str(r) for r in rows]),
        Variables({"AmpDraws": cfg["n_draws"], "AmpWidth": cfg["width"], **V}),
        Lines([f"ReLinear quadratic == conventional at every depth and draw: {V['AmpRelinearEqual'] == 'equal'}"]),
    ]
