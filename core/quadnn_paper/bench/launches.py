"""Kernel launches of a training step: the ATen operations that launch a kernel (the same count on
the CPU and on CUDA), CUDA's own launches from the profiler, and the fewest a quadratic layer needs.
At CIFAR size a GPU step is bound by launches more than by arithmetic."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from quadnn.layers import QuadraticLayer, check_neuron

__all__ = ["aten_launches", "cuda_launches", "extra_launches_floor", "launch_floor"]

# Operations that allocate or read back without running a kernel; views are left out by their schema.
_NO_KERNEL = (
    "empty.memory_format",
    "empty_strided.default",
    "empty_like.default",
    "new_empty.default",
    "new_empty_strided.default",
    "lift_fresh.default",
    "_local_scalar_dense.default",
)


def _no_kernel() -> set:
    return {getattr(getattr(torch.ops.aten, n.split(".")[0]), n.split(".")[1]) for n in _NO_KERNEL}


class _LaunchCount(TorchDispatchMode):
    """Counts the kernel-launching ATen operations that pass the dispatcher while it is active; with
    ``device_type``, only those that read or write a tensor there (work on host tensors launches
    nothing on a GPU)."""

    def __init__(self, device_type: str | None = None):
        super().__init__()
        self.n, self.skip, self.device_type = 0, _no_kernel(), device_type

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        launches = func.namespace == "aten" and not func.is_view and func not in self.skip  # not profiler marks
        if launches and (self.device_type is None or self._on_device(args, kwargs, out)):
            self.n += 1
        return out

    def _on_device(self, *values) -> bool:
        return any(isinstance(t, torch.Tensor) and t.device.type == self.device_type for t in tree_flatten(values)[0])


def aten_launches(step: Callable[[], None], device_type: str | None = None) -> int:
    """ATen operations one call of ``step`` runs that launch a kernel (forward, backward and the
    optimiser, as the dispatcher sees them): views (``func.is_view``) and allocations left out.
    The count is a property of the model and the step, the same on the CPU and on CUDA; on a GPU
    at CIFAR size each is one or a few kernel launches, and launches bound the step.
    ``device_type``: count only the operations touching a tensor on that device (a GPU's launches
    and copies, leaving out index building on the host)."""
    with _LaunchCount(device_type) as count:
        step()
    return count.n


def cuda_launches(step: Callable[[], None]) -> int:
    """CUDA kernel launches (runtime and driver launch calls, CUDA graph launches) of one call of
    ``step``, from ``torch.profiler``: what a compiled step launches, where ATen operations are not
    what runs."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    names = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx", "cudaGraphLaunch")
    return sum(e.count for e in prof.key_averages() if e.key in names)


def extra_launches_floor(neuron: str) -> int:
    """Kernel-launching operations a quadratic layer of kind ``neuron`` needs in one eager training
    step beyond a conventional layer's two (its convolution and that convolution's backward), keeping
    no more for backward than the default does (x and the product's two factors).

    full, forward: the [r, g] convolution, x*x, the W_b convolution, y = r*g + W_b(x*x) (4);
    backward: [dy*g, dy*r] (2: one product, then one swap: the weight order that produced [r, g]
    pairs each factor with itself, and no strided view swaps two halves), x*x again (not kept:
    one more input-sized tensor per layer), the two convolution backwards, dx += 2x * dx_b (6).
    parabolic: [r, g] convolution and r*g; [dy*g, dy*r] (2) and one convolution backward (5).
    poly: as parabolic, and dr += dy (6). compact: x*x, [x, x*x], the convolution; again x*x and
    [x, x*x], the convolution backward, dx = dx_x + 2x*dx_xx (7). Keeping x*x saves one launch
    per layer (full, compact) for one more input-sized tensor."""
    return {"full": 8, "parabolic": 3, "poly": 4, "compact": 5}[check_neuron(neuron)]


def launch_floor(model: nn.Module, baseline_launches: int) -> int:
    """The fewest kernel-launching operations an eager training step of ``model`` can run with what
    the default keeps: the conventional twin's count plus :func:`extra_launches_floor` per layer."""
    return baseline_launches + sum(
        extra_launches_floor(m.neuron) for m in model.modules() if isinstance(m, QuadraticLayer)
    )
