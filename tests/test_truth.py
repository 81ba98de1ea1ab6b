"""Runs that tell the truth and destroy nothing: stand-ins never write into a user's
folder, a result is bound to its bytes and its own curve, one training has one id however it is
spelt, a complete checkpoint whose writer died is adopted, and the store survives a kill at every
one of its writes (the fault-injection tier at the end)."""

import errno
import hashlib
import importlib
import io
import json
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from runs import small_run

from quadnn_paper.common import files
from quadnn_paper.common.paths import GENERATED
from quadnn_paper.data import imagefolder, kitti, standin
from quadnn_paper.engine import RunConfig, run
from quadnn_paper.engine import loop as loop_module
from quadnn_paper.engine.loop import lr_factor, stage_ends
from quadnn_paper.engine.store import RunStore, WorldSizeMismatch
from quadnn_paper.execution import train as train_cli
from quadnn_paper.execution.status import SECTIONS

pytestmark = pytest.mark.usefixtures("one_thread")


def tree(root: Path) -> dict:
    """Every file under ``root`` with its bytes' hash: what "left intact" is checked against."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


def users_imagefolder(root: Path, manifest: bool) -> Path:
    for split in ("train", "val"):
        (root / split / "cat").mkdir(parents=True)
        (root / split / "cat" / "me.jpg").write_bytes(b"\xff\xd8 a user's own photo")
    if manifest:
        (root / "manifest.json").write_text('{"photos": "mine"}')
    return root


# -- 1. stand-ins write only where the project generates data -------------------------------------------
@pytest.mark.parametrize("manifest", [True, False])
def test_the_digits_standin_refuses_a_users_image_folder_and_leaves_it_intact(tmp_path, capsys, manifest):
    user = users_imagefolder(tmp_path / "photos", manifest)
    before = tree(user)
    small = '{"image_size": 16, "crop": 16, "resize": 16, "max_per_class": 2}'
    argv = ["--task", "imagefolder", "--dataset", "digits", "--data-dir", str(user), "--task-kwargs", small]
    argv += [
        "--model",
        "cifar_resnet20",
        "--width",
        "0.25",
        "--epochs",
        "1",
        "--batch-size",
        "8",
        "--relinear",
        "none",
        "--no-progress",
    ]
    assert train_cli.main([*argv, "--out", str(tmp_path / "runs"), "--threads", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert str(user) in err and "refusing" in err and "\n" not in err, err
    assert tree(user) == before  # not one file of theirs changed, none added


def test_standins_write_under_build_data_by_default_and_claim_only_new_or_empty_folders(tmp_path):
    for task, dataset in (("imagefolder", "digits"), ("depth", "synthetic")):
        assert GENERATED in Path(RunConfig(task=task, dataset=dataset).data_dir).parents
    assert RunConfig(dataset="cifar10").data_dir == str(GENERATED.parent.parent / "data")
    new = imagefolder.write_digits_folder(tmp_path / "new", size=8, max_per_class=1)
    assert (new / standin.MARKER).is_file() and (new / "train" / "0").is_dir()
    (tmp_path / "empty").mkdir()
    kitti.write_synthetic_kitti(tmp_path / "empty", 1, 1, 8, 24)
    assert (tmp_path / "empty" / standin.MARKER).is_file()
    kitti.write_synthetic_kitti(tmp_path / "empty", 2, 1, 8, 24)  # its own folder: rewritten at will
    (tmp_path / "drive").mkdir()
    (tmp_path / "drive" / "notes.txt").write_text("mine")
    with pytest.raises(standin.ForeignFolder, match=r"drive.*'notes\.txt'"):
        kitti.write_synthetic_kitti(tmp_path / "drive", 1, 1, 8, 24)
    assert tree(tmp_path / "drive") == {"notes.txt": hashlib.sha256(b"mine").hexdigest()}


# -- 2. a result is bound to its content -----------------------------------------------------------------
TIMES = ("epoch_time", "eval_time")


def numbers(result: dict) -> list:
    """A result's curve without its wall-clock times: what must be bit-identical after a redo."""
    return [{k: v for k, v in h.items() if k not in TIMES} for h in result["history"]]


