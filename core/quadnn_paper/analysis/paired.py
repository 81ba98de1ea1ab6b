"""Claims of the paper decided from paired runs, by one rule for every section.

A claim is "each better arm beats its worse arm" over pairs of arms trained from the same initial
weights under the same seeds. Each pair gives one piece of evidence: the paired interval of the
difference in final error where both arms trained at every seed, the counts of runs that trained
where one did not (or where the claim is about training at all), or "unmoved" where a quadratic arm
did not depart from its linear twin; a pair whose arms differ in more than the tested factor is
measured net of its controls. Verdicts are Holm-adjusted within a section's family of pairs
(:func:`adjust`) and combined per claim by :func:`~quadnn_paper.analysis.stats.combine`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from . import stats

__all__ = [
    "UNTRAINED_MARGIN",
    "MOVED_THRESHOLD",
    "chance",
    "classes",
    "trained_limit",
    "Claim",
    "pair_claim",
    "not_tested",
    "verdict_counts",
    "adjust",
    "paper_effect",
    "tested_pairs",
    "family_size",
    "detectable_text",
    "power_sentence",
]

UNTRAINED_MARGIN = 5.0  # points: a run ending this close to chance (or diverged) did not train
MOVED_THRESHOLD = 1.0  # % of test predictions: below it the quadratic terms did not act


def trained_limit(data: str | int) -> float:
    """The error (%) at and above which a run counts as not trained (diverged runs count at chance)."""
    return chance(data) - UNTRAINED_MARGIN


def chance(data: str | int) -> float:
    """Error (%) of a uniform guess over :func:`classes` of ``data``: what a network that does not
    learn scores."""
    return 100.0 * (1 - 1 / classes(data))


def classes(data: str | int) -> int:
    """How many classes ``data`` has: a CIFAR section's data set by name (CIFAR-100: 100, the
    others 10), or the count itself."""
    return data if isinstance(data, int) else (100 if data == "cifar100" else 10)


@dataclass(frozen=True)
class Claim:
    """A claim of the paper decided pair by pair: a paired :class:`stats.Interval` where both arms
    trained at every seed, :class:`stats.Counts` of runs that trained where one did not (or where
    the claim is about training at all), :class:`stats.Unmoved` where a quadratic arm did not depart
    from its linear twin; None for a pair not run at this profile.

    A pair whose arms differ in more than the factor the claim tests (a weight-transfer arm has
    trained a source's stage first) is measured against its controls (:func:`pair_claim`): the
    difference ``(err(b) - err(a)) - (err(b0) - err(a0))`` of two arms of one architecture that
    differ only in that budget, so what is left is the factor's doing.

    ``p_adjusted`` / ``p_equivalence``: each pair's Holm-adjusted p-values (difference and TOST) in
    its section's ``family`` of ``family`` pairs (:func:`adjust`; empty before). ``margins``: each
    pair's equivalence margin (points; None: the paper states no effect to put one below).
    ``moved``: the least departure (% of test predictions changed, :func:`moved`) among the
    claim's quadratic arms (nan: none).
    """

    text: str
    verdict: str  # from stats.verdict / stats.combine
    pairs: list  # [(label better, label worse, Interval | Counts | Unmoved | None)]
    paper: str = ""  # the paper's numbers behind the claim
    note: str = ""  # e.g. the controls a pair is measured against, the method pinning the terms
    p_adjusted: tuple = ()
    moved: float = math.nan
    margins: tuple = ()
    p_equivalence: tuple = ()
    family: int = 1
    universal: bool = True
    never: bool = False  # the claim is that each worse arm never trains: one run that did refutes it
    id: str = ""  # the stable id the ledger finds it by (common.ledger); "": not a claim of the paper
    pair_of: str = ""  # the id of the paper's multi-pair claim this is one pair of, decided on its own

    def evidence(self, most: int | None = None) -> str:
        """ "A vs B: +1.23 [0.40, 2.06]; ..." (differences: worse minus better, points of error); at
        most ``most`` pairs, then how many more (a claim of nine pairs would outrun a page)."""
        parts = [f"{a} vs {b}: {iv.text()}" for a, b, iv in self.pairs if iv is not None]
        idle = sum(iv is None for _, _, iv in self.pairs)
        if most is not None and len(parts) > most:
            more = len(parts) - most
            parts = parts[:most] + [f"+{more} more pair{'s' * (more > 1)}"]
        if idle:  # the pairs this profile does not run, counted rather than listed
            parts.append(f"{idle} pair{'s' * (idle > 1)} not run at this profile")
        return "; ".join(parts + ([self.note] if self.note else []))

    @property
    def intervals(self) -> list:
        """The pairs' measurements (intervals and counts; not the pairs that were not tested)."""
        return [iv for _, _, iv in self.pairs if isinstance(iv, (stats.Interval, stats.Counts))]

    @property
    def seeds(self) -> int:
        """Fewest seeds (pairs) behind any measurement of the claim (0: none ran)."""
        return min((iv.n for iv in self.intervals), default=0)

    @property
    def level(self) -> float:
        """The level Holm's method asks of the family's first test: the detectable differences' level."""
        return stats.holm_level(self.family)

    @property
    def detectable(self) -> float:
        """The largest of the paired intervals' detectable differences at the Holm level of the
        claim's family (points; inf when a pair has no spread; nan when no pair is an interval)."""
        ivs = [iv for iv in self.intervals if isinstance(iv, stats.Interval)]
        return max((stats.detectable(iv.sd, iv.n, self.level) for iv in ivs), default=math.nan)

    @property
    def verdict_text(self) -> str:
        """The verdict as the tables print it."""
        return self.verdict

    @property
    def decided(self) -> bool:
        return stats.decided(self.verdict)

    def pair_verdicts(self) -> list[str]:
        """Each pair's own verdict (at the adjusted p-values once :func:`adjust` ran)."""
        n = len(self.pairs)
        ps = list(self.p_adjusted) or [None] * n
        eq = list(self.p_equivalence) or [None] * n
        ms = list(self.margins) or [None] * n
        if self.p_adjusted:  # a pair left out of the family (no p-value) is never decided by it
            ps = [1.0 if p is None else p for p in ps]
            eq = [1.0 if p is None else p for p in eq]
        return [stats.verdict(iv, p, m, e, self.family) for (_, _, iv), p, m, e in zip(self.pairs, ps, ms, eq)]

    def deciding(self) -> tuple | None:
        """The pair ``(better, worse, evidence)`` whose own verdict is the claim's (the first pair
        measured when none is alone in deciding it); None when no pair was measured."""
        for (a, b, iv), v in zip(self.pairs, self.pair_verdicts()):
            if iv is not None and v == self.verdict:
                return a, b, iv
        return next(((a, b, iv) for a, b, iv in self.pairs if iv is not None), None)

    def moved_text(self) -> str:
        """The claim's least departure of a quadratic arm, "--" where it has no quadratic arm."""
        return "--" if math.isnan(self.moved) else f"{self.moved:.1f}"


def decide(claim: Claim) -> Claim:
    """``claim`` with its verdict from its pairs' verdicts by :func:`stats.combine`: the one rule
    every section's claims go through."""
    verdict = stats.combine(claim.pair_verdicts(), claim.universal)
    if claim.never:  # "X does not train": a run of X that trained is a counterexample, whatever the p-values
        counts = [iv for _, _, iv in claim.pairs if isinstance(iv, stats.Counts)]
        trained = sum(iv.trained_b for iv in counts)
        if trained:
            verdict = f"{stats.REFUTED} ({trained} of {sum(iv.n for iv in counts)} runs trained)"
    return replace(claim, verdict=verdict)


def paper_effect(better, worse) -> float | None:
    """The effect (points) the paper claims between two of its printed errors, ``worse - better``;
    None where either is not a number ("no converge", "--")."""
    try:
        return float(worse) - float(better)
    except (TypeError, ValueError):
        return None


def _seeds_of(*arms: dict) -> list:
    common = set(arms[0]).intersection(*arms[1:])
    return [s for s in sorted(common) if all(x[s] is not None for x in arms)]


def _evidence(
    la: str,
    a: dict,
    lb: str,
    b: dict,
    limit: float,
    moved_by: dict,
    level: float,
    control: tuple | None = None,
    trains: bool = False,
    pinned: tuple = (),
):
    """One pair's evidence: Unmoved where a quadratic arm's terms did not act (arms in ``pinned``
    excepted: their method holds the terms at any scale, so what they measure is the method), else
    Counts where a run of either arm did not train (error at or above ``limit``; always, for a
    claim about training at all: ``trains``), else the paired interval, of ``b - a`` or, with a
    ``control = (a0, b0)``, of ``(b - a) - (b0 - a0)``; None when no seed has every arm."""
    arms = (a, b) + (tuple(control) if control else ())
    seeds = _seeds_of(*arms)
    if not seeds:
        return None
    xa, xb = [a[s] for s in seeds], [b[s] for s in seeds]
    if trains:  # whether a network trains is a count, whatever its quadratic terms did
        return stats.counts(xa, xb, limit)
    # a quadratic network whose terms did not act tests nothing quadratic, not even whether it trains
    still = tuple((arm, moved_by[arm]) for arm in (la, lb) if moved_by.get(arm) is not None and arm not in pinned)
    still = tuple((arm, m) for arm, m in still if m < MOVED_THRESHOLD)
    if still:
        return stats.Unmoved(still, MOVED_THRESHOLD)
    if any(e >= limit for e in xa + xb):
        return stats.counts(xa, xb, limit)
    diffs = [y - x for x, y in zip(xa, xb)]
    if control:
        a0, b0 = control
        diffs = [d - (b0[s] - a0[s]) for d, s in zip(diffs, seeds)]
    return stats.interval(diffs, level)


def pair_claim(
    text: str,
    pairs: list[tuple],
    paper: str = "",
    level: float = stats.LEVEL,
    note: str = "",
    *,
    dataset: str = "cifar10",
    moved_by: dict | None = None,
    margins: list | None = None,
    trains: bool = False,
    pinned: tuple = (),
    universal: bool = True,
    limit: float | None = None,
    never: bool = False,
    id: str = "",
) -> Claim:
    """Decide the claim "each ``better`` beats its ``worse``" from ``pairs`` of
    ``(label, {seed: error}, label, {seed: error})`` on ``dataset`` (diverged runs at chance); a
    pair may carry a fifth element ``(label a0, {seed: error}, label b0, {seed: error})``: the
    controls it is measured against (:func:`_evidence`). An empty dict: the arm did not run at this
    profile (the pair counts as not tested). One piece of evidence per pair, verdicts by
    :func:`stats.verdict` (unadjusted until :func:`adjust`), combined by :func:`stats.combine`.
    ``moved_by``: each quadratic arm's departure by label (:func:`moved`; conventional arms absent
    or None); ``margins``: each pair's equivalence margin (None: none); ``limit``: the error (%) from
    which a run counts as not trained (default :func:`trained_limit` of ``dataset``); ``never``: the
    claim is that each worse arm does not train at all (decided on counts, :attr:`Claim.never`); ``id``:
    the ledger's id of the paper's claim it decides."""
    moved_by = moved_by or {}
    trains = trains or never
    limit = trained_limit(dataset) if limit is None else limit
    out, controls = [], {}
    for la, a, lb, b, *rest in pairs:
        control = rest[0] if rest else None
        ev = _evidence(
            la,
            a,
            lb,
            b,
            limit,
            moved_by,
            level,
            (control[1], control[3]) if control else None,
            trains,
            pinned,
        )
        out.append((la, f"{lb}, net of controls" if control else lb, ev))
        if control and ev is not None:  # named once, in the note: the evidence column stays short
            controls.setdefault(f"{control[0]} vs {control[2]}", None)
    if controls:
        note = "; ".join(x for x in (note, "net of controls: " + ", ".join(controls)) if x)
    # an arm whose method holds its terms at the reference at any scale is decided as what it is
    held = [
        f"{arm} pins its quadratic terms ({m:.1f} % of predictions changed) at any scale"
        for arm in pinned
        if moved_by.get(arm) is not None and (m := moved_by[arm]) < MOVED_THRESHOLD
    ]
    note = "; ".join(x for x in (note, *held) if x)
    # the departure shown is that of the pairs the verdict rests on (of every pair, if none was tested)
    labels = [(p[0], p[2]) for p in pairs]
    tested = [ab for ab, (_, _, iv) in zip(labels, out) if not isinstance(iv, stats.Unmoved)] or labels
    arms = [moved_by[x] for pair in tested for x in pair if moved_by.get(x) is not None]
    claim = Claim(
        text,
        "",
        out,
        paper,
        note=note,
        moved=min(arms, default=math.nan),
        margins=tuple(margins) if margins else (),
        universal=universal,
        never=never,
        id=id,
    )
    return decide(claim)


def adjust(claims: list[Claim]) -> list[Claim]:
    """The claims with verdicts decided at Holm-adjusted p-values over every pair of ``claims`` (the
    family): the chance that any supported or contradicted verdict among them is a false one stays
    below ``1 - LEVEL``. The pairs' equivalence tests (TOST, where a pair has a margin) are adjusted
    the same way over the same pairs. Each claim records the family's size (pairs with a p-value)."""
    flat = [(i, j) for i, c in enumerate(claims) for j, (_, _, iv) in enumerate(c.pairs) if iv is not None]

    def margin(i, j):
        ms = claims[i].margins
        return ms[j] if ms else None

    # one hypothesis per distinct pair (its arms and their evidence): a pair two claims share is tested once
    first: dict[tuple, tuple] = {}
    for i, j in flat:
        first.setdefault(claims[i].pairs[j], (i, j))
    unique = list(first.values())
    adj = stats.holm([claims[i].pairs[j][2].p for i, j in unique])
    eq = stats.holm(
        [
            claims[i].pairs[j][2].p_equivalence(margin(i, j))
            if isinstance(claims[i].pairs[j][2], stats.Interval)
            else math.nan
            for i, j in unique
        ]
    )
    family = tested_pairs(claims)
    by_pair = {claims[i].pairs[j]: (a, e) for (i, j), a, e in zip(unique, adj, eq)}
    per = {(i, j): by_pair[claims[i].pairs[j]][0] for i, j in flat}
    per_eq = {(i, j): by_pair[claims[i].pairs[j]][1] for i, j in flat}
    out = []
    for i, c in enumerate(claims):

        def clean(p):
            return None if p is None or math.isnan(p) else p

        ps = tuple(clean(per.get((i, j))) for j in range(len(c.pairs)))
        es = tuple(clean(per_eq.get((i, j))) for j in range(len(c.pairs)))
        out.append(decide(replace(c, p_adjusted=ps, p_equivalence=es, family=max(1, family))))
    return out


def tested_pairs(claims: list[Claim]) -> int:
    """The pairs of ``claims`` with a p-value, a pair two claims share counted once: the Holm
    family :func:`adjust` adjusts them in (0 where none has one)."""
    return len({pair for c in claims for pair in c.pairs if pair[2] is not None and not math.isnan(pair[2].p)})


def family_size(claims: list[Claim]) -> int:
    """The size of the Holm family the claims were adjusted in (pairs with a p-value)."""
    return max((c.family for c in claims), default=1)


def verdict_counts(claims: list[Claim]) -> dict[str, int]:
    """How many of ``claims`` read each verdict, and their Holm family's size, by the macro names
    the text quotes them under."""
    verdicts = [c.verdict for c in claims]
    return dict(
        ClaimsSupported=verdicts.count(stats.SUPPORTED),
        ClaimsContradicted=verdicts.count(stats.CONTRADICTED),
        ClaimsEquivalent=sum(v.startswith(stats.EQUIVALENT) for v in verdicts),
        ClaimsRefuted=sum(v.startswith(stats.REFUTED) for v in verdicts),
        ClaimsUndecided=sum(v.startswith("undecided") for v in verdicts),
        ClaimsNotTested=sum(v.startswith("not tested") for v in verdicts),
        HolmFamily=family_size(claims),
    )


def not_tested(text: str, reason: str, paper: str = "", id: str = "") -> Claim:
    """A claim this profile does not test, with the reason in its evidence column."""
    return Claim(text, stats.NOT_TESTED, [], paper, note=reason, id=id)


def power_sentence(claims: list[Claim]) -> str:
    """The sentence saying what the section's pairs can decide, from the same pairs as its claims
    table: their median spread, the fewest seeds and the detectable difference at the Holm level
    of the family (80 % power); where no pair has an interval, a sentence that says so."""
    sd, mde, n = detectable_text(claims)
    if n < 2 or math.isnan(sd):
        return (
            "No pair of this profile has an interval (no claim has two or more seeds at which both arms "
            "trained), so the design's detectable difference is not measured here."
        )
    family = family_size(claims)
    return (
        f"The paired differences spread with a (median) standard deviation of {sd:.2f} points, so at {n} "
        f"seeds this profile decides a true difference of about {mde:.1f} points or more (with probability "
        f"{round(100 * stats.POWER)}% at the level Holm's method asks of the first of the family's {family} "
        f"pair{'s' * (family != 1)}, {100 * (1 - stats.holm_level(family)):.2g}%)."
    )


def detectable_text(claims: list[Claim], level: float | None = None) -> tuple[float, float, int]:
    """``(median sd of the paired differences, smallest difference detected with 80% power, seeds)``
    over every pair with an interval (nan when none has one), at ``level`` (default: the Holm level
    of the claims' family, the level their verdicts are tested at)."""
    level = stats.holm_level(family_size(claims)) if level is None else level
    ivs = [iv for c in claims for _, _, iv in c.pairs if isinstance(iv, stats.Interval) and iv.n > 1]
    if not ivs:
        return math.nan, math.nan, 0
    sds = sorted(iv.sd for iv in ivs)
    sd = sds[len(sds) // 2]
    n = min(iv.n for iv in ivs)
    return sd, stats.detectable(sd, n, level), n
