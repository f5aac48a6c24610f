"""Worker loss on a standalone cluster: a refresh of a URL and a build that each lose a worker midway
give the same values; a build that loses every worker stops with a clear error within five minutes
and writes no aggregates file.

The cluster is a Master and two Workers of one core each on 127.0.0.1, started from pyspark's own
``spark-class``; a worker is lost by killing its process group (the Worker's JVM and the executor
it launched) once its executor has finished tasks of the build. The phases run in one test, on one
cluster of three workers: the refresh loses the third, the build the second, and the last phase
loses the worker they left.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from spark_support import SPARK_ENV, SUBMIT_ARGS, _Daemon, assert_same_values, cli, run_cli
from support import GOLDEN, split_by_day

from metrics_kit.server.data import demo
from metrics_kit.server.serving.aggregates import Aggregates

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1500)]

DEMO_SCALE = 0.2


def _worker(logs: Path, url: str, name: str) -> _Daemon:
    return _Daemon(
        logs / f"{name}.log",
        "org.apache.spark.deploy.worker.Worker",
        url,
        *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0", "--cores", "1", "--memory", "1g"),
        *("--work-dir", str(logs / name)),
        ready=r"Successfully registered with master",
    )


def _lose(worker: _Daemon) -> None:
    """Kill the Worker and the executors it launched (its process group) at once, as a lost machine."""
    os.killpg(worker.proc.pid, signal.SIGKILL)
    worker.proc.wait(timeout=30)


def _start_build(data: Path | str, master: str, out: Path, log: Path, *, rebuild: bool = True) -> subprocess.Popen:
    env = {**os.environ, **SPARK_ENV, "PYSPARK_SUBMIT_ARGS": SUBMIT_ARGS}
    # --rebuild: the second build of the folder would otherwise be incremental, with nothing to compute.
    again = ["--rebuild"] if rebuild else []
    args = ["build", "--data", str(data), "--engine", "spark", "--spark-master", master, *again, "--out", str(out)]
    with log.open("w") as output:
        return subprocess.Popen([sys.executable, "-m", "metrics_kit", *args], stdout=output, stderr=output, env=env)


def _wait_for_tasks(work_dir: Path, build: subprocess.Popen, app_count: int, timeout: float = 600) -> None:
    """Until the newest application's executor in ``work_dir`` runs (or has run) a task of the build."""
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    while time.monotonic() < deadline:
        apps = sorted(work_dir.glob("app-*"))
        seen = [str(p.relative_to(work_dir)) for p in work_dir.glob("app-*/*/stderr")]
        if len(apps) >= app_count:
            logs = [log.read_text(errors="replace") for log in apps[-1].glob("*/stderr")]
            if any("Running task" in log or "Finished task" in log for log in logs):
                return
        assert build.poll() is None, f"the build ended before a worker could be lost (executor logs: {seen})"
        time.sleep(0.2)
    raise AssertionError(f"no executor in {work_dir} ran a task within {timeout} s (executor logs: {seen})")


def test_a_lost_worker_changes_no_value_and_no_worker_left_is_a_clear_error(tmp_path):
    data = tmp_path / "data"
    demo.generate(data, scale=DEMO_SCALE)
    cli("build", "--data", data, "--out", tmp_path / "duckdb.parquet")
    logs = tmp_path / "cluster"
    logs.mkdir()
    master = _Daemon(
        logs / "master.log",
        "org.apache.spark.deploy.master.Master",
        *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0"),
        ready=r"Starting Spark master at (spark://127\.0\.0\.1:\d+)",
    )
    workers: list[_Daemon] = []
    try:
        url = master.match.group(1)
        workers = [_worker(logs, url, "worker-a"), _worker(logs, url, "worker-b"), _worker(logs, url, "worker-c")]

        # A refresh of a URL that loses a worker midway: the values of a full build of the folder.
        events = tmp_path / "events"
        events.mkdir()
        shutil.copy(GOLDEN / "projects.csv", events)
        for table in ("transactions", "fees", "token_flows", "chain_rewards"):
            split_by_day(GOLDEN, events, table)
        on_cluster = ("--engine", "spark", "--spark-master", url)
        cli("build", "--data", events.as_uri(), *on_cluster, "--out", tmp_path / "r.parquet")
        (events / "transactions" / "2025-02-02.csv").write_text(
            "block_time,tx_id,signer,project,action,pool_type\n2025-02-02T09:00:00Z,n1,zoe,swapx,swap,regular\n"
        )
        refresh = _start_build(events.as_uri(), url, tmp_path / "r.parquet", tmp_path / "refresh.log", rebuild=False)
        try:
            _wait_for_tasks(logs / "worker-c", refresh, app_count=2)
            _lose(workers[2])
            assert refresh.wait(timeout=600) == 0, (tmp_path / "refresh.log").read_text()
        finally:
            if refresh.poll() is None:
                refresh.kill()
        said = (tmp_path / "refresh.log").read_text()
        assert "Lost executor" in said and "Updated aggregates incrementally" in said, said[-3000:]
        cli("build", "--data", events, "--out", tmp_path / "r-duckdb.parquet")
        refreshed = Aggregates.read(tmp_path / "r.parquet")
        assert assert_same_values(Aggregates.read(tmp_path / "r-duckdb.parquet"), refreshed, same_files=False) > 0

        # One worker lost mid-build: Spark runs its tasks again on the other.
        out = tmp_path / "spark.parquet"
        build = _start_build(data, url, out, tmp_path / "build-1.log")
        try:
            _wait_for_tasks(logs / "worker-b", build, app_count=3)
            _lose(workers[1])
            assert build.wait(timeout=900) == 0, (tmp_path / "build-1.log").read_text()
        finally:
            if build.poll() is None:
                build.kill()
        # The driver saw the executor go while the build ran (Spark logs it as an error, and goes on).
        assert "Lost executor" in (tmp_path / "build-1.log").read_text()
        duckdb = Aggregates.read(tmp_path / "duckdb.parquet")
        assert assert_same_values(duckdb, Aggregates.read(out)) > 50_000

        # The last worker lost: no executor left, a clear error within five minutes, nothing written.
        out = tmp_path / "none.parquet"
        build = _start_build(data, url, out, tmp_path / "build-2.log")
        try:
            _wait_for_tasks(logs / "worker-a", build, app_count=4)
            _lose(workers[0])
            lost = time.monotonic()
            code = build.wait(timeout=300)
            waited = time.monotonic() - lost
        finally:
            if build.poll() is None:
                build.kill()
        output = (tmp_path / "build-2.log").read_text()
        assert code == 2 and waited < 300, (code, waited, output[-3000:])
        assert "metrics-kit: error: Spark ran no task for" in output and "no executor left" in output, output[-3000:]
        assert "Traceback" not in output, output[-3000:]
        assert not out.exists()
    finally:
        for worker in workers:
            worker.stop()
        master.stop()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--spark-stall-timeout", "60"), "--spark-stall-timeout is for --engine spark"),
        (("--engine", "spark", "--spark-stall-timeout", "-1"), "--spark-stall-timeout -1.0: give seconds >= 0"),
    ],
)
def test_the_stall_timeout_is_checked_before_spark_starts(args, said, tmp_path):
    done = run_cli("build", "--data", tmp_path, *args)
    assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, done.stderr
