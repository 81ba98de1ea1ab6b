"""What a local runner's job process runs (:mod:`.local`):

    python -m quadnn_paper.execution.runners.local_worker --serve
        a CPU slot's worker: runs the jobs it is sent on stdin, one after another (:func:`.local.serve`)
    python -m quadnn_paper.execution.runners.local_worker SPEC STATE_DIR
        one job from its pickle SPEC, its records in STATE_DIR (:func:`.local.main`)
    python -m quadnn_paper.execution.runners.local_worker --task SPEC STATE_DIR
        one rank of a multi-task job, under torchrun

A module of its own so that ``-m`` never runs a module the package has already imported.
"""

import argparse
import sys

from .local import main, serve


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
