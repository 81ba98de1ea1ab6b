"""The Runge section's figures: every strategy's fits of R(x) with their polynomial pieces, and
the training losses; each a function of the numbers it draws."""

from __future__ import annotations

import numpy as np
import torch

from quadnn_paper.experiments.runge import STRATEGIES, dataset, runge

# Each strategy's colour in the figures.
COLOR = {
    "regular": "tab:red",
    "relinear-init": "tab:gray",
    "sw-l1": "tab:blue",
    "sw-l2": "tab:green",
    "sg": "tab:purple",
}


def fits(
    P: dict,
    rmse: dict[str, np.ndarray],
    models: dict[str, list],
    pieces: dict[str, list],
    blown: dict[str, int],
    label: dict[str, str],
):
    """Top: every seed's fit per strategy beside R(x); bottom: the coefficients of every piece of
    the median-RMSE network per strategy. Per strategy: ``rmse`` the seeds' test RMSEs, ``models``
    the trained networks, ``pieces`` their polynomial pieces, ``blown`` how many fits blew up,
    ``label`` its name (``P``: the protocol they ran)."""
    import matplotlib.pyplot as plt

    lo, hi = P["interval"]
    seeds = P["seeds"]
    x_train, y_train, _, _ = dataset(P)
    xf = np.linspace(lo, hi, 1001)
    xt = torch.as_tensor(xf)[:, None]
    fig, axes = plt.subplots(2, len(STRATEGIES), figsize=(7.2, 3.3), sharey="row")  # printed size: full width
    for j, s in enumerate(STRATEGIES):
        rmse_ = rmse[s]
        ax = axes[0, j]
        # dashed: the target is told from the fits by its dash, not by a shade (a strategy's colour may be grey)
        ax.plot(xf, runge(xf), color="k", lw=1.0, ls="--", label="R(x)")
        for k, m in enumerate(models[s]):
            with torch.no_grad():
                ax.plot(xf, m(xt).numpy()[:, 0], color=COLOR[s], lw=0.7, alpha=0.55, label="fits" if k == 0 else None)
        ax.plot(x_train.numpy(), y_train.numpy(), "o", ms=1.8, color="k", label="train")
        ax.set_ylim(-0.35, 1.35)
        ax.set_xlim(lo, hi)
        ax.set_title(label[s], fontsize=7)
        ax.set_xticks([-5, 0, 5])
        ax.set_xlabel("x", fontsize=6.5)
        note = f"RMSE med {np.median(rmse_):.3g}\n{blown[s]}/{len(seeds)} blew up"
        ax.text(0.03, 0.97, note, transform=ax.transAxes, fontsize=6.5, va="top")
        ax.tick_params(labelsize=6.5)
        # coefficients: the median-RMSE seed
        k_med = int(np.argsort(rmse_)[len(seeds) // 2])
        ax = axes[1, j]
        ps = pieces[s][k_med]
        cmap = plt.get_cmap("viridis")
        for i, (_, _, c) in enumerate(ps):
            deg = np.arange(len(c))
            nz = np.abs(c) > 0
            ax.semilogy(deg[nz], np.abs(c[nz]), "-", lw=0.6, color=cmap(i / max(len(ps) - 1, 1)), marker=".", ms=1.5)
        ax.set_xlabel("degree k", fontsize=6.5)
        ax.tick_params(labelsize=6.5)
        ax.set_title(f"{len(ps)} pieces (seed {seeds[k_med]})", fontsize=6.5)
    # Beside the last panel: inside, every spot holds a fit or the panel's RMSE note at some profile.
    axes[0, -1].legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.03, 1), borderaxespad=0, frameon=False)
    axes[0, 0].set_ylabel("R(x), fits", fontsize=6.5)
    axes[1, 0].set_ylabel("|c_k| (powers of x)", fontsize=6.5)
    fig.tight_layout(h_pad=0.6, w_pad=0.3)
    return fig


def loss(runs: dict[str, list[dict]], steps: list[int], label: dict[str, str]):
    """The median training MSE over seeds per strategy against the iterations (``runs``: per
    strategy its runs' results, each with its ``"loss"`` at ``steps``; ``label``: each strategy's name)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3.4, 2.6))  # printed size: one column
    for s in STRATEGIES:
        L = np.array([r["loss"] for r in runs[s]])
        ax.loglog(np.maximum(np.array(steps), 1), np.median(L, 0), color=COLOR[s], lw=1, label=label[s])
    ax.set_xlabel("iteration", fontsize=7)
    ax.set_ylabel("training MSE (median)", fontsize=7)
    ax.tick_params(labelsize=6.5)
    # below the axes: the curves of five strategies leave no corner free at every profile
    ax.legend(fontsize=6.5, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=3)
    fig.tight_layout()
    return fig
