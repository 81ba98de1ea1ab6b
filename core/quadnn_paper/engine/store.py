"""The run cache: one folder per configuration hash, written so that nothing is lost or mixed.

``<root>/<run_id>/`` holds ``config.json``, ``metrics.json`` (the curve so far), ``last.pt``
(resume checkpoint), ``stage<k>.pt`` (weights at the end of schedule stage k), ``manifest.json``
(size and SHA-256 of every checkpoint, checked before a checkpoint is loaded) and, last,
``result.json``, whose presence means "done, never run again". Every file is written to a
temporary file unique to its writer and renamed into place. A file that cannot be read is
reported with its path and moved aside (``*.corrupt``), and the run is redone from what is
still readable. Concurrent processes asking for the same configuration serialise on
``<run_id>.lock`` (a POSIX record lock: it works on local and NFS file systems).
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Iterator

from ..common.files import atomic_write_bytes, atomic_write_text, sha256_file as _sha256

__all__ = ["RunStore", "CorruptFile", "cached", "atomic_write_text", "atomic_write_bytes", "STATES"]

# done: result.json says finished; diverged: result.json says it did not converge;
# partial: started (a checkpoint or curve exists), not finished; missing: nothing yet.
STATES = ("done", "diverged", "partial", "missing")


class CorruptFile(RuntimeError):
    """A cache file exists but cannot be read (truncated, wrong checksum, not the expected content)."""

    def __init__(self, path: Path, why: str):
        super().__init__(f"{path}: {why}")
        self.path = Path(path)


def quarantine(path: Path, why: str) -> None:
    """Report an unreadable file with its path and move it aside, so it is redone, never reused."""
    path = Path(path)
    aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
    warnings.warn(f"quadnn_paper cache: {path} is unreadable ({why}); moved to {aside.name}, redoing it",
                  RuntimeWarning, stacklevel=3)
    with contextlib.suppress(FileNotFoundError):
        os.replace(path, aside)


class RunStore:
    """The runs under ``root``, addressed by configuration (anything with ``run_id`` and ``key()``)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise NotADirectoryError(f"cache directory {self.root} exists and is not a directory")

    def dir(self, cfg) -> Path:
        return self.root / cfg.run_id

    # -- results ---------------------------------------------------------------------------
    def read_json(self, path: Path, required: tuple[str, ...] = ()) -> Any | None:
        """JSON at ``path``; None if absent; a corrupt file is quarantined and None returned."""
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        try:
            obj = json.loads(text)
            missing = [k for k in required if k not in obj]
            if missing:
                raise ValueError(f"lacks {missing}")
        except (ValueError, TypeError, AttributeError) as e:
            quarantine(path, f"not a complete JSON record: {e}")
            return None
        return obj

    def result(self, cfg) -> dict | None:
        """The stored result of ``cfg``, or None (not finished, or its record was unreadable)."""
        res = self.read_json(self.dir(cfg) / "result.json", required=("status", "history", "config"))
        if res is not None and res.get("run_id") not in (None, cfg.run_id):
            quarantine(self.dir(cfg) / "result.json", f"belongs to run {res.get('run_id')}")
            return None
        return res

    def write_result(self, cfg, result: dict) -> None:
        atomic_write_text(self.dir(cfg) / "result.json", json.dumps(result, indent=1))

    def state(self, cfg) -> str:
        res = self.result(cfg)
        if res is not None:
            return "done" if res["status"] == "finished" else "diverged"
        d = self.dir(cfg)
        return "partial" if (d / "last.pt").exists() or (d / "metrics.json").exists() else "missing"

    # -- checkpoints -------------------------------------------------------------------------
    def _manifest(self, d: Path) -> dict:
        return self.read_json(d / "manifest.json") or {}

    def save_checkpoint(self, cfg, name: str, obj: Any) -> Path:
        """``torch.save`` to a writer-unique temporary file, record size and hash, rename into place."""
        import torch

        d = self.dir(cfg)
        d.mkdir(parents=True, exist_ok=True)
        path = d / name
        fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                torch.save(obj, f)
                f.flush()
                os.fsync(f.fileno())
            entry = dict(size=os.path.getsize(tmp), sha256=_sha256(Path(tmp)))
            manifest = self._manifest(d)
            manifest[name] = entry
            # The manifest first: a crash between the two leaves a record that does not match the
            # old file, which is then redone (never a new file trusted by an old record).
            atomic_write_text(d / "manifest.json", json.dumps(manifest, indent=1))
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    def load_checkpoint(self, cfg, name: str) -> dict | None:
        """A checkpoint of ``cfg`` checked against the manifest; None if absent.

        Raises :class:`CorruptFile` (naming the file) when it exists but is damaged; the file is
        moved aside first, so the next attempt redoes it.
        """
        import torch

        d = self.dir(cfg)
        path = d / name
        if not path.exists():
            return None
        entry = self._manifest(d).get(name)
        why = None
        if entry is None:
            why = "no size/hash record in manifest.json"
        elif os.path.getsize(path) != entry["size"]:
            why = f"size {os.path.getsize(path)} bytes, recorded {entry['size']}"
        elif _sha256(path) != entry["sha256"]:
            why = "SHA-256 differs from the recorded one"
        if why is None:
            try:
                return torch.load(path, map_location="cpu", weights_only=True)
            except Exception as e:  # noqa: BLE001  (torch raises many kinds for a damaged zip)
                why = f"torch.load failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        quarantine(path, why)
        raise CorruptFile(path, why)

    # -- one configuration, one training -------------------------------------------------------
    @contextlib.contextmanager
    def lock(self, key: str, poll: float = 1.0) -> Iterator[None]:
        """Hold the lock of ``key`` (a run id); other processes asking for it wait here."""
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / f"{key}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            while True:
                try:
                    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as e:
                    if e.errno not in (errno.EACCES, errno.EAGAIN):
                        raise
                    time.sleep(poll)
            yield
        finally:
            with contextlib.suppress(OSError):
                fcntl.lockf(fd, fcntl.LOCK_UN)
            os.close(fd)


def cached(cache_dir: str | os.PathLike | None, name: str, config: dict, compute) -> Any:
    """The JSON result of ``compute()`` for ``config``, computed only on a cache miss.

    For the computations that are not training runs (the Runge sweeps, the benchmarks): the same
    scheme as runs, ``cache_dir/<name>/<hash of config>.json`` written atomically, an unreadable
    entry reported and recomputed, and concurrent callers of one configuration serialised on a
    lock. ``cache_dir=None`` disables caching.
    """
    from .config import run_id

    if cache_dir is None:
        return compute()
    root = Path(cache_dir) / name
    key = run_id(json.loads(json.dumps(config, sort_keys=True, default=str)))
    path = root / f"{key}.json"
    store = RunStore(root)

    def read():
        entry = store.read_json(path, required=("config", "result"))
        return None if entry is None else entry["result"]

    hit = read()
    if hit is not None:
        return hit
    with store.lock(key):
        hit = read()
        if hit is not None:
            return hit
        atomic_write_text(path, json.dumps({"config": config, "result": compute()}, indent=1, default=float))
    return read()  # the same JSON round-trip as a cache hit
