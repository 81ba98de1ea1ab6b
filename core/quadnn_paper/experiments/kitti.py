"""The KITTI section's look at its data: the images its runs read and one test image's depth, as
stored and as evaluated."""

from __future__ import annotations

import numpy as np

from quadnn_paper.data.kitti import KittiSplit, read_depth_png, write_synthetic_kitti
from quadnn_paper.experiments.arrays import pack

__all__ = ["data_sample"]


def data_sample(
    root: str, synthetic: bool, n_train: int, n_test: int, height: int, width: int, max_depth: float, seed: int
) -> dict:
    """The data the runs read (the synthetic scenes written first where they are the stand-in): its
    images, and the first test image as the figure shows it: the picture, its depth map as stored,
    and the depth evaluated (Garg crop, below ``max_depth``; NaN elsewhere)."""
    if synthetic:
        write_synthetic_kitti(root, n_train, n_test, height, width, seed=seed)
    train_set = KittiSplit(root, "splits/eigen_train_files.txt", max_depth, garg=False)
    test_set = KittiSplit(root, "splits/eigen_test_files.txt", max_depth, garg=True)
    rgb, gt, mask = test_set[0]
    raw = read_depth_png(test_set.root / test_set.items[0][1])
    return dict(
        train_images=len(train_set),
        test_images=len(test_set),
        rgb_shape=list(rgb.shape),
        depth_shape=list(gt.shape),
        valid_pixels=int(mask.sum()),
        image=pack(rgb.permute(1, 2, 0).numpy()),
        stored=pack(np.where(raw > 0, raw, np.nan)),
        evaluated=pack(np.where(mask[0].numpy(), gt[0].numpy(), np.nan)),
    )
