"""Quadratic layers inside the tools users already run (docs/works-with.md has one row per test group).

FLOP counters (fvcore through TorchScript, torch.utils.flop_counter), torch.jit.trace, ONNX export
run in onnxruntime, torch.export, double backward, weight/spectral norm, quantization (torchao,
torch.ao), bf16 autocast, and timm's training utilities, EMA, safetensors and save_for_hf. Models
are tiny so the whole file runs in seconds.
"""

import copy
import io
import logging
import statistics
import warnings

import pytest
import timm
import torch
import torch.nn.functional as F
from torch import nn

import quadnn  # noqa: F401  (registers the models)
from quadnn import NEURONS, QuadraticConv2d, QuadraticLayer, QuadraticLinear, counting
from quadnn.relinear import quadratic_terms
from quadnn_paper import bench

pytestmark = pytest.mark.usefixtures("one_thread")

IMPLEMENTATIONS = QuadraticLayer.IMPLEMENTATIONS


class EveryKind(nn.Module):
    """One layer of every neuron kind (a grouped and a reflect-padded one among them), BN, ReLU,
    and a quadratic classifier."""

    def __init__(self, width=4):
        super().__init__()
        layers, c = [], 3
        for i, kind in enumerate(NEURONS):
            extra = dict(groups=2) if i == 2 else dict(padding_mode="reflect") if i == 3 else {}
            layers += [QuadraticConv2d(c, width, 3, padding=1, neuron=kind, **extra), nn.BatchNorm2d(width), nn.ReLU()]
            c = width
        self.body = nn.Sequential(*layers)
        self.head = QuadraticLinear(width, 5, neuron="full")

    def forward(self, x):
        return self.head(self.body(x).mean((2, 3)))


def randomise_terms_(model, scale=0.1, seed=0):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p, _, _ in quadratic_terms(model):
            p.add_(torch.randn(p.shape, generator=gen) * scale)
    return model


def every_kind(seed=0):
    torch.manual_seed(seed)
    return randomise_terms_(EveryKind(), seed=seed)


def rel_err(a, b):
    return ((a - b).abs().max() / b.abs().max()).item()


# -- FLOP counters ----------------------------------------------------------------------------
def fvcore_flops(model, x, conv_and_matmul_only=True):
    from fvcore.nn import FlopCountAnalysis

    logging.getLogger("fvcore").setLevel(logging.ERROR)
    count = FlopCountAnalysis(model, x).unsupported_ops_warnings(False).uncalled_modules_warnings(False)
    if conv_and_matmul_only:  # what torch.utils.flop_counter (and so quadnn.counting.forward_gflops) counts
        return sum(v for k, v in count.by_operator().items() if k in ("conv", "linear", "addmm", "matmul", "mm"))
    return count.total()


def flop_counter_flops(model, x):
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        model(x)
    return counter.get_total_flops()


def conventional_twin(layer):
    """The conventional layer of the same shape."""
    if isinstance(layer, nn.Linear):
        return nn.Linear(layer.in_features, layer.out_features)
    return nn.Conv2d(
        layer.in_channels, layer.out_channels, layer.kernel_size, layer.stride, layer.padding, groups=layer.groups
    )


# Multiply-accumulates of a quadratic layer over its conventional twin: full has three linear maps
# (r, g, W_b on x*x), compact two (W_r x, W_b x*x), parabolic/poly two (r, g).
COST = {"full": 3, "compact": 2, "parabolic": 2, "poly": 2}


@pytest.mark.parametrize("kind", NEURONS)
@pytest.mark.parametrize("train", [True, False])
def test_fvcore_counts_every_kind_with_gradients_on(kind, train):
    layer = QuadraticConv2d(4, 6, 3, padding=1, neuron=kind).train(train)
    x = torch.randn(2, 4, 5, 5)
    twin = fvcore_flops(conventional_twin(layer), x)
    assert fvcore_flops(layer, x) == COST[kind] * twin
    # fvcore counts a multiply-accumulate once, torch.utils.flop_counter twice
    assert 2 * fvcore_flops(layer, x) == flop_counter_flops(layer, x)
    lin = QuadraticLinear(4, 6, neuron=kind).train(train)
    assert fvcore_flops(lin, torch.randn(3, 4)) == COST[kind] * fvcore_flops(conventional_twin(lin), torch.randn(3, 4))


