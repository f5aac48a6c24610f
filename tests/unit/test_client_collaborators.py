"""value, series, frame and explain share their collaborators (client/source.py): one resolver of a
point, one builder of the attrs that say where values came from, one retry while the data version
changes (one message for it); explain uses these, not the Client's private members, and
client/client.py and client/explain.py do not import each other both ways."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

from metrics_kit import Client, ResponseFormatError, ValidationError
from metrics_kit.client.transports import MockTransport, Request, Response
from metrics_kit.spec import wire

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "metrics_kit" / "client"
COUNT = "swap_transaction_count"
COLUMNS = ["block_time", "tx_id", "signer", "project", "action", "pool_type", "counted"]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path))


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth (``if TYPE_CHECKING:`` blocks included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def test_explain_does_not_import_the_client_module():
    assert "metrics_kit.client.client" not in imports(CLIENT / "explain.py")


def private_members_of_client() -> set[str]:
    tree = ast.parse((CLIENT / "client.py").read_text(encoding="utf-8"))
    (client,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Client"]
    names = set()
    for node in ast.walk(client):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.endswith("__")}


def own_names(tree: ast.AST) -> set[str]:
    """What a module defines itself: its functions, classes and the attributes it assigns."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
    return names


def test_no_module_but_client_py_uses_a_private_member_of_client():
    private = private_members_of_client()
    assert {"_close", "_shown_url", "_get_cache", "_source"} <= private
    used = []
    for path in sorted((ROOT / "metrics_kit").rglob("*.py")):
        if path == CLIENT / "client.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        theirs = private - own_names(tree)
        for node in ast.walk(tree):
            named = None
            if isinstance(node, ast.Attribute):
                named = node.attr
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("getattr", "hasattr", "setattr"):
                if len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
                    named = node.args[1].value
            if named in theirs:
                used.append(f"{path.relative_to(ROOT)}:{node.lineno}: {named}")
    assert used == []


def explain_page(request: Request) -> dict:
    """One page of the reference service's /explain answer: five rows, two a page."""
    offset = int(request.params[wire.OFFSET])
    rows = [[f"2025-01-0{i}T10:00:00Z", f"t{i}", "ivan", "demoswap", "swap", "regular", True] for i in range(1, 6)]
    shown = rows[offset : offset + 2]
    return {
        **request.params,
        "period_start": "2024-12-30",
        "period_end": "2025-01-05",
        "unit": "count",
        "value": 5,
        "complete": True,
        "aggregation": "count",
        "source": "transactions",
        "select": {"action": ["swap"]},
        "formula": "the number of rows whose counted is true",
        "value_column": None,
        "counted_column": "counted",
        "opening_balance": None,
        "columns": COLUMNS,
        "rows": shown,
        "total_rows": len(rows),
        "offset": offset,
        "limit": 2,
        "next_offset": offset + 2 if offset + 2 < len(rows) else None,
    }


def service(versions):
    """/metrics and /explain answering under the data version ``next(versions)``; no /projects."""

    def answer(request: Request) -> Response:
        if request.path == wire.METRICS_PATH:
            body = {**request.params, "period_start": request.params[wire.DATE], "value": 5, "unit": "count"}
        elif request.path == wire.EXPLAIN_PATH:
            body = explain_page(request)
        else:
            return Response(404, json={"error": {"code": "not_found", "message": "no such path"}})
        return Response(200, json=body, headers={wire.DATA_VERSION_HEADER: next(versions)})

    return answer


def client(versions) -> Client:
    return Client(transport=MockTransport(service(versions)), cache=False, progress=False)


def test_a_pull_and_an_explain_give_up_on_changing_data_after_as_many_changes_and_say_so_alike():
    counter = itertools.count()
    versions = (f"v{next(counter)}" for _ in itertools.count())
    said = []
    with client(versions) as c:
        for call in (
            lambda: c.series(COUNT, "demoswap", "2025-01-01", "2025-01-05"),
            lambda: c.explain(COUNT, "demoswap", "1_week", "2025-01-01"),
        ):
            with pytest.raises(ResponseFormatError) as caught:
                call()
            said.append(str(caught.value))
    from metrics_kit.client.source import VERSION_CHANGES

    changes = VERSION_CHANGES + 1
    assert f"changed {changes} times during one pull; ask again when it stays the same" in said[0]
    assert f"changed {changes} times while the rows of {COUNT} for demoswap" in said[1]
    assert said[1].endswith("; ask again when it stays the same")


def test_a_value_and_an_explain_say_alike_where_they_came_from():
    with client(itertools.repeat("v7")) as c:
        pulled = c.series(COUNT, "demoswap", "2024-12-30", "2024-12-30", "1_week")
        explained = c.explain(COUNT, "demoswap", "1_week", "2025-01-01")
    where = ("service", "synthetic", "data_version", "data_version_confirmed")
    said = [pulled.attrs[k] for k in where]
    assert said == [explained.attrs[k] for k in where] == ["mock://service", False, "v7", True]


@pytest.mark.parametrize(
    "arguments, argument",
    [
        (("swap_transaction_cont", "demoswap", "1_day", "2025-01-01"), "metric"),
        ((COUNT, "Demo Swap", "1_day", "2025-01-01"), "project"),
        ((COUNT, "demoswap", "fortnight", "2025-01-01"), "granularity"),
        ((COUNT, "demoswap", "1_day", "01/02/2025"), "date"),
    ],
)
def test_value_and_explain_resolve_a_point_alike(arguments, argument):
    said = []
    with client(itertools.repeat("v1")) as c:
        for call in (c.value, c.explain):
            with pytest.raises(ValidationError) as caught:
                call(*arguments)
            said.append((str(caught.value), caught.value.argument))
    assert said[0] == said[1] and said[0][1] == argument
