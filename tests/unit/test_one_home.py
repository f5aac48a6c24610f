"""Each job has one home (issue 28): no module uses another module's private names, and no module but
spec/wire.py spells a path, header, error code or wire-only parameter of the HTTP contract.

The per-area tests (test_client_collaborators.py, test_wire_client_side.py, test_wire_server.py,
test_engines.py) say more of each area; these two hold for every module of the package."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from metrics_kit.spec import wire
from metrics_kit.spec.wire import ErrorCode

PACKAGE = Path(__file__).resolve().parents[2] / "metrics_kit"
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)

# Names that look private but are public APIs by design: sys._getframe, the Enum hooks and members'
# own fields, the namedtuple methods, and IPython's _repr_*_ display protocol (matched below).
NOT_PRIVATE = {"_getframe", "_name_", "_value_", "_missing_", "_replace", "_asdict", "_fields", "_make"}


def _private(name: str) -> bool:
    dunder = name.startswith("__") and name.endswith("__")
    display = name.startswith("_repr_") and name.endswith("_")
    return name.startswith("_") and not dunder and not display and name not in NOT_PRIVATE


def _own_names(tree: ast.AST) -> set[str]:
    """Every name a module defines: functions, classes, assigned names and attributes, arguments,
    import aliases, __slots__ entries. A private name of its own a module may use as it likes."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update(alias.asname for alias in node.names if alias.asname)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets
        ):
            names.update(
                e.value for e in ast.walk(node.value) if isinstance(e, ast.Constant) and isinstance(e.value, str)
            )
    return names


def private_uses(source: str) -> list[tuple[int, str]]:
    """(line, what) for each use of a private name the module does not define: an import of it, an
    attribute, a getattr/hasattr/setattr/delattr of it by a constant name."""
    tree = ast.parse(source)
    own = _own_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found += [(node.lineno, f"from {node.module} import {a.name}") for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in own:
            found.append((node.lineno, f".{node.attr}"))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
            and node.args[1].value not in own
        ):
            found.append((node.lineno, f"{node.func.id}(..., {node.args[1].value!r})"))
    return found


def test_no_module_uses_another_modules_private_names():
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {what}"
        for path in MODULES
        for line, what in private_uses(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "private names of another module:\n" + "\n".join(found)


def test_the_private_name_scan_sees_imports_attributes_and_getattr():
    source = (
        "from x import _hidden\n"
        "value = thing._secret\n"
        "flag = hasattr(thing, '_other')\n"
        "self._mine = 1\n"
        "ok = (self._mine, sys._getframe(), member._value_, obj._repr_html_(), obj.__dict__)\n"
        "getattr(thing, '_mine')\n"
    )
    assert private_uses(source) == [(1, "from x import _hidden"), (2, "._secret"), (3, "hasattr(..., '_other')")]


# What only the contract spells: paths (also inside a message), headers, the media type, error
# codes and metric_name. Left out, as they are also other things' names: "project", "granularity"
# and "date" (the event data's columns, the library's arguments; Date is also a header), "host" (a
# setting of serve and a header), "limit" and "offset" (/explain's page, and words of SQL).
SPELT = {
    *(getattr(wire, name) for name in dir(wire) if name.endswith("_HEADER")),
    wire.JSON_TYPE,
    wire.INCOMPLETE_TAG,
    wire.METRIC_NAME,
    *(code.value for code in ErrorCode),
} - {*wire.PARAMETERS[1:], wire.HOST_HEADER}
PATHS = re.compile("|".join(rf"(?<![\w/.]){re.escape(path)}(?![\w/])" for path in wire.SERVED_PATHS))


def _spelling(text: str, spelt: set[str]) -> bool:
    """Whether ``text`` is one of ``spelt`` as it is, or a header of it as a message would write it
    (``X-Data-Version``)."""
    return text in spelt or (text.lower() in spelt and text == "-".join(p.capitalize() for p in text.split("-")))


def spelt_again(source: str, spelt: set[str] = SPELT) -> list[tuple[int, str]]:
    """(line, text) of each string or bytes constant, docstrings aside, that is one of ``spelt`` (see
    ``_spelling``) or holds a path of the contract."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes) and id(node) not in docstrings:
            text = node.value.decode("latin-1") if isinstance(node.value, bytes) else node.value
            if _spelling(text, spelt) or PATHS.search(text):
                found.append((node.lineno, text))
    return found


def test_no_module_but_wire_spells_the_contract():
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {text!r}"
        for path in MODULES
        if path != PACKAGE / "spec" / "wire.py"
        for line, text in spelt_again(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "spelt outside spec/wire.py:\n" + "\n".join(found)


def test_the_contract_scan_sees_paths_in_messages_headers_and_codes():
    source = (
        '"""Answers /metrics."""\n'  # a docstring may name a path
        'routes = {"/projects": 1}\n'
        'message = f"GET /catalogue lists them; see {x}/openapi.json"\n'
        'header = (b"etag", "X-Data-Version")\n'
        'code = "not_found"\n'
        'name = "metric_name"\n'
        'fine = ("/metricsx", "a/explain", "etag-like", "project", "date", "granularity", "ETag")\n'
    )
    assert sorted(line for line, _ in spelt_again(source)) == [2, 3, 3, 4, 4, 5, 6]