def trained(tmp_path):
    cfg = small_run(train_limit=64, epochs=1)
    return cfg, run(cfg, tmp_path)


@pytest.mark.parametrize("how", ["edit", "edit_and_rehash", "edit_curve"])
def test_an_edited_result_is_moved_aside_and_redone_never_served(tmp_path, how):
    cfg, first = trained(tmp_path)
    path = RunStore(tmp_path).dir(cfg) / "result.json"
    res = json.loads(path.read_text())
    true_error = res["test_error"]
    if how == "edit_curve":
        metrics = path.with_name("metrics.json")
        curve = json.loads(metrics.read_text())
        curve[-1]["test_error"] = 4.2
        metrics.write_text(json.dumps(curve))
    else:
        res["test_error"] = 4.2
        path.write_text(json.dumps(res, indent=1))
        if how == "edit_and_rehash":  # the manifest updated too: the result's own curve still says no
            m = json.loads(path.with_name("manifest.json").read_text())
            m["result.json"] = dict(size=path.stat().st_size, sha256=files.sha256_file(path))
            path.with_name("manifest.json").write_text(json.dumps(m))
    with pytest.warns(RuntimeWarning, match="result.json is unreadable"):
        again = run(cfg, tmp_path)
    assert again["test_error"] == true_error == first["test_error"] and numbers(again) == numbers(first)
    assert list(path.parent.glob("result.json.corrupt-*"))
    assert RunStore(tmp_path).result(cfg)["test_error"] == true_error


def test_a_result_whose_numbers_include_nan_is_still_its_own(tmp_path):
    cfg = small_run()
    nan = float("nan")
    res = dict(status="finished", history=[{"epoch": 1, "test_loss": nan}], metrics={"test_loss": nan})
    res.update(test_loss=nan, epochs_run=1, config=cfg.to_dict(), run_id=cfg.run_id, key=cfg.key())
    RunStore(tmp_path).write_result(cfg, res)
    (RunStore(tmp_path).dir(cfg) / "metrics.json").write_text(json.dumps(res["history"]))
    assert RunStore(tmp_path).result(cfg)["epochs_run"] == 1  # NaN == NaN as stored text: not "edited"


def test_the_cli_refuses_a_result_of_another_world_size(tmp_path, monkeypatch, capsys):
    argv = ["--dataset", "digits", "--model", "cifar_resnet20", "--width", "0.25", "--epochs", "1", "--threads", "1"]
    argv += ["--train-limit", "64", "--relinear", "none", "--no-progress", "--out", str(tmp_path)]
    assert train_cli.main(argv) == 0
    one = json.loads(capsys.readouterr().out)
    monkeypatch.setattr(loop_module, "world", lambda: (0, 2))  # the same command as a 2-process DDP run
    assert train_cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "trained by 1 process(es), the request runs 2" in err and "\n" not in err
    cfg, _ = train_cli.config_from_args(argv)
    with pytest.raises(WorldSizeMismatch):
        run(cfg, tmp_path, same_world=True)
    assert run(cfg, tmp_path)["test_error"] == one["test_error"]  # a notebook asks for the configuration


# -- 3. one training, one id -------------------------------------------------------------------------------
def effective(c: RunConfig) -> tuple:
    """What the loop actually trains with, read through its own functions (the plain reference)."""
    sg, sw = c.relinear == "sg", c.relinear.startswith("sw-")
    return (
        c.relinear,
        c.epochs,
        (c.lr_g, c.lr_g if c.lr_b is None else c.lr_b) if sg else None,
        (c.alpha_g, c.alpha_g if c.alpha_b is None else c.alpha_b) if sw else None,
        tuple(lr_factor(c, e, 0, 1) for e in range(c.epochs)),
        tuple(stage_ends(c)),
    )


spellings = st.fixed_dictionaries(
    dict(
        relinear=st.sampled_from(["none", "sg", "sw-l1"]),
        epochs=st.sampled_from([4, 12]),
        lr_g=st.sampled_from([1e-4, 1e-3]),
        lr_b=st.sampled_from([None, 1e-4, 1e-3]),
        alpha_g=st.sampled_from([0.0, 0.1]),
        alpha_b=st.sampled_from([None, 0.0, 0.1]),
        schedule=st.sampled_from(["multistep", "constant"]),
        milestones=st.lists(st.sampled_from([0.25, 0.5, 0.51, 0.75, 1.0]), max_size=3),
        lr_decay=st.sampled_from([0.1, 0.2]),
    )
)


