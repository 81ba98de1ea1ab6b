"""The documentation's entry points and the names it quotes.

- README.md is a front door: short, and it opens with the two commands (``make paper``, ``make test``).
- Every relative Markdown link in README.md, core/README.md and docs/ reaches an existing file and,
  with a ``#anchor``, a heading of that file (GitHub's slugs).
- Every dotted name of the library or the companion (``quadnn_paper.bench``,
  ``quadnn_paper.sections.runge.PROTOCOLS``) quoted in the sources, notebooks, tests, tools,
  manuals and paper sections resolves: the longest importable module prefix, then attributes.
  The records of past GPU runs (``docs/gpu/<date>-.../``) name a module where it was then: there
  a name under a module that moved since (:data:`MOVED`) resolves at its new place.
  So does every ``docs/...`` path and every ``quadnn/...py`` or ``quadnn_paper/...py`` path.
  A name that must stay unresolved is in :data:`ALLOWED` with its reason; CHANGELOG.md, a
  history of names, is not read.
- The companion's layers are import-linter's ``layers`` contract in pyproject.toml (what ``make
  test`` enforces); README.md, CONTRIBUTING.md and docs/layout.md state that many and name only
  its modules, and every module docs/layout.md places, and every name it places in a module, is there.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
from functools import cache
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[1]

# -- the front door and the links of the manuals --------------------------------------------------

MANUALS = [
    "README.md",
    "core/README.md",
    *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").rglob("*.md")),
]
FENCE = re.compile(r"^ {0,3}```.*?^ {0,3}```[^\n]*$", re.M | re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def slugs(markdown: str) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings: lowercase, punctuation but hyphens and
    underscores dropped, spaces to hyphens; a repeated heading gets ``-1``, ``-2``, ..."""
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^ {0,3}#{1,6} +(.+?) *#* *$", FENCE.sub("", markdown), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(f"{slug}-{n}" if n else slug)
    return out


def test_slugs_follow_githubs_rules():
    text = "# Works with\n## What each failure looks like\n```\n# not a heading\n```\n### GPU settings: `tf32`, x_y\n"
    assert slugs(text + "# Works with\n") == {
        "works-with",
        "what-each-failure-looks-like",
        "gpu-settings-tf32-x_y",
        "works-with-1",
    }


def test_readme_is_a_front_door():
    text = (REPO / "README.md").read_text()
    lines = text.splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; the manuals live in docs/"
    assert lines[0].startswith("# ")
    # before the commands: the title and the introduction, no section
    before, fence, _ = text.partition("```bash\n")
    assert fence and not re.search(r"^#{2,} ", before, re.M), "the two commands come before any section"
    commands = [line for line in text[len(before) + len(fence) :].split("```")[0].splitlines() if line.strip()]
    assert [c.split("#")[0].split() for c in commands[:2]] == [["make", "paper"], ["make", "test"]], commands


def test_every_relative_link_of_the_manuals_reaches_a_file_and_heading():
    broken = []
    for rel in MANUALS:
        path = REPO / rel
        for target in LINK.findall(FENCE.sub("", path.read_text())):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            if not dest.exists():
                broken.append(f"{rel}: {target} (no {dest.relative_to(REPO) if dest.is_relative_to(REPO) else dest})")
            elif anchor and (dest.suffix != ".md" or anchor not in slugs(dest.read_text())):
                broken.append(f"{rel}: {target} (no heading #{anchor} in {dest.relative_to(REPO)})")
    assert not broken, "\n".join(broken)


# -- every name resolves ---------------------------------------------------------------------------

ROOTS = ["core", "notebooks", "tests", "tools", "docs", "data", "paper/sections"]
FILES = ["README.md", "Makefile", "CONTRIBUTING.md", "pyproject.toml", "paper/main.tex"]
SKIP_DIRS = {"__pycache__", ".ipynb_checkpoints"}
# This file names the allow-listed names as data; reading it would find them here too.
SKIP_FILES = {"tests/test_docs.py"}

