"""Runners: inline, the local queue, and a real SLURM (tools/slurm/up.sh) driven through submitit.

The jobs are toys (tests/slurm_fixture.py: `Toy`), sleeping through a few "epochs" and
checkpointing a deterministic value, so that what is checked is the runner: results equal to
inline's, resumption after preemption/timeout/cancellation ending on the same value as an
uninterrupted run, dependencies, queueing, and nothing submitted twice.
"""

import contextlib
import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from slurm_fixture import (  # noqa: F401
    UP,
    AllReduce,
    SlowToLoad,
    Toy,
    WhichProcess,
    expected_value,
    is_done_in,
    max_overlap,
    slurm_cluster,
    spans,
)

from quadnn_paper.execution.runners import Job, make_runner

TESTS = Path(__file__).resolve().parent


def result(out, key):
    return json.loads((Path(out) / f"{key}.json").read_text())


def checkpoint(out, key):
    path = Path(out) / f"{key}.ckpt"
    return json.loads(path.read_text()) if path.exists() else None


def wait_until(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.2)


# --- API ------------------------------------------------------------------------------------------


def test_make_runner_names_the_valid_choices(tmp_path):
    with pytest.raises(ValueError, match="inline, local, slurm"):
        make_runner("ray", tmp_path)


def test_job_rejects_keys_that_cannot_name_a_file():
    with pytest.raises(ValueError, match="job key"):
        Job("../escape", print)
    with pytest.raises(ValueError, match="gpus"):
        Job("a", print, gpus=-1)
    with pytest.raises(ValueError, match="depends on itself"):
        Job("a", print, deps=("a",))


def test_slurm_runner_refuses_a_time_limit_its_timeout_signal_could_open(tmp_path, monkeypatch):
    """sbatch may send --signal up to 60 s before its time: with a limit that short the signal can
    come as the job starts, before its Python holds it, and kill the job instead of requeueing it."""
    monkeypatch.delenv("QUADNN_SLURM_TIME", raising=False)
    with pytest.raises(ValueError, match=r"time_min=1 with signal_delay_s=45: .* at least 2"):
        make_runner("slurm", tmp_path, time_min=1, signal_delay_s=45)
    monkeypatch.setenv("QUADNN_SLURM_TIME", "3")  # the default delay, 120 s, needs more than 3 minutes
    with pytest.raises(ValueError, match=r"time_min=3 with signal_delay_s=120: .* at least 4"):
        make_runner("slurm", tmp_path)


def test_dependency_cycle_is_an_error(tmp_path):
    jobs = [Job("a", print, deps=("b",)), Job("b", print, deps=("a",))]
    with pytest.raises(ValueError, match="cycle"):
        make_runner("inline", tmp_path).submit(jobs)


# --- inline ---------------------------------------------------------------------------------------


