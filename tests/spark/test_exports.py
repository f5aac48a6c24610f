"""Raw exports at a URL, validated and built on Spark: ``build --engine spark --data file:///...``.

The exports are the golden data in both formats the data format allows (a folder of Parquet parts,
single Parquet and CSV files, a folder of CSV parts); Spark lists them, checks every rule on its
side and builds values equal to DuckDB's build of the same folder. A bad data set is refused on
Spark, naming the file, the column, the rule and the offending values; the data version follows
the listing. Builds go through one Spark Connect server for the module (no JVM per build) and one
through a local[2] session in the build's own process.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from spark_support import SPARK_ENV, assert_same_values, cli, mixed_exports, run_cli
from support import split_by_day

from metrics_kit.server.serving.aggregates import Aggregates

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

GOLDEN = Path(__file__).parent.parent / "golden" / "data"


def _exports(folder: Path) -> Path:
    """The golden data as mixed exports: transactions/ as Parquet parts, fees.parquet, the rest CSV
    (chain_rewards/ as day files)."""
    folder.mkdir(parents=True)
    con = duckdb.connect()
    (folder / "transactions").mkdir()
    source = str(GOLDEN / "transactions.csv")
    for part, where in enumerate(("block_time < '2025-01-01'", "block_time >= '2025-01-01'")):
        target = folder / "transactions" / f"part-{part}.parquet"
        con.execute(
            f"COPY (SELECT * REPLACE (CAST(block_time AS TIMESTAMPTZ) AS block_time) "
            f"FROM read_csv('{source}', all_varchar = true) WHERE {where}) TO '{target}' (FORMAT parquet)"
        )
    con.execute(
        f"COPY (SELECT * FROM read_csv('{GOLDEN / 'fees.csv'}')) TO '{folder / 'fees.parquet'}' (FORMAT parquet)"
    )
    for table in ("projects", "token_flows"):
        (folder / f"{table}.csv").write_text((GOLDEN / f"{table}.csv").read_text())
    split_by_day(GOLDEN, folder, "chain_rewards")
    return folder


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> Path:
    return _exports(tmp_path_factory.mktemp("exports") / "events")


@pytest.fixture(scope="module")
def on_duckdb(exports, tmp_path_factory) -> Aggregates:
    out = tmp_path_factory.mktemp("duckdb") / "duckdb.parquet"
    cli("build", "--data", exports, "--out", out)
    return Aggregates.read(out)


def _build(url: str, master: str, out: Path):
    return run_cli("build", "--data", url, "--engine", "spark", "--spark-master", master, "--out", out)


def _refused(done) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    return done.stderr


def test_raw_exports_at_a_url_build_on_local_spark_equal_to_duckdb(exports, on_duckdb, tmp_path):
    out = tmp_path / "spark.parquet"
    done = _build(exports.as_uri(), "local[2]", out)
    assert done.returncode == 0, done.stderr
    assert f"Validated {exports.as_uri()} on Spark" in done.stdout, done.stdout
    built = Aggregates.read(out)
    assert built.meta["build"] == "full" and built.meta["data_dir"] == exports.as_uri()
    assert assert_same_values(on_duckdb, built, same_files=False) > 2_000


def test_raw_exports_at_a_url_build_on_spark_connect_equal_to_duckdb(exports, on_duckdb, connect, tmp_path):
    out = tmp_path / "connect.parquet"
    done = _build(exports.as_uri(), connect.url, out)
    assert done.returncode == 0, done.stderr
    assert assert_same_values(on_duckdb, Aggregates.read(out), same_files=False) > 2_000


def test_a_bad_data_set_is_refused_on_spark_naming_file_column_and_values(connect, tmp_path):
    events = _exports(tmp_path / "events")
    bad = events / "transactions" / "part-1.parquet"
    duckdb.connect().execute(
        f"COPY (SELECT * REPLACE (CASE WHEN tx_id = 's5' THEN 'teleport' ELSE action END AS action) "
        f"FROM '{bad}') TO '{bad}' (FORMAT parquet)"
    )
    out = tmp_path / "agg.parquet"
    error = _refused(_build(events.as_uri(), connect.url, out))
    assert "transactions/ (2 parquet files), column 'action': 1 row breaks the rule; allowed: one of swap" in error
    assert "transactions/part-1.parquet: 'teleport'" in error, error
    assert not out.exists()


def test_a_file_named_with_hash_and_percent_is_read_and_named_as_it_is(connect, tmp_path):
    """Spark's listing names files as they are; its readers take URIs, where '#' starts a fragment
    and '%20' is a space: every listed file is read, and shown by its own name."""
    events = _exports(tmp_path / "events")
    bad = events / "transactions" / "part-1.parquet"
    duckdb.connect().execute(
        f"COPY (SELECT * REPLACE (CASE WHEN tx_id = 's5' THEN 'teleport' ELSE action END AS action) "
        f"FROM '{bad}') TO '{bad}' (FORMAT parquet)"
    )
    bad.rename(bad.with_name("pärt #1 %20.parquet"))
    error = _refused(_build(events.as_uri(), connect.url, tmp_path / "agg.parquet"))
    assert "transactions/pärt #1 %20.parquet: 'teleport'" in error, error


def test_a_bad_csv_amount_is_refused_on_spark(connect, tmp_path):
    events = _exports(tmp_path / "events")
    flows = events / "token_flows.csv"
    lines = flows.read_text().splitlines()
    lines[2] = ",".join([*lines[2].split(",")[:-1], "-5"])
    flows.write_text("\n".join(lines) + "\n")
    error = _refused(_build(events.as_uri(), connect.url, tmp_path / "agg.parquet"))
    assert "token_flows.csv, column 'amount': 1 row breaks the rule; allowed: a finite number >= 0" in error
    assert "token_flows.csv: '-5'" in error, error


def test_a_missing_column_is_named(connect, tmp_path):
    events = _exports(tmp_path / "events")
    fees = events / "fees.parquet"
    duckdb.connect().execute(f"COPY (SELECT * EXCLUDE (recipient) FROM '{fees}') TO '{fees}' (FORMAT parquet)")
    error = _refused(_build(events.as_uri(), connect.url, tmp_path / "agg.parquet"))
    assert "fees.parquet: missing column 'recipient'; the fees table has columns" in error, error


def test_the_data_version_of_a_url_follows_its_listing(connect, tmp_path):
    """The data version comes from the listing (names, sizes, modification times): a file touched
    gives another, as for a local folder."""
    events = _exports(tmp_path / "events")
    versions = []
    for step in range(2):
        if step == 1:
            os.utime(events / "token_flows.csv", (1_700_000_000, 1_700_000_000))
        out = tmp_path / f"agg-{step}.parquet"
        done = _build(events.as_uri(), connect.url, out)
        assert done.returncode == 0, done.stderr
        versions.append(Aggregates.read(out).meta["fingerprint"])
    assert versions[0] != versions[1]


def _broken(folder: Path, table: str, column: str, value: str) -> Path:
    """The golden data with ``column`` of ``table``'s first row set to ``value``."""
    folder.mkdir()
    for name in ("projects", "transactions", "fees", "token_flows", "chain_rewards"):
        (folder / f"{name}.csv").write_text((GOLDEN / f"{name}.csv").read_text())
    if table:
        lines = (folder / f"{table}.csv").read_text().splitlines()
        header = lines[0].split(",")
        first = lines[1].split(",")
        first[header.index(column)] = value
        lines[1] = ",".join(first)
        (folder / f"{table}.csv").write_text("\n".join(lines) + "\n")
    return folder


