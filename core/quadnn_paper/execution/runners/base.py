"""The runners' shared part: :class:`Job`, and :class:`Runner` (records, locks, states, waiting,
the submission decision). It imports no runner; each runner registers its kind by name
(:attr:`Runner.kinds`), so any runner reads any kind's records (``make status`` reads SLURM's
through ``inline``). See the package doc for the contract."""

from __future__ import annotations

import contextlib
import dataclasses
import graphlib
import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ...common.files import atomic_write_text, file_lock, lock_held, private_dir, read_json

__all__ = ["Job", "Runner", "STATES", "ACTIVE", "order", "tail", "call"]

STATES = ("done", "running", "pending", "failed", "missing")
ACTIVE = ("pending", "running")
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._=+-]{0,199}")


@dataclasses.dataclass(frozen=True)
class Job:
    """One unit of work. ``gpus`` are per node; ``deps`` are keys whose success this job needs
    first; ``cpus_per_task`` and ``mem_gb`` (per node) are what it asks for (None: the runner's)."""

    key: str
    fn: Callable[[], Any]
    deps: tuple[str, ...] = ()
    gpus: int = 0
    nodes: int = 1
    tasks_per_node: int = 1
    name: str = ""
    cpus_per_task: int | None = None
    mem_gb: float | None = None

    def __post_init__(self):
        if not isinstance(self.key, str) or not _KEY.fullmatch(self.key):
            raise ValueError(
                f"job key {self.key!r}: expected 1-200 characters of [A-Za-z0-9._=+-], starting with a letter or digit"
            )
        if not callable(self.fn):
            raise ValueError(f"job {self.key}: fn must be callable, got {type(self.fn).__name__}")
        object.__setattr__(self, "deps", tuple(self.deps))
        for field in ("gpus", "nodes", "tasks_per_node"):
            value = getattr(self, field)
            if not isinstance(value, int) or value < (0 if field == "gpus" else 1):
                raise ValueError(f"job {self.key}: {field}={value!r} is not a valid count")
        if self.key in self.deps:
            raise ValueError(f"job {self.key} depends on itself")


