"""What a measured training step says: the rules that judge the benchmark's rows
(:mod:`quadnn_paper.bench`; ratios to the conventional baseline, median and quartiles over
interleaved rounds) against each other, against the recompute budgets, and against the paper's
time per epoch on its GPU. Each returns the report's words, so the text and the tests read one rule.
"""

from __future__ import annotations

from quadnn_paper.common import published

PAPER_EPOCH_SECONDS = published.CIFAR_EPOCH_SECONDS  # the paper's CIFAR-10 table, "Time" (s per epoch)


def model_facts(name: str) -> tuple[int, str]:
    """(depth, neuron kind) of a CIFAR ResNet, from the model registry."""
    from quadnn.models.cifar_resnet import VARIANTS

    return VARIANTS[name]


def find(rows: list[dict], model: str, implementation: str, compiled: bool = False) -> dict | None:
    """The row of ``model`` and ``implementation`` (None when the profile does not measure it)."""
    return next(
        (
            r
            for r in rows
            if r["model"] == model and r["implementation"] == implementation and bool(r.get("compiled")) == compiled
        ),
        None,
    )


def ratio(v) -> str:
    """A ratio with two decimals for the table and the text ("--" where not measured)."""
    return "--" if v is None else f"{v:.2f}"


def spread(row: dict | None, key: str) -> str:
    """``median [q1, q3]`` of a measured ratio with two decimals ("--" when not measured)."""
    if row is None or key not in row:
        return "--"
    return median_quartiles(row[key], row[key + "_q1"], row[key + "_q3"])


def median_quartiles(median: float, q1: float | None, q3: float | None) -> str:
    """The report's one form of a measured value: ``median [q1, q3]`` with two decimals (the median
    alone for a single measurement)."""
    return f"{median:.2f}" + (f" [{q1:.2f}, {q3:.2f}]" if q1 is not None else "")


def verdict(a: dict | None, b: dict | None, key: str = "time_ratio") -> str:
    """Words for :func:`quadnn_paper.bench.compare` of two rows: "faster", "slower" or "unresolved"."""
    from quadnn_paper.bench import compare

    if a is None or b is None:
        return "--"
    return {"lower": "faster", "higher": "slower", "unresolved": "unresolved"}[compare(a, b, key)]


def dominates(default: dict | None, naive: dict | None) -> str:
    """Whether ``default`` beats ``naive`` in both memory and time, in the report's words: "yes",
    "not shown (less memory, time unresolved)", "no", or "--" where a row is not measured."""
    if default is None or naive is None:
        return "--"
    time = verdict(default, naive)
    if default["mem_ratio"] < naive["mem_ratio"] and time in ("faster", "unresolved"):
        return "yes" if time == "faster" else "not shown (less memory, time unresolved)"
    return "no"


def frontier(rows: list[dict], model: str, default_budget: float) -> list[tuple[float, dict]]:
    """``(budget, row)`` of every measured plan_recompute budget of ``model`` ("budget=B" rows, and
    "default" at the models' ``default_budget``), by budget."""
    out = {}
    for r in rows:
        if r["model"] != model or r.get("compiled"):
            continue
        if r["implementation"].startswith("budget="):
            out[float(r["implementation"][len("budget=") :])] = r
        elif r["implementation"] == "default":
            out[float(default_budget)] = r
    return sorted(out.items(), key=lambda item: item[0])


def choose_budget(points: list[tuple[float, dict]], naive: dict) -> tuple[float, bool]:
    """The budget a model should be built with, from its measured frontier: the one with the least
    memory among those that beat ``naive`` in memory and, resolved, in time; when none does, the
    fastest. Returns ``(budget, dominates)``, ``dominates`` saying whether it beats naive in both."""
    from quadnn_paper.bench import compare

    beating = [(b, r) for b, r in points if r["mem_ratio"] < naive["mem_ratio"] and compare(r, naive) == "lower"]
    if beating:
        return min(beating, key=lambda item: (item[1]["mem_ratio"], -item[0]))[0], True
    return min(points, key=lambda item: (item[1]["time_ratio"], -item[0]))[0], False


def engine_gpu_pick() -> str:
    """The implementation the training engine gives quadratic layers on a GPU, eager, when nothing
    is recomputed (``RunConfig.implementation`` "auto": :func:`quadnn_paper.engine.loop.auto_implementation`)."""
    from quadnn_paper.engine.loop import auto_implementation

    return auto_implementation("cuda", compiled=False)


