"""The one function that turns a paired interval into verdict words (every section uses it), the
family-wise correction, and the layout check that fails the build (tools/paper_check.py)."""

import json
import math
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sst

from quadnn_paper.analysis import claim_tables, paired, stats
from quadnn_paper.engine import Results
from quadnn_paper.experiments import cifar as cs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import paper_check  # noqa: E402


def iv(lo, hi, sd=1.0, n=10):
    return stats.Interval((lo + hi) / 2, lo, hi, sd, n)


@pytest.mark.parametrize(
    "lo, hi, words",
    [
        (0.2, 1.5, stats.SUPPORTED),
        (-3.0, -0.1, stats.CONTRADICTED),
        (0.05, 0.6, stats.SUPPORTED),  # clear of zero wins over equivalence
        (-0.5, 1.4, "undecided (detectable: "),
        (-2.06, 1.92, "undecided (detectable: "),
    ],
)
def test_verdict_words_from_intervals(lo, hi, words):
    assert stats.verdict(iv(lo, hi)).startswith(words)


def test_verdict_names_the_detectable_difference_and_the_untested():
    v = stats.verdict(iv(-2.0, 2.0, sd=3.0, n=4))
    assert v == f"undecided (detectable: {stats.detectable(3.0, 4):.1f} points)"
    assert stats.verdict(None) == stats.NOT_TESTED == "not tested at this profile"
    assert stats.verdict(stats.interval([5.0])).startswith("undecided")  # one pair: no interval


def test_an_adjusted_p_value_above_the_level_keeps_a_clear_interval_undecided():
    clear = iv(0.1, 2.0, sd=2.0, n=5)
    assert stats.verdict(clear, p_adjusted=0.01) == stats.SUPPORTED
    assert stats.verdict(clear, p_adjusted=0.2).endswith("clear of 0 before Holm)")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(-5, 5, allow_nan=False), min_size=2, max_size=30),
)
def test_verdict_agrees_with_the_interval_it_reads(diffs):
    i = stats.interval(diffs)
    v = stats.verdict(i)
    if v == stats.SUPPORTED:
        assert i.lo > 0
    elif v == stats.CONTRADICTED:
        assert i.hi < 0
    else:  # without a margin there is no equivalence verdict
        assert v.startswith("undecided") and i.lo <= 0 <= i.hi


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(-3, 3, allow_nan=False).map(lambda x: round(x, 3)), min_size=3, max_size=20).filter(
        lambda d: max(d) - min(d) > 1e-3
    ),
    st.floats(0.1, 2.0),
)
def test_equivalence_is_two_one_sided_tests_at_the_margin(diffs, margin):
    # TOST at level a is the (1 - 2a) interval inside +-margin (Schuirmann 1987)
    i = stats.interval(diffs)
    narrow = stats.interval(diffs, level=1 - 2 * (1 - stats.LEVEL))
    v = stats.verdict(i, margin=margin)
    inside = -margin < narrow.lo and narrow.hi < margin
    if v.startswith(stats.EQUIVALENT):
        assert inside and v == stats.equivalent(margin)
    elif v not in (stats.SUPPORTED, stats.CONTRADICTED):
        assert not inside or abs(narrow.hi - margin) < 1e-9 or abs(narrow.lo + margin) < 1e-9


def test_equivalence_margin_is_half_the_papers_effect_and_adjusted():
    assert stats.margin_of(0.6) == pytest.approx(0.3) and stats.margin_of(None) is None
    tight = iv(-0.2, 0.2, sd=0.3, n=12)
    assert stats.verdict(tight, margin=0.5).startswith(stats.EQUIVALENT)
    assert stats.verdict(tight, margin=0.5, p_equivalence=0.2).startswith("undecided")  # held back by Holm
    assert stats.verdict(tight).startswith("undecided")  # no margin stated: no equivalence


def test_detectable_difference_is_stated_at_the_holm_level():
    one = stats.verdict(iv(-2.0, 2.0, sd=3.0, n=4))
    ten = stats.verdict(iv(-2.0, 2.0, sd=3.0, n=4), family=10)
    assert ten == f"undecided (detectable: {stats.detectable(3.0, 4, 1 - 0.05 / 10):.1f} points)" and ten != one


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.floats(-4, 4, allow_nan=False).map(lambda x: round(x, 3)), min_size=2, max_size=20).filter(
        lambda d: max(d) - min(d) > 1e-3
    )
)
def test_p_value_is_scipys_paired_t_test(diffs):
    assert stats.interval(diffs).p == pytest.approx(sst.ttest_1samp(diffs, 0.0).pvalue, rel=1e-9, abs=1e-12)


