"""Is paper/ one consistent profile? Run by ``make paper`` before and after the notebooks.

    python tools/paper_check.py prune --profile smoke --build build/smoke
        finish interrupted commits, then delete the executed copy (build/<profile>/NB.ipynb) of
        every notebook whose outputs in paper/ are not a finished run at this profile, so make
        runs it again;
    python tools/paper_check.py check --profile smoke
        exit 1, naming each problem, unless every notebook's section is stamped with this
        profile and its files are as stamped (run right before LaTeX);
    python tools/paper_check.py layout
        exit 1, naming each problem, on an overfull box wider than 1 pt in paper/main.log, a float
        taller than the page by more than 1 pt, a table shrunk to fit so far that its text prints
        below 6 pt, a figure whose smallest font prints below 6 pt at the width the report
        includes it, a figure whose caption promises error bars it does not draw (its
        NAME.lint.json, written by Report.figure after the figure lint), or a sentence of the PDF
        that shows its template (TEMPLATE_PROSE: "(s)", "1 points", "at 0 seeds", "of -- points")
        (run right after LaTeX);
    python tools/paper_check.py numbers
        exit 1, naming file, line and number, on each number typed in the prose of paper/main.tex
        and paper/sections/*.tex outside the forms of NUMBER_FORMS (run before LaTeX): the report's
        numbers are macros, ours from the notebooks' variables, the paper's from
        quadnn_paper/common/published.py.

The stamps are written by :meth:`quadnn_paper.report.Report.commit`.
"""

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))  # also usable before `pip install -e .`

from quadnn_paper.common.figure_lint import promised_error_bars  # noqa: E402
from quadnn_paper.execution.identity import pending_notebooks  # noqa: E402
from quadnn_paper.report import problems, recover, stale_notebooks  # noqa: E402

OVERFULL_PT = 1.0  # an overfull box wider than this fails the build
MIN_FONT_PT = 6.0  # the smallest font a figure may print at
# IEEEtran journal: a column is 3.5 in, the text block (figure*) 7.16 in wide.
COLUMN_PT, TEXT_PT = 252.0, 516.0
_OVERFULL = re.compile(r"^Overfull \\hbox \(([0-9.]+)pt too wide\) (.*)$", re.M)
_WIDTH = re.compile(r"width=([0-9.]*)\\(linewidth|columnwidth|textwidth)")
_INCLUDE = re.compile(r"\\includegraphics\[([^\]]*)\]\{figures/([^}]+?)(?:\.pdf)?\}")
_ENV = re.compile(r"\\(begin|end)\{(figure\*?)\}")
_MEDIABOX = re.compile(rb"/MediaBox\s*\[\s*[-0-9.]+\s+[-0-9.]+\s+([-0-9.]+)\s+[-0-9.]+\s*\]")


_FLOAT_TOO_LARGE = re.compile(r"^LaTeX Warning: Float too large for page by ([0-9.]+)pt on input line (\d+)", re.M)


def overfull_boxes(log: str, limit: float = OVERFULL_PT) -> list[str]:
    """Each overfull box of a LaTeX log wider than ``limit`` points, and each float (table, figure)
    taller than the page by more than ``limit`` points (it runs into the margin), with its location."""
    wide = [f"overfull box {w} pt too wide: {where}" for w, where in _OVERFULL.findall(log) if float(w) > limit]
    tall = [
        f"float {h} pt taller than the page (input line {line})"
        for h, line in _FLOAT_TOO_LARGE.findall(log)
        if float(h) > limit
    ]
    return wide + tall


_TABLE_SCALE = re.compile(r"^quadnn-table: scale (\d+) per mille of ([0-9.]+) pt, input line (\d+)", re.M)


def small_tables(log: str, limit: float = MIN_FONT_PT) -> list[str]:
    """Each table that ``\\fittable`` shrank so far that its text prints below ``limit`` pt (the log
    line paper/main.tex's macro writes: the scale and the font size it shrank from)."""
    return [
        f"a table shrunk to {int(s) / 10:g} % prints its {f} pt text at {int(s) * float(f) / 1000:.1f} pt "
        f"(input line {line}); set it wider (table*) or in fewer columns, text >= {limit:g} pt"
        for s, f, line in _TABLE_SCALE.findall(log)
        if int(s) * float(f) / 1000 < limit
    ]


