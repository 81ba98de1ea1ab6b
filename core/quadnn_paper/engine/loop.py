"""The training loop: one for every task, results cached by configuration.

``run(cfg, out)`` trains one :class:`~.config.RunConfig` into ``out/<run_id>/`` (see
:mod:`.store`), or returns at once when that configuration already finished. An interrupted
run resumes from its last checkpoint. On the CPU the resumed run is bit for bit the uninterrupted
one (batches are a function of seed and epoch, and the CPU RNG state is checkpointed). On CUDA
the weights, optimiser state, batches and augmentation draws resume exactly, but the steps after
it are the uninterrupted run's only up to float rounding: cuDNN's autotuning (``cudnn_benchmark``)
may pick other algorithms in the new process, some backward kernels add with atomics in no fixed
order, and the CUDA RNG state is not checkpointed (the engine draws nothing from it). A run that diverges (non-finite loss or parameters, or a
mean training loss above the task's limit) is recorded as ``status="diverged"`` ("did not
converge") with its curve so far, never raised. Under ``torchrun`` (or a SLURM job that
initialised torch.distributed) the global batch is split over the ranks; rank 0 writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
from torch import nn

from quadnn import relinear
from quadnn.layers import QuadraticLayer

from ..bench.models import is_quadratic
from . import departure
from .config import RunConfig
from .distributed import agree, all_reduce, broadcast_buffers, compute_device, on_cuda, sync_batchnorm, world
from .optim import build_optimizer
from .store import CorruptFile, RunStore, WorldSizeMismatch, atomic_write_text, quarantine
from .tasks import _autocast, data_fingerprint, generated_data, make_task, task_cpus

__all__ = [
    "run",
    "result",
    "state",
    "requested_data",
    "DependencyNotReady",
    "SourceDidNotConverge",
    "stage_ends",
    "lr_factor",
]


class DependencyNotReady(RuntimeError):
    """A run's weight-transfer source has not finished (and the caller asked not to run it)."""


class SourceDidNotConverge(RuntimeError):
    """A run's weight-transfer source diverged: there are no weights to start from, so the
    dependent is recorded as not converged too (a result, not a failure to retry)."""


def milestone_epochs(cfg: RunConfig) -> list[int]:
    return cfg.milestone_epochs()


def stage_ends(cfg: RunConfig) -> list[int]:
    """Epochs (1-based, completed) at which a schedule stage ends: the milestones and the last epoch."""
    if cfg.schedule != "multistep":
        return [cfg.epochs]
    return sorted(set(m for m in milestone_epochs(cfg) if m < cfg.epochs) | {cfg.epochs})


def kept_stages(cfg: RunConfig, model: nn.Module) -> list[int]:
    """The stage ends whose weights the run keeps (``stageK.pt``): every one for a conventional
    network, the only kind weight transfer starts from (:func:`_transfer`); none for a network
    with quadratic layers. Each is a whole model: a quadratic VGG16's four came to 0.7 GB at
    TINY, and the full profile trains hundreds of quadratic networks."""
    return [] if is_quadratic(model) else stage_ends(cfg)


def lr_factor(cfg: RunConfig, epoch: int, step: int, total_steps: int) -> float:
    """Multiplier of every group's initial lr during 0-based ``epoch`` at global iteration ``step``."""
    if epoch < cfg.warmup_epochs:
        return 0.1 * _schedule_factor(cfg, epoch, step, total_steps)
    return _schedule_factor(cfg, epoch, step, total_steps)


def _schedule_factor(cfg: RunConfig, epoch: int, step: int, total_steps: int) -> float:
    if cfg.schedule == "multistep":
        return cfg.lr_decay ** sum(epoch >= m for m in milestone_epochs(cfg))
    if cfg.schedule == "diminishing":
        # eta_t = lr * a / (a + t): the appendix's beta / (alpha + t) with beta = lr * alpha.
        return cfg.dim_alpha / (cfg.dim_alpha + step)
    if cfg.schedule == "poly":
        frac = min(step / max(total_steps, 1), 1.0)
        return ((cfg.lr - cfg.end_lr) * (1.0 - frac) ** cfg.lr_power + cfg.end_lr) / cfg.lr if cfg.lr else 1.0
    return 1.0


