"""The figure lint: what :meth:`quadnn_paper.report.Report.figure` checks on every
figure a notebook saves, and what it records of it for the checks that read the captions.

:func:`lint` draws the figure (no file is written) and returns the problems it finds, each naming the
axes (its title and labels) and the problem:

- **labels**: an axes that shows data (lines, markers, collections, patches, images) and has its
  axis drawn needs an x and a y label, its own or that of an axes it shares the axis with
  (``sharex``/``sharey``: one label per row or column), or the figure's ``supxlabel``/``supylabel``;
- **units**: a label that names a quantity with units says them: time, seconds, duration,
  latency, memory and throughput need a unit in parentheses or brackets, a test / top-k /
  classification error needs ``%``. Which words carry units is all this rule knows: a label
  "depth (m)" is not checked, a label "depth" not required to have one (a network's depth has none);
- **legends over data**: a legend's box (in display coordinates, after a draw) may not meet the
  data of any axes of the figure where that data is drawn (inside its axes): line segments (with half
  their width), markers (with their radius), scatter offsets, line collections (error bars,
  ``vlines``), filled areas and bars (as polygons), images. A legend outside every axes is fine;
- **legends and colour bars over text**: neither may overlap a text of another artist (titles, axis
  and tick labels, annotations, other legends' entries, the figure's titles);
- **offset text over a title**: an axis's offset or scale text ("1e-5", "+3.2") may not meet a
  title, an axis label or the figure's title;
- **annotation boxes over data**: a text drawn in a box (an annotation's ``bbox``) may not meet its
  axes' data (a bare text label beside a point is allowed: it names the point);
- **empty or near-empty axes**: an axes with its axis drawn shows data, and more than one point of it
  (an axes that only says why it has none, a text such as "pending", is allowed);
- **curves told apart by shade alone**: two lines of one axes with the same line style and marker
  need colours of different hue (a sequential colour map's shades cannot be told apart in print).
- **panels too small to read**: an axes that shows data is at least :data:`MIN_AXES_IN` inches wide
  and high at the size the figure is drawn (the report draws each figure at its printed size), and
  no two tick labels of one axis overlap (a panel squeezed by the legends beside it fails both).

Fonts below 6 pt at the printed size are ``tools/paper_check.py layout``'s check (it knows the width
the report includes the figure at).

:func:`record` is what the figure drew, per axes, written beside the figure as ``NAME.lint.json``:
titles, labels, number of lines, and how many error bars (error-bar segments longer than half a
pixel, filled areas) it drew; :func:`promised_error_bars` fails a figure whose LaTeX caption promises
error bars (after expanding the report's variables) when the figure drew none.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np

from .macros import read_macros
from .outputs import PENDING

__all__ = ["lint", "record", "promised_error_bars", "FigureLintError", "overlaps_rect", "say_empty"]


MIN_AXES_IN = 0.8  # inches: a data panel smaller than this at print size cannot be read


class FigureLintError(ValueError):
    """A figure the report refuses: its name and every problem found."""


def pending_figure(figsize: tuple[float, float] = (3.5, 1.0)):
    """The figure of a section whose results a runner has not delivered yet: the word, nothing drawn."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=figsize)
    ax.axis("off")
    ax.text(0.5, 0.5, PENDING, transform=ax.transAxes, ha="center", va="center", fontsize=8)
    return fig


def say_empty(ax, why: str = f"{PENDING}: no run has finished") -> None:
    """Write in an axes with nothing to plot why it is empty (an empty axes that says nothing is
    refused by :func:`lint`)."""
    if not ax.get_lines():
        ax.text(0.5, 0.5, why, transform=ax.transAxes, ha="center", va="center", fontsize=7, color="0.4")


