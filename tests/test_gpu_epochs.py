"""The engine's epoch measured on a GPU, committed under docs/gpu/ (epoch*.json),
read with validation, shown in the efficiency section and used for the full profile's GPU-hours."""

from __future__ import annotations

import json

import pytest

from quadnn_paper.common.outputs import columns
from quadnn_paper.data import gpu_bench
from quadnn_paper.execution import gpu_check

MACHINE = "Stand-in GPU, torch 2.11.0+cu130, CUDA 13.0"


def row(model="cifar_resnet20", compiled=False, seconds=3.0, **kw):
    r = dict(model=model, compiled=compiled, status="finished", compile_seconds=20.0 if compiled else None)
    r["epoch_seconds"] = seconds
    if not compiled:
        r["floor_seconds"] = 1.0
    r.update(machine=MACHINE, device="cuda:0")
    if compiled:
        r["inductor_cache"] = "cold"
    return dict(r, **kw)


def write(folder, rows, name="epoch.json"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return folder


# -- the loader ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "bad, message",
    [
        ("{not json", r"epoch.json:2: not a JSON row"),
        ("[1, 2]", r"epoch.json:2: a row is a JSON object, got list"),
        (json.dumps({k: v for k, v in row().items() if k != "machine"}), r"epoch.json:2: .* needs machine"),
        (json.dumps(row(status="failed")), r"epoch.json:2: status 'failed': only finished runs"),
        (json.dumps(row(device="cpu")), r"epoch.json:2: measured on 'cpu', not a GPU"),
        (json.dumps(row(epoch_seconds=None)), r"epoch.json:2: epoch_seconds must be a positive number, got None"),
        (json.dumps(row(epoch_seconds=-1)), r"epoch.json:2: epoch_seconds must be a positive number"),
        (json.dumps(row(epoch_seconds=True)), r"epoch.json:2: epoch_seconds must be a positive number"),
        (json.dumps(row(compiled="yes")), r"epoch.json:2: compiled must be true or false"),
        (json.dumps(row(model="resnet50")), r"epoch.json:2: model 'resnet50' is not a registered CIFAR model"),
        (json.dumps(row(floor_seconds=0)), r"epoch.json:2: floor_seconds must be a positive number or null"),
        (json.dumps(row("cifar_qresnet20", True, inductor_cache="hot")), r"epoch.json:2: inductor_cache must be"),
        (json.dumps(row(machine="")), r"epoch.json:2: machine must name the GPU"),
        (json.dumps(row(seconds=4.0)), r"epoch.json:2: the same model, mode and inductor cache as epoch.json:1"),
    ],
)
def test_the_loader_refuses_a_malformed_row_naming_file_and_line(tmp_path, bad, message):
    folder = write(tmp_path / "2026-11-26-gpu-epoch", [row(), bad])
    with pytest.raises(ValueError, match=message):
        gpu_bench.read_epochs(folder)
    with pytest.raises(ValueError, match=message):
        gpu_bench.load_epochs(tmp_path)


def test_the_loader_refuses_a_folder_of_several_machines_or_none(tmp_path):
    folder = write(tmp_path / "2026-11-26-gpu-epoch", [row(), row("cifar_qresnet20", machine="Other GPU, torch 2")])
    with pytest.raises(ValueError, match=r"rows from several machines .*one folder per machine"):
        gpu_bench.read_epochs(folder)
    with pytest.raises(ValueError, match=r"no epoch\*.json"):
        gpu_bench.read_epochs(tmp_path)
    assert gpu_bench.load_epochs(tmp_path / "nothing-here") is None


