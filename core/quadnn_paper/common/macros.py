"""LaTeX macro files, written and read in one place: a ``%`` comment line, then one
``\\newcommand{\\Name}{value}`` per line (``paper/variables/*.tex``: a section's numbers, the
paper's, the ledger's tally, the build's identity), or ``\\def\\Name{value}`` for a macro the LaTeX
tests against ``\\empty`` with ``\\ifx`` (a ``\\newcommand`` is ``\\long``, so never equal to it)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from .files import atomic_write_text

__all__ = ["definition", "macros_text", "write_macros", "read_macros", "defined_names"]

_DEFINITION = re.compile(r"\\newcommand\{\\([A-Za-z]+)\}\{(.*)\}\s*$", re.M)
_DEFINED = re.compile(r"\\(?:newcommand\{\\([A-Za-z]+)\}|def\\([A-Za-z]+)\{)")


def definition(name: str, value: object, plain: bool = False) -> str:
    """``\\newcommand{\\NAME}{VALUE}``, or ``\\def\\NAME{VALUE}`` where ``plain`` (``value`` already LaTeX)."""
    return rf"\def\{name}{{{value}}}" if plain else rf"\newcommand{{\{name}}}{{{value}}}"


def macros_text(comment: str, macros: Mapping[str, object], more: Iterable[str] = ()) -> str:
    """A macro file: ``% comment``, one definition per macro, then ``more`` lines as they are."""
    return "\n".join([f"% {comment}", *(definition(k, v) for k, v in macros.items()), *more]) + "\n"


def write_macros(path: str | Path, comment: str, macros: Mapping[str, object]) -> Path:
    """:func:`macros_text` written to ``path`` atomically."""
    atomic_write_text(path, macros_text(comment, macros))
    return Path(path)


def read_macros(text: str) -> dict[str, str]:
    """``{name: value}`` of every one-line ``\\newcommand`` in ``text``, in order."""
    return dict(_DEFINITION.findall(text))


def defined_names(text: str) -> list[str]:
    """The name of every macro ``text`` defines, either way (:func:`definition`), in order."""
    return [a or b for a, b in _DEFINED.findall(text)]
