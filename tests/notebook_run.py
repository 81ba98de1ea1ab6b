"""One way for the tests to run a notebook at the smoke profile with papermill, as `make paper` does:
its parameters, where it writes the report's outputs (``paper_dir``) and its run cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def run_notebook(
    nb: Path, work: Path, paper: Path, cache: Path, params: dict | None = None, env: dict | None = None
) -> subprocess.CompletedProcess:
    """Executes ``nb`` at the smoke profile into ``work`` (the executed copy), its outputs into
    ``paper`` and its runs into ``cache``; ``params`` are more papermill parameters, ``env`` the
    process environment (default: this one's), with QUADNN_NOTEBOOK naming the notebook."""
    papermill = Path(sys.executable).with_name("papermill")
    extra = [a for name, value in (params or {}).items() for a in ("-p", name, str(value))]
    return subprocess.run(
        [str(papermill), str(nb), str(work / nb.name), "--cwd", str(ROOT / "notebooks")]
        + ["-p", "profile", "smoke", "-p", "paper_dir", str(paper), "-p", "cache_dir", str(cache)]
        + extra,
        capture_output=True,
        text=True,
        env={**(os.environ if env is None else env), "QUADNN_NOTEBOOK": nb.stem},
    )
