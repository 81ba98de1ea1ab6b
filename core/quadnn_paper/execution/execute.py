"""Execute a section's runs through a runner and collect what is done.

``execute(runs, out, runner="inline")`` makes sure every run (and every run it depends on) is done
or submitted, and returns ``{run_id: result or None}``: None where a run is still pending, queued
or running (a notebook then shows "pending (k of n runs)" instead of blocking for days).
``inline`` trains in this process, dependencies first; ``local`` and ``slurm`` submit through
:mod:`.runners`, keyed by run id so nothing is trained twice.

What a run asks for comes from its configuration, never from the machine that submits it
(:func:`resources`), capped at what the runner's machines have (``runner.max_gpus``).

A section's :class:`~quadnn_paper.engine.Computation` items go the same way (:func:`execute_work`),
as jobs keyed ``<name>.<hash>`` and cached under ``<cache>/<name>/``, except a CPU computation
estimated at most :data:`INLINE_SECONDS` (not worth a job) and a timing of this machine
(``measures_machine``, which must not share it): both run in this process.
"""

from __future__ import annotations

import io
import os
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from ..common.files import inside
from ..common.outputs import pending_text
from ..common.words import env_boolean, path_setting
from .progress import Progress
from .runners import RUNNERS, Job, make_runner

if TYPE_CHECKING:  # the engine (torch) is imported where it is used: job processes start without it
    from ..engine import Computation, RunConfig

__all__ = [
    "RUNNERS",
    "with_dependencies",
    "execute",
    "execute_work",
    "pending_note",
    "resources",
    "jobs",
    "make",
    "job_dir",
    "is_done",
    "TrainRun",
]

PROTOCOL_GPUS = {("imagefolder", "imagenet"): 8}  # (task, dataset) -> GPUs; others: 1
CPUS_PER_GPU = 8
MEM_GB_PER_GPU = 32
MEM_GB_CPU = 4
INLINE_SECONDS = 60  # a CPU computation estimated at most this long runs in the submitting process
RETRIES = 1  # while waiting: how often a job that ended without its result is submitted again


def with_dependencies(runs: list[RunConfig]) -> list[RunConfig]:
    """``runs`` plus everything they depend on, each once, sources before dependents."""
    from ..engine.work import needed_first

    return needed_first(runs, lambda cfg: cfg.dependencies(), lambda cfg: cfg.run_id)


def execute_work(
    work: list[RunConfig | Computation],
    cache_dir: str | os.PathLike,
    runner: str = "inline",
    **options,
) -> dict[str, object]:
    """Results of a section's work by key (a run's id, a computation's ``key``; None: not done
    yet): runs under ``<cache_dir>/runs``, computations under ``<cache_dir>/<name>``."""
    from ..engine import Computation

    computations = [w for w in work if isinstance(w, Computation)]
    runs = [w for w in work if not isinstance(w, Computation)]
    runs_dir = inside(path_setting(cache_dir, "cache_dir"), "runs", "runs folder")  # (no link planted there)
    return execute(runs, runs_dir, runner, computations=computations, **options)


def execute(
    runs: list[RunConfig],
    out: str | os.PathLike,
    runner: str = "inline",
    wait: bool | None = None,
    progress: bool = True,
    computations: list[Computation] = (),
    retries: int = RETRIES,
    label: str = "work",
    **runner_options,
) -> dict[str, dict | None]:
    """Results of ``runs`` by run id (None: not done yet), and of ``computations`` (cached beside
    ``out``) by key. ``wait``: block until every submitted job has ended (default ``QUADNN_WAIT``,
    else no for ``slurm`` only). ``retries``: while waiting, how many times a job that ended without
    its result is submitted again (each failure printed with its log's end; what still fails is
    named in the pending note). ``progress``: counts and time left under ``label`` (:mod:`.progress`).
    ``runner_options`` go to the runner (``workers``, ``gpus`` for ``local``; ``partition``, ... for ``slurm``).
    """
    if runner not in RUNNERS:
        raise ValueError(f"runner must be one of {RUNNERS}, got {runner!r}")
    if not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries must be a non-negative integer, got {retries!r}")
    if wait is None:
        wait = env_boolean("QUADNN_WAIT", default=runner != "slurm")
    from ..engine.work import with_needs

    todo = with_dependencies(runs)
    computations = with_needs(computations)
    cache, failures = Path(out).parent, {}
    done = is_done(out)
    items = [(c.key, "computation", c.describe(), c.seconds) for c in computations]
    items += [(cfg.run_id, "run", f"{cfg.describe()} [{cfg.run_id[:8]}]", cfg.epochs) for cfg in todo]
    quiet = {} if progress else dict(stream=io.StringIO(), tty=False)  # the report to nowhere
    shown = Progress(label, items, queue="SLURM" if runner == "slurm" else "", **quiet)
    shown.known_done(key for key in shown.items if done(key))
    with shown:
        if runner == "inline":
            for item in [*computations, *todo]:
                _here(item, shown, out)
        else:
            # A small CPU computation is not worth a job: it runs here, so its result is always there.
            # A timing of this machine runs here too, before any job of this call is submitted.
            quick = [c for c in computations if _in_process(c)]
            for c in quick:
                _here(c, shown, out)
            r = make(runner, out, **runner_options)
            work = jobs(todo, out, r.max_gpus) + [computation_job(c, cache) for c in computations if c not in quick]
            states = r.submit(work, is_done=done)
            if progress:
                counts = ", ".join(f"{n} {s}" for s, n in sorted(Counter(states.values()).items()))
                print(f"{runner}: {len(r.last_submitted)} run(s) submitted; {counts}", flush=True)
            shown.update(states)
            if wait:
                failures = _wait(r, work, out, shown, retries)
    results = {**_collected(todo, out), **{c.key: c.result(cache) for c in computations}}
    note = pending_note(results, [*runs, *computations])
    if note and failures:
        note += "; " + "; ".join(f"{key} {reason}" for key, reason in failures.items())
    if note:
        print(f"{note}: see `make status` (python -m quadnn_paper.execution.status)", flush=True)
        if os.environ.get("QUADNN_PENDING"):  # tells `make paper` this notebook is not complete yet
            with open(os.environ["QUADNN_PENDING"], "a") as f:
                f.write(f"{note}\n")
    return results


