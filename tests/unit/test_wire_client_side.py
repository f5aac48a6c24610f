"""What the client reads beyond /metrics is read through spec/wire.py: the /projects answer, the
explain page (its fields about the value, its columns' types), the headers it sends; and no module
of the client spells a path or a header of the contract itself."""

from __future__ import annotations

import ast
import datetime as dt
import json
import re
from pathlib import Path

import pytest

from metrics_kit.errors import ResponseFormatError
from metrics_kit.server.data.schema import COLUMNS
from metrics_kit.spec import wire
from metrics_kit.spec.wire import ColumnType

PACKAGE = Path(__file__).parents[2] / "metrics_kit"


def test_a_projects_answer_is_read_with_its_data_version():
    body = json.dumps({"data_version": "v3", "projects": [{"project": "demoswap", "kinds": ["dex"]}]}).encode()
    answer = wire.projects_answer(body)
    assert answer.projects == {"demoswap": {"kinds": ["dex"]}}
    assert answer.data_version == "v3" and answer.last_event is None
    assert wire.projects_answer(b'{"projects": [], "data_version": 3}').data_version is None


def test_a_projects_answer_keeps_only_what_the_client_uses():
    # A vendor's own fields (a note that echoes the key, say) are read nowhere, and so kept nowhere.
    project = {"project": "demoswap", "kinds": ["dex"], "regular_pools": True, "note": "issued to key sk_live_x"}
    project.update(coverage={"start": "2025-01-01", "end": "2025-06-30"}, metrics=["swap_active_users"])
    body = {"data_version": "v3", "projects": [project], "last_event": "2025-06-30T21:04:05.5Z", "owner": "k"}
    answer = wire.projects_answer(json.dumps(body).encode())
    assert answer.projects == {"demoswap": {k: v for k, v in project.items() if k not in ("project", "note")}}
    assert answer.last_event == dt.datetime(2025, 6, 30, 21, 4, 5, 500000, tzinfo=dt.UTC)
    assert wire.projects_answer(json.dumps({**body, "last_event": "yesterday"}).encode()).last_event is None


@pytest.mark.parametrize(
    "body",
    [b"", b"not json", b"[]", b'{"projects": 3}', b'{"projects": [{"kinds": []}]}', b'{"projects": ["a"]}', b"NaN"],
)
def test_a_projects_answer_of_another_shape_is_refused(body):
    with pytest.raises(ResponseFormatError, match=f"the {wire.PROJECTS_PATH} answer is not a list of projects"):
        wire.projects_answer(body)


@pytest.mark.parametrize("table", sorted(set(COLUMNS) - {"projects"}))
def test_every_event_column_has_the_explain_type_of_its_data_format_type(table):
    """The event columns an explain page shows are typed by the wire as the data format types them."""
    expected = {"time": ColumnType.TIME, "float": ColumnType.AMOUNT, "str": ColumnType.TEXT}
    for column, kind in COLUMNS[table].items():
        assert wire.explain_column(column) is expected[kind], (table, column)


def test_the_columns_the_service_adds_have_their_types():
    added = {
        "transactions": ColumnType.COUNT,
        "first_block_time": ColumnType.TIME,
        "last_block_time": ColumnType.TIME,
        "counted": ColumnType.FLAG,
        "signed_amount": ColumnType.AMOUNT,
        "account_net": ColumnType.AMOUNT,
    }
    assert {column: wire.explain_column(column) for column in added} == added


def test_an_explain_page_says_what_it_is_about_as_a_metrics_answer_does():
    fields = {name: None for name in wire.EXPLAIN_FIELDS}
    fields.update(
        metric_name="swap_transaction_count",
        project="demoswap",
        granularity="1_week",
        date="2025-01-01",
        period_start="2024-12-30",
        period_end="2025-01-05",
        unit="count",
        value=5,
        complete=False,
        columns=[],
        rows=[],
        total_rows=0,
        offset=0,
        limit=10,
    )
    page = wire.explain_page(wire.explain_body(fields))
    about = wire.explained(page)
    assert (about.value, about.complete, about.unit) == (5, False, "count")
    assert (about.metric_name, about.project) == ("swap_transaction_count", "demoswap")
    assert (about.period_start, about.period_end) == ("2024-12-30", "2025-01-05")
    assert set(wire.EXPLAIN_WORDS) <= set(wire.EXPLAIN_ABOUT) <= set(page.fields)
    assert not set(wire.EXPLAIN_ABOUT) & {*wire.PARAMETERS, *wire.EXPLAIN_PAGE, "columns", "rows", "next_offset"}


def _literals(tree: ast.AST):
    """(line, text) of every string constant but docstrings; bytes as text."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes) and id(node) not in docstrings:
            value = node.value.decode("latin-1") if isinstance(node.value, bytes) else node.value
            yield node.lineno, value


def test_the_client_spells_no_path_or_header_of_the_contract():
    """Headers (and the media type it accepts) as whole strings, paths anywhere in a string (a
    message names one through the constant)."""
    names = {getattr(wire, name) for name in dir(wire) if name.endswith(("_HEADER", "_PATH"))}
    assert {"/projects", "/explain", "/metrics", "accept", "user-agent", "x-api-key"} <= names
    # "date" is also the argument and the column of that name (the Date header is read in wire.py only).
    whole = {name for name in names if not name.startswith("/")} - set(wire.PARAMETERS) | {wire.JSON_TYPE}
    inside = re.compile("|".join(rf"(?<![\w/]){re.escape(name)}(?!\w)" for name in names if name.startswith("/")))
    spelt = []
    for path in [*sorted((PACKAGE / "client").rglob("*.py")), PACKAGE / "__init__.py"]:
        for line, text in _literals(ast.parse(path.read_text(encoding="utf-8"))):
            if text.lower() in whole or inside.search(text):
                spelt.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {text!r}")
    assert spelt == []
