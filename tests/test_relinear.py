"""ReLinear: initialisation, parameter groups (sg), shrinking (sw), reference weight decay, transfer."""

import copy

import pytest
import torch
from torch import nn

from quadnn import NEURONS, QuadraticConv2d, QuadraticLayer, QuadraticLinear, quadratize, relinear

pytestmark = pytest.mark.usefixtures("one_thread")


class Net(nn.Module):
    """Quadratic and conventional layers side by side. The names are chosen to trap
    name-substring selection: a conventional layer called ``r`` and one called ``weight_g_proj``."""

    def __init__(self, neuron="full"):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.q1 = QuadraticConv2d(4, 4, 3, padding=1, neuron=neuron)
        self.bn = nn.BatchNorm2d(4)
        self.q2 = QuadraticConv2d(4, 6, 3, stride=2, groups=2, neuron=neuron)
        self.r = nn.Linear(6, 5)
        self.weight_g_proj = nn.Linear(5, 5)
        self.head = QuadraticLinear(5, 3, neuron=neuron)

    def forward(self, x):
        x = torch.relu(self.bn(self.q1(torch.relu(self.stem(x)))))
        x = self.q2(x).mean((2, 3))
        return self.head(self.weight_g_proj(self.r(x)))


def linear_twin(model):
    """The conventional model a ReLinear-initialised quadratic model must compute."""
    twin = copy.deepcopy(model)
    for name, m in list(twin.named_modules()):
        if isinstance(m, QuadraticLayer):
            conv = (
                nn.Linear(m.in_features, m.out_features, m.bias is not None)
                if isinstance(m, nn.Linear)
                else nn.Conv2d(
                    m.in_channels,
                    m.out_channels,
                    m.kernel_size,
                    m.stride,
                    m.padding,
                    m.dilation,
                    m.groups,
                    m.bias is not None,
                )
            )
            conv.load_state_dict({k: v for k, v in m.state_dict().items() if k in ("weight", "bias")})
            parent = twin.get_submodule(name.rpartition(".")[0]) if "." in name else twin
            setattr(parent, name.rpartition(".")[2], conv)
    return twin


