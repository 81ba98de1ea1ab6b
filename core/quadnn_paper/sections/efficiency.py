"""The efficiency section: what :mod:`quadnn_paper.bench` measures at each profile, and the paper's
time per epoch beside it. The measurement itself is the harness's (``python -m quadnn_paper.bench``).

Its work (:func:`plan`) is CPU computations, cached by configuration: the models' sizes, the launch
floor, the benchmark's rows (eager and, where the profile compiles, under ``torch.compile``) and the
inference timing; the benchmark's configuration names this machine, so another machine measures
anew. Its outputs (:func:`outputs`) are the tables and the text's numbers, with the rows measured on
a GPU (committed under docs/gpu/) shown apart.
"""

from __future__ import annotations

from typing import NamedTuple

from quadnn_paper.analysis.timing import (
    PAPER_EPOCH_SECONDS,
    choose_budget,
    dominates,
    engine_gpu_pick,
    find,
    frontier,
    median_quartiles,
    model_facts,
    paper_ratio_rows,
    paper_ratio_verdict,
    pick_agrees,
    ratio,
    spread,
    timed_verdict,
    verdict,
)
from quadnn_paper.common.machine import machine
from quadnn_paper.common.outputs import PENDING, Lines, Table, Variables
from quadnn_paper.common.profiles import protocols
from quadnn_paper.engine import Computation, Results
from quadnn_paper.experiments import efficiency as experiment

__all__ = ["NAME", "PROTOCOLS", "protocol", "data", "plan", "outputs"]  # the section's contract (execution.sections)

_FAMILY20 = ("cifar_qresnet20", "cifar_qresnet20_compact", "cifar_parabolic_resnet20", "cifar_poly_resnet20")
_FAMILY56 = ("cifar_qresnet56", "cifar_qresnet56_compact", "cifar_parabolic_resnet56", "cifar_poly_resnet56")
# The full neuron's frontier: plan_recompute's budget from "lean" everywhere (0) to the models'
# default, each a point in (time, memory); "fast" (r kept everywhere) and "naive" beside them.
_FRONTIER = ("default", "budget=1.5", "budget=1.0", "budget=0", "fast", "naive")
_PAIR = ("default", "naive")
# The efficiency section's protocol per profile. "full" is the paper's training setting
# (CIFAR batch 128, 3x32x32, float32) with more timed rounds; the paper itself reports time per
# epoch on its GPU, which a CPU cannot reproduce. implementations: per model. steps: timed rounds,
# each timing every row once (quartiles over rounds rank implementations, see quadnn_paper.bench).
# compile_models: the models also timed under torch.compile (none at smoke: compiling a ResNet's
# forward and backward takes about a minute on a CPU).
PROTOCOLS = {
    "smoke": dict(
        models=("cifar_qresnet20",),
        batch_size=8,
        input=(3, 16, 16),
        steps=3,
        warmup=1,
        implementations={"cifar_qresnet20": _PAIR},
        threads=1,
        compile_models=(),
    ),
    "cpu": dict(
        models=_FAMILY20 + ("cifar_qresnet56",),
        batch_size=128,
        input=(3, 32, 32),
        # 5 timed rounds (quartiles over 5) after 1 warm-up: 11 + 2 made this section 15 of a cold
        # build's 52 minutes (the memory subprocess, launch counts and compiling cost the same at any count)
        steps=5,
        warmup=1,
        # The text's rows only (full adds the other neurons' naive rows and ResNet56's
        # frontier): the efficiency section is the largest part of a cold `make paper`.
        implementations=dict(
            {m: ("default",) for m in _FAMILY20[1:]},
            cifar_qresnet20=_FRONTIER,
            cifar_qresnet56=_PAIR,
        ),
        threads=2,
        compile_models=("cifar_qresnet20",),
    ),
    "full": dict(
        models=_FAMILY20 + _FAMILY56,
        batch_size=128,
        input=(3, 32, 32),
        steps=31,
        warmup=3,
        implementations=dict(
            {m: _PAIR for m in _FAMILY20[1:] + _FAMILY56[1:]},
            cifar_qresnet20=_FRONTIER + ("fused",),
            cifar_qresnet56=_FRONTIER,
        ),
        threads=None,
        compile_models=_FAMILY20,
    ),
}