# ------------------------------------------------------------------------ geometry (display coords)
def _segments_meet(rect, a: np.ndarray, b: np.ndarray) -> bool:
    """Does any segment ``a[i]``-``b[i]`` meet the closed rectangle ``rect`` = (x0, y0, x1, y1)?
    (Liang-Barsky clipping, vectorised; non-finite segments are skipped.)"""
    ok = np.all(np.isfinite(a), 1) & np.all(np.isfinite(b), 1)
    a, b = a[ok], b[ok]
    if not len(a):
        return False
    x0, y0, x1, y1 = rect
    d = b - a
    t0, t1 = np.zeros(len(a)), np.ones(len(a))
    keep = np.ones(len(a), bool)
    for p, q in ((-d[:, 0], a[:, 0] - x0), (d[:, 0], x1 - a[:, 0]), (-d[:, 1], a[:, 1] - y0), (d[:, 1], y1 - a[:, 1])):
        parallel = p == 0
        keep &= ~(parallel & (q < 0))
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(parallel, 0.0, q / np.where(parallel, 1.0, p))
        t0 = np.where(~parallel & (p < 0), np.maximum(t0, r), t0)
        t1 = np.where(~parallel & (p > 0), np.minimum(t1, r), t1)
    return bool(np.any(keep & (t0 <= t1)))


def _points_meet(rect, pts: np.ndarray, radius) -> bool:
    """Does any point (a disc of ``radius`` pixels, scalar or per point) meet ``rect``?"""
    pts = np.asarray(pts, float).reshape(-1, 2)
    r = np.broadcast_to(np.asarray(radius, float), (len(pts),))
    ok = np.all(np.isfinite(pts), 1)
    pts, r = pts[ok], r[ok]
    x0, y0, x1, y1 = rect
    dx = np.maximum(0, np.maximum(x0 - pts[:, 0], pts[:, 0] - x1))
    dy = np.maximum(0, np.maximum(y0 - pts[:, 1], pts[:, 1] - y1))
    return bool(np.any(dx * dx + dy * dy <= r * r))


def _polygon_meets(rect, poly: np.ndarray) -> bool:
    """Does the closed polygon ``poly`` (its boundary or its inside) meet ``rect``?"""
    from matplotlib.path import Path as MPath

    poly = np.asarray(poly, float)
    poly = poly[np.all(np.isfinite(poly), 1)]
    if len(poly) == 0:
        return False
    if _points_meet(rect, poly, 0) or _segments_meet(rect, poly, np.roll(poly, -1, 0)):
        return True
    if len(poly) < 3:
        return False
    x0, y0, x1, y1 = rect
    return bool(MPath(poly).contains_point(((x0 + x1) / 2, (y0 + y1) / 2)))


def overlaps_rect(a, b) -> bool:
    """Do two rectangles (x0, y0, x1, y1) share area (touching edges do not)?"""
    return min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])


def _clip(rect, box):
    """``rect`` and ``box`` intersected (None: they share no area)."""
    out = (max(rect[0], box[0]), max(rect[1], box[1]), min(rect[2], box[2]), min(rect[3], box[3]))
    return out if out[2] > out[0] and out[3] > out[1] else None


def _extents(bbox):
    return (bbox.x0, bbox.y0, bbox.x1, bbox.y1)


# --------------------------------------------------------------------------------- the figure
def _is_colorbar(ax) -> bool:
    return getattr(ax, "_colorbar", None) is not None


def _data_axes(fig):
    return [ax for ax in fig.axes if not _is_colorbar(ax) and ax.get_visible()]


def _lines(ax):
    return [ln for ln in ax.get_lines() if ln.get_visible() and len(ln.get_xydata())]


def _shows_data(ax) -> bool:
    colls = [c for c in ax.collections if c.get_visible()]
    patches = [p for p in ax.patches if p.get_visible()]
    return bool(_lines(ax) or colls or patches or [i for i in ax.images if i.get_visible()])


def _describe(ax) -> str:
    title = ax.get_title() or ax.get_title("left") or ax.get_title("right")
    fig = ax.figure
    where = f"axes {fig.axes.index(ax) + 1} of {len(fig.axes)}"
    return f"{where} (title {title!r}, x label {ax.get_xlabel()!r}, y label {ax.get_ylabel()!r})"


