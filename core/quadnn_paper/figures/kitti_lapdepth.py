"""The KITTI section's figures: one test scene with its stored and evaluated depth, and the two models'
training-loss curves."""

from __future__ import annotations

from quadnn_paper.common.figure_lint import say_empty
from quadnn_paper.experiments.arrays import unpack


def scene(sample: dict):
    """The first test image, its sparse depth as stored, and the depth that is evaluated."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(7, 1.3), layout="constrained")  # room for the colour bar beside
    axes[0].imshow(unpack(sample["image"]))
    axes[0].set_title("image", fontsize=7)
    im = axes[1].imshow(unpack(sample["stored"]), cmap="magma_r", vmin=0, vmax=80)
    axes[1].set_title("sparse ground truth (m), as stored", fontsize=7)
    axes[2].imshow(unpack(sample["evaluated"]), cmap="magma_r", vmin=0, vmax=80)
    axes[2].set_title("evaluated: Garg crop, < 80 m", fontsize=7)
    for ax in axes:
        ax.axis("off")
    fig.colorbar(im, ax=axes, fraction=0.02).set_label("depth (m)", fontsize=7)
    return fig


def curves(runs: list[tuple[str, list[dict]]], title: str):
    """Training loss per epoch of both models: ``runs`` is ``(label, history)`` per finished run,
    ``title`` what was trained where it is not the paper's network ("" for the paper's own)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3.4, 2.1))
    for name, h in runs:
        ax.plot([e["epoch"] for e in h], [e["train_loss"] for e in h], marker="o", ms=3, label=name)
    ax.set_xlabel("epoch", fontsize=7)
    ax.set_ylabel("training loss (SILog)", fontsize=7)
    ax.tick_params(labelsize=6.5)
    ax.set_title(title, fontsize=6.5)  # a stand-in says what it trained
    # beside: curves may fill any corner
    if ax.get_lines():
        ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    say_empty(ax)
    fig.tight_layout()
    return fig
