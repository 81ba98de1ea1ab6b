"""paper/ is consistent or untouched: after any interruption it holds one whole build of one profile.

Each test is the reproduction of a failure seen before the fix:
- a kill while a figure is saved left a 0-byte ``paper/figures/*.pdf`` in place of the good one;
- an interrupted notebook left ``paper/variables/<section>.tex`` with a few of its macros;
- after an interrupted profile switch, ``make paper`` built a PDF mixing two profiles.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from quadnn_paper.report import Report

ROOT = Path(__file__).resolve().parents[1]
CHECK = ROOT / "tools" / "paper_check.py"


def commit(rep):
    getattr(rep, "commit", lambda: None)()  # the reproductions ran against a Report without commit()


def good_section(paper, section="demo", profile="smoke", notebook="demo", monkeypatch=None):
    """A finished notebook: three variables, a table, a figure, committed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if monkeypatch is not None:
        monkeypatch.setenv("QUADNN_NOTEBOOK", notebook)
    rep = Report(paper, section, profile, "digits")
    for name, v in (("A", 1), ("B", 2), ("C", 3)):
        rep.variable(name, v)
    rep.table(f"{section}_t", ["x"], [[1]])
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    ax.set(xlabel="step", ylabel="value")  # Report.figure's lint refuses unlabelled axes
    rep.figure(fig, f"{section}_f")
    plt.close(fig)
    commit(rep)
    return rep


def test_kill_during_savefig_keeps_previous_figure(tmp_path):
    """SIGKILL in the middle of savefig (an artist that kills the process while drawing)."""
    paper = tmp_path / "paper"
    good_section(paper)
    before = (paper / "figures" / "demo_f.pdf").read_bytes()
    assert len(before) > 1000
    script = textwrap.dedent("""
        import os, signal, sys
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.artist import Artist
        from quadnn_paper.report import Report

        class Kill(Artist):  # killed while savefig draws into the PDF (the layout and the lint draw with Agg)
            def draw(self, renderer):
                from matplotlib.backends.backend_agg import RendererAgg

                if not isinstance(renderer, RendererAgg):
                    os.kill(os.getpid(), signal.SIGKILL)

        rep = Report(sys.argv[1], "demo", "cpu", "digits")
        fig, ax = plt.subplots()
        ax.plot([0, 1])
        ax.set(xlabel="step", ylabel="value")
        fig.add_artist(Kill())
        rep.figure(fig, "demo_f")
        getattr(rep, "commit", lambda: None)()
    """)
    ran = subprocess.run([sys.executable, "-c", script, str(paper)], capture_output=True, text=True)
    assert ran.returncode == -signal.SIGKILL, ran.stderr
    assert (paper / "figures" / "demo_f.pdf").read_bytes() == before
    assert (paper / "figures" / "demo_f.png").stat().st_size > 1000


