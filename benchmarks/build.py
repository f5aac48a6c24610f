"""Build benchmark: full and incremental builds of the synthetic demo data, against one DuckDB scan.

    python benchmarks/build.py --scales 10 100 --repeat 3      # ~1M and ~10M transactions

For each scale it generates the demo data set under ``--work`` (default /tmp/mk-bench; reused when
there) and a copy whose four event tables are folders of one Parquet file per day, as a daily
export gives them (``demo-scale-N-days``). Then, ``--repeat`` times, in this order, each in a child
process with a private, empty cache folder:

* **scan**: one DuckDB query over ``transactions.parquet`` that counts distinct signers per
  project, action and day (``import duckdb`` and nothing of the project): the yardstick;
* **full build**: ``metrics-kit build --data DIR --rebuild`` on the demo data set (single files):
  validate every row, compute every metric, save;
* **folder, full**: the same on the day-file copy without its last day;
* **add one day**: the last day's four files copied in, then ``metrics-kit build --data DIR-days
  --out inc.parquet``: the incremental build; then ``--rebuild --out full.parquet``, and the two
  files' values are compared (``equal``);
* **warm start**: ``metrics-kit build --data DIR`` again, which reads the saved aggregates.

Times are wall clock from fork to exit (interpreter start and imports count for every child).
Peak RSS and CPU are each child's own (``benchmarks/common.run_child`` starts children through a
tiny launcher, since Linux carries a process's peak RSS across exec). The goals checked at ~10M
transactions: full build within 2.5x of the scan and at most 1.5 GiB; adding one day within 15%
of a full build.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

GOAL_SCAN_RATIO = 2.5
GOAL_RSS_MIB = 1.5 * 1024
GOAL_DAY_RATIO = 0.15
GOAL_MIN_TRANSACTIONS = 9_000_000  # "10M": scale 100 gives about ten million
EVENT_TABLES = ("transactions", "fees", "token_flows", "chain_rewards")

SCAN = """
import sys, time, duckdb
con = duckdb.connect()
con.execute("SET TimeZone = 'UTC'")
con.execute("SET enable_progress_bar = false")
started = time.perf_counter()
groups = con.execute(
    "SELECT count(*) FROM (SELECT project, action, CAST(block_time AS DATE) AS day, count(DISTINCT signer) "
    "FROM read_parquet(?) GROUP BY ALL)",
    [sys.argv[1]],
).fetchone()[0]
print(f"{groups} (project, action, day) groups; query {time.perf_counter() - started:.3f} s")
"""


def split_by_day(source: Path, out: Path) -> tuple[Path, list[Path]]:
    """``out``: ``source`` with each event table as a folder of one Parquet file per (UTC) day, all
    but the last day; the last day's files are kept aside. Returns (out, the last day's files)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    aside = out.with_name(out.name + "-last-day")
    done = out / "SPLIT_DONE"
    if not done.exists():
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(aside, ignore_errors=True)
        out.mkdir(parents=True)
        aside.mkdir()
        shutil.copy(source / "projects.parquet", out)
        for table in EVENT_TABLES:
            rows = pq.read_table(source / f"{table}.parquet")
            # The demo writes UTC instants; their date in UTC is the day the build puts them on.
            days = pc.cast(pc.cast(rows["block_time"], pa.timestamp("us")), pa.date32())
            rows = rows.append_column("_day", days).sort_by("_day")
            ordered = rows["_day"].to_numpy()
            last = ordered[-1]
            (out / table).mkdir()
            (aside / table).mkdir()
            starts = [0, *(i for i in range(1, len(ordered)) if ordered[i] != ordered[i - 1]), len(ordered)]
            for lo, hi in zip(starts, starts[1:], strict=False):
                day = ordered[lo]
                folder = aside if day == last else out
                pq.write_table(rows.slice(lo, hi - lo).drop_columns(["_day"]), folder / table / f"{day}.parquet")
        done.write_text("split\n")
    return out, sorted(aside.glob("*/*.parquet"))


def _run(cmd: list[str], env: dict[str, str], timeout: float, what: str) -> common.Run:
    run = common.run_child(cmd, env, timeout)
    if run.returncode != 0:
        raise SystemExit(f"{what} failed ({run.returncode}):\n{run.output}")
    print(
        f"  {what}: {run.seconds:.2f} s, peak RSS {run.peak_rss_mib:,.0f} MiB, CPU {run.cpu_seconds:.1f} s"
        f" | {run.output.strip().splitlines()[0][:150]}",
        flush=True,
    )
    return run


