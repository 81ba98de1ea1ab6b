"""``quadnn-train``: train one configuration of the engine from the command line.

    quadnn-train --profile cpu --model cifar_qresnet20 --relinear sg --lr-g 1e-4   # digits stand-in
    quadnn-train --model cifar_qresnet56 --dataset cifar10 --device cuda             # the paper's recipe
    torchrun --nproc_per_node=2 -m quadnn_paper.execution.train --dataset digits --epochs 2    # DDP (gloo on CPU)

Every flag maps onto a field of :class:`quadnn_paper.engine.RunConfig` and is checked before
anything runs (a bad value ends in a usage error naming the value and what is valid). Results
go to ``OUT/<run id>/``; a finished configuration is not run again and an interrupted one
resumes from its last checkpoint.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys

from ..common.files import NO_LOCKS, CacheWriteError
from ..common.profiles import PROFILES
from ..engine import RunConfig, run
from ..engine.config import DEVICES, OPTIMIZERS, QUADRATIC_DECAY, QUADRATIC_INIT, RELINEAR, SCHEDULES, TASKS

__all__ = ["main", "config_from_args", "PROFILE_DEFAULTS", "ddp_session", "print_result"]

# --profile fills defaults for a quick start; explicit flags override them.
PROFILE_DEFAULTS = {
    "smoke": dict(dataset="digits", epochs=2),
    "cpu": dict(dataset="digits", epochs=12),
    "full": dict(dataset="cifar10", epochs=200),
}
assert set(PROFILE_DEFAULTS) == set(PROFILES)


def _number(kind, lo=None, hi=None, lo_open=False):
    """An argparse type: a finite ``kind`` within [lo, hi] (lo excluded when ``lo_open``)."""

    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"{text!r} is not finite")
        if lo is not None and (v < lo or (lo_open and v == lo)):
            raise argparse.ArgumentTypeError(f"{text} must be {'>' if lo_open else '>='} {lo}")
        if hi is not None and v > hi:
            raise argparse.ArgumentTypeError(f"{text} must be <= {hi}")
        return v

    return parse


# Bounds that no real run comes near, so a typo is a usage error, not an overflow deep in torch.
MAX_WIDTH = 64.0
MAX_BATCH = 1 << 20


def _device(text: str) -> str:
    """An argparse type: one of DEVICES, or cuda:N with N a non-negative integer (what torch accepts)."""
    name, colon, index = text.partition(":")
    if name not in DEVICES or (colon and (name in ("auto", "cpu") or not index.isdigit())):
        raise argparse.ArgumentTypeError(
            f"{text!r}: device must be one of {', '.join(DEVICES)} or cuda:N (N the GPU's index, e.g. cuda:0)"
        )
    return text


def _json_object(text: str) -> dict:
    try:
        v = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"{text!r} is not JSON ({e.msg})") from None
    if not isinstance(v, dict):
        raise argparse.ArgumentTypeError(
            f"{text!r} must be a JSON object of keyword arguments, e.g. '{{\"drop_rate\": 0.1}}'"
        )
    return v


def _parser() -> argparse.ArgumentParser:
    d = RunConfig()
    p = argparse.ArgumentParser(
        prog="quadnn-train",
        description=__doc__.split("\n\n")[0],
        # no ArgumentDefaultsHelpFormatter: each help names its default itself (the flags default
        # to None so that --profile can fill what is not given), which it would print a second time
    )
    p.add_argument(
        "--profile",
        choices=PROFILES,
        default=None,
        help="fill defaults for a profile (smoke/cpu: digits with few epochs; full: CIFAR-10, 200 epochs)",
    )
    _what_is_trained(p.add_argument_group("what is trained").add_argument, d)
    _optimiser(p.add_argument_group("optimiser").add_argument, d)
    _relinear(p.add_argument_group("ReLinear").add_argument, d)
    _schedule(p.add_argument_group("learning-rate schedule").add_argument, d)
    _how_it_runs(p.add_argument_group("how it runs").add_argument, d)
    return p


def _what_is_trained(a, d: RunConfig) -> None:
    a("--task", choices=TASKS, default=None, help=f"what is trained (default {d.task})")
    a("--model", default=None, help=f"timm model name, e.g. cifar_qresnet20, cifar_resnet56 (default {d.model})")
    width = _number(float, 0, MAX_WIDTH, lo_open=True)
    a("--width", type=width, default=None, help=f"channel width multiplier of quadnn's models (default {d.width})")
    a("--model-kwargs", type=_json_object, default=None, help="extra model keyword arguments as a JSON object")
    a("--task-kwargs", type=_json_object, default=None, help="the task's own settings as a JSON object")
    a("--dataset", default=None, help=f"data set, e.g. cifar10, cifar100, digits (default {d.dataset})")
    a("--data-dir", default=None, help=f"where the data lives (default {d.data_dir})")
    a("--train-limit", type=_number(int, 0), default=None, help="train on the first N images only (0: all)")
    a("--epochs", type=_number(int, 1), default=None, help=f"training epochs (default {d.epochs})")
    a("--batch-size", type=_number(int, 1, MAX_BATCH), default=None, help=f"global batch size (default {d.batch_size})")


def _optimiser(a, d: RunConfig) -> None:
    nonneg = _number(float, 0)
    a("--optimizer", choices=OPTIMIZERS, default=None, help=f"optimiser (default {d.optimizer})")
    a("--lr", type=nonneg, default=None, help=f"learning rate gamma_r of the linear parameters (default {d.lr})")
    a(
        "--momentum",
        type=_number(float, 0, 0.999999),
        default=None,
        help=f"SGD momentum / Adam beta1 (default {d.momentum})",
    )
    a("--weight-decay", type=nonneg, default=None, help=f"weight decay (default {d.weight_decay})")
    a(
        "--quadratic-decay",
        choices=QUADRATIC_DECAY,
        default=None,
        help="weight decay of the quadratic terms: toward their ReLinear reference, decoupled ('reference'), "
        f"or coupled L2 toward 0 as the official code ('zero') (default {d.quadratic_decay})",
    )


def _relinear(a, d: RunConfig) -> None:
    nonneg = _number(float, 0)
    a("--relinear", choices=RELINEAR, default=None, help=f"ReLinear variant (default {d.relinear})")
    a(
        "--quadratic-init",
        choices=QUADRATIC_INIT,
        default=None,
        help="where the quadratic terms start: ReLinear's reference ('reference') or drawn as torch draws "
        f"the linear weight ('random', training without ReLinear) (default {d.quadratic_init})",
    )
    a(
        "--lr-g",
        type=nonneg,
        default=None,
        help=f"learning rate gamma_g of the gate terms, ReLinear-sg (default {d.lr_g})",
    )
    a(
        "--lr-b",
        type=nonneg,
        default=None,
        help="learning rate gamma_b of the power terms, ReLinear-sg (default: --lr-g)",
    )
    a("--alpha-g", type=nonneg, default=None, help=f"shrink factor of the gate terms (default {d.alpha_g})")
    a("--alpha-b", type=nonneg, default=None, help="shrink factor of the power terms (default: --alpha-g)")


def _schedule(a, d: RunConfig) -> None:
    pos, frac = _number(float, 0, lo_open=True), _number(float, 0, 1, lo_open=True)
    a("--schedule", choices=SCHEDULES, default=None, help=f"learning-rate schedule (default {d.schedule})")
    a(
        "--milestones",
        type=frac,
        nargs="+",
        default=None,
        help=f"multistep milestones as fractions of --epochs in (0, 1] (default {' '.join(map(str, d.milestones))})",
    )
    a("--lr-decay", type=pos, default=None, help=f"multistep decay factor (default {d.lr_decay})")
    a(
        "--warmup-epochs",
        type=_number(int, 0),
        default=None,
        help=f"epochs at a tenth of every rate before the schedule, as He et al.'s ResNet110 (default {d.warmup_epochs})",
    )
    a("--dim-alpha", type=pos, default=None, help=f"diminishing schedule: lr_t = lr*a/(a+t) (default {d.dim_alpha})")


def _how_it_runs(a, d: RunConfig) -> None:
    a("--rezero", action="store_true", default=None, help="ReZero residual blocks (cifar_* models)")
    a("--seed", type=_number(int, 0), default=None, help=f"random seed (default {d.seed})")
    a("--out", metavar="DIR", default="runs", help="cache directory: results go to OUT/<run id>/ (default runs)")
    a("--device", type=_device, default=None, help=f"one of {DEVICES} or cuda:N (default {d.device})")
    a("--amp", action="store_true", default=None, help="bf16 autocast")
    a(
        "--compile",
        action="store_true",
        default=None,
        help="torch.compile the model (on CUDA under CUDA graphs, mode "
        "reduce-overhead); trains on full batches only (the epoch's last, smaller batch is skipped), so "
        "a compiled run is another run; inductor's caches go to OUT/inductor/",
    )
    a("--threads", type=_number(int, 1), default=None, help="torch CPU threads (default: torch's choice)")
    a("--no-progress", dest="progress", action="store_false", default=None, help="no progress bar")


def config_from_args(argv=None) -> tuple[RunConfig, str]:
    """``(config, out)`` from the command line; a bad value ends in ``SystemExit(2)`` with a usage error."""
    p = _parser()
    ns = vars(p.parse_args(argv))
    out = ns.pop("out")
    if os.path.exists(out) and not os.path.isdir(out):
        p.error(f"--out {out!r} exists and is not a directory")
    fields = dict(PROFILE_DEFAULTS[ns.pop("profile")]) if ns.get("profile") else {}
    ns.pop("profile", None)
    fields.update({k: v for k, v in ns.items() if v is not None})
    if "milestones" in fields:
        fields["milestones"] = tuple(fields["milestones"])
    from ..engine.tasks import task_settings

    task = fields.get("task", RunConfig.task)
    unknown = sorted(set(fields.get("task_kwargs", {})) - set(task_settings(task)))
    if unknown:
        p.error(f"--task-kwargs {unknown} unknown for task {task}; valid: {sorted(task_settings(task)) or 'none'}")
    try:
        return RunConfig(**fields), out
    except ValueError as e:
        p.error(str(e))


@contextlib.contextmanager
def ddp_session(device: str):
    """The process group for the run when launched with WORLD_SIZE > 1 (torchrun, SLURM tasks),
    torn down after it."""
    import torch.distributed as dist

    from ..engine.distributed import init_distributed

    ddp = not dist.is_initialized() and init_distributed(device)
    try:
        yield
    finally:
        if ddp:
            dist.destroy_process_group()


def print_result(res: dict) -> None:
    from ..engine.distributed import world

    if world()[0] == 0:
        keys = ("status", "run_id", *res.get("metrics", {}), "epochs_run", "epoch_time", "params")
        print(json.dumps({k: res.get(k) for k in keys}))


def main(argv=None) -> int:
    cfg, out = config_from_args(argv)
    with ddp_session(cfg.device):
        try:
            res = run(cfg, out, same_world=True)
        except (ValueError, FileNotFoundError) as e:
            print(f"quadnn-train: error: {e}", file=sys.stderr)
            return 2
        except CacheWriteError as e:  # disk full, quota, read-only: the path and the cause, one line
            print(f"quadnn-train: error: {e.strerror}", file=sys.stderr)
            return 1
        except OSError as e:
            if e.errno not in NO_LOCKS:
                raise
            print(f"quadnn-train: error: {e.strerror}", file=sys.stderr)  # what to mount, one line
            return 1
        print_result(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
