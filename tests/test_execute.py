"""The engine's runs through the runners: local and a real SLURM give inline's results, a
weight-transfer run waits for its source. (Every notebook at the full profile through SLURM:
`make test-e2e` and tests/test_e2e.py.)"""

import dataclasses
import json
import os
from pathlib import Path

import pytest
from runs import small_run
from slurm_fixture import slurm_cluster  # noqa: F401

from quadnn_paper.engine import RunStore
from quadnn_paper.execution.execute import TrainRun, execute, job_dir, with_dependencies
from quadnn_paper.execution.runners import Job, make_runner


def tiny(**kw):
    return small_run(**kw)


def sweep():
    source = tiny(epochs=4)
    return [
        tiny(seed=1),
        tiny(model="cifar_qresnet20", relinear="sg", lr_g=1e-3, transfer_from=source, transfer_stage=1),
    ]


def curves(results):
    return {k: [(h["train_loss"], h.get("test_error")) for h in r["history"]] for k, r in results.items()}


@pytest.fixture(scope="module")
def inline_results(tmp_path_factory):
    return execute(sweep(), tmp_path_factory.mktemp("inline"), "inline", progress=False)


def test_dependencies_come_first_and_once():
    runs = sweep()
    order = with_dependencies(runs + runs)
    assert [c.run_id for c in order] == [runs[0].run_id, runs[1].transfer_from.run_id, runs[1].run_id]


def test_local_runner_gives_inline_results(tmp_path, inline_results):
    out = tmp_path / "runs"
    results = execute(sweep(), out, "local", progress=False, workers=2)
    assert all(r is not None and r["status"] == "finished" for r in results.values())
    assert curves(results) == curves(inline_results)
    # A second pass submits nothing: every key is done.
    runner = make_runner("local", job_dir(out), workers=2)
    from quadnn_paper.execution.execute import is_done, jobs

    runner.submit(jobs(with_dependencies(sweep()), out, 0), is_done=is_done(out))
    assert runner.last_submitted == []


def test_slurm_runner_gives_inline_results_and_the_dependent_waits(slurm_cluster, tmp_path, inline_results):
    out = tmp_path / "runs"
    pending = tmp_path / "pending.txt"
    os.environ["QUADNN_PENDING"] = str(pending)
    try:
        first = execute(sweep(), out, "slurm", wait=False, progress=False)
    finally:
        del os.environ["QUADNN_PENDING"]
    # Submitted, not waited for: the notebook sees pending runs, and make is told.
    assert any(r is None for r in first.values()) and "pending (" in pending.read_text()
    records = {k: json.loads((job_dir(out) / f"{k}.json").read_text()) for k in first}
    dependent = sweep()[1]
    assert records[dependent.run_id]["sources"] == {
        dependent.transfer_from.run_id: records[dependent.transfer_from.run_id]["job_id"]
    }
    again = make_runner("slurm", job_dir(out))
    from quadnn_paper.execution.execute import is_done, jobs

    again.submit(jobs(with_dependencies(sweep()), out, 0), is_done=is_done(out))
    assert again.last_submitted == []  # queued or running: never submitted twice
    results = execute(sweep(), out, "slurm", wait=True, progress=False)
    assert curves(results) == curves(inline_results)


def test_slurm_multi_task_run_is_ddp_from_submitits_environment(slurm_cluster, tmp_path):
    # Two SLURM tasks (gloo on CPU) with the global batch of one process: the same curve.
    cfg = tiny(train_limit=128, batch_size=64)
    out = tmp_path / "runs"
    runner = make_runner("slurm", job_dir(out), cpus_per_task=1)
    runner.submit([Job(cfg.run_id, TrainRun(cfg, out), tasks_per_node=2, name="ddp")])
    assert runner.wait([cfg.run_id], timeout=300) == {cfg.run_id: "done"}, runner.log_tail(cfg.run_id)
    ddp = RunStore(out).result(cfg)
    one = execute([cfg], tmp_path / "one", "inline", progress=False)[cfg.run_id]
    assert ddp["world_size"] == 2 and one["world_size"] == 1
    for a, b in zip(ddp["history"], one["history"]):
        assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-4)
        assert a["test_loss"] == pytest.approx(b["test_loss"], rel=1e-3)


