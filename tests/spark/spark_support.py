"""Spark for the parity tests: the CLI run with Spark's settings, and a standalone cluster on 127.0.0.1.

The cluster is started from pyspark's own ``spark-class`` (a Master and one Worker, each its own
JVM), so the build's executors run in processes of their own and read the data from its path, as
on a real cluster. Every wait is bounded; every process is stopped by its PID.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from metrics_kit.server.serving.aggregates import Aggregates

# Spark binds its driver, master and worker to this address only, and its executors run this Python.
SPARK_ENV = {"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
# No web UI (a port of its own) in the build's driver.
SUBMIT_ARGS = "--conf spark.ui.enabled=false pyspark-shell"


def run_cli(*args: str | Path, timeout: float = 600, env: dict | None = None, cwd: Path | None = None):
    """Run ``metrics-kit`` in a child process (``env``: added to this one's); the finished process."""
    env = {**os.environ, **SPARK_ENV, "PYSPARK_SUBMIT_ARGS": SUBMIT_ARGS, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "metrics_kit", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=cwd,
        check=False,
    )


def cli(*args: str | Path, timeout: float = 600, env: dict | None = None) -> str:
    """Run ``metrics-kit`` in a child process; its output, after asserting it succeeded."""
    done = run_cli(*args, timeout=timeout, env=env)
    assert done.returncode == 0, f"metrics-kit {' '.join(map(str, args))} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def same_value(expected, got, count: bool) -> bool:
    if count:
        return type(got) is int and got == expected
    return math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-9)


def assert_same_values(duckdb: Aggregates, spark: Aggregates, same_files: bool = True) -> int:
    """Every series and every value of ``spark`` equals ``duckdb``'s; the number of values compared.
    ``same_files``: both read the same files the same way, so their data versions are equal too."""
    assert spark.meta["engine"] == "pyspark" and duckdb.meta["engine"] == "duckdb"
    keys = ("coverage", "projects", "chain_unit", "count_metrics", "catalogue_key")
    for key in (*keys, "fingerprint") if same_files else keys:
        assert spark.meta[key] == duckdb.meta[key], key
    assert spark.values.keys() == duckdb.values.keys()
    counts = set(duckdb.meta["count_metrics"])
    compared = 0
    for key, expected in duckdb.values.items():
        got = spark.values[key]
        assert len(got) == len(expected), key
        pairs = enumerate(zip(expected, got, strict=True))
        wrong = [(i, e, g) for i, (e, g) in pairs if not same_value(e, g, key[0] in counts)]
        assert not wrong, f"{key}: (period, duckdb, spark) {wrong[:5]}"
        compared += len(expected)
    return compared


_LISTEN = "0A"  # a socket's state in /proc/net/tcp: listening


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address as /proc/net/tcp* writes it: 32-bit words in the machine's (little-endian) order."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(words)


def listening(pid: int) -> set[str]:
    """The addresses (ADDRESS:PORT) on which process ``pid`` has a socket listening."""
    try:
        links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:  # it ended while we looked
        return set()
    inodes = {link[len("socket:[") : -1] for link in links if link.startswith("socket:[")}
    found = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == _LISTEN and inode in inodes:
                host, port = local.split(":")
                found.add(f"{_address(host)}:{int(port, 16)}")
    return found


