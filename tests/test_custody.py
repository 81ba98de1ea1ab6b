"""Nothing lost, nothing forged, nothing unbounded: each principle enforced by one test
over every place it applies.

1. Ownership by record: every stand-in writer removes or rewrites only the files its own record lists.
2. A result only with its manifest; damage quarantined, never deleted.
3. Bounded before built: the CIFAR loader refuses memory bombs before it allocates, and reads honest
   pickles that share small objects (a full-size CIFAR-10 under a memory bound).
4. Fail at the start, in one line.
"""

import hashlib
import json
from pathlib import Path

import pytest

from quadnn_paper.data import imagefolder, kitti, standin, tiny

pytestmark = pytest.mark.usefixtures("one_thread")


def tree(root: Path) -> dict:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


# -- 1. ownership by record -------------------------------------------------------------------------------
def _digits(root, version):
    return imagefolder.write_digits_folder(root, size=8 + version, max_per_class=1)


def _kitti(root, version):
    return kitti.write_synthetic_kitti(root, 1 + version, 1, 8, 24)


def _tiny(root, version, monkeypatch=None):
    monkeypatch.setattr(tiny, "_LAYOUT", f"{tiny._LAYOUT} v{version}")
    monkeypatch.setattr(tiny, "CAPS", dict(tiny.CAPS, imagenet_classes=2, kitti_train=1 + version, kitti_test=1))
    return tiny.write_tiny_data(root)


WRITERS = dict(digits=_digits, kitti=_kitti, tiny=_tiny)


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_every_standin_removes_or_rewrites_only_files_its_record_lists(tmp_path, writer, monkeypatch):
    write = WRITERS[writer]
    if writer == "tiny":
        write = lambda root, v: _tiny(root, v, monkeypatch)  # noqa: E731
    claimed = tmp_path / "claimed"
    write(claimed, 0)
    # A user's files later put below the once-claimed folder: beside the stand-in's, inside its
    # subfolders, and as a folder of their own.
    theirs = [p for p in claimed.rglob("*") if p.is_dir()][:3]
    users = {claimed / "photos" / "train" / "cat" / "me.jpg"} | {d / "mine.jpg" for d in theirs}
    for p in users:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"\xff\xd8 a user's own photo " + str(p).encode())
    photos = tree(claimed / "photos")
    # 1. another stand-in pointed at the user's folder below the claimed one: refused, nothing changed
    with pytest.raises(standin.ForeignFolder, match="refusing") as e:
        write(claimed / "photos", 0)
    assert "\n" not in str(e.value) and str(claimed / "photos") in str(e.value)
    assert tree(claimed / "photos") == photos
    # 2. the stand-in rewritten with other settings: its own files change, the user's all survive
    before = tree(claimed)
    write(claimed, 1)
    after = tree(claimed)
    assert after != before
    assert all(p.read_bytes().startswith(b"\xff\xd8 a user's own photo") for p in users)
    # 3. a file it wrote, edited since, is no longer its own: refused in one line, left as it is
    recorded = json.loads((claimed / standin.RECORD).read_text())["files"]
    edited = claimed / sorted(recorded)[0]
    edited.write_bytes(b"edited by hand")
    with pytest.raises(standin.NotOwned, match=rf"{edited}.*did not write it") as e:
        write(claimed, 2)
    assert "\n" not in str(e.value) and edited.read_bytes() == b"edited by hand"
    assert all(p.exists() for p in users)


# -- 3. bounded before built ------------------------------------------------------------------------------
def _batch(labels, n=None):
    import numpy as np

    n = len(labels) if n is None else n
    return {b"batch_label": b"x", b"labels": labels, b"data": np.zeros((n, 3072), np.uint8)}


def _pickled(obj) -> bytes:
    import pickle

    return pickle.dumps(obj, protocol=4)


BOMBS = {
    # 9 bytes: an empty dict put at memo index 50,000,000 (the C unpickler sized its memo to 400 MB)
    "memo index": (b"\x80\x02}r" + (50_000_000).to_bytes(4, "little") + b".", r"memo index 50000000 after 3 opcodes"),
    # one 200 kB label and 1,500 empty ones: np.asarray pads every label to 200 kB (300 MB)
    "ragged labels": (_pickled(_batch([b"x" * 200_000] + [b""] * 1500)), r"its objects hold \d+ values"),
    # one row of 3 kB referenced 20,000 times: 61 MB of images from 60 kB
    "shared rows": (
        _pickled({b"data": [bytes(3072)] * 20000, b"labels": [0] * 20000}),
        r"its objects hold 61460000 values",
    ),
}


