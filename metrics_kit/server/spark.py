"""A Spark session for the build, as an Ibis backend: local, a standalone cluster, or Spark Connect.

Only ``metrics-kit build --engine spark`` comes here; nothing else imports pyspark.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator

from metrics_kit.errors import ConfigurationError

INSTALL_HINT = "install it with: pip install 'metrics-kit[spark]'"


def _session(master: str | None):
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise ConfigurationError(f"--engine spark needs pyspark; {INSTALL_HINT}") from None
    if master and master.startswith("sc://"):
        # Spark Connect: the cluster runs the JVM, this process only a gRPC client.
        return SparkSession.builder.remote(master).getOrCreate()
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        raise ConfigurationError(
            "--engine spark needs a Java runtime (17 or later) for Spark: install one "
            "(Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or set JAVA_HOME; "
            "or give --spark-master sc://HOST:PORT to use a Spark Connect server"
        )
    builder = SparkSession.builder.appName("metrics-kit build")
    if master:
        builder = builder.master(master)
    if master and master.startswith("local"):
        # One machine: Spark's default of 200 shuffle partitions is mostly per-task overhead here.
        builder = builder.config("spark.sql.shuffle.partitions", "8")
    # Under spark-submit (no --spark-master) the master and every other setting come from spark-submit.
    return (
        builder.config("spark.sql.session.timeZone", "UTC")
        # Let adaptive execution also coalesce the partitions of the two cached tables (off by default).
        .config("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning", "true")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )


@contextlib.contextmanager
def backend(master: str | None = None) -> Iterator:
    """An Ibis PySpark backend on a new (or spark-submit's) session, stopped on leaving."""
    import ibis

    session = _session(master)
    try:
        # Ibis also sets the session's time zone to UTC: periods are UTC days, weeks and months.
        yield ibis.pyspark.connect(session)
    finally:
        session.stop()
