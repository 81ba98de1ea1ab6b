"""LaTeX heads of the expressivity tables."""

HEADS = {
    "expressivity_oscillation": {
        "header_tex": ["network", r"$\sigma$", r"$R$", r"median $\max_{|x|\le R}|f|$", "10\\%", "90\\%"],
    },
    "expressivity_spline_exact": {
        "header_tex": ["$f$", "pieces", "layers", "params", r"$\max|Q-S|$", "rel.", r"$|s_0(x_0)|$"],
    },
    "expressivity_spline_rates": {
        "header_tex": [
            "$f$",
            "slope $m{=}1$",
            "slope $m{=}2$",
            r"$\max \frac{\|f-S\|}{\|f''\|h^2}$",
            r"$\max \frac{\|f-S\|}{\|f^{(4)}\|h^4}$",
        ],
    },
    "expressivity_hall_meyer": {
        "header_tex": [
            "$m$",
            r"$|E_{2m}|$",
            r"$\frac{|E_{2m}|}{2^{2m}(2m)!}$",
            "paper",
            r"paper's $E_{2m}$ approx.",
            r"$8\times$ that",
        ],
    },
    "expressivity_variety": {
        # Two groups of columns: quadratic neurons (p2) and quadratic activation (p1).
        "header_tex": [
            r"& \multicolumn{5}{c}{quadratic neurons ($p_2$)} & \multicolumn{4}{c}{quadratic activation ($p_1$)} & \\"
            r" \cmidrule(lr){2-6}\cmidrule(lr){7-10} $\boldsymbol{d}$",
            "$P$",
            r"\paperval{paper}",
            "corr.",
            "layer.",
            r"\textbf{num.}",
            "$P$",
            r"\paperval{paper}",
            "corr.",
            r"\textbf{num.}",
            "$>$",
        ],
    },
    "expressivity_amplification": {
        "header_tex": [
            "$H$",
            r"$\prod\sqrt{d_hd_{h-1}}$",
            "conv.",
            "quad. rand.",
            "quad. ReLin.",
            "ratio",
            r"\paperval{$2^H$}",
        ],
    },
}
