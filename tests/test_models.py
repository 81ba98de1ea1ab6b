"""CIFAR ResNet family: registry, parameter counts against He et al. and the paper, shapes, ReZero, transfer."""

import pytest
import timm
import torch

import quadnn
from quadnn.models.cifar_resnet import VARIANTS, CifarResNet


def n_params(m):
    return sum(p.numel() for p in m.parameters())


REQUIRED = (
    [f"cifar_resnet{d}" for d in (20, 32, 44, 56, 110, 1202)]
    + [f"cifar_qresnet{d}" for d in (20, 32, 44, 56, 110)]
    + [f"cifar_qresnet{d}_compact" for d in (20, 32, 56)]
    + [f"cifar_parabolic_resnet{d}" for d in (20, 32, 56)]
    + [f"cifar_poly_resnet{d}" for d in (20, 32, 56)]
)


def test_registry_has_every_variant_with_a_default_cfg():
    names = set(timm.list_models("cifar_*"))
    assert set(REQUIRED) <= names
    for name in REQUIRED:
        cfg = timm.models.get_pretrained_cfg(name)
        assert cfg is not None and cfg.num_classes == 10 and cfg.input_size == (3, 32, 32)


# Paper's Table (CIFAR-10 results) and He et al.: params in millions as printed.
PAPER_PARAMS = {
    "cifar_resnet20": 0.27,
    "cifar_resnet32": 0.46,
    "cifar_resnet56": 0.86,
    "cifar_resnet110": 1.7,
    "cifar_resnet1202": 19.4,
    "cifar_qresnet20": 0.81,
    "cifar_qresnet32": 1.39,
    "cifar_qresnet56": 2.55,
    "cifar_qresnet110": 5.1,
    "cifar_parabolic_resnet20": 0.54,
    "cifar_poly_resnet20": 0.54,
}


@pytest.mark.parametrize("name", sorted(PAPER_PARAMS))
def test_parameter_counts_match_the_printed_ones(name):
    m = timm.create_model(name, num_classes=10)
    # The paper rounds loosely (ResNet56: 0.853M printed 0.86M; QResNet110: 5.17M printed 5.1M),
    # so agreement within 2% is what can be asserted.
    assert n_params(m) / 1e6 == pytest.approx(PAPER_PARAMS[name], rel=0.02)


# The official ReLinear code's QResNets (qresnet.py, qresnet_smaller.py), counted exactly: every
# quadratic convolution carries b_r and c (the compact one: b_r and c too, one bias per conv).
OFFICIAL_COUNTS = {
    "cifar_qresnet20": 806_266,
    "cifar_qresnet32": 1_389_114,
    "cifar_qresnet44": 1_971_962,
    "cifar_qresnet56": 2_554_810,
    "cifar_qresnet110": 5_177_626,
    "cifar_qresnet20_compact": 538_330,
    "cifar_qresnet32_compact": 927_194,
    "cifar_qresnet56_compact": 1_704_922,
}


@pytest.mark.parametrize("name", sorted(OFFICIAL_COUNTS))
def test_parameter_counts_are_the_official_codes_exactly(name):
    assert n_params(timm.create_model(name)) == OFFICIAL_COUNTS[name]


def test_resnet20_exact_count_and_quadratic_block_multiple():
    conv = timm.create_model("cifar_resnet20")
    assert n_params(conv) == 269_722  # He et al.'s 0.27M
    block = [m for n, m in conv.named_modules() if isinstance(m, torch.nn.Conv2d) and n.startswith("layer")]
    assert all(m.bias is None for m in block)  # conventional convolutions before BN: no bias
    block_w = sum(m.weight.numel() for m in block)
    outs = sum(m.weight.shape[0] for m in block)
    full = timm.create_model("cifar_qresnet20")
    assert n_params(full) == n_params(conv) + 2 * block_w + 3 * outs  # + W_g, W_b and b_r, b_g, c
    compact = timm.create_model("cifar_qresnet20_compact")
    assert n_params(compact) == n_params(conv) + block_w + 2 * outs  # + W_b and b_r, c
    for name in ("cifar_parabolic_resnet20", "cifar_poly_resnet20"):
        assert n_params(timm.create_model(name)) == n_params(conv) + block_w + 2 * outs  # + W_g and b_r, b_g


def test_official_initialisation_kaiming_fan_in():
    torch.manual_seed(0)
    m = timm.create_model("cifar_qresnet56", zero_init_last=False)
    w = m.layer3[4].conv1.weight  # 64 -> 64, 3x3: fan_in 576
    assert w.std().item() == pytest.approx((2 / 576) ** 0.5, rel=0.03)
    w = m.layer2[0].conv1.weight  # 16 -> 32, the first conv of a stage: fan_in 144
    assert w.std().item() == pytest.approx((2 / 144) ** 0.5, rel=0.05)
    assert all(b.bn2.weight.eq(1).all() for b in m.layer1)


