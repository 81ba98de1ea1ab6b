"""Run one section: its work through the executor, then its outputs (a notebook's first call)."""

from __future__ import annotations

import os

from ..common.outputs import Output, Overview
from ..common.profiles import check_profile
from .execute import execute_work
from .provenance import Reads, Trace
from .sections import SectionOutputs, section_module, section_work

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
    module = section_module(name)
    results = execute_work(module.work(check_profile(profile), tiny), cache_dir, runner, label=name, **runner_options)
    reads = Reads(results)
    outputs = [o for item in module.outputs(reads, profile, tiny) for o in _filled(item, profile, cache_dir)]
    trace = Trace(name, profile, tiny, runner, section_work(name, profile, tiny), reads)
    return SectionOutputs(name, profile, module.data(profile, tiny), outputs, trace)


def _filled(item: Output, profile: str, cache_dir) -> list[Output]:
    """``item``, or the overview's outputs where a section declares :class:`Overview`."""
    if not isinstance(item, Overview):
        return [item]
    # imported here: `python -m ...execution.status` must not find status imported by the package
    from . import overview

    return overview.outputs(profile, cache_dir)
