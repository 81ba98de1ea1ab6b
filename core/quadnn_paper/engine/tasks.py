"""The tasks the engine trains: what the data is, how a model is built, what is evaluated.

The training loop (:mod:`.loop`) is the same for all of them; a task supplies

- ``num_classes`` / ``in_chans`` and :meth:`build_model`;
- :meth:`relinear_part` and :meth:`own_param_groups` (what takes ReLinear's groups, and any
  group the task adds; :mod:`.optim` builds the optimiser);
- :meth:`train_batches` (this rank's share of each global batch, a pure function of
  (seed, epoch), so a resumed or DDP run sees the batches an uninterrupted one would);
- :meth:`loss` (summed over the batch, with a count of correct predictions if it has one);
- :meth:`evaluate` (the metrics, named in one vocabulary: errors are ``*_error`` in %);
- ``divergence_limit`` (a mean training loss above it means "did not converge"),
  ``eval_every_epoch`` and ``headline`` (the metric shown in progress bars and plans).
"""

from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from .config import RunConfig
from .distributed import all_reduce, on_cuda

__all__ = [
    "model_for",
    "Task",
    "InMemoryClassification",
    "ImageFolderClassification",
    "DepthRegression",
    "make_task",
    "data_fingerprint",
    "generated_data",
    "task_settings",
]


def model_for(cfg: RunConfig, num_classes: int = 10, in_chans: int = 3) -> nn.Module:
    """The model a run of ``cfg`` trains, for data of ``num_classes`` classes and ``in_chans``
    channels (a depth run: its LapDepth); what a task builds, without loading any data."""
    import timm

    import quadnn.models  # noqa: F401  (registers quadnn's models in timm)

    if cfg.task == "depth":
        from . import lapdepth

        return lapdepth.build_model(cfg.model, **cfg.model_kwargs)
    if not timm.is_model(cfg.model):
        ours = sorted(n for n in timm.list_models() if timm.models.model_entrypoint(n).__module__.startswith("quadnn."))
        raise ValueError(f"unknown model {cfg.model!r}; quadnn's models: {', '.join(ours)} (or any timm model name)")
    kwargs = dict(cfg.model_kwargs)
    if cfg.width != 1.0:
        kwargs["width"] = cfg.width
    if cfg.rezero:
        kwargs["rezero"] = True
    try:
        return timm.create_model(cfg.model, num_classes=num_classes, in_chans=in_chans, **kwargs)
    except TypeError as e:
        raise ValueError(f"model {cfg.model!r} rejected model_kwargs {sorted(kwargs)}: {e}") from None


class Task:
    num_classes: int = 0
    in_chans: int = 3
    divergence_limit: float | None = None
    eval_every_epoch: bool = True
    headline: str = "test_error"

    def __init__(self, cfg: RunConfig, rank: int = 0, world: int = 1, device: torch.device | str | None = None):
        self.cfg, self.rank, self.world = cfg, rank, world
        self.device = torch.device(device or "cpu")  # the rank's compute device

    def build_model(self, cfg: RunConfig | None = None) -> nn.Module:
        """The model of ``cfg`` (default: this task's run) for this task's data."""
        return model_for(cfg or self.cfg, self.num_classes, self.in_chans)

    def relinear_part(self, model: nn.Module) -> nn.Module:
        """The module whose parameters take ReLinear's groups (:mod:`.optim`): the whole model."""
        return model

    def own_param_groups(self, groups: list[dict], model: nn.Module, lr: float) -> list[dict]:
        """ReLinear's ``groups`` with what this task adds (none)."""
        return groups

    def steps_per_epoch(self) -> int:
        raise NotImplementedError

    def train_input(self) -> tuple[int, ...] | None:
        """(C, H, W) of one training image as the model sees it (None: not known before loading)."""
        return None

    def train_batches(self, epoch: int):
        raise NotImplementedError

    def loss(self, out, y):
        """``(summed loss, correct count or None)`` over the batch."""
        return F.cross_entropy(out.float(), y, reduction="sum"), (out.argmax(1) == y).sum()

    @torch.no_grad()
    def evaluate(self, model: nn.Module, device, amp: bool) -> dict:
        raise NotImplementedError

    def predictions(self, model: nn.Module, device, amp: bool) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``(predicted class, label)`` of every test image, on the CPU (None: the task has no
        classes to predict, or does not say); what the quadratic terms' departure is measured on."""
        return None

    def _loader(self, dataset, batch_size: int, sampler=None, generator=None, drop_last: bool = False):
        """A DataLoader built once per run: workers from :func:`loader_workers`, kept alive across
        epochs, batches in page-locked memory when they go to a GPU (``drop_last``: no smaller last
        batch, as a training loader of a run with ``cfg.drop_last``)."""
        from torch.utils.data import DataLoader

        workers = loader_workers(self.cfg)
        return DataLoader(
            dataset,
            batch_size,
            sampler=sampler,
            num_workers=workers,
            generator=generator,
            pin_memory=self.cfg.pin_memory and on_cuda(self.device),
            persistent_workers=workers > 0,
            drop_last=drop_last,
        )


