"""Issue 38 item 5: the engine's epoch measured on a GPU, committed under docs/gpu/ (epoch*.json),
read with validation, shown in the efficiency section and used for the full profile's GPU-hours."""

from __future__ import annotations

import json

import pytest

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
    monkeypatch.setattr("quadnn.bench.machine", lambda device="cpu": MACHINE)
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