def test_newest_folder_of_the_newest_machine_wins_and_other_machines_are_never_mixed(tmp_path):
    write(tmp_path / "2026-11-01-old-gpu", [row(seconds=9.0, machine="Old GPU, torch 2.0, CUDA 12.0")])
    write(tmp_path / "2026-11-20-gpu-check", [row(seconds=3.0), row("cifar_qresnet20", seconds=8.0)])
    write(
        tmp_path / "2026-11-25-gpu-compiled",
        [row("cifar_qresnet20", True, 2.0), row("cifar_qresnet20", True, 2.2, inductor_cache="warm")],
        name="epoch_compiled.json",
    )
    write(tmp_path / "2026-11-26-bench-only", [])  # no epoch rows: not a candidate
    (tmp_path / "2026-11-26-bench-only" / "epoch.json").unlink()
    e = gpu_bench.load_epochs(tmp_path)
    assert e.machine == MACHINE and e.date == "2026-11-25"
    assert [f.rsplit("/", 1)[-1] for f in e.folders] == ["2026-11-20-gpu-check", "2026-11-25-gpu-compiled"]
    assert e.row("cifar_resnet20", False)["epoch_seconds"] == 3.0  # not the old machine's 9.0
    assert e.row("cifar_qresnet20", True)["epoch_seconds"] == 2.0  # the cold row first
    assert e.row("cifar_qresnet20", True, "warm")["epoch_seconds"] == 2.2
    assert e.row("cifar_resnet20", True) is None
    assert e.row("cifar_qresnet20", True)["folder"].endswith("2026-11-25-gpu-compiled")
    assert gpu_bench.family("cifar_qresnet56_compact") == gpu_bench.family("cifar_qvgg16") == "quadratic"
    assert gpu_bench.family("cifar_vgg16_square") == gpu_bench.family("cifar_resnet1202") == "conventional"
    assert gpu_bench.family("imagenet_resnet18") is None


def test_the_committed_epoch_rows_load_and_name_their_gpu():
    e = gpu_bench.load_epochs()
    assert e is not None and e.machine.startswith("NVIDIA ") and all(f.startswith("docs/gpu/") for f in e.folders)
    for model in ("cifar_resnet20", "cifar_qresnet20"):
        assert e.row(model, False) is not None and e.row(model, False)["floor_seconds"] > 0
        assert e.row(model, True) is not None and e.row(model, True)["compile_seconds"] > 0


# -- what make gpu-check writes is committable as it is --------------------------------------------------
def test_gpu_check_writes_committable_rows_and_keeps_the_finished_ones_when_cut_off(monkeypatch, tmp_path):
    monkeypatch.setattr("quadnn_paper.common.machine.machine", lambda device="cpu": MACHINE)
    res = dict(status="finished", compile_seconds=None, history=[dict(epoch_time=4.0), dict(epoch_time=3.5)])
    rows = {
        (m, c): gpu_check.epoch_row(
            m, c, dict(res, compile_seconds=30.0 if c else None), "cuda:0", None if c else 1.2, True
        )
        for m in gpu_check.PAPER_EPOCH_SECONDS
        for c in (False, True)
    }
    assert rows[("cifar_resnet20", False)] == dict(
        model="cifar_resnet20",
        compiled=False,
        status="finished",
        compile_seconds=None,
        epoch_seconds=3.5,
        floor_seconds=1.2,
        machine=MACHINE,
        device="cuda:0",
    )
    assert rows[("cifar_qresnet20", True)]["inductor_cache"] == "cold"
    outputs = {
        f"epoch_{m}" + ("_compiled" if c else ""): (0, "some log line\n" + json.dumps(r)) for (m, c), r in rows.items()
    }
    outputs["epoch_cifar_qresnet20_compiled"] = (124, "cut off")  # the check's last run did not finish

    def fake(ctx, name, cmd, timeout=None):
        return outputs[name]

    monkeypatch.setattr(gpu_check, "_subprocess", fake)
    folder = tmp_path / "2026-11-27-gpu-check"
    check = gpu_check.check_epoch(gpu_check.Context(device="cuda:0", out=folder))
    assert check.status == "fail" and "epoch_cifar_qresnet20_compiled: exit 124" in check.message
    e = gpu_bench.read_epochs(folder)  # the folder as gpu-check left it, committable
    assert e.machine == MACHINE and len(e.rows) == 3 and e.row("cifar_qresnet20", True) is None
    assert e.row("cifar_resnet20", True)["compile_seconds"] == 30.0


