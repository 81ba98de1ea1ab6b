"""What a user met that the layer-by-layer tests did not: string padding in backward,
forward-mode AD, torch.func with respect to any one parameter, meta-device loading, per-sample
gradients, and quadratize on shared, hooked, frozen and already-quadratic modules."""

import copy

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from plain_formula import TERMS, plain, randomise_
from torch import nn
from torch.func import functional_call, grad, jacrev
from torch.nn.utils._per_sample_grad import call_for_per_sample_grads

from quadnn import (
    NEURONS,
    QuadraticConv1d,
    QuadraticConv2d,
    QuadraticConv3d,
    QuadraticLayer,
    QuadraticLinear,
    quadratize,
)

pytestmark = pytest.mark.usefixtures("one_thread")

KINDS = list(NEURONS)
IMPLEMENTATIONS = QuadraticLayer.IMPLEMENTATIONS
F64 = dict(dtype=torch.float64)


def randn(*shape, seed=1):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), **F64)


def assert_grads_match_plain(layer, x):
    """Forward, input gradient and every parameter gradient of ``layer`` equal the plain formula's."""
    x = x.clone().requires_grad_()
    y = layer(x)
    names = [n for n, _ in layer.named_parameters()]
    dy = torch.randn_like(y)
    got = torch.autograd.grad(y, [x, *layer.parameters()], dy)
    y0 = plain(layer, x)
    want = torch.autograd.grad(y0, [x, *layer.parameters()], dy)
    torch.testing.assert_close(y, y0, rtol=1e-10, atol=1e-10)
    for name, a, b in zip(["input", *names], got, want):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10, msg=lambda m, name=name: f"{name}: {m}")


# -- 1. padding "same" / "valid": the backward took integer padding only ------------------------
STRING_PADDING = {
    # even kernels and dilation 1 pad one more on the far side than the near one
    "conv1d-same-k4": (lambda k, p: QuadraticConv1d(2, 4, 4, padding=p, groups=2, neuron=k, **F64), (2, 2, 7)),
    "conv2d-same-k2x3": (lambda k, p: QuadraticConv2d(2, 3, (2, 3), padding=p, neuron=k, **F64), (2, 2, 5, 6)),
    "conv2d-same-d2-reflect": (
        lambda k, p: QuadraticConv2d(2, 3, 3, padding=p, dilation=2, padding_mode="reflect", neuron=k, **F64),
        (1, 2, 6, 6),
    ),
    "conv3d-same-k2": (lambda k, p: QuadraticConv3d(2, 2, 2, padding=p, neuron=k, **F64), (1, 2, 3, 4, 3)),
}


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", list(STRING_PADDING))
@pytest.mark.parametrize("padding", ["same", "valid"])
def test_string_padding_backward_equals_the_plain_formula(padding, case, kind, impl):
    make, shape = STRING_PADDING[case]
    layer = randomise_(make(kind, padding))
    layer.implementation = impl
    assert_grads_match_plain(layer, randn(*shape))


@pytest.mark.parametrize("kind", KINDS)
def test_quadratize_of_same_padded_convolutions_differentiates_as_the_plain_formula(kind):
    model = nn.Sequential(nn.Conv2d(2, 3, 4, padding="same"), nn.Flatten(2), nn.Conv1d(3, 2, 2, padding="same"))
    quadratize(model.double(), neuron=kind)
    for m in (model[0], model[2]):
        assert_grads_match_plain(randomise_(m), randn(2, *((2, 5, 5) if m is model[0] else (3, 7))))


# -- 3. forward-mode AD: a jvp for the custom Function ---------------------------------------------
JVP_CASES = {
    "conv2d-g2-s2": (lambda k: QuadraticConv2d(4, 4, 3, stride=2, padding=1, groups=2, neuron=k, **F64), (2, 4, 5, 5)),
    "conv1d-nobias-reflect": (
        lambda k: QuadraticConv1d(2, 3, 3, padding=1, padding_mode="reflect", bias=False, neuron=k, **F64),
        (2, 2, 6),
    ),
    "linear": (lambda k: QuadraticLinear(3, 4, neuron=k, **F64), (2, 5, 3)),
}


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", list(JVP_CASES))
def test_forward_ad_equals_finite_differences(case, kind, impl):
    make, shape = JVP_CASES[case]
    layer = randomise_(make(kind))
    layer.implementation = impl
    x = randn(*shape)
    params = dict(layer.named_parameters())
    gen = torch.Generator().manual_seed(2)
    tangents = {n: torch.randn(p.shape, generator=gen, **F64) for n, p in [("x", x), *params.items()]}

    def f(eps, only=None):
        """The layer moved by eps along the tangents (only the named one's, if given)."""
        move = lambda n: only is None or n == only
        with torch.no_grad():
            moved = {n: p + eps * tangents[n] if move(n) else p for n, p in params.items()}
            return functional_call(layer, moved, (x + eps * tangents["x"] if move("x") else x,))

    def forward_ad(only=None):
        move = lambda n: only is None or n == only
        with fwAD.dual_level():
            # the parameters require grad, so the layer runs its custom Function (not plain ops)
            duals = {n: fwAD.make_dual(p, tangents[n]) if move(n) else p for n, p in params.items()}
            xd = fwAD.make_dual(x, tangents["x"]) if move("x") else x
            return fwAD.unpack_dual(functional_call(layer, duals, (xd,))).tangent

    eps = 1e-6
    x.requires_grad_()
    # all tangents at once, then one at a time (the others absent): the input, a gate/power term
    for only in (None, "x", "weight_b" if kind in ("full", "compact") else "bias_g"):
        finite = (f(eps, only) - f(-eps, only)) / (2 * eps)
        torch.testing.assert_close(forward_ad(only), finite, rtol=1e-6, atol=1e-7)