def _cifar_bomb(name):
    def build(tmp_path, monkeypatch):
        from quadnn_paper.data import cifar

        blob, message = BOMBS[name]
        path = tmp_path / "data_batch_1"
        path.write_bytes(blob)
        return lambda: cifar._checked(path, cifar.load_cifar_batch(path), b"labels", 10), rf"{path}: {message}", path

    return build


def _image_bomb(reader):
    def build(tmp_path, monkeypatch):
        import numpy as np
        from PIL import Image

        monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)  # 1,500 pixels: over it, under twice it
        path = tmp_path / "huge.png"
        mode = dict(kitti_depth="I;16").get(reader, "L")
        Image.fromarray(np.zeros((30, 50), np.uint16 if mode == "I;16" else np.uint8)).save(path)
        read = dict(imagefolder=imagefolder.load_rgb, kitti_depth=kitti.read_depth_png, kitti_rgb=kitti._decoded)
        return lambda: read[reader](str(path)), rf"{path}: refused, more pixels than the limit of 1000", path

    return build


LOADERS = {f"cifar {name}": _cifar_bomb(name) for name in BOMBS} | {
    f"{reader} image over the pixel limit": _image_bomb(reader)
    for reader in ("imagefolder", "kitti_depth", "kitti_rgb")
}


@pytest.mark.parametrize("bomb", sorted(LOADERS))
def test_every_loader_refuses_a_bomb_before_anything_is_built(tmp_path, monkeypatch, bomb):
    import tracemalloc

    read, message, path = LOADERS[bomb](tmp_path, monkeypatch)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=message) as e:
            read()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "\n" not in str(e.value)
    size = path.stat().st_size
    assert peak < 4 * size + 2e6, f"{peak / 1e6:.0f} MB allocated from a file of {size / 1e6:.2f} MB"


FULL_SIZE = """
import resource, sys
from pathlib import Path
from quadnn_paper.data import cifar, tiny
vm = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + BOUND, vm + BOUND))  # room for 1 GiB more, no more
root = Path(sys.argv[1])
tiny.write_cifar(root, "cifar10", 50000, 10000)  # one file-name object shared by every image
d = cifar.load("cifar10", root)
print(tuple(d.x_train.shape), tuple(d.x_test.shape), len(d.y_train), len(d.y_test))
"""


@pytest.mark.slow  # (8 s: 60,000 images written and read)
def test_a_full_size_cifar10_whose_pickles_share_small_objects_loads_under_a_memory_bound(tmp_path):
    import os
    import subprocess
    import sys

    env = dict(os.environ, OMP_NUM_THREADS="1")
    code = FULL_SIZE.replace("BOUND", str(1 << 30))
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["(50000,", "3,", "32,", "32)", "(10000,", "3,", "32,", "32)", "50000", "10000"]


# -- 2. a result only with its manifest; damage quarantined, never deleted ------------------------------
def _finished(tmp_path):
    from runs import small_run

    from quadnn_paper.engine.store import RunStore

    cfg, store = small_run(train_limit=64, epochs=1), RunStore(tmp_path)
    store.save_checkpoint(cfg, "stage1.pt", dict(model={}, epoch=1))
    history = [{"epoch": 1, "test_error": 12.5}]
    result = dict(status="finished", history=history, config=cfg.to_dict(), run_id=cfg.run_id, key=cfg.key())
    result |= dict(test_error=12.5, metrics={"test_error": 12.5}, epochs_run=1, stage_checkpoints={"1": "stage1.pt"})
    (store.dir(cfg) / "metrics.json").write_text(json.dumps(history))
    store.write_result(cfg, result)
    return cfg, store


