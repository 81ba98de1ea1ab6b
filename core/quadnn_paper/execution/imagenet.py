"""One run of the paper's ImageNet protocol from the command line (under torchrun: DDP over the ranks).

torchrun --nproc_per_node=8 -m quadnn_paper.execution.imagenet --profile full --model imagenet_qresnet34
"""

from __future__ import annotations

from ..sections.imagenet import MODELS, PROTOCOLS, runs

__all__ = ["main"]


def main(argv=None) -> int:
    """``python -m quadnn_paper.execution.imagenet --profile full --model imagenet_qresnet34 [--device cuda]``:
    one run of the protocol through the engine (under torchrun: DDP over the ranks)."""
    import argparse

    from .train import ddp_session, print_result

    p = argparse.ArgumentParser(
        prog="python -m quadnn_paper.execution.imagenet",
        description="Train and 10-crop-evaluate one network of the paper's ImageNet "
        "table. `torchrun --nproc_per_node=G [--nnodes=N ...] -m "
        "quadnn_paper.execution.imagenet ...` for DDP.",
    )
    p.add_argument("--profile", choices=tuple(PROTOCOLS), default="full")
    p.add_argument("--model", required=True, help=f"one of {MODELS[18] + MODELS[34]}")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto", help="auto (cuda where available), cpu, cuda")
    p.add_argument(
        "--workers",
        type=lambda v: v if v == "auto" else int(v),
        default="auto",
        help="DataLoader workers per rank, or auto (SLURM_CPUS_PER_TASK, else this process's CPUs, less one)",
    )
    p.add_argument("--amp", action="store_true")
    p.add_argument("--data-root", default=None, help="folder holding imagenet/ (default data/)")
    p.add_argument("--out", default="runs/imagenet", help="cache directory (OUT/<run id>/)")
    ns = p.parse_args(argv)
    match = [c for c in runs(ns.profile, data_root=ns.data_root) if c.model == ns.model]
    if not match:
        p.error(
            f"--model {ns.model!r} is not in the {ns.profile} protocol; choose from "
            f"{sorted({c.model for c in runs(ns.profile, data_root=ns.data_root)})}"
        )
    try:
        cfg = match[0].replace(seed=ns.seed, device=ns.device, workers=ns.workers, amp=ns.amp, progress=True)
    except ValueError as e:
        p.error(str(e))
    with ddp_session(cfg.device):
        from ..engine import run

        print_result(run(cfg, ns.out))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