# -- 7. torch.func with respect to any one parameter -------------------------------------------------
@pytest.mark.parametrize("impl", ["speed", "fast", "lean"])
@pytest.mark.parametrize("kind", KINDS)
def test_torch_func_grad_and_jacrev_wrt_each_parameter_alone(kind, impl):
    layer = randomise_(QuadraticConv2d(2, 4, 3, padding=1, groups=2, neuron=kind, **F64))
    layer.implementation = impl
    x = randn(2, 2, 4, 4)
    params = {n: p.detach() for n, p in layer.named_parameters()}
    for name in params:

        def loss(p, name=name):
            return functional_call(layer, {**params, name: p}, (x,)).pow(2).sum()

        want = torch.autograd.grad(plain(layer, x).pow(2).sum(), getattr(layer, name))[0]
        torch.testing.assert_close(grad(loss)(params[name]), want, rtol=1e-10, atol=1e-10)
        out = lambda p, name=name: functional_call(layer, {**params, name: p}, (x,))
        jac = jacrev(out)(params[name])
        assert jac.shape == (2, 4, 4, 4, *params[name].shape)
        torch.testing.assert_close(
            jac.flatten(0, 3).sum(0), torch.autograd.grad(plain(layer, x).sum(), getattr(layer, name))[0]
        )


# -- 4. meta-device construction + load_state_dict(assign=True) ----------------------------------
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("make", [lambda **kw: nn.Conv2d(3, 4, 3, **kw), lambda **kw: nn.Linear(3, 4, **kw)])
def test_meta_layer_loads_a_conventional_state_dict_with_assign(make, kind, bias):
    conv = make(bias=bias, dtype=torch.float64)
    with torch.device("meta"):  # float32 on meta; the checkpoint's float64 wins, as for torch's layers
        q = QuadraticConv2d(3, 4, 3, neuron=kind) if isinstance(conv, nn.Conv2d) else QuadraticLinear(3, 4, neuron=kind)
    result = q.load_state_dict(conv.state_dict(), assign=True)
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert {(p.device.type, p.dtype) for p in q.parameters()} == {("cpu", torch.float64)}
    assert all(p.requires_grad for p in q.parameters())
    x = randn(2, 3, 5, 5) if isinstance(conv, nn.Conv2d) else randn(2, 3)
    torch.testing.assert_close(q(x), conv(x), rtol=1e-12, atol=1e-12)  # ReLinear: the linear branch
    assert q.weight is not None and q.weight.data_ptr() == conv.weight.data_ptr()  # assigned, not copied


# -- 8. ExpandedWeights (per-sample gradients) ----------------------------------------------------
@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("kind", KINDS)
def test_expanded_weights_per_sample_gradients_equal_one_sample_at_a_time(kind, impl):
    torch.manual_seed(0)
    model = nn.Sequential(
        QuadraticConv2d(2, 3, 3, neuron=kind, **F64), nn.Flatten(), QuadraticLinear(12, 2, neuron=kind, **F64)
    )
    for m in (model[0], model[2]):
        randomise_(m)
        m.implementation = impl
    x = randn(3, 2, 4, 4)
    call_for_per_sample_grads(model)(x).pow(2).sum().backward()
    for i in range(len(x)):
        want = torch.autograd.grad(
            plain(model[2], model[1](plain(model[0], x[i : i + 1]))).pow(2).sum(), list(model.parameters())
        )
        for (name, p), w in zip(model.named_parameters(), want):
            torch.testing.assert_close(
                p.grad_sample[i], w, rtol=1e-10, atol=1e-10, msg=lambda m, name=name: f"{name}: {m}"
            )


