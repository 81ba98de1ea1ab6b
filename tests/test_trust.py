"""Results you can trust on a shared cluster: the store answers only for the run asked
for, a result is checked against the data it was trained on, bad data is named at load, a team can
share the cache, full or read-only disks and dead writers leave one line and nothing broken, two
`make paper` wait for each other, and the CLI refuses values it cannot run."""

import errno
import json
import os
import pickle
import shutil
import stat
import subprocess
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from runs import small_run

from quadnn_paper.common import files
from quadnn_paper.data import cifar, imagefolder, kitti
from quadnn_paper.engine import RunConfig, run
from quadnn_paper.engine.store import CorruptFile, DataMismatch, ForeignFile, RunStore, cached
from quadnn_paper.execution.train import config_from_args

pytestmark = pytest.mark.usefixtures("one_thread")
REPO = Path(__file__).resolve().parents[1]


def cfg_of(**kw):
    return small_run(**{"train_limit": 64, "epochs": 1, **kw})


def fake_result(cfg, **extra):
    return dict(
        status="finished",
        history=[{"epoch": 1}],
        config=cfg.to_dict(),
        run_id=cfg.run_id,
        key=cfg.key(),
        test_error=12.5,
        **extra,
    )


# -- 1. the store answers only for the request ------------------------------------------------------
@pytest.mark.parametrize("forgery", ["verbatim", "no_run_id", "requested_run_id"])
def test_a_result_of_another_configuration_is_never_returned(tmp_path, forgery):
    asked, other = cfg_of(seed=3, lr=0.05), cfg_of(seed=1, lr=0.1)
    res = fake_result(other)
    if forgery == "no_run_id":
        del res["run_id"]
    elif forgery == "requested_run_id":
        res["run_id"] = asked.run_id
    store = RunStore(tmp_path)
    store.write_result(asked, res)  # the other run's record under the asked run's folder
    path = store.dir(asked) / "result.json"
    with pytest.warns(RuntimeWarning) as w:
        assert store.result(asked) is None
    msg = str(w[0].message)
    assert str(path) in msg and asked.run_id in msg and "\n" not in msg
    assert "seed1" in msg and "seed3" in msg  # both identities, readable
    assert not path.exists() and list(path.parent.glob("result.json.corrupt-*"))
    store.write_result(asked, fake_result(asked))
    assert store.result(asked)["run_id"] == asked.run_id  # its own record is still answered


def test_a_checkpoint_of_another_run_is_refused_even_with_its_manifest(tmp_path):
    asked, other = cfg_of(seed=3), cfg_of(seed=1)
    store = RunStore(tmp_path)
    store.save_checkpoint(other, "last.pt", dict(model={"w": torch.ones(2)}, epoch=1))
    store.dir(asked).mkdir(parents=True)
    for name in ("last.pt", "manifest.json"):  # a whole run directory copied by hand
        shutil.copy(store.dir(other) / name, store.dir(asked) / name)
    with pytest.warns(RuntimeWarning, match=f"manifest of run {other.run_id}"):
        with pytest.raises(CorruptFile):
            store.load_checkpoint(asked, "last.pt")
    # with a manifest naming the asked run (as a crafted or merged folder would), the file itself says
    manifest = json.loads((store.dir(other) / "manifest.json").read_text())
    manifest["run_id"] = asked.run_id
    (store.dir(asked) / "manifest.json").write_text(json.dumps(manifest))
    shutil.copy(store.dir(other) / "last.pt", store.dir(asked) / "last.pt")
    with pytest.warns(RuntimeWarning, match=f"checkpoint of run {other.run_id}.*requested run {asked.run_id}"):
        with pytest.raises(ForeignFile):
            store.load_checkpoint(asked, "last.pt")
    assert not (store.dir(asked) / "last.pt").exists()  # moved aside: the run restarts from scratch
    assert store.load_checkpoint(other, "last.pt")["run_id"] == other.run_id


def test_a_cached_entry_of_another_configuration_is_recomputed(tmp_path):
    calls = []
    assert cached(tmp_path, "sweep", {"n": 1}, lambda: calls.append(1) or {"v": 1}) == {"v": 1}
    entry = next((tmp_path / "sweep").glob("*.json"))
    entry.write_text(json.dumps({"config": {"n": 2}, "result": {"v": 2}}))  # another entry under this key
    with pytest.warns(RuntimeWarning, match="another configuration"):
        assert cached(tmp_path, "sweep", {"n": 1}, lambda: calls.append(1) or {"v": 1}) == {"v": 1}
    assert len(calls) == 2