def test_flop_counters_agree_with_bench_on_cifar_qresnet20():
    x = torch.randn(1, 3, 32, 32)
    counts = {}
    for name in ("cifar_qresnet20", "cifar_resnet20"):
        model = bench.create(name).train()
        with torch.enable_grad():
            counts[name] = (
                fvcore_flops(model, x),
                flop_counter_flops(model, x),
                counting.forward_gflops(model, x) * 1e9,
            )
    for fv, fc, b in counts.values():
        assert 2 * fv == fc == pytest.approx(b, rel=1e-9)
    q, c = counts["cifar_qresnet20"][0], counts["cifar_resnet20"][0]
    assert 2.9 < q / c < 3.0  # every conv but none of the classifier's FLOPs are tripled
    # fvcore's default total (batch norm and pooling included), as timm's benchmark.py reports it
    model_q, model_c = (bench.create(n).train() for n in ("cifar_qresnet20", "cifar_resnet20"))
    assert 2.9 < fvcore_flops(model_q, x, False) / fvcore_flops(model_c, x, False) < 3.0


# -- torch.jit.trace --------------------------------------------------------------------------
@pytest.mark.parametrize("train", [True, False])
def test_jit_trace_passes_its_check_saves_and_loads(train):
    model = every_kind().train(train)
    x = torch.randn(2, 3, 6, 6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traced = torch.jit.trace(model, x)  # check_trace=True: re-traces and compares the graphs
    # (torch's batch norm warns in train mode; the quadratic layers do not)
    assert not [w for w in caught if issubclass(w.category, torch.jit.TracerWarning) and "quadnn" in w.filename]
    ref = model(x)
    out = traced(x)
    assert rel_err(out, ref) < 1e-5
    buf = io.BytesIO()
    torch.jit.save(traced, buf)
    buf.seek(0)
    loaded = torch.jit.load(buf)
    torch.testing.assert_close(loaded(x), out)
    # the traced module trains: gradients equal eager's
    ga = torch.autograd.grad(traced(x).square().sum(), list(traced.parameters()))
    gb = torch.autograd.grad(model(x).square().sum(), list(model.parameters()))
    for a, b in zip(ga, gb):  # (a bias before batch norm has a gradient of 0 up to rounding)
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


# -- ONNX, torch.export -----------------------------------------------------------------------
@pytest.mark.parametrize("dynamo", [False, pytest.param(True, marks=pytest.mark.slow)])  # True: the default
def test_onnx_export_runs_in_onnxruntime(tmp_path, dynamo):
    ort = pytest.importorskip("onnxruntime")
    model = every_kind().eval()
    x = torch.randn(2, 3, 6, 6)
    path = tmp_path / "m.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kw = (
            dict(dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
            if dynamo
            else dict(input_names=["x"], dynamic_axes={"x": {0: "batch"}})
        )
        torch.onnx.export(model, (x,), str(path), dynamo=dynamo, **kw)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    for batch in (2, 3):
        xb = torch.randn(batch, 3, 6, 6)
        (out,) = session.run(None, {name: xb.numpy()})
        assert rel_err(torch.from_numpy(out), model(xb).detach()) < 1e-4


@pytest.mark.parametrize("train", [True, False])
def test_torch_export_is_exact(train):
    model = every_kind().train(train)
    x = torch.randn(2, 3, 6, 6)
    ep = torch.export.export(copy.deepcopy(model), (x,))
    torch.testing.assert_close(ep.module()(x), model(x))


# -- double backward --------------------------------------------------------------------------
def functional(layer):
    names = [n for n, p in layer.named_parameters()]

    def f(x, *params):
        return torch.func.functional_call(layer, dict(zip(names, params)), (x,))

    return f, [p for p in layer.parameters()]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("kind", NEURONS)
def test_gradgradcheck_every_kind_and_implementation(kind, impl):
    torch.manual_seed(0)
    layers = [
        (QuadraticConv2d(2, 2, 2, neuron=kind, dtype=torch.float64), (1, 2, 3, 3)),
        (QuadraticConv2d(2, 2, 2, groups=2, neuron=kind, dtype=torch.float64), (1, 2, 3, 3)),
        (QuadraticLinear(3, 2, neuron=kind, dtype=torch.float64), (2, 3)),
    ]
    for layer, shape in layers:
        randomise_terms_(layer, scale=0.5)
        layer.implementation = impl
        f, params = functional(layer)
        x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradgradcheck(f, (x, *params), fast_mode=True)


def test_gradient_penalty_of_a_model_equals_naive():
    model = every_kind().double()
    x = torch.randn(2, 3, 5, 5, dtype=torch.float64, requires_grad=True)
    grads = {}
    for impl in ("fast", "naive"):
        bench.set_implementation(model, impl)
        (dx,) = torch.autograd.grad(model(x).square().sum(), x, create_graph=True)
        grads[impl] = torch.autograd.grad(dx.square().sum(), list(model.parameters()))
    for a, b in zip(grads["fast"], grads["naive"]):
        torch.testing.assert_close(a, b)


# -- weight norm, spectral norm ---------------------------------------------------------------
def snapshot(layer):
    """What a refused transform must leave as it was: the parameters (names, order, objects,
    values), buffers, hooks and output."""
    return (
        [(n, p, p.detach().clone()) for n, p in layer.named_parameters()],
        {k: v.clone() for k, v in layer.state_dict().items()},
        list(layer._forward_pre_hooks.values()),
    )


def assert_unchanged(layer, before, x, y):
    params, state, hooks = before
    assert [(n, id(p)) for n, p in layer.named_parameters()] == [(n, id(p)) for n, p, _ in params]
    assert all(torch.equal(p, v) for _, p, v in params)
    after = layer.state_dict()
    assert list(after) == list(state) and all(torch.equal(after[k], state[k]) for k in state)
    assert list(layer._forward_pre_hooks.values()) == hooks
    torch.testing.assert_close(layer(x), y, rtol=0, atol=0)  # still callable, the same function


@pytest.mark.parametrize("layer_cls", [QuadraticConv2d, QuadraticLinear])
@pytest.mark.parametrize("kind", NEURONS)
def test_refused_legacy_weight_norm_leaves_the_layer_as_it_was(layer_cls, kind):
    layer = randomise_terms_(layer_cls(3, 4, *([3] if layer_cls is QuadraticConv2d else []), neuron=kind))
    x = torch.randn(2, 3, 5, 5) if layer_cls is QuadraticConv2d else torch.randn(2, 3)
    y, before = layer(x), snapshot(layer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        with pytest.raises(RuntimeError, match=r"'weight_g'.*left as it was.*parametrizations\.weight_norm") as e:
            torch.nn.utils.weight_norm(layer)
    # the message names only what the kind has: compact has no gate
    assert ("gate" in str(e.value)) == (kind != "compact") and "\n" not in str(e.value)
    assert_unchanged(layer, before, x, y)


@pytest.mark.parametrize("kind", NEURONS)
def test_torch_ao_quantization_and_torch_fusion_leave_the_layer_as_it_was(kind):
    from torch.ao import quantization as tq

    layer = randomise_terms_(QuadraticConv2d(3, 4, 3, neuron=kind))
    x = torch.randn(2, 3, 5, 5)
    y, before = layer(x), snapshot(layer)
    model = nn.Sequential(tq.QuantStub(), layer, tq.DeQuantStub()).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the layer's own "left in float" warning, torch.ao's deprecation
        model.qconfig = tq.get_default_qconfig("x86")
        tq.convert(tq.prepare(model, inplace=True), inplace=True)
    assert model[1] is layer
    assert_unchanged(layer, before, x, y)
    # torch's conv-BN fusion (weight and bias only) is refused in one line naming quadnn's
    bn = nn.BatchNorm2d(4).eval()
    with pytest.raises(RuntimeError, match=r"^QuadraticConv2d: .*quadnn\.fusion\.fuse_conv_bn_eval[^\n]*$"):
        torch.nn.utils.fusion.fuse_conv_bn_eval(layer.eval(), bn)
    assert_unchanged(layer.train(), before, x, y)


@pytest.mark.parametrize("kind", NEURONS)
def test_weight_and_spectral_norm_keep_the_neuron(kind):
    from torch.nn.utils import parametrizations

    x = torch.randn(2, 3, 5, 5)
    cases = [
        (parametrizations.weight_norm, "weight"),
        (parametrizations.spectral_norm, "weight"),
        (torch.nn.utils.spectral_norm, "weight"),
    ]
    if kind in ("full", "compact"):
        cases.append((torch.nn.utils.weight_norm, "weight_b"))  # legacy, on a term without a clash
    for norm, name in cases:
        layer = randomise_terms_(QuadraticConv2d(3, 4, 3, neuron=kind), seed=1)
        ref = copy.deepcopy(layer)
        ref.implementation = "naive"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            norm(layer, name)
        with torch.nn.utils.parametrize.cached():  # spectral_norm iterates on each evaluation: read it once
            y, normalised = layer(x), getattr(layer, name)
        for n, p, _, _ in layer.quadratic_terms():  # every other term is still the layer's
            if n != name:
                torch.testing.assert_close(p, getattr(ref, n))
        # the neuron computed with the normalised weight in place of `name`
        torch.testing.assert_close(y, torch.func.functional_call(ref, {name: normalised}, (x,)))
        y.sum().backward()
        assert all(p.grad is not None for p in layer.parameters() if p.requires_grad)


# -- quantization -----------------------------------------------------------------------------
def quantization_configs():
    ao = pytest.importorskip("torchao.quantization")
    from torchao.quantization.granularity import PerGroup

    return {
        "int8-dynamic": ao.Int8DynamicActivationInt8WeightConfig(),
        "int8-weight": ao.Int8WeightOnlyConfig(),
        "int4-weight": ao.IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)),
    }


