"""Every command-line entry of the project answers ``--help``: exit 0, usage on stdout, no file
written, no warning. The entries are found, not listed: every module under ``core/`` and every
script under ``tools/`` that has a ``__main__`` block."""

import ast
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "core"


def has_main_block(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    return any(
        isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) and "__name__" in ast.unparse(node.test)
        for node in tree.body
    )


def entries() -> list[tuple[str, list[str]]]:
    """(name, argv before --help) of every entry point."""
    found = []
    for package in ("quadnn", "quadnn_paper"):
        for path in sorted((CORE / package).rglob("*.py")):
            if not has_main_block(path):
                continue
            if path.name == "slurm_job.py":  # run by SLURM as a file (nothing imported before its signal handlers)
                found.append((str(path.relative_to(ROOT)), [str(path)]))
                continue
            module = ".".join(path.relative_to(CORE).with_suffix("").parts).removesuffix(".__main__")
            found.append((module, ["-m", module]))  # a package's __main__.py runs as the package
    for path in sorted((ROOT / "tools").glob("*.py")):
        if has_main_block(path):
            found.append((str(path.relative_to(ROOT)), [str(path)]))
    return found


def test_the_entries_are_found():
    names = {name for name, _ in entries()}
    assert {"quadnn_paper.bench", "quadnn_paper.execution.train", "tools/paper_check.py"} <= names, names


def test_every_entry_answers_help_and_writes_nothing(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(CORE), "PYTHONWARNINGS": "default"}
    runs = {}
    for name, argv in entries():
        cwd = tmp_path / name.replace("/", "_")
        cwd.mkdir()
        runs[name] = (
            cwd,
            subprocess.Popen(
                [sys.executable, *argv, "--help"],
                cwd=cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            ),
        )
    problems, deadline = [], time.monotonic() + 600  # all at once on a loaded machine: each imports torch
    for name, (cwd, proc) in runs.items():
        try:
            out, err = proc.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            problems.append(f"{name}: still running after 600 s (--help did real work?)")
            continue
        if proc.returncode != 0:
            problems.append(f"{name}: exit {proc.returncode}: {err.strip().splitlines()[-1:]}")
        if "usage" not in out.lower():
            problems.append(f"{name}: no usage on stdout")
        if "Warning" in err:
            problems.append(f"{name}: warns: {[line for line in err.splitlines() if 'Warning' in line][:2]}")
        written = sorted(p.name for p in cwd.iterdir())
        if written:
            problems.append(f"{name}: wrote {written}")
    assert not problems, "\n".join(problems)
