"""Choose the cpu profile's CIFAR stand-in protocol by measurement: for each candidate (resolution,
training images, epochs) train the headline pair (ResNet20 and ReLinear-sg QResNet20, the paper's
gamma rescaled by the rule of ``experiments.cifar.gamma_scale``) at a few seeds through the engine, and record
each arm's error, the paired spread and the CPU-seconds a run costs. Also times one training step
of each arm at every resolution (the CPU convolution has slow paths at some sizes).

    .venv/bin/python tools/standin_protocol.py --out docs/standin-protocol.json --seeds 4 --workers 2
    .venv/bin/python tools/standin_protocol.py --out docs/standin-protocol.json --markdown  # the table only

A candidate evaluates the 10,000 test images after every epoch or after the last only (as the cpu
profile trains: ``eval_every_epoch=False``); its CPU-seconds include what it evaluates. Results are
cached under ``--cache`` (engine runs by configuration) and each finished run's
record (error, CPU-seconds) is kept in ``<out>.runs.jsonl``, so a re-run trains only what is missing.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import math
import statistics
import time
from dataclasses import replace
from pathlib import Path

CANDIDATES = [  # (dataset, training images, epochs, test set after every epoch); the cpu profile's last
    ("fashion_mnist16", 5_000, 8, True),
    ("fashion_mnist16", 10_000, 6, True),
    ("fashion_mnist16", 5_000, 6, False),
    ("fashion_mnist16", 4_000, 6, False),
]
WIDTH, BATCH = 0.25, 64


def _configs(dataset: str, images: int, epochs: int, every_epoch: bool, seed: int):
    from quadnn_paper.experiments import cifar as cs

    recipe = {**cs.RESNET_RECIPE, "dataset": dataset, "batch_size": BATCH, "epochs": epochs, "train_limit": images}
    recipe["eval_every_epoch"] = every_epoch
    protocol = dict(recipe=recipe, threads=1, split_per_seed=True, gamma_scale=cs.gamma_scale(recipe))
    rows = cs.comparison_rows()
    conv, quad = cs.row_for(rows, "cifar_resnet20"), cs.row_for(rows, "cifar_qresnet20", "ri")
    return [cs.config_for(r, protocol, seed, width=WIDTH) for r in (conv, quad)]


def _train(cfg, cache: str) -> dict:
    from quadnn_paper.engine import run

    t = time.process_time()
    res = run(cfg, cache)
    return dict(
        run_id=cfg.run_id,
        model=cfg.model,
        seed=cfg.seed,
        error=res["test_error"],
        status=res["status"],
        cpu_s=time.process_time() - t,
        changed=(res.get("departure") or {}).get("changed"),
    )


def _step_ms(dataset_size: int, model: str, steps: int = 15) -> float:
    import timm
    import torch

    import quadnn.models  # noqa: F401

    torch.set_num_threads(1)
    net = timm.create_model(model, num_classes=10, in_chans=1, width=WIDTH)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(BATCH, 1, dataset_size, dataset_size), torch.randint(0, 10, (BATCH,))
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
        times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times[3:])


def markdown(measured: dict) -> str:
    """The measurement as the table ``docs/standin-protocol.md`` shows."""
    lines = [
        "| data | training images x epochs | ResNet20 error % (seed SD) | QResNet20 error % (seed SD) "
        "| mean difference | paired SD | CPU-s a pair | predictions changed % | seeds for 0.5 after Holm (10) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in measured["candidates"]:
        lines.append(
            f"| {r['dataset']} | {r['train_images']:,} x {r['epochs']}{'' if r['eval_every_epoch'] else ' (tested once)'} | {r['resnet20_error']:.2f} ({r['resnet20_seed_sd']:.2f}) "
            f"| {r['qresnet20_error']:.2f} ({r['qresnet20_seed_sd']:.2f}) | {r['mean_difference']:+.2f} | {r['paired_sd']:.2f} "
            f"| {r['pair_cpu_s']:.0f} | {r['changed']:.1f} | {r['seeds_for_half_point']} |"
        )
    steps = ", ".join(f"{k} {v:.0f} ms" for k, v in measured["step_ms"].items())
    return (
        "\n".join(lines)
        + f"\n\nOne training step (batch {measured['batch']}, width {measured['width']}, one thread): {steps}.\n"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--cache", default="build/standin-protocol")
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--markdown", action="store_true", help="print the table of --out as markdown, train nothing")
    args = ap.parse_args()
    if args.markdown:
        with open(args.out) as fh:
            print(markdown(json.load(fh)))
        return
    from quadnn_paper.analysis import stats

    steps = {f"{s}px {m}": _step_ms(s, m) for s in (16, 28, 32) for m in ("cifar_resnet20", "cifar_qresnet20")}
    print("step ms:", {k: round(v, 1) for k, v in steps.items()}, flush=True)
    jobs = [(c, cfg) for c in CANDIDATES for seed in range(args.seeds) for cfg in _configs(*c, seed)]
    jobs = [(c, replace(cfg, progress=False)) for c, cfg in jobs]
    # every finished run's record, kept as it comes (a cached run costs nothing the second time)
    log = Path(args.out).with_suffix(".runs.jsonl")
    seen = {r["run_id"]: r for r in map(json.loads, log.read_text().splitlines())} if log.exists() else {}
    done: dict = {}
    for c, cfg in jobs:
        if cfg.run_id in seen:
            done.setdefault(c, []).append(seen[cfg.run_id])
    with cf.ProcessPoolExecutor(args.workers) as pool, log.open("a") as fh:
        futures = {pool.submit(_train, cfg, args.cache): c for c, cfg in jobs if cfg.run_id not in seen}
        for f in cf.as_completed(futures):
            r = f.result()
            done.setdefault(futures[f], []).append(r)
            fh.write(json.dumps(r) + "\n")
            fh.flush()
            print(futures[f], r, flush=True)
    rows = []
    for c in CANDIDATES:
        rs = done[c]
        by = {(r["model"], r["seed"]): r for r in rs}
        diffs = [by["cifar_resnet20", s]["error"] - by["cifar_qresnet20", s]["error"] for s in range(args.seeds)]
        sd = statistics.stdev(diffs)
        cost = sum(r["cpu_s"] for r in rs) / args.seeds  # CPU-seconds of one pair
        errs = {m: [by[m, s]["error"] for s in range(args.seeds)] for m in ("cifar_resnet20", "cifar_qresnet20")}
        rows.append(
            dict(
                dataset=c[0],
                train_images=c[1],
                epochs=c[2],
                eval_every_epoch=c[3],
                seeds=args.seeds,
                resnet20_error=statistics.mean(errs["cifar_resnet20"]),
                resnet20_seed_sd=statistics.stdev(errs["cifar_resnet20"]),
                qresnet20_error=statistics.mean(errs["cifar_qresnet20"]),
                qresnet20_seed_sd=statistics.stdev(errs["cifar_qresnet20"]),
                mean_difference=statistics.mean(diffs),
                paired_sd=sd,
                pair_cpu_s=cost,
                changed=statistics.median(r["changed"] for r in rs if r["changed"] is not None),
                # seeds for a detectable difference of 0.5 points at the family's strictest Holm level
                seeds_for_half_point=next(
                    (n for n in range(3, 200) if stats.detectable(sd, n, 1 - 0.05 / 10) <= 0.5), math.inf
                ),
            )
        )
    with open(args.out, "w") as fh:
        json.dump(dict(step_ms=steps, candidates=rows, width=WIDTH, batch=BATCH), fh, indent=1)
    for r in rows:
        print(r)


if __name__ == "__main__":
    main()