MANIFEST_DAMAGE = {
    "truncated": lambda raw: raw[: len(raw) // 2],
    "a JSON list": lambda raw: b"[1]",
    "an entry of another shape": lambda raw: b'{"result.json": 5}',
    "not text": lambda raw: b"\xff\xfe\x00" * 7,
}


@pytest.mark.parametrize("damage", sorted(MANIFEST_DAMAGE))
def test_a_damaged_manifest_is_quarantined_and_its_run_reverified_from_its_files(tmp_path, damage):
    cfg, store = _finished(tmp_path)
    d = store.dir(cfg)
    (d / "manifest.json").write_bytes(MANIFEST_DAMAGE[damage]((d / "manifest.json").read_bytes()))
    with pytest.warns(RuntimeWarning, match=r"manifest\.json is unreadable \(not a manifest: .*rebuilding") as w:
        assert store.result(cfg)["test_error"] == 12.5  # served after re-verification, not retrained
    assert all("\n" not in str(x.message) for x in w)
    assert store.load_checkpoint(cfg, "stage1.pt")["epoch"] == 1  # the intact weights stay in use
    assert len(list(d.glob("manifest.json.corrupt-*"))) == 1  # the damaged one kept aside, with a note
    assert "manifest.json -> manifest.json.corrupt-" in (d / "quarantine.log").read_text()
    assert "reverified" in json.loads((d / "manifest.json").read_text())


def test_a_result_without_its_manifest_is_never_served_and_is_moved_aside_not_deleted(tmp_path):
    cfg, store = _finished(tmp_path)
    d = store.dir(cfg)
    for name in ("result.json", "metrics.json"):  # a forged 1.5 %, told consistently everywhere
        obj = json.loads((d / name).read_text())
        for h in obj["history"] if name == "result.json" else obj:
            h["test_error"] = 1.5
        if name == "result.json":
            obj.update(test_error=1.5, metrics={"test_error": 1.5})
        (d / name).write_text(json.dumps(obj))
    (d / "manifest.json").unlink()
    with pytest.warns(RuntimeWarning, match=r"result\.json is unreadable \(no record of it in manifest\.json"):
        assert store.result(cfg) is None
    assert len(list(d.glob("result.json.corrupt-*"))) == 1 and not (d / "result.json").exists()
    assert "no record of it in manifest.json" in (d / "quarantine.log").read_text()
    assert store.state(cfg) != "done"


def test_a_transfer_source_with_a_damaged_manifest_is_reverified_not_retrained(tmp_path):
    from runs import small_run

    from quadnn_paper.engine import run
    from quadnn_paper.engine.store import RunStore

    source = small_run(train_limit=32, epochs=2, relinear="none", width=0.125)
    quadratic = dict(
        model="cifar_qresnet20", train_limit=32, epochs=1, width=0.125, transfer_from=source, transfer_stage=1
    )
    run(small_run(**quadratic), tmp_path)  # trains the source first
    d = RunStore(tmp_path).dir(source)
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    (d / "manifest.json").write_text("[1]")
    with pytest.warns(RuntimeWarning, match="rebuilding it from the run's files"):
        assert run(small_run(**quadratic, seed=1), tmp_path)["status"] == "finished"  # another transfer
    after = {p.name: p.read_bytes() for p in d.iterdir()}
    for name in ("result.json", "stage1.pt", "metrics.json"):
        assert after[name] == before[name], name  # kept and used: the source was not trained again
    assert not [n for n in after if ".corrupt-" in n and not n.startswith("manifest.json")]


# -- 4. fail at the start, in one line -------------------------------------------------------------------
def _cifar(root, n=16, **entries):
    import pickle

    import numpy as np

    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        d = {b"labels": rng.integers(0, 10, n).tolist(), b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8)}
        (folder / name).write_bytes(pickle.dumps({**d, **{k.encode(): v for k, v in entries.items()}}))


def _image_folder(root, image=None):
    from PIL import Image

    for split in ("train", "val"):
        (root / split / "a").mkdir(parents=True)
        (image or Image.new("RGB", (8, 8))).save(root / split / "a" / "0.png")
    return root


def empty_cifar_batches(root):
    import numpy as np

    from quadnn_paper.data import cifar

    _cifar(root, n=0, data=np.zeros((0, 3072), np.uint8), labels=[])
    return lambda: cifar.load("cifar10", root), r"cifar-10-batches-py: its training batches .* hold no images"


def cifar_labels_of_shape_n_1(root):
    from quadnn_paper.data import cifar

    _cifar(root, labels=[[0]] * 16)
    return lambda: cifar.load("cifar10", root), r"data_batch_1: labels must be one integer per image.*\(16, 1\)"


