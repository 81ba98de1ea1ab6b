"""The claim ledger: every claim of the paper has an entry, every entry an answer, every
claim a section computes is in the ledger, and the build refuses a ledger entry without one."""

import csv
import json
import subprocess
import sys

import pytest

from quadnn_paper.common import ledger
from quadnn_paper.engine import Results
from quadnn_paper.sections import cifar_comparison, cifar_tuning, imagenet, vgg_stability

# claims of the paper a referee once found missing from the report, by ledger id: each keeps its entry
ONCE_MISSING = {
    "convergence",  # the appendix's convergence theorems
    "oscillation",  # l1 is not good at stabilising; beta 0.9 and 0.99 remove the oscillation
    "transfer-best",  # transfer from stage 1 gives the best result
    "depth-helps-more",  # ResNet56 beats QResNet20
    "r1202-worse",  # ResNet1202 is worse than the shallower ResNets
    "poly-no-converge",  # normally trained Parabolic-/PolyResNets do not converge
    "poly-no-depth",  # Parabolic-/PolyResNets do not improve with depth
    "imagenet-q-beats-poly",  # on ImageNet the QResNets beat the Poly-/Parabolic networks of their depth
}
_TABLES = {
    cifar_tuning: "claims_cifar_tuning",
    vgg_stability: "claims_vgg_stability",
    cifar_comparison: "claims_cifar_comparison",
}


def _section_claims(profile="cpu"):
    """Every claim each paired section computes, by its claims table (from no results: which claims
    there are does not depend on them)."""
    out = {}
    for mod, table in _TABLES.items():
        S = mod.summary(Results.of(mod, profile, {}))
        out[table] = list(S.claims)
    out["claims_imagenet"] = list(imagenet.claims({}, {}, n_classes=10))
    return out


def test_ids_are_unique_and_the_once_missing_claims_have_entries():
    ids = [e.id for e in ledger.LEDGER]
    assert len(ids) == len(set(ids))
    assert ONCE_MISSING <= set(ids), ONCE_MISSING - set(ids)
    for e in ledger.LEDGER:
        if isinstance(e.source, (ledger.NotTested, ledger.Measured)):
            assert len(e.source.reason) > 20, e.id  # a reason, not a word


@pytest.mark.parametrize("profile", ["smoke", "cpu", "full"])
def test_every_claim_a_section_computes_is_in_the_ledger_and_back(profile):
    computed = _section_claims(profile)
    wanted = {(e.source.table, e.source.id) for e in ledger.LEDGER if isinstance(e.source, ledger.Claim)}
    have = {(t, c.id) for t, claims in computed.items() for c in claims if c.id}
    assert wanted == have, (wanted - have, have - wanted)
    # a claim without an id is a measurement, not a claim of the paper
    unnamed = [c.text for claims in computed.values() for c in claims if not c.id]
    assert all(text.endswith("(no claim in the paper)") for text in unnamed), unnamed


def _fake_paper(tmp_path, computed, verdict="supported"):
    (tmp_path / "tables").mkdir()
    (tmp_path / "variables").mkdir()
    for table, claims in computed.items():  # as the report writes a keyed table (Table.keys)
        with (tmp_path / "tables" / f"{table}.csv").open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["Section", "Claim", "Verdict"])
            w.writerows(["x", c.text, verdict] for c in claims)
        (tmp_path / "tables" / f"{table}.keys.json").write_text(json.dumps([c.id for c in claims]))
    (tmp_path / "variables" / "runge.tex").write_text(
        "\\newcommand{\\rungeOrderMatches}{not decided: the paired intervals of the steps include zero}\n"
    )
    timed = "".join(  # the paper's other timed networks, each against the ResNet of its depth
        f"\\newcommand{{\\efficiencyPaperRatio{w}}}{{not reproduced: ours 1.90 [1.80, 2.00]}}\n"
        for w in ("ParabolicTwenty", "PolyTwenty", "QResFiftySix", "ParabolicFiftySix", "PolyFiftySix")
    )
    (tmp_path / "variables" / "efficiency.tex").write_text(
        "\\newcommand{\\efficiencyPaperRatioVerdict}{not reproduced: our lowest is 1.84 [1.77, 1.86]}\n" + timed
    )
    (tmp_path / "variables" / "expressivity.tex").write_text(
        "\\newcommand{\\expressivityVarArchs}{7}\n\\newcommand{\\expressivityVarPropTwoHolds}{7}\n"
        "\\newcommand{\\expressivityVarLemmaFails}{7}\n\\newcommand{\\expressivityVarKileelFails}{0}\n"
    )
    (tmp_path / "variables" / "cifar_comparison.tex").write_text(
        "\\newcommand{\\cifarcomparisonParamsErratum}{not reproduced: 6 of 6 rows differ}\n"
    )
    return tmp_path


