"""quadratize and transfer_weights_ on real architectures: torchvision resnet18 / vgg16_bn, timm ResNeXt."""

import copy

import pytest
import timm
import torch
import torchvision
from torch import nn

from quadnn import NEURONS, QuadraticConv2d, QuadraticLayer, QuadraticLinear, quadratize, relinear
from quadnn import convert as quadnn_convert
from quadnn.layers import QuadraticConv3d

pytestmark = pytest.mark.usefixtures("one_thread")


def assert_same(actual, expected):
    tol = 1e-9 if expected.dtype == torch.float64 else 1e-5  # vgg's float32 classifier
    torch.testing.assert_close(actual, expected, rtol=tol, atol=tol)


def count(model, kind):
    return sum(isinstance(m, kind) for m in model.modules())


def convertible(model):
    return sum(type(m) in (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear) for m in model.modules())


def disturb_terms_(model):
    with torch.no_grad():
        for _, p, _, _ in relinear.quadratic_terms(model):
            p.add_(torch.randn_like(p) * 0.1)


def resnet18():
    torch.manual_seed(0)
    return torchvision.models.resnet18(weights=None, num_classes=10).double().eval()


def resnext():
    torch.manual_seed(0)
    return timm.create_model("resnext26ts", pretrained=False, num_classes=10).double().eval()


_VGG = []


def vgg16_bn():
    # The real vgg16_bn, built once (its 120M-parameter classifier takes seconds to initialise)
    # and copied; the classifier stays conventional (exclude) and in float32, the convolutional
    # part runs in float64 like the other models.
    if not _VGG:
        torch.manual_seed(0)
        with torch.device("meta"):  # then initialised once (torchvision's own init draws twice)
            model = torchvision.models.vgg16_bn(weights=None, num_classes=10)
        model.to_empty(device="cpu")
        for m in model.modules():
            if hasattr(m, "reset_parameters"):
                m.reset_parameters()
        _VGG.append(model.eval())
    model = copy.deepcopy(_VGG[0])
    model.features.double()
    model.classifier.insert(0, Float32())
    return model


class Float32(nn.Module):
    def forward(self, x):
        return x.float()


MODELS = {
    "resnet18": (resnet18, (), (1, 3, 32, 32)),
    "resnext26ts": (resnext, (), (1, 3, 32, 32)),
    "vgg16_bn": (vgg16_bn, ("classifier",), (1, 3, 32, 32)),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_quadratize_identity(name):
    make, exclude, shape = MODELS[name]
    model = make()
    x = torch.randn(shape, dtype=torch.float64)
    with torch.no_grad():
        expected = model(x)
    n_layers = convertible(model)
    n_excluded = sum(type(m) in (nn.Conv2d, nn.Linear) for e in exclude for m in model.get_submodule(e).modules())
    q = quadratize(model, neuron="full", exclude=exclude)
    assert q is model
    assert count(q, QuadraticLayer) == n_layers - n_excluded > 10
    with torch.no_grad():
        assert_same(q(x), expected)
        disturb_terms_(q)
        assert not torch.allclose(q(x), expected, rtol=1e-4, atol=1e-4)  # the terms are live


def test_resnext_grouped_convs_became_quadratic():
    q = quadratize(resnext(), neuron="compact")
    grouped = [m for m in q.modules() if isinstance(m, QuadraticConv2d) and m.groups > 1]
    assert grouped and all(m.neuron == "compact" for m in grouped)


@pytest.mark.parametrize("kind", NEURONS)
def test_quadratize_every_kind_on_resnet18_with_exclude(kind):
    model = resnet18()
    x = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    with torch.no_grad():
        expected = model(x)
    q = quadratize(model, neuron=kind, exclude=("conv1", "fc"))
    assert type(q.conv1) is nn.Conv2d and type(q.fc) is nn.Linear
    assert isinstance(q.layer1[0].conv1, QuadraticConv2d) and q.layer1[0].conv1.neuron == kind
    assert isinstance(q.layer2[0].downsample[0], QuadraticConv2d)
    assert count(q, QuadraticLayer) == convertible(resnet18()) - 2
    with torch.no_grad():
        assert_same(q(x), expected)


def test_quadratize_exclude_patterns_and_include():
    q = quadratize(resnet18(), exclude=("layer4.*", "layer3"))
    assert not any(isinstance(m, QuadraticLayer) for m in q.layer3.modules())
    assert not any(isinstance(m, QuadraticLayer) for m in q.layer4.modules())
    assert isinstance(q.layer2[1].conv2, QuadraticConv2d) and isinstance(q.fc, QuadraticLinear)
    only_conv = quadratize(resnet18(), include=(nn.Conv2d,))
    assert type(only_conv.fc) is nn.Linear and isinstance(only_conv.conv1, QuadraticConv2d)


def test_quadratize_keeps_training_mode_and_dtype():
    model = resnet18().train()
    q = quadratize(model)
    assert all(m.training for m in q.modules())
    assert all(p.dtype == torch.float64 for p in q.parameters())


def test_quadratize_bad_inputs():
    with pytest.raises(ValueError, match="neuron"):
        quadratize(resnet18(), neuron="cubic")
    with pytest.raises(ValueError, match="layer9"):
        quadratize(resnet18(), exclude=("layer9",))
    with pytest.raises(ValueError, match="include"):
        quadratize(resnet18(), include=(nn.BatchNorm2d,))
    with pytest.raises(ValueError, match="QuadraticConv2d"):
        quadratize(nn.Conv2d(3, 3, 3))


@pytest.mark.parametrize("name", list(MODELS))
def test_transfer_weights_identity(name):
    make, exclude, shape = MODELS[name]
    conventional = make()
    with torch.no_grad():  # non-trivial BatchNorm statistics, so buffers must travel
        for m in conventional.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    quadratic = quadratize(make(), neuron="full", exclude=exclude)
    with torch.no_grad():  # different weights (vgg's huge classifier matrices excepted, for speed)
        for p in quadratic.parameters():
            if p.numel() < 10**6:
                p.add_(torch.randn_like(p) * 0.1)
    x = torch.randn(shape, dtype=torch.float64)
    with torch.no_grad():
        expected = conventional(x)
        assert not torch.allclose(quadratic(x), expected)
        relinear.transfer_weights_(conventional, quadratic)
        assert_same(quadratic(x), expected)


def test_transfer_weights_structure_mismatch_names_the_layer():
    small = torchvision.models.resnet18(weights=None, num_classes=10)
    other_head = quadratize(torchvision.models.resnet18(weights=None, num_classes=7))
    with pytest.raises(ValueError, match=r"'fc\.weight'.*\(10, 512\).*\(7, 512\)"):
        relinear.transfer_weights_(small, other_head)
    deeper = quadratize(torchvision.models.resnet34(weights=None, num_classes=10))
    with pytest.raises(ValueError, match=r"layer1\.2\."):
        relinear.transfer_weights_(small, deeper)
    with pytest.raises(ValueError, match=r"layer1\.2\."):
        relinear.transfer_weights_(
            torchvision.models.resnet34(weights=None, num_classes=10), quadratize(copy.deepcopy(small))
        )


# -- what quadratize reports -------------------------------------------------------------------
class StdConv2d(nn.Conv2d):
    """A subclass with its own forward (weight standardisation), as timm's StdConv2d."""

    def forward(self, x):
        w = (self.weight - self.weight.mean((1, 2, 3), keepdim=True)) / (
            self.weight.std((1, 2, 3), keepdim=True) + 1e-5
        )
        return self._conv_forward(x, w, self.bias)


class Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.video = nn.Conv3d(2, 4, 3, padding=1)
        self.std = StdConv2d(4, 4, 3, padding=1)
        self.enc = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, batch_first=True)
        self.up = nn.ConvTranspose2d(4, 4, 2, stride=2)
        self.head = nn.Linear(8, 3)

    def forward(self, v, x, t):
        a = self.video(v).mean((2, 3, 4))
        b = self.up(self.std(x)).mean((2, 3))
        return self.head(self.enc(t).mean(1)) + a.sum(1, keepdim=True) + b.sum(1, keepdim=True)