# -- 2. data identity -----------------------------------------------------------------------------------
def write_cifar(root: Path, seed=0, n=16, protocol=pickle.DEFAULT_PROTOCOL, damage=None):
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        d = {b"labels": rng.integers(0, 10, n).tolist(), b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8)}
        if name == "data_batch_2":
            d.update(damage or {})
        with open(folder / name, "wb") as f:
            pickle.dump(d, f, protocol=protocol)
    return folder


def test_cifar_fingerprint_is_content_not_place(tmp_path):
    write_cifar(tmp_path / "a")
    shutil.copytree(tmp_path / "a", tmp_path / "moved")
    write_cifar(tmp_path / "b", seed=1)
    fa = cifar.fingerprint("cifar10", tmp_path / "a")
    assert fa == cifar.fingerprint("cifar10", tmp_path / "moved") != cifar.fingerprint("cifar10", tmp_path / "b")
    assert cifar.fingerprint("cifar10", tmp_path / "none") is None


def test_imagefolder_fingerprint_is_names_and_sizes(tmp_path):
    from PIL import Image

    for split in ("train", "val"):
        for c in ("a", "b"):
            (tmp_path / "t" / split / c).mkdir(parents=True)
            Image.new("RGB", (8, 8), (len(c), 0, 0)).save(tmp_path / "t" / split / c / "0.png")
    fp = imagefolder.fingerprint(tmp_path / "t")
    shutil.copytree(tmp_path / "t", tmp_path / "moved")
    assert imagefolder.fingerprint(tmp_path / "moved") == fp
    new = tmp_path / "moved" / "val" / "b" / ".0.png.part"
    Image.new("RGB", (9, 9)).save(new, format="png")
    new.replace(new.with_name("0.png"))  # other content and size under the same name, as a re-download puts it
    assert imagefolder.fingerprint(tmp_path / "moved") != fp
    (tmp_path / "t" / "train" / "a" / "1.png").write_bytes(b"x")  # one more file
    assert imagefolder.fingerprint(tmp_path / "t") != fp


def test_kitti_fingerprint_covers_split_files_and_listed_sizes(tmp_path):
    root = kitti.write_synthetic_kitti(tmp_path / "k", n_train=2, n_test=1, height=16, width=48)
    fp = kitti.fingerprint(root, ["splits/eigen_train_files.txt", "splits/eigen_test_files.txt"])
    shutil.copytree(root, tmp_path / "moved")
    assert kitti.fingerprint(tmp_path / "moved", ["splits/eigen_train_files.txt", "splits/eigen_test_files.txt"]) == fp
    kitti.write_synthetic_kitti(tmp_path / "other", n_train=2, n_test=1, height=16, width=48, seed=1)
    assert kitti.fingerprint(tmp_path / "other", ["splits/eigen_train_files.txt", "splits/eigen_test_files.txt"]) != fp


def test_a_result_trained_on_other_data_is_refused_and_moved_data_is_not(tmp_path):
    write_cifar(tmp_path / "a")
    cfg = cfg_of(dataset="cifar10", data_dir=str(tmp_path / "a"), train_limit=32, batch_size=32)
    first = run(cfg, tmp_path / "runs")
    assert first["data_fingerprint"] == cifar.fingerprint("cifar10", tmp_path / "a")
    shutil.move(tmp_path / "a", tmp_path / "moved")  # the same data elsewhere: the same run, not retrained
    again = run(cfg.replace(data_dir=str(tmp_path / "moved")), tmp_path / "runs")
    assert again == first
    write_cifar(tmp_path / "b", seed=1)  # other data at the same place (a re-download, another version)
    with pytest.raises(DataMismatch, match=r"result\.json was trained on data cifar10:\w+, but .* is cifar10:\w+"):
        run(cfg.replace(data_dir=str(tmp_path / "b")), tmp_path / "runs")
    assert (RunStore(tmp_path / "runs").dir(cfg) / "result.json").exists()  # a teammate's result is kept


def test_a_result_recorded_before_fingerprints_is_still_answered(tmp_path):
    cfg, store = cfg_of(), RunStore(tmp_path)
    store.write_result(cfg, fake_result(cfg))  # no data_fingerprint: older records
    assert store.result(cfg, data="digits:0123")["test_error"] == 12.5
    store.write_result(cfg, fake_result(cfg, data_fingerprint="digits:aaaa"))
    with pytest.raises(DataMismatch, match="digits:aaaa.*digits:0123"):
        store.result(cfg, data="digits:0123")


