"""The SLURM runner: one ``sbatch`` per job through submitit, states from SLURM, never a key twice.

Options (keyword, else environment, else the job's own request): ``partition``
(``QUADNN_SLURM_PARTITION``), ``account`` (``QUADNN_SLURM_ACCOUNT``), ``qos``
(``QUADNN_SLURM_QOS``), ``time_min`` (``QUADNN_SLURM_TIME``, default 1440), ``constraint``
(``QUADNN_SLURM_CONSTRAINT``), ``cpus_per_task`` (``QUADNN_SLURM_CPUS_PER_TASK``), ``mem_gb``
(``QUADNN_SLURM_MEM_GB``), ``sbatch`` (extra options, a dict or ``"--key=value --flag"``;
``QUADNN_SLURM_SBATCH``), ``max_requeues`` (default 10), ``setup`` (shell lines run first). A job's
``gpus`` become ``--gpus-per-node`` (every task sees the node's GPUs and takes ``cuda:LOCAL_RANK``),
``tasks_per_node`` ``--ntasks-per-node``, ``cpus_per_task``/``mem_gb`` ``--cpus-per-task``/``--mem``.
A job whose source is queued gets ``--dependency=afterok:<id>``. The callable runs inside a
:class:`submitit.helpers.Checkpointable`: on preemption or timeout submitit requeues it and it
resumes from its own checkpoint; a job killed outright is ``failed`` and the next submit resubmits it.

Submission survives a controller that does not answer: the record (with a job name unique to the
attempt) and the job's pickle are written *before* ``sbatch``; the job script itself puts the pickle
in place if the submitter never could. After a failed ``sbatch`` the runner looks the name up with
``squeue``/``sacct``: a job found is adopted; none, with the controller answering and the error a
rejection, is an error; otherwise the record stays "submitted, unconfirmed" (pending) and later
passes look again. A name unknown for :data:`GRACE_S` with the controller answering becomes
``missing`` (submitted again).

States come from ``sacct`` (retried with backoff), then from ``squeue`` (what the controller still
holds); a job neither can tell about stays ``pending``, never failed or resubmitted. The record's
job name is compared, so a job id reused after SLURM's state was wiped is not taken for ours.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
import uuid
from pathlib import Path

from submitit.helpers import Checkpointable

from .runners import Job, Runner, private_dir

__all__ = ["SlurmRunner", "SlurmCall", "GRACE_S"]

ACTIVE = {
    "PENDING": "pending",
    "REQUEUED": "pending",
    "REQUEUE_HOLD": "pending",
    "REQUEUE_FED": "pending",
    "RESIZING": "pending",
    "SUSPENDED": "pending",
    "CONFIGURING": "pending",
    "RUNNING": "running",
    "COMPLETING": "running",
    "STAGE_OUT": "running",
    "SIGNALING": "running",
    "STOPPED": "running",
}
JOBS = "jobs"  # submitit's folder: pickles and logs of every job, named by job id
GRACE_S = 300  # how long SLURM may not know a job it was asked to take
SACCT_TIMEOUT_S = 20  # a sacct whose database does not answer hangs: give up after this ...
SACCT_RETRIES = 2  # ... this many more times (1 s, 2 s, ... apart), then ask squeue
_TRANSIENT = (
    "timed out",
    "Unable to contact",
    "Zero Bytes",
    "Connection refused",
    "temporarily unavailable",
    "Socket",
    "TimeoutExpired",
)


def _call(cmd: list[str], timeout: float = 60) -> str | None:
    """stdout of ``cmd``, or None when it fails or hangs (a paused controller, a slow database)."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def _rows(text: str | None) -> dict[str, tuple[str, str]]:
    rows = (line.split("|") for line in (text or "").splitlines())
    return {r[0]: ((r[1].split() or ["UNKNOWN"])[0], r[2]) for r in rows if len(r) >= 3}


def query(job_ids: list[str]) -> tuple[dict[str, tuple[str, str]], bool]:
    """``({job id: (STATE, job name)}, whether SLURM answered)``: sacct (tried
    ``1 + SACCT_RETRIES`` times with backoff), then squeue for what sacct could not say."""
    if not job_ids:
        return {}, True
    text = None
    for attempt in range(SACCT_RETRIES + 1):
        text = _call(
            ["sacct", "-X", "-n", "-P", "-o", "JobIDRaw,State,JobName", "-j", ",".join(job_ids)],
            timeout=SACCT_TIMEOUT_S,
        )
        if text is not None or attempt == SACCT_RETRIES:
            break
        time.sleep(2**attempt)
    known = _rows(text)
    if len(known) < len(job_ids):
        queued = _call(["squeue", "-h", "-t", "all", "-o", "%i|%T|%j"])
        known = {**{k: v for k, v in _rows(queued).items() if k in job_ids}, **known}
        return known, text is not None and queued is not None
    return known, True


