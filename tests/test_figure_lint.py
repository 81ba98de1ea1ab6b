"""The figure lint (quadnn_paper.common.figure_lint, run by Report.figure on every figure).

Legends at every ``loc`` over data that fills or avoids that spot are flagged exactly when a plain
reference computation (the data sampled densely, each sample tested against the legend's box) finds
them overlapping; missing labels and units, colour bars and legends over text are flagged; a legend
outside the axes, shared labels and pending (empty) panels pass; the caption check finds promised
error bars that are not drawn.
"""

import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from quadnn_paper.common import figure_lint as L  # noqa: E402
from quadnn_paper.report import Report  # noqa: E402

LOCS = [
    "upper right",
    "upper left",
    "lower left",
    "lower right",
    "right",
    "center left",
    "center right",
    "lower center",
    "upper center",
    "center",
]


def _blob(x0, x1, y0, y1, n=9):
    """A grid of points filling [x0, x1] x [y0, y1]."""
    gx, gy = np.meshgrid(np.linspace(x0, x1, n), np.linspace(y0, y1, n))
    return gx.ravel(), gy.ravel()


def _dense(a, b, n=400):
    """Samples along the segment a-b."""
    t = np.linspace(0, 1, n)[:, None]
    return np.asarray(a, float) + t * (np.asarray(b, float) - np.asarray(a, float))


# Each data set: a function drawing it on ax, and its plain samples [(points in data coords, pad in pt)].
def _markers(region):
    def draw(ax):
        x, y = _blob(*region)
        ax.plot(x, y, "o", ms=4, label="points")
        return [(np.c_[x, y], 2.0)]

    return draw


def _diagonal(ax):
    ax.plot([0, 1], [0, 1], "-", lw=1, label="diagonal")
    return [(_dense((0, 0), (1, 1), 4000), 0.5)]


def _hline(ax):
    ax.axhline(0.5, lw=1, label="limit")
    return [(_dense((0, 0.5), (1, 0.5), 4000), 0.5)]


def _bars(ax):
    ax.bar([0.2, 0.5, 0.8], [0.3, 0.45, 0.3], width=0.2, label="bars")
    out = []
    for c, h in ((0.2, 0.3), (0.5, 0.45), (0.8, 0.3)):
        gx, gy = _blob(c - 0.1, c + 0.1, 0, h, 60)
        out.append((np.c_[gx, gy], 0.0))
    return out


def _band(ax):
    x = np.linspace(0, 1, 50)
    ax.fill_between(x, 0.0, 0.15 + 0.1 * x, alpha=0.3, label="interval")
    pts = [(xx, yy) for xx in np.linspace(0, 1, 200) for yy in np.linspace(0, 0.15 + 0.1 * xx, 30)]
    return [(np.array(pts), 0.0)]


def _errorbars(ax):
    xs = np.array([0.15, 0.5, 0.85])
    ys = np.array([0.55, 0.6, 0.5])
    ax.errorbar(xs, ys, yerr=0.3, fmt="none", ecolor="k", elinewidth=1, capsize=0, label="sd")
    return [(_dense((x, y - 0.3), (x, y + 0.3), 600), 0.5) for x, y in zip(xs, ys)]


DATA = {
    "lower-left blob": _markers((0.02, 0.3, 0.02, 0.3)),
    "upper-right blob": _markers((0.7, 0.98, 0.7, 0.98)),
    "upper-left blob": _markers((0.02, 0.3, 0.7, 0.98)),
    "centre blob": _markers((0.4, 0.6, 0.4, 0.6)),
    "left band": _markers((0.02, 0.2, 0.02, 0.98)),
    "diagonal": _diagonal,
    "horizontal line": _hline,
    "bars": _bars,
    "filled band": _band,
    "error bars": _errorbars,
}


def _figure(draw, loc, **legend):
    fig, ax = plt.subplots(figsize=(3.5, 2.4))
    samples = draw(ax)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.legend(loc=loc, fontsize=7, **legend)
    fig.tight_layout()
    return fig, ax, samples


