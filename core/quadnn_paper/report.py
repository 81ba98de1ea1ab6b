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

The paper folder may be a user's thesis folder, shared with others:
- publish owns only what its stamps list with matching bytes: a file of the same name that it did
  not write, or that changed since, is never replaced or removed (:class:`NotPublished`);
- one publisher per section: each commit holds ``.stamps/SECTION.lock`` (``flock``), and a
  journal is finished by whoever next takes that lock, never because a pid looks dead; a Report
  holds its stage's lock while it lives, so only stages whose writer is gone are removed;
- a journal or stamp is data: each path it names must stay inside the paper folder's outputs,
  and a journal of another shape is refused in one line naming it (:class:`BadJournal`), left
  for the user; no link is followed there.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import re
import shutil
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from quadnn_paper.common import figure_lint
from quadnn_paper.common.cells import Cell, fmt, latex_escape
from quadnn_paper.common.figure_data import figure_data
from quadnn_paper.common.files import (
    RefusedFile,
    atomic_write_bytes,
    atomic_write_text,
    flock_fd,
    flocked,
    inside,
    make_dirs,
    quoted,
    read_own,
    sha256_file,
)
from quadnn_paper.common.macros import write_macros
from quadnn_paper.common.outputs import Column, Figure, Lines, Output, Table, Variables, columns
from quadnn_paper.common.profiles import check_profile
from quadnn_paper.common.words import path_setting

__all__ = [
    "Report",
    "Cell",
    "fmt",
    "latex_escape",
    "save_figure",
    "recover",
    "problems",
    "publish",
    "show",
    "NotPublished",
    "BadJournal",
]

_MACRO = re.compile(r"^[A-Za-z]+$")
_SECTION = re.compile(r"^[a-z]+(_[a-z]+)*$")
STAGING = ".staging"
STAMPS = ".stamps"
NOTEBOOK_ENV = "QUADNN_NOTEBOOK"  # set by the Makefile: which notebook a stamp belongs to
OUTPUT_DIRS = ("figures", "tables", "variables")  # the only folders publish writes into
_LIVE: set[str] = set()  # stages of this process's live Reports: never probed (on NFS a probe of one's
# own flock succeeds, and closing it releases the holder's), never removed


class NotPublished(RefusedFile):
    """Files publish would replace or remove that it does not own (not in the section's stamp with
    the same bytes): a user's own file of that name, or one edited since publish wrote it."""


class BadJournal(RefusedFile):
    """A commit journal (or the stamp it relies on) that is not of the shape publish writes."""


