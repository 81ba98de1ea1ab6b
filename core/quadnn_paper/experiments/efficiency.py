"""The efficiency section's measurements: model sizes, the launch floor, the benchmark's rows (eager
and compiled) and the inference timing, each a plain function of its configuration that the
section computes as a cached computation in the process that runs it (the machine is measured)."""

from __future__ import annotations

from quadnn_paper.common.machine import torch_threads

__all__ = ["model_sizes", "extra_launches", "bench_rows", "inference_ms", "inference_times"]


def model_sizes(models: list[str], input: list[int]) -> dict[str, dict]:
    """Parameters and forward MFLOPs per image of each model at the input size (deterministic)."""
    import torch

    from quadnn_paper import bench

    x = torch.zeros(1, *input)
    out = {}
    for name in models:
        model = bench.create(name, in_chans=input[0]).eval()
        params = sum(p.numel() for p in model.parameters())
        out[name] = dict(params=params, mflops=bench.forward_gflops(model, x) * 1e3)
    return out


def extra_launches(model: str) -> int:
    """The fewest kernel-launching operations ``model``'s eager step needs beyond its conventional
    twin's, keeping what the default keeps (:func:`quadnn_paper.bench.launch_floor` less the twin's)."""
    from quadnn_paper import bench

    return bench.launch_floor(bench.create(model), 0)


def bench_rows(
    models, batch_size, input, steps, warmup, implementations, threads, machine, torch, columns, compile=False
) -> list[dict]:
    """:func:`quadnn_paper.bench.run` of the configuration (compiled: the compiled rows beside the
    eager ones, no memory rows); ``machine``, ``torch`` and ``columns`` only key the cache."""
    from quadnn_paper import bench

    options = dict(memory=False, compile=True) if compile else {}
    with torch_threads(threads):  # bench.run sets them; the submitting process gets its own back
        return bench.run(models, batch_size, tuple(input), steps, warmup, implementations, threads=threads, **options)


def inference_ms(
    models, batch_size, input, steps, warmup, implementations, threads, machine, torch, columns
) -> dict[str, float]:
    """:func:`inference_times` at the benchmark's configuration (keyed by it) and threads."""
    with torch_threads(threads):
        return inference_times(dict(input=input, batch_size=batch_size, steps=steps))


def inference_times(P: dict, model: str = "cifar_qresnet20", implementations=("default", "naive")) -> dict:
    """Median forward time (ms) of ``model`` in eval mode under ``torch.no_grad()`` per implementation,
    the implementations interleaved round by round (the same load for each)."""
    import statistics
    import time

    import torch

    from quadnn_paper import bench

    torch.manual_seed(0)
    shape = tuple(P["input"])
    xb = torch.randn(P["batch_size"], *shape)
    models = {
        impl: bench.set_implementation(bench.create(model, in_chans=shape[0]), impl).eval() for impl in implementations
    }
    times = {impl: [] for impl in models}
    with torch.no_grad():
        for m in models.values():
            m(xb)  # warm-up
        for _ in range(max(2, P["steps"])):
            for impl, m in models.items():
                t0 = time.perf_counter()
                m(xb)
                times[impl].append(time.perf_counter() - t0)
    return {impl: 1000 * statistics.median(t) for impl, t in times.items()}
