"""Paired differences across seeds, their confidence intervals, and the verdict they give a claim.

A claim of the paper says that network A beats network B. The two are trained as a pair at every
seed (same initial linear weights, data order, augmentation draws and evaluation set), so the
per-seed difference ``err(B) - err(A)`` removes what the pair shares. Its mean over seeds gets a
Student-t interval (:func:`interval`). :func:`verdict` is the one place that turns an interval
into words, for every section:

- *supported* / *contradicted*: the interval lies above / below zero and the pair's p-value,
  Holm-adjusted over the section's family of pairs (:func:`holm`), is below ``1 - LEVEL``;
- *no difference larger than M points*: two one-sided t-tests (TOST) at the claim's margin M
  (half the effect the paper claims, :func:`margin_of`) both reject, their larger p-value
  Holm-adjusted over the same family; without a margin (the paper states no effect) there is
  no equivalence verdict;
- *undecided (detectable: X points)*: anything else, X being :func:`detectable` at the pair's
  seeds and spread, at the level the family's Holm adjustment asks of its first test;
- *not tested at this profile*: no pair ran.

A claim of several pairs (:func:`combine`) is supported, contradicted or equivalent only when
every one of its pairs was tested and says so; a single contradicted pair of a claim about every
pair is a counterexample (*refuted*); pairs not run make it *not tested at this profile (k of n
pairs run)*.

Where an arm has runs that did not train (a network that diverged, or ended near chance), its
errors are not a measurement of how well it trains but of whether it does: such a pair is decided
on the counts of runs that trained (:class:`Counts`, Fisher's exact test on the 2 x 2 table, the
same Holm adjustment), its words *supported* / *contradicted* / *undecided (trained a/n vs b/m)*.
A pair whose quadratic network did not depart from its linear twin (:class:`Unmoved`) tests
nothing quadratic: *not tested at this scale*.

One pair per seed is the unit: seeds are the independent replicates, test images are not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats as _st

__all__ = [
    "LEVEL",
    "POWER",
    "REFUTED",
    "SUPPORTED",
    "CONTRADICTED",
    "EQUIVALENT",
    "NOT_TESTED",
    "NOT_TESTED_SCALE",
    "Interval",
    "Counts",
    "Unmoved",
    "counts",
    "paired_differences",
    "interval",
    "holm",
    "verdict",
    "detectable",
    "combine",
    "decided",
    "equivalent",
    "margin_of",
    "holm_level",
]

LEVEL = 0.95  # two-sided confidence level of every interval in the report
POWER = 0.8  # the probability with which :func:`detectable`'s difference is found
SUPPORTED, CONTRADICTED, NOT_TESTED = "supported", "contradicted", "not tested at this profile"
REFUTED = "refuted"  # a universal claim with a measured counterexample
NOT_TESTED_SCALE = "not tested at this scale"
EQUIVALENT = "no difference larger than"  # the words every equivalence verdict starts with
MARGIN_SHARE = 0.5  # an equivalence margin is this share of the effect the paper claims


def equivalent(margin: float) -> str:
    """The equivalence verdict at ``margin`` points: "no difference larger than 0.39 points (TOST)"."""
    return f"{EQUIVALENT} {margin:.2f} points (TOST)"


def margin_of(paper_effect: float | None) -> float | None:
    """The equivalence margin of a claim whose paper states an effect of ``paper_effect`` points:
    :data:`MARGIN_SHARE` of it, so that "no difference larger than the margin" excludes the effect
    the paper claims; None where the paper states none (no equivalence verdict then)."""
    if paper_effect is None or not math.isfinite(paper_effect) or paper_effect == 0:
        return None
    return MARGIN_SHARE * abs(paper_effect)


def holm_level(family: int, level: float = LEVEL) -> float:
    """The confidence level Holm's method asks of the first (smallest-p) test of a ``family`` of
    hypotheses: ``1 - (1 - level) / family``; the detectable differences are stated at it."""
    return 1 - (1 - level) / max(1, family)


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

    @property
    def p(self) -> float:
        """Two-sided p-value of the paired t-test of mean 0 (nan below two pairs)."""
        if self.n < 2 or not math.isfinite(self.sd):
            return math.nan
        if self.sd == 0:
            return 1.0 if self.mean == 0 else 0.0
        t = self.mean / (self.sd / math.sqrt(self.n))
        return float(2 * _st.t.sf(abs(t), self.n - 1))

    def p_equivalence(self, margin: float | None) -> float:
        """The p-value of two one-sided t-tests (Schuirmann's TOST) of ``|mean| >= margin``: the larger
        of the two one-sided p-values (nan below two pairs or without a margin)."""
        if margin is None or self.n < 2 or not math.isfinite(self.sd):
            return math.nan
        if self.sd == 0:
            return 0.0 if abs(self.mean) < margin else 1.0
        se = self.sd / math.sqrt(self.n)
        lower = _st.t.sf((self.mean + margin) / se, self.n - 1)  # H0: mean <= -margin
        upper = _st.t.cdf((self.mean - margin) / se, self.n - 1)  # H0: mean >= +margin
        return float(max(lower, upper))


@dataclass(frozen=True)
class Counts:
    """How many runs of each arm trained, of those both arms ran (one per seed): ``trained_a`` of
    ``n`` for the arm claimed better, ``trained_b`` of ``n`` for the other, with the mean error of the
    runs that trained (nan: none did). ``p``: two-sided Fisher exact test of equal rates."""

    trained_a: int
    trained_b: int
    n: int
    error_a: float = math.nan
    error_b: float = math.nan

    @property
    def p(self) -> float:
        if self.n == 0:
            return math.nan
        table = [[self.trained_a, self.n - self.trained_a], [self.trained_b, self.n - self.trained_b]]
        return float(_st.fisher_exact(table).pvalue)

    @property
    def sign(self) -> int:
        """+1 where the arm claimed better trained more often, -1 where less, 0 where as often."""
        return (self.trained_a > self.trained_b) - (self.trained_a < self.trained_b)

    def text(self, decimals: int = 2) -> str:
        """ "trained 5/5 vs 0/5 (p 0.0079; errors 3.10 vs --)": Fisher's p and the errors of the runs
        that trained (left out where none did)."""

        def err(e):
            return "--" if math.isnan(e) else f"{e:.{decimals}f}"

        text = f"trained {self.trained_a}/{self.n} vs {self.trained_b}/{self.n} (p {self.p:.2g}"
        if self.trained_a or self.trained_b:  # the errors of the runs that trained, where any did
            text += f"; errors {err(self.error_a)} vs {err(self.error_b)}"
        return text + ")"


@dataclass(frozen=True)
class Unmoved:
    """A pair with a quadratic arm whose terms did not depart from its linear twin: ``moved`` maps
    each such arm's label to the share of test predictions (%) its terms changed."""

    moved: tuple  # ((label, percent), ...)
    threshold: float

    p = math.nan
    n = 0

    def text(self, decimals: int = 1) -> str:
        """ "terms did not move (0.4 %)": the share of test predictions each such arm's terms change
        (the pair's labels stand beside it in the tables)."""
        return "terms did not move (" + ", ".join(f"{m:.{decimals}f} %" for _, m in self.moved) + ")"

    @property
    def least(self) -> float:
        return min(m for _, m in self.moved)


def counts(better: list[float], worse: list[float], limit: float) -> Counts:
    """:class:`Counts` of two arms' per-seed errors (seeds both ran, in the same order): a run trained
    where its error is below ``limit``."""
    ok_a = [e for e in better if e < limit]
    ok_b = [e for e in worse if e < limit]

    def mean(xs):
        return sum(xs) / len(xs) if xs else math.nan

    return Counts(len(ok_a), len(ok_b), len(better), mean(ok_a), mean(ok_b))


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


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjustment of ``pvalues`` (nan stays nan and is not counted): rejecting
    where the adjusted value is below ``a`` keeps the chance of any false rejection in the family
    at most ``a``."""
    idx = sorted((i for i, p in enumerate(pvalues) if not math.isnan(p)), key=lambda i: pvalues[i])
    m, out, running = len(idx), [math.nan] * len(pvalues), 0.0
    for rank, i in enumerate(idx):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


def detectable(sd: float, n: int, level: float = LEVEL, power: float = POWER) -> float:
    """The smallest true paired difference decided (interval clear of zero) with probability
    ``power`` at ``n`` seeds when the differences spread with standard deviation ``sd``:
    ``(t_{1-a/2} + t_{power}) sd / sqrt(n)``, t with n-1 degrees of freedom."""
    if n < 2 or not math.isfinite(sd):
        return math.inf
    return (_st.t.ppf(0.5 + level / 2, n - 1) + _st.t.ppf(power, n - 1)) * sd / math.sqrt(n)


def undecided(detect: float, held_back: bool = False) -> str:
    """ "undecided (detectable: X points)"; ``held_back``: the interval clears zero but the
    family-wise correction does not let it decide, which the words say."""
    x = "--" if not math.isfinite(detect) else f"{detect:.1f}"
    return f"undecided (detectable: {x} points" + ("; clear of 0 before Holm)" if held_back else ")")


def verdict(
    iv: Interval | Counts | Unmoved | None,
    p_adjusted: float | None = None,
    margin: float | None = None,
    p_equivalence: float | None = None,
    family: int = 1,
) -> str:
    """The verdict words of one pair's evidence (differences: positive is the paper's side).

    ``p_adjusted``: the pair's Holm-adjusted p-value in its family (None: no adjustment, the
    interval alone decides). An interval clear of zero whose adjusted p-value is not below
    ``1 - level`` is undecided; so are counts whose adjusted exact p-value is not below it.
    ``margin``: the claim's equivalence margin (None: no equivalence test); ``p_equivalence``: its
    TOST p-value Holm-adjusted like the rest (None: unadjusted). ``family``: the Holm family's
    size, at whose first level the detectable difference of an undecided pair is stated.
    """
    if iv is None:
        return NOT_TESTED
    if isinstance(iv, Unmoved):
        return f"{NOT_TESTED_SCALE}: the quadratic terms did not move ({iv.least:.1f} %)"
    if isinstance(iv, Counts):
        p = iv.p if p_adjusted is None else p_adjusted
        if iv.sign and p < 1 - LEVEL:
            return SUPPORTED if iv.sign > 0 else CONTRADICTED
        return f"undecided (trained {iv.trained_a}/{iv.n} vs {iv.trained_b}/{iv.n})"
    if iv.n < 2:
        return undecided(math.inf)
    alpha = 1 - iv.level
    clear = iv.lo > 0 or iv.hi < 0
    if clear and (p_adjusted is None or p_adjusted < alpha):
        return SUPPORTED if iv.lo > 0 else CONTRADICTED
    p_eq = iv.p_equivalence(margin) if p_equivalence is None else p_equivalence
    if margin is not None and p_eq < alpha:
        return equivalent(margin)
    return undecided(detectable(iv.sd, iv.n, holm_level(family, iv.level)), held_back=clear)


def decided(v: str) -> bool:
    """Whether a verdict says something: supported, contradicted, refuted, or equivalent within the
    claim's margin."""
    return v in (SUPPORTED, CONTRADICTED) or v.startswith((EQUIVALENT, REFUTED))


