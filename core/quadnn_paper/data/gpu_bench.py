"""Benchmark rows measured on a GPU and committed with the repository (``docs/gpu/``).

The format: a folder ``docs/gpu/<YYYY-MM-DD>-<device>-<what>/`` (its name starts with the date
the rows were measured) holding one or more ``bench*.json`` files, each with one
:mod:`quadnn.bench` row per line, exactly as ``python -m quadnn.bench --device cuda --json``
prints them (``make gpu-check`` writes one as ``build/gpu-check/bench.json``). Every row must have
run on CUDA (``device`` ``cuda`` or ``cuda:N``) and name its GPU (``machine``): the efficiency
section shows these rows apart from the CPU rows it measures itself and never mixes the two.

:func:`load` reads the newest such folder (by name, so by date); None when there is none.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ..common.paths import REPO

__all__ = ["GPU_DOCS", "REQUIRED", "GpuBench", "load", "read"]

GPU_DOCS = REPO / "docs" / "gpu"
# What a row must carry to be shown (the rest of quadnn.bench's fields are optional here: a
# file written by an older bench lacks the launch counts, and the table says "--" for them).
REQUIRED = (
    "model",
    "implementation",
    "baseline",
    "compiled",
    "device",
    "machine",
    "batch_size",
    "step_ms",
    "time_ratio",
)


@dataclasses.dataclass
class GpuBench:
    folder: str  # relative to the repository when it lies inside it
    date: str  # YYYY-MM-DD, from the folder's name
    machine: str  # the GPU, torch and CUDA versions, as quadnn.bench names them
    rows: list[dict]


def read(folder: str | Path) -> GpuBench:
    """The rows of every ``bench*.json`` in ``folder``; ValueError naming the file and line of a
    row that is not JSON, misses a field of :data:`REQUIRED` or did not run on CUDA."""
    folder = Path(folder)
    rows = []
    files = sorted(folder.glob("bench*.json"))
    if not files:
        raise ValueError(f"{folder}: no bench*.json (one quadnn.bench --json row per line)")
    for path in files:
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{i}: not a JSON row ({e.msg})") from None
            missing = [k for k in REQUIRED if k not in row]
            if missing:
                raise ValueError(f"{path}:{i}: a quadnn.bench row needs {', '.join(missing)}")
            if not str(row["device"]).startswith("cuda"):
                raise ValueError(f"{path}:{i}: measured on {row['device']!r}, not a GPU (cuda or cuda:N)")
            rows.append(row)
    machines = sorted({r["machine"] for r in rows})
    if len(machines) > 1:
        raise ValueError(f"{folder}: rows from several machines {machines}; one folder per machine")
    name = folder.name
    date = name[:10] if len(name) >= 10 and name[4] == "-" and name[7] == "-" else "undated"
    try:
        shown = str(folder.resolve().relative_to(REPO))
    except ValueError:
        shown = str(folder)
    return GpuBench(shown, date, machines[0], rows)


def load(root: str | Path = GPU_DOCS) -> GpuBench | None:
    """The newest folder under ``root`` with GPU benchmark rows (see the module doc), or None."""
    root = Path(root)
    folders = sorted((p for p in root.glob("*/") if p.is_dir() and any(p.glob("bench*.json"))), key=lambda p: p.name)
    return read(folders[-1]) if folders else None
