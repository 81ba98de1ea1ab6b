"""Fashion-MNIST's loader: the real files against a plain reader, and every refusal (checksum,
header, bound, kind of file, missing) on files written in the same IDX format."""

import gzip
import hashlib
import os
import threading

import numpy as np
import pytest

from quadnn_paper.data import cifar, fashion_mnist
from quadnn_paper.data.fashion_mnist import FILES, BadFile, Missing

try:
    REAL = fashion_mnist.find(None)
except Missing:  # `make data` (run by `make test` and `make paper`) puts them under build/data/
    REAL = None
needs_real = pytest.mark.skipif(REAL is None, reason="Fashion-MNIST files not fetched (`make data`)")


def _idx(magic: int, dims: tuple, payload: bytes) -> bytes:
    return magic.to_bytes(4, "big") + b"".join(d.to_bytes(4, "big") for d in dims) + payload


def _plain(path) -> np.ndarray:
    """The reference: gunzip, skip the header, every byte an entry."""
    blob = gzip.decompress(path.read_bytes())
    ndim = blob[3]
    dims = tuple(int.from_bytes(blob[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(blob[4 + 4 * ndim :], dtype=np.uint8).reshape(dims)


@needs_real
def test_the_real_files_read_as_a_plain_reader_reads_them():
    for split in ("train", "test"):
        x, y = fashion_mnist.read_split(split)
        names = fashion_mnist.SPLITS[split]
        assert np.array_equal(x, _plain(REAL / f"{names[0]}.gz"))
        assert np.array_equal(y, _plain(REAL / f"{names[1]}.gz").astype(np.int64))
        assert np.bincount(y).tolist() == [len(y) // 10] * 10  # 6,000 / 1,000 of every class
    assert y[:10].tolist() == [9, 2, 1, 1, 6, 1, 4, 6, 5, 7]  # the published test set's first labels


@needs_real
def test_the_stand_in_holds_every_test_image_at_its_resolution_and_a_per_seed_training_order():
    a, b = cifar.load("fashion_mnist16", split_seed=0), cifar.load("fashion_mnist16", split_seed=1)
    assert tuple(a.x_test.shape) == (10_000, 1, 16, 16) and tuple(a.x_train.shape) == (60_000, 1, 16, 16)
    assert a.x_train.dtype == a.x_test.dtype and a.num_classes == 10 and a.flip
    assert (a.x_test == b.x_test).all() and not (a.y_train[:100] == b.y_train[:100]).all()
    assert sorted(a.y_train.tolist()) == sorted(b.y_train.tolist())  # the same images, reordered
    assert cifar.fingerprint("fashion_mnist16") != cifar.fingerprint("fashion_mnist28")


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """Four small files in Fashion-MNIST's format under ``tmp/fashion-mnist/``, registered as the
    published ones (their own digests and dimensions), the installed copies out of reach."""
    folder = tmp_path / fashion_mnist.FOLDER
    folder.mkdir()
    rng = np.random.default_rng(0)
    files = {}
    for name, (magic, dims, _) in FILES.items():
        small = (30, 28, 28) if len(dims) == 3 else (30,)
        images = rng.integers(0, 256, size=small, dtype=np.uint8)
        payload = (images if len(dims) == 3 else np.arange(30, dtype=np.uint8) % 10).tobytes()  # every class
        blob = _idx(magic, small, payload)
        (folder / f"{name}.gz").write_bytes(gzip.compress(blob))
        files[name] = (magic, small, hashlib.sha256(blob).hexdigest())
    monkeypatch.setattr(fashion_mnist, "FILES", files)
    monkeypatch.setattr(fashion_mnist, "GENERATED", tmp_path / "none")
    monkeypatch.setattr(fashion_mnist, "INSTALLED", tmp_path / "none")
    return folder


def test_files_in_the_format_are_read_gzipped_or_not(fake):
    x, y = fashion_mnist.read_split("train", fake.parent)
    assert x.shape == (30, 28, 28) and y.dtype == np.int64
    name = "train-images-idx3-ubyte"
    (fake / name).write_bytes(gzip.decompress((fake / f"{name}.gz").read_bytes()))
    (fake / f"{name}.gz").unlink()
    assert np.array_equal(fashion_mnist.read_split("train", fake.parent)[0], x)


def _rewrite(folder, name, blob):
    (folder / f"{name}.gz").write_bytes(gzip.compress(blob))


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda b: b[:-1] + bytes([b[-1] ^ 1]), "SHA-256"),  # one bit of one pixel
        (lambda b: b + b"\0", "more bytes"),  # one byte past the bound
        (lambda b: b[:-1], "fewer bytes"),
        (lambda b: b[:4] + (31).to_bytes(4, "big") + b[8:], "header"),  # a count that is not the file's
        (lambda b: (0x0801).to_bytes(4, "big") + b[4:], "header"),  # the magic of another kind
        (lambda b: b"", "header"),
    ],
)
def test_a_file_that_is_not_the_published_one_is_refused_in_one_line_naming_it(fake, change, words):
    name = "train-images-idx3-ubyte"
    _rewrite(fake, name, change(gzip.decompress((fake / f"{name}.gz").read_bytes())))
    with pytest.raises(BadFile, match=words) as e:
        fashion_mnist.read_split("train", fake.parent)
    assert str(fake / f"{name}.gz") in str(e.value) and "\n" not in str(e.value)


def test_a_header_bigger_than_the_file_is_refused_before_anything_is_allocated(fake, monkeypatch):
    name = "train-images-idx3-ubyte"
    magic, _, digest = fashion_mnist.FILES[name]
    huge = (2_000_000_000, 28, 28)  # 1.5 TB if believed
    monkeypatch.setitem(fashion_mnist.FILES, name, (magic, huge, digest))
    _rewrite(fake, name, _idx(magic, huge, b"\0" * 100))
    with pytest.raises(BadFile, match="fewer bytes"):  # read to its end (a few bytes), never allocated
        fashion_mnist.read_split("train", fake.parent)


def test_a_link_fifo_or_garbage_is_refused_at_the_start(fake, tmp_path):
    name = "t10k-labels-idx1-ubyte"
    target = fake / f"{name}.gz"
    elsewhere = tmp_path / "elsewhere.gz"
    target.rename(elsewhere)
    target.symlink_to(elsewhere)
    with pytest.raises(BadFile, match="symbolic link"):
        fashion_mnist.read_split("test", fake.parent)
    target.unlink()
    os.mkfifo(target)
    done = threading.Event()
    err = []

    def read():
        try:
            fashion_mnist.read_split("test", fake.parent)
        except BadFile as e:
            err.append(str(e))
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(20), "a FIFO named like a data file blocked the loader"
    assert err and "not a regular file" in err[0]
    target.unlink()
    target.write_bytes(b"not gzip at all")
    with pytest.raises(BadFile, match="not a readable gzip"):
        fashion_mnist.read_split("test", fake.parent)


def test_missing_files_name_every_place_looked_and_the_command(fake):
    (fake / "t10k-images-idx3-ubyte.gz").unlink()
    with pytest.raises(Missing) as e:
        fashion_mnist.read_split("test", fake.parent)
    assert str(fake) in str(e.value) and "apt-get download dataset-fashion-mnist" in str(e.value)
    assert cifar.fingerprint("fashion_mnist16", fake.parent) is None


def test_an_unknown_split_names_the_valid_ones():
    with pytest.raises(ValueError, match="'test', 'train'"):
        fashion_mnist.read_split("val")


def test_the_imagenet_stand_in_tree_holds_every_test_image_and_the_training_images_asked(fake, tmp_path):
    from quadnn_paper.data.imagefolder import datasets, write_fashion_folder

    root = write_fashion_folder(tmp_path / "tree", 12, train_per_class=2, source=fake.parent)
    train, val = datasets(root, 10, 12, (0.35, 1.0))
    _, y_train = fashion_mnist.read_split("train", fake.parent)
    _, y_test = fashion_mnist.read_split("test", fake.parent)
    assert len(val) == len(y_test) and sorted(val.targets) == sorted(y_test.tolist())
    assert len(train) == sum(min(2, n) for n in np.bincount(y_train, minlength=10))
    x, _ = val[0]
    assert tuple(x.shape) == (10, 3, 10, 10)  # ten crops of 10 px inside 12
