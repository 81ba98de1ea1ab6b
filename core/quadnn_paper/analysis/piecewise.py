"""The exact piecewise-polynomial form of a univariate quadratic ReLU network.

A network of quadratic (or linear) layers and ReLUs computes, on each interval where no
pre-activation changes sign, a polynomial in its input. :func:`piecewise_polynomials` finds
those intervals and polynomials by pushing polynomials through the layers:

- a layer maps each input polynomial vector to output polynomials (numpy float64 polynomial
  arithmetic; a ``full`` quadratic layer doubles the degree);
- a ReLU splits a piece at the real roots of its pre-activation polynomials inside the piece,
  then keeps or zeroes each polynomial by its sign on each sub-piece.

Roots are found on the piece mapped to ``[-1, 1]`` (better conditioned than in ``x``), kept when
their imaginary part is tiny, and polished by Newton's method. A candidate root where no
pre-activation actually changes sign (a touching double root, or a numerical near-miss) is not
a breakpoint: the network computes the same polynomial on both sides, so the piece is not split
there. Adjacent pieces whose activation patterns differ are never merged, even when their
polynomials happen to agree (:func:`count_distinct` counts those separately, explicitly).
"""

from __future__ import annotations

from functools import cache
from math import comb

import numpy as np
import numpy.polynomial.polynomial as npoly
from torch import nn

from quadnn.layers import QuadraticLinear

__all__ = ["piecewise_polynomials", "evaluate", "count_distinct", "check_against_model"]


def _t(p) -> np.ndarray:
    return None if p is None else p.detach().cpu().double().numpy()


def _pad(polys: list[np.ndarray]) -> np.ndarray:
    n = max(len(p) for p in polys)
    out = np.zeros((len(polys), n))
    for i, p in enumerate(polys):
        out[i, : len(p)] = p
    return out


def _affine(W: np.ndarray, b: np.ndarray | None, X: np.ndarray) -> np.ndarray:
    """Rows: W @ X (+ b on the constant coefficient); X holds one polynomial per row."""
    Y = W @ X
    if b is not None:
        Y[:, 0] += b
    return Y


def _layer(layer: nn.Module, polys: list[np.ndarray]) -> list[np.ndarray]:
    X = _pad(polys)
    if isinstance(layer, QuadraticLinear):
        kind = layer.neuron
        r = _affine(_t(layer.weight), _t(layer.bias), X)
        if kind == "compact":
            out = [r[i] for i in range(len(r))]
        else:
            g = _affine(_t(layer.weight_g), _t(layer.bias_g), X)
            if kind == "poly":
                g[:, 0] += 1.0
            out = [npoly.polymul(r[i], g[i]) for i in range(len(r))]
        if kind in ("full", "compact"):
            X2 = _pad([npoly.polymul(p, p) for p in X])
            s = _affine(_t(layer.weight_b), _t(layer.bias_b), X2)
            out = [npoly.polyadd(o, s[i]) for i, o in enumerate(out)]
        n = 2 * X.shape[1] - 1  # the formal degree doubles; numpy trims trailing zeros, we do not
        return [np.pad(np.asarray(o, dtype=np.float64), (0, n - len(o))) for o in out]
    if isinstance(layer, nn.Linear):
        Y = _affine(_t(layer.weight), _t(layer.bias), X)
        return [Y[i] for i in range(len(Y))]
    raise TypeError(f"piecewise_polynomials: unsupported layer {type(layer).__name__}")


def _shift_scale(p: np.ndarray, m: float, h: float) -> np.ndarray:
    """Coefficients (powers of t) of p(m + h t): q_k = h^k sum_{j>=k} C(j, k) m^(j-k) p_j."""
    C, E = _binomials(len(p))
    return (C * m**E) @ p * h ** E[0]


@cache
def _binomials(n: int):
    """C[k, j] = binomial(j, k) (0 for j < k) and the exponents E[k, j] = max(j - k, 0)."""
    C = np.array([[comb(j, k) if j >= k else 0 for j in range(n)] for k in range(n)], dtype=np.float64)
    j = np.arange(n)
    return C, np.clip(j[None, :] - j[:, None], 0, None)


def _roots_in(p: np.ndarray, a: float, b: float, imag_tol: float = 1e-6) -> list[float]:
    """Real roots of polynomial ``p`` (powers of x) inside the open interval (a, b)."""
    m, h = 0.5 * (a + b), 0.5 * (b - a)
    q = _shift_scale(p, m, h)  # p(m + h t), powers of t
    scale = np.max(np.abs(q)) if q.size else 0.0
    if scale == 0.0:
        return []
    k = len(q)
    while k > 1 and abs(q[k - 1]) <= 1e-15 * scale:  # negligible on |t| <= 1
        k -= 1
    q = q[:k]
    if k < 2:
        return []
    dq = npoly.polyder(q)
    out = []
    for z in npoly.polyroots(q):
        if abs(z.imag) > imag_tol or not -1.0 - 1e-9 < z.real < 1.0 + 1e-9:
            continue
        t = z.real
        for _ in range(4):  # Newton polish
            d = npoly.polyval(t, dq)
            if d == 0.0:
                break
            step = npoly.polyval(t, q) / d
            if not np.isfinite(step) or abs(step) > 1e-3:
                break
            t -= step
        if -1.0 < t < 1.0:
            out.append(m + h * t)
    return out


