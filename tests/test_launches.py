"""Kernel-launching ATen operations per eager training step: what a GPU pays
per operation whatever its size, so it dominates small batches. Counted with a TorchDispatchMode
(view operations launch nothing and are left out); the counts are the same on every device."""

import collections

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from quadnn import QuadraticConv2d, quadratize
from quadnn_paper import bench

pytestmark = pytest.mark.usefixtures("one_thread")


class Launches(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.is_view:
            self.ops[func.__name__] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self):
        return sum(self.ops.values())


def step_launches(model, x, y):
    """Launches of one forward + backward (the gradients set to None first, as zero_grad does)."""

    def step():
        for p in model.parameters():
            p.grad = None
        torch.nn.functional.cross_entropy(model(x), y).backward()

    step()  # warm: lazily built state out of the count
    with Launches() as count:
        step()
    return count


def implementation_(model, impl):
    for m in model.modules():
        if hasattr(m, "implementation"):
            m.implementation = impl
    return model


def test_default_quadratic_resnet20_step_within_1_8x_conventional_and_below_naive():
    x, y = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
    conventional = step_launches(bench.create("cifar_resnet20").train(), x, y).total
    default = step_launches(bench.create("cifar_qresnet20").train(), x, y)
    naive = step_launches(implementation_(bench.create("cifar_qresnet20").train(), "naive"), x, y).total
    assert default.total <= 1.8 * conventional and default.total < naive, (default.total, conventional, naive)
    assert default.ops["cat.default"] == 0  # no per-forward weight concatenation


def test_a_full_layer_launches_ten_operations_per_step():
    # forward: [r, g] convolution, x*x, W_b convolution, r*g + W_b(x*x) (addcmul_);
    # backward: dy*[r, g] and its halves swapped (mul, roll), the [r, g] convolution's backward,
    # x*x again, the W_b convolution's backward, dx += 2x * dx2 (addcmul_)
    layer = QuadraticConv2d(4, 6, 3, padding=1)
    x = torch.randn(2, 4, 5, 5, requires_grad=True)
    dy = torch.ones(2, 6, 5, 5)
    layer(x).backward(dy)
    for t in (x, *layer.parameters()):
        t.grad = None
    with Launches() as count:
        layer(x).backward(dy)
    assert count.total == 10, dict(count.ops)
    assert count.ops["convolution.default"] == 2 and count.ops["convolution_backward.default"] == 2


def test_packing_survives_to_and_quadratize_and_falls_back_to_concatenation():
    from quadnn.layers import _adjacent

    layer = QuadraticConv2d(2, 3, 3).double()
    assert _adjacent(layer.weight, layer.weight_g) and _adjacent(layer.bias, layer.bias_g)
    model = quadratize(torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3)))
    assert _adjacent(model[0].weight, model[0].weight_g)
    # moved apart (a Parameter replaced): still the same function, by concatenation
    x = torch.randn(1, 2, 4, 4, dtype=torch.float64)
    y = layer(x)
    layer.weight_g = torch.nn.Parameter(layer.weight_g.detach().clone())
    assert not _adjacent(layer.weight, layer.weight_g)
    torch.testing.assert_close(layer(x), y)
    layer.weight_g.grad = None
    layer(x).sum().backward()
    assert layer.weight_g.grad is not None and layer.weight.grad is not None