def find(name: str, since: float) -> tuple[list[str], bool]:
    """Job ids named ``name`` (submitted since ``since``), and whether the controller answered."""
    queued = _call(["squeue", "-h", "-t", "all", "-n", name, "-o", "%i"], timeout=30)
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since - 60))
    accounted = _call(
        ["sacct", "-X", "-n", "-P", "--name", name, "-S", start, "-o", "JobIDRaw"], timeout=SACCT_TIMEOUT_S
    )
    ids = {i.strip() for text in (queued, accounted) for i in (text or "").split() if i.strip()}
    return sorted(ids, key=int), queued is not None


class SlurmCall(Checkpointable):
    """What SLURM runs: the distributed environment from submitit
    (:class:`~submitit.helpers.TorchDistributedEnvironment`), then the job. Checkpointable: on USR2
    submitit pickles this object again and requeues it; the job resumes from its checkpoint."""

    def __init__(self, fn, key: str):
        self.fn, self.key = fn, key

    def __call__(self):
        from submitit.helpers import TorchDistributedEnvironment

        # The engine picks cuda:LOCAL_RANK itself, so every task keeps the node's GPUs visible.
        TorchDistributedEnvironment().export(set_cuda_visible_devices=False, overwrite=True)
        os.environ["QUADNN_JOB_KEY"] = self.key
        return self.fn()


def _parse_sbatch(extra: str | dict | None) -> dict:
    if isinstance(extra, dict) or not extra:
        return dict(extra or {})
    out = {}
    for token in shlex.split(extra):
        if not token.startswith("--"):
            raise ValueError(f"extra sbatch option {token!r}: expected --key=value or --flag")
        key, _, value = token[2:].partition("=")
        out[key] = value or True
    return out


