"""One run of the engine: :class:`RunConfig`, the dataclass whose hash names the run.

Every field changes what is computed, except the operational ones in :data:`OPERATIONAL`
(where data lives, threads, progress bars), which are left out of the hash. A weight-transfer
run declares its source as a nested :class:`RunConfig` plus a stage number; the source's
hash is part of the dependent's hash, and the engine finds the source's checkpoint under
the cache directory in use, never through a stored path.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "RunConfig",
    "TASKS",
    "RELINEAR",
    "OPTIMIZERS",
    "SCHEDULES",
    "QUADRATIC_DECAY",
    "QUADRATIC_INIT",
    "OPERATIONAL",
    "KEY_IF_NOT",
    "DEVICES",
    "run_id",
]

TASKS = ("classification", "imagefolder", "depth")
RELINEAR = ("none", "sg", "sw-l1", "sw-l2")
OPTIMIZERS = ("sgd", "adam", "adamw")
SCHEDULES = ("multistep", "diminishing", "constant", "poly")
# How weight decay treats the quadratic terms (quadnn.relinear.param_groups' quadratic_decay):
# "reference" decays them toward their ReLinear reference, decoupled (quadnn's default);
# "zero" is ordinary coupled L2 toward 0 on every group (the official ReLinear code).
QUADRATIC_DECAY = ("reference", "zero")
# Where the quadratic terms start: "reference" (ReLinear's, the layer computes its linear branch)
# or "random" (drawn as torch draws the linear weight, quadnn.relinear.random_init_): the start of
# a quadratic network trained without ReLinear.
QUADRATIC_INIT = ("reference", "random")
DEVICES = ("auto", "cpu", "cuda", "mps")
# How quadratic layers compute (quadnn.QuadraticLayer.IMPLEMENTATIONS; the same function, float
# rounding apart). "auto" picks by device (quadnn_paper.engine.loop.FASTEST).
IMPLEMENTATIONS = ("auto", "fast", "speed", "lean", "fused", "naive")
# Where and how fast a run executes, not what it computes: left out of the hash, so a run trained
# on a GPU and the same run resumed on another machine are one run.
OPERATIONAL = (
    "device",
    "data_dir",
    "progress",
    "threads",
    "workers",
    "eval_batch_size",
    "cudnn_benchmark",
    "channels_last",
    "pin_memory",
    "data_on_device",
    "recompute_budget",
    "implementation",
)
# Fields added after results were cached: they enter the hash only when they differ from these
# defaults, so every run stored before them keeps its id.
KEY_IF_NOT = {
    "tf32": True,
    "warmup_epochs": 0,
    "drop_last": False,
    "eval_every_epoch": True,
    "quadratic_init": "reference",
}


@dataclass
class RunConfig:
    """One training run. Defaults: the paper's CIFAR-10 protocol for QResNet20 with ReLinear-sg."""

    task: str = "classification"  # classification (in-memory tensors) | imagefolder | depth
    model: str = "cifar_qresnet20"  # timm name; depth: "lapdepth" | "quadratic_lapdepth"
    width: float = 1.0  # channel multiplier (quadnn's models)
    rezero: bool = False  # ReZero residuals (cifar_* models)
    model_kwargs: dict = field(default_factory=dict)
    dataset: str = "cifar10"  # classification: cifar10|cifar100|digits; imagefolder: imagenet|digits;
    # depth: kitti|synthetic
    task_kwargs: dict = field(default_factory=dict)  # the task's own settings (image sizes, split sizes, ...)
    split_seed: int = 0  # train/test split of the digits stand-ins
    train_limit: int = 0  # use only the first N training images (0: all)
    epochs: int = 200
    batch_size: int = 128  # global batch (split across DDP ranks)
    optimizer: str = "sgd"
    lr: float = 0.1  # gamma_r
    momentum: float = 0.9  # sgd momentum / adam beta1
    beta2: float = 0.999  # adam(w) beta2
    weight_decay: float = 1e-4
    quadratic_decay: str = "reference"
    quadratic_init: str = "reference"  # reference | random (QUADRATIC_INIT)
    relinear: str = "sg"
    lr_g: float = 1e-4  # gamma_g (relinear="sg")
    lr_b: float | None = None  # gamma_b; None = lr_g
    alpha_g: float = 0.0  # alpha (sw-l1) or beta (sw-l2) of the gate terms
    alpha_b: float | None = None  # ... of the power terms; None = alpha_g
    schedule: str = "multistep"
    milestones: tuple = (0.5, 0.75)  # fractions of epochs
    lr_decay: float = 0.1
    warmup_epochs: int = 0  # epochs at a tenth of every rate before the schedule (He et al. 2016,
    # section 4.2: ResNet110 "warmed up" at 0.01 for its first ~400 iterations, then 0.1)
    dim_alpha: float = 1000.0  # diminishing schedule offset (iterations)
    end_lr: float = 0.0  # poly schedule: final lr of the linear group
    lr_power: float = 0.5  # poly schedule exponent
    transfer_from: RunConfig | None = None  # weight transfer: start from this conventional run ...
    transfer_stage: int = 1  # ... at the end of this schedule stage
    init_twin: str | None = None  # paired design: start from the initial weights this conventional
    # model draws under the same seed (quadratic terms at reference)
    seed: int = 0
    device: str = "auto"  # auto: cuda where available, else cpu
    amp: bool = False  # bf16 autocast (CPU and CUDA); losses stay float32
    tf32: bool = True  # CUDA: TF32 matmuls and convolutions (torch's conv default)
    compile: bool = False  # torch.compile (on CUDA under CUDA graphs); implies drop_last
    drop_last: bool = False  # train on full batches only: an epoch's last, smaller batch is skipped
    # (static shapes, so a compiled step is compiled and captured once)
    sync_bn: bool = False  # synchronise batch-norm statistics across DDP ranks
    diverge_factor: float = 10.0  # classification: stop when the loss exceeds this x ln(classes)
    # the test set after every epoch (the history's curves), or after the last only (False: on a
    # small stand-in with a large test set, evaluating every epoch costs a third of a run)
    eval_every_epoch: bool = True
    # operational (not hashed)
    data_dir: str = ""  # "": the repository's data/, or build/data/<stand-in> for generated data
    progress: bool = True
    threads: int | None = None  # torch.set_num_threads
    workers: int | str = 0  # DataLoader workers (imagefolder, depth); "auto": this task's CPUs
    eval_batch_size: int = 500
    # GPU speed settings, CUDA only (on CPU every one is a no-op, so CPU numbers do not move)
    cudnn_benchmark: bool = True  # let cuDNN time its algorithms for each input shape
    channels_last: bool = True  # NHWC model and inputs (tensor cores' layout)
    pin_memory: bool = True  # page-locked loader batches, copied with non_blocking=True
    data_on_device: bool = True  # in-memory data sets held on the GPU, augmented there
    recompute_budget: float | None = None  # quadratic layers' kept tensors (quadnn.plan_recompute);
    # None: 2.0 (keep all, recompute nothing) on CUDA, model default elsewhere
    implementation: str = "auto"  # quadratic layers' implementation; auto: the fastest measured on
    # this device when everything is kept (loop.FASTEST), else the recompute plan's

    def __post_init__(self):
        self._normalise()
        self._check_choices()
        self._check_numbers()
        self._check_structure()

    def _normalise(self):
        """One spelling per setting: milestones as floats, the default data folder, a dict
        ``transfer_from`` as a RunConfig, width/rezero out of model_kwargs into their fields."""
        self.milestones = tuple(float(m) for m in self.milestones)
        self.drop_last = self.drop_last or self.compile  # a compiled step sees one batch shape
        if not self.data_dir:  # generated stand-ins go where the project writes data, never into data/
            self.data_dir = str(_default_data(self.task, self.dataset))
        if isinstance(self.transfer_from, dict):
            self.transfer_from = RunConfig.from_dict(self.transfer_from)
        # width and rezero have fields of their own: one set in model_kwargs moves into its field
        # (one training, one record); given in both places with different values, it is an error.
        for name, default in (("width", 1.0), ("rezero", False)):
            if isinstance(self.model_kwargs, dict) and name in self.model_kwargs:
                given = self.model_kwargs[name]
                if getattr(self, name) not in (default, given):
                    raise ValueError(
                        f"{name} is given twice with different values: {name}={getattr(self, name)!r} and "
                        f"model_kwargs[{name!r}]={given!r}; give it once (--{name})"
                    )
                self.model_kwargs = {k: v for k, v in self.model_kwargs.items() if k != name}
                setattr(self, name, given)

    def _check_choices(self):
        """Named settings among their valid values, and the counts positive."""
        for name, valid in (
            ("task", TASKS),
            ("relinear", RELINEAR),
            ("optimizer", OPTIMIZERS),
            ("schedule", SCHEDULES),
            ("quadratic_decay", QUADRATIC_DECAY),
            ("quadratic_init", QUADRATIC_INIT),
            ("implementation", IMPLEMENTATIONS),
        ):
            if getattr(self, name) not in valid:
                raise ValueError(f"{name} must be one of {valid}, got {getattr(self, name)!r}")
        if (
            not isinstance(self.device, str)
            or self.device.split(":")[0] not in DEVICES
            or not (self.device.partition(":")[2].isdigit() or ":" not in self.device)
        ):
            raise ValueError(f"device must be one of {DEVICES} (optionally cuda:N), got {self.device!r}")
        for name in ("epochs", "batch_size", "transfer_stage"):
            v = getattr(self, name)
            if not (isinstance(v, int) and not isinstance(v, bool) and v >= 1):
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if self.workers != "auto" and not (
            isinstance(self.workers, int) and not isinstance(self.workers, bool) and self.workers >= 0
        ):
            raise ValueError(f"workers must be a non-negative integer or 'auto', got {self.workers!r}")
        if self.recompute_budget is not None and not (
            isinstance(self.recompute_budget, (int, float)) and 0 <= self.recompute_budget <= 2
        ):
            raise ValueError(f"recompute_budget must be None or a number in [0, 2], got {self.recompute_budget!r}")

    def _check_numbers(self):
        """Seeds and limits non-negative integers; rates finite and non-negative; factors positive."""
        for name in ("train_limit", "split_seed", "seed", "warmup_epochs"):
            v = getattr(self, name)
            if not (isinstance(v, int) and not isinstance(v, bool) and v >= 0):
                raise ValueError(f"{name} must be a non-negative integer, got {v!r}")
        for name in (
            "lr",
            "lr_g",
            "lr_b",
            "alpha_g",
            "alpha_b",
            "weight_decay",
            "momentum",
            "beta2",
            "end_lr",
            "lr_power",
        ):
            v = getattr(self, name)
            if v is None and name in ("lr_b", "alpha_b"):
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        for name in ("width", "lr_decay", "dim_alpha", "diverge_factor"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
        if self.momentum >= 1 or self.beta2 >= 1:
            raise ValueError(f"momentum and beta2 must be < 1, got {self.momentum!r}, {self.beta2!r}")
        if not all(0 < m <= 1 for m in self.milestones):
            raise ValueError(f"milestones are fractions of the epochs in (0, 1], got {self.milestones}")

    def _check_structure(self):
        """Keyword dicts are dicts; transfer_from, init_twin and threads of the right kind."""
        for name in ("model_kwargs", "task_kwargs"):
            if not isinstance(getattr(self, name), dict):
                raise ValueError(f"{name} must be a dict of keyword arguments, got {getattr(self, name)!r}")
        if self.transfer_from is not None and not isinstance(self.transfer_from, RunConfig):
            raise ValueError(f"transfer_from must be a RunConfig (or its dict), got {self.transfer_from!r}")
        if self.init_twin is not None and (not isinstance(self.init_twin, str) or self.transfer_from is not None):
            raise ValueError(
                f"init_twin must be a model name and excludes transfer_from (which sets the "
                f"initial weights itself), got {self.init_twin!r}"
            )
        if self.threads is not None and not (isinstance(self.threads, int) and self.threads >= 1):
            raise ValueError(f"threads must be a positive integer or None, got {self.threads!r}")

    # -- identity ------------------------------------------------------------------------
    def milestone_epochs(self) -> list[int]:
        """The multistep milestones as epochs (0-based: the lr drops before this epoch), sorted, once each."""
        return sorted({max(1, round(m * self.epochs)) for m in self.milestones})

    def key(self) -> dict:
        """The fields that define the run (everything but :data:`OPERATIONAL`), as plain JSON, in a
        canonical form: one training, one key, however it was spelt (:meth:`_canonical`)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in OPERATIONAL}
        d.update(self._canonical())
        d["transfer_from"] = self.transfer_from.key() if self.transfer_from is not None else None
        if self.transfer_from is None:
            d.pop("transfer_stage")  # meaningless without a source; keeps hashes of plain runs stable
        for name, default in KEY_IF_NOT.items():
            if d[name] == default:
                d.pop(name)
        if self.init_twin is None:
            d.pop("init_twin")  # keeps the hashes of unpaired runs what they were
        d["models_version"] = _models_version()  # results of older model definitions are not reused
        return json.loads(json.dumps(d, sort_keys=True))

    def _canonical(self) -> dict:
        """The key's values of the fields that have several spellings for one training: a default
        spelt out (``lr_b`` equal to ``lr_g``, ``alpha_b`` to ``alpha_g``); settings the run never
        reads (``lr_g`` without ReLinear-sg, milestones without the multistep schedule, ``beta2``
        with SGD, ...), which take their defaults; milestones, which become the epochs they fall on
        (sorted, once each, only those before the last epoch; none: ``lr_decay`` is unused and the
        schedule is constant)."""
        default = {f.name: f.default for f in dataclasses.fields(self)}
        sg, shrink = self.relinear == "sg", self.relinear.startswith("sw-")
        c = {}
        c["lr_g"] = self.lr_g if sg else default["lr_g"]
        c["lr_b"] = self.lr_b if sg and self.lr_b is not None and self.lr_b != self.lr_g else None
        c["alpha_g"] = self.alpha_g if shrink else default["alpha_g"]
        c["alpha_b"] = self.alpha_b if shrink and self.alpha_b is not None and self.alpha_b != self.alpha_g else None
        epochs = [m for m in self.milestone_epochs() if m < self.epochs] if self.schedule == "multistep" else []
        c["milestones"] = epochs  # epochs now, no longer fractions
        if self.schedule == "multistep" and not epochs:  # no step before the end: a constant lr
            c["schedule"] = "constant"
        c["lr_decay"] = self.lr_decay if epochs else default["lr_decay"]
        c["dim_alpha"] = self.dim_alpha if self.schedule == "diminishing" else default["dim_alpha"]
        c["end_lr"] = self.end_lr if self.schedule == "poly" else default["end_lr"]
        c["lr_power"] = self.lr_power if self.schedule == "poly" else default["lr_power"]
        c["beta2"] = self.beta2 if self.optimizer != "sgd" else default["beta2"]
        c["quadratic_decay"] = self.quadratic_decay if self.weight_decay else default["quadratic_decay"]
        return c

    @property
    def run_id(self) -> str:
        """16 hex digits of the SHA-256 of :meth:`key`: the run's folder name in the cache."""
        return run_id(self.key())

    def dependencies(self) -> list[RunConfig]:
        """Runs that must finish before this one can start (the weight-transfer source)."""
        return [self.transfer_from] if self.transfer_from is not None else []

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> RunConfig:
        """Rebuild a config from :meth:`to_dict` / :meth:`key` output; unknown keys are an error."""
        names = {f.name for f in dataclasses.fields(cls)}
        d = {k: v for k, v in d.items() if k != "models_version"}  # part of key(), not a field
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"unknown RunConfig fields {unknown}; valid: {sorted(names)}")
        return cls(**d)

    def replace(self, **changes: Any) -> RunConfig:
        return dataclasses.replace(self, **changes)

    def describe(self) -> str:
        """A short human-readable label (for progress bars and plans)."""
        parts = [self.model]
        if self.relinear != "none":
            parts.append(self.relinear)
        if self.transfer_from is not None:
            parts.append(f"transfer{self.transfer_stage}")
        parts.append(f"seed{self.seed}")
        return " ".join(parts)


def _models_version() -> int:
    import quadnn.models

    return quadnn.models.VERSION


def _default_data(task: str, dataset: str):
    from ..common.paths import DATA
    from ..data.standin import default_dir

    return default_dir(task, dataset) or DATA


def run_id(key: dict) -> str:
    blob = json.dumps(key, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
