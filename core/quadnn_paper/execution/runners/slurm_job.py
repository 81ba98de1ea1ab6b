"""What a SLURM job runs in place of ``python -m submitit.core._submit <folder>``: submitit's own
entry point, with the preemption and timeout signals held from the job's first instruction.

submitit installs its handlers (USR2: checkpoint and requeue; TERM: ignore) only once it has loaded
the job's pickle, which imports torch: a signal in that window (a preemption, ``--signal`` coming
due early) would kill the job instead of requeueing it. Here both are held from the start and
delivered to submitit's handlers the moment they are installed; its ``scontrol requeue`` is
retried too (a controller slow to answer would end the job failed, its checkpoint never resumed).

Run as a file (``python -u slurm_job.py -u -m submitit.core._submit <folder>``: the runner passes
it as submitit's ``python``), so nothing but the standard library is imported before the handlers.
"""

import os
import signal
import subprocess
import sys
import time

# submitit's preemption signal, read as submitit reads it (JobEnvironment.USR_SIG: the environment
# variable SUBMITIT_PREEMPT_SIGNAL, USR2 by default), and TERM, preemption's first signal
PREEMPT_SIGNAL = getattr(signal, "SIG" + os.environ.get("SUBMITIT_PREEMPT_SIGNAL", "USR2"), signal.SIGUSR2)
HELD = (PREEMPT_SIGNAL, signal.SIGTERM)
REQUEUE_RETRIES_S = (2, 5, 10, 20)  # waits between tries of `scontrol requeue` (each try may take 60 s)
_arrived: list[int] = []


def _hold(signum, frame):
    _arrived.append(signum)


for _sig in HELD:
    signal.signal(_sig, _hold)


def main(argv: list[str]) -> None:
    if argv in (["-h"], ["--help"]):
        print(f"usage: python -u {os.path.basename(__file__)} -u -m submitit.core._submit FOLDER\n\n{__doc__}")
        return
    *flags, folder = argv or [""]
    if flags != ["-u", "-m", "submitit.core._submit"]:
        raise SystemExit(f"slurm_job.py: expected '-u -m submitit.core._submit FOLDER', got {argv}")
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        sys.path.pop(0)  # this script's folder holds modules (slurm.py, local.py) that must not shadow others

    from submitit.core import job_environment, submission

    install = job_environment.JobEnvironment._handle_signals

    def install_then_deliver(self, paths, delayed):
        install(self, paths, delayed)
        for signum in dict.fromkeys(_arrived):  # in arrival order, each once: submitit's handlers take them now
            os.kill(os.getpid(), signum)

    job_environment.JobEnvironment._handle_signals = install_then_deliver

    from submitit.slurm import slurm

    requeue = slurm.SlurmJobEnvironment._requeue

    def requeue_retried(self, countdown):
        for wait_s in REQUEUE_RETRIES_S:
            try:
                return requeue(self, countdown)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
                print(f"slurm_job.py: scontrol requeue failed ({error}); again in {wait_s} s", flush=True)
                time.sleep(wait_s)
        return requeue(self, countdown)

    slurm.SlurmJobEnvironment._requeue = requeue_retried
    sys.argv = ["submitit.core._submit", folder]
    submission.submitit_main()


if __name__ == "__main__":
    main(sys.argv[1:])