@settings(max_examples=300, deadline=None)
@given(spellings, spellings)
def test_two_configurations_share_an_id_exactly_when_they_train_the_same(a, b):
    ca, cb = small_run(**a), small_run(**b)
    assert (ca.run_id == cb.run_id) == (effective(ca) == effective(cb)), (a, b)


def test_the_spellings_once_given_two_ids_give_one_id():
    base = small_run(relinear="sg", epochs=12)
    same = [
        base.replace(lr_b=base.lr_g),
        base.replace(milestones=(0.75, 0.5)),
        base.replace(milestones=(0.5, 0.75, 0.75)),
        base.replace(milestones=(0.51, 0.75)),
    ]
    assert {c.run_id for c in same} == {base.run_id}
    plain = small_run(relinear="none", schedule="constant")
    assert plain.replace(lr_g=0.5, milestones=(0.3,)).run_id == plain.run_id
    shrink = small_run(relinear="sw-l1", alpha_g=0.1)
    assert shrink.replace(alpha_b=0.1).run_id == shrink.run_id


def test_width_given_twice_is_an_error_and_given_once_is_one_run(capsys):
    with pytest.raises(SystemExit):
        train_cli.config_from_args(["--width", "0.25", "--model-kwargs", '{"width": 0.5}'])
    err = capsys.readouterr().err
    assert "width=0.25" in err and "model_kwargs['width']=0.5" in err
    (kw, _), (flag, _) = (
        train_cli.config_from_args(["--model-kwargs", '{"width": 0.5}']),
        train_cli.config_from_args(["--width", "0.5"]),
    )
    assert kw.width == 0.5 and kw.model_kwargs == {} and kw.run_id == flag.run_id


# -- 4. a complete temporary checkpoint matching the manifest is adopted -------------------------------
def test_a_temporary_file_that_matches_the_manifest_is_adopted_not_deleted(tmp_path):
    cfg = small_run()
    store = RunStore(tmp_path)
    store.save_checkpoint(cfg, "last.pt", dict(epoch=1))
    old = (store.dir(cfg) / "last.pt").read_bytes()
    # The writer of epoch 2 died between the manifest's update and the rename (as strace's
    # inject=rename:signal=KILL did): the manifest records a file that only exists as a temporary.
    buf = io.BytesIO()
    torch.save(dict(epoch=2, run_id=cfg.run_id), buf)
    blob = buf.getvalue()
    files.write_temp(store.dir(cfg) / "last.pt", blob)
    manifest = store.dir(cfg) / "manifest.json"
    record = json.loads(manifest.read_text())
    record["last.pt"] = dict(size=len(blob), sha256=hashlib.sha256(blob).hexdigest())
    manifest.write_text(json.dumps(record))
    assert (store.dir(cfg) / "last.pt").read_bytes() == old and list(store.dir(cfg).glob(".last.pt.*.tmp"))
    with store.lock(cfg.run_id):
        pass
    assert store.load_checkpoint(cfg, "last.pt")["epoch"] == 2
    assert not list(store.dir(cfg).glob(".last.pt.*.tmp"))


# -- 7. TINY is a boolean, read strictly --------------------------------------------------------------------
REPO = Path(__file__).resolve().parents[1]


def make_status(**var) -> subprocess.CompletedProcess:
    args = ["make", "-n", "--no-print-directory", "status", *(f"{k}={v}" for k, v in var.items())]
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    "value, on",
    [("", False), ("0", False), ("no", False), ("false", False), ("1", True), ("yes", True), ("true", True)],
)
def test_make_reads_tiny_as_a_boolean(value, on):
    done = make_status(PROFILE="full", TINY=value)
    assert done.returncode == 0, done.stderr
    assert ("--tiny" in done.stdout) == on
    if not on:  # off is off for every profile, not "TINY=1 caps the full profile"
        assert make_status(PROFILE="cpu", TINY=value).returncode == 0


