"""The layers of metrics_kit (docs/architecture.md): who may import whom, checked on every import
statement of every module, imports inside functions and ``if TYPE_CHECKING:`` blocks included (the
parts of server/ too: serving never imports the build); no import cycle at run time (imports inside
functions count, ``if TYPE_CHECKING:`` blocks do not); and docs/architecture.md names exactly the
modules there are."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import load_file

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "metrics_kit"

# The layer of each module: its first name under metrics_kit (a subpackage or a top-level module).
# "root" is the package itself (__init__, the public face) and __main__.
LAYERS = {
    "errors": "errors",
    "files": "files",
    "spec": "spec",
    "client": "client",
    "notebook": "notebook",
    "server": "server",
    "embedded": "embedded",
    "tools": "tools",
    "__main__": "root",
}
EVERYTHING = {"root", "errors", "files", "spec", "client", "notebook", "server", "embedded", "tools"}

# What each layer may import, of ours (itself always). Arrows only go down: spec below client and
# server, client below notebook; errors and files are the base. Only embedded, tools and the root
# join the client side and the server side.
ALLOWED = {
    "errors": set(),
    "files": set(),
    "spec": {"errors"},
    "client": {"spec", "errors", "files"},
    "notebook": {"client", "spec", "errors", "files"},
    "server": {"spec", "errors", "files"},
    "embedded": {"client", "server", "spec", "errors", "files"},
    "tools": EVERYTHING,
    "root": EVERYTHING,
}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package under ``root``, by dotted name."""
    return {module_name(p, root): p for p in sorted((root / PACKAGE).rglob("*.py")) if "__pycache__" not in p.parts}


def layer(name: str) -> str:
    parts = name.split(".")
    if parts == [PACKAGE]:
        return "root"
    return LAYERS.get(parts[1], f"unknown ({parts[1]})")


def imported(path: Path, name: str, known: set[str], *, at_run_time: bool = False) -> Iterator[tuple[int, str]]:
    """(line, module) for every import in the file, at any depth. ``from x import y`` counts as
    importing ``x.y`` when that is a module, else ``x``; ``importlib.import_module("x")`` of a
    constant name counts too. ``at_run_time``: leave out what ``if TYPE_CHECKING:`` guards."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in _run_time_nodes(tree) if at_run_time else ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                yield node.lineno, submodule if submodule in known else source
        elif isinstance(node, ast.Call) and _call_name(node.func) in ("import_module", "__import__"):
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                yield node.lineno, node.args[0].value


def _run_time_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node, less the bodies of ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``); their
    ``else:`` runs, so it stays."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _call_name(node.test) == "TYPE_CHECKING":
            for child in node.orelse:
                yield child
                yield from _run_time_nodes(child)
            continue
        yield node
        yield from _run_time_nodes(node)


def _call_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def violations(root: Path) -> list[str]:
    """Every import that breaks the rules, as 'file:line: module (layer) imports module (layer)'."""
    found = modules(root)
    known = set(found)
    problems = []
    for name, path in found.items():
        here = layer(name)
        if here not in ALLOWED:
            problems.append(f"{path.relative_to(root)}: {name} is in no layer: add it to LAYERS and ALLOWED")
            continue
        for line, target in imported(path, name, known):
            if target != PACKAGE and not target.startswith(PACKAGE + "."):
                continue
            there = layer(target)
            if there != here and there not in ALLOWED[here]:
                problems.append(f"{path.relative_to(root)}:{line}: {name} ({here}) imports {target} ({there})")
    return problems


# Inside server/, each folder is a layer of its own, with what it may import of the others; the
# modules directly in server/ (dataset.py: it opens a service, reading aggregates or building them)
# sit above them all. Serving (aggregates -> answers) never imports the build (events -> aggregates):
# serving prebuilt aggregates loads no build code (tests/service/test_aggregates.py checks the
# modules a `metrics-kit serve --aggregates` loads). The build writes the aggregates serving reads.
SERVER = f"{PACKAGE}.server"
SERVER_PARTS = {
    "data": set(),  # event data: the format, the files, validation, the demo
    "metrics": {"data"},  # the metrics as expressions over the event tables, and as SQL
    "serving": {"data", "metrics"},
    "building": {"data", "metrics", "serving"},
    "http": {"serving", "metrics"},  # the HTTP shell over serving (the catalogue's SQL definitions)
}
_TOP = "server/ itself"


def server_part(name: str, packages: set[str]) -> str | None:
    """The part of server/ a module is in: its folder's name, or _TOP for a module directly in
    server/ (and the package itself); None outside server/."""
    if name != SERVER and not name.startswith(SERVER + "."):
        return None
    below = name.removeprefix(SERVER).lstrip(".").split(".")
    folder = f"{SERVER}.{below[0]}"
    return below[0] if below[0] and folder in packages else _TOP


def server_violations(root: Path) -> list[str]:
    """Every import inside server/ that breaks SERVER_PARTS, as 'file:line: module (part) imports
    module (part)'; a folder of server/ missing from SERVER_PARTS is named."""
    found = modules(root)
    known = set(found)
    packages = {name for name, path in found.items() if path.name == "__init__.py"}
    problems = []
    for name, path in found.items():
        here = server_part(name, packages)
        if here is None:
            continue
        if here != _TOP and here not in SERVER_PARTS:
            problems.append(f"{path.relative_to(root)}: {name} is in no part of server/: add {here} to SERVER_PARTS")
            continue
        for line, target in imported(path, name, known):
            there = server_part(target, packages)
            if there is None or there == here or here == _TOP:
                continue
            if there == _TOP or there not in SERVER_PARTS[here]:
                problems.append(f"{path.relative_to(root)}:{line}: {name} ({here}) imports {target} ({there})")
    return problems


