"""What a section hands the writer: its outputs as data, never as files.

A section's ``outputs(results)`` returns a list of these; the writer
(:func:`quadnn_paper.report.publish`) renders each into ``paper/`` (tables as CSV and a booktabs
tabular whose head and alignment its :class:`Column` objects carry, figures as PDF and PNG after
the figure lint, variables as macros) and the notebook shows the :class:`Lines`.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "Column",
    "Table",
    "Figure",
    "Variables",
    "Lines",
    "Overview",
    "Output",
    "PENDING",
    "pending_text",
    "call_chain",
]


@dataclasses.dataclass(frozen=True)
class Column:
    """A table's column: ``name`` heads it in the CSV (and, escaped, in LaTeX unless ``tex`` is its
    typeset head); ``align`` is its LaTeX column type (None: ``l`` for a table's first column,
    ``r`` for the others). A plain string in a table's header is a column with that name."""

    name: str
    tex: str | None = None
    align: str | None = None


def columns(header: Sequence[str | Column]) -> list[Column]:
    """``header`` as columns, each with its alignment."""
    cols = [c if isinstance(c, Column) else Column(c) for c in header]
    return [c if c.align else dataclasses.replace(c, align="l" if i == 0 else "r") for i, c in enumerate(cols)]


PENDING = "pending"  # what a table, figure or macro shows for a result a runner has not delivered


def pending_text(*counts: tuple[int, int, str]) -> str:
    """What stands in for results not delivered yet, each kind as ``(missing, total, noun)``:
    "pending (2 of 3 runs)", "pending (1 of 1 run, 2 of 4 computations)"."""
    return f"{PENDING} (" + ", ".join(f"{k} of {n} {noun}{'' if n == 1 else 's'}" for k, n, noun in counts) + ")"


def call_chain(skip: tuple[str, ...] = (), depth: int = 12) -> tuple[str, ...]:
    """The companion's functions on the stack here, innermost first, as ``module:qualname``
    (frames of this module and of ``skip``'s modules left out): who made an output, or read a result."""
    chain, frame = [], sys._getframe(1)
    while frame is not None and len(chain) < depth:
        module = frame.f_globals.get("__name__", "")
        if module.startswith("quadnn_paper.") and module != __name__ and module not in skip:
            chain.append(f"{module}:{frame.f_code.co_qualname}")
        frame = frame.f_back
    return tuple(chain)


def _made_by():
    """A field holding the functions that made the output (see :func:`call_chain`); not compared."""
    return dataclasses.field(default=(), init=False, repr=False, compare=False)


class _Traced:
    def __post_init__(self):
        self.made_by = call_chain()


@dataclasses.dataclass
class Table(_Traced):
    """``header`` (column names or :class:`Column`) and ``rows`` of plain values or
    :class:`~quadnn_paper.common.cells.Cell`;
    ``digits``: significant digits of its numbers; ``rows_only``: its ``.tex`` holds the body alone
    (a table the report assembles from several sections); ``keys``: a stable id per row ("" for a
    row without one), written beside it as ``tables/NAME.keys.json``: a reader finds a row by its
    id, never by its text."""

    name: str
    header: Sequence[str | Column]
    rows: Sequence[Sequence[Any]]
    digits: int = 4
    rows_only: bool = False
    keys: Sequence[str] | None = None
    made_by: tuple[str, ...] = _made_by()


@dataclasses.dataclass
class Figure(_Traced):
    """``draw()`` returns the matplotlib figure; the writer calls it, lints, saves and closes it."""

    name: str
    draw: Callable[[], Any]
    made_by: tuple[str, ...] = _made_by()


@dataclasses.dataclass
class Variables(_Traced):
    """Numbers and words the text quotes: ``{Name: value}`` (a value may be ``(value, digits)``)."""

    values: dict[str, Any]
    made_by: tuple[str, ...] = _made_by()


@dataclasses.dataclass
class Lines:
    """Text the notebook prints (``check=True``: a line nbval compares with the stored output)."""

    text: list[str]
    check: bool = False


@dataclasses.dataclass
class Overview:
    """Where the report's overview goes: the environment line, the stand-in table and the full
    profile's cost. :func:`quadnn_paper.execution.run_section` puts the overview's own outputs in
    its place (:mod:`quadnn_paper.execution.overview`): it counts every section's work, which no
    section may read."""


Output = Table | Figure | Variables | Lines | Overview
