"""Write a notebook's results into the companion report: figures, tables, numbers.

- figures -> ``paper/figures/NAME.pdf`` (and a ``.png`` for quick viewing);
- tables  -> ``paper/tables/NAME.csv`` (plain values) and ``paper/tables/NAME.tex`` (a booktabs
  ``tabular`` rendered from the same cells);
- numbers quoted by the text -> ``paper/variables/SECTION.tex`` as ``\\newcommand`` macros.

Nothing in the report is typed by hand: every number comes through here (the paper's own
numbers come from :mod:`quadnn_paper.common.published`).

``paper/`` is consistent or untouched. A :class:`Report` stages what the notebook writes in
``paper/.staging/`` and :meth:`Report.commit` (the notebook's last cell, or the end of a
``with Report(...)`` block) moves it into place: a notebook that dies halfway changes nothing.
A commit first writes a journal (``paper/.stamps/SECTION.commit``), then renames the staged
files, removes the section's files of its previous run that this run did not write, and writes
the stamp ``paper/.stamps/SECTION.json`` (profile, data, notebook, and a hash of every file).
:func:`recover` finishes a commit a kill interrupted; :func:`problems` is what ``make paper``
checks before LaTeX runs (every section stamped with the requested profile, files as stamped).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from quadnn_paper import latex
from quadnn_paper.common import figure_lint
from quadnn_paper.common.cells import Cell, fmt, latex_escape
from quadnn_paper.common.files import atomic_write_text
from quadnn_paper.common.files import sha256_file as _sha256
from quadnn_paper.common.outputs import Figure, Lines, Output, Table, Variables
from quadnn_paper.common.profiles import check_profile

__all__ = ["Report", "Cell", "fmt", "latex_escape", "save_figure", "recover", "problems", "publish", "show"]

_MACRO = re.compile(r"^[A-Za-z]+$")
_SECTION = re.compile(r"^[a-z]+(_[a-z]+)*$")
STAGING = ".staging"
STAMPS = ".stamps"
NOTEBOOK_ENV = "QUADNN_NOTEBOOK"  # set by the Makefile: which notebook a stamp belongs to


def _plain(value: Any) -> Any:
    """A CSV value: numbers and strings as they are, nothing for None/NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return value


