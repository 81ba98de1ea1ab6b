"""Quadratic layers: each neuron kind against its formula, gradients, ReLinear init, errors."""

import pytest
import torch
import torch.nn.functional as F
from plain_formula import randomise_
from torch import nn

from quadnn import NEURONS, QuadraticConv1d, QuadraticConv2d, QuadraticLinear, Square
from quadnn.layers import QuadraticConv3d

KINDS = list(NEURONS)


pytestmark = pytest.mark.usefixtures("one_thread")


# -- an independent reference: convolution by unfolding, then the neuron's formula ------
def conv2d_by_unfold(x, w, b, stride, padding, dilation, groups):
    """2-d convolution as explicit patches x weights (no call to F.conv2d)."""
    n, c, h, wd = x.shape
    out, cg, kh, kw = w.shape
    cols = F.unfold(x, (kh, kw), dilation=dilation, padding=padding, stride=stride)  # (n, c*kh*kw, L)
    cols = cols.view(n, groups, cg * kh * kw, -1)
    wg = w.view(groups, out // groups, cg * kh * kw)
    y = torch.einsum("ngkl,gok->ngol", cols, wg).reshape(n, out, -1)
    if b is not None:
        y = y + b[None, :, None]
    ho = (h + 2 * padding - dilation * (kh - 1) - 1) // stride + 1
    wo = (wd + 2 * padding - dilation * (kw - 1) - 1) // stride + 1
    return y.view(n, out, ho, wo)


def linear_op(layer):
    """The layer's conventional operation written out explicitly: (x, W, b) -> W x + b."""
    if isinstance(layer, QuadraticLinear):
        return lambda x, w, b: x @ w.T + (0 if b is None else b)
    s, p, d, g = layer.stride[0], layer.padding[0], layer.dilation[0], layer.groups
    if isinstance(layer, QuadraticConv2d):
        return lambda x, w, b: conv2d_by_unfold(x, w, b, s, p, d, g)
    # Conv1d as a 2-d convolution over a height-1 image, padded explicitly along the length
    return lambda x, w, b: conv2d_by_unfold(F.pad(x, (p, p))[:, :, None], w[:, :, None], b, s, 0, d, g)[:, :, 0]


def formula(layer, x):
    """The neuron kind's defining formula, term by term."""
    op = linear_op(layer)
    r = op(x, layer.weight, layer.bias)
    kind = layer.neuron
    if kind == "compact":
        return r + op(x * x, layer.weight_b, layer.bias_b)
    g = op(x, layer.weight_g, layer.bias_g)
    if kind == "parabolic":
        return r * g
    if kind == "poly":
        return r * g + r
    return r * g + op(x * x, layer.weight_b, layer.bias_b)


# (constructor, input shape) covering stride / padding / dilation / groups / no bias
CASES = {
    "conv1d-s2-p1-g2": (
        lambda k, **kw: QuadraticConv1d(4, 6, 3, stride=2, padding=1, groups=2, neuron=k, **kw),
        (2, 4, 11),
    ),
    "conv1d-d2-nobias": (lambda k, **kw: QuadraticConv1d(3, 5, 3, dilation=2, bias=False, neuron=k, **kw), (2, 3, 12)),
    "conv2d-s2-p1-g2": (
        lambda k, **kw: QuadraticConv2d(4, 6, 3, stride=2, padding=1, groups=2, neuron=k, **kw),
        (2, 4, 9, 9),
    ),
    "conv2d-p2-d2": (lambda k, **kw: QuadraticConv2d(3, 4, 3, padding=2, dilation=2, neuron=k, **kw), (2, 3, 7, 8)),
    "conv2d-depthwise-nobias": (
        lambda k, **kw: QuadraticConv2d(4, 8, 3, padding=1, groups=4, bias=False, neuron=k, **kw),
        (1, 4, 6, 6),
    ),
    "linear": (lambda k, **kw: QuadraticLinear(5, 7, neuron=k, **kw), (3, 5)),
    "linear-3d-nobias": (lambda k, **kw: QuadraticLinear(5, 4, bias=False, neuron=k, **kw), (2, 3, 5)),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("kind", KINDS)
def test_forward_matches_formula_float64(kind, case):
    make, shape = CASES[case]
    layer = randomise_(make(kind, dtype=torch.float64))
    x = torch.randn(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    y = layer(x)
    expected = formula(layer, x)
    assert y.shape == expected.shape
    torch.testing.assert_close(y, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("kind", KINDS)
def test_terms_present_per_kind(kind):
    layer = QuadraticConv2d(2, 3, 3, neuron=kind)
    has = {n: getattr(layer, n) is not None for n in ("weight_g", "bias_g", "weight_b", "bias_b")}
    expected = {
        "full": dict(weight_g=True, bias_g=True, weight_b=True, bias_b=True),
        "compact": dict(weight_g=False, bias_g=False, weight_b=True, bias_b=True),  # c, as the official code
        "parabolic": dict(weight_g=True, bias_g=True, weight_b=False, bias_b=False),
        "poly": dict(weight_g=True, bias_g=True, weight_b=False, bias_b=False),
    }[kind]
    assert has == expected
    # parameter count: the linear branch plus one weight-sized tensor per extra weight term
    conv = nn.Conv2d(2, 3, 3)
    n_conv = sum(p.numel() for p in conv.parameters())
    n_extra = {
        "full": 2 * 3 * 2 * 9 + 2 * 3,
        "compact": 3 * 2 * 9 + 3,
        "parabolic": 3 * 2 * 9 + 3,
        "poly": 3 * 2 * 9 + 3,
    }
    assert sum(p.numel() for p in layer.parameters()) == n_conv + n_extra[kind]


# gradcheck perturbs every input element, so these layers are tiny
GRAD_CASES = {
    "conv1d-s2-p1-g2": (
        lambda k: QuadraticConv1d(2, 2, 3, stride=2, padding=1, groups=2, neuron=k, dtype=torch.float64),
        (2, 2, 5),
    ),
    "conv2d-s2-p1-g2": (
        lambda k: QuadraticConv2d(2, 4, 2, stride=2, padding=1, groups=2, neuron=k, dtype=torch.float64),
        (1, 2, 3, 3),
    ),
    "conv2d-nobias": (lambda k: QuadraticConv2d(2, 2, 2, bias=False, neuron=k, dtype=torch.float64), (1, 2, 3, 3)),
    "linear": (lambda k: QuadraticLinear(3, 2, neuron=k, dtype=torch.float64), (2, 3)),
}


@pytest.mark.parametrize("case", list(GRAD_CASES))
@pytest.mark.parametrize("kind", KINDS)
def test_gradcheck(kind, case):
    make, shape = GRAD_CASES[case]
    layer = randomise_(make(kind), seed=3)
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    names, params = zip(*layer.named_parameters())

    def f(x, *ps):
        return torch.func.functional_call(layer, dict(zip(names, ps)), (x,))

    assert torch.autograd.gradcheck(f, (x, *params), eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("kind", KINDS)
def test_relinear_init_computes_the_linear_branch(kind, case):
    make, shape = CASES[case]
    torch.manual_seed(0)
    layer = make(kind, dtype=torch.float64)
    x = torch.randn(shape, dtype=torch.float64)
    expected = linear_op(layer)(x, layer.weight, layer.bias)
    torch.testing.assert_close(layer(x), expected, rtol=1e-12, atol=1e-12)
    # and again after the terms were disturbed and reset_parameters() was called
    randomise_(layer)
    assert not torch.allclose(layer(x), linear_op(layer)(x, layer.weight, layer.bias))
    layer.reset_parameters()
    torch.testing.assert_close(layer(x), linear_op(layer)(x, layer.weight, layer.bias), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_relinear_reference_values(kind):
    layer = QuadraticConv2d(2, 3, 1, neuron=kind)
    if layer.bias_g is not None:
        assert torch.all(layer.bias_g == (0.0 if kind == "poly" else 1.0))
        assert torch.all(layer.weight_g == 0)
    if layer.weight_b is not None:
        assert torch.all(layer.weight_b == 0)
    if layer.bias_b is not None:
        assert torch.all(layer.bias_b == 0)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "conventional,quadratic,shape",
    [
        (
            lambda: nn.Conv2d(3, 4, 3, padding=1, groups=1),
            lambda k: QuadraticConv2d(3, 4, 3, padding=1, neuron=k),
            (2, 3, 5, 5),
        ),
        (
            lambda: nn.Conv1d(4, 4, 3, groups=2, bias=False),
            lambda k: QuadraticConv1d(4, 4, 3, groups=2, bias=False, neuron=k),
            (2, 4, 7),
        ),
        (lambda: nn.Linear(3, 2), lambda k: QuadraticLinear(3, 2, neuron=k), (4, 3)),
    ],
)
def test_conventional_state_dict_loads(kind, conventional, quadratic, shape):
    torch.manual_seed(0)
    conv, q = conventional(), quadratic(kind)
    randomise_(q)  # disturbed quadratic terms must be reset to the reference on load
    result = q.load_state_dict(conv.state_dict())  # strict: a conventional checkpoint is complete
    assert not result.missing_keys and not result.unexpected_keys
    assert torch.equal(q.weight, conv.weight)
    x = torch.randn(shape)
    torch.testing.assert_close(q(x), conv(x), rtol=1e-5, atol=1e-6)


def test_quadratic_state_dict_round_trip_and_partial_is_an_error():
    a = randomise_(QuadraticConv2d(2, 3, 3))
    b = QuadraticConv2d(2, 3, 3)
    b.load_state_dict(a.state_dict())
    for n, p in a.named_parameters():
        assert torch.equal(p, getattr(b, n)), n
    partial = {k: v for k, v in a.state_dict().items() if k != "weight_b"}
    with pytest.raises(RuntimeError, match="weight_b"):
        b.load_state_dict(partial)


def test_unknown_neuron_is_a_value_error_naming_choices():
    for make in (
        lambda: QuadraticConv2d(2, 2, 3, neuron="cubic"),
        lambda: QuadraticConv1d(2, 2, 3, neuron="cubic"),
        lambda: QuadraticLinear(2, 2, neuron="cubic"),
    ):
        with pytest.raises(ValueError, match=r"cubic.*|.*'full'") as err:
            make()
        assert "cubic" in str(err.value) and all(k in str(err.value) for k in NEURONS)


@pytest.mark.parametrize(
    "layer,bad",
    [
        (QuadraticConv2d(3, 4, 3), torch.randn(2, 5, 8, 8)),  # wrong channels
        (QuadraticConv2d(3, 4, 3), torch.randn(2, 3, 8)),  # too few dimensions
        (QuadraticConv2d(3, 4, 3), torch.randn(1, 2, 3, 8, 8)),  # too many
        (QuadraticConv1d(3, 4, 3), torch.randn(2, 4, 8)),
        (QuadraticLinear(3, 4), torch.randn(2, 5)),
        (QuadraticLinear(3, 4), torch.tensor(1.0)),
    ],
)
def test_bad_shape_is_a_value_error(layer, bad):
    with pytest.raises(ValueError, match=r"expected input"):
        layer(bad)


def test_unbatched_input_like_torch():
    conv = QuadraticConv2d(3, 4, 3, neuron="full")
    randomise_(conv)
    x = torch.randn(3, 6, 6)
    torch.testing.assert_close(conv(x), conv(x[None])[0])
    conv1 = randomise_(QuadraticConv1d(3, 4, 3, neuron="parabolic"))
    x = torch.randn(3, 6)
    torch.testing.assert_close(conv1(x), conv1(x[None])[0])
    lin = randomise_(QuadraticLinear(3, 4))
    x = torch.randn(3)
    torch.testing.assert_close(lin(x), lin(x[None])[0])


@pytest.mark.parametrize("make", [lambda: QuadraticConv2d(3, 4, 3), lambda: QuadraticLinear(3, 4)])
def test_dtype_mismatch_is_a_value_error(make):
    layer = make()
    x = (
        torch.randn(2, 3, 6, 6, dtype=torch.float64)
        if isinstance(layer, nn.Conv2d)
        else torch.randn(2, 3, dtype=torch.float64)
    )
    with pytest.raises(ValueError, match=r"float64.*float32|float32.*float64"):
        layer(x)


def test_bad_constructor_arguments():
    with pytest.raises(ValueError):
        QuadraticConv2d(3, 4, 3, groups=2)  # in_channels not divisible by groups (torch's own check)
    with pytest.raises(ValueError, match="neuron"):
        QuadraticLinear(3, 4, neuron=None)


def test_factory_kwargs_and_repr():
    layer = QuadraticConv2d(2, 3, 3, neuron="compact", dtype=torch.float64, device="cpu")
    assert all(p.dtype == torch.float64 for p in layer.parameters())
    assert "neuron='compact'" in repr(layer) and "kernel_size=(3, 3)" in repr(layer)
    assert "neuron='poly'" in repr(QuadraticLinear(2, 3, neuron="poly"))
    assert isinstance(layer, nn.Conv2d) and isinstance(QuadraticLinear(2, 3), nn.Linear)


@pytest.mark.parametrize("kind", KINDS)
def test_bf16_autocast_on_cpu(kind):
    layer = randomise_(QuadraticConv2d(4, 6, 3, padding=1, neuron=kind))
    x = torch.randn(2, 4, 8, 8, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = layer(x)
    assert y.dtype == torch.bfloat16
    ref = layer(x)
    torch.testing.assert_close(y.float(), ref, rtol=0.05, atol=0.05 * ref.abs().max().item())
    y.float().sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    assert all(p.grad is not None and p.grad.dtype == p.dtype for p in layer.parameters())


def test_square():
    x = torch.tensor([-2.0, 0.5, 3.0])
    assert torch.equal(Square()(x), torch.tensor([4.0, 0.25, 9.0]))


# -- the fast implementation against the naive formulation ----------------------------------
IMPL_CASES = {
    "conv2d-g2-s2": (lambda k: QuadraticConv2d(4, 6, 3, stride=2, padding=1, groups=2, neuron=k), (2, 4, 9, 9)),
    "conv2d-nobias": (lambda k: QuadraticConv2d(3, 5, 3, padding=1, bias=False, neuron=k), (2, 3, 8, 8)),
    "conv1d-reflect": (lambda k: QuadraticConv1d(3, 4, 3, padding=2, padding_mode="reflect", neuron=k), (2, 3, 10)),
    "conv2d-circular-g3": (
        lambda k: QuadraticConv2d(3, 6, 3, padding=1, groups=3, padding_mode="circular", neuron=k),
        (2, 3, 6, 6),
    ),
    "linear-3d": (lambda k: QuadraticLinear(5, 4, neuron=k), (2, 3, 5)),
}


def run_impl(layer, impl, x, memory_format=torch.contiguous_format):
    layer = randomise_(layer, seed=5)
    layer.implementation = impl
    x = x.clone().to(memory_format=memory_format).requires_grad_(True)
    y = layer(x)
    (y * torch.linspace(-1, 1, y.numel()).view_as(y)).sum().backward()
    return [y.detach(), x.grad] + [p.grad for p in layer.parameters()]


@pytest.mark.parametrize("case", list(IMPL_CASES))
@pytest.mark.parametrize("kind", KINDS)
def test_fast_and_fused_match_naive_in_float32(kind, case):
    make, shape = IMPL_CASES[case]
    x = torch.randn(shape, generator=torch.Generator().manual_seed(2))
    naive = run_impl(make(kind), "naive", x)
    for impl in ("fast", "speed", "lean", "fused"):
        for a, b in zip(run_impl(make(kind), impl, x), naive):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5 * b.abs().max().item())


@pytest.mark.parametrize("kind", KINDS)
def test_fast_matches_naive_channels_last(kind):
    x = torch.randn(2, 4, 7, 7)
    make = lambda: QuadraticConv2d(4, 6, 3, padding=1, neuron=kind).to(memory_format=torch.channels_last)  # noqa: E731
    fast = run_impl(make(), "fast", x, torch.channels_last)
    naive = run_impl(make(), "naive", x)
    assert fast[0].is_contiguous(memory_format=torch.channels_last)
    for a, b in zip(fast, naive):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5 * b.abs().max().item())


@pytest.mark.parametrize("kind", KINDS)
def test_fast_without_input_gradient(kind):
    layer = randomise_(QuadraticConv2d(3, 4, 3, neuron=kind))
    x = torch.randn(2, 3, 6, 6)  # a network's input: no gradient wanted
    layer(x).pow(2).sum().backward()
    grads = [p.grad.clone() for p in layer.parameters()]
    layer.zero_grad()
    layer.implementation = "naive"
    layer(x).pow(2).sum().backward()
    for a, p in zip(grads, layer.parameters()):
        torch.testing.assert_close(a, p.grad, rtol=1e-5, atol=1e-5 * p.grad.abs().max().item())


def saved_bytes(layer, x):
    """Bytes autograd keeps for backward from one forward, counting each storage once."""
    storages = {}

    def pack(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        layer(x)
    return sum(storages.values())


@pytest.mark.parametrize("kind", KINDS)
def test_what_each_implementation_keeps_for_backward(kind):
    layer = QuadraticConv2d(8, 8, 3, padding=1, neuron=kind)
    x = torch.randn(4, 8, 16, 16, requires_grad=True)
    unit = x.numel() * 4  # one activation-sized float32 tensor
    weights = sum(p.numel() for p in layer.parameters()) * 4 * 2  # weights and their fused copies
    kept = {}
    for impl in ("fast", "speed", "lean", "naive"):
        layer.implementation = impl
        kept[impl] = saved_bytes(layer, x)
    # x alone (lean, compact); x and r (fast); x, r and g (speed)
    units = {"lean": 1, "fast": 2, "speed": 3} if kind != "compact" else {"lean": 1, "fast": 1, "speed": 1}
    for impl, n in units.items():
        assert n * unit <= kept[impl] <= n * unit + weights, (impl, kept[impl] / unit)
    # naive keeps x, r and g too, and x*x for full and compact
    assert kept["fast"] < kept["naive"] and kept["speed"] <= kept["naive"] + weights
    if kind in ("full", "compact"):
        assert kept["speed"] < kept["naive"]


@pytest.mark.parametrize("impl", ["fast", "speed", "lean"])
def test_no_grad_forward_matches_training_forward(impl):
    # without autograd the layer skips the Function (and its copy of r): same output, bit for bit
    layer = randomise_(QuadraticConv2d(4, 6, 3, padding=1), seed=3)
    layer.implementation = impl
    x = torch.randn(2, 4, 8, 8)
    with torch.no_grad():
        y = layer(x)
    assert y.grad_fn is None
    torch.testing.assert_close(y, layer(x).detach(), rtol=0, atol=0)
    with torch.inference_mode():
        torch.testing.assert_close(layer(x), y, rtol=0, atol=0)


@pytest.mark.parametrize("impl", ["fast", "speed", "lean"])
@pytest.mark.parametrize("kind", KINDS)
def test_bf16_autocast_matches_naive(kind, impl):
    x = torch.randn(2, 4, 8, 8)
    out = {}
    for name in (impl, "naive"):
        layer = randomise_(QuadraticConv2d(4, 6, 3, padding=1, neuron=kind), seed=7)
        layer.implementation = name
        xi = x.clone().requires_grad_(True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = layer(xi)
        y.float().sum().backward()
        out[name] = (y.float(), xi.grad, layer.weight.grad)
        assert y.dtype == torch.bfloat16 and layer.weight.grad.dtype == torch.float32
    for a, b in zip(out[impl], out["naive"]):
        torch.testing.assert_close(a, b, rtol=0.05, atol=0.03 * b.abs().max().item())


def test_unknown_implementation_is_a_value_error():
    layer = QuadraticLinear(2, 2)
    layer.implementation = "magic"
    with pytest.raises(ValueError, match="naive"):
        layer(torch.randn(1, 2))


def test_torch_func_transforms_see_the_same_function():
    # jacrev/vmap cannot trace the custom Function; the layer falls back to the plain form.
    torch.manual_seed(0)
    layer = QuadraticLinear(3, 2, dtype=torch.float64)
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_()
    params = dict(layer.named_parameters())
    x = torch.randn(4, 3, dtype=torch.float64)
    jac = torch.func.jacrev(lambda ps: torch.func.functional_call(layer, ps, (x,)))(params)
    y = layer(x)
    (gw,) = torch.autograd.grad(y[1, 0], layer.weight_g)
    assert torch.allclose(jac["weight_g"][1, 0], gw)


@pytest.mark.parametrize("kind", KINDS)
def test_conv3d_matches_naive_and_torch(kind):
    x = torch.randn(2, 4, 5, 6, 5, generator=torch.Generator().manual_seed(4))
    make = lambda: QuadraticConv3d(4, 6, 3, stride=(1, 2, 1), padding=1, groups=2, neuron=kind)  # noqa: E731
    naive = run_impl(make(), "naive", x)
    for impl in ("fast", "speed", "lean"):
        for a, b in zip(run_impl(make(), impl, x), naive):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5 * b.abs().max().item())
    conv = nn.Conv3d(4, 6, 3, padding=1)
    q = QuadraticConv3d(4, 6, 3, padding=1, neuron=kind)
    q.load_state_dict(conv.state_dict())  # a conventional Conv3d checkpoint, at ReLinear init
    torch.testing.assert_close(q(x), conv(x), rtol=1e-5, atol=1e-6)
    assert q(x[0]).shape == conv(x[0]).shape  # unbatched


@pytest.mark.parametrize("kind", KINDS)
def test_fx_symbolic_trace_records_the_same_function(kind):
    # torch.fx.symbolic_trace follows the plain formulation (no value-dependent checks)
    for layer, shape in (
        (QuadraticConv2d(4, 6, 3, padding=1, groups=2, neuron=kind), (2, 4, 7, 7)),
        (QuadraticConv1d(3, 4, 3, padding=1, padding_mode="reflect", neuron=kind), (2, 3, 9)),
        (QuadraticLinear(5, 3, neuron=kind), (4, 5)),
    ):
        randomise_(layer)
        gm = torch.fx.symbolic_trace(layer)
        x = torch.randn(shape)
        torch.testing.assert_close(gm(x), layer(x), rtol=1e-5, atol=1e-5)
        assert not any(n.op == "call_module" for n in gm.graph.nodes)
