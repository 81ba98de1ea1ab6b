"""DDP helpers: joining the process group a launcher describes, rank/world, collectives that keep NCCL's rule on every backend, and batch norm
whose statistics span all ranks (torch's own on CUDA, ours on CPU)."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch import nn

__all__ = [
    "on_cuda",
    "init_distributed",
    "compute_device",
    "world",
    "local_cuda_index",
    "agree",
    "broadcast_buffers",
    "all_reduce",
    "SyncBatchNorm2d",
    "sync_batchnorm",
]


def on_cuda(device) -> bool:
    """Whether ``device`` is a GPU, for the engine's CUDA-only steps (channels_last, synchronising
    the epoch's end, torch's SyncBatchNorm, page-locked batches, the recompute budget from the GPU's
    memory). A seam: the whole-run tests on the stand-in device answer yes here to reach them."""
    return torch.device(device).type == "cuda"


def init_distributed(device: str = "auto") -> bool:
    """Join the process group the launcher's environment describes (``env://``: a runner's job,
    SLURM tasks through submitit, torchrun) when there is more than one process; returns whether one
    is active. NCCL when the run computes on CUDA (``device`` ``cuda*``, or ``auto`` with CUDA), with
    the process's GPU set first (NCCL's communicators use the current device); else gloo."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return False
    if not dist.is_initialized():
        compute = compute_device(device)
        if compute.type == "cuda":
            torch.cuda.set_device(compute)
        dist.init_process_group("nccl" if compute.type == "cuda" else "gloo", init_method="env://")
    return True


def compute_device(name: str = "auto") -> torch.device:
    """The one resolver of a run's device name (``RunConfig.device``): "auto" is CUDA where
    available, else the CPU; CUDA always with its index (``set_device`` refuses a bare "cuda"):
    ``cuda:N`` as given, else this process's GPU among those it can see (:func:`local_cuda_index`;
    0 for a single process). The process group and the training loop both ask it, so they agree."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.split(":")[0] == "cuda":
        return torch.device("cuda", int(name.split(":")[1]) if ":" in name else local_cuda_index())
    return torch.device(name)


def local_cuda_index() -> int:
    """The GPU this process computes on, among those it can see: ``LOCAL_RANK`` when the node's
    GPUs are all visible, else counted within what the launcher left visible (``--gpus-per-task=1``
    or a site's ``--gpu-bind`` shows each task only its own GPU, as ``cuda:0``)."""
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    count = torch.cuda.device_count()
    return local_rank if local_rank < count else local_rank % max(1, count)


def agree(value):
    """Rank 0's ``value``, on every rank (a collective: every rank calls it at the same point)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return value
    values = [None] * dist.get_world_size()
    dist.all_gather_object(values, value)
    return values[0]


def broadcast_buffers(module: nn.Module) -> None:
    """Rank 0's buffers (batch norm's running statistics) on every rank: what rank 0 saves is
    what every rank then evaluates."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        for b in module.buffers():
            dist.broadcast(b, 0)


def world() -> tuple[int, int]:
    """``(rank, world_size)``; ``(0, 1)`` outside torch.distributed."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def all_reduce(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Sum ``tensor`` over all ranks in place; it must live on ``device``, the rank's compute device.

    NCCL reduces only tensors on the process's GPU (a CPU tensor fails there, at the end of an
    epoch); gloo would accept either. Checking here, on every backend, makes a CPU run with a
    non-CPU compute device (as the tests use) fail the way a GPU run would.
    """
    if tensor.device != torch.device(device):
        raise ValueError(
            f"all_reduce of a tensor on {tensor.device}, but this rank computes on {device}: "
            "NCCL reduces only tensors on the rank's own device"
        )
    dist.all_reduce(tensor)
    return tensor


class SyncBatchNorm2d(nn.BatchNorm2d):
    """Batch norm whose training statistics are reduced over all ranks (works on CPU with gloo).

    Sums and sums of squares go through the differentiable ``all_reduce`` of
    ``torch.distributed.nn``, so gradients flow across ranks as in one big batch; N ranks
    then reproduce one process with the same global batch (torch's own SyncBatchNorm is CUDA-only).
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.training and dist.is_initialized() and dist.get_world_size() > 1):
            return super().forward(x)
        from torch.distributed.nn.functional import all_reduce

        c = x.shape[1]
        xf = x if x.dtype == torch.float64 else x.float()
        # Two passes (mean, then centred squares) as accurate as one process's batch norm.
        count = xf.new_tensor([xf.numel() / c])
        tot = all_reduce(torch.cat([xf.sum((0, 2, 3)), count]))
        n = tot[-1]
        mean = tot[:c] / n
        var = all_reduce(((xf - mean[None, :, None, None]) ** 2).sum((0, 2, 3))) / n
        with torch.no_grad():
            self.num_batches_tracked.add_(1)
            m = self.momentum
            self.running_mean.mul_(1 - m).add_(mean.detach(), alpha=m)
            self.running_var.mul_(1 - m).add_(var.detach() * (n / (n - 1)), alpha=m)
        y = (xf - mean[None, :, None, None]) * torch.rsqrt(var + self.eps)[None, :, None, None]
        return (y * self.weight[None, :, None, None] + self.bias[None, :, None, None]).to(x.dtype)


def sync_batchnorm(module: nn.Module, device: torch.device | str = "cpu") -> nn.Module:
    """Batch norm synchronised over the ranks: torch's ``nn.SyncBatchNorm`` on CUDA (its fused
    kernels), else every plain ``nn.BatchNorm2d`` replaced by :class:`SyncBatchNorm2d` (same state)."""
    if on_cuda(device):
        return nn.SyncBatchNorm.convert_sync_batchnorm(module)
    for name, child in module.named_children():
        if type(child) is nn.BatchNorm2d:
            new = SyncBatchNorm2d(
                child.num_features, child.eps, child.momentum, child.affine, child.track_running_stats
            )
            new.load_state_dict(child.state_dict())
            setattr(module, name, new)
        else:
            sync_batchnorm(child)
    return module
