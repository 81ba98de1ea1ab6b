"""Every paper section is a declaration with one interface and one name (docs/layout.md): the
module ``quadnn_paper.sections.<name>`` declares its work and its outputs; ``notebooks/<name>.ipynb``
is a thin view that runs the work and publishes the outputs; ``paper/sections/<name>.tex`` loads
its variables; ``make status`` has a line for it."""

import ast
import importlib
import inspect
import json
import pkgutil
import re
from pathlib import Path

import pytest
from source_strings import string_literals

import quadnn_paper.sections as sections_pkg
from quadnn_paper.common.outputs import Figure, Lines, Table, Variables
from quadnn_paper.engine import Computation, RunConfig, work_id

ROOT = Path(__file__).resolve().parents[1]
NAMES = sorted(m.name for m in pkgutil.iter_modules(sections_pkg.__path__) if not m.name.startswith("_"))
NOTEBOOK_CODE_LINES = 40


def test_the_sections_are_the_papers_eight():
    from quadnn_paper.execution.sections import SECTIONS

    assert (
        NAMES
        == sorted(SECTIONS)
        == sorted(
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
    )


@pytest.mark.parametrize("name", NAMES)
def test_section_declares_its_work_and_outputs(name):
    module = importlib.import_module(f"quadnn_paper.sections.{name}")
    assert module.NAME == name
    assert set(module.PROTOCOLS) == {"smoke", "cpu", "full"}
    for fn, first in (
        ("protocol", ["profile", "tiny"]),
        ("data", ["profile", "tiny"]),
        ("plan", ["profile", "tiny"]),
        ("outputs", ["results"]),
    ):
        params = list(inspect.signature(getattr(module, fn)).parameters)
        assert params[: len(first)] == first, f"{name}.{fn}{params}"
    p = module.protocol("cpu")
    p["__probe__"] = 1
    assert "__probe__" not in module.PROTOCOLS["cpu"], "protocol() must return a copy"
    with pytest.raises(ValueError, match="full"):
        module.protocol("cpu", tiny=True)
    for profile, tiny in (("smoke", False), ("cpu", False), ("full", False), ("full", True)):
        plan = module.plan(profile, tiny)
        assert isinstance(plan, dict) and plan, f"{name} plans no work at {profile}"
        work = list(plan.values())
        assert all(isinstance(w, (RunConfig, Computation)) for w in work), f"{name}.plan: {plan!r}"
        assert len({work_id(w) for w in work}) == len(work), f"{name}.plan names an item twice"
        assert isinstance(module.data(profile, tiny), str) and module.data(profile, tiny)
        for c in (w for w in work if isinstance(w, Computation)):
            module_name, _, attribute = c.function.partition(":")
            fn = importlib.import_module(module_name)
            for part in attribute.split("."):
                fn = getattr(fn, part)
            assert callable(fn), c.function
            # the config and the results it needs are its keyword arguments
            inspect.signature(fn).bind(**c.config, **{n.name: None for n in c.needs})
            assert c.seconds > 0


# What builds a section's plan or protocol: the framework calls each once and hands the outputs
# their results (``data`` may: the framework calls it too, for the words on the data).
_PLANNERS = {"plan", "run_plan", "runs", "protocol"}


def _reached(tree: ast.Module, start: str) -> set[str]:
    """The module's functions ``start`` calls, directly or through others (by name), data() left out."""
    bodies = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name in seen or name not in bodies:
            continue
        seen.add(name)
        called = {n.func.id for n in ast.walk(bodies[name]) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        todo += [c for c in called if c != "data"]
    return seen | {c for f in seen for c in _calls(bodies[f])}


def _calls(fn: ast.FunctionDef) -> set[str]:
    return {n.func.id for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)} - {"data"}


@pytest.mark.parametrize("name", NAMES)
def test_outputs_read_the_plan_they_are_handed_and_never_build_one(name):
    """A section's ``outputs`` (and all it calls) take the profile, protocol and plan from the
    results the framework hands them: nothing there plans the work again to find a result."""
    path = Path(sections_pkg.__path__[0]) / f"{name}.py"
    tree = ast.parse(path.read_text())
    replanned = _reached(tree, "outputs") & _PLANNERS
    assert not replanned, f"{name}.outputs reaches {sorted(replanned)}"
    # the check sees calls: a section whose outputs called plan() would fail it
    probe = ast.parse("def outputs(r):\n    return helper(r)\n\ndef helper(r):\n    return plan(r.profile)\n")
    assert _reached(probe, "outputs") & _PLANNERS == {"plan"}


def test_the_framework_plans_once_and_hands_the_plan_to_the_outputs(tmp_path, monkeypatch):
    """run_section calls a section's plan() once; its outputs get that plan, with each item's result
    under the section's own key."""
    from quadnn_paper.execution import run as run_module
    from quadnn_paper.sections import expressivity as section

    calls, handed = [], []
    real_plan, real_outputs = section.plan, section.outputs
    monkeypatch.setattr(section, "plan", lambda *a, **k: calls.append(a) or real_plan(*a, **k))
    monkeypatch.setattr(section, "outputs", lambda results: handed.append(results) or real_outputs(results))
    # every item pending: the section shows each part as pending
    monkeypatch.setattr(run_module, "execute_work", lambda work, *a, **k: {work_id(w): None for w in work})
    out = run_module.run_section("expressivity", "smoke", cache_dir=tmp_path)
    assert len(calls) == 1 and len(handed) == 1
    (results,) = handed
    plan = real_plan("smoke")
    assert results.plan == plan and list(results) == list(plan) and results.profile == "smoke"
    assert "oscillation" in plan and results.pending == len(plan)
    assert any(isinstance(o, Lines) and o.text == ["oscillation: pending (see make status)"] for o in out.outputs)


def test_every_weight_transfer_starts_from_a_conventional_network():
    """The engine keeps stage weights for conventional networks only (``kept_stages``): every
    transfer any section plans, at any profile, must start from one."""
    from quadnn_paper.bench import is_quadratic
    from quadnn_paper.engine.tasks import model_for
    from quadnn_paper.execution.sections import SECTIONS, section_runs

    sources = {
        (r.transfer_from.model, json.dumps(r.transfer_from.model_kwargs, sort_keys=True)): r.transfer_from
        for name in SECTIONS
        for profile, tiny in (("smoke", False), ("cpu", False), ("full", False), ("full", True))
        for r in section_runs(name, profile, tiny)
        if r.transfer_from is not None
    }
    assert sources, "no section plans a weight transfer: the principle guards nothing"
    for src in sources.values():
        assert not is_quadratic(model_for(src)), src.describe()


def _code_lines(nb: dict) -> list[str]:
    return [
        line
        for c in nb["cells"]
        if c["cell_type"] == "code"
        for line in "".join(c["source"]).splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_a_thin_view(name):
    """Parameters, one call that runs the work, one that shows and publishes the outputs: nothing
    computed, plotted or formatted in the notebook."""
    nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
    lines = _code_lines(nb)
    assert len(lines) <= NOTEBOOK_CODE_LINES, f"notebooks/{name}.ipynb has {len(lines)} lines of code"
    code = "\n".join(lines)
    assert f'run_section("{name}"' in code and "publish(section, paper_dir)" in code
    tree = ast.parse(code)
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda, ast.For, ast.ClassDef))]
    tex = (ROOT / "paper" / "sections" / f"{name}.tex").read_text()
    assert f"\\loadvariables{{{name}}}" in tex, f"paper/sections/{name}.tex must load the variables of {name}"


