"""Protocol tables of the VGG-stability and CIFAR comparison sections: full = the paper's."""
import pytest
import timm

import quadnn  # noqa: F401
from quadnn_paper.sections import _cifar as cs
from quadnn_paper.common.profiles import PROFILES, select


def test_every_profile_present():
    assert set(cs.PROTOCOLS) == set(PROFILES)
    for p in PROFILES:
        assert set(select(cs.PROTOCOLS, p)) == {"vgg", "comparison"}


def test_full_vgg_is_the_papers_protocol():
    full = cs.PROTOCOLS["full"]["vgg"]
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
    full = cs.PROTOCOLS["full"]["comparison"]
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


def test_weight_transfer_needs_a_source():
    row = next(r for r in cs.comparison_rows() if r.method == "wt")
    full = cs.PROTOCOLS["full"]["comparison"]
    with pytest.raises(ValueError, match="conventional run"):
        cs.config_for(row, full, 0)
    planned = cs.plan(cs.comparison_rows(), full)
    cfg = planned[(row, 0)]
    source = planned[(cs.row_for(cs.comparison_rows(), row.source), 0)]
    assert cfg.transfer_from == source and cfg.transfer_stage == 1 and cfg.dependencies() == [source]
    assert cfg.quadratic_decay == "zero"  # the official code's weight decay at full


@pytest.mark.parametrize("profile", ["smoke", "cpu"])
def test_cheap_profiles_use_the_stand_in_and_mark_full_only(profile):
    p = select(cs.PROTOCOLS, profile)
    assert p["vgg"]["recipe"]["dataset"] == p["comparison"]["recipe"]["dataset"] == "digits"
    rows = cs.comparison_rows()
    skipped = [r for r in rows if not cs.runs_at(r, p["comparison"])]
    assert cs.row_for(rows, "cifar_resnet1202") in skipped and cs.row_for(rows, "cifar_qresnet110", "wt") in skipped
    assert cs.row_for(rows, "cifar_resnet20") not in skipped


def test_summaries_and_error_cells():
    fin = lambda e: dict(status="finished", test_error=e, epoch_time=1.0, diverged_reason=None)  # noqa: E731
    div = dict(status="diverged", test_error=None, epoch_time=1.0, diverged_reason="non-finite loss or parameters")
    s = cs.summarise([fin(7.0), fin(9.0)])
    assert s["mean"] == 8.0 and s["std"] == pytest.approx(2 ** 0.5)
    assert cs.error_cell(s) == "8.00 +- 1.41"
    assert cs.error_cell(cs.summarise([div])) == "no converge"
    assert cs.error_cell(cs.summarise([div, fin(5.0)])) == "5.00 (1/2 diverged)"
    assert cs.error_cell(None, run=False) == "full only"


def test_claims_verdicts():
    mk = lambda e: cs.summarise([dict(status="finished", test_error=e, epoch_time=1.0, diverged_reason=None)])  # noqa: E731
    rows = cs.comparison_rows()
    R = lambda model, method="conventional": cs.row_for(rows, model, method)  # noqa: E731
    summary = {R("cifar_resnet20"): mk(10.0), R("cifar_qresnet20", "ri"): mk(9.0),
               R("cifar_qresnet20", "ri+rezero"): mk(11.0), R("cifar_qresnet20", "wt"): mk(8.0)}
    params = {R("cifar_qresnet32", "wt"): 1, R("cifar_resnet110"): 2}
    verdicts = {c: v for c, v, _ in cs.claims(summary, params)}
    assert verdicts["Every QResNet beats the ResNet of its depth"] == "not supported"  # ReZero row loses
    assert verdicts["Weight transfer beats random initialisation (QResNet, ReLinear)"] == "supported"
    assert verdicts["QResNet32 beats ResNet110 with fewer parameters"] == "not tested"
    summary[R("cifar_qresnet20", "ri+rezero")] = mk(9.5)
    verdicts = {c: v for c, v, _ in cs.claims(summary, params)}
    assert verdicts["Every QResNet beats the ResNet of its depth"] == "supported"


@pytest.mark.parametrize("profile", ["smoke", "cpu"])
def test_cheap_rows_exist_and_have_their_transfer_source(profile):
    p = cs.PROTOCOLS[profile]["comparison"]
    by = {r.key: r for r in cs.comparison_rows()}
    assert set(p["rows"]) <= set(by), set(p["rows"]) - set(by)
    for key in p["rows"]:
        if by[key].method == "wt":
            assert cs.row_for(list(by.values()), by[key].source).key in p["rows"]


def test_claims_account_for_the_spread_over_seeds():
    fin = lambda e: dict(status="finished", test_error=e, epoch_time=1.0, diverged_reason=None)  # noqa: E731
    rows = cs.comparison_rows()
    q = cs.row_for(rows, "cifar_qresnet20", "wt")
    c = cs.row_for(rows, "cifar_qresnet20_compact", "wt")
    name = "Compact-QResNet is worse than QResNet (both w.t.)"

    def verdict(qe, ce):
        summary = {q: cs.summarise([fin(e) for e in qe]), c: cs.summarise([fin(e) for e in ce])}
        return {k: v for k, v, _ in cs.claims(summary, {})}[name]

    assert verdict([5.0, 6.0], [5.5, 6.5]) == "within noise"        # 0.5 apart, spread 1
    assert verdict([5.0, 5.2], [7.0, 7.2]) == "supported"
    assert verdict([7.0, 7.2], [5.0, 5.2]) == "not supported"
    assert verdict([5.0], [4.9]) == "not supported"                  # one seed: the order decides


def test_rows_are_keyed_by_what_they_train_not_by_their_labels():
    rows = cs.comparison_rows()
    assert len({r.key for r in rows}) == len(rows)
    with pytest.raises(KeyError, match="cifar_qresnet21"):
        cs.row_for(rows, "cifar_qresnet21", "wt")
    # A claim keeps its verdict when every display label changes.
    from dataclasses import replace

    mk = lambda e: cs.summarise([dict(status="finished", test_error=e, epoch_time=1.0, diverged_reason=None)])  # noqa: E731
    R = lambda model, method="conventional": cs.row_for(rows, model, method)  # noqa: E731
    summary = {R("cifar_qresnet20", "wt"): mk(8.0), R("cifar_qresnet20", "ri"): mk(9.0)}
    before = [v for _, v, _ in cs.claims(summary, {})]
    renamed = {replace(r, label=r.label.upper()): s for r, s in summary.items()}
    assert before[1] == "supported" and [v for _, v, _ in cs.claims(renamed, {})] == before


def test_pending_runs_are_shown_as_pending_not_as_diverged():
    fin = dict(status="finished", test_error=7.0, epoch_time=1.0, diverged_reason=None)
    s = cs.summarise([fin, None, None])
    assert s["pending"] == 2 and cs.error_cell(s) == "pending (2 of 3 runs)"
