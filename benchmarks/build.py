"""Build benchmark: time and peak memory of ``metrics-kit build`` on the synthetic demo data.

    python benchmarks/build.py --scales 10 100        # ~1M and ~10M transactions

For each scale it generates the demo data set under ``--work`` (default /tmp/mk-bench; reused when
already there, the generation time then comes from the record written when it was generated),
then, in child processes with a private, empty cache folder:

* the cold build, ``metrics-kit build --data DIR --rebuild``: load, validate every row, compute
  every aggregate, save them (wall clock from fork to exit, so interpreter start and imports count);
* the warm start, ``metrics-kit build --data DIR``: the aggregates read back from the cache.

Peak RSS is the child's own ``ru_maxrss`` (``os.wait4``). The goal checked: 10M transactions
built in under 30 s and under 3 GiB.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

GOAL_SECONDS = 30.0
GOAL_RSS_MIB = 3 * 1024.0
GOAL_MIN_TRANSACTIONS = 9_000_000  # "10M": scale 100 gives about ten million
_ENGINE = re.compile(r"Built aggregates in ([0-9.]+) s")


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def bench_scale(scale: float, work: Path, repeat: int, timeout: float, regenerate: bool, hash_seed: str) -> dict:
    generation = common.ensure_data(work, scale, timeout, regenerate=regenerate)
    directory = common.data_dir(work, scale)
    cache = work / f"cache-build-{common.scale_label(scale)}"
    shutil.rmtree(cache, ignore_errors=True)
    env = common.child_env(cache)
    if hash_seed != "random":
        # The cache key (aggregates.catalogue_key) hashes repr() of frozensets, whose order
        # follows the per-process string hash seed: with a random seed the second start usually
        # misses its own cache and rebuilds. A fixed seed measures the reuse as designed.
        env["PYTHONHASHSEED"] = hash_seed
    result = {"scale": scale, "data_dir": str(directory), "generation": generation, "cold": [], "warm": []}
    try:
        for i in range(repeat):
            load = os.getloadavg()[0]
            print(
                f"scale {common.scale_label(scale)}: cold build {i + 1}/{repeat} (load average {load:.2f}) ...",
                flush=True,
            )
            run = common.run_child(common.metrics_kit("build", "--data", str(directory), "--rebuild"), env, timeout)
            if run.returncode != 0:
                raise SystemExit(f"build failed ({run.returncode}):\n{run.output}")
            engine = _ENGINE.search(run.output)
            result["cold"].append(
                {
                    "seconds": round(run.seconds, 3),
                    "peak_rss_mib": round(run.peak_rss_mib, 1),
                    "cpu_seconds": round(run.cpu_seconds, 2),
                    "engine_seconds": float(engine.group(1)) if engine else None,
                    "load_average_before": round(load, 2),
                    "output": run.output.strip(),
                }
            )
            print(
                f"  {run.seconds:.2f} s, peak RSS {run.peak_rss_mib:,.0f} MiB, "
                f"CPU {run.cpu_seconds:.1f} s | {run.output.strip().splitlines()[-1]}",
                flush=True,
            )
        for i in range(repeat):
            print(f"scale {common.scale_label(scale)}: warm start {i + 1}/{repeat} ...", flush=True)
            run = common.run_child(common.metrics_kit("build", "--data", str(directory)), env, timeout)
            if run.returncode != 0:
                raise SystemExit(f"warm start failed ({run.returncode}):\n{run.output}")
            reused = "Using aggregates built" in run.output
            result["warm"].append(
                {
                    "seconds": round(run.seconds, 3),
                    "peak_rss_mib": round(run.peak_rss_mib, 1),
                    "cpu_seconds": round(run.cpu_seconds, 2),
                    "reused_cache": reused,
                }
            )
            print(
                f"  {run.seconds:.2f} s, peak RSS {run.peak_rss_mib:,.0f} MiB"
                + ("" if reused else " -- CACHE MISSED, the aggregates were built again"),
                flush=True,
            )
        cached = list((cache / "aggregates").glob("*.parquet"))
        result["aggregates_file_bytes"] = sum(p.stat().st_size for p in cached)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--scales",
        type=float,
        nargs="+",
        default=[10.0, 100.0],
        help="demo data scales (1 is about 100k transactions; default 10 100)",
    )
    parser.add_argument(
        "--work",
        type=Path,
        default=common.DEFAULT_WORK,
        help="folder for the demo data sets and the private caches (default /tmp/mk-bench)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="cold builds and warm starts per scale; the table shows the median (default 1)",
    )
    parser.add_argument("--timeout", type=float, default=1800, help="seconds before a child is killed")
    parser.add_argument("--regenerate", action="store_true", help="generate the data even if present")
    parser.add_argument(
        "--hash-seed",
        default="0",
        help="PYTHONHASHSEED of the children (default 0; 'random' leaves it unset, "
        "which shows the warm start missing the cache)",
    )
    parser.add_argument("--json", type=Path, help="also write every measurement to this file")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    info = common.machine()
    common.print_machine(info)
    results = [
        bench_scale(s, args.work, args.repeat, args.timeout, args.regenerate, args.hash_seed) for s in args.scales
    ]

    rows = []
    verdicts = []
    for r in results:
        gen, cold, warm = r["generation"], r["cold"], r["warm"]
        transactions = gen["rows"].get("transactions", 0)
        build_s = _median([c["seconds"] for c in cold])
        rss = max(c["peak_rss_mib"] for c in cold)
        cpu = _median([c["cpu_seconds"] for c in cold])
        engines = [c["engine_seconds"] for c in cold if c["engine_seconds"] is not None]
        gen_s = f"{gen['seconds']:.1f}" if "seconds" in gen else "n/a"
        if gen.get("reused"):
            gen_s += " (earlier run)" if "seconds" in gen else " (reused)"
        rows.append(
            [
                common.scale_label(r["scale"]),
                f"{transactions:,}",
                gen_s,
                f"{build_s:.2f}",
                f"{_median(engines):.2f}" if engines else "n/a",
                f"{rss:,.0f}",
                f"{cpu:.1f}",
                f"{_median([w['seconds'] for w in warm]):.2f}"
                + ("" if all(w["reused_cache"] for w in warm) else " (cache missed)"),
                f"{max(w['peak_rss_mib'] for w in warm):,.0f}",
            ]
        )
        if transactions >= GOAL_MIN_TRANSACTIONS:
            ok = build_s < GOAL_SECONDS and rss < GOAL_RSS_MIB
            verdicts.append(
                f"goal at {transactions:,} transactions (< {GOAL_SECONDS:.0f} s and < 3 GiB): "
                f"{'MET' if ok else 'MISSED'} ({build_s:.1f} s, {rss / 1024:.2f} GiB)"
            )
    print()
    print(
        common.table(
            [
                "scale",
                "transactions",
                "generation s",
                "build s",
                "of which engine s",
                "build peak RSS MiB",
                "build CPU s",
                "warm start s",
                "warm peak RSS MiB",
            ],
            rows,
        )
    )
    print(
        "\nbuild s: `metrics-kit build --rebuild` wall clock, load + validation + engine + save;"
        "\nbuild CPU s: user + system of the build (less sensitive to other load than wall clock);"
        "\n'of which engine s': the part inside aggregates.build (engine + densify), from its log line."
    )
    for v in verdicts:
        print(v)
    if args.json:
        args.json.write_text(
            json.dumps(
                {"machine": info, "results": results, "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, indent=1
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
