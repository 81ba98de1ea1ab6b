"""Training-step cost of quadratic networks against their conventional baseline and against the
fastest a quadratic layer could be on the same machine.

    python -m quadnn_paper.bench [--models ...] [--batch-size 128] [--input 3x32x32] [--steps N]
                                 [--implementations ...] [--device cpu|cuda] [--compile] [--json]

The rows and their columns: :mod:`quadnn_paper.bench.harness`. ``--json`` prints one JSON object
per row; otherwise a table under a line naming the machine.
"""

from __future__ import annotations

import argparse
import json

import torch

from quadnn_paper.common.machine import machine

from .harness import format_table, run
from .memory import step_memory
from .models import DEFAULT_MODELS, IMPLEMENTATIONS, check_implementation

__all__ = ["main", "parse_input", "MAX_INPUT_SIDE", "MAX_INPUT_CHANNELS"]

MAX_INPUT_SIDE, MAX_INPUT_CHANNELS = 1024, 64  # (a batch of 3x4000x4000 images needs tens of GB)


def parse_input(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(v) for v in text.lower().split("x"))
    except ValueError:
        shape = ()
    if len(shape) != 3 or min(shape) < 1:
        raise ValueError(f"--input must look like 3x32x32 (channels x height x width), got {text!r}")
    if max(shape[1:]) > MAX_INPUT_SIDE or shape[0] > MAX_INPUT_CHANNELS:
        raise ValueError(
            f"--input {text!r} is larger than a benchmark input may be (at most {MAX_INPUT_CHANNELS} channels and "
            f"{MAX_INPUT_SIDE} pixels a side; ImageNet's is 3x224x224)"
        )
    return shape


def _input_type(text: str) -> tuple[int, ...]:
    """``--input`` as argparse reads it: a bad value is argparse's one line, not a traceback."""
    try:
        return parse_input(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--input ")) from None


def _at_least(low: int):
    def read(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {text!r}")
        return value

    read.__name__ = f"integer >= {low}"
    return read


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m quadnn_paper.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS), help="timm names of quadratic models")
    p.add_argument("--baseline", default=None, help="conventional model to compare with (default: same depth)")
    p.add_argument("--batch-size", type=_at_least(1), default=128)
    p.add_argument("--input", type=_input_type, default="3x32x32", help="CxHxW")
    p.add_argument(
        "--steps", type=_at_least(1), default=10, help="timed rounds (each times every row once) after warm-up"
    )
    p.add_argument("--warmup", type=_at_least(0), default=2)
    p.add_argument(
        "--implementations",
        nargs="+",
        default=["default", "naive"],
        help=f"any of {', '.join(IMPLEMENTATIONS)}, or budget=B (plan_recompute at budget B)",
    )
    p.add_argument("--device", default="cpu", help="cpu or cuda[:index]")
    p.add_argument("--threads", type=_at_least(1), default=None, help="torch intra-op threads (default: torch's)")
    p.add_argument("--no-memory", action="store_true", help="skip the memory measurement")
    p.add_argument("--no-limit", action="store_true", help="skip the limit's convolution and bandwidth timings")
    p.add_argument(
        "--compile",
        action="store_true",
        help="also time the baseline and each model's first implementation under torch.compile",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per row")
    p.add_argument("--_memory", nargs="+", metavar="MODEL IMPL", help=argparse.SUPPRESS)  # pairs
    return p


def _check_device(p: argparse.ArgumentParser, args) -> torch.device:
    """The device ``--device`` names, after the implementations are checked (argparse's one line)."""
    try:
        for impl in args.implementations:
            check_implementation(impl)
        device = torch.device(args.device)
        if device.type not in ("cpu", "cuda"):
            raise ValueError(f"--device must be cpu or cuda[:index], got {args.device!r}")
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"--device {args.device}: CUDA is not available here (valid: cpu)")
    except (ValueError, RuntimeError) as e:
        p.error(str(e))
    return device


def _memory_rows(p: argparse.ArgumentParser, args) -> int:
    """The memory subprocess (``--_memory MODEL IMPL ...``): one peak in MB per line, per pair."""
    pairs = args._memory
    if len(pairs) % 2:
        p.error(f"--_memory takes MODEL IMPL pairs, got {pairs}")
    for name, impl in zip(pairs[::2], pairs[1::2]):
        print(step_memory(name, impl, args.batch_size, args.input, args.threads), flush=True)
    return 0


def main(argv=None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    shape = args.input  # (parsed and bounded by argparse)
    device = _check_device(p, args)
    if args._memory:
        return _memory_rows(p, args)
    try:
        rows = run(
            args.models,
            args.batch_size,
            shape,
            args.steps,
            args.warmup,
            tuple(args.implementations),
            args.baseline,
            not args.no_memory,
            args.threads,
            compile=args.compile,
            device=device,
            limit=not args.no_limit,
        )
    except ValueError as e:  # a bad model name or baseline: say it like argparse does
        p.error(str(e))
    if args.json:
        for r in rows:
            print(json.dumps(r))
    else:
        print(
            f"# {machine(device)}; batch {args.batch_size}, input {'x'.join(map(str, shape))}, median and quartiles over "
            f"{args.steps} rounds"
        )
        print(format_table(rows))
    return 0
