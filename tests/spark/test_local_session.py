"""A one-machine Spark build (``--spark-master local[N]``) listens on this machine's loopback only:
its driver bound to 127.0.0.1 and its web UI off (docs/spark.md, One machine). Anyone who could
reach another address of the machine would otherwise browse the build's jobs, SQL plans (the data's
paths) and environment while it runs.

The build runs as a user runs it: without the tests' own Spark settings (``SPARK_LOCAL_IP``, the UI
turned off in ``PYSPARK_SUBMIT_ARGS``). Its JVM's listening sockets are read from /proc while it
runs (its socket descriptors, matched in /proc/PID/net/tcp and tcp6).
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from spark_support import descendants, listening

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

GOLDEN = Path(__file__).parent.parent / "golden" / "data"


def _loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address.rpartition(":")[0])
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


def test_a_local_build_listens_on_the_loopback_only(tmp_path):
    environment = {k: v for k, v in os.environ.items() if k not in ("SPARK_LOCAL_IP", "PYSPARK_SUBMIT_ARGS")}
    environment |= {"PYSPARK_PYTHON": sys.executable, "METRICS_KIT_CACHE_DIR": str(tmp_path / "cache")}
    out = tmp_path / "agg.parquet"
    command = [sys.executable, "-m", "metrics_kit", "build", "--data", GOLDEN.as_uri(), "--engine", "spark"]
    child = subprocess.Popen(
        # The refresh state in the test's folder: by default it is kept beside the data, in the tree.
        [*command, "--spark-master", "local[1]", "--out", str(out), "--state", (tmp_path / "state").as_uri()],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )
    seen: set[str] = set()
    try:
        # Every listening socket of the build's processes, looked at until the build ends (bounded
        # in time and in count of looks).
        deadline = time.monotonic() + 600
        for _ in range(60_000):
            if child.poll() is not None or time.monotonic() > deadline:
                break
            for pid in descendants(child.pid) | {child.pid}:
                seen |= listening(pid)
            time.sleep(0.01)
        stdout, stderr = child.communicate(timeout=300)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(30)
    assert child.returncode == 0, stderr
    assert out.is_file() and (tmp_path / "state").is_dir()
    assert not Path(f"{GOLDEN}.metrics-kit-state").exists()
    assert seen, "the build's JVM was never seen listening (its driver listens while it runs)"
    assert sorted(a for a in seen if not _loopback(a)) == [], seen
