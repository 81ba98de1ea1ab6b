"""The ImageNet section's figures: the training sample with the ten evaluation crops of one image, and
the training-loss curves per depth."""

from __future__ import annotations

from quadnn_paper.common.figure_lint import say_empty
from quadnn_paper.experiments.arrays import unpack


def crops(sample: dict):
    """The training sample and the ten evaluation crops of one image, as the networks see them."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 6, figsize=(3.4, 1.4))  # printed size: one column
    axes[0, 0].imshow(unpack(sample["train_sample"]))
    axes[0, 0].set_title("train", fontsize=7)
    for k, crop in enumerate(unpack(sample["eval_crops"])):
        ax = axes[k // 5, 1 + k % 5]
        ax.imshow(crop)
        ax.set_title(f"eval {k + 1}", fontsize=7)
    for ax in axes.flat:
        ax.axis("off")
    fig.tight_layout()
    return fig


def curves(panels: list[tuple[int, list[tuple[str, list[dict]]]]], width: float, data: str):
    """Training loss per epoch, one panel per depth: ``panels`` is ``(depth, [(label, history), ...])``
    per depth trained (a model's first run; an empty list: a panel that says it is empty), ``width``
    the channel width and ``data`` the data in words, both for the titles."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(panels), 1, figsize=(3.4, 2.8 * len(panels)), squeeze=False)
    for ax, (d, runs) in zip(axes[:, 0], panels):
        for label, h in runs:
            ax.plot([e["epoch"] for e in h], [e["train_loss"] for e in h], marker="o", ms=3, label=label)
        # two lines: on one, a stand-in's name ran past the column and the figure printed below 6 pt
        ax.set_title(f"{d} layers at width x{width:g} (paper: {d + 2 if d == 18 else d - 2})\non {data}", fontsize=7)
        ax.set_xlabel("epoch", fontsize=7)
        ax.set_ylabel("training loss", fontsize=7)
        ax.tick_params(labelsize=7)
        if ax.get_lines():  # below the panel: the curves may pass through any corner, and beside it the
            # figure would print wider than the column (its fonts scaled below 6 pt)
            ax.legend(fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=2, frameon=False)
        say_empty(ax)
    fig.tight_layout()
    return fig