def _holm_reference(ps):
    # Plain Holm: order, multiply by (m - rank), running maximum, cap at 1.
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    adj, run = [0.0] * len(ps), 0.0
    for rank, i in enumerate(order):
        run = max(run, min(1.0, (len(ps) - rank) * ps[i]))
        adj[i] = run
    return adj


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=25))
def test_holm_against_a_plain_reference(ps):
    out = stats.holm(ps)
    assert out == pytest.approx(_holm_reference(ps))
    assert all(a >= p for a, p in zip(out, ps))


def test_holm_ignores_pairs_without_a_p_value():
    assert stats.holm([0.01, math.nan, 0.04]) == pytest.approx([0.02, math.nan, 0.04], nan_ok=True)


def test_adjust_turns_a_lone_marginal_pair_in_a_family_undecided():
    # One pair just clear of zero (p about 0.046) among nine null pairs: alone it is supported,
    # in the family Holm multiplies its p-value by ten.
    marginal = {s: e for s, e in enumerate([1.0, -0.2, 1.5, 0.4, 1.1, -0.3, 0.9, 0.1])}
    zero = {s: 0.0 for s in marginal}
    alone = paired.pair_claim("A beats B", [("A", zero, "B", marginal)])
    assert alone.verdict == stats.SUPPORTED
    null = [
        paired.pair_claim(f"null {i}", [("A", zero, "B", {s: (-1) ** (s + i) * 2.0 for s in zero})]) for i in range(9)
    ]
    family = paired.adjust([alone, *null])
    assert family[0].verdict.startswith("undecided") and family[0].p_adjusted[0] > 0.05


def test_one_aggregation_rule_for_claims_of_several_pairs():
    # supported only when every pair was tested and agrees
    assert stats.combine([stats.SUPPORTED, stats.NOT_TESTED]) == "not tested at this profile (1 of 2 pairs tested)"
    assert stats.combine([stats.SUPPORTED] * 3) == stats.SUPPORTED
    # a contradicted pair of a claim about every pair is a counterexample
    assert stats.combine([stats.SUPPORTED, stats.CONTRADICTED]) == "refuted (1 of 2 pairs contradicted)"
    assert stats.combine([stats.CONTRADICTED, stats.CONTRADICTED]) == stats.CONTRADICTED
    assert stats.combine([stats.SUPPORTED, stats.CONTRADICTED], universal=False).startswith("undecided (mixed")
    eq = [stats.equivalent(0.3), stats.equivalent(0.45)]
    assert stats.combine(eq) == stats.equivalent(0.45)
    assert stats.combine([stats.SUPPORTED, eq[0]]) == "undecided (mixed: 1 supported, 1 equivalent of 2 pairs)"
    assert stats.combine(["undecided (detectable: 1.2 points)", "undecided (detectable: 3.4 points)"]).endswith(
        "3.4 points)"
    )
    assert stats.combine([stats.NOT_TESTED]) == stats.NOT_TESTED
    assert not stats.decided(stats.combine([stats.SUPPORTED, stats.NOT_TESTED]))
    assert stats.decided("refuted (1 of 2 pairs contradicted)")


def test_a_pair_with_controls_is_measured_net_of_them():
    # the treated arm gains 2 points over b, but its control at the same budget gains 2 as well
    a, b = {s: 5.0 + 0.1 * s for s in range(5)}, {s: 7.0 for s in range(5)}
    a0, b0 = {s: 5.0 + 0.1 * (s % 2) for s in range(5)}, {s: 7.0 for s in range(5)}
    raw = paired.pair_claim("A beats B", [("A", a, "B", b)])
    net = paired.pair_claim("A beats B", [("A", a, "B", b, ("A0", a0, "B0", b0))])
    assert raw.verdict == stats.SUPPORTED and not net.decided
    assert net.pairs[0][1] == "B, net of controls" and net.note == "net of controls: A0 vs B0"
    assert abs(net.pairs[0][2].mean) < 0.2
    # an arm not run at this profile leaves the claim not tested, with the count
    part = paired.pair_claim("every A beats B", [("A", a, "B", b), ("C", {}, "B", b)])
    assert part.verdict == "not tested at this profile (1 of 2 pairs tested)"