def torchao_tensor(p):
    return type(p).__module__.startswith("torchao")


def mlp(kind="full"):
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(64, 64), nn.ReLU(), QuadraticLinear(64, 64, neuron=kind), nn.ReLU(), nn.Linear(64, 8)
    )
    return randomise_terms_(model, scale=0.1)


def quantization_error(layer, config, x, whole=True):
    """Relative error of ``layer``'s output after quantizing it in a model, and the layer."""
    from torchao.quantization import quantize_

    from quadnn.convert import quantize_ as quantize_whole_

    ref = layer(x).detach()
    model = nn.Sequential(copy.deepcopy(layer))
    (quantize_whole_ if whole else quantize_)(model, config)
    return ((model(x) - ref).norm() / ref.norm()).item(), model[0]


@pytest.mark.parametrize("config", ["int8-dynamic", "int8-weight", "int4-weight"])
def test_torchao_quantizes_a_quadratic_layer_as_a_whole(config):
    config = quantization_configs()[config]
    x = torch.randn(32, 64)
    for kind in NEURONS:
        layer = randomise_terms_(QuadraticLinear(64, 64, neuron=kind), scale=0.1)
        err, q = quantization_error(layer, config, x)
        assert all(torchao_tensor(p) for n, p in q.named_parameters() if n.startswith("weight"))
        # the quantization error of the neuron is that of int8/int4 weights: a few times a linear layer's
        lin_err, _ = quantization_error(nn.Linear(64, 64), config, x)
        assert 0 < err < 4 * lin_err + 1e-3, (kind, err, lin_err)
    model = mlp()
    from quadnn.convert import quantize_ as quantize_whole_

    quantize_whole_(model, config)
    assert torchao_tensor(model[0].weight) and torchao_tensor(model[2].weight_g) and torchao_tensor(model[4].weight)


