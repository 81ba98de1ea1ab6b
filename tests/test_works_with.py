"""The "Works with" rows (docs/works-with.md) for PyTorch's transforms and the clients users run quadratic
layers through: torch.func, torch.utils.checkpoint, pruning and parametrizations, opacus, and the
FLOP/parameter counters thop, ptflops, torchinfo, fvcore and FlopCounterMode with their defaults. Each result is compared with the plain
formula (tests/plain_formula.py) or with torch.utils.flop_counter."""

import contextlib
import copy
import io
import sys

import pytest
import torch
from plain_formula import plain
from torch import nn
from torch.func import functional_call, grad, hessian, jacfwd, jacrev, jvp, vmap
from torch.nn.utils import parametrize, prune
from torch.utils.checkpoint import checkpoint

from quadnn import NEURONS, QuadraticConv2d, QuadraticLayer, QuadraticLinear, counting
from quadnn_paper import bench

pytestmark = pytest.mark.usefixtures("one_thread")

F64 = dict(dtype=torch.float64)


def randomise_(module, seed=0):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, **F64) * 0.5)
    return module


def small(kind, impl="speed"):
    """conv -> flatten -> linear, every term random, and its plain-formula twin as a function."""
    model = nn.Sequential(
        QuadraticConv2d(2, 3, 3, neuron=kind, **F64), nn.Flatten(), QuadraticLinear(12, 2, neuron=kind, **F64)
    )
    randomise_(model)
    for m in (model[0], model[2]):
        m.implementation = impl

    def reference(x, params=None):
        p = dict(model.named_parameters()) if params is None else params
        part = lambda prefix: {n.split(".", 1)[1]: v for n, v in p.items() if n.startswith(prefix + ".")}
        return plain(model[2], plain(model[0], x, part("0")).flatten(1), part("2"))

    return model, reference


def x_of(n=3, seed=1):
    return torch.randn(n, 2, 4, 4, generator=torch.Generator().manual_seed(seed), **F64)


# -- torch.func --------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", NEURONS)
def test_torch_func_transforms_equal_the_plain_formula(kind):
    model, reference = small(kind)
    x = x_of()
    params = {n: p.detach() for n, p in model.named_parameters()}
    f = lambda p, xb: functional_call(model, p, (xb,))
    g = lambda p, xb: reference(xb, p)
    close = lambda a, b: torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)
    close(f(params, x), g(params, x))  # functional_call
    # per-sample gradients: vmap(grad)
    loss = lambda fn: lambda p, xi: fn(p, xi[None]).pow(2).sum()
    close(vmap(grad(loss(f)), in_dims=(None, 0))(params, x), vmap(grad(loss(g)), in_dims=(None, 0))(params, x))
    # Jacobians in both modes, w.r.t. the input and the gate/power parameters
    name = "0.weight_g" if kind != "compact" else "0.weight_b"
    for jac in (jacrev, jacfwd):
        close(jac(lambda xb: f(params, xb))(x), jac(lambda xb: g(params, xb))(x))
        close(
            jac(lambda w: f({**params, name: w}, x))(params[name]),
            jac(lambda w: g({**params, name: w}, x))(params[name]),
        )
    # jvp, and a Hessian of a scalar w.r.t. the input
    t = torch.randn_like(x)
    close(jvp(lambda xb: f(params, xb), (x,), (t,))[1], jvp(lambda xb: g(params, xb), (x,), (t,))[1])
    h = lambda fn: hessian(lambda xb: fn(params, xb).pow(2).sum())(x[:1])
    close(h(f), h(g))


# -- torch.utils.checkpoint ------------------------------------------------------------------
@pytest.mark.parametrize("reentrant", [True, False])
@pytest.mark.parametrize("impl", QuadraticLayer.IMPLEMENTATIONS)
@pytest.mark.parametrize("kind", NEURONS)
def test_checkpoint_gives_the_gradients_of_the_plain_formula(kind, impl, reentrant):
    model, reference = small(kind, impl)
    x = x_of().requires_grad_()
    want = torch.autograd.grad(reference(x).pow(2).sum(), [x, *model.parameters()])
    checkpoint(model, x, use_reentrant=reentrant).pow(2).sum().backward()  # reentrant: .backward() only
    got = [x.grad, *(p.grad for p in model.parameters())]
    torch.testing.assert_close(got, list(want), rtol=1e-9, atol=1e-9)


