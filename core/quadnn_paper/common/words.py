"""Settings given as words (make variables, environment variables, notebook parameters), read
strictly: one reader per kind, and anything it does not know is an error naming the value and
the choices, never a guess (a bare non-empty test takes ``WAIT=no`` for yes)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["TRUE", "FALSE", "boolean", "env_boolean", "path_setting"]

TRUE = ("1", "true", "yes")
FALSE = ("0", "false", "no")


def boolean(value, name: str) -> bool:
    """``value`` as a boolean: True/False themselves, or one of the words :data:`TRUE` and
    :data:`FALSE` (any case, surrounding blanks ignored); anything else is a ValueError naming
    ``name``, the value and the choices."""
    if isinstance(value, bool):
        return value
    word = value.strip().lower() if isinstance(value, str) else None
    if word in TRUE:
        return True
    if word in FALSE:
        return False
    raise ValueError(
        f"{name}={value!r} is not a boolean: use one of {', '.join(TRUE)} (on) or {', '.join(FALSE)} (off)"
    )


def env_boolean(name: str, default: bool) -> bool:
    """The environment variable ``name`` read by :func:`boolean`; unset or empty: ``default``."""
    value = os.environ.get(name, "")
    return default if not value.strip() else boolean(value, name)


def path_setting(value, name: str) -> Path:
    """A folder named by a setting (``cache_dir``, ``paper_dir``): an empty or blank path is an
    error (it would mean the current folder, wherever the process runs), not a default."""
    if not isinstance(value, (str, os.PathLike)) or not str(os.fspath(value)).strip():
        raise ValueError(f"{name}={value!r} is not a folder: give a path (e.g. build/cache), not an empty one")
    return Path(value)
