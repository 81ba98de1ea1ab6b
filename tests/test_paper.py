"""The report builds: every notebook at the smoke profile, then latexmk on paper/main.tex."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from notebook_run import NOTEBOOKS, ROOT, run_notebook
from test_why import check_pdf_identity, check_why_answers_everything

from quadnn_paper.common import published

MAKEFILE = ROOT / "Makefile"
# what a local LaTeX run leaves in paper/: a copied main.bbl alone sends latexmk to bibtex without an .aux
LATEX_BUILT = ("*.pdf", "*.aux", "*.log", "*.bbl", "*.blg", "*.fls", "*.fdb_latexmk", "*.out")


def run_notebooks(paper, work):
    """Every notebook at the smoke profile: outputs into ``paper``, executed copies and cache into ``work``."""
    for nb in NOTEBOOKS:
        ran = run_notebook(nb, work, paper, work / "cache")
        assert ran.returncode == 0, f"{nb.name} failed at the smoke profile:\n{ran.stderr[-3000:]}"


def embedded_paper_dir(nb: Path) -> Path:
    """The ``paper_dir`` a notebook's parameters cell sets (where nbval's run writes), absolute."""
    import ast
    import json

    cell = next(c for c in json.loads(nb.read_text())["cells"] if "parameters" in c["metadata"].get("tags", []))
    for node in ast.parse("".join(cell["source"])).body:
        if isinstance(node, ast.Assign) and node.targets[0].id == "paper_dir":
            return (nb.parent / ast.literal_eval(node.value)).resolve()
    raise AssertionError(f"{nb.name}: no paper_dir in its parameters cell")


def from_nbval(paper, since):
    """Copy the outputs nbval wrote (each notebook's embedded default: smoke, into its ``paper_dir``)
    into ``paper``: only when every notebook's stamp is from this pytest session, so a notebook that
    did not run here (or failed) cannot lend an old output to the PDF."""
    (built,) = {embedded_paper_dir(nb) for nb in NOTEBOOKS}  # one folder for all, or this fails
    stamps = {nb.stem: built / ".stamps" / f"{nb.stem}.json" for nb in NOTEBOOKS}
    old = [name for name, p in stamps.items() if not p.exists() or p.stat().st_mtime < since]
    assert not old, f"nbval did not write these notebooks' outputs in this session: {old}"
    for sub in ("figures", "tables", "variables", ".stamps"):
        shutil.copytree(built / sub, paper / sub, dirs_exist_ok=True)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("latexmk") is None, reason="TeX (latexmk) not installed")
def test_smoke_pdf_builds(tmp_path, request):
    paper = tmp_path / "paper"
    shutil.copytree(
        ROOT / "paper",
        paper,
        ignore=shutil.ignore_patterns(
            "figures", "tables", "variables", ".profile", ".stamps", ".staging", *LATEX_BUILT
        ),
    )
    # `make test` runs nbval first (the same notebooks at the same profile) and says so; run alone,
    # the test executes the notebooks itself.
    if os.environ.get("QUADNN_PDF_FROM_NBVAL") == "1":
        from_nbval(paper, request.config.quadnn_started)
    else:
        run_notebooks(paper, tmp_path)
    published.write(paper / "variables" / "published.tex")
    check = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "paper_check.py"), "check", "--profile", "smoke", "--paper", str(paper)],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stderr  # one profile, every notebook committed its outputs
    # the claim ledger, as the Makefile's paper/main.pdf rule resolves it before LaTeX
    (rule,) = [line for line in MAKEFILE.read_text().splitlines() if "quadnn_paper.common.ledger" in line]
    ledger = subprocess.run(
        [sys.executable, "-m", "quadnn_paper.common.ledger", "--paper", str(paper)], capture_output=True, text=True
    )
    assert ledger.returncode == 0, ledger.stderr
    # no number typed in the prose, as the Makefile's paper/main.pdf rule checks before LaTeX
    (rule,) = [line for line in MAKEFILE.read_text().splitlines() if "paper_check.py numbers" in line]
    args = rule.split("paper_check.py", 1)[1].split()
    typed = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "paper_check.py"), *args, "--paper", str(paper)],
        capture_output=True,
        text=True,
    )
    assert typed.returncode == 0, typed.stderr
    # `why` answers for every table, figure and macro the build wrote
    check_why_answers_everything(paper, "smoke")
    # the build's identity for the PDF's metadata, as the Makefile's rule writes it before LaTeX
    (rule,) = [line for line in MAKEFILE.read_text().splitlines() if "quadnn_paper.execution.identity" in line]
    identity = subprocess.run(
        [sys.executable, "-m", "quadnn_paper.execution.identity", str(paper / "variables" / "build.tex")]
        + ["--profile", "smoke"],
        capture_output=True,
        text=True,
    )
    assert identity.returncode == 0, identity.stderr
    done = subprocess.run(
        ["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", "main.tex"],
        cwd=paper,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    pdf = paper / "main.pdf"
    assert pdf.stat().st_size > 10_000
    if shutil.which("pdftotext"):
        text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True).stdout
        assert "profile" in text.lower()
        # every section that has a notebook made it into the PDF, with no undefined macro
        for nb in NOTEBOOKS:
            assert (paper / "sections" / f"{nb.stem}.tex").exists(), f"{nb.name} has no paper/sections/{nb.stem}.tex"
    log = (paper / "main.log").read_text(errors="replace")
    assert "Undefined control sequence" not in log
    assert "LaTeX Warning: Reference" not in log, "undefined references in the report"
    # the layout check with the arguments the Makefile's paper/main.pdf rule gives it
    (rule,) = [line for line in MAKEFILE.read_text().splitlines() if "paper_check.py layout" in line]
    args = rule.split("paper_check.py", 1)[1].split("||")[0].split()
    layout = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "paper_check.py"), *args, "--paper", str(paper)],
        capture_output=True,
        text=True,
    )
    assert layout.returncode == 0, layout.stderr
    # the PDF carries the build's identity, and each table and figure its mark and link
    check_pdf_identity(paper, "smoke")