DOTTED = re.compile(r"\b(?:quadnn|quadnn_paper)(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
DOCS_PATH = re.compile(r"(?:(?<=\.\./)|(?<![\w/.-]))docs/[\w./-]*")  # docs/x or ../docs/x, not a URL's
SOURCE_PATH = re.compile(r"(?<![\w.-])(?:core/)?(quadnn(?:_paper)?/[\w/]*\w\.py)\b")

# (file, name): why the name stays as it is. Each entry must still be found, unresolved.
ALLOWED = {
    ("tools/run_manifest.py", "quadnn_paper.status"): (
        "the fallback import for checkouts before the companion was cut into layers (dc074d1 and "
        "earlier), where `make status` lived in this module; the tool runs on old commits by design"
    ),
}


# Modules that moved, old name -> new: what a record of a past run under docs/gpu/ calls them.
MOVED = {"quadnn.bench": "quadnn_paper.bench"}  # the benchmark harness left the library: it is the companion's


def as_recorded(rel: str, name: str) -> str:
    """``name`` at its current place when ``rel`` is a record of a past GPU run, else ``name``."""
    if not rel.startswith("docs/gpu/"):
        return name
    for old, new in MOVED.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old) :]
    return name


def texts():
    """(path relative to the repository, text) of every text file the walk reads; a notebook is
    its cells' sources, a LaTeX file is read with ``\\_`` as ``_``."""
    paths = [REPO / f for f in FILES if (REPO / f).is_file()]
    for root in ROOTS:
        for folder, dirs, files in os.walk(REPO / root):
            # hidden folders are tools' caches (import-linter's), build/ a packaging copy
            dirs[:] = sorted(
                d
                for d in dirs
                if d not in SKIP_DIRS and not d.endswith(".egg-info") and not d.startswith(".") and d != "build"
            )
            paths += [Path(folder) / f for f in sorted(files)]
    for path in paths:
        rel = path.relative_to(REPO).as_posix()
        raw = path.read_bytes()
        if rel in SKIP_FILES or b"\0" in raw:
            continue
        try:
            text = raw.decode()
        except UnicodeDecodeError:
            continue
        if path.suffix == ".ipynb":
            text = "\n".join("".join(cell["source"]) for cell in json.loads(text)["cells"])
        elif path.suffix == ".tex":
            text = text.replace("\\_", "_")
        yield rel, text


@cache
def resolves(name: str) -> bool:
    """Whether ``name`` is a module, or a module's attribute (a class's attribute, a dataclass's
    field) after the longest importable prefix."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        try:
            obj = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name is None or not (module == e.name or module.startswith(e.name + ".")):
                raise  # the module exists and lacks a dependency: not a question of its name
            continue
        for attr in parts[i:]:
            if hasattr(obj, attr):
                obj = getattr(obj, attr)
            elif attr in getattr(obj, "__dataclass_fields__", {}) or attr in getattr(obj, "__annotations__", {}):
                obj = None  # an instance attribute the class declares; nothing to look into further
            else:
                return False
        return True
    return False


def dangling() -> dict[tuple[str, str], int]:
    """(file, name or path) -> how often, for every reference that does not resolve."""
    found: dict[tuple[str, str], int] = {}
    for rel, text in texts():
        bad = [m for m in DOTTED.findall(text) if not resolves(as_recorded(rel, m))]
        bad += [p for p in (m.rstrip(".") for m in DOCS_PATH.findall(text)) if not (REPO / p).exists()]
        bad += [p for p in SOURCE_PATH.findall(text) if not (REPO / "core" / p).is_file()]
        for name in bad:
            found[rel, name] = found.get((rel, name), 0) + 1
    return found


def test_every_dotted_name_resolves():
    found = dangling()
    unexplained = [f"{rel}: {name} ({n}x)" for (rel, name), n in sorted(found.items()) if (rel, name) not in ALLOWED]
    assert not unexplained, "names that point nowhere:\n" + "\n".join(unexplained)
    stale = [f"{rel}: {name}" for rel, name in ALLOWED if (rel, name) not in found]
    assert not stale, "allowed names no longer found unresolved (remove them from ALLOWED):\n" + "\n".join(stale)


def test_the_walk_reads_what_it_should():
    rels = dict(texts())
    assert {"README.md", "Makefile", "core/quadnn/layers.py", "notebooks/runge.ipynb", "data/README.md"} <= set(rels)
    assert not any(r.startswith("CHANGELOG") or "__pycache__" in r for r in rels)
    assert "quadnn_paper.sections.runge.PROTOCOLS" in DOTTED.findall(rels["notebooks/runge.ipynb"])
    assert resolves("quadnn_paper.engine.RunConfig.recompute_budget") and resolves("quadnn.models.cifar_resnet")
    assert not resolves("quadnn_paper.runge") and not resolves("quadnn_paper.bench.PAPER_EPOCH_SECONDS")
    assert not resolves("quadnn.bench") and as_recorded("docs/gpu/x/README.md", "quadnn.bench.machine") == (
        "quadnn_paper.bench.machine"
    )
    assert as_recorded("docs/gpu.md", "quadnn.bench") == "quadnn.bench"  # a manual names the present
    assert DOCS_PATH.findall("see ../docs/gpu.md, https://pytorch.org/docs/stable and docs/gpu/.") == [
        "docs/gpu.md",
        "docs/gpu/.",
    ]


# -- the companion's layers, as the docs state them --------------------------------------------------

LAYER_DOCS = [
    f for f in ("README.md", "CONTRIBUTING.md", "docs/CONTRIBUTING.md", "docs/layout.md") if (REPO / f).is_file()
]
NUMBERS = "zero one two three four five six seven eight nine ten eleven twelve".split()
LAYER_COUNT = re.compile(rf"\b({'|'.join(NUMBERS)}|\d+)[ -]layers\b", re.I)
TICKED_MODULE = re.compile(r"`(\w+)(?:/|\.py)?`")  # `engine`, `engine/`, `report.py`
DIAGRAM_BOX = re.compile(r"(?:^|  )\s*(\w+)(?:/|\.py)(?=\s|$)", re.M)  # a layer's name opening a column
TABLE_ROW = re.compile(r"^\| `(core/[^`]+)` \| (.*) \|$", re.M)
MODULE_AND_NOTE = re.compile(r"`(\w+\.py)` \(")
IDENTIFIER = re.compile(r"`([A-Za-z_]\w*)`")


def contract_layers() -> list[list[str]]:
    """The companion's layers, top first, each a list of sibling modules: import-linter's ``layers``
    contract over ``quadnn_paper`` in pyproject.toml (``(x)`` an optional module, ``|`` or ``:``
    between siblings)."""
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c["type"] == "layers" and c.get("containers") == ["quadnn_paper"]]
    return [[m.strip().strip("()") for m in re.split(r"[|:]", layer)] for layer in contract["layers"]]


def _sentences(markdown: str):
    """Headings, list items and sentences (to a full stop or semicolon) of ``markdown``, fences left out."""
    parts, current = [], []
    for line in FENCE.sub("", markdown).splitlines():
        heading = line.lstrip().startswith("#")
        if heading or not line.strip() or re.match(r"\s*[-*] ", line):
            parts.append(" ".join(current))
            current = []
        if heading:
            parts.append(line)
        elif line.strip():
            current.append(line.strip())
    parts.append(" ".join(current))
    for part in parts:
        yield from re.split(r"(?<=[.;])\s+", part)


def _defined(path: Path) -> set[str]:
    """The names a module defines at its top level (functions, classes, assignments)."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


