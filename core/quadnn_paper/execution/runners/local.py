"""The local runner: jobs in child processes on this machine, one GPU token per job.

Slots are this machine's GPUs (``CUDA_VISIBLE_DEVICES``, else ``nvidia-smi -L``; option ``gpus``)
or, without GPUs, ``workers`` CPU slots (default ``QUADNN_LOCAL_WORKERS`` or the CPU count). A
thread pool starts each job once its sources are done and it holds ``max(1, gpus)`` slots; the
job sees exactly its GPUs in ``CUDA_VISIBLE_DEVICES`` and gets ``OMP_NUM_THREADS = CPUs // slots``
unless that is set. A job's process (:mod:`.local_worker`) holds the key's lock while it runs
(another submitter sees it running; the job skips a key that became done meanwhile), and
``tasks_per_node > 1`` starts that many ranks with ``torchrun``. The queue lives in the submitting
process: if it is killed, queued jobs are lost (``missing``: the next submit queues them again)
and a started job runs to its end and records its exit status itself.

With GPUs every job is a process of its own (``CUDA_VISIBLE_DEVICES`` cannot change inside one).
Without, each CPU slot keeps one worker process (``--serve``) that runs its jobs one after another,
so a job costs its own work, not a Python start and the import of torch and the engine; a job
that kills its worker fails alone, and the slot starts a new worker for the next one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from ...common.files import private_dir, read_json
from .base import Job, Runner, call

__all__ = ["LocalRunner", "visible_gpus"]
_MODULE = "quadnn_paper.execution.runners.local_worker"  # what a job's process runs


def visible_gpus() -> list[str]:
    """This machine's GPUs: ``CUDA_VISIBLE_DEVICES`` if set, else ``nvidia-smi -L``."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip() and d.strip() != "-1"]
    listed = (call(["nvidia-smi", "-L"], timeout=20) or "").splitlines()
    return [str(i) for i, _ in enumerate(x for x in listed if x.startswith("GPU "))]