def test_a_resume_checkpoint_of_other_data_is_not_resumed(tmp_path):
    cfg, store = cfg_of(), RunStore(tmp_path)
    store.save_checkpoint(cfg, "last.pt", dict(model={}, epoch=1), data="digits:aaaa")
    with pytest.warns(RuntimeWarning, match="trained on data digits:aaaa"):
        with pytest.raises(ForeignFile):
            store.load_checkpoint(cfg, "last.pt", data="digits:bbbb")


# -- 3. data checked at load ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "damage, message",
    [
        (dict(labels=[1] * 15), r"data_batch_2: 16 images but 15 labels"),
        (dict(labels=[10] + [0] * 15), r"data_batch_2: labels must be in 0\.\.9, found \[10\]"),
        (dict(labels=[-1] + [0] * 15), r"data_batch_2: labels must be in 0\.\.9, found \[-1\]"),
        (dict(data=np.zeros((12, 3000), np.uint8)), r"data_batch_2: images must be an N x 3072"),
    ],
)
def test_bad_cifar_batches_are_one_line_naming_the_file(tmp_path, damage, message):
    write_cifar(tmp_path, damage={k.encode(): v for k, v in damage.items()})
    with pytest.raises(cifar.BadData, match=message) as e:
        cifar.load("cifar10", tmp_path)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_valid_cifar_batches_of_every_pickle_protocol_are_read(tmp_path, protocol):
    write_cifar(tmp_path / "p", protocol=protocol)
    write_cifar(tmp_path / "ref", protocol=2)
    got, ref = cifar.load("cifar10", tmp_path / "p"), cifar.load("cifar10", tmp_path / "ref")
    assert torch.equal(got.x_train, ref.x_train) and torch.equal(got.y_test, ref.y_test)


def test_truncated_image_in_an_imagefolder_is_named(tmp_path):
    from PIL import Image

    for split in ("train", "val"):
        (tmp_path / split / "a").mkdir(parents=True)
        Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(
            tmp_path / split / "a" / "0.png"
        )
    bad = tmp_path / "train" / "a" / "0.png"
    bad.write_bytes(bad.read_bytes()[:300])
    train, _ = imagefolder.datasets(tmp_path, crop=8, resize=8)
    with pytest.raises(ValueError, match=f"{bad}: not a readable image") as e:
        train[0]
    assert "\n" not in str(e.value)


def test_kitti_damage_is_named(tmp_path):
    from PIL import Image

    root = kitti.write_synthetic_kitti(tmp_path, n_train=2, n_test=1, height=16, width=48)
    split = kitti.KittiSplit(root, "splits/eigen_train_files.txt")
    rgb, depth = (root / p for p in split.items[0])
    Image.new("RGB", (40, 16)).save(rgb)  # an image of another size than its depth map
    with pytest.raises(ValueError, match=f"{rgb} is 16x40 but its depth map {depth} is 16x48"):
        split[0]
    rgb2, depth2 = (root / p for p in split.items[1])
    depth2.write_bytes(depth2.read_bytes()[:80])
    with pytest.raises(ValueError, match=f"{depth2}: not a readable image"):
        split[1]


@pytest.mark.parametrize("path", ["/etc/passwd", "../outside.png", "synthetic/../../outside.png"])
def test_kitti_split_paths_stay_inside_the_data_root(tmp_path, path):
    root = kitti.write_synthetic_kitti(tmp_path, n_train=1, n_test=1, height=16, width=48)
    split_file = root / "splits" / "eigen_train_files.txt"
    split_file.write_text(f"{path} synthetic/x.png 1.0\n")
    with pytest.raises(ValueError, match=r"eigen_train_files\.txt:1: .* leaves the data root"):
        kitti.KittiSplit(root, "splits/eigen_train_files.txt")


# -- 5. a cache a team can share ------------------------------------------------------------------------
@pytest.fixture
def team_umask():
    old = os.umask(0o002)
    yield
    os.umask(old)


