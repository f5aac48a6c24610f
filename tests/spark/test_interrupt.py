"""Ctrl-C during a Spark build, as a terminal sends it (SIGINT to the command's process group):
`metrics-kit: interrupted` and exit 130, as `fetch`, `serve` and a DuckDB build end, with nothing of
Spark's or py4j's said about it, the session stopped (its JVM gone) and no file written.

The interrupt comes at a moment seen from outside, whatever the machine's speed: while Spark reads
the data (its JVM holds a file of it open, seen in /proc), for raw exports at a URL (read where they
are), for a local folder (validated on DuckDB, read by Spark as the normalised layout) and for a
refresh of a URL; while Spark starts (this process connected to its JVM, the session not started
yet); and when a refresh starts to write its state (the new slot's folder appears). After the
interrupted refreshes, the state still holds the version before them, which the next refresh
starts from, with a full build's values."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from spark_support import GOLDEN, SPARK_ENV, SUBMIT_ARGS, assert_same_values, descendants, listening, run_cli

from metrics_kit.server.data import demo
from metrics_kit.server.serving.aggregates import Aggregates

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

DEMO_SCALE = 1.0  # about 100,000 transactions: a build long enough to be interrupted inside a job


@pytest.fixture(scope="module")
def demo_data(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("interrupt") / "data"
    demo.generate(folder, scale=DEMO_SCALE)
    return folder


def _open_files(pid: int) -> list[str]:
    try:
        return [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        return []  # it ended, or closed a file, while we looked


def _when(pid: int, seen: Callable[[set[int]], bool], seconds: float) -> set[int]:
    """The processes below ``pid`` once ``seen(them)`` holds (empty if it does not within
    ``seconds``; bounded in time and in count of looks)."""
    deadline = time.monotonic() + seconds
    for _ in range(int(seconds / 0.01)):
        if time.monotonic() > deadline:
            break
        below = descendants(pid)
        if seen(below):
            return below
        time.sleep(0.01)
    return set()


def _reading(pid: int, folder: Path, seconds: float) -> set[int]:
    """The processes below ``pid`` once one of them holds a Parquet file under ``folder`` open."""
    folder = folder.resolve()

    def reads(below: set[int]) -> bool:
        return any(
            t.startswith(f"{folder}/") and t.endswith(".parquet") for process in below for t in _open_files(process)
        )

    return _when(pid, reads, seconds)


def _spark_command(data: str, *args: str | Path) -> list[str]:
    command = [sys.executable, "-m", "metrics_kit", "build", "--data", data, "--engine", "spark"]
    return [*command, "--spark-master", "local[2]", *map(str, args)]


def _start(command: list[str], cache: Path) -> subprocess.Popen:
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **SPARK_ENV, "PYSPARK_SUBMIT_ARGS": SUBMIT_ARGS, "METRICS_KIT_CACHE_DIR": str(cache)},
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )


def _interrupt(child: subprocess.Popen, spark: set[int]) -> tuple[str, str]:
    """Ctrl-C to the build; its output, once it has ended as an interrupted build ends (exit 130, the
    one line, nothing of Spark's or py4j's) and the JVMs below it (``spark``) with it."""
    try:
        assert spark, "the moment never came"
        assert child.poll() is None, "the build ended before the interrupt"
        os.killpg(child.pid, signal.SIGINT)
        stdout, stderr = child.communicate(timeout=300)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)
    assert child.returncode == 130, stderr
    # Before it, only the JVM's own line from its start (an incubator module it uses); nothing of
    # Spark's log, nothing of the interrupt's.
    assert stderr.rstrip().splitlines()[-1] == "metrics-kit: interrupted", stderr
    assert stderr.count("metrics-kit:") == 1, stderr
    for noise in ("Traceback", "ERROR", "WARN ", "Py4J", "py4j", "Exception", "\tat "):
        assert noise not in stderr, stderr
    assert "Built on spark" not in stdout, stdout
    # The session was stopped: its JVM ends with the build, not left behind.
    deadline = time.monotonic() + 60
    while any(os.path.exists(f"/proc/{pid}") for pid in spark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(os.path.exists(f"/proc/{pid}") for pid in spark), "Spark's JVM outlived the build"
    return stdout, stderr


@pytest.mark.parametrize("where", ["url", "folder"])
def test_ctrl_c_during_a_spark_build_is_one_line_exit_130_and_no_file(demo_data, tmp_path, where):
    cache = tmp_path / "cache"
    out = tmp_path / "out" / "agg.parquet"
    out.parent.mkdir()
    data = demo_data.as_uri() if where == "url" else str(demo_data)
    # Spark reads the exports where they are, or the layout this build stages in the cache folder.
    read = demo_data if where == "url" else cache / "stage"
    # A URL's refresh state in the test's folder (by default it is kept beside the data).
    state = ("--state", (tmp_path / "state").as_uri()) if where == "url" else ()
    child = _start(_spark_command(data, "--out", out, *state), cache)
    _interrupt(child, _reading(child.pid, read, seconds=300))
    assert list(out.parent.iterdir()) == []


def _java(pid: int) -> bool:
    try:
        return Path(os.readlink(f"/proc/{pid}/exe")).name == "java"
    except OSError:
        return False  # it ended while we looked


def _making_a_session(below: set[int]) -> bool:
    """Whether the build's JVM (one of ``below``) is making its Spark context, a call of the build's
    to it under way: it listens for its driver (spark.driver.port) besides for py4j, its gateway."""
    return any(len(listening(process)) >= 2 for process in below if _java(process))


def test_ctrl_c_while_spark_starts_is_one_line_exit_130(tmp_path):
    """Ctrl-C while the session is being made (a call to the JVM under way, before or after pyspark
    would set its own handler of Ctrl-C): the session is stopped once made, and nothing else is said."""
    out = tmp_path / "agg.parquet"
    child = _start(_spark_command(GOLDEN.as_uri(), "--out", out, "--state", (tmp_path / "state").as_uri()), tmp_path)
    stdout, _stderr = _interrupt(child, _when(child.pid, _making_a_session, seconds=300))
    assert "started in" not in stdout, stdout  # it came while Spark started
    assert not out.exists() and not (tmp_path / "state").exists()


@pytest.fixture(scope="module")
def demo_parts(tmp_path_factory) -> Path:
    """The demo data with its transactions as a folder of monthly Parquet parts, as a daily export
    job leaves them (a refresh reads a folder's changed files only)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    raw = tmp_path_factory.mktemp("interrupt-parts") / "raw"
    demo.generate(raw, scale=DEMO_SCALE)
    folder = raw.parent / "events"
    (folder / "transactions").mkdir(parents=True)
    for table in raw.glob("*.parquet"):
        if table.stem != "transactions":
            shutil.copy(table, folder / table.name)
    rows = pq.read_table(raw / "transactions.parquet")
    month = pc.strftime(rows["block_time"], format="%Y-%m")
    for value in sorted(set(month.to_pylist())):
        pq.write_table(rows.filter(pc.equal(month, value)), folder / "transactions" / f"{value}.parquet")
    return folder


def _add_a_day(events: Path) -> None:
    """A new part: some rows of the last month's, on the day after the last."""
    import datetime as dt

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    last = sorted((events / "transactions").glob("*.parquet"))[-1]
    rows = pq.read_table(last).slice(0, 40)
    day = (pc.max(rows["block_time"]).as_py() + dt.timedelta(days=1)).replace(hour=12, minute=0, second=0)
    times = pa.array([day] * len(rows), rows.schema.field("block_time").type)
    pq.write_table(rows.set_column(0, "block_time", times), events / "transactions" / "new-day.parquet")


def test_ctrl_c_during_a_refresh_and_its_state_write_leaves_the_state_to_refresh_from(demo_parts, tmp_path):
    """A URL built once, then a day added: a refresh interrupted while it reads the new part, one
    interrupted as it starts to write its state (never said as a state that could not be saved, never
    going on), then one not interrupted, which refreshes from the first build's state with a full
    build's values."""
    events, state, cache = tmp_path / "events", tmp_path / "state", tmp_path / "cache"
    shutil.copytree(demo_parts, events)
    spark_build = ("--data", events.as_uri(), "--engine", "spark", "--spark-master", "local[2]")
    first = run_cli("build", *spark_build, "--state", state.as_uri(), "--out", tmp_path / "first.parquet")
    assert first.returncode == 0, first.stderr[-3000:]
    _add_a_day(events)
    command = _spark_command(events.as_uri(), "--state", state.as_uri(), "--out", tmp_path / "read.parquet")
    child = _start(command, cache)
    _interrupt(child, _reading(child.pid, events / "transactions", seconds=300))
    assert sorted(p.name for p in state.iterdir()) == ["commit-a", "values-a"]
    command = _spark_command(events.as_uri(), "--state", state.as_uri(), "--out", tmp_path / "write.parquet")
    child = _start(command, cache)
    writing = _when(child.pid, lambda _below: (state / "values-b").exists(), seconds=600)
    stdout, stderr = _interrupt(child, writing)
    assert "Could not save" not in stdout + stderr and "Updated aggregates" not in stdout, stdout
    assert not (tmp_path / "read.parquet").exists() and not (tmp_path / "write.parquet").exists()
    last = run_cli("build", *spark_build, "--state", state.as_uri(), "--out", tmp_path / "last.parquet")
    assert last.returncode == 0, last.stderr[-3000:]
    assert "Updated aggregates incrementally" in last.stdout and "1 file added, 0 changed, 0 removed" in last.stdout
    duckdb = run_cli("build", "--data", events, "--out", tmp_path / "duckdb.parquet")
    assert duckdb.returncode == 0, duckdb.stderr[-3000:]
    on_duckdb, on_spark = (Aggregates.read(tmp_path / f"{name}.parquet") for name in ("duckdb", "last"))
    assert assert_same_values(on_duckdb, on_spark, same_files=False) > 0