def test_trains_or_not_is_decided_on_counts_whatever_the_terms_did():
    q, sq = {s: 40.0 for s in range(5)}, {s: 99.0 for s in range(5)}
    gated = paired.pair_claim("Q trains", [("Q", q, "S", sq)], dataset="cifar100", moved_by={"Q": 0.1})
    counted = paired.pair_claim("Q trains", [("Q", q, "S", sq)], dataset="cifar100", moved_by={"Q": 0.1}, trains=True)
    assert gated.verdict.startswith(stats.NOT_TESTED_SCALE) and counted.verdict == stats.SUPPORTED
    # a method that pins its terms at any scale is decided as what it is, and said to pin them
    c, sw = {s: 5.0 for s in range(5)}, {s: 5.0 + 0.01 * (-1) ** s for s in range(5)}
    pin = paired.pair_claim("sw beats c", [("sw", sw, "c", c)], moved_by={"sw": 0.0}, pinned=("sw",), margins=[1.0])
    assert pin.verdict.startswith(stats.EQUIVALENT) and "sw pins its quadratic terms" in pin.note


def test_a_run_that_trained_refutes_a_claim_that_it_does_not():
    """ "X does not converge" is universal: one run of X that trained is a counterexample, whatever
    the p-values; with none, the counts decide it as any trains-or-not claim."""
    relinear = {s: 26.0 for s in range(6)}
    never = {s: 90.0 for s in range(6)}
    once = {**never, 3: 55.0}
    kw = dict(dataset="cifar10", never=True)
    assert paired.pair_claim("R trains, N does not", [("R", relinear, "N", never)], **kw).verdict == stats.SUPPORTED
    c = paired.pair_claim("R trains, N does not", [("R", relinear, "N", once)], **kw)
    assert c.verdict == f"{stats.REFUTED} (1 of 6 runs trained)" and stats.decided(c.verdict)
    # Holm's adjustment keeps the counterexample (adjust decides again through the same rule)
    other = paired.pair_claim("A beats B", [("A", {s: 1.0 for s in range(6)}, "B", {s: 1.5 + s / 9 for s in range(6)})])
    adjusted = paired.adjust([c, other])[0]
    assert adjusted.verdict == c.verdict
    # without never, the same counts would read only "more often"
    plain = paired.pair_claim("R trains", [("R", relinear, "N", once)], dataset="cifar10", trains=True)
    assert not plain.verdict.startswith(stats.REFUTED)
    # a pair not run leaves the claim untested, but a counterexample elsewhere still refutes it
    part = paired.pair_claim("R trains, N does not", [("R", relinear, "N", once), ("S", {}, "M", {})], **kw)
    assert part.verdict.startswith(stats.REFUTED)


def test_parabolic_and_poly_resnets_trained_normally_are_a_row_and_a_claim():
    """The paper's reason for training Parabolic-/PolyResNets with ReLinear ("trained normally they
    do not converge") is tested: the same networks, twin-initialised, with their terms drawn, one
    rate and ordinary L2, against the ReLinear rows at the same seeds."""
    from quadnn_paper.sections import cifar_comparison

    P = cifar_comparison.protocol("cpu")
    planned = cs.plan(cs.comparison_rows(), P, width=P["width"])
    normal = {(r.model, s): c for (r, s), c in planned.items() if r.method == cs.NORMAL}
    assert sorted({m for m, _ in normal}) == ["cifar_parabolic_resnet20", "cifar_poly_resnet20"]
    for (model, s), cfg in normal.items():
        ri = planned[(cs.row_for(cs.comparison_rows(), model, "ri"), s)]
        assert (cfg.relinear, cfg.quadratic_init, cfg.quadratic_decay) == ("none", "random", "zero")
        assert (ri.relinear, ri.quadratic_init) == ("sg", "reference")
        # the pair differs only in ReLinear: same seed, split, twin, width and budget
        assert (
            cfg.replace(
                relinear="sg",
                quadratic_init="reference",
                quadratic_decay=ri.quadratic_decay,
                lr_g=ri.lr_g,
                lr_b=ri.lr_b,
            )
            == ri
        )
    errs = _fake_errors(planned)
    by = {c.text: c for c in cifar_comparison.claims(errs, {r: 1 for r in cs.comparison_rows()}, P)}
    at20 = next(c for t, c in by.items() if t.startswith("At depth 20: Parabolic-ResNet20 and PolyResNet20 trained"))
    assert at20.never and len(at20.pairs) == 2 and all(iv is not None for *_, iv in at20.pairs)
    every = next(c for t, c in by.items() if t.startswith("Parabolic-/PolyResNets trained normally"))
    assert len(every.pairs) == 6  # depths 20, 32, 56, both kinds (full trains them all)


