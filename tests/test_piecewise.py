"""Exact piecewise-polynomial form of univariate quadratic ReLU networks."""

import numpy as np
import pytest
import torch
from torch import nn

from quadnn import NEURONS, QuadraticLinear
from quadnn_paper.analysis.piecewise import check_against_model, count_distinct, evaluate, piecewise_polynomials

f64 = dict(dtype=torch.float64)


def set_(layer, **values):
    with torch.no_grad():
        for name, v in values.items():
            getattr(layer, name).copy_(torch.as_tensor(v, **f64).reshape(getattr(layer, name).shape))
    return layer


def tiles(pieces, lo, hi):
    assert pieces[0][0] == lo and pieces[-1][1] == hi
    for (a, b, _), (c, _, _) in zip(pieces[:-1], pieces[1:]):
        assert a < b == c


def test_hand_made_quadratic_breakpoints_and_coefficients():
    # (x)(x - 1) -> ReLU: positive outside [0, 1], zero inside
    q = set_(QuadraticLinear(1, 1, **f64), weight=1, bias=0, weight_g=1, bias_g=-1, weight_b=0, bias_b=0)
    pieces = piecewise_polynomials(nn.Sequential(q, nn.ReLU()), -2.0, 3.0)
    assert len(pieces) == 3
    tiles(pieces, -2.0, 3.0)
    assert pieces[0][1] == pytest.approx(0.0, abs=1e-14) and pieces[1][1] == pytest.approx(1.0, abs=1e-14)
    np.testing.assert_allclose(pieces[0][2], [0, -1, 1], atol=1e-14)
    np.testing.assert_allclose(pieces[1][2], [0, 0, 0], atol=0)
    np.testing.assert_allclose(pieces[2][2], [0, -1, 1], atol=1e-14)


def test_touching_root_is_not_a_breakpoint():
    # x * x >= 0 touches zero at 0 without changing sign: one piece, the parabola itself
    q = set_(QuadraticLinear(1, 1, **f64), weight=1, bias=0, weight_g=1, bias_g=0, weight_b=0, bias_b=0)
    pieces = piecewise_polynomials(nn.Sequential(q, nn.ReLU(), nn.Linear(1, 1, **f64)), -1.0, 1.0)
    assert len(pieces) == 1


def test_linear_relu_network_is_piecewise_linear():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(1, 7, **f64), nn.ReLU(), nn.Linear(7, 5, **f64), nn.ReLU(), nn.Linear(5, 1, **f64))
    pieces = piecewise_polynomials(m, -4.0, 4.0)
    assert all(len(c) == 2 for _, _, c in pieces)
    assert check_against_model(m, pieces)["max_rel_error"] < 1e-12


@pytest.mark.parametrize("neuron", NEURONS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_networks_match_the_model(neuron, seed):
    torch.manual_seed(seed)
    m = nn.Sequential(
        QuadraticLinear(1, 6, neuron=neuron, **f64),
        nn.ReLU(),
        QuadraticLinear(6, 5, neuron=neuron, **f64),
        nn.ReLU(),
        nn.Linear(5, 4, **f64),
        nn.ReLU(),
        QuadraticLinear(4, 1, neuron=neuron, **f64),
    )
    for p in m.parameters():
        nn.init.normal_(p, 0.0, 0.8)
    pieces = piecewise_polynomials(m, -3.0, 3.0)
    tiles(pieces, -3.0, 3.0)
    assert len(pieces) > 3  # the ReLUs do cut the line
    check = check_against_model(m, pieces, n=1001)
    assert check["max_rel_error"] < 1e-10
    assert check["max_rel_jump"] < 1e-10  # the network is continuous across breakpoints
    # every breakpoint is real: on its two sides some pre-activation has opposite signs,
    # so nothing was merged or invented; explicit merging can only lower the count
    assert count_distinct(pieces) <= len(pieces)


def test_degree_of_deep_full_network():
    torch.manual_seed(3)
    layers = []
    for i in range(5):
        layers += [QuadraticLinear(1 if i == 0 else 3, 3 if i < 4 else 1, **f64), nn.ReLU()]
    m = nn.Sequential(*layers[:-1])
    pieces = piecewise_polynomials(m, -1.0, 1.0)
    assert all(len(c) == 2**5 + 1 for _, _, c in pieces)
    x = np.linspace(-1, 1, 301)
    with torch.no_grad():
        f = m(torch.as_tensor(x, **f64)[:, None]).numpy()[:, 0]
    np.testing.assert_allclose(evaluate(pieces, x), f, rtol=1e-9, atol=1e-9 * np.abs(f).max())


def test_rejects_what_it_cannot_handle():
    with pytest.raises(TypeError):
        piecewise_polynomials(nn.Sequential(nn.Linear(1, 2, **f64), nn.Tanh(), nn.Linear(2, 1, **f64)), -1, 1)
    with pytest.raises(ValueError):
        piecewise_polynomials(nn.Sequential(nn.Linear(2, 1, **f64)), -1, 1)
    with pytest.raises(ValueError):
        piecewise_polynomials(nn.Sequential(nn.Linear(1, 1, **f64)), 1, -1)