def _relu(pieces):
    out = []
    for a, b, polys in pieces:
        cuts = sorted({r for p in polys for r in _roots_in(p, a, b)})
        edges = [a] + cuts + [b]
        subs = [(edges[i], edges[i + 1]) for i in range(len(edges) - 1) if edges[i + 1] > edges[i]]
        pats = [tuple(bool(npoly.polyval(0.5 * (s + e), p) > 0) for p in polys) for s, e in subs]
        # keep a cut only where the activation pattern changes
        start, pat = subs[0][0], pats[0]
        for (s, _), q in zip(subs[1:], pats[1:]):
            if q != pat:
                out.append((start, s, [p if on else np.zeros_like(p) for p, on in zip(polys, pat)]))
                start, pat = s, q
        out.append((start, subs[-1][1], [p if on else np.zeros_like(p) for p, on in zip(polys, pat)]))
    return out


def piecewise_polynomials(model: nn.Module, lo: float, hi: float) -> list[tuple[float, float, np.ndarray]]:
    """The pieces of a univariate network on ``[lo, hi]``: ``[(start, end, coefficients), ...]``.

    ``model``: an ``nn.Sequential`` (or a single layer) of :class:`~quadnn.QuadraticLinear`
    (any neuron kind), ``nn.Linear`` and ``nn.ReLU``, with one input and one output.
    ``coefficients`` are float64, in powers of x, lowest first (length: the formal degree + 1).
    Pieces are sorted and tile ``[lo, hi]``; between adjacent pieces some ReLU changes state.
    """
    if not hi > lo:
        raise ValueError(f"need lo < hi, got [{lo}, {hi}]")
    layers = list(model) if isinstance(model, nn.Sequential) else [model]
    first = next((m for m in layers if isinstance(m, nn.Linear)), None)
    if first is None or first.in_features != 1:
        raise ValueError("piecewise_polynomials needs a univariate network (first layer with in_features=1)")
    pieces = [(float(lo), float(hi), [np.array([0.0, 1.0])])]
    for layer in layers:
        if isinstance(layer, nn.ReLU):
            pieces = _relu(pieces)
        elif isinstance(layer, nn.Identity):
            continue
        else:
            pieces = [(a, b, _layer(layer, polys)) for a, b, polys in pieces]
    if len(pieces[0][2]) != 1:
        raise ValueError(f"the network has {len(pieces[0][2])} outputs; piecewise_polynomials needs one")
    return [(a, b, polys[0]) for a, b, polys in pieces]


def evaluate(pieces, x) -> np.ndarray:
    """Evaluate the piecewise polynomial at points ``x`` (each point by the piece containing it)."""
    x = np.asarray(x, dtype=np.float64)
    starts = np.array([a for a, _, _ in pieces])
    idx = np.clip(np.searchsorted(starts, x, side="right") - 1, 0, len(pieces) - 1)
    out = np.empty_like(x)
    for k in np.unique(idx):
        sel = idx == k
        out[sel] = npoly.polyval(x[sel], pieces[k][2])
    return out


def count_distinct(pieces, rtol: float = 1e-9) -> int:
    """Number of pieces after joining neighbours whose coefficients agree to ``rtol`` (explicit merge)."""
    n = 1
    for (_, _, p), (_, _, q) in zip(pieces[:-1], pieces[1:]):
        scale = max(np.max(np.abs(p)), np.max(np.abs(q)), 1e-300)
        if len(p) != len(q) or np.max(np.abs(p - q)) > rtol * scale:
            n += 1
    return n


def check_against_model(model: nn.Module, pieces, n: int = 2001) -> dict:
    """Compare the pieces with the model on ``n`` points, also near every breakpoint.

    The error is measured relative to ``1 + sum_k |c_k| |x|^k`` (the size of the terms the
    evaluation adds up), so it is a rounding-level number when the pieces are right.
    Returns the worst relative error, the worst jump at a breakpoint (continuity) and the
    number of points checked.
    """
    import torch

    lo, hi = pieces[0][0], pieces[-1][1]
    inner = np.array([a for a, _, _ in pieces[1:]])
    x = np.concatenate([np.linspace(lo, hi, n), inner - 1e-7 * (hi - lo), inner + 1e-7 * (hi - lo)])
    x = np.clip(x, lo, hi)
    dtype = next(model.parameters()).dtype
    with torch.no_grad():
        f = model(torch.as_tensor(x, dtype=dtype)[:, None]).double().numpy()[:, 0]
    p = evaluate(pieces, x)
    starts = np.array([a for a, _, _ in pieces])
    idx = np.clip(np.searchsorted(starts, x, side="right") - 1, 0, len(pieces) - 1)
    size = np.array([1.0 + npoly.polyval(abs(xi), np.abs(pieces[k][2])) for xi, k in zip(x, idx)])
    jumps = [
        abs(npoly.polyval(b, c) - npoly.polyval(b, d)) / (1.0 + npoly.polyval(abs(b), np.abs(c)))
        for (_, b, c), (_, _, d) in zip(pieces[:-1], pieces[1:])
    ]
    return dict(
        max_rel_error=float(np.max(np.abs(p - f) / size)),
        max_rel_jump=float(max(jumps, default=0.0)),
        points=int(x.size),
    )
