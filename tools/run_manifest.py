"""Every engine run of every section, per profile: its run id and the key it hashes.

A refactoring that should change no result can be checked with it: write a manifest at the old
commit and at the new one (each with its own tree first on PYTHONPATH), then compare them:

    PYTHONPATH=<old checkout>/core python tools/run_manifest.py write before.json
    PYTHONPATH=core python tools/run_manifest.py write after.json
    python tools/run_manifest.py compare before.json after.json

``compare`` prints, per section and profile, how many run ids the two share and which fields of
the runs' keys take other values (an empty list: the same runs, so the same cached results).
``in-cache CACHE --profile P`` says how much of this checkout's work (runs and computations) a
cache written by an older checkout holds: what it holds has the same configuration.
"""

from __future__ import annotations

import argparse
import json

PROFILES = (("smoke", False), ("cpu", False), ("full", False), ("full", True))


def _work(section: str, profile: str, tiny: bool) -> tuple[list, list]:
    """(runs, computations) of a section, from whichever layout this checkout has."""
    try:
        from quadnn_paper.execution.sections import section_work
    except ImportError:  # before sections declared their work (commit b5c97e3 and earlier): runs only
        try:
            from quadnn_paper.execution.status import section_runs
        except ImportError:  # before the companion was cut into layers (commit dc074d1 and earlier)
            from quadnn_paper.status import section_runs
        return section_runs(section, profile, tiny), []
    work = section_work(section, profile, tiny)
    return [w for w in work if hasattr(w, "run_id")], [w for w in work if not hasattr(w, "run_id")]


def _sections() -> tuple[str, ...]:
    try:
        from quadnn_paper.execution.sections import SECTIONS
    except ImportError:
        try:
            from quadnn_paper.execution.status import SECTIONS
        except ImportError:
            from quadnn_paper.status import SECTIONS
    return SECTIONS


def manifest() -> dict:
    """``{"<section> <profile>": {run id: key}}``, and ``"... computations"``: {key: function and config}."""
    out = {}
    for section in _sections():
        for profile, tiny in PROFILES:
            runs, computations = _work(section, profile, tiny)
            name = f"{section} {profile}{' TINY=1' if tiny else ''}"
            if runs:
                out[name] = {c.run_id: c.key() for c in runs}
            if computations:
                out[f"{name} computations"] = {c.key: dict(function=c.function, config=c.config) for c in computations}
    return out


def in_cache(cache: str, profile: str, tiny: bool = False) -> list[str]:
    """Per section, how much of this checkout's work at ``profile`` a cache already holds: written by an
    older checkout, every item found means the same configuration, so the same result."""
    from pathlib import Path

    root = Path(cache)
    lines = ["| section | runs in cache | computations in cache |", "|---|---|---|"]
    for section in _sections():
        runs, computations = _work(section, profile, tiny)
        have_runs = sum((root / "runs" / c.run_id / "result.json").exists() for c in runs)
        have = sum((root / c.name / f"{c.key.rpartition('.')[2]}.json").exists() for c in computations)
        lines.append(f"| {section} | {have_runs} of {len(runs)} | {have} of {len(computations)} |")
    return lines


def compare(before: dict, after: dict) -> list[str]:
    def values(runs, field):
        return {json.dumps(r.get(field), sort_keys=True, default=str) for r in runs.values()}

    lines = ["| section, profile | runs before | runs after | same ids | fields that differ |", "|---|---|---|---|---|"]
    for name in sorted(set(before) | set(after)):
        b, a = before.get(name, {}), after.get(name, {})
        fields = sorted({f for r in [*b.values(), *a.values()] for f in r})
        differ = [f for f in fields if values(b, f) != values(a, f)]
        lines.append(f"| {name} | {len(b)} | {len(a)} | {len(set(b) & set(a))} | {', '.join(differ) or '-'} |")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("write", help="write this checkout's manifest").add_argument("path")
    c = sub.add_parser("compare", help="compare two manifests")
    c.add_argument("before")
    c.add_argument("after")
    k = sub.add_parser("in-cache", help="how much of this checkout's work a cache (e.g. an older checkout's) holds")
    k.add_argument("cache")
    k.add_argument("--profile", default="smoke")
    k.add_argument("--tiny", action="store_true")
    args = p.parse_args(argv)
    if args.command == "in-cache":
        print("\n".join(in_cache(args.cache, args.profile, args.tiny)))
    elif args.command == "write":
        with open(args.path, "w") as f:
            json.dump(manifest(), f, indent=0, sort_keys=True, default=str)
    else:
        with open(args.before) as f, open(args.after) as g:
            print("\n".join(compare(json.load(f), json.load(g))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
