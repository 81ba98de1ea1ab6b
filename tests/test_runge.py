"""The Runge experiment: protocol, model, and the batched trainer against the plain loop."""

import numpy as np
import pytest
import torch

from quadnn import QuadraticLinear
from quadnn_paper.analysis.piecewise import piecewise_polynomials
from quadnn_paper.sections import runge as R


def test_full_protocol_is_the_papers():
    full = R.PROTOCOLS["full"]
    assert full["n_train"] == 33 and tuple(full["interval"]) == (-5.0, 5.0)
    assert full["width"] == 8 and full["depth"] == 5 and 2 ** full["depth"] == 32
    assert full["iterations"] == 30_000 and full["n_test"] == 100
    assert len(full["seeds"]) >= 5 and len(R.PROTOCOLS["cpu"]["seeds"]) >= 5
    s = R.STRATEGIES
    assert (s["sw-l1"].shrink, s["sw-l1"].alpha, s["sw-l1"].lr, s["sw-l1"].lr_g, s["sw-l1"].lr_b) == (
        "l1",
        1e-4,
        3e-4,
        3e-4,
        3e-4,
    )
    assert (s["sw-l2"].shrink, s["sw-l2"].alpha, s["sw-l2"].lr, s["sw-l2"].lr_g) == ("l2", 1e-4, 3e-4, 3e-4)
    assert (s["sg"].shrink, s["sg"].lr, s["sg"].lr_g, s["sg"].lr_b) == (None, 3e-4, 1.5e-4, 1.5e-4)
    assert (s["regular"].init, s["regular"].lr, s["regular"].lr_g, s["regular"].shrink) == ("random", 3e-4, 3e-4, None)
    assert R.PAPER_RMSE == {"regular": None, "relinear-init": None, "sw-l1": 0.0656, "sw-l2": 0.0426, "sg": 0.0205}


def test_data():
    x, y, xt, yt = R.dataset(R.PROTOCOLS["full"])
    assert x.shape == (33, 1) and xt.shape == (100, 1)
    assert x[0, 0] == -5 and x[-1, 0] == 5 and x[16, 0] == 0 and y[16, 0] == 1
    assert torch.allclose(yt, 1 / (1 + 16 * xt**2))


def test_model_and_inits():
    m = R.build_model()
    q = [layer for layer in m if isinstance(layer, QuadraticLinear)]
    assert [(layer.in_features, layer.out_features) for layer in q] == [(1, 8), (8, 8), (8, 8), (8, 8), (8, 1)]
    assert sum(isinstance(layer, torch.nn.ReLU) for layer in m) == 4
    a, b = R.init_model("sg", 7), R.init_model("regular", 7)
    for la, lb in zip(a, b):
        if isinstance(la, QuadraticLinear):
            assert torch.equal(la.weight, lb.weight) and torch.equal(la.bias, lb.bias)  # same linear branch
            assert torch.all(la.weight_g == 0) and torch.all(la.bias_g == 1) and torch.all(la.weight_b == 0)
            assert lb.weight_g.abs().max() > 0 and lb.bias_g.abs().max() <= 1.0
    pieces = piecewise_polynomials(b, -5, 5)
    assert len(pieces[0][2]) == 33  # degree 32


def test_flatten_roundtrip_and_batched_forward():
    x = torch.linspace(-5, 5, 41, dtype=torch.float64)[:, None]
    models = [R.init_model(s, 3) for s in ("regular", "sg")]
    P = torch.stack([R.flatten(m) for m in models])
    out = R.batched_forward(P, x, R.widths_of(R.PAPER))
    for k, m in enumerate(models):
        with torch.no_grad():
            torch.testing.assert_close(out[k], m(x), rtol=1e-12, atol=1e-12)
        back = R.unflatten_(R.build_model(), P[k])
        assert torch.equal(R.flatten(back), P[k])


@pytest.fixture
def one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: threads only add overhead (and the machine is shared)
    yield
    torch.set_num_threads(old)


def test_batched_training_equals_plain_training(one_thread):
    protocol = dict(R.PAPER, iterations=40, seeds=[0])
    runs = [(s, 1) for s in R.STRATEGIES]
    out = R.train_batched(runs, protocol, log_every=10)
    assert out["loss"].shape == (len(runs), 5) and list(out["steps"]) == [0, 10, 20, 30, 40]
    for k, (s, seed) in enumerate(runs):
        ref = R.flatten(R.train_reference(s, seed, protocol)).numpy()
        start = R.flatten(R.init_model(s, seed)).numpy()
        assert np.abs(ref - start).max() > 1e-3  # it did train
        np.testing.assert_allclose(out["params"][k], ref, rtol=1e-9, atol=1e-12, err_msg=s)
    # the shrink rules did act: sw runs differ from the unshrunk relinear-init run
    i = {s: k for k, (s, _) in enumerate(runs)}
    assert np.abs(out["params"][i["sw-l1"]] - out["params"][i["relinear-init"]]).max() > 1e-4


def test_experiment_is_cached(tmp_path, monkeypatch):
    protocol = dict(R.PAPER, iterations=20, seeds=[0, 1])
    first = R.run_experiment(protocol, cache_dir=tmp_path, strategies=["sg", "sw-l2"])
    assert [(r["strategy"], r["seed"]) for r in first["runs"]] == [("sg", 0), ("sg", 1), ("sw-l2", 0), ("sw-l2", 1)]
    assert all(
        np.isfinite(r["rmse"]) and r["rmse"] == pytest.approx(R.rmse(r["params"], protocol)) for r in first["runs"]
    )

    def boom(*a, **k):
        raise AssertionError("trained again")

    monkeypatch.setattr(R, "train_batched", boom)
    assert R.run_experiment(protocol, cache_dir=tmp_path, strategies=["sg", "sw-l2"]) == first