def _reference_overlap(fig, ax, samples) -> bool:
    """Plain: is any sample drawn inside the axes within its pad of the legend's box?"""
    fig.draw_without_rendering()
    leg = ax.get_legend().get_window_extent()
    box = ax.get_window_extent()
    px = fig.dpi / 72
    for pts, pad in samples:
        for x, y in ax.transData.transform(pts):
            if not (box.x0 <= x <= box.x1 and box.y0 <= y <= box.y1):
                continue  # not drawn (clipped to the axes)
            r = pad * px
            if leg.x0 - r <= x <= leg.x1 + r and leg.y0 - r <= y <= leg.y1 + r:
                return True
    return False


def _legend_problems(fig):
    return [p for p in L.lint(fig) if "legend" in p]


@pytest.mark.parametrize("data", sorted(DATA))
def test_legend_over_data_is_flagged_exactly_when_it_overlaps(data):
    flagged_any = clear_any = False
    for loc in LOCS:
        fig, ax, samples = _figure(DATA[data], loc)
        try:
            expected = _reference_overlap(fig, ax, samples)
            found = _legend_problems(fig)
            assert bool(found) == expected, (data, loc, found)
            if expected:
                assert "covers its data" in found[0] and "'x (m)'" in found[0], found
            flagged_any |= expected
            clear_any |= not expected
        finally:
            plt.close(fig)
    assert flagged_any, f"{data}: no loc overlaps (the test would not test the flag)"
    if data != "horizontal line":  # 'center left/right/center' sit on it, the others beside it
        assert clear_any, f"{data}: every loc overlaps"


def test_the_locs_of_a_blob_are_the_expected_ones():
    """A blob in the lower-left corner is covered at 'lower left' (and the legend's own corner) only."""
    hit = []
    for loc in LOCS:
        fig, ax, samples = _figure(DATA["lower-left blob"], loc)
        if _legend_problems(fig):
            hit.append(loc)
        plt.close(fig)
    assert "lower left" in hit and "upper right" not in hit and "upper left" not in hit, hit


@pytest.mark.parametrize("data", sorted(DATA))
def test_a_legend_outside_the_axes_is_accepted(data):
    fig, ax, _ = _figure(DATA[data], "upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    try:
        assert L.lint(fig) == []
    finally:
        plt.close(fig)


def test_a_legend_outside_its_axes_over_a_neighbours_data_is_flagged():
    fig, axes = plt.subplots(1, 2, figsize=(7, 2.4))
    for ax in axes:
        ax.plot([0, 1], [0, 1], label="diagonal")
        ax.set_xlabel("x (m)")
        ax.set_ylabel("y (m)")
    fig.tight_layout()
    axes[0].legend(loc="lower left", bbox_to_anchor=(1.1, 0.0))  # into the right panel, over its diagonal
    try:
        found = _legend_problems(fig)
        assert found and found[0].startswith("axes 2 of 2"), found
    finally:
        plt.close(fig)


def test_missing_labels_are_flagged_and_shared_or_figure_labels_accepted():
    fig, axes = plt.subplots(1, 2, figsize=(7, 2.4), sharey=True)
    for ax in axes:
        ax.plot([0, 1], [0, 1])
    axes[0].set_title("left")
    axes[0].set_ylabel("y (m)")
    axes[1].set_xlabel("x (m)")
    found = L.lint(fig)
    assert found == ["axes 1 of 2 (title 'left', x label '', y label 'y (m)'): shows data but has no x label"]
    fig.supxlabel("x (m)")
    assert L.lint(fig) == []
    plt.close(fig)


def test_axes_without_data_or_drawn_axis_need_no_labels():
    fig, axes = plt.subplots(1, 2, figsize=(5, 2))
    axes[0].text(0.5, 0.5, "pending", transform=axes[0].transAxes)  # a panel whose runs are pending
    axes[1].imshow(np.zeros((4, 4)))
    axes[1].axis("off")
    assert L.lint(fig) == []
    plt.close(fig)


@pytest.mark.parametrize(
    "label, bad",
    [
        ("time", True),
        ("epoch time (s)", False),
        ("step time [ms]", False),
        ("peak memory", True),
        ("peak memory (MiB)", False),
        ("test error", True),
        ("top-1 error", True),
        ("test error (%)", False),
        ("training loss", False),
        ("depth H", False),
    ],
)
def test_units(label, bad):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    ax.set_xlabel("epoch")
    ax.set_ylabel(label)
    found = L.lint(fig)
    assert bool(found) == bad, found
    plt.close(fig)


def test_a_legend_over_a_text_and_a_colour_bar_over_a_title_are_flagged():
    fig, ax = plt.subplots(figsize=(3.5, 2.4))
    ax.plot([0, 1], [0.9, 0.9], label="fit")
    ax.set_ylim(0, 1)
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.text(0.03, 0.5, "RMSE med 0.0152", transform=ax.transAxes, va="center")
    ax.legend(loc="center left")
    found = L.lint(fig)
    assert any("covers the text 'RMSE med 0.0152'" in p for p in found), found
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(5, 1.5))
    for ax, title in zip(axes, ("image", "ground truth")):
        im = ax.imshow(np.random.default_rng(0).random((4, 8)))
        ax.set_title(title)
        ax.axis("off")
    cax = fig.add_axes((0.55, 0.75, 0.4, 0.08))  # a horizontal colour bar laid over the right title
    fig.colorbar(im, cax=cax, orientation="horizontal")
    found = L.lint(fig)
    assert any("colour bar covers the text 'ground truth'" in p for p in found), found
    plt.close(fig)
    fig, axes = plt.subplots(1, 2, figsize=(5, 1.5))
    for ax in axes:
        im = ax.imshow(np.zeros((4, 8)))
        ax.set_title("panel")
        ax.axis("off")
    fig.colorbar(im, ax=axes, fraction=0.02)  # beside the panels
    assert L.lint(fig) == []
    plt.close(fig)