# The model whose numbers the text quotes (its launches against their floor among them), and its baseline.
HEADLINE_MODEL = "cifar_qresnet20"
HEADLINE_BASE = "cifar_resnet20"

NAME = "efficiency"


def tiny_protocol(P: dict) -> dict:
    """TINY=1 caps of a full protocol (see :func:`protocol`)."""
    # The same rows and code paths (memory subprocesses, the limit) on batches of 16, and nothing
    # compiled: the timings of a TINY run say nothing anyway, and compiling on a CPU (minutes per
    # model; `make paper` and tests/test_compile.py compile) made this the slowest part of test-e2e.
    return dict(P, batch_size=16, steps=2, warmup=1, compile_models=())


protocol = protocols(PROTOCOLS, caps=tiny_protocol)


def data(profile: str, tiny: bool = False) -> str:
    """The data the section's numbers come from, in words: random batches (timing needs no data set)."""
    shape = "x".join(map(str, protocol(profile, tiny)["input"]))
    return f"random batches of {shape} images" + (", TINY=1: two timed steps" if tiny else "")


# Seconds of each computation on this project's 2-core build CPU: measured at smoke (a fresh cache:
# bench 27 s), cpu (a cold `make paper`: bench 381 s, compile 165 s, inference 4 s) and TINY=1 (bench
# 106 s); full is cpu's scaled by rows x rounds (27 x 34 against 13 x 6, half the rows ResNet56's),
# less on more cores.
SECONDS = {
    "smoke": dict(sizes=2, launch_floor=2, bench=30, inference=2),
    "cpu": dict(sizes=5, launch_floor=2, bench=400, compile=180, inference=5),
    "full": dict(sizes=10, launch_floor=2, bench=6000, compile=1400, inference=25),
    "tiny": dict(sizes=10, launch_floor=2, bench=120, inference=2),
}


def _bench_config(P: dict) -> dict:
    """The benchmark's configuration: its cache key (``machine``, ``torch``: where it was measured;
    ``columns``: bumped when rows gain fields)."""
    import torch

    impls = {m: list(v) for m, v in P["implementations"].items()}
    return dict(
        models=list(P["models"]),
        batch_size=P["batch_size"],
        input=list(P["input"]),
        steps=P["steps"],
        warmup=P["warmup"],
        implementations=impls,
        threads=P["threads"],
        machine=machine(threads=P["threads"]),  # where it is measured, at the protocol's threads
        torch=torch.__version__,
        columns=5,
    )


def plan(profile: str, tiny: bool = False) -> dict[str, Computation]:
    """The section's computations by role: model sizes, the launch floor, the benchmark (eager and,
    where the profile names ``compile_models``, compiled) and the inference timing (CPU timings, so
    never on a GPU)."""
    P = protocol(profile, tiny)
    s = SECONDS["tiny" if tiny else profile]
    config = _bench_config(P)
    out = dict(
        sizes=Computation(
            "efficiency_sizes",
            f"{experiment.__name__}:model_sizes",
            dict(models=_size_models(P), input=config["input"]),
            s["sizes"],
        ),
        launch_floor=Computation(
            "efficiency_launch_floor",
            f"{experiment.__name__}:extra_launches",
            dict(model=HEADLINE_MODEL),
            s["launch_floor"],
        ),
        bench=Computation("efficiency", f"{experiment.__name__}:bench_rows", config, s["bench"], measures_machine=True),
    )
    if P["compile_models"]:
        first = {m: ["default"] for m in P["compile_models"]}
        cconfig = dict(config, models=list(P["compile_models"]), implementations=first, compile=True, columns=5)
        out["compile"] = Computation(
            "efficiency_compile", f"{experiment.__name__}:bench_rows", cconfig, s["compile"], measures_machine=True
        )
    out["inference"] = Computation(
        "efficiency_inference", f"{experiment.__name__}:inference_ms", config, s["inference"], measures_machine=True
    )
    return out


