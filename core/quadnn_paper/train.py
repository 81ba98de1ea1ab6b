"""Training engine: one dataclass config, one loop, results cached by configuration.

API summary (for notebooks and other experiments)
-------------------------------------------------
``from quadnn.train import Config, run``

``run(Config(...)) -> dict`` (or ``run(dict)`` / ``run(Config(), epochs=3)``) trains one
configuration, or returns at once if that configuration already finished:

    res = run(Config(model="cifar_qresnet20", dataset="digits", epochs=10, optimizer="sgd",
                     lr=0.1, relinear="sg", lr_g=1e-4, seed=0, out="build/runs"))
    res["status"]            # "finished" | "diverged"
    res["test_error"]        # final test error in % (None when diverged)
    res["history"]           # per epoch: epoch, train_loss, train_acc, test_loss, test_acc,
                             #            test_error, lr {group: lr}, epoch_time, eval_time
    res["stage_checkpoints"] # {"1": path, ...}: weights at each schedule stage end (milestones, last epoch)
    res["params"], res["epoch_time"] (mean train seconds/epoch), res["run_dir"], res["diverged_reason"]

- Models: any timm model name (``quadnn`` registers ``cifar_*``); ``width``, ``rezero`` and
  ``model_kwargs`` are passed to ``timm.create_model`` (width/rezero only when non-default).
- ReLinear: ``relinear="none"`` (one lr for all), ``"sg"`` (groups "linear"/"g"/"b" at
  lr/lr_g/lr_b via :func:`quadnn.relinear.param_groups`, weight decay of quadratic terms
  toward their reference), ``"sw-l1"`` / ``"sw-l2"`` (one lr, :class:`quadnn.relinear.Shrink`
  with ``alpha_g``/``alpha_b`` after every step).
- Weight transfer: ``transfer_from=<a stage checkpoint of a conventional run>``; the
  quadratic model starts from those weights (:func:`quadnn.relinear.transfer_weights_`).
- Schedules: ``"multistep"`` (decay ``lr_decay`` at ``milestones`` given as fractions of
  ``epochs``: the paper's 100/150 of 200 is (0.5, 0.75)), ``"diminishing"``
  (eta_t = lr * dim_alpha / (dim_alpha + t), t = iteration, all groups keep their ratio:
  the appendix's beta/(alpha+t) diag(1, gamma) with beta = lr*alpha, gamma = lr_g/lr),
  ``"constant"``.
- Divergence: a non-finite loss or parameter, or an epoch's mean training loss above
  ``diverge_factor * ln(num_classes)`` (10x the loss of a uniform guess), stops the run; it
  is recorded with ``status="diverged"`` and its curve so far, never raised.
- Results live in ``out/<16-hex hash of the config>/``: ``config.json``, ``metrics.json``
  (rewritten atomically each epoch), ``last.pt`` (resume checkpoint: model, optimiser,
  epoch, history, torch RNG state; removed when the run ends), ``stage<k>.pt`` (weights at
  stage ends), ``result.json`` (written last; its presence means "done, never re-run").
  The hash covers every field except the operational ones in :data:`OPERATIONAL`.
- Quick runs: ``train_limit=N`` trains on the first N images (hashed); ``threads=1`` (not
  hashed) avoids OpenMP contention on a shared CPU. A sweep of many configurations is a loop of
  ``run`` calls (or a process pool of them); see :mod:`quadnn.cifar_tuning`.
- CLI: ``python -m quadnn.train --help`` / ``quadnn-train``; ``torchrun --nproc_per_node=N
  -m quadnn.train ...`` trains with DistributedDataParallel (gloo on CPU, nccl on CUDA); batch
  norm statistics are synchronised across ranks (:class:`SyncBatchNorm2d`, which also works on
  CPU) so N ranks reproduce one process with the same global ``batch_size``. Every rank
  evaluates the whole test set (they hold identical models); rank 0 writes the files.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from . import data as qdata
from quadnn import relinear
from .cache import atomic_write_text, config_hash
from .profiles import PROFILES

__all__ = ["Config", "run", "main", "RELINEAR", "OPTIMIZERS", "SCHEDULES", "OPERATIONAL", "PROFILE_DEFAULTS",
           "run_dir", "build_model"]

RELINEAR = ("none", "sg", "sw-l1", "sw-l2")
OPTIMIZERS = ("sgd", "adam", "adamw")
SCHEDULES = ("multistep", "diminishing", "constant")
DEVICES = ("cpu", "cuda", "mps")
# Fields that do not change what is computed; left out of the run's hash.
OPERATIONAL = ("out", "data_dir", "download", "progress", "threads")


@dataclass
class Config:
    """One training run. Defaults: the paper's CIFAR-10 protocol for QResNet20 with ReLinear-sg."""

    model: str = "cifar_qresnet20"
    width: float = 1.0                   # channel multiplier (cifar_* models)
    rezero: bool = False                 # ReZero residuals (cifar_* models)
    model_kwargs: dict = field(default_factory=dict)
    dataset: str = "cifar10"
    split_seed: int = 0                  # train/test split of digits
    train_limit: int = 0                 # use only the first N training images (0: all)
    epochs: int = 200
    batch_size: int = 128                # global batch (split across DDP ranks)
    optimizer: str = "sgd"
    lr: float = 0.1                      # gamma_r
    momentum: float = 0.9                # sgd momentum / adam beta1
    weight_decay: float = 1e-4
    relinear: str = "sg"
    lr_g: float = 1e-4                   # gamma_g (relinear="sg")
    lr_b: float | None = None            # gamma_b; None = lr_g
    alpha_g: float = 0.0                 # alpha (sw-l1) or beta (sw-l2) of the gate terms
    alpha_b: float | None = None         # ... of the power terms; None = alpha_g
    schedule: str = "multistep"
    milestones: tuple = (0.5, 0.75)      # fractions of epochs
    lr_decay: float = 0.1
    dim_alpha: float = 1000.0            # diminishing schedule offset (iterations)
    transfer_from: str | None = None     # stage checkpoint of a conventional run
    seed: int = 0
    device: str = "cpu"
    amp: bool = False                    # bf16 autocast (CPU and CUDA)
    compile: bool = False                # torch.compile
    diverge_factor: float = 10.0
    # operational (not hashed)
    out: str = "runs"
    data_dir: str = "data"
    download: bool = False
    progress: bool = True
    threads: int | None = None           # torch.set_num_threads

    def __post_init__(self):
        self.milestones = tuple(float(m) for m in self.milestones)
        checks = [("relinear", RELINEAR), ("optimizer", OPTIMIZERS), ("schedule", SCHEDULES),
                  ("dataset", qdata.DATASETS)]
        for name, valid in checks:
            if getattr(self, name) not in valid:
                raise ValueError(f"{name} must be one of {valid}, got {getattr(self, name)!r}")
        if self.device.split(":")[0] not in DEVICES:
            raise ValueError(f"device must be one of {DEVICES} (optionally cuda:N), got {self.device!r}")
        for name in ("epochs", "batch_size"):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) >= 1):
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        for name in ("lr", "lr_g", "lr_b", "alpha_g", "alpha_b", "weight_decay", "momentum"):
            v = getattr(self, name)
            if v is not None and not v >= 0:
                raise ValueError(f"{name} must be >= 0, got {v!r}")
        if not all(0 < m <= 1 for m in self.milestones):
            raise ValueError(f"milestones are fractions of the epochs in (0, 1], got {self.milestones}")
        if self.transfer_from is not None:
            self.transfer_from = str(self.transfer_from)

    def key(self) -> dict:
        """The fields that define the run (everything but :data:`OPERATIONAL`)."""
        d = asdict(self)
        for k in OPERATIONAL:
            d.pop(k)
        d["milestones"] = list(d["milestones"])
        return d


