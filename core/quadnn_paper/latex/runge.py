"""LaTeX heads of the Runge tables, and the strategies' names as the tables typeset them."""

# The first column's plain labels (quadnn_paper.sections.runge.LABEL) -> their LaTeX.
STRATEGY_LABELS = {
    "regular": "Regular",
    "ReLinear init only": "ReLinear init only",
    "ReLinear-sw-l1": r"ReLinear$^{sw}$-$\ell_1$",
    "ReLinear-sw-l2": r"ReLinear$^{sw}$-$\ell_2$",
    "ReLinear-sg": r"ReLinear$^{sg}$",
}

HEADS = {
    "runge_rmse": {
        "header_tex": ["Strategy", r"mean $\pm$ std", "median", r"RMSE$>$1", "paper"],
        "align": "lrrrr",
        "labels": STRATEGY_LABELS,
    },
    "runge_pieces": {
        "header_tex": ["Strategy", "pieces", "range", r"$\max_{k\ge3}|c_k|$"],
        "align": "lrrr",
        "labels": STRATEGY_LABELS,
    },
}