# paper/main.tex writes "quadnn-ref: LABEL on page P" to the log for every \ref as it is shipped out;
# the .aux file holds each label's page (\newlabel{LABEL}{{NUMBER}{PAGE}...}).
_REFERENCED_ON = re.compile(r"^quadnn-ref: (tab:\S+) on page (\d+)$", re.M)
_LABEL_PAGE = re.compile(r"\\newlabel\{((?:tab|fig):[^}]*)\}\{\{[^}]*\}\{(\d+)\}")
TABLE_PAGES = 2  # a reader turns at most this many pages of text from a table's first reference to it


def table_placement(log: str, aux: str, limit: int = TABLE_PAGES) -> list[str]:
    """Each table more than ``limit`` pages of text away from the page of its first reference; the
    pages between that hold a table or figure of their own do not count (tables referred to together
    stand one after another)."""
    first: dict[str, int] = {}
    for label, page in _REFERENCED_ON.findall(log):
        first[label] = min(first.get(label, int(page)), int(page))
    placed = [(label, int(page)) for label, page in _LABEL_PAGE.findall(aux)]
    floats = {page for _, page in placed}
    found = []
    for label, page in placed:
        if label not in first:
            continue
        lo, hi = sorted((first[label], page))
        text = sum(p not in floats for p in range(lo + 1, hi)) + (hi > lo)
        if text > limit:
            found.append(
                f"table {label} stands on page {page}, {text} pages of text from its first reference (page "
                f"{first[label]}); at most {limit}: move its float nearer in the source"
            )
    return found


def printed_widths(tex: str) -> dict[str, float]:
    """``{figure name: printed width in pt}`` of every ``\\includegraphics{figures/NAME}`` in ``tex``
    (``\\linewidth`` is the text width inside ``figure*``, the column width elsewhere)."""
    out, events = (
        {},
        sorted(
            [(m.start(), "env", m.group(1), m.group(2)) for m in _ENV.finditer(tex)]
            + [(m.start(), "inc", m.group(1), m.group(2)) for m in _INCLUDE.finditer(tex)]
        ),
    )
    star = False
    for _, kind, a, b in events:
        if kind == "env":
            star = a == "begin" and b == "figure*"
            continue
        m = _WIDTH.search(a)
        if not m:
            continue
        frac = float(m.group(1) or 1)
        base = TEXT_PT if m.group(2) == "textwidth" or (m.group(2) == "linewidth" and star) else COLUMN_PT
        out[b] = frac * base
    return out


def small_fonts(paper: Path, limit: float = MIN_FONT_PT) -> list[str]:
    """Each figure the report includes whose smallest font, scaled to its printed width, is below
    ``limit`` pt (the font size comes from ``figures/NAME.fonts.json``, written by Report.figure)."""
    tex = "\n".join(p.read_text() for p in [paper / "main.tex", *sorted((paper / "sections").glob("*.tex"))])
    found = []
    for name, width in sorted(printed_widths(tex).items()):
        pdf, fonts = paper / "figures" / f"{name}.pdf", paper / "figures" / f"{name}.fonts.json"
        if not pdf.exists() or not fonts.exists():
            continue
        box = _MEDIABOX.search(pdf.read_bytes())
        size = json.loads(fonts.read_text())["min_font_pt"]
        if box is None or size is None:
            continue
        printed = size * width / float(box.group(1))
        if printed < limit - 1e-9:
            found.append(
                f"figure {name}: smallest font prints at {printed:.1f} pt (drawn {size:g} pt, scaled "
                f"{width / float(box.group(1)):.2f}); draw it at its printed size, fonts >= {limit:g} pt"
            )
    return found


