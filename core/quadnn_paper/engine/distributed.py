"""DDP helpers: rank/world, and batch norm whose statistics span all ranks (on CPU too)."""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

__all__ = ["world", "SyncBatchNorm2d", "sync_batchnorm"]


def world() -> tuple[int, int]:
    """``(rank, world_size)``; ``(0, 1)`` outside torch.distributed."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


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


def sync_batchnorm(module: nn.Module) -> nn.Module:
    """Replace every plain ``nn.BatchNorm2d`` in ``module`` by :class:`SyncBatchNorm2d` (same state)."""
    for name, child in module.named_children():
        if type(child) is nn.BatchNorm2d:
            new = SyncBatchNorm2d(child.num_features, child.eps, child.momentum, child.affine,
                                  child.track_running_stats)
            new.load_state_dict(child.state_dict())
            setattr(module, name, new)
        else:
            sync_batchnorm(child)
    return module