def test_report_refuses_a_flagged_figure_and_records_error_bars(tmp_path):
    fig, ax = plt.subplots(figsize=(3.5, 2.4))
    ax.plot([0, 1], [0, 1], label="a")
    ax.legend(loc="upper left")
    ax.set_title("T")
    r = Report(tmp_path, "sec", "smoke", "d")
    with pytest.raises(L.FigureLintError, match=r"figure 'bad' \(sec, profile smoke\).*title 'T'.*no x label"):
        r.figure(fig, "bad")
    plt.close(fig)
    for sd, bars in ((0.0, 0), (0.1, 3)):
        fig, ax = plt.subplots(figsize=(3.5, 2.4))
        ax.errorbar([0, 1, 2], [1, 2, 3], yerr=sd, marker="o")
        ax.set_xlabel("x (m)")
        ax.set_ylabel("test error (%)")
        r.figure(fig, f"sd{bars}")
        plt.close(fig)
    r.commit()
    assert not (tmp_path / "figures" / "bad.pdf").exists()
    assert json.loads((tmp_path / "figures" / "sd0.lint.json").read_text())["error_bars"] == 0
    meta = json.loads((tmp_path / "figures" / "sd3.lint.json").read_text())
    assert meta["error_bars"] == 3 and meta["axes"][0]["ylabel"] == "test error (%)"


def test_a_caption_promising_error_bars_needs_them_drawn(tmp_path):
    (tmp_path / "sections").mkdir()
    (tmp_path / "figures").mkdir()
    (tmp_path / "variables").mkdir()
    (tmp_path / "variables" / "s.tex").write_text(
        "% generated\n\\newcommand{\\sBars}{bars: one standard deviation over 3 seeds}\n"
        "\\newcommand{\\sNoBars}{one seed per point}\n"
    )
    (tmp_path / "sections" / "s.tex").write_text(
        "\\begin{figure}\\includegraphics[width=\\linewidth]{figures/a.pdf}\\caption{Errors (\\sBars).}\\end{figure}\n"
        "\\begin{figure}\\includegraphics[width=\\linewidth]{figures/b.pdf}\\caption{Errors, with error bars.}"
        "\\end{figure}\n"
        "\\begin{figure}\\includegraphics[width=\\linewidth]{figures/c.pdf}\\caption{Errors (\\sNoBars).}\\end{figure}\n"
    )
    for name, bars in (("a", 0), ("b", 2), ("c", 0)):
        (tmp_path / "figures" / f"{name}.lint.json").write_text(json.dumps({"error_bars": bars}))
    found = L.promised_error_bars(tmp_path)
    assert len(found) == 1 and found[0].startswith("figure a (s.tex)") and "standard deviation" in found[0], found


