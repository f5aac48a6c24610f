"""The server's side of the HTTP contract (spec/wire.py's "server" block): every path, header and
error code the reference service writes is spelt there and nowhere in the server; the bodies of
discovery, the explain page and the types of its columns are written with it."""

from __future__ import annotations

import datetime as dt
import inspect
import json
from pathlib import Path

import ibis
import pytest
import test_one_home as one_home

from metrics_kit.server.data.schema import COLUMNS, EVENT_TABLES
from metrics_kit.server.metrics.expressions import NET_KEY
from metrics_kit.server.serving.explain import explain
from metrics_kit.spec import wire
from metrics_kit.spec.catalogue import default_catalogue
from metrics_kit.spec.wire import ColumnType, ErrorCode

PACKAGE = Path(__file__).resolve().parents[2] / "metrics_kit"
# The modules that speak HTTP: serving, its HTTP shell, the module that opens a service, the
# embedded default. (The build and the event data name columns, not the contract.)
SPEAKERS = [
    *sorted((PACKAGE / "server" / "serving").rglob("*.py")),
    *sorted((PACKAGE / "server" / "http").rglob("*.py")),
    PACKAGE / "server" / "dataset.py",
    PACKAGE / "embedded.py",
]
# The serving modules also never spell /explain's page parameters (elsewhere "limit" and "offset"
# are also words of SQL): test_one_home's scan, with those.
SPELT = {*one_home.SPELT, wire.LIMIT, wire.OFFSET}


def _spelt_again(source: str) -> list[tuple[int, str]]:
    return one_home.spelt_again(source, SPELT)