# ---------------------------------------------------------------- typed numbers in the prose
# Every number a reader meets in paper/sections/*.tex and the body of paper/main.tex is a macro
# (\<section><Name> from a notebook's data, \paper<Name> from quadnn_paper/common/published.py), a
# word where it is structural ("two arms"), or one of these forms, none of them a value anyone
# measured or the paper printed (the allow-list: each form with its reason):
NUMBER_FORMS = {
    "comment": "% ... to the end of the line is not printed",
    "argument": "the arguments of \\label \\ref \\cite \\input \\includegraphics \\texttt \\url (file and code "
    "names, keys) and of layout commands (\\setlength, a tabular's column spec, \\vspace)",
    "length": "a TeX length (3pt, 0.8\\linewidth): layout, not a number of the report",
    "name": "digits glued to a name: ResNet20, VGG16, bf16, float64, or hyphened to a proper name: CIFAR-10, "
    "ResNeXt-101, QResNet-34, and the names top-1/top-5 (metrics) and plain-20 (the paper's plain networks); not "
    "hyphened to another common word (stride-2, degree-32 are numbers); a number format: 16-bit",
    "script": "a math sub- or superscript: $l_1$, $t_{1-\\alpha/2}$, $2^{H-1}$'s exponent",
    "power": "the base of a symbolic power: the 2 of $2^H$ (a formula, not a value)",
    "formula": "in math, a one-digit integer ($\\gamma=0$, $\\mathcal N(0,1)$, a $3\\times3$ kernel, $1/8$) or a "
    "coefficient glued to a symbol ($6n+2$, $16x^2$): the structure of a formula; a number of two or more digits "
    "or a decimal in math ($10^{-4}$, $224\\times224$) is a value and must be a macro",
    "depth": "the depth that names a network: depth 20, depths 32 and 110, 18 layers, 34-layer, ResNet20/32/56",
    "quoted": "a short label quoted from a table or figure: ``20'', ``eval 10''",
    "reference": "a numbered part of a cited work: Table~2, Proposition~2, Eq.~(5) of a paper",
    "year": "a year in a citation: (2016) or ', 2016'",
}
# Commands whose arguments (optional ones too) are never prose: keys, file and code names, layout.
_NO_PROSE = (
    "label ref eqref pageref autoref cite citep citet nocite input include InputIfFileExists "
    "includegraphics texttt url href loadvariables includesection rowsfrom bibitem bibliography "
    "bibliographystyle setlength addtolength vspace hspace resizebox scalebox rule fittable "
    "renewcommand newcommand providecommand definecolor textcolor color arraystretch"
).split()
_ONE_ARG = {"href": 1, "fittable": 1, "resizebox": 2, "scalebox": 1, "textcolor": 1, "color": 1}
_TABULAR = {"tabular", "tabular*", "tabularx", "array", "thebibliography", "tabulary"}
_UNIT = r"(?:pt|em|ex|mm|cm|in|bp|pc|dd|sp)(?![A-Za-z])"
_LENGTH_CMD = r"\\(?:linewidth|textwidth|columnwidth|hsize|textheight|baselineskip|paperwidth)(?![A-Za-z])"
_NUMBER = re.compile(r"(?<![0-9])[0-9]+(?:(?:\{,\}|,(?=[0-9]{3}(?![0-9]))|\.(?=[0-9]))[0-9]+)*|(?<![0-9.])\.[0-9]+")
_LENGTH = re.compile(rf"[0-9]*\.?[0-9]+\s*(?:{_UNIT}|{_LENGTH_CMD})")
_REFERENCE = re.compile(
    r"(?:Table|Tables|Fig\.|Figure|Figures|Section|Sections|Sec\.|Proposition|Theorem|Lemma|Corollary|"
    r"Definition|Remark|Eq\.|Eqs\.|Equation|Appendix|Algorithm|Step|Chapter)(?:~|\s)\(?\Z"
)
_YEAR = re.compile(r"^(?:19|20)[0-9]{2}$")


def _mask(chars: list[str], start: int, end: int) -> None:
    for i in range(start, end):
        if chars[i] != "\n":
            chars[i] = " "


def _group_end(text: str, i: int) -> int:
    """The index after the group (``{...}`` or ``[...]``) opening at ``text[i]``."""
    close, depth = "}" if text[i] == "{" else "]", 0
    for j in range(i, len(text)):
        c = text[j]
        if c == "\\":
            continue
        if j > 0 and text[j - 1] == "\\" and (j < 2 or text[j - 2] != "\\"):
            continue  # an escaped \{ or \}
        if c == text[i]:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


def _strip_comments(text: str) -> str:
    out = []
    for line in text.split("\n"):
        cut = next(
            (m.start() for m in re.finditer("%", line) if (m.start() - len(line[: m.start()].rstrip("\\"))) % 2 == 0),
            None,
        )
        out.append(line if cut is None else line[:cut] + " " * (len(line) - cut))
    return "\n".join(out)


def prose_mask(tex: str) -> str:
    """``tex`` with everything that is not prose blanked (same length, same lines): comments,
    the preamble of a document, the arguments of :data:`_NO_PROSE` commands, a tabular's column
    spec, lengths, and math sub- and superscripts."""
    text = _strip_comments(tex)
    chars = list(text)
    begin = text.find("\\begin{document}")
    if begin >= 0:
        _mask(chars, 0, begin + len("\\begin{document}"))
    for m in re.finditer(r"\\([A-Za-z]+)\*?", text):
        name, i, groups = m.group(1), m.end(), None
        if name in _NO_PROSE:
            groups = _ONE_ARG.get(name, 99)
        elif name in ("begin", "end") and text.startswith("{", i):
            env_end = _group_end(text, i)
            env = text[i + 1 : env_end - 1]
            _mask(chars, i, env_end)
            i, groups = env_end, (2 if env == "tabular*" else 1) if env in _TABULAR and name == "begin" else 0
            while i < len(text) and text[i] == "[":  # placement [t], [!htb]
                j = _group_end(text, i)
                _mask(chars, i, j)
                i = j
        if not groups:
            continue
        taken = 0
        while i < len(text) and taken < groups:
            while i < len(text) and text[i] in " \t":
                i += 1
            if i >= len(text) or text[i] not in "{[":
                break
            j = _group_end(text, i)
            _mask(chars, i, j)
            taken += text[i] == "{"
            i = j
    text = "".join(chars)
    for m in _LENGTH.finditer(text):
        _mask(chars, m.start(), m.end())
    # math: sub- and superscripts, and the base of a power whose exponent is symbolic
    text = "".join(chars)
    for mm in re.finditer(r"(?<!\\)\$\$?(.+?)(?<!\\)\$\$?|\\\((.+?)\\\)|\\\[(.+?)\\\]", text, re.S):
        for s in re.finditer(r"[_^](?:\{|[0-9A-Za-z]|\\[A-Za-z]+)", text[mm.start() : mm.end()]):
            a = mm.start() + s.start() + 1
            b = _group_end(text, a) if text[a] == "{" else a + len(s.group()) - 1
            if text[a - 1] == "^" and re.search(r"[A-Za-z]", text[a:b].replace("\\", "")):
                base = re.search(r"[0-9]+\Z", text[mm.start() : a - 1])
                if base:
                    _mask(chars, a - 1 - len(base.group()), a - 1)
            _mask(chars, a, b)
    return "".join(chars)


