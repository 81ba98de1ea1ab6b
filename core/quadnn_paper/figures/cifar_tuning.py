"""The CIFAR tuning section's figures: error per epoch of each sweep's values beside the ResNet20, the
final error against each sweep, and how far the quadratic terms moved from the linear twin.

``curves[name]`` is a sweep's list of ``(value, result or None)`` at the first grid seed, ``labels[name]``
the text of each of its values, ``sweeps[name]`` its rows over the grid seeds (``value``, ``mean``,
``sd``, ``diverged``, ``moved``, ``terms``); ``P`` the section's protocol."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from quadnn_paper.analysis import paired
from quadnn_paper.common.outputs import PENDING
from quadnn_paper.figures import width_tag

# Each figure is drawn at its printed size, under these fonts.
FONTS = {
    "font.size": 7,
    "axes.titlesize": 7,
    "axes.labelsize": 7,
    "legend.fontsize": 6.5,
    "xtick.labelsize": 6.5,
    "ytick.labelsize": 6.5,
}
# The final-error figure's sweeps and their symbols.
GUARANTEED = [("sg", r"$\gamma_g=\gamma_b$"), ("sw-l1", r"$\alpha_g=\alpha_b$"), ("sw-l2", r"$\beta_g=\beta_b$")]


def styled(draw: Callable) -> Callable:
    """``draw`` under :data:`FONTS`, laid out under them too (tight layout pads by the font size);
    tick labels made later, when the writer saves the figure, keep their size."""

    def styled():
        import matplotlib.pyplot as plt

        with plt.rc_context(FONTS):
            fig = draw()
            if fig.get_layout_engine() is None:  # a figure with its own layout (a shared legend) keeps it
                fig.tight_layout()
        for ax in fig.axes:
            ax.tick_params(which="both", labelsize=FONTS["xtick.labelsize"])
        return fig

    return styled


def _plot_curves(ax, P: dict, curves: list, labels: dict, conventional: dict | None, symbol: str, legend=True):
    """Error per epoch (test, or training where the protocol evaluates once) of each value of a sweep
    (first grid seed) and of the ResNet20."""
    # the test error where every epoch was evaluated, else the training error (recorded every epoch)
    metric = "test_error" if P["eval_every_epoch"] else "train_error"
    for value, res in curves:
        if res is None:
            continue
        errs = [e.get(metric, math.nan) for e in res["history"]]
        text = labels[value].replace(" (trained ", ", trained ").rstrip(")")
        (line,) = ax.plot(range(1, len(errs) + 1), errs, marker=".", label=f"{symbol}={text}")
        if res["status"] == "diverged":
            ax.plot([len(errs)], [100], "x", color=line.get_color(), ms=9)
    conv = conventional["history"] if conventional else []
    ax.plot(range(1, len(conv) + 1), [e[metric] for e in conv], "k--", lw=1, label=f"ResNet20{width_tag(P)}")
    for m in P["milestones"]:
        ax.axvline(round(m * P["epochs"]) + 0.5, color="0.85", lw=0.8, zorder=0)
    ax.set_xlabel("epoch")
    ax.set_ylabel(metric.replace("_", " ") + " (%)")
    ax.set_ylim(0, 100)
    if legend:  # beside the panel: the curves run from the top-left corner down, a diverged run along the top
        ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)


def sg(P: dict, curves: dict, labels: dict, conventional: dict | None):
    import matplotlib.pyplot as plt

    # one column with the legend beside the axes: drawn narrower than the column, so it prints unscaled
    fig, ax = plt.subplots(figsize=(3.1, 2.4))
    _plot_curves(ax, P, curves["sg"], labels["sg"], conventional, r"$\gamma_g$")
    ax.set_title(f"ReLinear-sg, QResNet20{width_tag(P)} (seed {P['grid_seeds'][0]:d}; x = diverged)", fontsize=7)
    return fig


def sw(P: dict, curves: dict, labels: dict, conventional: dict | None):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(7.0, 2.4), sharey=True)  # the page width
    _plot_curves(axes[0], P, curves["sw-l1"], labels["sw-l1"], conventional, r"$\alpha$")
    axes[0].set_title("ReLinear-sw, $l_1$", fontsize=7)
    _plot_curves(axes[1], P, curves["sw-l2"], labels["sw-l2"], conventional, r"$\beta$")
    axes[1].set_title("ReLinear-sw, $l_2$", fontsize=7)
    return fig


def transfer(P: dict, curves: dict, labels: dict, conventional: dict | None, stages: list[str]):
    import matplotlib.pyplot as plt

    # the panels share their gammas: one legend, beside the last panel, so that each panel keeps its width
    fig, axes = plt.subplots(1, max(1, len(stages)), figsize=(7.0, 2.4), sharey=True, squeeze=False)
    for ax, k in zip(axes[0], stages):
        _plot_curves(ax, P, curves[k], labels[k], conventional, r"$\gamma_g$", legend=False)
        ax.set_title(f"transfer from stage {k[-1]}", fontsize=7)
    handles, texts = max((ax.get_legend_handles_labels() for ax in axes[0]), key=lambda hl: len(hl[1]))
    if handles:
        axes[0][-1].legend(handles, texts, fontsize=6.5, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    return fig


def rezero(P: dict, curves: dict, labels: dict, conventional: dict | None):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3.5, 2.4))
    _plot_curves(ax, P, curves["rezero"], labels["rezero"], conventional, r"$\gamma_g$")
    ax.set_title(f"ReLinear-sg + ReZero, QResNet20{width_tag(P)}", fontsize=7)
    return fig


def has_bars(sweeps: dict) -> bool:
    """Whether the final-error figure draws any standard deviation (several seeds at a point)."""
    return any(r.sd > 0 for name, _ in GUARANTEED for r in sweeps[name] if not math.isnan(r.sd))


def guaranteed(P: dict, sweeps: dict, conv_error: float):
    """Final test error against each sweep's value, the conventional ResNet20's as a dashed line."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(7.0, 2.4), sharey=True)
    for ax, (name, label) in zip(axes, GUARANTEED):
        rows = sweeps[name]
        xs = np.arange(len(rows))
        ys = np.array([r.mean for r in rows])
        sd = np.nan_to_num(np.array([r.sd for r in rows], dtype=float))
        ax.errorbar(xs, ys, yerr=sd, marker="o", capsize=3)
        for x, r in zip(xs, rows):
            if r.diverged:
                top = np.nanmax(np.append(ys, conv_error))
                ax.annotate(f"{r.diverged} diverged", (x, top), fontsize=6.5, ha="center")
        ax.axhline(conv_error, color="k", ls="--", lw=1)  # named in the caption (no legend over the points)
        ax.set_xticks(xs, [f"{r.value:g}" for r in rows], fontsize=6.5)
        ax.set_xlabel(label)
        ax.set_title(f"ReLinear-{name}, QResNet20{width_tag(P)}", fontsize=7)
    axes[0].set_ylabel("final test error (%)")
    return fig