def _parenthesis(text: str, start: int) -> str:
    """The text inside the parenthesis opened just before ``start``, nested ones included."""
    depth = 1
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if not depth:
            return text[start:i]
    return text[start:]


def test_the_docs_state_the_companions_layers_and_modules_as_they_are():
    layers = contract_layers()
    modules = {m for layer in layers for m in layer}
    companion = REPO / "core" / "quadnn_paper"
    problems = [
        f"pyproject.toml: the layer {m} is no module of quadnn_paper"
        for m in sorted(modules)
        if not ((companion / m).is_dir() or (companion / f"{m}.py").is_file())
    ]
    for rel in LAYER_DOCS:
        text = (REPO / rel).read_text()
        counted = [s for s in _sentences(text) if LAYER_COUNT.search(s)]
        if not counted:
            problems.append(f"{rel}: states no count of the companion's layers")
        for sentence in counted:
            where = f"{rel}: {' '.join(sentence.split())!r}"
            for word in LAYER_COUNT.findall(sentence):
                n = int(word) if word.isdigit() else NUMBERS.index(word.lower())
                if n != len(layers):
                    problems.append(f"{where} says {n} layers; the contract has {len(layers)}")
            named = set(TICKED_MODULE.findall(sentence))
            if named - modules:
                problems.append(f"{where} names {sorted(named - modules)}, not layers of the contract")
            if re.search(r"layers[^.;:]*:", sentence) and named != modules:  # a list of the layers
                problems.append(f"{where} lists {sorted(named)}; the contract's are {sorted(modules)}")

    layout = (REPO / "docs/layout.md").read_text()
    boxes = set(DIAGRAM_BOX.findall(FENCE.search(layout).group()))
    if boxes != modules:
        problems.append(f"docs/layout.md: the diagram shows {sorted(boxes)}; the contract's are {sorted(modules)}")
    for name in DOTTED.findall(layout):
        if not resolves(name):
            problems.append(f"docs/layout.md: {name} does not resolve")
    for path in re.findall(r"(?<![\w/.-])core/[\w./-]*\w/?", layout):
        if not (REPO / path).exists():
            problems.append(f"docs/layout.md: no {path}")
    for folder, note in TABLE_ROW.findall(layout):
        base = REPO / folder
        for name in re.findall(r"`(\w+(?:\.py|/))`", note):  # a module or folder the row names
            if base.is_dir() and not any(base.rglob(name.rstrip("/"))):
                problems.append(f"docs/layout.md: no {name} under {folder}")
        placed = [(base, note)] if base.is_file() else []  # a row of one module: the names it places there
        for m in MODULE_AND_NOTE.finditer(note):  # `x.py` (`name`, ...): the names it places in x.py
            files = sorted(base.rglob(m.group(1))) if base.is_dir() else []
            placed += [(f, _parenthesis(note, m.end())) for f in files[:1]]
        for module, words in placed:
            missing = set(IDENTIFIER.findall(words)) - _defined(module)
            if missing:
                problems.append(
                    f"docs/layout.md places {sorted(missing)} in {module.relative_to(REPO)}, which does not define them"
                )
    assert not problems, "\n".join(problems)