class SlurmRunner(Runner):
    """Submits through submitit's SlurmExecutor; see the module doc."""

    name = "slurm"
    _ENV = {
        "partition": "QUADNN_SLURM_PARTITION",
        "account": "QUADNN_SLURM_ACCOUNT",
        "qos": "QUADNN_SLURM_QOS",
        "time_min": "QUADNN_SLURM_TIME",
        "constraint": "QUADNN_SLURM_CONSTRAINT",
        "cpus_per_task": "QUADNN_SLURM_CPUS_PER_TASK",
        "mem_gb": "QUADNN_SLURM_MEM_GB",
        "sbatch": "QUADNN_SLURM_SBATCH",
    }

    def __init__(
        self,
        state_dir,
        is_done=None,
        max_requeues: int = 10,
        setup: list[str] | None = None,
        signal_delay_s: int = 120,
        **options,
    ):
        super().__init__(state_dir, is_done)
        unknown = sorted(set(options) - set(self._ENV))
        if unknown:
            raise ValueError(f"unknown slurm option(s) {unknown}; valid: {', '.join(self._ENV)}")
        self.options = {
            k: options.get(k) if options.get(k) is not None else os.environ.get(v) or None for k, v in self._ENV.items()
        }
        self.max_requeues, self.setup, self.signal_delay_s = max_requeues, list(setup or []), signal_delay_s
        if shutil.which("sbatch") is None:
            raise RuntimeError(
                "the slurm runner needs sbatch on PATH (is this a SLURM login node? "
                "tools/slurm/up.sh starts a local one)"
            )
        self.folder = private_dir(self.state_dir / "slurm")
        self._known: dict | None = None  # one query's answers while a submit/states call lasts

    @property
    def max_gpus(self) -> int | None:
        """The most GPUs a node of the partition has (``sinfo``'s GRES); None when unknown."""
        cmd = ["sinfo", "-h", "-o", "%G"] + (["-p", self.options["partition"]] if self.options["partition"] else [])
        text = _call(cmd, timeout=30)
        if text is None:
            return None
        counts = [int(m.group(1)) for m in re.finditer(r"gpu(?::[^:,(\s]+)?:(\d+)", text)]
        return max(counts, default=0)

    # states
    def states(self, keys, is_done=None):
        keys = list(keys)
        self._prefetch(keys)
        try:
            return super().states(keys, is_done)
        finally:
            self._known = None

    def submit(self, jobs, is_done=None):
        jobs = list(jobs)
        self._prefetch({j.key for j in jobs} | {d for j in jobs for d in j.deps})
        try:
            return super().submit(jobs, is_done)
        finally:
            self._known = None

    def _prefetch(self, keys) -> None:
        ids = [r["job_id"] for r in map(self.record, keys) if r and r.get("job_id")]
        self._known = query(ids)

    # submission
    def _parameters(self, job: Job, name: str, intent: Path) -> dict:
        o = self.options
        params = dict(
            job_name=name,
            time=int(o["time_min"] or 1440),
            nodes=job.nodes,
            ntasks_per_node=job.tasks_per_node,
            signal_delay_s=self.signal_delay_s,
        )
        if job.gpus:
            params["gpus_per_node"] = job.gpus
        for key in ("partition", "account", "qos", "constraint"):
            if o[key]:
                params[key] = o[key]
        cpus = o["cpus_per_task"] or job.cpus_per_task
        mem = o["mem_gb"] or job.mem_gb
        if cpus:
            params["cpus_per_task"] = int(cpus)
        if mem:
            params["mem"] = f"{int(float(mem) * 1024)}M"
        # If sbatch's answer was lost, nobody moved the pickle into place: the job does it (through a
        # copy renamed into place, since the submitter may move the same pickle there meanwhile).
        q = shlex.quote
        params["setup"] = self.setup + [
            # torch's intra-op threads on the CPUs SLURM gave the task, not on every core of the node:
            # four 1-CPU tasks on one node otherwise spin against each other (TINY ResNet20 epoch 3.5 s vs 0.33 s here).
            'export OMP_NUM_THREADS="${SLURM_CPUS_PER_TASK:-1}"',
            f'p={q(str(self.folder / JOBS))}/"${{SLURM_JOB_ID}}_submitted.pkl"; '
            f'[ -e "$p" ] || {{ cp {q(str(intent))} "$p.$$" && mv -f "$p.$$" "$p"; }} || rm -f "$p.$$"',
        ]
        params["additional_parameters"] = _parse_sbatch(o["sbatch"])
        return params

    @staticmethod
    def _job_name(job: Job) -> str:
        base = re.sub(r"[^A-Za-z0-9._=+-]", "_", job.name or job.key)[:80]
        return f"{base}.{job.key[:12]}.{uuid.uuid4().hex[:6]}"

    def _launch(self, job, sources, record):
        import submitit
        from submitit.core.utils import DelayedSubmission

        name = self._job_name(job)
        intent = private_dir(self.folder / "intents") / f"{name}.pkl"
        record = {
            **record,
            "job_name": name,
            "intent": str(intent),
            "job_id": None,
            "sources": {k: r["job_id"] for k, r in sources.items()},
        }
        # One flat folder that exists before sbatch: SLURM opens a job's log there when it starts,
        # which may be before we learn its id (a per-job "%j" folder would not exist yet).
        folder = private_dir(self.folder / JOBS)
        executor = submitit.SlurmExecutor(folder=folder, max_num_timeout=self.max_requeues)
        params = self._parameters(job, name, intent)
        if sources:
            params["additional_parameters"].update(
                dependency="afterok:" + ":".join(record["sources"].values()), **{"kill-on-invalid-dep": "yes"}
            )
        executor.update_parameters(**params)
        delayed = DelayedSubmission(SlurmCall(job.fn, job.key))
        delayed.set_timeout(params["time"], self.max_requeues)
        delayed.dump(intent)
        self.write_record(record)  # the intent, before sbatch
        try:
            sub = executor._submit_command(executor._submitit_command_str)
        except Exception as error:  # noqa: BLE001  (submitit raises several kinds)
            return self._after_error(job, record, sources, error)
        return adopt(self, record, [sub.job_id])

    def _after_error(self, job, record, sources, error) -> dict:
        message = " ".join(str(error).split())[-300:]
        ids, answered = [], False
        for delay in (1, 2, 4, 8):  # the controller may take the job while we ask
            ids, answered = find(record["job_name"], record["submitted_at"])
            if ids or answered:
                break
            time.sleep(delay)
        if ids:
            return adopt(self, record, ids)
        if answered and not any(t in message for t in _TRANSIENT):
            Path(record["intent"]).unlink(missing_ok=True)
            self.record_path(job.key).unlink(missing_ok=True)
            known, _ = query(list(record["sources"].values()))
            if sources and all(known.get(i, ("",))[0] == "COMPLETED" for i in record["sources"].values()):
                # SLURM refuses a dependency on a job it has forgotten; every source completed.
                return self._launch(job, {}, {k: v for k, v in record.items() if k in _BASE})
            hint = (
                f" (the job asks for {job.gpus} GPU(s); on a cluster without GPUs set QUADNN_GPUS_PER_RUN=0)"
                if job.gpus and "configuration is not available" in message
                else ""
            )
            raise RuntimeError(f"sbatch refused job {job.key}: {message}{hint}") from None
        print(
            f"slurm: sbatch for {job.key} failed ({message}); the controller "
            f"{'answers but does not list it yet' if answered else 'does not answer'}: kept as submitted, "
            "unconfirmed, and looked up again on the next pass",
            flush=True,
        )
        return {**record, "error": message}

    def _can_follow(self, dep_record):
        return dep_record is not None and dep_record.get("runner") == "slurm" and bool(dep_record.get("job_id"))

    def _discard(self, old):
        if old.get("runner") == "slurm" and old.get("job_id"):
            _call(["scancel", old["job_id"]])  # e.g. still queued behind a source that failed

    def log_tail(self, key, lines=20):
        from .runners import tail

        record = self.record(key) or {}
        return tail([Path(p.replace("%j", record.get("job_id") or "%j")) for p in record.get("logs", [])], lines)

    def job(self, key: str):
        """The :class:`submitit.SlurmJob` of ``key``'s latest submission (or None)."""
        import submitit

        record = self.record(key)
        if not record or not record.get("job_id"):
            return None
        return submitit.SlurmJob(folder=record["folder"], job_id=record["job_id"])