def save_figure(fig, path: str | os.PathLike, **kwargs) -> Path:
    """``fig.savefig(path)`` atomically: into a temporary file beside ``path``, then renamed.

    The format comes from ``path``'s suffix (passed as ``format=``, since the temporary name's
    suffix is not the target's), so a kill mid-write never leaves a truncated ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format=kwargs.pop("format", path.suffix.lstrip(".")), **kwargs)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


class Report:
    """Output sink of one notebook (``section``) run at ``profile`` on ``data``.

    ``data`` names the data the numbers came from (e.g. "scikit-learn digits"), so tables
    and the variables file can say which profile and data produced them. Nothing reaches
    ``paper_dir`` before :meth:`commit`; use the report as a context manager to commit on
    success and discard on error.
    """

    def __init__(self, paper_dir: str | Path, section: str, profile: str, data: str):
        if not _SECTION.match(section):
            raise ValueError(
                f"section must be a lower-case name like 'cifar_comparison' (its module, notebook "
                f"and .tex file share it), got {section!r}"
            )
        self.dir = Path(paper_dir)
        self.section, self.profile, self.data = section, check_profile(profile), data
        # A section and its notebook share one name (tests/test_sections.py), so a run outside make
        # (nbval, Jupyter) stamps the section's own notebook.
        self.notebook = os.environ.get(NOTEBOOK_ENV) or section
        self._stage: Path | None = None
        self._files: set[str] = set()
        self.committed = False
        recover(self.dir)
        self._variables: dict[str, str] = {}
        self.variable("Profile", profile)
        self.variable("Data", data)

    def __enter__(self) -> Report:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()

    def _staged(self, relative: str) -> Path:
        """Where ``relative`` (e.g. ``figures/x.pdf``) is written until the commit."""
        if self.committed:
            raise RuntimeError(f"report {self.section!r} was committed; make a new Report for more outputs")
        if self._stage is None:
            (self.dir / STAGING).mkdir(parents=True, exist_ok=True)
            self._stage = Path(tempfile.mkdtemp(dir=self.dir / STAGING, prefix=f"{self.section}.{os.getpid()}."))
        self._files.add(relative)
        path = self._stage / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    # -- figures ------------------------------------------------------------------
    def figure(self, fig, name: str) -> Path:
        """Save a matplotlib figure as ``figures/NAME.pdf`` (+ ``.png``); stamps the profile on it.

        The figure is linted first (:func:`quadnn_paper.common.figure_lint.lint`): a figure with an
        axes showing data but no x or y label, a quantity's label without its unit, a legend over
        data, or a legend or colour bar over text raises :class:`~quadnn_paper.common.figure_lint.
        FigureLintError`. ``figures/NAME.lint.json`` records what it drew (error bars included).
        """
        if fig.get_layout_engine() is None:
            # Axis labels and tick labels inside the size it was drawn at (its printed size): the
            # tight bounding box would otherwise widen the file, and the report shrink its fonts.
            fig.tight_layout()
        # The figure lint (common/figure_lint.py): labels with units, no legend over data, no legend
        # or colour bar over text. A figure it flags is refused, naming the axes and the problem.
        found = figure_lint.lint(fig)
        if found:
            raise figure_lint.FigureLintError(
                f"figure {name!r} ({self.section}, profile {self.profile}): "
                + "; ".join(found)
                + ". Fix the figure cell (labels with units, legend at a free spot or outside the axes)."
            )
        drawn = figure_lint.record(fig)
        # Below everything the figure draws (the tight bounding box takes it in), so it never sits on
        # an axis label.
        fig.text(
            0.995,
            -0.01,
            f"profile: {self.profile}; data: {self.data}",
            ha="right",
            va="top",
            wrap=True,  # within the figure's width: a long data name must not widen (and shrink) it
            fontsize=6.5,  # prints at >= 6 pt when the figure is drawn at its printed size
            color="0.45",
        )
        save_figure(fig, self._staged(f"figures/{name}.pdf"), bbox_inches="tight")
        save_figure(fig, self._staged(f"figures/{name}.png"), bbox_inches="tight", dpi=110)
        # The smallest font drawn, for the layout check (tools/paper_check.py layout): scaled by
        # the width the report prints the figure at, it must not fall below 6 pt.
        import matplotlib.text

        sizes = [t.get_fontsize() for t in fig.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text()]
        atomic_write_text(
            self._staged(f"figures/{name}.fonts.json"), json.dumps({"min_font_pt": min(sizes, default=None)}) + "\n"
        )
        # What it drew (error bars, labels), for the caption check (tools/paper_check.py layout).
        atomic_write_text(self._staged(f"figures/{name}.lint.json"), json.dumps(drawn, indent=1) + "\n")
        return self.dir / "figures" / f"{name}.pdf"

    # -- tables -------------------------------------------------------------------
    def table(
        self,
        name: str,
        header: Sequence[str],
        rows: Sequence[Sequence[Any]],
        *,
        align: str | None = None,
        digits: int = 4,
        header_tex: Sequence[str] | None = None,
        rows_only: bool = False,
    ) -> Path:
        """Write ``tables/NAME.csv`` (plain values) and ``tables/NAME.tex`` (a formatted tabular).

        Cells are numbers (formatted by :func:`fmt`), strings (escaped) or :class:`Cell` (value
        with spread, "not reproduced" flag, note, LaTeX label). In the CSV a column holding
        :class:`Cell` spreads, notes or flags gets a companion column for each, so every CSV
        cell is a bare number or string. ``header_tex`` replaces the escaped header in LaTeX.
        ``rows_only``: the ``.tex`` holds the body rows alone, for a table the report assembles
        from several sections (the CSV is complete either way).
        """
        for row in rows:
            if len(row) != len(header):
                raise ValueError(f"table {name}: row {row!r} has {len(row)} cells, header has {len(header)}")
            for c in row:
                if isinstance(c, tuple):
                    raise TypeError(
                        f"table {name}: cell {c!r}: pass a Cell (e.g. Cell(value, tex=...)), "
                        "not a tuple; CSVs hold plain values"
                    )
        cells = lambda j: [r[j] for r in rows if isinstance(r[j], Cell)]  # noqa: E731
        extras = []  # per column: the companion columns it needs
        for j in range(len(header)):
            cs = cells(j)
            extras.append(
                [
                    k
                    for k, used in (
                        ("sd", any(c.spread is not None for c in cs)),
                        ("note", any(c.note for c in cs)),
                        ("reproduced", any(c.reproduced is not None for c in cs)),
                    )
                    if used
                ]
            )
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow([h for j, h in enumerate(header) for h in [h] + [f"{h} {k}" for k in extras[j]]])
        for row in rows:
            out = []
            for j, c in enumerate(row):
                c = c if isinstance(c, Cell) else Cell(c)
                out.append(_plain(c.value))
                for k in extras[j]:
                    out.append({"sd": _plain(c.spread), "note": c.note, "reproduced": _plain(c.reproduced)}[k])
            w.writerow(out)
        atomic_write_text(self._staged(f"tables/{name}.csv"), buf.getvalue())

        def cell(c):
            return c.latex(digits) if isinstance(c, Cell) else fmt(c, digits)

        align = align or ("l" + "r" * (len(header) - 1))
        head = header_tex or [latex_escape(h) for h in header]
        body = [" & ".join(cell(c) for c in row) + r" \\" for row in rows]
        lines = [rf"\begin{{tabular}}{{{align}}}", r"\toprule", " & ".join(head) + r" \\", r"\midrule"]
        lines = body if rows_only else lines + body + [r"\bottomrule", r"\end{tabular}"]
        atomic_write_text(self._staged(f"tables/{name}.tex"), "\n".join(lines) + "\n")
        return self.dir / "tables" / f"{name}.tex"

    # -- numbers quoted in the text --------------------------------------------------
    @property
    def macro_prefix(self) -> str:
        """The section's name without underscores (LaTeX macros are letters only): cifar_comparison
        -> ``\\cifarcomparisonSeeds``."""
        return self.section.replace("_", "")

    def variable(self, name: str, value: Any, digits: int = 3) -> str:
        """Define ``\\<section prefix><Name>`` (letters only) and rewrite the (staged) variables file."""
        if not _MACRO.match(name):
            raise ValueError(f"variable names must be letters only (LaTeX macro), got {name!r}")
        text = value if isinstance(value, str) and value.startswith("$") else fmt(value, digits)
        self._variables[name] = text
        lines = [f"% written by the {self.section} notebook at profile {self.profile}; do not edit"]
        lines += [rf"\newcommand{{\{self.macro_prefix}{k}}}{{{v}}}" for k, v in self._variables.items()]
        atomic_write_text(self._staged(f"variables/{self.section}.tex"), "\n".join(lines) + "\n")
        return text

    def variables(self, values: dict[str, Any]) -> None:
        """:meth:`variable` for each entry; a value may be ``(value, digits)``."""
        for name, value in values.items():
            value, digits = value if isinstance(value, tuple) else (value, 3)
            self.variable(name, value, digits)

    # -- all or nothing ------------------------------------------------------------------
    def commit(self) -> Path:
        """Make every output of this run visible in ``paper_dir`` and stamp the section.

        Returns the stamp's path. Outputs the section's previous run wrote and this one did
        not are removed, so ``paper/`` never shows two profiles of one section.
        """
        if self.committed:
            raise RuntimeError(f"report {self.section!r} is already committed")
        assert self._stage is not None  # the constructor wrote the variables file
        recover(self.dir)  # an interrupted commit of this section first: its journal is about to be replaced
        stamp = dict(
            section=self.section,
            profile=self.profile,
            data=self.data,
            notebook=self.notebook,
            files={rel: _sha256(self._stage / rel) for rel in sorted(self._files)},
        )
        # The files of the section's previous commit go into the journal too: a kill after its
        # stamp is gone still leaves recover() the list of what to remove (one profile, never two).
        previous = _stamp_files(self.dir / STAMPS / f"{self.section}.json")
        journal = dict(stage=self._stage.name, pid=os.getpid(), stamp=stamp, old=sorted(previous))
        atomic_write_text(self.dir / STAMPS / f"{self.section}.commit", json.dumps(journal, indent=1))
        self.committed = True
        _finish(self.dir, self.section)
        return self.dir / STAMPS / f"{self.section}.json"

    def discard(self) -> None:
        """Drop what this run staged; ``paper_dir`` keeps the previous outputs."""
        if self._stage is not None and not self.committed:
            shutil.rmtree(self._stage, ignore_errors=True)
        self.committed = True

    # -- a section's outputs, as data ----------------------------------------------------
    def write(self, output: Output) -> None:
        """Render one of a section's outputs (:mod:`quadnn_paper.common.outputs`); a table's LaTeX
        head and column alignment come from :mod:`quadnn_paper.latex`."""
        if isinstance(output, Table):
            head = latex.head(self.section, output.name, output.header)
            labels = head.pop("labels", {})  # plain cell text -> its LaTeX (a label with math)
            rows = [[_labelled(c, labels) for c in row] for row in output.rows]
            self.table(output.name, output.header, rows, digits=output.digits, rows_only=output.rows_only, **head)
        elif isinstance(output, Figure):
            import matplotlib.pyplot as plt

            fig = output.draw()
            try:
                self.figure(fig, output.name)
            finally:
                plt.close(fig)
        elif isinstance(output, Variables):
            self.variables(output.values)
        elif not isinstance(output, Lines):
            raise TypeError(f"section {self.section}: not an output: {output!r} (expected one of {Output})")


def _labelled(cell: Any, labels: dict[str, str]) -> Any:
    """``cell`` with the LaTeX of its text where :mod:`quadnn_paper.latex` gives one."""
    if isinstance(cell, Cell) and isinstance(cell.value, str) and cell.tex is None and cell.value in labels:
        return dataclasses.replace(cell, tex=labels[cell.value])
    if isinstance(cell, str) and cell in labels:
        return Cell(cell, tex=labels[cell])
    return cell


def show(outputs: Iterable[Output], check: bool = False) -> None:
    """Print the outputs' :class:`Lines` (``check``: only those nbval compares, else the others)."""
    for output in outputs:
        if isinstance(output, Lines) and output.check == check:
            print("\n".join(output.text))


