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
        below 6 pt, or a figure whose smallest font prints below 6 pt at the width the report
        includes it (run right after LaTeX).

The stamps are written by :meth:`quadnn_paper.report.Report.commit`.
"""

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))  # also usable before `pip install -e .`

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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=["prune", "check", "layout"])
    ap.add_argument("--profile", help="prune, check: the profile paper/ must be all of (layout reads only the log)")
    ap.add_argument("--paper", default=str(ROOT / "paper"))
    ap.add_argument("--notebooks", default=str(ROOT / "notebooks"))
    ap.add_argument("--build", help="prune: the folder of executed notebook copies for this profile")
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
        for p in found:
            print(f"layout check: {p}", file=sys.stderr)
        return 1 if found else 0
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
