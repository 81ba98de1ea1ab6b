"""torch.compile: quadratic layers trace without graph breaks, and compiled = eager (outputs, gradients).

Under compile the layers run their plain formulation (QuadraticLayer._forward_plain), which
AOTAutograd differentiates; eager mode runs the custom autograd Function. One small network with
every neuron kind (and a grouped, a reflect-padded and a linear layer) is compiled once with inductor
on the CPU; dynamo's explain checks the whole CIFAR QResNet20 for graph breaks.
"""

import copy

import pytest
import timm
import torch
import torch.nn.functional as F
from torch import nn

import quadnn  # noqa: F401  (registers the models)
from quadnn import NEURONS, QuadraticConv2d, QuadraticLinear
from quadnn.relinear import quadratic_terms

pytestmark = pytest.mark.usefixtures("one_thread")


class EveryKind(nn.Module):
    def __init__(self):
        super().__init__()
        layers, c = [], 3
        for i, kind in enumerate(NEURONS):
            extra = dict(groups=2) if i == 2 else dict(padding_mode="reflect") if i == 3 else {}
            layers += [
                QuadraticConv2d(c if i == 0 else 8, 8, 3, padding=1, neuron=kind, **extra),
                nn.BatchNorm2d(8),
                nn.ReLU(),
            ]
        self.body = nn.Sequential(*layers)
        self.head = QuadraticLinear(8, 5, neuron="full")

    def forward(self, x):
        return self.head(self.body(x).mean((2, 3)))


def randomise_terms_(model, seed=0):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p, _, _ in quadratic_terms(model):
            p.add_(torch.randn(p.shape, generator=gen) * 0.1)
    return model


@pytest.mark.parametrize(
    "name", ["cifar_qresnet20", "cifar_qresnet20_compact", "cifar_parabolic_resnet20", "cifar_poly_resnet20"]
)
def test_no_graph_break_in_a_quadratic_model(name):
    model = timm.create_model(name).train()
    torch._dynamo.reset()
    explain = torch._dynamo.explain(model)(torch.randn(2, 3, 32, 32))
    assert explain.graph_break_count == 0 and explain.graph_count == 1, explain.break_reasons


@pytest.fixture(scope="module")
def compiled_pair():
    torch._inductor.config.compile_threads = 1  # a shared two-core machine
    torch.manual_seed(0)
    eager = randomise_terms_(EveryKind()).train()
    model = copy.deepcopy(eager)
    torch._dynamo.reset()
    return eager, model, torch.compile(model, backend="inductor")


def test_compiled_matches_eager_outputs_and_gradients(compiled_pair):
    eager, model, compiled = compiled_pair
    x = torch.randn(4, 3, 12, 12, generator=torch.Generator().manual_seed(1))
    xe, xc = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    ye, yc = eager(xe), compiled(xc)
    torch.testing.assert_close(yc, ye, rtol=1e-4, atol=1e-5)
    w = torch.linspace(-1, 1, ye.numel()).view_as(ye)
    (ye * w).sum().backward()
    (yc * w).sum().backward()
    torch.testing.assert_close(xc.grad, xe.grad, rtol=1e-4, atol=1e-5 * xe.grad.abs().max().item())
    # atol on the scale of all gradients: a bias followed by batch norm (c, b_r) has a gradient of
    # zero up to rounding, which no relative tolerance of its own can compare
    scale = max(p.grad.abs().max().item() for p in eager.parameters())
    for (n, pe), pc in zip(eager.named_parameters(), model.parameters()):
        torch.testing.assert_close(pc.grad, pe.grad, rtol=1e-4, atol=1e-5 * scale, msg=n)
    for m in (eager, model):
        m.zero_grad(set_to_none=True)


def test_compiled_model_trains(compiled_pair):
    _, model, compiled = compiled_pair
    gen = torch.Generator().manual_seed(2)
    x, y = torch.randn(4, 3, 12, 12, generator=gen), torch.randint(0, 5, (4,), generator=gen)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(5):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(compiled(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    assert model.head.weight_g.abs().sum() > 0  # the quadratic terms were trained too
