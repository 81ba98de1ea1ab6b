"""The build's identity: the code's commit (and whether it was modified), the profile, the date.

Every section's provenance records it (:mod:`.provenance`), and ``make paper`` writes it right
before LaTeX into ``paper/variables/build.tex`` (``python -m quadnn_paper.execution.identity
paper/variables/build.tex --profile cpu``), which ``paper/main.tex`` reads into the PDF's metadata.
"""

from __future__ import annotations

import argparse
import datetime
import subprocess
from pathlib import Path

__all__ = ["build_identity", "identity_tex", "main", "pending_notebooks"]

_ROOT = Path(__file__).resolve().parents[3]  # the checkout (core/quadnn_paper/execution/ is three below)


def build_identity(root: Path = _ROOT) -> dict:
    """``{commit, dirty, date}`` of the code here: the git commit (``unknown`` outside a checkout),
    whether tracked files differ from it, and now (UTC, ISO 8601)."""
    date = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()

    def git(*args) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return dict(commit=commit or "unknown", dirty=bool(status), date=date)


def pending_notebooks(build: Path | None) -> dict[str, str]:
    """``{notebook: its pending note}`` for each notebook of ``build`` (``make paper``'s folder of
    executed copies) whose runs are not all finished: the ``NAME.pending`` files the Makefile keeps."""
    from ..common.files import RefusedFile, read_own

    if build is None or not Path(build).is_dir():
        return {}
    out = {}
    for p in sorted(Path(build).glob("*.pending")):
        try:  # make's own files: a link or FIFO in their place is not read
            note = " ".join(read_own(p).decode(errors="replace").split())
        except RefusedFile:
            continue
        if note:
            out[p.stem] = note
    return out


def identity_tex(profile: str, tiny: bool = False, pending: dict[str, str] | None = None) -> str:
    """``paper/variables/build.tex``: the build's identity in the PDF's metadata (hyperref's Subject,
    Keywords and custom entries), and as ``\\buildCommit``, ``\\buildProfile``, ``\\buildDate``;
    ``\\buildPending`` names the notebooks whose runs are still pending (empty when none is), which the
    first page prints: their cells show a dash until a later ``make paper`` collects them."""
    from ..common.cells import latex_escape
    from ..common.macros import definition, macros_text

    who = build_identity()
    commit = who["commit"][:12] + ("+modified" if who["dirty"] else "")
    profile = f"{profile}{' TINY=1' if tiny else ''}"
    return macros_text(
        "written by python -m quadnn_paper.execution.identity right before LaTeX; do not edit",
        dict(buildCommit=commit, buildProfile=profile, buildDate=who["date"]),
        [
            definition(
                "buildPending", latex_escape("; ".join(f"{k}: {v}" for k, v in (pending or {}).items())), plain=True
            ),
            r"\hypersetup{pdfsubject={quadnn companion report: profile \buildProfile, commit \buildCommit, built \buildDate},",
            r"  pdfkeywords={quadnn; profile=\buildProfile; commit=\buildCommit; built=\buildDate},",
            r"  pdfinfo={QuadnnCommit={\buildCommit}, QuadnnProfile={\buildProfile}, QuadnnBuilt={\buildDate}}}",
        ],
    )


def main(argv: list[str] | None = None) -> int:
    from ..common.files import atomic_write_text

    ap = argparse.ArgumentParser(description="Write the build's identity for the PDF (paper/variables/build.tex).")
    ap.add_argument("out", help="the file to write, e.g. paper/variables/build.tex")
    ap.add_argument("--profile", required=True)
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument(
        "--build", type=Path, help="the folder of executed notebooks, whose NAME.pending files name pending runs"
    )
    a = ap.parse_args(argv)
    atomic_write_text(Path(a.out), identity_tex(a.profile, a.tiny, pending_notebooks(a.build)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