def test_combined_claims_and_their_columns():
    c = paired.pair_claim("A beats B", [("A", {0: 1.0, 1: 1.0, 2: 1.1}, "B", {0: 3.0, 1: 3.2, 2: 3.0})])
    assert c.verdict == stats.SUPPORTED and c.verdict_text == c.verdict and c.seeds == 3
    row = claim_tables.claim_rows([c])[0]
    assert len(row) == len(claim_tables.CLAIMS_HEADER) and row[3] == 3 and row[-1].value == c.verdict_text
    nt = paired.not_tested("C", "full only: 2 of 2 pairs full only")
    assert claim_tables.summary_rows("S", [nt])[0][3].startswith("full only")


# -- the layout check ----------------------------------------------------------------------------
def test_overfull_boxes_over_one_point_fail():
    log = (
        "Overfull \\hbox (19.5pt too wide) in alignment at lines 3--9\n"
        "Overfull \\hbox (0.8pt too wide) in paragraph at lines 1--2\n"
        "Overfull \\vbox (30.0pt too high) has occurred\n"
        "LaTeX Warning: Float too large for page by 50.46982pt on input line 58.\n"
        "LaTeX Warning: Float too large for page by 0.5pt on input line 12.\n"
    )
    found = paper_check.overfull_boxes(log)
    assert len(found) == 2 and "19.5" in found[0]
    assert found[1] == "float 50.46982 pt taller than the page (input line 58)"  # the cpu claims table once


def test_a_table_shrunk_below_six_points_fails():
    # the lines paper/main.tex's \\fittable writes; the cpu stand-in settings table once printed at 4.5 pt
    log = (
        "quadnn-table: scale 842 per mille of 8 pt, input line 38\n"
        "quadnn-table: scale 562 per mille of 8 pt, input line 68\n"
        "quadnn-table: scale 760 per mille of 8 pt, input line 70\n"
    )
    found = paper_check.small_tables(log)
    assert len(found) == 1 and "4.5 pt" in found[0] and "input line 68" in found[0]
    assert paper_check.small_tables("quadnn-table: scale 750 per mille of 8 pt, input line 1\n") == []  # 6.0 pt


def test_the_report_shrinks_tables_only_through_fittable():
    # a bare \\resizebox would shrink a table without the log line the layout check reads
    tex = "\n".join(f.read_text() for f in (paper_check.ROOT / "paper" / "sections").glob("*.tex"))
    assert "\\resizebox" not in tex and "\\scalebox" not in tex
    assert "\\newcommand{\\fittable}" in (paper_check.ROOT / "paper" / "main.tex").read_text()


def test_printed_width_follows_the_figure_environment():
    tex = (
        r"\begin{figure*}\includegraphics[width=0.9\linewidth]{figures/a.pdf}\end{figure*}"
        r"\begin{figure}\includegraphics[width=0.5\linewidth]{figures/b}\end{figure}"
        r"\begin{figure}\includegraphics[width=\columnwidth]{figures/c}\end{figure}"
    )
    w = paper_check.printed_widths(tex)
    assert w == pytest.approx({"a": 0.9 * 516, "b": 0.5 * 252, "c": 252})


def _figure(paper, name, width_in, font, include):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(width_in, 2))
    ax.set_title("t", fontsize=font)
    (paper / "figures").mkdir(parents=True, exist_ok=True)
    fig.savefig(paper / "figures" / f"{name}.pdf")
    plt.close(fig)
    (paper / "figures" / f"{name}.fonts.json").write_text(json.dumps({"min_font_pt": font}))
    (paper / "sections").mkdir(exist_ok=True)
    (paper / "sections" / f"{name}.tex").write_text(include)