def test_torchao_alone_leaves_a_quadratic_layer_in_float_and_says_so():
    from torchao.quantization import quantize_

    model = mlp()
    x = torch.randn(8, 64)
    h = model[1](model[0](x)).detach()
    ref, before = model[2](h), snapshot(model[2])
    with pytest.warns(UserWarning, match=r"QuadraticLinear\(in_features=64.*left in float.*linear branch"):
        quantize_(model, quantization_configs()["int8-weight"])
    assert torchao_tensor(model[0].weight)  # the conventional layers are quantized
    assert not any(torchao_tensor(p) for p in model[2].parameters())
    assert_unchanged(model[2], before, h, ref)  # the refusal changed nothing


def test_torch_ao_dynamic_quantization_leaves_quadratic_layers_in_float():
    from torch.ao.quantization import quantize_dynamic

    model = mlp()
    x = torch.randn(8, 64)
    h = model[1](model[0](x))
    ref = model[2](h)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.warns(UserWarning, match=r"QuadraticLinear\(in_features=64.*left in float"):
            q = quantize_dynamic(model, {nn.Linear, QuadraticLinear})
        q_linear_only = quantize_dynamic(model, {nn.Linear})
    for m in (q, q_linear_only):
        assert m[0]._get_name() == "DynamicQuantizedLinear" and type(m[2]) is QuadraticLinear
        assert all(type(p) is nn.Parameter for p in m[2].parameters()) and not hasattr(m[2], "qconfig")
        torch.testing.assert_close(m[2](h), ref)