def test_cache_files_honour_the_umask(tmp_path, team_umask):
    cfg, store = cfg_of(), RunStore(tmp_path)
    store.write_result(cfg, fake_result(cfg))
    store.save_checkpoint(cfg, "stage1.pt", dict(model={}))
    with store.lock(cfg.run_id):
        pass
    for name in ("result.json", "stage1.pt", "manifest.json"):
        assert stat.S_IMODE(os.stat(store.dir(cfg) / name).st_mode) == 0o664, name
    assert stat.S_IMODE(os.stat(tmp_path / f"{cfg.run_id}.lock").st_mode) == 0o664  # teammates can lock it
    os.umask(0o077)
    files.atomic_write_text(tmp_path / "private.json", "{}")
    assert stat.S_IMODE(os.stat(tmp_path / "private.json").st_mode) == 0o600


def test_a_setgid_group_directory_keeps_its_group(tmp_path, team_umask):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o2775)
    cfg, store = cfg_of(), RunStore(shared)
    store.write_result(cfg, fake_result(cfg))
    d = store.dir(cfg)
    assert os.stat(d).st_mode & stat.S_ISGID and os.stat(d).st_gid == os.stat(shared).st_gid
    assert os.stat(d / "result.json").st_gid == os.stat(shared).st_gid


# -- 6. full and read-only disks, dead writers, make -----------------------------------------------------
def test_a_full_disk_is_one_line_naming_the_file_and_nothing_is_lost(tmp_path, monkeypatch):
    cfg, store = cfg_of(), RunStore(tmp_path)
    store.save_checkpoint(cfg, "last.pt", dict(model={"w": torch.ones(2)}, epoch=1))
    before = {p.name: p.read_bytes() for p in store.dir(cfg).iterdir()}

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(files.CacheWriteError) as e:
        store.save_checkpoint(cfg, "last.pt", dict(model={"w": torch.zeros(2)}, epoch=2))
    assert str(store.dir(cfg) / "last.pt") in str(e.value) and "no space left" in str(e.value)
    assert "\n" not in str(e.value) and e.value.__cause__ is None and e.value.__suppress_context__
    with pytest.raises(files.CacheWriteError, match=f"cannot write {tmp_path / 'x.json'}: no space left"):
        files.atomic_write_text(tmp_path / "x.json", "{}")
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in store.dir(cfg).iterdir()} == before  # no temporary left either
    assert store.load_checkpoint(cfg, "last.pt")["epoch"] == 1


def test_a_read_only_cache_reports_a_file_it_cannot_move_aside(tmp_path, monkeypatch):
    asked, other = cfg_of(seed=3), cfg_of(seed=1)
    store = RunStore(tmp_path)
    store.write_result(asked, fake_result(other))

    def read_only(src, dst):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(os, "replace", read_only)
    with pytest.warns(RuntimeWarning, match=r"cannot move it aside \(Read-only file system\), not using it"):
        assert store.result(asked) is None


def test_temporary_files_of_dead_writers_are_removed(tmp_path):
    cfg, store = cfg_of(), RunStore(tmp_path)
    store.save_checkpoint(cfg, "stage1.pt", dict(model={}))
    stale = [store.dir(cfg) / ".stage3.pt.k2j4h1.tmp", store.dir(cfg) / ".last.pt.a8d9x0.tmp"]
    for p in stale:
        p.write_bytes(b"half a checkpoint")  # left by a writer killed with SIGTERM
    entry_tmp = tmp_path / f".{cfg.run_id}.json.zz11.tmp"
    entry_tmp.write_text("{")
    keep = tmp_path / "other" / ".notes.tmp"
    keep.parent.mkdir()
    keep.write_text("not ours")
    with store.lock(cfg.run_id):  # every writer of the run's files holds this lock: none is alive
        pass
    assert not any(p.exists() for p in stale + [entry_tmp]) and keep.exists()
    assert (store.dir(cfg) / "stage1.pt").exists()


MAKE_TREE = {
    "paper/main.tex": "",
    "core/quadnn_paper/common/published.py": "",
    "pyproject.toml": "",
    "core/pyproject.toml": "",
    "notebooks/sec.ipynb": "{}",
}


