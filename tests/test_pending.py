"""Every notebook that trains through the runners renders while none of its runs has finished.

The first pass of ``make paper RUNNER=slurm`` (no WAIT) submits every run and builds the report with
"pending" cells: each figure and table must draw from an empty or partial set of results. Here
every run is submitted to the real SLURM *held* (``sbatch --hold``), so none ever starts, and each
notebook must still finish at the smoke profile and report what it is waiting for.
"""

import os
import subprocess
import time
from pathlib import Path

import pytest
from notebook_run import NOTEBOOKS, run_notebook
from slurm_fixture import slurm_cluster  # noqa: F401


def trains_through_runners(nb: Path) -> bool:
    """Whether the notebook's section has engine runs at the smoke profile (the others' work is
    computations under a minute, which run in the submitting process, so nothing of theirs can be
    pending; their pending outputs are tested per section)."""
    from quadnn_paper.execution.sections import section_runs

    return bool(section_runs(nb.stem, "smoke"))


def held_jobs() -> set[str]:
    # %F: the array's id for an array's tasks (scancel takes it for all of them), else the job's
    out = subprocess.run(["squeue", "-h", "-t", "PD", "-o", "%F %r"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.endswith("JobHeldUser")}


@pytest.mark.slow
def test_every_notebook_renders_with_every_run_pending(slurm_cluster, tmp_path):
    before = held_jobs()
    failed, waiting = {}, {}
    try:
        for nb in filter(trains_through_runners, NOTEBOOKS):
            started = time.monotonic()
            pending = tmp_path / f"{nb.stem}.pending"
            env = {k: v for k, v in os.environ.items() if k != "QUADNN_WAIT"}
            env.update(
                QUADNN_PENDING=str(pending), QUADNN_SLURM_SBATCH="--hold", QUADNN_GENERATED=str(tmp_path / "data")
            )
            ran = run_notebook(nb, tmp_path, tmp_path / "paper", tmp_path / "cache", dict(runner="slurm"), env)
            if ran.returncode != 0:
                failed[nb.name] = ran.stderr[-2500:]
            waiting[nb.stem] = pending.exists() and pending.read_text().strip()
            print(f"{nb.stem}: {time.monotonic() - started:.1f} s, {waiting[nb.stem] or 'nothing pending'}")
    finally:
        held = held_jobs() - before
        if held:
            subprocess.run(["scancel", *sorted(held)], check=False)
    assert not failed, "notebooks that fail while their runs are pending:\n" + "\n\n".join(
        f"{name}:\n{err}" for name, err in failed.items()
    )
    # each said what it waits for (the held jobs never ran), and the selection is not empty
    assert {"cifar_tuning", "cifar_comparison"} <= set(waiting), waiting
    assert all(waiting.values()), waiting
    assert held, "no job was submitted held: the notebooks did not go through the SLURM runner"