def call(cmd: list[str], timeout: float = 60) -> str | None:
    """stdout of ``cmd``, or None when it fails, is missing or hangs (a paused SLURM controller)."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def tail(paths: Iterable[Path], lines: int) -> str:
    """The last ``lines`` lines of each of ``paths`` that can be read, each under its name."""
    out = []
    for path in paths:
        try:
            text = Path(path).read_text(errors="replace").splitlines()
        except OSError:
            continue
        if text:
            out += [f"==> {path} <==", *text[-lines:]]
    return "\n".join(out)


def order(jobs: list[Job]) -> list[Job]:
    """Jobs sorted so that a job comes after the jobs of this list it depends on."""
    by_key = {}
    for job in jobs:
        if by_key.setdefault(job.key, job) != job:
            raise ValueError(f"two different jobs share the key {job.key}")
    graph = {key: [d for d in job.deps if d in by_key] for key, job in by_key.items()}
    try:
        return [by_key[key] for key in graphlib.TopologicalSorter(graph).static_order()]
    except graphlib.CycleError as e:
        raise ValueError(f"dependency cycle: {' -> '.join(reversed(e.args[1]))}") from None


class Runner:
    """Records, locks, states, waiting and the submission decision. A subclass implements
    ``_launch(jobs, sources, records) -> records`` (``jobs`` launched together; ``sources``: records
    of the queued jobs a single job must wait for) and ``_record_state(record) -> (state, reason)``,
    and may override ``max_group``, ``_can_follow`` and ``_discard``."""

    name = ""
    max_gpus: int | None = None  # the most GPUs one job can get (None: unknown)
    max_group = 1  # the most jobs launched together (see submit)
    max_poll_s = 30.0  # wait()'s longest pause while nothing changes: how often SLURM may be asked
    # Every kind by name, filled as each subclass is defined: a record names the kind that wrote it,
    # and that kind's read_record says its state.
    kinds: dict[str, type[Runner]] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.name:
            Runner.kinds[cls.name] = cls

    def __init__(self, state_dir: str | os.PathLike, is_done: Callable[[str], bool] | None = None):
        self.state_dir = private_dir(Path(state_dir).resolve())
        private_dir(self.state_dir / "logs")
        self.is_done = is_done
        self.last_submitted: list[str] = []

    def __repr__(self):
        return f"{type(self).__name__}({str(self.state_dir)!r})"

    def lock(self, key: str):
        """The lock a job holds while it runs (``<key>.lock``); submitters take ``<key>.submit``."""
        return file_lock(self.state_dir / f"{key}.lock", poll=0.05)

    def record_path(self, key: str) -> Path:
        return self.state_dir / f"{key}.json"

    def record(self, key: str) -> dict | None:
        """The record of ``key``'s latest submission, or None."""
        return read_json(self.record_path(key))

    def write_record(self, record: dict) -> None:
        atomic_write_text(self.record_path(record["key"]), json.dumps(record, indent=1, sort_keys=True))

    def log_path(self, key: str) -> Path:
        return self.state_dir / "logs" / f"{key}.log"

    def log_tail(self, key: str, lines: int = 20) -> str:
        """The last ``lines`` lines of the latest attempt's log(s) of ``key``."""
        return tail([Path(p) for p in (self.record(key) or {}).get("logs", [])], lines)

    def _done(self, key: str) -> bool:
        return bool(self.is_done and self.is_done(key))

    def state(self, key: str, is_done: Callable[[str], bool] | None = None) -> tuple[str, str]:
        """``(state, reason)`` of one key; ``reason`` says why a job failed or is missing. A query:
        ``is_done`` (default: the runner's) is used for this call only."""
        is_done = is_done or self.is_done
        if is_done is not None and is_done(key):
            return "done", ""
        state, reason, _ = self._recorded(key)
        if state == "done" and is_done is not None:
            return "failed", "the job finished but is_done() says its result is missing"
        return state, reason

    def states(self, keys: Iterable[str], is_done: Callable[[str], bool] | None = None) -> dict[str, str]:
        """``{key: state}`` with states from :data:`STATES`."""
        return {key: self.state(key, is_done)[0] for key in keys}

    def _recorded(self, key: str) -> tuple[str, str, dict | None]:
        """``(state, reason, record)`` of ``key``'s record alone (is_done not asked)."""
        record = self.record(key)
        return ("missing", "never submitted", None) if record is None else (*self._record_state(record), record)

    def _record_state(self, record: dict) -> tuple[str, str]:
        """State of a record this process did not queue, read by the kind that wrote it."""
        return Runner.kinds.get(record.get("runner"), Runner).read_record(record, self)

    @classmethod
    def read_record(cls, record: dict, reader: Runner) -> tuple[str, str]:
        """``(state, reason)`` of a record of this kind, for any ``reader`` (whose folder holds it):
        its exit status, else its lock."""
        if "exit" in record:
            return ("done", "") if record["exit"] == 0 else ("failed", record.get("error") or f"exit {record['exit']}")
        if lock_held(reader.state_dir / f"{record['key']}.lock"):
            return "running", ""
        return "missing", "its process ended before it started or finished (killed?)"

    def wait(
        self,
        keys: Iterable[str],
        timeout: float | None = None,
        is_done: Callable[[str], bool] | None = None,
        poll_s: float = 1.0,
        max_poll_s: float | None = None,
        on_states: Callable[[dict[str, str]], None] | None = None,
    ) -> dict[str, str]:
        """Block until no job of ``keys`` is pending or running; the final states. Polls every
        ``poll_s``, backing off to ``max_poll_s`` while nothing changes; ``on_states`` sees the
        states at each poll. Raises TimeoutError after ``timeout`` seconds."""
        keys = list(keys)
        max_poll_s = self.max_poll_s if max_poll_s is None else max_poll_s
        deadline = None if timeout is None else time.monotonic() + timeout
        delay, before = poll_s, None
        while True:
            states = self.states(keys, is_done)
            if on_states is not None:
                on_states(states)
            busy = {k: s for k, s in states.items() if s in ACTIVE}
            if not busy:
                return states
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"{len(busy)} job(s) still pending or running after {timeout} s: {busy}")
            delay = poll_s if states != before else min(max_poll_s, delay * 1.5)
            before = states
            time.sleep(delay if deadline is None else max(0.0, min(delay, deadline - time.monotonic())))

    def close(self) -> None:
        """Give back what the runner holds between jobs (the local runner's worker processes)."""

    def submit(self, jobs: Iterable[Job], is_done: Callable[[str], bool] | None = None) -> dict[str, str]:
        """Submit every job that is not done and not already pending or running; returns every
        job's state afterwards. Jobs go in waves (a job after the jobs of this batch it depends on);
        in a wave, up to :attr:`max_group` jobs asking alike are decided holding their submit locks
        (taken in key order), and those that wait for no queued source are launched together."""
        self.is_done = is_done or self.is_done
        self.last_submitted, decided, wave, groups = [], {}, {}, {}
        for job in order(list(jobs)):
            self._check(job)
            wave[job.key] = max((wave[d] + 1 for d in job.deps if d in wave), default=0)
            alike = (wave[job.key], job.gpus, job.nodes, job.tasks_per_node, job.cpus_per_task, job.mem_gb)
            groups.setdefault(alike, []).append(job)
        for alike in sorted(groups, key=lambda alike: alike[0]):
            for i in range(0, len(groups[alike]), self.max_group):
                self._submit_group(sorted(groups[alike][i : i + self.max_group], key=lambda job: job.key), decided)
        return {key: state for key, (state, _) in decided.items()}

    def _submit_group(self, group: list[Job], decided: dict) -> None:
        """Decide ``group`` holding its submit locks, launch what is to launch (alone when it waits
        for a queued source, else together), then let each submitted job start (``_after_submit``)."""
        with contextlib.ExitStack() as locks:
            for job in group:
                locks.enter_context(self.lock(f"{job.key}.submit"))
            decided.update({job.key: self._decide(job, decided) for job in group})
            launch = [job for job in group if decided[job.key][0] == "launch"]
            alone = [[job] for job in launch if decided[job.key][1]]
            together = [job for job in launch if not decided[job.key][1]]
            for batch in filter(None, alone + [together]):
                made = dict(runner=self.name, submitted_at=time.time(), submitted_by=os.getpid())
                records = [dict(made, key=j.key, deps=list(j.deps), logs=[str(self.log_path(j.key))]) for j in batch]
                for record in self._launch(batch, decided[batch[0].key][1], records):
                    self.write_record(record)
                    self.last_submitted.append(record["key"])
                    decided[record["key"]] = ("submitted", record)
        for job in group:
            if decided[job.key][0] == "submitted":
                decided[job.key] = (self._after_submit(job), self.record(job.key))

    def _decide(self, job: Job, decided: dict) -> tuple[str, Any]:
        """``(state, record)`` of a job not to launch now, else ``("launch", sources)``."""
        if self._done(job.key):
            return "done", None
        state, _, old = self._recorded(job.key)
        if state in ACTIVE:
            return state, old
        sources = {}
        for dep in job.deps:
            if dep in decided:
                dep_state, dep_record = decided[dep]
            elif self._done(dep):
                continue
            else:
                dep_state, _, dep_record = self._recorded(dep)
            if dep_state == "done":
                continue
            if dep_state not in ACTIVE or not self._can_follow(dep_record):
                return "missing", None  # its source is not queued: a later pass submits it
            sources[dep] = dep_record
        self._discard(old)
        return "launch", sources

    def _check(self, job: Job) -> None:
        """Raise ValueError when this runner cannot run ``job`` at all."""

    def _can_follow(self, dep_record: dict | None) -> bool:
        """Whether a job submitted now can wait for that queued source."""
        return False

    def _discard(self, old: dict | None) -> None:
        """Called before a stale record (if any) is replaced."""

    def _after_submit(self, job: Job) -> str:
        return "pending"

    def _launch(self, jobs: list[Job], sources: dict[str, dict], records: list[dict]) -> list[dict]:
        """Start ``jobs`` together (``sources``: of a single job); their complete records."""
        return records
