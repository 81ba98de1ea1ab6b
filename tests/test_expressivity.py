"""quadnn_paper.experiments.expressivity (spline construction, variety dimensions and bounds) and the section's protocols."""

import math

import numpy as np
import pytest
import torch

from quadnn import QuadraticLinear
from quadnn_paper.experiments import expressivity as XE
from quadnn_paper.sections import expressivity as E


def _eval(net, xs):
    with torch.no_grad():
        return net(torch.as_tensor(xs, dtype=torch.float64)[:, None])[:, 0].numpy()


# -- protocols ------------------------------------------------------------------------
def test_full_protocol_is_the_papers():
    full = E.protocol("full")
    assert tuple(full["oscillation"]["widths"]) == (1, 10, 10, 10, 10, 1) == E.PAPER["oscillation_widths"]
    assert tuple(full["oscillation"]["sigmas"]) == (0.01, 0.02, 0.03) == E.PAPER["oscillation_sigmas"]
    assert full["amplification"]["sigma"] == 1.0 == E.PAPER["amplification_sigma"]  # "unit variance"
    for arch in [(1, 1, 1), (1, 2, 1), (2, 2, 1), (2, 3, 1), (3, 3, 1), (2, 2, 2, 1), (3, 2, 2, 1)]:
        assert arch in full["variety"]["archs"]
    for p in ("smoke", "cpu"):  # cheaper profiles keep the paper's architecture and sigmas
        assert E.protocol(p)["oscillation"]["widths"] == full["oscillation"]["widths"]
        assert E.protocol(p)["oscillation"]["sigmas"] == full["oscillation"]["sigmas"]
    with pytest.raises(ValueError):
        E.protocol("gpu")


# -- splines ----------------------------------------------------------------------------
def test_shift_polynomial():
    c = [1.0, -2.0, 0.5, 3.0]
    d = XE.shift_polynomial(c, 0.7)
    y = np.linspace(-2, 2, 9)
    assert np.allclose(np.polyval(d[::-1], y), np.polyval(np.array(c)[::-1], y + 0.7), rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["sin", "runge"])
def test_spline_network_equals_cubic_spline(name):
    knots, cs = XE.cubic_spline(name, 10)
    net = XE.spline_network(knots, [cs.c[::-1, i] for i in range(len(knots) - 1)])
    assert all(isinstance(m, (QuadraticLinear, torch.nn.ReLU)) for m in net)
    xs = np.linspace(knots[0], knots[-1], 3001)
    assert np.max(np.abs(_eval(net, xs) - cs(xs))) < 1e-12
    # left of x_0 the construction is constant s_0(x_0)
    assert np.allclose(_eval(net, [knots[0] - 1.0, knots[0] - 5.0]), cs(knots[0]), atol=1e-13)


def test_spline_network_any_degree_and_uneven_knots():
    rng = np.random.default_rng(0)
    knots = np.array([-1.0, -0.3, 0.1, 0.9, 2.0])
    # A continuous quintic spline: pick piece 0 freely, then each next piece agrees in value at its knot.
    coefs = [rng.normal(size=6)]
    for i in range(1, 4):
        c = rng.normal(size=6)
        c[0] = np.polyval(coefs[-1][::-1], knots[i] - knots[i - 1])
        coefs.append(c)
    net = XE.spline_network(knots, coefs)
    xs = np.linspace(knots[0], knots[-1], 2001)
    piece = np.clip(np.searchsorted(knots, xs, side="right") - 1, 0, 3)
    ref = np.array([np.polyval(coefs[p][::-1], x - knots[p]) for x, p in zip(xs, piece)])
    assert np.max(np.abs(_eval(net, xs) - ref)) < 1e-11 * np.max(np.abs(ref))


def test_spline_network_rejects_bad_input():
    with pytest.raises(ValueError):
        XE.spline_network([0.0, 1.0, 2.0], [[1.0, 2.0]])
    with pytest.raises(ValueError):
        XE.spline_network([0.0, 2.0, 1.0], [[1.0], [1.0]])


