"""The Runge experiment: protocol, model, and the batched trainer against the plain loop."""

import json

import numpy as np
import pytest
import torch

from quadnn import QuadraticLinear
from quadnn_paper.analysis.piecewise import piecewise_polynomials
from quadnn_paper.experiments import runge as XR
from quadnn_paper.sections import runge as R


def test_full_protocol_is_the_papers():
    full = R.PROTOCOLS["full"]
    assert full["n_train"] == 33 and tuple(full["interval"]) == (-5.0, 5.0)
    assert full["width"] == 8 and full["depth"] == 5 and 2 ** full["depth"] == 32
    assert full["iterations"] == 30_000 and full["n_test"] == 100
    assert len(full["seeds"]) >= 5 and len(R.PROTOCOLS["cpu"]["seeds"]) >= 5
    s = XR.STRATEGIES
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
    x, y, xt, yt = XR.dataset(R.PROTOCOLS["full"])
    assert x.shape == (33, 1) and xt.shape == (100, 1)
    assert x[0, 0] == -5 and x[-1, 0] == 5 and x[16, 0] == 0 and y[16, 0] == 1
    assert torch.allclose(yt, 1 / (1 + 16 * xt**2))


def test_model_and_inits():
    m = XR.build_model()
    q = [layer for layer in m if isinstance(layer, QuadraticLinear)]
    assert [(layer.in_features, layer.out_features) for layer in q] == [(1, 8), (8, 8), (8, 8), (8, 8), (8, 1)]
    assert sum(isinstance(layer, torch.nn.ReLU) for layer in m) == 4
    a, b = XR.init_model("sg", 7), XR.init_model("regular", 7)
    for la, lb in zip(a, b):
        if isinstance(la, QuadraticLinear):
            assert torch.equal(la.weight, lb.weight) and torch.equal(la.bias, lb.bias)  # same linear branch
            assert torch.all(la.weight_g == 0) and torch.all(la.bias_g == 1) and torch.all(la.weight_b == 0)
            assert lb.weight_g.abs().max() > 0 and lb.bias_g.abs().max() <= 1.0
    pieces = piecewise_polynomials(b, -5, 5)
    assert len(pieces[0][2]) == 33  # degree 32


def test_flatten_roundtrip_and_batched_forward():
    x = torch.linspace(-5, 5, 41, dtype=torch.float64)[:, None]
    models = [XR.init_model(s, 3) for s in ("regular", "sg")]
    P = torch.stack([XR.flatten(m) for m in models])
    out = XR.batched_forward(P, x, XR.widths_of(R.PAPER))
    for k, m in enumerate(models):
        with torch.no_grad():
            torch.testing.assert_close(out[k], m(x), rtol=1e-12, atol=1e-12)
        back = XR.unflatten_(XR.build_model(), P[k])
        assert torch.equal(XR.flatten(back), P[k])


@pytest.fixture
def one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: threads only add overhead (and the machine is shared)
    yield
    torch.set_num_threads(old)


def test_batched_training_equals_plain_training(one_thread):
    protocol = dict(R.PAPER, iterations=40, seeds=[0])
    runs = [(s, 1) for s in XR.STRATEGIES]
    out = XR.train_batched(runs, protocol, log_every=10)
    assert out["loss"].shape == (len(runs), 5) and list(out["steps"]) == [0, 10, 20, 30, 40]
    for k, (s, seed) in enumerate(runs):
        ref = XR.flatten(XR.train_reference(s, seed, protocol)).numpy()
        start = XR.flatten(XR.init_model(s, seed)).numpy()
        assert np.abs(ref - start).max() > 1e-3  # it did train
        np.testing.assert_allclose(out["params"][k], ref, rtol=1e-9, atol=1e-12, err_msg=s)
    # the shrink rules did act: sw runs differ from the unshrunk relinear-init run
    i = {s: k for k, (s, _) in enumerate(runs)}
    assert np.abs(out["params"][i["sw-l1"]] - out["params"][i["relinear-init"]]).max() > 1e-4


def test_experiment_is_cached(tmp_path, monkeypatch):
    protocol = dict(R.PAPER, iterations=20, seeds=[0, 1])
    first = XR.run_experiment(protocol, cache_dir=tmp_path, strategies=["sg", "sw-l2"])
    assert [(r["strategy"], r["seed"]) for r in first["runs"]] == [("sg", 0), ("sg", 1), ("sw-l2", 0), ("sw-l2", 1)]
    assert all(
        np.isfinite(r["rmse"]) and r["rmse"] == pytest.approx(XR.rmse(r["params"], protocol)) for r in first["runs"]
    )

    def boom(*a, **k):
        raise AssertionError("trained again")

    monkeypatch.setattr(XR, "train_batched", boom)
    assert XR.run_experiment(protocol, cache_dir=tmp_path, strategies=["sg", "sw-l2"]) == first


def test_the_sections_training_keeps_its_cache_key():
    """The section's training is the computation the notebook cached as ``runge``: the same name
    and configuration, so a built cache is read, not retrained (the smoke key as it was cached)."""
    checks, training, pieces = R.plan("smoke").values()
    assert training.name == "runge" and dict(training.config) == XR.experiment_config(R.protocol("smoke"))
    assert training.key == "runge.2c40057f06271cc2"
    assert checks.name == "runge_checks" and training.seconds >= R.MIN_SECONDS
    assert pieces.needs == (training,), "the pieces are taken from the training's networks"


