"""The quadratic neuron written with torch's own functional ops: the reference the layers are
checked against (tests/test_edge_cases.py, tests/test_properties.py, tests/test_torch_contract.py).

``(W_r x + b_r)(W_g x + b_g) + W_b(x*x) + c`` and its kinds, with the convolution exactly as the
torch layer the quadratic one subclasses would run it (``F.conv*d`` with the layer's stride,
padding (ints or "same"/"valid"), dilation, groups and padding mode; ``F.linear``). It shares no
code with quadnn: neither the fused [r, g] weights nor the custom autograd Function.
"""

import torch
import torch.nn.functional as F
from torch import nn

TERMS = ("weight", "bias", "weight_g", "bias_g", "weight_b", "bias_b")


def linear_op(layer):
    """``(x, W, b) -> W x + b`` as ``layer``'s torch base class computes it."""
    if isinstance(layer, nn.Linear):
        return F.linear
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[len(layer.kernel_size)]
    if layer.padding_mode != "zeros":
        pad, mode = layer._reversed_padding_repeated_twice, layer.padding_mode
        return lambda x, w, b: conv(F.pad(x, pad, mode=mode), w, b, layer.stride, 0, layer.dilation, layer.groups)
    return lambda x, w, b: conv(x, w, b, layer.stride, layer.padding, layer.dilation, layer.groups)


def plain(layer, x, params=None):
    """The output of quadratic ``layer`` at ``x``, from ``params`` (name -> tensor; default: the
    layer's own), by the neuron kind's formula."""
    p = {n: getattr(layer, n) for n in TERMS}
    if params is not None:
        p.update(params)
    op = linear_op(layer)
    r = op(x, p["weight"], p["bias"])
    if layer.neuron == "compact":
        return r + op(x * x, p["weight_b"], p["bias_b"])
    g = op(x, p["weight_g"], p["bias_g"])
    if layer.neuron == "parabolic":
        return r * g
    if layer.neuron == "poly":
        return r * g + r
    return r * g + op(x * x, p["weight_b"], p["bias_b"])


def randomise_(layer, seed=0):
    """Every parameter of ``layer`` drawn anew (N(0, 0.25), its own dtype), so the quadratic terms
    are not the zeros ReLinear starts them at and every term of the formula is exercised."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.5)
    return layer