def descendants(pid: int) -> set[int]:
    """The processes below ``pid`` (its children, theirs, ...), from /proc."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    # The command's name, in parentheses, may hold spaces: the fields after it are plain.
                    parents[int(entry)] = int(stat.read().rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue  # it ended while we looked
    found, pending = set(), [pid]
    while pending:
        parent = pending.pop()
        children = {child for child, ppid in parents.items() if ppid == parent and child not in found}
        found |= children
        pending.extend(children)
    return found


GOLDEN = Path(__file__).parent.parent / "golden" / "data"


def mixed_exports(folder: Path) -> Path:
    """The golden data as exports from several jobs, in every shape a table folder may take, with
    the golden data's values: the transactions as Parquet parts at several depths (a Hive-style
    ``day=`` level, a ``pool_type=regular`` level supplying the column its part lacks), whose
    ``block_time`` is a nanosecond timestamp with a zone (pandas' default) and without, naive
    microseconds, milliseconds with a zone and ISO text, two of them named as Hive names a part
    (``000000_0``, without an ending) and in capitals (``.PARQUET``); the fees as CSV parts, one of
    0 bytes and one with a header only; and the bookkeeping files export jobs leave (``_SUCCESS``,
    ``_temporary/``, hidden files)."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True)
    for table in ("projects", "token_flows", "chain_rewards"):
        (folder / f"{table}.csv").write_text((GOLDEN / f"{table}.csv").read_text())
    rows = pd.read_csv(GOLDEN / "transactions.csv", dtype=str, keep_default_na=False)
    times = pd.to_datetime(rows["block_time"], utc=True, format="ISO8601")
    parts = folder / "transactions"

    def part(name: str, chosen: pd.Series, block_time, drop: tuple[str, ...] = ()) -> None:
        frame = rows[chosen].drop(columns=list(drop))
        table = pa.Table.from_pandas(frame.drop(columns=["block_time"]), preserve_index=False)
        if "pool_type" in frame:
            pool = pa.array([v or None for v in frame["pool_type"]], pa.string())
            table = table.set_column(table.schema.get_field_index("pool_type"), "pool_type", pool)
        (parts / name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table.add_column(0, "block_time", block_time(times[chosen])), parts / name)

    quarter = pd.Series(range(len(rows))) * 4 // len(rows)
    regular = rows["pool_type"] == "regular"
    # Nanoseconds with a zone (pandas' default), 999 ns past each golden instant: the 23:59:59.999999
    # rows then end 1 ns before midnight, and stay on their day only if truncated to microseconds.
    nanos = pa.timestamp("ns", "UTC")
    part("000000_0", quarter == 0, lambda t: pa.array(t.astype("datetime64[ns, UTC]") + pd.Timedelta(999), nanos))
    naive_us = pa.timestamp("us")
    part("day=2025-01-01/part-1.parquet", quarter == 1, lambda t: pa.array(t.dt.tz_localize(None), naive_us))
    part(
        "pool_type=regular/part-2.parquet",
        (quarter == 2) & regular,
        lambda t: pa.array(t.dt.floor("ms"), pa.timestamp("ms", "UTC")),
        drop=("pool_type",),
    )
    naive_ns = pa.timestamp("ns")
    part("part-2b.PARQUET", (quarter == 2) & ~regular, lambda t: pa.array(t.dt.tz_localize(None), naive_ns))
    part("batch/2/part-3.parquet", quarter == 3, lambda t: pa.array(rows["block_time"][t.index]))  # ISO text
    (parts / "_SUCCESS").write_text("")
    (parts / "_temporary" / "0").mkdir(parents=True)
    (parts / "_temporary" / "0" / "part-4.parquet").write_text("half written")
    (parts / ".part-5.parquet").write_text("hidden")
    fees = (GOLDEN / "fees.csv").read_text().splitlines()
    (folder / "fees" / "month=2025-01").mkdir(parents=True)
    (folder / "fees" / "part-0.csv").write_text("\n".join(fees) + "\n")
    (folder / "fees" / "part-1.csv").write_text("")  # 0 bytes: an empty part
    (folder / "fees" / "month=2025-01" / "part-2.csv").write_text(fees[0] + "\n")  # a header, no rows
    return folder


def spark_home() -> Path:
    """pyspark's own Spark: its bin/ scripts and jars/."""
    import pyspark

    return Path(pyspark.__file__).parent


class _Daemon:
    """A Spark daemon (``spark-class CLASS ARGS``, or ``command`` as given) whose output is read
    until a line matches."""

    def __init__(
        self,
        log: Path,
        main_class: str,
        *args: str,
        ready: str,
        timeout: float = 180,
        command: list[str] | None = None,
        cwd: Path | None = None,
    ):
        spark_class = spark_home() / "bin" / "spark-class"
        env = {**os.environ, **SPARK_ENV, "SPARK_NO_DAEMONIZE": "1"}
        self.log = log
        self.proc = subprocess.Popen(
            command or [str(spark_class), main_class, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        self.match = self._wait_for(re.compile(ready), timeout)
        # Keep draining the daemon's output into its log, so that it never blocks on a full pipe.
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        with self.log.open("a") as log:
            for line in self.proc.stdout:
                log.write(line)

    def _wait_for(self, pattern: re.Pattern, timeout: float) -> re.Match:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        selector = selectors.DefaultSelector()
        selector.register(self.proc.stdout, selectors.EVENT_READ)
        with self.log.open("a") as log:
            while (left := deadline - time.monotonic()) > 0:
                if not selector.select(timeout=left):
                    break
                line = self.proc.stdout.readline()
                if not line:
                    break
                log.write(line)
                if match := pattern.search(line):
                    return match
        self.stop()
        raise RuntimeError(f"{' '.join(self.proc.args[:3])} did not start; its output is in {self.log}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        drainer = getattr(self, "_drainer", None)
        if drainer is not None:
            drainer.join(timeout=30)  # the daemon has exited: its output ends
        if self.proc.stdout is not None and not self.proc.stdout.closed:
            self.proc.stdout.close()


@dataclass(frozen=True)
class Cluster:
    url: str  # spark://127.0.0.1:PORT
    work_dir: Path  # the Worker's: one folder per application, one per executor it launched


@pytest.fixture(scope="session")
def standalone_master(tmp_path_factory) -> Iterator[Cluster]:
    """A standalone Spark cluster on 127.0.0.1: one Master and one Worker of 2 cores."""
    logs = tmp_path_factory.mktemp("spark-standalone")
    master = _Daemon(
        logs / "master.log",
        "org.apache.spark.deploy.master.Master",
        *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0"),
        ready=r"Starting Spark master at (spark://127\.0\.0\.1:\d+)",
    )
    url = master.match.group(1)
    try:
        worker = _Daemon(
            logs / "worker.log",
            "org.apache.spark.deploy.worker.Worker",
            url,
            *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0", "--cores", "2", "--memory", "2g"),
            *("--work-dir", str(logs / "work")),
            ready=r"Successfully registered with master",
        )
        try:
            yield Cluster(url, logs / "work")
        finally:
            worker.stop()
    finally:
        master.stop()


@dataclass(frozen=True)
class ConnectServer:
    url: str  # sc://127.0.0.1:PORT
    cwd: Path  # the server's working directory
    log: Path


@pytest.fixture(scope="module")
def connect(tmp_path_factory) -> Iterator[ConnectServer]:
    """A Spark Connect server for the module's tests (:func:`connect_server`)."""
    folder = tmp_path_factory.mktemp("spark-connect")
    daemon = connect_server(folder)
    try:
        yield ConnectServer(f"sc://127.0.0.1:{daemon.match.group(1)}", folder, daemon.log)
    finally:
        daemon.stop()


def connect_server(folder: Path) -> _Daemon:
    """A Spark Connect server started from pyspark's own jars (``spark-submit --class
    SparkConnectServer`` with the spark-connect jar of pyspark's jars/), on 127.0.0.1, on a port
    the system picks, with a ``local[2]`` Spark and ``folder`` as its working directory. Stop it
    with ``.stop()`` (by its PID)."""
    home = spark_home()
    (jar,) = (home / "jars").glob("spark-connect_*.jar")
    command = [
        str(home / "bin" / "spark-submit"),
        *("--class", "org.apache.spark.sql.connect.service.SparkConnectServer"),
        *("--master", "local[2]", "--driver-memory", "1g"),
        *("--conf", "spark.connect.grpc.binding.address=127.0.0.1", "--conf", "spark.connect.grpc.binding.port=0"),
        *("--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=8"),
        str(jar),
    ]
    return _Daemon(
        folder / "server.log",
        "",
        # The gRPC service listening (Spark logs the server's own "started at" line after it).
        ready=r"Successfully started service '[\w.]+\.SparkConnectService\$' on port (\d+)",
        timeout=300,
        command=command,
        cwd=folder,
    )