_MATH = re.compile(r"(?<!\\)\$\$?(.+?)(?<!\\)\$\$?|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.S)
_DEPTH = re.compile(
    r"(?:^|[^\w])(?:depths?|layers?)\s+(?:[0-9]+(?:,\s*|\s+and\s+|\s+or\s+))*\Z"  # depth 20; depths 32 and 110
)


def _is_depth(before: str, after: str) -> bool:
    return bool(
        _DEPTH.search(before)
        or re.match(r"(?:-|\s+)layers?\b|-\s+and\s+[0-9]+-layer", after)  # 18 layers, 34-layer, 18- and 34-layer
        or re.search(r"[A-Za-z][0-9]+(?:/[0-9]+)*/\Z", before)  # ResNet20/32/56
    )


def typed_numbers(tex: str) -> list[tuple[int, str, str]]:
    """``(line, number, the line's text)`` for every number typed in the prose of ``tex`` outside
    :data:`NUMBER_FORMS` (an empty list for a report whose every number is a macro)."""
    text = prose_mask(tex)
    math = [(m.start(), m.end()) for m in _MATH.finditer(text)]
    lines = tex.split("\n")
    found = []
    for m in _NUMBER.finditer(text):
        before, after, number = text[max(0, m.start() - 60) : m.start()], text[m.end() : m.end() + 30], m.group()
        if re.search(r"(?<![\\A-Za-z])(?:[A-Za-z]*[A-Za-z]|[A-Za-z]*[A-Z][A-Za-z]*-|top-|plain-)\Z", before):
            continue  # a name: ResNet20, bf16, CIFAR-10, ResNeXt-101 (a macro's end is not a name)
        if re.match(r"-bit\b", after):
            continue  # a number format's name: 16-bit
        if _REFERENCE.search(before[-20:]) or _is_depth(before, after):
            continue
        if _YEAR.match(number) and re.search(r"(?:\(|, )\Z", before) and re.match(r"[)\],;.]", after):
            continue
        if re.search(r"``[^'`\n]{0,10}\Z", before) and re.match(r"[^'`]{0,10}''", after):
            continue  # a quoted label
        if any(a < m.start() < b for a, b in math) and (re.fullmatch("[0-9]", number) or re.match(r"[A-Za-z]", after)):
            continue  # a formula's one-digit constant, or a coefficient glued to a symbol
        line = tex.count("\n", 0, m.start()) + 1
        found.append((line, number, lines[line - 1].strip()))
    return found


# Sentences a template prints when a macro it was built from is empty, zero or of the wrong number
# (pdftotext's text of the PDF: LaTeX's "--" is an en dash there).
EMPTY_VALUE = "an empty value in a sentence"
_NOUNS = r"(?:point|seed|run|pair|image|epoch|claim|step|row|network|setting|page)"
TEMPLATE_PROSE = {
    "a plural left open": re.compile(r"\w\(s\)"),
    "one with a plural noun": re.compile(r"(?<![\d.,])\b1 " + _NOUNS + r"s\b"),
    "zero where a count belongs": re.compile(r"\b(?:at|over|with|from|on|of) 0 " + _NOUNS + r"s\b"),
    EMPTY_VALUE: re.compile(
        r"\b(?:of|at|is|was|by|to|reaches|reached|took|about) [\u2013\u2014-]{1,2} ?(?:points?|seeds?|runs?|%|s\b)"
    ),
}


def template_prose(text: str) -> list[str]:
    """``what: ...context...`` for each template defect of :data:`TEMPLATE_PROSE` in ``text``
    (the report's text, lines joined)."""
    text = re.sub(r"-\n", "", text)  # words hyphenated at a line's end
    text = re.sub(r"\s+", " ", text)
    found = []
    for what, pattern in TEMPLATE_PROSE.items():
        for m in pattern.finditer(text):
            found.append(f"{what}: ...{text[max(0, m.start() - 50) : m.end() + 30]}...")
    return found


def pending_dashes(prose: list[str], pending: dict[str, str]) -> tuple[list[str], str | None]:
    """``prose`` findings without the empty values, and a line saying why, when notebooks have runs
    still ``pending``: a dash for a value still to come is what such a build shows (its first page
    says so). Without pending runs, every finding stands."""
    dashes = [p for p in prose if p.startswith(EMPTY_VALUE)] if pending else []
    if not dashes:
        return prose, None
    return [p for p in prose if not p.startswith(EMPTY_VALUE)], (
        f"{len(dashes)} sentence(s) show a dash for values of runs still pending ({', '.join(pending)}); "
        "the first page says so, and they fill in when `make paper` collects the runs"
    )


def pdf_prose(pdf: Path) -> list[str]:
    """:func:`template_prose` of ``pdf``'s text (pdftotext), or one line saying it cannot be read."""
    import shutil
    import subprocess

    if shutil.which("pdftotext") is None:
        return [f"{pdf}: pdftotext is not installed (poppler-utils): the prose check cannot read the PDF"]
    # reading order, column by column: -layout would join a line of one column to the next of the other
    r = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True)
    if r.returncode != 0:
        return [f"{pdf}: pdftotext failed: {r.stderr.strip()[:200]}"]
    return template_prose(r.stdout)


def numbers(paper: Path) -> list[str]:
    """``FILE:LINE: typed number N: text`` for each number typed in the prose of ``paper``'s
    ``main.tex`` and ``sections/*.tex`` (see :data:`NUMBER_FORMS` for what is not one)."""
    found = []
    for tex in [paper / "main.tex", *sorted((paper / "sections").glob("*.tex"))]:
        if tex.is_file():
            for line, number, text in typed_numbers(tex.read_text()):
                found.append(f"{tex.relative_to(paper.parent)}:{line}: typed number {number}: {text}")
    return found