def test_segment_geometry_against_sampling():
    """The clipping test against dense sampling, on random segments and rectangles."""
    rng = np.random.default_rng(0)
    for _ in range(300):
        a, b = rng.uniform(0, 10, 2), rng.uniform(0, 10, 2)
        x0, y0 = rng.uniform(0, 8, 2)
        rect = (x0, y0, x0 + rng.uniform(0.1, 3), y0 + rng.uniform(0.1, 3))
        pts = _dense(a, b, 20000)
        sampled = np.any(
            (pts[:, 0] >= rect[0]) & (pts[:, 0] <= rect[2]) & (pts[:, 1] >= rect[1]) & (pts[:, 1] <= rect[3])
        )
        exact = L._segments_meet(rect, a[None], b[None])
        if sampled:
            assert exact
        elif exact:  # a graze thinner than the sampling step
            d = np.linalg.norm(b - a) / 20000
            grown = (rect[0] - d, rect[1] - d, rect[2] + d, rect[3] + d)
            assert np.any(
                (pts[:, 0] >= grown[0]) & (pts[:, 0] <= grown[2]) & (pts[:, 1] >= grown[1]) & (pts[:, 1] <= grown[3])
            )


def _labelled(ax):
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")


def test_an_axis_offset_text_over_the_title_is_flagged_and_one_clear_of_it_is_not():
    fig, ax = plt.subplots(figsize=(3.5, 2.4))
    ax.plot([0, 1, 2], [1.00001, 1.00002, 1.00003], "o-")  # y ticks get an offset text above the axes
    _labelled(ax)
    # a title at a fixed height (matplotlib moves only a title left at its default height)
    ax.set_title("a title at the left edge, long enough to reach the offset", loc="left", fontsize=7, y=1.0, pad=2)
    fig.canvas.draw()
    if not ax.yaxis.get_offset_text().get_text():
        pytest.skip("this matplotlib drew no offset text")
    assert any("offset text" in p for p in L.lint(fig)), L.lint(fig)
    ax.set_title("", loc="left")
    ax.set_title("short", loc="right", fontsize=7, y=1.12)
    assert not any("offset text" in p for p in L.lint(fig)), L.lint(fig)
    plt.close(fig)


def test_a_boxed_annotation_over_data_is_flagged_a_bare_label_beside_a_point_is_not():
    fig, ax = plt.subplots(figsize=(3.5, 2.4))
    ax.plot(np.linspace(0, 1, 50), np.linspace(0, 1, 50), "-")
    _labelled(ax)
    ax.text(0.5, 0.5, "a note in a box", bbox=dict(facecolor="w"), ha="center", va="center")
    assert any("boxed text" in p for p in L.lint(fig))
    ax.texts[0].remove()
    ax.text(0.5, 0.5, "label", ha="center")  # names the point it stands on
    assert L.lint(fig) == []
    plt.close(fig)


def test_empty_and_nearly_empty_axes_are_flagged_unless_they_say_why():
    fig, axes = plt.subplots(1, 3, figsize=(7, 2))
    for ax in axes:
        _labelled(ax)
    axes[0].plot([0, 1], [0, 1])
    axes[1].plot([0.5], [0.5], "o")  # one point
    found = L.lint(fig)
    assert any("axes 2 of 3" in p and "nearly empty" in p for p in found)
    assert any("axes 3 of 3" in p and "empty axes" in p for p in found)
    assert not any("axes 1 of 3" in p for p in found)
    axes[2].text(0.5, 0.5, "pending", transform=axes[2].transAxes)
    axes[1].text(0.1, 0.9, "one seed", transform=axes[1].transAxes)
    assert L.lint(fig) == []
    plt.close(fig)


