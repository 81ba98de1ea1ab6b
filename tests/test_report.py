"""Report writers and the result cache."""

import csv
import json

import pytest

from quadnn_paper.common.profiles import PROFILES, select
from quadnn_paper.engine import cached
from quadnn_paper.engine import run_id as config_hash
from quadnn_paper.report import Cell, Report, fmt


def test_table_writes_csv_and_tex(tmp_path):
    rep = Report(tmp_path, "demo", "smoke", "digits")
    rep.table("t", ["model", "error (%)", "params"], [["ResNet_20", 8.25, 272474], ["x", float("nan"), None]])
    rep.commit()
    rows = list(csv.reader(open(tmp_path / "tables" / "t.csv")))
    assert rows[1] == ["ResNet_20", "8.25", "272474"]
    tex = (tmp_path / "tables" / "t.tex").read_text()
    assert r"ResNet\_20 & 8.25 & 272{,}474 \\" in tex and r"x & -- & -- \\" in tex
    with pytest.raises(ValueError, match="cells"):
        rep.table("bad", ["a", "b"], [[1]])


@pytest.mark.parametrize(
    "keys, ok",
    [(["a", "", "b"], True), (["a", "", "a"], False), (["a", "b"], False), (["", "", ""], True)],
)
def test_a_keyed_table_names_each_row_by_id_beside_its_csv(tmp_path, keys, ok):
    """A keyed table's ids are a list beside the CSV, one per row in its order (a reader finds a row
    by id, not by its text); ids that are not one per row, or name two rows, are refused."""
    rep = Report(tmp_path, "demo", "smoke", "digits")
    rows = [["first", 1.0], ["unnamed", 2.0], ["third", 3.0]]
    if not ok:
        with pytest.raises(ValueError, match="keys"):
            rep.table("t", ["claim", "value"], rows, keys=keys)
        return
    rep.table("t", ["claim", "value"], rows, keys=keys)
    rep.commit()
    ids = json.loads((tmp_path / "tables" / "t.keys.json").read_text())
    csv_rows = list(csv.DictReader(open(tmp_path / "tables" / "t.csv")))
    assert ids == keys and len(ids) == len(csv_rows)
    assert {k: r["claim"] for k, r in zip(ids, csv_rows) if k} == {k: r[0] for k, r in zip(keys, rows) if k}


def test_variables_are_macros_named_by_section(tmp_path):
    rep = Report(tmp_path, "demo", "cpu", "digits")
    rep.variable("BestError", 0.0123456)
    rep.commit()
    text = (tmp_path / "variables" / "demo.tex").read_text()
    assert r"\newcommand{\demoBestError}{0.0123}" in text
    assert r"\newcommand{\demoProfile}{cpu}" in text
    with pytest.raises(ValueError, match="letters only"):
        rep.variable("best_error", 1)


def test_cells_are_data_in_the_csv_and_markup_in_the_tex(tmp_path):
    """CSV: bare values, spreads/notes/flags in companion columns; .tex: the rendering."""
    rep = Report(tmp_path, "demo", "smoke", "digits")
    rows = [
        [Cell("sg", tex=r"ReLinear$^{sg}$"), Cell(7.214, 0.3, decimals=2, reproduced=False), Cell(10.43, paper=True)],
        ["plain", Cell(8.0, decimals=2, note="(1/3 diverged)"), None],
    ]
    rep.table("c", ["method", "error", "paper"], rows)
    with pytest.raises(TypeError, match="Cell"):
        rep.table("old", ["a"], [[("tex", r"$x$")]])
    rep.commit()
    rows = list(csv.reader(open(tmp_path / "tables" / "c.csv")))
    assert rows == [
        ["method", "error", "error sd", "error note", "error reproduced", "paper"],
        ["sg", "7.214", "0.3", "", "no", "10.43"],
        ["plain", "8.0", "", "(1/3 diverged)", "", ""],
    ]
    assert not any(ch in open(tmp_path / "tables" / "c.csv").read() for ch in "\\$")
    tex = (tmp_path / "tables" / "c.tex").read_text()
    assert r"ReLinear$^{sg}$ & \notreproduced{7.21 $\pm$ 0.30} & \paperval{10.43} \\" in tex
    assert r"plain & 8.00 (1/3 diverged) & -- \\" in tex


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