def test_resources_come_from_the_run_not_from_the_submitting_host(monkeypatch):
    from quadnn_paper.execution.execute import resources
    from quadnn_paper.sections import imagenet

    monkeypatch.delenv("QUADNN_GPUS_PER_RUN", raising=False)
    cfg = imagenet.runs("full")[0]
    assert resources(cfg) == dict(gpus=8, tasks_per_node=8, cpus_per_task=8, mem_gb=256)
    assert resources(cfg, max_gpus=4) == dict(gpus=4, tasks_per_node=4, cpus_per_task=8, mem_gb=128)
    assert resources(cfg.replace(workers=11))["cpus_per_task"] == 12
    assert resources(tiny(device="auto")) == dict(gpus=1, tasks_per_node=1, cpus_per_task=8, mem_gb=32)
    assert resources(tiny(device="cpu", threads=2)) == dict(gpus=0, tasks_per_node=1, cpus_per_task=2, mem_gb=4)
    monkeypatch.setenv("QUADNN_GPUS_PER_RUN", "0")
    assert resources(cfg)["gpus"] == 0 and resources(cfg)["tasks_per_node"] == 1
    monkeypatch.setenv("QUADNN_GPUS_PER_RUN", "two")
    with pytest.raises(ValueError, match="QUADNN_GPUS_PER_RUN must be a non-negative integer, got 'two'"):
        resources(cfg)


FAKE_SBATCH = """#!/bin/sh
# Keeps the script submitit wrote and answers like sbatch.
cp "$1" "{keep}"
echo "Submitted batch job 4242"
"""


@pytest.mark.parametrize("gres, gpus", [("gpu:8(S:0-1)", 8), ("gpu:a100:4", 4)])
def test_sbatch_script_from_a_cuda_less_host_asks_for_what_the_protocol_needs(tmp_path, monkeypatch, gres, gpus):
    # This machine has no CUDA, as a login node; the cluster's nodes (sinfo's GRES) have GPUs.
    import torch

    from quadnn_paper.sections import imagenet

    assert not torch.cuda.is_available()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    keep = tmp_path / "job.sbatch"
    (bin_dir / "sbatch").write_text(FAKE_SBATCH.format(keep=keep))
    (bin_dir / "sinfo").write_text(f"#!/bin/sh\necho '{gres}'\n")
    for tool in ("sbatch", "sinfo"):
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.delenv("QUADNN_GPUS_PER_RUN", raising=False)
    monkeypatch.delenv("QUADNN_SLURM_CPUS_PER_TASK", raising=False)
    monkeypatch.delenv("QUADNN_SLURM_MEM_GB", raising=False)
    cfg = imagenet.runs("full")[0]
    results = execute([cfg], tmp_path / "runs", "slurm", wait=False, progress=False)
    assert results == {cfg.run_id: None}
    script = keep.read_text()
    for line in (
        f"#SBATCH --gpus-per-node={gpus}",
        f"#SBATCH --ntasks-per-node={gpus}",
        "#SBATCH --nodes=1",
        "#SBATCH --cpus-per-task=8",
        f"#SBATCH --mem={32 * gpus * 1024}M",
        'export OMP_NUM_THREADS="${SLURM_CPUS_PER_TASK:-1}"',  # torch's threads on the task's CPUs only
    ):
        assert line in script.splitlines(), (line, script)


@pytest.mark.slow
def test_status_costs_runs_by_their_models_flops_and_the_gpus_they_request(tmp_path, monkeypatch):
    from quadnn_paper.engine import RunConfig
    from quadnn_paper.execution.status import gpu_hours, relative_cost
    from quadnn_paper.sections import imagenet

    monkeypatch.delenv("QUADNN_GPUS_PER_RUN", raising=False)
    cost = {m: relative_cost(RunConfig(model=m), tmp_path) for m in ("cifar_resnet20", "cifar_qresnet20")}
    assert cost["cifar_resnet20"] == pytest.approx(1.0)
    assert 2.7 < cost["cifar_qresnet20"] < 3.3  # the full neuron: three convolutions per layer
    net = {
        m: relative_cost(RunConfig(task="imagefolder", dataset="imagenet", model=m), tmp_path)
        for m in ("imagenet_resnet34", "imagenet_parabolic_resnet34", "imagenet_qresnet34")
    }
    assert 1.8 < net["imagenet_parabolic_resnet34"] / net["imagenet_resnet34"] < 2.2
    assert 2.7 < net["imagenet_qresnet34"] / net["imagenet_resnet34"] < 3.3
    assert (tmp_path / "model_gflops").is_dir()  # counted once, then read back
    cfg = imagenet.runs("full")[0]
    eight = gpu_hours(cfg, 300.0, tmp_path)
    monkeypatch.setenv("QUADNN_GPUS_PER_RUN", "1")
    assert eight == pytest.approx(8 * gpu_hours(cfg, 300.0, tmp_path))


def probe(seconds: float):
    """A computation a job process can import by name (json.dumps), taking longer than the
    in-process limit by declaration when ``seconds`` says so."""
    from quadnn_paper.engine import Computation

    return Computation("probe", "json:dumps", {"obj": [1, 2, 3], "sort_keys": True}, seconds=seconds)


