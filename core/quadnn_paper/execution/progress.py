"""What a section's work is doing while it runs: counts, the item at work, and the time left.

:class:`Progress` is told the state of every item of a section's work (runs and computations, by
key) as the executor learns it, and reports per kind how many are done, running and pending of
the total, with an estimate of the time left from the run times it measured (an item found done
when it started, a cached one, is not a measurement). On a terminal it redraws one bar line; on
anything else (a CI log, a file) it writes one line each time an item finishes, and one line a
minute while a single long item runs, so a log always says what is being computed.

Where it writes (:func:`channel`): ``sys.stderr`` (a script's terminal, a notebook's cell output);
with ``QUADNN_PROGRESS=launch`` (what ``make paper`` sets), the stream the process was started with:
in a Jupyter kernel run by papermill that is papermill's stderr, ``make paper``'s own output, and not
the executed notebook; with ``QUADNN_PROGRESS=PATH``, that file (appended to).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterable
from typing import IO

__all__ = ["Progress", "channel", "ENV", "HEARTBEAT_S"]

ENV = "QUADNN_PROGRESS"  # "launch", or a path progress is appended to (see channel())
LAUNCH = "launch"
HEARTBEAT_S = 60.0  # a line while one item runs this long without a change (not on a terminal)
_REDRAW_S = 1.0  # a terminal's bar is redrawn this often while an item runs
WORDS = {"pending": "pending", "running": "running", "done": "done", "failed": "failed", "missing": "pending"}


def channel() -> IO[str]:
    """The stream progress goes to (see the module doc)."""
    where = os.environ.get(ENV, "")
    if where == LAUNCH:
        original = getattr(sys.stderr, "_original_stdstream_copy", None)  # ipykernel keeps the launch stderr
        if isinstance(original, int):
            try:
                return os.fdopen(os.dup(original), "w", buffering=1)
            except OSError:
                pass
        return sys.__stderr__ or sys.stderr
    if where:
        try:
            return open(where, "a", buffering=1)  # noqa: SIM115 (kept open for the section's work)
        except OSError:
            pass
    return sys.stderr


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds // 60 % 60:02d} min"


class Progress:
    """Counts and time left of one section's work. ``items``: ``(key, kind, label, size)`` with
    kind ``"run"`` or ``"computation"``; ``size``: its cost relative to the others of its kind (a
    computation's declared seconds, a run's epochs). ``prior``: seconds per unit of size per kind
    before any item of that kind has finished here (a computation's size is seconds: 1.0; a run's
    is not known). ``queue``: the name of the runner's states (``"SLURM"``: pending is queued there)."""

    def __init__(
        self,
        section: str,
        items: Iterable[tuple[str, str, str, float | None]],
        queue: str = "",
        prior: dict[str, float] | None = None,
        stream: IO[str] | None = None,
        tty: bool | None = None,
        clock=time.monotonic,
    ):
        self.section, self.queue, self.clock = section, queue, clock
        self.items = {key: (kind, label, size) for key, kind, label, size in items}
        self.prior = {"computation": 1.0} if prior is None else prior
        # papermill's cell bar shares the launch stream and ends without a newline: start below it
        self._pending_newline = stream is None and os.environ.get(ENV) == LAUNCH
        self.stream = stream if stream is not None else channel()
        self._owned = stream is None and self.stream not in (sys.stderr, sys.__stderr__)  # closed by close()
        self.tty = self.stream.isatty() if tty is None else tty
        self.state = {key: "pending" for key in self.items}
        self.started: dict[str, float] = {}  # key -> when it was first seen running
        self.measured: dict[str, float] = {}  # key -> seconds it ran, for items finished here
        self.begun = clock()
        self._changed = self.begun
        self._lock = threading.RLock()
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()

    # -- what the executor tells it --------------------------------------------------------
    def update(self, states: dict[str, str]) -> None:
        """Take the states of some items (``done``, ``running``, ``pending``, ``failed``, ``missing``)."""
        finished = []
        with self._lock:
            now = self.clock()
            for key, state in states.items():
                if key not in self.items or self.state[key] == state:
                    continue
                self.state[key] = state
                self._changed = now
                if state == "running":
                    self.started.setdefault(key, now)
                elif state in ("done", "failed"):
                    # measured only when seen starting (one that finished between two polls is counted)
                    if key in self.started:
                        self.measured[key] = now - self.started[key]
                    finished.append(key)
            self._show(finished)

    def known_done(self, keys: Iterable[str]) -> None:
        """Items already done before anything ran (cached): counted, never measured."""
        with self._lock:
            for key in keys:
                if key in self.items:
                    self.state[key] = "done"
            self._show([]) if self.tty else self._write(self.line() + "\n")

    def start(self, key: str) -> None:
        """``key`` starts now in this process."""
        self.update({key: "running"})

    def finish(self, key: str, ok: bool = True) -> None:
        self.update({key: "done" if ok else "failed"})

    # -- a ticking line while one item runs long --------------------------------------------
    def __enter__(self) -> Progress:
        self._ticker = threading.Thread(target=self._tick, name="quadnn-progress", daemon=True)
        self._ticker.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop ticking and leave the last line standing."""
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
            self._ticker = None
        with self._lock:
            if self.tty:  # the bar's last state, kept on its line
                self._show([])
                self._write("\n")
            elif any(s != "done" for s in self.state.values()):
                self._write(self.line() + "\n")
            if self._owned:
                self.stream.close()

    def _tick(self) -> None:
        period = _REDRAW_S if self.tty else HEARTBEAT_S
        while not self._stop.wait(period):
            with self._lock:
                running = [k for k, s in self.state.items() if s == "running"]
                if not running:
                    continue
                if self.tty:
                    self._show([])
                elif self.clock() - self._changed >= HEARTBEAT_S:
                    self._changed = self.clock()
                    self._write(self.line() + "\n")

    # -- what it says -------------------------------------------------------------------------
    def counts(self, kind: str) -> dict[str, int]:
        states = [self.state[k] for k, (kd, _, _) in self.items.items() if kd == kind]
        out = {word: 0 for word in ("done", "running", "pending", "failed")}
        for s in states:
            out[WORDS[s]] += 1
        out["total"] = len(states)
        return out

    def rate(self, kind: str) -> float | None:
        """Seconds per unit of size of ``kind``: measured here (its finished items' seconds over
        their sizes), else the prior."""
        done = [(t, self.items[k][2]) for k, t in self.measured.items() if self.items[k][0] == kind]
        size = sum(s or 0 for _, s in done)
        return sum(t for t, _ in done) / size if size > 0 else self.prior.get(kind)

    def seconds_left(self) -> float | None:
        """Time left: each unfinished item's size times its kind's :meth:`rate`, less what a running
        one has run, spread over as many items as run at once now; None while a rate is unknown."""
        total, now = 0.0, self.clock()
        for key, (kind, _, size) in self.items.items():
            if self.state[key] in ("done", "failed"):
                continue
            rate = self.rate(kind)
            if rate is None or size is None:
                return None
            ran = now - self.started[key] if self.state[key] == "running" and key in self.started else 0.0
            total += max(size * rate - ran, 0.0)
        at_once = max(1, sum(s == "running" for s in self.state.values()))
        return total / at_once

    def line(self) -> str:
        """``runge: runs 3/12 done, 2 running, 7 pending; computations 1/2 done, 1 running; 4 min left``"""
        parts = []
        for kind, plural in (("run", "runs"), ("computation", "computations")):
            c = self.counts(kind)
            if not c["total"]:
                continue
            words = [f"{c['done']}/{c['total']} done"]
            for word in ("running", "pending", "failed"):
                if c[word]:
                    shown = "queued" if word == "pending" and self.queue else word
                    words.append(f"{c[word]} {shown}")
            parts.append(f"{plural} " + ", ".join(words))
        line = f"{self.section}: " + "; ".join(parts or ["nothing to compute"])
        if self.queue and any(s in ("pending", "running") for s in self.state.values()):
            line += f" (states from {self.queue})"
        if all(s in ("done", "failed") for s in self.state.values()):
            return line + f"; took {_duration(self.clock() - self.begun)}"
        left = self.seconds_left()
        line += f"; {_duration(left)} left" if left is not None else "; time left: known once one has finished"
        running = [k for k, s in self.state.items() if s == "running"]
        if len(running) == 1:
            key = running[0]
            kind, label, size = self.items[key]
            ran = _duration(self.clock() - self.started.get(key, self.begun))
            rate = self.rate(kind)
            expected = f" of ~{_duration(size * rate)}" if rate is not None and size is not None else ""
            line += f"; now {label} ({ran}{expected})"
        return line

    def _show(self, finished: list[str]) -> None:
        if self.tty:
            width = 120
            self._write("\r\x1b[K" + self._bar() + " " + self.line()[: width - 24])
            return
        for key in finished:
            kind, label, _ = self.items[key]
            took = self.measured.get(key)
            what = "finished" if self.state[key] == "done" else "FAILED"
            self._write(f"{self.section}: {kind} {label} {what}" + (f" in {_duration(took)}" if took else "") + "\n")
        if finished:
            self._write("  " + self.line() + "\n")

    def _bar(self, width: int = 20) -> str:
        done = sum(s in ("done", "failed") for s in self.state.values())
        total = max(1, len(self.state))
        full = round(width * done / total)
        return f"[{'#' * full}{'.' * (width - full)}]"

    def _write(self, text: str) -> None:
        if self._pending_newline and not self.tty:
            text, self._pending_newline = "\n" + text, False
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the stream went away (a closed terminal): progress is not the work
            pass