@pytest.mark.parametrize(
    ("table", "column", "value"),
    [
        ("", "", ""),
        ("transactions", "action", "teleport"),
        ("transactions", "project", "Not.A.Project"),
        ("transactions", "signer", ""),
        ("transactions", "block_time", "yesterday"),
        ("fees", "amount_usd", "inf"),
        ("token_flows", "amount", "-5"),
        ("chain_rewards", "reward_type", "bribe"),
    ],
)
def test_the_rules_run_on_duckdb_too_and_flag_what_validation_refuses(tmp_path, table, column, value):
    """The Ibis rules Spark checks exports with are engine-neutral: on DuckDB, over the same CSV
    files, they flag exactly the column that DuckDB's own validation of the folder refuses."""
    import ibis

    from metrics_kit.errors import DataFormatError
    from metrics_kit.server.data import rules, store

    folder = _broken(tmp_path / "data", table, column, value)
    try:
        store.validate(folder)
        refused = None
    except DataFormatError as error:
        refused = str(error).split(":")[0]
    projects = [line.split(",")[0] for line in (GOLDEN / "projects.csv").read_text().splitlines()[1:]]
    con = ibis.duckdb.connect()
    con.raw_sql("SET TimeZone = 'UTC'")
    flagged = []
    for name in ("transactions", "fees", "token_flows", "chain_rewards"):
        # A table, not a view: DuckDB would push the timestamp cast into its CSV reader, which then
        # fails on a value TRY_CAST would make missing.
        path = folder / f"{name}.csv"
        con.raw_sql(f"CREATE TABLE raw_{name} AS SELECT * FROM read_csv('{path}', all_varchar = true)")
        raw = con.table(f"raw_{name}")
        rows = raw.select(**rules.normalised(raw, name))
        for check in rules.rules(name, projects):
            if rows.count(where=check.bad(rows)).execute():
                flagged.append(f"{name}.csv, column {check.column!r}")
    if not table:
        assert refused is None and flagged == []
    else:
        # (a project id that is not one breaks two rules: its form, and being listed)
        assert refused == f"{table}.csv, column {column!r}" and set(flagged) == {refused}, (refused, flagged)


