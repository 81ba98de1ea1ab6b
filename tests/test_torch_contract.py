"""torch's own contract for a layer, on every quadratic layer: the sample inputs torch tests
nn.Conv1d/2d/3d and nn.Linear with (``torch.testing._internal.common_modules.module_db``),
driven through each neuron kind x implementation and through layers made by ``quadratize``, with
the checks of torch's generic module tests (test/test_modules.py): forward called as torch calls
it, gradcheck and gradgradcheck (batched gradients included), memory format of outputs and
gradients, non-contiguous inputs, factory kwargs, pickling and state_dict round trips,
``to``/``to_empty``, train/eval.

Legitimate differences from torch's layer, and how the checks take them:
- the output is the neuron's formula, not ``W x + b``: a sample's ``reference_fn`` (the
  conventional output) is compared at the ReLinear initialisation, where the two coincide, and
  the output with every term random is compared with the plain formula (tests/plain_formula.py);
- the layer has more parameters (``weight_g``, ``bias_g``, ``weight_b``, ``bias_b``), so
  gradcheck runs over all of them and state dicts hold them;
- torch's convolution samples set neither ``groups`` nor dilation, strides or a padding mode:
  :data:`EXTRA_CONV` adds samples that set them all (batched gradients of grouped layers included);
- gradcheck runs in its fast mode (random projections of the Jacobian) to keep 96 checks within
  the test tiers' time (the default implementation's in ``make test-fast``, all in ``make test``);
  torch's own module tests run the slow mode for these layers.
"""

import copy
import io
import pickle
import unittest

import pytest
import torch
from plain_formula import plain
from torch import nn
from torch._subclasses.meta_utils import assert_metadata_eq
from torch.func import functional_call

from quadnn import NEURONS, QuadraticConv1d, QuadraticConv2d, QuadraticConv3d, QuadraticLayer, QuadraticLinear
from quadnn.convert import quadratize

common_modules = pytest.importorskip("torch.testing._internal.common_modules", exc_type=ImportError)
# Importing torch's test utilities freezes torch.backends' flags for the whole process
# (common_utils calls disable_global_flags), so every later test that sets e.g. cudnn.benchmark
# would fail; give the process its flags back.
# (torch.backends is wrapped: its functions' own globals hold the flag)
torch.backends.flags_frozen.__globals__["__allow_nonbracketed_mutation_flag"] = True
assert not torch.backends.flags_frozen()

pytestmark = pytest.mark.usefixtures("one_thread")

QUADRATIC = {
    nn.Conv1d: QuadraticConv1d,
    nn.Conv2d: QuadraticConv2d,
    nn.Conv3d: QuadraticConv3d,
    nn.Linear: QuadraticLinear,
}
INFOS = {mi.module_cls.__name__: mi for mi in common_modules.module_db if mi.module_cls in QUADRATIC}
# every kind x implementation, and the layer quadratize makes (default implementation)
MAKERS = [(k, i) for k in NEURONS for i in QuadraticLayer.IMPLEMENTATIONS] + [(k, "quadratize") for k in NEURONS]


# torch's convolution samples never set groups, dilation, strides or a padding mode; these do, and
# every test below runs them too: (constructor args, kwargs, spatial size of the input)
EXTRA_CONV = {
    "groups-stride-dilation-circular": (
        (4, 6, 3),
        dict(stride=2, padding=2, dilation=2, groups=2, padding_mode="circular"),
        7,
    ),
    "groups-same-even-kernel-reflect": (
        (4, 4, 2),
        dict(padding="same", dilation=2, groups=2, padding_mode="reflect"),
        5,
    ),
}


def samples(name, dtype=torch.float64, requires_grad=True, training=True):
    mi = INFOS[name]
    torch.manual_seed(0)  # torch's samples draw from the global generator: the same inputs every run
    out = list(mi.module_inputs_func(mi, device="cpu", dtype=dtype, requires_grad=requires_grad, training=training))
    if name.startswith("Conv"):
        nd, gen = int(name[-2]), torch.Generator().manual_seed(0)
        for desc, (args, kwargs, size) in EXTRA_CONV.items():
            x = torch.randn(2, args[0], *[size] * nd, generator=gen, dtype=dtype).requires_grad_(requires_grad)
            out.append(
                common_modules.ModuleInput(
                    common_modules.FunctionInput(*args, **kwargs),
                    forward_input=common_modules.FunctionInput(x),
                    desc=desc,
                )
            )
    return out


