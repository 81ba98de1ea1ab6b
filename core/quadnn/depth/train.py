"""Training and evaluation of LapDepth / Quadratic-LapDepth, and the protocol of each profile.

One run = (protocol, kind, seed): build the conventional LapDepth from ``seed``; for
``kind="quadratic"`` turn it into Quadratic-LapDepth by weight transfer (so both kinds start
from the very same function), train with AdamW and a polynomial learning-rate decay, then
evaluate on the test split. A non-finite loss stops the run and is recorded as divergence.
"""
from __future__ import annotations

import contextlib
import math
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader
from tqdm.auto import tqdm

from .. import relinear
from ..cache import cached
from ..profiles import select
from .data import KittiDepth, write_synthetic_kitti
from .metrics import depth_metrics, mean_metrics
from .model import LapDepth, quadratic_lapdepth

__all__ = ["PROTOCOLS", "PAPER", "KINDS", "protocol", "build_model", "make_optimizer", "poly_factor",
           "silog_loss", "train", "evaluate", "run", "prepare_data"]

KINDS = ("conventional", "quadratic")

# The paper's Table (Fan et al., KITTI, Eigen split): only SqRel and RMSE are printed.
PAPER = {
    "LapDepth (reported officially)": dict(sq_rel=0.212, rmse=0.446),
    "LapDepth (paper's replication)": dict(sq_rel=0.214, rmse=0.458),
    "Quadratic-LapDepth": dict(sq_rel=0.200, rmse=0.427),
}
# LapDepth's own paper (Song et al. 2021, ResNeXt101, KITTI Eigen split, 80 m cap).
LAPDEPTH_OFFICIAL = dict(abs_rel=0.059, sq_rel=0.212, rmse=2.446, rmse_log=0.091, d1=0.962, d2=0.994, d3=0.999)

_COMMON = dict(max_depth=80.0, eval_crop="garg", betas=(0.9, 0.999), poly_power=0.5,
               weight_decay_encoder=5e-4, weight_decay_decoder=0.0, neuron="full", silog_lambda=0.85,
               context_rates=(3, 6, 12, 18, 24))

PROTOCOLS = {
    # a seconds-long check of the whole path
    "smoke": dict(_COMMON, data="synthetic", synthetic_size=(72, 240), n_train=16, n_test=8,
                  encoder="test_resnet", pretrained=False, decoder_channels=(32, 24, 16, 12, 8, 8),
                  train_crop=(64, 192), batch_size=8, epochs=1, lr=1e-3, lr_end=1e-4, lr_g=1e-4, lr_b=1e-4,
                  seeds=(0,), num_threads=1),
    # synthetic scenes, a tiny timm ResNet encoder, a few hundred steps' worth of CPU
    "cpu": dict(_COMMON, data="synthetic", synthetic_size=(72, 240), n_train=96, n_test=32,
                encoder="test_resnet", pretrained=False, decoder_channels=(32, 24, 16, 12, 8, 8),
                train_crop=(64, 192), batch_size=8, epochs=3, lr=1e-3, lr_end=1e-4, lr_g=1e-4, lr_b=1e-4,
                seeds=(0, 1), num_threads=1),
    # the paper's protocol: KITTI Eigen split, ResNeXt101 encoder, AdamW, batch 16, 50 epochs
    "full": dict(_COMMON, data="kitti", synthetic_size=None, n_train=None, n_test=None,
                 encoder="resnext101_32x8d.tv_in1k", pretrained=True, decoder_channels=(512, 256, 128, 64, 32, 16),
                 train_crop=(352, 704), batch_size=16, epochs=50, lr=1e-4, lr_end=1e-5,
                 lr_g=1e-5, lr_b=1e-5,  # not stated for KITTI in the paper: our choice (lr/10)
                 seeds=(0,), num_threads=None),
}


def protocol(profile: str) -> dict:
    return dict(select(PROTOCOLS, profile))


