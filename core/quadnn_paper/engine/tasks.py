"""The tasks the engine trains: what the data is, how a model is built, what is evaluated.

The training loop (:mod:`.loop`) is the same for all of them; a task supplies

- ``num_classes`` / ``in_chans`` and :meth:`build_model`;
- :meth:`param_groups` (ReLinear's groups, plus any the task needs);
- :meth:`train_batches` (this rank's share of each global batch, a pure function of
  (seed, epoch), so a resumed or DDP run sees the batches an uninterrupted one would);
- :meth:`loss` (summed over the batch, with a count of correct predictions if it has one);
- :meth:`evaluate` (the metrics, named in one vocabulary: errors are ``*_error`` in %);
- ``divergence_limit`` (a mean training loss above it means "did not converge"),
  ``eval_every_epoch`` and ``headline`` (the metric shown in progress bars and plans).
"""
from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from quadnn import relinear

from .config import RunConfig

__all__ = ["Task", "InMemoryClassification", "ImageFolderClassification", "DepthRegression", "make_task"]


class Task:
    num_classes: int = 0
    in_chans: int = 3
    divergence_limit: float | None = None
    eval_every_epoch: bool = True
    headline: str = "test_error"

    def __init__(self, cfg: RunConfig, rank: int = 0, world: int = 1):
        self.cfg, self.rank, self.world = cfg, rank, world

    def build_model(self, cfg: RunConfig | None = None) -> nn.Module:
        """The model of ``cfg`` (default: this task's run) for this task's data."""
        import timm

        import quadnn.models  # noqa: F401  (registers quadnn's models in timm)

        cfg = cfg or self.cfg
        if not timm.is_model(cfg.model):
            ours = sorted(n for n in timm.list_models()
                          if timm.models.model_entrypoint(n).__module__.startswith("quadnn."))
            raise ValueError(f"unknown model {cfg.model!r}; quadnn's models: {', '.join(ours)} "
                             "(or any timm model name)")
        kwargs = dict(cfg.model_kwargs)
        if cfg.width != 1.0:
            kwargs["width"] = cfg.width
        if cfg.rezero:
            kwargs["rezero"] = True
        try:
            return timm.create_model(cfg.model, num_classes=self.num_classes, in_chans=self.in_chans, **kwargs)
        except TypeError as e:
            raise ValueError(f"model {cfg.model!r} rejected model_kwargs {sorted(kwargs)}: {e}") from None

    def param_groups(self, model: nn.Module, lr_g: float, lr_b: float) -> list[dict]:
        return relinear.param_groups(model, self.cfg.lr, lr_g, lr_b, self.cfg.weight_decay,
                                     **_decay_kw(self.cfg))

    def steps_per_epoch(self) -> int:
        raise NotImplementedError

    def train_batches(self, epoch: int):
        raise NotImplementedError

    def loss(self, out, y):
        """``(summed loss, correct count or None)`` over the batch."""
        return F.cross_entropy(out.float(), y, reduction="sum"), (out.argmax(1) == y).sum()

    @torch.no_grad()
    def evaluate(self, model: nn.Module, device, amp: bool) -> dict:
        raise NotImplementedError


def _decay_kw(cfg: RunConfig) -> dict:
    # Only pass the option when it differs from the library default, so a library without the
    # option still works for the default behaviour.
    return {} if cfg.quadratic_decay == "reference" else {"quadratic_decay": cfg.quadratic_decay}


def _task_kwargs(task: str, defaults: dict, given: dict) -> dict:
    """The task's settings: its defaults updated by the run's ``task_kwargs`` (unknown keys named)."""
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ValueError(f"{task} task_kwargs {unknown} unknown; valid: {sorted(defaults)}")
    return dict(defaults, **given)


def _epoch_generator(cfg: RunConfig, epoch: int) -> torch.Generator:
    return torch.Generator().manual_seed(cfg.seed * 1_000_003 + epoch)