def make(name, sample, kind, how, dtype=torch.float64, random_terms=True, **extra):
    """The quadratic layer for ``sample``'s constructor arguments (torch's layer seeded alike)."""
    args, kwargs = sample.constructor_input.args, {**sample.constructor_input.kwargs, **extra}
    torch.manual_seed(0)
    if how == "quadratize":
        layer = quadratize(nn.Sequential(INFOS[name].module_cls(*args, **kwargs, dtype=dtype)), neuron=kind)[0]
    else:
        layer = QUADRATIC[INFOS[name].module_cls](*args, **kwargs, neuron=kind, dtype=dtype)
        layer.implementation = how
    if random_terms:
        gen = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for p in layer.parameters():
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) * 0.5)
    return layer


def call(layer, sample):
    """The layer called as torch's tests call it (positional and keyword forward arguments)."""
    return layer(*sample.forward_input.args, **sample.forward_input.kwargs)


def inputs(sample):
    return [*sample.forward_input.args, *sample.forward_input.kwargs.values()]


def ids(makers):
    return [f"{k}-{i}" for k, i in makers]


# gradcheck of the default implementation in `make test-fast`, the others in `make test`
GRAD_MAKERS = [pytest.param(k, i, id=f"{k}-{i}", marks=() if i == "speed" else pytest.mark.slow) for k, i in MAKERS]


@pytest.mark.parametrize("name", list(INFOS))
@pytest.mark.parametrize("kind,how", MAKERS, ids=ids(MAKERS))
def test_forward_as_torch_calls_it(name, kind, how):
    for sample in samples(name):
        layer = make(name, sample, kind, how)
        torch.testing.assert_close(call(layer, sample), plain(layer, *inputs(sample)), rtol=1e-10, atol=1e-10)
        # at the ReLinear initialisation the layer is torch's: its reference output, exactly
        conventional = INFOS[name].module_cls(*sample.constructor_input.args, **sample.constructor_input.kwargs)
        q = make(name, sample, kind, how, random_terms=False)
        conventional = conventional.double()
        conventional.load_state_dict({k: v for k, v in q.state_dict().items() if k in ("weight", "bias")})
        torch.testing.assert_close(call(q, sample), call(conventional, sample), rtol=1e-12, atol=1e-12)
        if sample.reference_fn is not None:  # called as torch's test_forward calls it, on the layer
            args, kwargs = sample.forward_input.args, sample.forward_input.kwargs
            torch.testing.assert_close(call(q, sample), sample.reference_fn(q, *args, **kwargs))
            if sample.reference_fn.__name__ == "no_batch_dim_reference_fn":  # = batched of one: any terms
                torch.testing.assert_close(call(layer, sample), sample.reference_fn(layer, *args, **kwargs))


def as_function(layer, n_inputs):
    """(inputs..., parameters...) -> output, as torch's test_grad differentiates a module."""
    names = [n for n, _ in layer.named_parameters()]

    def fn(*flat):
        return functional_call(layer, dict(zip(names, flat[n_inputs:])), tuple(flat[:n_inputs]))

    return fn


@pytest.mark.parametrize("name", list(INFOS))
@pytest.mark.parametrize("kind,how", GRAD_MAKERS)
def test_gradcheck_and_gradgradcheck_with_batched_gradients(name, kind, how):
    for sample in samples(name):
        layer = make(name, sample, kind, how)
        x = inputs(sample)
        fn = as_function(layer, len(x))
        flat = (*x, *layer.parameters())
        nondet = INFOS[name].gradcheck_nondet_tol
        assert torch.autograd.gradcheck(fn, flat, check_batched_grad=True, fast_mode=True, nondet_tol=nondet)
        assert torch.autograd.gradgradcheck(fn, flat, check_batched_grad=True, fast_mode=True, nondet_tol=nondet)


