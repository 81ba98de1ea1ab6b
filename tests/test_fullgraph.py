"""torch.compile(fullgraph=True) over forward and backward of every neuron kind, in fp32 and under
bf16 autocast: no graph break in quadnn's layers, so a compiled step can run
under CUDA graphs. AOTAutograd traces the backward (backend ``aot_eager``: the graphs inductor
would get, without its code generation, so the test takes seconds)."""

import pytest
import torch
from torch import nn

import quadnn.quadratic_function as qf
from quadnn import NEURONS, QuadraticConv2d, QuadraticLinear

pytestmark = pytest.mark.usefixtures("one_thread")


def every_kind() -> nn.Module:
    """A convolution and a linear layer of every neuron kind, one after another."""
    torch.manual_seed(0)
    convs = [QuadraticConv2d(3 if i == 0 else 4, 4, 3, padding=1, neuron=k) for i, k in enumerate(NEURONS)]
    linears = [QuadraticLinear(4 * 5 * 5 if i == 0 else 6, 6, neuron=k) for i, k in enumerate(NEURONS)]
    # tanh between them: eight quadratic layers in a row would raise the input to its 256th power
    model = nn.Sequential(*(m for c in convs for m in (c, nn.Tanh())), nn.Flatten())
    model.extend(m for lin in linears for m in (lin, nn.Tanh()))
    with torch.no_grad():  # quadratic terms away from their reference, so they count
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape))
    return model


def forward(model, x, amp: bool):
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        out = model(x)
    return out.float().square().sum()


def grads(loss, model, x):
    return torch.autograd.grad(loss, [x, *model.parameters()])


def largest_error(got, want) -> float:
    """The largest difference over every tensor, relative to that tensor's largest entry."""
    return max(((g.double() - w).abs().max() / w.abs().max()).item() for g, w in zip(got, want))


@pytest.mark.slow  # dynamo and AOTAutograd: about 10 s for the two
@pytest.mark.parametrize("amp", [False, True], ids=["fp32", "bf16"])
def test_every_neuron_kind_compiles_as_one_graph_forward_and_backward(amp, monkeypatch):
    # torch 2.11's dynamo cannot trace torch._C._is_autocast_available: here no torch can
    monkeypatch.setattr(torch.amp, "is_autocast_available", torch._dynamo.disable(torch.amp.is_autocast_available))
    model = every_kind()
    x = torch.randn(2, 3, 5, 5, generator=torch.Generator().manual_seed(1), requires_grad=True)
    torch._dynamo.reset()
    # fullgraph: a graph break raises; the backward is AOTAutograd's graph of the forward's
    loss = torch.compile(lambda x: forward(model, x, amp), backend="aot_eager", fullgraph=True)(x)
    exact = every_kind().double()
    x64 = x.detach().double().requires_grad_(True)
    want = forward(exact, x64, False)
    # bf16 keeps 8 bits: eager's bf16 gradients are 1-2 % of the largest entry off float64 here
    tol = 5e-2 if amp else 1e-5
    assert abs(loss.item() - want.item()) <= tol * abs(want.item())
    assert largest_error(grads(loss, model, x), grads(want, exact, x64)) <= tol


def test_autocast_check_knows_the_usual_devices_before_any_trace():
    assert qf._AUTOCAST_AVAILABLE["cpu"] and qf._AUTOCAST_AVAILABLE["cuda"] and not qf._AUTOCAST_AVAILABLE["meta"]
    assert not qf._autocast_on("meta") and not qf._autocast_on("cpu")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert qf._autocast_on("cpu")