def departure(P: dict, rows: list):
    """How far the quadratic terms moved from the linear twin, against gamma (``rows``: the sg sweep's
    measured values): the share of test predictions that change when the terms are reset, and the
    terms' size relative to W_r; it shows whether a stand-in trained the quadratic network or only
    its linear twin."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(7.0, 2.2))
    xs = [r.value for r in rows]
    axes[0].plot(xs, [r.moved for r in rows], "o-")
    axes[0].axhline(paired.MOVED_THRESHOLD, color="0.5", ls=":", lw=1)
    axes[0].set_ylabel("test predictions changed (%)")
    axes[1].plot(xs, [r.terms for r in rows], "o-")
    axes[1].set_ylabel(r"$\|(W_g, W_b)\| \,/\, \|W_r\|$")
    if any(r.terms > 0 for r in rows):  # a log axis needs a positive value (none while the runs are pending)
        axes[1].set_yscale("log")
    for ax in axes:
        if rows:
            ax.set_xscale("log")
        else:
            ax.text(0.5, 0.5, PENDING, transform=ax.transAxes, ha="center", va="center", color="0.5")
        ax.set_xlabel(rf"paper's $\gamma_g=\gamma_b$ (trained at {P['gamma_scale']:.3g} times it)")
    # The dotted threshold is named in the caption (a legend here sat on the points at some profile).
    title = f"ReLinear-sg, QResNet20{width_tag(P)} (seed {P['grid_seeds'][0]:d}): departure from the linear twin"
    fig.suptitle(title, fontsize=7)
    return fig
