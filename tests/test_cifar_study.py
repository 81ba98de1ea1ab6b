"""The CIFAR sections (VGG stability, comparison, tuning): protocols (full = the paper's), the
section interface, paired runs, and claims decided from paired differences."""

import math
from pathlib import Path

import pytest
import timm

import quadnn  # noqa: F401
from quadnn_paper.analysis import claim_tables, errors, paired, stats
from quadnn_paper.common.profiles import PROFILES
from quadnn_paper.engine import Results, RunConfig, run
from quadnn_paper.execution.sections import section_runs
from quadnn_paper.experiments import cifar as cs
from quadnn_paper.sections import cifar_comparison, cifar_tuning, vgg_stability

SECTIONS = (vgg_stability, cifar_comparison, cifar_tuning)


@pytest.mark.parametrize("section", SECTIONS, ids=lambda m: m.NAME)
def test_section_interface(section):
    assert section.__name__.rsplit(".", 1)[1] == section.NAME
    assert set(section.PROTOCOLS) == set(PROFILES)
    p = section.protocol("cpu")
    p["seeds"] = "changed"
    assert section.protocol("cpu")["seeds"] != "changed"  # a copy
    with pytest.raises(ValueError, match="full"):
        section.protocol("cpu", tiny=True)
    planned = section_runs(section.NAME, "smoke")
    assert planned and all(isinstance(c, RunConfig) for c in planned)


def test_full_vgg_is_the_papers_protocol():
    full = vgg_stability.PROTOCOLS["full"]
    r = full["recipe"]
    assert (r["dataset"], r["epochs"], r["batch_size"], r["lr"]) == ("cifar100", 200, 128, 0.1)
    assert full["width"] == 1.0
    rows = cs.vgg_rows()
    square = [row for row in rows if row.model == "cifar_vgg16_square"]
    assert sorted(row.lr for row in square) == [0.01, 0.03, 0.05]
    assert all(row.paper == "no converge" and row.lr_g is None for row in square)
    (q,) = [row for row in rows if row.model == "cifar_qvgg16"]
    assert (q.lr, q.lr_g, q.lr_b, q.paper) == (0.1, 1e-6, 1e-6, "28.33")
    cfg = cs.config_for(q, full, 0)
    assert (cfg.relinear, cfg.lr_g, cfg.lr_b, cfg.dataset, cfg.epochs) == ("sg", 1e-6, 1e-6, "cifar100", 200)


def test_full_comparison_is_the_papers_protocol():
    full = cifar_comparison.PROTOCOLS["full"]
    r = full["recipe"]
    assert (r["dataset"], r["epochs"], r["batch_size"], r["lr"], r["weight_decay"]) == ("cifar10", 200, 128, 0.1, 1e-4)
    # stages 1-100, 101-150, 151-200
    assert [round(m * r["epochs"]) for m in r["milestones"]] == [100, 150] and r["lr_decay"] == 0.1
    assert cs.LR_G == {20: 1e-4, 32: 1e-5, 56: 1e-5, 110: 1e-5}
    assert cs.LR_G_REZERO == {20: 1e-5, 32: 1e-4, 56: 1e-4, 110: 1e-6}
    assert cs.LR_B_COMPACT == {20: 1e-4, 32: 1e-5, 56: 1e-5}
    rows = cs.comparison_rows()
    assert all(cs.runs_at(row, full) for row in rows)  # nothing is "full only" at full
    assert len([r for r in rows if r.table == "main"]) == 5 + 3 + 3 + 12
    by = {row.label: row for row in rows}
    assert by["QResNet110 (w.t., ReLinear)"].paper == "5.44" and by["ResNet1202"].paper == "7.93"
    rz = by["QResNet110 (r.i., ReLinear+ReZero)"]
    cfg = cs.config_for(rz, full, 0)
    assert cfg.rezero and cfg.lr_g == cfg.lr_b == 1e-6 and cfg.relinear == "sg"
    for row in rows:  # every row names a registered model
        assert timm.is_model(row.model), row.model