def _strings(path: Path):
    """The string constants of a module, docstrings left out, each with whether it is typeset by a
    table: inside a ``Column(...)`` (a column's head or alignment) or ``Cell(...)`` (a cell's LaTeX)."""
    tree = ast.parse(path.read_text())
    typeset = {
        id(c)
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) in ("Column", "Cell")
        for c in ast.walk(n)
    }
    for node in string_literals(tree):
        yield node.lineno, node.value, id(node) in typeset


# the sections, and the layers that draw their figures and build their tables' cells and texts
_TEXT_MAKERS = sorted(
    p for layer in ("sections", "figures", "analysis") for p in (ROOT / "core/quadnn_paper" / layer).glob("*.py")
)


@pytest.mark.parametrize("path", _TEXT_MAKERS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sections_hold_latex_only_in_their_columns_and_cells(path):
    """A section's LaTeX is a table column's head or alignment (``Column``) or a cell's (``Cell``),
    which the writer typesets; a figure's math text ($...$) is matplotlib's, not the report's. The
    same holds where the sections' figures, cells and texts are made (figures/, analysis/)."""
    found = []
    for line, text, typeset in _strings(path):
        outside_math = re.sub(r"\$[^$]*\$", "", text)
        if not typeset and re.search(r"\\[A-Za-z]+", outside_math):
            found.append(f"{path.name}:{line}: {text[:60]!r}")
    assert not found, found


def test_status_lists_every_section():
    from quadnn_paper.execution import status

    assert set(status.SECTIONS) == set(NAMES)
    text, failed = status.plan_table("smoke", ROOT / "build" / "no-such-cache" / "runs")
    assert not failed
    listed = [line.split()[0] for line in text.splitlines()[1:] if line.split() and line.split()[0] in NAMES]
    assert sorted(listed) == NAMES


def test_status_names_a_link_in_a_runs_place_and_goes_on(tmp_path):
    import subprocess
    import sys

    from quadnn_paper.execution import status
    from quadnn_paper.execution.sections import section_runs

    cfg = section_runs("cifar_comparison", "smoke")[0]
    runs, elsewhere = tmp_path / "runs", tmp_path / "elsewhere"
    runs.mkdir()
    elsewhere.mkdir()
    (runs / cfg.run_id).symlink_to(elsewhere)  # a teammate's link where the run's folder belongs
    text, failed = status.plan_table("smoke", runs)
    assert [(s, c.run_id) for s, c, _ in failed] == [("cifar_comparison", cfg.run_id)]
    assert failed[0][2].startswith("refused: ") and "symbolic link" in failed[0][2]
    assert not list(elsewhere.iterdir())  # nothing written through the link
    r = subprocess.run(
        [sys.executable, "-m", "quadnn_paper.execution.status", "--profile", "smoke", "--cache", str(runs)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and "Traceback" not in r.stderr and "refused: " in r.stdout


def test_the_writer_renders_every_output_kind(tmp_path):
    import matplotlib.pyplot as plt

    from quadnn_paper.execution.sections import SectionOutputs
    from quadnn_paper.report import publish

    def draw():
        fig, ax = plt.subplots()
        ax.plot([0, 1], [0, 1])
        ax.set_xlabel("x")
        ax.set_ylabel("y")
        return fig

    outputs = [Table("t", ["a", "b"], [["x", 1.5]]), Figure("f", draw), Variables({"Answer": 42}), Lines(["hi"])]
    publish(SectionOutputs("vgg_stability", "smoke", "made up", outputs), tmp_path)
    assert (tmp_path / "tables" / "t.csv").read_text() == "a,b\nx,1.5\n"
    assert (tmp_path / "figures" / "f.pdf").exists()
    assert r"\newcommand{\vggstabilityAnswer}{42}" in (tmp_path / "variables" / "vgg_stability.tex").read_text()
    with pytest.raises(TypeError, match="not an output"):
        publish(SectionOutputs("vgg_stability", "smoke", "made up", ["text"]), tmp_path)


@pytest.mark.parametrize("name", NAMES)
def test_papermill_reads_every_parameter_make_passes(name):
    """make paper passes these five to every notebook: papermill must parse each (a comment it
    cannot parse drops its line silently, and the parameter then keeps its default)."""
    import papermill

    params = papermill.inspect_notebook(str(ROOT / "notebooks" / f"{name}.ipynb"))
    assert set(params) == {"profile", "paper_dir", "cache_dir", "runner", "tiny"}, sorted(params)


def _imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at any level (function-level imports included)."""
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
    return out


@pytest.mark.parametrize("path", sorted((ROOT / "core/quadnn_paper/sections").glob("*.py")), ids=lambda p: p.name)
def test_a_section_draws_nothing_itself(path):
    """A section picks the numbers a figure shows; the drawing is in quadnn_paper.figures, so a
    section never imports matplotlib (the probe: an import of it is found)."""
    drawing = {m for m in _imported_modules(path) if m.split(".")[0] == "matplotlib"}
    assert not drawing, f"{path.name} imports {sorted(drawing)}: draw in quadnn_paper/figures/{path.name}"


def test_the_drawing_check_finds_a_function_level_import(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    import matplotlib.pyplot as plt\n    return plt\n")
    assert "matplotlib.pyplot" in _imported_modules(probe)
