"""Conv-BN fusion of quadratic layers (quadnn.fusion): the fused layer equals batch norm after the
layer in eval mode, for every layer x neuron kind x implementation, through quadnn's functions and
torch.ao's fuse_modules; torch's own fuse_conv_bn_eval, which folds into weight and bias only, is
refused naming quadnn's; torch.fx's fusers (torch.fx.experimental.optimization.fuse, torch.ao's
fuse_fx) trace through the quadratic layers and leave their batch norm (exact)."""

import copy
import warnings

import pytest
import torch
from torch import nn

from quadnn import NEURONS, QuadraticConv1d, QuadraticConv2d, QuadraticConv3d, QuadraticLayer, QuadraticLinear
from quadnn.fusion import fuse_conv_bn_eval, fuse_linear_bn_eval

pytestmark = pytest.mark.usefixtures("one_thread")

F64 = dict(dtype=torch.float64)
# layer, its batch norm, an input, constructor keywords (a grouped and a padded one among them)
CASES = {
    "Conv1d": (QuadraticConv1d, nn.BatchNorm1d, (2, 4, 9), dict(kernel_size=3, groups=2)),
    "Conv2d": (QuadraticConv2d, nn.BatchNorm2d, (2, 4, 6, 6), dict(kernel_size=3, padding=1, stride=2)),
    "Conv3d": (
        QuadraticConv3d,
        nn.BatchNorm3d,
        (2, 4, 4, 4, 4),
        dict(kernel_size=2, padding_mode="reflect", padding=1),
    ),
    "Linear": (QuadraticLinear, nn.BatchNorm1d, (5, 4), {}),
}


def random_pair(name, kind, bias, seed=0):
    """(layer, bn, x): every term, batch norm's statistics and affine parameters random; eval mode."""
    cls, bn_cls, shape, kwargs = CASES[name]
    gen = torch.Generator().manual_seed(seed)
    layer, bn = cls(4, 6, bias=bias, neuron=kind, **kwargs, **F64), bn_cls(6, **F64)
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, **F64))
        for t in (bn.running_mean, bn.weight, bn.bias):
            t.copy_(torch.randn(6, generator=gen, **F64))
        bn.running_var.copy_(torch.rand(6, generator=gen, **F64) + 0.1)
    return layer.eval(), bn.eval(), torch.randn(shape, generator=gen, **F64)


def fuse(layer, bn):
    return (fuse_linear_bn_eval if isinstance(layer, nn.Linear) else fuse_conv_bn_eval)(layer, bn)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("kind", NEURONS)
def test_fused_layer_equals_batch_norm_after_the_layer(name, kind):
    for bias in (True, False):
        for impl in QuadraticLayer.IMPLEMENTATIONS:
            layer, bn, x = random_pair(name, kind, bias)
            layer.implementation = impl
            before = copy.deepcopy(layer.state_dict())
            fused = fuse(layer, bn)
            want = bn(layer(x))
            torch.testing.assert_close(fused(x), want, rtol=1e-12, atol=1e-12 * want.abs().max().item())
            assert type(fused) is type(layer) and fused.implementation == impl
            # parabolic and poly have no constant for batch norm's shift: a full neuron takes it
            assert fused.neuron == (kind if kind in ("full", "compact") else "full")
            assert all(torch.equal(v, layer.state_dict()[k]) for k, v in before.items())  # a new layer
            # and it trains: gradients reach every parameter
            fused.train()(x).square().sum().backward()
            assert all(p.grad is not None for p in fused.parameters())


def test_a_parametrized_layer_fuses_with_its_parametrized_values():
    layer, bn, x = random_pair("Conv2d", "full", True)
    plain_names = [n for n, _ in layer.named_parameters()]
    torch.nn.utils.parametrizations.weight_norm(layer, "weight_g")
    fused = fuse_conv_bn_eval(layer, bn)
    assert not torch.nn.utils.parametrize.is_parametrized(fused) and type(fused) is QuadraticConv2d
    assert [n for n, _ in fused.named_parameters()] == plain_names
    torch.testing.assert_close(fused(x), bn(layer(x)), rtol=1e-12, atol=1e-10)
    assert torch.nn.utils.parametrize.is_parametrized(layer, "weight_g")  # the layer keeps its own