_BASE = ("key", "runner", "deps", "submitted_at", "submitted_by")


def record_state(runner: Runner, record: dict) -> tuple[str, str]:
    """State of a SLURM record, for any runner (``make status`` reads them through ``inline``)."""
    if not record.get("job_id"):
        return _unconfirmed(runner, record)
    known = getattr(runner, "_known", None)
    known, answered = known if known is not None else query([record["job_id"]])
    info = known.get(record["job_id"])
    # sacct names a job "allocation" for a moment while it completes; another name: not ours.
    if info is None or info[1] not in (record["job_name"], "allocation"):
        if answered and time.time() - record["submitted_at"] > GRACE_S:
            return "failed", f"SLURM does not know job {record['job_id']} (its state was wiped?)"
        return "pending", "" if answered else "state unknown: sacct and squeue do not answer"
    if info[0] == "COMPLETED":
        return "done", ""
    if info[0] in ACTIVE:
        return ACTIVE[info[0]], ""
    return "failed", f"SLURM job {record['job_id']} is {info[0]}"


def _unconfirmed(runner: Runner, record: dict) -> tuple[str, str]:
    """A submission whose sbatch failed: adopt the job SLURM took under its name, if any."""
    ids, answered = find(record["job_name"], record["submitted_at"])
    if ids:
        adopt(runner, record, ids)
        return "pending", ""
    if answered and time.time() - record["submitted_at"] > GRACE_S:
        return "missing", f"sbatch failed ({record.get('error')}) and SLURM has no job {record['job_name']}"
    return "pending", f"submitted, unconfirmed: {record.get('error')}"


def adopt(runner: Runner, record: dict, ids: list[str]) -> dict:
    """Record SLURM's job for this attempt with its pickle in place; extra ones are cancelled."""
    import submitit

    for extra in ids[1:]:
        _call(["scancel", extra])
    intent = Path(record["intent"])
    job = submitit.SlurmJob(folder=intent.parent.parent / JOBS, job_id=ids[0])
    if intent.exists():
        job.paths.move_temporary_file(intent, "submitted_pickle")
    private_dir(job.paths.folder)
    record = {
        **record,
        "job_id": ids[0],
        "folder": str(job.paths.folder),
        "logs": [str(job.paths.stderr).replace("%t", "0"), str(job.paths.stdout).replace("%t", "0")],
    }
    record.pop("error", None)
    runner.write_record(record)
    return record
