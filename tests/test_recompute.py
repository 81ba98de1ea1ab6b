"""plan_recompute: what each quadratic layer keeps for backward under a memory budget."""

import inspect

import pytest
import torch
from torch import nn

import quadnn
from quadnn import QuadraticConv2d, QuadraticLinear, plan_recompute


def two_stage_net():
    # a cheap layer per output (4 input channels) at high resolution, an expensive one (32) at low
    return nn.Sequential(
        QuadraticConv2d(4, 32, 3, padding=1),  # cost 36 per output, 32*16*16 outputs
        nn.ReLU(),
        QuadraticConv2d(32, 32, 3, stride=2, padding=1),  # cost 288, 32*8*8 outputs
        nn.ReLU(),
        QuadraticConv2d(32, 16, 1, padding=0, neuron="compact"),
    )


def test_budget_extremes_are_the_uniform_implementations():
    net, x = two_stage_net(), torch.randn(1, 4, 16, 16)
    assert plan_recompute(net, x, budget=2.0) == {"0": "speed", "2": "speed"}
    assert plan_recompute(net, x, budget=0.0) == {"0": "lean", "2": "lean"}
    assert net[4].implementation == "speed"  # compact neurons keep nothing extra: left at the default


def test_budget_one_recomputes_where_it_is_cheapest():
    net, x = two_stage_net(), torch.randn(1, 4, 16, 16)
    # outputs 8192 and 2048; budget 1.0 allows 10240 kept values of the 20480 "speed" keeps:
    # dropping both of the cheap layer's tensors (4096 left) meets it, one would not (12288)
    plan = plan_recompute(net, x, budget=1.0)
    assert plan == {"0": "lean", "2": "speed"}
    assert net[0].implementation == "lean" and net[2].implementation == "speed"
    # a budget that one dropped tensor of the cheap layer meets (17408 >= 12288) keeps r there
    assert plan_recompute(net, x, budget=1.7, apply=False) == {"0": "fast", "2": "speed"}


def test_plan_keeps_the_function_and_the_training_mode():
    torch.manual_seed(0)
    net, x = two_stage_net(), torch.randn(2, 4, 16, 16)
    with torch.no_grad():
        for m in net.modules():
            for name in ("weight_g", "weight_b"):
                if getattr(m, name, None) is not None:
                    getattr(m, name).normal_(0, 0.1)
    y0 = net(x)
    y0.square().sum().backward()
    g0 = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    plan_recompute(net, x[:1], budget=0.5)
    assert net.training
    y1 = net(x)
    y1.square().sum().backward()
    torch.testing.assert_close(y1, y0)
    for a, p in zip(g0, net.parameters()):
        torch.testing.assert_close(p.grad, a, rtol=1e-5, atol=1e-5 * a.abs().max().item())


def test_on_a_cifar_qresnet_the_full_resolution_stage_is_recomputed():
    model = quadnn.models.cifar_resnet.CifarResNet(20, neuron="full")
    plan = plan_recompute(model, torch.randn(1, 3, 32, 32), budget=1.0)
    # the six 16-channel layers at 32x32 hold 4/7 of the activations at 1/3 of the FLOPs:
    # five recompute r and g, the sixth only g, and that meets the budget
    assert sorted(plan[n] for n in plan if n.startswith("layer1")) == ["fast"] + ["lean"] * 5
    assert {plan[n] for n in plan if not n.startswith("layer1")} == {"speed"}


def test_bad_budget_and_unreached_layers():
    net = two_stage_net()
    with pytest.raises(ValueError, match=r"\[0, 2\]"):
        plan_recompute(net, torch.randn(1, 4, 16, 16), budget=3)
    branchy = nn.ModuleDict({"used": QuadraticLinear(3, 3), "unused": QuadraticLinear(3, 3)})
    branchy.forward = lambda x: branchy["used"](x)
    with pytest.raises(ValueError, match="unused"):
        plan_recompute(branchy, torch.randn(1, 3))


def test_a_lone_layers_default_keeps_r_and_g():
    # "speed": the tensors naive keeps less x*x, no recomputation (the efficiency section measures it)
    assert QuadraticConv2d(4, 4, 3).implementation == "speed" and QuadraticLinear(3, 3).implementation == "speed"
    assert (
        quadnn.recompute.DEFAULT_BUDGET == 2.0 and inspect.signature(plan_recompute).parameters["budget"].default == 2.0
    )


@pytest.mark.parametrize("name", ["cifar_qresnet20", "cifar_parabolic_resnet20", "cifar_qvgg16", "imagenet_qresnet18"])
def test_registered_models_are_built_with_a_plan_at_the_default_budget(name):
    import timm

    model = timm.create_model(name)
    probe = 64 if name.startswith("imagenet") else 32
    built = {n: m.implementation for n, m in model.named_modules() if isinstance(m, quadnn.QuadraticLayer)}
    assert built == plan_recompute(
        model, torch.zeros(1, 3, probe, probe), budget=quadnn.recompute.DEFAULT_BUDGET, apply=False
    )
    lower = timm.create_model(name, recompute_budget=1.0)
    impls = {m.implementation for m in lower.modules() if isinstance(m, quadnn.QuadraticLayer)}
    assert impls <= {"speed", "fast", "lean"} and len(impls) > 1  # a mix, not one everywhere
    # the plan depends on relative sizes only: the probe's resolution does not matter
    again = plan_recompute(
        timm.create_model(name, recompute_budget=2.0), torch.zeros(1, 3, 2 * probe, 2 * probe), budget=1.0, apply=False
    )
    assert again == {n: m.implementation for n, m in lower.named_modules() if isinstance(m, quadnn.QuadraticLayer)}
