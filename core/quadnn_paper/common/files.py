"""Files written all or nothing (a temporary file unique to the writer, then a rename), their
checksums, file locks, and folders only their owner can write (a runner loads pickles from
them). Free of torch, so the report tools (``tools/paper_check.py``) and the
runners' job processes can use it too.

A cache a team shares: every file is created with the mode the writer's umask gives (``mkstemp``
alone would make it 0600, unreadable to teammates), so with ``umask 002`` and a setgid group
directory (``chgrp team cache && chmod g+s cache``) results, checkpoints and locks are group-readable
and group-writable, and new folders inherit the group. A write that fails for want of space or
permission raises one line naming the file and the cause; what was there before is untouched.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "atomic_write_bytes",
    "atomic_write_text",
    "write_temp",
    "replace",
    "sha256_file",
    "sha256_file_cached",
    "file_lock",
    "lock_held",
    "lock_holder",
    "check_held",
    "LockLost",
    "umask",
    "CacheWriteError",
    "remove_stale_temps",
    "private_dir",
    "make_dirs",
    "user_dir",
    "check_private",
    "load_private_pickle",
    "read_json",
    "RefusedFile",
    "quoted",
    "open_own",
    "read_own",
    "inside",
    "flock_fd",
    "flocked",
    "read_bounded",
]

# Errors of the file system, not of the program: reported as one line naming the file.
_STORAGE_ERRORS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
}


class CacheWriteError(OSError):
    """A file could not be written (disk full, quota, read-only, permissions): one line naming it."""


class RefusedFile(OSError):
    """A file not opened: a symbolic link where only the project's own files belong, something
    other than a regular file, a path leaving its folder, or a file over its bound. One line."""

    def __str__(self) -> str:
        return str(self.strerror)


def quoted(text, limit: int = 300) -> str:
    """``text`` read from a file, safe to put into a log or a message: every character that is not
    printable (a newline, a terminal escape) written as its escape, so it never starts a line of
    its own, and at most ``limit`` characters."""
    s = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))
    return s if len(s) <= limit else s[:limit] + "..."


OWN = "where quadnn_paper keeps only files it wrote itself"  # the folders of open_own, by default


def _refuse_link(path, e: OSError, where: str = OWN) -> OSError:
    if e.errno != errno.ELOOP:
        return e
    with contextlib.suppress(OSError):
        return RefusedFile(
            errno.ELOOP,
            f"refusing {path}: a symbolic link (to {quoted(os.readlink(path))}) {where}; it follows no link "
            "there: remove it",
        )
    return RefusedFile(errno.ELOOP, f"refusing {path}: a symbolic link loop on its way; remove it")


def open_own(path: str | os.PathLike, flags: int = os.O_RDONLY, mode: int = 0o666, *, where: str = OWN) -> int:
    """A descriptor of ``path``, one of the project's own files in a cache or paper folder (or a
    data file: ``where`` names the folder in the messages): a symbolic link there is refused, never
    followed (``O_NOFOLLOW``: a teammate's link must not make us write into another user's file),
    and so is anything but a regular file (a FIFO would block, a device never end). One
    :class:`RefusedFile` line naming it."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as e:
        raise _refuse_link(path, e, where) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise RefusedFile(errno.EINVAL, f"refusing {path}: not a regular file ({_kind(st.st_mode)}) {where}")
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    return fd


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "a directory" if stat.S_ISDIR(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file"


def read_own(path: str | os.PathLike) -> bytes:
    """The bytes of one of the project's own files (:func:`open_own`: no link followed)."""
    with os.fdopen(open_own(path), "rb") as f:
        return f.read()


def inside(folder: str | os.PathLike, relative, what: str = "path") -> Path:
    """``folder / relative`` for a path read from a file (a journal, a stamp, a record), which is
    data: it must be a non-empty relative path without ``..``, and no part of it below ``folder``
    may be a symbolic link, so it resolves inside ``folder``. Else one :class:`RefusedFile` line."""
    folder = Path(folder)
    bad = None
    if not isinstance(relative, str) or not relative or "\0" in relative:
        bad = "not a non-empty path"
    elif Path(relative).is_absolute() or ".." in Path(relative).parts:
        bad = "it leaves the folder (an absolute path or '..')"
    else:
        p = folder
        for part in Path(relative).parts:
            p = p / part
            if p.is_symlink():
                bad = f"{p} is a symbolic link (a link out of the folder is never followed)"
                break
    if bad:
        raise RefusedFile(errno.EINVAL, f"refusing the {what} {quoted(repr(relative))} under {folder}: {bad}")
    return folder / relative


def flock_fd(path: str | os.PathLike, wait: bool = True) -> int | None:
    """A descriptor of ``path`` (created, no link followed) holding its ``flock(2)`` lock, or None
    when ``wait`` is false and another holds it. The lock belongs to this descriptor: another one,
    even in this process, does not get it, and closing another does not release it (unlike
    :func:`file_lock`'s record locks), so a process can ask whether its own holder is alive.
    Released when the descriptor is closed, or its process dies."""
    path = Path(path)
    try:
        make_dirs(path.parent)
        fd = open_own(path, os.O_RDWR | os.O_CREAT)
    except RefusedFile:
        raise
    except OSError as e:
        raise _storage_error(path, e) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def flocked(path: str | os.PathLike, wait: bool = True) -> Iterator[bool]:
    """Hold :func:`flock_fd`'s lock of ``path`` inside the block; yields False (not held) when
    ``wait`` is false and another holds it."""
    fd = flock_fd(path, wait)
    try:
        yield fd is not None
    finally:
        if fd is not None:
            os.close(fd)


def read_bounded(path: str | os.PathLike, bound: int, what: str = "file") -> bytes:
    """The bytes of a data file, at most ``bound``: a regular file only (a FIFO would block, a
    device such as /dev/zero never end), read at most ``bound`` + 1 bytes, whatever its size
    says. Anything else is one :class:`RefusedFile` line naming it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise e.__class__(e.errno, f"{path}: cannot read it ({os.strerror(e.errno)})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise RefusedFile(errno.EINVAL, f"{path}: not a regular file ({_kind(st.st_mode)}); a {what} is a file")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        blob = f.read(min(bound, st.st_size) + 1)  # (a buffer of the size it says, not of the bound)
        while len(blob) <= bound:  # it grew while read: on, to the bound plus one byte
            more = f.read(min(1 << 20, bound + 1 - len(blob)))
            if not more:
                break
            blob += more
    if len(blob) > bound:
        raise RefusedFile(errno.EFBIG, f"{path}: more than a {what}'s bound of {bound} bytes; refused")
    return blob


def umask() -> int:
    """The process's umask, read without changing it (Linux's /proc; elsewhere set and reset)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _team_bits(folder: Path, bits: int) -> int:
    """The group permission bits (of ``bits``) that ``folder`` asks its new entries to keep: those it
    grants its group when it is a setgid folder (a team's shared cache, as docs/reliability.md sets
    it up), so one member's stricter umask does not lock the others out; 0 elsewhere."""
    try:
        st = os.stat(folder)
    except OSError:
        return 0
    return st.st_mode & bits if st.st_mode & stat.S_ISGID else 0


