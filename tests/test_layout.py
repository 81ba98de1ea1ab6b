"""The library and the paper companion: one direction of imports, a light `import quadnn`."""
import ast
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "core" / "quadnn"
COMPANION = ROOT / "core" / "quadnn_paper"
HEAVY = ("sklearn", "scipy", "matplotlib", "papermill", "pandas", "submitit")


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


def test_library_never_imports_the_companion_or_experiment_dependencies():
    allowed_third_party = {"torch", "torchvision", "timm", "numpy"}
    stdlib = set(sys.stdlib_module_names)
    for path, names in imported_top_modules(LIBRARY).items():
        assert "quadnn_paper" not in names, f"{path} imports the paper companion"
        extra = names - stdlib - allowed_third_party - {"quadnn"}
        assert not extra, f"{path} imports {sorted(extra)}: quadnn may need only {sorted(allowed_third_party)}"


def test_companion_imports_the_library_by_its_public_name():
    uses_library = [p for p, names in imported_top_modules(COMPANION).items() if "quadnn" in names]
    assert uses_library, "the companion is expected to build on quadnn"


def test_import_quadnn_loads_no_heavy_dependency():
    code = ("import sys, quadnn, timm; "
            "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))")
    loaded = set(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                text=True).stdout.split())
    assert "quadnn" in loaded and "quadnn_paper" not in loaded
    assert not loaded & set(HEAVY), f"import quadnn loaded {sorted(loaded & set(HEAVY))}"


def test_install_requirements_of_the_library_are_minimal():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {d.split(">")[0].split("=")[0].split("<")[0].strip() for d in project["dependencies"]}
    assert names == {"torch", "torchvision", "timm", "numpy"}
    paper = {d.split(">")[0].split("=")[0].strip() for d in project["optional-dependencies"]["paper"]}
    assert {"scikit-learn", "scipy", "sympy", "matplotlib", "papermill", "submitit"} <= paper
