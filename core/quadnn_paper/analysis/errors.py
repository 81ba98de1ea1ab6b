"""A setting's runs over its seeds, as the CIFAR tables show them: the mean and spread of
the final test errors of the runs that trained, how many did not (diverged, or ended within
:data:`~.paired.UNTRAINED_MARGIN` of chance) or are pending, the error a run adds to a paired
difference, each run's line of the per-seed CSV, and how far the quadratic terms moved a
setting's predictions (:func:`moved`)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from quadnn_paper.analysis.paired import UNTRAINED_MARGIN, chance
from quadnn_paper.common.cells import Cell
from quadnn_paper.common.outputs import PENDING, pending_text


@dataclass(frozen=True)
class Errors:
    """A row's final test errors over its seeds (:func:`summarise`)."""

    n: int  # runs done (trained or not)
    finished: int  # runs that trained
    diverged: int  # runs that did not: diverged, or ended within the untrained margin of chance
    pending: int  # runs a runner has not delivered yet
    mean: float | None  # over the runs that trained
    std: float | None
    epoch_time: float | None  # seconds per epoch, over every run done
    params: int | None  # of the network trained
    reasons: list[str]  # why the runs that did not train did not

    def no_converge(self) -> str:
        """ "no converge", with how many of how many runs where there are several."""
        return "no converge" + (f" ({self.diverged}/{self.n})" if self.n > 1 else "")


def summarise(results: list[dict | None], limit: float = math.inf) -> Errors:
    """Mean/std of final test error over the seeds that trained; counts of runs that did not
    (``diverged``: the engine's divergence, or a final error at or above ``limit``, see
    :func:`trained_limit`) and of pending runs (None: a run a cluster runner has not finished yet)."""
    pending = sum(r is None for r in results)
    results = [r for r in results if r is not None]
    done = [r["test_error"] for r in results if r["status"] == "finished" and r["test_error"] < limit]
    n, k = len(results), len(done)
    mean = sum(done) / k if k else None
    std = math.sqrt(sum((e - mean) ** 2 for e in done) / (k - 1)) if k > 1 else (0.0 if k else None)
    times = [r["epoch_time"] for r in results if r.get("epoch_time")]
    reasons = {r["diverged_reason"] for r in results if r["status"] != "finished"}
    if any(r["status"] == "finished" and r["test_error"] >= limit for r in results):
        reasons.add(f"final error within {UNTRAINED_MARGIN:g} points of chance")
    return Errors(
        n=n,
        finished=k,
        diverged=n - k,
        pending=pending,
        mean=mean,
        std=std,
        epoch_time=sum(times) / len(times) if times else None,
        params=next((r["params"] for r in results if r.get("params")), None),  # of the network trained
        reasons=sorted(reasons),
    )


def error_value(s: Errors, note: str = "", reproduced: bool | None = None) -> Cell:
    """A table's cell of the errors of a setting with runs that trained: their mean, and their
    spread where there are several (``note`` after it; ``reproduced``: whether the paper's row holds)."""
    return Cell(s.mean, spread=s.std if s.finished > 1 else None, decimals=2, note=note, reproduced=reproduced)


def error_cell(s: Errors | None, run: bool = True) -> str:
    """Text of an error cell: "7.21 +- 0.30", "no converge" (all seeds diverged), "full only"."""
    if not run or s is None:
        return "full only"
    if s.pending:
        return pending_text((s.pending, s.n + s.pending, "run"))
    if s.finished == 0:
        return s.no_converge()
    text = f"{s.mean:.2f}" + (f" +- {s.std:.2f}" if s.finished > 1 else "")
    if s.diverged:
        text += f" ({s.diverged}/{s.n} untrained)"
    return text


def seed_errors(result: dict | None, data: str | int, key: str = "test_error") -> float | None:
    """The error a run contributes to a paired difference: its final error (``key``: the test
    error, ImageNet's ``top1_error``); a run that did not finish or records none ("no converge")
    counts at chance (:func:`~.paired.chance` of ``data``); None while it is pending."""
    if result is None:
        return None
    err = result.get(key) if result["status"] == "finished" else None
    return chance(data) if err is None else err


SEED_HEADER = ["Arm", "Setting", "Seed", "Status", "Test error (%)", "Predictions changed (%)", "Terms / W_r"]


def seed_row(arm: str, setting: str, seed: int, result: dict | None) -> list:
    """One run's line of a section's per-seed results (shipped as CSV beside the tables)."""
    if result is None:
        return [arm, setting, seed, PENDING, "--", "--", "--"]
    dep = result.get("departure") or {}
    err = result.get("test_error")
    return [
        arm,
        setting,
        seed,
        result["status"],
        "--" if err is None else round(err, 4),
        "--" if "changed" not in dep else round(dep["changed"], 4),
        "--" if "terms" not in dep else f"{dep['terms']:.4g}",
    ]


def moved(results: list[dict | None]) -> float | None:
    """The median share of test predictions (%) that the quadratic terms of ``results`` change (their
    departure from the linear twin, recorded by the engine); None where no finished run records one
    (a conventional network, or nothing finished)."""
    xs = sorted(
        r["departure"]["changed"]
        for r in results
        if r is not None and r.get("status") == "finished" and "changed" in (r.get("departure") or {})
    )
    return statistics.median(xs) if xs else None


def test_images(results) -> int | None:
    """The number of test images, from the first of ``results`` (None: pending) that records it."""
    return next((r["test_images"] for r in results if r is not None and "test_images" in r), None)