def test_no_module_of_the_server_spells_a_path_header_or_code():
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {text!r}"
        for path in SPEAKERS
        for line, text in _spelt_again(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "spelt outside spec/wire.py:\n" + "\n".join(found)


def test_the_scan_sees_paths_in_messages_headers_as_bytes_and_codes():
    source = (
        '"""Answers /metrics."""\n'  # a docstring may name a path
        'routes = {"/projects": 1}\n'
        'message = f"GET /catalogue lists them; see {x}/openapi.json"\n'
        'header = (b"etag", b"x")\n'
        'code = "not_found"\n'
        'fine = ("/metricsx", "a/explain", "etag-like", "project")\n'
    )
    assert sorted(line for line, _ in _spelt_again(source)) == [2, 3, 3, 4, 5]


def test_the_served_paths_are_the_openapi_paths_and_the_404_names_them():
    from metrics_kit.server.http import openapi

    document = openapi.build(default_catalogue(), ["demoswap"], ("2025-01-01", "2025-02-01"))
    assert set(document["paths"]) == set(wire.SERVED_PATHS) - {wire.OPENAPI_PATH}
    assert wire.SERVED_PATHS[0] == wire.METRICS_PATH


def test_the_field_names_are_the_bodies_fields():
    assert wire.VALUE_FIELDS == (
        *wire.PARAMETERS,
        wire.PERIOD_START,
        wire.PERIOD_END,
        wire.UNIT,
        wire.VALUE,
        wire.COMPLETE,
    )
    named = (wire.AGGREGATION, wire.SOURCE, wire.SELECT, wire.FORMULA, wire.VALUE_COLUMN, wire.COUNTED_COLUMN)
    page = (wire.OPENING_BALANCE, wire.COLUMNS, wire.ROWS, wire.TOTAL_ROWS, wire.OFFSET, wire.LIMIT, wire.NEXT_OFFSET)
    assert wire.EXPLAIN_FIELDS == (*wire.VALUE_FIELDS, *named, *page)
    error = json.loads(wire.error_body(ErrorCode.NOT_FOUND, "no", wire.DATE))
    assert error == {wire.ERROR: {wire.CODE: "not_found", wire.MESSAGE: "no", wire.PARAM: wire.DATE}}


def test_the_explain_page_writer_takes_each_field_in_order():
    assert tuple(inspect.signature(wire.explain_page_body).parameters) == wire.EXPLAIN_FIELDS
    fields = {name: name for name in wire.EXPLAIN_FIELDS}
    assert json.loads(wire.explain_page_body(**fields)) == fields


def test_the_discovery_bodies():
    coverage = ("2025-01-01", "2025-01-31")
    entry = wire.project_entry("swapx", ["dex"], True, coverage, ["swap_count"])
    body = json.loads(wire.projects_body("v1", [entry], coverage, "2025-01-31T10:00:00.000000Z"))
    span = {wire.START: "2025-01-01", wire.END: "2025-01-31"}
    assert list(body) == [wire.DATA_VERSION, wire.PROJECTS, wire.COVERAGE, wire.LAST_EVENT, wire.SERIES]
    assert body[wire.SERIES] == {wire.PATH: wire.SERIES_PATH, wire.LIMIT: wire.SERIES_LIMIT}
    assert body[wire.PROJECTS] == [
        {
            wire.PROJECT: "swapx",
            wire.KINDS: ["dex"],
            wire.REGULAR_POOLS: True,
            wire.COVERAGE: span,
            wire.METRICS: ["swap_count"],
        }
    ]
    assert body[wire.COVERAGE] == span and json.loads(wire.projects_body("v", [], None, None))[wire.COVERAGE] is None
    metric = next(iter(default_catalogue()))
    described = wire.catalogue_entry(metric.describe(), "in words", "SELECT 1", "SELECT 2")
    catalogue = json.loads(wire.catalogue_body("sol", ["1_day"], [described]))
    assert catalogue == {wire.CHAIN_UNIT: "sol", wire.CATALOGUE_GRANULARITIES: ["1_day"], wire.METRICS: [described]}
    assert described[wire.COMPUTED] == "in words" and described[wire.SQL] == "SELECT 1"
    assert described[wire.SPARK_SQL] == "SELECT 2"


# The type a column's cells have in the answer, from its type in the event tables.
_OF_KIND = {"time": ColumnType.TIME, "float": ColumnType.AMOUNT, "str": ColumnType.TEXT, "bool": ColumnType.FLAG}


def _of_dtype(dtype) -> ColumnType:
    if dtype.is_timestamp():
        return ColumnType.TIME
    if dtype.is_integer():
        return ColumnType.COUNT
    if dtype.is_floating():
        return ColumnType.AMOUNT
    if dtype.is_boolean():
        return ColumnType.FLAG
    assert dtype.is_string(), dtype
    return ColumnType.TEXT


def test_the_event_tables_columns_have_their_types_on_the_wire():
    for table in EVENT_TABLES:
        for column, kind in COLUMNS[table].items():
            assert wire.EXPLAIN_COLUMN_TYPES[column] == _OF_KIND[kind], (table, column)
    assert {wire.net_column(key) for key in NET_KEY.values()} <= set(wire.EXPLAIN_COLUMN_TYPES)


@pytest.fixture(scope="module")
def empty_tables():
    """The event tables, empty, on DuckDB: explain's expressions with the types they compute."""
    backend = ibis.duckdb.connect()
    types = {"str": "string", "float": "float64", "bool": "boolean", "time": "timestamp"}
    for table in EVENT_TABLES:
        backend.create_table(table, schema=ibis.schema({c: types[k] for c, k in COLUMNS[table].items()}))
    return backend


def test_every_column_explain_gives_is_on_the_wire_with_its_type(empty_tables):
    """Every metric's rows: each column is in EXPLAIN_COLUMN_TYPES, with the type it is computed as."""
    seen = set()
    for metric in default_catalogue():
        rows = explain(empty_tables, metric, "swapx", dt.date(2025, 1, 1), dt.date(2025, 1, 31)).rows
        for column, dtype in rows.schema().items():
            assert wire.EXPLAIN_COLUMN_TYPES.get(column) == _of_dtype(dtype), (metric.name, column, dtype)
            seen.add(column)
    assert seen == set(wire.EXPLAIN_COLUMN_TYPES)  # and the contract names no column explain never gives


def test_an_explain_cell_is_written_by_its_type():
    at = dt.datetime(2025, 1, 2, 3, 4, 5, 6)
    assert wire.explain_cell(ColumnType.TIME, at) == "2025-01-02T03:04:05.000006Z"
    assert wire.explain_cell(ColumnType.TIME, None) is None
    assert [wire.explain_cell(k, v) for k, v in [(ColumnType.COUNT, 3), (ColumnType.FLAG, True)]] == [3, True]
