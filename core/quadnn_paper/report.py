"""Write a notebook's results into the companion report: figures, tables, numbers.

- figures -> ``paper/figures/NAME.pdf`` (and a ``.png`` for quick viewing);
- tables  -> ``paper/tables/NAME.tex`` (a booktabs ``tabular``) and ``paper/tables/NAME.csv``;
- numbers quoted by the text -> ``paper/variables/SECTION.tex`` as ``\\newcommand`` macros.

Nothing in the report is typed by hand: every number comes through here.
"""
from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path
from typing import Any, Sequence

from .cache import atomic_write_text
from .profiles import check_profile

__all__ = ["Report", "fmt", "latex_escape"]

_MACRO = re.compile(r"^[A-Za-z]+$")


def latex_escape(text: str) -> str:
    return (str(text).replace("\\", r"\textbackslash{}").replace("&", r"\&").replace("%", r"\%")
            .replace("_", r"\_").replace("#", r"\#").replace("$", r"\$"))


def fmt(value: Any, digits: int = 4) -> str:
    """Format a number for a table: ints as they are, floats with ``digits`` significant digits."""
    if value is None:
        return "--"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,d}".replace(",", "{,}")
    if isinstance(value, float):
        if math.isnan(value):
            return "--"
        if math.isinf(value):
            return r"$\infty$"
        text = f"{value:.{digits}g}"
        if "e" in text:
            mant, exp = text.split("e")
            return f"${mant}\\times10^{{{int(exp)}}}$"
        return text
    return latex_escape(value)


class Report:
    """Output sink of one notebook (``section``) run at ``profile`` on ``data``.

    ``data`` names the data the numbers came from (e.g. "scikit-learn digits"), so tables
    and the variables file can say which profile and data produced them.
    """

    def __init__(self, paper_dir: str | Path, section: str, profile: str, data: str):
        if not _MACRO.match(section):
            raise ValueError(f"section must be letters only (it prefixes LaTeX macros), got {section!r}")
        self.dir = Path(paper_dir)
        self.section, self.profile, self.data = section, check_profile(profile), data
        self._variables: dict[str, str] = {}
        self.variable("Profile", profile)
        self.variable("Data", data)

    # -- figures ------------------------------------------------------------------
    def figure(self, fig, name: str) -> Path:
        """Save a matplotlib figure as ``figures/NAME.pdf`` (+ ``.png``); stamps the profile on it."""
        out = self.dir / "figures"
        out.mkdir(parents=True, exist_ok=True)
        fig.text(0.995, 0.005, f"profile: {self.profile}; data: {self.data}", ha="right", va="bottom",
                 fontsize=6, color="0.45")
        fig.savefig(out / f"{name}.pdf", bbox_inches="tight")
        fig.savefig(out / f"{name}.png", bbox_inches="tight", dpi=110)
        return out / f"{name}.pdf"

    # -- tables -------------------------------------------------------------------
    def table(self, name: str, header: Sequence[str], rows: Sequence[Sequence[Any]], *,
              align: str | None = None, digits: int = 4, header_tex: Sequence[str] | None = None) -> Path:
        """Write ``tables/NAME.csv`` (raw values) and ``tables/NAME.tex`` (a formatted tabular).

        Cells may be numbers (formatted by :func:`fmt`), strings (escaped), or
        ``("tex", raw_latex)`` pairs passed through verbatim. ``header_tex`` optionally
        replaces the escaped header in the LaTeX version.
        """
        out = self.dir / "tables"
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(header)
        for row in rows:
            if len(row) != len(header):
                raise ValueError(f"table {name}: row {row!r} has {len(row)} cells, header has {len(header)}")
            w.writerow([c[1] if isinstance(c, tuple) else c for c in row])
        atomic_write_text(out / f"{name}.csv", buf.getvalue())

        def cell(c):
            return c[1] if isinstance(c, tuple) and c and c[0] == "tex" else fmt(c, digits)

        align = align or ("l" + "r" * (len(header) - 1))
        head = header_tex or [latex_escape(h) for h in header]
        lines = [rf"\begin{{tabular}}{{{align}}}", r"\toprule", " & ".join(head) + r" \\", r"\midrule"]
        lines += [" & ".join(cell(c) for c in row) + r" \\" for row in rows]
        lines += [r"\bottomrule", r"\end{tabular}"]
        atomic_write_text(out / f"{name}.tex", "\n".join(lines) + "\n")
        return out / f"{name}.tex"

    # -- numbers quoted in the text --------------------------------------------------
    def variable(self, name: str, value: Any, digits: int = 3) -> str:
        """Define ``\\<section><Name>`` (letters only) and rewrite the variables file."""
        if not _MACRO.match(name):
            raise ValueError(f"variable names must be letters only (LaTeX macro), got {name!r}")
        text = value if isinstance(value, str) and value.startswith("$") else fmt(value, digits)
        self._variables[name] = text
        lines = [f"% written by the {self.section} notebook at profile {self.profile}; do not edit"]
        lines += [rf"\newcommand{{\{self.section}{k}}}{{{v}}}" for k, v in self._variables.items()]
        atomic_write_text(self.dir / "variables" / f"{self.section}.tex", "\n".join(lines) + "\n")
        return text