def test_every_import_inside_the_server_follows_its_parts():
    assert server_violations(ROOT) == []


def test_the_server_checker_sees_each_part_out_of_place(tmp_path):
    """A made-up server/: serving importing the build in a function and for the type checker only,
    the event data importing an engine, HTTP importing the build, a part importing server/ itself,
    and a folder in no part; beside them the imports that are allowed."""
    files = {
        "__init__.py": "",
        "server/__init__.py": "",
        "server/dataset.py": (
            "from metrics_kit.server.building import build\nfrom metrics_kit.server.serving import a\n"
        ),
        "server/data/__init__.py": "",
        "server/data/store.py": (
            "from typing import TYPE_CHECKING\n"
            "from metrics_kit.server.data import schema\n"
            "if TYPE_CHECKING:\n"
            "    from metrics_kit.server.building.engines import Engine\n"
        ),
        "server/data/schema.py": "",
        "server/metrics/__init__.py": "",
        "server/metrics/expressions.py": "from metrics_kit.server.data import schema\n",
        "server/serving/__init__.py": "",
        "server/serving/a.py": (
            "from metrics_kit.server.metrics import expressions\n"
            "def answer():\n"
            "    from metrics_kit.server.building import build\n"
        ),
        "server/serving/b.py": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..building.engines import Engine\n"
        ),
        "server/building/__init__.py": "",
        "server/building/engines.py": "from metrics_kit.server.data import store\n",
        "server/building/build.py": (
            "from metrics_kit.server.serving import a\nfrom metrics_kit.server import dataset\n"
        ),
        "server/http/__init__.py": "",
        "server/http/app.py": "from metrics_kit.server.serving import a\nimport metrics_kit.server.building.build\n",
        "server/extra/__init__.py": "",
    }
    made_up_package(tmp_path, files)
    expected = [
        "server/data/store.py:4: metrics_kit.server.data.store (data) imports metrics_kit.server.building.engines"
        " (building)",
        "server/serving/a.py:3: metrics_kit.server.serving.a (serving) imports metrics_kit.server.building.build"
        " (building)",
        "server/serving/b.py:3: metrics_kit.server.serving.b (serving) imports metrics_kit.server.building.engines"
        " (building)",
        "server/building/build.py:2: metrics_kit.server.building.build (building) imports metrics_kit.server.dataset"
        f" ({_TOP})",
        "server/http/app.py:2: metrics_kit.server.http.app (http) imports metrics_kit.server.building.build (building)",
        "server/extra/__init__.py: metrics_kit.server.extra is in no part of server/: add extra to SERVER_PARTS",
    ]
    assert sorted(p.replace("metrics_kit/", "", 1) for p in server_violations(tmp_path)) == sorted(expected)


def made_up_package(root: Path, files: dict[str, str]) -> None:
    """Writes a package named metrics_kit under ``root``: {path in the package: its text}."""
    for relative, text in files.items():
        path = root / PACKAGE / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_every_import_follows_the_layers():
    assert violations(ROOT) == []


