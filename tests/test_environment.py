"""environment.yml (conda) installs the same packages, with the same lower bounds, as pyproject.toml
(its dependencies and every extra, test included)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent

# conda-forge name -> the PyPI requirement name it stands for (with extras, as pyproject.toml has it)
CONDA_TO_PYPI = {
    "python-duckdb": "duckdb",
    "ibis-framework-core": "ibis-framework[duckdb]",  # the duckdb backend comes with python-duckdb
    "uvicorn-standard": "uvicorn[standard]",
}
NOT_PACKAGES = {"python", "pip"}
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
        if name in NOT_PACKAGES:
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
        assert all(s.operator == ">=" for s in specifier), f"{name}: only lower bounds are kept in step"


def test_environment_yml_python_and_package():
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    entries = environment()["dependencies"]
    assert f"python{requires}" in entries
    pip = next(e["pip"] for e in entries if isinstance(e, dict))
    assert "-e ." in pip, "the environment installs metrics_kit itself"
    assert "conda-forge" in environment()["channels"]
