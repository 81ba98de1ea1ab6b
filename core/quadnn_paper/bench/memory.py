"""Peak memory of one training step above what is held before it (model, optimiser state, batch).

On the CPU, measured row after row in one fresh process (``python -m quadnn_paper.bench --_memory``)
as the rise of the resident-set high-water mark (``VmHWM``, reset just before the step, after the
row's warm-up step); on CUDA, ``torch.cuda.max_memory_allocated`` above ``memory_allocated`` before
the step.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

import torch

from .models import create, set_implementation
from .timing import batch, make_step

__all__ = ["step_memory", "cuda_step_memory", "memory_in_subprocess"]


def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def step_memory(
    name: str, implementation: str, batch_size: int, shape: tuple[int, ...], threads: int | None = None
) -> float:
    """Peak extra resident memory (MB) of one training step on the CPU, measured in this process.

    One warm-up step first (gradients and optimiser state then exist, as in training), then
    the high-water mark is reset (``/proc/self/clear_refs``) and one more step is taken.
    Meant to run in a fresh process: :func:`quadnn_paper.bench.run` starts one for all its rows.
    """
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    x, y = batch(batch_size, shape)
    model = set_implementation(create(name, in_chans=shape[0]), implementation, x).train()
    step = make_step(model, x, y)
    step()
    import gc

    gc.collect()
    before = _status_kb("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current RSS
        reset = True
    except OSError:
        reset = False
    step()
    peak = _status_kb("VmHWM") if reset else None
    if before is None or peak is None:
        import resource

        return float("nan") if before is None else (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    return (peak - before) / 1024


def cuda_step_memory(step: Callable[[], None], device) -> float:
    """Peak memory (MB) the caching allocator hands out during one call of ``step`` above what is
    allocated before it. The device is synchronised first, so no earlier work frees or allocates
    inside the window, and again before the peak is read."""
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    step()
    torch.cuda.synchronize(device)
    return (torch.cuda.max_memory_allocated(device) - before) / 2**20


def memory_in_subprocess(rows, batch_size, shape, threads) -> list[float]:
    """:func:`step_memory` of each ``(model, implementation)`` in ``rows``, one after the other in
    one fresh process (each row's peak is taken above the resident set after its own warm-up step,
    so what earlier rows leave behind does not count; one process instead of one per row saves
    torch's import per row)."""
    cmd = [sys.executable, "-m", "quadnn_paper.bench", "--_memory", *[str(v) for row in rows for v in row]]
    cmd += ["--batch-size", str(batch_size), "--input", "x".join(map(str, shape))]
    if threads:
        cmd += ["--threads", str(threads)]
    # A fixed mmap threshold makes glibc hand every large block back to the system when it is
    # freed (by default the threshold grows and freed activations stay in the heap), so the
    # resident set follows the memory actually in use.
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="65536")
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    values = [float(v) for v in out.stdout.split()[-len(rows) :]]
    if len(values) != len(rows):
        raise RuntimeError(f"the memory subprocess printed {out.stdout!r} for {len(rows)} rows")
    return values