def test_euler_numbers_and_hall_meyer_constants():
    assert [XE.euler_number(n) for n in (0, 2, 4, 6, 12)] == [1, -1, 5, -61, 2702765]
    assert XE.hall_meyer_constant(1) == pytest.approx(1 / 8)
    assert XE.hall_meyer_constant(2) == pytest.approx(5 / 384)
    assert XE.hall_meyer_constant(6) == pytest.approx(1.3775627e-6, rel=1e-6)
    # the correct asymptotic of |E_2m| carries a factor 8 the paper omits
    assert XE.euler_asymptotic(6) / 2702765 == pytest.approx(1, abs=0.01)


def test_spline_error_rates():
    res = XE.spline_error_vs_h("sin", [0.4, 0.2])
    (a, b) = res["rows"]
    q = a["h"] / b["h"]
    assert a["linear"] / b["linear"] == pytest.approx(q**2, rel=0.05)  # O(h^2)
    assert a["cubic"] / b["cubic"] == pytest.approx(q**4, rel=0.1)  # O(h^4)
    for r in res["rows"]:
        assert r["linear_ratio"] <= XE.hall_meyer_constant(1) * (1 + 1e-9)
        assert r["cubic_ratio"] <= XE.hall_meyer_constant(2) * (1 + 1e-9)


# -- variety dimension -------------------------------------------------------------------
@pytest.mark.parametrize(
    "widths,network,expected",
    [
        # g(q(x)), g, q quadratics: 6 coefficients less the affine reparametrisation of q (2) -> a
        # hypersurface in the 5-dimensional space of quartics
        ((1, 1, 1), "quadratic", 4),
        ((1, 2, 1), "quadratic", 5),  # every quartic
        ((2, 1), "quadratic", 6),  # one neuron, 2 inputs: every quadratic
        ((4, 1), "quadratic", 14),  # one neuron, 4 inputs: 15 parameters less rescaling
        ((1, 1, 1), "quadratic_activation", 3),  # w (a x + b)^2 + c: every quadratic
        ((2, 1, 1), "quadratic_activation", 4),  # w (a.x + b)^2 + c: 5 parameters less one scaling
    ],
)
def test_variety_dimension_known_cases(widths, network, expected):
    assert XE.variety_dimension(widths, network) == expected


def test_variety_dimension_kileel_homogeneous():
    # without biases, (2, 2, 1) with squares: sum of two squares of linear forms = binary quadratics (3)
    assert XE.variety_dimension((2, 2, 1), "quadratic_activation", bias=False) == 3


def test_paper_bounds_as_printed():
    # Lemma: min(sum(3 d_{h-1} d_h + 3 d_{h-1}) - sum_{h<H} d_h, d_H binom(d_0 + 2^(H-1) - 1, 2^(H-1)))
    assert XE.variety_dimension_bound((1, 1, 1), "quadratic") == min(6 + 6 - 1, 1) == 1
    assert XE.variety_dimension_bound((3, 2, 2, 1), "quadratic") == min(27 + 18 + 12 - 4, math.comb(6, 4)) == 15
    assert XE.variety_dimension_bound((3, 3, 1), "quadratic_activation") == min(12 + 6 - 3, math.comb(4, 2)) == 6


def test_corrected_bounds():
    assert XE.parameter_count((2, 3, 1), "quadratic") == 3 * 6 + 9 + 3 * 3 + 3
    assert XE.parameter_count((2, 3, 1), "quadratic_activation") == 6 + 3 + 3 + 1
    assert XE.variety_dimension_bound((1, 1, 1), "quadratic", "corrected") == min(12 - 3, 5) == 5
    assert XE.variety_dimension_bound((2, 2, 2, 1), "quadratic_activation", "corrected") == min(15 - 4, 15)
    for w in [(1, 1, 1), (2, 2, 1), (3, 3, 1), (3, 2, 2, 1)]:
        for net in XE.NETWORKS:
            assert XE.variety_dimension(w, net, n_trials=1) <= XE.variety_dimension_bound(w, net, "corrected")
        assert XE.variety_dimension(w, "quadratic", n_trials=1) == XE.variety_dimension_bound(
            w, "quadratic", "layerwise"
        )