def unread_macros(paper: Path) -> list[str]:
    """``variables/FILE: \\NAME is read by nothing`` for each macro a notebook (or the build) writes
    under ``paper/variables/`` that neither the report's LaTeX (``main.tex``, ``sections/*.tex``,
    ``tables/*.tex``, another macro's definition) nor the claim ledger reads: a number computed for
    no reader is a name kept in two places for nothing."""
    from quadnn_paper.common.ledger import read_variables
    from quadnn_paper.common.macros import defined_names

    defined, definitions = {}, {}
    for f in sorted((paper / "variables").glob("*.tex")):
        text = f.read_text()
        for name in defined_names(text):
            defined.setdefault(name, f.name)
        definitions[f.name] = text
    readers = [
        paper / "main.tex",
        *sorted((paper / "sections").glob("*.tex")),
        *sorted((paper / "tables").glob("*.tex")),
    ]
    text = "\n".join(f.read_text() for f in readers if f.is_file())
    by_ledger = read_variables()
    unread = []
    for name, where in defined.items():
        use = re.compile(r"\\" + name + r"(?![A-Za-z])")
        in_macros = sum(len(use.findall(t)) for t in definitions.values())
        if name in by_ledger or use.search(text) or in_macros > 1:  # > 1: beyond its own definition
            continue
        unread.append(f"variables/{where}: \\{name} is read by nothing")
    return unread


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=["prune", "check", "layout", "numbers"])
    ap.add_argument("--profile", help="prune, check: the profile paper/ must be all of (layout reads only the log)")
    ap.add_argument("--paper", default=str(ROOT / "paper"))
    ap.add_argument("--notebooks", default=str(ROOT / "notebooks"))
    ap.add_argument(
        "--build",
        help="prune: the folder of executed notebook copies for this profile; layout: its NAME.pending files "
        "(runs still pending) let sentences show a dash",
    )
    a = ap.parse_args(argv)
    if not Path(a.paper).is_dir():  # (a check of nothing would pass)
        print(f"paper check: no paper folder at {a.paper}; give --paper", file=sys.stderr)
        return 1
    if a.action == "layout":
        log = Path(a.paper) / "main.log"
        if not log.is_file():
            print(f"layout check: no LaTeX log at {log}: build the PDF first (make paper)", file=sys.stderr)
            return 1
        text = log.read_text(errors="replace")
        found = overfull_boxes(text) + small_tables(text) + small_fonts(Path(a.paper))
        found += promised_error_bars(Path(a.paper))  # a caption's error bars drawn (figures/NAME.lint.json)
        aux = Path(a.paper) / "main.aux"
        if aux.is_file():
            found += table_placement(text, aux.read_text(errors="replace"))
        pdf = Path(a.paper) / "main.pdf"
        if pdf.is_file():  # the report's sentences, as printed: no template shows through
            prose, notice = pending_dashes(pdf_prose(pdf), pending_notebooks(Path(a.build)) if a.build else {})
            if notice:
                print(f"layout check: {notice}", file=sys.stderr)
            found += [f"prose: {p}" for p in prose]
        for p in found:
            print(f"layout check: {p}", file=sys.stderr)
        return 1 if found else 0
    if a.action == "numbers":
        found = numbers(Path(a.paper))
        unread = unread_macros(Path(a.paper))
        for p in found + unread:
            print(f"numbers check: {p}", file=sys.stderr)
        if unread:
            print(
                f"numbers check: {len(unread)} macro(s) written for no reader: stop writing each (its "
                "section's variables()) or use it in the report",
                file=sys.stderr,
            )
        if found:
            print(
                f"numbers check: {len(found)} number(s) typed in the prose: make each a macro (the paper's in "
                "quadnn_paper/common/published.py, ours a notebook's variable) or a word where it is structural; "
                "the forms allowed are tools/paper_check.py's NUMBER_FORMS",
                file=sys.stderr,
            )
        return 1 if found or unread else 0
    if not a.profile:
        ap.error(f"{a.action} needs --profile (smoke, cpu or full)")
    names = sorted(p.stem for p in Path(a.notebooks).glob("*.ipynb"))
    if not names:
        print(f"paper check: no notebooks (*.ipynb) in {a.notebooks}; give --notebooks", file=sys.stderr)
        return 1
    recover(a.paper)
    if a.action == "prune":
        if not a.build:
            ap.error("prune needs --build")
        for nb in stale_notebooks(a.paper, a.profile, names):
            executed = Path(a.build) / f"{nb}.ipynb"
            if executed.exists():
                print(
                    f"{nb}: outputs in {a.paper} are not a finished {a.profile} run; running it again", file=sys.stderr
                )
                executed.unlink()
        return 0
    found = problems(a.paper, a.profile, names)
    for p in found:
        print(f"paper check: {p}", file=sys.stderr)
    if found:
        print(
            f"paper check: refusing to build a PDF that is not all {a.profile}; run `make paper "
            f"PROFILE={a.profile}` again",
            file=sys.stderr,
        )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