def make_dirs(folder: Path) -> None:
    """``folder`` and the folders above it that are missing, each keeping the group permissions of
    a setgid folder above it (:func:`_team_bits`). A full disk is one line naming the folder."""
    folder = Path(folder)
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:
            continue
        except OSError as e:
            raise _storage_error(d, e) from None
        extra = _team_bits(d.parent, 0o070)
        if extra and (os.stat(d).st_mode & extra) != extra:
            os.chmod(d, stat.S_IMODE(os.stat(d).st_mode) | extra)


def _storage_error(path: Path, e: OSError) -> OSError:
    if e.errno in _STORAGE_ERRORS:
        return CacheWriteError(
            e.errno,
            f"cannot write {path}: {_STORAGE_ERRORS[e.errno]} "
            f"({os.strerror(e.errno)}); the previous file, if any, is unchanged",
        )
    return e


# Fault injection, for the tests that kill a training at every write of the store in turn:
# QUADNN_FAULT="N:SIGNAL" sends SIGNAL (KILL, TERM, STOP) to this process just before its N-th store
# operation (1-based; each write, fsync and rename of write_temp / replace counts one), and
# QUADNN_FAULT_LOG=FILE appends one line "op path" per operation, so a clean run counts the points.
_FAULT_COUNT = [0]


def _fault_point(op: str, path: Path) -> None:
    log, at = os.environ.get("QUADNN_FAULT_LOG"), os.environ.get("QUADNN_FAULT")
    if not (log or at):
        return
    _FAULT_COUNT[0] += 1
    if log:
        with open(log, "a") as f:
            f.write(f"{op} {path}\n")
    if at:
        n, _, sig = at.partition(":")
        if _FAULT_COUNT[0] == int(n):
            import signal

            os.kill(os.getpid(), getattr(signal, f"SIG{sig or 'KILL'}"))
            if sig != "STOP":  # (STOP: a test continues it later)
                time.sleep(60)  # a handled SIGTERM returns here: the handler decides what happens next


