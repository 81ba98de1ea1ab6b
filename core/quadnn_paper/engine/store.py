"""The run cache: one folder per configuration hash, written so that nothing is lost or mixed.

``<root>/<run_id>/`` holds ``config.json``, ``metrics.json`` (the curve so far), ``last.pt``
(resume checkpoint), ``stage<k>.pt`` (a conventional network's weights at the end of schedule
stage k, which weight transfer starts from), ``manifest.json``
(size and SHA-256 of every checkpoint and of the result, checked before either is used) and, last,
``result.json``, whose presence means "done, never run again"; a result is also checked against
its own curve (``history``, ``metrics.json``). Every file is written to a temporary file unique
to its writer, recorded in the manifest, and renamed into place; a writer that died between the
record and the rename leaves a complete temporary file that the next holder of the run's lock puts
in place. A file that cannot be read is reported with its path and moved aside (``*.corrupt``),
and the run is redone from what is still readable. Concurrent processes asking for the same
configuration serialise on ``<run_id>.lock`` (a POSIX record lock: it works on local and NFS file
systems); a waiter says who holds it, and a holder whose lock file was deleted stops at its next write.

The store answers only for what was asked: ``result.json`` carries the run's id and key (its
full configuration), every checkpoint its run id, ``manifest.json`` the run id, and a
``cached()`` entry its configuration; each is checked against the request when read, and one
that belongs to another run is reported with both identities and its path, moved aside and
redone. A result also records the fingerprint of the data it was trained on
(``data_fingerprint``); asked with another fingerprint, the store refuses it
(:class:`DataMismatch`) rather than return it or discard a teammate's valid result.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..common.files import (
    RefusedFile,
    atomic_write_bytes,
    atomic_write_text,
    file_lock,
    inside,
    open_own,
    quoted,
    read_own,
    remove_stale_temps,
    replace,
    sha256_file,
    write_temp,
)

__all__ = [
    "RunStore",
    "CorruptFile",
    "ForeignFile",
    "DataMismatch",
    "WorldSizeMismatch",
    "cached",
    "atomic_write_text",
    "atomic_write_bytes",
    "STATES",
]

# done: result.json says finished; diverged: result.json says it did not converge;
# partial: started (a checkpoint or curve exists), not finished; missing: nothing yet.
STATES = ("done", "diverged", "partial", "missing")


class CorruptFile(RuntimeError):
    """A cache file exists but cannot be read (truncated, wrong checksum, not the expected content)."""

    def __init__(self, path: Path, why: str):
        super().__init__(f"{path}: {quoted(why, 1000)}")  # (a why may quote the file: kept on one line)
        self.path = Path(path)


class ForeignFile(CorruptFile):
    """A cache file that belongs to another run (or configuration) than the one asked for."""


class DataMismatch(ValueError):
    """A stored run was trained on other data than the data the request reads."""


class WorldSizeMismatch(DataMismatch):
    """A stored run was trained by another number of processes (DDP ranks) than the request runs:
    the numbers differ (the float sums over ranks differ, and training amplifies that)."""


QUARANTINE_LOG = "quarantine.log"  # one line per file moved aside in a folder: when, where to, why


def _sha256(path: Path) -> str:
    """A cache file's SHA-256, read without following a link (the cache holds only our own files)."""
    return sha256_file(path, own=True)