def test_resnet110_warms_up_as_he_et_al_and_nothing_else_does():
    # He et al. 2016, section 4.2: ResNet110 (and 1202) at a tenth of the rate for about 400
    # iterations (one CIFAR-10 epoch at batch 128), then the schedule.
    from quadnn_paper.engine.loop import lr_factor

    warm = {}
    for profile in ("cpu", "full"):
        for cfg in section_runs("cifar_comparison", profile):
            warm.setdefault((profile, cfg.model), set()).add(cfg.warmup_epochs)
    assert warm[("full", "cifar_resnet110")] == warm[("full", "cifar_resnet1202")] == {1}
    assert warm[("cpu", "cifar_resnet110")] == {1}  # the stand-in's epoch: 79 iterations of 64 images
    assert all(w == {0} for (_, model), w in warm.items() if model not in ("cifar_resnet110", "cifar_resnet1202"))
    cfg = RunConfig(epochs=10, milestones=(0.5,), warmup_epochs=2)
    assert [lr_factor(cfg, e, 0, 100) for e in (0, 1, 2, 5)] == [0.1, 0.1, 1.0, 0.1]
    # a field added after runs were cached: without a warm-up, every stored run keeps its id
    assert "warmup_epochs" not in RunConfig().key() and "warmup_epochs" in cfg.key()
    with pytest.raises(ValueError, match="warmup_epochs must be a non-negative integer"):
        RunConfig(warmup_epochs=-1)


def test_weight_transfer_needs_a_source():
    row = next(r for r in cs.comparison_rows() if r.method == "wt")
    full = cifar_comparison.PROTOCOLS["full"]
    with pytest.raises(ValueError, match="conventional run"):
        cs.config_for(row, full, 0)
    planned = cs.plan(cs.comparison_rows(), full)
    cfg = planned[(row, 0)]
    source = planned[(cs.row_for(cs.comparison_rows(), row.source), 0)]
    assert cfg.transfer_from == source and cfg.transfer_stage == 1 and cfg.dependencies() == [source]
    assert cfg.quadratic_decay == "zero"  # the official code's weight decay at full


@pytest.mark.parametrize("profile, data", [("smoke", "digits"), ("cpu", "fashion_mnist16")])
def test_cheap_profiles_use_the_stand_in_and_mark_full_only(profile, data):
    p = cifar_comparison.protocol(profile)
    assert p["recipe"]["dataset"] == cifar_tuning.protocol(profile)["dataset"] == data
    assert vgg_stability.protocol(profile)["recipe"]["dataset"] == data
    rows = cs.comparison_rows()
    skipped = [r for r in rows if not cs.runs_at(r, p)]
    assert cs.row_for(rows, "cifar_resnet1202") in skipped and cs.row_for(rows, "cifar_qresnet110", "wt") in skipped
    assert cs.row_for(rows, "cifar_resnet20") not in skipped


def test_summaries_and_error_cells():
    fin = lambda e: dict(status="finished", test_error=e, epoch_time=1.0, diverged_reason=None)  # noqa: E731
    div = dict(status="diverged", test_error=None, epoch_time=1.0, diverged_reason="non-finite loss or parameters")
    s = errors.summarise([fin(7.0), fin(9.0)])
    assert s.mean == 8.0 and s.std == pytest.approx(2**0.5)
    assert errors.error_cell(s) == "8.00 +- 1.41"
    assert errors.error_cell(errors.summarise([div])) == "no converge"
    assert errors.error_cell(errors.summarise([div, fin(5.0)])) == "5.00 (1/2 untrained)"
    # a run that finished near chance did not train either (the one definition, trained_limit)
    near = errors.summarise([fin(88.0), fin(5.0)], paired.trained_limit("digits"))
    assert (near.mean, near.diverged) == (5.0, 1)
    assert errors.error_cell(None, run=False) == "full only"


@pytest.mark.parametrize("profile", ["smoke", "cpu"])
def test_cheap_rows_exist_and_have_their_transfer_source(profile):
    p = cifar_comparison.PROTOCOLS[profile]
    by = {r.key: r for r in cs.comparison_rows()}
    assert set(p["rows"]) <= set(by), set(p["rows"]) - set(by)
    for key in p["rows"]:
        if by[key].method == "wt":
            assert cs.row_for(list(by.values()), by[key].source).key in p["rows"]