def test_the_cached_pieces_give_summary_the_numbers_of_the_pieces_themselves(one_thread):
    """The piece analysis after the cache's JSON round trip and as computed agree exactly."""
    P = dict(R.protocol("smoke"), iterations=20)
    result = XR.experiment(**XR.experiment_config(P))
    analysed = XR.piece_analysis(P["interval"], P["width"], P["depth"], result)
    by_cache = R.summary(result, json.loads(json.dumps(analysed)), P)  # as the cache returns it
    direct = R.summary(result, analysed, P)
    assert by_cache.variables == direct.variables and by_cache.piece_rows == direct.piece_rows


def test_experiment_refuses_a_configuration_it_does_not_train():
    config = XR.experiment_config(dict(R.PAPER, iterations=1, seeds=[0]), strategies=["sg"])
    with pytest.raises(ValueError, match="not what this code trains"):
        XR.experiment(**dict(config, version=XR.VERSION + 1))
    with pytest.raises(ValueError, match="not what this code trains"):
        XR.experiment(**dict(config, optimizer=dict(XR.OPTIMIZER, eps=1e-6)))


def test_network_checks():
    P = R.protocol("smoke")
    checks = R.plan("smoke")["checks"]()
    assert (checks["train_points"], checks["test_points"], checks["shared_points"]) == (33, 100, 2)
    assert checks["layers"] == [[1, 8], [8, 8], [8, 8], [8, 8], [8, 1]]
    assert checks["parameters"] == sum(p.numel() for p in XR.build_model(P["width"], P["depth"]).parameters())
    assert checks["probe_coefficients"] == 2 ** P["depth"] + 1
    assert checks["probe_max_rel_error"] < R.PIECE_TOLERANCE and checks["probe_max_rel_jump"] < R.PIECE_TOLERANCE


def test_pending_training_renders_with_the_finished_variables(tmp_path, one_thread):
    """While the training is pending on a runner the section still publishes its tables, figures
    and every variable the text quotes (named and ordered as the finished ones)."""
    from quadnn_paper.common.outputs import Variables
    from quadnn_paper.engine import Results
    from quadnn_paper.execution.sections import SectionOutputs
    from quadnn_paper.report import publish

    checks = R.plan("smoke")["checks"]
    pending = R.outputs(Results.of(R, "smoke", {checks.key: checks()}))
    publish(SectionOutputs("runge", "smoke", R.data("smoke"), pending), tmp_path)
    assert (tmp_path / "figures" / "runge_fits.pdf").exists() and (tmp_path / "tables" / "runge_pieces.tex").exists()
    pending_vars = next(o.values for o in pending if isinstance(o, Variables))
    result = XR.experiment(**XR.experiment_config(dict(R.protocol("smoke"), iterations=20)))
    P = R.protocol("smoke")
    finished = R.summary(result, XR.piece_analysis(P["interval"], P["width"], P["depth"], result), P).variables
    assert list(pending_vars) == list(finished)
    assert {k for k, v in pending_vars.items() if v != "pending"} == {"Seeds", "Iterations", "BlownRmse", "PaperPieces"}


def test_a_torch_func_ensemble_with_torchs_adam_gives_the_batched_trainers_numbers(one_thread):
    """The alternative the module docstring weighs: each strategy's seeds stacked with
    torch.func (stack_module_state, vmap, functional_call) and trained by torch's own Adam, one per
    strategy (its rates are per parameter group), then quadnn's shrink rule. Same parameters as
    train_batched; the docstring gives the time each takes."""
    import copy

    from torch.func import functional_call, stack_module_state, vmap

    protocol = dict(R.PAPER, iterations=40, seeds=[0, 1])
    x, y, _, _ = XR.dataset(protocol)
    runs = [(s, seed) for s in ("sg", "sw-l1", "sw-l2") for seed in (0, 1)]
    batched = XR.train_batched(runs, protocol)

    def group(name):  # ReLinear-sg's groups: the gate, the power term and constant, the rest
        return "g" if name.endswith(("weight_g", "bias_g")) else "b" if name.endswith(("weight_b", "bias_b")) else "r"

    for strategy in ("sg", "sw-l1", "sw-l2"):
        s = XR.STRATEGIES[strategy]
        models = [XR.init_model(strategy, seed) for seed in (0, 1)]
        params, buffers = stack_module_state(models)
        base = copy.deepcopy(models[0]).to("meta")
        forward = vmap(lambda p, b, xx, base=base: functional_call(base, (p, b), (xx,)), in_dims=(0, 0, None))
        rates = dict(r=s.lr, g=s.lr_g, b=s.lr_b)
        groups = [dict(params=[v for k, v in params.items() if group(k) == g], lr=rates[g]) for g in "rgb"]
        opt = torch.optim.Adam(groups, betas=XR.OPTIMIZER["betas"], eps=XR.OPTIMIZER["eps"], foreach=False)
        for _ in range(protocol["iterations"]):
            opt.zero_grad()
            (forward(params, buffers, x) - y).square().mean(dim=(1, 2)).sum().backward()
            opt.step()
            with torch.no_grad():  # quadnn.relinear.Shrink's rules on the stacked terms
                for k, v in params.items():
                    if s.shrink and group(k) != "r":
                        ref = 1.0 if k.endswith("bias_g") else 0.0
                        v.sub_(s.alpha * (torch.sign(v - ref) if s.shrink == "l1" else v - ref))
        for j, seed in enumerate((0, 1)):
            model = XR.init_model(strategy, seed)
            with torch.no_grad():
                for k, v in model.named_parameters():
                    v.copy_(params[k][j])
            np.testing.assert_allclose(
                XR.flatten(model).numpy(), batched["params"][runs.index((strategy, seed))], rtol=1e-9, atol=1e-12
            )
