"""A section's work that is not a training run: a named, cached :class:`Computation`.

A section declares its work as a list of :class:`~quadnn_paper.engine.RunConfig` (trained by the
engine) and :class:`Computation` (everything else: the Runge sweeps, the expressivity draws, the
benchmarks). The executor (:func:`quadnn_paper.execution.execute`) runs both kinds on any runner
and caches both by configuration; ``make status`` lists both.

A computation is ``function(**config)`` with ``function`` named as ``"module:attribute"``, so a
job process (local worker, SLURM) imports it by name instead of unpickling code. Its result is the
function's JSON-able return value, stored under ``<cache>/<name>/<hash of config>.json``
(:func:`~quadnn_paper.engine.store.cached`): the same configuration is never computed twice.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .config import run_id
from .store import cached

__all__ = ["Computation", "with_needs", "needed_first"]

DEVICES = ("cpu", "cuda")


@dataclasses.dataclass(frozen=True)
class Computation:
    """``function(**config)``, cached under ``name``; ``seconds``: its estimated cost on ``device``
    (what ``make status`` adds up; a ``cuda`` computation asks its runner for a GPU).
    ``measures_machine``: a timing of the machine that runs the section, so it is computed in that
    process, before any job is submitted, never beside other work on a runner's worker.
    ``needs``: computations whose results it reads, passed to ``function`` as keyword arguments
    named after them; their keys are part of its own (another input, another entry)."""

    name: str
    function: str
    config: Mapping[str, Any]
    seconds: float = 1.0
    device: str = "cpu"
    measures_machine: bool = False
    needs: tuple[Computation, ...] = ()

    def __post_init__(self):
        module, _, attribute = self.function.partition(":")
        if not module or not attribute:
            raise ValueError(f"computation {self.name}: function must be 'module:attribute', got {self.function!r}")
        if self.device not in DEVICES:
            raise ValueError(f"computation {self.name}: device must be one of {DEVICES}, got {self.device!r}")
        try:
            json.dumps(self.config, default=str)
        except (TypeError, ValueError) as e:
            raise ValueError(f"computation {self.name}: its config must be JSON ({e})") from None
        object.__setattr__(self, "needs", tuple(self.needs))
        clash = {n.name for n in self.needs} & set(self.config)
        if clash:
            raise ValueError(f"computation {self.name}: {sorted(clash)} name both a config entry and a needed result")

    def _cache_config(self) -> dict:
        """What its cache entry is keyed by: its config, and the keys of what it needs."""
        if not self.needs:
            return dict(self.config)  # the entries of computations without inputs keep their keys
        return {**self.config, "needs": [n.key for n in self.needs]}

    @property
    def key(self) -> str:
        """``<name>.<hash of config>``: its job key on a runner, and its file under the cache."""
        return f"{self.name}.{run_id(json.loads(json.dumps(self._cache_config(), sort_keys=True, default=str)))}"

    def __call__(self) -> Any:
        """``function(**config)``, computed here without the cache (a computation without inputs)."""
        if self.needs:
            raise TypeError(f"computation {self.name} reads other results: compute it with .compute(cache_dir)")
        return self._function()(**self.config)

    def _function(self):
        module, _, attribute = self.function.partition(":")
        fn = importlib.import_module(module)
        for part in attribute.split("."):
            fn = getattr(fn, part)
        return fn

    def compute(self, cache_dir: str | os.PathLike | None) -> Any:
        """Its result: from the cache, else computed here (what it needs first) and stored."""

        def call():
            inputs = {n.name: n.compute(cache_dir) for n in self.needs}
            return self._function()(**self.config, **inputs)

        return cached(cache_dir, self.name, self._cache_config(), call)

    def result(self, cache_dir: str | os.PathLike) -> Any | None:
        """Its stored result, or None where it was not computed yet."""
        return cached(cache_dir, self.name, self._cache_config(), None)

    def describe(self) -> str:
        return f"{self.name} ({self.function.partition(':')[2]})"


def with_needs(computations: list[Computation]) -> list[Computation]:
    """``computations`` and everything they need, each once, what is needed first."""
    return needed_first(computations, lambda c: c.needs, lambda c: c.key)


def needed_first(items: Iterable, needs: Callable, key: Callable) -> list:
    """``items`` and everything ``needs(item)`` gives (recursively), each once by ``key(item)``, every
    item after what it needs: the order runs and computations are submitted in."""
    out: dict = {}

    def visit(item):
        for n in needs(item):
            visit(n)
        out.setdefault(key(item), item)

    for item in items:
        visit(item)
    return list(out.values())
