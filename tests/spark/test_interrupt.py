"""Ctrl-C during a Spark build, as a terminal sends it (SIGINT to the command's process group):
`metrics-kit: interrupted` and exit 130, as `fetch`, `serve` and a DuckDB build end, with nothing of
Spark's or py4j's said about it, the session stopped (its JVM gone) and no file written.

The interrupt comes while Spark reads the data (its JVM holds a file of it open, seen in /proc), so
inside a Spark job whatever the machine's speed: for raw exports at a URL (read where they are)
and for a local folder (validated on DuckDB, read by Spark as the normalised layout)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from spark_support import SPARK_ENV, SUBMIT_ARGS, descendants

from metrics_kit.server.data import demo

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

DEMO_SCALE = 1.0  # about 100,000 transactions: a build long enough to be interrupted inside a job


@pytest.fixture(scope="module")
def demo_data(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("interrupt") / "data"
    demo.generate(folder, scale=DEMO_SCALE)
    return folder


def _reading(pid: int, folder: Path, seconds: float) -> set[int]:
    """The processes below ``pid`` once one of them holds a Parquet file under ``folder`` open
    (empty if none does within ``seconds``; bounded in time and in count of looks)."""
    folder = folder.resolve()
    deadline = time.monotonic() + seconds
    for _ in range(int(seconds / 0.01)):
        if time.monotonic() > deadline:
            break
        below = descendants(pid)
        for process in below:
            try:
                targets = [os.readlink(f"/proc/{process}/fd/{fd}") for fd in os.listdir(f"/proc/{process}/fd")]
            except OSError:
                continue
            if any(t.startswith(f"{folder}/") and t.endswith(".parquet") for t in targets):
                return below
        time.sleep(0.01)
    return set()


@pytest.mark.parametrize("where", ["url", "folder"])
def test_ctrl_c_during_a_spark_build_is_one_line_exit_130_and_no_file(demo_data, tmp_path, where):
    cache = tmp_path / "cache"
    out = tmp_path / "out" / "agg.parquet"
    out.parent.mkdir()
    data = demo_data.as_uri() if where == "url" else str(demo_data)
    # Spark reads the exports where they are, or the layout this build stages in the cache folder.
    read = demo_data if where == "url" else cache / "stage"
    command = [sys.executable, "-m", "metrics_kit", "build", "--data", data, "--engine", "spark"]
    child = subprocess.Popen(
        [*command, "--spark-master", "local[2]", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **SPARK_ENV, "PYSPARK_SUBMIT_ARGS": SUBMIT_ARGS, "METRICS_KIT_CACHE_DIR": str(cache)},
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    try:
        spark = _reading(child.pid, read, seconds=300)
        assert spark, "Spark never read the data"
        assert child.poll() is None, "the build ended before the interrupt"
        os.killpg(child.pid, signal.SIGINT)
        stdout, stderr = child.communicate(timeout=300)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)
    assert child.returncode == 130, stderr
    # Spark's own lines from its start (its log level, a native library it lacks) come before;
    # nothing after them but the one line, and nothing of the interrupt's.
    assert stderr.rstrip().splitlines()[-1] == "metrics-kit: interrupted", stderr
    assert stderr.count("metrics-kit:") == 1, stderr
    for noise in ("Traceback", "ERROR", "Py4J", "py4j", "Exception"):
        assert noise not in stderr, stderr
    assert "Built on spark" not in stdout, stdout
    assert list(out.parent.iterdir()) == []
    # The session was stopped: its JVM ends with the build, not left behind.
    deadline = time.monotonic() + 60
    while any(os.path.exists(f"/proc/{pid}") for pid in spark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(os.path.exists(f"/proc/{pid}") for pid in spark), "Spark's JVM outlived the build"