def _name(artist) -> str:
    label = artist.get_label()
    return "unlabelled" if not label or label.startswith("_") else repr(label)


def _data_hits(ax, rect, dpi: float) -> str | None:
    """What data of ``ax`` is drawn inside ``rect`` (None: nothing), ``rect`` already clipped to ``ax``."""
    from matplotlib.collections import LineCollection, PathCollection, PolyCollection

    px = dpi / 72.0
    for ln in _lines(ax):
        xy = ln.get_transform().transform(np.asarray(ln.get_xydata(), float))
        style, lw = ln.get_linestyle(), ln.get_linewidth()
        if style not in ("None", "", " ", "none") and lw > 0 and len(xy) > 1:
            half = lw * px / 2
            r = (rect[0] - half, rect[1] - half, rect[2] + half, rect[3] + half)
            if _segments_meet(r, xy[:-1], xy[1:]):
                return f"line {_name(ln)}"
        marker = ln.get_marker()
        if marker not in (None, "None", "", " ", "none") and _points_meet(rect, xy, ln.get_markersize() * px / 2):
            return f"markers {_name(ln)}"
    for c in ax.collections:
        if not c.get_visible():
            continue
        if isinstance(c, PathCollection) and len(c.get_offsets()):
            pts = c.get_offset_transform().transform(np.asarray(c.get_offsets(), float))
            sizes = c.get_sizes() if len(c.get_sizes()) else np.array([36.0])
            radius = np.sqrt(np.resize(sizes, len(pts))) * px / 2
            if _points_meet(rect, pts, radius):
                return f"scatter {_name(c)}"
        elif isinstance(c, LineCollection):
            t = c.get_transform()
            half = float(np.max(c.get_linewidths(), initial=1.0)) * px / 2
            r = (rect[0] - half, rect[1] - half, rect[2] + half, rect[3] + half)
            for seg in c.get_segments():
                seg = t.transform(np.asarray(seg, float))
                if len(seg) > 1 and _segments_meet(r, seg[:-1], seg[1:]):
                    return "error bars or line collection"
        elif isinstance(c, PolyCollection):
            t = c.get_transform()
            for p in c.get_paths():
                if any(_polygon_meets(rect, poly) for poly in p.to_polygons(t)):
                    return "filled area"
        elif overlaps_rect(_extents(c.get_window_extent()), rect):
            return f"collection {type(c).__name__}"
    for p in ax.patches:
        if p.get_visible() and any(_polygon_meets(rect, poly) for poly in p.get_path().to_polygons(p.get_transform())):
            return f"patch {p.get_label() or type(p).__name__!r}"
    for im in ax.images:
        if im.get_visible() and overlaps_rect(_extents(im.get_window_extent()), rect):
            return "image"
    return None


def _tick_labels(axis):
    try:
        ticks = axis._update_ticks()  # the ticks drawn (within the view); no public accessor
    except Exception:  # pragma: no cover - a matplotlib without it: every tick
        ticks = axis.get_major_ticks() + axis.get_minor_ticks()
    return [lab for t in ticks for lab in (t.label1, t.label2) if lab.get_visible()]


def _texts(fig):
    """Every text drawn, with the artist it belongs to (an axes, a legend, or the figure)."""
    out = [(t, fig) for t in fig.texts]
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        owner = ax
        out += [(t, owner) for t in (ax.title, ax._left_title, ax._right_title)]
        out += [(t, owner) for t in ax.texts]
        if ax.axison:
            for axis in (ax.xaxis, ax.yaxis):
                out += [(axis.label, owner), (axis.get_offset_text(), owner)]
                out += [(t, owner) for t in _tick_labels(axis)]
    for leg in _legends(fig):
        out += [(t, leg) for t in [*leg.get_texts(), leg.get_title()]]
    return [(t, o) for t, o in out if t.get_visible() and t.get_text().strip()]


def _legends(fig):
    found = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    return [leg for leg in found if leg.get_visible()]