# The CLI's --profile fills defaults for a quick start; explicit flags override them.
PROFILE_DEFAULTS = {
    "smoke": dict(dataset="digits", epochs=2),
    "cpu": dict(dataset="digits", epochs=12),
    "full": dict(dataset="cifar10", epochs=200),
}
assert set(PROFILE_DEFAULTS) == set(PROFILES)


def run_dir(cfg: Config) -> Path:
    return Path(cfg.out) / config_hash(cfg.key())


def milestone_epochs(cfg: Config) -> list[int]:
    return sorted({max(1, round(m * cfg.epochs)) for m in cfg.milestones})


def stage_ends(cfg: Config) -> list[int]:
    """Epochs (1-based, completed) at which a schedule stage ends: the milestones and the last epoch."""
    if cfg.schedule != "multistep":
        return [cfg.epochs]
    return sorted(set(m for m in milestone_epochs(cfg) if m < cfg.epochs) | {cfg.epochs})


def lr_factor(cfg: Config, epoch: int, step: int) -> float:
    """Multiplier of every group's initial lr during 0-based ``epoch`` at global iteration ``step``."""
    if cfg.schedule == "multistep":
        return cfg.lr_decay ** sum(epoch >= m for m in milestone_epochs(cfg))
    if cfg.schedule == "diminishing":
        return cfg.dim_alpha / (cfg.dim_alpha + step)
    return 1.0