def test_zero_init_last_starts_every_block_as_the_identity():
    m = timm.create_model("cifar_qresnet20").eval()  # timm's default
    assert all(b.bn2.weight.eq(0).all() for s in (m.layer1, m.layer2, m.layer3) for b in s)
    x = torch.relu(torch.randn(2, 16, 8, 8))
    assert torch.equal(m.layer1[1](x), x)
    r = timm.create_model("cifar_qresnet20", rezero=True)  # ReZero blocks keep gamma = 1 (zeta = 0)
    assert all(b.bn2.weight.eq(1).all() for b in r.layer1)


@pytest.mark.parametrize(
    "name",
    ["cifar_resnet20", "cifar_qresnet20", "cifar_qresnet20_compact", "cifar_parabolic_resnet20", "cifar_poly_resnet20"],
)
def test_shapes_and_timm_interface(name):
    m = timm.create_model(name, num_classes=7, in_chans=1, width=1.5).eval()
    x = torch.randn(2, 1, 32, 32)
    feats = m.forward_features(x)
    assert feats.shape == (2, 96, 8, 8)
    assert m.forward_head(feats, pre_logits=True).shape == (2, 96)
    assert m(x).shape == (2, 7)
    assert m(torch.randn(2, 1, 8, 8)).shape == (2, 7)  # the digits stand-in size


def test_features_only():
    f = timm.create_model("cifar_qresnet20", features_only=True)
    assert [t.shape[1:] for t in f(torch.randn(2, 3, 32, 32))] == [(16, 32, 32), (32, 16, 16), (64, 8, 8)]


def test_width_multiplier_paper_widths():
    for w, chans in ((1.5, 96), (2, 128), (2.5, 160)):
        assert timm.create_model("cifar_resnet20", width=w).num_features == chans


def test_depth_and_kind_follow_the_name():
    for name, (depth, neuron) in VARIANTS.items():
        if depth > 200:
            continue
        m = timm.create_model(name)
        n_blocks = sum(1 for _ in m.modules() if type(_).__name__ == "BasicBlock")
        assert n_blocks == (depth - 2) // 2 and m.neuron == neuron
        kinds = {
            getattr(mod, "neuron", "conventional")
            for n, mod in m.named_modules()
            if isinstance(mod, torch.nn.Conv2d) and n.startswith("layer")
        }
        assert kinds == {neuron}
        assert type(m.conv1) is torch.nn.Conv2d and type(m.fc) is torch.nn.Linear  # stem and head stay conventional


def test_rezero_blocks_are_identity_at_init():
    m = timm.create_model("cifar_qresnet20", rezero=True).train()
    stem = torch.relu(torch.randn(4, 16, 32, 32))
    for block in m.layer1:
        assert torch.equal(block(stem), stem)
    # A downsampling block at init is exactly its option-A shortcut.
    b = m.layer2[0]
    assert torch.equal(b(stem), b.shortcut(stem))
    zetas = [p for n, p in m.named_parameters() if n.endswith("zeta")]
    assert len(zetas) == 9 and all(z.item() == 0 for z in zetas)
    # ...and the gradient reaches zeta, so the residual branches can grow.
    m(torch.randn(2, 3, 32, 32)).sum().backward()
    assert any(z.grad.abs().item() > 0 for z in zetas)


@pytest.mark.parametrize("name", ["cifar_qresnet20", "cifar_qresnet20_compact"])
def test_quadratic_model_with_transferred_weights_computes_the_conventional_one(name):
    torch.manual_seed(0)
    conv = timm.create_model("cifar_resnet20").eval()
    for mod in conv.modules():  # non-trivial BN statistics and affine parameters
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.normal_()
            mod.running_var.uniform_(0.5, 2)
            mod.weight.data.uniform_(0.5, 1.5)
    q = timm.create_model(name)
    with torch.no_grad():
        for _, p in q.named_parameters():
            p.add_(torch.randn_like(p))
    quadnn.relinear.transfer_weights_(conv, q).eval()
    quadratic_convs = [m for m in q.modules() if isinstance(m, quadnn.QuadraticLayer)]
    assert all(m.bias.eq(0).all() and m.bias_b.eq(0).all() for m in quadratic_convs)  # b_r = 0, c = 0
    x = torch.randn(3, 3, 32, 32)
    torch.testing.assert_close(q(x), conv(x), rtol=1e-5, atol=1e-5)
    # and a conventional checkpoint loads strictly into the quadratic model, with the same result
    q2 = timm.create_model(name)
    q2.load_state_dict(conv.state_dict())
    torch.testing.assert_close(q2.eval()(x), conv(x), rtol=1e-5, atol=1e-5)


def test_bad_arguments_name_valid_choices():
    with pytest.raises(ValueError, match="6n\\+2"):
        CifarResNet(depth=21)
    with pytest.raises(ValueError, match="conventional"):
        CifarResNet(neuron="cubic")
