"""``why``: where each table, figure and macro comes from, as the build recorded it.

The unit test builds a section of its own (a module named as a section, so the trace sees its
functions) and checks each output is traced to what it read. The built paper's walk
(:func:`check_why_answers_everything`) and the PDF's identity and marks
(:func:`check_pdf_identity`) run inside tests/test_paper.py's smoke PDF build, on its paper.
"""

import json
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from quadnn_paper import why
from quadnn_paper.engine import Computation
from quadnn_paper.execution.provenance import Reads, Trace
from quadnn_paper.execution.sections import SectionOutputs
from quadnn_paper.report import publish

SECTION_CODE = """
from quadnn_paper.common.outputs import Figure, Table, Variables

def _table(results, key):
    return Table("fake_rows", ["seed", "error"], [[0, results[key]["error"]]])

def _figure(results, key):
    def draw():
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(3, 2))
        ax.plot([0, 1], [results[key]["error"], 0.5], label="error")
        ax.set_xlabel("epoch")
        ax.set_ylabel("error (%)")
        return fig
    return Figure("fake_curve", draw)

def _variables(results, key):
    return Variables({"Best": results[key]["error"]})

def _summary(results, key):
    return {"mean": results.get(key)["error"]}

def outputs(results, work):
    a, b, c, d = work
    S = _summary(results, d.key)  # a table made here from what a helper read
    made = [_table(results, a.key), _figure(results, b.key), _variables(results, c.key)]
    return made + [Table("fake_summary", ["mean"], [[S["mean"]]])]
"""


FAKE = "quadnn_paper.sections." + "fake"  # a section of this test's own, traced as the real ones


@pytest.fixture
def fake_section(monkeypatch):
    module = types.ModuleType(FAKE)
    exec(compile(SECTION_CODE, "fake.py", "exec"), module.__dict__)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


def test_each_output_is_traced_to_the_results_it_read(tmp_path, fake_section):
    arms = enumerate((0.1, 0.1, 0.2, 0.3))
    work = [Computation("arm", "json:dumps", {"obj": i, "seed": i, "lr": lr}) for i, lr in arms]
    reads = Reads({c.key: {"error": 10.0 + i} for i, c in enumerate(work)})
    outputs = fake_section.outputs(reads, work)
    trace = Trace("fake", "smoke", False, "inline", work, reads)
    publish(SectionOutputs("fake", "smoke", "no data", outputs, trace), tmp_path)

    table = why.explain("fake_rows", tmp_path)
    assert work[0].key in table and work[1].key not in table and work[2].key not in table, table
    assert f"made by:  {FAKE}:_table" in table
    assert "configuration: lr=0.1, obj=0, seed=0" in table
    figure = why.explain("figures/fake_curve.pdf", tmp_path)
    assert work[1].key in figure and work[0].key not in figure, figure  # what its draw() read
    assert f"drawn by {FAKE}:_figure.<locals>.draw" in figure
    macro = why.explain("\\fakeBest", tmp_path)
    assert work[2].key in macro and work[0].key not in macro and work[1].key not in macro, macro
    assert why.explain("fakeBest", tmp_path) == macro  # the backslash is optional
    summary = why.explain("tables/fake_summary.csv", tmp_path)  # what outputs() read, itself or through helpers
    assert work[3].key in summary and work[1].key not in summary, summary
    for text in (table, figure, macro, summary):
        assert "rebuild:  make paper PROFILE=smoke SECTIONS=fake" in text
        assert re.search(r"built:    commit ([0-9a-f]{40}|unknown)", text), text
    # the figure's numbers are beside it
    plotted = json.loads((tmp_path / "figures" / "fake_curve.data.json").read_text())
    assert plotted["axes"][0]["lines"] == [dict(label="error", x=[0.0, 1.0], y=[11.0, 0.5])]
    with pytest.raises(why.NotFound, match="fake_nothing"):
        why.explain("fake_nothing", tmp_path)