def _equal(a: Path, b: Path) -> bool:
    from metrics_kit.server.serving.aggregates import Aggregates

    x, y = Aggregates.read(a), Aggregates.read(b)
    if x.values.keys() != y.values.keys() or x.meta["coverage"] != y.meta["coverage"]:
        return False
    return all(
        len(x.values[k]) == len(y.values[k])
        and all(math.isclose(p, q, rel_tol=1e-9, abs_tol=1e-9) for p, q in zip(x.values[k], y.values[k], strict=True))
        for k in x.values
    )


def bench_scale(scale: float, work: Path, repeat: int, timeout: float) -> dict:
    generation = common.ensure_data(work, scale, timeout)
    single = common.data_dir(work, scale)
    print(f"scale {common.scale_label(scale)}: splitting into day files ...", flush=True)
    days, last_day = split_by_day(single, work / f"{single.name}-days")
    result: dict = {"scale": scale, "generation": generation, "day_files_added": len(last_day), "runs": []}
    for i in range(repeat):
        print(f"scale {common.scale_label(scale)}, run {i + 1}/{repeat} (load {os.getloadavg()[0]:.2f})", flush=True)
        cache = work / f"cache-build-{common.scale_label(scale)}"
        shutil.rmtree(cache, ignore_errors=True)
        env = common.child_env(cache)
        for path in last_day:  # the folder starts without its last day
            (days / path.parent.name / path.name).unlink(missing_ok=True)
        out = work / "build-out"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        try:
            scan = _run([sys.executable, "-c", SCAN, str(single / "transactions.parquet")], env, timeout, "scan")
            full = _run(common.metrics_kit("build", "--data", str(single), "--rebuild"), env, timeout, "full build")
            folder = _run(
                common.metrics_kit("build", "--data", str(days), "--rebuild"), env, timeout, "folder, full build"
            )
            for path in last_day:
                shutil.copy(path, days / path.parent.name / path.name)
            inc = _run(
                common.metrics_kit("build", "--data", str(days), "--out", str(out / "inc.parquet")),
                env,
                timeout,
                "add one day",
            )
            check = _run(
                common.metrics_kit("build", "--data", str(days), "--rebuild", "--out", str(out / "full.parquet")),
                env,
                timeout,
                "folder with the day, full build",
            )
            warm = _run(common.metrics_kit("build", "--data", str(single)), env, timeout, "warm start")
            result["runs"].append(
                {
                    name: {
                        "seconds": round(run.seconds, 3),
                        "peak_rss_mib": round(run.peak_rss_mib, 1),
                        "cpu_seconds": round(run.cpu_seconds, 2),
                        "output": run.output.strip()[-1000:],
                    }
                    for name, run in (
                        ("scan", scan),
                        ("full", full),
                        ("folder_full", folder),
                        ("add_day", inc),
                        ("folder_full_with_day", check),
                        ("warm", warm),
                    )
                }
                | {"equal": _equal(out / "inc.parquet", out / "full.parquet"), "load_after": os.getloadavg()[0]}
            )
            if "incrementally" not in inc.output:
                raise SystemExit(f"the build after adding a day was not incremental:\n{inc.output}")
        finally:
            shutil.rmtree(cache, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)
    return result


_BUILD_SECONDS = re.compile(r"(?:Built aggregates|Updated aggregates incrementally) in ([0-9.]+) s")


def _build_seconds(run: dict) -> float:
    """The build's own time, from its log line (build_seconds: after interpreter start and imports)."""
    found = _BUILD_SECONDS.search(run["output"])
    return float(found.group(1)) if found else float("nan")


def _median_build(runs: list[dict], name: str) -> float:
    return statistics.median(_build_seconds(r[name]) for r in runs)


def _median(runs: list[dict], name: str, key: str = "seconds") -> float:
    return statistics.median(r[name][key] for r in runs)


