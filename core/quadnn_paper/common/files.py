"""Files written all or nothing (a temporary file unique to the writer, then a rename), their
checksums, and file locks. Free of torch, so the report tools (``tools/paper_check.py``) and the
runners' job processes can use it too.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import tempfile
import time
from pathlib import Path
from typing import Iterator

__all__ = ["atomic_write_bytes", "atomic_write_text", "sha256_file", "file_lock", "lock_held"]


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``path`` through a temporary file in its folder, flushed to disk, and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def sha256_file(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@contextlib.contextmanager
def file_lock(path: str | os.PathLike, poll: float = 1.0) -> Iterator[None]:
    """Hold the POSIX record lock of ``path`` (created if missing); other processes wait here.
    ``fcntl.lockf`` holds between machines on NFS too. A process holds a lock once: closing any
    descriptor of that file releases it, so never take the same lock twice in one process."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
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


def lock_held(path: str | os.PathLike) -> bool:
    """Whether another process holds :func:`file_lock` on ``path`` (not to be asked by the
    process that holds it: closing the probe would release its lock)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EACCES, errno.EAGAIN):
            return True
        raise
    finally:
        os.close(fd)
    return False
