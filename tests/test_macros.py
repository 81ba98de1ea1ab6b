"""The one writer and reader of macro files (quadnn_paper.common.macros): what one writes the other
reads back, for the values the report writes (numbers, escaped words, math, nested braces)."""

import pytest

from quadnn_paper.common.cells import latex_escape
from quadnn_paper.common.macros import definition, macros_text, read_macros, write_macros

VALUES = [
    3,
    "0.0123",
    latex_escape("sg 0.0001 (trained 0.0014) vs ResNet20: +1.11 [0.12, 2.11]; 5% & more_x"),
    r"$5\times10^{-4}$",
    r"\textbf{{nested} braces}",
    "",
]


@pytest.mark.parametrize("value", VALUES)
def test_what_is_written_is_read_back(tmp_path, value):
    macros = {"sectionName": value, "sectionOther": "x"}
    path = write_macros(tmp_path / "v.tex", "written by a test; do not edit", macros)
    text = path.read_text()
    assert text.startswith("% written by a test") and text.endswith("\n")
    assert read_macros(text) == {k: str(v) for k, v in macros.items()}


def test_lines_after_the_definitions_are_kept_and_not_read_as_macros():
    text = macros_text("c", {"a": 1}, [r"\def\b{2}", r"\hypersetup{pdfsubject={\a}}"])
    assert text.splitlines() == ["% c", definition("a", 1), r"\def\b{2}", r"\hypersetup{pdfsubject={\a}}"]
    assert read_macros(text) == {"a": "1"}