def _sha256(path: Path) -> str:
    """A paper file's SHA-256, read without following a link."""
    return sha256_file(path, own=True)


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
    buf = io.BytesIO()  # drawn in memory: a full disk is then one line naming the file (atomic_write_bytes)
    fig.savefig(buf, format=kwargs.pop("format", path.suffix.lstrip(".")), **kwargs)
    atomic_write_bytes(path, buf.getbuffer())
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
        self.dir = path_setting(paper_dir, "paper_dir")
        self.section, self.profile, self.data = section, check_profile(profile), data
        # A section and its notebook share one name (tests/test_sections.py), so a run outside make
        # (nbval, Jupyter) stamps the section's own notebook.
        self.notebook = os.environ.get(NOTEBOOK_ENV) or section
        self._stage: Path | None = None
        self._held = None  # the stage's lock, held while this report lives (recover() leaves the stage)
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
            # the lock first, then the folder: a stage without its lock held has no writer left
            name = f"{self.section}.{os.urandom(6).hex()}"
            self._held = os.fdopen(flock_fd(inside(self.dir, f"{STAGING}/{name}.lock", "stage lock")), "r+b")
            self._stage = self.dir / STAGING / name
            _LIVE.add(os.path.abspath(self._stage))
            make_dirs(self._stage)
        self._files.add(relative)
        path = self._stage / relative
        make_dirs(path.parent)
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
        data_file = f"figures/{name}.data.json"  # the numbers it plots, before the corner mark is drawn
        atomic_write_text(self._staged(data_file), json.dumps(figure_data(fig), indent=1) + "\n")
        # below the lowest thing drawn (a legend placed under the axes too), in figure coordinates
        lowest = fig.get_tightbbox(fig.canvas.get_renderer()).y0 / fig.get_size_inches()[1]
        fig.text(
            0.995,
            min(0.0, lowest) - 0.01,
            f"profile: {self.profile}; data: {self.data}; numbers: {data_file}; {why_command(name)}",
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
        header: Sequence[str | Column],
        rows: Sequence[Sequence[Any]],
        *,
        align: str | None = None,
        digits: int = 4,
        header_tex: Sequence[str] | None = None,
        rows_only: bool = False,
        keys: Sequence[str] | None = None,
    ) -> Path:
        """Write ``tables/NAME.csv`` (plain values) and ``tables/NAME.tex`` (a formatted tabular).

        Cells are numbers (formatted by :func:`fmt`), strings (escaped) or :class:`Cell` (value
        with spread, "not reproduced" flag, note, LaTeX label). In the CSV a column holding
        :class:`Cell` spreads, notes or flags gets a companion column for each, so every CSV
        cell is a bare number or string. ``header`` holds column names or :class:`Column` (its
        typeset head and alignment); ``header_tex`` and ``align`` replace the columns' own.
        ``rows_only``: the ``.tex`` holds the body rows alone, for a table the report assembles
        from several sections (the CSV is complete either way). ``keys``: each row's stable id ("":
        none), written as ``tables/NAME.keys.json``, one entry per CSV row.
        """
        if keys is not None:
            ids = [k for k in keys if k]
            if len(keys) != len(rows) or len(ids) != len(set(ids)):
                raise ValueError(f"table {name}: keys {list(keys)!r} must name each of its {len(rows)} rows once")
            atomic_write_text(self._staged(f"tables/{name}.keys.json"), json.dumps(list(keys), indent=1) + "\n")
        cols = columns(header)
        header = [c.name for c in cols]
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

        align = align or "".join(c.align for c in cols)
        head = header_tex or [latex_escape(c.name) if c.tex is None else c.tex for c in cols]
        body = [" & ".join(cell(c) for c in row) + r" \\" for row in rows]
        lines = [rf"\begin{{tabular}}{{{align}}}", r"\toprule", " & ".join(head) + r" \\", r"\midrule"]
        lines = body if rows_only else lines + body + [r"\bottomrule", r"\end{tabular}"]
        if not rows_only:  # main.tex's \quadnnsource: the table, a link to its CSV, the why command
            lines = [rf"\quadnnsource{{tables/{name}.csv}}{{{latex_escape(name)}}}{{%", *lines, "}"]
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
        write_macros(
            self._staged(f"variables/{self.section}.tex"),
            f"written by the {self.section} notebook at profile {self.profile}; do not edit",
            {f"{self.macro_prefix}{k}": v for k, v in self._variables.items()},
        )
        return text

    def variables(self, values: dict[str, Any]) -> None:
        """:meth:`variable` for each entry; a value may be ``(value, digits)``."""
        for name, value in values.items():
            value, digits = value if isinstance(value, tuple) else (value, 3)
            self.variable(name, value, digits)

    def provenance(self, record: dict) -> str:
        """Write the section's provenance (what ``python -m quadnn_paper.why`` reads) with its outputs."""
        relative = f"variables/{self.section}.provenance.json"
        atomic_write_text(self._staged(relative), json.dumps(record, indent=1, sort_keys=True, default=str) + "\n")
        return relative

    # -- all or nothing ------------------------------------------------------------------
    def commit(self) -> Path:
        """Make every output of this run visible in ``paper_dir`` and stamp the section.

        Returns the stamp's path. Outputs the section's previous run wrote and this one did
        not are removed, so ``paper/`` never shows two profiles of one section. A file it would
        replace or remove without owning it (:class:`NotPublished`) stops it before anything moves.
        """
        if self.committed:
            raise RuntimeError(f"report {self.section!r} is already committed")
        assert self._stage is not None  # the constructor wrote the variables file
        recover(self.dir)  # other sections' interrupted commits, and stages whose writers are gone
        with flocked(inside(self.dir, f"{STAMPS}/{self.section}.lock", "section lock")):  # one publisher
            if os.path.lexists(self.dir / STAMPS / f"{self.section}.commit"):
                try:
                    _finish(self.dir, self.section)  # its committer is gone: we hold its lock
                except RefusedFile:  # (a bad journal, or a link in its stamp's place)
                    self.discard()
                    raise
            stamp = dict(
                section=self.section,
                profile=self.profile,
                data=self.data,
                notebook=self.notebook,
                files={rel: _sha256(self._stage / rel) for rel in sorted(self._files)},
            )
            # The files of the section's previous commit (with their bytes' hashes) go into the
            # journal too: a kill after its stamp is gone still leaves recover() the list of what to
            # remove (one profile, never two), and what it may remove (only those bytes).
            previous = _stamp_files(self.dir / STAMPS / f"{self.section}.json")
            theirs = _not_published(self.dir, stamp["files"], previous)
            if theirs:
                self.discard()
                raise NotPublished(
                    0,
                    f"publish {self.section}: refusing to replace or remove {', '.join(theirs)} in {self.dir}: "
                    f"publish did not write them, or they changed since (move them away, or rename "
                    f"your own, then publish again); nothing was changed",
                )
            journal = dict(stage=self._stage.name, stamp=stamp, old=previous)
            atomic_write_text(self.dir / STAMPS / f"{self.section}.commit", json.dumps(journal, indent=1))
            self.committed = True
            _finish(self.dir, self.section)
        self._release()
        return self.dir / STAMPS / f"{self.section}.json"

    def discard(self) -> None:
        """Drop what this run staged; ``paper_dir`` keeps the previous outputs."""
        if self._stage is not None and not self.committed:
            shutil.rmtree(self._stage, ignore_errors=True)
        self.committed = True
        self._release()

    def _release(self) -> None:
        """Let go of the stage's lock (its folder is gone: committed or discarded)."""
        if self._held is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._stage.with_name(self._stage.name + ".lock"))
            self._held.close()
            self._held = None
            _LIVE.discard(os.path.abspath(self._stage))

    # -- a section's outputs, as data ----------------------------------------------------
    def write(self, output: Output) -> None:
        """Render one of a section's outputs (:mod:`quadnn_paper.common.outputs`); a table's LaTeX
        head and column alignment are its columns'."""
        if isinstance(output, Table):
            self.table(
                output.name,
                output.header,
                output.rows,
                digits=output.digits,
                rows_only=output.rows_only,
                keys=output.keys,
            )
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


