"""Spark builds the same numbers as DuckDB: the golden data and the demo data set, value for value.

Each data set is built with ``metrics-kit build --out`` on DuckDB and on Spark (the golden data on
``local[2]``, the demo data on a standalone cluster whose executors are processes of their own),
and the Spark build is served with ``metrics-kit serve --aggregates`` on the real server. Counts
must be equal exactly and amounts to 1e-9 relative. A missing Java runtime or pyspark fails these
tests: they are never skipped.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from spark_support import assert_same_values, cli, mixed_exports, same_value
from support import ServerProcess, split_by_day

from metrics_kit.server.data import demo
from metrics_kit.server.serving.aggregates import Aggregates
from metrics_kit.server.serving.completeness import Completeness

# A Spark build starts a JVM (and here a cluster): far beyond the suite's default timeout on a busy machine.
pytestmark = [pytest.mark.spark, pytest.mark.timeout(1200)]

GOLDEN = Path(__file__).parent.parent / "golden" / "data"
DEMO_SCALE = 0.2  # about 20,000 transactions: every project, metric and day of the demo data set


def _build_both(data: Path | str, out: Path, *spark_args: str) -> tuple[Aggregates, Aggregates, Path]:
    cli("build", "--data", data, "--out", out / "duckdb.parquet")
    log = cli("build", "--data", data, "--engine", "spark", *spark_args, "--out", out / "spark.parquet")
    assert "Built on spark" in log, log
    return Aggregates.read(out / "duckdb.parquet"), Aggregates.read(out / "spark.parquet"), out / "spark.parquet"


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    return _build_both(GOLDEN, tmp_path_factory.mktemp("golden"), "--spark-master", "local[2]")


@pytest.fixture(scope="module")
def demo_data(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("demo") / "data"
    demo.generate(folder, scale=DEMO_SCALE)
    return folder


@pytest.fixture(scope="module")
def on_cluster(demo_data, standalone_master, tmp_path_factory):
    built = _build_both(demo_data, tmp_path_factory.mktemp("demo-builds"), "--spark-master", standalone_master.url)
    # The Worker launched executors (processes of their own, each with its folder and its log).
    executors = list(standalone_master.work_dir.glob("app-*/*/stderr"))
    assert executors, f"no executor ran in {standalone_master.work_dir}"
    return built


def assert_served(path: Path, duckdb: Aggregates, every: int = 1) -> int:
    """Serve the Spark build with ``serve --aggregates`` (no event data) and ask for every
    ``every``-th period of every series; each answer must hold DuckDB's value and period."""
    counts = set(duckdb.meta["count_metrics"])
    complete = Completeness(duckdb.coverage).complete  # historical data: the flags stay as they are
    asked = 0
    with ServerProcess(None, "--aggregates", str(path)) as server:
        for (metric, project, granularity), expected in sorted(duckdb.values.items()):
            periods = duckdb.periods[granularity]
            for i in range(0, len(periods), every):
                start, end = periods[i]
                response = server.metric(metric, project, granularity, start)
                assert response.status_code == 200, response.text
                body = response.json()
                assert (body["period_start"], body["period_end"], body["complete"]) == (
                    start,
                    end,
                    complete(granularity, i),
                )
                assert same_value(expected[i], body["value"], metric in counts), (metric, project, granularity, start)
                asked += 1
    return asked


def test_golden_data_spark_build_equals_duckdb(golden):
    duckdb, spark, _ = golden
    assert assert_same_values(duckdb, spark) > 2_000


def test_golden_data_served_from_the_spark_build(golden):
    duckdb, _, path = golden
    assert assert_served(path, duckdb) == sum(len(v) for v in duckdb.values.values())


def test_demo_data_on_a_standalone_cluster_equals_duckdb(on_cluster):
    duckdb, spark, _ = on_cluster
    assert assert_same_values(duckdb, spark) > 50_000


def test_demo_data_served_from_the_cluster_build(on_cluster):
    duckdb, _, path = on_cluster
    assert assert_served(path, duckdb, every=7) > 5_000


def test_a_table_folder_grows_incrementally_on_spark(tmp_path):
    """A Spark build of a folder of day files, then two more days' files: the second Spark build
    recomputes only their periods and equals a full DuckDB build of the folder as it is then."""
    data = tmp_path / "data"
    data.mkdir()
    for table in ("projects", "fees", "token_flows", "chain_rewards"):
        (data / f"{table}.csv").write_text((GOLDEN / f"{table}.csv").read_text())
    split_by_day(GOLDEN, data, "transactions", days={"2024-12-28", "2024-12-29", "2024-12-30"})
    first = cli(
        "build", "--data", data, "--engine", "spark", "--spark-master", "local[2]", "--out", tmp_path / "a.parquet"
    )
    assert "full build" in first, first
    split_by_day(GOLDEN, data, "transactions", days={"2025-01-01", "2025-01-05"})
    out = tmp_path / "spark.parquet"
    second = cli("build", "--data", data, "--engine", "spark", "--spark-master", "local[2]", "--out", out)
    assert "Updated aggregates incrementally" in second and "2 files added" in second, second
    cli("build", "--data", data, "--rebuild", "--out", tmp_path / "duckdb.parquet")
    spark = Aggregates.read(out)
    assert spark.meta["build"] == "incremental"
    assert assert_same_values(Aggregates.read(tmp_path / "duckdb.parquet"), spark) > 1000


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> Path:
    return mixed_exports(tmp_path_factory.mktemp("mixed") / "events")


def test_mixed_exports_build_the_golden_values_on_duckdb(golden, mixed, tmp_path):
    """Parts in subfolders, a Hive-style level supplying pool_type, timestamps of every unit, zone
    and ISO text, 0-byte and header-only parts: the golden data's values, as from its flat files."""
    out = tmp_path / "duckdb.parquet"
    cli("build", "--data", mixed, "--out", out)
    built, expected = Aggregates.read(out), golden[0]
    assert built.meta["coverage"] == expected.meta["coverage"] and built.values.keys() == expected.values.keys()
    counts = set(expected.meta["count_metrics"])
    for key, series in expected.values.items():
        assert all(same_value(e, g, key[0] in counts) for e, g in zip(series, built.values[key], strict=True)), key


@pytest.mark.parametrize("given", ["folder", "url"])
def test_mixed_exports_build_the_golden_values_on_spark(golden, mixed, tmp_path, given):
    """The same files on Spark, as a folder (validated on DuckDB) and at a file:// URL (read part by
    part on Spark: nanosecond Parquet, parts whose timestamp types differ): DuckDB's values."""
    out = tmp_path / "spark.parquet"
    data = mixed if given == "folder" else mixed.as_uri()
    log = cli("build", "--data", data, "--engine", "spark", "--spark-master", "local[2]", "--out", out)
    # Telling nanosecond timestamps from integers reads them as corrupt files: Spark says nothing of it.
    assert "Traceback" not in log and "corrupted file" not in log and "Exception" not in log, log
    assert assert_same_values(golden[0], Aggregates.read(out), same_files=False) > 2_000