def quarantine(path: Path, why: str) -> None:
    """Report an unreadable file with its path and move it aside, never delete it, with a note
    (:data:`QUARANTINE_LOG` in its folder), so it is redone, never reused. On a read-only cache it
    cannot be moved: then it is only reported (and still not used)."""
    path, why = Path(path), quoted(why, 1000)  # (a why quotes the file: one line, whatever it holds)
    aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
    try:
        os.replace(path, aside)
        done = f"moved to {aside.name}, redoing it"
        line = f"{time.strftime('%Y-%m-%d %H:%M:%S')} {quoted(path.name)} -> {quoted(aside.name)}: {why}\n"
        try:
            with os.fdopen(open_own(path.with_name(QUARANTINE_LOG), os.O_WRONLY | os.O_APPEND | os.O_CREAT), "a") as f:
                f.write(line)
        except RefusedFile as e:
            done += f" (not noted: {e})"
        except OSError:
            pass
    except FileNotFoundError:
        done = "already gone, redoing it"
    except OSError as e:
        done = f"cannot move it aside ({os.strerror(e.errno) if e.errno else e}), not using it"
    warnings.warn(f"quadnn_paper cache: {path} is unreadable ({why}); {done}", RuntimeWarning, stacklevel=3)


def _same(a, b) -> bool:
    """Equal as stored JSON (so a NaN equals itself, as its text does)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _who(run_id, describe: str | None = None) -> str:
    return f"run {run_id}" + (f" ({describe})" if describe else "")


def _describe(config: dict | None) -> str | None:
    """A stored configuration's label (as :meth:`RunConfig.describe`), or None if it has none."""
    from .config import RunConfig

    try:
        return RunConfig.from_dict(config).describe()
    except Exception:  # noqa: BLE001  (a foreign or older record: its id alone names it)
        return None


def _stored_key(res: dict) -> dict | None:
    """The key a result was written for: its ``key``, else (older records) the key of its config."""
    from .config import RunConfig

    if isinstance(res.get("key"), dict):
        return res["key"]
    try:
        return RunConfig.from_dict(res["config"]).key()
    except Exception:  # noqa: BLE001
        return None


def _manifest_shape(manifest) -> str | None:
    """Why ``manifest`` is not ``{"run_id": id, name: {"size": int, "sha256": hex}, ...}`` (None: it is)."""
    if not isinstance(manifest, dict):
        return f"a JSON {type(manifest).__name__}, expected an object of {{name: {{size, sha256}}}}"
    for name, entry in manifest.items():
        if name in ("run_id", "reverified"):
            continue
        if not (
            isinstance(entry, dict) and isinstance(entry.get("size"), int) and isinstance(entry.get("sha256"), str)
        ):
            return f"its entry {name!r} is {entry!r}, expected {{size, sha256}}"
    return None


def _entry(blob: bytes) -> dict:
    return dict(size=len(blob), sha256=hashlib.sha256(blob).hexdigest())


def _read_or_none(path: Path) -> bytes | None:
    try:
        return read_own(path)
    except OSError:
        return None


def _json_or_none(raw: bytes | None):
    try:
        return None if raw is None else json.loads(raw)
    except ValueError:
        return None