# -- pruning and parametrizations -------------------------------------------------------------
@pytest.mark.parametrize("kind", NEURONS)
def test_pruning_any_term_prunes_it_in_the_formula(kind):
    layer = randomise_(QuadraticConv2d(2, 3, 3, neuron=kind, **F64))
    x = x_of()
    names = [n for n in ("weight", "weight_g", "weight_b") if getattr(layer, n) is not None]
    for name in names:
        prune.l1_unstructured(layer, name, amount=0.5)
    masked = {n: getattr(layer, n + "_orig") * getattr(layer, n + "_mask") for n in names}
    assert all((m == 0).float().mean() >= 0.45 for m in masked.values())
    torch.testing.assert_close(layer(x), plain(layer, x, masked))
    layer(x).sum().backward()  # gradients reach the unpruned parameters, zero where pruned
    for n in names:
        orig = getattr(layer, n + "_orig")
        assert (orig.grad[getattr(layer, n + "_mask") == 0] == 0).all() and orig.grad.abs().sum() > 0
    for n in names:
        prune.remove(layer, n)
    assert {n for n, _ in layer.named_parameters()} >= set(names)
    torch.testing.assert_close(layer(x), plain(layer, x))


class Symmetric(nn.Module):
    def forward(self, w):
        return w + w.transpose(-1, -2)


@pytest.mark.parametrize("kind", NEURONS)
def test_parametrizations_of_any_term_enter_the_formula(kind):
    layer = randomise_(QuadraticConv2d(2, 3, 3, neuron=kind, **F64))
    x = x_of()
    names = [n for n in ("weight", "weight_g", "weight_b") if getattr(layer, n) is not None]
    for name in names:
        parametrize.register_parametrization(layer, name, Symmetric())
    values = {n: getattr(layer, n) for n in names}
    assert all(torch.equal(v, v.transpose(-1, -2)) for v in values.values())
    torch.testing.assert_close(layer(x), plain(layer, x, values))
    layer(x).sum().backward()
    assert all(layer.parametrizations[n].original.grad is not None for n in names)