def why_command(name: str) -> str:
    """The command that says where output ``name`` (a table, figure or macro) came from."""
    return f"make why NAME={name}"


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
    trace = getattr(section, "trace", None)  # what each output read (execution.provenance), when traced
    with Report(paper_dir, section.section, section.profile, section.data) as report:
        for output in section.outputs:
            with trace.writing(output) if trace is not None else contextlib.nullcontext():
                report.write(output)
        if trace is not None:
            report.provenance(trace.record(section.outputs, report.macro_prefix))
    return report.dir / STAMPS / f"{section.section}.json"


def _finish(paper_dir: Path, section: str) -> None:
    """Carry out (or finish) the commit journalled for ``section``; only for the holder of the
    section's lock. Idempotent. A file is put in place only over one publish owns (the previous
    stamp's bytes, or this commit's own), and removed only with the bytes publish wrote there."""
    stamps = paper_dir / STAMPS
    journal_path = stamps / f"{section}.commit"
    stage, stamp, old = _journal(paper_dir, journal_path)
    stamp_path = stamps / f"{section}.json"
    old = old | _stamp_files(stamp_path)
    stamp_path.unlink(missing_ok=True)  # from here until the new stamp, the section counts as unfinished
    for rel, digest in stamp["files"].items():
        src, dst = stage / rel, paper_dir / rel
        if src.exists() and _owned(dst, {old.get(rel), digest}):
            make_dirs(dst.parent)
            try:
                os.replace(src, dst)
            except FileNotFoundError:  # moved meanwhile by a concurrent recover()
                pass
    for rel in set(old) - set(stamp["files"]):
        if _owned(paper_dir / rel, {old[rel]}):
            (paper_dir / rel).unlink(missing_ok=True)
    atomic_write_text(stamp_path, json.dumps(stamp, indent=1))
    shutil.rmtree(stage, ignore_errors=True)
    journal_path.unlink(missing_ok=True)


def _owned(path: Path, digests: set) -> bool:
    """Whether publish may replace or remove ``path``: absent, or a regular file (not a link)
    holding bytes publish wrote (one of ``digests``)."""
    if not os.path.lexists(path):
        return True
    try:
        return _sha256(path) in digests
    except OSError:  # a link, a FIFO, ...: not ours
        return False


def _not_published(paper_dir: Path, files: dict, previous: dict) -> list[str]:
    """The files a commit of ``files`` over a section stamped with ``previous`` would replace or
    remove without owning them: present but not the bytes the stamp lists (nor those about to be
    written, which changes nothing)."""
    return [
        rel
        for rel in sorted(set(files) | set(previous))
        if not _owned(inside(paper_dir, rel, "output"), {previous.get(rel), files.get(rel)})
    ]


def _journal(paper_dir: Path, path: Path) -> tuple[Path, dict, dict]:
    """The stage, stamp and previous files (path -> SHA-256) of the journal at ``path``, each path
    checked to stay inside the paper folder's outputs; else :class:`BadJournal`, naming it."""
    try:
        journal = json.loads(read_own(path))
        stamp, old = journal["stamp"], journal.get("old", {})
        files = stamp["files"]
        if not (isinstance(files, dict) and all(isinstance(d, str) for d in files.values())):
            raise TypeError("its stamp's files are not {path: sha256}")
        if isinstance(old, list):  # (journals written before they carried hashes: nothing is removed)
            old = {}
        if not (isinstance(old, dict) and all(isinstance(d, str) for d in old.values())):
            raise TypeError("its old files are not {path: sha256}")
        stage = inside(paper_dir / STAGING, journal["stage"], "stage")
        for rel in [*files, *old]:
            _output(paper_dir, rel)
    except RefusedFile as e:
        if isinstance(e, BadJournal):
            raise
        raise BadJournal(e.errno, f"{path}: not a commit journal publish wrote ({e}); {_LEFT}") from None
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        why = f"no {e}" if isinstance(e, KeyError) else quoted(e)
        raise BadJournal(
            0, f"{path}: not a commit journal publish wrote ({type(e).__name__}: {why}); {_LEFT}"
        ) from None
    return stage, stamp, old