def run_time_imports(root: Path) -> dict[str, set[str]]:
    """Which modules of ours each module imports when it runs. Importing ``a.b.c`` runs the packages
    ``a`` and ``a.b`` first, so those count too, except the importer's own packages (already
    running when it is imported)."""
    found = modules(root)
    known = set(found)
    graph: dict[str, set[str]] = {name: set() for name in found}
    for name, path in found.items():
        own = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)} | {name}
        for _, target in imported(path, name, known, at_run_time=True):
            parts = target.split(".")
            runs = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
            graph[name] |= {t for t in runs if t in known and t not in own}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[str]:
    """One cycle through each group of modules that import each other, as 'a -> b -> a'
    (Tarjan's strongly connected components, then a path around each)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1 or node in graph[node]:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [" -> ".join(_around(graph, group[0], set(group))) for group in groups]


def _around(graph: dict[str, set[str]], start: str, members: set[str]) -> list[str]:
    """The shortest path from ``start`` back to itself through ``members`` (breadth first)."""
    parent: dict[str, str] = {}
    queue = [start]
    for here in queue:
        for there in sorted(graph[here] & members):
            if there == start:
                path = [here]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [*reversed(path), start]
            if there not in parent:
                parent[there] = here
                queue.append(there)
    raise AssertionError(f"{start} is in no cycle")  # Tarjan put it in one: it cannot happen


def test_no_import_cycle_at_run_time():
    assert cycles(run_time_imports(ROOT)) == []


def test_the_cycle_finder_sees_a_cycle_closed_inside_a_function(tmp_path):
    """A made-up package: settings -> transports (inside a function) -> _http -> settings is a cycle;
    families -> client only under TYPE_CHECKING, while client imports families, is not; nor is a
    submodule importing its own package."""
    files = {
        "__init__.py": "",
        "client/__init__.py": "",
        "client/checks.py": "",
        "client/settings.py": "def make():\n    from metrics_kit.client.transports import Transport\n",
        "client/transports/__init__.py": "from metrics_kit.client.transports._http import HTTPTransport\n",
        "client/transports/_http.py": (
            "from metrics_kit.client import settings\nfrom metrics_kit.client.transports import _base\n"
        ),
        "client/transports/_base.py": "from metrics_kit.client import checks\n",
        "client/client.py": "from metrics_kit.client import families\n",
        "client/families.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from metrics_kit.client.client import Client\n"
            "else:\n"
            "    from metrics_kit.client import checks\n"
        ),
        "spec/__init__.py": "",
        "spec/a.py": "import metrics_kit.spec.b\n",
        "spec/b.py": "from metrics_kit.spec.a import x\n",
    }
    made_up_package(tmp_path, files)
    graph = run_time_imports(tmp_path)
    assert graph["metrics_kit.client.families"] == {"metrics_kit.client.checks"}
    assert graph["metrics_kit.client.settings"] == {"metrics_kit.client.transports"}
    assert cycles(graph) == [
        "metrics_kit.client.settings -> metrics_kit.client.transports -> metrics_kit.client.transports._http"
        " -> metrics_kit.client.settings",
        "metrics_kit.spec.a -> metrics_kit.spec.b -> metrics_kit.spec.a",
    ]


def test_the_checker_sees_every_kind_of_import(tmp_path):
    """A made-up package with one forbidden import of each form, and allowed ones beside them."""
    files = {
        "__init__.py": "from metrics_kit import embedded\nfrom metrics_kit.client.api import value\n",
        "errors.py": "",
        "files.py": "from metrics_kit.errors import MetricsKitError\n",  # the base imports nothing of ours
        "embedded.py": "from metrics_kit.server import engine\nfrom metrics_kit.client import api\n",
        "spec/__init__.py": "",
        "spec/ids.py": "from metrics_kit.errors import ValidationError\nfrom ..client import api\n",
        "client/__init__.py": "from . import api\n",
        "client/api.py": (
            "from metrics_kit.spec import ids\n"
            "def default():\n"
            "    from metrics_kit import embedded\n"  # inside a function
            "    return embedded\n"
        ),
        "client/cache.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"  # only for the type checker, but still an arrow the wrong way
            "    import metrics_kit.server.engine\n"
        ),
        "client/version.py": "from metrics_kit import __version__\n",  # the root, for the version
        "notebook/__init__.py": "",
        "notebook/charts.py": "from metrics_kit.client import api\nfrom metrics_kit.server import engine\n",
        "server/__init__.py": "",
        "server/engine.py": "from metrics_kit.spec import ids\nfrom metrics_kit.tools import cli\n",
        "server/data/__init__.py": "",
        "server/data/store.py": "from ...files import cache_dir\nfrom ... import client\n",  # relative, two up
        "server/service.py": "import importlib\nCLIENT = importlib.import_module('metrics_kit.client.api')\n",
        "tools/__init__.py": "",
        "tools/cli.py": "import metrics_kit\nfrom metrics_kit.server import engine\nfrom metrics_kit import client\n",
        "extra.py": "",  # a module in no layer
        "tools/api.py": "from metrics_kit import embedded\nfrom .. import client\n",
    }
    made_up_package(tmp_path, files)
    found = violations(tmp_path)
    expected = [
        "files.py:1: metrics_kit.files (files) imports metrics_kit.errors (errors)",
        "spec/ids.py:2: metrics_kit.spec.ids (spec) imports metrics_kit.client.api (client)",
        "client/api.py:3: metrics_kit.client.api (client) imports metrics_kit.embedded (embedded)",
        "client/cache.py:3: metrics_kit.client.cache (client) imports metrics_kit.server.engine (server)",
        "client/version.py:1: metrics_kit.client.version (client) imports metrics_kit (root)",
        "notebook/charts.py:2: metrics_kit.notebook.charts (notebook) imports metrics_kit.server.engine (server)",
        "server/engine.py:2: metrics_kit.server.engine (server) imports metrics_kit.tools.cli (tools)",
        "server/data/store.py:2: metrics_kit.server.data.store (server) imports metrics_kit.client (client)",
        "server/service.py:2: metrics_kit.server.service (server) imports metrics_kit.client.api (client)",
        "extra.py: metrics_kit.extra is in no layer: add it to LAYERS and ALLOWED",
    ]
    assert sorted(p.replace("metrics_kit/", "", 1) for p in found) == sorted(expected)


# docs/architecture.md draws the tree in a fenced block that starts with "metrics_kit/", one entry
# per line, two spaces of indent per level, the name first.
_TREE = re.compile(r"^```[^\n]*\n(metrics_kit/\n.*?)^```", re.MULTILINE | re.DOTALL)


def documented_tree(text: str) -> set[str]:
    match = _TREE.search(text)
    assert match, "docs/architecture.md has no tree block starting with 'metrics_kit/'"
    paths, stack = set(), []
    for line in match.group(1).splitlines()[1:]:
        if not line.strip():
            continue
        depth = (len(line) - len(line.lstrip(" "))) // 2 - 1
        name = line.split()[0]
        stack[depth:] = [name.rstrip("/")]
        paths.add("/".join(stack) + ("/" if name.endswith("/") else ""))
    return paths


def actual_tree(root: Path) -> set[str]:
    paths = set()
    for path in (root / PACKAGE).rglob("*.py"):
        relative = path.relative_to(root / PACKAGE)
        if "__pycache__" in relative.parts:
            continue
        if path.name != "__init__.py" or len(relative.parts) == 1:
            paths.add(relative.as_posix())
        for depth in range(1, len(relative.parts)):
            paths.add("/".join(relative.parts[:depth]) + "/")
    return paths


def test_architecture_doc_names_every_module():
    documented = documented_tree((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))
    actual = actual_tree(ROOT)
    assert sorted(actual - documented) == [], "in metrics_kit/ but not in docs/architecture.md's tree"
    assert sorted(documented - actual) == [], "in docs/architecture.md's tree but not in metrics_kit/"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("```\nmetrics_kit/\n  a.py   x\n  b/\n    c.py\n  d.py\n```\n", {"a.py", "b/", "b/c.py", "d.py"}),
        (
            "```text\nmetrics_kit/\n  b/     folder\n    c/\n      e.py\n    f.py\n```",
            {"b/", "b/c/", "b/c/e.py", "b/f.py"},
        ),
    ],
)
def test_the_tree_reader(text, expected):
    assert documented_tree(text) == expected


def test_every_test_file_has_a_kind():
    """Each test file is marked unit, service, notebooks, browser or spark by tests/conftest.py."""
    kind_of = _tests_conftest().kind_of

    tests = sorted((ROOT / "tests").rglob("test_*.py")) + sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert [str(p.relative_to(ROOT)) for p in tests if kind_of(p, ROOT) is None] == []


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("tests/test_client.py", None),
        ("tests/unit/test_calendar.py", "unit"),
        ("tests/service/test_http.py", "service"),
        ("tests/browser/test_notebooks_in_chromium.py", "browser"),
        ("tests/spark/test_parity.py", "spark"),
        ("tests/notebooks/test_notebooks.py", "notebooks"),
        ("notebooks/01_quickstart.ipynb", "notebooks"),
        ("tests/test_nonesuch.py", None),
        ("tests/elsewhere/test_x.py", None),
        ("benchmarks/test_x.py", None),
    ],
)
def test_kind_by_folder_or_file_name(path, kind):
    kind_of = _tests_conftest().kind_of

    assert kind_of(ROOT / path, ROOT) == kind


def _tests_conftest():
    """tests/conftest.py as a module of its own: `import conftest` may find a folder's conftest.py
    (tests/spark/ has one) first on sys.path."""
    return load_file(ROOT / "tests" / "conftest.py", "_tests_conftest")