class RunStore:
    """The runs under ``root``, addressed by configuration (anything with ``run_id`` and ``key()``)."""

    def __init__(self, root: str | os.PathLike):
        from ..common.words import path_setting

        self.root = path_setting(root, "cache directory")
        if self.root.exists() and not self.root.is_dir():
            raise NotADirectoryError(f"cache directory {self.root} exists and is not a directory")

    def dir(self, cfg) -> Path:
        """The run's folder; a symbolic link in its place is refused, never followed."""
        return inside(self.root, cfg.run_id, "run folder")

    # -- results ---------------------------------------------------------------------------
    def read_json(self, path: Path, required: tuple[str, ...] = (), raw: bytes | None = None) -> Any | None:
        """JSON at ``path`` (or its bytes ``raw``, already read); None if absent; a corrupt file is
        quarantined and None returned."""
        try:
            text = read_own(path) if raw is None else raw
        except FileNotFoundError:
            return None
        try:
            obj = json.loads(text)
            if required and not isinstance(obj, dict):
                raise ValueError(f"a JSON {type(obj).__name__}, expected an object")
            missing = [k for k in required if k not in obj]
            if missing:
                raise ValueError(f"lacks {missing}")
        except (ValueError, TypeError, AttributeError) as e:
            quarantine(path, f"not a complete JSON record: {e}")
            return None
        return obj

    def result(self, cfg, data: str | None = None, world_size: int | None = None) -> dict | None:
        """The stored result of ``cfg``, or None (not finished, or its record was unreadable or
        belongs to another configuration, or its bytes or numbers are not those its run wrote:
        then it is reported and moved aside).

        ``data``: the fingerprint of the data the request reads (None: not checked). A result
        recorded with another fingerprint raises :class:`DataMismatch`; one recorded before
        fingerprints existed is accepted (nothing says it was other data).
        ``world_size``: the request's number of processes (None: not checked); a result of another
        number raises :class:`WorldSizeMismatch`."""
        path = self.dir(cfg) / "result.json"
        try:
            raw = read_own(path)  # one read: the hash and the record are of the same bytes
        except FileNotFoundError:
            return None
        res = self.read_json(path, required=("status", "history", "config"), raw=raw)
        if res is None:
            return None
        why = self._unbound(cfg, path, res, raw)
        if why is not None:
            quarantine(path, why)
            return None
        stored_id, stored_key = res.get("run_id"), _stored_key(res)
        if stored_id != cfg.run_id or stored_key != cfg.key():
            quarantine(
                path,
                f"it is the result of {_who(stored_id, _describe(res.get('config')))}, "
                f"not of the requested {_who(cfg.run_id, cfg.describe())}"
                + ("" if stored_id != cfg.run_id else " (same id, other configuration)"),
            )
            return None
        if world_size is not None and res.get("world_size", 1) != world_size:
            raise WorldSizeMismatch(
                f"{path} was trained by {quoted(res.get('world_size', 1), 40)} process(es), the request runs "
                f"{world_size}: their numbers differ, so it is not returned. Ask with as many processes, or "
                f"train this one into another cache directory"
            )
        recorded = res.get("data_fingerprint")
        if data is not None and recorded is not None and recorded != data:
            raise DataMismatch(
                f"{path} was trained on data {quoted(recorded, 100)}, but the data the request reads "
                f"({getattr(cfg, 'data_dir', '?')}) is {data}: not returned. Point data_dir at the data it was "
                f"trained on, or move {path.parent} aside to train this configuration on this data"
            )
        return res

    def _unbound(self, cfg, path: Path, res: dict, raw: bytes) -> str | None:
        """Why the result at ``path`` is not the one its run wrote (None: it is): its bytes differ
        from the SHA-256 the manifest recorded for it, or its numbers disagree with its own curve
        (``history``) or with ``metrics.json``, or no manifest records it (a result is served only
        with its manifest: one whose manifest was deleted could have been edited at will)."""
        entry = self._manifest(cfg).get("result.json")
        if entry is None:
            return "no record of it in manifest.json (a result is served only with its manifest)"
        if hashlib.sha256(raw).hexdigest() != entry.get("sha256"):
            return "SHA-256 differs from the one recorded in manifest.json (edited after it was written?)"
        history = res.get("history")
        if not isinstance(history, list) or res.get("epochs_run", len(history)) != len(history):
            return f"epochs_run {res.get('epochs_run')!r} does not match its history"
        metrics = res.get("metrics") or {}
        last = history[-1] if history and isinstance(history[-1], dict) else {}
        for k, v in metrics.items():
            if not (_same(res.get(k), v) and _same(last.get(k), v)):
                return f"{k} is {res.get(k)!r}, metrics say {v!r} and the last epoch of its history {last.get(k)!r}"
        if res.get("best_test_error") is not None:
            best = min((h["test_error"] for h in history if h.get("test_error") is not None), default=None)
            if not _same(best, res["best_test_error"]):
                return f"best_test_error is {res['best_test_error']!r}, its history says {best!r}"
        curve = self.read_json(path.with_name("metrics.json"))
        if curve is not None and not _same(curve, history):
            return "its history differs from metrics.json"
        return None

    def write_result(self, cfg, result: dict) -> None:
        """``result.json``, recorded in the manifest (size and SHA-256) like a checkpoint: a result
        edited or damaged after it was written is then moved aside and redone, never served."""
        self._commit(cfg, "result.json", json.dumps(result, indent=1).encode())

    def state(self, cfg) -> str:
        res = self.result(cfg)
        if res is not None:
            return "done" if res["status"] == "finished" else "diverged"
        d = self.dir(cfg)
        return "partial" if (d / "last.pt").exists() or (d / "metrics.json").exists() else "missing"

    # -- checkpoints -------------------------------------------------------------------------
    def _manifest(self, cfg) -> dict:
        """The run's manifest; one written for another run is reported and moved aside; a damaged
        one (unreadable, or not ``{name: {size, sha256}}``) is moved aside and rebuilt from the run's
        files (:meth:`_reverify`), so a finished run is not retrained for its manifest's sake."""
        path = self.dir(cfg) / "manifest.json"
        try:
            raw = read_own(path)
        except FileNotFoundError:
            return {}
        try:
            manifest = json.loads(raw)
            why = _manifest_shape(manifest)
        except (ValueError, TypeError) as e:
            manifest, why = None, f"not JSON ({e})"
        if why is not None:
            quarantine(path, f"not a manifest: {why}; rebuilding it from the run's files")
            return self._reverify(cfg)
        if manifest.get("run_id", cfg.run_id) != cfg.run_id:  # (older manifests carry no id)
            quarantine(
                path,
                f"it is the manifest of {_who(manifest['run_id'])}, "
                f"not of the requested {_who(cfg.run_id, cfg.describe())}",
            )
            return {}
        return manifest

    def _reverify(self, cfg) -> dict:
        """A manifest rebuilt from the run's files after its own was damaged: each checkpoint that
        loads and carries this run's id, and ``result.json`` if it is this run's and agrees with its
        own curve and every stage checkpoint it lists is among them (its numbers are then checked
        against its curve on every read, as always). What fails is left out, so it is moved aside
        when asked for. (SHA-256 guards against damage, not against a forger, who could rehash.)"""
        import torch

        d, manifest = self.dir(cfg), {"run_id": cfg.run_id}
        verified = set()
        for ck_path in sorted(d.glob("*.pt")):
            try:
                blob = read_own(ck_path)
                ck = torch.load(io.BytesIO(blob), map_location="cpu", weights_only=True)
            except Exception:  # noqa: BLE001  (damaged or a link: left out, so moved aside when asked for)
                continue
            if isinstance(ck, dict) and ck.get("run_id") == cfg.run_id:
                manifest[ck_path.name] = _entry(blob)
                verified.add(ck_path.name)
        raw = _read_or_none(d / "result.json")
        res = _json_or_none(raw)
        if isinstance(res, dict) and res.get("run_id") == cfg.run_id and _stored_key(res) == cfg.key():
            stages = res.get("stage_checkpoints") or {}
            if isinstance(stages, dict) and all(name in verified for name in stages.values()):
                manifest["result.json"] = _entry(raw)
        manifest["reverified"] = f"rebuilt from the run's files at {time.strftime('%Y-%m-%d %H:%M:%S')}"
        with contextlib.suppress(OSError):  # (a read-only cache: used in memory, not written)
            atomic_write_text(d / "manifest.json", json.dumps(manifest, indent=1))
        return manifest

    def save_checkpoint(self, cfg, name: str, obj: dict, data: str | None = None) -> Path:
        """``obj`` stamped with the run's id (and ``data``, its data's fingerprint) saved to a
        writer-unique temporary file; its size and hash recorded; then renamed into place."""
        import torch

        buf = io.BytesIO()  # serialised in memory: a full disk is then an OSError naming the file
        torch.save(dict(obj, run_id=cfg.run_id, **({"data_fingerprint": data} if data else {})), buf)
        self._commit(cfg, name, buf.getbuffer())  # a view, not a copy: a checkpoint may be gigabytes
        return self.dir(cfg) / name

    def _commit(self, cfg, name: str, blob: bytes | memoryview) -> None:
        """``blob`` into the run's ``name``: a complete temporary file, its size and hash in the
        manifest, then the rename. The manifest first: a crash between the two leaves a record that
        does not match the old file but matches the temporary one, which the next holder of the
        run's lock then puts in place (:meth:`adopt_temps`); never a new file trusted by an old record."""
        d = self.dir(cfg)
        tmp = write_temp(d / name, blob)
        try:
            manifest = self._manifest(cfg)
            manifest[name] = dict(size=len(blob), sha256=hashlib.sha256(blob).hexdigest())
            manifest["run_id"] = cfg.run_id
            atomic_write_text(d / "manifest.json", json.dumps(manifest, indent=1))
            replace(tmp, d / name)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    @staticmethod
    def adopt_temps(folder: Path) -> list[str]:
        """Put in place each temporary file of ``folder`` that its manifest records while the file
        under its name does not match the record (its writer died between the manifest and the
        rename): complete work is kept, not retrained. Only for the holder of the run's lock."""
        manifest = _json_or_none(_read_or_none(folder / "manifest.json")) or {}
        if _manifest_shape(manifest) is not None:
            return []  # (a damaged manifest records nothing to adopt; its first reader rebuilds it)
        adopted = []
        for name, entry in manifest.items():
            if not isinstance(entry, dict) or "sha256" not in entry or "/" in name:
                continue
            path = folder / name
            with contextlib.suppress(OSError):
                if path.exists() and os.path.getsize(path) == entry["size"] and _sha256(path) == entry["sha256"]:
                    continue
            for tmp in folder.glob(f".{name}.*.tmp"):
                with contextlib.suppress(OSError):
                    if os.path.getsize(tmp) == entry["size"] and _sha256(tmp) == entry["sha256"]:
                        os.replace(tmp, path)
                        adopted.append(name)
                        break
        return adopted

    def load_checkpoint(self, cfg, name: str, data: str | None = None) -> dict | None:
        """A checkpoint of ``cfg`` checked against the manifest and its run identity; None if absent.

        Raises :class:`CorruptFile` (naming the file) when it exists but is damaged, and
        :class:`ForeignFile` when it belongs to another run or was trained on other data than
        ``data``; the file is moved aside first, so the next attempt redoes it. A stage
        checkpoint written before checkpoints carried their id is accepted when the run's result
        (which carries its full configuration) is the requested one.
        """
        import torch

        d = self.dir(cfg)
        path = d / name
        if not os.path.lexists(path):
            return None
        entry = self._manifest(cfg).get(name)
        why, foreign = None, False
        if path.is_symlink():
            why = f"a symbolic link (to {quoted(os.readlink(path))}); the cache follows no link"
        elif entry is None:
            why = "no size/hash record in manifest.json"
        elif os.path.getsize(path) != entry["size"]:
            why = f"size {os.path.getsize(path)} bytes, recorded {entry['size']}"
        elif _sha256(path) != entry["sha256"]:
            why = "SHA-256 differs from the recorded one"
        if why is None:
            try:
                with os.fdopen(open_own(path), "rb") as f:
                    ck = torch.load(f, map_location="cpu", weights_only=True)
            except Exception as e:  # noqa: BLE001  (torch raises many kinds for a damaged zip)
                why = f"torch.load failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        if why is None:
            owner = ck.get("run_id") if isinstance(ck, dict) else None
            recorded = ck.get("data_fingerprint") if isinstance(ck, dict) else None
            legacy = owner is None and name != "last.pt" and self.result(cfg) is not None
            if owner != cfg.run_id and not legacy:
                why, foreign = (
                    (
                        f"it is a checkpoint of {_who(owner) if owner else 'an unnamed run'}, "
                        f"not of the requested {_who(cfg.run_id, cfg.describe())}"
                    ),
                    True,
                )
            elif data is not None and recorded is not None and recorded != data:
                why, foreign = (f"it was trained on data {recorded}, the requested run reads data {data}"), True
            else:
                return ck
        quarantine(path, why)
        raise (ForeignFile if foreign else CorruptFile)(path, why)

    # -- one configuration, one training -------------------------------------------------------
    @contextlib.contextmanager
    def lock(self, key: str, poll: float = 1.0, timeout: float | None = None) -> Iterator[None]:
        """Hold the lock of ``key`` (a run id, or a cached entry's hash); other processes asking for
        it wait here (``timeout`` seconds at most, then TimeoutError; 0: one try). Every writer of
        the key's files holds it, so the holder removes the temporary files a dead writer left
        (``.last.pt.<random>.tmp`` after a SIGTERM, ...)."""
        waiting = f"run {key}: another process trains it (or computes it)"
        with file_lock(self.root / f"{key}.lock", poll, timeout, waiting=waiting):
            folder = inside(self.root, key, "run folder")  # (a link in its place: refused, not cleaned)
            if folder.is_dir():
                self.adopt_temps(folder)
                remove_stale_temps(folder)
            remove_stale_temps(self.root, f"{key}.*")
            yield