def formats(t):
    fmts = [torch.contiguous_format]
    if t.dim() == 4:
        fmts.append(torch.channels_last)
    if t.dim() == 5:
        fmts.append(torch.channels_last_3d)
    return fmts


def layout(t, fmt):
    return (
        t.is_contiguous(memory_format=fmt) and not t.is_contiguous()
        if fmt != torch.contiguous_format
        else t.is_contiguous()
    )


@pytest.mark.parametrize("name", ["Conv2d", "Conv3d"])
@pytest.mark.parametrize("kind,how", MAKERS, ids=ids(MAKERS))
def test_memory_format_of_outputs_and_gradients_follows_torch(name, kind, how):
    for sample in samples(name, requires_grad=False):
        (x0,) = sample.forward_input.args
        if x0.dim() != {"Conv2d": 4, "Conv3d": 5}[name]:
            continue  # unbatched: no channels-last layout
        for in_fmt in formats(x0):
            for module_fmt in formats(x0):
                x = x0.detach().contiguous(memory_format=in_fmt).requires_grad_()
                conventional = INFOS[name].module_cls(*sample.constructor_input.args, **sample.constructor_input.kwargs)
                conventional = conventional.double().to(memory_format=module_fmt)
                layer = make(name, sample, kind, how).to(memory_format=module_fmt)
                y, ref = layer(x), conventional(x)
                fmt = formats(x0)[1]
                assert layout(y, fmt) == layout(ref, fmt), (in_fmt, module_fmt)
                y.sum().backward()
                x_grad = x.grad
                x.grad = None
                ref.sum().backward()
                assert layout(x_grad, fmt) == layout(x.grad, fmt), (in_fmt, module_fmt)
                for n, p in layer.named_parameters():
                    if n.startswith("weight"):  # each weight's gradient in the layout of torch's
                        assert layout(p.grad, fmt) == layout(conventional.weight.grad, fmt), (n, in_fmt, module_fmt)


# -- torch's generic test_memory_format (test/test_modules.py), as it runs on torch's own layers ---
def torch_skip(name, test):
    """The reason torch's ModuleInfo gives for skipping ``test`` on its own layer on the CPU (a
    skip or an expected failure), or None."""
    for d in INFOS[name].decorators:
        if d.test_name == test and d.device_type in (None, "cpu") and d.active_if:
            for dec in d.decorators:
                if dec is unittest.expectedFailure:
                    return f"torch's ModuleInfo for nn.{name} marks {test} an expected failure"
                if getattr(dec, "__qualname__", "").startswith("skip"):
                    return f"torch's ModuleInfo for nn.{name} skips {test}"
    return None


TORCH_SKIPS = {
    # torch's comments beside those marks, common_modules.py
    ("Linear", "test_memory_format"): "No channels_last support for Linear currently",
    ("Conv3d", "test_memory_format"): "expected failure for nn.Conv3d too (pytorch/pytorch#80247)",
}


def channels_last_of(dim):
    return {4: torch.channels_last, 5: torch.channels_last_3d}.get(dim)


def expected_layout(t, in_fmt, module_fmt, affects_out):
    """torch's rule for an output or gradient of ``t``'s rank: channels-last when the input is, or
    when the module is and its format affects the output; contiguous otherwise."""
    fmt = channels_last_of(t.dim())
    if fmt is not None and (in_fmt == fmt or (module_fmt == fmt and affects_out)):
        return fmt
    return torch.contiguous_format


def layout_of(t):
    """The memory format ``t`` is laid out in: channels-last (not also contiguous), or contiguous."""
    fmt = channels_last_of(t.dim())
    if fmt is not None and not t.is_contiguous() and t.is_contiguous(memory_format=fmt):
        return fmt
    return torch.contiguous_format


def torch_layouts(name, sample, x, weight):
    """The memory formats of the output, the input's gradient and the weight's gradient that
    torch's own layer gives for ``sample`` at input ``x``, its weight laid out as ``weight``."""
    conventional = INFOS[name].module_cls(*sample.constructor_input.args, **sample.constructor_input.kwargs)
    conventional = conventional.double().to(memory_format=layout_of(weight))
    x = x.detach().clone().requires_grad_()
    y = conventional(x)
    dx, dw = torch.autograd.grad(y, (x, conventional.weight), torch.ones_like(y))
    return {"output": layout_of(y), "input": layout_of(dx), "weight": layout_of(dw)}