def _size_models(P: dict) -> list[str]:
    """Every benchmarked model after its conventional baseline, each once."""
    from quadnn_paper import bench

    return list(dict.fromkeys(n for m in P["models"] for n in (bench.baseline_name(m), m)))


def launches(r: dict | None) -> str:
    """A row's kernel-launching operations per step and their ratio to the baseline's ("--": not counted)."""
    if r is None or "launches" not in r:
        return "--"
    return f"{r['launches']} ({r['launch_ratio']:.2f})" if "launch_ratio" in r else str(r["launches"])


def _label(r: dict) -> str:
    return r["implementation"] + (", compiled" if r.get("compiled") else "")


class Tables(NamedTuple):
    """The efficiency tables' rows (:func:`summary`)."""

    table: list[list]  # this machine's, one per model and implementation: step, time ratio, limit, memory, launches
    models: list[list]  # one per model: parameters, FLOPs, launches as built, the paper's s/epoch and its ratio
    gpu: list[list]  # measured on a GPU (docs/gpu/), never mixed with this machine's; "not measured" when none
    gpu_epoch: list[list]  # the engine's epoch measured on a GPU (:func:`gpu_epoch_table`)


def summary(results: dict) -> Tables:
    """The efficiency tables from ``results = dict(rows=..., compile_rows=..., gpu=..., epochs=...)``
    (quadnn_paper.bench's rows; compiled rows are ratios to the compiled baseline; ``gpu``, ``epochs``:
    a :class:`~..data.gpu_bench.GpuBench` and :class:`~..data.gpu_bench.GpuEpochs`, or None)."""
    from quadnn_paper.common.cells import Cell

    table, models = [], []
    eager = results["rows"]
    for r in eager + [r for r in results.get("compile_rows", []) if r["compiled"]]:
        depth, neuron = model_facts(r["model"])
        table.append(
            [
                f"ResNet{depth}",
                neuron,
                _label(r),
                _step_cell(r),
                spread(r, "time_ratio"),
                ratio(r.get("limit_ratio")),
                spread(r, "vs_limit"),
                ratio(r.get("mem_ratio")),
                launches(r),
            ]
        )
    # every model measured here and every model the paper timed ("--" where not measured here), by
    # depth, each depth's conventional network first
    names = dict.fromkeys([r["model"] for r in eager] + list(PAPER_EPOCH_SECONDS))
    order = {n: (model_facts(n)[0], model_facts(n)[1] != "conventional", i) for i, n in enumerate(names)}
    for name in sorted(names, key=order.get):
        r = find(eager, name, "conventional") or find(eager, name, "default")
        depth, neuron = model_facts(name)
        paper = PAPER_EPOCH_SECONDS.get(name)
        base = PAPER_EPOCH_SECONDS.get(f"cifar_resnet{depth}")
        models.append(
            [
                f"ResNet{depth}",
                neuron,
                r["params"] if r else "--",
                round(r["gflops"] / r["batch_size"] * 1e3, 1) if r else "--",
                launches(r),
                Cell(paper, decimals=2, paper=True) if paper else None,
                Cell(paper / base, decimals=2, paper=True) if paper and base else None,
            ]
        )
    return Tables(table, models, gpu_table(results.get("gpu")), gpu_epoch_table(results.get("epochs")))


GPU_HEADER = ["Depth", "Neuron", "Implementation", "Batch", "Step (ms)", "Time ratio [IQR]", "Memory ratio", "Launches"]


def gpu_table(bench) -> list[list]:
    """Rows of :data:`GPU_HEADER` for the rows measured on a GPU, or one row saying "not measured"."""
    if bench is None or not bench.rows:
        return [["not measured"] + ["--"] * (len(GPU_HEADER) - 1)]
    out = []
    for r in bench.rows:
        depth, neuron = model_facts(r["model"])
        out.append(
            [
                f"ResNet{depth}",
                neuron,
                _label(r),
                r["batch_size"],
                round(r["step_ms"], 1),
                spread(r, "time_ratio"),
                ratio(r.get("mem_ratio")),
                launches(r),
            ]
        )
    return out