def combine(verdicts: list[str], universal: bool = True) -> str:
    """One verdict for a claim made of several pairs ("every QResNet beats ..."), the one rule of
    the report: supported, contradicted or equivalent only when every pair was tested and says so.
    Otherwise: a contradicted pair of a ``universal`` claim (about every pair) is a counterexample,
    *refuted (k of n pairs contradicted)*; pairs not tested make the claim *not tested at this
    profile (k of n pairs tested)* (the reason a pair was not tested at this scale, where none ran);
    a mixture of decided pairs is *undecided (mixed: ...)*; else the undecided verdict with the
    largest detectable difference."""
    n = len(verdicts)
    if n == 0:
        return NOT_TESTED
    if n == 1:
        return verdicts[0]
    ran = [v for v in verdicts if not v.startswith("not tested")]
    against = sum(v == CONTRADICTED for v in ran)
    if against == n:
        return CONTRADICTED
    if against and universal:
        return f"{REFUTED} ({against} of {n} pairs contradicted)"
    if not ran:  # the reason a pair was not tested at this scale is worth more than "not tested"
        return next((v for v in verdicts if v.startswith(NOT_TESTED_SCALE)), f"{NOT_TESTED} (0 of {n} pairs tested)")
    if len(ran) < n:
        return f"{NOT_TESTED} ({len(ran)} of {n} pairs tested)"
    if all(v == SUPPORTED for v in ran):
        return SUPPORTED
    if all(v.startswith(EQUIVALENT) for v in ran):
        return max(ran, key=lambda v: float(v[len(EQUIVALENT) :].split()[0]))  # the widest margin
    open_ = [v for v in ran if v.startswith("undecided")]
    if not open_:  # a mixture of decided pairs: the claim's pairs disagree
        words = {SUPPORTED: SUPPORTED, CONTRADICTED: CONTRADICTED, EQUIVALENT: "equivalent"}
        parts = [
            f"{sum(v.startswith(w) for v in ran)} {name}"
            for w, name in words.items()
            if any(v.startswith(w) for v in ran)
        ]
        return "undecided (mixed: " + ", ".join(parts) + f" of {n} pairs)"

    def size(v):
        if "detectable: " not in v:  # undecided on counts: no detectable difference to rank by
            return math.inf
        x = v.split("detectable: ")[1].split(" ")[0].rstrip(";")
        return math.inf if x == "--" else float(x)

    return max(open_, key=size)
