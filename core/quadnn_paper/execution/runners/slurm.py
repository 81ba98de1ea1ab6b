"""The SLURM runner: jobs to ``sbatch`` through submitit, states from SLURM, never a key twice.

Options (keyword, else ``QUADNN_SLURM_<OPTION>``, else the job's own request): ``partition``,
``account``, ``qos``, ``time_min`` (``QUADNN_SLURM_TIME``, default 1440), ``constraint``,
``cpus_per_task``, ``mem_gb``, ``sbatch`` (extra options, a dict or ``"--key=value --flag"``);
``max_requeues`` (default 10), ``setup`` (shell lines run first). A job's ``gpus`` become
``--gpus-per-node`` (every task sees the node's GPUs and takes ``cuda:LOCAL_RANK``).
The jobs of one ``submit`` that wait for no queued source and ask alike go to SLURM as one job array
(one ``sbatch``), task ``i`` recorded as job ``<array id>_<i>``; a job whose source is queued goes
alone with ``--dependency=afterok:<source's id>``. The callable is checkpointable: on preemption
or timeout submitit requeues it (an array's task alone) and it resumes from its own checkpoint; a
job killed outright is ``failed`` and the next submit resubmits it alone. A job starts through
:mod:`.slurm_job`, which holds those signals until submitit's handlers are in place.

Submission survives a controller that does not answer: the records (with a job name unique to the
attempt) and the pickles are written *before* ``sbatch``, under the keys' submit locks, and the job
script puts its pickle in place if the submitter never could. After a failed ``sbatch`` the job is
looked up by its name: one found is adopted; none, with the controller answering and the error a
rejection, is an error; otherwise the records stay "submitted, unconfirmed" (pending) and later
passes look again, until :data:`GRACE_S` without SLURM knowing the name makes them ``missing``.
A job neither ``sacct`` nor ``squeue`` can tell about stays ``pending``, never failed or resubmitted.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import sys
import time
import uuid
from pathlib import Path

from ...common.files import private_dir
from .base import Job, Runner, call

# submitit is imported where it is used: this module is imported with the package, also where
# submitit is not installed (a GPU node checking a build).

__all__ = ["SlurmRunner", "SlurmCall", "GRACE_S"]

ACTIVE = dict.fromkeys("PENDING REQUEUED REQUEUE_HOLD REQUEUE_FED RESIZING SUSPENDED CONFIGURING".split(), "pending")
ACTIVE |= dict.fromkeys("RUNNING COMPLETING STAGE_OUT SIGNALING STOPPED".split(), "running")
# submitit's folder: pickles and logs of every job, named by job id; one flat folder that exists before
# sbatch, since SLURM opens a job's log there when it starts, maybe before we learn its id
JOBS = "jobs"
JOB_MAIN = Path(__file__).with_name("slurm_job.py")  # what a job runs: submitit's entry, signals held from the start
GRACE_S = 300  # how long SLURM may not know a job it was asked to take
SIGNAL_EARLY_S = 60  # sbatch --signal: "the signal may be sent up to 60 seconds earlier than specified"
SACCT_TIMEOUT_S = 20  # a sacct whose database does not answer hangs: give up after this ...
SACCT_RETRIES = 2  # ... this many more times (1 s, 2 s, ... apart), then ask squeue
# sbatch errors that say nothing about the job (the controller did not answer in time)
_TRANSIENT = "timed out|Unable to contact|Zero Bytes|Connection refused|temporarily unavailable|Socket|TimeoutExpired"


def _rows(text: str) -> dict[str, tuple[str, str]]:
    """``{job id: (STATE, job name)}`` from ``JobID|State|JobName`` lines under that header, by
    submitit's parser (which expands a pending array's ``123_[0-5]``)."""
    from submitit import SlurmJob

    info = SlurmJob.watcher.read_info(text)
    return {i: ((r.get("State", "").split() or ["UNKNOWN"])[0], r.get("JobName", "")) for i, r in info.items()}


def query(job_ids: list[str]) -> tuple[dict[str, tuple[str, str]], bool]:
    """``({job id: (STATE, job name)}, whether SLURM answered)`` for plain jobs and array tasks
    (``<array id>_<i>``, sacct's JobID, not its JobIDRaw): sacct on their jobs and arrays (tried
    ``1 + SACCT_RETRIES`` times with backoff), then ``squeue -r`` for what sacct could not say."""
    if not job_ids:
        return {}, True
    text, bases = None, ",".join(sorted({i.split("_")[0] for i in job_ids}))
    for attempt in range(SACCT_RETRIES + 1):
        text = call(["sacct", "-X", "-P", "-o", "JobID,State,JobName", "-j", bases], timeout=SACCT_TIMEOUT_S)
        if text is not None or attempt == SACCT_RETRIES:
            break
        time.sleep(2**attempt)
    known = _rows(text or "")
    if all(i in known for i in job_ids):
        return known, True
    queued = call(["squeue", "-h", "-r", "-t", "all", "-o", "%i|%T|%j"])
    held = _rows("JobID|State|JobName\n" + (queued or ""))
    return {**{i: held[i] for i in job_ids if i in held}, **known}, text is not None and queued is not None


def find(name: str, since: float) -> tuple[list[str], bool]:
    """Ids of the jobs or arrays named ``name`` (submitted since ``since``), and whether the
    controller answered."""
    queued = call(["squeue", "-h", "-t", "all", "-n", name, "-o", "%F"], timeout=30)
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since - 60))
    accounted = call(["sacct", "-X", "-n", "-P", "--name", name, "-S", start, "-o", "JobID"], timeout=SACCT_TIMEOUT_S)
    ids = {i.split("_")[0] for text in (queued, accounted) for i in (text or "").split() if i.strip()}
    return sorted(ids, key=int), queued is not None


class SlurmCall:
    """What SLURM runs: submitit's distributed environment, then the job. Checkpointable (its
    ``checkpoint`` method): on USR2 submitit requeues it; the job resumes from its own checkpoint."""

    def __init__(self, fn, key: str):
        self.fn, self.key = fn, key

    def checkpoint(self, *args, **kwargs):
        from submitit.core.utils import DelayedSubmission

        return DelayedSubmission(self, *args, **kwargs)

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
    max_group = 500  # tasks of one array (SLURM's MaxArraySize defaults to 1001)
    _OPTIONS = ("partition", "account", "qos", "time_min", "constraint", "cpus_per_task", "mem_gb", "sbatch")
    _ENV = {k: "QUADNN_SLURM_" + k.upper().removesuffix("_MIN") for k in _OPTIONS}  # time_min: QUADNN_SLURM_TIME

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
        self.time_min = int(self.options["time_min"] or 1440)
        if signal_delay_s + SIGNAL_EARLY_S >= 60 * self.time_min:  # the signal could come before Python holds it
            raise ValueError(
                f"time_min={self.time_min} with signal_delay_s={signal_delay_s}: SLURM may send the timeout signal "
                f"{SIGNAL_EARLY_S} s early, as the job starts; time_min must be at least "
                f"{(signal_delay_s + SIGNAL_EARLY_S) // 60 + 1}"
            )
        try:
            import submitit  # noqa: F401
        except ImportError:
            raise RuntimeError("the slurm runner needs submitit: pip install 'quadnn-paper[paper]'") from None
        if shutil.which("sbatch") is None:
            raise RuntimeError(
                "the slurm runner needs sbatch on PATH (is this a SLURM login node? "
                "tools/slurm/up.sh starts a local one)"
            )
        self.folder = private_dir(self.state_dir / "slurm")
        self._known, self._names = None, None  # one query's answers while a submit/states call lasts

    @property
    def max_gpus(self) -> int | None:
        """The most GPUs a node of the partition has (``sinfo``'s GRES); None when unknown."""
        cmd = ["sinfo", "-h", "-o", "%G"] + (["-p", self.options["partition"]] if self.options["partition"] else [])
        text = call(cmd, timeout=30)
        if text is None:
            return None
        counts = [int(m.group(1)) for m in re.finditer(r"gpu(?::[^:,(\s]+)?:(\d+)", text)]
        return max(counts, default=0)

    # states
    def states(self, keys, is_done=None):
        keys = list(keys)
        with self._asking(keys):
            return super().states(keys, is_done)

    def submit(self, jobs, is_done=None):
        jobs = list(jobs)
        with self._asking({j.key for j in jobs} | {d for j in jobs for d in j.deps}):
            return super().submit(jobs, is_done)

    @contextlib.contextmanager
    def _asking(self, keys):
        """One query for the jobs of ``keys`` (one lookup per unconfirmed job name) while a call lasts."""
        ids = [r["job_id"] for r in map(self.record, keys) if r and r.get("job_id")]
        self._known, self._names = query(ids), {}
        try:
            yield
        finally:
            self._known = self._names = None

    # submission
    def _parameters(self, job: Job, name: str, intents: Path, array: bool) -> dict:
        o = self.options
        params = dict(
            job_name=name,
            time=self.time_min,
            nodes=job.nodes,
            ntasks_per_node=job.tasks_per_node,
            signal_delay_s=self.signal_delay_s,
        )
        if job.gpus:
            params["gpus_per_node"] = job.gpus
        params |= {key: o[key] for key in ("partition", "account", "qos", "constraint") if o[key]}
        cpus = o["cpus_per_task"] or job.cpus_per_task
        mem = o["mem_gb"] or job.mem_gb
        if cpus:
            params["cpus_per_task"] = int(cpus)
        if mem:
            params["mem"] = f"{int(float(mem) * 1024)}M"
        q = shlex.quote
        params["setup"] = self.setup + [
            # sbatch exports the submitter's environment: a plain job submitted from inside an array
            # task would otherwise take itself for that task (its pickle, submitit's job id).
            *([] if array else ["unset ${!SLURM_ARRAY_@}"]),
            # torch's intra-op threads on the CPUs SLURM gave the task, not on every core of the node
            'export OMP_NUM_THREADS="${SLURM_CPUS_PER_TASK:-1}"',
            # SLURM >= 22.05: srun passes sbatch's --cpus-per-task on to its tasks only through this
            'if [ -n "${SLURM_CPUS_PER_TASK:-}" ]; then export SRUN_CPUS_PER_TASK="$SLURM_CPUS_PER_TASK"; fi',
            # If sbatch's answer was lost, nobody moved the pickle into place: the job does (a copy
            # renamed into place). Task i's pickle: submitit's <array id>_<i>_submitted.pkl, its intent <name>_<i>.pkl.
            f'i="${{SLURM_ARRAY_TASK_ID:+_$SLURM_ARRAY_TASK_ID}}"; '
            f'p={q(str(self.folder / JOBS))}/"${{SLURM_ARRAY_JOB_ID:-$SLURM_JOB_ID}}$i"_submitted.pkl; '
            f'[ -e "$p" ] || {{ cp {q(str(intents / name))}"$i.pkl" "$p.$$" && mv -f "$p.$$" "$p"; }} || rm -f "$p.$$"',
        ]
        params["additional_parameters"] = _parse_sbatch(o["sbatch"])
        return params

    @staticmethod
    def _job_name(job: Job) -> str:
        base = re.sub(r"[^A-Za-z0-9._=+-]", "_", job.name or job.key)[:80]
        return f"{base}.{job.key[:12]}.{uuid.uuid4().hex[:6]}"

    def _launch(self, jobs, sources, records):
        name, array = self._job_name(jobs[0]), len(jobs) > 1
        intents = private_dir(self.folder / "intents")
        ids = {k: r["job_id"] for k, r in sources.items()}
        records = [
            {**r, "job_name": name, "job_id": None, "sources": ids, "intent": str(intents / f"{name}.pkl")}
            | ({"array_index": i, "intent": str(intents / f"{name}_{i}.pkl")} if array else {})
            for i, r in enumerate(records)
        ]
        from submitit import SlurmExecutor
        from submitit.core.utils import DelayedSubmission

        python = f"{shlex.quote(sys.executable)} -u {shlex.quote(str(JOB_MAIN))}"
        executor = SlurmExecutor(
            folder=private_dir(self.folder / JOBS), max_num_timeout=self.max_requeues, python=python
        )
        params = self._parameters(jobs[0], name, intents, array)
        if sources:
            after = {"dependency": "afterok:" + ":".join(ids.values()), "kill-on-invalid-dep": "yes"}
            params["additional_parameters"].update(after)
        executor.update_parameters(**params)
        if array:  # --array=0-<n-1> and %A_%a logs, as submitit's executor.batch() asks for them
            executor.parameters["map_count"] = len(jobs)
        for job, record in zip(jobs, records):
            delayed = DelayedSubmission(SlurmCall(job.fn, job.key))
            delayed.set_timeout(params["time"], self.max_requeues)
            delayed.dump(record["intent"])
            self.write_record(record)  # the intent, before sbatch
        try:
            job_id = _sbatch(executor)
        except Exception as error:  # noqa: BLE001  (submitit raises several kinds)
            return self._after_error(jobs, records, sources, error)
        return adopt(self, records, [job_id])

    def _after_error(self, jobs, records, sources, error) -> list[dict]:
        message = " ".join(str(error).split())[-300:]
        what = jobs[0].key + (f" and {len(jobs) - 1} more (one array)" if len(jobs) > 1 else "")
        ids, answered = [], False
        for delay in (1, 2, 4, 8):  # the controller may take the job while we ask
            ids, answered = find(records[0]["job_name"], records[0]["submitted_at"])
            if ids or answered:
                break
            time.sleep(delay)
        if ids:
            return adopt(self, records, ids)
        if answered and not re.search(_TRANSIENT, message):
            for record in records:
                Path(record["intent"]).unlink(missing_ok=True)
                self.record_path(record["key"]).unlink(missing_ok=True)
            known, _ = query(list(records[0]["sources"].values()))
            if sources and all(known.get(i, ("",))[0] == "COMPLETED" for i in records[0]["sources"].values()):
                # SLURM refuses a dependency on a job it has forgotten; every source completed.
                return self._launch(jobs, {}, records)
            hint = (
                f" (the job asks for {jobs[0].gpus} GPU(s); on a cluster without GPUs set QUADNN_GPUS_PER_RUN=0)"
                if jobs[0].gpus and "configuration is not available" in message
                else ""
            )
            raise RuntimeError(f"sbatch refused job {what}: {message}{hint}") from None
        print(
            f"slurm: sbatch for {what} failed ({message}); the controller "
            f"{'answers but does not list it yet' if answered else 'does not answer'}: kept as submitted, "
            "unconfirmed, and looked up again on the next pass",
            flush=True,
        )
        return [{**r, "error": message} for r in records]

    def _can_follow(self, dep_record):
        return dep_record is not None and dep_record.get("runner") == "slurm" and bool(dep_record.get("job_id"))

    def _discard(self, old):
        if old and old.get("runner") == "slurm" and old.get("job_id"):
            call(["scancel", old["job_id"]])  # e.g. still queued behind a source that failed

    def job(self, key: str):
        """The :class:`submitit.SlurmJob` of ``key``'s latest submission (or None)."""
        from submitit import SlurmJob

        record = self.record(key)
        if not record or not record.get("job_id"):
            return None
        return SlurmJob(folder=record["folder"], job_id=record["job_id"])

    # states of records, for any reader (``make status`` reads them through ``inline``)
    @classmethod
    def read_record(cls, record: dict, reader: Runner) -> tuple[str, str]:
        """State of a SLURM record; a SlurmRunner reader answers from its one query per call."""
        if not record.get("job_id"):
            return cls._unconfirmed(record, reader)
        known = reader._known if isinstance(reader, SlurmRunner) else None
        return _state_of(record, *(known if known is not None else query([record["job_id"]])))

    @staticmethod
    def _unconfirmed(record: dict, reader: Runner) -> tuple[str, str]:
        """A submission whose sbatch failed: adopt the job SLURM took under its name, if any."""
        names = reader._names if isinstance(reader, SlurmRunner) else None
        names, name = {} if names is None else names, record["job_name"]  # an array's tasks share a lookup
        ids, answered = names[name] = names.get(name) or find(name, record["submitted_at"])
        if ids:
            adopt(reader, [record], ids)
            return "pending", ""
        if answered and time.time() - record["submitted_at"] > GRACE_S:
            return "missing", f"sbatch failed ({record.get('error')}) and SLURM has no job {name}"
        return "pending", f"submitted, unconfirmed: {record.get('error')}"


def _sbatch(executor) -> str:
    """Run sbatch for what ``executor`` was set up for; the job (or array) id. submitit's public
    ``submit``/``batch`` pickle and submit in one call (the pickle named by the id sbatch answers);
    our pickles and records are written before sbatch, which needs these two private calls."""
    return executor._submit_command(executor._submitit_command_str).job_id


def _state_of(record: dict, known: dict, answered: bool) -> tuple[str, str]:
    """State of a confirmed SLURM record from one query's answers."""
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


def adopt(runner: Runner, records: list[dict], ids: list[str]) -> list[dict]:
    """Record SLURM's job (an array: task ``array_index`` of it) for each record of this attempt,
    with its pickle in place; extra ones are cancelled."""
    from submitit.core.utils import JobPaths

    for extra in ids[1:]:
        call(["scancel", extra])
    adopted = []
    for record in records:
        job_id = ids[0] if "array_index" not in record else f"{ids[0]}_{record['array_index']}"
        intent = Path(record["intent"])
        paths = JobPaths(private_dir(intent.parent.parent / JOBS), job_id=job_id)  # task 0's logs
        if paths.submitted_pickle.exists():  # the job put it there itself, and may have re-pickled
            intent.unlink(missing_ok=True)  # itself since (a requeue): keep the job's
        elif intent.exists():
            paths.move_temporary_file(intent, "submitted_pickle")
        record = dict(record, job_id=job_id, folder=str(paths.folder), logs=[str(paths.stderr), str(paths.stdout)])
        record.pop("error", None)
        runner.write_record(record)
        adopted.append(record)
    return adopted
