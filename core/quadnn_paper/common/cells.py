"""How a value looks in a table: :func:`fmt` for numbers, :class:`Cell` for values with a spread,
a comparison with the paper or a note. Sections build their rows from these (so the formatting lives
in one place); :mod:`quadnn_paper.report` writes them as LaTeX and CSV."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["Cell", "fmt", "latex_escape", "power_of_ten", "number_word"]


def latex_escape(text: str) -> str:
    return (
        str(text)
        .replace("\\", r"\textbackslash{}")
        .replace("&", r"\&")
        .replace("%", r"\%")
        .replace("_", r"\_")
        .replace("#", r"\#")
        .replace("$", r"\$")
    )


def power_of_ten(x: float, math: bool = True) -> str:
    """``1e-4`` -> ``$10^{-4}$``, ``5e-4`` -> ``$5\\times10^{-4}$``; ``math=False``: without the ``$``."""
    mant, exp = f"{x:e}".split("e")
    mant = mant.rstrip("0").rstrip(".")
    text = (f"{mant}\\times" if mant != "1" else "") + f"10^{{{int(exp)}}}"
    return f"${text}$" if math else text


_NUMBER_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def number_word(n: int, noun: str | None = None) -> str:
    """A count as the text writes it: ``2`` -> "two", ``12`` -> "12", ``1234`` -> "1,234"; with
    ``noun``, in the number it takes ("one seed", "no runs")."""
    word = _NUMBER_WORDS[n] if 0 <= n < len(_NUMBER_WORDS) else f"{n:,d}"
    return word if noun is None else f"{word} {noun}" + ("" if n == 1 else "s")


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


@dataclass(frozen=True)
class Cell:
    """A table cell that is more than a plain value; the CSV keeps the data, the ``.tex`` the look.

    ``value``       the number or string (the CSV column under the table's header);
    ``spread``      e.g. the standard deviation over seeds: ``value $\\pm$ spread`` in LaTeX, its own
                    CSV column ``<header> sd``;
    ``reproduced``  ``False`` marks our value as disagreeing with the paper (``\\notreproduced{}``),
                    ``None`` = not compared; CSV column ``<header> reproduced`` (yes/no/empty);
    ``note``        a short remark after the value ("2/3 diverged"); CSV column ``<header> note``;
    ``decimals``    fixed decimals for value and spread (else :func:`fmt` with the table's digits);
    ``paper``       a number printed in the paper (``\\paperval{}``);
    ``tex``         LaTeX to show instead of ``value`` (a label with math); the CSV keeps ``value``.
    """

    value: Any = None
    spread: float | None = None
    reproduced: bool | None = None
    note: str = ""
    decimals: int | None = None
    paper: bool = False
    tex: str | None = None

    def latex(self, digits: int) -> str:
        def num(v):
            if (
                self.decimals is not None
                and isinstance(v, (int, float))
                and not isinstance(v, bool)
                and math.isfinite(v)
            ):
                return f"{v:.{self.decimals}f}"
            return fmt(v, digits)

        text = self.tex if self.tex is not None else num(self.value)
        if self.spread is not None:
            text += r" $\pm$ " + num(self.spread)
        if self.note:
            text += " " + latex_escape(self.note)
        if self.paper:
            text = rf"\paperval{{{text}}}"
        if self.reproduced is False:
            text = rf"\notreproduced{{{text}}}"
        return text