@pytest.mark.parametrize("runner", ["inline", "local", "slurm"])
def test_a_computation_goes_through_every_runner_and_is_cached(request, tmp_path, runner):
    """A section's non-training work takes the runs' way: a job on local and SLURM (its record
    names it), in process inline or when it is cheap; the result is the function's, cached."""
    from quadnn_paper.execution.execute import INLINE_SECONDS, execute_work

    if runner == "slurm":
        request.getfixturevalue("slurm_cluster")
    heavy, cheap = probe(INLINE_SECONDS + 1), dataclasses.replace(probe(INLINE_SECONDS), name="cheap")
    timing = dataclasses.replace(heavy, name="timing", measures_machine=True)
    results = execute_work([heavy, cheap, timing], tmp_path, runner, wait=True, progress=False)
    assert results == {heavy.key: "[1, 2, 3]", cheap.key: "[1, 2, 3]", timing.key: "[1, 2, 3]"}
    assert not (job_dir(tmp_path / "runs") / f"{timing.key}.json").exists(), "a timing of this machine is no job"
    assert heavy.result(tmp_path) == "[1, 2, 3]" and (tmp_path / "probe").is_dir()
    record = job_dir(tmp_path / "runs") / f"{heavy.key}.json"
    assert record.exists() == (runner != "inline"), "the heavy computation ran as a job of the runner"
    assert not (job_dir(tmp_path / "runs") / f"{cheap.key}.json").exists(), "a cheap one is not worth a job"
    again = execute_work([heavy, cheap, timing], tmp_path, runner, wait=True, progress=False)
    assert again == results


@pytest.mark.parametrize("runner", ["inline", "local", "slurm"])
def test_a_computation_reads_what_it_needs_on_every_runner(request, tmp_path, runner):
    """``needs``: the needed result reaches the function by the computation's name (json.loads(s=...)),
    its job runs after the needed one, and its key follows the needed key."""
    from quadnn_paper.engine import Computation
    from quadnn_paper.execution.execute import INLINE_SECONDS, execute_work

    if runner == "slurm":
        request.getfixturevalue("slurm_cluster")
    text = dataclasses.replace(probe(INLINE_SECONDS + 1), name="s")
    parsed = Computation("parsed", "json:loads", {}, seconds=INLINE_SECONDS + 1, needs=(text,))
    results = execute_work([parsed], tmp_path, runner, wait=True, progress=False)
    assert results == {text.key: "[1, 2, 3]", parsed.key: [1, 2, 3]}
    other = Computation("parsed", "json:loads", {}, needs=(dataclasses.replace(text, config={"obj": [4]}),))
    assert other.key != parsed.key, "another input is another entry"
    with pytest.raises(ValueError, match="name both"):
        Computation("bad", "json:loads", {"s": 1}, needs=(text,))


@pytest.mark.parametrize("runner", ["local", "slurm"])
def test_what_ends_without_its_result_is_submitted_again_while_waiting(request, tmp_path, monkeypatch, capsys, runner):
    """A job that dies (a lost node, a killed process) is submitted again ``retries`` times while
    the executor waits; what still has no result is named, with why, in the pending note."""
    from quadnn_paper.engine import Computation
    from quadnn_paper.execution.execute import INLINE_SECONDS, execute_work

    if runner == "slurm":
        request.getfixturevalue("slurm_cluster")

    def flaky(marker):
        return Computation("flaky", "slurm_fixture:fails_once", {"marker": str(marker)}, seconds=INLINE_SECONDS + 1)

    pending = tmp_path / "pending.txt"
    monkeypatch.setenv("QUADNN_PENDING", str(pending))
    tests = str(Path(__file__).resolve().parent)  # where a SLURM job imports slurm_fixture from
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")])))
    once = flaky(tmp_path / "a")
    assert execute_work([once], tmp_path / "a-cache", runner, wait=True, progress=False, retries=0) == {once.key: None}
    assert once.key in pending.read_text() and "pending (1 of 1 computation)" in pending.read_text()
    out = capsys.readouterr().out
    assert "the first attempt dies" in out, out
    twice = flaky(tmp_path / "b")
    got = execute_work([twice], tmp_path / "b-cache", runner, wait=True, progress=False, retries=1)
    assert got == {twice.key: "second attempt"}
    assert f"{runner}: submitting 1 item(s) again (retry 1 of 1)" in capsys.readouterr().out
    with pytest.raises(ValueError, match="retries must be a non-negative integer, got -1"):
        execute_work([twice], tmp_path, runner, retries=-1)


def test_the_pending_note_counts_runs_and_computations_apart():
    from quadnn_paper.engine import RunConfig
    from quadnn_paper.execution.execute import pending_note

    run, computation = RunConfig(), probe(1)
    assert (
        pending_note({}, [run, computation]) == "pending (1 of 1 run, 1 of 1 computation)"
    )  # (the first page prints it)
    assert pending_note({run.run_id: {}}, [run, computation]) == "pending (1 of 1 computation)"
    assert pending_note({}, [run, RunConfig(seed=1)]) == "pending (2 of 2 runs)"
    assert pending_note({run.run_id: {}, computation.key: "[1, 2, 3]"}, [run, computation]) is None