# -- bf16 -------------------------------------------------------------------------------------
def trained_like(name, seed=1, **kwargs):
    """A timm model in a state where every parameter has a gradient: the residual blocks' last BN
    gammas (zero at initialisation) and the quadratic terms moved off their init."""
    torch.manual_seed(seed)
    model = timm.create_model(name, num_classes=10, **kwargs).train()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.copy_(torch.rand(m.weight.shape, generator=gen) + 0.5)
    return bench.randomise_terms_(model, seed=seed)


def float32_forward(module):
    """Run ``module`` in float32 under autocast."""
    forward = module.forward

    def f(x):
        with torch.autocast("cpu", enabled=False):
            return forward(x.float())

    module.forward = f


def bf16_gradient_cosine(name, batch=16, seed=0, width=1.0, variant=None):
    """Cosine similarity of the whole-model gradient under CPU bf16 autocast to the float32 one.

    ``variant``: "quadratic32" runs the quadratic layers in float32; "stem-only" compares with
    float32 throughout except the stem convolution's output rounded to bf16."""
    model = trained_like(name, seed + 1, width=width)
    gen = torch.Generator().manual_seed(seed)
    x, y = torch.randn(batch, 3, 32, 32, generator=gen), torch.randint(0, 10, (batch,), generator=gen)
    if variant == "quadratic32":
        for m in model.modules():
            if isinstance(m, QuadraticLayer):
                float32_forward(m)
    grads = []
    for amp in (False, True):
        if variant == "stem-only" and amp:
            model.conv1.register_forward_hook(lambda m, i, o: o.to(torch.bfloat16).float())
            amp = False
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            F.cross_entropy(model(x), y).backward()
        grads.append(torch.cat([p.grad.flatten().double() for p in model.parameters()]))
    return F.cosine_similarity(*grads, dim=0).item()


@pytest.mark.slow
def test_bf16_gradients_of_a_quadratic_network_follow_float32():
    # docs/works-with.md gives the spread over seeds (median 0.95 against 0.99 for the
    # conventional net); bf16 CPU convolutions are slow, hence a narrow net
    q = bf16_gradient_cosine("cifar_qresnet20", width=0.25, seed=0)
    c = bf16_gradient_cosine("cifar_resnet20", width=0.25, seed=0)
    assert q > 0.9 and c > 0.97, (q, c)


