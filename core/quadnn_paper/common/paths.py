"""Where the companion's data lives, independent of the working directory (notebooks run in
``notebooks/``, SLURM jobs wherever submitit starts them).

- ``DATA``: the real data sets (``data/`` of the repository; ``QUADNN_DATA`` overrides), as
  ``data/README.md`` describes: ``cifar-10-batches-py/``, ``cifar-100-python/``, ``imagenet/``,
  ``kitti/``.
- ``GENERATED``: stand-in data the project writes (digits rendered as PNGs, synthetic KITTI scenes,
  the TINY data sets): ``build/data/`` (``QUADNN_GENERATED`` overrides).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["REPO", "DATA", "GENERATED"]

REPO = Path(__file__).resolve().parents[3]
DATA = Path(os.environ.get("QUADNN_DATA", REPO / "data")).resolve()
GENERATED = Path(os.environ.get("QUADNN_GENERATED", REPO / "build" / "data")).resolve()
