"""A neuron kind is one object (quadnn.neurons.Neuron): adding one is one place.

The kind added here, ``(W_r x + b_r)(W_g x + b_g) + W_r x + b_r + W_b (x*x) + c`` (poly with a power
term), is one ``Neuron(...)``; the layers, every implementation, ReLinear's initialisation,
quadratize, the counters, torch.func and batched gradients then take it, and the conv-BN fusion
refuses it by name. The paper's kinds are the same objects: their terms and linear maps are read
from them too.
"""

import pytest
import torch
from plain_formula import linear_op
from torch import nn

import quadnn
from quadnn import NEURONS, QuadraticConv2d, QuadraticLayer, QuadraticLinear, relinear
from quadnn.counting import layer_macs
from quadnn.neurons import Neuron, neuron_kind, register, unregister

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def gated_poly():
    kind = register(
        Neuron("gated_poly", lambda r, g, p: r * g + r + p, gate=True, power=True, constant=True, gate_bias=0.0)
    )
    yield kind.name
    unregister(kind.name)


def formula(layer, x):
    """The new kind written out by hand with torch's functional ops (no quadnn code)."""
    op = linear_op(layer)
    r = op(x, layer.weight, layer.bias)
    return r * op(x, layer.weight_g, layer.bias_g) + r + op(x * x, layer.weight_b, layer.bias_b)


def randomised(layer):
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    return layer


@pytest.mark.parametrize("make", [lambda k: QuadraticConv2d(4, 6, 3, padding=1, groups=2, neuron=k, dtype=torch.float64), lambda k: QuadraticLinear(5, 3, neuron=k, dtype=torch.float64)], ids=["conv", "linear"])  # fmt: skip
def test_a_kind_added_in_one_place_works_everywhere(gated_poly, make):
    layer = make(gated_poly)
    assert {n for n, _ in layer.named_parameters()} == {"weight", "bias", "weight_g", "bias_g", "weight_b", "bias_b"}
    x = (
        torch.randn(2, 4, 5, 5, dtype=torch.float64)
        if layer._channel_dim == 1
        else torch.randn(2, 5, dtype=torch.float64)
    )
    # ReLinear's start: the linear branch exactly
    conventional = (nn.Conv2d(4, 6, 3, padding=1, groups=2) if layer._channel_dim == 1 else nn.Linear(5, 3)).double()
    conventional.load_state_dict({"weight": layer.weight, "bias": layer.bias})
    torch.testing.assert_close(layer(x), conventional(x), rtol=0, atol=0)
    randomised(layer)
    want = formula(layer, x)
    for impl in QuadraticLayer.IMPLEMENTATIONS:  # each differentiates the plain form
        layer.implementation = impl
        torch.testing.assert_close(layer(x), want)
    xg = x.clone().requires_grad_()
    for impl in ("fused", "naive"):  # the gate fused with the linear branch, and one op per map
        layer.implementation = impl
        assert torch.autograd.gradcheck(lambda t: layer(t), (xg,), check_batched_grad=True, fast_mode=True)
    jac = torch.func.jacrev(layer)(x[:1])
    assert jac.shape == (*want[:1].shape, *x[:1].shape)
    assert layer_macs(layer, want) == 3 * want.numel() * (layer.weight[0].numel())
    assert neuron_kind(gated_poly).linear_maps == 3


def test_a_new_kind_through_quadratize_relinear_and_fusion(gated_poly):
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 9, 2)).eval()
    x = torch.randn(2, 3, 5, 5)
    y = model(x)
    quadnn.quadratize(model, neuron=gated_poly)
    torch.testing.assert_close(model(x), y)  # the same function at ReLinear's start
    groups = relinear.param_groups(model, lr=0.1, lr_g=1e-3, lr_b=1e-4)
    # two quadratic layers: gates (W_g, b_g) and power terms (W_b, c) 4 each; linear branches and BN 6
    assert sorted(len(g["params"]) for g in groups) == [4, 4, 6]
    with pytest.raises(ValueError, match=r"^QuadraticConv2d: batch norm folds into the kinds .*gated_poly"):
        quadnn.fusion.fuse_conv_bn_eval(model[0], model[1])


def test_kinds_are_checked_by_name(gated_poly):
    with pytest.raises(ValueError, match=r"exists already"):
        register(Neuron("full", lambda r, g, p: r))
    with pytest.raises(
        ValueError, match=r"neuron must be one of \('full', 'compact', 'parabolic', 'poly', 'gated_poly'\), got 'nope'"
    ):
        QuadraticLinear(2, 2, neuron="nope")
    with pytest.raises(ValueError, match=r"cannot be removed"):
        unregister("full")


@pytest.mark.parametrize("name", NEURONS)
def test_the_papers_kinds_are_the_objects_the_layers_read(name):
    kind = neuron_kind(name)
    layer = randomised(QuadraticLinear(4, 3, neuron=name, dtype=torch.float64))
    terms = {n for n, *_ in layer.quadratic_terms()}
    assert ("weight_g" in terms) == kind.gate and ("weight_b" in terms) == kind.power and kind.hand_written
    x = torch.randn(2, 4, dtype=torch.float64)
    g = nn.functional.linear(x, layer.weight_g, layer.bias_g) if kind.gate else None
    p = nn.functional.linear(x * x, layer.weight_b, layer.bias_b) if kind.power else None
    want = kind.combine(nn.functional.linear(x, layer.weight, layer.bias), g, p)
    for impl in QuadraticLayer.IMPLEMENTATIONS:  # the hand-written paths compute the kind's combine
        layer.implementation = impl
        torch.testing.assert_close(layer(x), want)
