"""The verdict on the paper's QResNet20 / ResNet20 epoch ratio, against a plain reading of it:
reproduced exactly when the paper's ratio is at or above the lower quartile of one of our step
ratios; single measurements (an epoch) never decide."""

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from quadnn_paper.analysis import timing as T
from quadnn_paper.sections import efficiency as E

PAPER = T.paper_ratio()
ratios = st.floats(0.5, 5.0, allow_nan=False)


def step_row(model, impl, value, q1, q3, compiled=False):
    return dict(
        model=model, implementation=impl, compiled=compiled, time_ratio=value, time_ratio_q1=q1, time_ratio_q3=q3
    )


@st.composite
def measured(draw):
    rows = []
    for impl, compiled in (("default", False), ("naive", False), ("default", True)):
        if draw(st.booleans()):
            a, b, c = sorted(draw(st.lists(ratios, min_size=3, max_size=3)))
            rows.append(step_row("cifar_qresnet20", impl, b, a, c, compiled))
    epoch = draw(st.one_of(st.none(), ratios))
    return rows, epoch


def epochs_of(ratio):
    if ratio is None:
        return None
    seconds = {"cifar_resnet20": 2.0, "cifar_qresnet20": 2.0 * ratio}
    return SimpleNamespace(
        row=lambda model, compiled: dict(epoch_seconds=seconds[model], machine="a GPU") if not compiled else None
    )


@settings(max_examples=200, deadline=None)  # no deadline: a loaded machine is slow, not wrong
@given(measured())
def test_the_verdict_is_the_plain_reading(case):
    rows, epoch = case
    found = T.paper_ratio_rows(
        [r for r in rows if not r["compiled"]], [r for r in rows if r["compiled"]], None, epochs_of(epoch), "here"
    )
    assert len(found) == len(rows) + (epoch is not None)
    verdict = T.paper_ratio_verdict(found)
    if not rows:
        assert verdict == "not measured"  # an epoch alone has no quartiles
    elif any(r["time_ratio_q1"] <= PAPER for r in rows):
        assert verdict == "reproduced"
    else:
        lowest = min(r["time_ratio"] for r in rows)
        assert verdict.startswith("not reproduced") and f"{lowest:.2f} [" in verdict
    for r in found:
        if r["q1"] is None:
            assert r["against"].endswith("(one measurement)")
        else:
            inside = r["q1"] <= PAPER <= r["q3"]
            assert (r["against"] == "within") == inside
            assert (r["against"] == "ours higher") == (r["q1"] > PAPER)


def test_only_the_quadratic_resnet20_counts():
    other = [step_row("cifar_qresnet56", "default", 1.0, 0.9, 1.1), step_row("cifar_resnet20", "conventional", 1, 1, 1)]
    assert T.paper_ratio_rows(other, [], None, None, "here") == []
    assert E.paper_ratio_table([])[0][0] == "not measured"


def test_the_committed_gpu_rows_give_a_verdict():
    from quadnn_paper.data import gpu_bench

    found = T.paper_ratio_rows([], [], gpu_bench.load(), gpu_bench.load_epochs(), "here")
    assert found and T.paper_ratio_verdict(found) != "not measured"


VERDICTS = ("faster", "slower", "unresolved", "--")  # timing.verdict(default, naive)


@given(st.sampled_from(("naive", "speed")), st.lists(st.sampled_from(VERDICTS), max_size=3))
def test_the_engines_gpu_pick_is_supported_only_when_no_measured_depth_favours_the_other(pick, verdicts):
    """pick_agrees against a plain reading: naive is faster where the default is "slower"."""
    faster = [
        {"slower": "naive", "faster": "speed"}.get(v, "neither") for v in verdicts if v != "--"
    ]  # the faster one per measured depth
    got = T.pick_agrees(pick, verdicts)
    if not faster:
        assert got == "not measured"
    elif any(f not in (pick, "neither") for f in faster):
        assert got == "no"
    elif pick in faster:
        assert got == "yes"
    else:
        assert got == "not shown (unresolved)"


def test_the_engines_gpu_pick_is_what_the_engine_runs_on_a_gpu():
    from quadnn_paper.engine.loop import FASTEST

    assert T.engine_gpu_pick() == FASTEST.get(("cuda", False), "speed")


@settings(max_examples=60, deadline=None)
@given(ratios, st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.sampled_from(sorted(E.PAPER_TIMED.values())))
def test_each_timed_network_is_judged_against_the_papers_own_ratio(value, lo, hi, model):
    """Every other network the paper times: reproduced exactly when the paper's ratio (its epoch over
    the ResNet of its depth) is at or above our lower quartile; not tested where the row is absent."""
    depth, _ = T.model_facts(model)
    paper = float(T.PAPER_EPOCH_SECONDS[model]) / float(T.PAPER_EPOCH_SECONDS[f"cifar_resnet{depth}"])
    q1, q3 = value - lo, value + hi
    verdict = T.timed_verdict([step_row(model, "default", value, q1, q3)], model)
    assert verdict.startswith("reproduced" if paper >= q1 else "not reproduced")
    assert f"the paper's {paper:.2f}" in verdict
    assert T.timed_verdict([step_row(model, "naive", value, q1, q3)], model).startswith("not tested at this profile")
