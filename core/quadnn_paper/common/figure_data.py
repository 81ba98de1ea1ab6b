"""The numbers a figure plots, as JSON: what ``figures/NAME.data.json`` beside each figure holds.

Per axes: its title and labels, and each visible line (label, x, y), scatter (label, points), bar
(x, width, height) and image (its shape and value range) in data coordinates, so a reader can
take a figure's numbers without the code that drew it. Values are floats (None where not finite).
"""

from __future__ import annotations

import math

__all__ = ["figure_data"]


def _numbers(values) -> list:
    out = []
    for v in values:
        try:
            f = float(v)
        except (TypeError, ValueError):
            out.append(str(v))  # a categorical axis keeps its label
            continue
        out.append(f if math.isfinite(f) else None)
    return out


def _label(artist) -> str | None:
    label = artist.get_label()
    return None if not label or label.startswith("_") else label


def figure_data(fig) -> dict:
    """``{"axes": [...]}``: the plotted numbers of every axes of ``fig`` (see the module doc)."""
    from matplotlib.collections import PathCollection
    from matplotlib.patches import Rectangle

    axes = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        lines = [
            dict(label=_label(line), x=_numbers(line.get_xdata()), y=_numbers(line.get_ydata()))
            for line in ax.get_lines()
            if line.get_visible() and len(line.get_xdata())
        ]
        scatters = [
            dict(label=_label(c), points=[_numbers(p) for p in c.get_offsets()])
            for c in ax.collections
            if isinstance(c, PathCollection) and c.get_visible() and len(c.get_offsets())
        ]
        bars = [
            dict(label=_label(p), x=float(p.get_x()), width=float(p.get_width()), height=float(p.get_height()))
            for p in ax.patches
            if isinstance(p, Rectangle) and p.get_visible()
        ]
        images = []
        for im in ax.get_images():
            a = im.get_array()
            if a is not None and a.size:
                images.append(dict(shape=list(a.shape), min=float(a.min()), max=float(a.max())))
        entry = dict(title=ax.get_title(), xlabel=ax.get_xlabel(), ylabel=ax.get_ylabel())
        for key, value in (("lines", lines), ("scatters", scatters), ("bars", bars), ("images", images)):
            if value:
                entry[key] = value
        axes.append(entry)
    return {"axes": axes}
