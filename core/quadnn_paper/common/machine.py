"""The machine a number was measured on, named one way for the whole companion: the CPU's model
name (:func:`cpu_name`) and, for the benchmark's rows, the device with torch's versions (:func:`machine`)."""

from __future__ import annotations

import contextlib
import platform

__all__ = ["cpu_name", "machine", "compute_device", "torch_threads"]


def cpu_name(unknown: str = "unknown CPU") -> str:
    """The CPU's model name from ``/proc/cpuinfo``, else what :mod:`platform` reports, else ``unknown``."""
    name = platform.processor() or unknown
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), name)
    except OSError:
        return name


def machine(device="cpu", threads: int | None = None) -> str:
    """The GPU with torch's and CUDA's versions, or the CPU with ``threads`` torch threads (default:
    torch's) and torch's version."""
    import torch

    if torch.device(device).type == "cuda":
        return f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}, CUDA {torch.version.cuda}"
    return f"{cpu_name(platform.machine())}, {threads or torch.get_num_threads()} threads, torch {torch.__version__}"


def compute_device(threads: int | None = None) -> str:
    """What a training run computes on, as the report's text names it: the GPU where CUDA is
    available, else the CPU with ``threads`` torch threads (default: torch's)."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    n = threads or torch.get_num_threads()
    return f"{cpu_name()}, {n} thread" + ("" if n == 1 else "s")


@contextlib.contextmanager
def torch_threads(threads: int | None):
    """torch's thread count set to ``threads`` (None: left as it is) while the block runs, then restored."""
    import torch

    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
