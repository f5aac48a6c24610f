"""Each metric's standalone SQL definition, run on DuckDB over the golden data, gives the build's values.

For every metric of the catalogue, the generated query text (``server/metrics/definitions.py``, as
``docs/metrics.md`` and ``GET /catalogue`` publish it) runs on a real DuckDB connection holding
the golden data's tables under their names, and must return exactly the rows the service serves:
every (granularity, project, period_start) of the build, no more, no fewer, with the build's value
(counts equal, amounts equal to 1e-9 relative, or to the build's rounding to 9 decimals).

The last tests make sure the comparison can fail: a query with a wrong selection, a row count
where a distinct count belongs, the wrong projects or no carried balance differs from the build.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import subprocess
import sys

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import GOLDEN, ServerProcess

from metrics_kit.server.building import build
from metrics_kit.server.data import demo, store
from metrics_kit.server.data.schema import COLUMNS
from metrics_kit.server.metrics import definitions
from metrics_kit.spec.catalogue import default_catalogue

CATALOGUE = default_catalogue("sol")
Rows = dict[tuple[str, str, str], float]


@pytest.fixture(scope="module")
def golden():
    """(a DuckDB connection holding the golden tables by name, the build's aggregates of them)."""
    con = duckdb.connect()
    events = store.load(GOLDEN, con)
    aggregates = build.build_in_full(events, CATALOGUE)
    yield con, aggregates
    con.close()


def served(aggregates: build.Aggregates, metric: str) -> Rows:
    """Every value the service serves of ``metric``: (granularity, project, period_start) -> value."""
    rows: Rows = {}
    for (name, project, granularity), series in aggregates.values.items():
        if name == metric:
            periods = aggregates.periods[granularity]
            assert len(series) == len(periods)
            for (start, _end), value in zip(periods, series, strict=True):
                rows[granularity, project, start] = value
    return rows


def queried(con: duckdb.DuckDBPyConnection, query: str) -> Rows:
    result = con.sql(query)
    assert tuple(result.columns) == definitions.COLUMNS_RETURNED
    rows: Rows = {}
    for granularity, project, start, value in result.fetchall():
        key = (granularity, project, start.isoformat())
        assert key not in rows, f"{key} twice"
        rows[key] = value
    return rows


def differences(metric, got: Rows, want: Rows) -> list[str]:
    """What differs between the query's rows and the build's, in words (empty: they agree)."""
    problems = [f"missing {key}" for key in sorted(want.keys() - got.keys())]
    problems += [f"extra {key}" for key in sorted(got.keys() - want.keys())]
    for key in sorted(want.keys() & got.keys()):
        value, expected = got[key], want[key]
        if metric.is_count:
            same = type(value) is int and value == expected
        else:
            same = value is not None and math.isclose(value, expected, rel_tol=1e-9, abs_tol=1e-9)
        if not same:
            problems.append(f"{key}: query {value!r}, build {expected!r}")
    return problems


@pytest.mark.parametrize("name", CATALOGUE.canonical_names)
def test_each_definition_returns_the_served_values(golden, name):
    con, aggregates = golden
    metric = CATALOGUE.get(name)
    want = served(aggregates, name)
    assert want, f"the golden data has a project that {name} applies to"
    got = queried(con, definitions.definitions(CATALOGUE)[name])
    assert differences(metric, got, want) == []


def test_each_definition_returns_the_served_values_of_the_demo_data(tmp_path):
    """The same over the synthetic demo data: two years, six projects, about 100,000 transactions
    with exact duplicate rows, every week across a month boundary (the golden data is small)."""
    demo.generate(tmp_path / "demo")
    con = duckdb.connect()
    events = store.load(tmp_path / "demo", con)
    aggregates = build.build_in_full(events, CATALOGUE)
    assert con.sql("SELECT count(*) > 50000 FROM transactions").fetchall() == [(True,)]
    queries = definitions.definitions(CATALOGUE)
    for metric in CATALOGUE:
        want = served(aggregates, metric.name)
        assert differences(metric, queried(con, queries[metric.name]), want) == [], metric.name
    con.close()


def test_the_definitions_are_standalone_duckdb_text():
    queries = definitions.definitions(CATALOGUE)
    assert list(queries) == list(CATALOGUE.canonical_names)
    for name, query in queries.items():
        # It reads the event tables by their names only: no file, no parameter, nothing of the engine's.
        assert query.startswith(f"-- {name}: ") and "\nWITH coverage AS (" in query, name
        assert query.endswith("\n") and ";" not in query, name  # a statement to run or to select from
        assert "__ibis" not in query and "ibis_" not in query and "?" not in query, name
    # One generation per catalogue: the service and the docs pay for it once.
    assert definitions.definitions(CATALOGUE) is queries


def test_the_spark_definitions_are_standalone_spark_sql_made_without_spark():
    """The same expressions compiled for Spark: Spark SQL text (backquoted names, EXPLODE), made with
    neither pyspark nor a session, in a child process that starts with neither loaded."""
    script = (
        "import sys\n"
        "from metrics_kit.server.metrics import definitions\n"
        "from metrics_kit.spec.catalogue import default_catalogue\n"
        "queries = definitions.spark_definitions(default_catalogue('sol'))\n"
        "print(len(queries), 'pyspark' in sys.modules)\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [str(len(CATALOGUE.canonical_names)), "False"]
    queries = definitions.spark_definitions(CATALOGUE)
    duckdb_queries = definitions.definitions(CATALOGUE)
    assert list(queries) == list(CATALOGUE.canonical_names)
    for name, query in queries.items():
        assert query.startswith(f"-- {name}: ") and "\nWITH coverage AS (" in query, name
        assert f"-- {definitions.SPARK_TIME_ZONE};\n" in query and "CREATE TEMPORARY VIEW" in query, name
        assert query.endswith("\n") and "EXPLODE(" in query and "UNNEST" not in query, name
        assert "__ibis" not in query and "ibis_" not in query and "?" not in query, name
        assert query != duckdb_queries[name]
    assert definitions.spark_definitions(CATALOGUE) is queries


def _changed(name: str, **fields):
    metric = CATALOGUE.get(name)
    return metric, definitions.sql(dataclasses.replace(metric, **fields))


def _rows_counted():
    metric = CATALOGUE.get("staking_transaction_count")
    query, replaced = re.subn(r"COUNT\(DISTINCT (\w+)\.tx_id\)", r"COUNT(\1.tx_id)", definitions.sql(metric))
    assert replaced == 1
    return metric, query


_FEE = CATALOGUE.get("protocol_transaction_fee_revenue_in_usd")
# What is wrong -> (a metric, a query that gets it wrong), made when the test runs.
MUTANTS = {
    "distinct signers counted as transactions": lambda: _changed("staking_active_users", aggregation="count"),
    "rows counted, not distinct transactions": _rows_counted,
    "another action": lambda: _changed("staking_transaction_count", select={"action": ("unstake",)}),
    "the pool type left out": lambda: _changed("regular_pool_swap_transaction_count", select={"action": ("swap",)}),
    "another recipient": lambda: _changed(_FEE.name, select={**_FEE.select, "recipient": ("supply_side",)}),
    "the other kinds of project": lambda: _changed(_FEE.name, kinds=frozenset({"dex"})),
    "a plain sum, not the positive nets": lambda: _changed("reward_positive_rent_in_sol", aggregation="sum"),
    "no balance carried": lambda: _changed("circulating_supply_in_native_token", aggregation="net_sum"),
}


@pytest.mark.parametrize("wrong", MUTANTS)
def test_a_wrong_definition_is_caught(golden, wrong):
    con, aggregates = golden
    metric, query = MUTANTS[wrong]()
    assert differences(metric, queried(con, query), served(aggregates, metric.name)) != [], wrong


# -- where the definitions are published -----------------------------------------------------------


def test_the_service_catalogue_serves_each_definition_as_generated():
    """GET /catalogue of the real server gives each metric its query (the text this file runs) and
    how it is computed in words."""
    with ServerProcess(GOLDEN) as server:
        reply = server.get("/catalogue")
    assert reply.status_code == 200, reply.text
    entries = {entry["name"]: entry for entry in reply.json()["metrics"]}
    queries = definitions.definitions(CATALOGUE)
    assert list(entries) == list(CATALOGUE.canonical_names)
    spark_queries = definitions.spark_definitions(CATALOGUE)
    for name, entry in entries.items():
        assert entry["sql"] == queries[name]
        assert entry["spark_sql"] == spark_queries[name]
        assert entry["computed"] == definitions.in_words(CATALOGUE.get(name))
    assert entries["staking_active_users"]["computed"] == (
        "For each period (UTC day, ISO week or calendar month), from the rows of the transactions table of "
        "the project, where action is stake: the number of distinct signers among them in the period."
    )


_LAZY = """
import asyncio, json, sys
from metrics_kit.server.dataset import open_service
from metrics_kit.server.http.app import App

app = App(open_service(aggregates_file=sys.argv[1], log=lambda m: None), ["k" * 16])
print("ibis" in sys.modules, "sqlglot" in sys.modules)
sent = []

async def send(message):
    sent.append(message)

async def receive():
    return {"type": "http.request", "body": b""}

scope = {"type": "http", "method": "GET", "path": "/catalogue", "query_string": b"",
         "headers": [(b"x-api-key", b"k" * 16)]}
asyncio.run(app(scope, receive, send))
body = json.loads(sent[-1]["body"])
print(sent[0]["status"], all(m["sql"].startswith("-- " + m["name"]) for m in body["metrics"]))
print(all(m["spark_sql"].startswith("-- " + m["name"]) for m in body["metrics"]), "pyspark" in sys.modules)
"""


def test_the_catalogue_is_made_on_its_first_request_not_at_start(golden, tmp_path):
    """A service started from prebuilt aggregates loads neither Ibis nor sqlglot until /catalogue
    is asked for: the SQL definitions cost no start-up time."""
    _con, aggregates = golden
    aggregates.save(tmp_path / "aggregates.parquet")
    script = tmp_path / "lazy.py"
    script.write_text(_LAZY)
    env = {**os.environ, "METRICS_KIT_CACHE_DIR": str(tmp_path / "cache")}
    run = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "aggregates.parquet")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[:3] == ["False False", "200 True", "True False"]


def _load_as_the_header_says(folder, timezone: str) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(f"SET TimeZone = '{timezone}'")
    con.execute(f"CREATE VIEW projects AS SELECT * FROM '{folder / 'projects.parquet'}'")
    for table in definitions.EVENT_TABLES:
        con.execute(
            f"CREATE VIEW {table} AS SELECT * REPLACE ({definitions.LOAD_BLOCK_TIME}) FROM '{folder / table}.parquet'"
        )
    return con


def test_each_query_says_how_to_load_its_tables_and_that_is_enough(tmp_path):
    """A query from GET /catalogue travels without docs/metrics.md: its header names the tables and
    how to load block_time. Loaded so, in a session not in UTC, one metric of each aggregation gives
    the build's values over the demo data's Parquet files (times with a time zone), and a count its
    days over nanosecond times a hair before midnight; the files read as they are give other days."""
    queries = definitions.definitions(CATALOGUE)
    for query in queries.values():
        header = "".join(line for line in query.splitlines(keepends=True) if line.startswith("--"))
        assert all(table in header for table in ("projects", *definitions.EVENT_TABLES)), header
        assert f"REPLACE ({definitions.LOAD_BLOCK_TIME})" in header, header
    demo.generate(tmp_path / "demo")
    aggregates = build.build_in_full(store.load(tmp_path / "demo", duckdb.connect()), CATALOGUE)
    loaded = _load_as_the_header_says(tmp_path / "demo", "America/New_York")
    assert "TIME ZONE" in str(duckdb.sql(f"SELECT block_time FROM '{tmp_path / 'demo' / 'fees.parquet'}'").types[0])
    one_of_each = {metric.aggregation: metric for metric in CATALOGUE}
    for metric in one_of_each.values():
        want = served(aggregates, metric.name)
        assert differences(metric, queried(loaded, queries[metric.name]), want) == [], metric.name
    as_they_are = duckdb.connect()
    as_they_are.execute("SET TimeZone = 'America/New_York'")
    for table in ("projects", *definitions.EVENT_TABLES):
        as_they_are.execute(f"CREATE VIEW {table} AS SELECT * FROM '{tmp_path / 'demo' / table}.parquet'")
    assert differences(metric, queried(as_they_are, queries[metric.name]), want) != []

    # Nanoseconds: 23:59:59.9999996 is on January 1st for the service; DuckDB's cast rounds it on.
    nanos = tmp_path / "nanos"
    nanos.mkdir()
    times = ["2025-01-01T23:59:59.999999999", "2025-01-01T23:59:59.999999600", "2025-01-02T10:00:00"]
    pq.write_table(
        pa.table(
            {
                "project": ["swp"],
                "kinds": ["dex"],
                "initial_circulating_supply": pa.array([None], pa.float64()),
                "regular_pools": [True],
            }
        ),
        nanos / "projects.parquet",
    )
    pq.write_table(
        pa.table(
            {
                "block_time": pa.array([pd.Timestamp(t).value for t in times], pa.timestamp("ns")),
                "tx_id": ["a", "b", "c"],
                "signer": ["x", "y", "z"],
                "project": ["swp"] * 3,
                "action": ["swap"] * 3,
                "pool_type": ["regular"] * 3,
            }
        ),
        nanos / "transactions.parquet",
    )
    for table in ("fees", "token_flows", "chain_rewards"):  # no events: empty tables of the format
        types = {
            c: pa.timestamp("ns") if k == "time" else pa.float64() if k == "float" else pa.string()
            for c, k in COLUMNS[table].items()
        }
        pq.write_table(pa.schema(types).empty_table(), nanos / f"{table}.parquet")
    aggregates = build.build_in_full(store.load(nanos, duckdb.connect()), CATALOGUE)
    metric = CATALOGUE.get("swap_transaction_count")
    want = served(aggregates, metric.name)
    assert want["1_day", "swp", "2025-01-01"] == 2 and want["1_day", "swp", "2025-01-02"] == 1
    got = queried(_load_as_the_header_says(nanos, "UTC"), queries[metric.name])
    assert differences(metric, got, want) == []
    read_as_they_are = duckdb.connect()
    for table in ("projects", *definitions.EVENT_TABLES):
        read_as_they_are.execute(f"CREATE VIEW {table} AS SELECT * FROM '{nanos / table}.parquet'")
    assert differences(metric, queried(read_as_they_are, queries[metric.name]), want) != []