class LocalRunner(Runner):
    """A queue over this machine's GPUs (one token each) or ``workers`` CPU slots."""

    name = "local"
    max_poll_s = 1.0  # the states are files on this machine, cheap to read

    def __init__(self, state_dir, is_done=None, workers: int | None = None, gpus: list[str] | None = None):
        super().__init__(state_dir, is_done)
        self.gpus = [str(g) for g in (visible_gpus() if gpus is None else gpus)]
        workers = workers or int(os.environ.get("QUADNN_LOCAL_WORKERS", 0)) or os.cpu_count() or 1
        self.slots = self.gpus or [f"cpu{i}" for i in range(workers)]
        self._free = list(self.slots)
        self._cond = threading.Condition()
        self._pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="quadnn-local")
        self._futures: dict[str, Future] = {}
        self._phase: dict[str, str] = {}  # key -> pending | running, while this process has it
        self._holding: set[str] = set()  # keys whose job holds slots now (under _cond)
        self._workers = {slot: SlotWorker() for slot in self.slots} if not self.gpus else {}

    def __repr__(self):
        what = f"gpus={self.gpus}" if self.gpus else f"workers={len(self.slots)}"
        return f"LocalRunner({str(self.state_dir)!r}, {what})"

    @property
    def max_gpus(self) -> int:
        """The most GPUs one job can have here."""
        return len(self.gpus)

    @property
    def running(self) -> int:
        """How many jobs of this runner hold slots now (a job's phase stays "running" until its exit
        is recorded, after it gave its slots back)."""
        with self._cond:
            return len(self._holding)

    def _check(self, job):
        if job.nodes != 1:
            raise ValueError(f"job {job.key} asks for {job.nodes} nodes; the local runner has one")
        if job.gpus and not self.gpus:
            raise ValueError(f"job {job.key} needs {job.gpus} GPU(s) and this machine has none visible")
        if job.gpus > len(self.slots):
            raise ValueError(f"job {job.key} needs {job.gpus} GPUs; this machine has {len(self.slots)}")

    def _record_state(self, record):
        phase = self._phase.get(record["key"])
        return (phase, "") if phase else super()._record_state(record)

    def _can_follow(self, dep_record):
        return dep_record is not None and dep_record["key"] in self._phase

    def _launch(self, jobs, sources, records):
        try:
            import cloudpickle as pickler
        except ImportError:  # a machine's own PyTorch without it (make gpu-check): our jobs pickle plainly
            import pickle as pickler

        (job,), (record,) = jobs, records  # max_group is 1
        try:
            blob = pickler.dumps(dict(key=job.key, fn=job.fn, is_done=self.is_done, tasks=job.tasks_per_node))
        except (AttributeError, TypeError, pickler.PicklingError) as e:  # a lambda or local class, plain pickle
            raise RuntimeError(
                f"job {job.key} does not pickle without cloudpickle ({e}): pip install cloudpickle"
            ) from e
        spec = private_dir(self.state_dir / "jobs") / f"{job.key}.pkl"
        fd = os.open(spec.with_suffix(".tmp"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(spec.with_suffix(".tmp"), spec)
        return [{**record, "spec": str(spec)}]

    def _after_submit(self, job):
        self._phase[job.key] = "pending"
        self._futures[job.key] = self._pool.submit(self._run, job, self.record(job.key))
        return "pending"

    def _run(self, job: Job, record: dict) -> None:
        try:
            for dep in job.deps:
                if dep in self._futures:
                    self._futures[dep].result()
                state, reason = self.state(dep)
                if state != "done":
                    self.write_record({**record, "exit": 1, "error": f"source {dep} failed: {reason}"})
                    return
            need = max(1, job.gpus)
            with self._cond:
                self._cond.wait_for(lambda: len(self._free) >= need)
                slots, self._free = self._free[:need], self._free[need:]
                self._holding.add(job.key)
            try:
                self._phase[job.key] = "running"
                code = self._spawn(job, record, slots)
            finally:
                with self._cond:
                    self._holding.discard(job.key)
                    self._free = sorted(self._free + slots, key=self.slots.index)
                    self._cond.notify_all()
            if "exit" not in (read_json(self.record_path(job.key)) or {}):  # killed before it could say
                self.write_record({**record, "exit": code, "error": f"the job process ended with exit {code}"})
        finally:
            self._phase.pop(job.key, None)

    def close(self) -> None:
        """End the slots' worker processes after their current jobs (they also end with this process)."""
        for worker in self._workers.values():
            worker.close()

    def _spawn(self, job: Job, record: dict, slots: list[str]) -> int:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))  # imports as here
        if self.gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(slots) if job.gpus else ""
        env.setdefault("OMP_NUM_THREADS", str(max(1, _cpus() // len(self.slots))))
        with open(record["logs"][0], "a") as log:
            log.write(f"--- local attempt on {','.join(slots)}\n")
            log.flush()
            if self._workers and job.tasks_per_node == 1:
                return self._workers[slots[0]].run(record["spec"], str(self.state_dir), record["logs"][0], env)
            cmd = [sys.executable, "-u", "-m", _MODULE, record["spec"], str(self.state_dir)]
            return subprocess.call(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


class SlotWorker:
    """One CPU slot's worker process (``local_worker --serve``), started at the slot's first job and
    again after a job that took it down; :meth:`run` answers a job's exit status."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.env: dict | None = None

    def run(self, spec: str, state_dir: str, log: str, env: dict) -> int:
        if env != self.env:  # a worker keeps the environment it started with: a new one for another
            self.close()
        if self.proc is None or self.proc.poll() is not None:
            self.env = env
            cmd = [sys.executable, "-u", "-m", _MODULE, "--serve"]
            self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            self.proc.stdin.write(json.dumps([spec, state_dir, log]) + "\n")
            self.proc.stdin.flush()
            answer = self.proc.stdout.readline()
        except (BrokenPipeError, OSError):
            answer = ""
        if answer.strip():
            return int(answer)
        code = self.proc.wait()  # died with the job: its exit status (a signal: negative) is the job's
        self.proc = None
        return code or 1

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait()
        self.proc = None


def _cpus() -> int:
    """The CPUs this process may run on (its affinity, which a batch system may narrow), shared by the slots."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