def pick_agrees(pick: str, verdicts: list[str]) -> str:
    """Whether the GPU rows' verdicts of the default against naive (:func:`verdict`, one per depth)
    support the engine's ``pick``: "yes" when the pick is faster, or unresolved, at every measured
    depth and faster at one; "no" when the other implementation is faster at any; "not measured"."""
    measured = [v for v in verdicts if v != "--"]
    if not measured:
        return "not measured"
    # verdict(default, naive): "slower" means naive is faster
    wins = {"naive": "slower", "speed": "faster"}.get(pick)
    loses = {"naive": "faster", "speed": "slower"}.get(pick)
    if wins is None or loses in measured:
        return "no"
    return "yes" if wins in measured else "not shown (unresolved)"


def paper_ratio() -> float:
    return PAPER_EPOCH_SECONDS["cifar_qresnet20"] / PAPER_EPOCH_SECONDS["cifar_resnet20"]


def against(value: float, q1: float | None, q3: float | None, paper: float) -> str:
    """Where the paper's ratio lies against ours: inside our quartiles ("within"), below them
    ("ours higher") or above ("ours lower"); a single measurement has no quartiles and says so."""
    if q1 is None:
        return ("ours higher" if value > paper else "ours lower") + " (one measurement)"
    return "within" if q1 <= paper <= q3 else "ours higher" if q1 > paper else "ours lower"


def paper_ratio_rows(rows: list[dict], compile_rows: list[dict], gpu, epochs, machine: str) -> list[dict]:
    """Every ratio of QResNet20's training time to ResNet20's that we measured: this machine's and
    a GPU's bench steps (median and quartiles over interleaved rounds; eager by implementation, and
    compiled) and the GPU's engine epoch (one measurement each, eager and compiled); each with where
    the paper's ratio lies against it (:func:`against`)."""
    paper, out = paper_ratio(), []

    def step_rows(where, bench_rows):
        for impl, compiled in (("default", False), ("naive", False), ("default", True)):
            r = find(bench_rows, "cifar_qresnet20", impl, compiled)
            if r is not None and "time_ratio_q1" in r:
                what = f"training step, {impl}" + (", compiled" if compiled else "")
                q1, q3 = r["time_ratio_q1"], r["time_ratio_q3"]
                out.append(dict(where=where, what=what, value=r["time_ratio"], q1=q1, q3=q3))

    step_rows(machine, rows + [r for r in compile_rows if r["compiled"]])
    if gpu is not None:
        step_rows(gpu.machine, gpu.rows)
    if epochs is not None:
        for compiled in (False, True):
            q, b = epochs.row("cifar_qresnet20", compiled), epochs.row("cifar_resnet20", compiled)
            if q and b:
                value = q["epoch_seconds"] / b["epoch_seconds"]
                what = "engine's epoch" + (", compiled" if compiled else ", eager")
                out.append(dict(where=q["machine"], what=what, value=value, q1=None, q3=None))
    for r in out:
        r["against"] = against(r["value"], r["q1"], r["q3"], paper)
    return out


def paper_ratio_verdict(found: list[dict]) -> str:
    """The report's verdict on the paper's ratio: "reproduced" when it lies within the quartiles of a
    step ratio we measured, or below one (ours lower); else "not reproduced", naming our closest
    ratio with quartiles; "not measured" when there is none."""
    timed = [r for r in found if r["q1"] is not None]
    if not timed:
        return "not measured"
    if any(r["against"] in ("within", "ours lower") for r in timed):
        return "reproduced"
    best = min(timed, key=lambda r: r["value"])
    return (
        f"not reproduced: our lowest, the {best['what']} on {best['where']}, is "
        f"{median_quartiles(best['value'], best['q1'], best['q3'])}"
    )


def timed_verdict(rows: list[dict], model: str) -> str:
    """The paper's epoch ratio of ``model`` to the ResNet of its depth against our step ratio (median
    and quartiles over rounds, quadnn's default implementation): "reproduced" when the paper's lies
    within our quartiles or below them (ours lower), else "not reproduced"; "not tested at this
    profile" where this profile does not time the model."""
    depth, neuron = model_facts(model)
    paper = PAPER_EPOCH_SECONDS[model] / PAPER_EPOCH_SECONDS[f"cifar_resnet{depth}"]
    r = find(rows, model, "default")
    if r is None or r.get("time_ratio_q1") is None:
        name = {"full": "QResNet", "parabolic": "Parabolic-ResNet", "poly": "PolyResNet"}.get(neuron, neuron) + str(
            depth
        )
        return f"not tested at this profile: it does not time {name} (the paper's ratio {paper:.2f})"
    ours = spread(r, "time_ratio")
    where = against(r["time_ratio"], r["time_ratio_q1"], r["time_ratio_q3"], paper)
    word = "reproduced" if where in ("within", "ours lower") else "not reproduced"
    return f"{word}: ours {ours} on this machine's training step, the paper's {paper:.2f}"