# -- GPU-hours: the measured seconds per model family when committed, the paper's when not -------------
def _fake_gflops(cfg, cache=None):
    """Forward GFLOPs by a stand-in rule (depth x width^2, x3 for a full neuron, x2 for the other
    quadratic kinds): the estimates' arithmetic without counting every model's FLOPs."""
    from quadnn.models import cifar_resnet

    if cfg.model in cifar_resnet.VARIANTS:
        depth, neuron = cifar_resnet.VARIANTS[cfg.model]
    else:
        depth, neuron = 16, "full" if cfg.model == "cifar_qvgg16" else "conventional"
    kind = {"conventional": 1.0, "full": 3.0}.get(neuron, 2.0)
    return 0.004 * depth * cfg.width**2 * kind if cfg.task == "classification" else 7.0


@pytest.fixture(scope="module")
def cifar_runs():
    from quadnn_paper.execution import status

    runs = [
        cfg
        for name in ("cifar_tuning", "vgg_stability", "cifar_comparison")
        for cfg in status.section_runs(name, "full")
    ]
    return list({cfg.run_id: cfg for cfg in runs}.values())


def _measured(tmp_path, conv, quad, compiled_quad=None):
    rows = [row("cifar_resnet20", seconds=conv), row("cifar_qresnet20", seconds=quad)]
    if compiled_quad is not None:
        rows.append(row("cifar_qresnet20", True, compiled_quad))
    folder = write(tmp_path / "2026-11-27-gpu-check", rows)
    return gpu_bench.read_epochs(folder)


def test_gpu_hours_use_the_measured_seconds_of_the_runs_family_and_the_papers_without(
    monkeypatch, tmp_path_factory, cifar_runs
):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from quadnn_paper.common import published
    from quadnn_paper.engine import RunConfig
    from quadnn_paper.execution import status

    monkeypatch.setattr(status, "model_gflops", _fake_gflops)
    monkeypatch.delenv("QUADNN_GPUS_PER_RUN", raising=False)
    paper = float(published.CIFAR_EPOCH_SECONDS["cifar_resnet20"])
    seconds = st.floats(0.05, 500.0, allow_nan=False, allow_infinity=False)

    @settings(max_examples=60, deadline=None, derandomize=True)
    @given(conv=seconds, quad=seconds, compiled=seconds, i=st.integers(0, len(cifar_runs) - 1), compile_=st.booleans())
    def prop(conv, quad, compiled, i, compile_):
        cfg = cifar_runs[i].replace(compile=compile_)
        measured = _measured(tmp_path_factory.mktemp("gpu"), conv, quad, compiled)
        fam = gpu_bench.family(cfg.model)
        ref = RunConfig(model="cifar_resnet20" if fam == "conventional" else "cifar_qresnet20", relinear="none")
        want = (compiled if compile_ and fam == "quadratic" else conv if fam == "conventional" else quad) * (
            _fake_gflops(cfg) / _fake_gflops(ref)
        )
        unit, source = status.epoch_seconds(cfg, measured)
        hours = status.gpu_hours(cfg, unit)
        assert hours == pytest.approx(want * cfg.epochs / 3600, rel=1e-9)
        assert source.split()[1] == ("ResNet20" if fam == "conventional" else "QResNet20")
        assert source.endswith(" compiled") == (compile_ and fam == "quadratic")
        # none committed: the paper's ResNet20 epoch, scaled by FLOPs, as before
        unit, source = status.epoch_seconds(cfg, None)
        assert source == f"{paper:g} paper" and unit == paper
        base = RunConfig(model="cifar_resnet20", relinear="none")
        assert status.gpu_hours(cfg, unit) == pytest.approx(
            paper * _fake_gflops(cfg) / _fake_gflops(base) * cfg.epochs / 3600
        )

    prop()
    # the measured model's own run costs exactly its measured epochs
    measured = _measured(tmp_path_factory.mktemp("gpu"), 3.89, 10.61)
    q20 = next(c for c in cifar_runs if c.model == "cifar_qresnet20")
    unit, source = status.epoch_seconds(q20, measured)
    assert status.gpu_hours(q20, unit) == pytest.approx(10.61 * q20.epochs / 3600) and source == "10.61 QResNet20"
    # another task keeps its stated default
    kitti = RunConfig(task="depth", dataset="kitti", model="lapdepth")
    assert status.epoch_seconds(kitti, measured) == (status.DEFAULT_SECONDS_PER_EPOCH["depth"], "900 stated")


