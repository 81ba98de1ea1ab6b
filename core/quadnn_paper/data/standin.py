"""Where the stand-ins (digits as an ImageFolder, synthetic KITTI, the TINY data) may write.

A stand-in rewrites its tree when its settings change, so it must never write into a folder that
holds someone's data. It writes only:

- under ``build/data/`` (:data:`~quadnn_paper.common.paths.GENERATED`), the project's own area;
- into a folder that is new or empty, which it then marks (:data:`MARKER`) as its own;
- into a folder (or below one) that carries that mark.

Any other folder is refused with :class:`ForeignFolder`, naming it and an entry it holds.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from quadnn_paper.common.files import atomic_write_text
from quadnn_paper.common.paths import GENERATED

__all__ = ["MARKER", "ForeignFolder", "claim", "default_dir"]

MARKER = ".quadnn-generated"


class ForeignFolder(ValueError):
    """A stand-in was asked to write into a folder holding files the project did not write."""


def _marked(root: Path) -> bool:
    return any((p / MARKER).is_file() for p in (root, *root.parents))


def _generated_area(root: Path) -> bool:
    gen = Path(os.environ.get("QUADNN_GENERATED", GENERATED)).resolve()
    return root == gen or gen in root.parents


def claim(root: str | os.PathLike, what: str) -> Path:
    """``root`` (absolute), made the stand-in ``what``'s to write, or :class:`ForeignFolder`."""
    root = Path(root).absolute()
    if not _marked(root):
        if root.exists() and not root.is_dir():
            raise ForeignFolder(f"refusing to write the {what} stand-in at {root}: it is a file, not a folder")
        entries = sorted(p.name for p in root.iterdir()) if root.is_dir() else []
        if entries and not _generated_area(root.resolve()):
            raise ForeignFolder(
                f"refusing to write the {what} stand-in into {root}: it holds files the project did not "
                f"write (e.g. {entries[0]!r}; no {MARKER} mark), and writing would replace or mix with them. "
                f"Give --data-dir a new or empty folder, or leave it out (stand-ins go under {GENERATED}/)"
            )
        root.mkdir(parents=True, exist_ok=True)
        atomic_write_text(root / MARKER, json.dumps(dict(written_by="quadnn_paper", standin=what)) + "\n")
    return root


def default_dir(task: str, dataset: str) -> Path | None:
    """Where a run's generated data goes when it names no folder (None: the data is not generated)."""
    folder = {("imagefolder", "digits"): "digits_imagefolder", ("depth", "synthetic"): "kitti_synthetic"}
    name = folder.get((task, dataset))
    return None if name is None else GENERATED / name