@pytest.mark.parametrize("name", list(INFOS))
@pytest.mark.parametrize("kind,how", GRAD_MAKERS)
def test_memory_format_as_torch_tests_its_layers(name, kind, how):
    """Outputs and the gradients ``torch.autograd.grad`` returns (input and every parameter) in
    each input x module memory format: equal to the contiguous ones, laid out by torch's rule."""
    reason = torch_skip(name, "test_memory_format")
    if reason:
        pytest.skip(f"{reason}: {TORCH_SKIPS[(name, 'test_memory_format')]}")
    affects_out = INFOS[name].module_memformat_affects_out
    for sample in samples(name):
        (x0,) = sample.forward_input.args
        fmt = channels_last_of(x0.dim())
        in_fmts = [torch.contiguous_format] + ([fmt] if fmt else [])
        module_fmts = [torch.preserve_format, torch.contiguous_format] + ([fmt] if fmt else [])
        layer = make(name, sample, kind, how)
        want = layer(x0)
        dy = torch.rand_like(want)
        want_grads = torch.autograd.grad(want, (x0, *layer.parameters()), dy)
        for in_fmt in in_fmts:
            x = x0.detach().clone().to(memory_format=in_fmt).requires_grad_()
            for module_fmt in module_fmts:
                layer.to(memory_format=module_fmt)
                y = layer(x)
                grads = torch.autograd.grad(y, (x, *layer.parameters()), torch.empty_like(y).copy_(dy))
                torch.testing.assert_close((y, grads), (want, want_grads), rtol=1e-10, atol=1e-10)
                names = ["output", "input", *(n for n, _ in layer.named_parameters())]
                for n, t in zip(names, (y, *grads)):
                    expected = expected_layout(t, in_fmt, module_fmt, affects_out)
                    if getattr(layer, "padding_mode", "zeros") != "zeros" and t.dim() > 1:
                        # torch's own layer pads through F.pad first, which lays out its output
                        # and its gradient as it does (circular: contiguous), not by the rule: the
                        # quadratic layer lays them out as torch's layer does
                        expected = torch_layouts(name, sample, x, layer.weight)[
                            n if n in ("output", "input") else "weight"
                        ]
                    assert t.is_contiguous(memory_format=expected), (n, in_fmt, module_fmt, t.stride())


# -- torch's generic test_device_ctx_init ----------------------------------------------------
@pytest.mark.parametrize("name", list(INFOS))
@pytest.mark.parametrize("kind", NEURONS)
def test_built_under_the_meta_device_like_on_the_cpu(name, kind):
    """A layer built under ``torch.device("meta")`` has the parameters of one built on the CPU:
    the same dtype, shape, strides and storage offsets (W_g stored after W_r in both)."""
    cls = QUADRATIC[INFOS[name].module_cls]
    for sample in samples(name, requires_grad=False):
        args, kwargs = sample.constructor_input.args, sample.constructor_input.kwargs
        on_cpu = cls(*args, **kwargs, neuron=kind)
        with torch.device("meta"):
            on_meta = cls(*args, **kwargs, neuron=kind)
        pairs = list(zip(on_meta.named_parameters(), on_cpu.parameters())) + list(
            zip(on_meta.named_buffers(), on_cpu.buffers())
        )
        assert len(pairs) == len(list(on_cpu.parameters())) + len(list(on_cpu.buffers()))
        for (n, p_meta), p_cpu in pairs:
            assert p_meta.is_meta, n
            assert_metadata_eq(_assert_equal, p_meta, p_cpu)


def _assert_equal(a, b):
    assert a == b, (a, b)


def noncontiguous(t):
    """``t``'s values in a tensor that is not contiguous (every other element of a larger one)."""
    big = torch.repeat_interleave(t.detach(), 2, dim=-1)[..., ::2]
    assert not big.is_contiguous() or t.numel() <= 1
    return big.requires_grad_(t.requires_grad)