def replace(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """``os.replace`` (atomic on one file system), a fault-injection point."""
    _fault_point("rename", Path(dst))
    os.replace(src, dst)


def write_temp(path: str | os.PathLike, data: bytes) -> Path:
    """``data`` in a new temporary file next to ``path`` (flushed to disk, mode from the umask);
    the caller renames it into place. Named ``.<name>.<random>.tmp``: :func:`remove_stale_temps`."""
    path = Path(path)
    try:
        make_dirs(path.parent)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise _storage_error(path, e) from None
    try:
        # mkstemp's 0600 would hide results from the team; a setgid folder's group keeps its rights
        os.fchmod(fd, (0o666 & ~umask()) | _team_bits(path.parent, 0o060))
        with os.fdopen(fd, "wb") as f:
            _fault_point("write", path)
            _check_guards(path)
            f.write(data)
            f.flush()
            _fault_point("fsync", path)
            os.fsync(f.fileno())
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise _storage_error(path, e) from None
        raise
    return Path(tmp)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``path`` through a temporary file in its folder, flushed to disk, and a rename."""
    tmp = write_temp(path, data)
    try:
        replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise _storage_error(Path(path), e) from None


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def remove_stale_temps(folder: str | os.PathLike, names: str = "*") -> list[Path]:
    """Remove the temporary files (``.<name>.*.tmp``, ``name`` matching ``names``) in ``folder``.

    Only to be called by the holder of the lock every writer of those files holds: then no writer
    of them is alive, so each one is left by a writer that died (SIGTERM, OOM, node failure)."""
    gone = []
    for tmp in Path(folder).glob(f".{names}.*.tmp"):
        with contextlib.suppress(OSError):
            tmp.unlink()
            gone.append(tmp)
    return gone


def sha256_file(path: str | os.PathLike, own: bool = False) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB blocks; ``own``: one of the project's own
    files, opened without following a link (:func:`open_own`)."""
    h = hashlib.sha256()
    with open(path, "rb") if not own else os.fdopen(open_own(path), "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


_DIGESTS: dict[tuple, str] = {}


def sha256_file_cached(path: str | os.PathLike) -> str:
    """:func:`sha256_file`, remembered in this process while the file's device, inode, size and
    modification time stay the same (a rewrite changes them), so asking again costs one stat."""
    st = os.stat(path)
    key = (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        _DIGESTS[key] = sha256_file(path)
    return _DIGESTS[key]


def lock_holder(path: str | os.PathLike) -> str:
    """Who holds the lock at ``path``, as its holder wrote it: "host H, pid P, since T" (or less)."""
    try:
        who = json.loads(read_own(path) or "{}")
    except (OSError, ValueError):
        who = {}
    if not isinstance(who, dict) or "pid" not in who:
        return "another process"
    try:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(who.get("since", 0))))
    except (TypeError, ValueError, OverflowError, OSError):
        since = "?"
    return f"pid {quoted(who['pid'], 40)} on {quoted(who.get('host', '?'), 100)} since {since}"


@contextlib.contextmanager
def file_lock(
    path: str | os.PathLike, poll: float = 1.0, timeout: float | None = None, waiting: str | None = None
) -> Iterator[None]:
    """Hold the POSIX record lock of ``path`` (created if missing); other processes wait here, at
    most ``timeout`` seconds (then TimeoutError; 0: one try) when given. ``fcntl.lockf`` holds
    between machines on NFS too. A process holds a lock once: closing any descriptor of that file
    releases it, so never take the same lock twice in one process.

    The holder writes who it is (host, pid, since when) into the file; a waiter given ``waiting``
    (what it waits for) prints one line naming the holder. A lock that cannot be created (read-only
    cache, permissions) is one :class:`CacheWriteError` naming it; a file system without POSIX
    locks is one OSError saying what to mount."""
    import socket
    import sys

    path = Path(path)
    start = time.monotonic()
    try:
        make_dirs(path.parent)
        fd = open_own(path, os.O_RDWR | os.O_CREAT)  # the umask decides (and a setgid folder); no link
        extra = _team_bits(path.parent, 0o060)
        st = os.fstat(fd)
        if extra and st.st_uid == os.getuid() and (st.st_mode & extra) != extra:
            os.fchmod(fd, stat.S_IMODE(st.st_mode) | extra)
    except RefusedFile:
        raise
    except OSError as e:
        raise _storage_error(path, e) from None
    try:
        told = False
        while True:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno in NO_LOCKS:
                    raise OSError(e.errno, no_locks_message(path)) from None
                if e.errno not in (errno.EACCES, errno.EAGAIN):
                    raise
                if timeout is not None and time.monotonic() - start >= timeout:
                    raise TimeoutError(f"{path} is held by {lock_holder(path)}") from None
                if waiting and not told:
                    print(f"{waiting}: waiting for {path}, held by {lock_holder(path)}", file=sys.stderr, flush=True)
                    told = True
                time.sleep(poll)
        with contextlib.suppress(OSError):
            me = json.dumps(dict(host=socket.gethostname(), pid=os.getpid(), since=time.time())).encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, me, 0)
        st = os.fstat(fd)
        _HELD[str(path)] = (st.st_dev, st.st_ino)
        yield
    finally:
        _HELD.pop(str(path), None)
        with contextlib.suppress(OSError):
            fcntl.lockf(fd, fcntl.LOCK_UN)
        os.close(fd)