def test_a_csv_file_not_utf8_is_refused_naming_file_and_column(connect, tmp_path):
    """Spark's CSV reader turns a byte that is not UTF-8 into U+FFFD (two signers differing only
    there would count as one): refused as DuckDB refuses it."""
    folder = _broken(tmp_path / "data", "", "", "")
    transactions = folder / "transactions.csv"
    transactions.write_bytes(transactions.read_bytes().replace(b"alice", b"al\xe9ce", 1))
    error = _refused(_build(folder.as_uri(), connect.url, tmp_path / "agg.parquet"))
    assert "transactions.csv, column 'signer': byte 0xe9 is not UTF-8; CSV files must be UTF-8" in error, error


def test_an_empty_csv_file_is_refused_as_without_a_header(connect, tmp_path):
    """Spark reads a 0-byte CSV file as one with a header and no rows; it has no header: its
    columns are missing, as DuckDB says."""
    folder = _broken(tmp_path / "data", "", "", "")
    (folder / "token_flows.csv").write_text("")
    error = _refused(_build(folder.as_uri(), connect.url, tmp_path / "agg.parquet"))
    assert "token_flows.csv: an empty file (0 bytes), without a header row: missing columns 'block_time'" in error


def test_a_url_without_engine_spark_is_refused_naming_the_url(tmp_path):
    """Without --out, a build is the cached one of a local folder: a URL is still named as given,
    with the engine that reads it (no Spark started)."""
    error = _refused(run_cli("build", "--data", GOLDEN.as_uri()))
    assert f"--data {GOLDEN.as_uri()}: only --engine spark reads a URL" in error, error


def test_mixed_exports_at_a_url_build_on_spark_connect_equal_to_duckdb(on_duckdb, connect, tmp_path):
    """Nested Hive-style parts, nanosecond Parquet, parts whose timestamp types differ, 0-byte and
    header-only CSV parts, bookkeeping files: read through Spark Connect as a folder is read."""
    events = mixed_exports(tmp_path / "events")
    out = tmp_path / "connect.parquet"
    done = _build(events.as_uri(), connect.url, out)
    assert done.returncode == 0, done.stderr
    assert assert_same_values(on_duckdb, Aggregates.read(out), same_files=False) > 2_000


