"""ImageNet classification with (quadratic) ResNet-18/34 and plain-18/34: data, training, 10-crop evaluation.

The paper's ImageNet protocol (its Sec. V, "ImageNet"): the models and schedule of He et al. 2016,
batch 256, SGD with lr 0.1, momentum 0.9, weight decay 1e-4, ReLinear-sg with 1e-5 for the
quadratic terms, and the standard 10-crop validation. Its labels "ResNet20/32" and "plain-20/32"
stand for the 18- and 34-layer ImageNet models (:mod:`quadnn.models.imagenet_resnet`).

Data: an ImageFolder tree ``<data_dir>/{train,val}/<class>/<image>`` read with torchvision.

- training: ``RandomResizedCrop(crop, scale)`` + horizontal flip + ImageNet mean/std normalisation;
- evaluation: ``Resize(resize)`` (shorter side) + ``TenCrop(crop)`` (four corners, centre, and their
  mirror images); the ten logits of an image are averaged, then top-1/top-5 errors are counted.

Offline stand-in: :func:`write_digits_folder` renders scikit-learn's 8x8 digits as ``size`` x
``size`` PNG files in the same layout, so the same loader, augmentation and 10-crop path run end
to end; the profile table scales the 256/224 sizes down (e.g. 32/28).

Training runs in one small loop here (:func:`run`) rather than in :mod:`quadnn.train`, whose
data sets live in memory as tensors; what it reuses is the library: models from timm's registry,
ReLinear-sg groups (:func:`quadnn.relinear.param_groups` + :class:`~quadnn.relinear.ReferenceWeightDecay`),
and the config-hash result layout of :mod:`quadnn.cache`.

Results: ``run(ImageNetConfig(...))`` returns a dict (``status``, ``top1``, ``top5`` in %
errors, ``history``, ``params``, ``epoch_time``, ...) and, with ``out`` set, stores it as
``out/<config hash>/result.json`` (a finished configuration is not re-run; ``last.pt`` resumes
an interrupted one). Multi-GPU / multi-node: ``torchrun ... -m quadnn.imagenet ...`` (DDP; the
global ``batch_size`` is split over the ranks, validation images are split and counts summed).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from quadnn import relinear
from .cache import atomic_write_text, config_hash
from .profiles import select

__all__ = ["PROTOCOLS", "PAPER", "IMAGENET_MEAN", "IMAGENET_STD", "ImageNetConfig", "protocol", "configs",
           "write_digits_folder", "train_transform", "eval_transform", "datasets", "evaluate", "run", "main"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

# The ten networks of the paper's ImageNet table, in its row order (plain, ResNet, Parabolic, Poly, Q).
MODELS = {d: [f"imagenet_plain{d}", f"imagenet_resnet{d}", f"imagenet_parabolic_resnet{d}",
              f"imagenet_poly_resnet{d}", f"imagenet_qresnet{d}"] for d in (18, 34)}

# The paper's table (top-1 error, %, 10-crop; it reports no top-5). Keys are our model names.
# plain/ResNet rows are He et al.'s Table 2 values (option-A shortcuts); the rest are the paper's own runs.
PAPER = {
    "imagenet_plain18": 27.94, "imagenet_plain34": 28.54,
    "imagenet_resnet18": 27.88, "imagenet_resnet34": 25.03,
    "imagenet_parabolic_resnet18": 28.22, "imagenet_parabolic_resnet34": 24.64,
    "imagenet_poly_resnet18": 27.82, "imagenet_poly_resnet34": 24.63,
    "imagenet_qresnet18": 27.67, "imagenet_qresnet34": 24.01,
}
# What each of our names is called in the paper's table.
PAPER_LABEL = {f"imagenet_{p}{d}": f"{q}{l}" for d, l in ((18, 20), (34, 32)) for p, q in
               (("plain", "plain-"), ("resnet", "ResNet"), ("parabolic_resnet", "Parabolic-ResNet"),
                ("poly_resnet", "Poly-ResNet"), ("qresnet", "QResNet"))}

# One protocol per profile. full = the paper's: He et al.'s models with option-A shortcuts (the
# setting of the numbers it quotes), batch 256, lr 0.1 / 0.9 / 1e-4, ReLinear-sg 1e-5, 10-crop at
# 256/224. The paper gives no epoch count; we use the common 90 epochs with /10 at 30 and 60.
# cpu/smoke: digits rendered as 24x24 PNGs (crop 21 inside 24, the 224-in-256 ratio), narrow
# networks (width 1/8: 8..64 channels), batch 64 with lr scaled linearly (0.1 * 64/256).
# RandomResizedCrop keeps at least 35% of a digit (ImageNet's 8% would often cut the digit away).
PROTOCOLS = {
    "smoke": dict(data="digits", image_size=24, resize=24, crop=21, scale=(0.35, 1.0), width=0.125,
                  shortcut="A", models=["imagenet_plain18", "imagenet_resnet18", "imagenet_qresnet18"],
                  seeds=[0], epochs=1, batch_size=64, lr=0.025, momentum=0.9, weight_decay=1e-4,
                  relinear="sg", lr_g=1e-5, lr_b=1e-5, milestones=(0.5, 0.75), max_per_class=20),
    "cpu": dict(data="digits", image_size=24, resize=24, crop=21, scale=(0.35, 1.0), width=0.125,
                shortcut="A", models=MODELS[18] + MODELS[34], seeds=[0], epochs=5, batch_size=64,
                lr=0.025, momentum=0.9, weight_decay=1e-4, relinear="sg", lr_g=1e-5, lr_b=1e-5,
                milestones=(0.5, 0.75), max_per_class=None),
    "full": dict(data="imagenet", image_size=None, resize=256, crop=224, scale=(0.08, 1.0), width=1.0,
                 shortcut="A", models=MODELS[18] + MODELS[34], seeds=[0], epochs=90, batch_size=256,
                 lr=0.1, momentum=0.9, weight_decay=1e-4, relinear="sg", lr_g=1e-5, lr_b=1e-5,
                 milestones=(1 / 3, 2 / 3), max_per_class=None),
}


def protocol(profile: str) -> dict:
    """A copy of the protocol of ``profile``."""
    return dict(select(PROTOCOLS, profile))


# -- data ------------------------------------------------------------------------------------------
def write_digits_folder(root: str | Path, size: int = 32, split_seed: int = 0, test_size: float = 0.2,
                        max_per_class: int | None = None) -> Path:
    """Render scikit-learn's digits as ``size`` x ``size`` grey PNGs in ImageFolder layout under ``root``.

    ``root/train/<digit>/<index>.png`` and ``root/val/<digit>/<index>.png`` (a stratified split
    fixed by ``split_seed``; ``max_per_class`` keeps only the first images of each class per
    split). The 8x8 images (values 0..16) are scaled to 0..255 and enlarged bicubically. A
    ``manifest.json`` records the settings; a tree whose manifest matches is left as it is.
    Returns ``root``.
    """
    from PIL import Image
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    root = Path(root)
    spec = dict(source="sklearn.datasets.load_digits", size=int(size), split_seed=int(split_seed),
                test_size=float(test_size), max_per_class=max_per_class)
    manifest = root / "manifest.json"
    if manifest.exists():
        if json.loads(manifest.read_text()).get("spec") == spec:
            return root
        import shutil  # a tree we wrote with other settings: replace it, leaving no stale images

        for split in ("train", "val"):
            shutil.rmtree(root / split, ignore_errors=True)
        manifest.unlink()
    d = load_digits()
    idx = np.arange(len(d.target))
    tr, te = train_test_split(idx, test_size=test_size, stratify=d.target, random_state=split_seed)
    counts = {}
    for split, ids in (("train", tr), ("val", te)):
        kept = {c: 0 for c in range(10)}
        for i in sorted(ids):
            c = int(d.target[i])
            if max_per_class is not None and kept[c] >= max_per_class:
                continue
            kept[c] += 1
            img = Image.fromarray((d.images[i] * (255.0 / 16.0)).round().astype(np.uint8), mode="L")
            img = img.resize((size, size), Image.BICUBIC)
            folder = root / split / str(c)
            folder.mkdir(parents=True, exist_ok=True)
            img.save(folder / f"{i:04d}.png")
        counts[split] = sum(kept.values())
    atomic_write_text(manifest, json.dumps(dict(spec=spec, counts=counts), indent=1))
    return root


def _normalise():
    from torchvision import transforms as T

    return T.Compose([T.ToTensor(), T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])


class StackCrops:
    """Turn the tuple of PIL crops from ``TenCrop`` into one normalised tensor (n_crops, C, H, W)."""

    def __init__(self):
        self.normalise = _normalise()

    def __call__(self, crops):
        return torch.stack([self.normalise(c) for c in crops])

    def __repr__(self) -> str:
        return "StackCrops(ToTensor, Normalize(ImageNet mean/std))"


def train_transform(crop: int = 224, scale=(0.08, 1.0)):
    """RandomResizedCrop + horizontal flip + normalise (images converted to RGB by ImageFolder)."""
    from torchvision import transforms as T

    return T.Compose([T.RandomResizedCrop(crop, scale=tuple(scale)), T.RandomHorizontalFlip(), _normalise()])


def eval_transform(resize: int = 256, crop: int = 224):
    """Resize the shorter side to ``resize``, then ten ``crop`` crops -> tensor (10, C, crop, crop)."""
    from torchvision import transforms as T

    return T.Compose([T.Resize(resize), T.TenCrop(crop), StackCrops()])


def datasets(data_dir: str | Path, crop: int = 224, resize: int = 256, scale=(0.08, 1.0)):
    """``(train, val)`` torchvision ImageFolders under ``data_dir`` with the transforms above."""
    from torchvision.datasets import ImageFolder

    root = Path(data_dir)
    for split in ("train", "val"):
        if not (root / split).is_dir():
            raise FileNotFoundError(
                f"no ImageFolder tree at {root / split}/: expected {root}/{{train,val}}/<class>/<image> "
                "(for ImageNet, the validation images sorted into class folders as for torchvision's "
                "ImageFolder). Offline, use the digits stand-in: --data digits.")
    train = ImageFolder(str(root / "train"), train_transform(crop, scale))
    val = ImageFolder(str(root / "val"), eval_transform(resize, crop))
    if train.classes != val.classes:
        raise ValueError(f"train and val class folders differ under {root}")
    return train, val


# -- configuration ---------------------------------------------------------------------------------
OPERATIONAL = ("out", "data_dir", "workers", "progress", "threads", "eval_batch_size")


@dataclass
class ImageNetConfig:
    """One ImageNet run. Defaults: the paper's protocol for QResNet-34 (its "QResNet32")."""

    model: str = "imagenet_qresnet34"
    width: float = 1.0
    shortcut: str = "A"                    # resnet variants only: "A" (He et al. Table 2) or "B"
    data: str = "imagenet"                 # "imagenet" (ImageFolder at data_dir) | "digits" (stand-in)
    image_size: int | None = None          # digits stand-in: PNG size
    max_per_class: int | None = None       # digits stand-in: images per class and split
    resize: int = 256
    crop: int = 224
    scale: tuple = (0.08, 1.0)
    epochs: int = 90
    batch_size: int = 256                  # global (split over DDP ranks)
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 1e-4
    relinear: str = "sg"                   # "sg" (groups at lr / lr_g / lr_b) or "none" (one lr)
    lr_g: float = 1e-5
    lr_b: float = 1e-5
    milestones: tuple = (1 / 3, 2 / 3)     # fractions of epochs; lr /10 at each
    lr_decay: float = 0.1
    seed: int = 0
    device: str = "cpu"
    amp: bool = False                      # bf16 autocast
    sync_bn: bool = False                  # CUDA DDP only: torch.nn.SyncBatchNorm
    # operational (not hashed)
    out: str | None = None
    data_dir: str = "data/imagenet"
    workers: int = 0
    eval_batch_size: int = 64
    progress: bool = False
    threads: int | None = None

    def __post_init__(self):
        self.scale = tuple(float(s) for s in self.scale)
        self.milestones = tuple(float(m) for m in self.milestones)
        if self.data not in ("imagenet", "digits"):
            raise ValueError(f"data must be 'imagenet' or 'digits', got {self.data!r}")
        if self.relinear not in ("sg", "none"):
            raise ValueError(f"relinear must be 'sg' or 'none', got {self.relinear!r}")
        if self.data == "digits" and not self.image_size:
            raise ValueError("data='digits' needs image_size (the PNG size of the stand-in)")
        if not (0 < self.scale[0] <= self.scale[1] <= 1):
            raise ValueError(f"scale must be 0 < lo <= hi <= 1, got {self.scale}")
        if self.crop > self.resize:
            raise ValueError(f"crop ({self.crop}) must not exceed resize ({self.resize})")
        for name in ("epochs", "batch_size"):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) >= 1):
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)!r}")

    def key(self) -> dict:
        d = asdict(self)
        for k in OPERATIONAL:
            d.pop(k)
        d["scale"], d["milestones"] = list(d["scale"]), list(d["milestones"])
        return d


