"""DuckDB against Spark local: ``metrics-kit build --out`` on the synthetic demo data, both engines.

    python benchmarks/spark.py --scales 10 100      # ~1M and ~10M transactions

For each scale it generates (or reuses) the demo data set under ``--work`` (default /tmp/mk-bench),
then runs, in child processes with a private cache folder, ``metrics-kit build --data DIR --out
FILE`` on DuckDB and with ``--engine spark --spark-master local[N]``. It reports the wall clock
from fork to exit, the build's own engine time (from its log line) and, for Spark, the session's
start-up, and checks that both builds hold the same values (counts exactly, amounts to 1e-9
relative). Every child is killed after ``--timeout`` seconds. Spark binds to 127.0.0.1 only.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

_BUILT = re.compile(r"Built on \w+ in ([0-9.]+) s")
_STARTED = re.compile(r"Spark \S+ started in ([0-9.]+) s")


def _compare(duckdb_file: Path, spark_file: Path) -> dict:
    sys.path.insert(0, str(common.REPO))
    from metrics_kit.server.serving.aggregates import Aggregates

    a, b = Aggregates.read(duckdb_file), Aggregates.read(spark_file)
    counts = set(a.meta["count_metrics"])
    values = differing = 0
    for key, expected in a.values.items():
        got = b.values.get(key, [])
        for i, e in enumerate(expected):
            values += 1
            g = got[i] if i < len(got) else None
            same = g == e if key[0] in counts else g is not None and math.isclose(g, e, rel_tol=1e-9, abs_tol=1e-9)
            differing += not same
    return {"values": values, "differing": differing, "same_series": a.values.keys() == b.values.keys()}


def bench_scale(scale: float, work: Path, master: str, timeout: float) -> dict:
    generation, directory, out, env = common.spark_setup(work, scale, timeout, "spark-bench")
    result = {"scale": scale, "transactions": generation["rows"].get("transactions", 0), "builds": {}}
    try:
        for engine, extra in (("duckdb", []), ("spark", ["--engine", "spark", "--spark-master", master])):
            load = os.getloadavg()[0]
            print(f"scale {common.scale_label(scale)}: {engine} build (load average {load:.2f}) ...", flush=True)
            cmd = common.metrics_kit("build", "--data", str(directory), "--out", str(out / f"{engine}.parquet"), *extra)
            run = common.run_child(cmd, env, timeout)
            if run.returncode != 0:
                raise SystemExit(f"{engine} build failed ({run.returncode}):\n{run.output[-4000:]}")
            built, started = _BUILT.search(run.output), _STARTED.search(run.output)
            result["builds"][engine] = {
                "seconds": round(run.seconds, 2),
                "engine_seconds": float(built.group(1)) if built else None,
                "startup_seconds": float(started.group(1)) if started else None,
                "cpu_seconds_python": round(run.cpu_seconds, 1),
                "load_average_before": round(load, 2),
            }
            print(f"  {json.dumps(result['builds'][engine])}", flush=True)
        result["comparison"] = _compare(out / "duckdb.parquet", out / "spark.parquet")
        print(f"  values compared: {json.dumps(result['comparison'])}", flush=True)
    finally:
        shutil.rmtree(out / "cache", ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = common.spark_parser(__doc__)
    args = parser.parse_args(argv)
    info = common.machine()
    common.print_machine(info)
    results = [bench_scale(s, args.work, args.master, args.timeout) for s in args.scales]
    rows = []
    for r in results:
        duck, spark = r["builds"]["duckdb"], r["builds"]["spark"]
        c = r["comparison"]
        rows.append(
            [
                common.scale_label(r["scale"]),
                f"{r['transactions']:,}",
                f"{duck['seconds']:.1f}",
                f"{duck['engine_seconds']:.1f}",
                f"{spark['seconds']:.1f}",
                f"{spark['startup_seconds']:.1f}",
                f"{spark['engine_seconds']:.1f}",
                f"{c['values'] - c['differing']:,} of {c['values']:,}",
            ]
        )
    print()
    headers = [
        "scale",
        "transactions",
        "DuckDB build s",
        "of which engine s",
        f"Spark {args.master} build s",
        "of which start-up s",
        "of which engine s",
        "equal values",
    ]
    return common.report(headers, rows, args.json, info, results)


if __name__ == "__main__":
    sys.exit(main())