_UNITFUL = re.compile(r"\b(time|times|seconds?|duration|latency|memory|throughput)\b", re.I)
_UNIT_GROUP = re.compile(r"[(\[][^)\]]*[A-Za-z%µ/][^)\]]*[)\]]")
_PERCENT_ERROR = re.compile(r"\b(test|top-?\d|classification|validation|train(ing)?)\s+error\b", re.I)


def _unit_problem(label: str) -> str | None:
    if _UNITFUL.search(label) and not _UNIT_GROUP.search(label):
        return f"label {label!r} names a quantity with units ({_UNITFUL.search(label).group(0)}) without them"
    if _PERCENT_ERROR.search(label) and "%" not in label:
        return f"label {label!r} is an error rate without its unit (%)"
    return None


def _points(ax) -> int:
    """How many finite data points ``ax`` draws (lines' vertices, scatter offsets); patches and
    images count as many (they fill an area)."""
    n = sum(int(np.all(np.isfinite(np.asarray(ln.get_xydata(), float)), 1).sum()) for ln in _lines(ax))
    for c in ax.collections:
        if c.get_visible():
            offsets = np.asarray(c.get_offsets(), float).reshape(-1, 2)
            n += max(len(offsets), 2 * len(c.get_paths()))
    if [p for p in ax.patches if p.get_visible()] or [i for i in ax.images if i.get_visible()]:
        n += 2
    return n


def _hls(colour) -> tuple[float, float, bool]:
    """Hue, lightness, and whether the colour is a grey (no hue to tell it by)."""
    import colorsys

    from matplotlib.colors import to_rgb

    h, lightness, sat = colorsys.rgb_to_hls(*to_rgb(colour))
    return h, lightness, sat < 0.15 or lightness < 0.08 or lightness > 0.95


SHADE_HUE = 0.04  # hues closer than this (of a turn) read as one colour in print
SHADE_LIGHTNESS = 0.12  # ... and lightnesses this far apart make them two shades of it


def _same_shade(a, b) -> bool:
    """Do two colours differ only in shade: the same hue (or both grey) at another lightness, as
    a sequential colour map's steps do? (A categorical palette's neighbours, such as tab10's red
    and brown, differ in saturation at a similar lightness, and pass.)"""
    (ha, la, grey_a), (hb, lb, grey_b) = _hls(a), _hls(b)
    if grey_a != grey_b:
        return False
    same_hue = grey_a or min(abs(ha - hb), 1 - abs(ha - hb)) < SHADE_HUE
    return same_hue and abs(la - lb) >= SHADE_LIGHTNESS


def _shade_problems(ax) -> list[str]:
    """Pairs of lines of ``ax`` that only a shade of one colour tells apart."""
    from matplotlib.colors import to_rgb

    lines = [ln for ln in _lines(ax) if ln.get_linestyle() not in ("None", "", " ", "none") or ln.get_marker()]
    out = []
    for i, a in enumerate(lines):
        for b in lines[i + 1 :]:
            same_style = a.get_linestyle() == b.get_linestyle() and str(a.get_marker()) == str(b.get_marker())
            if (
                same_style
                and to_rgb(a.get_color()) != to_rgb(b.get_color())
                and _same_shade(a.get_color(), b.get_color())
            ):
                out.append(f"lines {_name(a)} and {_name(b)} differ only by a shade of one colour")
    return out


