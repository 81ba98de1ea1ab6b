"""What the data fingerprints cost (docs/reliability.md): an ImageFolder tree of 20,000 small
files (listed and stat'ed, extrapolated to ImageNet's 1.33 M) and full-size CIFAR-10 batch files
(hashed once, then remembered). Writes its data to a temporary folder and removes it.

    PYTHONPATH=core .venv/bin/python tools/fingerprint_cost.py
"""

import pickle
import tempfile
import time
from pathlib import Path

import numpy as np

from quadnn_paper.data import cifar, imagefolder


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root, n = Path(tmp) / "tree", 0
        for split in ("train", "val"):
            for c in range(100):
                d = root / split / f"c{c:03d}"
                d.mkdir(parents=True)
                for i in range(100):
                    (d / f"{i}.JPEG").write_bytes(b"x" * (i + 1))
                    n += 1
        t = time.perf_counter()
        imagefolder.fingerprint(root)
        dt = time.perf_counter() - t
        t = time.perf_counter()
        imagefolder.fingerprint(root)
        again = time.perf_counter() - t
        print(
            f"imagefolder: {n} files in {dt:.3f} s = {dt / n * 1e6:.1f} us/file, 1.33 M files (ImageNet) "
            f"~ {dt / n * 1.33e6:.0f} s; remembered (folders unchanged) {again:.3f} s ({dt / again:.1f}x less)"
        )
        folder = Path(tmp) / "c" / "cifar-10-batches-py"
        folder.mkdir(parents=True)
        rng = np.random.default_rng(0)
        for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
            with open(folder / name, "wb") as f:
                pickle.dump(
                    {
                        b"labels": rng.integers(0, 10, 10000).tolist(),
                        b"data": rng.integers(0, 256, (10000, 3072), dtype=np.uint8),
                    },
                    f,
                )
        t = time.perf_counter()
        cifar.fingerprint("cifar10", folder.parent)
        first = time.perf_counter() - t
        t = time.perf_counter()
        cifar.fingerprint("cifar10", folder.parent)
        again = time.perf_counter() - t
        print(
            f"cifar10 (6 batch files, 184 MB): first {first:.3f} s, remembered {again * 1e3:.2f} ms "
            f"({first / again:.0f}x less)"
        )


if __name__ == "__main__":
    import argparse

    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    main()
