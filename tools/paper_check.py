"""Is paper/ one consistent profile? Run by ``make paper`` before and after the notebooks.

    python tools/paper_check.py prune --profile smoke --build build/smoke
        finish interrupted commits, then delete the executed copy (build/<profile>/NB.ipynb) of
        every notebook whose outputs in paper/ are not a finished run at this profile, so make
        runs it again;
    python tools/paper_check.py check --profile smoke
        exit 1, naming each problem, unless every notebook's section is stamped with this
        profile and its files are as stamped (run right before LaTeX).

The stamps are written by :meth:`quadnn_paper.report.Report.commit`.
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))  # also usable before `pip install -e .`

from quadnn_paper.report import problems, recover, stale_notebooks  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=["prune", "check"])
    ap.add_argument("--profile", required=True)
    ap.add_argument("--paper", default=str(ROOT / "paper"))
    ap.add_argument("--notebooks", default=str(ROOT / "notebooks"))
    ap.add_argument("--build", help="prune: the folder of executed notebook copies for this profile")
    a = ap.parse_args(argv)
    names = sorted(p.stem for p in Path(a.notebooks).glob("*.ipynb"))
    recover(a.paper)
    if a.action == "prune":
        if not a.build:
            ap.error("prune needs --build")
        for nb in stale_notebooks(a.paper, a.profile, names):
            executed = Path(a.build) / f"{nb}.ipynb"
            if executed.exists():
                print(
                    f"{nb}: outputs in {a.paper} are not a finished {a.profile} run; running it again", file=sys.stderr
                )
                executed.unlink()
        return 0
    found = problems(a.paper, a.profile, names)
    for p in found:
        print(f"paper check: {p}", file=sys.stderr)
    if found:
        print(
            f"paper check: refusing to build a PDF that is not all {a.profile}; run `make paper "
            f"PROFILE={a.profile}` again",
            file=sys.stderr,
        )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
