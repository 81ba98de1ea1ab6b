"""Timing a training step: the batch and the step itself, a clock for the CPU and for CUDA, the
convolutions' share of a step, and the quartiles that rank two rows only when they separate."""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "batch",
    "to_device",
    "make_step",
    "Clock",
    "conv_share",
    "quartiles",
    "summarise",
    "compare",
    "no_tf32",
]


def batch(batch_size: int, shape: tuple[int, ...], num_classes: int = 10, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn((batch_size, *shape), generator=gen), torch.randint(0, num_classes, (batch_size,), generator=gen)


def to_device(obj, device):
    """``obj.to(device)`` (a seam: tests of the CUDA path replace it on CPU-only machines; the
    other modules call it as ``timing.to_device`` so that one replacement reaches them all)."""
    return obj.to(device)


def make_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
    # The plain step a PyTorch user writes (torch's own SGD, not the engine's builder: the benchmark
    # times the layers, and the engine's step is compared with it in engine.step_cost).
    # foreach: the multi-tensor SGD torch picks on CUDA, also on the CPU, so a step issues the same
    # operations on both (torch's CPU default loops over the parameters, 4 operations each)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, weight_decay=5e-4, foreach=True)

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    return step


class Clock:
    """Times a callable on ``device``: the wall clock on the CPU; on CUDA, a pair of events around
    the call on the current stream, read after the end event has completed.

    ``time(fn)`` returns seconds. On CUDA the device is synchronised once by :meth:`start` and
    after every call, so each interval holds exactly the work ``fn`` queued.
    """

    def __init__(self, device="cpu"):
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"

    def start(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def time(self, fn: Callable[[], object]) -> float:
        if not self.cuda:
            t = time.perf_counter()
            fn()
            return time.perf_counter() - t
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        end.synchronize()  # elapsed_time needs both events completed
        return begin.elapsed_time(end) / 1e3


def conv_share(step: Callable[[], None], steps: int = 2, device="cpu") -> float:
    """Fraction of ``step``'s time spent in convolutions (forward and backward): CPU time of the
    convolution operators over wall time on the CPU, their kernels' device time on CUDA."""
    from torch.profiler import ProfilerActivity, profile

    clock = Clock(device)
    if not clock.cuda:
        # At its first start kineto looks for GPUs and, on a machine without one, prints "ERROR: ...
        # gpuGetDeviceCount failed" and its start/stop lines to the console: nothing a CPU profile
        # needs said. (A level the user set is kept.)
        os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if clock.cuda else [])
    with profile(activities=activities) as prof:
        clock.start()
        wall = sum(clock.time(step) for _ in range(steps))
    keys = ("aten::convolution", "aten::convolution_backward")
    field = "device_time_total" if clock.cuda else "cpu_time_total"
    conv = sum(getattr(e, field) for e in prof.key_averages() if e.key in keys)
    return conv / 1e6 / wall


def quartiles(values) -> tuple[float, float, float]:
    """(first quartile, median, third quartile), interpolated within the data."""
    v = list(values)
    if len(v) == 1:
        return v[0], v[0], v[0]
    q1, q2, q3 = statistics.quantiles(v, n=4, method="inclusive")
    return q1, q2, q3


def summarise(values, prefix: str, scale: float = 1.0) -> dict:
    """``{prefix: median, prefix_q1: ..., prefix_q3: ...}`` of ``values``, each times ``scale``."""
    q1, q2, q3 = quartiles(values)
    return {prefix: scale * q2, prefix + "_q1": scale * q1, prefix + "_q3": scale * q3}


def compare(a: dict, b: dict, key: str = "time_ratio") -> str:
    """ "lower", "higher" or "unresolved": ``a[key]`` against ``b[key]``, resolved only when the
    quartile intervals ``[key_q1, key_q3]`` of the two rows do not overlap."""
    if a[key + "_q3"] < b[key + "_q1"]:
        return "lower"
    if a[key + "_q1"] > b[key + "_q3"]:
        return "higher"
    return "unresolved"


@contextlib.contextmanager
def no_tf32():
    """TF32 off in cuBLAS and cuDNN (cuDNN's is on by default), restored after."""
    flags = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags
