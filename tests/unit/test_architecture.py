"""docs/architecture.md against the code, claim by claim where a test can check one: the layer table
and the drawing say what tests/unit/test_layers.py enforces, importing metrics_kit loads no module of
the server, and "Installing a part" names the core's and each extra's packages as pyproject.toml
declares them. (test_layers.py checks the tree of modules; test_public_api.py and
test_environment.py what importing metrics_kit loads of DuckDB, Ibis and the extras.)"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from test_layers import ALLOWED, EVERYTHING, LAYERS

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")

# How the page names each layer.
NAMES = {
    f"{name}/" if name in ("spec", "client", "notebook", "server", "tools") else f"{name}.py": layer
    for name, layer in LAYERS.items()
    if layer != "root"
}
NAMES |= {"__init__.py": "root", "__main__.py": "root", "the package root": "root"}
# A package as the page names it, and its name on PyPI.
PACKAGES = {
    "DuckDB": "duckdb",
    "Ibis": "ibis-framework",
    "JupyterLab": "jupyterlab",
    "Sphinx": "sphinx",
    "the PyData theme": "pydata-sphinx-theme",
    "MyST-NB": "myst-nb",
    "Voilà": "voila",
}


def _layers(cell: str, this: str = "") -> set[str]:
    """The layers a cell of the table names, for the layer ``this``: in backticks (``spec``,
    ``client/``), or in words."""
    if cell.strip() in ("nothing", ""):
        return set()
    if cell.strip() == "anything":
        return set(EVERYTHING)
    if cell.strip() == "anything of ours":
        return EVERYTHING - {this}
    named = re.findall(r"`([^`]+)`", cell) + (["the package root"] if "the package root" in cell else [])
    return {NAMES.get(name, NAMES.get(f"{name}/", NAMES.get(f"{name}.py", f"unknown {name}"))) for name in named}


def table() -> dict[str, tuple[set[str], set[str]]]:
    """The layer table: each layer's (may import, never imports)."""
    rows = {}
    for line in DOC.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        for layer in _layers(cells[0]):
            may = _layers(cells[1], layer)
            never = EVERYTHING - may - {layer} if cells[2] == "everything else" else _layers(cells[2], layer)
            rows[layer] = (may, never)
    return rows


def test_the_layer_table_says_what_test_layers_enforces():
    rows = table()
    assert set(rows) == EVERYTHING
    for layer, (may, never) in rows.items():
        assert may | {layer} == ALLOWED[layer] | {layer}, layer
        assert never == EVERYTHING - ALLOWED[layer] - {layer}, layer


def test_the_drawing_points_only_down():
    drawing = DOC[DOC.index("```mermaid") : DOC.index("```", DOC.index("```mermaid") + 3)]
    boxes = dict(re.findall(r'(\w+)\["([^"]+)"\]', drawing))
    layers = {
        box: {NAMES[name] for name in re.findall(r"[\w.]+(?:/|\.py)|the package root", label)}
        for box, label in boxes.items()
    }
    layers["root"] = {"root"}  # the box of the package root, __init__.py (mk.*)
    arrows = re.findall(r"(\w+)(?:\[[^\]]*\])? --> (\w+)", drawing)
    assert len(arrows) > 10
    for source, target in arrows:
        for here in layers[source]:
            assert layers[target] <= ALLOWED[here], (source, target)


def test_importing_metrics_kit_loads_no_module_of_the_server():
    code = "import sys, metrics_kit; print(sorted(m for m in sys.modules if m.startswith('metrics_kit.server')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "[]"


def _section() -> str:
    start = DOC.index("## Installing a part")
    return DOC[start : DOC.index("\n## ", start + 1)]


def _requirements(lines: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(line).name) for line in lines}


def test_the_core_holds_the_packages_of_the_embedded_default():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    said = re.search(r"the packages the embedded default runs on \(([^)]+)\)", " ".join(_section().split()))
    assert said is not None
    named = {canonicalize_name(PACKAGES.get(name, name)) for name in said[1].split(", ")}
    assert named == {"duckdb", "ibis-framework", "pyarrow", "pandas"}
    assert named <= _requirements(project["dependencies"])


def test_every_extra_is_named_with_its_packages():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    said = dict(re.findall(r"^- `\[(\w+)\]`: (.*)$", _section(), re.MULTILINE))
    assert set(said) == set(extras)
    core_only = {"test"}  # "everything make test runs": named by what it is for
    for extra, text in said.items():
        if extra in core_only:
            continue
        named = {canonicalize_name(PACKAGES.get(name, name)) for name in text.split(", for ")[0].split(", ")}
        assert named <= _requirements(extras[extra]), extra
