"""The LaTeX heads of the report's tables: the one place, besides the writer, that holds LaTeX.

A section's :class:`~quadnn_paper.common.outputs.Table` carries plain column names; the writer
(:meth:`quadnn_paper.report.Report.write`) asks :func:`head` for the typeset head and alignment of
a table, found in ``quadnn_paper/latex/<section>.py`` as ``HEADS = {table name: {"header_tex":
[...], "align": "lrr", "labels": {cell text: its LaTeX}}}`` (each key optional). A table without an
entry gets its escaped column names, left-aligned first column and right-aligned numbers.
"""

from __future__ import annotations

import importlib

__all__ = ["head"]


def head(section: str, table: str) -> dict:
    """``{"header_tex": ..., "align": ...}`` (either may be absent) of ``section``'s table ``table``."""
    try:
        module = importlib.import_module(f"{__name__}.{section}")
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.{section}":
            raise
        return {}
    return dict(module.HEADS.get(table, {}))