def folder_name(P: dict) -> str:
    """The folder (under ``data/``) of a protocol's data: ``imagenet`` or the generated digits tree."""
    if P["data"] == "imagenet":
        return "imagenet"
    return f"digits-imagefolder-{P['image_size']}" + (f"-{P['max_per_class']}" if P.get("max_per_class") else "")


def configs(profile: str, data_dir: str | Path = "data", out: str | None = None) -> list[ImageNetConfig]:
    """The runs of a profile: every model x seed, ``data_dir`` the folder holding ``imagenet/``."""
    P = protocol(profile)
    fields = {f.name for f in dataclasses.fields(ImageNetConfig)}
    common = {k: v for k, v in P.items() if k in fields}
    root = Path(data_dir) / folder_name(P)
    return [ImageNetConfig(model=m, seed=s, data_dir=str(root), out=out, **common)
            for m in P["models"] for s in P["seeds"]]


# -- model, evaluation, training -----------------------------------------------------------------
def build_model(cfg: ImageNetConfig, num_classes: int) -> nn.Module:
    import timm

    import quadnn.models  # noqa: F401  (registers the imagenet_* models)
    from quadnn.models.imagenet_resnet import VARIANTS

    kwargs = dict(num_classes=num_classes, width=cfg.width)
    if cfg.model in VARIANTS and VARIANTS[cfg.model][2] != "none":
        kwargs["shortcut"] = cfg.shortcut
    return timm.create_model(cfg.model, **kwargs)