def _extra_problems(fig, axes, renderer, dpi) -> list[str]:
    """Offset text over titles, boxed annotations over data, empty axes, curves told apart by shade."""
    found = []
    heads = [t for t in (getattr(fig, "_suptitle", None),) if t is not None and t.get_visible() and t.get_text()]
    for ax in axes:
        heads += [t for t in (ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label)]
    heads = [t for t in heads if t.get_visible() and t.get_text().strip()]
    for ax in axes:
        if not ax.axison:
            continue
        for axis in (ax.xaxis, ax.yaxis):
            off = axis.get_offset_text()
            if not (off.get_visible() and off.get_text().strip()):
                continue
            box = _extents(off.get_window_extent(renderer))
            for t in heads:
                if t is not off and overlaps_rect(box, _extents(t.get_window_extent(renderer))):
                    found.append(f"{_describe(ax)}: the axis offset text {off.get_text()!r} covers {t.get_text()!r}")
        for t in ax.texts:
            if t.get_visible() and t.get_bbox_patch() is not None and t.get_text().strip():
                r = _clip(_extents(t.get_window_extent(renderer)), _extents(ax.get_window_extent(renderer)))
                if r is not None and (hit := _data_hits(ax, r, dpi)):
                    found.append(f"{_describe(ax)}: the boxed text {t.get_text()[:30]!r} covers its data ({hit})")
        says_why = any(t.get_visible() and t.get_text().strip() for t in ax.texts)
        if not _shows_data(ax):
            if not says_why:
                found.append(f"{_describe(ax)}: an empty axes (no data, and no text saying why)")
        elif _points(ax) <= 1 and not says_why:
            found.append(f"{_describe(ax)}: a nearly empty axes (one data point); say why or drop the panel")
        found += [f"{_describe(ax)}: {p}" for p in _shade_problems(ax)]
        found += [f"{_describe(ax)}: {p}" for p in _size_problems(ax, renderer, dpi)]
    return found


def _size_problems(ax, renderer, dpi: float) -> list[str]:
    """A data panel smaller than :data:`MIN_AXES_IN` inches, or tick labels of one axis that overlap."""
    if not _shows_data(ax):
        return []
    box = ax.get_window_extent(renderer)
    out = []
    if min(box.width, box.height) < MIN_AXES_IN * dpi:
        out.append(
            f"a panel of {box.width / dpi:.2f} x {box.height / dpi:.2f} in, below {MIN_AXES_IN} in at print size "
            "(legends or panels beside it squeeze it: share one legend, or give the figure room)"
        )
    for axis in (ax.xaxis, ax.yaxis):
        labels = [t for t in _tick_labels(axis) if t.get_text().strip()]
        boxes = [(t.get_text(), _extents(t.get_window_extent(renderer))) for t in labels]
        hit = next(
            ((a, b) for i, (a, ra) in enumerate(boxes) for b, rb in boxes[i + 1 :] if overlaps_rect(ra, rb)), None
        )
        if hit:
            out.append(f"the tick labels {hit[0]!r} and {hit[1]!r} overlap")
    return out


def lint(fig) -> list[str]:
    """The problems of ``fig`` (empty: none); draws the figure once, writes nothing."""
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    dpi = fig.dpi
    found = []
    sup_x = getattr(fig, "_supxlabel", None) is not None and fig._supxlabel.get_text()
    sup_y = getattr(fig, "_supylabel", None) is not None and fig._supylabel.get_text()
    axes = _data_axes(fig)
    for ax in axes:
        if not ax.axison or not _shows_data(ax):
            continue
        for name, shared, sup in (
            ("x", ax.get_shared_x_axes(), sup_x),
            ("y", ax.get_shared_y_axes(), sup_y),
        ):
            labels = [getattr(a, f"get_{name}label")() for a in shared.get_siblings(ax)]
            if not sup and not any(lab.strip() for lab in labels):
                found.append(f"{_describe(ax)}: shows data but has no {name} label")
            own = getattr(ax, f"get_{name}label")()
            if own and (why := _unit_problem(own)):
                found.append(f"{_describe(ax)}: {why}")
    covers = [(leg, "legend", _extents(leg.get_window_extent(renderer))) for leg in _legends(fig)]
    covers += [
        (ax, "colour bar", _extents(ax.get_tightbbox(renderer)))
        for ax in fig.axes
        if _is_colorbar(ax) and ax.get_visible()
    ]
    for artist, kind, rect in covers:
        entries = [t.get_text() for t in artist.get_texts()] if kind == "legend" else []
        name = f"{kind} {entries[:3]!r}" if entries else kind
        if kind == "legend":
            for ax in axes:
                r = _clip(rect, _extents(ax.get_window_extent(renderer)))
                if r is not None and (hit := _data_hits(ax, r, dpi)):
                    found.append(
                        f"{_describe(ax)}: the {name} covers its data ({hit}); place it at a free spot or outside"
                    )
        for t, owner in _texts(fig):
            if owner is artist:
                continue
            if overlaps_rect(rect, _extents(t.get_window_extent(renderer))):
                where = _describe(owner) if hasattr(owner, "get_xlabel") else "the figure"
                found.append(f"{where}: the {name} covers the text {t.get_text()!r}")
    return found + _extra_problems(fig, axes, renderer, dpi)