def test_fusion_asks_for_eval_mode_running_statistics_and_matching_channels():
    layer, bn, _ = random_pair("Conv2d", "full", True)
    with pytest.raises(ValueError, match="eval"):
        fuse_conv_bn_eval(layer.train(), bn)
    with pytest.raises(ValueError, match="eval"):
        fuse_conv_bn_eval(layer.eval(), bn.train())
    with pytest.raises(ValueError, match="running statistics"):
        fuse_conv_bn_eval(layer, nn.BatchNorm2d(6, track_running_stats=False, **F64).eval())
    with pytest.raises(ValueError, match="5 channels"):
        fuse_conv_bn_eval(layer, nn.BatchNorm2d(5, **F64).eval())
    with pytest.raises(TypeError, match="fuse_linear_bn_eval"):
        fuse_conv_bn_eval(QuadraticLinear(3, 6).eval(), nn.BatchNorm1d(6).eval())


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("kind", NEURONS)
def test_torch_fuse_conv_bn_eval_is_refused_naming_quadnn(name, kind):
    layer, bn, x = random_pair(name, kind, True)
    torch_fuse = (
        torch.nn.utils.fusion.fuse_linear_bn_eval if name == "Linear" else torch.nn.utils.fusion.fuse_conv_bn_eval
    )
    y = layer(x)
    with pytest.raises(RuntimeError, match=r"^Quadratic\w+: [^\n]*quadnn\.fusion\.fuse_conv_bn_eval[^\n]*$"):
        torch_fuse(layer, bn)
    torch.testing.assert_close(layer(x), y, rtol=0, atol=0)


def sequential(kind, seed=0):
    """conv-BN-ReLU, conv-BN, flatten, linear-BN: every term and statistic random, eval mode."""
    torch.manual_seed(seed)
    model = nn.Sequential(
        QuadraticConv2d(3, 4, 3, neuron=kind, **F64),
        nn.BatchNorm2d(4, **F64),
        nn.ReLU(),
        QuadraticConv2d(4, 4, 3, padding=1, neuron=kind, bias=False, **F64),
        nn.BatchNorm2d(4, **F64),
        nn.Flatten(),
        QuadraticLinear(4 * 36, 5, neuron=kind, **F64),
        nn.BatchNorm1d(5, **F64),
    )
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.3)
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.running_mean.normal_()
                m.running_var.uniform_(0.5, 2)
    return model.eval()


@pytest.mark.parametrize("kind", NEURONS)
def test_torch_ao_fuse_modules_fuses_exactly(kind):
    from torch.ao.quantization import fuse_modules, fuse_modules_qat

    model = sequential(kind)
    x = torch.randn(3, 3, 8, 8, **F64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.ao.quantization's own
        fused = fuse_modules(model, [["0", "1", "2"], ["3", "4"], ["6", "7"]])
        assert not any(isinstance(m, nn.BatchNorm2d | nn.BatchNorm1d) for m in fused.modules())
        torch.testing.assert_close(fused(x), model(x), rtol=1e-10, atol=1e-10)
        with pytest.raises(NotImplementedError, match=r"QAT.*quadnn\.fusion\.fuse_conv_bn_eval"):
            fuse_modules_qat(copy.deepcopy(model).train(), [["3", "4"]])


@pytest.mark.parametrize("kind", NEURONS)
def test_torch_fx_fuser_leaves_quadratic_layers_exact(kind):
    from torch.ao.quantization.quantize_fx import fuse_fx
    from torch.fx.experimental.optimization import fuse as fx_fuse

    model = sequential(kind)
    x = torch.randn(3, 3, 8, 8, **F64)
    torch.testing.assert_close(fx_fuse(model)(x), model(x), rtol=1e-12, atol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.ao.quantization's own
        torch.testing.assert_close(fuse_fx(copy.deepcopy(model))(x), model(x), rtol=1e-12, atol=1e-12)