class InMemoryClassification(Task):
    """Images held in memory as tensors (CIFAR-10/100 from torchvision's pickles, digits), with
    batch-wise augmentation; every rank cuts its share out of the same global batch."""

    def __init__(self, cfg: RunConfig, rank: int = 0, world: int = 1):
        super().__init__(cfg, rank, world)
        from ..data import cifar as qdata

        self.qdata = qdata
        self.data = qdata.load(cfg.dataset, cfg.data_dir, download=False, split_seed=cfg.split_seed)
        if cfg.train_limit:
            self.data.x_train = self.data.x_train[:cfg.train_limit]
            self.data.y_train = self.data.y_train[:cfg.train_limit]
        self.num_classes, self.in_chans = self.data.num_classes, self.data.in_chans
        self.divergence_limit = cfg.diverge_factor * math.log(self.num_classes)

    def steps_per_epoch(self) -> int:
        return math.ceil(len(self.data.y_train) / self.cfg.batch_size)

    def train_batches(self, epoch: int):
        gen = _epoch_generator(self.cfg, epoch)
        for xg, yg in self.qdata.batches(self.data, self.cfg.batch_size, gen, train=True):
            # The summed loss over the global batch, times world / global size: DDP's mean over
            # ranks then equals one process's mean over the global batch.
            yield xg.tensor_split(self.world)[self.rank], yg.tensor_split(self.world)[self.rank], len(yg)

    @torch.no_grad()
    def evaluate(self, model, device, amp):
        model.eval()
        loss, correct, n = 0.0, 0, 0
        for x, y in self.qdata.batches(self.data, self.cfg.eval_batch_size, None, train=False):
            x, y = x.to(device), y.to(device)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
                out = model(x)
            loss += F.cross_entropy(out.float(), y, reduction="sum").item()
            correct += (out.argmax(1) == y).sum().item()
            n += len(y)
        return dict(test_loss=_finite(loss / n), test_error=100.0 - 100.0 * correct / n, test_images=n)