_LEFT = "left as it is for you to look at: remove it to publish this section again"


def _output(paper_dir: Path, rel) -> Path:
    """``paper_dir / rel`` for a path read from a journal or stamp: inside one of :data:`OUTPUT_DIRS`."""
    path = inside(paper_dir, rel, "output")
    if Path(rel).parts[0] not in OUTPUT_DIRS or len(Path(rel).parts) < 2:
        raise RefusedFile(0, f"refusing the output {quoted(repr(rel))}: not under {', '.join(OUTPUT_DIRS)}")
    return path


def _stamp_files(path: Path) -> dict[str, str]:
    """The files a section's stamp lists, with their SHA-256 (none when there is no stamp, or it is
    not one, or a path it names leaves the paper's outputs)."""
    try:
        raw = read_own(path)  # (a link there is refused, not read as no stamp)
    except RefusedFile:
        raise
    except OSError:
        return {}
    try:
        files = json.loads(raw).get("files")
        if not isinstance(files, dict):
            return {}
        for rel in files:
            _output(path.parent.parent, rel)
    except (OSError, ValueError, AttributeError):
        return {}
    return {rel: d for rel, d in files.items() if isinstance(d, str)}


def recover(paper_dir: str | Path) -> list[str]:
    """Finish commits a kill interrupted and drop stages whose writers are gone, each decided by its
    lock (a held lock: its holder is at work). Returns the sections finished."""
    paper_dir = Path(paper_dir)
    done = []
    for journal in sorted((paper_dir / STAMPS).glob("*.commit")):
        if not _SECTION.match(journal.stem):
            continue
        try:
            with flocked(inside(paper_dir, f"{STAMPS}/{journal.stem}.lock", "section lock"), wait=False) as mine:
                if mine and os.path.lexists(journal):  # (else its publisher is committing right now)
                    _finish(paper_dir, journal.stem)
                    done.append(journal.stem)
        except RefusedFile as e:  # a bad journal, a link: left for the user; the section's own commit refuses
            warnings.warn(str(e), RuntimeWarning, stacklevel=2)
    staging = paper_dir / STAGING
    for stage in staging.iterdir() if staging.is_dir() and not staging.is_symlink() else []:
        if stage.name.endswith(".lock") or not stage.is_dir() or stage.is_symlink() or os.path.abspath(stage) in _LIVE:
            continue
        lock = stage.with_name(stage.name + ".lock")
        try:
            with flocked(lock, wait=False) as gone:  # its Report holds it while it lives
                if gone:
                    shutil.rmtree(stage, ignore_errors=True)
                    lock.unlink(missing_ok=True)
        except RefusedFile as e:  # (a link in the lock's place: that stage is left)
            warnings.warn(str(e), RuntimeWarning, stacklevel=2)
    return done


STAMP_FIELDS = ("section", "profile", "files")


def _stamp_or_why(path: Path) -> tuple[dict | None, str | None]:
    """The stamp at ``path``, or why it is not one (unreadable, or lacking its fields)."""
    try:
        st = json.loads(read_own(path))
    except (OSError, ValueError) as e:
        why = str(e) if isinstance(e, RefusedFile) else type(e).__name__
        return None, f"{path} is not a stamp ({why}); remove it, or run make paper again"
    missing = [k for k in STAMP_FIELDS if not isinstance(st, dict) or k not in st]
    if missing or not isinstance(st["files"], dict):
        return None, f"{path} is not a stamp (no {', '.join(missing) or 'files'}); remove it, or run make paper again"
    try:
        for rel in st["files"]:
            _output(path.parent.parent, rel)
    except RefusedFile as e:
        return None, f"{path} is not a stamp ({e}); remove it, or run make paper again"
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
        out.append(
            f"section {section} (notebook {quoted(st.get('notebook'), 100)}) is from profile "
            f"{quoted(st['profile'], 40)}, not {profile}"
        )
    for rel, digest in st["files"].items():
        path = paper_dir / rel  # (inside the outputs: _stamp_or_why checked it)
        if not os.path.lexists(path):
            out.append(f"section {section}: {rel} is missing")
        elif not _owned(path, {digest}):
            out.append(f"section {section}: {rel} was changed after its notebook wrote it")
    return out