def test_pending_runs_are_shown_as_pending_not_as_diverged():
    fin = dict(status="finished", test_error=7.0, epoch_time=1.0, diverged_reason=None)
    s = errors.summarise([fin, None, None])
    assert s.pending == 2 and errors.error_cell(s) == "pending (2 of 3 runs)"
    assert errors.error_cell(errors.summarise([None])) == "pending (1 of 1 run)"


def test_a_pending_verdict_counts_the_planned_runs_once():
    """The VGG16 verdict while runs are pending says how many of the runs planned are missing: the
    total is the plan's, whatever is pending."""
    results = Results.of(vgg_stability, "smoke", {})
    n = len(results.runs())
    S = vgg_stability.summary(results)
    assert S.runs == n and S.pending == n
    V = vgg_stability.variables(S, dict.fromkeys(vgg_stability.rows(), 1))
    assert V["Verdict"] == f"pending ({n} of {n} runs)" and V["QvggComparison"] == "pending"


# -- claims from paired differences ---------------------------------------------------------------
def _errs(*values):
    return {s: v for s, v in enumerate(values)}


def test_interval_and_verdicts():
    iv = stats.interval([1.0, 2.0, 3.0])
    # mean 2, sd 1, t_{0.975, 2} = 4.303: half-width 4.303 / sqrt(3)
    assert iv.mean == 2.0 and iv.sd == pytest.approx(1.0) and iv.hi - iv.mean == pytest.approx(4.3027 / 3**0.5, 1e-4)
    assert stats.verdict(iv).startswith("undecided (detectable: ")
    assert stats.verdict(stats.interval([1.0, 1.2, 0.9, 1.1])) == "supported"
    assert stats.verdict(stats.interval([-1.0, -1.2, -0.9, -1.1])) == "contradicted"
    assert stats.verdict(stats.interval([5.0])).startswith("undecided")  # one pair: no interval
    assert stats.verdict(None) == stats.NOT_TESTED
    assert stats.combine(["supported", stats.NOT_TESTED]) == "not tested at this profile (1 of 2 pairs tested)"
    assert stats.combine(["supported", "contradicted"]) == "refuted (1 of 2 pairs contradicted)"
    assert stats.combine(["supported", "undecided (detectable: 2.0 points)"]).startswith("undecided")
    assert stats.paired_differences({0: 1.0, 1: 2.0, 2: None}, {0: 3.0, 1: 2.5, 2: 4.0}) == [2.0, 0.5]
    # more seeds, smaller detectable difference; zero spread detects anything
    assert stats.detectable(1.0, 10) < stats.detectable(1.0, 3) and stats.detectable(0.0, 5) == 0.0
    assert math.isinf(stats.detectable(1.0, 1))
    with pytest.raises(ValueError, match="level"):
        stats.interval([1.0, 2.0], level=95)


def test_pairing_removes_what_the_pair_shares():
    # The same per-seed offsets in both rows (initialisation, data order) cancel in the pairs: a
    # 0.5-point difference is decided although each row spreads over 4 points across seeds.
    base = [10.0, 14.0, 11.0, 13.0, 12.0]
    c = paired.pair_claim(
        "A beats B", [("A", _errs(*base), "B", _errs(*[b + 0.5 + 0.01 * i for i, b in enumerate(base)]))]
    )
    assert c.verdict == "supported" and c.pairs[0][2].lo > 0
    assert "A vs B: +0.52 [" in c.evidence()


