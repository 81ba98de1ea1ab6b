"""Nothing lost, nothing forged, nothing unbounded (issue 40): each principle enforced by one test
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


@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_every_cifar_bomb_is_refused_before_anything_is_built(tmp_path, bomb):
    import tracemalloc

    from quadnn_paper.data import cifar

    blob, message = BOMBS[bomb]
    path = tmp_path / "data_batch_1"
    path.write_bytes(blob)
    tracemalloc.start()
    try:
        with pytest.raises(cifar.BadData, match=rf"{path}: {message}") as e:
            cifar._checked(path, cifar.load_cifar_batch(path), b"labels", 10)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "\n" not in str(e.value)
    assert peak < 4 * len(blob) + 2e6, f"{peak / 1e6:.0f} MB allocated from a file of {len(blob) / 1e6:.2f} MB"


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