def a_symlink_loop(root, loops=1):
    import os

    from quadnn_paper.data import imagefolder

    _image_folder(root)
    for i in range(loops):
        os.symlink("..", root / "train" / "a" / f"up{i}")
    return lambda: imagefolder.datasets(root, 8, 8), r"train/a/up\d: a symbolic link back to a folder above it"


def two_symlink_loops(root):
    return a_symlink_loop(root, loops=2)


def a_16_bit_png_in_an_imagefolder(root):
    import numpy as np
    from PIL import Image

    from quadnn_paper.data import imagefolder

    _image_folder(root, Image.fromarray(np.full((8, 8), 40000, np.uint16)))
    return lambda: imagefolder.datasets(root, 8, 8)[0][0], r"0\.png: PIL mode I;16 .*8 bits a channel"


def _kitti_tree(root):
    return kitti.write_synthetic_kitti(root, 1, 1, 8, 24)


def a_16_bit_image_in_kitti(root):
    import numpy as np
    from PIL import Image

    _kitti_tree(root)
    rgb = root / "synthetic/drive_train/image_02/data/0000000000.png"
    Image.fromarray(np.full((8, 24), 40000, np.uint16)).save(rgb)
    split = kitti.KittiSplit(root, "splits/eigen_train_files.txt")
    return lambda: split[0], r"0000000000\.png: PIL mode I;16 .*8 bits a channel"


def a_missing_kitti_test_depth_map(root):
    from runs import small_run

    from quadnn_paper.engine import run

    _kitti_tree(root)
    (root / "synthetic/drive_test/proj_depth/groundtruth/image_02/0000000000.png").unlink()
    cfg = small_run(task="depth", dataset="kitti", data_dir=str(root), model="lapdepth", epochs=1, relinear="none")
    return lambda: run(cfg, root.parent / "runs"), r"drive_test/proj_depth/.*0000000000\.png, listed in .*eigen_test"


AT_THE_START = [
    empty_cifar_batches,
    cifar_labels_of_shape_n_1,
    a_symlink_loop,
    two_symlink_loops,
    a_16_bit_png_in_an_imagefolder,
    a_16_bit_image_in_kitti,
    a_missing_kitti_test_depth_map,
]


@pytest.mark.parametrize("case", AT_THE_START, ids=[f.__name__ for f in AT_THE_START])
def test_bad_data_is_refused_at_the_start_in_one_line_naming_it(tmp_path, case):
    read, message = case(tmp_path / "data")
    with pytest.raises((ValueError, FileNotFoundError), match=message) as e:
        read()
    assert "\n" not in str(e.value)
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("*.pt"))  # before any epoch


class Killed(BaseException):
    """SIGKILL, as far as the files are concerned: nothing after it runs in the killed code."""


def _kill_at_line(n: int, files: tuple[str, ...]):
    """A tracer that stops the program at the ``n``-th line it runs in ``files`` (module paths)."""
    import sys

    count = [0]

    def local(frame, event, arg):
        if event == "line":
            count[0] += 1
            if count[0] == n:
                sys.settrace(None)
                raise Killed
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code.co_filename.endswith(files) else None

    return tracer, count


def test_a_report_commit_killed_at_any_line_recovers_to_exactly_one_profile(tmp_path, monkeypatch):
    import os
    import sys

    from quadnn_paper import report as R

    def staged(paper, profile, tables):
        rep = R.Report(paper, "demo", profile, "digits")
        rep.variable("A", len(profile))
        for t in tables:
            rep.table(t, ["x"], [[profile]])
        return rep

    monkeypatch.setattr(os, "fsync", lambda fd: None)  # (durability is not what is tested here)
    n = 0
    while True:
        n += 1
        paper = tmp_path / str(n)
        staged(paper, "cpu", ["full_cost", "demo_t"]).commit()
        rep = staged(paper, "smoke", ["demo_t"])  # smoke writes no full_cost table
        tracer, count = _kill_at_line(n, ("quadnn_paper/report.py",))  # (each file write: one line of it)
        sys.settrace(tracer)
        try:
            rep.commit()
        except Killed:
            pass
        finally:
            sys.settrace(None)
        R.recover(paper)
        stamp = R.stamps(paper)["demo"]
        assert R.problems(paper, stamp["profile"]) == [], (n, stamp["profile"])
        assert (paper / "tables" / "full_cost.tex").exists() == (stamp["profile"] == "cpu"), n
        if count[0] < n:  # the commit ran to its end before the n-th line: every point was tried
            break
    assert n > 20 and stamp["profile"] == "smoke", n