def test_figure_write_is_atomic_in_place(tmp_path):
    """The figure helper itself never truncates its target (temp file in the same dir + rename)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from quadnn_paper.report import save_figure

    target = tmp_path / "f.pdf"
    target.write_bytes(b"old")

    class Boom(Exception):
        pass

    fig, ax = plt.subplots()
    ax.plot([0, 1])
    original = fig.canvas.print_figure

    def failing(*a, **k):
        raise Boom

    fig.canvas.print_figure = failing
    with pytest.raises(Boom):
        save_figure(fig, target)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.pdf"]  # no temporary left behind
    fig.canvas.print_figure = original
    save_figure(fig, target)
    assert target.read_bytes()[:4] == b"%PDF"  # format from the target's suffix, not the temp name's
    plt.close(fig)


def test_partial_notebook_leaves_previous_outputs(tmp_path):
    """A notebook that dies after writing some outputs changes nothing in paper/."""
    paper = tmp_path / "paper"
    good_section(paper)
    snapshot = {
        p.relative_to(paper): p.read_bytes() for p in paper.rglob("*") if p.is_file() and ".staging" not in p.parts
    }
    rep = Report(paper, "demo", "cpu", "digits")  # the next run, at another profile...
    rep.variable("A", 10)
    rep.table("demo_t", ["x"], [[2]])
    del rep  # ...dies before its end
    after = {
        p.relative_to(paper): p.read_bytes() for p in paper.rglob("*") if p.is_file() and ".staging" not in p.parts
    }
    assert after == snapshot
    assert r"\newcommand{\demoC}{3}" in (paper / "variables" / "demo.tex").read_text()


def test_commit_makes_a_profile_visible_together(tmp_path):
    paper = tmp_path / "paper"
    good_section(paper)
    with Report(paper, "demo", "cpu", "digits") as rep:
        rep.variable("A", 10)
        rep.table("demo_t", ["x"], [[2]])
    text = (paper / "variables" / "demo.tex").read_text()
    assert r"\newcommand{\demoA}{10}" in text and r"\demoC" not in text
    assert not (paper / "figures" / "demo_f.pdf").exists()  # not written by this run: removed with its profile
    stamp = json.loads((paper / ".stamps" / "demo.json").read_text())
    assert stamp["profile"] == "cpu" and set(stamp["files"]) == {
        "variables/demo.tex",
        "tables/demo_t.csv",
        "tables/demo_t.tex",
    }
    with pytest.raises(RuntimeError):
        with Report(paper, "demo", "smoke", "digits") as rep:
            rep.variable("A", 11)
            raise RuntimeError("the notebook failed")
    assert r"\newcommand{\demoA}{10}" in (paper / "variables" / "demo.tex").read_text()


def test_commit_interrupted_midway_is_rolled_forward(tmp_path, monkeypatch):
    """A kill between the renames of a commit: the journal finishes it on the next access."""
    from quadnn_paper import report as R

    paper = tmp_path / "paper"
    good_section(paper)
    rep = Report(paper, "demo", "cpu", "digits")
    rep.variable("A", 10)
    rep.table("demo_t", ["x"], [[2]])
    real, calls = os.replace, []

    def dying_replace(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real(src, dst)

    monkeypatch.setattr(R.os, "replace", dying_replace)
    with pytest.raises(KeyboardInterrupt):
        rep.commit()
    monkeypatch.setattr(R.os, "replace", real)
    assert R.problems(paper, "cpu")  # half-committed: the check refuses it as it stands
    R.recover(paper)
    assert R.problems(paper, "cpu") == []
    assert r"\newcommand{\demoA}{10}" in (paper / "variables" / "demo.tex").read_text()


def _check(*args):
    return subprocess.run([sys.executable, str(CHECK), *args], capture_output=True, text=True)


def test_mixed_profiles_are_refused_and_rebuilt(tmp_path, monkeypatch):
    """The failure reproduced: smoke everywhere, then cpu interrupted after one notebook wrote."""
    paper, build, nbs = tmp_path / "paper", tmp_path / "build", tmp_path / "notebooks"
    nbs.mkdir()
    (build / "smoke").mkdir(parents=True)
    for nb, section in (("cifar_comparison", "cifar_comparison"), ("runge", "runge")):
        (nbs / f"{nb}.ipynb").write_text("{}")
        good_section(paper, section, "smoke", nb, monkeypatch)
        (build / "smoke" / f"{nb}.ipynb").write_text("{}")
    args = ["--paper", str(paper), "--notebooks", str(nbs)]
    assert _check("check", "--profile", "smoke", *args).returncode == 0
    # make paper PROFILE=cpu, interrupted once the comparison notebook had committed
    good_section(paper, "cifar_comparison", "cpu", "cifar_comparison", monkeypatch)
    done = _check("check", "--profile", "smoke", *args)
    assert done.returncode != 0 and "cifar_comparison" in done.stderr and "cpu" in done.stderr
    # make paper PROFILE=smoke: the comparison notebook is stale again, the other one is not
    done = _check("prune", "--profile", "smoke", "--build", str(build / "smoke"), *args)
    assert done.returncode == 0, done.stderr
    assert not (build / "smoke" / "cifar_comparison.ipynb").exists()
    assert (build / "smoke" / "runge.ipynb").exists()


def test_check_refuses_missing_or_altered_outputs(tmp_path, monkeypatch):
    from quadnn_paper.report import problems

    paper = tmp_path / "paper"
    good_section(paper, "demo", "smoke", "demo", monkeypatch)
    assert problems(paper, "smoke", notebooks=["demo"]) == []
    assert any("other" in p for p in problems(paper, "smoke", notebooks=["demo", "other"]))  # never ran
    (paper / "figures" / "demo_f.pdf").write_bytes(b"")  # e.g. written in place by hand
    assert any("demo_f.pdf" in p for p in problems(paper, "smoke"))


def make_paper_plan(**var) -> subprocess.CompletedProcess:
    """What ``make paper`` would run (``-n -B``: every target, nothing executed)."""
    args = ["make", "-n", "-B", "--no-print-directory", "paper", *(f"{k}={v}" for k, v in var.items())]
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_sections_runs_only_those_notebooks_and_still_checks_every_section():
    import re

    notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    ran = lambda done: sorted(re.findall(r"--progress-bar notebooks/(\w+)\.ipynb", done.stdout))  # noqa: E731
    whole = make_paper_plan(PROFILE="smoke")
    assert whole.returncode == 0 and ran(whole) == notebooks, whole.stderr
    some = make_paper_plan(PROFILE="smoke", SECTIONS="runge,efficiency")
    assert some.returncode == 0 and ran(some) == ["efficiency", "runge"], some.stderr
    assert ran(make_paper_plan(PROFILE="smoke", SECTIONS="runge efficiency")) == ["efficiency", "runge"]
    # the check before LaTeX is the whole paper's: one profile for every section, rebuilt or not
    assert "paper_check.py check --profile smoke\n" in some.stdout
    bad = make_paper_plan(PROFILE="smoke", SECTIONS="runge,rungee")
    assert bad.returncode != 0 and "rungee is not a section" in bad.stderr and "runge" in bad.stderr.split("choose")[-1]
