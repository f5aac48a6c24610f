"""The install: the core is light (importing metrics_kit loads no JupyterLab, plotting or web server),
and environment.yml (conda) installs the same packages, with the same bounds, as pyproject.toml (its
dependencies and every extra)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]

# conda-forge name -> the PyPI requirement name it stands for (with extras, as pyproject.toml has it)
CONDA_TO_PYPI = {
    "python-duckdb": "duckdb",
    "ibis-framework-core": "ibis-framework[duckdb]",  # the duckdb backend comes with python-duckdb
    "uvicorn-standard": "uvicorn[standard]",
}
NOT_PACKAGES = {"python", "pip"}
# What conda installs that pip cannot, and so pyproject.toml does not name: the Java runtime of the
# [spark] extra (on Debian, the openjdk-17-jre-headless of .ci/apt-packages).
CONDA_ONLY = {"openjdk"}
PROJECT = "metrics-kit"
CONDA_SPEC = re.compile(r"^(?P<name>[A-Za-z0-9_.\-]+)\s*(?P<spec>(?:[<>=!~]=?\s*[\w.*]+\s*,?\s*)*)$")


def _key(name: str, extras=()) -> str:
    return canonicalize_name(name) + (f"[{','.join(sorted(extras))}]" if extras else "")


def pyproject_requirements() -> dict[str, SpecifierSet]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        lines += extra
    found = {}
    for line in lines:
        requirement = Requirement(line)
        if canonicalize_name(requirement.name) == PROJECT:  # an extra made of other extras
            continue
        found[_key(requirement.name, requirement.extras)] = requirement.specifier
    return found


def environment() -> dict:
    return yaml.safe_load((ROOT / "environment.yml").read_text())


def environment_requirements() -> dict[str, SpecifierSet]:
    found = {}
    for entry in environment()["dependencies"]:
        if isinstance(entry, dict):  # the pip: section, in PyPI names
            for line in entry.get("pip", []):
                if line.startswith("-"):  # -e . : the package itself
                    continue
                requirement = Requirement(line)
                found[_key(requirement.name, requirement.extras)] = requirement.specifier
            continue
        match = CONDA_SPEC.match(entry.strip())
        assert match, f"environment.yml: cannot read {entry!r}"
        name = match["name"]
        if name in NOT_PACKAGES or name in CONDA_ONLY:
            continue
        pypi = Requirement(CONDA_TO_PYPI.get(name, name))
        found[_key(pypi.name, pypi.extras)] = SpecifierSet(match["spec"].replace(" ", ""))
    return found


def test_environment_yml_has_the_same_packages_as_pyproject():
    pyproject, conda = pyproject_requirements(), environment_requirements()
    assert sorted(set(pyproject) - set(conda)) == [], "in pyproject.toml but not in environment.yml"
    assert sorted(set(conda) - set(pyproject)) == [], "in environment.yml but not in pyproject.toml"


def test_environment_yml_has_the_same_lower_bounds():
    pyproject, conda = pyproject_requirements(), environment_requirements()
    differ = {
        name: (str(pyproject[name]), str(conda[name]))
        for name in pyproject
        if name in conda and pyproject[name] != conda[name]
    }
    assert differ == {}, "pyproject.toml vs environment.yml"
    for name, specifier in pyproject.items():
        # A ceiling only where a package's supported range ends (pyspark for Ibis, say).
        assert all(s.operator in (">=", "<") for s in specifier), f"{name}: a floor, and at most a ceiling"


def test_environment_yml_python_and_package():
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    entries = environment()["dependencies"]
    assert f"python{requires}" in entries
    pip = next(e["pip"] for e in entries if isinstance(e, dict))
    assert "-e ." in pip, "the environment installs metrics_kit itself"
    assert "conda-forge" in environment()["channels"]


# The top-level modules of the [lab] and [serve] extras: the core must run without any of them.
EXTRAS_MODULES = ["jupyterlab", "ipykernel", "IPython", "ipywidgets", "matplotlib", "papermill", "nbconvert"]
EXTRAS_MODULES += ["nbformat", "jupyter_client", "uvicorn", "uvloop", "httptools"]


def test_importing_metrics_kit_loads_no_extra():
    code = "import sys, metrics_kit; print(sorted(set(sys.argv[1:]) & set(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code, *EXTRAS_MODULES], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"


def test_the_core_needs_no_extra():
    """`pip install metrics-kit` brings none of the extras' packages; they are in the extras."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {canonicalize_name(Requirement(line).name) for line in project["dependencies"]}
    extras = project["optional-dependencies"]
    assert core.isdisjoint({"jupyterlab", "ipykernel", "ipywidgets", "matplotlib", "papermill", "nbconvert"})
    assert core.isdisjoint({"uvicorn", "pyspark", "pytest"})
    assert {"uvicorn"} <= {canonicalize_name(Requirement(line).name) for line in extras["serve"]}
    for extra in ("lab", "serve"):
        assert any(Requirement(line).name == PROJECT and extra in Requirement(line).extras for line in extras["test"])