def cached(cache_dir: str | os.PathLike | None, name: str, config: dict, compute) -> Any:
    """The JSON result of ``compute()`` for ``config``, computed only on a cache miss
    (``compute=None``: only look, None on a miss).

    For the computations that are not training runs (the Runge sweeps, the benchmarks): the same
    scheme as runs, ``cache_dir/<name>/<hash of config>.json`` written atomically, an unreadable
    entry reported and recomputed, and concurrent callers of one configuration serialised on a
    lock. Each entry records the size and SHA-256 of its result (:func:`_result_record`), as a
    run's manifest does for its files: an entry whose result differs from its record, or that
    has none, is quarantined and recomputed, never served. ``cache_dir=None`` disables caching.
    """
    from ..common.words import path_setting
    from .config import run_id

    if cache_dir is None:
        return compute()
    root = inside(path_setting(cache_dir, "cache_dir"), name, "computation folder")
    key = run_id(json.loads(json.dumps(config, sort_keys=True, default=str)))
    path = root / f"{key}.json"
    store = RunStore(root)

    asked = json.loads(json.dumps(config, default=float))  # the configuration as an entry stores it

    def read():
        entry = store.read_json(path, required=("config", "result"))
        if entry is not None and entry["config"] != asked:
            quarantine(
                path,
                f"it is the entry of another configuration (hash {run_id(entry['config'])}), "
                f"not of the requested {key}",
            )
            return None
        if entry is not None and _result_record(entry["result"]) != entry.get("record"):
            quarantine(
                path,
                "its result has no size and SHA-256 record"
                if "record" not in entry
                else "its result differs from its recorded size and SHA-256 (damaged or edited after it was written?)",
            )
            return None
        return None if entry is None else entry["result"]

    hit = read()
    if hit is not None or compute is None:
        return hit
    with store.lock(key):
        hit = read()
        if hit is not None:
            return hit
        result = json.loads(json.dumps(compute(), default=float))  # as a hit reads it back
        entry = {"config": config, "result": result, "record": _result_record(result)}
        atomic_write_text(path, json.dumps(entry, indent=1, default=float))
    return read()  # the same JSON round-trip as a cache hit


def _result_record(result) -> dict:
    """The size and SHA-256 of a cached result, taken over its canonical JSON (sorted keys), so
    the record is of the value, whatever the entry's layout."""
    return _entry(json.dumps(result, sort_keys=True).encode())
