"""The run cache survives corruption and concurrency: an unreadable file is reported with its path
and redone, two processes asking for one configuration train it once, a moved cache still works."""

import json
import subprocess
import sys
import warnings
from dataclasses import asdict

import pytest
import torch
from runs import small_run

from quadnn_paper.engine import RunStore, cached, run

pytestmark = pytest.mark.usefixtures("one_thread")


def tiny(**kw):
    return small_run(**{"epochs": 3, **kw})


def curve(res):
    return [(h["train_loss"], h.get("test_error")) for h in res["history"]]


@pytest.mark.parametrize("damage", ["truncate", "drop_history"])
def test_unreadable_result_is_reported_and_redone(tmp_path, damage):
    cfg, out = tiny(), tmp_path / "runs"
    first = run(cfg, out)
    path = RunStore(out).dir(cfg) / "result.json"
    if damage == "truncate":
        path.write_text(path.read_text()[:100])
    else:
        d = json.loads(path.read_text())
        del d["history"]
        path.write_text(json.dumps(d))
    with pytest.warns(RuntimeWarning, match=str(path).replace("\\", "/")):
        again = run(cfg, out)
    assert curve(again) == curve(first)
    assert list(path.parent.glob("result.json.corrupt-*"))  # kept aside, never reused


def test_truncated_resume_checkpoint_is_reported_and_the_run_restarts(tmp_path):
    cfg, out = tiny(), tmp_path / "runs"
    store = RunStore(out)
    store.dir(cfg).mkdir(parents=True)
    store.save_checkpoint(cfg, "last.pt", dict(model={}, epoch=1))
    ck = store.dir(cfg) / "last.pt"
    ck.write_bytes(ck.read_bytes()[:50])
    with pytest.warns(RuntimeWarning, match=r"last\.pt is unreadable \(size"):
        res = run(cfg, out)
    assert curve(res) == curve(run(cfg, tmp_path / "fresh"))


def test_checkpoint_with_a_flipped_byte_is_caught_by_its_hash(tmp_path):
    cfg, store = tiny(), RunStore(tmp_path)
    store.save_checkpoint(cfg, "stage1.pt", dict(model={"w": torch.ones(3)}))
    path = store.dir(cfg) / "stage1.pt"
    blob = bytearray(path.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    path.write_bytes(bytes(blob))
    from quadnn_paper.engine import CorruptFile

    with pytest.warns(RuntimeWarning), pytest.raises(CorruptFile, match=r"stage1\.pt: SHA-256 differs"):
        store.load_checkpoint(cfg, "stage1.pt")


def test_corrupt_transfer_source_is_redone_not_misadvised(tmp_path):
    out = tmp_path / "runs"
    source = tiny(epochs=4)
    cfg = tiny(model="cifar_qresnet20", relinear="sg", lr_g=1e-3, transfer_from=source, epochs=2)
    run(source, out)
    stage = RunStore(out).dir(source) / "stage1.pt"
    stage.write_bytes(stage.read_bytes()[:200])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = run(cfg, out)
    text = " ".join(str(w.message) for w in caught)
    assert str(stage) in text and "weights_only" not in text
    assert res["status"] == "finished" and RunStore(out).load_checkpoint(source, "stage1.pt") is not None
    # the source's finished result was moved aside with a note, never deleted: nothing is lost
    assert list(RunStore(out).dir(source).glob("result.json.corrupt-*"))


def test_truncated_cached_entry_is_recomputed(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"rmse": 0.5}

    assert cached(tmp_path, "x", {"a": 1}, compute) == {"rmse": 0.5}
    (entry,) = (tmp_path / "x").glob("*.json")
    entry.write_text(entry.read_text()[:5])
    with pytest.warns(RuntimeWarning, match=entry.name):
        assert cached(tmp_path, "x", {"a": 1}, compute) == {"rmse": 0.5}
    assert len(calls) == 2


@pytest.mark.slow  # a subprocess or two: seconds each
def test_two_processes_asking_for_one_configuration_train_it_once(tmp_path):
    cfg, out = tiny(epochs=4, train_limit=256), tmp_path / "runs"
    code = (
        "import json, sys; from quadnn_paper.engine import RunConfig, run; "
        f"r = run(RunConfig(**{asdict(cfg)!r}), {str(out)!r}); print(json.dumps(r['trained_by']))"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    trainers = [json.loads(p.communicate(timeout=300)[0].strip().splitlines()[-1]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert trainers[0] == trainers[1]  # the second process reused the first one's result
    assert trainers[0]["pid"] in {p.pid for p in procs}
    assert not list(RunStore(out).dir(cfg).glob(".*.tmp"))


def test_cache_directory_that_is_a_file_is_an_error(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(NotADirectoryError, match="not a directory"):
        RunStore(tmp_path / "f")
