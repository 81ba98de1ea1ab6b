"""Runners: execute keyed jobs inline, on this machine's GPUs/CPUs, or on SLURM via submitit.

A :class:`Job` is a key (stable: the configuration hash of a run), a picklable callable that takes
no argument, and what it needs (GPUs, nodes, tasks, the keys it depends on). The callable must be
idempotent and resume from its own checkpoint when called again: a runner may call it again after
a preemption, a timeout or a crash, and nothing else carries state between attempts. Runners know
nothing about training; the engine builds the jobs and says which keys are done.

    runner = make_runner("slurm", state_dir="build/runs", partition="gpu", time_min=600)
    states = runner.submit(jobs, is_done=lambda key: cache.has(key))   # returns at once
    print(runner.states([j.key for j in jobs]))    # {"ab12..": "running", "cd34..": "pending", ...}
    runner.wait(keys)                               # optional: block until nothing is queued
    for key, state in runner.states(keys).items():
        if state == "failed":
            print(key, runner.log_tail(key))

``submit`` submits every job that is neither done (``is_done(key)``) nor already queued or running,
whichever runner queued it, and returns ``{key: state}``; ``runner.last_submitted`` lists the keys
it actually submitted. States are ``"done" | "running" | "pending" | "failed" | "missing"``
(``missing``: never submitted, its submitting process exited before it started, or it waits for a
source that is neither done nor queued; it is submitted on the next pass).

What a submission leaves: ``state_dir/<key>.json``, the record of the latest attempt (which runner,
SLURM job id or pid, log paths), written while holding ``state_dir/.locks/<key>.lock``
(``fcntl.lockf``, so it also holds between machines on NFS). Deciding and submitting happen under
that lock, so two submitters racing (two notebooks, a notebook and ``make``) submit a key once:
the second finds the first's record queued or running. A record whose job died or failed is
replaced by the next submit; a pending SLURM job whose record is replaced is cancelled first.

Runners (:func:`make_runner` ``name``):

``inline``
    Runs each job in the calling process, in dependency order. A job's exception is recorded
    (``log_tail`` shows its traceback) and re-raised (``raise_errors=False`` continues with the
    jobs that do not depend on it).
``local``
    A small queue for one machine: one slot per visible GPU (``CUDA_VISIBLE_DEVICES``, or
    ``nvidia-smi -L``), or ``workers`` CPU slots (default ``QUADNN_LOCAL_WORKERS`` or the CPU
    count) without GPUs. A job takes ``max(1, gpus)`` slots and sees exactly those GPUs in
    ``CUDA_VISIBLE_DEVICES``; CPU jobs get ``OMP_NUM_THREADS = cpus // workers`` unless set. Jobs
    wait in the queue until slots are free and their sources are done (a source that fails fails
    its dependents). Each job runs in its own process (``python -m quadnn_paper.runners``), so a
    crash kills only that job; ``tasks_per_node > 1`` starts that many processes with ``RANK``,
    ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``/``MASTER_PORT`` set, as ``torchrun`` does. The
    queue lives in the submitting process (a thread): when that process exits, jobs still
    queued are lost (they show as ``missing`` and the next submit queues them again); jobs
    already started run to completion and record their exit status themselves.
    Option ``gpus=[ids]`` overrides detection. (submitit's LocalExecutor is not used: it starts
    every job at once and gives them all the same ``CUDA_VISIBLE_DEVICES``.)
``slurm``
    One ``sbatch`` per job through :class:`submitit.SlurmExecutor`, files under
    ``state_dir/slurm/<job id>/``. Options (keyword, else environment, else default):
    ``partition`` (``QUADNN_SLURM_PARTITION``), ``account`` (``QUADNN_SLURM_ACCOUNT``),
    ``qos`` (``QUADNN_SLURM_QOS``), ``time_min`` (``QUADNN_SLURM_TIME``, minutes, default 1440),
    ``constraint`` (``QUADNN_SLURM_CONSTRAINT``), ``cpus_per_task`` (``QUADNN_SLURM_CPUS_PER_TASK``),
    ``mem_gb`` (``QUADNN_SLURM_MEM_GB``), ``sbatch`` (extra options, a dict or a string
    ``"--key=value --flag"``; ``QUADNN_SLURM_SBATCH``), ``max_requeues`` (timeouts a job may
    requeue after, default 10), ``setup`` (shell lines run before the job). A job's ``gpus``
    becomes ``--gpus-per-node``, ``nodes``/``tasks_per_node`` become ``--nodes``/``--ntasks-per-node``.
    A job whose source is queued gets ``--dependency=afterok:<source ids>``; one whose source is
    done is submitted plainly. The callable is wrapped in a ``submitit.helpers.Checkpointable``, so
    on preemption or timeout (SLURM's ``USR2``) submitit requeues the job and the callable resumes
    from its own checkpoint; a job killed outright (``scancel``, node failure) is ``failed`` and
    the next submit resubmits it, which resumes the same way. Before calling the job, each task
    sets ``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` and
    ``LOCAL_WORLD_SIZE`` from :class:`submitit.JobEnvironment`; the job calls
    :func:`init_distributed` (or ``torch.distributed.init_process_group``) when ``WORLD_SIZE > 1``.
    States come from ``sacct`` (SLURM accounting must be on: without it a finished job is
    unknown); the record's job name is compared so a job id reused after SLURM's state was wiped
    is not mistaken for ours.

``tools/slurm/up.sh`` brings up a single-node SLURM on this machine for the tests.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Iterable

from submitit.helpers import Checkpointable

__all__ = ["Job", "Runner", "InlineRunner", "LocalRunner", "SlurmRunner", "make_runner",
           "init_distributed", "RUNNERS", "STATES"]

RUNNERS = ("inline", "local", "slurm")
STATES = ("done", "running", "pending", "failed", "missing")
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._=+-]{0,199}")
_ACTIVE = ("pending", "running")


@dataclasses.dataclass(frozen=True)
class Job:
    """One unit of work. ``fn()`` must be picklable (cloudpickle), idempotent, and resume from its
    own checkpoint when called again. ``gpus`` are per node; ``deps`` are keys of jobs whose
    success this one needs first."""
    key: str
    fn: Callable[[], Any]
    deps: tuple[str, ...] = ()
    gpus: int = 0
    nodes: int = 1
    tasks_per_node: int = 1
    name: str = ""

    def __post_init__(self):
        if not isinstance(self.key, str) or not _KEY.fullmatch(self.key):
            raise ValueError(f"job key {self.key!r}: expected 1-200 characters of [A-Za-z0-9._=+-], "
                             "starting with a letter or digit")
        if not callable(self.fn):
            raise ValueError(f"job {self.key}: fn must be callable, got {type(self.fn).__name__}")
        object.__setattr__(self, "deps", tuple(self.deps))
        for field in ("gpus", "nodes", "tasks_per_node"):
            value = getattr(self, field)
            if not isinstance(value, int) or value < (0 if field == "gpus" else 1):
                raise ValueError(f"job {self.key}: {field}={value!r} is not a valid count")
        if self.key in self.deps:
            raise ValueError(f"job {self.key} depends on itself")


def make_runner(name: str, state_dir: str | os.PathLike, **options) -> "Runner":
    """The runner called ``name`` (one of :data:`RUNNERS`), keeping its records in ``state_dir``."""
    classes = {"inline": InlineRunner, "local": LocalRunner, "slurm": SlurmRunner}
    if name not in classes:
        raise ValueError(f"unknown runner {name!r}; choose one of: {', '.join(RUNNERS)}")
    return classes[name](state_dir, **options)


def init_distributed(backend: str | None = None) -> bool:
    """Initialise ``torch.distributed`` from the environment a runner set (``env://``) when the job
    has more than one task; returns whether a process group is active. ``backend`` defaults to
    ``nccl`` with CUDA, else ``gloo``."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return False
    import torch
    import torch.distributed as dist
    if not dist.is_initialized():
        backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend, init_method="env://")
    return True


