"""The one writer and reader of macro files (quadnn_paper.common.macros): what one writes the other
reads back, for the values the report writes (numbers, escaped words, math, nested braces)."""

import pytest
from source_strings import string_literals

from quadnn_paper.common.cells import latex_escape
from quadnn_paper.common.macros import defined_names, definition, macros_text, read_macros, write_macros

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
    text = macros_text("c", {"a": 1}, [definition("b", 2, plain=True), r"\hypersetup{pdfsubject={\a}}"])
    assert text.splitlines() == ["% c", definition("a", 1), r"\def\b{2}", r"\hypersetup{pdfsubject={\a}}"]
    assert read_macros(text) == {"a": "1"}


@pytest.mark.parametrize("value", VALUES)
def test_every_macro_written_either_way_is_found_by_name_and_nothing_else(value):
    """The names the numbers check reads (tools/paper_check.py: a macro written for no reader), for
    both forms :func:`definition` writes, whatever the value holds (a value's own macros are uses)."""
    names = ["sectionName", "buildPending", "sectionOther"]
    text = macros_text("c", {names[0]: value}, [definition(names[1], value, plain=True), r"\hypersetup{x={\a}}"])
    text += definition(names[2], r"\sectionName{} again") + "\n"
    assert defined_names(text) == names


def test_one_writer_of_macro_definitions():
    """No module of the companion or the tools spells a macro definition but common/macros.py: a
    ``\\newcommand{`` or ``\\def\\`` in a string literal elsewhere is a second writer (the probe below
    checks that the search finds one)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    forms = ("\\newcommand{", "\\def\\")

    def writers(source: str) -> list[int]:
        return [n.lineno for n in string_literals(ast.parse(source)) if any(f in n.value for f in forms)]

    assert writers('"""A docstring may name \\\\newcommand{\\\\x}."""\nLINE = r"\\def\\x{1}"\n') == [2]
    found = {}
    for path in [*(root / "core" / "quadnn_paper").rglob("*.py"), *(root / "tools").rglob("*.py")]:
        if path.name == "macros.py" and path.parent.name == "common":
            continue
        if lines := writers(path.read_text()):
            found[str(path.relative_to(root))] = lines
    assert not found, f"macro definitions written outside common/macros.py: {found}"
