"""Where the build's time and memory go: one in-process build with a timer around every phase.

    python benchmarks/build_profile.py --scale 100 [--memory-limit 1.5GB] [--threads N]

Runs what ``metrics-kit build --data DIR --rebuild`` runs (``build_folder``: validate, compute,
save the build state; then save the aggregates) in this process, with the library's own functions
wrapped by timers -- nothing in ``metrics_kit`` is changed. Printed per phase: seconds, and the
process's peak RSS once the phase is over (the peak only grows, so the phase where it jumps is the
one that needed the memory); then DuckDB's own account of the memory it still holds
(``duckdb_memory()``). ``--memory-limit`` / ``--threads`` replace the build connection's own
(``memory_limit`` 2GB, DuckDB's threads), to see what a cap costs in time.
The demo data set must exist already (``benchmarks/build.py`` generates it under /tmp/mk-bench).
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

EVENTS: list[tuple[str, float, float]] = []  # (label, seconds, peak RSS MiB after)
GRANULARITIES = ("1_day", "1_week", "1_month")


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _label(name: str, args) -> str:
    """The function name, plus the table / granularity / temp-table name found among its arguments."""
    extra = []
    for a in args:
        if isinstance(a, str) and (a in GRANULARITIES or a.isidentifier()) and len(a) < 40:
            extra.append(a)
        elif hasattr(a, "table") and isinstance(a.table, str):  # a store.Source
            extra.append(a.table)
        elif hasattr(a, "get_name"):  # an Ibis table
            try:
                table = re.sub(r"_[0-9a-f]{32}$", "", a.get_name().rsplit(".", 1)[-1])
                extra.append(table)
            except Exception:  # noqa: BLE001 - an unnamed expression
                pass
    return " ".join([name, *extra])


def timed(module, name: str, prefix: str) -> None:
    original = getattr(module, name, None)
    if original is None:  # the library changed: time what is still there
        return

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            EVENTS.append((f"{prefix}{_label(name, args)}", time.perf_counter() - started, _peak_mib()))

    setattr(module, name, wrapper)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=100.0)
    parser.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    parser.add_argument("--threads", type=int, help="DuckDB threads (default: the build's, one per core)")
    parser.add_argument("--memory-limit", help="DuckDB memory_limit, e.g. 1.5GB (default: the build's, 2GB)")
    args = parser.parse_args(argv)
    data = common.data_dir(args.work, args.scale)
    if not common.data_complete(data, args.scale):
        raise SystemExit(f"{data} is not a finished demo data set; run benchmarks/build.py first")
    scratch = Path(tempfile.mkdtemp(prefix="mk-profile-", dir=args.work))
    os.environ["METRICS_KIT_CACHE_DIR"] = str(scratch)
    os.chdir(scratch)  # DuckDB spills an in-memory database to ./.tmp
    try:
        return _run(args, data)
    finally:
        import shutil

        os.chdir(common.REPO)
        shutil.rmtree(scratch, ignore_errors=True)


def _run(args, data: Path) -> int:

    started = time.perf_counter()
    import ibis  # noqa: F401 (its import time is part of the first phase)

    from metrics_kit.server.building import build as aggregates
    from metrics_kit.server.building import compute as engine
    from metrics_kit.server.building import passes
    from metrics_kit.server.data import store
    from metrics_kit.spec.catalogue import default_catalogue

    EVENTS.append(("imports (ibis, metrics_kit)", time.perf_counter() - started, _peak_mib()))

    for name in ("_validate", "read_projects", "provide"):
        timed(store, name, "load: ")
    # (engine holds its own reference to transaction_metrics, so its parts are timed instead)
    for name in ("_counted", "_repeated", "_signers"):
        timed(passes, name, "transactions: ")
    timed(engine, "_small_tables", "engine: ")
    timed(aggregates, "_densify", "")

    connections = []
    connect = store.connect

    def build_connection(threads=None, memory_limit=None, temp_directory=None):
        con = connect(
            threads=args.threads or threads,
            memory_limit=args.memory_limit or memory_limit,
            temp_directory=temp_directory,
        )
        connections.append(con)
        return con

    store.connect = build_connection  # the build's own connection, with the options given here
    # What DuckDB holds and how it is set, read before build_folder closes its connection: when
    # the engine is done.
    seen: dict = {}
    compute = aggregates._compute

    def compute_then_look(*a, **k):
        result = compute(*a, **k)
        con = connections[-1]
        seen["held"] = con.execute(
            "SELECT tag, round(memory_usage_bytes / 2^20) AS mib, "
            "round(temporary_storage_bytes / 2^20) AS spilled_mib FROM duckdb_memory() "
            "WHERE memory_usage_bytes > 0 OR temporary_storage_bytes > 0 "
            "ORDER BY memory_usage_bytes DESC"
        ).fetchall()
        for name in ("threads", "memory_limit"):
            seen[name] = con.execute(f"SELECT current_setting('{name}')").fetchone()[0]
        return result

    aggregates._compute = compute_then_look
    catalogue = default_catalogue(None)
    t0 = time.perf_counter()
    built = aggregates.build_folder(data, catalogue, rebuild=True, log=lambda line: None)
    t2 = time.perf_counter()
    EVENTS.append(("= build_folder total (validate, engine, densify, state)", t2 - t0, _peak_mib()))
    held = seen["held"]
    built.save(aggregates.cache_path(built.meta["fingerprint"], catalogue))
    t3 = time.perf_counter()
    EVENTS.append(("save", t3 - t2, _peak_mib()))
    EVENTS.append(("= total after imports", t3 - t0, _peak_mib()))
    usage = resource.getrusage(resource.RUSAGE_SELF)

    print(f"data: {data}; DuckDB {seen['threads']} threads, memory_limit {seen['memory_limit']}")
    print(
        common.table(
            ["phase", "seconds", "peak RSS so far MiB"],
            [[label, f"{s:.2f}", f"{peak:,.0f}"] for label, s, peak in EVENTS],
        )
    )
    print(
        f"peak RSS {_peak_mib():,.0f} MiB; CPU user {usage.ru_utime:.1f} s + system {usage.ru_stime:.1f} s "
        f"over {time.perf_counter() - started:.1f} s wall"
    )
    print(
        "DuckDB memory still held after the engine (duckdb_memory()): "
        + (
            ", ".join(f"{tag} {mib:,.0f} MiB" + (f" (+{sp:,.0f} spilled)" if sp else "") for tag, mib, sp in held)
            or "none"
        )
    )

    return 0


if __name__ == "__main__":
    sys.exit(main())
