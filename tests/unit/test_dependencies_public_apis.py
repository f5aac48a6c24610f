"""The package uses only the public APIs of requests, urllib3, uvicorn, jupyter_client and ipympl.

Their underscore names change in any release without notice (requests 2.32.0 broke an earlier
HTTPTransport this way), so no module of ours may read, call or override one. Checked on the source:

- an attribute ``_name`` of anything imported from those packages (``Retry._sleep_backoff``,
  ``urllib3.util._x``);
- in a class that subclasses one of their classes: a method ``_name`` that the base class has (an
  override), and ``self._name``, ``cls._name`` or ``super()._name`` where the base class has ``_name``;
- ``getattr``/``setattr``/``hasattr`` of such a name spelt as a string.

Our own underscore names on such a subclass (state the library does not have) are allowed. Where a
private name is ever truly unavoidable it must be listed in ALLOWED with the reason, an upper bound
on the package in pyproject.toml, and a test that fails when it changes.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "metrics_kit"
WATCHED = ("requests", "urllib3", "uvicorn", "jupyter_client", "ipympl")
# (module path, name) -> why it cannot be avoided
ALLOWED: dict[tuple[str, str], str] = {
    ("metrics_kit/notebook/interactive.py", "GuardedCanvas: self._data_url"): (
        "the picture a saved notebook shows is this field of ipympl's widget state, which ipympl's page "
        "code keeps one frame behind; ipympl is capped below 0.11 in pyproject.toml, and "
        "tests/browser/test_charts_in_chromium.py (a saved notebook reopened) and "
        "tests/unit/test_interactive.py fail when it changes"
    ),
}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _imported_names(tree: ast.Module) -> dict[str, str]:
    """Each local name bound to something of a watched package, with its dotted origin."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in WATCHED:
                    local = alias.asname or alias.name.split(".")[0]
                    names[local] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in WATCHED:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _dotted(node: ast.expr) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


def _resolve(dotted: str) -> object | None:
    """The object a dotted origin names (a module, or an attribute of one), if it imports."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            thing: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            thing = getattr(thing, part, None)
            if thing is None:
                return None
        return thing
    return None


def _library_bases(node: ast.ClassDef, names: dict[str, str]) -> list[type]:
    bases = []
    for base in node.bases:
        dotted = _dotted(base)
        if dotted and dotted[0] in names:
            resolved = _resolve(".".join([names[dotted[0]], *dotted[1:]]))
            if isinstance(resolved, type):
                bases.append(resolved)
    return bases


def private_uses(source: str) -> list[tuple[int, str]]:
    """(line, what) for every use of a watched package's underscore name in ``source``."""
    tree = ast.parse(source)
    names = _imported_names(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            dotted = _dotted(node)
            if dotted and dotted[0] in names:
                found.append((node.lineno, ".".join(dotted)))
        elif isinstance(node, ast.ClassDef):
            bases = _library_bases(node, names)
            if not bases:
                continue

            def theirs(name: str) -> bool:
                return _private(name) and any(hasattr(base, name) for base in bases)  # noqa: B023

            for inner in ast.walk(node):
                if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef) and theirs(inner.name):
                    found.append((inner.lineno, f"{node.name}.{inner.name} overrides {bases[0].__name__}'s"))
                elif isinstance(inner, ast.Attribute) and theirs(inner.attr):
                    owner = inner.value
                    is_super = (
                        isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super"
                    )
                    if is_super or (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                        found.append((inner.lineno, f"{node.name}: {ast.unparse(inner)}"))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
        ):
            dotted = _dotted(node.args[0])
            if dotted and dotted[0] in names:
                found.append((node.lineno, f"{node.func.id}({ast.unparse(node.args[0])}, {node.args[1].value!r})"))
    return found


def test_no_module_uses_a_private_name_of_a_watched_package():
    pytest.importorskip("uvicorn")
    pytest.importorskip("jupyter_client")
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = str(path.relative_to(PACKAGE.parent))
        for line, what in private_uses(path.read_text()):
            if (module, what) not in ALLOWED:
                found.append(f"{module}:{line}: {what}")
    assert not found, "private names of other packages:\n" + "\n".join(found)


def test_the_check_finds_each_kind_of_private_use():
    source = """
import urllib3
from urllib3.util.retry import Retry
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class Backoff(Retry):
    def _sleep_backoff(self):
        pass

    def planned(self):
        return self._is_method_retryable("GET")


class Protocol(HttpToolsProtocol):
    def _mine(self):
        self._ours = 1
        super()._unset_keepalive_if_required()


def use():
    from jupyter_client import AsyncKernelManager

    class Manager(AsyncKernelManager):
        async def _async_pre_start_kernel(self, **kw):
            return await super()._async_pre_start_kernel(**kw)

    getattr(Retry, "_sleep_backoff")
    return urllib3.util._private_thing, Retry.DEFAULT
"""
    found = [what for _, what in private_uses(source)]
    assert "Backoff._sleep_backoff overrides Retry's" in found
    assert "Backoff: self._is_method_retryable" in found
    assert "Protocol: super()._unset_keepalive_if_required" in found
    assert "Manager._async_pre_start_kernel overrides AsyncKernelManager's" in found
    assert "Manager: super()._async_pre_start_kernel" in found
    assert "getattr(Retry, '_sleep_backoff')" in found
    assert "urllib3.util._private_thing" in found
    assert not any("_mine" in what or "_ours" in what or "DEFAULT" in what for what in found)
