"""How a decided claim (:class:`~.paired.Claim`) is tabled: the section's claims table, every pair's
interval and the verdict, and its rows of the report's table of every claim, keyed by the claim's id
(the ledger reads a verdict by id)."""

from __future__ import annotations

import math

from quadnn_paper.analysis import stats
from quadnn_paper.analysis.paired import Claim
from quadnn_paper.common.cells import Cell
from quadnn_paper.common.outputs import Column, Table

CLAIM_PAIRS_SHOWN = 2  # pairs a claims table lists per claim (the verdict uses every pair)


def _ragged(name: str, width: float) -> Column:
    """A column of running text set ``width`` of the page wide (a claims table spans the page)."""
    return Column(name, align=r">{\raggedright\arraybackslash}p{" + f"{width:.2f}" + r"\textwidth}")


CLAIMS_HEADER = [
    _ragged("Claim of the paper", 0.17),
    _ragged("Paper (%)", 0.12),
    _ragged("Ours: paired difference, mean [95% CI] (points), or runs trained", 0.26),
    Column("Seeds", align="r"),
    _ragged("Detect. (points)", 0.06),
    _ragged("Terms moved (%)", 0.05),
    _ragged("Verdict", 0.13),
]


def claim_rows(claims: list[Claim]) -> list[list]:
    """Rows of a claims table (:data:`CLAIMS_HEADER`); the verdict is a :class:`Cell`, flagged when
    the claim is contradicted."""
    return [
        [
            c.text,
            c.paper,
            c.evidence(most=CLAIM_PAIRS_SHOWN),
            c.seeds or "--",
            "--" if not c.intervals else (f"{c.detectable:.1f}" if math.isfinite(c.detectable) else "--"),
            c.moved_text(),
            Cell(c.verdict_text, reproduced=False if c.verdict == stats.CONTRADICTED else None),
        ]
        for c in claims
    ]


SUMMARY_HEADER = ["Section", "Claim", "Paper (%)", "Ours (points)", "Seeds", "Detectable", "Moved (%)", "Verdict"]


def summary_rows(section: str, claims: list[Claim]) -> list[list]:
    """Rows of the report's table of every claim across sections (one line per claim: the pair that
    decides its verdict stands for it, with its labels; how many other pairs there are is said)."""
    out = []
    for c in claims:
        ivs, first = c.intervals, c.deciding()
        others = len(c.pairs) - 1
        if first is None:
            ours = c.note or "--"
        else:
            a, b, iv = first
            # the count in words: a table cell's "+1" can run into the next column's "points" in the text
            more = "one more pair" if others == 1 else f"{others} more pairs"
            ours = f"{a} vs {b}: {iv.text()}" + (f" ({more})" if others else "")
        det = "--" if not ivs or not math.isfinite(c.detectable) else f"{c.detectable:.1f}"
        out.append([section, c.text, c.paper, ours, c.seeds or "--", det, c.moved_text(), c.verdict_text])
    return out


def claims_table(section: str, label: str, claims: list[Claim]) -> Table:
    """The section's rows of the report's table of every claim (``claims_<section>``), each row keyed
    by its claim's id: the ledger reads a verdict by id (:mod:`quadnn_paper.common.ledger`)."""
    return Table(
        f"claims_{section}", SUMMARY_HEADER, summary_rows(label, claims), rows_only=True, keys=[c.id for c in claims]
    )
