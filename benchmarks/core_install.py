"""The core install (`pip install metrics-kit`, no extras): its size, `import metrics_kit` time, and
that it answers on the embedded default and against a remote service without the extras.

    python benchmarks/core_install.py [--work /tmp/mk-bench] [--rounds 7] [--reuse]

Steps, each in child processes with a private cache folder and bounded in time:

1. a fresh venv under ``--work`` and ``pip install --prefer-binary <this repository>`` (not editable:
   the files land in site-packages, as for a user); ``--reuse`` keeps a venv from an earlier run;
2. the size of its site-packages (``du -sk``), in all and per top-level entry;
3. none of the modules of the [lab] and [serve] extras is installed, and ``import metrics_kit``
   loads none of them (nor DuckDB or Ibis: the engine is imported on first use);
4. ``import metrics_kit``: ``--rounds`` fresh interpreters (``python -I``, so the repository's
   own copy is not on the path), the time inside the interpreter and from fork to exit, against
   ``python -I -c pass``;
5. the first ``mk.value(...)`` on the embedded default with an empty cache (builds the demo data
   and its aggregates), and again in a new process with that cache;
6. the same value from the core venv through ``mk.Client(base_url, api_key)`` against
   ``metrics-kit serve`` started from this (the project's) environment on 127.0.0.1, port 0.

Exits 1 if any check fails (an extra's module present or loaded, a wrong or missing answer).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import common
from serve import Server

# What the core install must not bring: the [lab] and [serve] extras' top-level modules.
EXTRAS_MODULES = ("jupyterlab", "notebook", "ipykernel", "IPython", "ipywidgets", "matplotlib")
EXTRAS_MODULES += ("papermill", "nbconvert", "nbformat", "jupyter_client", "uvicorn", "uvloop", "httptools")
# Loaded on first use, not on import (see tests/unit/test_public_api.py).
ENGINE_MODULES = ("duckdb", "ibis")
QUERY = ("swap_active_users", "demoswap", "1_week", "2025-06-04")

IMPORT_PROBE = """
import json, sys, time
started, cpu = time.perf_counter(), time.process_time()
import metrics_kit
seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
loaded = sorted(set(sys.argv[1:]) & set(sys.modules))
print(json.dumps({"seconds": seconds, "cpu": cpu, "modules": len(sys.modules), "loaded": loaded}))
"""
INSTALLED_PROBE = """
import importlib.util, json, sys
print(json.dumps(sorted(m for m in sys.argv[1:] if importlib.util.find_spec(m) is not None)))
"""
# argv: the query, then base URL and key for a remote service (none: the embedded default).
VALUE_PROBE = """
import json, sys
import metrics_kit as mk
query, remote = sys.argv[1:5], sys.argv[5:]
client = mk.Client(*remote) if remote else mk.default_client()
print(json.dumps({"value": client.value(*query)}))
"""


def run_python(python: Path, code: str, args: list[str], cache: Path, timeout: float) -> common.Run:
    # -I: no current folder or PYTHON* variables on the path, so only the installed copy imports.
    return common.run_child([str(python), "-I", "-c", code, *args], common.child_env(cache), timeout)


def last_json(run: common.Run):
    if run.returncode != 0:
        raise SystemExit(f"{run.cmd[:3]} failed ({run.returncode}):\n{run.output[-3000:]}")
    return json.loads(run.output.strip().splitlines()[-1])


def du_kib(path: Path) -> int:
    return int(subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True).stdout.split()[0])


def install(venv: Path, reuse: bool, timeout: float) -> float | None:
    if reuse and (venv / "bin" / "python").exists():
        return None
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    started = time.perf_counter()
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--prefer-binary", str(common.REPO)]
    done = subprocess.run(pip, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"pip install failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return time.perf_counter() - started


def sizes(venv: Path, top: int) -> tuple[int, int, list[tuple[str, int]]]:
    site = next((venv / "lib").glob("python3*/site-packages"))
    entries = [(p.name, du_kib(p)) for p in site.iterdir() if not p.name.endswith((".dist-info", ".pth"))]
    entries.sort(key=lambda e: -e[1])
    installer = sum(kib for name, kib in entries if name in ("pip", "setuptools", "_distutils_hack"))
    return du_kib(site), installer, entries[:top]


def import_time_by_package(python: Path, cache: Path, timeout: float) -> list[tuple[str, int]]:
    """Microseconds of `import metrics_kit` spent in each top-level package's own modules."""
    done = subprocess.run(
        [str(python), "-I", "-X", "importtime", "-c", "import metrics_kit"],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=common.child_env(cache),
        check=True,
    )
    totals: dict[str, int] = {}
    for line in done.stderr.splitlines():
        fields = line.removeprefix("import time:").split("|")
        if len(fields) != 3 or not fields[0].strip().isdigit():
            continue  # the header
        package = fields[2].strip().split(".")[0]
        totals[package] = totals.get(package, 0) + int(fields[0])
    return sorted(totals.items(), key=lambda item: -item[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    parser.add_argument("--rounds", type=int, default=7, help="fresh interpreters timed per import figure")
    parser.add_argument("--reuse", action="store_true", help="keep the venv of an earlier run")
    parser.add_argument("--timeout", type=float, default=900, help="seconds allowed to pip and to each child")
    parser.add_argument("--top", type=int, default=8, help="largest site-packages entries listed")
    args = parser.parse_args(argv)

    info = common.machine()
    common.print_machine(info)
    venv = args.work / "core-venv"
    python = venv / "bin" / "python"
    failures: list[str] = []

    pip_seconds = install(venv, args.reuse, args.timeout)
    total, installer, largest = sizes(venv, args.top)
    print(f"\npip install (core): {'reused' if pip_seconds is None else f'{pip_seconds:.0f} s'}")
    print(f"site-packages: {total / 1024:.0f} MiB, of which pip/setuptools {installer / 1024:.0f} MiB")
    print(common.table(["entry", "MiB"], [[name, f"{kib / 1024:.1f}"] for name, kib in largest]))

    cache = args.work / "core-cache"
    shutil.rmtree(cache, ignore_errors=True)
    present = last_json(run_python(python, INSTALLED_PROBE, list(EXTRAS_MODULES), cache, args.timeout))
    if present:
        failures.append(f"installed by the core install: {present}")

    print(f"\nload average before the import rounds: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    # CPU time as well as wall time: on a busy machine the wall time mostly measures the others.
    baseline, inside, cpu, wall, modules = [], [], [], [], 0
    for _ in range(args.rounds):
        baseline.append(run_python(python, "pass", [], cache, args.timeout).seconds)
        run = run_python(python, IMPORT_PROBE, [*EXTRAS_MODULES, *ENGINE_MODULES], cache, args.timeout)
        probe = last_json(run)
        inside.append(probe["seconds"])
        cpu.append(probe["cpu"])
        wall.append(run.seconds)
        modules = probe["modules"]
        if probe["loaded"]:
            failures.append(f"import metrics_kit loaded {probe['loaded']}")
    print(f"\nimport metrics_kit, {args.rounds} fresh interpreters ({modules} modules in sys.modules after it):")
    print(
        common.table(
            ["figure", "median s", "min s", "max s"],
            [
                [name, f"{statistics.median(v):.3f}", f"{min(v):.3f}", f"{max(v):.3f}"]
                for name, v in [
                    ("inside the interpreter, wall", inside),
                    ("inside the interpreter, CPU", cpu),
                    ("fork to exit, python -I -c 'import metrics_kit'", wall),
                    ("fork to exit, python -I -c pass", baseline),
                ]
            ],
        )
    )

    by_package = import_time_by_package(python, cache, args.timeout)
    print("\nwhere the import time goes (python -X importtime, self time summed per top-level package):")
    print(common.table(["package", "ms"], [[name, f"{us / 1000:.0f}"] for name, us in by_package[: args.top]]))

    cold = run_python(python, VALUE_PROBE, [*QUERY], cache, args.timeout)
    warm = run_python(python, VALUE_PROBE, [*QUERY], cache, args.timeout)
    embedded = last_json(cold)["value"]
    if last_json(warm)["value"] != embedded:
        failures.append(f"warm answer {last_json(warm)['value']} != cold answer {embedded}")

    server = Server(
        "metrics-kit serve",
        common.metrics_kit("serve", "--host", "127.0.0.1", "--port", "0"),
        common.child_env(args.work / "core-serve-cache"),
        args.timeout,
    )
    try:
        remote_run = run_python(python, VALUE_PROBE, [*QUERY, server.base_url, common.BENCH_KEY], cache, args.timeout)
    finally:
        server.stop()
    remote = last_json(remote_run)["value"]
    if remote != embedded:
        failures.append(f"remote answer {remote} != embedded answer {embedded}")
    print(f"\nmk.value{QUERY} from the core venv:")
    print(
        common.table(
            ["how", "value", "wall s", "peak RSS MiB"],
            [
                [
                    "embedded, empty cache (builds demo data)",
                    embedded,
                    f"{cold.seconds:.1f}",
                    f"{cold.peak_rss_mib:.0f}",
                ],
                [
                    "embedded, cache from the run above",
                    last_json(warm)["value"],
                    f"{warm.seconds:.1f}",
                    f"{warm.peak_rss_mib:.0f}",
                ],
                [
                    "remote: metrics-kit serve on 127.0.0.1",
                    remote,
                    f"{remote_run.seconds:.1f}",
                    f"{remote_run.peak_rss_mib:.0f}",
                ],
            ],
        )
    )
    record = {
        "machine": info,
        "pip_seconds": pip_seconds,
        "site_packages_kib": total,
        "installer_kib": installer,
        "largest_kib": largest,
        "import_inside_s": inside,
        "import_cpu_s": cpu,
        "import_wall_s": wall,
        "python_pass_wall_s": baseline,
        "modules_after_import": modules,
        "import_self_us_by_package": by_package,
        "embedded_cold_s": cold.seconds,
        "embedded_warm_s": warm.seconds,
        "remote_s": remote_run.seconds,
        "failures": failures,
    }
    (args.work / "core_install.json").write_text(json.dumps(record, indent=1))
    for failure in failures:
        print("FAILED:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
