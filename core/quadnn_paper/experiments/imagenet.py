"""The ImageNet section's look at its data: what a profile's runs read, as the figure shows it."""

from __future__ import annotations

import numpy as np

from quadnn_paper.data.imagefolder import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    datasets,
    write_digits_folder,
    write_fashion_folder,
)
from quadnn_paper.experiments.arrays import pack

__all__ = ["data_sample"]


def data_sample(
    root: str, data: str, image_size: int | None, max_per_class: int | None, crop: int, resize: int, scale: list
) -> dict:
    """The data a profile's runs read (the digits tree written first where it is the stand-in): its
    classes and images, and, as the figure shows them, one training sample and the ten evaluation
    crops of the first validation image."""
    import torch

    if data == "digits":
        write_digits_folder(root, image_size, max_per_class=max_per_class)
    elif data == "fashion_mnist":
        write_fashion_folder(root, image_size, train_per_class=max_per_class)
    train_set, val_set = datasets(root, crop, resize, tuple(scale))
    with torch.random.fork_rng():
        torch.manual_seed(0)  # the training sample's random crop
        x, _ = train_set[0]
    v, _ = val_set[0]
    mean, std = torch.tensor(IMAGENET_MEAN)[:, None, None], torch.tensor(IMAGENET_STD)[:, None, None]

    def shown(t):
        return (t * std + mean).clamp(0, 1).permute(1, 2, 0).numpy()

    return dict(
        classes=len(train_set.classes),
        train_images=len(train_set),
        val_images=len(val_set),
        train_shape=list(x.shape),
        eval_shape=list(v.shape),
        train_sample=pack(shown(x)),
        eval_crops=pack(np.stack([shown(c) for c in v])),
    )