# The engine's CIFAR-10 epoch on a GPU (make gpu-check's epoch rows, docs/gpu/ epoch*.json): seconds
# of one epoch (50,000 images, batch 128) eager and compiled (CUDA graphs), the compiled run's
# compilation in an empty inductor cache, the plain step under CUDA graphs times the epoch's steps.
GPU_EPOCH_HEADER = ["Depth", "Neuron", "Eager (s)", "Compiled (s)", "Compile, cold (s)", "Floor (s)", "Paper (s)"]


def _seconds(row: dict | None, key: str = "epoch_seconds"):
    """A row's seconds with two decimals ("--": not measured or not recorded)."""
    from quadnn_paper.common.cells import Cell

    v = row.get(key) if row else None
    return Cell(v, decimals=2) if v is not None else "--"


def _epoch_models(epochs) -> list[str]:
    """The measured models: conventional first, then by depth, as registered."""
    return sorted(epochs.models(), key=lambda m: (model_facts(m)[1] != "conventional", model_facts(m)[0], m))


def gpu_epoch_table(epochs) -> list[list]:
    """Rows of :data:`GPU_EPOCH_HEADER`, one per measured model, or one row saying "not measured".
    Compile seconds are a cold inductor cache's (what a first run pays; "--" when only a warm run
    was measured); the paper's seconds (its GPU) beside them."""
    from quadnn_paper.common.cells import Cell

    if epochs is None or not epochs.rows:
        return [["not measured"] + ["--"] * (len(GPU_EPOCH_HEADER) - 1)]
    out = []
    for m in _epoch_models(epochs):
        depth, neuron = model_facts(m)
        eager, compiled = epochs.row(m, False), epochs.row(m, True)
        cold = epochs.row(m, True, "cold")
        paper = PAPER_EPOCH_SECONDS.get(m)
        out.append(
            [
                f"ResNet{depth}",
                neuron,
                _seconds(eager),
                _seconds(compiled),
                _seconds(cold, "compile_seconds"),
                _seconds(eager, "floor_seconds"),
                Cell(paper, decimals=2, paper=True) if paper else "--",
            ]
        )
    return out


def gpu_epoch_variables(epochs) -> dict:
    """The text's numbers about the GPU epoch table: machine, date, folders, and for ResNet20 and
    QResNet20 the ratio of their epochs eager and compiled, the compiled epoch's speed-up over
    eager, and the compile seconds in a warm inductor cache ("--" where not measured)."""

    def ratio_of(a, b):
        return ratio(a["epoch_seconds"] / b["epoch_seconds"]) if a and b else "--"

    if epochs is None:
        rows = dict.fromkeys(("q", "r", "qc", "rc", "qw"))
    else:
        rows = dict(
            q=epochs.row("cifar_qresnet20", False),
            r=epochs.row("cifar_resnet20", False),
            qc=epochs.row("cifar_qresnet20", True),
            rc=epochs.row("cifar_resnet20", True),
            qw=epochs.row("cifar_qresnet20", True, "warm"),
        )
    return dict(
        GpuEpochMachine=epochs.machine if epochs else "not measured",
        GpuEpochDate=epochs.date if epochs else "--",
        GpuEpochSource=", ".join(epochs.folders) if epochs else "--",
        GpuEpochEagerRatio=ratio_of(rows["q"], rows["r"]),
        GpuEpochCompiledRatio=ratio_of(rows["qc"], rows["rc"]),
        GpuEpochQuadSpeedup=ratio_of(rows["q"], rows["qc"]),
        GpuEpochBaseSpeedup=ratio_of(rows["r"], rows["rc"]),
        GpuEpochQuadWarmCompile=f"{rows['qw']['compile_seconds']:.1f}" if rows["qw"] else "--",
    )


