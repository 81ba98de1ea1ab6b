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


def execute(runs: list[RunConfig], out: str | os.PathLike, runner: str = "inline", wait: bool = True,
            progress: bool = True, **runner_options) -> dict[str, dict | None]:
    """Results of ``runs`` by run id (None: not done yet); see the module doc."""
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
        from . import runners

        runners.execute_runs(todo, Path(out), runner, wait=wait, **runner_options)
    return {cfg.run_id: store.result(cfg) for cfg in todo}


def pending_note(results: dict[str, dict | None], runs: list[RunConfig]) -> str | None:
    """"pending (k of n runs)" when some of ``runs`` have no result yet, else None."""
    missing = sum(results.get(c.run_id) is None for c in runs)
    return f"pending ({missing} of {len(runs)} runs)" if missing else None
