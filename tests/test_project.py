"""Project set-up: pyproject and environment.yml install the same thing."""

import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_environment_yml_matches_pyproject_and_makefile():
    env = (ROOT / "environment.yml").read_text()
    make = (ROOT / "Makefile").read_text()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = set(project["project"]["optional-dependencies"])
    installed = re.search(r"-e \.\[([^\]]+)\]", env).group(1).split(",")
    assert set(installed) == extras, "environment.yml must install every extra of pyproject.toml"
    assert set(re.search(r"-e '\.\[([^\]]+)\]'", make).group(1).split(",")) == extras
    torch_pins = re.search(r"^TORCH\s*:=\s*(.+)$", make, re.M).group(1).split()
    for pin in torch_pins:
        assert pin in env, f"{pin} (Makefile) missing from environment.yml"
    assert re.search(r"python=3\.11", env)
