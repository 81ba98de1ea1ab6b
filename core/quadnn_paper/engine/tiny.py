"""TINY=1, one way for every section's plan: the full profile's runs with epochs and training images
capped and their data pointed at the tiny data sets :func:`quadnn_paper.data.tiny.write_tiny_data`
writes in the real on-disk formats. Numbers from TINY runs say nothing about the paper's results;
the report labels them as such."""

from __future__ import annotations

from pathlib import Path

from ..data.tiny import CAPS, KITTI_SCALE, TINY_ROOT, write_tiny_data
from .config import RunConfig
from .loop import stage_ends

__all__ = ["tiny_runs", "capped"]


def _data_dir(cfg: RunConfig, root: Path) -> str:
    if cfg.task == "classification":
        return str(root)
    if cfg.task == "imagefolder":
        return str(root / "imagenet") if cfg.dataset == "imagenet" else cfg.data_dir
    return str(root / "kitti") if cfg.dataset == "kitti" else cfg.data_dir


def _epochs(cfg: RunConfig) -> int:
    want = len(stage_ends(cfg))
    for epochs in range(2, cfg.epochs + 1):
        if len(stage_ends(cfg.replace(epochs=epochs))) == want:
            return epochs
    return cfg.epochs


def tiny_runs(runs: list[RunConfig], root: str | Path = TINY_ROOT) -> list[RunConfig]:
    """``runs`` with epochs and training images capped and data under ``root`` (sources too);
    writes the tiny data sets there first if they are missing."""
    root = write_tiny_data(root)

    def cap(cfg: RunConfig) -> RunConfig:
        limit = CAPS["classification_images"] if cfg.task == "classification" else 0
        src = cap(cfg.transfer_from) if cfg.transfer_from is not None else None
        kw = cfg.task_kwargs
        if cfg.task == "depth" and cfg.dataset == "kitti":  # the crops scaled as the images are
            kw = {k: [c // KITTI_SCALE for c in v] if k in ("crop", "train_crop") and v else v for k, v in kw.items()}
        return cfg.replace(
            epochs=_epochs(cfg),
            train_limit=limit or cfg.train_limit,
            data_dir=_data_dir(cfg, root),
            transfer_from=src,
            task_kwargs=kw,
        )

    return [cap(c) for c in runs]


def capped(runs, tiny: bool):
    """A section's runs as they run: ``runs`` (a list, or a dict of them) unchanged, or with TINY=1's
    caps (:func:`tiny_runs`) under the same keys."""
    if not tiny:
        return runs
    if isinstance(runs, dict):
        return dict(zip(runs, tiny_runs(list(runs.values()))))
    return tiny_runs(runs)
