"""Benchmark rows measured on a GPU and committed with the repository (``docs/gpu/``).

The format: a folder ``docs/gpu/<YYYY-MM-DD>-<device>-<what>/`` (its name starts with the date
the rows were measured) holding one or more ``bench*.json`` files, each with one
:mod:`quadnn_paper.bench` row per line, exactly as ``python -m quadnn_paper.bench --device cuda --json``
prints them (``make gpu-check`` writes one as ``build/gpu-check/bench.json``). Every row must have
run on CUDA (``device`` ``cuda`` or ``cuda:N``) and name its GPU (``machine``): the efficiency
section shows these rows apart from the CPU rows it measures itself and never mixes the two.

:func:`load` reads the newest such folder (by name, so by date); None when there is none.

The engine's epoch on a GPU (``make gpu-check``'s ``epoch`` check): ``epoch*.json`` files
in such a folder, one row per line exactly as the check's child process prints it and as the check
writes ``build/gpu-check/epoch.json``, for example::

    {"model": "cifar_qresnet20", "compiled": true, "status": "finished", "compile_seconds": 25.49,
     "epoch_seconds": 1.947, "machine": "NVIDIA H200, torch 2.11.0+cu130, CUDA 13.0",
     "device": "cuda:0", "inductor_cache": "cold"}

(on one line). Required: :data:`EPOCH_REQUIRED`; ``status`` "finished"; ``epoch_seconds`` a
positive number, the wall seconds of one epoch of CIFAR-10 (50,000 images, batch 128); ``model``
a registered CIFAR model (:func:`family`); ``device`` cuda; one ``machine`` per folder. Optional:
``compile_seconds`` (compiled rows: the first epoch's compilation), ``floor_seconds`` (eager rows:
the plain step under CUDA graphs times the epoch's steps), ``inductor_cache`` ("cold": compiled
into an empty inductor cache, "warm": a filled one), and whatever else the check records.
:func:`load_epochs` reads every folder measured on the machine of the newest folder with such
rows and takes, per model and mode, the newest folder's row (:meth:`GpuEpochs.row`).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ..common.paths import REPO

__all__ = [
    "GPU_DOCS",
    "REQUIRED",
    "GpuBench",
    "load",
    "read",
    "EPOCH_REQUIRED",
    "GpuEpochs",
    "read_epochs",
    "load_epochs",
    "family",
    "gpu_name",
    "label",
]

GPU_DOCS = REPO / "docs" / "gpu"
# What a row must carry to be shown (the rest of quadnn_paper.bench's fields are optional here: a
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
    machine: str  # the GPU, torch and CUDA versions, as quadnn_paper.bench names them
    rows: list[dict]


def read(folder: str | Path) -> GpuBench:
    """The rows of every ``bench*.json`` in ``folder``; ValueError naming the file and line of a
    row that is not JSON, misses a field of :data:`REQUIRED` or did not run on CUDA."""
    folder = Path(folder)
    rows = []
    files = sorted(folder.glob("bench*.json"))
    if not files:
        raise ValueError(f"{folder}: no bench*.json (one quadnn_paper.bench --json row per line)")
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
                raise ValueError(f"{path}:{i}: a quadnn_paper.bench row needs {', '.join(missing)}")
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


# -- the engine's epoch on a GPU (make gpu-check's epoch check) ----------------------------------------
EPOCH_REQUIRED = ("model", "compiled", "status", "epoch_seconds", "machine", "device")
_INDUCTOR_CACHE = (None, "cold", "warm")


def family(model: str) -> str | None:
    """ "conventional" or "quadratic" for a registered CIFAR model (ResNets and VGGs, by the neuron
    kind the model registry gives it), None for any other model."""
    from quadnn.models import cifar_resnet, cifar_vgg

    if model in cifar_resnet.VARIANTS:
        neuron = cifar_resnet.VARIANTS[model][1]
    elif model in cifar_vgg.VARIANTS:
        neuron = cifar_vgg.VARIANTS[model][1]
    else:
        return None
    return "conventional" if neuron == "conventional" else "quadratic"


def label(model: str) -> str:
    """A CIFAR model's short name: "ResNet20", "QResNet20", "compact QResNet20", "parabolic ResNet56",
    "VGG16", "QVGG16", "square VGG16" (the model's own name when it is not registered)."""
    from quadnn.models import cifar_resnet, cifar_vgg

    if model in cifar_resnet.VARIANTS:
        depth, neuron = cifar_resnet.VARIANTS[model]
        base = f"ResNet{depth}"
    elif model in cifar_vgg.VARIANTS:
        activation, neuron = cifar_vgg.VARIANTS[model]
        base = "VGG16" if activation == "relu" else f"{activation} VGG16"
    else:
        return model
    return {"conventional": base, "full": "Q" + base}.get(neuron, f"{neuron} {base}")


def gpu_name(machine: str) -> str:
    """The GPU's name in a ``machine`` string ("NVIDIA H200, torch 2.11.0+cu130, ..." -> "NVIDIA H200")."""
    return machine.split(",", 1)[0].strip()


def _positive(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and v != float("inf")


@dataclasses.dataclass
class GpuEpochs:
    """The engine's epochs measured on one GPU machine; ``rows`` oldest folder first, each with the
    key ``folder`` added (where it is committed, relative to the repository)."""

    machine: str
    date: str  # the newest folder's date (YYYY-MM-DD)
    folders: list[str]  # oldest first
    rows: list[dict]

    def row(self, model: str, compiled: bool, inductor_cache: str | None = None) -> dict | None:
        """The row of ``model`` eager or compiled from the newest folder that has one; among a
        folder's rows, the one with ``inductor_cache`` if given, else a cold-cache row first (the
        compile seconds a first run pays), else the first; None when not measured."""
        for folder in reversed(self.folders):
            mine = [r for r in self.rows if r["folder"] == folder and r["model"] == model and r["compiled"] == compiled]
            if inductor_cache is not None:
                mine = [r for r in mine if r.get("inductor_cache") == inductor_cache]
            if mine:
                return next((r for r in mine if r.get("inductor_cache") == "cold"), mine[0])
        return None

    def models(self) -> list[str]:
        """The measured models, in the order first measured."""
        return list(dict.fromkeys(r["model"] for r in self.rows))


def _shown(folder: Path) -> str:
    try:
        return str(folder.resolve().relative_to(REPO))
    except ValueError:
        return str(folder)


def _date(folder: Path) -> str:
    name = folder.name
    return name[:10] if len(name) >= 10 and name[4] == "-" and name[7] == "-" else "undated"


def _epoch_row(path: Path, i: int, line: str) -> dict:
    """One validated epoch row; ValueError naming ``path:i`` otherwise."""
    where = f"{path}:{i}"
    try:
        row = json.loads(line)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: not a JSON row ({e.msg})") from None
    if not isinstance(row, dict):
        raise ValueError(f"{where}: a row is a JSON object, got {type(row).__name__}")
    missing = [k for k in EPOCH_REQUIRED if k not in row]
    if missing:
        raise ValueError(f"{where}: an epoch row (make gpu-check's epoch.json) needs {', '.join(missing)}")
    if row["status"] != "finished":
        raise ValueError(f"{where}: status {row['status']!r}: only finished runs are epoch rows")
    if not isinstance(row["compiled"], bool):
        raise ValueError(f"{where}: compiled must be true or false, got {row['compiled']!r}")
    if family(str(row["model"])) is None:
        raise ValueError(f"{where}: model {row['model']!r} is not a registered CIFAR model")
    if not _positive(row["epoch_seconds"]):
        raise ValueError(f"{where}: epoch_seconds must be a positive number, got {row['epoch_seconds']!r}")
    for key in ("compile_seconds", "floor_seconds"):
        if row.get(key) is not None and not _positive(row[key]):
            raise ValueError(f"{where}: {key} must be a positive number or null, got {row[key]!r}")
    if not str(row["device"]).startswith("cuda"):
        raise ValueError(f"{where}: measured on {row['device']!r}, not a GPU (cuda or cuda:N)")
    if not isinstance(row["machine"], str) or not row["machine"].strip():
        raise ValueError(f"{where}: machine must name the GPU, got {row['machine']!r}")
    if row.get("inductor_cache") not in _INDUCTOR_CACHE:
        raise ValueError(f"{where}: inductor_cache must be 'cold', 'warm' or absent, got {row['inductor_cache']!r}")
    return row


def read_epochs(folder: str | Path) -> GpuEpochs:
    """The epoch rows of every ``epoch*.json`` in ``folder`` (format: the module doc); ValueError
    naming the file and line of a row that is not JSON, misses a field of :data:`EPOCH_REQUIRED`,
    did not finish or run on CUDA, or repeats an earlier row's model, mode and inductor cache."""
    folder = Path(folder)
    files = sorted(folder.glob("epoch*.json"))
    if not files:
        raise ValueError(f"{folder}: no epoch*.json (one make gpu-check epoch row per line)")
    rows, seen = [], {}
    for path in files:
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            row = _epoch_row(path, i, line)
            key = (row["model"], row["compiled"], row.get("inductor_cache"))
            if key in seen:
                raise ValueError(f"{path}:{i}: the same model, mode and inductor cache as {seen[key]}")
            seen[key] = f"{path.name}:{i}"
            rows.append(dict(row, folder=_shown(folder)))
    machines = sorted({r["machine"] for r in rows})
    if len(machines) > 1:
        raise ValueError(f"{folder}: rows from several machines {machines}; one folder per machine")
    return GpuEpochs(machines[0], _date(folder), [_shown(folder)], rows)


def load_epochs(root: str | Path = GPU_DOCS) -> GpuEpochs | None:
    """The epoch rows measured on the machine of the newest folder under ``root`` with
    ``epoch*.json``, from every folder measured on that same machine (oldest first), or None when
    there is none. Folders of other machines are left out, never mixed in."""
    root = Path(root)
    folders = sorted((p for p in root.glob("*/") if p.is_dir() and any(p.glob("epoch*.json"))), key=lambda p: p.name)
    if not folders:
        return None
    read_ = [read_epochs(f) for f in folders]
    newest = read_[-1]
    same = [e for e in read_ if e.machine == newest.machine]
    return GpuEpochs(
        newest.machine, newest.date, [f for e in same for f in e.folders], [r for e in same for r in e.rows]
    )