def _here(item: RunConfig | Computation, shown: Progress, out) -> None:
    """Compute ``item`` in this process (a run into ``out``, a computation beside it) unless it is
    done, telling ``shown`` as it starts and ends."""
    from ..engine import Computation, run, work_id

    key = work_id(item)
    if shown.state.get(key) == "done":
        return
    shown.start(key)
    ok = False
    try:
        item.compute(Path(out).parent) if isinstance(item, Computation) else run(item, out)
        ok = True
    finally:
        shown.finish(key, ok)


def _wait(r, work: list[Job], out, shown: Progress, retries: int) -> dict[str, str]:
    """Wait for ``work`` on runner ``r`` (its states reported to ``shown``), submitting what ended
    without its result again, up to ``retries`` times; ``{key: why}`` of what still has no result."""
    keys, done = [job.key for job in work], is_done(out)
    for attempt in range(retries + 1):
        states = r.wait(keys, is_done=done, on_states=shown.update)
        failed = {k: r.state(k, done) for k, s in states.items() if s in ("failed", "missing")}
        failures = {k: reason or state for k, (state, reason) in failed.items()}
        for key, why in failures.items():
            print(f"{key} ended without its result ({why}); last lines of its log:\n{r.log_tail(key)}", flush=True)
        if not failures or attempt == retries:
            break
        print(f"{r.name}: submitting {len(failures)} item(s) again (retry {attempt + 1} of {retries})", flush=True)
        r.submit(work, is_done=done)
    r.close()
    return failures


def _collected(runs: list[RunConfig], out: str | os.PathLike) -> dict[str, dict | None]:
    """The stored results of ``runs``, checked against their data here too (a stored result counts
    as done, so no job would check it), each data set fingerprinted once."""
    from ..engine import RunStore
    from ..engine.loop import requested_data

    seen: dict = {}

    def data(cfg):
        where = (cfg.task, cfg.dataset, cfg.data_dir, repr(sorted(cfg.task_kwargs.items())))
        if where not in seen:
            seen[where] = requested_data(cfg)
        return seen[where]

    store = RunStore(out)
    return {cfg.run_id: store.result(cfg, data(cfg)) for cfg in runs}


def job_dir(out: str | os.PathLike) -> Path:
    """Where runners keep this user's submission records and logs: ``<cache>/.jobs/<user>``
    (private to the user, since job pickles are loaded from it; ``.jobs`` itself is the team's)."""
    from ..common.files import user_dir

    return user_dir(Path(out) / ".jobs")


def make(runner: str, out: str | os.PathLike, **options):
    """The runner ``runner`` keeping its records under ``out``'s :func:`job_dir`."""
    return make_runner(runner, job_dir(out), **options)


class _ResultStored:
    """``is_done(key)``: the run's result is stored, or the computation's entry (keys
    ``<name>.<hash>``, beside the runs' folder); a class, so a job pickles without cloudpickle."""

    def __init__(self, root: Path):
        self.root = root

    def __call__(self, key: str) -> bool:
        name, dot, digest = key.rpartition(".")
        if dot:
            return (self.root.parent / name / f"{digest}.json").exists()
        return (self.root / key / "result.json").exists()


def is_done(out: str | os.PathLike):
    """The runners' notion of done: the run's result is stored (finished or did not converge)."""
    return _ResultStored(Path(out))


