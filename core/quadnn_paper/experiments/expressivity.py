"""The expressivity experiments (the paper's Section III and its first figure), each a plain
function of its protocol entry, computed by the section as a cached computation.

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
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np
import torch
from torch import nn

from quadnn.layers import QuadraticLinear, Square
from quadnn_paper.common.machine import torch_threads

__all__ = [
    "mlp",
    "init_normal_",
    "oscillation",
    "load_draw_",
    "spline_network",
    "shift_polynomial",
    "spline_error_vs_h",
    "spline_construction",
    "hall_meyer_constant",
    "hall_meyer_table",
    "euler_number",
    "euler_asymptotic",
    "NETWORKS",
    "variety_network",
    "variety_dimension",
    "variety_dimension_bound",
    "variety_table",
    "parameter_count",
    "amplification",
]


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