def test_a_figure_drawn_large_and_shrunk_fails_and_one_drawn_at_size_passes(tmp_path):
    (tmp_path / "main.tex").write_text("")
    inc = r"\begin{figure}\includegraphics[width=\linewidth]{figures/%s.pdf}\end{figure}"
    _figure(tmp_path, "big", 7.0, 8, inc % "big")  # 7 in wide into a 3.5 in column: 8 pt -> 4 pt
    _figure(tmp_path, "fit", 3.5, 7, inc % "fit")
    found = paper_check.small_fonts(tmp_path)
    assert len(found) == 1 and found[0].startswith("figure big")


# -- every claim tested at cpu ------------------------------------------------------------------
def _fake_errors(planned):
    import random

    rng = random.Random(0)
    errs = {}
    for (row, seed), _ in planned.items():
        errs.setdefault(row, {})[seed] = 5.0 + rng.random()
    return errs


def test_every_comparison_claim_is_tested_at_cpu_with_the_seeds_it_was_sized_for():
    from quadnn_paper.sections import cifar_comparison

    P = cifar_comparison.protocol("cpu")
    planned = cs.plan(cs.comparison_rows(), P, width=P["width"])
    claims = cifar_comparison.claims(_fake_errors(planned), {}, P)
    # tested: every claim all of whose pairs the cpu profile trains (the pairs of the others it
    # trains are claims of their own); not tested: those with a pair only the full profile trains
    untested = {c.text: c.verdict for c in claims if c.verdict.startswith(stats.NOT_TESTED)}
    assert untested == {
        "Every QResNet beats the ResNet of its depth (depths 32-110)": "not tested at this profile (1 of 9 pairs tested)",
        "Weight transfer beats random initialisation (QResNet, ReLinear)": "not tested at this profile (1 of 4 pairs tested)",
        "QResNet beats Parabolic-/PolyResNet of the same depth (r.i.)": "not tested at this profile (2 of 6 pairs tested)",
        "Compact-QResNet is worse than QResNet (both w.t.)": "not tested at this profile (2 of 3 pairs tested)",
        "ResNet1202 is worse than the shallower ResNets": "not tested at this profile (0 of 4 pairs tested)",
        "QResNet beats every widened ResNet of its depth": "not tested at this profile (1 of 6 pairs tested)",
    }, untested
    assert not any("confounded" in c.verdict for c in claims)
    by = {c.text: c for c in claims}
    assert by["QResNet32 beats ResNet110 with fewer parameters"].seeds == len(cs.REST_SEEDS)
    # ResNet56 at the rest's seeds against QResNet20 at the headline's: paired on the seeds both have
    assert by["Depth helps more than the quadratic neuron: ResNet56 beats QResNet20 (r.i.)"].seeds == len(cs.REST_SEEDS)
    assert by["QResNet20 (r.i., with and without ReZero) beats ResNet20"].seeds == len(cs.HEADLINE_SEEDS)
    # every arm of a claim at the profile's width times its own: the twice-wide ResNet32 at 2 x 0.25
    widths = {(r.model, r.width): cfg.width for (r, _), cfg in planned.items()}
    assert widths[("cifar_resnet32", 2.0)] == 2 * P["width"] and widths[("cifar_qresnet32", 1.0)] == P["width"]


def test_tuning_names_the_claims_it_once_skipped():
    from quadnn_paper.sections import cifar_tuning

    planned = cifar_tuning.run_plan("cpu")
    # gamma 0 (the conventional network) gets the lowest error of the sg sweep
    results = {
        cfg.run_id: dict(status="finished", test_error=1.0 if k[:2] == ("sg", 0.0) else 5.0 + k[2] / 10, history=[])
        for k, cfg in planned.items()
    }
    S = cifar_tuning.summary(Results.of(cifar_tuning, "cpu", results))
    texts = " | ".join(c.text for c in S.claims)
    assert "ReZero stabilises training" in texts and "ReLinear-sg beats ReLinear-sw" in texts
    # robustness to gamma: each later stage against the one before at the largest gamma, net of the
    # same stages' gamma-0 transfers (a later source trained longer)
    later = next(c for c in S.claims if c.text.startswith("Later transfer stages"))
    large = f"{cifar_tuning.TRANSFER_LARGE:g}"
    assert [(a.split(" (")[0], b.split(" (")[0]) for a, b, _ in later.pairs] == [
        (f"transfer 2 {large}", f"transfer 1 {large}"),
        (f"transfer 3 {large}", f"transfer 2 {large}"),
    ]
    assert all(b.endswith(", net of controls") for _, b, _ in later.pairs)
    assert all(iv is not None for *_, iv in later.pairs) and "transfer 2 0 vs transfer 1 0" in later.note
    # ReZero at the gammas the paper names, each against ReLinear-sg alone at the same gamma
    named = next(c for c in S.claims if c.text.startswith("ReZero stabilises training where"))
    assert len(named.pairs) == len(cifar_tuning.REZERO_NAMED) and all(iv is not None for *_, iv in named.pairs)
    assert S.best["sg"][0] != 0  # gamma 0 is the conventional network, never sg's best


