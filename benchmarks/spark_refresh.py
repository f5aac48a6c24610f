"""Refreshing a URL on Spark: the cost of adding one day, against the history's size.

    python benchmarks/spark_refresh.py --scales 10 100      # ~1M and ~10M transactions of history

For each scale it generates (or reuses) the demo data set under ``--work`` (default /tmp/mk-bench)
and its copy with each event table as a folder of one Parquet file per day, without the last day
(``benchmarks/build.py``'s ``split_by_day``; never in the repository). Then, each step a whole
``metrics-kit`` child process on ``--master`` (default ``local[2]``), with a private cache folder:

* **full build**: ``build --data file://DIR-days --engine spark --state file://STATE`` with no state
  yet: validates and computes everything, and writes the state;
* **add one day**: the last day's files copied in as new files, then the same command: the refresh;
* **check**: ``--rebuild`` of the folder with the day, whose values must equal the refresh's.

It prints both figures per scale and the ratio of the refreshes (largest scale over smallest; the
goal is at most 1.3). The 10M history takes long to generate and to build in full on a small
machine: ``--scales`` takes any sizes (``--scales 1 10`` for a quick run).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build as build_bench  # noqa: E402
import common  # noqa: E402

_SECONDS = re.compile(r"(?:Built aggregates|Updated aggregates incrementally) in ([0-9.]+) s")


def _step(what: str, data: Path, state: Path, out: Path, env: dict, master: str, timeout: float, *extra: str):
    cmd = common.metrics_kit(
        "build", "--data", data.as_uri(), "--engine", "spark", "--spark-master", master,
        "--state", state.as_uri(), "--out", str(out), *extra,
    )  # fmt: skip
    run = common.run_child(cmd, env, timeout)
    if run.returncode != 0:
        raise SystemExit(f"{what} failed ({run.returncode}):\n{run.output[-4000:]}")
    found = _SECONDS.search(run.output)
    line = next((x for x in run.output.splitlines() if _SECONDS.search(x)), "")
    print(f"  {what}: {run.seconds:.1f} s (process), {line[:160]}", flush=True)
    return {"seconds": round(run.seconds, 2), "build_seconds": float(found.group(1)) if found else None, "log": line}


def bench_scale(scale: float, work: Path, master: str, timeout: float) -> dict:
    generation, single, out, env = common.spark_setup(work, scale, timeout, "spark-refresh")
    print(f"scale {common.scale_label(scale)}: splitting into day files ...", flush=True)
    days, last_day = build_bench.split_by_day(single, work / f"{single.name}-days")
    for path in last_day:  # the history, without its last day
        (days / path.parent.name / path.name).unlink(missing_ok=True)
    state = out / "state"
    result = {"scale": scale, "transactions": generation["rows"].get("transactions", 0), "load": os.getloadavg()[0]}
    try:
        result["full"] = _step("full build", days, state, out / "full.parquet", env, master, timeout)
        for path in last_day:
            shutil.copy(path, days / path.parent.name / path.name)
        result["refresh"] = _step("add one day", days, state, out / "refresh.parquet", env, master, timeout)
        if "incrementally" not in result["refresh"]["log"]:
            raise SystemExit(f"the build after adding a day was not a refresh: {result['refresh']['log']}")
        _step("check", days, state, out / "check.parquet", env, master, timeout, "--rebuild")
        result["equal"] = build_bench._equal(out / "refresh.parquet", out / "check.parquet")
    finally:
        for path in last_day:  # as build.py leaves the split folder
            (days / path.parent.name / path.name).unlink(missing_ok=True)
        shutil.rmtree(out / "cache", ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = common.spark_parser(__doc__)
    args = parser.parse_args(argv)
    info = common.machine()
    common.print_machine(info)
    results = [bench_scale(s, args.work, args.master, args.timeout) for s in args.scales]
    rows = [
        [
            common.scale_label(r["scale"]),
            f"{r['transactions']:,}",
            f"{r['full']['seconds']:.1f}",
            f"{r['refresh']['seconds']:.1f}",
            f"{r['refresh']['build_seconds']:.1f}",
            "yes" if r["equal"] else "NO",
        ]
        for r in results
    ]
    headers = ["scale", "transactions", "full build s", "add one day s", "of which build s", "equal to a full build"]
    code = common.report(headers, rows, args.json, info, results)
    if len(results) > 1:
        first, last = results[0], results[-1]
        small, large = first["refresh"]["seconds"], last["refresh"]["seconds"]
        at = common.scale_label
        print(
            f"\nadding one day: {large:.1f} s at scale {at(last['scale'])} / {small:.1f} s at scale "
            f"{at(first['scale'])} = {large / small:.2f}x (goal: at most 1.3x)"
        )
    return code if all(r["equal"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
