"""Run one section: its work through the executor, then its outputs (a notebook's first call)."""

from __future__ import annotations

import os

from ..common.outputs import Output, Overview
from ..common.profiles import check_profile
from .execute import execute_work
from .provenance import Reads, Trace
from .sections import SectionOutputs, section_module, with_prerequisites

__all__ = ["run_section"]


def run_section(
    name: str,
    profile: str = "smoke",
    tiny: bool = False,
    cache_dir: str | os.PathLike = "build/cache",
    runner: str = "inline",
    **runner_options,
) -> SectionOutputs:
    """Execute ``name``'s work at ``profile`` on ``runner`` (what is cached is not computed again) and
    return its outputs; work still pending on a runner shows as pending in them. While the work runs
    it reports its progress (:mod:`.progress`); what each output read is traced (:mod:`.provenance`)."""
    from ..engine import Results  # here: importing the execution layer does not import torch

    module = section_module(name)
    plan = module.plan(check_profile(profile), tiny)
    reads = Reads(execute_work(list(plan.values()), cache_dir, runner, label=name, **runner_options))
    results = Results(profile, tiny, module.protocol(profile, tiny), plan, reads)
    outputs = [o for item in module.outputs(results) for o in _filled(item, profile, cache_dir)]
    trace = Trace(name, profile, tiny, runner, with_prerequisites(plan.values()), reads)
    return SectionOutputs(name, profile, module.data(profile, tiny), outputs, trace)


def _filled(item: Output, profile: str, cache_dir) -> list[Output]:
    """``item``, or the overview's outputs where a section declares :class:`Overview`."""
    if not isinstance(item, Overview):
        return [item]
    # imported here: `python -m ...execution.status` must not find status imported by the package
    from . import overview

    return overview.outputs(profile, cache_dir)