def publish(section, paper_dir: str | Path) -> Path:
    """Write a section's outputs (:class:`quadnn_paper.execution.SectionOutputs`) into ``paper_dir``
    and commit them together; returns the stamp's path."""
    import matplotlib

    matplotlib.use("Agg")  # files only: in a notebook the inline backend would also show each figure
    with Report(paper_dir, section.section, section.profile, section.data) as report:
        for output in section.outputs:
            report.write(output)
    return report.dir / STAMPS / f"{section.section}.json"


def _finish(paper_dir: Path, section: str) -> None:
    """Carry out (or finish) the commit journalled for ``section``. Idempotent."""
    stamps = paper_dir / STAMPS
    journal_path = stamps / f"{section}.commit"
    journal = json.loads(journal_path.read_text())
    stage, stamp = paper_dir / STAGING / journal["stage"], journal["stamp"]
    stamp_path = stamps / f"{section}.json"
    old = set(journal.get("old", [])) | _stamp_files(stamp_path)
    stamp_path.unlink(missing_ok=True)  # from here until the new stamp, the section counts as unfinished
    for rel in stamp["files"]:
        src = stage / rel
        if src.exists():
            (paper_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            try:
                os.replace(src, paper_dir / rel)
            except FileNotFoundError:  # moved meanwhile by a concurrent recover()
                pass
    for rel in set(old) - set(stamp["files"]):
        (paper_dir / rel).unlink(missing_ok=True)
    atomic_write_text(stamp_path, json.dumps(stamp, indent=1))
    shutil.rmtree(stage, ignore_errors=True)
    journal_path.unlink(missing_ok=True)


def _stamp_files(path: Path) -> set[str]:
    """The files a section's stamp lists (none when there is no stamp, or it is not one)."""
    try:
        files = json.loads(path.read_text()).get("files")
    except (OSError, ValueError, AttributeError):
        return set()
    return set(files) if isinstance(files, dict) else set()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover(paper_dir: str | Path) -> list[str]:
    """Finish commits a kill interrupted; drop staging left by dead processes. Returns the sections finished."""
    paper_dir = Path(paper_dir)
    done = []
    for journal in sorted((paper_dir / STAMPS).glob("*.commit")):
        try:
            pid = json.loads(journal.read_text()).get("pid")
        except (OSError, ValueError):  # finished meanwhile, or torn (cannot be: written atomically)
            continue
        if pid not in (None, os.getpid()) and _alive(pid):
            continue  # its process is committing right now
        _finish(paper_dir, journal.stem)
        done.append(journal.stem)
    for stage in (paper_dir / STAGING).glob("*.*.*") if (paper_dir / STAGING).is_dir() else []:
        pid = stage.name.split(".")[1]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(stage, ignore_errors=True)
    return done


STAMP_FIELDS = ("section", "profile", "files")


def _stamp_or_why(path: Path) -> tuple[dict | None, str | None]:
    """The stamp at ``path``, or why it is not one (unreadable, or lacking its fields)."""
    try:
        st = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        return None, f"{path} is not a stamp ({type(e).__name__}); remove it, or run make paper again"
    missing = [k for k in STAMP_FIELDS if not isinstance(st, dict) or k not in st]
    if missing or not isinstance(st["files"], dict):
        return None, f"{path} is not a stamp (no {', '.join(missing) or 'files'}); remove it, or run make paper again"
    return st, None


def stamps(paper_dir: str | Path) -> dict[str, dict]:
    """section -> stamp, for every committed section in ``paper_dir`` (files that are not stamps
    are left out: :func:`problems` names them)."""
    found = {p.stem: _stamp_or_why(p)[0] for p in sorted((Path(paper_dir) / STAMPS).glob("*.json"))}
    return {section: st for section, st in found.items() if st is not None}


def problems(paper_dir: str | Path, profile: str, notebooks: Iterable[str] | None = None) -> list[str]:
    """Why ``paper_dir`` is not one consistent ``profile`` (empty list: it is).

    Every stamped section must be at ``profile`` with its files as stamped, no commit may be
    half done, and each of ``notebooks`` (names without ``.ipynb``) must have stamped a section.
    """
    paper_dir = Path(paper_dir)
    out = [
        f"section {j.stem}: a commit was interrupted (run recover)"
        for j in sorted((paper_dir / STAMPS).glob("*.commit"))
    ]
    out += [why for p in sorted((paper_dir / STAMPS).glob("*.json")) if (why := _stamp_or_why(p)[1])]
    found = stamps(paper_dir)
    for section, st in found.items():
        out += _stamp_problems(paper_dir, section, st, profile)
    ran = {st.get("notebook") for st in found.values()}
    out += [
        f"notebook {nb} has no stamped outputs in {paper_dir} (not run by make paper, or unfinished)"
        for nb in (notebooks or [])
        if nb not in ran
    ]
    return out


def stale_notebooks(paper_dir: str | Path, profile: str, notebooks: Iterable[str]) -> list[str]:
    """The notebooks whose outputs in ``paper_dir`` are not a finished, intact run at ``profile``."""
    found = stamps(paper_dir)
    bad = {
        st.get("notebook") for section, st in found.items() if _stamp_problems(Path(paper_dir), section, st, profile)
    }
    ran = {st.get("notebook") for st in found.values()}
    return [nb for nb in notebooks if nb in bad or nb not in ran]


def _stamp_problems(paper_dir: Path, section: str, st: dict, profile: str) -> list[str]:
    out = []
    if st["profile"] != profile:
        out.append(f"section {section} (notebook {st.get('notebook')}) is from profile {st['profile']}, not {profile}")
    for rel, digest in st["files"].items():
        path = paper_dir / rel
        if not path.is_file():
            out.append(f"section {section}: {rel} is missing")
        elif _sha256(path) != digest:
            out.append(f"section {section}: {rel} was changed after its notebook wrote it")
    return out