def disturb_terms_(model, scale=0.3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p, _, _ in relinear.quadratic_terms(model):
            p.add_(torch.randn(p.shape, generator=gen) * scale)


@pytest.mark.parametrize("kind", NEURONS)
def test_init_makes_every_quadratic_layer_linear(kind):
    torch.manual_seed(0)
    model = Net(kind).eval()
    x = torch.randn(2, 3, 8, 8)
    disturb_terms_(model)
    twin = linear_twin(model).eval()
    assert not torch.allclose(model(x), twin(x), atol=1e-4)
    assert relinear.init_(model) is model
    torch.testing.assert_close(model(x), twin(x), rtol=1e-5, atol=1e-6)


def term_ids(model, group):
    return {
        id(getattr(m, a))
        for m in model.modules()
        if isinstance(m, QuadraticLayer)
        for a in (("weight_g", "bias_g") if group == "g" else ("weight_b", "bias_b"))
        if getattr(m, a) is not None
    }


@pytest.mark.parametrize("kind", NEURONS)
def test_param_groups_cover_every_parameter_exactly_once(kind):
    model = Net(kind)
    groups = relinear.param_groups(model, lr=0.1, lr_g=1e-3, lr_b=1e-4, weight_decay=5e-4)
    assert [g["name"] for g in groups] == ["linear", "g", "b"]
    ids = [id(p) for g in groups for p in g["params"]]
    assert len(ids) == len(set(ids)), "a parameter sits in two groups"
    assert set(ids) == {id(p) for p in model.parameters()}, "a parameter is in no group"
    by_name = {g["name"]: {id(p) for p in g["params"]} for g in groups}
    assert by_name["g"] == term_ids(model, "g")
    assert by_name["b"] == term_ids(model, "b")
    # the conventional layers named "r" and "weight_g_proj" stay in the linear group
    for m in (model.r, model.weight_g_proj, model.stem, model.bn):
        assert all(id(p) in by_name["linear"] for p in m.parameters())
    assert id(model.q1.weight) in by_name["linear"] and id(model.head.bias) in by_name["linear"]
    expected_g = {"full": 6, "compact": 0, "parabolic": 6, "poly": 6}[kind]
    assert len(groups[1]["params"]) == expected_g
    assert [g["lr"] for g in groups] == [0.1, 1e-3, 1e-4]


def test_param_groups_prints_sizes(capsys):
    relinear.param_groups(Net(), lr=0.1, lr_g=1e-3, lr_b=1e-4, verbose=True)
    out = capsys.readouterr().out
    assert "linear" in out and "lr 0.001" in out and "tensors" in out


def test_param_groups_rejects_negative_lr():
    with pytest.raises(ValueError, match="lr_g"):
        relinear.param_groups(Net(), lr=0.1, lr_g=-1.0, lr_b=0.0)


def test_param_groups_on_a_conventional_model_work_with_sgd():
    model = nn.Sequential(nn.Linear(3, 3))
    opt = torch.optim.SGD(relinear.param_groups(model, 0.1, 0.01, 0.01), lr=0.1)
    model(torch.randn(2, 3)).sum().backward()
    opt.step()  # empty g/b groups are fine


def test_group_learning_rates_act_and_schedulers_keep_ratios():
    torch.manual_seed(0)
    model = Net("full")
    disturb_terms_(model)
    groups = relinear.param_groups(model, lr=0.1, lr_g=0.0, lr_b=1e-2)
    opt = torch.optim.SGD(groups, lr=0.1)
    before = {id(p): p.detach().clone() for p in model.parameters()}
    model(torch.randn(2, 3, 8, 8)).pow(2).sum().backward()
    opt.step()
    for p in groups[1]["params"]:  # lr_g = 0: the gate does not move
        assert torch.equal(p, before[id(p)])
    assert not torch.equal(model.q1.weight_b, before[id(model.q1.weight_b)])
    wb = model.q1.weight_b
    torch.testing.assert_close(wb, before[id(wb)] - 1e-2 * wb.grad)
    w = model.q1.weight
    torch.testing.assert_close(w, before[id(w)] - 0.1 * w.grad)

    opt = torch.optim.SGD(relinear.param_groups(model, lr=0.1, lr_g=1e-3, lr_b=1e-4), lr=0.1)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[2, 4], gamma=0.1)
    lrs = []
    for _ in range(5):
        opt.step()
        sched.step()
        lrs.append([g["lr"] for g in opt.param_groups])
    for lr, lr_g, lr_b in lrs:
        assert lr_g / lr == pytest.approx(1e-2) and lr_b / lr == pytest.approx(1e-3)
    assert lrs[-1][0] == pytest.approx(1e-3)  # two decays happened


@pytest.mark.parametrize("mode", ["l1", "l2"])
def test_shrink_moves_terms_toward_their_reference(mode):
    torch.manual_seed(0)
    model = Net("full")
    disturb_terms_(model, scale=1.0)
    linear_before = [p.detach().clone() for p in model.q1.parameters()][:2]  # weight, bias
    before = {id(p): p.detach().clone() for _, p, _, _ in relinear.quadratic_terms(model)}
    alpha_g, alpha_b = (0.01, 0.02) if mode == "l1" else (0.1, 0.5)
    shrink = relinear.Shrink(model, mode=mode, alpha_g=alpha_g, alpha_b=alpha_b)
    shrink.step()
    for name, p, group, ref in relinear.quadratic_terms(model):
        old = before[id(p)]
        alpha = alpha_g if group == "g" else alpha_b
        expected = old - alpha * torch.sign(old - ref) if mode == "l1" else ref + (1 - alpha) * (old - ref)
        torch.testing.assert_close(p, expected, msg=name)
        # l1 steps a fixed alpha (the paper's rule), so only entries farther than alpha/2 from
        # the reference are guaranteed to end up closer to it
        far = (old - ref).abs() >= (alpha / 2 if mode == "l1" else 0)
        assert far.float().mean() > 0.9
        assert ((p - ref).abs() <= (old - ref).abs())[far].all(), name
    # b_g is pulled toward 1, not 0: bias_g values above 1 decrease, below 1 increase
    old_bg = before[id(model.q1.bias_g)]
    assert torch.equal(torch.sign(model.q1.bias_g - old_bg), -torch.sign(old_bg - 1.0))
    assert torch.equal(model.q1.weight, linear_before[0]) and torch.equal(model.q1.bias, linear_before[1])