def test_the_ledger_resolves_tallies_and_writes(tmp_path):
    paper = _fake_paper(tmp_path, _section_claims())
    counts = ledger.write(paper)
    n_claims = sum(isinstance(e.source, ledger.Claim) for e in ledger.LEDGER)
    n_variables = sum(isinstance(e.source, ledger.Variable) for e in ledger.LEDGER)
    # every claims-table verdict, the efficiency ratio's and the erratum decide; Runge's ranking does not;
    # of the universal statements checked by cases, the one with counterexamples is refuted (decided)
    # and the two without are measurements
    n_counted = sum(isinstance(e.source, ledger.Counted) for e in ledger.LEDGER)
    assert counts["decided"] == n_claims + n_variables - 1 + 1 and counts["undecided"] == 1
    assert n_counted == 3
    answers = {r["id"]: r["Answer"] for r in csv.DictReader((paper / "tables" / "ledger.csv").open())}
    assert answers["variety-lemma"].startswith("refuted: fails in 7 of 7")
    assert answers["variety-kileel"].startswith("holds in all 7") and answers["variety"].startswith("holds in all 7")
    assert sum(counts.values()) == len(ledger.LEDGER)
    tex = (paper / "variables" / "ledger.tex").read_text()
    assert f"\\newcommand{{\\ledgerAll}}{{{len(ledger.LEDGER)}}}" in tex
    rows = list(csv.DictReader((paper / "tables" / "ledger.csv").open()))
    assert [r["id"] for r in rows] == [e.id for e in ledger.LEDGER]
    assert "\\newcommand{\\ledgerHolmFamilies}{(not built)}" in tex  # no section wrote its family


def test_the_ledger_prints_each_holm_family_and_its_size(tmp_path):
    paper = _fake_paper(tmp_path, _section_claims())
    (paper / "variables" / "cifar_tuning.tex").write_text("\\newcommand{\\cifartuningHolmFamily}{9}\n")
    (paper / "variables" / "vgg_stability.tex").write_text("\\newcommand{\\vggstabilityHolmFamily}{1}\n")
    assert ledger.families(paper) == {"cifar_tuning": 9, "vgg_stability": 1}
    ledger.write(paper)
    tex = (paper / "variables" / "ledger.tex").read_text()
    assert "\\ledgerHolmFamilies}{cifar tuning: 9 pairs; vgg stability: 1 pair}" in tex
    r = subprocess.run(
        [sys.executable, "-m", "quadnn_paper.common.ledger", "--paper", str(paper)], capture_output=True, text=True
    )
    assert r.returncode == 0 and "Holm families" in r.stdout and "cifar tuning: 9 pairs" in r.stdout


def test_a_computed_entry_without_its_verdict_fails_the_build(tmp_path):
    computed = _section_claims()
    computed["claims_cifar_tuning"] = computed["claims_cifar_tuning"][1:]  # a claim lost on the way
    paper = _fake_paper(tmp_path, computed)
    with pytest.raises(ledger.LedgerError, match="sg-beats-conv"):
        ledger.write(paper)
    r = subprocess.run(
        [sys.executable, "-m", "quadnn_paper.common.ledger", "--paper", str(paper)], capture_output=True, text=True
    )
    assert r.returncode == 1 and "sg-beats-conv" in r.stderr and "Traceback" not in r.stderr


def test_help_prints_and_writes_nothing(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "quadnn_paper.common.ledger", "--help"], capture_output=True, text=True, cwd=tmp_path
    )
    assert r.returncode == 0 and "--paper" in r.stdout and not list(tmp_path.iterdir())


def test_the_environment_line_names_every_package_that_changes_numbers():
    from quadnn_paper.execution import overview

    line = overview.environment(".")
    for name in ("torch ", "torchvision ", "timm ", "numpy ", "scipy ", "scikit-learn ", "torch threads", "cores"):
        assert name in line, (name, line)