class LockLost(CacheWriteError):
    """The file of a lock this process holds was deleted or replaced (its cache removed mid-run):
    another process may now hold the lock by that name, so this one must stop writing."""


_HELD: dict[str, tuple[int, int]] = {}  # lock path -> (device, inode) this process locked


def check_held(path: str | os.PathLike) -> None:
    """Raise :class:`LockLost` when this process holds the lock at ``path`` by :func:`file_lock` but
    the name no longer leads to the locked file; nothing when it does or when it is not held here."""
    held = _HELD.get(str(path))
    if held is None:
        return
    try:
        st = os.stat(path)
        now = (st.st_dev, st.st_ino)
    except FileNotFoundError:
        now = None
    if now != held:
        raise LockLost(
            errno.ENOENT,
            f"the lock {path} was deleted while this process held it (its cache removed mid-run?): "
            f"stopping, since another process may now train the same run into the same folder",
        )


def _check_guards(path: Path) -> None:
    """Before writing ``path``: the lock guarding its folder (``<folder>.lock`` beside it), if this
    process holds it, must still be the lock by that name (:func:`check_held`)."""
    for lock in list(_HELD):
        if Path(lock).with_suffix("") == path.parent:
            check_held(lock)


# What lockf answers on a file system mounted without POSIX locks (Lustre without -o flock: ENOSYS).
NO_LOCKS = (errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOLCK)


def no_locks_message(path) -> str:
    return (
        f"file locks are not supported where {path} lives (fcntl.lockf: no locks on this mount): mount it "
        "with -o flock (Lustre; -o localflock if every job runs on one node) or put the run cache "
        "(make paper's build/cache, quadnn-train --out) on a file system with POSIX locks"
    )


def lock_held(path: str | os.PathLike) -> bool:
    """Whether another process holds :func:`file_lock` on ``path`` (not to be asked by the
    process that holds it: closing the probe would release its lock)."""
    try:
        fd = open_own(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EACCES, errno.EAGAIN):
            return True
        if e.errno in NO_LOCKS:
            raise OSError(e.errno, no_locks_message(path)) from None
        raise
    finally:
        os.close(fd)
    return False


def private_dir(path: Path) -> Path:
    """``path`` created if missing and made writable by its owner only (whatever the umask), since
    job pickles are loaded from under it."""
    try:
        make_dirs(path.parent)
        path.mkdir(exist_ok=True)
    except OSError as e:
        raise _storage_error(path, e) from None
    mode = path.stat().st_mode
    if mode & 0o022 and path.stat().st_uid == os.getuid():
        os.chmod(path, stat.S_IMODE(mode) & ~0o022)
    return path


def user_dir(folder: Path) -> Path:
    """``folder/<user name>``: a folder of this user's own inside a folder a team may share (the
    runners' job records: each user's are private, as their pickles require, while the shared
    folder above stays writable by the team)."""
    import pwd

    try:
        name = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:  # (a uid without a passwd entry, as in some containers)
        name = f"uid{os.getuid()}"
    return Path(folder) / name


def check_private(path: Path, top: Path) -> None:
    """Refuse ``path`` when it, or a folder between it and ``top``, is not ours or is writable by
    others: whoever can write there could make us unpickle (run) their code. As ssh does for keys."""
    path, top = Path(path).absolute(), Path(top).absolute()
    for p in (path, *[q for q in path.parents if q == top or top in q.parents]):
        st = p.stat()
        if st.st_uid not in (os.getuid(), 0):
            raise PermissionError(
                f"refusing to load {path}: {p} belongs to uid {st.st_uid}, not to us "
                f"(uid {os.getuid()}), so another user could have put code there"
            )
        if st.st_mode & 0o022:
            raise PermissionError(
                f"refusing to load {path}: {p} is writable by "
                f"{'group and others' if st.st_mode & 0o002 else 'its group'} "
                f"(mode {stat.filemode(st.st_mode)}), so others could have put code there; "
                f"`chmod go-w {p}` if that is wanted"
            )


def load_private_pickle(path: Path, top: Path):
    """The pickled object (a runner's job) at ``path``, after :func:`check_private` up to ``top``."""
    import pickle

    check_private(path, top)
    with open(path, "rb") as f:
        return pickle.load(f)


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(Path(path).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
