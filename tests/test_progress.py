"""The progress a section's work reports while it runs (quadnn_paper.execution.progress)."""

import io

from quadnn_paper.execution import execute_work
from quadnn_paper.execution.progress import ENV, Progress


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def runs(n):
    return [(f"r{i}", "run", f"resnet20 seed {i}", 10) for i in range(n)]


def test_a_log_gets_one_line_per_finished_run_with_counts_and_the_time_left():
    out, clock = io.StringIO(), Clock()
    p = Progress("cifar_comparison", runs(4), stream=out, tty=False, clock=clock)
    p.known_done(["r0"])  # cached: counted, never measured
    assert "runs 1/4 done, 3 pending" in out.getvalue()
    assert "time left: known once one has finished" in out.getvalue()
    p.update({"r1": "running", "r2": "running"})
    clock.now = 30.0
    p.update({"r1": "done"})
    last = out.getvalue().splitlines()[-1]
    assert "cifar_comparison: runs 2/4 done, 1 running, 1 pending" in last, last
    # 30 s per run measured; r2 ran 30 s of its 30, r3 has 30 to go, one runs at a time now
    assert "30 s left" in last, last
    assert "run resnet20 seed 1 finished in 30 s" in out.getvalue()
    clock.now = 45.0
    p.update({"r2": "failed", "r3": "done"})  # r3 finished between two polls: counted, not measured
    assert p.measured == {"r1": 30.0, "r2": 45.0}
    assert "runs 3/4 done, 1 failed; took 45 s" in out.getvalue().splitlines()[-1]


def test_computations_use_their_declared_seconds_scaled_by_what_was_measured():
    clock = Clock()
    items = [("a", "computation", "sweep a", 10.0), ("b", "computation", "sweep b", 40.0)]
    p = Progress("runge", items, stream=io.StringIO(), tty=False, clock=clock)
    assert p.seconds_left() == 50.0  # declared
    p.start("a")
    clock.now = 20.0
    p.finish("a")
    assert p.seconds_left() == 80.0  # a took twice its estimate: so will b
    p.start("b")
    clock.now = 50.0
    assert p.line().endswith("; 50 s left; now sweep b (30 s of ~1 min 20 s)"), p.line()  # what runs, how far


def test_slurm_states_are_named_as_the_queue_s():
    p = Progress("imagenet", runs(2), queue="SLURM", stream=io.StringIO(), tty=False, clock=Clock())
    p.update({"r0": "running"})
    assert "runs 0/2 done, 1 running, 1 queued (states from SLURM)" in p.line()


def test_a_terminal_gets_one_bar_redrawn_in_place():
    out = io.StringIO()
    p = Progress("runge", runs(2), stream=out, tty=True, clock=Clock())
    p.update({"r0": "running"})
    p.update({"r0": "done"})
    assert out.getvalue().count("\r\x1b[K") >= 2 and "\n" not in out.getvalue()
    assert "[##########..........]" in out.getvalue()
    p.close()  # the last state stays on the bar's line
    assert out.getvalue().endswith("\r\x1b[K[##########..........] runge: runs 1/2 done, 1 pending; 0 s left\n")


def test_execute_reports_each_computation_to_the_progress_file(tmp_path, monkeypatch):
    from quadnn_paper.engine import Computation

    log = tmp_path / "progress.log"
    monkeypatch.setenv(ENV, str(log))
    work = [Computation("js", "json:dumps", {"obj": 4}, seconds=1.0), Computation("js", "json:dumps", {"obj": [9]})]
    results = execute_work(work, tmp_path / "cache", "inline", label="demo")
    assert sorted(results.values()) == ["4", "[9]"]
    text = log.read_text()
    assert "demo: computations 0/2 done, 2 pending" in text
    assert "demo: computation js (dumps) finished" in text
    assert "demo: computations 2/2 done; took" in text
    log.unlink()
    execute_work(work, tmp_path / "cache", "inline", label="demo")  # cached: nothing measured
    assert "finished" not in log.read_text() and "2/2 done" in log.read_text()


def test_under_papermill_progress_reaches_make_s_output_not_the_notebook(tmp_path):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    import nbformat

    code = (
        "from quadnn_paper.execution.progress import Progress\n"
        "p = Progress('demo', [('a', 'run', 'tiny run', 1)])\n"
        "p.start('a'); p.finish('a'); p.close()"
    )
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nbformat.write(nb, tmp_path / "in.ipynb")
    papermill = Path(sys.executable).with_name("papermill")
    env = dict(os.environ, **{ENV: "launch"})
    done = subprocess.run(
        [str(papermill), "-k", "python3", str(tmp_path / "in.ipynb"), str(tmp_path / "out.ipynb")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "demo: run tiny run finished" in done.stderr  # what make paper prints
    assert "demo" not in json.dumps(json.loads((tmp_path / "out.ipynb").read_text())["cells"][0]["outputs"])