def test_comparison_claims_from_paired_errors():
    rows = cs.comparison_rows()
    R = lambda model, method="conventional": cs.row_for(rows, model, method)  # noqa: E731
    errs = {
        R("cifar_resnet20"): _errs(10.0, 11.0, 12.0),
        R("cifar_qresnet20", "ri"): _errs(9.0, 10.1, 10.9),
        R("cifar_qresnet20", "ri+rezero"): _errs(11.0, 12.1, 13.0),
        R("cifar_qresnet20", "wt"): _errs(8.0, 9.0, 10.1),
        R("cifar_qresnet20", "wt0"): _errs(9.9, 10.9, 11.8),  # the w.t. row's frozen-terms control
    }
    params = {R("cifar_qresnet32", "wt"): 1, R("cifar_resnet110"): 2}
    verdicts = {c.text: c for c in cifar_comparison.claims(errs, params)}
    every = verdicts["QResNet20 (r.i., with and without ReZero) beats ResNet20"]
    assert every.verdict == "refuted (1 of 2 pairs contradicted)"  # the ReZero row loses at every seed
    wt = verdicts["Weight transfer beats random initialisation (QResNet, ReLinear)"]
    assert wt.verdict == "not tested at this profile (1 of 4 pairs tested)"  # depths 32-110 are not run here
    wt20 = verdicts["At depth 20: weight transfer beats random initialisation (QResNet20, ReLinear)"]
    # measured net of the controls at the two budgets: (ri - wt) - (ResNet20 - wt at gamma 0)
    assert wt20.pairs[0][1] == "QResNet20 (r.i., ReLinear), net of controls"
    assert "net of controls: QResNet20 (w.t., gamma 0) vs ResNet20" in wt20.note  # the controls, named once
    assert wt20.pairs[0][2].mean == pytest.approx(((1.0 - 0.1) + (1.1 - 0.1) + (0.8 - 0.2)) / 3)
    vs = verdicts["QResNet20 (w.t.) beats ResNet20"]
    assert vs.pairs[0][1] == "QResNet20 (w.t., gamma 0)"  # against its same-budget control
    assert verdicts["QResNet32 beats ResNet110 with fewer parameters"].verdict == stats.NOT_TESTED
    errs[R("cifar_qresnet20", "ri+rezero")] = _errs(9.5, 10.4, 11.6)
    assert {c.text: c for c in cifar_comparison.claims(errs, params)}[every.text].verdict == "supported"
    # Labels are for display: the verdicts follow what the rows train.
    from dataclasses import replace

    renamed = {replace(r, label=r.label.upper()): e for r, e in errs.items()}
    assert [c.verdict for c in cifar_comparison.claims(renamed, params)] == [
        c.verdict for c in cifar_comparison.claims(errs, params)
    ]


def test_rows_are_keyed_by_what_they_train_not_by_their_labels():
    rows = cs.comparison_rows()
    assert len({r.key for r in rows}) == len(rows)
    with pytest.raises(KeyError, match="cifar_qresnet21"):
        cs.row_for(rows, "cifar_qresnet21", "wt")


def test_a_diverged_run_counts_at_chance_in_a_pair():
    div = dict(status="diverged", test_error=None)
    assert errors.seed_errors(div, "digits") == 90.0 and errors.seed_errors(div, "cifar100") == 99.0
    assert errors.seed_errors(None, "digits") is None


# -- the paired design in the engine ----------------------------------------------------------------
def test_quadratic_rows_start_from_their_conventional_twin():
    P = cifar_comparison.protocol("cpu")
    planned = cs.plan(cs.comparison_rows(), P, width=P["width"])
    by = {(r.model, r.method, s): c for (r, s), c in planned.items()}
    q, conv = by[("cifar_qresnet20", "ri", 1)], by[("cifar_resnet20", "conventional", 1)]
    assert q.init_twin == "cifar_resnet20" and conv.init_twin is None
    assert (q.seed, q.split_seed, q.width) == (conv.seed, conv.split_seed, conv.width) == (1, 1, cs.STANDIN_WIDTH)
    assert by[("cifar_qresnet20", "wt", 1)].transfer_from == conv  # the pair shares the source
    tuning = cifar_tuning.run_plan("cpu")
    assert tuning[("sg", 1e-4, 3)].init_twin == "cifar_resnet20" and tuning[("sg", 1e-4, 3)].seed == 3
    assert tuning[("transfer1", 1e-4, 3)].transfer_from == tuning[("conventional", 0.0, 3)]
    # Unpaired runs keep their hashes: the field is not part of the key until it is set.
    assert "init_twin" not in RunConfig().key() and "init_twin" in q.key()
    with pytest.raises(ValueError, match="init_twin"):
        RunConfig(init_twin="cifar_resnet20", transfer_from=RunConfig())