@contextlib.contextmanager
def _threads(n: int | None):
    """Run with ``n`` torch threads (``None``: leave as is). On an oversubscribed machine one
    thread is several times faster than two spinning ones."""
    old = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def build_model(proto: dict, kind: str, seed: int) -> LapDepth:
    """The conventional LapDepth from ``seed``; for ``kind="quadratic"`` its weight-transferred
    quadratic twin (identical function at initialisation)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    torch.manual_seed(seed)
    model = LapDepth(proto["encoder"], pretrained=proto["pretrained"], max_depth=proto["max_depth"],
                     decoder_channels=proto["decoder_channels"], context_rates=proto["context_rates"])
    if kind == "quadratic":
        model = quadratic_lapdepth(model, neuron=proto["neuron"])
    return model


def make_optimizer(model: LapDepth, proto: dict, verbose: bool = False):
    """AdamW with the encoder decayed (``weight_decay_encoder``) and the decoder not.

    A quadratic encoder is split ReLinear-sg style into "linear" (lr), "g" (lr_g) and "b"
    (lr_b) groups whose decay pulls toward the ReLinear reference; returns
    ``(optimizer, reference_decay or None)``.
    """
    lr = proto["lr"]
    enc_groups = relinear.param_groups(model.encoder, lr, proto["lr_g"], proto["lr_b"],
                                       weight_decay=proto["weight_decay_encoder"])
    if not any(g["params"] for g in enc_groups[1:]):  # conventional encoder: one group
        enc_groups = [dict(name="encoder", params=enc_groups[0]["params"], lr=lr,
                           weight_decay=proto["weight_decay_encoder"])]
    else:
        enc_groups[0]["name"] = "encoder"
    groups = [g for g in enc_groups if g["params"]]
    groups.append(dict(name="decoder", params=model.decoder_parameters(), lr=lr,
                       weight_decay=proto["weight_decay_decoder"]))
    if verbose:
        print(relinear.describe_groups(groups))
    opt = torch.optim.AdamW(groups, lr=lr, betas=tuple(proto["betas"]))
    has_ref = any(g.get("reference_weight_decay", 0) for g in groups)
    return opt, (relinear.ReferenceWeightDecay(opt) if has_ref else None)


def poly_factor(step: int, total: int, lr: float, lr_end: float, power: float) -> float:
    """Multiplier of the initial lr: (1 - e)(1 - t/T)^power + e with e = lr_end/lr (1 at t=0, e at t=T)."""
    e = lr_end / lr
    return (1.0 - e) * (1.0 - min(step, total) / total) ** power + e


def silog_loss(pred: torch.Tensor, gt: torch.Tensor, lam: float = 0.85, max_depth: float = 80.0) -> torch.Tensor:
    """Scale-invariant log loss (Eigen et al.) over pixels with 0 < gt <= max_depth, times 10."""
    valid = (gt > 1e-3) & (gt <= max_depth)
    d = torch.log(pred[valid]) - torch.log(gt[valid])
    return 10.0 * torch.sqrt(torch.clamp((d ** 2).mean() - lam * d.mean() ** 2, min=1e-12))


def prepare_data(proto: dict, data_root, seed: int = 0):
    """(train set, test set, description). Synthetic scenes are written under ``data_root`` first."""
    root = Path(data_root)
    if proto["data"] == "synthetic":
        write_synthetic_kitti(root, proto["n_train"], proto["n_test"], tuple(proto["synthetic_size"]), seed=1234)
        desc = f"synthetic KITTI-format scenes ({proto['n_train']} train / {proto['n_test']} test)"
    else:
        desc = "KITTI Eigen split"
    train_set = KittiDepth(root, "train", tuple(proto["train_crop"]), proto["max_depth"], proto["eval_crop"], seed=seed)
    test_set = KittiDepth(root, "test", None, proto["max_depth"], proto["eval_crop"])
    return train_set, test_set, desc


def train(model: LapDepth, train_set, proto: dict, seed: int, progress: bool = True) -> dict:
    """Train in place; returns the history (loss per epoch, divergence, steps, seconds)."""
    gen = torch.Generator().manual_seed(seed)
    train_set.rng = np.random.default_rng(seed)
    loader = DataLoader(train_set, batch_size=proto["batch_size"], shuffle=True, generator=gen, drop_last=True)
    total = proto["epochs"] * len(loader)
    opt, ref_decay = make_optimizer(model, proto)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda t: poly_factor(t, total, proto["lr"], proto["lr_end"], proto["poly_power"]))
    hist = dict(epoch_loss=[], diverged=False, diverged_at=None, steps=0)
    t0 = time.time()
    model.train()
    bar = tqdm(total=total, desc=f"{'quadratic' if 'neuron' in model.config else 'conventional'} seed {seed}",
               disable=not progress, leave=False)
    for epoch in range(proto["epochs"]):
        losses = []
        for batch in loader:
            pred = model(batch["image"])
            loss = silog_loss(pred, batch["depth"], proto["silog_lambda"], proto["max_depth"])
            if not torch.isfinite(loss):
                hist.update(diverged=True, diverged_at=hist["steps"])
                break
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if ref_decay is not None:
                ref_decay.step()
            sched.step()
            losses.append(loss.item())
            hist["steps"] += 1
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}")
        hist["epoch_loss"].append(float(np.mean(losses)) if losses else math.nan)
        if hist["diverged"]:
            break
    bar.close()
    hist["seconds"] = time.time() - t0
    hist["final_lr"] = opt.param_groups[0]["lr"]
    return hist


@torch.no_grad()
def evaluate(model: LapDepth, test_set, proto: dict, n_examples: int = 0):
    """Mean metrics over the test images (each within its crop mask), per-image metrics, and the
    first ``n_examples`` predictions (lists, rounded to cm) for figures."""
    model.eval()
    per_image, examples = [], []
    for batch in DataLoader(test_set, batch_size=8, shuffle=False):
        pred = model(batch["image"])
        for p, g, m in zip(pred, batch["depth"], batch["mask"]):
            per_image.append(depth_metrics(p, g, m, max_depth=proto["max_depth"]))
            if len(examples) < n_examples:
                examples.append(np.round(p[0].numpy(), 2).tolist())
    return mean_metrics(per_image), per_image, examples


def quadratic_deviation(model) -> float:
    """Largest |theta - reference| over the quadratic terms (0 for a model still linear)."""
    dev = 0.0
    for _, p, _, ref in relinear.quadratic_terms(model):
        dev = max(dev, (p.detach() - ref).abs().max().item())
    return dev


def run(proto: dict, kind: str, seed: int, data_root, cache_dir=None, n_examples: int = 3,
        progress: bool = True) -> dict:
    """Train and evaluate one (kind, seed) under ``proto``; cached by configuration."""
    data_key = dict(root=str(Path(data_root).resolve())) if proto["data"] == "kitti" else "synthetic-v1"
    config = dict(protocol=proto, kind=kind, seed=seed, data=data_key, n_examples=n_examples, version=1)

    def compute():
        with _threads(proto.get("num_threads")):
            train_set, test_set, _ = prepare_data(proto, data_root, seed)
            model = build_model(proto, kind, seed)
            n_params = sum(p.numel() for p in model.parameters())
            hist = train(model, train_set, proto, seed, progress)
            if hist["diverged"]:
                metrics, per_image, examples = {k: math.nan for k in ("abs_rel", "sq_rel", "rmse", "rmse_log",
                                                                      "d1", "d2", "d3")}, [], []
            else:
                metrics, per_image, examples = evaluate(model, test_set, proto, n_examples)
            return dict(metrics=metrics, per_image=per_image, examples=examples, history=hist,
                        params=n_params, quadratic_deviation=quadratic_deviation(model))

    return cached(cache_dir, "kitti_lapdepth", config, compute)