def _step_cell(row: dict) -> str:
    """A row's step time in ms, ``median [q1, q3]`` over its rounds: absolute times carry the
    machine's load round by round, which the ratios (taken within a round) do not."""
    q1, q3 = row.get("step_ms_q1"), row.get("step_ms_q3")
    return f"{row['step_ms']:.0f}" + (f" [{q1:.0f}, {q3:.0f}]" if q1 is not None and q3 is not None else "")


# The paper's QResNet20 / ResNet20 training time per epoch on its GPU (10.87 / 10.43 s): ours, every
# way we measured the same quotient, and whether the paper's value lies within our quartiles.
PAPER_RATIO_HEADER = ["Measured on", "What", "QResNet20 / ResNet20 [IQR]", "The paper's ratio"]


def paper_ratio_table(found: list[dict]) -> list[list]:
    """Rows of :data:`PAPER_RATIO_HEADER`."""
    if not found:
        return [["not measured"] + ["--"] * (len(PAPER_RATIO_HEADER) - 1)]
    return [[r["where"], r["what"], median_quartiles(r["value"], r["q1"], r["q3"]), r["against"]] for r in found]


# The paper's other timed networks (its CIFAR-10 table's "Time"), each against the conventional
# ResNet of its depth; QResNet20's verdict above weighs every ratio we measured, these this machine's
# bench step (macro word -> model). The paper also times depths 32 and 110, which no profile times.
PAPER_TIMED = {
    "ParabolicTwenty": "cifar_parabolic_resnet20",
    "PolyTwenty": "cifar_poly_resnet20",
    "QResFiftySix": "cifar_qresnet56",
    "ParabolicFiftySix": "cifar_parabolic_resnet56",
    "PolyFiftySix": "cifar_poly_resnet56",
}


# -- the section's outputs ------------------------------------------------------------------------
HEADER = [
    "Depth",
    "Neuron",
    "Implementation",
    "Step (ms) [IQR]",
    "Time ratio [IQR]",
    "Limit ratio",
    "Over limit [IQR]",
    "Memory ratio",
    "Launches (ratio)",
]
MODELS_HEADER = ["Depth", "Neuron", "Params", "MFLOPs/img", "Launches", "Paper s/epoch", "Paper ratio"]
LAUNCH_TARGET = 1.8  # the goal for the default's launches: at most 1.8x the baseline's, and below naive's
COMPILE_TARGET = 1.10  # compiled QResNet20 within 10% of its limit (against the compiled baseline)
_TARGETS = ("LaunchTarget", "CompileTarget")  # constants: shown even while the measurement is pending
DEPTHS = ((20, "Twenty"), (56, "FiftySix"))


def _pending_if(pending: bool, values: dict) -> dict:
    """``values``, or every measured one "pending" while its computation is not done (a runner's)."""
    return {k: PENDING if pending and k not in _TARGETS else v for k, v in values.items()}


def _check_equal(rows: list[dict]) -> None:
    """Every implementation's step must agree with the naive formulation's (the bench's check)."""
    wrong = [
        (r["model"], r["implementation"]) for r in rows if r["implementation"] != "conventional" and not r["equal"]
    ]
    if wrong:
        raise ValueError(f"an implementation disagrees with the naive formulation: {wrong}")


def _setting_variables(P: dict, machine: str) -> dict:
    return dict(Machine=machine, BatchSize=P["batch_size"], Input="x".join(map(str, P["input"])), Steps=P["steps"])


def _get(row: dict | None, key: str):
    return row[key] if row else None


def _launch_words(quad: dict | None, naive: dict | None, floor: int | None) -> tuple[str, str]:
    """Whether the default's launches meet :data:`LAUNCH_TARGET` (and stay below naive's), and
    whether they are at their floor ("--": not counted)."""
    met = "--"
    if quad is not None and naive is not None:
        met = "yes" if quad["launch_ratio"] <= LAUNCH_TARGET and quad["launches"] < naive["launches"] else "no"
    if quad is None or floor is None:
        return met, "--"
    above = quad["launches"] - floor
    return met, "yes" if above == 0 else f"no ({above} above)"