def test_the_papers_column_holds_only_the_papers_numbers_of_the_pair_that_ran():
    from quadnn_paper.sections import cifar_comparison

    P = cifar_comparison.protocol("cpu")
    planned = cs.plan(cs.comparison_rows(), P, width=P["width"])
    errs = _fake_errors(planned)
    params = {r: 1_000_000 + i for i, r in enumerate(cs.comparison_rows())}
    by = {c.text: c for c in cifar_comparison.claims(errs, params, P)}
    fewer = by["QResNet32 beats ResNet110 with fewer parameters"]
    assert "params" not in fewer.paper and "params" in fewer.note  # our counts are ours
    wide = by["QResNet beats every widened ResNet of its depth"]
    x2 = cs.row_for(cs.comparison_rows(), "cifar_resnet32", width=2.0)
    assert wide.paper.startswith(f"{cs.row_for(cs.comparison_rows(), 'cifar_qresnet32', 'wt').paper} vs {x2.paper}")


def test_tuning_trains_controls_and_the_unscaled_rate_and_labels_what_it_trained():
    from quadnn_paper.sections import cifar_tuning

    P = cifar_tuning.protocol("cpu")
    planned = cifar_tuning.run_plan("cpu")
    # every claimed transfer has its gamma-0 control at the same seeds, from the same source
    for (e, v, s), cfg in planned.items():
        if e.startswith("transfer") and v == cifar_tuning.SG_BEST:
            ctl = planned[(e, 0.0, s)]
            assert ctl.lr_g == 0 and ctl.transfer_from == cfg.transfer_from and ctl.epochs == cfg.epochs
    unscaled = {s: c for (e, _, s), c in planned.items() if e == cifar_tuning.UNSCALED}
    assert sorted(unscaled) == sorted(P["rest_seeds"]) and all(
        c.lr_g == cifar_tuning.SG_BEST for c in unscaled.values()
    )
    results = {
        cfg.run_id: dict(status="finished", test_error=5.0 + k[2] / 10, history=[]) for k, cfg in planned.items()
    }
    S = cifar_tuning.summary(Results.of(cifar_tuning, "cpu", results))
    head = S.claims[0]
    assert f"(trained {cifar_tuning.rate(P, cifar_tuning.SG_BEST):.2g})" in head.pairs[0][0]
    assert "unscaled" in S.unscaled.pairs[0][0] and S.unscaled.pairs[0][2] is not None
    transfer = next(c for c in S.claims if c.text.startswith("Weight transfer from stage 2"))
    assert "net of controls" in transfer.pairs[0][1] and "net of controls: transfer 2 0 vs ResNet20" in transfer.note


@pytest.mark.parametrize(
    "text, bad",
    [
        ("a standard deviation of -- points", True),
        ("a standard deviation of \u2013 points", True),  # LaTeX's "--" as pdftotext prints it
        ("so at 0 seeds it decides", True),
        ("and 1 points apart", True),
        ("\\cifartuningDiverged{} run(s) diverged", True),
        ("1.5 points, 11 points, 1 point, 0 of 4 pairs tested, at 10 seeds", False),
        ("detectable: 1.0 points", False),
    ],
)
def test_the_prose_check_fails_a_sentence_that_shows_its_template(text, bad):
    assert bool(paper_check.template_prose(text)) == bad