def record(fig) -> dict:
    """What ``fig`` drew, for the caption checks (call after :func:`lint`, which draws it)."""
    from matplotlib.collections import LineCollection, PolyCollection
    from matplotlib.container import ErrorbarContainer

    out = []
    total = 0
    for ax in _data_axes(fig):
        bars = 0
        for c in ax.containers:
            if isinstance(c, ErrorbarContainer):
                for coll in c.lines[2]:
                    if isinstance(coll, LineCollection):
                        t = coll.get_transform()
                        for seg in coll.get_segments():
                            seg = t.transform(np.asarray(seg, float))
                            ok = np.all(np.isfinite(seg))
                            bars += int(ok and len(seg) > 1 and math.dist(seg[0], seg[-1]) > 0.5)
        areas = sum(
            1
            for c in ax.collections
            if isinstance(c, PolyCollection) and c.get_visible() and any(len(p.vertices) > 2 for p in c.get_paths())
        )
        total += bars + areas
        out.append(
            dict(
                title=ax.get_title(),
                xlabel=ax.get_xlabel(),
                ylabel=ax.get_ylabel(),
                lines=len(_lines(ax)),
                error_bars=bars,
                filled_areas=areas,
                legend=ax.get_legend() is not None,
            )
        )
    return dict(axes=out, error_bars=total)


# ----------------------------------------------------------------------------- captions
_FIGURE_ENV = re.compile(r"\\begin\{figure\*?\}(.*?)\\end\{figure\*?\}", re.S)
_INCLUDED = re.compile(r"\\includegraphics(?:\[[^\]]*\])?\{figures/([^}]+?)(?:\.pdf)?\}")
# What a caption says when it promises drawn spread: error/SD bars, a standard deviation, an interval, shading.
PROMISE = re.compile(
    r"error[- ]bars?|\bbars?\b[^.]{0,40}?(standard deviation|s\.?d\.?\b|interval)|standard deviation|"
    r"confidence interval|\bshaded\b|\\pm",
    re.I,
)


def _caption(body: str) -> str:
    i = body.find(r"\caption{")
    if i < 0:
        return ""
    depth, j = 0, i + len(r"\caption")
    for k in range(j, len(body)):
        depth += {"{": 1, "}": -1}.get(body[k], 0)
        if depth == 0:
            return body[j + 1 : k]
    return body[j + 1 :]


def promised_error_bars(paper: str | Path) -> list[str]:
    """Each figure of ``paper/sections/*.tex`` whose caption (the report's variables expanded) promises
    error bars, standard deviations or intervals, and whose ``figures/NAME.lint.json`` says it drew none."""
    paper = Path(paper)
    macros = {}
    for v in sorted((paper / "variables").glob("*.tex")):
        macros.update(read_macros(v.read_text()))
    found = []
    for tex in sorted((paper / "sections").glob("*.tex")):
        for env in _FIGURE_ENV.finditer(tex.read_text()):
            caption = re.sub(r"\\([A-Za-z]+)", lambda m: macros.get(m.group(1), m.group(0)), _caption(env.group(1)))
            promise = PROMISE.search(caption)
            if not promise:
                continue
            for name in _INCLUDED.findall(env.group(1)):
                meta = paper / "figures" / f"{name}.lint.json"
                if meta.exists() and not json.loads(meta.read_text()).get("error_bars"):
                    found.append(
                        f"figure {name} ({tex.name}): the caption promises {promise.group(0)!r} but the figure "
                        "draws no error bar or filled interval"
                    )
    return found
