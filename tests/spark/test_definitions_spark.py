"""Each metric's standalone Spark SQL definition, run on local Spark over the golden data, gives the
build's values.

The golden data is validated and written as Parquet (block_time a UTC TIMESTAMP, as the normalised
layout has it); a child process starts a plain local Spark session (``local[2]``) in a time zone
other than UTC, does what each query's header says (``SET TIME ZONE 'UTC'``, a temporary view per
table), runs every query of ``definitions.spark_definitions`` and writes its rows. Each must be
exactly the rows the service serves: every (granularity, project, period_start) of the build, with
the build's value (counts equal, amounts to 1e-9 relative). A wrong definition is caught as well.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from spark_support import SPARK_ENV, SUBMIT_ARGS, same_value

from metrics_kit.server.building import build
from metrics_kit.server.data import store
from metrics_kit.server.metrics import definitions
from metrics_kit.spec.catalogue import default_catalogue

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

GOLDEN = Path(__file__).parent.parent / "golden" / "data"
CATALOGUE = default_catalogue("sol")

# Runs in a child: a Spark session of its own, loaded as the queries' headers say, every query run.
_RUN = """
import json, sys
from pyspark.sql import SparkSession

folder, queries_file, out = sys.argv[1:4]
spark = (
    SparkSession.builder.master("local[2]").appName("definitions")
    .config("spark.sql.session.timeZone", "America/New_York")  # the header's SET must be what makes it UTC
    .config("spark.sql.shuffle.partitions", "4")
    .getOrCreate()
)
queries = json.load(open(queries_file))
results = {}
for name, query in queries.items():
    header = [line[3:] for line in query.splitlines() if line.startswith("-- ")]
    zone = next(line.rstrip(";") for line in header if line.startswith("SET TIME ZONE"))
    spark.sql(zone)
    for table in ("projects", "transactions", "fees", "token_flows", "chain_rewards"):
        spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {table} AS SELECT * FROM parquet.`{folder}/{table}`")
    frame = spark.sql(query)
    rows = [[r[0], r[1], r[2].isoformat(), r[3]] for r in frame.collect()]
    results[name] = {"columns": frame.columns, "rows": rows}
    spark.sql("SET TIME ZONE 'America/New_York'")
json.dump(results, open(out, "w"))
spark.stop()
"""


def served(aggregates, metric: str) -> dict:
    rows = {}
    for (name, project, granularity), series in aggregates.values.items():
        if name == metric:
            for (start, _end), value in zip(aggregates.periods[granularity], series, strict=True):
                rows[granularity, project, start] = value
    return rows


def differences(metric, result: dict, want: dict) -> list[str]:
    if tuple(result["columns"]) != definitions.COLUMNS_RETURNED:
        return [f"columns {result['columns']}"]
    got = {}
    problems = []
    for granularity, project, start, value in result["rows"]:
        if (granularity, project, start) in got:
            problems.append(f"{(granularity, project, start)} twice")
        got[granularity, project, start] = value
    problems += [f"missing {key}" for key in sorted(want.keys() - got.keys())]
    problems += [f"extra {key}" for key in sorted(got.keys() - want.keys())]
    for key in sorted(want.keys() & got.keys()):
        if got[key] is None or not same_value(want[key], got[key], metric.is_count):
            problems.append(f"{key}: query {got[key]!r}, build {want[key]!r}")
    return problems


def _wrong_queries() -> dict[str, str]:
    """Queries that get a metric wrong, under the names of the metrics they claim to define."""
    staking = CATALOGUE.get("staking_transaction_count")
    supply = CATALOGUE.get("circulating_supply_in_native_token")
    return {
        "wrong:" + staking.name: definitions.sql(
            dataclasses.replace(staking, select={"action": ("unstake",)}), definitions.SPARK
        ),
        "wrong:" + supply.name: definitions.sql(dataclasses.replace(supply, aggregation="net_sum"), definitions.SPARK),
    }


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """(the build's aggregates of the golden data, each query's rows as Spark returned them)."""
    work = tmp_path_factory.mktemp("definitions")
    con = duckdb.connect()
    validated = store.validate(GOLDEN, con)
    store.write_parquet(validated, work / "tables")
    aggregates = build.build_in_full(store.load(GOLDEN, duckdb.connect()), CATALOGUE)
    queries = {**definitions.spark_definitions(CATALOGUE), **_wrong_queries()}
    (work / "queries.json").write_text(json.dumps(queries))
    script = work / "run.py"
    script.write_text(_RUN)
    env = {**os.environ, **SPARK_ENV, "PYSPARK_SUBMIT_ARGS": SUBMIT_ARGS}
    run = subprocess.run(
        [sys.executable, str(script), str(work / "tables"), str(work / "queries.json"), str(work / "out.json")],
        capture_output=True,
        text=True,
        timeout=800,
        env=env,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    return aggregates, json.loads((work / "out.json").read_text())


def test_each_spark_sql_definition_returns_the_served_values(ran):
    aggregates, results = ran
    wrong = {}
    for metric in CATALOGUE:
        want = served(aggregates, metric.name)
        assert want, f"the golden data has a project that {metric.name} applies to"
        problems = differences(metric, results[metric.name], want)
        if problems:
            wrong[metric.name] = problems[:5]
    assert wrong == {}


def test_a_wrong_spark_definition_is_caught(ran):
    aggregates, results = ran
    for name in _wrong_queries():
        metric = CATALOGUE.get(name.removeprefix("wrong:"))
        assert differences(metric, results[name], served(aggregates, metric.name)) != [], name