def _as_config(config: RunConfig | dict | None, overrides: dict) -> RunConfig:
    cfg = config if isinstance(config, RunConfig) else RunConfig.from_dict(config or {})
    return dataclasses.replace(cfg, **overrides) if overrides else cfg


def result(cfg: RunConfig, out: str | os.PathLike) -> dict | None:
    """The stored result of ``cfg`` under ``out``, or None."""
    return RunStore(out).result(cfg)


def state(cfg: RunConfig, out: str | os.PathLike) -> str:
    """``done`` | ``diverged`` | ``partial`` | ``missing`` (see :data:`.store.STATES`)."""
    return RunStore(out).state(cfg)


def requested_data(cfg: RunConfig) -> str | None:
    """The fingerprint a stored result of ``cfg`` is checked against: that of the data at
    ``cfg.data_dir`` now; None (not checked) for data the task generates from the run's own
    settings (it is rewritten when they differ) and for data that is not there."""
    return None if generated_data(cfg) else data_fingerprint(cfg)


def _transfer(cfg: RunConfig, store: RunStore, model: nn.Module, task, run_dependencies: bool) -> None:
    """Start ``model`` from the transfer source's stage checkpoint (resolved by hash under ``store``)."""
    src = cfg.transfer_from
    res = store.result(src, requested_data(src))
    if res is None:
        if not run_dependencies:
            raise DependencyNotReady(f"weight-transfer source {src.run_id} ({src.describe()}) has not finished")
        res = run(src, store.root)
    if res["status"] != "finished":
        raise SourceDidNotConverge(
            f"weight-transfer source {src.run_id} ({src.describe()}) did not converge: {res.get('diverged_reason')}"
        )
    conventional = task.build_model(src)
    if is_quadratic(conventional):
        raise ValueError(
            f"weight transfer starts from a conventional network; source {src.run_id} ({src.model}) "
            "has quadratic layers, and such runs keep no stage weights"
        )
    name = f"stage{cfg.transfer_stage}.pt"
    try:
        ck = store.load_checkpoint(src, name)
    except CorruptFile:
        # The source's stage weights are damaged: redo the source (its result goes aside too, with a
        # note, never deleted).
        result_json = store.dir(src) / "result.json"
        if result_json.exists():
            quarantine(result_json, f"its {name} was corrupt: the source is redone")
        if not run_dependencies:
            raise DependencyNotReady(
                f"weight-transfer source {src.run_id}: {name} was corrupt; redo it first"
            ) from None
        run(src, store.root)
        ck = store.load_checkpoint(src, name)
    if ck is None:
        raise DependencyNotReady(f"source run {src.run_id} has no {name} (stages: {res['stage_checkpoints']})")
    if src.task != cfg.task or src.dataset != cfg.dataset:
        raise ValueError(
            f"weight transfer needs the same task and data; source {src.run_id} has "
            f"{src.task}/{src.dataset}, this run {cfg.task}/{cfg.dataset}"
        )
    conventional.load_state_dict(ck["model"])
    relinear.transfer_weights_(conventional, model)


