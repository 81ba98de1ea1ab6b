"""How each section's figures are drawn: one module per section, each a plain function of the numbers
a figure shows (arrays, a protocol, results) that returns a matplotlib figure. A section decides what
to show and hands these the numbers; nothing here plans, runs or reads a cache."""


def width_tag(P: dict) -> str:
    """The width a CIFAR network was trained at, in a figure's title (none at 1: the paper's)."""
    return "" if P["width"] == 1 else f" x{P['width']:g}"
