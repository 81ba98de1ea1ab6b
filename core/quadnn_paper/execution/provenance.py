"""Where each output of a section came from, recorded while it is built (what ``why`` reads).

:func:`.run.run_section` hands a section's ``outputs()`` a :class:`Reads` in place of its results:
the same mapping, which notes each key read and the companion's functions on the stack when it
was (:func:`~quadnn_paper.common.outputs.call_chain`); every output notes the functions that made
it. An output read what the innermost of its makers read (a figure: what its ``draw`` read, when it
read any). :meth:`Trace.record` is the section's provenance, written by
:func:`quadnn_paper.report.publish` into ``paper/provenance/<section>.json`` with its other files:
the build (commit, profile, runner, date, the command that rebuilds the section), every run and
computation of its work (configuration, data fingerprint), and per table, figure and macro its
maker and the keys it read. Nothing here computes a result.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from ..common.outputs import Figure, Output, Table, Variables, call_chain

__all__ = ["Reads", "Trace", "rebuild_command", "VERSION"]

VERSION = 1  # of the provenance file's layout
REPORT_MACROS = ("Profile", "Data")  # the macros quadnn_paper.report.Report writes for every section


def rebuild_command(section: str, profile: str, tiny: bool = False, runner: str | None = None) -> str:
    """The one command that rebuilds ``section``'s outputs at ``profile`` (and the PDF)."""
    extra = (" TINY=1" if tiny else "") + (f" RUNNER={runner}" if runner else "")
    return f"make paper PROFILE={profile} SECTIONS={section}{extra}"


class Reads(Mapping):
    """``results`` as a read-only mapping that notes every key read and the chain of functions
    reading it (iterating reads every key)."""

    def __init__(self, results: Mapping[str, Any]):
        self._results = results
        self.read: dict[str, set[tuple[str, ...]]] = {}
        self._drawing: set[str] | None = None

    def _note(self, key: str) -> None:
        self.read.setdefault(key, set()).add(call_chain(skip=(__name__,)))
        if self._drawing is not None:
            self._drawing.add(key)

    def __getitem__(self, key: str) -> Any:
        value = self._results[key]
        self._note(key)
        return value

    def __iter__(self) -> Iterator[str]:
        for key in self._results:
            self._note(key)
            yield key

    def __len__(self) -> int:
        return len(self._results)

    def __contains__(self, key: object) -> bool:
        return key in self._results

    @contextlib.contextmanager
    def drawing(self) -> Iterator[set[str]]:
        """The keys read inside the block (a figure's ``draw``)."""
        before, self._drawing = self._drawing, set()
        try:
            yield self._drawing
        finally:
            self._drawing = before

    def by(self, chain: tuple[str, ...]) -> list[str]:
        """What the output made by ``chain`` read: the keys read while the innermost section function
        of ``chain`` that read any was running (itself or the functions it called); all keys read
        when none did; none when no section function made it (the executor's own outputs)."""
        functions = [f for f in chain if f.startswith("quadnn_paper.sections.")]
        for function in functions:
            keys = sorted(k for k, chains in self.read.items() if any(function in c for c in chains))
            if keys:
                return keys
        return sorted(self.read) if functions else []


class Trace:
    """What one section's build records: its work and the reads of its outputs."""

    def __init__(self, section: str, profile: str, tiny: bool, runner: str, work: list, reads: Reads):
        self.section, self.profile, self.tiny, self.runner = section, profile, tiny, runner
        self.work, self.reads = work, reads
        self._drawn: dict[str, list[str]] = {}

    @contextlib.contextmanager
    def writing(self, output: Output) -> Iterator[None]:
        """Around the writer's rendering of ``output``: a figure's draw is traced."""
        if not isinstance(output, Figure):
            yield
            return
        with self.reads.drawing() as keys:
            yield
        self._drawn[output.name] = sorted(keys)

    def _reads_of(self, output: Output) -> list[str]:
        if isinstance(output, Figure) and self._drawn.get(output.name):
            return self._drawn[output.name]
        return self.reads.by(output.made_by)

    def record(self, outputs: list[Output], macro_prefix: str) -> dict:
        """The section's provenance (see the module doc); ``macro_prefix`` names its macros."""
        from ..engine import Computation
        from .identity import build_identity  # here: `python -m ...identity` finds it unimported

        results = self.reads._results
        work = {}
        for item in self.work:
            if isinstance(item, Computation):
                work[item.key] = dict(
                    kind="computation", what=item.describe(), function=item.function, config=dict(item.config)
                )
                work[item.key]["config"].update({"needs": [n.key for n in item.needs]} if item.needs else {})
            else:
                result = results.get(item.run_id) if isinstance(results, Mapping) else None
                work[item.run_id] = dict(
                    kind="run",
                    what=item.describe(),
                    config=item.key(),
                    data_fingerprint=(result or {}).get("data_fingerprint") if isinstance(result, dict) else None,
                    status=(result or {}).get("status") if isinstance(result, dict) else None,
                )
        made = {}
        for output in outputs:
            maker = output.made_by[0] if getattr(output, "made_by", ()) else None
            if isinstance(output, Figure):
                draw = getattr(output.draw, "func", output.draw)
                drawer = f"{getattr(draw, '__module__', '?')}:{getattr(draw, '__qualname__', '?')}"
                files = [f"figures/{output.name}.{ext}" for ext in ("pdf", "png", "data.json")]
                entry = dict(kind="figure", made_by=maker, draw=drawer, files=files)
            elif isinstance(output, Table):
                files = [f"tables/{output.name}.csv", f"tables/{output.name}.tex"]
                entry = dict(kind="table", made_by=maker, files=files, rows=len(output.rows))
            elif isinstance(output, Variables):
                for name in output.values:
                    made[f"\\{macro_prefix}{name}"] = dict(
                        kind="macro",
                        made_by=maker,
                        files=[f"variables/{self.section}.tex"],
                        reads=self._reads_of(output),
                    )
                continue
            else:
                continue
            entry["reads"] = self._reads_of(output)
            made[f"{entry['kind']}s/{output.name}" if entry["kind"] != "macro" else output.name] = entry
        for name in REPORT_MACROS:
            made[f"\\{macro_prefix}{name}"] = dict(
                kind="macro", made_by="quadnn_paper.report:Report", files=[f"variables/{self.section}.tex"], reads=[]
            )
        return dict(
            version=VERSION,
            section=self.section,
            module=f"quadnn_paper.sections.{self.section}",
            profile=self.profile,
            tiny=self.tiny,
            runner=self.runner,
            **build_identity(),
            command=rebuild_command(self.section, self.profile, self.tiny),
            work=work,
            outputs=made,
        )
