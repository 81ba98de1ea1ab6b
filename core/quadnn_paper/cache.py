"""Results cached by configuration: a finished configuration is never computed twice.

An entry lives at ``cache_dir/<name>/<hash of config>.json``; it is written atomically
(temporary file + rename), so an interrupted run leaves no half-written result.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable


def config_hash(config: Any) -> str:
    """A stable 16-hex-digit hash of a JSON-serialisable configuration."""
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cached(cache_dir: str | os.PathLike | None, name: str, config: dict, compute: Callable[[], Any]) -> Any:
    """Return the JSON result of ``compute()`` for ``config``, computing it only on a cache miss.

    ``cache_dir=None`` disables caching. The stored file keeps the config beside the result.
    """
    if cache_dir is None:
        return compute()
    path = Path(cache_dir) / name / f"{config_hash(config)}.json"
    if path.exists():
        return json.loads(path.read_text())["result"]
    result = compute()
    atomic_write_text(path, json.dumps({"config": config, "result": result}, indent=1, default=float))
    return json.loads(path.read_text())["result"]  # the same round-trip as a cache hit
