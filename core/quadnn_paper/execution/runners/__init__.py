"""Runners: execute keyed jobs inline, on this machine's GPUs/CPUs, or on SLURM via submitit.

:mod:`.base` holds what every runner shares (:class:`Job`, :class:`Runner`) and imports none of
them; :mod:`.inline`, :mod:`.local` and :mod:`.slurm` are the runners; this package names them
(:data:`RUNNER_CLASSES`) and makes one (:func:`make_runner`).

A :class:`Job` is a key (stable: the configuration hash of a run), a picklable callable that takes
no argument, and what it needs (GPUs, nodes, tasks, CPUs, memory, the keys it depends on). The
callable must be idempotent and resume from its own checkpoint: a runner may call it again after a
preemption, a timeout or a crash. Runners know nothing about training.

    runner = make_runner("slurm", "build/cache/runs/.jobs/alice", partition="gpu")
    runner.submit(jobs, is_done=lambda key: ...)    # returns at once: {key: state}
    runner.wait(keys)                                 # optional: until nothing is queued or running
    runner.log_tail(key)                              # why a job failed

``submit`` submits every job that is neither done (``is_done(key)``) nor queued or running,
whichever process queued it (``runner.last_submitted`` lists them). States are ``done | running |
pending | failed | missing`` (``missing``: not submitted, or its submitting process ended before
it started; the next submit takes it).

Each key has one record, ``state_dir/<key>.json``, written under the key's POSIX lock
(``<key>.submit.lock``, which holds between processes and on NFS): two racing submitters submit a
key once. The state folder is the user's own (:func:`quadnn_paper.execution.execute.job_dir`),
since job pickles are loaded from it; teammates sharing a cache may each queue a key, and the run
store's lock still has it trained once.
"""

from __future__ import annotations

import os

from .base import ACTIVE, STATES, Job, Runner, order, tail
from .inline import InlineRunner
from .local import LocalRunner, visible_gpus
from .slurm import SlurmRunner

RUNNER_CLASSES: dict[str, type[Runner]] = {cls.name: cls for cls in (InlineRunner, LocalRunner, SlurmRunner)}
RUNNERS = tuple(RUNNER_CLASSES)


def make_runner(name: str, state_dir: str | os.PathLike, **options) -> Runner:
    """The runner called ``name`` (one of :data:`RUNNERS`), keeping its records in ``state_dir``."""
    if name not in RUNNER_CLASSES:
        raise ValueError(f"unknown runner {name!r}; choose one of: {', '.join(RUNNERS)}")
    return RUNNER_CLASSES[name](state_dir, **options)
