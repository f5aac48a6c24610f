"""Spark builds record the time of the last event, as DuckDB builds do, so that the service flags
the same periods complete whichever engine built its aggregates (docs/service.md, Complete periods).

The data is an export run until two hours before a Sunday afternoon: the service's clock is set to
that Sunday, and today's day, this week and this month must be incomplete on every build.
"""

from __future__ import annotations

import datetime as dt

import pytest
from spark_support import cli
from support import live_exports

from metrics_kit.server.serving.aggregates import Aggregates
from metrics_kit.server.serving.service import MetricService
from metrics_kit.spec.catalogue import default_catalogue

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1200)]

SUNDAY = dt.datetime(2025, 6, 29, 14, tzinfo=dt.UTC)
LAST_EVENT = "2025-06-29T12:00:00.000000Z"


def flags(aggregates: Aggregates) -> dict[tuple[str, str], bool]:
    """Every period's flag as the service gives it on SUNDAY's clock (as ``serve --aggregates``,
    with the watermark the aggregates recorded)."""
    declared = aggregates.declared_watermark
    service = MetricService(aggregates, default_catalogue(), watermark=declared, clock=SUNDAY.timestamp)
    return {
        (granularity, start): service.completeness.complete(granularity, i)
        for granularity, periods in aggregates.periods.items()
        for i, (start, _end) in enumerate(periods)
    }


def test_spark_builds_record_the_last_event_and_give_duckdbs_flags(tmp_path):
    folder = live_exports(tmp_path / "data", SUNDAY - dt.timedelta(hours=2))
    cli("build", "--data", folder, "--out", tmp_path / "duckdb.parquet")
    spark = ("--engine", "spark", "--spark-master", "local[2]")
    cli("build", "--data", f"file://{folder}", *spark, "--out", tmp_path / "spark-url.parquet")
    cli("build", "--data", folder, *spark, "--out", tmp_path / "spark-folder.parquet")
    built = {name: Aggregates.read(tmp_path / f"{name}.parquet") for name in ("duckdb", "spark-url", "spark-folder")}
    assert {name: a.meta["last_event"] for name, a in built.items()} == dict.fromkeys(built, LAST_EVENT)
    expected = flags(built["duckdb"])
    assert not expected["1_day", "2025-06-29"] and not expected["1_week", "2025-06-23"]
    assert not expected["1_month", "2025-06-01"] and expected["1_day", "2025-06-28"]
    assert flags(built["spark-url"]) == expected and flags(built["spark-folder"]) == expected


def test_a_declared_watermark_is_recorded_from_a_url_and_from_a_stage_as_from_the_folder(tmp_path):
    """The folder's watermark.json (every event before Saturday noon is in) is recorded by a Spark
    build of the folder's URL, read through Spark, and of a --stage layout, whose marker carries it,
    as by DuckDB: serve --aggregates then gives the same flags whichever built them."""
    folder = live_exports(tmp_path / "data", SUNDAY - dt.timedelta(hours=2))
    (folder / "watermark.json").write_text('{"watermark": "2025-06-28T12:00:00Z"}\n')
    stage = tmp_path / "stage"
    cli("build", "--data", folder, "--stage", stage, "--out", tmp_path / "duckdb.parquet")
    spark = ("--engine", "spark", "--spark-master", "local[1]")
    cli("build", "--data", folder.as_uri(), *spark, "--out", tmp_path / "spark-url.parquet")
    cli("build", "--data", stage.as_uri(), *spark, "--out", tmp_path / "spark-stage.parquet")
    built = {name: Aggregates.read(tmp_path / f"{name}.parquet") for name in ("duckdb", "spark-url", "spark-stage")}
    recorded = {name: a.meta["watermark"] for name, a in built.items()}
    assert recorded == dict.fromkeys(built, "2025-06-28T12:00:00.000000Z")
    expected = flags(built["duckdb"])
    # The declaration holds Saturday back, which the data's last event alone would make complete.
    assert expected["1_day", "2025-06-27"] and not expected["1_day", "2025-06-28"]
    assert flags(built["spark-url"]) == expected and flags(built["spark-stage"]) == expected