# -- distributed --------------------------------------------------------------------------
def _world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class SyncBatchNorm2d(nn.BatchNorm2d):
    """Batch norm whose training statistics are reduced over all ranks (works on CPU with gloo).

    Sums and sums of squares go through the differentiable ``all_reduce`` of
    ``torch.distributed.nn``, so gradients flow across ranks as in one big batch.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.training and dist.is_initialized() and dist.get_world_size() > 1):
            return super().forward(x)
        from torch.distributed.nn.functional import all_reduce

        c = x.shape[1]
        xf = x if x.dtype == torch.float64 else x.float()
        # Two passes (mean, then centred squares) as accurate as one process's batch norm.
        count = xf.new_tensor([xf.numel() / c])
        tot = all_reduce(torch.cat([xf.sum((0, 2, 3)), count]))
        n = tot[-1]
        mean = tot[:c] / n
        var = all_reduce(((xf - mean[None, :, None, None]) ** 2).sum((0, 2, 3))) / n
        with torch.no_grad():
            self.num_batches_tracked.add_(1)
            m = self.momentum
            self.running_mean.mul_(1 - m).add_(mean.detach(), alpha=m)
            self.running_var.mul_(1 - m).add_(var.detach() * (n / (n - 1)), alpha=m)
        y = (xf - mean[None, :, None, None]) * torch.rsqrt(var + self.eps)[None, :, None, None]
        return (y * self.weight[None, :, None, None] + self.bias[None, :, None, None]).to(x.dtype)


def _sync_batchnorm(module: nn.Module) -> nn.Module:
    for name, child in module.named_children():
        if type(child) is nn.BatchNorm2d:
            new = SyncBatchNorm2d(child.num_features, child.eps, child.momentum, child.affine,
                                  child.track_running_stats)
            new.load_state_dict(child.state_dict())
            setattr(module, name, new)
        else:
            _sync_batchnorm(child)
    return module


# -- model and optimiser ----------------------------------------------------------------------
def build_model(cfg: Config, num_classes: int, in_chans: int) -> nn.Module:
    import timm

    import quadnn.models  # noqa: F401  (registers quadnn's models)

    if not timm.is_model(cfg.model):
        ours = sorted(n for n in timm.list_models() if
                      timm.models.model_entrypoint(n).__module__.startswith("quadnn."))
        raise ValueError(f"unknown model {cfg.model!r}; quadnn's models: {', '.join(ours)} "
                         "(or any timm model name)")
    kwargs = dict(cfg.model_kwargs)
    if cfg.width != 1.0:
        kwargs["width"] = cfg.width
    if cfg.rezero:
        kwargs["rezero"] = True
    return timm.create_model(cfg.model, num_classes=num_classes, in_chans=in_chans, **kwargs)


def _transfer(cfg: Config, model: nn.Module, num_classes: int, in_chans: int) -> None:
    ckpt = torch.load(cfg.transfer_from, map_location="cpu", weights_only=True)
    src_cfg = Config(**{k: v for k, v in ckpt["config"].items() if k in {f.name for f in dataclasses.fields(Config)}})
    conventional = build_model(src_cfg, num_classes, in_chans)
    conventional.load_state_dict(ckpt["model"])
    relinear.transfer_weights_(conventional, model)


def build_optimizer(cfg: Config, model: nn.Module):
    lr_g = cfg.lr_g if cfg.relinear == "sg" else cfg.lr
    lr_b = (cfg.lr_b if cfg.lr_b is not None else cfg.lr_g) if cfg.relinear == "sg" else cfg.lr
    groups = relinear.param_groups(model, cfg.lr, lr_g, lr_b, cfg.weight_decay)
    for g in groups:
        g["initial_lr"] = g["lr"]
    if cfg.optimizer == "sgd":
        opt = torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum)
    elif cfg.optimizer == "adam":
        opt = torch.optim.Adam(groups, lr=cfg.lr, betas=(cfg.momentum, 0.999))
    else:
        opt = torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.momentum, 0.999))
    shrink = None
    if cfg.relinear.startswith("sw-"):
        alpha_b = cfg.alpha_b if cfg.alpha_b is not None else cfg.alpha_g
        shrink = relinear.Shrink(model, cfg.relinear[3:], cfg.alpha_g, alpha_b)
    return opt, relinear.ReferenceWeightDecay(opt), shrink


# -- the run ----------------------------------------------------------------------------------
def _save(obj: Any, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def _finite_or_none(v):
    return v if (isinstance(v, (int, float)) and math.isfinite(v)) else None


@torch.no_grad()
def evaluate(model: nn.Module, data: qdata.Data, device, amp: bool, batch_size: int = 1000):
    model.eval()
    loss, correct, n = 0.0, 0, 0
    for x, y in qdata.batches(data, batch_size, None, train=False):
        x, y = x.to(device), y.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            out = model(x)
        loss += F.cross_entropy(out.float(), y, reduction="sum").item()
        correct += (out.argmax(1) == y).sum().item()
        n += len(y)
    return loss / n, 100.0 * correct / n


def run(config: Config | dict | None = None, **overrides) -> dict:
    """Train ``config`` (a :class:`Config`, a dict of its fields, plus ``overrides``); see the module doc."""
    if config is None:
        config = Config()
    if isinstance(config, dict):
        config = Config(**config)
    cfg = dataclasses.replace(config, **overrides) if overrides else config
    out = run_dir(cfg)
    done = out / "result.json"
    if done.exists():
        return json.loads(done.read_text())

    rank, world = _world()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    device = torch.device(cfg.device if cfg.device != "cuda" or world == 1 else f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}")
    data = qdata.load(cfg.dataset, cfg.data_dir, cfg.download and rank == 0, cfg.split_seed)
    if cfg.train_limit:
        data.x_train, data.y_train = data.x_train[:cfg.train_limit], data.y_train[:cfg.train_limit]

    torch.manual_seed(cfg.seed)
    model = build_model(cfg, data.num_classes, data.in_chans)
    if cfg.transfer_from:
        _transfer(cfg, model, data.num_classes, data.in_chans)
    if world > 1:
        model = _sync_batchnorm(model)
    model.to(device)
    params = sum(p.numel() for p in model.parameters())
    opt, ref_decay, shrink = build_optimizer(cfg, model)

    history: list[dict] = []
    start_epoch, step = 0, 0
    ckpt_path = out / "last.pt"
    if ckpt_path.exists():
        ck = torch.load(ckpt_path, map_location="cpu", weights_only=True)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        start_epoch, step, history = ck["epoch"], ck["step"], ck["history"]
        torch.set_rng_state(ck["rng"])
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / "config.json", json.dumps(asdict(cfg), indent=1))

    net: nn.Module = model
    if world > 1:
        net = nn.parallel.DistributedDataParallel(model, broadcast_buffers=False)
    if cfg.compile:
        net = torch.compile(net)

    limit = cfg.diverge_factor * math.log(data.num_classes)
    stages, status, reason = stage_ends(cfg), "finished", None
    stage_ckpts = {str(i + 1): str(out / f"stage{i + 1}.pt") for i, e in enumerate(stages) if e <= start_epoch}
    bar = None
    if cfg.progress and rank == 0:
        from tqdm.auto import tqdm

        bar = tqdm(total=cfg.epochs, initial=start_epoch, desc=f"{cfg.model} {out.name}", leave=False)

    for epoch in range(start_epoch, cfg.epochs):
        net.train()
        factor = lr_factor(cfg, epoch, step)
        lrs = {g["name"]: g["initial_lr"] * factor for g in opt.param_groups}
        gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + epoch)
        loss_sum = torch.zeros(3, dtype=torch.float64)  # summed loss, correct, count (this rank)
        t0 = time.perf_counter()
        for xg, yg in qdata.batches(data, cfg.batch_size, gen, train=True):
            for g in opt.param_groups:
                g["lr"] = g["initial_lr"] * lr_factor(cfg, epoch, step)
            x, y = xg.tensor_split(world)[rank].to(device), yg.tensor_split(world)[rank].to(device)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.amp):
                logits = net(x)
            loss = F.cross_entropy(logits.float(), y, reduction="sum")
            # sum / global batch * world: DDP's mean over ranks then equals the global-batch mean.
            opt.zero_grad(set_to_none=True)
            (loss * (world / len(yg))).backward()
            opt.step()
            ref_decay.step()
            if shrink is not None:
                shrink.step()
            step += 1
            loss_sum += torch.tensor([loss.item(), (logits.argmax(1) == y).sum().item(), len(y)], dtype=torch.float64)
            if world == 1 and not math.isfinite(loss.item()):
                break
        train_time = time.perf_counter() - t0
        if world > 1:
            dist.all_reduce(loss_sum)
        train_loss = (loss_sum[0] / loss_sum[2]).item()
        finite_params = all(torch.isfinite(p).all() for p in model.parameters())
        rec = dict(epoch=epoch + 1, train_loss=_finite_or_none(train_loss),
                   train_acc=(100 * loss_sum[1] / loss_sum[2]).item(), lr=lrs, epoch_time=train_time)
        if not math.isfinite(train_loss) or not finite_params:
            status, reason = "diverged", "non-finite loss or parameters"
        elif train_loss > limit:
            status, reason = "diverged", f"mean training loss {train_loss:.3g} > {cfg.diverge_factor:g} ln({data.num_classes}) = {limit:.3g}"
        if status == "finished":
            t1 = time.perf_counter()
            test_loss, test_acc = evaluate(model, data, device, cfg.amp)
            rec.update(test_loss=_finite_or_none(test_loss), test_acc=test_acc, test_error=100.0 - test_acc,
                       eval_time=time.perf_counter() - t1)
        history.append(rec)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{train_loss:.3f}", err=f"{rec.get('test_error', float('nan')):.2f}")
        if status == "diverged":
            break
        if rank == 0:
            if epoch + 1 in stages:
                k = str(stages.index(epoch + 1) + 1)
                _save(dict(model=model.state_dict(), config=asdict(cfg), epoch=epoch + 1), out / f"stage{k}.pt")
                stage_ckpts[k] = str(out / f"stage{k}.pt")
            _save(dict(model=model.state_dict(), optimizer=opt.state_dict(), epoch=epoch + 1, step=step,
                       history=history, rng=torch.get_rng_state()), ckpt_path)
            atomic_write_text(out / "metrics.json", json.dumps(history, indent=1))
        if world > 1:
            dist.barrier()
    if bar is not None:
        bar.close()

    last = history[-1] if history else {}
    result = dict(
        status=status, diverged_reason=reason, config=asdict(cfg), run_dir=str(out), world_size=world,
        params=params, epochs_run=len(history),
        test_error=last.get("test_error") if status == "finished" else None,
        best_test_error=min((h["test_error"] for h in history if "test_error" in h), default=None),
        epoch_time=sum(h["epoch_time"] for h in history) / max(1, len(history)),
        stage_checkpoints=stage_ckpts, history=history,
    )
    if rank == 0:
        atomic_write_text(out / "metrics.json", json.dumps(history, indent=1))
        atomic_write_text(done, json.dumps(result, indent=1))
        ckpt_path.unlink(missing_ok=True)
    if world > 1:
        dist.barrier()
    return json.loads(done.read_text())  # the same JSON round-trip as a cache hit


# -- command line -------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    d = Config()
    p = argparse.ArgumentParser(
        prog="quadnn-train",
        description="Train a (quadratic) network with ReLinear. Results go to OUT/<config hash>/; a "
                    "finished configuration is not re-run and an interrupted one resumes. "
                    "Use `torchrun --nproc_per_node=N -m quadnn.train ...` for DDP.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    a = p.add_argument
    a("--profile", choices=PROFILES, default=None,
      help="fill defaults for a profile (smoke/cpu: digits with few epochs; full: CIFAR-10, 200 epochs); "
           "explicit flags win")
    a("--model", default=None, help=f"timm model name, e.g. cifar_qresnet20, cifar_resnet56 (default {d.model})")
    a("--width", type=float, default=None, help=f"channel width multiplier of cifar_* models (default {d.width})")
    a("--model-kwargs", type=json.loads, default=None, help="extra model keyword arguments as JSON, e.g. '{\"drop_rate\": 0.1}'")
    a("--dataset", choices=qdata.DATASETS, default=None, help=f"data set (default {d.dataset})")
    a("--data-dir", default=None, help=f"where the CIFAR folders live (default {d.data_dir})")
    a("--download", action="store_true", default=None, help="download CIFAR with torchvision if missing")
    a("--train-limit", type=int, default=None, help="train on the first N images only (0: all; for quick checks)")
    a("--epochs", type=int, default=None, help=f"training epochs (default {d.epochs})")
    a("--batch-size", type=int, default=None, help=f"global batch size (default {d.batch_size})")
    a("--optimizer", choices=OPTIMIZERS, default=None, help=f"optimiser (default {d.optimizer})")
    a("--lr", type=float, default=None, help=f"learning rate gamma_r of the linear parameters (default {d.lr})")
    a("--momentum", type=float, default=None, help=f"SGD momentum / Adam beta1 (default {d.momentum})")
    a("--weight-decay", type=float, default=None, help=f"weight decay (default {d.weight_decay})")
    a("--relinear", choices=RELINEAR, default=None, help=f"ReLinear variant (default {d.relinear})")
    a("--lr-g", type=float, default=None, help=f"learning rate gamma_g of the gate terms, ReLinear-sg (default {d.lr_g})")
    a("--lr-b", type=float, default=None, help="learning rate gamma_b of the power terms, ReLinear-sg (default: --lr-g)")
    a("--alpha-g", type=float, default=None, help=f"shrink factor of the gate terms: alpha (sw-l1) or beta (sw-l2) (default {d.alpha_g})")
    a("--alpha-b", type=float, default=None, help="shrink factor of the power terms (default: --alpha-g)")
    a("--schedule", choices=SCHEDULES, default=None, help=f"learning-rate schedule (default {d.schedule})")
    a("--milestones", type=float, nargs="+", default=None, help=f"multistep milestones as fractions of --epochs (default {' '.join(map(str, d.milestones))})")
    a("--lr-decay", type=float, default=None, help=f"multistep decay factor (default {d.lr_decay})")
    a("--dim-alpha", type=float, default=None, help=f"diminishing schedule: lr_t = lr*a/(a+t) with this a (default {d.dim_alpha})")
    a("--transfer-from", metavar="CKPT", default=None, help="start from a conventional run's stage checkpoint (weight transfer)")
    a("--rezero", action="store_true", default=None, help="ReZero residual blocks (cifar_* models)")
    a("--seed", type=int, default=None, help=f"random seed (default {d.seed})")
    a("--out", metavar="DIR", default=None, help=f"results directory (default {d.out})")
    a("--device", default=None, help=f"one of {DEVICES} or cuda:N (default {d.device})")
    a("--amp", action="store_true", default=None, help="bf16 autocast")
    a("--compile", action="store_true", default=None, help="torch.compile the model")
    a("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    a("--no-progress", dest="progress", action="store_false", default=None, help="no tqdm progress bar")
    return p


def config_from_args(argv=None) -> Config:
    p = _parser()
    ns = vars(p.parse_args(argv))
    fields = PROFILE_DEFAULTS[ns.pop("profile")] if ns.get("profile") else {}
    fields = dict(fields)
    for k, v in ns.items():
        if v is not None:
            fields[k] = v
    if "milestones" in fields:
        fields["milestones"] = tuple(fields["milestones"])
    try:
        return Config(**fields)
    except ValueError as e:
        p.error(str(e))


def main(argv=None) -> int:
    cfg = config_from_args(argv)
    ddp = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if ddp:
        dist.init_process_group("nccl" if cfg.device.startswith("cuda") else "gloo")
    try:
        try:
            res = run(cfg)
        except (ValueError, FileNotFoundError) as e:
            print(f"quadnn-train: error: {e}", file=sys.stderr)
            return 2
        if _world()[0] == 0:
            err = res["test_error"]
            print(json.dumps(dict(status=res["status"], test_error=err, best_test_error=res["best_test_error"],
                                  epochs_run=res["epochs_run"], epoch_time=round(res["epoch_time"], 3),
                                  params=res["params"], run_dir=res["run_dir"])))
        return 0
    finally:
        if ddp:
            dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
