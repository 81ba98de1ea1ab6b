"""Where a table, figure or number of the report comes from: ``python -m quadnn_paper.why NAME``.

NAME is a table (``runge_rmse``, ``tables/runge_rmse.csv``), a figure (``runge_fits``,
``figures/runge_fits.pdf``) or a macro (``\\rungeSeeds`` or ``rungeSeeds``). The answer is what the
build recorded in ``paper/variables/<section>.provenance.json`` (written by
:func:`quadnn_paper.report.publish` from :mod:`quadnn_paper.execution.provenance`): the section and
the function that made it, the runs and computations it read (their ids, the configuration fields
that differ between them, their seeds), the data fingerprints, the commit and profile of the build,
and the one command that rebuilds that section. It reads files only; it computes nothing. The
macros of the files no section writes (the paper's own numbers, the claim ledger's tally, the
build's identity) are answered with the module that writes them.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from quadnn_paper.common.macros import read_macros

__all__ = ["lookup", "explain", "names", "main", "WRITERS", "NotFound"]

PROVENANCE = "variables/{section}.provenance.json"
# paper/variables/<file>.tex that no section's notebook writes: the module and command that do
WRITERS = {
    "published": (
        "the paper's own printed numbers, quadnn_paper/common/published.py",
        "make paper/variables/published.tex",
    ),
    "ledger": (
        "the claim ledger's tally over every section's claims, quadnn_paper/common/ledger.py",
        "python -m quadnn_paper.common.ledger --paper paper",
    ),
    "build": (
        "the build's identity (commit, profile, date), quadnn_paper/execution/identity.py",
        "make paper (written right before LaTeX)",
    ),
}
# tables no section writes: their name's first word -> their writer in WRITERS
TABLE_WRITERS = {"ledger": "ledger"}  # tables/ledger.csv, ledger_cifar.tex, ledger_other.tex
_SHOWN = 12  # runs or computations listed by id before "and N more"


class NotFound(LookupError):
    """NAME is no table, figure or macro of the built paper."""


def _records(paper: Path) -> list[dict]:
    out = []
    for path in sorted((paper / "variables").glob("*.provenance.json")):
        try:
            out.append(json.loads(path.read_text()))
        except (OSError, ValueError) as e:
            raise NotFound(f"{path} is not readable provenance ({e}); run make paper again") from None
    return out


def _candidates(name: str) -> list[str]:
    """The output keys NAME may mean: ``tables/X``, ``figures/X``, ``\\X``."""
    bare = name.strip().lstrip("\\")
    stem = re.sub(r"\.(data\.json|lint\.json|fonts\.json|csv|tex|pdf|png)$", "", bare.split("/")[-1])
    if "/" in bare:
        folder = bare.split("/")[-2]
        return [f"{folder}/{stem}"]
    return [f"tables/{stem}", f"figures/{stem}", f"\\{bare}"]


def lookup(name: str, paper: str | Path = "paper") -> tuple[dict | None, str, dict]:
    """``(section record, output key, its entry)`` for NAME; a macro no section writes has no record
    and an entry ``{"writer": ..., "command": ..., "file": ...}``. Raises :class:`NotFound`."""
    paper = Path(paper)
    records = _records(paper)
    for key in _candidates(name):
        for record in records:
            if key in record.get("outputs", {}):
                return record, key, record["outputs"][key]
    for key in _candidates(name):
        folder, _, stem = key.partition("/")
        writer = TABLE_WRITERS.get(stem.split("_")[0]) if folder == "tables" else None
        if writer and any((paper / "tables" / f"{stem}.{ext}").is_file() for ext in ("csv", "tex")):
            what, command = WRITERS[writer]
            return None, key, dict(kind="table", writer=what, command=command, file=f"tables/{stem}.tex")
    macro = name.strip().lstrip("\\")
    for stem, (writer, command) in WRITERS.items():
        tex = paper / "variables" / f"{stem}.tex"
        if tex.is_file() and macro in read_macros(tex.read_text()):
            return None, f"\\{macro}", dict(kind="macro", writer=writer, command=command, file=f"variables/{stem}.tex")
    if not records:
        raise NotFound(f"no provenance under {paper / 'variables'}: build the paper first (make paper)")
    raise NotFound(
        f"{name!r} is no table, figure or macro of the paper in {paper}; `python -m quadnn_paper.why --list` names them"
    )


def _differing(configs: list[dict]) -> dict[str, list]:
    """The fields whose values differ between ``configs`` (seeds aside), each with its values."""
    fields = sorted({k for c in configs for k in c} - {"seed", "seeds"})
    out = {}
    for field in fields:
        values = {json.dumps(c.get(field), sort_keys=True, default=str) for c in configs}
        if len(values) > 1:
            out[field] = [json.loads(v) for v in sorted(values)]
    return out


def _seeds(configs: list[dict]) -> list:
    """Every value of a field named ``seed`` or ``seeds`` in ``configs``, nested ones included."""
    seeds = set()

    def walk(value, name=""):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, k)
        elif name in ("seed", "seeds"):
            for v in value if isinstance(value, list) else [value]:
                if v is not None:
                    seeds.add(json.dumps(v))

    for c in configs:
        walk(c)
    return sorted((json.loads(s) for s in seeds), key=str)


def _short(config: dict, limit: int = 160) -> str:
    text = ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in sorted(config.items()))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def explain(name: str, paper: str | Path = "paper") -> str:
    """The answer to ``why NAME``, as text (see the module doc)."""
    record, key, entry = lookup(name, paper)
    if record is None:
        return "\n".join(
            [
                f"{key}  ({entry['kind']} in paper/{entry['file']})",
                f"  made by:  {entry['writer']}",
                f"  rebuild:  {entry['command']}",
            ]
        )
    kind = entry["kind"]
    lines = [f"{key}  ({kind} of section {record['section']})"]
    lines.append(f"  files:    {', '.join('paper/' + f for f in entry.get('files', []))}")
    lines.append(f"  section:  {record['section']} ({record['module']}, notebooks/{record['section']}.ipynb)")
    lines.append(
        f"  made by:  {entry.get('made_by') or 'unknown'}" + (f"; drawn by {entry['draw']}" if "draw" in entry else "")
    )
    work = record.get("work", {})
    read = [k for k in entry.get("reads", []) if k in work]
    runs = [k for k in read if work[k]["kind"] == "run"]
    comps = [k for k in read if work[k]["kind"] == "computation"]
    lines.append(f"  read:     {len(runs)} run(s), {len(comps)} computation(s) of the section's {len(work)} work items")
    # arms: runs together, computations per function; within each, the fields that differ
    arms = {"runs": runs} if runs else {}
    for k in comps:
        arms.setdefault(f"computations {work[k].get('function', work[k]['what'])}", []).append(k)
    for label, keys in arms.items():
        lines.append(f"  {label}:")
        for k in keys[:_SHOWN]:
            lines.append(f"    {k}  {work[k]['what']}")
        if len(keys) > _SHOWN:
            lines.append(f"    ... and {len(keys) - _SHOWN} more")
        configs = [work[k]["config"] for k in keys]
        differ = _differing(configs)
        if len(keys) == 1:
            lines.append(f"    configuration: {_short(configs[0])}")
        elif differ:
            lines.append(
                "    arms differ in: " + "; ".join(f"{f} = {' | '.join(map(str, v))}" for f, v in differ.items())
            )
        else:
            lines.append("    arms differ in nothing but their seeds")
        seeds = _seeds(configs)
        if seeds:
            lines.append(f"    seeds: {', '.join(map(str, seeds))}")
    prints = sorted({str(work[k].get("data_fingerprint")) for k in runs if work[k].get("data_fingerprint")})
    if runs:
        lines.append(f"  data:     {', '.join(prints) if prints else 'generated in the run (no fingerprint checked)'}")
    commit = record["commit"] + (" (with uncommitted changes)" if record.get("dirty") else "")
    tiny = " TINY=1" if record.get("tiny") else ""
    lines.append(
        f"  built:    commit {commit}, profile {record['profile']}{tiny}, runner {record['runner']}, {record['date']}"
    )
    lines.append(f"  rebuild:  {record['command']}")
    return "\n".join(lines)


def names(paper: str | Path = "paper") -> list[str]:
    """Every table, figure and macro the built paper holds (its files, not its provenance)."""
    paper = Path(paper)
    found = [f"tables/{p.stem}" for p in sorted((paper / "tables").glob("*.csv"))]
    found += [f"figures/{p.stem}" for p in sorted((paper / "figures").glob("*.pdf"))]
    for tex in sorted((paper / "variables").glob("*.tex")):
        found += [f"\\{m}" for m in read_macros(tex.read_text())]
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m quadnn_paper.why", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "name", nargs="?", help="a table, figure or macro: runge_rmse, figures/runge_fits.pdf, \\rungeSeeds"
    )
    ap.add_argument("--paper", default="paper", help="the built paper folder (default: paper)")
    ap.add_argument("--list", action="store_true", help="name every table, figure and macro of the built paper")
    a = ap.parse_args(argv)
    if a.list:
        print("\n".join(names(a.paper)))
        return 0
    if not a.name:
        ap.error("give NAME (a table, figure or macro), or --list")
    try:
        print(explain(a.name, a.paper))
    except NotFound as e:
        print(f"why: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