@pytest.mark.parametrize("value", ["maybe", "2", "on off"])
def test_make_refuses_a_tiny_that_is_not_a_boolean_naming_it(value):
    done = make_status(PROFILE="full", TINY=value)
    assert done.returncode != 0 and f"TINY={value}" in done.stderr.replace("'", "") and "1/true/yes" in done.stderr


@pytest.mark.parametrize("section", SECTIONS)
def test_a_notebooks_tiny_parameter_must_be_a_boolean_not_a_string(section):
    module = importlib.import_module(f"quadnn_paper.sections.{section}")
    for value in ("no", "yes", "0", 2):  # papermill's -p tiny no arrives as the string "no"
        with pytest.raises(ValueError, match=f"tiny must be True or False, got {value!r}"):
            module.protocol("full", value)
    assert module.protocol("full", 1) == module.protocol("full", True)


# -- the fault-injection tier: a kill at every write, fsync and rename of the store ----------------------
# common.files counts its operations (QUADNN_FAULT_LOG lists them) and sends a signal just before the
# N-th one (QUADNN_FAULT="N:KILL"), as strace's inject=...:signal=KILL:when=N did by hand. Each point:
# a forked training killed there, then resumed; the result must equal the uninterrupted one, nothing
# may be moved aside as corrupt, and no epoch whose checkpoint was recorded may be trained again.
FAULT_RUN = dict(train_limit=64, epochs=2, batch_size=32)


def _train_child(cfg, out, env):
    os.environ.update(env)
    files._FAULT_COUNT[0] = 0
    try:
        run(cfg, out)
    except BaseException as e:  # noqa: BLE001  (reported to the parent through the file SAY)
        if os.environ.get("SAY"):
            Path(os.environ["SAY"]).write_text(f"{type(e).__name__}: {e}")
        os._exit(3)
    os._exit(0)  # no pytest teardown in the child


def train_forked(cfg, out, **env) -> int:
    child = multiprocessing.get_context("fork").Process(target=_train_child, args=(cfg, str(out), env))
    child.start()
    child.join(300)
    assert child.exitcode is not None, "the training did not end"
    return child.exitcode


def operations(log: Path) -> list[tuple[str, str]]:
    return [tuple(line.split(" ", 1)) for line in log.read_text().splitlines()] if log.exists() else []


def committed_epochs(ops: list[tuple[str, str]], before: int, epochs: int) -> int:
    """Epochs whose last.pt the manifest recorded among the first ``before`` operations (a record is
    committed by the manifest's rename; the rename of the file itself comes next); all of them once
    it recorded the result (the last epoch writes no last.pt: its result follows at once)."""
    recorded = [
        ops[i + 1][1] for i, (op, path) in enumerate(ops[:before]) if op == "rename" and path.endswith("manifest.json")
    ]
    if any(name.endswith("/result.json") for name in recorded):
        return epochs
    return sum(name.endswith("/last.pt") for name in recorded)


def trained_epochs(ops: list[tuple[str, str]]) -> int:
    """Epochs a training trained: each ends by writing metrics.json, and so does its result."""
    return max(0, sum(op == "rename" and path.endswith("/metrics.json") for op, path in ops) - 1)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("clean")
    cfg = small_run(**FAULT_RUN)
    said = tmp / "said"
    code = train_forked(cfg, tmp / "runs", QUADNN_FAULT_LOG=str(tmp / "ops"), SAY=str(said))
    assert code == 0, said.read_text() if said.exists() else f"exit {code}"
    return cfg, RunStore(tmp / "runs").result(cfg), operations(tmp / "ops")


def kill_and_resume(tmp_path, uninterrupted, point: int, signal_name: str) -> None:
    cfg, clean, ops = uninterrupted
    out = tmp_path / f"runs{point}{signal_name}"
    code = train_forked(cfg, out, QUADNN_FAULT=f"{point}:{signal_name}")
    assert code == -getattr(signal, f"SIG{signal_name}"), f"point {point} ({ops[point - 1]}): exit {code}"
    relog = tmp_path / f"resumed{point}{signal_name}"
    assert train_forked(cfg, out, QUADNN_FAULT_LOG=str(relog)) == 0
    res = RunStore(out).result(cfg)
    where = f"killed at point {point} of {len(ops)}: {ops[point - 1]}"
    assert res is not None and numbers(res) == numbers(clean), where
    assert {k: res[k] for k in clean["metrics"]} == clean["metrics"], where
    assert not list(out.rglob("*.corrupt-*")), where
    assert trained_epochs(operations(relog)) == cfg.epochs - committed_epochs(ops, point - 1, cfg.epochs), where