# -- 4 (tools). every tool and CLI fails on a missing or bad input, in one line --------------------------
def _paper_check(*argv):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import paper_check

    return paper_check.main(list(argv))


def _paper(tmp_path, stray=False):
    (tmp_path / "paper" / ".stamps").mkdir(parents=True)
    (tmp_path / "nbs").mkdir()
    (tmp_path / "nbs" / "sec.ipynb").write_text("{}")
    if stray:
        (tmp_path / "paper" / ".stamps" / "x.json").write_text('{"section": "x"}')
    return ["--paper", str(tmp_path / "paper"), "--notebooks", str(tmp_path / "nbs")]


def _bench(*argv):
    from quadnn_paper import bench

    return bench.main(list(argv))


TOOLS = {
    "layout without main.log": (lambda t: _paper_check("layout", *_paper(t)), r"no LaTeX log at .*main\.log"),
    "check of a wrong --paper": (
        lambda t: _paper_check("check", "--profile", "smoke", "--paper", str(t / "nowhere")),
        r"no paper folder at .*nowhere",
    ),
    "check without notebooks": (
        lambda t: _paper_check("check", "--profile", "smoke", "--paper", str(t), "--notebooks", str(t)),
        r"no notebooks \(\*\.ipynb\) in",
    ),
    "check of a stray stamp": (
        lambda t: _paper_check("check", "--profile", "smoke", *_paper(t, stray=True)),
        r"\.stamps/x\.json is not a stamp \(no profile, files\)",
    ),
    "bench --batch-size 0": (lambda t: _bench("--batch-size", "0"), r"--batch-size: must be an integer >= 1, got '0'"),
    "bench --batch-size -3": (lambda t: _bench("--batch-size", "-3"), r"--batch-size: must be an integer >= 1"),
    "bench --input 3x4000x4000": (lambda t: _bench("--input", "3x4000x4000"), r"--input: '3x4000x4000' is larger"),
}


@pytest.mark.parametrize("case", sorted(TOOLS))
def test_every_tool_refuses_a_missing_or_bad_input_in_one_line(tmp_path, capsys, case):
    call, message = TOOLS[case]
    try:
        code = call(tmp_path)
    except SystemExit as e:  # (argparse)
        code = e.code
    err = capsys.readouterr().err
    assert code in (1, 2), err
    import re

    lines = [ln for ln in err.splitlines() if re.search(message, ln)]
    assert lines and "Traceback" not in err, err


MAKE_VARIABLES = [("PROFILE", "smoke cpu"), ("RUNNER", "local slurm"), ("TINY", "1 1"), ("PROFILE", "")]


def _fake_checkout(tmp_path):
    import textwrap

    from test_trust import fake_checkout, make_env

    root = fake_checkout(tmp_path / "co")
    log = root / "python.log"
    (root / ".venv" / "bin" / "python").write_text(f"#!/bin/sh\necho \"$@\" >> '{log}'\n")
    (root / "build" / "cpu").mkdir(parents=True)
    (root / "build" / "cpu" / "stale.ipynb").write_text("{}")  # what a prune would delete
    return root, make_env(root), log, textwrap


@pytest.mark.parametrize("variable, value", MAKE_VARIABLES)
def test_make_takes_one_word_for_profile_runner_and_tiny(tmp_path, variable, value):
    import shutil
    import subprocess

    if shutil.which("make") is None:
        pytest.skip("needs make")
    root, env, log, _ = _fake_checkout(tmp_path)
    done = subprocess.run(["make", "paper", f"{variable}={value}"], cwd=root, env=env, capture_output=True, text=True)
    assert done.returncode == 2 and f"{variable}='{value}' is not" in done.stderr, done.stderr
    assert not log.exists()  # refused before anything ran


