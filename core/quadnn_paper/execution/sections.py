"""The eight sections as declarations (the one way to run one: :func:`.run.run_section`).

A section module (:mod:`quadnn_paper.sections`) declares

- ``NAME``, ``PROTOCOLS`` and ``protocol(profile, tiny)``: what each profile runs;
- ``data(profile, tiny)``: the data its numbers come from, in words;
- ``plan(profile, tiny)``: what must be computed, ``{key: work}``: engine runs
  (:class:`~quadnn_paper.engine.RunConfig`) and other cached computations
  (:class:`~quadnn_paper.engine.Computation`), each under the section's own name for it;
- ``outputs(results)``: its tables, figures, variables and printed lines, as data
  (:mod:`quadnn_paper.common.outputs`), from :class:`~quadnn_paper.engine.Results` (the profile,
  protocol and plan it ran, and each planned item's result by its key).

:func:`.run.run_section` builds the plan once, executes it on a runner
(:func:`~.execute.execute_work`: cached, so a re-run computes nothing) and hands the results to
``outputs``; :func:`quadnn_paper.report.publish` writes them. A notebook is those two calls.
"""

from __future__ import annotations

import dataclasses
import importlib

from ..common.outputs import Output
from ..common.profiles import check_profile
from .execute import with_dependencies

__all__ = ["SECTIONS", "section_module", "section_work", "with_prerequisites", "section_runs", "SectionOutputs"]

# In the paper's order.
SECTIONS = (
    "expressivity",
    "runge",
    "cifar_tuning",
    "vgg_stability",
    "cifar_comparison",
    "imagenet",
    "kitti_lapdepth",
    "efficiency",
)


def section_module(name: str):
    """The section module ``quadnn_paper.sections.<name>``."""
    if name not in SECTIONS:
        raise ValueError(f"section must be one of {SECTIONS}, got {name!r}")
    return importlib.import_module(f"quadnn_paper.sections.{name}")


def section_work(name: str, profile: str, tiny: bool = False) -> list:
    """Every item of ``name``'s work at ``profile``: runs (dependencies included) and computations."""
    return with_prerequisites(section_module(name).plan(check_profile(profile), tiny).values())


def with_prerequisites(work) -> list:
    """``work``'s computations (what they need first) and its runs (their dependencies first)."""
    from ..engine import Computation
    from ..engine.work import with_needs

    work = list(work)
    runs = with_dependencies([w for w in work if not isinstance(w, Computation)])
    return with_needs([w for w in work if isinstance(w, Computation)]) + runs


def section_runs(name: str, profile: str, tiny: bool = False) -> list:
    """The engine runs of ``name``'s work (dependencies included), TINY-capped when asked."""
    from ..engine import Computation

    return [w for w in section_work(name, profile, tiny) if not isinstance(w, Computation)]


@dataclasses.dataclass
class SectionOutputs:
    """What :func:`.run.run_section` returns and :func:`quadnn_paper.report.publish` writes."""

    section: str
    profile: str
    data: str
    outputs: list[Output]
    trace: object = None  # a provenance.Trace: what each output read (None: not traced)