def test_inline_runs_sources_first_and_skips_what_is_done(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    jobs = [
        Job("b", Toy(out, "b", epochs=2, sleep_s=0, source="a"), deps=("a",)),
        Job("a", Toy(out, "a", epochs=3, sleep_s=0)),
    ]
    runner = make_runner("inline", tmp_path / "runs")
    assert runner.submit(jobs, is_done_in(out)) == {"a": "done", "b": "done"}
    assert runner.last_submitted == ["a", "b"]
    assert result(out, "b")["value"] == expected_value("b", 2, start=expected_value("a", 3))
    assert runner.submit(jobs, is_done_in(out)) == {"a": "done", "b": "done"}
    assert runner.last_submitted == []


def test_inline_failure_is_recorded_with_its_traceback(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    jobs = [
        Job("bad", Toy(out, "bad", epochs=3, sleep_s=0, fail=1)),
        Job("after", Toy(out, "after", sleep_s=0, source="bad"), deps=("bad",)),
        Job("good", Toy(out, "good", epochs=1, sleep_s=0)),
    ]
    runner = make_runner("inline", tmp_path / "runs")
    with pytest.raises(RuntimeError, match="fails at epoch 1"):
        runner.submit(jobs, is_done_in(out))
    assert runner.states(["bad"]) == {"bad": "failed"}
    assert "RuntimeError: toy run bad fails at epoch 1" in runner.log_tail("bad")

    runner = make_runner("inline", tmp_path / "runs", raise_errors=False)
    states = runner.submit(jobs, is_done_in(out))
    assert states == {"bad": "failed", "after": "missing", "good": "done"}
    assert runner.last_submitted == ["bad", "good"]  # a failed record is replaced, i.e. retried


# --- local ----------------------------------------------------------------------------------------


def test_local_queues_more_jobs_than_workers_and_never_runs_more(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    keys = [f"run{i}" for i in range(5)]
    jobs = [Job(k, Toy(out, k, epochs=2, sleep_s=0.4)) for k in keys]
    runner = make_runner("local", tmp_path / "runs", workers=2, gpus=[])
    states = runner.submit(jobs, is_done_in(out))
    assert set(states.values()) == {"pending"} and runner.last_submitted == keys
    seen = set()
    deadline = time.monotonic() + 60
    while any(s in ("pending", "running") for s in runner.states(keys).values()):
        seen.add(runner.running)
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert runner.states(keys) == dict.fromkeys(keys, "done")
    assert max(seen) == 2
    assert max_overlap([s[:2] for k in keys for s in spans(out, k)]) == 2
    assert all(result(out, k)["value"] == expected_value(k, 2) for k in keys)


def test_local_cpu_slot_runs_its_jobs_in_one_worker_and_a_job_that_kills_it_fails_alone(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    runner = make_runner("local", tmp_path / "runs", workers=1, gpus=[])
    pid = {}
    try:
        for keys, die in ((["a", "b"], False), (["killer"], True), (["c"], False)):
            runner.submit([Job(k, WhichProcess(out, k, die)) for k in keys])
            expected = "failed" if die else "done"
            assert runner.wait(keys, timeout=120) == dict.fromkeys(keys, expected)
            pid.update({k: int((out / f"{k}.pid").read_text()) for k in keys})
    finally:
        runner.close()
    # One worker ran a, b and the killer (no Python start and torch import per job); after the
    # killer took it down, c ran in a new one and the killer's failure names the signal.
    assert pid["a"] == pid["b"] == pid["killer"] != pid["c"]
    assert runner.state("killer") == ("failed", "the job process ended with exit -9")
    assert f"job c in process {pid['c']}" in runner.log_tail("c") and "job a" not in runner.log_tail("c")


def test_local_running_counts_jobs_holding_slots_not_jobs_still_recording_their_exit(tmp_path, monkeypatch):
    # A finished job gives its slot back, then records its exit: slowed down here, the next job runs
    # in that slot meanwhile; a count of phases would then say 2 jobs ran on 1 worker.
    from quadnn_paper.execution.runners import local

    real = local.read_json
    monkeypatch.setattr(local, "read_json", lambda path: time.sleep(0.6) or real(path))
    out = tmp_path / "out"
    out.mkdir()
    keys = ["a", "b"]
    runner = make_runner("local", tmp_path / "runs", workers=1, gpus=[])
    runner.submit([Job(k, Toy(out, k, epochs=1, sleep_s=0.3)) for k in keys], is_done_in(out))
    seen = set()
    deadline = time.monotonic() + 60
    while any(s in ("pending", "running") for s in runner.states(keys).values()):
        seen.add(runner.running)
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert max(seen) == 1 and runner.states(keys) == dict.fromkeys(keys, "done")


def test_local_gives_each_job_its_own_gpus(tmp_path):
    # Three (pretend) GPUs: a 2-GPU run and two 1-GPU runs never share a device.
    out = tmp_path / "out"
    out.mkdir()
    jobs = [
        Job("big", Toy(out, "big", epochs=2, sleep_s=0.4), gpus=2),
        Job("s1", Toy(out, "s1", epochs=2, sleep_s=0.4), gpus=1),
        Job("s2", Toy(out, "s2", epochs=2, sleep_s=0.4), gpus=1),
    ]
    runner = make_runner("local", tmp_path / "runs", gpus=["0", "1", "2"])
    runner.submit(jobs, is_done_in(out))
    assert runner.wait([j.key for j in jobs], timeout=60) == {"big": "done", "s1": "done", "s2": "done"}
    runs = {k: spans(out, k)[0] for k in ("big", "s1", "s2")}
    assert len(runs["big"][2].split(",")) == 2 and len(runs["s1"][2].split(",")) == 1
    for a in runs:
        for b in runs:
            overlap = a != b and runs[a][0] < runs[b][1] and runs[b][0] < runs[a][1]
            if overlap:
                assert not set(runs[a][2].split(",")) & set(runs[b][2].split(",")), runs
    with pytest.raises(ValueError, match="needs 4 GPUs; this machine has 3"):
        runner.submit([Job("huge", print, gpus=4)])


def test_local_dependent_waits_and_a_crash_fails_only_its_job(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    jobs = [
        Job("dep", Toy(out, "dep", epochs=1, sleep_s=0.1, source="src"), deps=("src",)),
        Job("src", Toy(out, "src", epochs=3, sleep_s=0.3)),
        Job("crash", Toy(out, "crash", epochs=3, sleep_s=0.1, fail=1)),
        Job("orphan", Toy(out, "orphan", sleep_s=0.1, source="crash"), deps=("crash",)),
    ]
    runner = make_runner("local", tmp_path / "runs", workers=3, gpus=[])
    runner.submit(jobs, is_done_in(out))
    states = runner.wait([j.key for j in jobs], timeout=60)
    assert states == {"dep": "done", "src": "done", "crash": "failed", "orphan": "failed"}
    assert spans(out, "dep")[0][0] >= spans(out, "src")[0][1]
    assert result(out, "dep")["value"] == expected_value("dep", 1, start=expected_value("src", 3))
    assert "RuntimeError: toy run crash fails at epoch 1" in runner.log_tail("crash")
    assert runner.state("orphan") == ("failed", "source crash failed: RuntimeError: toy run crash fails at epoch 1")


def test_local_multi_task_job_gets_ranks_and_a_process_group(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    # No is_done: rank 0 writes the result before the other task may have started; "done" must
    # mean that every task has ended, which the job's exit status says.
    runner = make_runner("local", tmp_path / "runs", workers=1, gpus=[])
    runner.submit(
        [
            Job("ddp", Toy(out, "ddp", epochs=1, sleep_s=0, rank_file=True), tasks_per_node=2),
            Job("gloo", AllReduce(out, "gloo"), tasks_per_node=2),
        ]
    )
    states = runner.wait(["ddp", "gloo"], timeout=90)
    assert states == {"ddp": "done", "gloo": "done"}, (runner.log_tail("ddp"), runner.log_tail("gloo"))
    assert result(out, "gloo") == {"sum": 3.0, "world": 2}
    ranks = sorted(line.split() for line in (out / "ddp.ranks").read_text().splitlines())
    assert [r[:4] for r in ranks] == [["0", "2", "0", "127.0.0.1"], ["1", "2", "1", "127.0.0.1"]]
    assert ranks[0][4] == ranks[1][4]  # one MASTER_PORT


# --- racing submitters ----------------------------------------------------------------------------

RACER = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, {tests!r})
    from quadnn_paper.execution.runners import Job, make_runner
    from slurm_fixture import Toy, is_done_in
    out, state, name, go = {out!r}, {state!r}, {name!r}, {go!r}
    jobs = [Job(k, Toy(out, k, epochs=2, sleep_s=0.3)) for k in ("r1", "r2", "r3")]
    runner = make_runner(name, state, **({{"workers": 3, "gpus": []}} if name == "local" else {{}}))
    while time.time() < go:
        time.sleep(0.001)
    runner.submit(jobs, is_done_in(out))
    print(json.dumps(runner.last_submitted), flush=True)
    runner.wait([j.key for j in jobs], timeout=60)
""")


def race(tmp_path, name):
    out, state = tmp_path / "out", tmp_path / "runs"
    out.mkdir()
    go = time.time() + 2.0  # both start submitting at the same instant, after their imports
    code = RACER.format(tests=str(TESTS), out=str(out), state=str(state), name=name, go=go)
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    submitted = [json.loads(p.communicate(timeout=90)[0].splitlines()[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    return out, submitted


def test_two_racing_local_submitters_train_each_key_once(tmp_path):
    # Both may queue a key; its job holds the key's lock while it runs, and the second one to get
    # the lock finds the key done and does not run it again.
    out, submitted = race(tmp_path, "local")
    assert set(submitted[0] + submitted[1]) == {"r1", "r2", "r3"}, submitted
    assert all(
        result(out, k) == {"value": expected_value(k, 2), "epochs": 2, "attempts": 1} for k in ("r1", "r2", "r3")
    )


# --- slurm ----------------------------------------------------------------------------------------


@pytest.fixture
def slurm(slurm_cluster, tmp_path):
    """A slurm runner with its own submitit folder, and the directory its toys write to."""
    out = tmp_path / "out"
    out.mkdir()
    return make_runner("slurm", tmp_path / "runs", is_done=is_done_in(out)), out


def sweep(out):
    jobs = [Job(f"lr{i}", Toy(out, f"lr{i}", epochs=2 + i, sleep_s=0.2)) for i in range(3)]
    jobs.append(Job("transfer", Toy(out, "transfer", epochs=2, sleep_s=0.2, source="lr2"), deps=("lr2",)))
    return jobs


def test_slurm_sweep_gives_inline_results_and_dependent_waits_for_source(slurm, tmp_path, timed_out_run):
    runner, out = slurm
    jobs = sweep(out)
    keys = [j.key for j in jobs]
    assert runner.submit(jobs) == dict.fromkeys(keys, "pending")
    # The three independent runs are one job array (one sbatch), task i the i-th key; the dependent
    # was queued at once, alone, behind its source's task (afterok:<array>_<i>), not on a later pass.
    ids = [runner.record(f"lr{i}")["job_id"] for i in range(3)]
    array = ids[0].split("_")[0]
    assert ids == [f"{array}_{i}" for i in range(3)]
    assert runner.record("transfer")["sources"] == {"lr2": f"{array}_2"}
    assert "_" not in runner.record("transfer")["job_id"]
    first_ids = {k: runner.record(k)["job_id"] for k in keys}
    runner.submit(jobs)  # while queued or running: nothing is submitted again
    assert runner.last_submitted == []
    assert runner.wait(keys, timeout=90) == dict.fromkeys(keys, "done")
    runner.submit(jobs)  # and nothing once done
    assert runner.last_submitted == [] and {k: runner.record(k)["job_id"] for k in keys} == first_ids
    assert spans(out, "transfer")[0][0] >= spans(out, "lr2")[0][1]
    sacct = ["sacct", "-X", "-n", "-P", "-o", "JobID,JobName", "-j", array]
    in_sacct = [f"{i}|{runner.record('lr0')['job_name']}" for i in ids]  # one array of 3 (once accounted)
    wait_until(
        lambda: sorted(subprocess.run(sacct, capture_output=True, text=True).stdout.split()) == in_sacct, 30, "sacct"
    )
    assert f"JobEnvironment(job_id={array}_1," in runner.log_tail("lr1", 50)  # each task shows its own log

    inline_out = tmp_path / "inline"
    inline_out.mkdir()
    make_runner("inline", tmp_path / "inline-runs").submit(sweep(inline_out), is_done_in(inline_out))
    assert {k: result(out, k) for k in keys} == {k: result(inline_out, k) for k in keys}


def test_slurm_preempted_job_requeues_and_resumes(slurm):
    runner, out = slurm
    runner.submit([Job("pre", Toy(out, "pre", epochs=6, sleep_s=0.5)), Job("pre2", Toy(out, "pre2", epochs=2))])
    assert runner.record("pre")["job_id"].endswith("_0")  # a task of an array: requeued alone
    wait_until(lambda: (checkpoint(out, "pre") or {}).get("epoch", 0) >= 2, 60, "epoch 2")
    runner.job("pre")._interrupt()  # SIGTERM then USR2, as a preemption: submitit requeues
    assert runner.wait(["pre", "pre2"], timeout=90) == {"pre": "done", "pre2": "done"}
    assert result(out, "pre2")["attempts"] == 1
    assert result(out, "pre") == {"value": expected_value("pre", 6), "epochs": 6, "attempts": 2}
    assert "this job is preempted" in runner.log_tail("pre", 50)


def test_slurm_job_signalled_while_it_loads_is_requeued_not_killed(slurm):
    # A preemption (TERM, then USR2) that comes while the job still loads its pickle, before submitit
    # has installed its handlers: slurm_job.py holds both signals and hands them to submitit then.
    runner, out = slurm
    runner.submit([Job("early", SlowToLoad(out, "early", epochs=2, sleep_s=0.1))])
    wait_until(lambda: (out / "early.loading").exists(), 60, "the job loading its pickle")
    runner.job("early")._interrupt()
    assert runner.wait(["early"], timeout=90) == {"early": "done"}, runner.log_tail("early", 40)
    assert len((out / "early.loading").read_text().splitlines()) == 2  # loaded again: requeued, then resumed
    assert "this job is preempted" in runner.log_tail("early", 80)


def test_slurm_job_submitted_from_inside_an_array_task_runs(slurm, monkeypatch):
    # A notebook run as task 3 of some array submits a plain job: sbatch exports the submitter's
    # environment, SLURM_ARRAY_* included, and the job must not take itself for that task.
    runner, out = slurm
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "999999")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    runner.submit([Job("nested", Toy(out, "nested", epochs=1))])
    assert "_" not in runner.record("nested")["job_id"]
    assert runner.wait(["nested"], timeout=90) == {"nested": "done"}, runner.log_tail("nested", 40)


def test_a_late_adoption_keeps_the_pickle_the_job_put_in_place(tmp_path):
    # sbatch's answer was lost; the job copied its intent into place, ran, was requeued with a
    # newer pickle; the submitter adopts it only now: the job's pickle must stay.
    from quadnn_paper.execution.runners.slurm import JOBS, adopt

    runner = make_runner("inline", tmp_path / "runs")
    intent = tmp_path / "runs" / "slurm" / "intents" / "x.abc.pkl"
    intent.parent.mkdir(parents=True)
    intent.write_bytes(b"intent")
    placed = tmp_path / "runs" / "slurm" / JOBS / "42_submitted.pkl"
    placed.parent.mkdir()
    placed.write_bytes(b"requeued")
    record = dict(key="x", runner="slurm", deps=[], submitted_at=time.time(), job_name="x.abc", intent=str(intent))
    (adopted,) = adopt(runner, [record], ["42"])
    assert adopted["job_id"] == "42" and runner.record("x")["job_id"] == "42"
    assert placed.read_bytes() == b"requeued" and not intent.exists()
    intent.write_bytes(b"intent")  # and when the job never ran, the intent is moved into place
    (tmp_path / "runs" / "slurm" / JOBS / "43_submitted.pkl").unlink(missing_ok=True)
    adopt(runner, [record], ["43"])
    assert (tmp_path / "runs" / "slurm" / JOBS / "43_submitted.pkl").read_bytes() == b"intent"


def test_slurm_cancelled_job_is_resubmitted_and_resumes(slurm):
    runner, out = slurm
    # scancel sends SIGTERM (which submitit ignores, waiting for USR2) and SIGKILL KillWait (5 s)
    # later: the run must outlast that to be killed mid-run. "cut" is task 0 of an array of two.
    jobs = [Job("cut", Toy(out, "cut", epochs=16, sleep_s=0.5)), Job("kept", Toy(out, "kept", epochs=12, sleep_s=0.5))]
    runner.submit(jobs)
    wait_until(lambda: (checkpoint(out, "cut") or {}).get("epoch", 0) >= 2, 60, "epoch 2")
    first = runner.record("cut")["job_id"]
    assert first.endswith("_0") and runner.record("kept")["job_id"] == first[:-1] + "1"
    subprocess.run(["scancel", first], check=True)  # killed outright: no checkpoint() call
    wait_until(lambda: runner.states(["cut"]) == {"cut": "failed"}, 30, "the cancelled state")
    assert f"SLURM job {first} is CANCELLED" == runner.state("cut")[1]
    # Resubmitted alone (a plain job); its array sibling keeps running, untouched.
    assert runner.submit(jobs) == {"cut": "pending", "kept": "running"} and runner.last_submitted == ["cut"]
    assert "_" not in runner.record("cut")["job_id"]
    assert runner.wait(["cut", "kept"], timeout=60) == {"cut": "done", "kept": "done"}
    assert result(out, "cut") == {"value": expected_value("cut", 16), "epochs": 16, "attempts": 2}
    assert result(out, "kept") == {"value": expected_value("kept", 12), "epochs": 12, "attempts": 1}


@pytest.fixture(scope="module")
def timed_out_run(slurm_cluster, tmp_path_factory):
    """A run longer than its two-minute limit's signal, started early so that it overlaps the other
    SLURM tests: SLURM sends USR2 45 s before the limit, and by sbatch's manual up to 60 s earlier
    (its periodic check), so 15 to 75 s after the start; submitit sees a timeout, checkpoints and
    requeues; the run resumes, maybe more than once. (With a one-minute limit the signal could come
    as the job starts, before its Python holds it, and kill it: the runner refuses that now.)"""
    tmp = tmp_path_factory.mktemp("timeout")
    out = tmp / "out"
    out.mkdir()
    runner = make_runner("slurm", tmp / "runs", is_done=is_done_in(out), time_min=2, signal_delay_s=45)
    runner.submit([Job("slow", Toy(out, "slow", epochs=85, sleep_s=1))])  # longer than the signal's 75 s
    return runner, out


def test_slurm_failure_shows_its_log_and_cancels_its_dependents(slurm):
    runner, out = slurm
    jobs = [
        Job("boom", Toy(out, "boom", epochs=2, sleep_s=0.1, fail=0)),
        Job("needs-boom", Toy(out, "needs-boom", sleep_s=0.1, source="boom"), deps=("boom",)),
    ]
    runner.submit(jobs)
    assert runner.wait(["boom", "needs-boom"], timeout=60) == {"boom": "failed", "needs-boom": "failed"}
    assert "RuntimeError: toy run boom fails at epoch 0" in runner.log_tail("boom")


def test_slurm_multi_task_job_sets_ranks_from_submitit(slurm_cluster, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    runner = make_runner("slurm", tmp_path / "runs")  # done: every task ended (not is_done)
    runner.submit([Job("ddp", Toy(out, "ddp", epochs=1, sleep_s=0, rank_file=True), tasks_per_node=2)])
    assert runner.wait(["ddp"], timeout=60) == {"ddp": "done"}
    ranks = sorted(line.split() for line in (out / "ddp.ranks").read_text().splitlines())
    assert [r[:3] for r in ranks] == [["0", "2", "0"], ["1", "2", "1"]]
    assert ranks[0][3:] == ranks[1][3:]  # one MASTER_ADDR and MASTER_PORT


def test_slurm_two_tasks_form_a_torch_process_group(slurm):
    runner, out = slurm
    runner.submit([Job("gloo", AllReduce(out, "gloo"), tasks_per_node=2)])
    assert runner.wait(["gloo"], timeout=90) == {"gloo": "done"}, runner.log_tail("gloo")
    assert result(out, "gloo") == {"sum": 3.0, "world": 2}


def test_two_racing_slurm_submitters_submit_each_key_once(slurm_cluster, tmp_path):
    out, submitted = race(tmp_path, "slurm")
    assert sorted(submitted[0] + submitted[1]) == ["r1", "r2", "r3"], submitted
    files = [f.name for f in (tmp_path / "runs" / "slurm" / "jobs").glob("[0-9]*")]
    assert len({f.split("_")[0] for f in files}) == 1, files  # sbatch'ed once: one array for the three
    assert len([f for f in files if f.endswith("_submitted.pkl")]) == 3, files
    for key in ("r1", "r2", "r3"):
        assert result(out, key)["attempts"] == 1


def test_slurm_timed_out_job_requeues_and_resumes(timed_out_run):
    runner, out = timed_out_run
    assert runner.wait(["slow"], timeout=300) == {"slow": "done"}  # 85 s of epochs, requeues between
    res = result(out, "slow")
    assert res["value"] == expected_value("slow", 85) and res["attempts"] >= 2
    assert "this job is timed-out" in runner.log_tail("slow", 80)


def test_up_sh_says_why_it_cannot_bring_slurm_up():
    # What the fixture turns into a skip message: exit 3 and one line. As root, ask as `nobody`
    # with no cluster configured (an empty SLURM_CONF).
    cmd = ["bash", str(UP)]
    if os.geteuid() == 0:
        if subprocess.run(["runuser", "-u", "nobody", "--", "test", "-r", str(UP)]).returncode:
            pytest.skip(f"user nobody cannot read {UP} (a checkout under a private folder, e.g. mktemp -d)")
        cmd = ["runuser", "-u", "nobody", "--", "env", "SLURM_CONF=/dev/null", *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd="/")
    if os.geteuid() != 0 and proc.returncode == 0:
        pytest.skip("a SLURM cluster is already up and reachable")
    assert proc.returncode == 3
    assert proc.stderr.strip().splitlines()[-1].startswith("SLURM cannot be brought up: not root")


# --- a controller or an accounting database that does not answer ------------------------------------


@contextlib.contextmanager
def paused(state_dir, daemon, seconds):
    """SIGSTOP ``daemon`` (slurmctld, slurmdbd) of the test cluster; SIGCONT after ``seconds``, or
    after what ``resume_in(s)`` (yielded) asks for once the test has seen what it waited for."""
    pid = int((Path(state_dir) / f"{daemon}.pid").read_text())
    os.kill(pid, signal.SIGSTOP)
    timers = [threading.Timer(seconds, os.kill, (pid, signal.SIGCONT))]
    timers[0].start()

    def resume_in(s):
        timers[-1].cancel()
        timers.append(threading.Timer(s, os.kill, (pid, signal.SIGCONT)))
        timers[-1].start()

    try:
        yield resume_in
    finally:
        timers[-1].join()
        os.kill(pid, signal.SIGCONT)


def jobs_named(name):
    """Ids of the jobs (arrays: the array's) called ``name`` that the controller holds or accounting
    has recorded."""
    ids = set()
    for cmd in (
        ["squeue", "-h", "-t", "all", "-n", name, "-o", "%F"],
        ["sacct", "-X", "-n", "-P", "--name", name, "-S", "now-1hour", "-o", "JobID"],
    ):
        ids |= {i.split("_")[0] for i in subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split()}
    return sorted(ids)


def test_slurm_sbatch_timing_out_while_slurm_takes_the_job_submits_it_once(slurm_cluster, slurm, capsys):
    runner, out = slurm
    jobs = [Job(k, Toy(out, k, epochs=2, sleep_s=0.2)) for k in ("stall", "stall2")]  # one array
    keys = [j.key for j in jobs]
    with paused(slurm_cluster, "slurmctld", 14):  # sbatch gives up after MessageTimeout (10 s)
        runner.submit(jobs)
    # The precondition really happened: sbatch timed out. The runner then either found the job by its
    # name at once (adopted, silently) or kept the key as submitted-unconfirmed (and said so); both
    # must end with one job for the key, as checked below.
    seen = capsys.readouterr()
    assert "Socket timed out" in seen.out + seen.err
    states = runner.wait(keys, timeout=120)
    assert states == dict.fromkeys(keys, "done"), ([runner.record(k) for k in keys], runner.log_tail("stall"))
    runner.submit(jobs)
    assert runner.last_submitted == []
    records = [runner.record(k) for k in keys]
    array = records[0]["job_id"].split("_")[0]
    assert [r["job_id"] for r in records] == [f"{array}_0", f"{array}_1"]
    assert jobs_named(records[0]["job_name"]) == [array]  # SLURM has one array, one task per key
    for key in keys:
        assert result(out, key) == {"value": expected_value(key, 2), "epochs": 2, "attempts": 1}


def sacct_state(job_id):
    """The job's state in the accounting database ("" while slurmdbd has not recorded it)."""
    base = str(job_id).split("_")[0]
    cmd = ["sacct", "-X", "-n", "-P", "-j", base, "-o", "JobID,State"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.split()
    return next((line.split("|")[1] for line in out if line.split("|")[0] == str(job_id)), "")


def in_controller(job_id):
    out = subprocess.run(["squeue", "-h", "-t", "all", "-j", str(job_id)], capture_output=True, text=True, timeout=30)
    return out.returncode == 0 and out.stdout.strip() != ""


def test_slurm_states_unknown_while_slurmdbd_is_stopped_stay_pending(slurm_cluster, tmp_path, monkeypatch):
    from quadnn_paper.execution.runners import slurm as slurm_runner

    monkeypatch.setattr(slurm_runner, "SACCT_TIMEOUT_S", 2)
    monkeypatch.setattr(slurm_runner, "SACCT_RETRIES", 1)
    out = tmp_path / "out"
    out.mkdir()
    runner = make_runner("slurm", tmp_path / "runs")  # done: SLURM says COMPLETED (not is_done)
    runner.submit([Job("dark", Toy(out, "dark", epochs=2, sleep_s=0.5))])
    job_id = runner.record("dark")["job_id"]
    # The state nobody can give: the controller has forgotten the job (MinJobAge=10 s after its end)
    # and the database does not answer. Built in that order, with the database up until then: a
    # controller keeps a job it has not yet reported to the database, and when that happens depends on
    # the daemons' timers (CI once waited 140 s for a purge that never came).
    wait_until(lambda: sacct_state(job_id) == "COMPLETED", 120, "the database to record the job's end")
    wait_until(lambda: not in_controller(job_id), 240, "the controller to forget the job")
    with paused(slurm_cluster, "slurmdbd", 120) as resume_in:  # a generous bound; resumed below
        state, why = runner.state("dark")
        assert (state, why.startswith("state unknown")) == ("pending", True), (state, why)
        assert runner.submit([Job("dark", Toy(out, "dark"))]) == {"dark": "pending"}  # not resubmitted
        assert runner.last_submitted == []
        resume_in(3)  # the database comes back while we wait
        assert runner.wait(["dark"], timeout=120) == {"dark": "done"}  # waits through the outage
    assert runner.record("dark")["job_id"] == job_id
    assert result(out, "dark")["attempts"] == 1


# --- job pickles -------------------------------------------------------------------------------------


def test_a_job_pickle_in_a_folder_others_can_write_is_refused(tmp_path):
    from quadnn_paper.common.files import load_private_pickle as load_job

    top = tmp_path / "jobs"
    top.mkdir(mode=0o755)
    spec = top / "a.pkl"
    spec.write_bytes(pickle.dumps({"fn": None}))
    spec.chmod(0o600)
    assert load_job(spec, top) == {"fn": None}
    top.chmod(0o775)
    with pytest.raises(PermissionError, match=r"jobs is writable by its group \(mode drwxrwxr-x\)"):
        load_job(spec, top)
    top.chmod(0o755)
    spec.chmod(0o666)
    with pytest.raises(PermissionError, match="a.pkl is writable by group and others"):
        load_job(spec, top)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a folder to another user")
def test_local_runner_refuses_jobs_from_a_folder_of_another_user(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    state = tmp_path / "runs"
    state.mkdir()
    os.chown(state, 65534, 65534)  # nobody's, and writable by nobody's group
    state.chmod(0o775)
    runner = make_runner("local", state, workers=1, gpus=[])
    runner.submit([Job("theirs", Toy(out, "theirs", epochs=1, sleep_s=0))], is_done_in(out))
    assert runner.wait(["theirs"], timeout=60) == {"theirs": "failed"}
    assert "belongs to uid 65534, not to us" in runner.state("theirs")[1]
    assert not (out / "theirs.json").exists()


@pytest.mark.parametrize("name", [None, "USR1", "USR2"])
def test_slurm_job_holds_the_signal_submitit_handles(name):
    """slurm_job.py holds submitit's preemption signal as submitit reads it (SUBMITIT_PREEMPT_SIGNAL,
    default USR2), and TERM; read in a child process (importing the file installs its handlers)."""
    import signal
    import subprocess
    import sys

    from quadnn_paper.execution.runners import slurm as slurm_runner

    env = {k: v for k, v in os.environ.items() if k != "SUBMITIT_PREEMPT_SIGNAL"}
    if name:
        env["SUBMITIT_PREEMPT_SIGNAL"] = name
    code = (
        "import importlib.util, sys; s = importlib.util.spec_from_file_location('j', sys.argv[1]); "
        "m = importlib.util.module_from_spec(s); s.loader.exec_module(m); print(*(int(h) for h in m.HELD))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(slurm_runner.JOB_MAIN)], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr
    want = getattr(signal, "SIG" + (name or "USR2"))
    assert [int(v) for v in out.stdout.split()] == [int(want), int(signal.SIGTERM)]