def test_make_n_paper_changes_nothing(tmp_path):
    import shutil
    import subprocess

    if shutil.which("make") is None:
        pytest.skip("needs make")
    root, env, log, _ = _fake_checkout(tmp_path)

    def state():
        return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*") if p.name != "python.log"}

    before = state()
    for profile in ("cpu", "smoke"):
        done = subprocess.run(
            ["make", "-n", "paper", f"PROFILE={profile}"], cwd=root, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
    assert state() == before
    assert "prune" not in (log.read_text() if log.exists() else "")  # not even asked to prune


# -- 5. a team's cache works as the docs set it up --------------------------------------------------------
TEAM_MEMBER = """
import sys
from pathlib import Path
from quadnn_paper.common import files
shared, who, mine = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
jobs = files.private_dir(files.user_dir(shared / ".jobs"))  # what every runner does first
with files.file_lock(jobs / "k.submit.lock", timeout=5):
    files.atomic_write_text(jobs / "k.json", who)
run = shared / "runs" / "abc"
for name in sorted(p.name for p in run.glob("*.json")) if run.is_dir() else []:
    (run / name).read_text()  # a teammate's result: readable
with files.file_lock(shared / "runs" / "abc.lock", timeout=5):
    files.atomic_write_text(run / mine, who)
print(who, "ok")
"""


@pytest.mark.skipif(not hasattr(__import__("os"), "getuid") or __import__("os").getuid() != 0, reason="needs root")
def test_two_users_share_a_cache_set_up_as_the_docs_say(tmp_path):
    """docs/reliability.md: a setgid group folder and umask 002; user A here even at umask 077."""
    import os
    import shutil
    import subprocess
    import tempfile

    python = "/usr/bin/python3"  # (one every user may run; the venv's may live in root's home)
    if not os.access(python, os.X_OK) or os.stat(python).st_mode & 0o001 == 0:
        pytest.skip("needs a python3 that other users can run")
    team, users = 47000, (47001, 47002)
    top = Path(tempfile.mkdtemp(prefix="quadnn-team-"))  # (pytest's tmp_path is root's alone)
    try:
        os.chmod(top, 0o755)
        shared = top / "cache"
        shared.mkdir()
        os.chown(shared, 0, team)
        os.chmod(shared, 0o2775)
        # The users import a copy of the packages: a checkout under root's home or a `mktemp -d` is
        # root's alone (0700), and they could not read it.
        core = Path(__file__).resolve().parents[1] / "core"
        for package in ("quadnn", "quadnn_paper"):
            shutil.copytree(core / package, top / "core" / package, ignore=shutil.ignore_patterns("__pycache__"))
        env = dict(os.environ, PYTHONPATH=str(top / "core"), HOME=str(top))
        for uid, mask, mine in ((users[0], 0o077, "a.json"), (users[1], 0o002, "b.json"), (users[0], 0o077, "c.json")):
            done = subprocess.run(
                [python, "-c", TEAM_MEMBER, str(shared), f"uid{uid}", mine],
                user=uid,
                group=team,
                extra_groups=[team],
                umask=mask,
                env=env,
                capture_output=True,
                text=True,
                cwd=top,
            )
            assert done.returncode == 0 and done.stdout.strip() == f"uid{uid} ok", done.stderr[-1500:]
        records = sorted(p.parent.name for p in (shared / ".jobs").glob("*/k.json"))
        assert records == [f"uid{u}" for u in users]  # each user's job records, in a folder of its own
        for d in (shared / ".jobs").iterdir():
            assert os.stat(d).st_mode & 0o022 == 0  # private, as the job pickles require
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_make_status_counts_a_run_whose_lock_is_held_as_running(tmp_path):
    import subprocess
    import sys

    from quadnn_paper.execution import status

    cache = tmp_path / "runs"
    cache.mkdir()
    hold = "import sys, time; from quadnn_paper.common import files\nwith files.file_lock(sys.argv[1]):\n"
    hold += "    print('held', flush=True); time.sleep(60)"
    trainer = subprocess.Popen([sys.executable, "-c", hold, str(cache / "abc.lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert trainer.stdout.readline().strip() == "held"  # as an inline run trains: its store lock held
        assert status.training_now(cache, "abc") and not status.training_now(cache, "other")
    finally:
        trainer.kill()
        trainer.wait()
    assert not status.training_now(cache, "abc")
