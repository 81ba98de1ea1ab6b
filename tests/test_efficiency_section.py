"""The efficiency section as a declaration: its outputs from its computations' results, including
results a runner has not delivered yet (None), without running the benchmark."""

import pytest
from bench_rows import bench_row

from quadnn_paper.common.outputs import Lines, Table, Variables
from quadnn_paper.engine import Results, work_id
from quadnn_paper.experiments import efficiency as XE
from quadnn_paper.report import Report
from quadnn_paper.sections import efficiency as E


def row(model, impl, **kw):
    """A row as the section reads it: the bench's fields and the ratios its tables show."""
    fields = dict(flops_ratio=1.0, limit_ratio=2.0, mem_ratio=1.0, bandwidth_gbs=3.81, equal=True)
    return bench_row(model, impl, baseline="cifar_resnet20", **{**fields, **kw})


def smoke_results(**by_role) -> Results:
    """The smoke plan's results: the cheap computations done, the others as given."""
    done = dict(sizes={"cifar_resnet20": dict(params=1000, mflops=20.0)}, launch_floor=144)
    plan = E.plan("smoke")
    return Results.of(E, "smoke", {work_id(c): {**done, **by_role}.get(role) for role, c in plan.items()})


ROWS = [
    row("cifar_resnet20", "conventional"),
    row("cifar_qresnet20", "default", launches=318, launch_ratio=1.83, max_rel_err=2e-7),
    row("cifar_qresnet20", "naive", launches=426, launch_ratio=2.45, max_rel_err=0.0),
]


def variables(outputs) -> dict:
    return next(o for o in outputs if isinstance(o, Variables)).values


def test_pending_work_shows_as_pending_with_the_same_variables(tmp_path):
    done = E.outputs(smoke_results(bench=ROWS, inference={"default": 2.0, "naive": 3.0}))
    pending = E.outputs(smoke_results())
    assert list(variables(pending)) == list(variables(done))  # the text's macros exist either way
    v = variables(pending)
    for name in ("BaseLaunches", "TwentyDefaultTime", "PaperRatioVerdict", "InferRatio", "LaunchAtFloor"):
        assert v[name] == "pending"
    assert v["LaunchTarget"] == E.LAUNCH_TARGET and v["Machine"] == variables(done)["Machine"]
    table = next(o for o in pending if isinstance(o, Table) and o.name == "efficiency")
    assert table.rows[0][0] == "pending (eager rows)"
    d = variables(done)
    assert d["LaunchFloor"] == 174 + 144 and d["LaunchAtFloor"] == "yes" and d["InferRatio"] == "0.67"
    assert d["TwentyDefaultTime"] == "1.50 [1.40, 1.60]"
    with Report(tmp_path, "efficiency", "smoke", "test") as report:  # every output renders
        for o in pending + done:
            report.write(o)
    (checked,) = [o.text for o in done if isinstance(o, Lines) and o.check]  # what nbval compares: sizes only
    assert [line.split() for line in checked] == [
        ["cifar_resnet20", "1,000", "parameters", "20.00", "MFLOPs", "per", "image"]
    ]


def test_an_implementation_that_disagrees_with_naive_stops_the_section():
    wrong = ROWS[:2] + [row("cifar_qresnet20", "naive", equal=False)]
    with pytest.raises(ValueError, match="disagrees with the naive formulation"):
        E.outputs(smoke_results(bench=wrong))


def test_the_benchmark_keeps_its_cache_names_and_configuration():
    """The notebook's cache names and configuration (their hashes key results already measured)."""
    work = {c.name: c for c in E.plan("cpu").values()}
    bench, compiled, inference = work["efficiency"], work["efficiency_compile"], work["efficiency_inference"]
    assert inference.config == bench.config and bench.config["columns"] == 5
    assert compiled.config == dict(
        bench.config, models=["cifar_qresnet20"], implementations={"cifar_qresnet20": ["default"]}, compile=True
    )
    assert bench.config["machine"].endswith(f"{E.PROTOCOLS['cpu']['threads']} threads, torch {bench.config['torch']}")
    assert all(c.device == "cpu" for c in work.values())  # CPU timings


def test_a_timing_leaves_the_processs_thread_count_as_it_found_it():
    """The timings run in the submitting process (measures_machine): they set torch's threads to the
    protocol's and give the process its own count back."""
    import torch

    before = torch.get_num_threads()
    config = dict(input=[3, 8, 8], batch_size=2, steps=1, warmup=0, implementations={}, machine="M", torch="t")
    torch.set_num_threads(2)
    try:
        times = XE.inference_ms(models=["cifar_qresnet20"], threads=1, columns=5, **config)
        assert set(times) == {"default", "naive"} and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
