"""The efficiency section: what :mod:`quadnn.bench` measures at each profile, and the paper's
time per epoch beside it. The measurement itself is the library's (``python -m quadnn.bench``)."""
from __future__ import annotations

from quadnn_paper.common import published
from quadnn_paper.common.profiles import select

__all__ = ["PROTOCOLS", "PAPER_EPOCH_SECONDS", "protocol", "tiny_protocol", "frontier", "choose_budget", "find",
           "spread", "verdict"]

_FAMILY20 = ("cifar_qresnet20", "cifar_qresnet20_compact", "cifar_parabolic_resnet20", "cifar_poly_resnet20")
_FAMILY56 = ("cifar_qresnet56", "cifar_qresnet56_compact", "cifar_parabolic_resnet56", "cifar_poly_resnet56")
# The full neuron's frontier: plan_recompute's budget from "lean" everywhere (0) to the models'
# default, each a point in (time, memory); "fast" (r kept everywhere) and "naive" beside them.
_FRONTIER = ("default", "budget=1.5", "budget=1.0", "budget=0", "fast", "naive")
_PAIR = ("default", "naive")
# The efficiency notebook's protocol per profile. "full" is the paper's training setting
# (CIFAR batch 128, 3x32x32, float32) with more timed rounds; the paper itself reports time per
# epoch on its GPU, which a CPU cannot reproduce. implementations: per model. steps: timed rounds,
# each timing every row once (quartiles over rounds rank implementations, see quadnn.bench).
# compile_models: the models also timed under torch.compile (none at smoke: compiling a ResNet's
# forward and backward takes about a minute on a CPU).
PROTOCOLS = {
    "smoke": dict(models=("cifar_qresnet20",), batch_size=8, input=(3, 16, 16), steps=3, warmup=1,
                  implementations={"cifar_qresnet20": _PAIR}, threads=1, compile_models=()),
    "cpu": dict(models=_FAMILY20 + ("cifar_qresnet56",), batch_size=128, input=(3, 32, 32), steps=11, warmup=2,
                implementations=dict({m: _PAIR for m in _FAMILY20[1:]}, cifar_qresnet20=_FRONTIER,
                                     cifar_qresnet56=("default", "budget=1.0", "naive")),
                threads=2, compile_models=("cifar_qresnet20",)),
    "full": dict(models=_FAMILY20 + _FAMILY56, batch_size=128, input=(3, 32, 32), steps=31, warmup=3,
                 implementations=dict({m: _PAIR for m in _FAMILY20[1:] + _FAMILY56[1:]},
                                      cifar_qresnet20=_FRONTIER + ("fused",), cifar_qresnet56=_FRONTIER),
                 threads=None, compile_models=_FAMILY20),
}
# The paper's Table (CIFAR-10 comparison), "Time" column: training time per epoch in seconds.
PAPER_EPOCH_SECONDS = published.CIFAR_EPOCH_SECONDS


def protocol(profile: str) -> dict:
    """A copy of the protocol of ``profile``."""
    return dict(select(PROTOCOLS, profile))


def tiny_protocol(P: dict) -> dict:
    """TINY=1: the full protocol's models, implementations and input, with two timed rounds and
    one compiled model (the code path, not a measurement)."""
    return dict(P, steps=2, warmup=1, compile_models=tuple(P["compile_models"])[:1])


def frontier(rows: list[dict], model: str, default_budget: float) -> list[tuple[float, dict]]:
    """``(budget, row)`` of every measured plan_recompute budget of ``model`` ("budget=B" rows, and
    "default" at the models' ``default_budget``), by budget."""
    out = {}
    for r in rows:
        if r["model"] != model or r.get("compiled"):
            continue
        if r["implementation"].startswith("budget="):
            out[float(r["implementation"][len("budget="):])] = r
        elif r["implementation"] == "default":
            out[float(default_budget)] = r
    return sorted(out.items(), key=lambda item: item[0])


def choose_budget(points: list[tuple[float, dict]], naive: dict) -> tuple[float, bool]:
    """The budget a model should be built with, from its measured frontier: the one with the least
    memory among those that beat ``naive`` in memory and, resolved, in time; when none does, the
    fastest. Returns ``(budget, dominates)``, ``dominates`` saying whether it beats naive in both."""
    from quadnn.bench import compare
    beating = [(b, r) for b, r in points if r["mem_ratio"] < naive["mem_ratio"] and compare(r, naive) == "lower"]
    if beating:
        return min(beating, key=lambda item: (item[1]["mem_ratio"], -item[0]))[0], True
    return min(points, key=lambda item: (item[1]["time_ratio"], -item[0]))[0], False


def find(rows: list[dict], model: str, implementation: str, compiled: bool = False) -> dict | None:
    """The row of ``model`` and ``implementation`` (None when the profile does not measure it)."""
    return next((r for r in rows if r["model"] == model and r["implementation"] == implementation
                 and bool(r.get("compiled")) == compiled), None)


def spread(row: dict | None, key: str) -> str:
    """``median [q1, q3]`` of a measured ratio with two decimals ("--" when not measured)."""
    if row is None or key not in row:
        return "--"
    return f"{row[key]:.2f} [{row[key + '_q1']:.2f}, {row[key + '_q3']:.2f}]"


def verdict(a: dict | None, b: dict | None, key: str = "time_ratio") -> str:
    """Words for :func:`quadnn.bench.compare` of two rows: "faster", "slower" or "unresolved"."""
    from quadnn.bench import compare
    if a is None or b is None:
        return "--"
    return {"lower": "faster", "higher": "slower", "unresolved": "unresolved"}[compare(a, b, key)]