def sampled_points(n_ops: int, k: int) -> list[int]:
    """``k`` points: the rename of the first last.pt (the adoption case) and a fixed random draw."""
    return sorted({1, n_ops} | set(random.Random(28).sample(range(1, n_ops + 1), k - 2)))


def test_the_fault_tier_sees_every_kind_of_store_operation(uninterrupted):
    _, _, ops = uninterrupted
    kinds = {(op, Path(path).name.split(".")[0].rstrip("0123456789")) for op, path in ops}
    for op in ("write", "fsync", "rename"):
        assert {(op, name) for name in ("config", "last", "manifest", "metrics", "result", "stage")} <= kinds


@pytest.mark.parametrize("signal_name, k", [("KILL", 6), ("TERM", 3)])
def test_a_kill_at_sampled_store_operations_resumes_to_the_same_result(tmp_path, uninterrupted, signal_name, k):
    _, _, ops = uninterrupted
    last_pt = next(i + 1 for i, (op, path) in enumerate(ops) if op == "rename" and path.endswith("/last.pt"))
    for point in sorted(set(sampled_points(len(ops), k)) | {last_pt}):
        kill_and_resume(tmp_path, uninterrupted, point, signal_name)


@pytest.mark.slow
@pytest.mark.faults
@pytest.mark.parametrize("signal_name", ["KILL", "TERM"])
def test_a_kill_at_every_store_operation_resumes_to_the_same_result(tmp_path, uninterrupted, signal_name):
    _, _, ops = uninterrupted
    for point in range(1, len(ops) + 1):
        kill_and_resume(tmp_path, uninterrupted, point, signal_name)


# -- 5. waits and storage/data errors are one line naming the path and the cause ---------------------------
def _hold(lock, seconds, ready):
    with files.file_lock(lock):
        ready.set()
        time.sleep(seconds)
    os._exit(0)


def test_a_trainer_waiting_on_a_lock_says_who_holds_it_and_since_when(tmp_path, capfd):
    store = RunStore(tmp_path)
    ready = multiprocessing.get_context("fork").Event()
    holder = multiprocessing.get_context("fork").Process(target=_hold, args=(tmp_path / "k.lock", 1.0, ready))
    holder.start()
    assert ready.wait(30)
    with store.lock("k", poll=0.05):
        pass
    holder.join(30)
    err = capfd.readouterr().err.strip()
    assert err.count("\n") == 0 and str(tmp_path / "k.lock") in err, err
    assert f"pid {holder.pid} on " in err and " since 20" in err, err