# -- timm: training utilities, EMA, safetensors, save_for_hf ----------------------------------
def test_timm_optimizer_ema_bf16_channels_last_step():
    from timm.optim import create_optimizer_v2
    from timm.utils import ModelEmaV3

    model = trained_like("cifar_qresnet20", width=0.25).to(memory_format=torch.channels_last)
    opt = create_optimizer_v2(model, "sgd", lr=0.05, momentum=0.9, weight_decay=1e-4)
    ema = ModelEmaV3(model, decay=0.5)
    before = copy.deepcopy(model.state_dict())
    x = torch.randn(8, 3, 32, 32).to(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (8,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    ema.update(model, step=1000)  # past the warm-up: the stated decay
    after = model.state_dict()
    assert torch.isfinite(loss) and not torch.equal(before["layer1.0.conv1.weight_g"], after["layer1.0.conv1.weight_g"])
    for k in ("layer1.0.conv1.weight_g", "layer1.0.conv1.weight_b", "layer1.0.conv1.weight"):
        torch.testing.assert_close(ema.module.state_dict()[k], 0.5 * before[k] + 0.5 * after[k])


def test_timm_safetensors_and_save_for_hf_round_trips(tmp_path):
    from safetensors.torch import save_file
    from timm.models import save_for_hf

    model = trained_like("cifar_qresnet20")
    x = torch.randn(4, 3, 32, 32)
    for m in model.modules():  # running statistics of this batch, so eval mode stays finite
        if isinstance(m, nn.BatchNorm2d):
            m.momentum = None
    with torch.no_grad():
        model(x)
    ref = model.eval()(x)
    assert torch.isfinite(ref).all()
    save_file(model.state_dict(), str(tmp_path / "w.safetensors"))
    loaded = timm.create_model(
        "cifar_qresnet20", pretrained=True, pretrained_cfg_overlay=dict(file=str(tmp_path / "w.safetensors"))
    ).eval()
    torch.testing.assert_close(loaded(x), ref)
    save_for_hf(model, str(tmp_path / "hf"), safe_serialization=True)
    loaded = timm.create_model(f"local-dir:{tmp_path / 'hf'}", pretrained=True).eval()
    assert any(isinstance(m, QuadraticLayer) for m in loaded.modules())
    torch.testing.assert_close(loaded(x), ref)


def measure():
    """The figures of docs/works-with.md: ``PYTHONPATH=core python tests/test_ecosystem.py``."""
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    x = torch.randn(1, 3, 32, 32)
    q, c = (bench.create(n).train() for n in ("cifar_qresnet20", "cifar_resnet20"))
    print("FLOPs cifar_qresnet20 / cifar_resnet20, gradients on, train mode:")
    print(f"  fvcore total (timm benchmark.py)  {fvcore_flops(q, x, False) / fvcore_flops(c, x, False):.3f}")
    print(f"  fvcore convs and matmuls          {fvcore_flops(q, x) / fvcore_flops(c, x):.3f}")
    print(f"  torch.utils.flop_counter          {flop_counter_flops(q, x) / flop_counter_flops(c, x):.3f}")
    print(f"  quadnn.counting.forward_gflops    {counting.forward_gflops(q, x) / counting.forward_gflops(c, x):.3f}")
    print(
        "quantized / float output, relative error (QuadraticLinear(64, 64) via quadnn.convert.quantize_;"
        " nn.Linear(64, 64) via torchao):"
    )
    xq = torch.randn(256, 64)
    for label, config in quantization_configs().items():
        lin = quantization_error(nn.Linear(64, 64), config, xq)[0]
        errs = {
            kind: quantization_error(randomise_terms_(QuadraticLinear(64, 64, neuron=kind), scale=0.1), config, xq)[0]
            for kind in NEURONS
        }
        print(f"  {label:13s} nn.Linear {lin:.4f}  " + "  ".join(f"{k} {v:.4f}" for k, v in errs.items()))
    print("bf16 autocast gradient cosine to float32 (width 0.25, batch 16, seeds 0-5):")
    for name, variant in (
        ("cifar_qresnet20", None),
        ("cifar_resnet20", None),
        ("cifar_qresnet20", "quadratic32"),
        ("cifar_qresnet20", "stem-only"),
        ("cifar_resnet20", "stem-only"),
    ):
        cos = [bf16_gradient_cosine(name, width=0.25, seed=s, variant=variant) for s in range(6)]
        print(
            f"  {name:16s} {variant or 'bf16 autocast':14s}",
            " ".join(f"{v:.4f}" for v in cos),
            f" median {statistics.median(cos):.4f}",
        )


if __name__ == "__main__":
    measure()