# -- oscillation and amplification -------------------------------------------------------
def test_batched_forward_matches_quadnn_modules():
    for quadratic in (False, True):
        layers = XE._draw_params((1, 4, 4, 1), quadratic, 0.5, 3, torch.Generator().manual_seed(0))
        x = torch.linspace(-3, 3, 7, dtype=torch.float64)[:, None]
        net = XE.load_draw_(XE.mlp((1, 4, 4, 1), quadratic), layers, 1)
        with torch.no_grad():
            assert torch.allclose(net(x), XE._batched_forward(layers, x, quadratic)[1], rtol=1e-12, atol=0)


def test_amplification_relinear_equals_conventional():
    res = XE.amplification(depths=(1, 3), width=5, in_features=4, sigma=1.0, n_draws=5, seed=0)
    for r in res.values():
        assert np.allclose(r["quadratic_relinear"], r["conventional"], rtol=1e-12)
        assert r["scale"] == pytest.approx(
            math.prod(math.sqrt(a * b) for a, b in zip(r["widths"][:-1], r["widths"][1:]))
        )


# -- the section as a declaration ---------------------------------------------------------
def test_work_keeps_the_notebooks_cache_names_and_configs():
    """The computations are cached under the names and configurations the notebook passed to
    ``cached``, so the results it stored are found again."""
    P = E.protocol("cpu")
    by_name = {}
    for c in E.plan("cpu").values():
        by_name.setdefault(c.name, []).append(dict(c.config))
    assert by_name["expressivity_oscillation"] == [P["oscillation"]]
    assert by_name["expressivity_amplification"] == [P["amplification"]]
    assert by_name["expressivity_variety"] == [{**P["variety"], "archs": [list(a) for a in P["variety"]["archs"]]}]
    spl = P["spline"]
    hs = list(np.geomspace(spl["h_max"], spl["h_max"] / 2 ** ((spl["n_h"] - 1) / 2), spl["n_h"]))
    assert by_name["expressivity_spline_h"] == [dict(name=n, hs=hs) for n in spl["functions"]]


def test_spline_construction_figure_shows_the_tables_error():
    con = XE.spline_construction(["sin", "runge"], n_pieces=6, n_eval=2001, plot_every=20)
    for c in con.values():
        assert max(c["gap"]["value"]) == c["error"] and c["error"] / c["scale"] < E.EXACT
        assert c["gap"]["x"] == sorted(c["gap"]["x"])
    # The summands and the last layer's bias add up to the network.
    knots, cs = XE.cubic_spline("sin", 6)
    bias = XE.spline_network(knots, [cs.c[::-1, i] for i in range(6)])[-1].bias.item()
    first = con["sin"]
    assert np.allclose(np.sum(first["summands"], axis=0) + bias, first["curves"]["network"], rtol=0, atol=1e-12)


def test_pending_parts_stand_in_for_the_real_ones(tmp_path):
    """Work pending on a runner leaves every table, figure and variable of its part in place (the
    paper builds), each reading "pending"."""
    from quadnn_paper.common.outputs import Figure, Table, Variables
    from quadnn_paper.engine import Results
    from quadnn_paper.execution import execute_work
    from quadnn_paper.execution.sections import SectionOutputs
    from quadnn_paper.report import publish

    by_id = execute_work(list(E.plan("smoke").values()), tmp_path / "cache", progress=False)

    def shape(outputs):
        return (
            [(o.name, list(o.header)) for o in outputs if isinstance(o, Table)],
            sorted(o.name for o in outputs if isinstance(o, Figure)),
            [name for o in outputs if isinstance(o, Variables) for name in o.values],
        )

    real = E.outputs(Results.of(E, "smoke", by_id))
    pending = E.outputs(Results.of(E, "smoke", dict.fromkeys(by_id)))
    assert shape(real) == shape(pending)
    assert {v for o in pending if isinstance(o, Variables) for v in o.values.values()} == {"pending"}
    publish(SectionOutputs("expressivity", "smoke", "made up", pending), tmp_path / "paper")
    assert "pending" in (tmp_path / "paper" / "tables" / "expressivity_variety.csv").read_text()