def test_a_dash_passes_the_prose_check_only_while_runs_are_pending(tmp_path):
    from quadnn_paper.execution.identity import pending_notebooks

    prose = paper_check.template_prose("its error is \u2013 % with SGD, and 1 points apart")
    assert sorted(p.split(":")[0] for p in prose) == [paper_check.EMPTY_VALUE, "one with a plural noun"]
    assert paper_check.pending_dashes(prose, {}) == (prose, None)  # nothing pending: every finding stands
    (tmp_path / "kitti_lapdepth.pending").write_text("pending (1 of 2 runs)\n")
    (tmp_path / "runge.pending").write_text("")  # make's empty file: that notebook finished
    (tmp_path / "imagenet.pending").symlink_to(tmp_path / "kitti_lapdepth.pending")  # not make's
    pending = pending_notebooks(tmp_path)
    assert pending == {"kitti_lapdepth": "pending (1 of 2 runs)"}
    kept, notice = paper_check.pending_dashes(prose, pending)
    assert kept == [p for p in prose if "plural" in p]  # only the dash is excused; the plural still fails
    assert notice.startswith("1 sentence(s) show a dash") and "kitti_lapdepth" in notice


def test_a_table_far_from_its_first_reference_fails_the_layout_check():
    refs = [("tab:near", 3), ("fig:x", 1), ("tab:far", 2), ("tab:far", 9), ("tab:early", 9), ("tab:stack", 3)]
    log = "\n".join(f"quadnn-ref: {label} on page {page}" for label, page in refs)
    placed = [("tab:near", 4), ("tab:far", 6), ("tab:early", 4), ("tab:stack", 7), ("fig:y", 10), ("tab:alone", 9)]
    aux = "".join(f"\\newlabel{{{label}}}{{{{I}}{{{page}}}{{}}{{table.caption.1}}{{}}}}\n" for label, page in placed)
    found = paper_check.table_placement(log, aux)
    # tab:far: first referred to on page 2 (not 9), then pages 3 and 5 of text (4 holds tab:near);
    # tab:early stands before its reference, pages 5 and 8 of text between; tab:stack waits behind
    # the tables of pages 4 and 6, with one page of text between: near enough
    assert [f.split(" stands")[0] for f in found] == ["table tab:far", "table tab:early"], found
    assert "3 pages of text from its first reference (page 2)" in found[0]
    assert paper_check.table_placement(log, aux, limit=3) == []


def test_the_power_sentence_is_computed_from_the_claims_and_never_prints_a_template():
    empty = paired.adjust([paired.pair_claim("A beats B", [("A", {0: 1.0}, "B", {0: 2.0})])])
    text = paired.power_sentence(empty)
    assert text.startswith("No pair of this profile has an interval") and not paper_check.template_prose(text)
    a, b = {s: 5.0 + 0.1 * s for s in range(6)}, {s: 6.0 + 0.05 * s for s in range(6)}
    claims = paired.adjust([paired.pair_claim("A beats B", [("A", a, "B", b)])])
    sd, mde, n = paired.detectable_text(claims)
    text = paired.power_sentence(claims)
    assert f"{sd:.2f} points" in text and f"at {n} seeds" in text and f"{mde:.1f} points" in text
    assert "family's 1 pair," in text and not paper_check.template_prose(text)


def test_each_pair_claim_of_the_comparison_is_a_pair_of_the_claim_it_names():
    """The comparison's claims go into two tables, told apart by whether a claim is one pair of a
    multi-pair claim (``pair_of``, the id of that claim): each such claim's pairs are pairs of the
    claim it names, and no claim of the paper is one."""
    from quadnn_paper.sections import cifar_comparison as C

    P = C.protocol("cpu")
    planned = cs.plan(cs.comparison_rows(), P, width=P["width"])
    errs = {r.key: e for r, e in _fake_errors(planned).items()}
    kw = dict(dataset="fashion_mnist16", moved={})
    pairs = C._pair_claims(C._Claims(errs, cs.comparison_rows(), **kw))
    everything = C._paper_claims(errs, {}, cs.comparison_rows(), **kw)
    assert pairs and all(C.is_pair_claim(c) for c in pairs)
    assert [c.id for c in everything if C.is_pair_claim(c)] == [c.id for c in pairs]
    by_id = {c.id: c for c in everything}
    for c in pairs:
        parent = by_id[c.pair_of]
        assert not C.is_pair_claim(parent)
        assert {(a, b) for a, b, _ in c.pairs} <= {(a, b) for a, b, _ in parent.pairs}, (c.id, c.pair_of)
