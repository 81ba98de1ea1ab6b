"""Every paper section has one interface and one name (docs/layout.md): the module
``quadnn_paper.sections.<name>``, ``notebooks/<name>.ipynb``, ``paper/sections/<name>.tex``, the report
section its notebook writes, and its ``make status`` line."""

import ast
import importlib
import inspect
import json
import pkgutil
from pathlib import Path

import pytest

import quadnn_paper.sections as sections_pkg

ROOT = Path(__file__).resolve().parents[1]
NAMES = sorted(m.name for m in pkgutil.iter_modules(sections_pkg.__path__) if not m.name.startswith("_"))


def test_the_sections_are_the_papers_eight():
    assert NAMES == sorted(
        [
            "expressivity",
            "runge",
            "cifar_tuning",
            "vgg_stability",
            "cifar_comparison",
            "imagenet",
            "kitti_lapdepth",
            "efficiency",
        ]
    )


@pytest.mark.parametrize("name", NAMES)
def test_section_module_has_the_interface(name):
    module = importlib.import_module(f"quadnn_paper.sections.{name}")
    assert module.NAME == name
    assert set(module.PROTOCOLS) == {"smoke", "cpu", "full"}
    for fn in ("protocol", "runs", "summary"):
        params = list(inspect.signature(getattr(module, fn)).parameters)
        assert params[:2] == (["profile", "tiny"] if fn != "summary" else ["results", "profile"]) or (
            fn == "summary" and params[:3] == ["results", "profile", "tiny"]
        ), f"{name}.{fn}{params}"
    p = module.protocol("cpu")
    p["__probe__"] = 1
    assert "__probe__" not in module.PROTOCOLS["cpu"], "protocol() must return a copy"
    with pytest.raises(ValueError, match="full"):
        module.protocol("cpu", tiny=True)
    assert isinstance(module.runs("smoke"), list)


@pytest.mark.parametrize("name", NAMES)
def test_one_name_across_notebook_tex_and_report(name):
    nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert f"quadnn_paper.sections import {name}" in code, f"notebooks/{name}.ipynb does not import its section"
    assert ".NAME" in code and "Report(paper_dir, " in code, (
        f"notebooks/{name}.ipynb: Report(paper_dir, <section>.NAME, ...)"
    )
    tex = (ROOT / "paper" / "sections" / f"{name}.tex").read_text()
    assert f"\\loadvariables{{{name}}}" in tex, f"paper/sections/{name}.tex must load the variables of {name}"


def test_status_lines_are_section_names():
    from quadnn_paper.execution.status import SECTIONS

    assert set(SECTIONS) <= set(NAMES)
    trains = {n for n in NAMES if importlib.import_module(f"quadnn_paper.sections.{n}").runs("full")}
    assert trains == set(SECTIONS), "make status lists exactly the sections that train through the engine"


@pytest.mark.parametrize("name", NAMES)
def test_notebooks_define_no_functions_but_plots(name):
    """Aggregation, cell formatting and timing live in modules; a notebook may define a plot helper only."""
    nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        tree = ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.name.startswith(("plot", "draw")), f"notebooks/{name}.ipynb defines {node.name}()"