# --- records ------------------------------------------------------------------------------------

def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _process_start(pid: int) -> str | None:
    """Start time of ``pid`` (from /proc), to tell a live process from a recycled pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _me() -> dict:
    return {"host": socket.gethostname(), "pid": os.getpid(), "pid_start": _process_start(os.getpid())}


def _alive(host: str, pid: int | None, start: str | None) -> bool | None:
    """Whether that process still runs; None when it is on another host (cannot tell)."""
    if pid is None:
        return False
    if host != socket.gethostname():
        return None
    now = _process_start(pid)
    if now is None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return start is None
    return start is None or now == start


def _tail(paths: Iterable[Path], lines: int) -> str:
    out = []
    for path in paths:
        try:
            text = Path(path).read_text(errors="replace").splitlines()
        except OSError:
            continue
        if text:
            out.append(f"==> {path} <==")
            out.extend(text[-lines:])
    return "\n".join(out)


def _order(jobs: list[Job]) -> list[Job]:
    """Jobs sorted so that a job comes after the jobs of this list it depends on."""
    by_key = {}
    for job in jobs:
        if job.key in by_key and by_key[job.key] != job:
            raise ValueError(f"two different jobs share the key {job.key}")
        by_key[job.key] = job
    ordered, seen, visiting = [], set(), set()

    def visit(job, path):
        if job.key in seen:
            return
        if job.key in visiting:
            raise ValueError(f"dependency cycle: {' -> '.join(path + [job.key])}")
        visiting.add(job.key)
        for dep in job.deps:
            if dep in by_key:
                visit(by_key[dep], path + [job.key])
        visiting.discard(job.key)
        seen.add(job.key)
        ordered.append(job)

    for job in by_key.values():
        visit(job, [])
    return ordered


class Runner:
    """What every runner shares: records, locking, states, waiting. A subclass implements
    ``_launch(job, sources) -> record`` (start or queue the job; ``sources`` are the records of
    the queued jobs it must wait for) and may override ``_check``, ``_can_follow``, ``_discard``
    and ``_after_submit``; the state of a record is read by the function registered for its
    runner in ``_RECORD_STATES``, so any runner can tell what another one queued."""
    name = ""
    poll_s = 1.0

    def __init__(self, state_dir: str | os.PathLike, is_done: Callable[[str], bool] | None = None):
        self.state_dir = Path(state_dir).resolve()
        (self.state_dir / ".locks").mkdir(parents=True, exist_ok=True)
        (self.state_dir / "logs").mkdir(exist_ok=True)
        self.is_done = is_done
        self.last_submitted: list[str] = []
        self._known: dict | None = None   # sacct's answers, fetched once per submit/states call

    def __repr__(self):
        return f"{type(self).__name__}({str(self.state_dir)!r})"

    # records and locks
    def record_path(self, key: str) -> Path:
        return self.state_dir / f"{key}.json"

    def record(self, key: str) -> dict | None:
        """The record of ``key``'s latest submission, or None."""
        return _read_json(self.record_path(key))

    @contextlib.contextmanager
    def _lock(self, key: str):
        fd = os.open(self.state_dir / ".locks" / f"{key}.lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def log_path(self, key: str) -> Path:
        return self.state_dir / "logs" / f"{key}.log"

    # states
    def _done(self, key: str, is_done) -> bool:
        is_done = is_done or self.is_done
        return bool(is_done and is_done(key))

    def state(self, key: str, is_done: Callable[[str], bool] | None = None) -> tuple[str, str]:
        """``(state, reason)`` of one key; ``reason`` says why a job failed or is missing."""
        if self._done(key, is_done):
            return "done", ""
        return self._record_state(self.record(key), is_done)

    def _record_state(self, record: dict | None, is_done=None) -> tuple[str, str]:
        if record is None:
            return "missing", "never submitted"
        runner = _RECORD_STATES.get(record.get("runner"))
        if runner is None:
            return "failed", f"record of an unknown runner {record.get('runner')!r}"
        state, reason = runner(record, self._known)
        if state == "done" and (is_done or self.is_done) and not self._done(record["key"], is_done):
            # The job finished, but the result it should have left is not there.
            return "failed", "the job finished but is_done() says its result is missing"
        return state, reason

    def states(self, keys: Iterable[str], is_done: Callable[[str], bool] | None = None) -> dict[str, str]:
        """``{key: state}`` with states from :data:`STATES`."""
        keys = list(keys)
        with self._asking_slurm_once(keys):
            return {key: self.state(key, is_done)[0] for key in keys}

    @contextlib.contextmanager
    def _asking_slurm_once(self, keys: list[str]):
        """Within this block, the states of SLURM records come from one sacct call."""
        records = [self.record(k) for k in keys]
        ids = [r["job_id"] for r in records if r and r.get("runner") == "slurm"]
        self._known = _sacct(ids) if ids else None
        try:
            yield
        finally:
            self._known = None

    def log_tail(self, key: str, lines: int = 20) -> str:
        """The last ``lines`` lines of the latest attempt's log(s) of ``key``."""
        record = self.record(key) or {}
        return _tail([Path(p) for p in record.get("logs", [])], lines)

    def wait(self, keys: Iterable[str], timeout: float | None = None,
             is_done: Callable[[str], bool] | None = None, poll_s: float | None = None) -> dict[str, str]:
        """Block until no job of ``keys`` is pending or running; returns the final states.
        Raises TimeoutError after ``timeout`` seconds."""
        keys = list(keys)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            states = self.states(keys, is_done)
            if not any(s in _ACTIVE for s in states.values()):
                return states
            if deadline is not None and time.monotonic() > deadline:
                busy = {k: s for k, s in states.items() if s in _ACTIVE}
                raise TimeoutError(f"{len(busy)} job(s) still pending or running after {timeout} s: {busy}")
            time.sleep(poll_s or self.poll_s)

    # submission
    def submit(self, jobs: Iterable[Job], is_done: Callable[[str], bool] | None = None) -> dict[str, str]:
        """Submit every job that is not done and not already pending or running; returns the state
        of every job afterwards. ``is_done`` (else the runner's) says which keys are complete."""
        if is_done is not None:
            self.is_done = is_done
        jobs = _order(list(jobs))
        in_batch = {job.key for job in jobs}
        with self._asking_slurm_once(sorted(in_batch | {d for job in jobs for d in job.deps})):
            return self._submit(jobs, in_batch)

    def _submit(self, jobs: list[Job], in_batch: set[str]) -> dict[str, str]:
        self.last_submitted = []
        result: dict[str, str] = {}
        decided: dict[str, tuple[str, dict | None]] = {}   # key -> (state, record)
        for job in jobs:
            self._check(job)
            with self._lock(job.key):
                if self._done(job.key, None):
                    result[job.key] = "done"
                    decided[job.key] = ("done", None)
                    continue
                old = self.record(job.key)
                state, _ = self._record_state(old)
                if state in _ACTIVE:
                    result[job.key] = state
                    decided[job.key] = (state, old)
                    continue
                sources, blocked = {}, None
                for dep in job.deps:
                    if dep in decided:
                        dep_state, dep_record = decided[dep]
                    elif self._done(dep, None):
                        dep_state, dep_record = "done", None
                    else:
                        dep_record = self.record(dep)
                        dep_state = self._record_state(dep_record)[0]
                    if dep_state == "done":
                        continue
                    if dep_state in _ACTIVE and self._can_follow(dep_record):
                        sources[dep] = dep_record
                    else:
                        blocked = f"source {dep} is {dep_state}" + ("" if dep in in_batch else " (not submitted)")
                        break
                if blocked:
                    result[job.key] = "missing"
                    decided[job.key] = ("missing", None)
                    continue
                if old is not None:
                    self._discard(old)
                record = self._launch(job, sources)
                record.update(key=job.key, runner=self.name, deps=list(job.deps),
                              submitted_at=time.time(), submitted_by=_me())
                _write_json(self.record_path(job.key), record)
                self.last_submitted.append(job.key)
            state = self._after_submit(job)
            result[job.key] = state
            decided[job.key] = (state, self.record(job.key))
        return result

    def _check(self, job: Job) -> None:
        """Raise ValueError when this runner cannot run ``job`` at all."""

    def _can_follow(self, dep_record: dict | None) -> bool:
        """Whether a job submitted now can wait for that queued source (same runner)."""
        return dep_record is not None and dep_record.get("runner") == self.name

    def _discard(self, old: dict) -> None:
        """Called before a stale record is replaced."""

    def _after_submit(self, job: Job) -> str:
        return "pending"

    def _launch(self, job: Job, sources: dict[str, dict]) -> dict:
        raise NotImplementedError


# --- inline ---------------------------------------------------------------------------------------

def _process_record_state(record: dict, known=None) -> tuple[str, str]:
    """State of an inline/local record: a process, and a status file it writes when it exits."""
    status = _read_json(Path(record["status_file"])) if record.get("status_file") else None
    if status is not None and status.get("attempt") == record.get("attempt"):
        if status.get("exit") == 0:
            return "done", ""
        return "failed", status.get("error") or f"exit code {status.get('exit')}"
    proc = record.get("process")
    if proc:
        alive = _alive(proc["host"], proc["pid"], proc.get("pid_start"))
        if alive is None or alive:
            return "running", ""
        return "failed", "the process ended without recording an exit status (killed?)"
    owner = record["submitted_by"]
    if _alive(owner["host"], owner["pid"], owner.get("pid_start")) is not False:
        return "pending", ""
    return "missing", "the submitting process exited before the job started"


class InlineRunner(Runner):
    """Runs jobs in the calling process, in dependency order."""
    name = "inline"

    def __init__(self, state_dir, is_done=None, raise_errors: bool = True):
        super().__init__(state_dir, is_done)
        self.raise_errors = raise_errors

    def _can_follow(self, dep_record):
        return False   # sources of this batch have run (and are done or failed) by now

    def _launch(self, job, sources):
        attempt = f"{time.time():.6f}"
        return {"attempt": attempt, "status_file": str(self.state_dir / "logs" / f"{job.key}.status"),
                "process": _me(), "logs": [str(self.log_path(job.key))]}

    def _after_submit(self, job):
        record = self.record(job.key)
        status = {"attempt": record["attempt"], "exit": 0}
        try:
            job.fn()
        except BaseException as error:
            text = traceback.format_exc()
            with open(self.log_path(job.key), "a") as log:
                log.write(f"--- inline attempt {record['attempt']} failed\n{text}")
            status = {"attempt": record["attempt"], "exit": 1, "error": f"{type(error).__name__}: {error}"}
            _write_json(Path(record["status_file"]), status)
            if self.raise_errors or not isinstance(error, Exception):
                raise
            return "failed"
        _write_json(Path(record["status_file"]), status)
        return "done" if self.is_done is None or self._done(job.key, None) else "failed"


# --- local ----------------------------------------------------------------------------------------

def _visible_gpus() -> list[str]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d for d in env.split(",") if d.strip() and d.strip() != "-1"]
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.SubprocessError):
            return []
        return [str(i) for i, line in enumerate(l for l in out.splitlines() if l.startswith("GPU "))]
    return []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalRunner(Runner):
    """A queue over this machine's GPUs (one slot each) or ``workers`` CPU slots."""
    name = "local"
    poll_s = 0.2

    def __init__(self, state_dir, is_done=None, workers: int | None = None,
                 gpus: list[str] | None = None):
        super().__init__(state_dir, is_done)
        self.gpus = [str(g) for g in (_visible_gpus() if gpus is None else gpus)]
        if self.gpus:
            self.slots = list(self.gpus)
        else:
            workers = workers or int(os.environ.get("QUADNN_LOCAL_WORKERS", 0)) or os.cpu_count() or 1
            self.slots = [f"cpu{i}" for i in range(workers)]
        self._free = list(self.slots)
        self._queue: list[tuple[Job, dict]] = []
        self._running: dict[str, tuple[subprocess.Popen, list[str]]] = {}
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def __repr__(self):
        what = f"gpus={self.gpus}" if self.gpus else f"workers={len(self.slots)}"
        return f"LocalRunner({str(self.state_dir)!r}, {what})"

    def _check(self, job):
        if job.nodes != 1:
            raise ValueError(f"job {job.key} asks for {job.nodes} nodes; the local runner has one")
        if job.gpus and not self.gpus:
            raise ValueError(f"job {job.key} needs {job.gpus} GPU(s) and this machine has none visible")
        if job.gpus > len(self.slots):
            raise ValueError(f"job {job.key} needs {job.gpus} GPUs; this machine has {len(self.slots)}")

    def _can_follow(self, dep_record):
        # Only sources queued by this very runner (this process) can be waited for.
        return dep_record is not None and dep_record.get("runner") == self.name \
            and dep_record["submitted_by"]["pid"] == os.getpid() \
            and dep_record["submitted_by"]["host"] == socket.gethostname()

    def _launch(self, job, sources):
        attempt = f"{time.time():.6f}"
        spec = self.state_dir / "logs" / f"{job.key}.job.pkl"
        import cloudpickle
        spec.write_bytes(cloudpickle.dumps(job.fn))
        return {"attempt": attempt, "status_file": str(self.state_dir / "logs" / f"{job.key}.status"),
                "spec": str(spec), "logs": [str(self.log_path(job.key))], "process": None}

    def _after_submit(self, job):
        with self._cond:
            self._queue.append((job, self.record(job.key)))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._dispatch, name="quadnn-local-runner",
                                                daemon=True)
                self._thread.start()
            self._cond.notify_all()
        return "pending"

    def _dispatch(self):
        while True:
            with self._cond:
                self._reap()
                if not self._queue and not self._running:
                    self._thread = None
                    return
                for item in list(self._queue):
                    job, record = item
                    blocked = False
                    for dep in job.deps:
                        state, reason = self.state(dep)
                        if state == "failed":
                            self._queue.remove(item)
                            self._finish(record, 1, f"source {dep} failed: {reason}")
                            blocked = True
                            break
                        if state != "done":
                            blocked = True
                    if blocked:
                        continue
                    need = max(1, job.gpus)
                    if need <= len(self._free):
                        self._queue.remove(item)
                        taken, self._free = self._free[:need], self._free[need:]
                        self._start(job, record, taken)
                self._cond.wait(self.poll_s)

    def _finish(self, record, code, error=""):
        _write_json(Path(record["status_file"]), {"attempt": record["attempt"], "exit": code, "error": error})

    def _start(self, job, record, slots):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # the same imports as here
        if self.gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(slots) if job.gpus else ""
        elif "OMP_NUM_THREADS" not in os.environ:
            env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // len(self.slots)))
        env.update(QUADNN_JOB_KEY=job.key, QUADNN_JOB_ATTEMPT=record["attempt"],
                   QUADNN_JOB_STATUS=record["status_file"], QUADNN_JOB_TASKS=str(job.tasks_per_node))
        log = open(record["logs"][0], "a")
        log.write(f"--- local attempt {record['attempt']} on {','.join(slots)}\n")
        log.flush()
        proc = subprocess.Popen([sys.executable, "-u", "-m", "quadnn_paper.runners", record["spec"]],
                                env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        log.close()
        record["process"] = {"host": socket.gethostname(), "pid": proc.pid,
                             "pid_start": _process_start(proc.pid)}
        _write_json(self.record_path(job.key), record)
        self._running[job.key] = (proc, slots)

    def _reap(self):
        for key, (proc, slots) in list(self._running.items()):
            if proc.poll() is not None:
                del self._running[key]
                self._free.extend(slots)
                self._free.sort(key=self.slots.index)

    @property
    def running(self) -> int:
        """How many jobs this runner's queue is running now."""
        with self._cond:
            return len(self._running)


def _run_local_job(spec: str) -> int:
    """Entry point of one local job (``python -m quadnn_paper.runners SPEC``): runs the pickled
    callable, or starts ``QUADNN_JOB_TASKS`` task processes that each run it, then records the
    exit status for the runner."""
    import pickle
    tasks = int(os.environ.get("QUADNN_JOB_TASKS", "1"))
    status_file, attempt = os.environ.get("QUADNN_JOB_STATUS"), os.environ.get("QUADNN_JOB_ATTEMPT")
    if tasks > 1 and "RANK" not in os.environ:
        port = str(_free_port())
        procs = []
        for rank in range(tasks):
            env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(tasks),
                       LOCAL_WORLD_SIZE=str(tasks), MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
            env.pop("QUADNN_JOB_STATUS", None)
            procs.append(subprocess.Popen([sys.executable, "-u", "-m", "quadnn_paper.runners", spec], env=env))
        codes = [None] * tasks
        while any(c is None for c in codes):
            for i, p in enumerate(procs):
                codes[i] = p.poll()
            failed = [c for c in codes if c not in (None, 0)]
            if failed:  # one task failed: the others would wait for it forever
                for p in procs:
                    if p.poll() is None:
                        p.terminate()
                codes = [p.wait() for p in procs]
                break
            time.sleep(0.2)
        code = next((c for c in codes if c), 0)
        error = f"task exit codes {codes}" if code else ""
    else:
        code, error = 0, ""
        try:
            with open(spec, "rb") as f:
                fn = pickle.load(f)
            fn()
        except BaseException as exc:
            traceback.print_exc()
            code, error = 1, f"{type(exc).__name__}: {exc}"
    if status_file:
        _write_json(Path(status_file), {"attempt": attempt, "exit": code, "error": error})
    return code


# --- slurm ----------------------------------------------------------------------------------------

_SLURM_ACTIVE = {"PENDING": "pending", "REQUEUED": "pending", "REQUEUE_HOLD": "pending",
                 "REQUEUE_FED": "pending", "RESIZING": "pending", "SUSPENDED": "pending",
                 "CONFIGURING": "pending", "RUNNING": "running", "COMPLETING": "running",
                 "STAGE_OUT": "running", "SIGNALING": "running", "STOPPED": "running"}
_UNKNOWN_GRACE_S = 120   # sacct may not know a job for a moment after sbatch


def _sacct(job_ids: list[str]) -> dict[str, tuple[str, str]]:
    """``{job id: (STATE, job name)}`` from sacct for allocations (not steps)."""
    if not job_ids or shutil.which("sacct") is None:
        return {}
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-o", "JobIDRaw,State,JobName", "-j", ",".join(job_ids)],
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        # Not knowing is not "failed": resubmitting on a silent sacct could run a job twice.
        raise RuntimeError(f"sacct failed (exit {out.returncode}), so job states are unknown: "
                           f"{out.stderr.strip()}")
    found = {}
    for line in out.stdout.splitlines():
        parts = line.split("|")
        if len(parts) >= 3:
            found[parts[0]] = (parts[1].split()[0] if parts[1] else "UNKNOWN", parts[2])
    return found


def _slurm_record_state(record: dict, known: dict | None = None) -> tuple[str, str]:
    job_id = record["job_id"]
    info = (known if known is not None else _sacct([job_id])).get(job_id)
    # sacct briefly names a job "allocation" while it completes; any other name means the id now
    # belongs to another job.
    if info is None or info[1] not in (record["job_name"], "allocation"):
        if time.time() - record["submitted_at"] < _UNKNOWN_GRACE_S:
            return "pending", ""
        if shutil.which("sacct") is None:
            return "failed", "sacct is not on PATH: cannot ask SLURM about job " + job_id
        return "failed", f"SLURM does not know job {job_id} (its state was wiped?)"
    state = info[0]
    if state == "COMPLETED":
        return "done", ""
    if state in _SLURM_ACTIVE:
        return _SLURM_ACTIVE[state], ""
    return "failed", f"SLURM job {job_id} is {state}"


_RECORD_STATES = {"inline": _process_record_state, "local": _process_record_state,
                  "slurm": _slurm_record_state}


class SlurmCall(Checkpointable):
    """What SLURM runs: sets the distributed environment from submitit's JobEnvironment, then calls
    the job. Checkpointable: on USR2 (preemption, or the time limit coming) submitit pickles this
    same object again and requeues the job; the job resumes from its own checkpoint."""

    def __init__(self, fn: Callable[[], Any], key: str):
        self.fn = fn
        self.key = key

    def __call__(self):
        import submitit
        env = submitit.JobEnvironment()
        os.environ.update(
            MASTER_ADDR=env.hostnames[0], MASTER_PORT=str(20000 + int(env.job_id.split("_")[0]) % 20000),
            RANK=str(env.global_rank), WORLD_SIZE=str(env.num_tasks), LOCAL_RANK=str(env.local_rank),
            LOCAL_WORLD_SIZE=str(max(1, env.num_tasks // max(1, env.num_nodes))), QUADNN_JOB_KEY=self.key)
        return self.fn()


def _parse_sbatch(extra: str | dict | None) -> dict:
    if not extra:
        return {}
    if isinstance(extra, dict):
        return dict(extra)
    out = {}
    for token in shlex.split(extra):
        if not token.startswith("--"):
            raise ValueError(f"extra sbatch option {token!r}: expected --key=value or --flag")
        key, _, value = token[2:].partition("=")
        out[key] = value if value else True
    return out


class SlurmRunner(Runner):
    """Submits through submitit's SlurmExecutor; states from sacct."""
    name = "slurm"
    poll_s = 2.0
    _ENV = {"partition": "QUADNN_SLURM_PARTITION", "account": "QUADNN_SLURM_ACCOUNT",
            "qos": "QUADNN_SLURM_QOS", "time_min": "QUADNN_SLURM_TIME",
            "constraint": "QUADNN_SLURM_CONSTRAINT", "cpus_per_task": "QUADNN_SLURM_CPUS_PER_TASK",
            "mem_gb": "QUADNN_SLURM_MEM_GB", "sbatch": "QUADNN_SLURM_SBATCH"}

    def __init__(self, state_dir, is_done=None, partition=None, account=None, qos=None,
                 time_min=None, constraint=None, cpus_per_task=None, mem_gb=None, sbatch=None,
                 max_requeues: int = 10, setup: list[str] | None = None, signal_delay_s: int = 120):
        super().__init__(state_dir, is_done)
        given = dict(partition=partition, account=account, qos=qos, time_min=time_min,
                     constraint=constraint, cpus_per_task=cpus_per_task, mem_gb=mem_gb, sbatch=sbatch)
        opts = {k: (v if v is not None else os.environ.get(self._ENV[k]) or None) for k, v in given.items()}
        self.options = opts
        self.max_requeues = max_requeues
        self.setup = list(setup or [])
        self.signal_delay_s = signal_delay_s
        if shutil.which("sbatch") is None:
            raise RuntimeError("the slurm runner needs sbatch on PATH (is this a SLURM login node? "
                               "tools/slurm/up.sh starts a local one)")
        self.folder = self.state_dir / "slurm" / "%j"

    def _parameters(self, job: Job) -> dict:
        o = self.options
        params = dict(job_name=self._job_name(job), time=int(o["time_min"] or 1440), nodes=job.nodes,
                      ntasks_per_node=job.tasks_per_node, signal_delay_s=self.signal_delay_s)
        if job.gpus:
            params["gpus_per_node"] = job.gpus
        for key in ("partition", "account", "qos", "constraint"):
            if o[key]:
                params[key] = o[key]
        if o["cpus_per_task"]:
            params["cpus_per_task"] = int(o["cpus_per_task"])
        if o["mem_gb"]:
            params["mem"] = f"{int(float(o['mem_gb']) * 1024)}M"
        if self.setup:
            params["setup"] = self.setup
        params["additional_parameters"] = _parse_sbatch(o["sbatch"])
        return params

    @staticmethod
    def _job_name(job: Job) -> str:
        return re.sub(r"[^A-Za-z0-9._=+-]", "_", job.name or job.key)[:100] + "." + job.key[:12]

    def _launch(self, job, sources):
        import submitit
        executor = submitit.SlurmExecutor(folder=self.folder, max_num_timeout=self.max_requeues)
        params = self._parameters(job)
        if sources:
            ids = ":".join(r["job_id"] for r in sources.values())
            params["additional_parameters"] = {**params["additional_parameters"], "dependency": f"afterok:{ids}",
                                               "kill-on-invalid-dep": "yes"}
        executor.update_parameters(**params)
        try:
            sub = executor.submit(SlurmCall(job.fn, job.key))
        except Exception:
            # Some SLURM versions refuse a dependency on a job they have already forgotten (finished
            # more than MinJobAge ago, after our states were read; 22.05 takes it as satisfied):
            # if every source completed, submit plainly.
            known = _sacct([r["job_id"] for r in sources.values()])
            if not sources or any(known.get(r["job_id"], ("",))[0] != "COMPLETED" for r in sources.values()):
                raise
            params["additional_parameters"].pop("dependency")
            params["additional_parameters"].pop("kill-on-invalid-dep")
            executor.update_parameters(**params)
            sources = {}
            sub = executor.submit(SlurmCall(job.fn, job.key))
        paths = sub.paths
        return {"job_id": sub.job_id, "job_name": params["job_name"], "folder": str(paths.folder),
                "logs": [str(paths.stderr).replace("%t", "0"), str(paths.stdout).replace("%t", "0")],
                "sources": {k: r["job_id"] for k, r in sources.items()}}

    def _discard(self, old):
        # A stale record of a job still in the queue (e.g. waiting on a source that failed).
        if old.get("runner") == "slurm" and old.get("job_id"):
            subprocess.run(["scancel", old["job_id"]], capture_output=True, timeout=60)

    def log_tail(self, key, lines=20):
        record = self.record(key) or {}
        logs = [Path(p.replace("%j", record.get("job_id", "%j"))) for p in record.get("logs", [])]
        return _tail(logs, lines)

    def job(self, key: str):
        """The :class:`submitit.SlurmJob` of ``key``'s latest submission (or None)."""
        record = self.record(key)
        if not record or record.get("runner") != "slurm":
            return None
        import submitit
        return submitit.SlurmJob(folder=record["folder"], job_id=record["job_id"])


if __name__ == "__main__":
    sys.exit(_run_local_job(sys.argv[1]))