def _launch_variables(rows: list[dict], extra: int | None) -> dict:
    """The headline model's step against the baseline's: time, FLOPs, bandwidth, and its
    kernel-launching operations (what bounds a GPU step at CIFAR size) against their floor
    (the baseline's plus ``extra``)."""
    quad, naive = find(rows, HEADLINE_MODEL, "default"), find(rows, HEADLINE_MODEL, "naive")
    base = find(rows, HEADLINE_BASE, "conventional")
    floor = base["launches"] + extra if base is not None and extra is not None else None
    target_met, at_floor = _launch_words(quad, naive, floor)
    return dict(
        FlopsRatio=ratio(_get(quad, "flops_ratio")),
        MaxRelErr=max((r["max_rel_err"] for r in rows if "max_rel_err" in r), default=None),
        BandwidthGBs=round(quad["bandwidth_gbs"], 1) if quad else None,
        BaseLaunches=_get(base, "launches"),
        DefaultLaunches=_get(quad, "launches"),
        DefaultLaunchRatio=ratio(_get(quad, "launch_ratio")),
        NaiveLaunchRatio=ratio(_get(naive, "launch_ratio")),
        LaunchTarget=LAUNCH_TARGET,
        LaunchTargetMet=target_met,
        LaunchFloor=floor,
        LaunchFloorRatio=ratio(floor / base["launches"] if floor is not None else None),
        LaunchAtFloor=at_floor,
    )


def _gpu_variables(gpu) -> dict:
    """Where the GPU rows (docs/gpu/) come from, quadnn's default against naive on that GPU at each
    depth, and whether they support what the training engine runs on a GPU."""
    out = dict(
        GpuMachine=gpu.machine if gpu else "not measured",
        GpuDate=gpu.date if gpu else "--",
        GpuSource=gpu.folder if gpu else "--",
    )
    verdicts = []  # default against naive on the GPU, by the rule of this machine's rows
    for depth, word in DEPTHS:
        gd, gn = (find(gpu.rows, f"cifar_qresnet{depth}", i) if gpu else None for i in ("default", "naive"))
        verdicts.append(verdict(gd, gn))
        clause = (
            f"the default takes {spread(gd, 'time_ratio')} against naive's {spread(gn, 'time_ratio')} ({verdicts[-1]})"
        )
        out[f"Gpu{word}Clause"] = clause if gd and gn else "not measured on this GPU"
    pick = engine_gpu_pick()
    return dict(out, GpuEnginePick=pick, GpuEnginePickAgrees=pick_agrees(pick, verdicts))


def _depth_variables(rows: list[dict]) -> dict:
    """quadnn's default against naive at each depth, from the same run."""
    out = {}
    for depth, word in DEPTHS:
        d, n = find(rows, f"cifar_qresnet{depth}", "default"), find(rows, f"cifar_qresnet{depth}", "naive")
        out[word + "Measured"] = "yes" if d and n else "no"
        out[word + "LimitRatio"] = ratio(_get(d, "limit_ratio"))
        out[word + "DefaultTime"] = spread(d, "time_ratio")
        out[word + "NaiveTime"] = spread(n, "time_ratio")
        out[word + "DefaultVsLimit"] = spread(d, "vs_limit")
        out[word + "NaiveVsLimit"] = spread(n, "vs_limit")
        out[word + "DefaultMem"] = ratio(_get(d, "mem_ratio"))
        out[word + "NaiveMem"] = ratio(_get(n, "mem_ratio"))
        out[word + "Verdict"] = verdict(d, n)  # faster / slower / unresolved
        out[word + "Dominates"] = dominates(d, n)
    return out


def _budget_frontier(rows: list[dict]) -> tuple[list[tuple[float, dict]], float]:
    """The headline model's measured budgets and the one its frontier chooses (:func:`choose_budget`;
    the models' default where fewer than two are measured)."""
    from quadnn.recompute import DEFAULT_BUDGET

    points = frontier(rows, HEADLINE_MODEL, DEFAULT_BUDGET)
    naive = find(rows, HEADLINE_MODEL, "naive")
    return points, choose_budget(points, naive)[0] if len(points) > 1 else DEFAULT_BUDGET


