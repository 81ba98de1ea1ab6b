"""A section's plan and what came of it: what :func:`quadnn_paper.execution.run_section` hands a
section's ``outputs``.

A section plans its work once, ``plan(profile, tiny) -> {key: RunConfig | Computation}``, each item
under the name the section gives it (``(row, seed)``, ``"params"``). The framework runs the plan's
items and hands the section :class:`Results`: the profile, protocol and plan it ran, and each item's
result under the section's own key. No section builds its plan twice or rebuilds a computation to
find its result.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping
from typing import Any

from .config import RunConfig
from .work import Computation

__all__ = ["Results", "work_id"]


def work_id(item: RunConfig | Computation) -> str:
    """What the executor files an item's result under: a run's id, a computation's key."""
    return item.key if isinstance(item, Computation) else item.run_id


class Results(Mapping):
    """A section's plan with its results: ``results[key]`` is the result of ``plan[key]`` (None while
    it is pending); iterating gives the plan's keys in its order. ``by_id``: the executor's results,
    by :func:`work_id`."""

    def __init__(self, profile: str, tiny: bool, protocol: dict, plan: Mapping[Hashable, Any], by_id: Mapping):
        self.profile, self.tiny, self.protocol, self.plan, self.by_id = profile, tiny, protocol, plan, by_id

    @classmethod
    def of(cls, section, profile: str, by_id: Mapping, tiny: bool = False) -> Results:
        """``section``'s plan at ``profile`` with the results ``by_id`` (a missing id: pending)."""
        return cls(profile, tiny, section.protocol(profile, tiny), section.plan(profile, tiny), by_id)

    def __getitem__(self, key: Hashable) -> Any:
        return self.by_id.get(work_id(self.plan[key]))

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self.plan)

    def __len__(self) -> int:
        return len(self.plan)

    def runs(self) -> dict[Hashable, Any]:
        """The results of the plan's engine runs, by key."""
        return {k: self[k] for k, item in self.plan.items() if isinstance(item, RunConfig)}

    @property
    def pending(self) -> int:
        """How many of the plan's items have no result yet."""
        return sum(self[k] is None for k in self.plan)
