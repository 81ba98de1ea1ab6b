"""The VGG16 stability section's figure: each network's training loss per epoch against the
divergence limit, a function of the runs' histories."""

from __future__ import annotations

import math

from quadnn_paper.figures import width_tag


def loss(first_runs: dict[str, dict], loss_limit: float, P: dict, data_words: str):
    """Mean training loss per epoch of each row's first seed, with the divergence limit
    (``first_runs``: by row label, the result of its first seed, with its ``"history"`` and
    ``"status"``; ``P``: the protocol; ``data_words``: the data set, in words)."""
    import matplotlib.pyplot as plt

    R = P["recipe"]
    # one column, the legend under the axes (beside them it left the panel half an inch wide)
    fig, ax = plt.subplots(figsize=(3.4, 3.0))
    for label, run in first_runs.items():
        h = run["history"]
        ep = [x["epoch"] for x in h]
        loss = [x["train_loss"] if x["train_loss"] is not None else float("nan") for x in h]
        ax.plot(
            ep,
            loss,
            marker="o" if len(ep) < 3 else None,
            ms=3,
            label=label.replace("VGG16 (square activation), ", "square, "),
        )
        if run["status"] != "finished":
            ax.plot(ep[-1], loss[-1] if math.isfinite(loss[-1]) else R["epochs"], "kx")
    ax.axhline(loss_limit, color="0.5", ls="--", lw=0.8)
    ax.set_yscale("log")
    # decades only: over less than a decade matplotlib labels the minor ticks too, and they collide
    from matplotlib.ticker import NullFormatter

    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("epoch")
    ax.set_ylabel("mean training loss")
    # Under the panel (every corner holds a curve or the divergence limit at some profile); the
    # title says what was trained (width, data).
    ax.set_title(f"VGG16{width_tag(P)} on {data_words} (first seed)", fontsize=7)
    ax.legend(fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=2, frameon=False)
    return fig
