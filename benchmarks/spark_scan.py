"""A Spark build against one Spark scan (issue 22): each in a fresh ``local[N]`` process, same input.

    python benchmarks/spark_scan.py --scales 10 100      # ~1M and ~10M transactions

For each scale it generates (or reuses) the demo data set under ``--work`` (default /tmp/mk-bench),
then runs, in child processes with a private cache folder, in this order:

* **scan** (first, so cold): a fresh pyspark process (``local[N]``, the build's session settings:
  UTC, 8 shuffle partitions, no UI) that starts its session and counts distinct signers per
  project, action and day over ``transactions.parquet``, collecting the few thousand result rows;
* **build**: ``metrics-kit build --engine spark --spark-master local[N] --data DIR --rebuild --out
  FILE``, validation (DuckDB, on this machine) included;
* with ``--url``, also **build (URL)**: the same with ``--data file://DIR``: validated on Spark.

It prints the wall clock of each (fork to exit), the build's ratio to the scan, and the load
average before each child (the machine should be quiet: compare figures taken alike). Every child
is killed after ``--timeout`` seconds; Spark binds to 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

SCAN = """
import sys
from pyspark.sql import SparkSession, functions as F
session = (
    SparkSession.builder.master(sys.argv[2]).appName("scan")
    .config("spark.sql.session.timeZone", "UTC").config("spark.sql.shuffle.partitions", "8")
    .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
    .getOrCreate()
)
t = session.read.parquet(sys.argv[1])
rows = t.groupBy("project", "action", F.to_date("block_time").alias("day")).agg(F.countDistinct("signer")).collect()
print(f"{len(rows)} (project, action, day) groups")
session.stop()
"""


def _child(cmd: list[str], env: dict, timeout: float, what: str) -> dict:
    load = os.getloadavg()[0]
    print(f"  {what} (load average {load:.2f}) ...", flush=True)
    run = common.run_child(cmd, env, timeout)
    if run.returncode != 0:
        raise SystemExit(f"{what} failed ({run.returncode}):\n{run.output[-4000:]}")
    result = {"seconds": round(run.seconds, 2), "cpu_seconds_python": round(run.cpu_seconds, 1), "load": round(load, 2)}
    print(f"    {json.dumps(result)}", flush=True)
    return result


def bench_scale(scale: float, work: Path, master: str, url: bool, timeout: float) -> dict:
    generation, directory, out, env = common.spark_setup(work, scale, timeout, "spark-scan-bench")
    rows = generation["rows"].get("transactions", 0)
    print(f"scale {common.scale_label(scale)}: {rows:,} transactions", flush=True)
    result: dict = {"scale": scale, "transactions": rows}
    try:
        scan = [sys.executable, "-c", SCAN, str(directory / "transactions.parquet"), master]
        result["scan"] = _child(scan, env, timeout, "scan")
        build = ["build", "--engine", "spark", "--spark-master", master, "--rebuild"]
        cmd = common.metrics_kit(*build, "--data", str(directory), "--out", str(out / "folder.parquet"))
        result["build"] = _child(cmd, env, timeout, "build")
        if url:
            cmd = common.metrics_kit(*build, "--data", directory.as_uri(), "--out", str(out / "url.parquet"))
            result["build_url"] = _child(cmd, env, timeout, "build (URL)")
    finally:
        shutil.rmtree(out / "cache", ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = common.spark_parser(__doc__)
    parser.add_argument("--url", action="store_true", help="also build from a file:// URL (validated on Spark)")
    args = parser.parse_args(argv)
    info = common.machine()
    common.print_machine(info)
    results = [bench_scale(s, args.work, args.master, args.url, args.timeout) for s in args.scales]
    rows = []
    for r in results:
        scan = r["scan"]["seconds"]
        row = [common.scale_label(r["scale"]), f"{r['transactions']:,}", f"{scan:.1f}"]
        row += [f"{r['build']['seconds']:.1f}", f"{r['build']['seconds'] / scan:.2f}"]
        if args.url:
            row += [f"{r['build_url']['seconds']:.1f}", f"{r['build_url']['seconds'] / scan:.2f}"]
        rows.append(row)
    headers = ["scale", "transactions", "scan s", "build s", "build / scan"]
    if args.url:
        headers += ["build (URL) s", "build (URL) / scan"]
    return common.report(headers, rows, args.json, info, results)


if __name__ == "__main__":
    sys.exit(main())