def mixed_inputs():
    gen = torch.Generator().manual_seed(0)
    return (
        torch.randn(2, 2, 4, 5, 5, generator=gen, dtype=torch.float64),
        torch.randn(2, 4, 6, 6, generator=gen, dtype=torch.float64),
        torch.randn(2, 5, 8, generator=gen, dtype=torch.float64),
    )


def test_quadratize_converts_conv3d_and_summarises_what_it_left(caplog):
    torch.manual_seed(0)
    model = Mixed().double().eval()
    inputs = mixed_inputs()
    with torch.no_grad():
        expected = model(*inputs)
    plan = quadnn_convert.plan_quadratize(model)
    with caplog.at_level("INFO", logger="quadnn.convert"):
        q = quadratize(model, neuron="full")
    assert isinstance(q.video, QuadraticConv3d) and isinstance(q.head, QuadraticLinear)
    assert isinstance(q.enc.linear1, QuadraticLinear) and isinstance(q.enc.linear2, QuadraticLinear)
    assert type(q.std) is StdConv2d and type(q.enc.self_attn) is nn.MultiheadAttention
    with torch.no_grad():
        assert_same(q(*inputs), expected)
    assert plan.counts() == {"Conv3d": 1, "Linear": 3}
    assert set(plan.unconvertible) == {"std", "enc.self_attn", "up"}
    assert "subclass of Conv2d" in plan.unconvertible["std"]
    assert "multi_head_attention_forward" in plan.unconvertible["enc.self_attn"]
    text = caplog.text
    assert "converted 4 layers (Conv3d 1, Linear 3)" in text and "enc.self_attn" in text and "std" in text


def test_quadratize_strict_names_every_layer_it_cannot_convert_and_changes_nothing():
    model = Mixed()
    with pytest.raises(ValueError, match=r"strict") as err:
        quadratize(model, strict=True)
    assert all(n in str(err.value) for n in ("std", "enc.self_attn", "up"))
    assert not any(isinstance(m, QuadraticLayer) for m in model.modules())
    # excluded layers and types left out of include are deliberate, not errors
    q = quadratize(Mixed(), include=(nn.Conv3d,), exclude=("std", "enc", "up"), strict=True)
    assert isinstance(q.video, QuadraticConv3d) and type(q.head) is nn.Linear


def test_summary_of_resnet18_and_verbose(capsys):
    summary = quadnn_convert.plan_quadratize(resnet18(), exclude=("fc",))
    assert summary.counts() == {"Conv2d": 20} and not summary.unconvertible and list(summary.left) == ["fc"]
    quadratize(resnet18(), verbose=True)
    assert "converted 21 layers (Conv2d 20, Linear 1)" in capsys.readouterr().out