def test_the_reports_cost_table_and_make_status_name_their_source(monkeypatch, tmp_path):
    from quadnn_paper.execution import overview, status

    monkeypatch.setattr(status, "model_gflops", _fake_gflops)
    measured = _measured(tmp_path, 3.89, 10.61)

    def table(m):
        return {r[0]: r for r in overview.full_cost_rows(m)}

    with_gpu, without = table(measured), table(None)
    assert set(with_gpu["cifar_tuning"][3].split(", ")) == {"3.89 ResNet20", "10.61 QResNet20"}
    assert without["cifar_comparison"][3] == "10.43 paper" and without["vgg_stability"][3] == "10.43 paper"
    assert with_gpu["imagenet"][3] == without["imagenet"][3] == "300 stated"
    assert "runge" not in with_gpu  # a section that trains nothing has no row
    assert with_gpu["imagenet"][2] == without["imagenet"][2]
    assert with_gpu["cifar_comparison"][2] != without["cifar_comparison"][2]
    assert [c.name for c in columns(overview.FULL_COST_HEADER)] == [
        "Section",
        "Runs",
        "GPU-hours",
        "Seconds per epoch assumed",
    ]
    # make status: the same sources per section, and the note naming the GPU and folder
    text, failed = status.plan_table("full", tmp_path / "cache" / "runs", measured=measured)
    lines = {line.split()[0]: line for line in text.splitlines()}
    assert set(lines["cifar_tuning"].split(maxsplit=9)[-1].split("; ")) == {"3.89 ResNet20", "10.61 QResNet20"}
    assert lines["imagenet"].endswith("300 stated") and not failed
    assert "measured on Stand-in GPU (" in text and "2026-11-27-gpu-check" in text
    text, _ = status.plan_table("full", tmp_path / "cache" / "runs")
    assert "10.43 paper" in text and "the paper's 10.43 s per ResNet20 epoch" in text


# -- the efficiency section's GPU epoch table --------------------------------------------------------------
def test_the_efficiency_section_shows_the_gpu_epochs_apart_with_the_papers_seconds(tmp_path):
    from quadnn_paper.sections import efficiency as E

    rows = [
        row("cifar_qresnet20", seconds=10.6),
        row("cifar_resnet20", seconds=3.9),
        row("cifar_resnet20", True, 1.4),
        row("cifar_qresnet20", True, 2.1, compile_seconds=4.0, inductor_cache="warm"),
    ]
    epochs = gpu_bench.read_epochs(write(tmp_path / "2026-11-27-gpu-check", rows))
    out = E.summary(dict(rows=[], compile_rows=[], epochs=epochs))
    assert out.gpu == [["not measured"] + ["--"] * (len(E.GPU_HEADER) - 1)]  # bench rows: none given
    table = out.gpu_epoch
    assert all(len(r) == len(E.GPU_EPOCH_HEADER) for r in table)
    plain = [[getattr(c, "value", c) for c in r] for r in table]
    assert plain == [
        ["ResNet20", "conventional", 3.9, 1.4, 20.0, 1.0, 10.43],  # conventional first
        ["ResNet20", "full", 10.6, 2.1, "--", 1.0, 10.87],  # only a warm compile: no cold seconds
    ]
    assert table[0][-1].paper and not table[0][2].paper
    v = E.gpu_epoch_variables(epochs)
    assert v["GpuEpochMachine"] == MACHINE
    assert v["GpuEpochSource"].endswith("2026-11-27-gpu-check") and v["GpuEpochDate"] == "2026-11-27"
    assert (v["GpuEpochEagerRatio"], v["GpuEpochCompiledRatio"], v["GpuEpochQuadWarmCompile"]) == (
        "2.72",
        "1.50",
        "4.0",
    )
    none = E.summary(dict(rows=[], compile_rows=[])).gpu_epoch
    assert none == [["not measured"] + ["--"] * (len(E.GPU_EPOCH_HEADER) - 1)]
    assert set(E.gpu_epoch_variables(None).values()) <= {"no", "not measured", "no GPU", "--"}