def test_a_read_only_cache_with_a_new_configuration_is_one_line(tmp_path, capsys, monkeypatch):
    real = os.open

    def read_only(path, flags, *mode):
        if str(path).endswith(".lock") and flags & os.O_CREAT:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real(path, flags, *mode)

    monkeypatch.setattr(files.os, "open", read_only)
    argv = ["--dataset", "digits", "--model", "cifar_resnet20", "--width", "0.25", "--epochs", "1"]
    assert train_cli.main([*argv, "--relinear", "none", "--no-progress", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and ".lock" in err and str(tmp_path) in err and "read-only file system" in err


@pytest.mark.parametrize("side", [40, 100])  # over PIL's limit (it only warns), and over twice it
def test_an_image_over_the_pixel_limit_is_refused_naming_the_file(tmp_path, monkeypatch, side):
    from PIL import Image

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    path = tmp_path / "huge.png"
    Image.new("L", (side, side)).save(path)
    with pytest.raises(ValueError) as e:
        imagefolder.load_rgb(str(path))
    msg = str(e.value)
    assert str(path) in msg and "1000" in msg and "\n" not in msg


def test_a_pickle_of_repeated_references_is_refused_within_its_byte_budget(tmp_path):
    import pickle
    import tracemalloc

    import numpy as np

    from quadnn_paper.data import cifar

    row = np.zeros(3072, dtype=np.uint8)
    path = tmp_path / "data_batch_1"
    path.write_bytes(pickle.dumps({b"data": [row] * 20000, b"labels": [0] * 20000}))
    assert path.stat().st_size < 100_000  # 20,000 images of 3 KB in a file of ~60 KB
    tracemalloc.start()
    try:
        with pytest.raises(cifar.BadData, match=rf"{path}: its objects hold 61460000 values"):
            cifar.load_cifar_batch(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20e6  # refused before anything of 61 MB (or 491 MB as int64) is built


def test_an_empty_class_folder_is_named_with_its_split(tmp_path):
    from PIL import Image

    for split, classes in (("train", ("a", "b")), ("val", ("a",))):
        for c in classes:
            (tmp_path / split / c).mkdir(parents=True)
            Image.new("L", (8, 8)).save(tmp_path / split / c / "x.png")
    (tmp_path / "val" / "b").mkdir()
    (tmp_path / "val" / "b" / "notes.txt").write_text("no image")
    with pytest.raises(FileNotFoundError, match=rf"{tmp_path / 'val'}: class folder\(s\) b of the val split"):
        imagefolder.datasets(tmp_path, crop=8, resize=8)


# -- 6. a cache deleted under a running trainer --------------------------------------------------------------
def test_a_trainer_whose_cache_was_deleted_stops_and_the_new_trainer_owns_the_run(tmp_path, uninterrupted):
    cfg, clean, ops = uninterrupted
    # the second epoch's end (the last epoch writes metrics.json but no last.pt)
    second_epoch = [i + 1 for i, (op, path) in enumerate(ops) if op == "write" and path.endswith("/metrics.json")][1]
    out, said = tmp_path / "runs", tmp_path / "said"
    first = multiprocessing.get_context("fork").Process(
        target=_train_child, args=(cfg, str(out), dict(QUADNN_FAULT=f"{second_epoch}:STOP", SAY=str(said)))
    )
    first.start()
    deadline = time.monotonic() + 120
    while Path(f"/proc/{first.pid}/stat").read_text().split(") ")[1][0] != "T":  # stopped at its write
        assert time.monotonic() < deadline and first.exitcode is None
        time.sleep(0.05)
    shutil.rmtree(out)  # the cache removed (rm -rf) while the first trainer holds its lock
    second = run(cfg, out)  # not made to wait by a lock whose file is gone: it trains the run
    os.kill(first.pid, signal.SIGCONT)
    first.join(60)
    assert first.exitcode == 3 and "deleted while this process held it" in said.read_text()
    assert numbers(second) == numbers(clean) and numbers(RunStore(out).result(cfg)) == numbers(clean)


# -- 9. the run counts the manuals state are the ones `make status` counts ---------------------------------
def test_the_readmes_full_profile_run_counts_are_those_make_status_counts():
    """The counts the manuals state: docs/full-protocol.md's sentence and docs/gpu.md's TINY=1 line."""
    import re

    from quadnn_paper.execution.status import section_runs

    said = re.search(
        r"full profile is the paper's evidence: (\d+) runs \(CIFAR tuning (\d+), VGG stability (\d+), CIFAR\s+"
        r"comparison (\d+) .*?ImageNet (\d+) .*?KITTI (\d+)",
        (REPO / "docs" / "full-protocol.md").read_text(),
        re.S,
    )
    training = [s for s in SECTIONS if section_runs(s, "full")]  # the sections that train through the engine
    assert training == ["cifar_tuning", "vgg_stability", "cifar_comparison", "imagenet", "kitti_lapdepth"]
    counted = [len(section_runs(s, "full")) for s in training]
    assert said and [int(n) for n in said.groups()] == [sum(counted), *counted]
    tiny_line = re.search(
        r"make status PROFILE=full TINY=1 +# (\d+) runs: (\d+) \+ (\d+) \+ (\d+) CIFAR",
        (REPO / "docs" / "gpu.md").read_text(),
    )
    assert tiny_line and [int(n) for n in tiny_line.groups()] == [sum(counted), *counted[:3]]
    assert [len(section_runs(s, "full", True)) for s in training] == counted
