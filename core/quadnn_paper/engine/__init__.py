"""The training engine of the paper companion: one configuration type, one loop, one cache.

``RunConfig`` describes a run (its hash names its folder); ``run(cfg, out)`` trains it or
returns the stored result; the task (in-memory classification, ImageFolder classification
with 10-crop evaluation, KITTI-format depth) is part of the configuration. The runners in
:mod:`quadnn_paper.execution.runners` execute many runs in this process, on local GPUs or on SLURM.

The batched Runge trainer (:mod:`quadnn_paper.experiments.runge`) is the one other training loop: it trains
hundreds of 1-d networks at once as one batched tensor program, which this per-run engine
cannot express.
"""

from .config import OPERATIONAL, RunConfig, run_id
from .loop import DependencyNotReady, lr_factor, result, run, stage_ends, state
from .plan import Results, work_id
from .store import CorruptFile, RunStore, cached
from .work import Computation

__all__ = [
    "RunConfig",
    "run",
    "result",
    "state",
    "run_id",
    "RunStore",
    "CorruptFile",
    "DependencyNotReady",
    "cached",
    "Computation",
    "Results",
    "work_id",
    "OPERATIONAL",
    "stage_ends",
    "lr_factor",
]