def test_shrink_keeps_a_relinear_model_at_its_reference_under_l2():
    model = Net("full")
    relinear.Shrink(model, mode="l2", alpha_g=0.9, alpha_b=0.9).step()
    assert torch.all(model.q1.bias_g == 1) and torch.all(model.q1.weight_g == 0)


def test_shrink_bad_arguments():
    with pytest.raises(ValueError, match="l1"):
        relinear.Shrink(Net(), mode="l3")
    with pytest.raises(ValueError, match="alpha_b"):
        relinear.Shrink(Net(), mode="l2", alpha_b=1.5)


def test_reference_weight_decay_pulls_toward_reference():
    torch.manual_seed(0)
    model = Net("full")
    disturb_terms_(model, scale=1.0)
    lr, lr_g, lr_b, wd = 0.1, 0.05, 0.02, 0.1
    groups = relinear.param_groups(model, lr=lr, lr_g=lr_g, lr_b=lr_b, weight_decay=wd)
    assert groups[0]["weight_decay"] == wd and groups[1]["weight_decay"] == 0.0
    opt = torch.optim.SGD(groups, lr=lr)
    decay = relinear.ReferenceWeightDecay(opt)
    before = {id(p): p.detach().clone() for p in model.parameters()}
    for p in model.parameters():
        p.grad = torch.zeros_like(p)  # isolate the decay from the loss
    opt.step()
    decay.step()
    for _, p, group, ref in relinear.quadratic_terms(model):
        keep = 1 - (lr_g if group == "g" else lr_b) * wd
        torch.testing.assert_close(p, ref + keep * (before[id(p)] - ref))
    # bias_g decays toward 1: with every value moved toward 1 its distance shrinks
    assert ((model.q1.bias_g - 1).abs() < (before[id(model.q1.bias_g)] - 1).abs()).all()
    # the linear group got torch's ordinary weight decay toward 0
    torch.testing.assert_close(model.stem.weight, before[id(model.stem.weight)] * (1 - lr * wd))


def test_quadratic_decay_zero_is_the_official_coupled_l2_toward_zero():
    torch.manual_seed(0)
    model = Net("full")
    disturb_terms_(model, scale=1.0)
    lr, lr_g, lr_b, wd = 0.1, 0.05, 0.02, 0.1
    groups = relinear.param_groups(model, lr=lr, lr_g=lr_g, lr_b=lr_b, weight_decay=wd, quadratic_decay="zero")
    assert [g["weight_decay"] for g in groups] == [wd, wd, wd]
    assert not any("reference_weight_decay" in g for g in groups)
    opt = torch.optim.SGD(groups, lr=lr)
    decay = relinear.ReferenceWeightDecay(opt)  # harmless: nothing to do in this mode
    before = {id(p): p.detach().clone() for p in model.parameters()}
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    decay.step()
    for _, p, group, _ in relinear.quadratic_terms(model):  # b_g included: toward 0, not 1
        torch.testing.assert_close(p, before[id(p)] * (1 - (lr_g if group == "g" else lr_b) * wd))
    # coupled: with momentum, the decay enters the gradient (torch's weight_decay), as the official code
    assert opt.param_groups[1]["weight_decay"] == wd


def test_quadratic_decay_bad_value_names_the_choices():
    with pytest.raises(ValueError, match=r"quadratic_decay.*'reference'.*'zero'"):
        relinear.param_groups(Net(), lr=0.1, lr_g=0.01, lr_b=0.01, quadratic_decay="l1")


def test_describe_groups_says_toward_what():
    ref = relinear.describe_groups(relinear.param_groups(Net(), 0.1, 0.01, 0.01, weight_decay=1e-4))
    zero = relinear.describe_groups(relinear.param_groups(Net(), 0.1, 0.01, 0.01, 1e-4, quadratic_decay="zero"))
    assert "toward the reference" in ref.splitlines()[1] and "toward 0" in zero.splitlines()[1]


