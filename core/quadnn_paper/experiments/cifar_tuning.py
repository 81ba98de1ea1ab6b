"""The exact check behind the tuning section's "guaranteed performance": a QResNet20 given a
ResNet20's weights and trained with ReLinear-sg at gamma 0 follows the ResNet20's SGD trajectory."""

from __future__ import annotations

import torch

from quadnn import relinear
from quadnn_paper.engine.optim import make_optimizer

__all__ = ["gamma_zero_trajectory"]


def gamma_zero_trajectory(
    steps: int = 20,
    lr: float = 0.1,
    momentum: float = 0.9,
    weight_decay: float = 5e-4,
    width: float = 0.25,
    batch: int = 32,
    seed: int = 0,
    model_kwargs: dict | None = None,
) -> dict:
    """The exact check behind "guaranteed performance": in float64, a QResNet20 given a ResNet20's
    weights (``transfer_weights_``) and trained with ReLinear-sg at gamma_g = gamma_b = 0 follows
    the ResNet20's SGD trajectory (momentum, weight decay, same batches).

    ``model_kwargs``: the models' keyword arguments (the paper's initialisation). Returns the largest
    absolute difference of the logits on a held batch and of the shared
    parameters after ``steps`` steps, and the logits' scale for comparison.
    """
    import timm

    import quadnn.models  # noqa: F401  (registers the models)

    g = torch.Generator().manual_seed(seed)
    xs = torch.randn(steps + 1, batch, 1, 8, 8, generator=g, dtype=torch.float64)
    ys = torch.randint(0, 10, (steps, batch), generator=g)
    kw = dict(num_classes=10, in_chans=1, width=width, **(model_kwargs or {}))
    torch.manual_seed(seed)
    conv = timm.create_model("cifar_resnet20", **kw).double()
    quad = timm.create_model("cifar_qresnet20", **kw).double()
    relinear.transfer_weights_(conv, quad)
    opts = []
    for m, lr_g in ((conv, lr), (quad, 0.0)):  # the conventional net has no quadratic groups
        groups = [gr for gr in relinear.param_groups(m, lr, lr_g, lr_g, weight_decay) if gr["params"]]
        opt = make_optimizer("sgd", groups, lr=lr, momentum=momentum)
        opts.append((m, opt, relinear.ReferenceWeightDecay(opt)))
    for i in range(steps):
        for m, opt, decay in opts:
            m.train()
            loss = torch.nn.functional.cross_entropy(m(xs[i]), ys[i])
            opt.zero_grad()
            loss.backward()
            opt.step()
            decay.step()
    conv.eval(), quad.eval()
    with torch.no_grad():
        a, b = conv(xs[-1]), quad(xs[-1])
    qp = dict(quad.named_parameters())
    dp = max((p - qp[n]).abs().max().item() for n, p in conv.named_parameters())
    return dict(
        steps=steps,
        logits=(a - b).abs().max().item(),
        params=dp,
        scale=a.abs().max().item(),
        lr=lr,
        momentum=momentum,
        weight_decay=weight_decay,
    )