def test_paired_runs_share_initial_weights_and_data_order(tmp_path):
    # One step per epoch: the first epoch's training loss is the loss of the first step, taken
    # before any update, so it is equal only if the pair shares its initial (linear) weights and
    # its first batch (quadratic terms at their reference). The unpaired run shows it could fail.
    base = dict(
        dataset="digits",
        width=0.125,
        epochs=2,
        train_limit=32,
        batch_size=32,
        progress=False,
        threads=1,
        model_kwargs={"zero_init_last": False},
        seed=3,
        split_seed=3,
    )
    conv = run(RunConfig(model="cifar_resnet20", relinear="none", **base), tmp_path)
    pair = run(
        RunConfig(model="cifar_qresnet20", relinear="sg", lr_g=0.0, init_twin="cifar_resnet20", **base), tmp_path
    )
    alone = run(RunConfig(model="cifar_qresnet20", relinear="sg", lr_g=0.0, **base), tmp_path)
    first = [r["history"][0]["train_loss"] for r in (conv, pair, alone)]
    assert first[1] == pytest.approx(first[0], rel=1e-6, abs=0)
    assert abs(first[2] - first[0]) > 1e-3
    # the second epoch's batch is also shared (gamma 0: still a conventional network, up to rounding)
    assert pair["history"][1]["train_loss"] == pytest.approx(conv["history"][1]["train_loss"], rel=1e-4)


@pytest.mark.slow
def test_gamma_zero_follows_the_conventional_trajectory_in_float64():
    r = cifar_tuning.gamma_zero_check(steps=20, version=1)  # as the section computes it
    assert (r["steps"], r["momentum"], r["lr"]) == (20, 0.9, 0.1) and r["weight_decay"] > 0
    assert r["logits"] < 1e-12 * max(1.0, r["scale"]) and r["params"] < 1e-12
    assert r["scale"] > 0.1  # the network is not trivially constant


def test_a_claims_row_lists_at_most_two_pairs_and_says_how_many_more():
    pairs = [(f"A{i}", {0: 1.0, 1: 2.0}, f"B{i}", {0: 2.0, 1: 3.5}) for i in range(5)]
    c = paired.pair_claim("every A beats its B", pairs)
    (row,) = claim_tables.claim_rows([c])
    assert "A1 vs B1" in row[2] and "A2 vs B2" not in row[2] and "+3 more pairs" in row[2]
    assert c.evidence().count(" vs ") == 5  # the full evidence keeps every pair


def test_pairs_not_run_are_counted_not_listed():
    run = {0: 1.0, 1: 2.0}
    c = paired.pair_claim(
        "every A beats B", [("A", run, "B", {0: 2.0, 1: 3.5}), ("C", {}, "B", run), ("D", {}, "B", run)]
    )
    assert c.evidence() == "A vs B: +1.25 [-1.93, 4.43]; 2 pairs not run at this profile"
    assert c.verdict == "not tested at this profile (1 of 3 pairs tested)"


def test_the_standin_measurement_tool_builds_its_pair_as_the_cpu_profile_would():
    """tools/standin_protocol.py: each candidate's ResNet20 / QResNet20 pair through the CIFAR study's
    own ``config_for``, the quadratic terms at the paper's rate times the rule's factor for it."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "tools" / "standin_protocol.py"
    spec = importlib.util.spec_from_file_location("standin_protocol", path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    for dataset, images, epochs, every in tool.CANDIDATES:
        conv, quad = tool._configs(dataset, images, epochs, every, seed=3)
        recipe = dict(dataset=dataset, batch_size=tool.BATCH, epochs=epochs, train_limit=images)
        assert conv.relinear == "none" and quad.init_twin == "cifar_resnet20" and quad.seed == conv.seed == 3
        assert quad.lr_g == pytest.approx(cs.LR_G[20] * cs.gamma_scale(recipe))