def small_pair(kind="full"):
    torch.manual_seed(1)
    conv = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 2))
    with torch.no_grad():
        conv[1].running_mean.uniform_(-1, 1)
        conv[1].running_var.uniform_(0.5, 2)
    torch.manual_seed(2)
    quad = quadratize(
        nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 2)),
        neuron=kind,
    )
    return conv.eval(), quad.eval()


@pytest.mark.parametrize("kind", NEURONS)
def test_transfer_weights_makes_the_quadratic_model_compute_the_conventional_one(kind):
    conv, quad = small_pair(kind)
    disturb_terms_(quad)
    x = torch.randn(2, 3, 6, 6)
    assert not torch.allclose(quad(x), conv(x))
    assert relinear.transfer_weights_(conv, quad) is quad
    torch.testing.assert_close(quad(x), conv(x), rtol=1e-5, atol=1e-6)
    assert torch.equal(quad[1].running_var, conv[1].running_var)  # buffers travel too


def test_transfer_weights_mismatch_names_the_layer():
    conv, quad = small_pair()
    wider = nn.Sequential(nn.Conv2d(3, 5, 3), nn.BatchNorm2d(5), nn.ReLU(), nn.Flatten(), nn.Linear(5 * 4 * 4, 2))
    with pytest.raises(ValueError, match=r"'0\.weight'"):
        relinear.transfer_weights_(wider, quad)
    deeper = nn.Sequential(*conv, nn.Linear(2, 2))
    with pytest.raises(ValueError, match=r"'5\.weight'"):
        relinear.transfer_weights_(deeper, quad)
    with pytest.raises(ValueError, match=r"4\.weight"):
        relinear.transfer_weights_(nn.Sequential(*conv[:4]), quad)


@pytest.mark.parametrize(
    "kw,needle",
    [
        (dict(alpha_g=float("inf")), "alpha_g must lie in"),
        (dict(alpha_g=float("nan")), "alpha_g must lie in"),
        (dict(alpha_g=None), "alpha_g must be a number"),
        (dict(alpha_b="0.1"), "alpha_b must be a number"),
    ],
)
def test_shrink_rejects_non_finite_and_mistyped_factors(kw, needle):
    model = nn.Sequential(QuadraticLinear(3, 3))
    with pytest.raises(ValueError, match=needle):
        relinear.Shrink(model, mode="l1", **kw)


@pytest.mark.parametrize(
    "kw,needle",
    [
        (dict(lr="0.1"), "lr must be a number"),
        (dict(lr=float("inf")), "lr must lie in"),
        (dict(lr_g=float("nan")), "lr_g must lie in"),
        (dict(weight_decay=None), "weight_decay must be a number"),
        (dict(lr_b=True), "lr_b must be a number"),
    ],
)
def test_param_groups_reject_non_finite_and_mistyped_rates(kw, needle):
    model = nn.Sequential(QuadraticLinear(3, 3))
    args = dict(lr=0.1, lr_g=1e-4, lr_b=1e-4)
    args.update(kw)
    with pytest.raises(ValueError, match=needle):
        relinear.param_groups(model, **args)


@pytest.mark.parametrize("kind", NEURONS)
def test_random_init_draws_every_term_as_torch_draws_the_layers_weight(kind):
    """Trained without ReLinear, a quadratic network starts from drawn terms: each within
    +-1/sqrt(fan_in) of the layer it belongs to (torch's bound for the linear weight, groups and
    kernel included), spread over that range, and the model no longer computes its linear twin."""
    torch.manual_seed(0)
    model = Net(kind).eval()
    x = torch.randn(2, 3, 8, 8)
    twin = linear_twin(model).eval()
    torch.testing.assert_close(model(x), twin(x), rtol=1e-5, atol=1e-6)  # ReLinear's start
    assert relinear.random_init_(model) is model
    for m in model.modules():
        if isinstance(m, QuadraticLayer):
            fan_in = nn.init._calculate_fan_in_and_fan_out(m.weight)[0]  # torch's own count
            bound = 1 / fan_in**0.5
            for name, p, _, ref in m.quadratic_terms():
                assert p.abs().max() <= bound, name
                if p.numel() > 8:  # drawn over the range, not left at the reference
                    assert p.std() > bound / 4 and not torch.all(p == ref), name
    assert not torch.allclose(model(x), twin(x), atol=1e-3)
