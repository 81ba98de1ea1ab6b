"""Execute a section's runs through a runner and collect what is done.

``execute(runs, out, runner="inline")`` makes sure every run (and every run it depends on)
is done or submitted, and returns ``{run_id: result or None}``: None where a run is still
pending, queued or running (a notebook then shows "pending (k of n runs)" instead of blocking
for days). ``inline`` trains in this process, dependencies first; ``local`` and ``slurm``
submit through :mod:`quadnn_paper.runners`, keyed by run id so nothing is trained twice.
"""
from __future__ import annotations

import os
from pathlib import Path

from .engine import RunConfig, RunStore, run

__all__ = ["RUNNERS", "with_dependencies", "execute", "pending_note"]

RUNNERS = ("inline", "local", "slurm")


def with_dependencies(runs: list[RunConfig]) -> list[RunConfig]:
    """``runs`` plus everything they depend on, each once, sources before dependents."""
    order: dict[str, RunConfig] = {}

    def visit(cfg: RunConfig):
        for dep in cfg.dependencies():
            visit(dep)
        order.setdefault(cfg.run_id, cfg)

    for cfg in runs:
        visit(cfg)
    return list(order.values())


def execute(runs: list[RunConfig], out: str | os.PathLike, runner: str = "inline", wait: bool | None = None,
            progress: bool = True, gpus: int | None = None, **runner_options) -> dict[str, dict | None]:
    """Results of ``runs`` by run id (None: not done yet); see the module doc.

    ``wait``: block until every submitted run has ended (default: yes for ``inline`` and
    ``local``, whose queue lives in this process; no for ``slurm``: submit and return).
    ``gpus``: GPUs per run (default :func:`gpus_per_run`). ``runner_options`` go to the runner
    (e.g. ``workers`` for ``local``; ``partition``, ``time_min``, ... for ``slurm``).
    """
    if wait is None:
        env = os.environ.get("QUADNN_WAIT", "")
        wait = env not in ("", "0") if env else runner != "slurm"
    if runner not in RUNNERS:
        raise ValueError(f"runner must be one of {RUNNERS}, got {runner!r}")
    todo = with_dependencies(runs)
    store = RunStore(out)
    if runner == "inline":
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(todo), desc="runs", unit="run")
        try:
            for cfg in todo:
                run(cfg, out)
                if bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
    else:
        r = make(runner, out, **runner_options)
        keys = [cfg.run_id for cfg in todo]
        # The local queue cannot give a job more GPUs than this machine has.
        max_gpus = None
        if runner == "local":
            from .runners import _visible_gpus

            max_gpus = len(runner_options.get("gpus") or _visible_gpus()) or None
        states = r.submit(jobs(todo, out, gpus, max_gpus), is_done=is_done(out))
        if progress:
            print(f"{runner}: {len(r.last_submitted)} run(s) submitted; " + ", ".join(
                f"{n} {s}" for s, n in sorted(_count(states).items())), flush=True)
        if wait:
            states = r.wait(keys, is_done=is_done(out))
            failed = [k for k, s in states.items() if s == "failed"]
            for k in failed:
                print(f"run {k} failed; last lines of its log:\n{r.log_tail(k)}", flush=True)
    results = {cfg.run_id: store.result(cfg) for cfg in todo}
    missing = [c for c in runs if results[c.run_id] is None]
    if missing:
        note = pending_note(results, runs)
        print(f"{note}: see `make status` (python -m quadnn_paper.status)", flush=True)
        if os.environ.get("QUADNN_PENDING"):  # tells `make paper` this notebook is not complete yet
            with open(os.environ["QUADNN_PENDING"], "a") as f:
                f.write(f"{note}\n")
    return results


def _count(states: dict[str, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in states.values():
        out[s] = out.get(s, 0) + 1
    return out


def job_dir(out: str | os.PathLike) -> Path:
    """Where runners keep their submission records and logs: ``<cache>/.jobs``."""
    return Path(out) / ".jobs"


def make(runner: str, out: str | os.PathLike, **options):
    from .runners import make_runner

    return make_runner(runner, job_dir(out), **options)


def is_done(out: str | os.PathLike):
    """The runners' notion of done: the run's result is stored (finished or did not converge)."""
    root = Path(out)
    return lambda key: (root / key / "result.json").exists()


class TrainRun:
    """A picklable job: train one configuration into ``out`` (resuming from its checkpoint).

    Its weight-transfer source is a job of its own, so it is never trained from here. Under a
    multi-task SLURM job or ``local`` with several tasks, torch.distributed is initialised from
    the environment the runner set.
    """

    def __init__(self, cfg: RunConfig, out: str | os.PathLike):
        # Absolute paths: the job may start in another working directory (data_dir is not hashed).
        self.cfg = cfg.replace(data_dir=str(Path(cfg.data_dir).resolve()))
        self.out = str(Path(out).resolve())

    def __call__(self) -> str:
        from .runners import init_distributed

        ddp = init_distributed()
        try:
            res = run(self.cfg, self.out, run_dependencies=False)
        finally:
            if ddp:
                import torch.distributed as dist

                dist.destroy_process_group()
        return res["status"]

    def __repr__(self) -> str:
        return f"TrainRun({self.cfg.describe()} {self.cfg.run_id})"


def gpus_per_run(default: int | None = None) -> int:
    """GPUs a run gets: ``QUADNN_GPUS_PER_RUN``, else 1 where this machine has CUDA, else 0 (CPU)."""
    if default is not None:
        return int(default)
    env = os.environ.get("QUADNN_GPUS_PER_RUN")
    if env:
        if not env.isdigit():
            raise ValueError(f"QUADNN_GPUS_PER_RUN must be a non-negative integer, got {env!r}")
        return int(env)
    import torch

    return 1 if torch.cuda.is_available() else 0


def resources(cfg: RunConfig, gpus: int, max_gpus: int | None = None) -> dict:
    """GPUs and tasks a run asks for: the paper trained ImageNet with 8 GPUs (DDP, one task each;
    fewer where the machine has fewer, ``max_gpus``: the global batch is the same), the other
    runs with one; ``gpus=0`` runs everything on CPU (one task)."""
    if gpus == 0 or cfg.device == "cpu":
        return dict(gpus=0, tasks_per_node=1)
    if cfg.task == "imagefolder" and cfg.dataset == "imagenet":
        n = 8 * gpus if max_gpus is None else max(1, min(8 * gpus, max_gpus))
        return dict(gpus=n, tasks_per_node=n)
    return dict(gpus=gpus, tasks_per_node=1)


def jobs(runs: list[RunConfig], out: str | os.PathLike, gpus: int | None = None,
         max_gpus: int | None = None) -> list:
    """The runners' jobs for ``runs`` (keys: run ids; deps: weight-transfer sources)."""
    from .runners import Job

    gpus = gpus_per_run(gpus)
    return [Job(key=c.run_id, fn=TrainRun(c, out), deps=tuple(d.run_id for d in c.dependencies()),
                name=c.describe().replace(" ", "_"), **resources(c, gpus, max_gpus)) for c in runs]


def pending_note(results: dict[str, dict | None], runs: list[RunConfig]) -> str | None:
    """"pending (k of n runs)" when some of ``runs`` have no result yet, else None."""
    missing = sum(results.get(c.run_id) is None for c in runs)
    return f"pending ({missing} of {len(runs)} runs)" if missing else None