def test_arms_are_told_apart_by_the_fields_that_differ(tmp_path, fake_section):
    work = [
        Computation("arm", "json:dumps", {"obj": 0, "seed": s, "lr": lr}) for s, lr in ((0, 0.1), (1, 0.1), (0, 0.2))
    ]
    reads = Reads({c.key: {"error": 1.0} for c in work})
    list(reads.items())  # a section that reads every result, as outputs() made in one function do
    trace = Trace("fake", "smoke", False, "inline", work, reads)
    record = trace.record([], "fake")
    record["outputs"]["tables/all"] = dict(kind="table", made_by="x", files=[], reads=sorted(reads.read))
    (tmp_path / "variables").mkdir()
    (tmp_path / "variables" / "fake.provenance.json").write_text(json.dumps(record))
    text = why.explain("all", tmp_path)
    assert "arms differ in: lr = 0.1 | 0.2" in text, text
    assert "seeds: 0, 1" in text


def pdf_text(pdf: Path) -> str:
    return subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout


def check_why_answers_everything(paper: Path, profile: str) -> int:
    """``why`` answers for every table, figure and macro of a built ``paper``; returns how many."""
    names = why.names(paper)
    kinds = {n.split("/")[0] if "/" in n else "macro" for n in names}
    assert kinds == {"tables", "figures", "macro"}, kinds
    for name in names:
        text = why.explain(name, paper)  # NotFound fails the test, naming it
        assert "made by:" in text and "rebuild:" in text, text
        if "section:" in text:
            assert f"profile {profile}" in text and f"PROFILE={profile} SECTIONS=" in text, text
    done = subprocess.run(
        [sys.executable, "-m", "quadnn_paper.why", names[0], "--paper", str(paper)], capture_output=True, text=True
    )
    assert done.returncode == 0 and "rebuild:" in done.stdout, done.stderr
    return len(names)


def check_pdf_identity(paper: Path, profile: str) -> None:
    """The PDF's metadata names the commit, profile and date; each table and figure the PDF shows
    links to its data file and names the why command (read with poppler)."""
    if shutil.which("pdfinfo") is None or shutil.which("pdftotext") is None:
        pytest.skip("poppler (pdfinfo, pdftotext) not installed")
    pdf = paper / "main.pdf"
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    subject = re.search(r"^Subject:\s*(.*)$", info, re.M)
    assert subject, info
    assert re.search(
        rf"profile {profile}, commit ([0-9a-f]{{12}}(\+modified)?|unknown), built 20\d\d-", subject.group(1)
    )
    text = re.sub(r"\s+", "", pdf_text(pdf))
    urls = subprocess.run(["pdfinfo", "-url", str(pdf)], capture_output=True, text=True).stdout
    tex = "\n".join(p.read_text() for p in sorted((paper / "sections").glob("*.tex")))
    shown_tables = set(re.findall(r"\\input\{tables/([A-Za-z0-9_]+?)(?:\.tex)?\}", tex))
    shown_figures = set(re.findall(r"\\includegraphics(?:\[[^\]]*\])?\{figures/([A-Za-z0-9_]+?)(?:\.pdf)?\}", tex))
    marked = [t for t in shown_tables if (paper / "tables" / f"{t}.tex").read_text().startswith("\\quadnnsource")]
    assert marked and shown_figures
    for name in marked:
        assert f"makewhyNAME={name}" in text, f"table {name}: no why mark in the PDF"
        assert f"tables/{name}.csv" in urls, f"table {name}: no link to its CSV"
    for name in shown_figures:
        assert f"makewhyNAME={name}" in text, f"figure {name}: no why mark in the PDF"
        assert f"figures/{name}.data.json" in urls, f"figure {name}: no link to its numbers"


def test_the_build_identity_names_the_commit_profile_and_date():
    from quadnn_paper.execution.identity import build_identity, identity_tex

    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    who = build_identity()
    assert who["commit"] == (head or "unknown") and re.fullmatch(r"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", who["date"])
    tex = identity_tex("full", tiny=True)
    assert rf"\newcommand{{\buildCommit}}{{{who['commit'][:12]}" in tex
    assert r"\newcommand{\buildProfile}{full TINY=1}" in tex
    assert r"pdfsubject={quadnn companion report: profile \buildProfile, commit \buildCommit" in tex
    assert "\\def\\buildPending{}\n" in tex  # the first page's note on pending runs stays away
    pending = identity_tex("full", pending={"cifar_comparison": "pending (3 of 108 runs)", "k_d": "50%"})
    assert "\\def\\buildPending{cifar\\_comparison: pending (3 of 108 runs); k\\_d: 50\\%}\n" in pending