def run(
    config: RunConfig | dict | None = None,
    out: str | os.PathLike = "runs",
    *,
    run_dependencies: bool = True,
    same_world: bool = False,
    **overrides,
) -> dict:
    """Train ``config`` into ``out/<run_id>/`` (or return its stored result); see the module doc.

    ``run_dependencies=False`` raises :class:`DependencyNotReady` instead of training a missing
    weight-transfer source first (what the cluster runners use: the source is its own job).
    ``same_world=True`` (the CLI: its user chose the number of processes) refuses a stored result
    trained by another number of processes (:class:`~.store.WorldSizeMismatch`); by default the
    configuration's result is returned however it was trained (it records ``world_size``).
    """
    cfg = _as_config(config, overrides)
    store = RunStore(out)
    data = requested_data(cfg)
    rank, nranks = world()
    asked_world = nranks if same_world else None
    done = store.result(cfg, data, asked_world)
    if done is not None:
        return done
    if nranks == 1:
        with store.lock(cfg.run_id):  # one configuration, one training: others wait here, then reuse it
            done = store.result(cfg, data, asked_world)
            return done if done is not None else _train(cfg, store, rank, nranks, run_dependencies, data)
    # Every rank decides together: rank 0 looks (without waiting on the lock) and says; while another
    # process holds the run, all ranks wait here, meeting every few seconds, instead of ranks 1..N
    # waiting for rank 0 inside DDP's constructor until NCCL's watchdog ends the job.
    while True:
        held, decision = contextlib.ExitStack(), None
        if rank == 0:
            try:
                held.enter_context(store.lock(cfg.run_id, timeout=0))
                decision = "done" if store.result(cfg, data, asked_world) is not None else "train"
            except TimeoutError:
                decision = "wait"
            except OSError as e:  # no locks on this file system, ...: every rank fails with it
                decision = e
            if decision != "train":
                held.close()
        decision = agree(decision)
        if isinstance(decision, OSError):
            raise decision
        if decision == "train":
            with held:
                return _train(cfg, store, rank, nranks, run_dependencies, data)
        if decision == "done":
            return store.result(cfg, data, asked_world)
        time.sleep(RANKS_POLL_S)


RANKS_POLL_S = 5.0  # how often the ranks of a run another process holds look again