def _point_variables(rows: list[dict]) -> dict:
    """The other points of the headline model's frontier where the profile measures them, the budget
    its frontier chooses against the models' default, and the two-convolution neurons."""
    from quadnn.recompute import DEFAULT_BUDGET

    out = {}
    for impl, key in (("fast", "AllFast"), ("budget=1.0", "BudgetOne"), ("budget=0", "BudgetZero")):
        r = find(rows, HEADLINE_MODEL, impl)
        out[key + "Time"] = spread(r, "time_ratio")
        out[key + "Mem"] = ratio(_get(r, "mem_ratio"))
    points, chosen = _budget_frontier(rows)
    out["FrontierBudgets"] = ", ".join(f"{b:g}" for b, _ in points)
    out["BudgetDefault"] = f"{DEFAULT_BUDGET:g}"
    out["BudgetChosen"] = f"{chosen:g}" if len(points) > 1 else "--"
    out["BudgetAgrees"] = "--" if len(points) < 2 else "yes" if chosen == DEFAULT_BUDGET else "no"
    for kind, name in (("Compact", "cifar_qresnet20_compact"), ("Parabolic", "cifar_parabolic_resnet20")):
        r = find(rows, name, "default")  # the two-convolution neurons: arithmetic about 2x
        out[kind + "TimeRatio"] = ratio(_get(r, "time_ratio"))
        out[kind + "FlopsRatio"] = ratio(_get(r, "flops_ratio"))
        out[kind + "LimitRatio"] = ratio(_get(r, "limit_ratio"))
        out[kind + "MemRatio"] = ratio(_get(r, "mem_ratio"))
    return out


def _compiled(compile_rows: list[dict]) -> tuple[dict | None, dict | None, dict | None]:
    """The compiled headline model, the compiled baseline and the eager headline model of the same run."""
    cq = find(compile_rows, HEADLINE_MODEL, "default", True)
    cb = find(compile_rows, HEADLINE_BASE, "conventional", True)
    return cq, cb, find(compile_rows, HEADLINE_MODEL, "default")


def _compile_variables(compile_rows: list[dict]) -> dict:
    """torch.compile (inductor) against eager and against the limit ("--" where the profile does not compile)."""
    cq, cb, eq = _compiled(compile_rows)
    return dict(
        CompileMeasured="yes" if cq else "no",
        CompiledBoth=int(bool(cq and cb)),  # the text's numbers of the compiled step exist (1) or not (0)
        CompiledBaseEagerRatio=ratio(_get(cb, "eager_ratio")),
        CompiledQuadEagerRatio=ratio(_get(cq, "eager_ratio")),
        CompiledTimeRatio=spread(cq, "time_ratio"),
        CompiledLimitRatio=ratio(_get(cq, "limit_ratio")),
        CompiledVsLimit=spread(cq, "vs_limit"),
        CompiledFlopsRatio=ratio(_get(cq, "flops_ratio")),
        CompiledConvRatio=ratio(_get(cq, "conv_ratio")),  # convolution time vs the baseline's
        CompiledOtherRatio=ratio(_get(cq, "other_ratio")),  # everything else vs the baseline's
        CompiledBaseCompileSeconds=round(cb["compile_s"]) if cb else "--",
        CompiledQuadCompileSeconds=round(cq["compile_s"]) if cq else "--",
        CompileTarget=COMPILE_TARGET,
        CompileTargetMet="--" if not cq else "yes" if cq["vs_limit"] <= COMPILE_TARGET else "no",
    )


def _inference_variables(infer: dict | None) -> dict:
    """Inference (eval forward, no gradient): quadnn's default against naive, interleaved."""
    d, n = _get(infer, "default"), _get(infer, "naive")
    return dict(
        InferDefaultMs=d,
        InferNaiveMs=n,
        InferRatio=ratio(d / n if infer else None),
    )


def _size_lines(sizes: dict[str, dict]) -> list[str]:
    return [f"{n:28s} {s['params']:>10,d} parameters {s['mflops']:9.2f} MFLOPs per image" for n, s in sizes.items()]


