"""Why Parabolic-18 and Poly-18 printed identical errors, and the pairing that replaces the accident."""

import timm
import torch

import quadnn.models  # noqa: F401  (registers the models)
from quadnn import relinear
from quadnn_paper.sections import imagenet

KW = dict(num_classes=10, width=0.125, zero_init_last=False, shortcut="A")


def _built(model, seed=0):
    torch.manual_seed(seed)
    return timm.create_model(model, **KW).eval()


def test_parabolic_and_poly_draw_the_same_network_under_one_seed():
    # Same parameter names and shapes, quadratic terms at their reference: one function at the start.
    x = torch.randn(3, 3, 32, 32)
    p, q, r = (_built(f"imagenet_{k}18") for k in ("parabolic_resnet", "poly_resnet", "resnet"))
    with torch.no_grad():
        assert torch.equal(p(x), q(x))
        assert not torch.allclose(p(x), r(x))  # the ResNet consumes the random stream differently


def test_every_quadratic_imagenet_run_starts_from_its_resnet_twin():
    runs = imagenet.runs("cpu")
    twins = {r.model: r.init_twin for r in runs}
    for d in (18, 34):
        for k in ("parabolic_resnet", "poly_resnet", "qresnet"):
            assert twins[f"imagenet_{k}{d}"] == f"imagenet_resnet{d}"
        assert twins[f"imagenet_resnet{d}"] is None and twins[f"imagenet_plain{d}"] is None
    # and the twin's weights make the quadratic network compute the ResNet's function
    x = torch.randn(2, 3, 32, 32)
    r, q = _built("imagenet_resnet18"), _built("imagenet_qresnet18", seed=1)
    relinear.transfer_weights_(r, q)
    with torch.no_grad():
        assert torch.allclose(r(x), q(x), atol=1e-6)
