"""CIFAR VGG16 family: registry, shapes, parameter counts, square activation, ReLinear identity."""

import pytest
import timm
import torch
from torch import nn

import quadnn  # noqa: F401  (registers the models)
from quadnn import QuadraticConv2d, Square
from quadnn.models.cifar_vgg import VGG16, CifarVGG
from quadnn.relinear import transfer_weights_

NAMES = ("cifar_vgg16", "cifar_vgg16_square", "cifar_qvgg16")


def expected_params(num_classes=100, in_chans=3, width=1.0, quadratic=False):
    """Count by hand from configuration D: per conv 9*cin*cout weights (x3 when quadratic, plus
    the biases b_r, b_g and c), per BN 2*cout, one linear classifier."""
    total, cin = 0, in_chans
    for v in VGG16:
        if v == "M":
            continue
        cout = max(1, round(v * width))
        conv = 9 * cin * cout
        total += (3 * conv + 3 * cout if quadratic else conv) + 2 * cout
        cin = cout
    return total + cin * num_classes + num_classes


def test_registered_and_listed():
    for name in NAMES:
        assert timm.is_model(name)
        assert name in timm.list_models("cifar_*vgg*")


@pytest.mark.parametrize("name", NAMES)
def test_shapes_cifar_and_digits(name):
    m = timm.create_model(name, width=0.125).eval()
    assert m(torch.randn(2, 3, 32, 32)).shape == (2, 100)
    assert m.forward_features(torch.randn(2, 3, 32, 32)).shape == (2, 64, 1, 1)
    # the 8x8 one-channel digits stand-in passes through the five pools (8, 4, 2, 1, 1, 1)
    d = timm.create_model(name, width=0.125, num_classes=10, in_chans=1).eval()
    assert d(torch.randn(3, 1, 8, 8)).shape == (3, 10)


def test_features_only():
    m = timm.create_model("cifar_vgg16", width=0.125, features_only=True)
    shapes = [f.shape[1:] for f in m(torch.randn(1, 3, 32, 32))]
    assert shapes == [(8, 16, 16), (16, 8, 8), (32, 4, 4), (64, 2, 2), (64, 1, 1)]


@pytest.mark.parametrize("num_classes,width", [(100, 1.0), (10, 1.0), (100, 0.25)])
def test_param_counts(num_classes, width):
    conv = timm.create_model("cifar_vgg16", num_classes=num_classes, width=width)
    quad = timm.create_model("cifar_qvgg16", num_classes=num_classes, width=width)
    sq = timm.create_model("cifar_vgg16_square", num_classes=num_classes, width=width)
    n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert n(conv) == n(sq) == expected_params(num_classes, width=width)
    assert n(quad) == expected_params(num_classes, width=width, quadratic=True)
    if width == 1.0 and num_classes == 10:
        # the usual CIFAR VGG16-BN has 14,728,266 with conv biases; ours drops those 4,224 (BN follows)
        assert n(conv) == 14_728_266 - 4_224


def test_kinds_of_layers():
    conv = timm.create_model("cifar_vgg16", width=0.125)
    sq = timm.create_model("cifar_vgg16_square", width=0.125)
    quad = timm.create_model("cifar_qvgg16", width=0.125)
    count = lambda m, t: sum(isinstance(x, t) for x in m.modules())  # noqa: E731
    assert count(conv, nn.ReLU) == 13 and count(conv, Square) == 0
    assert count(sq, Square) == 13 and count(sq, nn.ReLU) == 0
    assert count(quad, QuadraticConv2d) == 13 and count(quad, nn.ReLU) == 13
    assert isinstance(quad.fc, nn.Linear) and not isinstance(quad.fc, quadnn.QuadraticLinear)
    with pytest.raises(ValueError, match="activation"):
        CifarVGG(activation="tanh")


def test_square_activation_is_z_squared():
    torch.manual_seed(0)
    conv = timm.create_model("cifar_vgg16", width=0.125).eval()
    sq = timm.create_model("cifar_vgg16_square", width=0.125).eval()
    sq.load_state_dict(conv.state_dict())
    x = torch.randn(2, 3, 32, 32)
    # first block by hand: BN(conv(x)) then z*z
    z = sq.features[1](sq.features[0](x))
    assert torch.equal(sq.features[2](z), z * z)
    assert not torch.allclose(sq(x), conv(x))  # same weights, different activation


@pytest.mark.parametrize("train_mode", [False, True])
def test_relinear_identity_after_transfer(train_mode):
    torch.manual_seed(0)
    conv = timm.create_model("cifar_vgg16", width=0.125, num_classes=10)
    x = torch.randn(4, 3, 32, 32)
    conv.train()
    conv(x)  # move the BN running statistics away from their initial values
    quad = timm.create_model("cifar_qvgg16", width=0.125, num_classes=10)
    with torch.no_grad():  # perturb quadratic terms: transfer must reset them
        for m in quad.modules():
            if isinstance(m, QuadraticConv2d):
                m.weight_g.normal_()
                m.weight_b.normal_()
    transfer_weights_(conv, quad)
    conv.train(train_mode)
    quad.train(train_mode)
    torch.testing.assert_close(quad(x), conv(x), rtol=1e-5, atol=1e-5)
    # and a quadratic VGG is not a conventional one once its quadratic terms move
    with torch.no_grad():
        quad.features[0].weight_b.add_(0.1)
    assert not torch.allclose(quad(x), conv(x), atol=1e-4)
