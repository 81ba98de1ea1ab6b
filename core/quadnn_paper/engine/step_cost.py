"""What one engine training step launches, beside the plain step :mod:`quadnn_paper.bench` counts.

    python -m quadnn_paper.engine.step_cost [--width 0.25] [--batch-size 16]

The plain step is :func:`quadnn_paper.bench.make_step` (forward, cross-entropy, backward, multi-tensor
SGD). The engine step is one iteration of :func:`.loop._train_one_epoch` as a run trains it: the
batch drawn and augmented, the learning rates set, forward, the summed loss and the correct count,
backward, the optimiser over ReLinear's groups, the reference decay and the sw shrink, the epoch's
totals. It is measured as the launches of a two-step epoch less those of a one-step epoch (the
first step builds the momentum buffers; the epoch's start and end cancel), so it counts whatever
the loop does per step. Both are counted by :func:`quadnn_paper.bench.aten_launches`, with torch's
multi-tensor optimiser path as on CUDA. Counts depend on the layers, not on width, batch or image
size: the defaults keep it to seconds on a CPU.

On a GPU, work on host tensors (the batch draw's crop and flip indices) launches nothing:
:func:`device_launches` counts only the operations that touch the compute device, which the tests
run as a stand-in device on the CPU (CUDA's placement rules enforced).
"""

from __future__ import annotations

import argparse
import functools
import tempfile
import unittest.mock
from collections.abc import Callable
from pathlib import Path

import torch

from quadnn_paper import bench

from . import loop
from .config import RunConfig
from .store import RunStore
from .tasks import make_task

__all__ = [
    "engine_step_count",
    "engine_step_launches",
    "plain_step_launches",
    "device_launches",
    "batch_draw_launches",
    "step_launches",
    "CASES",
    "main",
]

# The rows of the closing note: ResNet20, and QResNet20 under ReLinear-sg and ReLinear-sw (l2).
CASES = {
    "resnet20": dict(model="cifar_resnet20", relinear="none"),
    "qresnet20-sg": dict(model="cifar_qresnet20", relinear="sg"),
    "qresnet20-sw-l2": dict(model="cifar_qresnet20", relinear="sw-l2", alpha_g=0.5),
}


def _multi_tensor():
    """torch's choice of the multi-tensor optimiser path, made on the CPU as on CUDA (a no-op for
    an optimiser built with ``foreach`` or ``fused`` given)."""
    return unittest.mock.patch("torch.optim.sgd._default_to_fused_or_foreach", lambda *a, **k: (False, True))


def _epoch_count(cfg: RunConfig, root: Path, count: Callable, device: torch.device) -> int:
    task = make_task(cfg, device=device)
    model = loop._initial_model(cfg, task)
    t, _, _ = loop._prepare(cfg, RunStore(root / "runs"), task, device, 0, 1, None, model)
    with _multi_tensor():
        return count(lambda: loop._train_one_epoch(t, 0))


def engine_step_count(cfg: RunConfig, root: Path, count: Callable = bench.aten_launches, device="cpu") -> int:
    """``count(epoch)`` of a two-step epoch of ``cfg`` (its data under ``cfg.data_dir``) less that
    of a one-step epoch, on ``device``: what one engine step past the first adds. ``count`` runs
    the callable it is given and returns a number (default: :func:`quadnn_paper.bench.aten_launches`)."""
    device = torch.device(device)
    one = _epoch_count(cfg.replace(train_limit=cfg.batch_size), root / "one", count, device)
    two = _epoch_count(cfg.replace(train_limit=2 * cfg.batch_size), root / "two", count, device)
    return two - one


def engine_step_launches(cfg: RunConfig, root: Path) -> int:
    """Launches of one engine step of ``cfg`` (its data under ``cfg.data_dir``), past the first."""
    return engine_step_count(cfg, root)


def batch_draw_launches(cfg: RunConfig) -> int:
    """Launches of drawing one augmented training batch of ``cfg`` (past the epoch's shuffle): the
    part of the engine step that is the data's."""
    batches = make_task(cfg).train_batches(0)
    next(batches)
    return bench.aten_launches(lambda: next(batches))


def plain_step_launches(cfg: RunConfig, count: Callable = bench.aten_launches, device="cpu") -> int:
    """Launches (``count``) of :func:`quadnn_paper.bench.make_step` on ``cfg``'s model and a batch of its
    size and image shape on ``device``, past the first step."""
    task = make_task(cfg)
    model = loop._initial_model(cfg, task).train().to(device)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(cfg.batch_size, *task.train_input(), generator=gen).to(device)
    y = torch.randint(0, task.num_classes, (cfg.batch_size,), generator=gen).to(device)
    step = bench.make_step(model, x, y)
    step()
    return count(step)


def device_launches(device_type: str) -> Callable[[Callable], int]:
    """A ``count`` for :func:`engine_step_count` and :func:`plain_step_launches`: the kernel-launching
    operations of one call that touch a tensor on ``device_type`` (:func:`quadnn_paper.bench.aten_launches`;
    what a GPU launches, on a stand-in device too)."""
    return functools.partial(bench.aten_launches, device_type=device_type)


def step_launches(width: float = 0.25, batch_size: int = 16, cases: dict = CASES) -> list[dict]:
    """One row per case: the plain step's launches, the engine step's, the difference, and the
    batch draw's share of it, counted over generated CIFAR-10-format data (in a temporary folder)."""
    from ..data import tiny

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tiny.write_cifar(root / "data", "cifar10", n_train=5 * batch_size, n_test=batch_size)
        for name, kw in cases.items():
            cfg = RunConfig(
                **kw, width=width, batch_size=batch_size, epochs=1, data_dir=str(root / "data"), threads=1
            ).replace(device="cpu", progress=False)
            plain, engine = plain_step_launches(cfg), engine_step_launches(cfg, root / name)
            draw = batch_draw_launches(cfg)
            rows.append(dict(case=name, plain=plain, engine=engine, extra=engine - plain, batch_draw=draw))
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--width", type=float, default=0.25)
    p.add_argument("--batch-size", type=int, default=16)
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    print(f"{'case':16} {'plain':>6} {'engine':>6} {'extra':>6} {'of which the batch draw':>24}")
    for r in step_launches(a.width, a.batch_size):
        print(f"{r['case']:16} {r['plain']:6d} {r['engine']:6d} {r['extra']:6d} {r['batch_draw']:24d}")


if __name__ == "__main__":
    main()
