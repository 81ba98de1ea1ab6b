"""The LaTeX heads of the report's tables: the one place, besides the writer, that holds LaTeX.

A section's :class:`~quadnn_paper.common.outputs.Table` carries plain column names; the writer
(:meth:`quadnn_paper.report.Report.write`) asks :func:`head` for the typeset head and alignment of
a table, found in ``quadnn_paper/latex/<section>.py`` as ``HEADS = {table name: {"header_tex":
[...], "align": "lrr", "labels": {cell text: its LaTeX}}}`` (each key optional), or, for a table
whose columns vary with the profile, a function of its column names returning that dict. A table
without an entry gets its escaped column names, left-aligned first column and right-aligned numbers.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

__all__ = ["head"]


def head(section: str, table: str, header: Sequence[str] = ()) -> dict:
    """``{"header_tex": ..., "align": ...}`` (either may be absent) of ``section``'s table ``table``
    with the column names ``header``."""
    try:
        module = importlib.import_module(f"{__name__}.{section}")
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.{section}":
            raise
        return {}
    entry = module.HEADS.get(table, {})
    return dict(entry(list(header)) if callable(entry) else entry)