def _device(cfg: RunConfig) -> torch.device:
    """The rank's compute device (:func:`.distributed.compute_device`), made current, with the
    run's CUDA settings."""
    device = compute_device(cfg.device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = cfg.cudnn_benchmark
        torch.backends.cuda.matmul.allow_tf32 = cfg.tf32
        torch.backends.cudnn.allow_tf32 = cfg.tf32
    return device


BUDGETS = (2.0, 1.0, 0.0)  # what a CUDA run tries, most kept first: speed, fast-or-lean per layer, lean
MEMORY_HEADROOM = 0.85  # of the device's memory: cuDNN workspaces, the allocator's fragmentation, the batch


def _plan_for_device(model: nn.Module, cfg: RunConfig, device: torch.device, task, nranks: int = 1) -> float | None:
    """What quadratic layers keep for backward: ``cfg.recompute_budget``, or on CUDA the largest of
    :data:`BUDGETS` whose step fits the device's memory (:func:`step_bytes`; 2.0, keep everything,
    whenever it fits: recomputing spends convolutions), said in one line on stderr. Numerics do not
    change. Returns the budget applied (None: the model's own plan)."""
    budget = cfg.recompute_budget
    if "recompute_budget" in cfg.model_kwargs:
        return None
    shape = task.train_input()
    if budget is None and on_cuda(device):
        budget = BUDGETS[0]
        if shape is not None and is_quadratic(model):
            budget = _budget_for_memory(model, cfg, device, shape, max(1, cfg.batch_size // nranks))
    if budget is not None:
        from quadnn import plan_recompute

        plan_recompute(model, torch.zeros(1, *(shape or (task.in_chans, 64, 64))), budget=budget)
    _pick_implementation(model, cfg, device, keeps_all=budget is None or budget >= BUDGETS[0])
    return budget


# The fastest implementation measured where every layer keeps what it needs (nothing recomputed),
# by device type and whether the step is compiled; a key not listed keeps the layers' default.
# CUDA, eager: three convolutions ("naive") beat the joined [r, g] one with its custom backward
# ("speed"): QResNet20's step 2.17x against 2.57x the conventional one on an H200
# (docs/gpu/2026-11-26-h200-gpu-check/bench.json), 2.02x against 2.24x on an H100 (2026-11-25);
# on a CPU "speed" is faster (quadnn.recompute's frontier). Compiled, inductor fuses either.
FASTEST = {("cuda", False): "naive"}


def _pick_implementation(model: nn.Module, cfg: RunConfig, device: torch.device, keeps_all: bool) -> str | None:
    """Sets the quadratic layers' implementation: ``cfg.implementation``, or for "auto" the
    :data:`FASTEST` on this device when nothing is recomputed. Returns what was set (None: unchanged)."""
    impl = cfg.implementation
    if impl == "auto":
        impl = FASTEST.get((device.type, bool(cfg.compile))) if keeps_all else None
    if impl is None:
        return None
    for m in model.modules():
        if isinstance(m, QuadraticLayer):
            m.implementation = impl
    return impl


def auto_implementation(device_type: str, compiled: bool = False) -> str:
    """What "auto" runs quadratic layers as on ``device_type`` when nothing is recomputed: the
    :data:`FASTEST` measured there, else the layers' own default (for the report)."""
    return FASTEST.get((device_type, compiled), QuadraticLayer.implementation)


def _budget_for_memory(model, cfg, device, shape, per_rank: int) -> float:
    total = torch.cuda.get_device_properties(device).total_memory
    need = {}
    for budget in BUDGETS:
        need[budget] = step_bytes(model, shape, per_rank, budget, cfg.optimizer)
        if need[budget] <= MEMORY_HEADROOM * total:
            break
    gb = lambda b: f"{b / 2**30:.1f} GB"  # noqa: E731
    tried = ", ".join(f"budget {b:g}: {gb(n)}" for b, n in need.items())
    fits = need[budget] <= MEMORY_HEADROOM * total
    print(
        f"quadnn: recompute budget {budget:g} on {device} ({gb(total)}, {per_rank} images of {'x'.join(map(str, shape))} "
        f"per step; estimated {tried})"
        + ("" if fits else " - does not fit even recomputing everything: fewer images per GPU or a larger GPU"),
        file=sys.stderr,
        flush=True,
    )
    return budget


def step_bytes(model: nn.Module, shape, batch: int, budget: float, optimizer: str = "sgd") -> int:
    """Estimated peak bytes of one training step of ``model`` at ``batch`` images of ``shape``
    (C, H, W) with its quadratic layers planned at ``budget``: the tensors autograd saves for
    backward (each storage once, measured on the meta device, so nothing is computed) plus
    parameters, gradients and optimiser state (AdamW two buffers, SGD one)."""
    import copy

    from quadnn import plan_recompute

    meta = copy.deepcopy(model).to("meta")
    example = torch.zeros(1, *shape, device="meta")
    plan_recompute(meta, example, budget=budget)

    def key(t):
        try:
            return t.untyped_storage()._cdata
        except (RuntimeError, NotImplementedError):
            return id(t)

    weights = {key(p) for p in meta.parameters()}  # saved by the layers, counted below once
    seen: dict[int, int] = {}

    def pack(t):
        if key(t) not in weights:
            seen[key(t)] = max(seen.get(key(t), 0), t.numel() * t.element_size())
        return t

    meta.train()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        meta(torch.zeros(batch, *shape, device="meta", requires_grad=False))
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    states = 2 if optimizer in ("adam", "adamw") else 1
    return sum(seen.values()) + params * (2 + states)


class EpochTotals:
    """Summed loss, correct predictions and images of this rank's epoch. Each step's loss and count
    stay on the compute device as they are (adding costs no launch and never waits for the GPU);
    :meth:`reduce` reads them once, sums them in float64 in step order (the sums a float64
    accumulator on the device would hold, bit for bit) and sums those over the ranks."""

    def __init__(self, device: torch.device):
        self.device = device
        self.losses: list[torch.Tensor] = []
        self.correct: list[torch.Tensor] = []
        self.images = 0

    def add(self, loss: torch.Tensor, correct: torch.Tensor | None, n: int) -> None:
        self.losses.append(loss.detach())
        if correct is not None:
            self.correct.append(correct)
        self.images += n

    def reduce(self, nranks: int) -> list[float]:
        tot = [_ordered_sum(self.losses), _ordered_sum(self.correct), float(self.images)]
        if nranks > 1:
            summed = torch.tensor(tot, dtype=torch.float64).to(self.device)
            all_reduce(summed, self.device)
            tot = summed.cpu().tolist()
        return tot


def _ordered_sum(values: list[torch.Tensor]) -> float:
    """The float64 sum of 0-dim tensors, added one after another (one read from the device)."""
    total = 0.0
    for v in torch.stack(values).double().cpu().tolist() if values else ():
        total += v
    return total


@dataclasses.dataclass
class _Training:
    """What the phases of one training share (torchvision's references pass the same between
    train_one_epoch and evaluate): the run, its task and device, the model (``net``: as stepped,
    wrapped by DDP or compiled) and its optimiser with the ReLinear steps that follow each update."""

    cfg: RunConfig
    store: RunStore
    task: object
    device: torch.device
    rank: int
    nranks: int
    data: str | None
    model: nn.Module
    net: nn.Module
    opt: torch.optim.Optimizer
    ref_decay: object
    shrink: object
    layout: torch.memory_format
    total_steps: int
    step: int = 0
    seeds: dict = dataclasses.field(default_factory=dict)  # backward's seed per loss scale (see _seed)
    compile_seconds: float | None = None  # the first compiled step's time in this process

    @property
    def cudagraphs(self) -> bool:
        return self.cfg.compile and self.cuda and self.nranks == 1  # mode="reduce-overhead" (see _compiled)

    @property
    def cuda(self) -> bool:
        return on_cuda(self.device)


def _train(
    cfg: RunConfig, store: RunStore, rank: int, nranks: int, run_dependencies: bool, data: str | None = None
) -> dict:
    """Build, resume, train epoch by epoch (each checkpointed but the last, whose result follows), evaluate, record."""
    # No more intra-op threads than CPUs this task may run on (a SLURM step may bind it to fewer
    # than OMP_NUM_THREADS says): more only spin against each other and the loader's workers.
    torch.set_num_threads(min(cfg.threads or torch.get_num_threads(), task_cpus()))
    device = _device(cfg)
    task = make_task(cfg, rank, nranks, device)
    if data is None:  # generated data (written by the task just now), or data absent when asked
        data = data_fingerprint(cfg)
    model = _initial_model(cfg, task)
    if cfg.transfer_from is not None:
        try:
            _transfer(cfg, store, model, task, run_dependencies)
        except SourceDidNotConverge as e:
            params = sum(p.numel() for p in model.parameters())
            return _record(cfg, store, rank, nranks, task, data, _not_converged(str(e), params))
    t, start_epoch, history = _prepare(cfg, store, task, device, rank, nranks, data, model)
    stages, status, reason = kept_stages(cfg, model), "finished", None
    evaluated: dict = {}
    stage_ckpts = {str(i + 1): f"stage{i + 1}.pt" for i, e in enumerate(stages) if e <= start_epoch}
    bar = None
    if cfg.progress and rank == 0:
        from tqdm.auto import tqdm

        bar = tqdm(total=cfg.epochs, initial=start_epoch, desc=f"{cfg.describe()} {cfg.run_id}", leave=False)
    for epoch in range(start_epoch, cfg.epochs):
        rec, status, reason = _train_one_epoch(t, epoch)
        if status == "finished" and ((task.eval_every_epoch and cfg.eval_every_epoch) or epoch + 1 == cfg.epochs):
            evaluated, seconds = _evaluate(t)
            rec.update(evaluated, eval_time=seconds)
        history.append(rec)
        if bar is not None:
            bar.update(1)
            shown = rec.get(task.headline)
            loss = rec["train_loss"]
            bar.set_postfix(
                loss="nan" if loss is None else f"{loss:.3f}",
                **({task.headline: f"{shown:.3g}"} if shown is not None else {}),
            )
        if status == "diverged":
            break
        _end_of_epoch(t, epoch, history, stages, stage_ckpts)
    if bar is not None:
        bar.close()
    if status == "finished" and history and not evaluated:  # resumed after the last epoch's checkpoint
        evaluated, _ = _evaluate(t)
        history[-1].update(evaluated)
    return _record(cfg, store, rank, nranks, task, data, _finish(t, status, reason, history, evaluated, stage_ckpts))


def _initial_model(cfg: RunConfig, task) -> nn.Module:
    """The run's model at its own draw at ``cfg.seed``, with the conventional twin's linear weights
    when it has one (``init_twin``); a weight transfer (``transfer_from``) follows in :func:`_train`."""
    torch.manual_seed(cfg.seed)
    model = task.build_model()
    if cfg.init_twin is not None:
        # The paired design: the conventional twin's initial weights, drawn exactly as its own run
        # draws them, become this model's linear branch (quadratic terms at their reference).
        torch.manual_seed(cfg.seed)
        relinear.transfer_weights_(task.build_model(cfg.replace(model=cfg.init_twin)), model)
    if cfg.quadratic_init == "random":  # trained without ReLinear: the terms start drawn, not at reference
        relinear.random_init_(model)
    return model


def _not_converged(reason: str, params: int) -> dict:
    """The result of a run whose transfer source diverged: nothing trained, nothing to report."""
    return dict(
        status="diverged",
        diverged_reason=reason,
        params=params,
        epochs_run=0,
        metrics={},
        epoch_time=0.0,
        stage_checkpoints={},
        history=[],
    )


def _prepare(cfg, store, task, device, rank, nranks, data, model) -> tuple[_Training, int, list]:
    """The model on its device (recompute plan, synchronised BN, layout), its optimiser, and the
    state of the last checkpoint when there is one: (training, first epoch, history so far)."""
    _plan_for_device(model, cfg, device, task, nranks)
    synced = nranks > 1 and (cfg.task == "classification" or cfg.sync_bn)
    if synced:
        model = sync_batchnorm(model, device)
    layout = torch.channels_last if on_cuda(device) and cfg.channels_last else torch.preserve_format
    model.to(device, memory_format=layout)
    opt, ref_decay, shrink = build_optimizer(cfg, model, task)
    history: list[dict] = []
    start_epoch, step = 0, 0
    out = store.dir(cfg)
    try:
        ck = store.load_checkpoint(cfg, "last.pt", data)
    except CorruptFile:
        ck = None  # damaged, another run's, or other data's: reported and moved aside; start from scratch
    if ck is not None and ck.get("world_size", 1) != nranks:  # (older checkpoints: one process)
        raise WorldSizeMismatch(
            f"{out / 'last.pt'} was trained by {ck.get('world_size', 1)} process(es), this run has {nranks}: "
            "resuming would mix two trainings whose numbers differ. Finish it with as many processes, or "
            f"train this one into another cache directory"
        )
    if ck is not None:
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        start_epoch, step, history = ck["epoch"], ck["step"], ck["history"]
        torch.set_rng_state(ck["rng"])
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / "config.json", json.dumps(cfg.to_dict(), indent=1))
    net: nn.Module = model
    if nranks > 1:
        # Without synchronised BN every rank would keep its own running statistics and only rank 0's
        # are saved: broadcast rank 0's at each forward so the ranks evaluate what is saved.
        net = nn.parallel.DistributedDataParallel(model, broadcast_buffers=not synced)
    if cfg.compile:
        net = _compiled(net, store, device, nranks)
    if task.steps_per_epoch() == 0:
        raise ValueError(f"{cfg.describe()}: no full batch of {cfg.batch_size} images to train on (drop_last)")
    total_steps = cfg.epochs * task.steps_per_epoch()
    t = _Training(
        cfg, store, task, device, rank, nranks, data, model, net, opt, ref_decay, shrink, layout, total_steps, step
    )
    return t, start_epoch, history


def _compiled(net: nn.Module, store: RunStore, device: torch.device, nranks: int = 1) -> nn.Module:
    """``torch.compile`` of the stepped model: on one GPU under CUDA graphs (``reduce-overhead``:
    each step's kernels replayed as one graph; the batches have one shape, ``cfg.drop_last``; DDP's
    collectives in backward keep torch.compile's default mode). Inductor's
    caches live beside the run cache (``TORCHINDUCTOR_CACHE_DIR``, unless set), so the compilation
    is paid once per model and shape by every job that shares the cache, local or SLURM."""
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(store.root.resolve() / "inductor"))
    return torch.compile(net, mode="reduce-overhead" if on_cuda(device) and nranks == 1 else None)


def _train_one_epoch(t: _Training, epoch: int) -> tuple[dict, str, str | None]:
    """One epoch of updates: its record (loss, error, learning rates, time) and whether the run
    diverged in it (status "finished" or "diverged", and why)."""
    cfg, task, device, opt, nranks = t.cfg, t.task, t.device, t.opt, t.nranks
    t.net.train()
    lrs = {g["name"]: g["initial_lr"] * lr_factor(cfg, epoch, t.step, t.total_steps) for g in opt.param_groups}
    tot = EpochTotals(device)
    has_correct = False
    t0 = time.perf_counter()
    # No step asks the device anything (a GPU would stop to answer): a non-finite loss reaches
    # the epoch's sum, which is read, with the parameters' finiteness, after the last step.
    compiling = cfg.compile and t.compile_seconds is None  # this process's first compiled step comes
    compiled_now = compiling
    for x, y, n_global in task.train_batches(epoch):
        t1 = time.perf_counter()
        loss, correct = _train_step(t, epoch, x, y, n_global)
        if compiling:  # compiled (forward and backward) and run once: what the run pays for compiling
            if t.cuda:
                torch.cuda.synchronize(device)
            t.compile_seconds, compiling = time.perf_counter() - t1, False
        has_correct = correct is not None
        tot.add(loss, correct, len(x))
    if t.cuda:
        torch.cuda.synchronize(device)  # the epoch's kernels, not just their launches, in its time
    train_time = time.perf_counter() - t0
    tot = tot.reduce(nranks)
    train_loss = tot[0] / tot[2]
    finite_params = all(torch.isfinite(p).all() for p in t.model.parameters())
    rec = dict(
        epoch=epoch + 1, train_loss=train_loss if math.isfinite(train_loss) else None, lr=lrs, epoch_time=train_time
    )
    if has_correct:
        rec["train_error"] = 100.0 - 100.0 * (tot[1] / tot[2])
    if compiled_now and t.compile_seconds is not None:
        rec["compile_seconds"] = t.compile_seconds  # in the epoch (of this process) that paid it
    status, reason = "finished", None
    if not math.isfinite(train_loss) or not finite_params:
        status, reason = "diverged", "non-finite loss or parameters"
    elif task.divergence_limit is not None and train_loss > task.divergence_limit:
        status = "diverged"
        reason = (
            f"mean training loss {train_loss:.3g} > {cfg.diverge_factor:g} "
            f"ln({task.num_classes}) = {task.divergence_limit:.3g}"
        )
    return rec, status, reason


def _train_step(t: _Training, epoch: int, x, y, n_global: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One update: the step's learning rates, forward, the task's summed loss (and correct count),
    backward of its share of the global mean, the optimiser, ReLinear's decay and shrink. Returns the
    loss and count as tensors on the device; nothing here waits for the device."""
    cfg, opt, device = t.cfg, t.opt, t.device
    factor = lr_factor(cfg, epoch, t.step, t.total_steps)
    for g in opt.param_groups:
        g["lr"] = g["initial_lr"] * factor
    x = x.to(device, non_blocking=True, memory_format=t.layout)
    y = tuple(v.to(device, non_blocking=True) for v in y) if isinstance(y, tuple) else y.to(device, non_blocking=True)
    if t.cudagraphs:  # a new iteration: the previous step's graph outputs are no longer read
        torch.compiler.cudagraph_mark_step_begin()
    with _autocast(device, cfg.amp):
        outputs = t.net(x)
    loss, correct = t.task.loss(outputs, y)
    opt.zero_grad(set_to_none=True)
    # d(loss * nranks / n_global)/d(loss) as backward's seed: the gradients of the scaled loss, bit
    # for bit, without the product and its backward (the seed is made once per batch size)
    loss.backward(_seed(t, t.nranks / n_global, loss))
    opt.step()
    t.ref_decay.step()
    if t.shrink is not None:
        t.shrink.step()
    t.step += 1
    return loss, correct


def _seed(t: _Training, scale: float, loss: torch.Tensor) -> torch.Tensor:
    key = (scale, loss.dtype, loss.device)
    if key not in t.seeds:
        t.seeds[key] = torch.full((), scale, dtype=loss.dtype, device=loss.device)
    return t.seeds[key]


def _evaluate(t: _Training) -> tuple[dict, float]:
    """The task's metrics of the saved model (rank 0's batch-norm statistics on every rank) and the
    seconds they took."""
    if t.nranks > 1:  # each rank's last forward updated its own BN statistics: evaluate rank 0's
        broadcast_buffers(t.model)
    t1 = time.perf_counter()
    evaluated = t.task.evaluate(t.model, t.device, t.cfg.amp)
    return evaluated, time.perf_counter() - t1


def _end_of_epoch(t: _Training, epoch: int, history: list, stages: list, stage_ckpts: dict) -> None:
    """Checkpoint the epoch (rank 0): a kept stage's weights when it ends one (:func:`kept_stages`),
    ``last.pt`` (model, optimiser, step, history, RNG) but after the last epoch, and the metrics so
    far; then the ranks meet. After the last epoch the result is written at once and ``last.pt``
    removed, so writing it would only double the disk a run takes at its end (a quadratic LapDepth's
    is 3.2 GB with AdamW's moments); a crash in between retrains that one epoch."""
    cfg, store, data = t.cfg, t.store, t.data
    if t.rank == 0:
        if epoch + 1 in stages:
            k = str(stages.index(epoch + 1) + 1)
            store.save_checkpoint(cfg, f"stage{k}.pt", dict(model=t.model.state_dict(), epoch=epoch + 1), data)
            stage_ckpts[k] = f"stage{k}.pt"
        if epoch + 1 < cfg.epochs:
            state = dict(
                model=t.model.state_dict(),
                optimizer=t.opt.state_dict(),
                epoch=epoch + 1,
                step=t.step,
                history=history,
                rng=torch.get_rng_state(),
                world_size=t.nranks,
            )
            store.save_checkpoint(cfg, "last.pt", state, data)
        atomic_write_text(store.dir(cfg) / "metrics.json", json.dumps(history, indent=1))
    if t.nranks > 1:
        dist.barrier()


def _finish(t: _Training, status: str, reason: str | None, history: list, evaluated: dict, stage_ckpts: dict) -> dict:
    """The run's result from its history: the last evaluation's metrics when it finished."""
    last = history[-1] if history else {}
    final = {k: last[k] for k in evaluated} if status == "finished" else {}
    result = dict(
        status=status,
        diverged_reason=reason,
        params=sum(p.numel() for p in t.model.parameters()),
        epochs_run=len(history),
        metrics=final,
        epoch_time=sum(h["epoch_time"] for h in history) / max(1, len(history)),
        stage_checkpoints=stage_ckpts,
        history=history,
        **final,
    )
    impls = sorted({m.implementation for m in t.model.modules() if isinstance(m, QuadraticLayer)})
    if impls:  # how the quadratic layers computed (the timings depend on it, the numbers do not)
        result["implementation"] = "+".join(impls)
    if t.cfg.compile:  # every compilation this run paid (a resumed run compiles again)
        result["compile_seconds"] = sum(h.get("compile_seconds", 0.0) for h in history)
    if t.task.eval_every_epoch and t.cfg.eval_every_epoch and "test_error" in last:
        result["best_test_error"] = min((h["test_error"] for h in history if "test_error" in h), default=None)
    if status == "finished":  # how far the quadratic terms moved from the linear twin (None: no terms)
        moved = departure.measure(t.model, t.task, t.device, t.cfg.amp)
        if moved is not None:
            result["departure"] = moved
    return result


def _record(cfg: RunConfig, store: RunStore, rank: int, nranks: int, task, data: str | None, result: dict) -> dict:
    """Complete ``result`` (identity, data, provenance), write it last (rank 0), return its JSON round-trip."""
    result = dict(
        result,
        run_id=cfg.run_id,
        config=cfg.to_dict(),
        key=cfg.key(),
        data_fingerprint=data,
        world_size=nranks,
        trained_by=dict(host=socket.gethostname(), pid=os.getpid()),
    )
    if result["status"] != "finished" and task.headline not in result:
        result[task.headline] = None
    if rank == 0:
        out = store.dir(cfg)
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / "metrics.json", json.dumps(result["history"], indent=1))
        store.write_result(cfg, result)
        (out / "last.pt").unlink(missing_ok=True)
    if nranks > 1:
        dist.barrier()
    return json.loads(json.dumps(result))  # the same JSON round-trip as a cache hit
