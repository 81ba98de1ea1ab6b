"""Report writers and the result cache."""
import csv
import json

import pytest

from quadnn_paper.engine import cached
from quadnn_paper.engine import run_id as config_hash
from quadnn_paper.profiles import PROFILES, select
from quadnn_paper.report import Report, fmt


def test_table_writes_csv_and_tex(tmp_path):
    rep = Report(tmp_path, "demo", "smoke", "digits")
    rep.table("t", ["model", "error (%)", "params"], [["ResNet_20", 8.25, 272474], ["x", float("nan"), None]])
    rows = list(csv.reader(open(tmp_path / "tables" / "t.csv")))
    assert rows[1] == ["ResNet_20", "8.25", "272474"]
    tex = (tmp_path / "tables" / "t.tex").read_text()
    assert r"ResNet\_20 & 8.25 & 272{,}474 \\" in tex and r"x & -- & -- \\" in tex
    with pytest.raises(ValueError, match="cells"):
        rep.table("bad", ["a", "b"], [[1]])


def test_variables_are_macros_named_by_section(tmp_path):
    rep = Report(tmp_path, "demo", "cpu", "digits")
    rep.variable("BestError", 0.0123456)
    text = (tmp_path / "variables" / "demo.tex").read_text()
    assert r"\newcommand{\demoBestError}{0.0123}" in text
    assert r"\newcommand{\demoProfile}{cpu}" in text
    with pytest.raises(ValueError, match="letters only"):
        rep.variable("best_error", 1)


def test_fmt_scientific_and_bad_profile(tmp_path):
    assert fmt(1.5e-7) == r"$1.5\times10^{-7}$"
    with pytest.raises(ValueError, match="smoke"):
        Report(tmp_path, "demo", "gpu", "digits")
    with pytest.raises(ValueError, match="one of"):
        select({p: p for p in PROFILES}, "fast")


def test_cache_computes_once(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"rmse": 0.5}

    assert cached(tmp_path, "x", {"a": 1}, compute) == {"rmse": 0.5}
    assert cached(tmp_path, "x", {"a": 1}, compute) == {"rmse": 0.5}
    assert len(calls) == 1
    cached(tmp_path, "x", {"a": 2}, compute)
    assert len(calls) == 2
    stored = json.loads((tmp_path / "x" / f"{config_hash({'a': 1})}.json").read_text())
    assert stored["config"] == {"a": 1}
    assert config_hash({"a": 1, "b": 2}) == config_hash({"b": 2, "a": 1})