def task_cpus() -> int:
    """The CPUs this process may use: the ones it is bound to (``sched_getaffinity``: a SLURM step
    given 1 CPU per task is bound to 1 core whatever ``SLURM_CPUS_PER_TASK`` says), at most
    ``SLURM_CPUS_PER_TASK`` under SLURM, else shared among the node's ranks (``LOCAL_WORLD_SIZE``)."""
    mine = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if os.environ.get("SLURM_CPUS_PER_TASK"):
        return max(1, min(mine, int(os.environ["SLURM_CPUS_PER_TASK"])))
    return max(1, mine // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", 1))))


def loader_workers(cfg: RunConfig) -> int:
    """DataLoader workers: ``cfg.workers``, or for ``"auto"`` the task's CPUs (:func:`task_cpus`)
    less one, the process feeding the GPU."""
    if cfg.workers != "auto":
        return cfg.workers
    return task_cpus() - 1


def _autocast(device: torch.device, enabled: bool):
    """bf16 autocast when ``enabled``; nothing otherwise (so any compute device works without it)."""
    return torch.autocast(device.type, dtype=torch.bfloat16) if enabled else contextlib.nullcontext()


def _sums(device, *values) -> torch.Tensor:
    """Per-batch sums as one float64 tensor on ``device`` (added there; read once at the end)."""
    return torch.stack(
        [
            v.double() if isinstance(v, torch.Tensor) else torch.full((), v, dtype=torch.float64, device=device)
            for v in values
        ]
    )


def _task_kwargs(task: str, defaults: dict, given: dict) -> dict:
    """The task's settings: its defaults updated by the run's ``task_kwargs`` (unknown keys named)."""
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ValueError(f"{task} task_kwargs {unknown} unknown; valid: {sorted(defaults)}")
    return dict(defaults, **given)


def _loader_steps(images: int, world: int, cfg: RunConfig) -> int:
    """Steps of an epoch through a DistributedSampler (each rank ceil(images / world) images, the
    last ones repeated) in batches of ``batch_size // world``, without the smaller last one when
    ``cfg.drop_last``."""
    per_rank = max(1, cfg.batch_size // world)
    mine = math.ceil(images / world)
    return mine // per_rank if cfg.drop_last else math.ceil(mine / per_rank)


def _epoch_generator(cfg: RunConfig, epoch: int) -> torch.Generator:
    return torch.Generator().manual_seed(cfg.seed * 1_000_003 + epoch)


class InMemoryClassification(Task):
    """Images held in memory as tensors (CIFAR-10/100 from torchvision's pickles, digits), with
    batch-wise augmentation; every rank cuts its share out of the same global batch."""

    def __init__(self, cfg: RunConfig, rank: int = 0, world: int = 1, device=None):
        super().__init__(cfg, rank, world, device)
        from ..data import cifar as qdata

        _task_kwargs("classification", {}, cfg.task_kwargs)  # it has none: a key given is a mistake
        self.qdata = qdata
        self.data = qdata.load(cfg.dataset, cfg.data_dir, download=False, split_seed=cfg.split_seed)
        if cfg.train_limit:
            self.data.x_train = self.data.x_train[: cfg.train_limit]
            self.data.y_train = self.data.y_train[: cfg.train_limit]
        if cfg.data_on_device:  # every rank holds the set on its GPU and augments batches there
            self.data = qdata.to_device(self.data, self.device)
        self.num_classes, self.in_chans = self.data.num_classes, self.data.in_chans
        self.divergence_limit = cfg.diverge_factor * math.log(self.num_classes)

    def steps_per_epoch(self) -> int:
        n, bs = len(self.data.y_train), self.cfg.batch_size
        return n // bs if self.cfg.drop_last else math.ceil(n / bs)

    def train_input(self) -> tuple[int, ...]:
        return tuple(self.data.x_train.shape[1:])

    def train_batches(self, epoch: int):
        gen = _epoch_generator(self.cfg, epoch)
        for xg, yg in self.qdata.batches(self.data, self.cfg.batch_size, gen, train=True):
            if self.cfg.drop_last and len(yg) < self.cfg.batch_size:
                break  # the epoch's last, smaller batch (its draws come after every full one's)
            # The summed loss over the global batch, times world / global size: DDP's mean over
            # ranks then equals one process's mean over the global batch.
            yield xg.tensor_split(self.world)[self.rank], yg.tensor_split(self.world)[self.rank], len(yg)

    @torch.no_grad()
    def evaluate(self, model, device, amp):
        model.eval()
        tot = torch.zeros(3, dtype=torch.float64, device=device)  # loss, correct, images
        for x, y in self.qdata.batches(self.data, self.cfg.eval_batch_size, None, train=False):
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with _autocast(device, amp):
                out = model(x)
            tot += _sums(device, F.cross_entropy(out.float(), y, reduction="sum"), (out.argmax(1) == y).sum(), len(y))
        loss, correct, n = tot.cpu().tolist()
        return dict(test_loss=_finite(loss / n), test_error=100.0 - 100.0 * correct / n, test_images=int(n))

    @torch.no_grad()
    def predictions(self, model, device, amp):
        model.eval()
        preds, labels = [], []
        for x, y in self.qdata.batches(self.data, self.cfg.eval_batch_size, None, train=False):
            with _autocast(device, amp):
                preds.append(model(x.to(device, non_blocking=True)).argmax(1).cpu())
            labels.append(y.cpu())
        return torch.cat(preds), torch.cat(labels)


class ImageFolderClassification(Task):
    """Images streamed from an ImageFolder tree (ImageNet, or the digits rendered as PNGs), with
    RandomResizedCrop training and 10-crop evaluation (the ten logits of an image averaged)."""

    eval_every_epoch = False
    headline = "top1_error"

    def __init__(self, cfg: RunConfig, rank: int = 0, world: int = 1, device=None):
        super().__init__(cfg, rank, world, device)
        from ..data import imagefolder as imagenet

        self.kw = kw = _task_kwargs("imagefolder", imagenet.DATA_DEFAULTS, cfg.task_kwargs)
        root = Path(cfg.data_dir)
        if cfg.dataset in ("digits", "fashion_mnist"):
            if rank == 0 and cfg.dataset == "digits":
                imagenet.write_digits_folder(
                    root, kw["image_size"], split_seed=cfg.split_seed, max_per_class=kw["max_per_class"]
                )
            elif rank == 0:
                imagenet.write_fashion_folder(root, kw["image_size"], train_per_class=kw["max_per_class"])
            if world > 1:
                import torch.distributed as dist

                dist.barrier()
        self.train_set, self.val_set = imagenet.datasets(root, kw["crop"], kw["resize"], kw["scale"])
        if cfg.train_limit:
            self.train_set = torch.utils.data.Subset(self.train_set, range(min(cfg.train_limit, len(self.train_set))))
        self.num_classes = len(self.val_set.classes)
        self._train_loader = self._val_loader = None

    def steps_per_epoch(self) -> int:
        return _loader_steps(len(self.train_set), self.world, self.cfg)

    def train_batches(self, epoch: int):
        from torch.utils.data import DistributedSampler

        cfg = self.cfg
        if self._train_loader is None:  # once per run: workers start once and stay
            self._sampler = _SeededIndices(
                DistributedSampler(self.train_set, num_replicas=self.world, rank=self.rank, shuffle=True, seed=cfg.seed)
            )
            data = self.train_set
            if loader_workers(cfg):  # augmentation seeded per image (with workers=0: torch's RNG, seeded below)
                data = _Reseeded(self.train_set)
            else:
                self._sampler.pairs = False
            self._gen = torch.Generator()
            per_rank = max(1, cfg.batch_size // self.world)
            self._train_loader = self._loader(data, per_rank, self._sampler, self._gen, cfg.drop_last)
        seed = cfg.seed * 1_000_003 + epoch * self.world + self.rank
        self._sampler.set_epoch(epoch, seed)
        torch.manual_seed(seed)  # the augmentation's draws when workers=0
        self._gen.manual_seed(seed)
        for x, y in self._train_loader:
            yield x, y, len(y) * self.world

    def _ten_crop_loader(self, images):
        """A loader of ``images``, each as its ten crops (a batch of ``eval_batch_size`` crops)."""
        return self._loader(images, max(1, self.cfg.eval_batch_size // 10))

    def _val_batches(self):
        """This rank's share of the validation images, each as its ten crops."""
        from torch.utils.data import Subset

        if self._val_loader is None:
            self._val_loader = self._ten_crop_loader(
                Subset(self.val_set, range(self.rank, len(self.val_set), self.world))
            )
        return self._val_loader

    @staticmethod
    def _logits(model, x, device, amp):
        """An image's logits: those of its ten crops averaged."""
        b, n_crops = x.shape[:2]
        with _autocast(device, amp):
            logits = model(x.flatten(0, 1))
        return logits.float().view(b, n_crops, -1).mean(1)

    @torch.no_grad()
    def evaluate(self, model, device, amp):
        model.eval()
        tot = torch.zeros(4, dtype=torch.float64, device=device)  # loss, top-1 hits, top-5 hits, images
        for x, y in self._val_batches():
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            b = x.shape[0]
            logits = self._logits(model, x, device, amp)
            hit = logits.topk(min(5, logits.shape[1]), 1).indices == y[:, None]
            tot += _sums(device, F.cross_entropy(logits, y, reduction="sum"), hit[:, 0].sum(), hit.any(1).sum(), b)
        if self.world > 1:
            all_reduce(tot, device)
        loss, top1, top5, n = tot.cpu().tolist()
        return dict(
            val_loss=_finite(loss / n),
            top1_error=100.0 - 100.0 * top1 / n,
            top5_error=100.0 - 100.0 * top5 / n,
            val_images=int(n),
            n_crops=10,
        )

    CENTRE = 4  # TenCrop's fifth crop: the centre

    @torch.no_grad()
    def predictions(self, model, device, amp):
        # Every validation image, on every rank, from its centre crop: the departure asks whether
        # the quadratic terms change what the network predicts, and one crop of ten answers it at
        # a tenth of the ten-crop vote's cost (twice per run: the network and its linear twin).
        model.eval()
        loader = self._val_batches() if self.world == 1 else self._ten_crop_loader(self.val_set)
        preds, labels = [], []
        for x, y in loader:
            with _autocast(device, amp):
                preds.append(model(x[:, self.CENTRE].to(device, non_blocking=True)).argmax(1).cpu())
            labels.append(y.cpu())
        return torch.cat(preds), torch.cat(labels)


class DepthRegression(Task):
    """Dense depth from KITTI-format data (Eigen split files, 16-bit depth PNGs): LapDepth or
    Quadratic-LapDepth, the scale-invariant log loss, and the standard depth metrics."""

    eval_every_epoch = False
    headline = "rmse"

    def __init__(self, cfg: RunConfig, rank: int = 0, world: int = 1, device=None):
        super().__init__(cfg, rank, world, device)
        from ..data import kitti
        from . import lapdepth

        self.depth = lapdepth
        self.kw = kw = _task_kwargs("depth", lapdepth.DATA_DEFAULTS, cfg.task_kwargs)
        root = Path(cfg.data_dir)
        if cfg.dataset == "synthetic" and rank == 0:
            kitti.write_synthetic_kitti(
                root, kw["n_train"], kw["n_test"], kw["height"], kw["width"], seed=cfg.split_seed, sizes=kw["sizes"]
            )
        if world > 1:
            import torch.distributed as dist

            dist.barrier()
        # Real KITTI comes in several image sizes: every image is cut to kw["crop"] (bottom rows,
        # centred columns: the KB crop) so batches stack; training then takes random kw["train_crop"] crops.
        crop = tuple(kw["crop"]) if kw["crop"] else None
        self.train_crop = tuple(kw["train_crop"]) if kw["train_crop"] else None
        self.train_set = kitti.KittiSplit(
            root, kw["train_split"], kw["max_depth"], garg=False, limit=cfg.train_limit or None, crop=crop
        )
        self.test_set = kitti.KittiSplit(root, kw["test_split"], kw["max_depth"], garg=True, crop=crop)
        self._train_loader = None

    def build_model(self, cfg: RunConfig | None = None) -> nn.Module:
        cfg = cfg or self.cfg
        return self.depth.build_model(cfg.model, **cfg.model_kwargs)

    def relinear_part(self, model):
        return model.encoder  # ReLinear's groups (with the encoder's weight decay) for the encoder

    def own_param_groups(self, groups, model, lr):
        # the encoder's non-empty groups, then one for the decoder with its own weight decay
        decoder = dict(
            name="decoder", params=model.decoder_parameters(), lr=lr, weight_decay=self.kw["weight_decay_decoder"]
        )
        return [g for g in groups if g["params"]] + [decoder]

    def train_input(self) -> tuple[int, ...]:
        crop = self.train_crop or (tuple(self.kw["crop"]) if self.kw["crop"] else None)
        return (3, *(crop or (self.kw["height"], self.kw["width"])))

    def steps_per_epoch(self) -> int:
        return _loader_steps(len(self.train_set), self.world, self.cfg)

    def train_batches(self, epoch: int):
        from torch.utils.data import DistributedSampler

        if self._train_loader is None:  # once per run: workers start once and stay
            self._sampler = DistributedSampler(
                self.train_set, num_replicas=self.world, rank=self.rank, shuffle=True, seed=self.cfg.seed
            )
            per_rank = max(1, self.cfg.batch_size // self.world)
            self._train_loader = self._loader(self.train_set, per_rank, self._sampler, drop_last=self.cfg.drop_last)
        self._sampler.set_epoch(epoch)
        gen = _epoch_generator(self.cfg, epoch)
        for rgb, gt, mask in self._train_loader:
            if self.train_crop is not None:
                rgb, gt, mask = _random_crops(self.train_crop, gen, rgb, gt, mask)
            if torch.rand((), generator=gen) < 0.5:  # horizontal flip of the whole batch
                rgb, gt, mask = rgb.flip(-1), gt.flip(-1), mask.flip(-1)
            yield rgb, (gt, mask), len(rgb) * self.world

    def loss(self, out, y):
        gt, mask = y
        # in float32 even under bf16 autocast: logs of depths and a difference of near-equal means
        return self.depth.silog_loss(out.float(), gt, mask & (gt > 0)) * len(gt), None

    @torch.no_grad()
    def evaluate(self, model, device, amp):
        model.eval()
        preds, gts, masks = [], [], []
        for i in range(self.rank, len(self.test_set), self.world):
            rgb, gt, mask = self.test_set[i]
            with _autocast(device, amp):
                preds.append(model(rgb[None].to(device))[0].float().cpu())
            gts.append(gt)
            masks.append(mask)
        if self.world > 1:
            import torch.distributed as dist

            parts = [None] * self.world
            dist.all_gather_object(parts, (preds, gts, masks))
            preds, gts, masks = ([t for p in parts for t in p[j]] for j in range(3))
        # Pixels pooled over images (flattened, so images of different sizes pool too)
        flat = [torch.cat([t.flatten() for t in ts]) for ts in (preds, gts, masks)]
        m = self.depth.depth_metrics(flat[0], flat[1], max_depth=self.kw["max_depth"], mask=flat[2])
        return dict(m, test_images=len(preds))


def _random_crops(size, gen: torch.Generator, *batches: torch.Tensor):
    """One random ``size`` crop per image, the same window in each of ``batches`` (N, C, H, W)."""
    (h, w), (H, W), n = size, batches[0].shape[-2:], len(batches[0])
    if h > H or w > W:
        raise ValueError(f"train_crop {h}x{w} is larger than the images ({H}x{W})")
    oy = torch.randint(0, H - h + 1, (n,), generator=gen).tolist()
    ox = torch.randint(0, W - w + 1, (n,), generator=gen).tolist()
    return tuple(torch.stack([b[i, :, y : y + h, x : x + w] for i, (y, x) in enumerate(zip(oy, ox))]) for b in batches)


class _SeededIndices(torch.utils.data.Sampler):
    """A sampler's indices paired with the epoch's seed, for :class:`_Reseeded`."""

    def __init__(self, sampler):
        self.sampler, self.seed, self.pairs = sampler, 0, True

    def set_epoch(self, epoch: int, seed: int) -> None:
        self.sampler.set_epoch(epoch)
        self.seed = seed

    def __iter__(self):
        return ((self.seed, i) for i in self.sampler) if self.pairs else iter(self.sampler)

    def __len__(self) -> int:
        return len(self.sampler)


class _Reseeded(torch.utils.data.Dataset):
    """Each image's augmentation drawn from torch's RNG seeded by (epoch seed, index): the same
    crops whatever the number of workers, and persistent workers need no per-epoch re-seeding."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, key):
        seed, i = key
        torch.manual_seed(seed * 1_000_003 + i)
        return self.dataset[i]


def _finite(v: float) -> float | None:
    return v if math.isfinite(v) else None


TASK_CLASSES = {
    "classification": InMemoryClassification,
    "imagefolder": ImageFolderClassification,
    "depth": DepthRegression,
}


def task_settings(task: str) -> dict:
    """The ``task_kwargs`` a task reads, with their defaults (classification reads none)."""
    if task == "imagefolder":
        from ..data import imagefolder

        return dict(imagefolder.DATA_DEFAULTS)
    if task == "depth":
        from . import lapdepth

        return dict(lapdepth.DATA_DEFAULTS)
    return {}


def generated_data(cfg: RunConfig) -> bool:
    """Whether the run's data is written by its task from the run's own settings (the digits
    rendered as an ImageFolder, synthetic KITTI): its content then follows from the key."""
    return (cfg.task, cfg.dataset) in (
        ("imagefolder", "digits"),
        ("imagefolder", "fashion_mnist"),
        ("depth", "synthetic"),
    )


def data_fingerprint(cfg: RunConfig) -> str | None:
    """A content fingerprint of the data ``cfg`` reads from ``cfg.data_dir`` (its path is not part
    of it: moved data keeps its fingerprint); None when the data is not there. See the data
    modules' ``fingerprint`` for what each one covers and why it is cheap."""
    if cfg.task == "classification":
        from ..data import cifar

        return cifar.fingerprint(cfg.dataset, cfg.data_dir) if cfg.dataset in cifar.DATASETS else None
    if cfg.task == "imagefolder":
        from ..data import imagefolder

        return imagefolder.fingerprint(cfg.data_dir)
    from ..data import kitti

    kw = dict(task_settings("depth"), **cfg.task_kwargs)
    return kitti.fingerprint(cfg.data_dir, [kw["train_split"], kw["test_split"]])


def make_task(cfg: RunConfig, rank: int = 0, world: int = 1, device=None) -> Task:
    return TASK_CLASSES[cfg.task](cfg, rank, world, device)
