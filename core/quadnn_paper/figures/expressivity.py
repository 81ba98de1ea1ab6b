"""The expressivity section's figures: oscillating random networks, the spline construction of
Proposition 1, the spline error against h, and the gradient amplification with depth."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def oscillation(osc: dict, cfg: dict):
    """One draw per network kind (rows) and sigma (columns) over the whole input range."""
    import matplotlib.pyplot as plt

    x = np.array(osc["x"])
    sigmas = [str(s) for s in cfg["sigmas"]]
    fig, axes = plt.subplots(2, len(sigmas), figsize=(7.2, 3.6), sharex=True)
    for row, kind in enumerate(("conventional", "quadratic")):
        for col, s in enumerate(sigmas):
            ax = axes[row, col]
            ax.plot(x, np.array(osc["curves"][kind][s][0]), lw=1.2, color="C0" if row == 0 else "C3")
            ax.set_title(f"{kind}, $\\sigma$={s}", fontsize=8)
            ax.tick_params(labelsize=6.5)
            ax.yaxis.get_offset_text().set_fontsize(6.5)
            if row == 1:
                ax.set_xlabel("x", fontsize=7)
    widths = "-".join(map(str, cfg["widths"]))
    fig.suptitle(f"{widths} ReLU nets at N(0, $\\sigma^2$) init (one draw per panel)", fontsize=8)
    fig.supylabel("network output f(x)", fontsize=7)
    fig.tight_layout()
    return fig


def construction(con: dict, functions: Sequence[str]):
    """The first function's spline S and network Q, the network's summands, and |Q - S| of all."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(7.2, 2.3))
    c = con[functions[0]]
    x = np.array(c["curves"]["x"])
    ax = axes[0]
    ax.plot(x, c["curves"]["spline"], lw=2.5, color="0.75", label="cubic spline $S$")
    ax.plot(x, c["curves"]["network"], lw=1, color="C3", ls="--", label="quadratic net $Q$")
    ax.plot(c["knots"], c["knots_spline"], "k.", ms=3)
    ax.set_title(f"{functions[0]}: $S$ (grey), $Q$ (dashed)", fontsize=8)  # no legend over the curve
    ax.set_ylabel("$S(x)$, $Q(x)$", fontsize=7)
    ax = axes[1]
    for summand in c["summands"]:
        ax.plot(x, summand, lw=0.8)
    ax.set_title("summands $R_i = Q_i(\\mathrm{relu}(x-x_i)+x_i)$", fontsize=8)
    ax.set_ylabel("$R_i(x)$", fontsize=7)
    ax = axes[2]
    for name in functions:
        gap = con[name]["gap"]
        ax.semilogy(gap["x"], np.array(gap["value"]) + 1e-18, lw=0.6, label=name)  # + 1e-18: 0 on a log axis
    ax.axhline(np.finfo(float).eps, color="k", lw=0.6, ls=":")
    ax.set_title("$|Q-S|$ (float64; dotted: eps)", fontsize=8)
    ax.set_ylabel("$|Q(x)-S(x)|$", fontsize=7)
    ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)  # beside the panel
    for ax in axes:
        ax.tick_params(labelsize=6.5)
        ax.set_xlabel("x", fontsize=7)
    fig.tight_layout()
    return fig


def spline_error(err: dict, c1: float, c2: float):
    """Error against h with the Hall--Meyer bounds (left), and the error over the bound (right)."""
    import matplotlib.pyplot as plt
    import matplotlib.ticker as mticker

    fig, axes = plt.subplots(1, 2, figsize=(7.2, 2.6))
    for k, (name, r) in enumerate(err.items()):
        h = np.array([x["h"] for x in r["rows"]])
        e1 = np.array([x["linear"] for x in r["rows"]])
        e3 = np.array([x["cubic"] for x in r["rows"]])
        axes[0].loglog(h, e1, "o-", ms=3, color=f"C{k}", label=f"{name} linear")
        axes[0].loglog(h, e3, "s--", ms=3, color=f"C{k}", label=f"{name} cubic")
        axes[0].loglog(h, c1 * r["sup_d2"] * h**2, ":", color=f"C{k}", lw=0.8)
        axes[0].loglog(h, c2 * r["sup_d4"] * h**4, ":", color=f"C{k}", lw=0.8)
        axes[1].semilogx(
            h, [x["linear_ratio"] / c1 for x in r["rows"]], "o-", ms=3, color=f"C{k}", label=f"{name} linear"
        )
        axes[1].semilogx(
            h, [x["cubic_ratio"] / c2 for x in r["rows"]], "s--", ms=3, color=f"C{k}", label=f"{name} cubic"
        )
    axes[0].set_xlabel("h", fontsize=7)
    axes[0].set_ylabel(r"$\|f-S\|_\infty$", fontsize=7)
    axes[0].set_title("error vs h (dotted: Hall--Meyer bounds)", fontsize=8)
    # Beside the panel: the curves fill it.
    axes[0].legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    axes[1].axhline(1, color="k", lw=0.6)
    axes[1].set_ylim(0, 1.1)
    axes[1].set_title(r"error / (const $\|f^{(2m)}\|\, h^{2m}$)", fontsize=8)
    axes[1].set_xlabel("h", fontsize=7)
    axes[1].set_ylabel("error / bound", fontsize=7)
    for ax in axes:
        ax.tick_params(labelsize=6.5)
        ax.xaxis.set_minor_formatter(mticker.NullFormatter())  # decades only: minor labels collided
    fig.tight_layout()
    return fig


def amplification(A: dict):
    """The median input gradient over the paper's scale per depth (left) and the median ratio
    quadratic / conventional (right), against the paper's 2^H."""
    import matplotlib.pyplot as plt

    H, med, ratio = A["depths"], A["normalised"], A["ratio"]
    fig, axes = plt.subplots(1, 2, figsize=(7.2, 2.6))
    ax = axes[0]
    ax.semilogy(H, med["conventional"], "o-", label="conventional")
    ax.semilogy(H, med["quadratic_random"], "s-", label="quadratic, random")
    ax.semilogy(H, med["quadratic_relinear"], "x--", label="quadratic, ReLinear")
    ax.semilogy(H, np.ones_like(H, dtype=float), "k:", lw=0.8, label="paper: conventional")
    ax.semilogy(H, 2.0**H, "k--", lw=0.8, label="paper: quadratic $2^H$")
    ax.set_xlabel("depth H", fontsize=7)
    ax.set_ylabel(r"$\|\partial f/\partial x\|_{x=0} / \prod_h\sqrt{d_h d_{h-1}}$", fontsize=7)
    ax.set_title("input gradient (median over draws)", fontsize=8)  # short: the legend sits beside it
    # Beside the panel: the curves span every decade.
    ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    ax = axes[1]
    ax.semilogy(H, ratio, "s-", color="C1", label="measured: quadratic / conventional")
    ax.semilogy(H, 2.0**H, "k--", lw=0.8, label="paper: $2^H$")
    ax.set_xlabel("depth H", fontsize=7)
    ax.set_ylabel("quadratic / conventional", fontsize=7)
    ax.set_title("amplification ratio (median over draws)", fontsize=8)
    ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    for ax in axes:
        ax.tick_params(labelsize=6.5)
    fig.tight_layout()
    return fig
