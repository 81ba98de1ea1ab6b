"""A run's optimiser, built in one place: the learning rates are read from the configuration here
and nowhere else in the engine.

ReLinear's parameter groups (:func:`quadnn.relinear.param_groups`: the linear weights at ``lr``,
the quadratic terms at ``lr_g`` / ``lr_b`` under ReLinear-sg, else at ``lr``) are built once, over
the part of the model the task names (:meth:`Task.relinear_part`); the task then adds what it
must (:meth:`Task.own_param_groups`, e.g. the depth decoder's group). Each group remembers its
``initial_lr``, which the schedule scales (:func:`quadnn_paper.engine.loop.lr_factor`).

SGD steps every group in one pass (:class:`OnePassSGD`): ReLinear's three groups cost the launches
of one, as in a plain training step. Adam and AdamW on a GPU step each group in one fused kernel
(:func:`fused_on`).
"""

from __future__ import annotations

import torch
from torch import nn

from quadnn import relinear

from .config import RunConfig

__all__ = ["learning_rates", "param_groups", "make_optimizer", "build_optimizer", "fused_on", "OnePassSGD"]


def learning_rates(cfg: RunConfig) -> tuple[float, float, float]:
    """``(lr, lr_g, lr_b)``: the linear weights' rate and the quadratic terms' (ReLinear-sg's own
    rates, ``lr_b`` defaulting to ``lr_g``; without sg the terms train at ``lr``)."""
    if cfg.relinear != "sg":
        return cfg.lr, cfg.lr, cfg.lr
    return cfg.lr, cfg.lr_g, cfg.lr_b if cfg.lr_b is not None else cfg.lr_g


def param_groups(cfg: RunConfig, model: nn.Module, task) -> list[dict]:
    """The optimiser's groups: ReLinear's over the task's part of ``model``, then the task's own."""
    lr, lr_g, lr_b = learning_rates(cfg)
    # The option only when it differs from the library's default (a library without it still works).
    decay = {} if cfg.quadratic_decay == "reference" else {"quadratic_decay": cfg.quadratic_decay}
    groups = relinear.param_groups(task.relinear_part(model), lr, lr_g, lr_b, cfg.weight_decay, **decay)
    groups = task.own_param_groups(groups, model, lr)
    for g in groups:
        g["initial_lr"] = g["lr"]
    return groups


def make_optimizer(name: str, groups, **hyper) -> torch.optim.Optimizer:
    """The optimiser ``name`` (``"sgd"``, ``"adam"`` or ``"adamw"``, any case) over ``groups`` (a
    list of parameter groups, or parameters), with ``hyper`` as torch's keyword arguments (``lr``,
    ``momentum``, ``betas``, ``eps``, ``fused``, ``foreach``, ...).

    The one place an optimiser is made: the engine's :func:`build_optimizer` and the Runge
    section's plain reference loop both build theirs here. SGD is :class:`OnePassSGD` (torch's
    arithmetic, its groups stepped in one pass)."""
    classes = {"sgd": OnePassSGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
    if name.lower() not in classes:
        raise ValueError(f"optimizer must be one of {tuple(classes)}, got {name!r}")
    return classes[name.lower()](groups, **hyper)


def build_optimizer(cfg: RunConfig, model: nn.Module, task):
    """``(optimizer, reference weight decay, ReLinear-sw shrink or None)`` of a run."""
    groups = param_groups(cfg, model, task)
    lr, betas = learning_rates(cfg)[0], (cfg.momentum, cfg.beta2)
    if cfg.optimizer == "sgd":
        opt = make_optimizer("sgd", groups, lr=lr, momentum=cfg.momentum)
    else:
        opt = make_optimizer(cfg.optimizer, groups, lr=lr, betas=betas, fused=fused_on(groups))
    shrink = None
    if cfg.relinear.startswith("sw-"):
        alpha_b = cfg.alpha_b if cfg.alpha_b is not None else cfg.alpha_g
        shrink = relinear.Shrink(model, cfg.relinear[3:], cfg.alpha_g, alpha_b)
    return opt, relinear.ReferenceWeightDecay(opt), shrink


def fused_on(groups: list[dict]) -> bool | None:
    """True when every parameter lies on a GPU: Adam and AdamW then step each group in one fused
    kernel (ReLinear's three groups: three kernels) instead of a dozen multi-tensor operations per
    group. None (torch's default) elsewhere, so CPU results, and the cache of them, keep torch's
    default arithmetic."""
    params = [p for g in groups for p in g["params"]]
    return True if params and all(p.device.type == "cuda" for p in params) else None


class OnePassSGD(torch.optim.SGD):
    """torch's SGD with momentum, its groups stepped together: the momentum update of every
    parameter in two multi-tensor operations, weight decay once per distinct decay and the update
    once per distinct learning rate (ReLinear-sg: the linear rate and lr_g), instead of torch's
    three or four operations per group. Each parameter's arithmetic is torch's, bit for bit; the
    first step (the buffers are made) and any setting this pass does not cover (nesterov,
    maximize, sparse or missing momentum, a tensor lr) take torch's own step.

    Why not ``torch.optim.SGD`` itself (measured on torch 2.14, CPU, one thread, the engine's
    QResNet20 groups): ``foreach=True`` gives the same weights bit for bit after 50
    engine steps and the same CPU time (medians 0.96-1.03x this pass, quartiles within 0.94-1.06),
    but steps each group on its own: 10 multi-tensor operations a step against 5 here, and the
    engine step's launches exceed the plain step's bound (tests/test_engine_step.py: sg 346,
    sw-l2 349 > 343). ``fused=True`` steps the optimiser in 0.57-0.66x the time (1-3 launches
    fewer) but is not torch's default arithmetic: after 50 steps the weights differ by up to
    2.4e-7, which would change every cached CPU result; in a whole step (~90 ms) the optimiser's
    ~1.8 ms is within noise."""

    _SHARED = ("momentum", "dampening", "nesterov", "maximize")

    @torch.no_grad()
    def step(self, closure=None):
        params, grads, bufs = [], [], []
        decays: dict[float, list[int]] = {}
        rates: dict[float, list[int]] = {}
        first = self.param_groups[0] if self.param_groups else {}
        for group in self.param_groups:
            if any(group[k] != first[k] for k in self._SHARED) or isinstance(group["lr"], torch.Tensor):
                return super().step(closure)
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse or self.state[p].get("momentum_buffer") is None:
                    return super().step(closure)
                if group["weight_decay"] != 0:
                    decays.setdefault(group["weight_decay"], []).append(len(params))
                rates.setdefault(group["lr"], []).append(len(params))
                params.append(p)
                grads.append(p.grad)
                bufs.append(self.state[p]["momentum_buffer"])
        if closure is not None or not params or first["nesterov"] or first["maximize"] or first["momentum"] == 0:
            return super().step(closure)
        for wd, idx in decays.items():  # grad + wd * p, into new tensors as torch's foreach step does
            for i, g in zip(idx, torch._foreach_add([grads[i] for i in idx], [params[i] for i in idx], alpha=wd)):
                grads[i] = g
        torch._foreach_mul_(bufs, first["momentum"])
        torch._foreach_add_(bufs, grads, alpha=1 - first["dampening"])
        for lr, idx in rates.items():
            torch._foreach_add_([params[i] for i in idx], [bufs[i] for i in idx], alpha=-lr)
        return None