def _world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


@torch.no_grad()
def evaluate(model: nn.Module, loader, device, amp: bool = False) -> dict:
    """10-crop evaluation: batches (B, n_crops, C, H, W); logits averaged over crops.

    Returns summed ``loss`` (of the averaged logits), ``top1``/``top5`` correct counts and ``n``
    for this process (callers sum them over DDP ranks).
    """
    model.eval()
    tot = torch.zeros(4, dtype=torch.float64)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        b, n_crops = x.shape[:2]
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            logits = model(x.flatten(0, 1))
        logits = logits.float().view(b, n_crops, -1).mean(1)
        k = min(5, logits.shape[1])
        top = logits.topk(k, 1).indices
        hit = top == y[:, None]
        tot += torch.tensor([F.cross_entropy(logits, y, reduction="sum").item(), hit[:, 0].sum().item(),
                             hit.any(1).sum().item(), b], dtype=torch.float64)
    return dict(loss=tot[0].item(), top1=tot[1].item(), top5=tot[2].item(), n=int(tot[3].item()))


def _save(obj, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def run(config: ImageNetConfig | dict | None = None, **overrides) -> dict:
    """Train and 10-crop-evaluate one configuration; see the module docstring for the result."""
    cfg = config if isinstance(config, ImageNetConfig) else ImageNetConfig(**(config or {}))
    if overrides:
        cfg = dataclasses.replace(cfg, **overrides)
    out = Path(cfg.out) / config_hash(cfg.key()) if cfg.out else None
    if out is not None and (out / "result.json").exists():
        return json.loads((out / "result.json").read_text())

    rank, world = _world()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    if cfg.device == "cuda":
        device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}")
        torch.cuda.set_device(device)
    else:
        device = torch.device(cfg.device)
    if cfg.data == "digits" and rank == 0:
        write_digits_folder(cfg.data_dir, cfg.image_size, max_per_class=cfg.max_per_class)
    if world > 1:
        dist.barrier()
    train_set, val_set = datasets(cfg.data_dir, cfg.crop, cfg.resize, cfg.scale)
    num_classes = len(train_set.classes)

    torch.manual_seed(cfg.seed)
    model = build_model(cfg, num_classes)
    params = sum(p.numel() for p in model.parameters())
    if world > 1 and cfg.sync_bn:
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    model.to(device)
    groups = relinear.param_groups(model, cfg.lr, cfg.lr_g if cfg.relinear == "sg" else cfg.lr,
                                   cfg.lr_b if cfg.relinear == "sg" else cfg.lr, cfg.weight_decay)
    for g in groups:
        g["initial_lr"] = g["lr"]
    opt = torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum)
    ref_decay = relinear.ReferenceWeightDecay(opt)

    history, start = [], 0
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        if (out / "last.pt").exists():
            ck = torch.load(out / "last.pt", map_location="cpu", weights_only=True)
            model.load_state_dict(ck["model"])
            opt.load_state_dict(ck["optimizer"])
            start, history = ck["epoch"], ck["history"]
        if rank == 0:
            atomic_write_text(out / "config.json", json.dumps(asdict(cfg), indent=1))
    net = nn.parallel.DistributedDataParallel(model) if world > 1 else model

    from torch.utils.data import DataLoader, DistributedSampler, Subset

    sampler = DistributedSampler(train_set, num_replicas=world, rank=rank, shuffle=True, seed=cfg.seed)
    per_rank = max(1, cfg.batch_size // world)
    val_loader = DataLoader(Subset(val_set, range(rank, len(val_set), world)), cfg.eval_batch_size,
                            num_workers=cfg.workers)
    milestones = sorted({max(1, round(m * cfg.epochs)) for m in cfg.milestones})
    status, reason = "finished", None
    for epoch in range(start, cfg.epochs):
        factor = cfg.lr_decay ** sum(epoch >= m for m in milestones)
        for g in opt.param_groups:
            g["lr"] = g["initial_lr"] * factor
        sampler.set_epoch(epoch)
        gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + epoch * world + rank)
        torch.manual_seed(cfg.seed * 1_000_003 + epoch * world + rank)  # augmentation when workers=0
        loader = DataLoader(train_set, per_rank, sampler=sampler, num_workers=cfg.workers,
                            generator=gen, drop_last=False, persistent_workers=False)
        net.train()
        tot = torch.zeros(3, dtype=torch.float64)
        t0 = time.perf_counter()
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.amp):
                logits = net(x)
            loss = F.cross_entropy(logits.float(), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            ref_decay.step()
            tot += torch.tensor([loss.item() * len(y), (logits.argmax(1) == y).sum().item(), len(y)],
                                dtype=torch.float64)
            if world == 1 and not math.isfinite(loss.item()):
                break
        if world > 1:
            dist.all_reduce(tot)
        train_loss = (tot[0] / tot[2]).item()
        rec = dict(epoch=epoch + 1, train_loss=train_loss if math.isfinite(train_loss) else None,
                   train_error=100.0 - 100.0 * (tot[1] / tot[2]).item(),
                   lr={g["name"]: g["lr"] for g in opt.param_groups}, epoch_time=time.perf_counter() - t0)
        history.append(rec)
        if cfg.progress and rank == 0:
            print(f"{cfg.model} epoch {epoch + 1}/{cfg.epochs} loss {train_loss:.4f} "
                  f"train err {rec['train_error']:.2f}% ({rec['epoch_time']:.1f}s)", flush=True)
        if not math.isfinite(train_loss) or not all(torch.isfinite(p).all() for p in model.parameters()):
            status, reason = "diverged", "non-finite loss or parameters"
            break
        if out is not None and rank == 0:
            _save(dict(model=model.state_dict(), optimizer=opt.state_dict(), epoch=epoch + 1, history=history),
                  out / "last.pt")

    result = dict(status=status, diverged_reason=reason, config=asdict(cfg), params=params, world_size=world,
                  num_classes=num_classes, train_images=len(train_set), val_images=len(val_set),
                  epochs_run=len(history), history=history,
                  epoch_time=sum(h["epoch_time"] for h in history) / max(1, len(history)))
    if status == "finished":
        t1 = time.perf_counter()
        ev = evaluate(model, val_loader, device, cfg.amp)
        tot = torch.tensor([ev["loss"], ev["top1"], ev["top5"], ev["n"]], dtype=torch.float64)
        if world > 1:
            dist.all_reduce(tot)
        n = tot[3].item()
        result.update(val_loss=tot[0].item() / n, top1=100.0 - 100.0 * tot[1].item() / n,
                      top5=100.0 - 100.0 * tot[2].item() / n, eval_time=time.perf_counter() - t1,
                      n_crops=10)
    else:
        result.update(val_loss=None, top1=None, top5=None)
    if out is not None and rank == 0:
        atomic_write_text(out / "result.json", json.dumps(result, indent=1))
        (out / "last.pt").unlink(missing_ok=True)
    return result


# -- command line --------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m quadnn.imagenet",
        description="Train and 10-crop-evaluate an ImageNet (quadratic) ResNet/plain net. "
                    "`torchrun --nproc_per_node=G [--nnodes=N ...] -m quadnn.imagenet ...` for DDP. "
                    "Flags override the --profile protocol (default: full, the paper's).")
    p.add_argument("--profile", choices=tuple(PROTOCOLS), default="full")
    d = ImageNetConfig()
    for f in dataclasses.fields(ImageNetConfig):
        flag = "--" + f.name.replace("_", "-")
        default = getattr(d, f.name)
        if isinstance(default, bool):
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=None)
        elif isinstance(default, tuple):
            p.add_argument(flag, type=float, nargs="+", default=None, help=f"(default {default})")
        elif f.name in ("image_size", "max_per_class", "threads"):
            p.add_argument(flag, type=int, default=None)
        elif f.name == "out":
            p.add_argument(flag, default=None, help="results directory (OUT/<config hash>/)")
        else:
            p.add_argument(flag, type=type(default), default=None, help=f"(default {default})")
    return p


def main(argv=None) -> int:
    ns = vars(_parser().parse_args(argv))
    P = protocol(ns.pop("profile"))
    fields = {f.name for f in dataclasses.fields(ImageNetConfig)}
    kw = {k: v for k, v in P.items() if k in fields}
    kw.update({k: v for k, v in ns.items() if v is not None})
    if ns.get("data_dir") is None:
        kw["data_dir"] = str(Path("data") / folder_name(kw))
    cfg = ImageNetConfig(**kw)
    ddp = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if ddp:
        dist.init_process_group("nccl" if cfg.device == "cuda" else "gloo")
    try:
        res = run(cfg)
        if _world()[0] == 0:
            print(json.dumps({k: res.get(k) for k in ("status", "top1", "top5", "params", "epochs_run",
                                                       "epoch_time", "world_size")}))
        return 0
    finally:
        if ddp:
            dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
