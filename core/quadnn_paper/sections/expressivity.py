"""Expressivity of quadratic networks (the paper's Section III and its first figure).

Four experiments, each a plain function of its protocol entry:

1. **Oscillation at initialisation** -- :func:`mlp`, :func:`init_normal_`, :func:`oscillation`:
   1-10-10-10-10-1 conventional and quadratic ReLU networks with every parameter drawn from
   N(0, sigma^2); outputs over an input range and output magnitudes over many draws.
2. **Splines** (Proposition 1) -- :func:`spline_network` builds a quadratic ReLU network from
   quadnn layers that equals a given univariate polynomial spline;
   :func:`spline_error_vs_h` measures linear vs cubic interpolation error against the
   Hall--Meyer constants (:func:`hall_meyer_constant`).
3. **Dimension of the algebraic variety** (the Lemma, Proposition 2) --
   :func:`variety_dimension` (numerical: rank of the Jacobian parameters -> function values)
   and :func:`variety_dimension_bound` (the paper's bound as printed, and corrected bounds).
4. **Amplification** -- :func:`amplification`: ``||df/dx||`` at ``x = 0`` across depths for
   conventional networks and quadratic networks at random and ReLinear initialisation.

Protocols live in :data:`PROTOCOLS` (``smoke`` / ``cpu`` / ``full``); ``full`` holds the values
the paper states (architecture and sigmas of its first figure, unit-variance parameters for
its amplification estimate, the spline degrees m = 1, 2 of its Lemma).

The section as a declaration: :func:`work` lists these experiments as cached computations
(:class:`~quadnn_paper.engine.Computation`, under the cache names and configurations the notebook
used), :func:`outputs` turns their results into the tables, figures, variables and printed lines;
the notebook runs the one and publishes the other.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from quadnn.layers import QuadraticLinear, Square
from quadnn_paper.common import published
from quadnn_paper.common.machine import torch_threads
from quadnn_paper.common.outputs import Figure, Lines, Table, Variables
from quadnn_paper.common.profiles import protocol_of
from quadnn_paper.engine import Computation

__all__ = [
    "PROTOCOLS",
    "protocol",
    "mlp",
    "init_normal_",
    "oscillation",
    "load_draw_",
    "spline_network",
    "shift_polynomial",
    "spline_error_vs_h",
    "hall_meyer_constant",
    "euler_number",
    "euler_asymptotic",
    "variety_network",
    "variety_dimension",
    "variety_dimension_bound",
    "parameter_count",
    "amplification",
    "PAPER",
    "NAME",
    "data",
    "work",
    "outputs",
    "spline_construction",
    "hall_meyer_table",
    "summary",
    "OscillationRow",
    "VarietyRow",
    "variety_table",
]

# --------------------------------------------------------------------------------------
# Protocols
# --------------------------------------------------------------------------------------
#: Architectures of the variety-dimension table (our choice of small networks; the paper gives no table).
VARIETY_ARCHS = [(1, 1, 1), (1, 2, 1), (2, 2, 1), (2, 3, 1), (3, 3, 1), (2, 2, 2, 1), (3, 2, 2, 1)]
VARIETY_ARCHS_EXTRA = [(1, 1, 1, 1), (4, 2, 1), (5, 2, 1), (4, 4, 1), (2, 2, 2, 2, 1)]

PROTOCOLS = {
    "smoke": dict(
        oscillation=dict(
            widths=(1, 10, 10, 10, 10, 1),
            sigmas=(0.01, 0.02, 0.03),
            x_max=100.0,
            x_max_table=(1.0,),
            n_points=201,
            n_draws=50,
            seed=0,
        ),
        spline=dict(functions=("sin", "runge"), n_knots=12, n_h=5, h_max=0.25, seed=0),
        variety=dict(archs=VARIETY_ARCHS, n_trials=1, seed=0),
        amplification=dict(depths=(1, 2, 3, 4), width=10, in_features=10, sigma=1.0, n_draws=50, seed=0),
    ),
    "cpu": dict(
        oscillation=dict(
            widths=(1, 10, 10, 10, 10, 1),
            sigmas=(0.01, 0.02, 0.03),
            x_max=100.0,
            x_max_table=(1.0,),
            n_points=401,
            n_draws=1000,
            seed=0,
        ),
        spline=dict(functions=("sin", "runge", "exp"), n_knots=16, n_h=9, h_max=0.25, seed=0),
        variety=dict(archs=VARIETY_ARCHS + VARIETY_ARCHS_EXTRA, n_trials=3, seed=0),
        amplification=dict(depths=(1, 2, 3, 4, 5, 6), width=10, in_features=10, sigma=1.0, n_draws=500, seed=0),
    ),
    "full": dict(
        # The paper: 1-10-10-10-10-1, ReLU, all parameters ~ N(0, sigma^2), sigma in {0.01, 0.02, 0.03}.
        # It states neither the input range nor a number of draws; those two are ours.
        oscillation=dict(
            widths=(1, 10, 10, 10, 10, 1),
            sigmas=(0.01, 0.02, 0.03),
            x_max=100.0,
            x_max_table=(1.0,),
            n_points=1001,
            n_draws=10000,
            seed=0,
        ),
        spline=dict(functions=("sin", "runge", "exp"), n_knots=32, n_h=13, h_max=0.25, seed=0),
        variety=dict(archs=VARIETY_ARCHS + VARIETY_ARCHS_EXTRA, n_trials=5, seed=0),
        # The paper's estimate assumes i.i.d. unit-variance Gaussian parameters.
        amplification=dict(depths=(1, 2, 3, 4, 5, 6, 7, 8), width=10, in_features=10, sigma=1.0, n_draws=2000, seed=0),
    ),
}

#: Values printed in the paper (facts from the paper, used as its column in our tables).
PAPER = published.EXPRESSIVITY


NAME = "expressivity"


def protocol(profile: str, tiny: bool = False) -> dict:
    """A copy of the protocol of ``profile`` (see :data:`PROTOCOLS`); TINY=1 keeps full's
    architectures, depths and functions (the code paths) on fewer draws, points and trials."""
    return protocol_of(PROTOCOLS, profile, tiny, caps=_tiny_caps)


def _tiny_caps(P: dict) -> dict:
    P["oscillation"].update(
        n_points=min(P["oscillation"]["n_points"], 201), n_draws=min(P["oscillation"]["n_draws"], 100)
    )
    P["spline"].update(n_h=min(P["spline"]["n_h"], 5))
    P["variety"].update(n_trials=1)
    P["amplification"].update(n_draws=min(P["amplification"]["n_draws"], 100))
    return P


def _one_thread(fn):
    """``fn`` on one thread, the thread count restored after: the problems are small, and the other
    cores stay free for concurrent work (as the notebook ran them)."""

    @functools.wraps(fn)
    def on_one_thread(*args, **kwargs):
        with torch_threads(1):
            return fn(*args, **kwargs)

    return on_one_thread


# --------------------------------------------------------------------------------------
# 1. Networks and oscillation at initialisation
# --------------------------------------------------------------------------------------
def mlp(
    widths: Sequence[int], quadratic: bool, activation: Callable[[], nn.Module] | None = nn.ReLU, dtype=torch.float64
) -> nn.Sequential:
    """A fully connected network ``widths[0] -> ... -> widths[-1]``.

    ``quadratic=True`` uses :class:`~quadnn.QuadraticLinear` (full neurons), else ``nn.Linear``;
    ``activation`` (a module factory, or ``None`` for identity) sits between layers, not after the last.
    """
    layers: list[nn.Module] = []
    for h, (i, o) in enumerate(zip(widths[:-1], widths[1:])):
        layers.append(QuadraticLinear(i, o, dtype=dtype) if quadratic else nn.Linear(i, o, dtype=dtype))
        if activation is not None and h < len(widths) - 2:
            layers.append(activation())
    return nn.Sequential(*layers)


@torch.no_grad()
def init_normal_(model: nn.Module, sigma: float, generator: torch.Generator) -> nn.Module:
    """Every parameter (linear branch, gate, power term, biases) ~ N(0, sigma^2), in place."""
    for p in model.parameters():
        p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype) * sigma)
    return model


def _draw_params(widths, quadratic: bool, sigma: float, n_draws: int, generator) -> list[dict]:
    """Parameters of ``n_draws`` networks, every entry ~ N(0, sigma^2), stacked on a leading axis.

    Returned per layer as a dict named like the quadnn/torch attributes (``weight``, ``bias``,
    ``weight_g``, ``bias_g``, ``weight_b``, ``bias_b``), in that drawing order.
    """
    names = ("weight", "bias", "weight_g", "bias_g", "weight_b", "bias_b") if quadratic else ("weight", "bias")
    layers = []
    for i, o in zip(widths[:-1], widths[1:]):
        shapes = {n: ((o, i) if n.startswith("weight") else (o,)) for n in names}
        layers.append(
            {n: torch.randn((n_draws, *s), generator=generator, dtype=torch.float64) * sigma for n, s in shapes.items()}
        )
    return layers


def _batched_forward(layers: list[dict], x: torch.Tensor, quadratic: bool) -> torch.Tensor:
    """Evaluate a stack of ReLU networks (params from :func:`_draw_params`) at ``x`` of shape (N, d0).

    Returns (n_draws, N, d_H). Same arithmetic as :class:`~quadnn.QuadraticLinear` / ``nn.Linear``.
    """
    u = x.expand(layers[0]["weight"].shape[0], *x.shape)
    for h, p in enumerate(layers):

        def lin(v, w, b):
            return torch.einsum("kni,koi->kno", v, w) + b[:, None, :]

        if quadratic:
            u = lin(u, p["weight"], p["bias"]) * lin(u, p["weight_g"], p["bias_g"]) + lin(
                u * u, p["weight_b"], p["bias_b"]
            )
        else:
            u = lin(u, p["weight"], p["bias"])
        if h < len(layers) - 1:
            u = torch.relu(u)
    return u


def load_draw_(model: nn.Sequential, layers: list[dict], k: int) -> nn.Sequential:
    """Copy draw ``k`` of :func:`_draw_params` into an :func:`mlp` of the same widths (in place)."""
    linear = [m for m in model if isinstance(m, nn.Linear)]
    with torch.no_grad():
        for m, p in zip(linear, layers):
            for n, v in p.items():
                getattr(m, n).copy_(v[k])
    return model


@_one_thread
def oscillation(widths, sigmas, x_max, n_points, n_draws, seed, x_max_table=(1.0,), n_curves: int = 1) -> dict:
    """Conventional vs quadratic ReLU nets with every parameter ~ N(0, sigma^2).

    For each kind and sigma, ``n_draws`` networks (seed ``seed``); the first ``n_curves`` are
    returned as curves over ``[-x_max, x_max]`` (``n_points`` points), and for every range
    ``R`` in ``(x_max, *x_max_table)`` the per-draw ``max_{|x| <= R} |f(x)|``.
    Result (JSON-serialisable, sigma and R keys as str):
    ``{"x": [...], "curves": {kind: {sigma: [[...]]}}, "max_abs": {kind: {sigma: {R: [...]}}}}``.
    """
    ranges = sorted({float(x_max), *map(float, x_max_table)})
    grids = [torch.linspace(-r, r, n_points, dtype=torch.float64) for r in ranges]
    x = torch.cat(grids)[:, None]
    out = {"x": grids[ranges.index(float(x_max))].tolist(), "curves": {}, "max_abs": {}}
    for kind in ("conventional", "quadratic"):
        curves, maxima = {}, {}
        for j, sigma in enumerate(sigmas):
            g = torch.Generator().manual_seed(seed + 1000 * j)
            layers = _draw_params(widths, kind == "quadratic", sigma, n_draws, g)
            ys = []
            for chunk in range(0, n_draws, 256):
                part = [{n: v[chunk : chunk + 256] for n, v in p.items()} for p in layers]
                ys.append(_batched_forward(part, x, kind == "quadratic")[..., 0])
            y = torch.cat(ys).split(n_points, dim=1)
            maxima[str(sigma)] = {str(r): yr.abs().amax(1).tolist() for r, yr in zip(ranges, y)}
            curves[str(sigma)] = y[ranges.index(float(x_max))][:n_curves].tolist()
        out["curves"][kind], out["max_abs"][kind] = curves, maxima
    return out


# --------------------------------------------------------------------------------------
# 2. Splines (Proposition 1)
# --------------------------------------------------------------------------------------
def shift_polynomial(coefficients: Sequence[float], shift: float) -> np.ndarray:
    """Coefficients of ``p(y + shift)`` in powers of ``y`` from those of ``p`` in powers of its argument.

    Both lowest power first: if ``p(t) = sum_k c_k t^k`` then ``p(y + s) = sum_j d_j y^j`` with
    ``d_j = sum_{k>=j} c_k binom(k, j) s^(k-j)``.
    """
    c = np.asarray(coefficients, dtype=np.float64)
    return np.array([sum(c[k] * math.comb(k, j) * shift ** (k - j) for k in range(j, len(c))) for j in range(len(c))])


def _power_plan(degree: int) -> list[list[tuple[int, int]]]:
    """Per quadratic layer, how each power ``z^k`` is formed: ``(a, b)`` = ``z^a * z^b`` (``b = 0``: pass ``z^a``).

    Layer ``l`` (1-based) holds the powers ``1 .. min(2^l, degree)``; ``z^1`` itself is the input.
    """
    plan, have = [], 1
    while have < degree:
        new = min(2 * have, degree)
        plan.append([(k, 0) if k <= have else ((k + 1) // 2, k // 2) for k in range(1, new + 1)])
        have = new
    return plan


def spline_network(
    knots: Sequence[float], coefficients: Sequence[Sequence[float]], dtype=torch.float64
) -> nn.Sequential:
    """A quadratic ReLU network (quadnn layers) equal to the polynomial spline on ``[knots[0], knots[-1]]``.

    ``coefficients[i]`` are piece ``i``'s coefficients in powers of ``(x - knots[i])``, lowest first
    (scipy: ``CubicSpline(...).c[::-1, i]``), for ``i = 0 .. n-1`` with ``n = len(knots) - 1``.

    Construction (Proposition 1 of the paper): with ``s_{-1} = 0`` and ``Q_i = s_i - s_{i-1}``,
    ``S(x) = sum_i Q_i(relu(x - x_i) + x_i)`` on ``[x_0, x_n]`` (left of ``x_0`` the network is
    constant ``s_0(x_0)``, right of ``x_n`` it continues ``s_{n-1}``). We write ``Q_i`` in powers of
    ``z_i = relu(x - x_i)``, so the network is

    * layer 1 (linear branch only): ``x -> x - x_i`` for every piece, then ReLU: ``z_i >= 0``;
    * ``ceil(log2 m)`` quadratic layers that form the powers ``z_i^k``, ``k <= m``, each as a
      product of two lower powers (gate ``W_g``) or as a square (power term ``W_b``); the ReLUs
      between them are exact because every power of ``z_i >= 0`` is ``>= 0``;
    * a last layer (linear branch only) summing ``sum_i sum_k q_{i,k} z_i^k + sum_i Q_i(x_i)``.

    Note: the paper's final formula adds a further ``s_0(x_0)``; with its own definitions that
    term is one too many (the sum of the ``R_i`` already equals ``S``), so we leave it out.
    """
    x = np.asarray(knots, dtype=np.float64)
    coefs = [np.asarray(c, dtype=np.float64) for c in coefficients]
    n = len(x) - 1
    if n < 1 or len(coefs) != n:
        raise ValueError(f"need len(coefficients) == len(knots) - 1 >= 1, got {len(coefs)} and {len(x)}")
    if np.any(np.diff(x) <= 0):
        raise ValueError("knots must be strictly increasing")
    m = max(len(c) for c in coefs) - 1
    coefs = [np.pad(c, (0, m + 1 - len(c))) for c in coefs]
    # Q_i in powers of z_i = x - x_i: s_i minus s_{i-1} re-expanded about x_i.
    q = np.stack([coefs[i] - (shift_polynomial(coefs[i - 1], x[i] - x[i - 1]) if i else 0.0) for i in range(n)])
    dd = dict(dtype=dtype)

    def linear_layer(i, o):  # a quadratic layer reduced to its linear branch (ReLinear values)
        layer = QuadraticLinear(i, o, **dd)
        with torch.no_grad():
            layer.relinear_init_()
            layer.weight.zero_()
            layer.bias.zero_()
        return layer

    first = linear_layer(1, n)
    with torch.no_grad():
        first.weight.fill_(1.0)
        first.bias.copy_(torch.as_tensor(-x[:-1], **dd))
    layers: list[nn.Module] = [first, nn.ReLU()]
    width = 1  # powers per piece currently available: z^1 .. z^width, stored piece-major
    for step in _power_plan(max(m, 1)):
        new = len(step)
        layer = QuadraticLinear(n * width, n * new, **dd)
        with torch.no_grad():
            for p in layer.parameters():
                p.zero_()
            for i in range(n):
                for k, (a, b) in enumerate(step):
                    row = i * new + k
                    if b == 0:  # pass z^a through: r = z^a, g = 1
                        layer.weight[row, i * width + a - 1] = 1.0
                        layer.bias_g[row] = 1.0
                    elif a == b:  # z^(2a) via the power term
                        layer.weight_b[row, i * width + a - 1] = 1.0
                    else:  # z^a * z^b via the gate
                        layer.weight[row, i * width + a - 1] = 1.0
                        layer.weight_g[row, i * width + b - 1] = 1.0
        layers += [layer, nn.ReLU()]
        width = new
    last = linear_layer(n * width, 1)
    with torch.no_grad():
        last.weight.copy_(torch.as_tensor(q[:, 1 : width + 1].reshape(1, -1), **dd))
        last.bias.fill_(float(q[:, 0].sum()))
    layers.append(last)
    return nn.Sequential(*layers)


def euler_number(n: int) -> int:
    """The Euler (secant) number ``E_n`` (``E_0 = 1, E_2 = -1, E_4 = 5, ...``; zero for odd ``n``)."""
    if n % 2:
        return 0
    E = [Fraction(1)]
    for k in range(1, n // 2 + 1):  # sum_{j=0}^{k} binom(2k, 2j) E_{2j} = 0
        E.append(-sum(math.comb(2 * k, 2 * j) * E[j] for j in range(k)))
    return int(E[n // 2])


def hall_meyer_constant(m: int) -> float:
    """``|E_2m| / (2^2m (2m)!)``: ``||f - S||_inf <= const * ||f^(2m)||_inf h^2m`` (Hall & Meyer)."""
    return abs(euler_number(2 * m)) / (2 ** (2 * m) * math.factorial(2 * m))


def euler_asymptotic(m: int, factor: float = 8.0) -> float:
    """``factor * sqrt(m/pi) (4m/(pi e))^2m``; the correct asymptotic of ``|E_2m|`` has factor 8,
    the paper prints it with factor 1."""
    return factor * math.sqrt(m / math.pi) * (4 * m / (math.pi * math.e)) ** (2 * m)


_FUNCS = {  # name: (sympy expression in x, interval)
    "sin": ("sin(x)", (0.0, 2 * math.pi)),
    "runge": ("1/(1+16*x**2)", (-1.0, 1.0)),
    "exp": ("exp(x)", (0.0, 1.0)),
}


def named_function(name: str):
    """``(f, df, (a, b), sup|f''|, sup|f''''|)`` for a named test function (derivatives via sympy)."""
    import sympy

    xs = sympy.Symbol("x")
    expr = sympy.sympify(_FUNCS[name][0])
    a, b = _FUNCS[name][1]
    f = sympy.lambdify(xs, expr, "numpy")
    df = sympy.lambdify(xs, sympy.diff(expr, xs), "numpy")
    grid = np.linspace(a, b, 200001)
    sup = [
        float(np.max(np.abs(sympy.lambdify(xs, sympy.diff(expr, xs, k), "numpy")(grid) * np.ones_like(grid))))
        for k in (2, 4)
    ]
    return f, df, (a, b), sup[0], sup[1]


def cubic_spline(name: str, n_pieces: int):
    """Clamped (complete) cubic interpolating spline of a test function on ``n_pieces`` equal pieces."""
    from scipy.interpolate import CubicSpline

    f, df, (a, b), *_ = named_function(name)
    knots = np.linspace(a, b, n_pieces + 1)
    return knots, CubicSpline(knots, f(knots), bc_type=((1, float(df(a))), (1, float(df(b)))))


def spline_error_vs_h(name: str, hs: Sequence[float], n_eval: int = 20001) -> dict:
    """Max error of linear and clamped cubic spline interpolation on uniform grids of step ~h.

    Returns the actual steps, the errors, and the errors divided by ``||f^(2m)|| h^(2m)`` (to be
    compared with :func:`hall_meyer_constant`).
    """
    f, df, (a, b), d2, d4 = named_function(name)
    xe = np.linspace(a, b, n_eval)
    rows = []
    for h in hs:
        n = max(1, int(round((b - a) / h)))
        knots, cs = cubic_spline(name, n)
        hh = (b - a) / n
        e1 = float(np.max(np.abs(np.interp(xe, knots, f(knots)) - f(xe))))
        e3 = float(np.max(np.abs(cs(xe) - f(xe))))
        rows.append(dict(h=hh, linear=e1, cubic=e3, linear_ratio=e1 / (d2 * hh**2), cubic_ratio=e3 / (d4 * hh**4)))
    return dict(function=name, sup_d2=d2, sup_d4=d4, rows=rows)


@_one_thread
def spline_construction(functions: Sequence[str], n_pieces: int, n_eval: int = 20001, plot_every: int = 20) -> dict:
    """Proposition 1 carried out: per test function, the quadratic network :func:`spline_network`
    builds from its clamped cubic spline on ``n_pieces`` pieces, and how far it is from the spline.

    The error is measured on ``n_eval`` equidistant points; a figure gets every ``plot_every``-th
    of them (it needs no more, and the cache stays small). Per function: ``pieces``, ``layers``
    (linear and quadratic layers), ``parameters``, ``error`` (max |Q - S|), ``scale`` (max |S|),
    ``paper_formula_error`` (``|s_0(x_0)|``, the term the paper's last formula adds once too
    often) and ``gap`` (``|Q - S|`` thinned by :func:`_envelope`, so a figure shows the error the
    table quotes). The first function also has the figure's ``curves`` (``x``, the spline ``S``,
    the network ``Q``), its ``knots`` with ``S`` there, and the network's ``summands``
    ``R_i = Q_i(relu(x - x_i) + x_i)``, each piece's share of the last layer.
    """
    out = {}
    for j, name in enumerate(functions):
        knots, cs = cubic_spline(name, n_pieces)
        net = spline_network(knots, [cs.c[::-1, i] for i in range(n_pieces)])
        x = np.linspace(knots[0], knots[-1], n_eval)
        with torch.no_grad():
            q = net(torch.as_tensor(x)[:, None])[:, 0].numpy()
        s = cs(x)
        out[name] = dict(
            pieces=n_pieces,
            layers=len([m for m in net if isinstance(m, nn.Linear)]),
            parameters=sum(p.numel() for p in net.parameters()),
            error=float(np.max(np.abs(q - s))),
            scale=float(np.max(np.abs(s))),
            paper_formula_error=abs(float(cs(knots[0]))),
            gap=_envelope(x, np.abs(q - s), plot_every),
        )
        if j == 0:
            every = slice(None, None, plot_every)
            out[name].update(
                curves=dict(x=x[every].tolist(), spline=s[every].tolist(), network=q[every].tolist()),
                knots=knots.tolist(),
                knots_spline=cs(knots).tolist(),
                summands=_summands(net, x[every], n_pieces),
            )
    return out


def _envelope(x: np.ndarray, y: np.ndarray, every: int) -> dict:
    """``y`` thinned for a figure without losing its extremes: per block of ``every`` points its
    smallest and largest value, in the order of ``x`` (what a line through all the points shows,
    drawn at the figure's resolution)."""
    keep = sorted(
        {
            int(start + k)
            for start in range(0, len(y), every)
            for k in (y[start : start + every].argmin(), y[start : start + every].argmax())
        }
    )
    return dict(x=x[keep].tolist(), value=y[keep].tolist())


def _summands(net: nn.Sequential, x: np.ndarray, n_pieces: int) -> list[list[float]]:
    """The spline network's summands at ``x``: per piece, its powers ``z_i^k`` (all but the last
    layer, stored piece-major) weighted by its coefficients in the last layer."""
    w = net[-1].weight.detach().numpy()[0]
    with torch.no_grad():
        powers = net[:-1](torch.as_tensor(x)[:, None]).numpy()
    per = len(w) // n_pieces
    return [(powers[:, i * per : (i + 1) * per] @ w[i * per : (i + 1) * per]).tolist() for i in range(n_pieces)]


def hall_meyer_table(ms: Sequence[int]) -> dict:
    """Per ``m`` (keys as str): ``|E_2m|``, the Hall--Meyer constant as a float and as the fraction
    ``numerator / denominator``, and the asymptotic of ``|E_2m|`` as the paper prints it (factor 1)
    and with the correct factor 8."""
    out = {}
    for m in ms:
        euler = abs(euler_number(2 * m))
        exact = Fraction(euler, 2 ** (2 * m) * math.factorial(2 * m))
        out[str(m)] = dict(
            euler=euler,
            constant=hall_meyer_constant(m),
            numerator=exact.numerator,
            denominator=exact.denominator,
            asymptotic_paper=euler_asymptotic(m, 1.0),
            asymptotic_corrected=euler_asymptotic(m, 8.0),
        )
    return out


# --------------------------------------------------------------------------------------
# 3. Dimension of the algebraic variety (Lemma, Proposition 2)
# --------------------------------------------------------------------------------------
NETWORKS = ("quadratic", "quadratic_activation")


def _check_network(network: str) -> str:
    if network not in NETWORKS:
        raise ValueError(f"network must be one of {NETWORKS}, got {network!r}")
    return network


def variety_network(widths: Sequence[int], network: str, bias: bool = True, dtype=torch.float64) -> nn.Sequential:
    """The two polynomial networks of the paper's variety section, from quadnn layers.

    ``"quadratic"`` is ``p_2 = q_H o sigma_2 o ... o q_1`` with full quadratic neurons in *every*
    layer, the last included, and ``sigma_2(z) = z`` (so its degree is ``2^H``).
    ``"quadratic_activation"`` is ``p_1 = l_H o sigma_1 o ... o l_1`` with affine ``l_h`` and
    ``sigma_1(z) = z^2`` (degree ``2^(H-1)``). ``bias=False`` drops all biases (Kileel et al.'s
    homogeneous setting; quadratic-activation only).
    """
    _check_network(network)
    if network == "quadratic":
        if not bias:
            raise ValueError("bias=False is only defined for the quadratic-activation network")
        return mlp(widths, quadratic=True, activation=None, dtype=dtype)
    layers: list[nn.Module] = []
    for h, (i, o) in enumerate(zip(widths[:-1], widths[1:])):
        layers.append(nn.Linear(i, o, bias=bias, dtype=dtype))
        if h < len(widths) - 2:
            layers.append(Square())
    return nn.Sequential(*layers)


def parameter_count(widths: Sequence[int], network: str, bias: bool = True) -> int:
    """Parameters of :func:`variety_network`, counted from the model itself."""
    return sum(p.numel() for p in variety_network(widths, network, bias).parameters())


def _monomials(widths: Sequence[int], network: str, bias: bool = True) -> int:
    """``d_H`` times the number of monomials a network of this degree can use."""
    H, d0 = len(widths) - 1, widths[0]
    degree = 2**H if network == "quadratic" else 2 ** (H - 1)
    count = math.comb(d0 + degree, d0) if bias else math.comb(d0 + degree - 1, degree)
    return widths[-1] * count


def variety_dimension(
    widths: Sequence[int],
    network: str,
    bias: bool = True,
    n_trials: int = 2,
    seed: int = 0,
    return_details: bool = False,
):
    """Numerical dimension of the variety of functions of ``variety_network(widths, network)``.

    The dimension of the (closure of the) image of a polynomial map equals the rank of its
    Jacobian at a generic point. We evaluate the network at ``N`` random inputs in
    ``[-1, 1]^d0`` with ``N d_H >= 2 * (number of monomials) + 10`` (so evaluation is injective
    on the polynomials the network can produce), take the Jacobian of the ``N d_H`` outputs
    with respect to all parameters (float64, at N(0, 1) parameters), normalise its columns and
    rows (this leaves the rank unchanged), and read the rank off the largest gap of the
    log-singular values. The rank is the maximum over ``n_trials`` random draws; each draw's
    gap (in decades) is reported with ``return_details``.
    """
    _check_network(network)
    model = variety_network(widths, network, bias)
    names = [n for n, _ in model.named_parameters()]
    shapes = [p.shape for _, p in model.named_parameters()]
    sizes = [p.numel() for _, p in model.named_parameters()]
    n_rows = 2 * _monomials(widths, network, bias) + 10
    n_points = -(-n_rows // widths[-1])
    ranks, gaps = [], []
    for t in range(n_trials):
        g = torch.Generator().manual_seed(seed + 1000 * t)
        X = torch.rand(n_points, widths[0], generator=g, dtype=torch.float64) * 2 - 1
        theta = torch.randn(sum(sizes), generator=g, dtype=torch.float64)

        def f(th, X=X):
            params = {n: v.reshape(s) for n, v, s in zip(names, th.split(sizes), shapes)}
            return torch.func.functional_call(model, params, (X,)).reshape(-1)

        J = torch.func.jacrev(f)(theta)
        J = J / J.norm(dim=0, keepdim=True).clamp_min(1e-300)
        J = J / J.norm(dim=1, keepdim=True).clamp_min(1e-300)
        s = torch.linalg.svdvals(J)
        logs = torch.log10((s / s[0]).clamp_min(1e-300))
        if len(s) == 1 or float(logs[-1]) > -8.0:  # no tiny singular value: full rank
            rank, gap = len(s), float("inf")
        else:
            drops = logs[:-1] - logs[1:]
            rank, gap = int(drops.argmax()) + 1, float(drops.max())
        ranks.append(rank)
        gaps.append(gap)
    dim = max(ranks)
    if return_details:
        return dim, dict(ranks=ranks, gaps=gaps, n_points=n_points, n_params=sum(sizes))
    return dim


def _neuron_dim(d: int) -> int:
    """Upper bound on the dimension of the functions one full quadratic neuron of ``d`` inputs computes:
    ``3d + 3`` parameters less the one-dimensional rescaling ``(r, g) -> (t r, g / t)``, and at most
    the ``binom(d + 2, 2)`` quadratics in ``d`` variables."""
    return min(3 * d + 2, math.comb(d + 2, 2))


def _all_quadratics(d: int) -> bool:
    """Whether one full quadratic neuron of ``d`` inputs can compute every quadratic (true for d <= 3:
    rank-2 product plus diagonal fills the symmetric matrices, and the linear part ``b_g w_r + b_r w_g``
    is free when ``w_r, w_g`` span all of R^d or can be chosen so)."""
    return d <= 3


def variety_dimension_bound(widths: Sequence[int], network: str, kind: str = "paper") -> int:
    """Upper bounds on the variety dimension.

    ``kind="paper"``: exactly as printed. For the quadratic network (the Lemma)
    ``min(sum_h (3 d_{h-1} d_h + 3 d_{h-1}) - sum_{h<H} d_h, d_H binom(d_0 + 2^(H-1) - 1, 2^(H-1)))``;
    for the quadratic-activation network (Kileel et al. as the paper writes it)
    ``min(sum_h (d_{h-1} d_h + d_{h-1}) - sum_{h<H} d_h, d_H binom(d_0 + 2^(H-1) - 1, 2^(H-1)))``.

    ``kind="corrected"``: ``min(P - S, d_H binom(d_0 + D, d_0))`` with ``P`` the true parameter
    count (biases have ``d_h`` entries, not ``d_{h-1}``), ``D`` the true degree (``2^H`` for the
    quadratic network, whose last layer is quadratic; ``2^(H-1)`` with quadratic activation), the
    monomials counted up to degree ``D`` (biases make the polynomials inhomogeneous), and ``S`` the
    dimension of parameter symmetries present for every width: for the quadratic network the
    per-neuron rescaling ``(r, g) -> (t r, g / t)`` (``d_h`` per layer, all ``H`` layers) plus the
    rescaling of each hidden unit against the next layer (``d_h``, ``h < H``); for quadratic
    activation the latter only.

    ``kind="layerwise"`` (quadratic network only): count functions per layer instead of parameters
    -- each neuron contributes at most :func:`_neuron_dim` -- and subtract, for each hidden layer
    ``h``, the affine reparametrisations of its output that the neighbouring layers absorb
    (``d_h^2 + d_h`` when both the layer and the next compute arbitrary quadratics, i.e.
    ``d_{h-1}, d_h <= 3``; translations and scalings, ``2 d_h``, when only the next does;
    scalings ``d_h`` otherwise), capped by the monomial count.
    """
    _check_network(network)
    d, H = list(widths), len(widths) - 1
    hidden = sum(d[1:H])
    if kind == "paper":
        k = 3 if network == "quadratic" else 1
        first = sum(k * d[h - 1] * d[h] + k * d[h - 1] for h in range(1, H + 1)) - hidden
        D = 2 ** (H - 1)
        return min(first, d[H] * math.comb(d[0] + D - 1, D))
    cap = _monomials(widths, network)
    if kind == "corrected":
        P = parameter_count(widths, network)
        S = (sum(d[1 : H + 1]) + hidden) if network == "quadratic" else hidden
        return min(P - S, cap)
    if kind == "layerwise":
        if network != "quadratic":
            raise ValueError('kind="layerwise" is implemented for the quadratic network only')
        count = sum(d[h] * _neuron_dim(d[h - 1]) for h in range(1, H + 1))
        for h in range(1, H):
            if _all_quadratics(d[h]) and _all_quadratics(d[h - 1]):
                count -= d[h] * d[h] + d[h]
            elif _all_quadratics(d[h]):
                count -= 2 * d[h]
            else:
                count -= d[h]
        return min(count, cap)
    raise ValueError(f'kind must be "paper", "corrected" or "layerwise", got {kind!r}')


# --------------------------------------------------------------------------------------
# 4. Amplification ||df/dx|| at x = 0
# --------------------------------------------------------------------------------------
def _input_gradient_norm(net: nn.Module, in_features: int) -> float:
    x = torch.zeros(1, in_features, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(net(x).sum(), x)
    return float(g.norm())


@_one_thread
def amplification(depths, width, in_features, sigma, n_draws, seed) -> dict:
    """``||df/dx||_2`` at ``x = 0`` for ReLU networks ``in_features -> width x (H-1) -> 1``.

    Per depth ``H`` and draw: a conventional net with all parameters ~ N(0, sigma^2); a quadratic
    net with *all* parameters ~ N(0, sigma^2) ("random"); and the quadratic net with the
    conventional net's weights as its linear branch and ReLinear values for the quadratic terms
    ("relinear"). Also returns the paper's scale ``prod_h sqrt(d_h d_{h-1})``.
    """
    from quadnn.relinear import transfer_weights_

    out = {}
    for H in depths:
        widths = [in_features] + [width] * (H - 1) + [1]
        scale = math.prod(math.sqrt(a * b) for a, b in zip(widths[:-1], widths[1:]))
        conv, quad = mlp(widths, quadratic=False), mlp(widths, quadratic=True)
        res = dict(conventional=[], quadratic_random=[], quadratic_relinear=[])
        for k in range(n_draws):
            g = torch.Generator().manual_seed(seed + 7919 * H + k)
            init_normal_(conv, sigma, g)
            res["conventional"].append(_input_gradient_norm(conv, in_features))
            transfer_weights_(conv, quad)
            res["quadratic_relinear"].append(_input_gradient_norm(quad, in_features))
            init_normal_(quad, sigma, g)
            res["quadratic_random"].append(_input_gradient_norm(quad, in_features))
        out[str(H)] = dict(widths=widths, scale=scale, **res)
    return out


# --------------------------------------------------------------------------------------
# The section's numbers
# --------------------------------------------------------------------------------------
@_one_thread
def variety_table(archs, n_trials: int, seed: int) -> list[dict]:
    """Per architecture and network kind: the numeric variety dimension, its singular-value gap, the
    parameter count and the paper's, the corrected and (quadratic) the layerwise bounds."""
    out = []
    for w in archs:
        row = dict(widths=list(w))
        for net in NETWORKS:
            dim, det = variety_dimension(w, net, n_trials=n_trials, seed=seed, return_details=True)
            row[net] = dict(
                dim=dim,
                gap=min(det["gaps"]),
                params=parameter_count(w, net),
                paper=variety_dimension_bound(w, net, "paper"),
                corrected=variety_dimension_bound(w, net, "corrected"),
            )
        row["quadratic"]["layerwise"] = variety_dimension_bound(w, "quadratic", "layerwise")
        out.append(row)
    return out


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


def _oscillation_summary(osc: dict) -> dict:
    """Rows and variables of the oscillation table from :func:`oscillation`'s output."""
    sigmas = sorted(osc["max_abs"]["conventional"], key=float)
    ranges = sorted(osc["max_abs"]["conventional"][sigmas[0]], key=float)
    rows = [_oscillation_row(osc, kind, s, R) for kind in ("conventional", "quadratic") for s in sigmas for R in ranges]
    return dict(oscillation_rows=rows, oscillation_variables=_oscillation_variables(osc, sigmas, ranges))


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


def _variety_summary(vd: list[dict]) -> dict:
    """Rows and variables of the variety table from :func:`variety_table`'s output."""
    rows = [_variety_row(r) for r in vd]
    return dict(variety_rows=rows, variety_variables=_variety_variables(vd, rows))


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


def _amplification_summary(amp: dict) -> dict:
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
    return dict(
        amplification=dict(depths=np.array([int(d) for d in depths]), normalised=normalised, ratio=ratio),
        amplification_rows=[_amplification_row(d, amp[d], r) for d, r in zip(depths, ratio)],
        amplification_variables=_amplification_variables(amp, depths, normalised, ratio),
    )


def summary(results: dict, profile: str, tiny: bool = False) -> dict:
    """Rows and variables of the variety and amplification tables and the oscillation ratios, from
    ``results = dict(oscillation=..., variety=..., amplification=...)`` (the cached outputs of
    :func:`oscillation`, :func:`variety_table` and :func:`amplification`)."""
    out: dict = {}
    if "oscillation" in results:
        out.update(_oscillation_summary(results["oscillation"]))
    if "variety" in results:
        out.update(_variety_summary(results["variety"]))
    if "amplification" in results:
        out.update(_amplification_summary(results["amplification"]))
    return out


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

#: Column names of the section's tables (their LaTeX heads: quadnn_paper.latex.expressivity).
HEADERS = {
    "expressivity_oscillation": ["network", "sigma", "x range R", "median max|f|", "10% quantile", "90% quantile"],
    "expressivity_spline_exact": [
        "function",
        "pieces",
        "layers",
        "parameters",
        "max |Q-S|",
        "relative",
        "paper formula error",
    ],
    "expressivity_spline_rates": ["function", "slope linear", "slope cubic", "max ratio linear", "max ratio cubic"],
    "expressivity_hall_meyer": ["m", "|E_2m|", "constant", "paper printed", "paper asymptotic", "asymptotic x8"],
    "expressivity_variety": [
        "widths",
        "P (p2)",
        "paper (p2)",
        "corrected (p2)",
        "layerwise (p2)",
        "numeric (p2)",
        "P (p1)",
        "paper (p1)",
        "corrected (p1)",
        "numeric (p1)",
        "p2 > p1",
    ],
    "expressivity_amplification": [
        "H",
        "prod sqrt(d_h d_h-1)",
        "conventional",
        "quadratic random",
        "quadratic ReLinear",
        "ratio quad/conv",
        "paper 2^H",
    ],
}


class Part(NamedTuple):
    """One part of the section's outputs: its tables, figures and variables (what stands in their
    place while the computations it needs are pending)."""

    tables: tuple[str, ...]
    figures: tuple[str, ...]
    variables: tuple[str, ...]


PARTS = {
    "oscillation": Part(
        ("expressivity_oscillation",),
        ("expressivity_oscillation",),
        ("OscXmax", "OscXmin", "OscQuadRatio", "OscConvRatio", "OscQuadRatioSmall", "OscDraws"),
    ),
    "spline_construction": Part(
        ("expressivity_spline_exact",),
        ("expressivity_spline_construction",),
        ("SplineRelErr", "SplinePieces", "SplineEps", "SplineEpsMultiple"),
    ),
    "spline_error": Part(
        ("expressivity_spline_rates",),
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
    "hall_meyer": Part(("expressivity_hall_meyer",), (), ()),
    "variety": Part(
        ("expressivity_variety",),
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
        ("expressivity_amplification",),
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
    return Computation(name, f"{__name__}:{function}", config, seconds=max(1, round(seconds)))


def _work(profile: str, tiny: bool) -> dict[str, list[Computation]]:
    """The section's computations, by the part of its outputs that needs them (cache names and
    configurations as the notebook passed them to ``cached``: the cache keys are unchanged)."""
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
    return dict(
        oscillation=[
            _computation(
                "expressivity_oscillation",
                "oscillation",
                osc,
                per["oscillation_point"] * osc["n_draws"] * osc["n_points"] * ranges * len(osc["sigmas"]),
            )
        ],
        spline_construction=[
            _computation(
                "expressivity_spline_construction",
                "spline_construction",
                construction,
                per["spline_function"] * len(spl["functions"]),
            )
        ],
        spline_error=[
            _computation(
                "expressivity_spline_h",
                "spline_error_vs_h",
                dict(name=name, hs=hs),
                per["spline_function"] + per["spline_step"] * len(hs),
            )
            for name in spl["functions"]
        ],
        hall_meyer=[_computation("expressivity_hall_meyer", "hall_meyer_table", dict(ms=HALL_MEYER_MS), 0)],
        variety=[
            _computation(
                "expressivity_variety",
                "variety_table",
                {k: [list(a) for a in v] if k == "archs" else v for k, v in var.items()},
                per["variety_trial"] * len(var["archs"]) * var["n_trials"],
            )
        ],
        amplification=[
            _computation(
                "expressivity_amplification",
                "amplification",
                amp,
                per["amplification_draw"] * amp["n_draws"] * len(amp["depths"]),
            )
        ],
    )


def work(profile: str, tiny: bool = False) -> list:
    """The section's work: no engine runs, only computations (random draws, splines, ranks)."""
    return [c for part in _work(profile, tiny).values() for c in part]


def outputs(results: dict, profile: str, tiny: bool = False) -> list:
    """The section's tables, figures, variables and printed lines from its work's ``results``; a
    part whose computations are pending shows as pending."""
    P = protocol(profile, tiny)
    got = {part: [results[c.key] for c in cs] for part, cs in _work(profile, tiny).items()}
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
    out = [Lines([f"profile {profile}"])]
    for part, make in build.items():
        needed = [r for p in _NEEDS.get(part, (part,)) for r in got[p]]
        out += make() if all(r is not None for r in needed) else _pending(part)
    return out


_NEEDS = {"spline_error": ("spline_error", "hall_meyer")}  # a part's computations, where not its own


def _pending(part: str) -> list:
    """What stands in for a part whose computations are pending on a runner: its tables with one
    pending row, its figures with the word, its variables reading "pending" (the paper builds)."""
    shape = PARTS[part]
    return [
        Lines([f"{part}: pending (see make status)"]),
        *[Table(t, HEADERS[t], [["pending"] + [""] * (len(HEADERS[t]) - 1)]) for t in shape.tables],
        *[Figure(f, _pending_figure) for f in shape.figures],
        Variables({v: "pending" for v in shape.variables}),
    ]


def _pending_figure():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3.5, 1.0))
    ax.axis("off")
    ax.text(0.5, 0.5, "pending", ha="center", va="center", fontsize=8)
    return fig


# -- 1. oscillation ---------------------------------------------------------------------
def _oscillation_outputs(osc: dict, cfg: dict) -> list:
    S = _oscillation_summary(osc)
    rows = S["oscillation_rows"]
    return [
        Lines([f"{r[0]:>12} sigma={r[1]:<5} R={r[2]:<6g} median={r[3]:.3g}  [{r[4]:.2g}, {r[5]:.2g}]" for r in rows]),
        Figure("expressivity_oscillation", lambda: _oscillation_figure(osc, cfg)),
        Table("expressivity_oscillation", HEADERS["expressivity_oscillation"], rows, digits=3),
        Variables({**S["oscillation_variables"], "OscDraws": cfg["n_draws"]}),
    ]


def _oscillation_figure(osc: dict, cfg: dict):
    """One draw per network kind (rows) and sigma (columns) over the whole input range."""
    import matplotlib.pyplot as plt

    x = np.array(osc["x"])
    sigmas = [str(s) for s in cfg["sigmas"]]
    fig, axes = plt.subplots(2, len(sigmas), figsize=(7.2, 3.6), sharex=True)
    for row, kind in enumerate(("conventional", "quadratic")):
        for col, s in enumerate(sigmas):
            ax = axes[row, col]
            ax.plot(x, np.array(osc["curves"][kind][s][0]), lw=1.2, color="C0" if row == 0 else "C3")
            ax.set_title(f"{kind}, $\\sigma$={s}", fontsize=8)
            ax.tick_params(labelsize=6.5)
            ax.yaxis.get_offset_text().set_fontsize(6.5)
            if row == 1:
                ax.set_xlabel("x", fontsize=7)
    widths = "-".join(map(str, cfg["widths"]))
    fig.suptitle(f"{widths} ReLU nets at N(0, $\\sigma^2$) init (one draw per panel)", fontsize=8)
    fig.supylabel("network output f(x)", fontsize=7)
    fig.tight_layout()
    return fig


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
        Table("expressivity_spline_exact", HEADERS["expressivity_spline_exact"], rows, digits=2),
        Variables(
            dict(
                SplineRelErr=(worst, 2),
                SplinePieces=next(iter(con.values()))["pieces"],
                SplineEps=(eps, 2),
                SplineEpsMultiple=int(math.ceil(worst / eps)),
            )
        ),
        Lines(exact, check=True),
        Figure("expressivity_spline_construction", lambda: _construction_figure(con, functions)),
    ]


def _construction_figure(con: dict, functions: Sequence[str]):
    """The first function's spline S and network Q, the network's summands, and |Q - S| of all."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(7.2, 2.3))
    c = con[functions[0]]
    x = np.array(c["curves"]["x"])
    ax = axes[0]
    ax.plot(x, c["curves"]["spline"], lw=2.5, color="0.75", label="cubic spline $S$")
    ax.plot(x, c["curves"]["network"], lw=1, color="C3", ls="--", label="quadratic net $Q$")
    ax.plot(c["knots"], c["knots_spline"], "k.", ms=3)
    ax.set_title(f"{functions[0]}: $S$ (grey), $Q$ (dashed)", fontsize=8)  # no legend over the curve
    ax.set_ylabel("$S(x)$, $Q(x)$", fontsize=7)
    ax = axes[1]
    for summand in c["summands"]:
        ax.plot(x, summand, lw=0.8)
    ax.set_title("summands $R_i = Q_i(\\mathrm{relu}(x-x_i)+x_i)$", fontsize=8)
    ax.set_ylabel("$R_i(x)$", fontsize=7)
    ax = axes[2]
    for name in functions:
        gap = con[name]["gap"]
        ax.semilogy(gap["x"], np.array(gap["value"]) + 1e-18, lw=0.6, label=name)  # + 1e-18: 0 on a log axis
    ax.axhline(np.finfo(float).eps, color="k", lw=0.6, ls=":")
    ax.set_title("$|Q-S|$ (float64; dotted: eps)", fontsize=8)
    ax.set_ylabel("$|Q(x)-S(x)|$", fontsize=7)
    ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)  # beside the panel
    for ax in axes:
        ax.tick_params(labelsize=6.5)
        ax.set_xlabel("x", fontsize=7)
    fig.tight_layout()
    return fig


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
        Figure("expressivity_spline_error", lambda: _spline_error_figure(err, c1, c2)),
        Table("expressivity_spline_rates", HEADERS["expressivity_spline_rates"], rows, digits=3),
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


def _spline_error_figure(err: dict, c1: float, c2: float):
    """Error against h with the Hall--Meyer bounds (left), and the error over the bound (right)."""
    import matplotlib.pyplot as plt
    import matplotlib.ticker as mticker

    fig, axes = plt.subplots(1, 2, figsize=(7.2, 2.6))
    for k, (name, r) in enumerate(err.items()):
        h = np.array([x["h"] for x in r["rows"]])
        e1 = np.array([x["linear"] for x in r["rows"]])
        e3 = np.array([x["cubic"] for x in r["rows"]])
        axes[0].loglog(h, e1, "o-", ms=3, color=f"C{k}", label=f"{name} linear")
        axes[0].loglog(h, e3, "s--", ms=3, color=f"C{k}", label=f"{name} cubic")
        axes[0].loglog(h, c1 * r["sup_d2"] * h**2, ":", color=f"C{k}", lw=0.8)
        axes[0].loglog(h, c2 * r["sup_d4"] * h**4, ":", color=f"C{k}", lw=0.8)
        axes[1].semilogx(
            h, [x["linear_ratio"] / c1 for x in r["rows"]], "o-", ms=3, color=f"C{k}", label=f"{name} linear"
        )
        axes[1].semilogx(
            h, [x["cubic_ratio"] / c2 for x in r["rows"]], "s--", ms=3, color=f"C{k}", label=f"{name} cubic"
        )
    axes[0].set_xlabel("h", fontsize=7)
    axes[0].set_ylabel(r"$\|f-S\|_\infty$", fontsize=7)
    axes[0].set_title("error vs h (dotted: Hall--Meyer bounds)", fontsize=8)
    # Beside the panel: the curves fill it.
    axes[0].legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    axes[1].axhline(1, color="k", lw=0.6)
    axes[1].set_ylim(0, 1.1)
    axes[1].set_title(r"error / (const $\|f^{(2m)}\|\, h^{2m}$)", fontsize=8)
    axes[1].set_xlabel("h", fontsize=7)
    axes[1].set_ylabel("error / bound", fontsize=7)
    for ax in axes:
        ax.tick_params(labelsize=6.5)
        ax.xaxis.set_minor_formatter(mticker.NullFormatter())  # decades only: minor labels collided
    fig.tight_layout()
    return fig


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
        Table("expressivity_hall_meyer", HEADERS["expressivity_hall_meyer"], rows, digits=3),
    ]


# -- 4. the variety's dimension ---------------------------------------------------------------
def _variety_outputs(vd: list[dict]) -> list:
    S = _variety_summary(vd)
    rows, V = S["variety_rows"], S["variety_variables"]
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
        Table("expressivity_variety", HEADERS["expressivity_variety"], rows),
        Variables(V),
    ]


# -- 5. amplification ---------------------------------------------------------------------
def _amplification_outputs(amp: dict, cfg: dict) -> list:
    S = _amplification_summary(amp)
    rows, V = S["amplification_rows"], S["amplification_variables"]
    return [
        Figure("expressivity_amplification", lambda: _amplification_figure(S["amplification"])),
        Table("expressivity_amplification", HEADERS["expressivity_amplification"], rows, digits=3),
        Lines([str(r) for r in rows]),
        Variables({"AmpDraws": cfg["n_draws"], "AmpWidth": cfg["width"], **V}),
        Lines([f"ReLinear quadratic == conventional at every depth and draw: {V['AmpRelinearEqual'] == 'equal'}"]),
    ]


def _amplification_figure(A: dict):
    """The median input gradient over the paper's scale per depth (left) and the median ratio
    quadratic / conventional (right), against the paper's 2^H."""
    import matplotlib.pyplot as plt

    H, med, ratio = A["depths"], A["normalised"], A["ratio"]
    fig, axes = plt.subplots(1, 2, figsize=(7.2, 2.6))
    ax = axes[0]
    ax.semilogy(H, med["conventional"], "o-", label="conventional")
    ax.semilogy(H, med["quadratic_random"], "s-", label="quadratic, random")
    ax.semilogy(H, med["quadratic_relinear"], "x--", label="quadratic, ReLinear")
    ax.semilogy(H, np.ones_like(H, dtype=float), "k:", lw=0.8, label="paper: conventional")
    ax.semilogy(H, 2.0**H, "k--", lw=0.8, label="paper: quadratic $2^H$")
    ax.set_xlabel("depth H", fontsize=7)
    ax.set_ylabel(r"$\|\partial f/\partial x\|_{x=0} / \prod_h\sqrt{d_h d_{h-1}}$", fontsize=7)
    ax.set_title("input gradient (median over draws)", fontsize=8)  # short: the legend sits beside it
    # Beside the panel: the curves span every decade.
    ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    ax = axes[1]
    ax.semilogy(H, ratio, "s-", color="C1", label="measured: quadratic / conventional")
    ax.semilogy(H, 2.0**H, "k--", lw=0.8, label="paper: $2^H$")
    ax.set_xlabel("depth H", fontsize=7)
    ax.set_ylabel("quadratic / conventional", fontsize=7)
    ax.set_title("amplification ratio (median over draws)", fontsize=8)
    ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    for ax in axes:
        ax.tick_params(labelsize=6.5)
    fig.tight_layout()
    return fig
