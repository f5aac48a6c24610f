"""Helpers shared by the benchmark scripts: child processes, peak memory, the demo data sets.

Every child runs with a private ``METRICS_KIT_CACHE_DIR`` (never the user's cache) and
``METRICS_KIT_API_KEYS=bench-key-0123456789``; every wait is bounded by a timeout, and a child that outlives
it is killed by its PID.
"""

from __future__ import annotations

import json
import os
import platform
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

BENCH_KEY = "bench-key-0123456789"
DEFAULT_WORK = Path("/tmp/mk-bench")
REPO = Path(__file__).resolve().parent.parent
TABLES = ("projects", "transactions", "fees", "token_flows", "chain_rewards")


def child_env(cache_dir: Path | str) -> dict[str, str]:
    """The environment of every child: no METRICS_KIT_* of the caller, our cache folder and key."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("METRICS_KIT_")}
    env["METRICS_KIT_CACHE_DIR"] = str(cache_dir)
    env["METRICS_KIT_API_KEYS"] = BENCH_KEY
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


@dataclass
class Run:
    cmd: list[str]
    returncode: int
    seconds: float  # wall clock, from fork to exit
    peak_rss_mib: float  # the child's own ru_maxrss (os.wait4), not the max over all children
    cpu_seconds: float  # user + system
    output: str


# Linux keeps a process's peak RSS (ru_maxrss) across exec: a child forked from this benchmark, which
# has imported pandas and generated data, would report at least this process's peak. So every child
# is started by this tiny launcher (no site, no imports beyond os and sys: ~10 MiB), which forks
# and execs the command and reports, on a pipe, the rusage of exactly that command.
_LAUNCHER = (
    "import os, sys\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.execvp(sys.argv[2], sys.argv[2:])\n"
    "_, status, ru = os.wait4(pid, 0)\n"
    "os.write(int(sys.argv[1]), f'{ru.ru_maxrss} {ru.ru_utime + ru.ru_stime}'.encode())\n"
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)


def run_child(cmd: list[str], env: dict[str, str], timeout: float) -> Run:
    """Run ``cmd`` to completion (killed after ``timeout`` s); time it and read its own peak RSS
    and CPU time (through the launcher above)."""
    import tempfile

    read_end, write_end = os.pipe()
    with tempfile.TemporaryFile(mode="w+") as out:
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-S", "-c", _LAUNCHER, str(write_end), *cmd],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=REPO,
            pass_fds=(write_end,),
            start_new_session=True,  # one group: a timeout kills the command with its launcher
        )
        os.close(write_end)
        try:
            proc.wait(timeout=timeout)
        except BaseException:  # a timeout, or this benchmark stopped: the command's group goes with it
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            if not isinstance(sys.exc_info()[1], subprocess.TimeoutExpired):
                raise
        seconds = time.perf_counter() - started
        report = os.read(read_end, 200).decode().split()
        os.close(read_end)
        out.seek(0)
        text = out.read()
    peak_kib, cpu = (float(report[0]), float(report[1])) if report else (float("nan"), float("nan"))
    return Run(cmd, proc.returncode, seconds, peak_kib / 1024.0, cpu, text)


def metrics_kit(*args: str) -> list[str]:
    return [sys.executable, "-m", "metrics_kit", *args]


def scale_label(scale: float) -> str:
    return f"{scale:g}"


def data_dir(work: Path, scale: float) -> Path:
    return work / f"demo-scale-{scale_label(scale)}"


def _record_path(work: Path, scale: float) -> Path:
    return work / f"demo-scale-{scale_label(scale)}.generation.json"


def data_complete(directory: Path, scale: float) -> bool:
    """Whether ``directory`` holds a finished demo data set of this scale (README is written last)."""
    readme = directory / "README.txt"
    if not readme.exists() or not all((directory / f"{t}.parquet").exists() for t in TABLES):
        return False
    match = re.search(r"scale\s*=\s*([0-9.eE+-]+)", readme.read_text(encoding="utf-8"))
    return bool(match) and float(match.group(1)) == float(scale)


def ensure_data(work: Path, scale: float, timeout: float, *, regenerate: bool = False, log=print) -> dict:
    """Generate the demo data set of ``scale`` under ``work`` unless it is there already.

    Returns the generation record: seconds, peak RSS, row counts, and whether it was reused now.
    """
    directory = data_dir(work, scale)
    record_path = _record_path(work, scale)
    if not regenerate and data_complete(directory, scale):
        record = json.loads(record_path.read_text()) if record_path.exists() else {}
        record["reused"] = True
        record.setdefault("rows", row_counts(directory))
        return record
    work.mkdir(parents=True, exist_ok=True)
    log(f"generating the demo data set at scale {scale_label(scale)} into {directory} ...")
    run = run_child(
        metrics_kit("demo-data", "--out", str(directory), "--scale", str(scale)), child_env(work / "gen-cache"), timeout
    )
    if run.returncode != 0:
        raise SystemExit(f"demo-data failed ({run.returncode}):\n{run.output}")
    record = {
        "scale": scale,
        "seconds": round(run.seconds, 2),
        "peak_rss_mib": round(run.peak_rss_mib, 1),
        "rows": row_counts(directory),
        "bytes": sum(p.stat().st_size for p in directory.iterdir() if p.is_file()),
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    record_path.write_text(json.dumps(record, indent=1))
    record["reused"] = False
    return record


def row_counts(directory: Path) -> dict[str, int]:
    import pyarrow.parquet as pq

    return {
        t: pq.ParquetFile(directory / f"{t}.parquet").metadata.num_rows
        for t in TABLES
        if (directory / f"{t}.parquet").exists()
    }


def machine() -> dict:
    """What the figures were measured on."""
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for name in ("duckdb", "ibis", "pandas", "pyarrow", "uvicorn", "starlette", "httptools", "uvloop"):
        try:
            versions[name] = __import__(name).__version__
        except Exception:  # noqa: BLE001 - a missing optional package is just not reported
            versions[name] = None
    mem_kib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "mem_gib": round(mem_kib / 2**20, 1) if mem_kib else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        **versions,
    }


def write_results(path: Path, info: dict, results: list) -> None:
    """Every measurement, with the machine it was taken on, as JSON (the scripts' ``--json``)."""
    payload = {"machine": info, "results": results, "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    path.write_text(json.dumps(payload, indent=1))


def print_machine(info: dict) -> None:
    print(
        f"# {info['date']} | nproc {info['nproc']} | {info['cpu']} | {info['mem_gib']} GiB | "
        f"Python {info['python']} | DuckDB {info['duckdb']} | Ibis {info['ibis']} | "
        f"uvicorn {info['uvicorn']} | Starlette {info['starlette']}"
    )


def table(headers: list[str], rows: list[list], aligns: str | None = None) -> str:
    """A Markdown table (also readable as plain text)."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    aligns = aligns or "l" + "r" * (len(headers) - 1)

    def line(values):
        padded = (v.ljust(w) if a == "l" else v.rjust(w) for v, w, a in zip(values, widths, aligns, strict=True))
        return "| " + " | ".join(padded) + " |"

    dashes = (("-" * (w + 1) + ":") if a == "r" else ("-" * (w + 2)) for w, a in zip(widths, aligns, strict=True))
    rule = "|" + "|".join(dashes) + "|"
    return "\n".join([line(headers), rule, *(line(r) for r in cells)])


def spark_parser(doc: str):
    """The arguments of the Spark benchmarks: scales, work folder, master, timeout, JSON output."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--scales", type=float, nargs="+", default=[10.0, 100.0], help="default 10 100")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, help="default /tmp/mk-bench")
    parser.add_argument("--master", default="local[2]", help="the Spark master (default local[2])")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds before a child is killed")
    parser.add_argument("--json", type=Path, help="also write every measurement to this file")
    return parser


def report(headers: list[str], rows: list[list], json_path: Path | None, info: dict, results: list) -> int:
    """Print the table of a benchmark and write its measurements (``--json``); the exit status."""
    print()
    print(table(headers, rows))
    if json_path:
        write_results(json_path, info, results)
    return 0


def spark_setup(work: Path, scale: float, timeout: float, name: str) -> tuple[dict, Path, Path, dict[str, str]]:
    """A Spark benchmark's scale: the demo data's generation record and folder, a fresh output
    folder ``work/NAME-SCALE``, and the children's environment (Spark on 127.0.0.1, no web UI)."""
    import shutil

    generation = ensure_data(work, scale, timeout)
    out = work / f"{name}-{scale_label(scale)}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    env = {**child_env(out / "cache"), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    env["PYSPARK_SUBMIT_ARGS"] = "--conf spark.ui.enabled=false pyspark-shell"
    return generation, data_dir(work, scale), out, env
