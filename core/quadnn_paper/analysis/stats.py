"""Paired differences across seeds, their confidence intervals, and the verdict they give a claim.

A claim of the paper says that network A beats network B. The two are trained as a pair at every
seed (same initial linear weights, data order, augmentation draws and evaluation set), so the
per-seed difference ``err(B) - err(A)`` removes what the pair shares. Its mean over seeds gets a
Student-t interval (:func:`interval`); the verdict (:func:`verdict`) reads the interval against
zero: *supported* when it lies on the paper's side (A better), *contradicted* when it lies on the
other, *undecided* when it spans zero. One pair per seed is the unit: seeds are the independent
replicates, test images are not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats as _st

__all__ = ["LEVEL", "VERDICTS", "Interval", "paired_differences", "interval", "verdict", "detectable", "combine"]

LEVEL = 0.95  # two-sided confidence level of every interval in the report
VERDICTS = ("supported", "contradicted", "undecided", "not tested")


@dataclass(frozen=True)
class Interval:
    """Mean of ``n`` paired differences with its two-sided ``level`` t-interval [lo, hi]
    (lo = hi = nan below two pairs) and their sample standard deviation."""

    mean: float
    lo: float
    hi: float
    sd: float
    n: int
    level: float = LEVEL

    def text(self, decimals: int = 2) -> str:
        """ "+1.23 [0.40, 2.06]" (or "+1.23, 1 pair" when there is no interval)."""
        if self.n < 2:
            return f"{self.mean:+.{decimals}f}, {self.n} pair"
        return f"{self.mean:+.{decimals}f} [{self.lo:.{decimals}f}, {self.hi:.{decimals}f}]"


def paired_differences(better: dict, worse: dict) -> list[float]:
    """``worse[s] - better[s]`` for every seed ``s`` both have a value for (None: not finished).

    Positive means the network claimed better has the lower error at that seed.
    """
    return [
        worse[s] - better[s] for s in sorted(set(better) & set(worse)) if better[s] is not None and worse[s] is not None
    ]


def interval(diffs: list[float], level: float = LEVEL) -> Interval:
    """Mean and two-sided Student-t interval of ``diffs`` (one difference per seed)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    n = len(diffs)
    if n == 0:
        raise ValueError("interval of no differences: no pair finished")
    mean = sum(diffs) / n
    if n < 2:
        return Interval(mean, math.nan, math.nan, math.nan, n, level)
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    half = _st.t.ppf(0.5 + level / 2, n - 1) * sd / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, sd, n, level)


def verdict(iv: Interval | None) -> str:
    """*supported* (interval above 0: the paper's side), *contradicted* (below 0), *undecided*
    (spans 0, or fewer than two pairs), *not tested* (``None``: no pair ran)."""
    if iv is None:
        return "not tested"
    if iv.n < 2:
        return "undecided"
    if iv.lo > 0:
        return "supported"
    if iv.hi < 0:
        return "contradicted"
    return "undecided"


POWER = 0.8  # the probability with which :func:`detectable`'s difference is found


def detectable(sd: float, n: int, level: float = LEVEL, power: float = POWER) -> float:
    """The smallest true paired difference decided (interval clear of zero) with probability
    ``power`` at ``n`` seeds when the differences spread with standard deviation ``sd``:
    ``(t_{1-a/2} + t_{power}) sd / sqrt(n)``, t with n-1 degrees of freedom."""
    if n < 2 or not math.isfinite(sd):
        return math.inf
    return (_st.t.ppf(0.5 + level / 2, n - 1) + _st.t.ppf(power, n - 1)) * sd / math.sqrt(n)


def combine(verdicts: list[str]) -> str:
    """One verdict for a claim made of several pairs ("every QResNet beats ..."): contradicted if
    any pair is, supported if every pair that ran is, undecided otherwise; not tested if none ran."""
    ran = [v for v in verdicts if v != "not tested"]
    if not ran:
        return "not tested"
    if "contradicted" in ran:
        return "contradicted"
    if all(v == "supported" for v in ran):
        return "supported"
    return "undecided"