class TrainRun:
    """A picklable job: train one configuration into ``out``, resuming from its checkpoint (its
    weight-transfer source is a job of its own); several tasks join torch.distributed."""

    def __init__(self, cfg: RunConfig, out: str | os.PathLike):
        # Absolute paths: the job may start in another working directory (data_dir is not hashed).
        self.cfg = cfg.replace(data_dir=str(Path(cfg.data_dir).resolve()))
        self.out = str(Path(out).resolve())

    def __call__(self) -> str:
        from ..engine import run
        from ..engine.distributed import init_distributed

        ddp = init_distributed(self.cfg.device)
        try:
            return run(self.cfg, self.out, run_dependencies=False)["status"]
        finally:
            if ddp:
                import torch.distributed as dist

                dist.destroy_process_group()

    def __repr__(self) -> str:
        return f"TrainRun({self.cfg.describe()} {self.cfg.run_id})"


class ComputeJob:
    """A picklable job: compute one :class:`~quadnn_paper.engine.Computation` into the cache."""

    def __init__(self, computation: Computation, cache: str | os.PathLike):
        self.computation, self.cache = computation, str(Path(cache).resolve())

    def __call__(self) -> str:
        self.computation.compute(self.cache)
        return "done"

    def __repr__(self) -> str:
        return f"ComputeJob({self.computation.key})"


def _in_process(c: Computation) -> bool:
    """Whether a runner leaves ``c`` to the submitting process: a timing of this machine, or a small
    CPU computation whose inputs are all computed there too."""
    if c.measures_machine:
        return True
    return c.device == "cpu" and c.seconds <= INLINE_SECONDS and all(_in_process(n) for n in c.needs)


def computation_job(c: Computation, cache: str | os.PathLike) -> Job:
    """The runners' job for a computation: one GPU where it runs on ``cuda``, else one CPU; it
    follows the jobs of what it needs."""
    gpus = 1 if c.device == "cuda" else 0
    return Job(
        key=c.key,
        fn=ComputeJob(c, cache),
        deps=tuple(n.key for n in c.needs),
        gpus=gpus,
        name=c.name,
        cpus_per_task=CPUS_PER_GPU if gpus else 1,
        mem_gb=MEM_GB_PER_GPU if gpus else MEM_GB_CPU,
    )


def resources(cfg: RunConfig, max_gpus: int | None = None) -> dict:
    """GPUs, tasks, CPUs per task and memory (GB) a run asks for: ImageNet 8 GPUs (one DDP task
    each, as the paper trained it), every other GPU run one, ``device="cpu"`` runs none (override:
    ``QUADNN_GPUS_PER_RUN``), at most ``max_gpus``; :data:`CPUS_PER_GPU` CPUs per GPU (more when the
    run's loader has more workers) and :data:`MEM_GB_PER_GPU` memory."""
    env = os.environ.get("QUADNN_GPUS_PER_RUN", "")
    if env and not env.isdigit():
        raise ValueError(f"QUADNN_GPUS_PER_RUN must be a non-negative integer, got {env!r}")
    gpus = 0 if cfg.device == "cpu" else int(env) if env else PROTOCOL_GPUS.get((cfg.task, cfg.dataset), 1)
    if max_gpus is not None:
        gpus = min(gpus, max_gpus)
    if gpus == 0:
        return dict(gpus=0, tasks_per_node=1, cpus_per_task=cfg.threads or None, mem_gb=MEM_GB_CPU)
    tasks = gpus if (cfg.task, cfg.dataset) in PROTOCOL_GPUS else 1  # DDP: one task per GPU
    return dict(
        gpus=gpus,
        tasks_per_node=tasks,
        # workers="auto" (ImageNet) takes what the task is given (SLURM_CPUS_PER_TASK), so it asks no more
        cpus_per_task=max(CPUS_PER_GPU * gpus // tasks, (cfg.workers if isinstance(cfg.workers, int) else 0) + 1),
        mem_gb=MEM_GB_PER_GPU * gpus,
    )


def jobs(runs: list[RunConfig], out: str | os.PathLike, max_gpus: int | None = None) -> list[Job]:
    """The runners' jobs for ``runs`` (keys: run ids; deps: weight-transfer sources)."""
    return [
        Job(
            key=c.run_id,
            fn=TrainRun(c, out),
            deps=tuple(d.run_id for d in c.dependencies()),
            name=c.describe().replace(" ", "_"),
            **resources(c, max_gpus),
        )
        for c in runs
    ]


def pending_note(results: dict[str, dict | None], work: list) -> str | None:
    """ "pending (k of n runs)" (and ", j of m computations") when some of ``work`` has no result
    yet, else None."""
    from ..engine import Computation, work_id

    counts = []
    for kind in ("run", "computation"):
        items = [w for w in work if isinstance(w, Computation) == (kind == "computation")]
        missing = sum(results.get(work_id(w)) is None for w in items)
        if missing:
            counts.append((missing, len(items), kind))
    return pending_text(*counts) if counts else None
