"""torch.ao's quantization modes on a model with quadratic layers: what each does with them.

- eager (``prepare``/``convert`` with a qconfig): the quadratic layers stay in float, with a
  warning (``test_ecosystem.py::test_torch_ao_quantization_and_torch_fusion_leave_the_layer_as_it_was``);
- dynamic (``quantize_dynamic``): the quadratic layers stay in float, with a warning when one is
  selected (``test_ecosystem.py::test_torch_ao_dynamic_quantization_leaves_quadratic_layers_in_float``);
- FX graph mode (``prepare_fx``/``prepare_qat_fx``, ``convert_fx``): the quadratic layers are
  recorded as leaf modules and stay in float (dequantized input, quantized output); the
  conventional layers around them are quantized (below);
- PT2E (``torch.export`` + torchao's ``prepare_pt2e``/``convert_pt2e``, X86 inductor quantizer):
  the quadratic layers' operations stay in float; the conventional ones are quantized (below).
"""

import copy
import warnings

import pytest
import torch
from torch import nn

from quadnn import NEURONS, QuadraticConv2d, QuadraticLayer, QuadraticLinear

pytestmark = pytest.mark.usefixtures("one_thread")


def model(kind):
    torch.manual_seed(0)
    m = nn.Sequential(
        nn.Conv2d(3, 4, 3),
        nn.ReLU(),
        QuadraticConv2d(4, 4, 3, neuron=kind),
        nn.ReLU(),
        nn.Flatten(),
        QuadraticLinear(64, 16, neuron=kind),
        nn.Linear(16, 5),
    )
    with torch.no_grad():  # every term away from its ReLinear value, so the quadratic terms count
        for q in (m[2], m[5]):
            for _, p, *_ in q.quadratic_terms():
                p.add_(torch.randn_like(p) * 0.1)
    return m


@pytest.mark.parametrize("kind", NEURONS)
@pytest.mark.parametrize("qat", [False, True], ids=["ptq", "qat"])
def test_fx_graph_mode_keeps_quadratic_layers_in_float(kind, qat):
    from torch.ao.quantization import get_default_qat_qconfig_mapping, get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx, prepare_qat_fx

    float_model = model(kind).eval()
    x = torch.randn(8, 3, 8, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao's deprecation notes
        if qat:
            prepared = prepare_qat_fx(copy.deepcopy(float_model).train(), get_default_qat_qconfig_mapping("x86"), (x,))
            prepared(x).sum().backward()  # trains: the quadratic layers get their gradients
            assert all(p.grad is not None for n, p in prepared.named_parameters() if n.startswith(("2.", "5.")))
            prepared.eval()
        else:
            prepared = prepare_fx(copy.deepcopy(float_model), get_default_qconfig_mapping("x86"), (x,))
        # recorded as leaf modules: no observer inside them
        leaves = [n.target for n in prepared.graph.nodes if n.op == "call_module"]
        assert "2" in leaves and "5" in leaves
        prepared(x)
        quantized = convert_fx(prepared)
    for name in ("2", "5"):
        layer = quantized.get_submodule(name)
        assert isinstance(layer, QuadraticLayer) and layer.neuron == kind
        assert all(type(p) is nn.Parameter and p.dtype == torch.float32 for p in layer.parameters())
    # the conventional layers around them are quantized
    assert [quantized.get_submodule(n)._get_name() for n in ("0", "6")] == ["QuantizedConvReLU2d", "QuantizedLinear"]
    with torch.no_grad():
        want, got = float_model(x), quantized(x)
    assert (got - want).abs().max() < 0.05 * want.abs().max()  # the error of 8-bit activations


@pytest.mark.parametrize("kind", ["full", "compact"])
def test_pt2e_leaves_quadratic_operations_in_float(kind):
    pt2e = pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")
    x86 = pytest.importorskip("torchao.quantization.pt2e.quantizer.x86_inductor_quantizer")

    float_model = model(kind).eval()
    x = torch.randn(8, 3, 8, 8)
    exported = torch.export.export(float_model, (x,)).module()
    quantizer = x86.X86InductorQuantizer().set_global(x86.get_default_x86_inductor_quantization_config())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepared = pt2e.prepare_pt2e(exported, quantizer)
        prepared(x)
        quantized = pt2e.convert_pt2e(prepared)
    ops = [n for n in quantized.graph.nodes if n.op == "call_function"]
    convs = [n for n in ops if n.target == torch.ops.aten.conv2d.default]
    # the conventional convolution's weight is dequantized; the quadratic layer's are float
    dequantized = [
        n for n in convs if getattr(n.args[1], "target", None) is not None and "dequantize" in str(n.args[1].target)
    ]
    assert len(convs) >= 2 and len(dequantized) == 1
    with torch.no_grad():
        want, got = float_model(x), quantized(x)
    assert (got - want).abs().max() < 0.05 * want.abs().max()
