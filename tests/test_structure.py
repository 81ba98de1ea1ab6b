"""The house's shape, kept by tests: no import circle in core/ (imports inside functions count),
no function over 80 lines in core/, a README that is a front door (at most 150 lines)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "core"
MAX_FUNCTION_LINES = 80
MAX_README_LINES = 150


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the packages under ``root`` (a package is
    its __init__; a build/ copy of them is not a package here)."""
    out = {}
    packages = [d for d in sorted(root.iterdir()) if (d / "__init__.py").is_file()]
    for path in sorted(f for d in packages for f in d.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = path.relative_to(root).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ``mods`` it imports, anywhere in its file (function bodies too).
    ``from pkg import name`` points at ``pkg.name`` when that is a module, else at ``pkg``; an
    import of ``a.b.c`` at the longest prefix that is a module here."""

    def known(name: str) -> str | None:
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            if ".".join(parts[:i]) in mods:
                return ".".join(parts[:i])
        return None

    graph = {m: set() for m in mods}
    for mod, path in mods.items():
        package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            graph[mod] |= {t for t in map(known, names) if t is not None and t != mod}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def long_functions(root: Path, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    out = []
    for path in modules(root).values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    out.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({lines} lines)")
    return out


def test_core_has_no_import_circle():
    found = cycles(import_graph(modules(CORE)))
    assert not found, "import circles in core/ (each a set of modules importing each other):\n" + "\n".join(
        " <-> ".join(c) for c in found
    )


def test_the_circle_finder_finds_a_circle_through_a_function_level_import(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "runners").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "runners" / "__init__.py").write_text("from .base import Runner\n")
    (pkg / "runners" / "base.py").write_text("class Runner:\n    def state(self):\n        from .slurm import read\n")
    (pkg / "runners" / "slurm.py").write_text("from .base import Runner\n")
    (pkg / "other.py").write_text("import pkg.runners.base\n")
    graph = import_graph(modules(tmp_path))
    assert graph["pkg.other"] == {"pkg.runners.base"}
    assert cycles(graph) == [["pkg.runners.base", "pkg.runners.slurm"]]
    (pkg / "runners" / "base.py").write_text("class Runner:\n    pass\n")
    assert cycles(import_graph(modules(tmp_path))) == []


def test_no_function_in_core_is_over_80_lines():
    found = long_functions(CORE)
    assert not found, f"functions over {MAX_FUNCTION_LINES} lines (split them into named steps):\n" + "\n".join(found)


@pytest.mark.parametrize("readme", ["README.md"])
def test_the_readme_is_a_front_door(readme):
    lines = (ROOT / readme).read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"{readme} has {len(lines)} lines; the manuals belong in docs/"
    assert lines[0].startswith("# ")
