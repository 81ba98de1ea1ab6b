"""Where the stand-ins (digits as an ImageFolder, synthetic KITTI, the TINY data) may write, and
what they may remove: ownership by record, never by a mark.

A stand-in rewrites its tree when its settings change. It owns exactly the files its own record
lists (``<root>/`` :data:`RECORD`: each written path with the SHA-256 of the bytes written), so:

- it claims only a folder that is new or empty, one under ``build/data/``
  (:data:`~quadnn_paper.common.paths.GENERATED`, the project's own area), or one holding its record;
  a record in a folder above does not count (files later put below it are not the project's);
- it removes or rewrites only a recorded path whose bytes are still those it wrote; a path it does
  not own (a file of someone's, or one edited since) is refused in one line (:class:`NotOwned`),
  and files it never wrote are left where they are.

Any other folder is refused with :class:`ForeignFolder`, naming it and an entry it holds.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from quadnn_paper.common.files import RefusedFile, atomic_write_bytes, atomic_write_text, inside, sha256_file
from quadnn_paper.common.paths import GENERATED

__all__ = ["RECORD", "MARKER", "ForeignFolder", "NotOwned", "Owned", "claim", "default_dir"]

RECORD = ".quadnn-generated"
MARKER = RECORD  # (its older name)


class ForeignFolder(ValueError):
    """A stand-in was asked to write into a folder holding files the project did not write."""


class NotOwned(ForeignFolder):
    """A stand-in was about to remove or rewrite a file that its record does not say it wrote."""


def _generated_area(root: Path) -> bool:
    gen = Path(os.environ.get("QUADNN_GENERATED", GENERATED)).resolve()
    return root == gen or gen in root.parents


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Owned:
    """A stand-in's tree and its record ``{relative path: [SHA-256 it may hold]}`` (two while a
    rewrite is under way: the old and the new bytes; one otherwise)."""

    def __init__(self, root: Path, what: str, files: dict[str, list[str]]):
        self.root, self.what, self.files = root, what, files

    def _save(self) -> None:
        record = dict(written_by="quadnn_paper", standin=self.what, files=self.files)
        atomic_write_text(self.root / RECORD, json.dumps(record, indent=0, sort_keys=True) + "\n")

    def owns(self, rel: str) -> bool:
        """True when ``rel`` is absent or holds bytes the record says this stand-in wrote there."""
        try:
            path = inside(self.root, rel, "recorded path")  # (a record is data: a path out is never ours)
        except RefusedFile:
            return False
        if any(p.is_symlink() for p in path.parents if self.root in p.parents):
            return False  # (a folder of it replaced by a link: writing there would write elsewhere)
        if not (path.exists() or path.is_symlink()):
            return True
        if path.is_symlink() or not path.is_file() or rel not in self.files:
            return False
        return sha256_file(path) in self.files[rel]

    def _refuse(self, rel: str) -> NotOwned:
        if any(p.is_symlink() for p in (self.root / rel).parents if self.root in p.parents):
            why = "a folder on its path is a symbolic link"
        else:
            why = "it was edited since" if rel in self.files else "its record does not list it"
        return NotOwned(
            f"refusing to remove or rewrite {self.root / rel} for the {self.what} stand-in: the project did not "
            f"write it ({why}; {self.root / RECORD}). Move it away, or give the stand-in a new or empty folder"
        )

    def replace_all(self, blobs: dict[str, bytes]) -> None:
        """Make the tree hold ``blobs`` ({relative path: bytes}): every target path checked first,
        then the record widened (a crash leaves only recorded bytes), the recorded files no longer
        wanted removed, the new ones written, and the record narrowed to them."""
        for rel in sorted(blobs):
            if not self.owns(rel):
                raise self._refuse(rel)
        new = {rel: _digest(data) for rel, data in blobs.items()}
        for rel, digest in new.items():
            self.files[rel] = sorted({*self.files.get(rel, []), digest})
        self._save()
        for rel in sorted(set(self.files) - set(new)):
            path = self.root / rel
            if path.is_file() and not path.is_symlink() and self.owns(rel):
                path.unlink()
                _remove_empty_parents(path.parent, self.root)
        for rel, data in blobs.items():
            atomic_write_bytes(self.root / rel, data)
        self.files = {rel: [digest] for rel, digest in new.items()}
        self._save()


def _remove_empty_parents(folder: Path, root: Path) -> None:
    while folder != root and root in folder.parents:
        try:
            folder.rmdir()  # only an empty folder: anything someone put there keeps it
        except OSError:
            return
        folder = folder.parent


def _read_record(root: Path) -> dict | None:
    try:
        record = json.loads((root / RECORD).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _adopt_legacy(root: Path) -> dict[str, list[str]]:
    """The files of a tree written under a mark without a file list (before records), in the
    project's own area only: recorded as they are, so later rewrites go by record."""
    files = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        nested = any((p / RECORD).is_file() for p in path.parents if root in p.parents)
        if path.is_file() and not path.is_symlink() and rel != RECORD and not nested:
            files[rel] = [sha256_file(path)]
    return files


def claim(root: str | os.PathLike, what: str) -> Owned:
    """``root`` (absolute) as the stand-in ``what``'s tree (:class:`Owned`), or :class:`ForeignFolder`."""
    root = Path(root).absolute()
    if root.exists() and not root.is_dir():
        raise ForeignFolder(f"refusing to write the {what} stand-in at {root}: it is a file, not a folder")
    record = _read_record(root) if root.is_dir() else None
    if record is not None and isinstance(record.get("files"), dict):
        files = {str(k): [str(d) for d in v] for k, v in record["files"].items() if isinstance(v, list)}
        return Owned(root, what, files)
    ours = _generated_area(root.resolve())
    if record is not None and ours:
        owned = Owned(root, what, _adopt_legacy(root))
        owned._save()
        return owned
    entries = sorted(p.name for p in root.iterdir() if p.name != RECORD) if root.is_dir() else []
    if (entries or record is not None) and not ours:
        why = (
            f"an older mark ({RECORD}) that lists no files, so which are the project's is not known"
            if record is not None
            else f"files the project did not write (e.g. {entries[0]!r}; no record of its own, {RECORD})"
        )
        raise ForeignFolder(
            f"refusing to write the {what} stand-in into {root}: it holds {why}, and writing would replace or mix "
            f"with them. Give --data-dir a new or empty folder, or leave it out (stand-ins go under {GENERATED}/)"
        )
    root.mkdir(parents=True, exist_ok=True)
    owned = Owned(root, what, {})
    owned._save()
    return owned


def default_dir(task: str, dataset: str) -> Path | None:
    """Where a run's generated data goes when it names no folder (None: the data is not generated)."""
    folder = {
        ("imagefolder", "digits"): "digits_imagefolder",
        ("imagefolder", "fashion_mnist"): "fashion_imagefolder",
        ("depth", "synthetic"): "kitti_synthetic",
    }
    name = folder.get((task, dataset))
    return None if name is None else GENERATED / name
