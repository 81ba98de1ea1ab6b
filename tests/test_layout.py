"""The library and the paper companion: one direction of imports, a light `import quadnn`."""

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "core" / "quadnn"
COMPANION = ROOT / "core" / "quadnn_paper"
HEAVY = ("sklearn", "scipy", "matplotlib", "papermill", "pandas", "submitit", "torchao")


def imported_top_modules(package: Path) -> dict[str, set[str]]:
    """Top-level module names each file of ``package`` imports (relative imports resolved)."""
    found = {}
    for path in package.rglob("*.py"):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                names.add(package.name if node.level else node.module.split(".")[0])
        found[str(path.relative_to(ROOT))] = names
    return found


# Integrations a user opts into by calling them (quadnn.convert.quantize_ needs torchao): imported
# inside the function that uses them, never at module level, and not a requirement of the library.
OPTIONAL = {"torchao"}


def _module_level_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_library_never_imports_the_companion_or_experiment_dependencies():
    allowed_third_party = {"torch", "torchvision", "timm", "numpy"}
    stdlib = set(sys.stdlib_module_names)
    for path, names in imported_top_modules(LIBRARY).items():
        assert "quadnn_paper" not in names, f"{path} imports the paper companion"
        extra = names - stdlib - allowed_third_party - {"quadnn"} - OPTIONAL
        assert not extra, f"{path} imports {sorted(extra)}: quadnn may need only {sorted(allowed_third_party)}"
        at_top = _module_level_imports(ROOT / path) & OPTIONAL
        assert not at_top, f"{path} imports the optional {sorted(at_top)} at module level"


def test_companion_imports_the_library_by_its_public_name():
    uses_library = [p for p, names in imported_top_modules(COMPANION).items() if "quadnn" in names]
    assert uses_library, "the companion is expected to build on quadnn"


@pytest.mark.slow  # a subprocess or two: seconds each
def test_import_quadnn_loads_no_heavy_dependency():
    code = "import sys, quadnn, timm; print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    loaded = set(
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split()
    )
    assert "quadnn" in loaded and "quadnn_paper" not in loaded
    assert not loaded & set(HEAVY), f"import quadnn loaded {sorted(loaded & set(HEAVY))}"


def _names(requirements) -> set[str]:
    return {d.split(">")[0].split("=")[0].split("<")[0].strip() for d in requirements}


def test_install_requirements_of_the_library_are_minimal():
    library = tomllib.loads((ROOT / "core" / "pyproject.toml").read_text())["project"]
    assert library["name"] == "quadnn"
    assert _names(library["dependencies"]) == {"torch", "torchvision", "timm", "numpy"}
    assert not library.get("optional-dependencies"), "the library has no extras: test tools belong to the companion"
    companion = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert companion["name"] == "quadnn-paper" and _names(companion["dependencies"]) == {"quadnn"}
    paper = _names(companion["optional-dependencies"]["paper"])
    assert {"scikit-learn", "scipy", "sympy", "matplotlib", "papermill", "submitit"} <= paper


def test_one_version_source():
    """Both distributions read their version from quadnn.__version__; no other file types it."""
    for path in (ROOT / "pyproject.toml", ROOT / "core" / "pyproject.toml"):
        meta = tomllib.loads(path.read_text())
        assert "version" in meta["project"]["dynamic"] and "version" not in meta["project"], path
        assert meta["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "quadnn.__version__"}, path


@pytest.mark.slow
def test_library_wheel_holds_only_the_library(tmp_path):
    """`pip wheel core/` builds quadnn alone: no quadnn_paper file, no companion requirement."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(ROOT / "core"),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("quadnn-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        metadata = z.read(next(n for n in names if n.endswith("METADATA"))).decode()
    packages = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert packages == {"quadnn"}, packages
    requires = {
        line.split(":", 1)[1].split(">")[0].split("=")[0].strip()
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist:")
    }
    assert requires == {"torch", "torchvision", "timm", "numpy"}, requires


LAYERS = (
    "common",
    "bench",
    "data",
    "engine",
    "analysis",
    "experiments",
    "figures",
    "sections",
    "execution",
    "report",
    "why",
)


def test_every_companion_module_sits_in_exactly_one_layer():
    for path in COMPANION.rglob("*.py"):
        rel = path.relative_to(COMPANION)
        if rel.name == "__init__.py" and len(rel.parts) == 1:
            continue
        top = rel.parts[0].removesuffix(".py")
        assert top in LAYERS, f"{rel} is outside the layers {LAYERS} (docs/layout.md)"


def _independent_sections(config: dict) -> list[str]:
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "independence"]
    return contract["modules"]


def test_the_sections_layer_holds_the_papers_sections_and_nothing_else():
    """One module per paper section (execution.sections.SECTIONS), each independent of the others:
    what several sections share lives in a lower layer (experiments.cifar, analysis), not beside them."""
    from quadnn_paper.execution.sections import SECTIONS

    found = {p.stem for p in (COMPANION / "sections").glob("*.py")} - {"__init__"}
    assert found == set(SECTIONS), f"sections/ holds {sorted(found - set(SECTIONS))} beside the paper's sections"
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert _independent_sections(config) == [f"quadnn_paper.sections.{s}" for s in SECTIONS]


def test_layer_contract_holds_for_every_import():
    """import-linter's contracts (pyproject.toml): the library never imports the companion, and each
    companion layer imports only from layers below it, function-level imports included."""
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run(
        [str(lint), "--config", str(ROOT / "pyproject.toml")], cwd=ROOT / "core", capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]


def test_changelog_has_an_entry_for_the_current_version():
    import quadnn

    text = (ROOT / "CHANGELOG.md").read_text()
    assert f"## {quadnn.__version__} " in text, f"CHANGELOG.md has no entry for {quadnn.__version__}"