def _part(path: Path, block_time: str = "CAST(block_time AS TIMESTAMPTZ)", drop: str = "") -> None:
    """``path``: the golden transactions as a Parquet part, ``block_time`` as the SQL given, without
    the column ``drop``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = ", ".join(c for c in ("tx_id", "signer", "project", "action", "pool_type") if c != drop)
    source = GOLDEN / "transactions.csv"
    duckdb.connect().execute(
        f"COPY (SELECT {block_time} AS block_time, {columns} FROM read_csv('{source}', all_varchar = true)) "
        f"TO '{path}' (FORMAT parquet)"
    )


@pytest.mark.parametrize(
    ("case", "said"),
    [
        ("no pool_type", "transactions/part-1.parquet: missing column 'pool_type'; the transactions table"),
        ("in file and folder", "transactions/pool_type=regular/part-1.parquet, column 'pool_type': given both"),
        ("integer time", "transactions/part-1.parquet, column 'block_time': has type BIGINT; expected a timestamp"),
        ("level twice", "transactions/day=1/day=2/part-1.parquet: the folder level 'day' is given twice"),
        ("delta", "transactions/: a Delta table (it holds _delta_log/), not a folder of parts"),
        ("no part", "transactions/day=1/notes.txt: not a part of its table folder: a part's name ends in"),
        ("text without an ending", "transactions/000001_0: not a part of its table folder"),
        ("link to nothing", "transactions/part-1.parquet: a data file that cannot be read: No such file"),
    ],
)
def test_what_both_engines_refuse_they_refuse_alike_naming_file_and_column(connect, tmp_path, case, said):
    """A folder DuckDB refuses is refused at its URL on Spark with the same message, naming the
    part and the column: a part without a column (which Spark's merged schema filled with nulls),
    a column both in a part and in its folder, an integer timestamp (which Spark reads as a
    nanosecond one can be read), a folder level given twice, a Delta table's folder; a file of a
    table folder that is no part (which both engines left out), and a symbolic link to nothing
    (which Spark's listing leaves out without a word)."""
    events = _broken(tmp_path / "events", "", "", "")
    (events / "transactions.csv").unlink()
    parts = events / "transactions"
    _part(parts / "part-0.parquet")
    if case == "no pool_type":
        _part(parts / "part-1.parquet", drop="pool_type")
    elif case == "in file and folder":
        _part(parts / "pool_type=regular" / "part-1.parquet")
    elif case == "integer time":
        _part(parts / "part-1.parquet", block_time="epoch(CAST(block_time AS TIMESTAMPTZ))::BIGINT")
    elif case == "level twice":
        _part(parts / "day=1" / "day=2" / "part-1.parquet")
    elif case == "no part":
        (parts / "day=1").mkdir()
        (parts / "day=1" / "notes.txt").write_text("exported by the nightly job\n")
    elif case == "text without an ending":
        (parts / "000001_0").write_text((GOLDEN / "transactions.csv").read_text())
    elif case == "link to nothing":
        (parts / "part-1.parquet").symlink_to(tmp_path / "nowhere" / "part-1.parquet")
    else:
        (parts / "_delta_log").mkdir()
        (parts / "_delta_log" / "00000000000000000000.json").write_text("{}\n")
    on_duckdb = _refused(run_cli("build", "--data", events, "--out", tmp_path / "duckdb.parquet"))
    on_spark = _refused(_build(events.as_uri(), connect.url, tmp_path / "spark.parquet"))
    assert on_duckdb.startswith(f"metrics-kit: error: {said}"), on_duckdb
    assert on_spark.splitlines()[-1] == on_duckdb.splitlines()[0], (on_spark, on_duckdb)


def test_ctrl_c_during_a_build_on_spark_connect_is_one_line_and_exit_130(connect, tmp_path):
    """Ctrl-C while the build computes on a Spark Connect server: its operations interrupted, the
    session released, `metrics-kit: interrupted` and exit 130, no file (tests/spark/test_interrupt.py
    interrupts a session of the build's own JVM)."""
    events = _exports(tmp_path / "events")
    out = tmp_path / "agg.parquet"
    child = subprocess.Popen(
        [sys.executable, "-m", "metrics_kit", "build", "--data", events.as_uri(), "--engine", "spark"]
        + ["--spark-master", connect.url, "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **SPARK_ENV, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
    )
    try:
        # Interrupted once validation is done: the build then computes (no fixed pause).
        assert child.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(child.stdout, selectors.EVENT_READ)
        deadline, said = time.monotonic() + 300, []
        while not any(line.startswith("Validated") for line in said) and time.monotonic() < deadline:
            if selector.select(timeout=deadline - time.monotonic()):
                line = child.stdout.readline()
                if not line:
                    break
                said.append(line)
        assert any(line.startswith("Validated") for line in said), said
        os.killpg(child.pid, signal.SIGINT)
        stdout, stderr = child.communicate(timeout=300)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)
    assert child.returncode == 130, stderr
    assert stderr == "metrics-kit: interrupted\n", stderr
    assert "Built" not in stdout and not out.exists()
