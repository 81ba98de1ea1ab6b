"""The models the harness times: timm's registry, each quadratic model's conventional baseline, the
implementation every quadratic layer runs, and how far an implementation is from the naive one."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from quadnn.layers import QuadraticLayer

__all__ = [
    "DEFAULT_MODELS",
    "EQUAL_RTOL",
    "IMPLEMENTATIONS",
    "create",
    "baseline_name",
    "check_implementation",
    "set_implementation",
    "is_quadratic",
    "compare_implementations",
    "randomise_terms_",
]

DEFAULT_MODELS = ("cifar_qresnet20", "cifar_qresnet20_compact", "cifar_parabolic_resnet20", "cifar_poly_resnet20")
EQUAL_RTOL = 1e-3  # float32 tolerance, relative to each tensor's largest entry, for a whole network:
# 20+ layers of float32 rounding and batch norm over small batches (single layers agree to 1e-5)

# "default": the model as quadnn builds it; "budget=B": every layer planned by plan_recompute at
# budget B; the others set every quadratic layer to that implementation.
IMPLEMENTATIONS = ("default",) + QuadraticLayer.IMPLEMENTATIONS


def create(name: str, num_classes: int = 10, in_chans: int = 3) -> nn.Module:
    import timm

    import quadnn.models  # noqa: F401  (registers the CIFAR models in timm)

    return timm.create_model(name, pretrained=False, num_classes=num_classes, in_chans=in_chans)


def baseline_name(name: str) -> str:
    """The conventional model of the same shape as ``name`` (CIFAR family: same depth)."""
    model = create(name)
    depth = getattr(model, "depth", None)
    if name.startswith("cifar_") and depth is not None:
        return f"cifar_resnet{depth}"
    raise ValueError(f"no conventional baseline known for {name!r}; pass --baseline")


def check_implementation(implementation: str) -> str:
    if implementation in IMPLEMENTATIONS:
        return implementation
    if implementation.startswith("budget="):
        try:
            budget = float(implementation[len("budget=") :])
        except ValueError:
            budget = float("nan")
        if 0 <= budget <= 2:
            return implementation
    raise ValueError(
        f"implementation must be one of {IMPLEMENTATIONS} or 'budget=B' with B in [0, 2], got {implementation!r}"
    )


def set_implementation(model: nn.Module, implementation: str, example: torch.Tensor | None = None) -> nn.Module:
    """Set every quadratic layer of ``model`` to ``implementation`` (one of :data:`IMPLEMENTATIONS`;
    "default" leaves the model as it is; "budget=B" runs :func:`quadnn.plan_recompute` at budget B
    on ``example``, one input, 3x32x32 when None)."""
    check_implementation(implementation)
    if implementation == "default":
        return model
    if implementation.startswith("budget="):
        from quadnn.recompute import plan_recompute

        example = torch.zeros(1, 3, 32, 32) if example is None else example[:1]
        plan_recompute(model, example, budget=float(implementation[len("budget=") :]))
        return model
    for m in model.modules():
        if isinstance(m, QuadraticLayer):
            m.implementation = implementation
    return model


def is_quadratic(model: nn.Module) -> bool:
    return any(isinstance(m, QuadraticLayer) for m in model.modules())


def compare_implementations(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, implementation: str, reference: str = "naive"
) -> float:
    """Largest relative difference of output and parameter gradients between two implementations."""
    a = set_implementation(randomise_terms_(copy.deepcopy(model)), implementation, x).train()
    b = set_implementation(copy.deepcopy(a), reference, x).train()
    outs = []
    for m in (a, b):
        out = m(x)
        F.cross_entropy(out, y).backward()
        outs.append([out.detach()] + [p.grad if p.grad is not None else torch.zeros_like(p) for p in m.parameters()])
    err = 0.0
    for u, v in zip(*outs):
        if not (torch.isfinite(u).all() and torch.isfinite(v).all()):
            return float("inf")  # a NaN would otherwise compare as "no difference"
        scale = v.abs().max().item() or 1.0
        err = max(err, (u - v).abs().max().item() / scale)
    return err


def randomise_terms_(model: nn.Module, scale: float = 0.05, seed: int = 0) -> nn.Module:
    """Move the quadratic terms off their ReLinear reference so every term takes part."""
    from quadnn.relinear import quadratic_terms

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p, _, _ in quadratic_terms(model):
            p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype).to(p.device) * scale)
    return model
