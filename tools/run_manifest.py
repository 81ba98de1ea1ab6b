"""Every engine run of every section, per profile: its run id and the key it hashes.

A refactoring that should change no result can be checked with it: write a manifest at the old
commit and at the new one (each with its own tree first on PYTHONPATH), then compare them:

    PYTHONPATH=<old checkout>/core python tools/run_manifest.py write before.json
    PYTHONPATH=core python tools/run_manifest.py write after.json
    python tools/run_manifest.py compare before.json after.json

``compare`` prints, per section and profile, how many run ids the two share and which fields of
the runs' keys take other values (an empty list: the same runs, so the same cached results).
"""

from __future__ import annotations

import argparse
import json

PROFILES = (("smoke", False), ("cpu", False), ("full", False), ("full", True))


def manifest() -> dict:
    try:
        from quadnn_paper.execution.status import SECTIONS, section_runs
    except ImportError:  # before the companion was cut into layers (commit dc074d1 and earlier)
        from quadnn_paper.status import SECTIONS, section_runs
    out = {}
    for section in SECTIONS:
        for profile, tiny in PROFILES:
            runs = section_runs(section, profile, tiny)
            out[f"{section} {profile}{' TINY=1' if tiny else ''}"] = {c.run_id: c.key() for c in runs}
    return out


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
    args = p.parse_args(argv)
    if args.command == "write":
        with open(args.path, "w") as f:
            json.dump(manifest(), f, indent=0, sort_keys=True, default=str)
    else:
        with open(args.before) as f, open(args.after) as g:
            print("\n".join(compare(json.load(f), json.load(g))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