def test_curves_told_apart_only_by_a_shade_are_flagged():
    fig, ax = plt.subplots(figsize=(3.5, 2.4))
    _labelled(ax)
    x = np.linspace(0, 1, 10)
    blues = plt.get_cmap("Blues")
    ax.plot(x, x, "-", color=blues(0.4))
    ax.plot(x, x + 1, "-", color=blues(0.9))
    assert any("shade of one colour" in p for p in L.lint(fig))
    ax.lines[1].set_linestyle("--")  # told apart by the dash
    assert L.lint(fig) == []
    ax.lines[1].set_linestyle("-")
    ax.lines[1].set_color("C1")  # or by hue (orange against blue)
    assert L.lint(fig) == []
    plt.close(fig)


def test_the_default_categorical_palette_has_no_two_shades_of_one_colour():
    colours = [f"C{i}" for i in range(10)]
    assert [(a, b) for a in colours for b in colours if a < b and L._same_shade(a, b)] == []
    assert L._same_shade("0.2", "0.7") and not L._same_shade("0.5", "C0")


@pytest.mark.parametrize("legends", [1, 2, 3])
def test_a_panel_squeezed_by_legends_beside_it_is_flagged_and_one_shared_legend_is_not(legends):
    """Three panels at the page width, each with a long legend beside it (the transfer figure once):
    the panels shrink below a readable size and their tick labels run together. With one legend
    beside the last panel they keep their width."""
    fonts = {
        "font.size": 7,
        "axes.labelsize": 7,
        "legend.fontsize": 6.5,
        "xtick.labelsize": 6.5,
        "ytick.labelsize": 6.5,
    }
    with plt.rc_context(fonts):  # the report's print sizes, at which tight layout makes room for every legend
        fig, axes = plt.subplots(1, 3, figsize=(7.0, 2.4), sharey=True)
        for i, ax in enumerate(axes):
            for g in ("0", "0.0001, trained 0.0014", "0.1, trained 1.4"):
                ax.plot(np.arange(1, 7), np.linspace(60, 30, 6) + len(g), marker=".", label=f"gamma={g}")
            ax.set_xlabel("epoch")
            ax.set_ylabel("train error (%)")
            if i >= 3 - legends:
                ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
        fig.tight_layout()
        found = L.lint(fig)
    if legends == 1:
        assert found == []
    else:
        assert sum("panel of" in p for p in found) == 3 and any("tick labels" in p for p in found), found
    plt.close(fig)


def test_overlapping_tick_labels_are_flagged():
    fig, ax = plt.subplots(figsize=(1.2, 1.2))
    ax.plot([0, 1], [0, 1])
    ax.set_xticks([0, 0.05, 0.1], ["first long", "second long", "third"])
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    assert any("tick labels" in p and "overlap" in p for p in L.lint(fig))
    plt.close(fig)


def test_the_reports_corner_mark_goes_below_a_legend_under_the_figure(tmp_path):
    """The provenance line the report draws under every figure sits below the lowest thing the
    figure draws: a legend placed under its axes included."""
    fig, ax = plt.subplots(figsize=(3.4, 3.0))
    for k in range(5):
        ax.plot([1, 2, 3], [k, k + 1, k + 3], label=f"curve {k}")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss")
    # a figure legend hung from the figure's lower edge (tight layout leaves figure legends where they are)
    legend = fig.legend(loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, frameon=False)
    with Report(tmp_path, "cifar_tuning", "smoke", "a data set with a long name for the mark") as report:
        report.figure(fig, "cifartuning_marked")
    renderer = fig.canvas.get_renderer()
    (mark,) = [t for t in fig.texts if t.get_text().startswith("profile:")]
    low = L._extents(legend.get_window_extent(renderer))
    assert L._extents(mark.get_window_extent(renderer))[3] <= low[1]  # the mark's top under the legend's bottom
    plt.close(fig)