def _headline_lines(rows: list[dict] | None, compile_rows: list[dict] | None) -> list[str]:
    """The headline model's ratios, its budget frontier and, where compiled, its compiled ratios."""
    import json

    lines = []
    quad = find(rows or [], HEADLINE_MODEL, "default")
    if quad:
        keys = ("time_ratio", "limit_ratio", "vs_limit", "mem_ratio", "flops_ratio")
        lines.append(json.dumps({k: quad[k] for k in keys}))
        points, chosen = _budget_frontier(rows)
        frontier_text = [(b, round(r["time_ratio"], 3), round(r["mem_ratio"], 2)) for b, r in points]
        lines.append(f"frontier {frontier_text} chosen {chosen}")
    cq = _compiled(compile_rows or [])[0]
    if cq:
        keys = ("time_ratio", "limit_ratio", "vs_limit", "conv_ratio", "other_ratio", "eager_ratio", "compile_s")
        lines.append(json.dumps({k: cq[k] for k in keys}))
    return lines


def bench_table(rows: list[dict] | None) -> str:
    """:func:`quadnn_paper.bench.format_table` of rows, or "pending"."""
    from quadnn_paper import bench

    return PENDING if rows is None else bench.format_table(rows)


def outputs(results: Results) -> list:
    """The section's tables, variables and printed lines from its plan's ``results`` and the GPU
    records committed under docs/gpu/ (read here, not cached: a new record shows at once)."""
    from quadnn_paper.data import gpu_bench

    P = results.protocol
    machine = results.plan["bench"].config["machine"]
    rows, compile_rows, infer = results["bench"], results.get("compile", []), results["inference"]
    _check_equal((rows or []) + (compile_rows or []))
    gpu, epochs = gpu_bench.load(), gpu_bench.load_epochs()  # None: no GPU record committed yet
    T = summary(dict(rows=rows or [], compile_rows=compile_rows or [], gpu=gpu, epochs=epochs))
    pending = [what for what, r in (("eager rows", rows), ("compiled rows", compile_rows)) if r is None]
    T = T._replace(table=[[f"{PENDING} ({what})"] + ["--"] * (len(HEADER) - 1) for what in pending] + T.table)
    # the paper's QResNet20 / ResNet20 epoch ratio against every ratio of the two we measured, here and on a GPU
    found = paper_ratio_rows(rows or [], compile_rows or [], gpu, epochs, machine)
    variables = {
        **gpu_epoch_variables(epochs),
        "PaperRatioVerdict": PENDING if pending else paper_ratio_verdict(found),
        **{f"PaperRatio{w}": PENDING if rows is None else timed_verdict(rows, m) for w, m in PAPER_TIMED.items()},
        **_setting_variables(P, machine),
        **_pending_if(rows is None, _launch_variables(rows or [], results["launch_floor"])),
        **_gpu_variables(gpu),
        **_pending_if(rows is None, {**_depth_variables(rows or []), **_point_variables(rows or [])}),
        **_pending_if(compile_rows is None, _compile_variables(compile_rows or [])),
        **_pending_if(infer is None, _inference_variables(infer)),
    }
    table_lines = [str(row) for row in T.table + T.models + T.gpu + T.gpu_epoch]
    return [
        Lines([machine]),
        Lines(_size_lines(results["sizes"]), check=True),
        Lines([bench_table(rows)] + ([bench_table(compile_rows)] if "compile" in results else [])),
        Lines(table_lines + _headline_lines(rows, compile_rows)),
        Lines([str(infer if infer is not None else PENDING)]),
        Table("efficiency", HEADER, T.table, digits=3),
        Table("efficiency_models", MODELS_HEADER, T.models, digits=3),
        Table("efficiency_gpu", GPU_HEADER, T.gpu, digits=3),
        Table("efficiency_gpu_epoch", GPU_EPOCH_HEADER, T.gpu_epoch, digits=3),
        Table("efficiency_paper_ratio", PAPER_RATIO_HEADER, paper_ratio_table(found)),
        Variables(variables),
    ]