def fake_checkout(root: Path) -> Path:
    """The Makefile in a checkout whose tools are stand-ins that log what they were called with."""
    for rel, text in MAKE_TREE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    shutil.copy(REPO / "Makefile", root / "Makefile")
    bin_ = root / ".venv" / "bin"
    bin_.mkdir(parents=True)
    log = root / "calls.log"
    (bin_ / "papermill").write_text(
        textwrap.dedent(f"""\
        #!/bin/sh
        printf '%s\\n' "$QUADNN_PENDING" "$@" > '{root}/papermill.args'
        printf '{{}}' > "$5"
        """)
    )
    (bin_ / "python").write_text(
        textwrap.dedent(f"""\
        #!/bin/sh
        [ "$2" = check ] || exit 0
        echo "start $$" >> '{log}'; sleep 1; echo "end $$" >> '{log}'
        """)
    )
    (root / "tools").mkdir()
    (root / "fakebin").mkdir()
    (root / "fakebin" / "latexmk").write_text("#!/bin/sh\nexit 0\n")
    for p in (*bin_.iterdir(), root / "fakebin" / "latexmk"):
        p.chmod(0o755)
    later = time.time() + 5
    for rel in (".venv/.installed", "build/.tex-ok", "paper/variables/published.tex", "build/smoke/sec.ipynb"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("")
        os.utime(root / rel, (later, later))
    return root


def make_env(root):
    env = dict(os.environ, PATH=f"{root / 'fakebin'}:{os.environ['PATH']}")
    for k in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "QUADNN_PAPER_LOCKED"):
        env.pop(k, None)
    return env


needs_make = pytest.mark.skipif(
    shutil.which("make") is None or shutil.which("flock") is None, reason="needs make and flock"
)


@needs_make
def test_make_runs_a_notebook_in_a_path_with_spaces_and_non_ascii(tmp_path):
    root = fake_checkout(tmp_path / "my dir" / "ünï repo")
    os.remove(root / "build/smoke/sec.ipynb")
    p = subprocess.run(
        ["make", "build/smoke/sec.ipynb", "PROFILE=smoke"],
        cwd=root,
        env=make_env(root),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    args = (root / "papermill.args").read_text().splitlines()
    assert args[0] == f"{root}/build/smoke/sec.pending"
    assert f"{root}/paper" in args and f"{root}/build/cache" in args
    assert (root / "build/smoke/sec.ipynb").exists()


@needs_make
def test_two_make_paper_in_one_checkout_run_one_after_the_other(tmp_path):
    import fcntl

    root = fake_checkout(tmp_path / "co")
    env = make_env(root)
    with open(root / "build" / ".paper.lock", "w") as held:  # as a first `make paper` holds it
        fcntl.flock(held, fcntl.LOCK_EX)
        makes = [
            subprocess.Popen(
                ["make", "paper", "PROFILE=smoke"],
                cwd=root,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for _ in range(2)
        ]
        for m in makes:
            assert "waiting for it" in m.stdout.readline()  # says why it waits ...
        time.sleep(0.5)
        assert not (root / "calls.log").exists()  # ... and runs nothing meanwhile
    outs = [m.communicate(timeout=60)[0] for m in makes]
    assert [m.returncode for m in makes] == [0, 0], outs  # never an error
    events = [ln.split()[0] for ln in (root / "calls.log").read_text().splitlines()]
    assert events == ["start", "end", "start", "end"]  # one after the other, never interleaved


# -- 7. the CLI -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv, named",
    [
        (["--device", "cuda:x"], "'cuda:x': device must be one of auto, cpu, cuda, mps or cuda:N"),
        (["--device", "cpu:0x"], "'cpu:0x': device must be one of"),
        (["--width", "1e308"], "1e308 must be <= 64"),
        (["--batch-size", "99999999999999999999"], "99999999999999999999 must be <= 1048576"),
        (["--task-kwargs", '{"bogus": 1}'], "--task-kwargs ['bogus'] unknown for task classification"),
        (["--task", "depth", "--task-kwargs", '{"bogus": 1}'], "--task-kwargs ['bogus'] unknown for task depth"),
    ],
)
def test_cli_values_it_cannot_run_are_usage_errors(capsys, argv, named):
    with pytest.raises(SystemExit) as e:
        config_from_args(argv)
    assert e.value.code == 2 and named in capsys.readouterr().err


def test_a_config_with_an_unparsable_device_index_is_refused():
    with pytest.raises(ValueError, match="cuda:x"):
        RunConfig(device="cuda:x")
    assert RunConfig(device="cuda:1").device == "cuda:1"


def test_classification_refuses_task_kwargs_it_does_not_read():
    from quadnn_paper.engine.tasks import make_task

    with pytest.raises(ValueError, match=r"classification task_kwargs \['bogus'\] unknown"):
        make_task(cfg_of(task_kwargs={"bogus": 1}))