def summarise(results: list[dict]) -> tuple[list[list[str]], list[str]]:
    rows, verdicts = [], []
    for r in results:
        runs = r["runs"]
        transactions = r["generation"]["rows"].get("transactions", 0)
        # Ratios are taken within each run (same minutes, same load), then the median of them.
        scan_ratio = statistics.median(x["full"]["seconds"] / x["scan"]["seconds"] for x in runs)
        day_ratio = statistics.median(x["add_day"]["seconds"] / x["folder_full_with_day"]["seconds"] for x in runs)
        day_ratio_single = statistics.median(x["add_day"]["seconds"] / x["full"]["seconds"] for x in runs)
        # The same from the builds' own log lines: the build itself, without interpreter start and imports.
        day_ratio_build = statistics.median(
            _build_seconds(x["add_day"]) / _build_seconds(x["folder_full_with_day"]) for x in runs
        )
        rss = max(x["full"]["peak_rss_mib"] for x in runs)
        rows.append(
            [
                common.scale_label(r["scale"]),
                f"{transactions:,}",
                f"{_median(runs, 'scan'):.2f} ({max(x['scan']['peak_rss_mib'] for x in runs):,.0f})",
                f"{_median(runs, 'full'):.2f} ({rss:,.0f})",
                f"{_median(runs, 'full', 'cpu_seconds'):.1f}",
                f"{scan_ratio:.2f}",
                f"{_median(runs, 'folder_full_with_day'):.2f}",
                f"{_median(runs, 'add_day'):.2f} ({max(x['add_day']['peak_rss_mib'] for x in runs):,.0f})",
                f"{day_ratio:.3f} / {day_ratio_single:.3f}",
                f"{_median_build(runs, 'add_day'):.2f} / {_median_build(runs, 'folder_full_with_day'):.2f} = "
                f"{day_ratio_build:.3f}",
                "yes" if all(x["equal"] for x in runs) else "NO",
                f"{_median(runs, 'warm'):.2f}",
            ]
        )
        if transactions >= GOAL_MIN_TRANSACTIONS:
            ok_scan = scan_ratio <= GOAL_SCAN_RATIO and rss <= GOAL_RSS_MIB
            ok_day = day_ratio <= GOAL_DAY_RATIO
            ok_day_build = day_ratio_build <= GOAL_DAY_RATIO
            verdicts.append(
                f"goal 1 at {transactions:,} transactions (full build <= {GOAL_SCAN_RATIO}x the scan, "
                f"<= 1.5 GiB): {'MET' if ok_scan else 'MISSED'} ({scan_ratio:.2f}x, {rss / 1024:.2f} GiB)"
            )
            verdicts.append(
                f"goal 2 (adding one day <= {GOAL_DAY_RATIO:.0%} of a full build): "
                f"{'MET' if ok_day else 'MISSED'} ({day_ratio:.1%} of the folder's full build, "
                f"{day_ratio_single:.1%} of the single-file full build)"
            )
            verdicts.append(
                f"goal 2, the builds' own times (after start-up and imports): "
                f"{'MET' if ok_day_build else 'MISSED'} ({day_ratio_build:.1%} of the folder's full build)"
            )
    return rows, verdicts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scales", type=float, nargs="+", default=[10.0, 100.0], help="1 is ~100k transactions")
    parser.add_argument("--work", type=Path, default=common.DEFAULT_WORK, help="data and caches (/tmp/mk-bench)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per scale; the table shows medians")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds before a child is killed")
    parser.add_argument("--json", type=Path, help="also write every measurement to this file")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    info = common.machine()
    common.print_machine(info)
    results = [bench_scale(s, args.work, args.repeat, args.timeout) for s in args.scales]
    rows, verdicts = summarise(results)
    print()
    print(
        common.table(
            [
                "scale",
                "transactions",
                "scan s (RSS MiB)",
                "full build s (RSS MiB)",
                "full build CPU s",
                "full / scan",
                "folder full build s",
                "add one day s (RSS MiB)",
                "add day / full (folder / single file)",
                "build s: add day / folder full",
                "equal",
                "warm start s",
            ],
            rows,
        )
    )
    print(
        "\nscan: one DuckDB query counting distinct signers per project, action and day, process wall clock;"
        "\nfull build: metrics-kit build --rebuild on the single-file demo data set; folder full build: on the"
        "\nday-file copy with its last day; add one day: the incremental build after copying that day's files in;"
        "\nequal: the incremental build's values equal the folder's full build's (counts exactly, amounts to 1e-9);"
        "\nbuild s: the builds' own times from their log lines (without interpreter start and imports)."
    )
    for v in verdicts:
        print(v)
    if args.json:
        common.write_results(args.json, info, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