# -- every documented snippet runs as written -------------------------------------------------------

PYTHON_FENCE = re.compile(r"^ {0,3}```python[^\n]*\n(.*?)^ {0,3}```", re.M | re.S)

# (file, the snippet's first line): why it is not run. Each entry must still be found.
NOT_RUN = {
    (
        "docs/CONTRIBUTING.md",
        'NAME = "cifar_comparison"          # = notebooks/<NAME>.ipynb = paper/sections/<NAME>.tex = report section',
    ): ("a listing of the names and signatures a section module defines, not a program"),
    ("docs/CONTRIBUTING.md", "from quadnn_paper.execution import run_section"): (
        "a notebook's template: `<name>` stands for a section's name"
    ),
}
NOT_RUN[("README.md", "from quadnn_paper.execution import run_section")] = (
    "computes the runge section at its cpu profile (30,000 iterations a network, minutes); "
    "notebooks/runge.ipynb makes the same two calls at the smoke profile under nbval"
)
NOT_RUN[("docs/full-protocol.md", "from quadnn_paper.engine import RunConfig, run")] = (
    "trains two networks for 12 epochs each (minutes on a CPU); tests/test_engine.py runs "
    "RunConfig with transfer_from through run at a tiny size"
)


def snippets():
    """(file, first line, code) of every ```python block of the manuals."""
    for rel in MANUALS:
        for code in PYTHON_FENCE.findall((REPO / rel).read_text()):
            yield rel, code.splitlines()[0], code


SNIPPETS = [
    pytest.param(code, id=f"{rel}:{i}")
    for i, (rel, first, code) in enumerate(snippets())
    if (rel, first) not in NOT_RUN
]


def test_the_snippet_lists_name_snippets_that_exist():
    found = {(rel, first) for rel, first, _ in snippets()}
    assert set(NOT_RUN) <= found, set(NOT_RUN) - found
    assert {"core/README.md", "README.md"} <= {rel for rel, _, _ in snippets()}
    assert len(SNIPPETS) >= 7


@pytest.mark.parametrize("code", SNIPPETS)
def test_every_documented_snippet_runs_as_written(code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # what a snippet writes (build/...) lands here
    exec(compile(code, "<snippet>", "exec"), {"__name__": "__snippet__"})


# -- comments and manuals point to nothing a reader cannot open -------------------------------------
ISSUE = re.compile(r"\bissues? #?\d+", re.I)


def _issue_references(text: str) -> list[int]:
    return [text.count("\n", 0, m.start()) + 1 for m in ISSUE.finditer(text)]


def test_no_comment_or_manual_points_to_an_issue_number():
    """The project's issues are not in the repository, so "(issue 50)" in a comment, docstring or
    manual points a reader nowhere: say the invariant instead (the history of a change is the
    CHANGELOG's, which is not read here)."""
    assert _issue_references("x = 1\n# kept as it was (issue 50)\n") == [2]  # the probe
    places = [REPO / p for p in ("Makefile", "README.md", "pyproject.toml", ".ci/run", "environment.yml")]
    for folder in ("core", "tools", "tests", "docs", "notebooks", "paper"):
        places += [p for p in (REPO / folder).rglob("*") if p.suffix in {".py", ".md", ".tex", ".ipynb", ".toml"}]
    found = {
        str(p.relative_to(REPO)): lines
        for p in places
        if p.is_file() and p != Path(__file__).resolve() and (lines := _issue_references(p.read_text()))
    }
    assert not found, f"issue numbers a reader cannot open: {found}"