class Counting(nn.Module):
    """A parametrization that counts its evaluations (the identity, times 1)."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, w):
        self.calls += 1
        return w * 1.0


def calls_per_forward(layer, names, x):
    """Evaluations of a counting parametrization on each of ``names`` per forward (with autograd
    and under no_grad), and the layer's output against the unparametrized layer's."""
    ref = copy.deepcopy(layer)
    counters = {n: Counting() for n in names}
    for n, c in counters.items():
        parametrize.register_parametrization(layer, n, c)
    out = {}
    for grad_mode in (torch.enable_grad, torch.no_grad):
        with grad_mode():
            before = {n: c.calls for n, c in counters.items()}
            y = layer(x)
            out[grad_mode.__name__] = {n: c.calls - before[n] for n, c in counters.items()}
        torch.testing.assert_close(y, ref(x))
    return out


@pytest.mark.parametrize("impl", QuadraticLayer.IMPLEMENTATIONS)
@pytest.mark.parametrize("kind", NEURONS)
def test_a_parametrization_runs_once_per_forward_as_on_torch_layers(kind, impl):
    x = torch.randn(2, 3, 6, 6, **F64)
    # torch's own layer: once per forward
    conv = nn.Conv2d(3, 4, 3, **F64)
    assert calls_per_forward(conv, ["weight"], x) == {"enable_grad": {"weight": 1}, "no_grad": {"weight": 1}}
    for layer, xi in (
        (QuadraticConv2d(3, 4, 3, neuron=kind, **F64), x),
        (QuadraticConv2d(4, 4, 3, groups=2, neuron=kind, **F64), torch.randn(2, 4, 6, 6, **F64)),
        (QuadraticLinear(3, 4, neuron=kind, **F64), torch.randn(5, 3, **F64)),
    ):
        layer.implementation = impl
        randomise_(layer)
        names = [n for n in ("weight", "weight_g", "weight_b") if getattr(layer, n) is not None]
        once = dict.fromkeys(names, 1)
        assert calls_per_forward(layer, names, xi) == {"enable_grad": once, "no_grad": once}, layer


# -- opacus: per-sample gradients in every grad_sample_mode -------------------------------------
@pytest.mark.parametrize("mode", ["hooks", "functorch", "ew"])
@pytest.mark.parametrize("kind", NEURONS)
def test_opacus_per_sample_gradients_equal_one_sample_at_a_time(kind, mode):
    wrap_model = pytest.importorskip("opacus.grad_sample.utils").wrap_model
    model, reference = small(kind)
    x = x_of()
    want = [torch.autograd.grad(reference(x[i : i + 1]).pow(2).sum(), list(model.parameters())) for i in range(len(x))]
    extra = {"force_functorch": True} if mode == "functorch" else {}
    wrapped = wrap_model(
        copy.deepcopy(model), "hooks" if mode == "functorch" else mode, loss_reduction="sum", batch_first=True, **extra
    )
    wrapped(x).pow(2).sum().backward()
    inner = wrapped._module
    for j, (name, p) in enumerate(inner.named_parameters()):
        for i in range(len(x)):
            torch.testing.assert_close(
                p.grad_sample[i], want[i][j], rtol=1e-9, atol=1e-9, msg=lambda m, name=name: f"{name}: {m}"
            )


# -- FLOP and parameter counters ------------------------------------------------------------
@pytest.fixture(scope="module")
def resnets():
    x = torch.randn(1, 3, 32, 32)
    out = {}
    for name in ("cifar_qresnet20", "cifar_resnet20"):
        model = bench.create(name).eval()
        out[name] = (model, counting.macs(model, x), sum(p.numel() for p in model.parameters()))
    return x, out


def quiet(fn, *args, **kwargs):
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args, **kwargs)


# Each counter with its defaults, as a user first runs it: MACs within 2 % of the convolutions' and
# matrix products' (the counters add batch norm, activations, pooling, biases), parameters exact.
def test_thop_counts_quadratic_layers_out_of_the_box(resnets):
    thop = pytest.importorskip("thop")
    x, models = resnets
    for name, (model, truth, params) in models.items():
        macs, n_params = quiet(thop.profile, copy.deepcopy(model), (x,), verbose=False)
        assert macs == pytest.approx(truth, rel=0.02) and n_params == params, name
        # the rules passed explicitly, as before quadnn registered them, count the same
        explicit = quiet(thop.profile, copy.deepcopy(model), (x,), custom_ops=counting.thop_ops(), verbose=False)
        assert explicit == (macs, n_params), name


def test_ptflops_counts_quadratic_layers_out_of_the_box(resnets):
    ptflops = pytest.importorskip("ptflops")
    x, models = resnets
    for name, (model, truth, params) in models.items():
        macs, n_params = quiet(
            ptflops.get_model_complexity_info,
            copy.deepcopy(model),
            tuple(x.shape[1:]),
            as_strings=False,
            print_per_layer_stat=False,
        )
        assert macs == pytest.approx(truth, rel=0.02) and n_params == params, name


def test_torchinfo_counts_quadratic_layers_out_of_the_box(resnets):
    torchinfo = pytest.importorskip("torchinfo")
    x, models = resnets
    for name, (model, truth, params) in models.items():
        stats = torchinfo.summary(copy.deepcopy(model), input_data=x, verbose=0)
        assert stats.total_mult_adds == pytest.approx(truth, rel=0.02) and stats.total_params == params, name


def test_fvcore_and_flop_counter_mode_count_quadratic_layers(resnets):
    from fvcore.nn import FlopCountAnalysis
    from torch.utils.flop_counter import FlopCounterMode

    x, models = resnets
    for name, (model, truth, _) in models.items():
        counter = FlopCounterMode(display=False)
        with counter, torch.no_grad():
            model(x)
        assert counter.get_total_flops() == 2 * truth, name  # FLOPs: a multiply-accumulate is two
        fvcore = (
            FlopCountAnalysis(copy.deepcopy(model), x).unsupported_ops_warnings(False).uncalled_modules_warnings(False)
        )
        assert fvcore.total() == pytest.approx(truth, rel=0.02), name  # one per multiply-accumulate


def test_rules_reach_tools_imported_after_quadnn_and_before_it():
    """thop, ptflops and torchinfo are imported after quadnn here (their rules came through
    quadnn's import finder, the modules keep their own loaders); torch.ao's fusion table was
    imported before quadnn (by torch's own modules), so its rules came when quadnn was imported."""
    from torch.ao.quantization import fuser_method_mappings

    from quadnn import integrations

    for name in ("thop.profile", "ptflops.pytorch_ops", "torchinfo.layer_info"):
        pytest.importorskip(name)
        assert not isinstance(sys.modules[name].__spec__.loader, integrations._Loader), name
    assert QuadraticConv2d in sys.modules["thop.profile"].register_hooks
    assert QuadraticConv2d in sys.modules["ptflops.pytorch_ops"].MODULES_MAPPING
    assert (QuadraticConv2d, nn.BatchNorm2d) in fuser_method_mappings._DEFAULT_OP_LIST_TO_FUSER_METHOD


@pytest.mark.parametrize("kind", NEURONS)
def test_layer_macs_equal_torch_flop_counter(kind):
    for layer, x in (
        (QuadraticConv2d(4, 6, 3, stride=2, padding=1, groups=2, neuron=kind), torch.randn(2, 4, 7, 7)),
        (QuadraticLinear(5, 3, neuron=kind), torch.randn(4, 2, 5)),
    ):
        assert counting.layer_macs(layer, layer(x)) == counting.macs(layer, x)