@pytest.mark.parametrize("name", list(INFOS))
@pytest.mark.parametrize("kind,how", MAKERS, ids=ids(MAKERS))
def test_noncontiguous_inputs_and_grad_outputs_give_the_same_results(name, kind, how):
    for sample in samples(name):
        layer = make(name, sample, kind, how)
        (x,) = inputs(sample)
        results = []
        for transform in (lambda t: t.detach().clone().requires_grad_(), noncontiguous):
            xi = transform(x)
            y = layer(xi)
            dy = transform(torch.ones_like(y) * torch.linspace(-1, 1, y.numel(), dtype=y.dtype).view_as(y))
            grads = torch.autograd.grad(y, [xi, *layer.parameters()], dy.detach())
            results.append((y.detach(), grads))
        torch.testing.assert_close(results[0], results[1], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", list(INFOS))
@pytest.mark.parametrize("kind", NEURONS)
def test_factory_kwargs_reach_every_parameter(name, kind):
    for sample in samples(name):
        args, kwargs = sample.constructor_input.args, sample.constructor_input.kwargs
        cls = QUADRATIC[INFOS[name].module_cls]
        for dd in (dict(device="meta"), dict(dtype=torch.float64), dict(device="meta", dtype=torch.float16)):
            layer = cls(*args, **kwargs, neuron=kind, **dd)
            for n, p in layer.named_parameters():
                assert p.device.type == dd.get("device", "cpu") and p.dtype == dd.get("dtype", torch.float32), n
        with torch.device("meta"):
            assert all(p.is_meta for p in cls(*args, **kwargs, neuron=kind).parameters())


@pytest.mark.parametrize("name", list(INFOS))
@pytest.mark.parametrize("kind,how", MAKERS, ids=ids(MAKERS))
def test_pickle_deepcopy_and_state_dict_round_trips(name, kind, how):
    for sample in samples(name):
        layer = make(name, sample, kind, how)
        y = call(layer, sample)
        buf = io.BytesIO()
        torch.save(layer, buf)
        buf.seek(0)
        copies = [pickle.loads(pickle.dumps(layer)), copy.deepcopy(layer), torch.load(buf, weights_only=False)]
        fresh = make(name, sample, kind, how if how != "quadratize" else "speed", random_terms=False)
        fresh.load_state_dict(layer.state_dict())
        copies.append(fresh)
        for c in copies:
            assert type(c) is type(layer) and c.neuron == kind
            torch.testing.assert_close(call(c, sample), y, rtol=0, atol=0)
        assert copies[0].implementation == layer.implementation


@pytest.mark.parametrize("name", list(INFOS))
@pytest.mark.parametrize("kind", NEURONS)
def test_to_and_to_empty(name, kind):
    for sample in samples(name, requires_grad=False):
        layer = make(name, sample, kind, "speed")
        as32 = copy.deepcopy(layer).to(torch.float32)
        assert {p.dtype for p in as32.parameters()} == {torch.float32}
        x = inputs(sample)[0]
        torch.testing.assert_close(as32(x.float()), call(layer, sample).float(), rtol=1e-4, atol=1e-4)
        on_meta = copy.deepcopy(layer).to("meta")
        assert all(p.is_meta for p in on_meta.parameters())
        empty = on_meta.to_empty(device="cpu")
        assert {p.device.type for p in empty.parameters()} == {"cpu"}
        empty.reset_parameters()  # torch's linear branch init, the quadratic terms at ReLinear
        conventional = INFOS[name].module_cls(*sample.constructor_input.args, **sample.constructor_input.kwargs)
        conventional = conventional.double()
        conventional.load_state_dict({k: v for k, v in empty.state_dict().items() if k in ("weight", "bias")})
        torch.testing.assert_close(empty(x), conventional(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", list(INFOS))
@pytest.mark.parametrize("kind", NEURONS)
def test_train_and_eval_modes_compute_the_same(name, kind):
    # torch's ModuleInfo: train_and_eval_differ is False for these layers
    assert not INFOS[name].train_and_eval_differ
    for sample in samples(name):
        layer = make(name, sample, kind, "speed")
        y = call(layer, sample)
        torch.testing.assert_close(call(layer.eval(), sample), y, rtol=0, atol=0)
        assert "neuron=" in repr(layer)