class ImageFolderClassification(Task):
    """Images streamed from an ImageFolder tree (ImageNet, or the digits rendered as PNGs), with
    RandomResizedCrop training and 10-crop evaluation (the ten logits of an image averaged)."""

    eval_every_epoch = False
    headline = "top1_error"

    def __init__(self, cfg: RunConfig, rank: int = 0, world: int = 1):
        super().__init__(cfg, rank, world)
        from ..sections import imagenet

        self.kw = kw = _task_kwargs("imagefolder", imagenet.DATA_DEFAULTS, cfg.task_kwargs)
        root = Path(cfg.data_dir)
        if cfg.dataset == "digits":
            if rank == 0:
                imagenet.write_digits_folder(root, kw["image_size"], split_seed=cfg.split_seed,
                                             max_per_class=kw["max_per_class"])
            if world > 1:
                import torch.distributed as dist

                dist.barrier()
        self.train_set, self.val_set = imagenet.datasets(root, kw["crop"], kw["resize"], kw["scale"])
        if cfg.train_limit:
            self.train_set = torch.utils.data.Subset(self.train_set, range(min(cfg.train_limit, len(self.train_set))))
        self.num_classes = len(self.val_set.classes)

    def steps_per_epoch(self) -> int:
        return math.ceil(len(self.train_set) / self.world / max(1, self.cfg.batch_size // self.world))

    def train_batches(self, epoch: int):
        from torch.utils.data import DataLoader, DistributedSampler

        cfg = self.cfg
        sampler = DistributedSampler(self.train_set, num_replicas=self.world, rank=self.rank, shuffle=True,
                                     seed=cfg.seed)
        sampler.set_epoch(epoch)
        seed = cfg.seed * 1_000_003 + epoch * self.world + self.rank
        torch.manual_seed(seed)  # the augmentation's draws when workers=0
        per_rank = max(1, cfg.batch_size // self.world)
        loader = DataLoader(self.train_set, per_rank, sampler=sampler, num_workers=cfg.workers,
                            generator=torch.Generator().manual_seed(seed))
        for x, y in loader:
            yield x, y, len(y) * self.world

    @torch.no_grad()
    def evaluate(self, model, device, amp):
        from torch.utils.data import DataLoader, Subset

        model.eval()
        part = Subset(self.val_set, range(self.rank, len(self.val_set), self.world))
        tot = torch.zeros(4, dtype=torch.float64)
        for x, y in DataLoader(part, max(1, self.cfg.eval_batch_size // 10), num_workers=self.cfg.workers):
            x, y = x.to(device), y.to(device)
            b, n_crops = x.shape[:2]
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
                logits = model(x.flatten(0, 1))
            logits = logits.float().view(b, n_crops, -1).mean(1)
            hit = logits.topk(min(5, logits.shape[1]), 1).indices == y[:, None]
            tot += torch.tensor([F.cross_entropy(logits, y, reduction="sum").item(), hit[:, 0].sum().item(),
                                 hit.any(1).sum().item(), b], dtype=torch.float64)
        if self.world > 1:
            import torch.distributed as dist

            dist.all_reduce(tot)
        n = tot[3].item()
        return dict(val_loss=_finite(tot[0].item() / n), top1_error=100.0 - 100.0 * tot[1].item() / n,
                    top5_error=100.0 - 100.0 * tot[2].item() / n, val_images=int(n), n_crops=10)


class DepthRegression(Task):
    """Dense depth from KITTI-format data (Eigen split files, 16-bit depth PNGs): LapDepth or
    Quadratic-LapDepth, the scale-invariant log loss, and the standard depth metrics."""

    eval_every_epoch = False
    headline = "rmse"

    def __init__(self, cfg: RunConfig, rank: int = 0, world: int = 1):
        super().__init__(cfg, rank, world)
        from ..sections import kitti_lapdepth as depth

        self.depth = depth
        self.kw = kw = _task_kwargs("depth", depth.DATA_DEFAULTS, cfg.task_kwargs)
        root = Path(cfg.data_dir)
        if cfg.dataset == "synthetic" and rank == 0:
            depth.write_synthetic_kitti(root, kw["n_train"], kw["n_test"], kw["height"], kw["width"],
                                        seed=cfg.split_seed)
        if world > 1:
            import torch.distributed as dist

            dist.barrier()
        self.train_set = depth.KittiSplit(root, kw["train_split"], kw["max_depth"], garg=False,
                                          limit=cfg.train_limit or None)
        self.test_set = depth.KittiSplit(root, kw["test_split"], kw["max_depth"], garg=True)

    def build_model(self, cfg: RunConfig | None = None) -> nn.Module:
        cfg = cfg or self.cfg
        return self.depth.build_model(cfg.model, **cfg.model_kwargs)

    def param_groups(self, model, lr_g, lr_b):
        # ReLinear groups for the encoder (with the encoder's weight decay), one decoder group.
        groups = relinear.param_groups(model.encoder, self.cfg.lr, lr_g, lr_b, self.cfg.weight_decay,
                                       **_decay_kw(self.cfg))
        groups = [g for g in groups if g["params"]]
        groups.append(dict(name="decoder", params=model.decoder_parameters(), lr=self.cfg.lr,
                           weight_decay=self.kw["weight_decay_decoder"]))
        return groups

    def steps_per_epoch(self) -> int:
        per_rank = max(1, self.cfg.batch_size // self.world)
        return math.ceil(len(self.train_set) / self.world / per_rank)

    def train_batches(self, epoch: int):
        from torch.utils.data import DataLoader, DistributedSampler

        sampler = DistributedSampler(self.train_set, num_replicas=self.world, rank=self.rank, shuffle=True,
                                     seed=self.cfg.seed)
        sampler.set_epoch(epoch)
        gen = _epoch_generator(self.cfg, epoch)
        per_rank = max(1, self.cfg.batch_size // self.world)
        for rgb, gt, mask in DataLoader(self.train_set, per_rank, sampler=sampler, num_workers=self.cfg.workers):
            if torch.rand((), generator=gen) < 0.5:  # horizontal flip of the whole batch
                rgb, gt, mask = rgb.flip(-1), gt.flip(-1), mask.flip(-1)
            yield rgb, (gt, mask), len(rgb) * self.world

    def loss(self, out, y):
        gt, mask = y
        return self.depth.silog_loss(out, gt, mask & (gt > 0)) * len(gt), None

    @torch.no_grad()
    def evaluate(self, model, device, amp):
        model.eval()
        preds, gts, masks = [], [], []
        for i in range(self.rank, len(self.test_set), self.world):
            rgb, gt, mask = self.test_set[i]
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
                preds.append(model(rgb[None].to(device))[0].float().cpu())
            gts.append(gt)
            masks.append(mask)
        if self.world > 1:
            import torch.distributed as dist

            parts = [None] * self.world
            dist.all_gather_object(parts, (preds, gts, masks))
            preds, gts, masks = ([t for p in parts for t in p[j]] for j in range(3))
        m = self.depth.depth_metrics(torch.stack(preds), torch.stack(gts), max_depth=self.kw["max_depth"],
                                     mask=torch.stack(masks))
        return dict(m, test_images=len(preds))


def _finite(v: float) -> float | None:
    return v if math.isfinite(v) else None


TASK_CLASSES = {"classification": InMemoryClassification, "imagefolder": ImageFolderClassification,
                "depth": DepthRegression}


def make_task(cfg: RunConfig, rank: int = 0, world: int = 1) -> Task:
    return TASK_CLASSES[cfg.task](cfg, rank, world)
