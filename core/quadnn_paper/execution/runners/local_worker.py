"""What a local runner's job process runs (:mod:`.local` starts it):

    python -m quadnn_paper.execution.runners.local_worker --serve
        a CPU slot's worker: runs the jobs it is sent on stdin, one after another (:func:`serve`)
    python -m quadnn_paper.execution.runners.local_worker SPEC STATE_DIR
        one job from its pickle SPEC, its records in STATE_DIR (:func:`main`)
    python -m quadnn_paper.execution.runners.local_worker --task SPEC STATE_DIR
        one rank of a multi-task job, under torchrun

A module the package does not import, so that ``-m`` never runs one it has already imported.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import traceback
from pathlib import Path

from ...common.files import atomic_write_text, file_lock, load_private_pickle, read_json

_MODULE = __spec__.name  # this module (run with -m, its __name__ is "__main__")


def serve() -> int:
    """A slot's worker: for each line ``[spec, state_dir, log]`` on stdin, run the job with its
    output in ``log`` and answer its exit status on stdout; end when stdin closes."""
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    between = os.dup(2)  # outside jobs, stray output goes where the worker's stderr goes
    os.dup2(between, 1)
    for line in sys.stdin:
        spec, state_dir, log = json.loads(line)
        with open(log, "a") as out:
            os.dup2(out.fileno(), 1)
            os.dup2(out.fileno(), 2)
            try:
                code = main(spec, state_dir)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(between, 1)
                os.dup2(between, 2)
        answers.write(f"{code}\n")
    return 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(spec: str, state_dir: str, task: bool = False) -> int:
    """One local job: check and load its pickle, hold its key's lock, skip it if done meanwhile,
    run it (or its ranks through torchrun), record its exit status."""
    key, state = Path(spec).stem, Path(state_dir)

    def finish(code: int, error: str) -> int:
        record = read_json(state / f"{key}.json") or {"key": key, "runner": "local"}
        record |= {"exit": code, "error": error}
        atomic_write_text(state / f"{key}.json", json.dumps(record, indent=1, sort_keys=True))
        return code

    try:
        job = load_private_pickle(Path(spec), state)
    except PermissionError as refused:
        print(refused, file=sys.stderr)
        return 1 if task else finish(1, str(refused))
    if task:
        job["fn"]()
        return 0
    with file_lock(state / f"{key}.lock", poll=0.05):
        code, error = 0, ""
        try:
            if job["is_done"] is not None and job["is_done"](key):
                pass
            elif job["tasks"] == 1:
                job["fn"]()
            else:
                ranks = [f"--nproc-per-node={job['tasks']}", "--master-addr=127.0.0.1", f"--master-port={_free_port()}"]
                torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", *ranks, "-m", _MODULE]
                code = subprocess.call([*torchrun, "--task", spec, state_dir])
                error = f"a task failed (torchrun exit {code})" if code else ""
        except BaseException as exc:
            traceback.print_exc()
            code, error = 1, f"{type(exc).__name__}: {exc}"
        return finish(code, error)


def cli(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="python -m quadnn_paper.execution.runners.local_worker",
        description="A local runner's job process (started by the runner, not by hand).",
    )
    p.add_argument("--serve", action="store_true", help="run the jobs sent on stdin, answering each exit status")
    p.add_argument("--task", action="store_true", help="one rank of a multi-task job (under torchrun)")
    p.add_argument("spec", nargs="?", help="the job's pickle")
    p.add_argument("state_dir", nargs="?", help="the runner's records")
    args = p.parse_args(argv)
    if args.serve:
        if args.spec or args.task:
            p.error("--serve takes no job")
        return serve()
    if not (args.spec and args.state_dir):
        p.error("give SPEC and STATE_DIR, or --serve")
    return main(args.spec, args.state_dir, task=args.task)


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
