"""A benchmark row as quadnn_paper.bench.run gives it (the fields the sections read), for tests that
format, compare or summarise rows without timing anything."""


def bench_row(model, impl, compiled=False, device="cpu", **kw):
    """One row of ``model`` with implementation ``impl`` against its conventional baseline; ``kw``
    sets or adds fields."""
    base = "cifar_resnet56" if "56" in model else "cifar_resnet20"
    r = dict(
        model=model,
        implementation=impl,
        baseline=base,
        compiled=compiled,
        device=device,
        machine="M",
        batch_size=8,
        step_ms=10.0,
        params=1000,
        gflops=0.16,
        launches=174,
        launch_ratio=1.0,
    )
    for k in ("time_ratio", "vs_limit"):
        r.update({k: 1.5, k + "_q1": 1.4, k + "_q3": 1.6})
    return dict(r, **kw)