# -- 2 and 5. quadratize on what real models hold ------------------------------------------------
def test_quadratize_converts_a_shared_layer_once_under_every_name():
    conv, head = nn.Conv2d(2, 2, 1), nn.Linear(2, 2)
    block = nn.Sequential(conv, nn.ReLU())
    model = nn.Sequential()
    model.a, model.b = conv, conv  # one module, two names in one parent
    model.left, model.right = block, block  # one container, two parents' names
    model.pool, model.head = nn.AdaptiveAvgPool2d(1), nn.Sequential(nn.Flatten(), head)
    model.tied = nn.Linear(2, 2)
    model.tied.weight = head.weight  # weights tied across two modules
    x = randn(2, 2, 3, 3)
    model.double()
    before = model(x)
    n_before = sum(p.numel() for p in model.parameters())
    summary = quadnn_plan(model)
    quadratize(model)
    assert model.a is model.b is model.left[0] is model.right[0]
    assert isinstance(model.a, QuadraticConv2d)
    assert model.tied.weight is model.head[1].weight
    torch.testing.assert_close(model(x), before)
    assert summary.shared == {"b": "a", "left.0": "a", "right.0": "a"}
    assert len(summary.converted) == 3 and "converted 3 layers" in str(summary)
    # new terms: the conv's 2 extra weights + 2 biases once, each linear's likewise
    extra = 2 * (2 * 2 + 2) + 2 * (2 * (2 * 2) + 2 * 2)
    assert sum(p.numel() for p in model.parameters()) == n_before + extra


def quadnn_plan(model, **kw):
    from quadnn.convert import plan_quadratize

    return plan_quadratize(model, **kw)


def test_quadratize_leaves_a_shared_layer_conventional_when_one_name_is_excluded():
    conv = nn.Conv2d(2, 2, 1)
    model = nn.Sequential(conv, nn.Sequential(conv))
    quadratize(model, exclude="1")
    assert type(model[0]) is nn.Conv2d and model[0] is model[1][0]


def test_quadratize_exclude_none_means_no_exclusion():
    model = nn.Sequential(nn.Linear(2, 2))
    quadratize(model, exclude=None)
    assert isinstance(model[0], QuadraticLinear)


def test_quadratize_keeps_hooks_and_their_handles():
    model = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    seen = []
    h1 = model[0].register_forward_hook(lambda m, i, o: seen.append(("fwd", type(m).__name__)))
    model[1].register_forward_pre_hook(lambda m, i: seen.append(("pre", type(m).__name__)))
    model[1].register_full_backward_hook(lambda m, gi, go: seen.append(("bwd", type(m).__name__)))
    quadratize(model)
    model(torch.randn(4, 2)).sum().backward()
    assert seen == [("fwd", "QuadraticLinear"), ("pre", "QuadraticLinear"), ("bwd", "QuadraticLinear")]
    h1.remove()
    seen.clear()
    model(torch.randn(4, 2))
    assert seen == [("pre", "QuadraticLinear")]


def test_quadratize_of_a_frozen_model_leaves_it_frozen():
    model = nn.Sequential(nn.Conv2d(2, 2, 3), nn.Flatten(), nn.Linear(2, 2), nn.Linear(2, 2))
    model.requires_grad_(False)
    model[3].bias.requires_grad_(True)  # BitFit: biases only
    quadratize(model)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {"3.bias", "3.bias_g", "3.bias_b"}


@pytest.mark.parametrize("kind", KINDS)
def test_quadratize_again_with_another_kind_raises_and_changes_nothing(kind):
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    quadratize(model, exclude="1", neuron=kind)
    snapshot = copy.deepcopy(model)
    for other in set(KINDS) - {kind}:
        with pytest.raises(ValueError, match=rf"0 \('{kind}'\).*neuron kind is not changed"):
            quadratize(model, neuron=other)
        assert type(model[1]) is nn.Linear and model[0].neuron == kind
    quadratize(model, neuron=kind)  # the same kind: the rest converted, the quadratic one left
    assert model[1].neuron == kind
    torch.testing.assert_close(
        model[0].weight_b if kind in ("full", "compact") else model[0].bias_g,
        getattr(snapshot[0], "weight_b" if kind in ("full", "compact") else "bias_g"),
    )


# -- 6. quadnn-train --help ----------------------------------------------------------------------
def test_train_help_names_each_default_once():
    from quadnn_paper.execution.train import _parser

    parser = _parser()
    for action in parser._actions:
        text = parser._get_formatter()._expand_help(action) if action.help else ""
        assert text.count("default") <= 1, text
    assert "(default: None)" not in parser.format_help()
    assert "(default runs)" in " ".join(parser.format_help().split())


def test_every_term_is_a_parameter_the_plain_formula_reads():
    # the reference reads TERMS; a new term in the layer would escape every comparison here
    for kind in KINDS:
        names = {n for n, _ in QuadraticLinear(2, 2, neuron=kind).named_parameters()}
        assert names <= set(TERMS)
