"""Alternatives for the dominant build cost: the distinct counts of the transactions table.

    python benchmarks/engine_alternatives.py --scale 100            # every variant, one child each

Every variant computes the transaction metrics of the catalogue for the three granularities --
per (project, action, period) the distinct measures the catalogue asks for (distinct signers,
distinct tx_ids, distinct tx_ids of regular pools) -- over the validated views of ``store.load``,
and prints a checksum of the resulting (granularity, project, period, metric, value) rows, so
that every variant can be compared with the engine.
Each variant runs in its own child process, so its wall time, CPU time and peak RSS are its own
(``store.load`` included in all of them). Nothing in ``metrics_kit`` is changed.

Variants:

* ``engine``        ``engine.compute`` as it is now (it also computes the other tables' metrics,
                    about 2-3 s at 10M; only the transaction metrics are compared).
* ``grouped_distinct`` the engine's first formulation (up to commit 598245a): per granularity one
                    Ibis query with grouped ``count(DISTINCT ...)`` over the normalising views.
* ``repeated_engine`` / ``repeated_two_step``: only the engine's "repeated transactions" temp
                    table (rows whose (project, action, hash(tx_id)) occurs more than once), as
                    the engine builds it (one query whose events CTE feeds both the grouping and
                    the semi join) and in two steps (the repeated keys first, a small table, then
                    a second scan semi-joined to it). Their checksum is of that table. (Up to
                    commit 9c0fb6d the two tables were identical; since ebd67d7 the engine itself
                    builds it in two steps, grouped by the hash alone, which may keep more rows --
                    harmless by design, see ``engine.repeated_transactions``.)
* ``engine_two_step`` ``engine.compute`` with ``engine.repeated_transactions`` replaced, in this
                    child only, by the two-step form above: the whole engine with that one change.
* ``materialise``   the normalised columns copied once into a DuckDB temp table, then the same
                    three queries on it (removes the repeated Parquet scans and normalisation).
* ``hash128``       materialise ``md5_number(signer)`` / ``md5_number(tx_id)`` (128-bit) instead
                    of the strings, distinct counts over those. Exact unless two of the values
                    collide in 128 bits (probability ~n^2 / 2^129, i.e. ~1e-25 at 10M).
* ``encode``        exact integer codes: each distinct string numbered once (DISTINCT + join),
                    distinct counts over the codes.
* ``grouping_sets`` one query over the temp table of ``hash128`` for all three granularities.
* ``dedup_once``    exact, strings kept: one pass numbers nothing but groups the rows by
                    (project, action, tx_id) once -- first and last day, and whether any row
                    matches each restriction -- so a transaction on one day (all but a handful) is
                    counted with count(*) at every granularity; the few spanning days are counted
                    with count(DISTINCT) over their own rows. Signers are deduplicated per day once,
                    and the week and month distinct counts run over that smaller set.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import re
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

VARIANTS = (
    "engine",
    "engine_two_step",
    "grouped_distinct",
    "materialise",
    "hash128",
    "encode",
    "grouping_sets",
    "dedup_once",
    "repeated_engine",
    "repeated_two_step",
)
_TRUNC = {"1_day": "day", "1_week": "week", "1_month": "month"}


def _repeated_two_step(backend, events):
    """The engine's repeated-transactions table in two steps: the repeated keys (a small table)
    first, then the events semi-joined to them, so no 10M-row intermediate is kept for the join."""
    hashed = events.mutate(tx_hash=events.tx_id.hash())
    keys = ["project", "action", "tx_hash"]
    counted = hashed.group_by(keys).aggregate(n=hashed.count())
    repeated_keys = backend.create_table(
        f"rep_keys_{uuid.uuid4().hex}", counted.filter(counted.n > 1).drop("n"), temp=True
    )
    return hashed.semi_join(repeated_keys, keys)


def _measure_parts(catalogue) -> list[tuple[str, str, str | None]]:
    """(column name, "s" or "t", restriction predicate or None) for each distinct measure."""
    from metrics_kit.server import engine

    out: dict[tuple, str] = {}
    for metric in catalogue:
        if metric.source == "transactions":
            out.setdefault(engine._measure_key(metric), f"m{len(out)}")
    parts = []
    for (aggregation, restriction), name in out.items():
        where = " AND ".join(f"{col} IN ({', '.join(repr(v) for v in vals)})" for col, vals in restriction)
        parts.append((name, "s" if aggregation == "distinct_count" else "t", where or None))
    return parts


def _dedup_once(con, catalogue) -> list:
    from metrics_kit.spec.calendar import GRANULARITIES

    parts = _measure_parts(catalogue)
    flags = {name: where for name, _, where in parts if where}
    flag_cols = "".join(f", ({where}) AS f_{name}" for name, where in flags.items())
    con.execute("SET preserve_insertion_order = false")
    con.execute(
        f"CREATE TEMP TABLE tx AS SELECT project, action, CAST(block_time AS DATE) AS day, "
        f"signer AS s, tx_id AS t{flag_cols} FROM transactions"
    )
    s_flags = [f"f_{n}" for n, kind, w in parts if kind == "s" and w]
    t_parts = [(n, w) for n, kind, w in parts if kind == "t"]
    con.execute(
        f"CREATE TEMP TABLE sd AS SELECT DISTINCT project, action, day, s{''.join(', ' + f for f in s_flags)} FROM tx"
    )
    t_aggs = "".join(f", bool_or(f_{n}) AS f_{n}" for n, w in t_parts if w)
    con.execute(
        f"CREATE TEMP TABLE td AS SELECT project, action, t, min(day) AS d0, max(day) AS d1{t_aggs} "
        f"FROM tx GROUP BY project, action, t"
    )
    con.execute(
        "CREATE TEMP TABLE multi AS SELECT tx.* FROM tx SEMI JOIN "
        "(SELECT project, action, t FROM td WHERE d0 <> d1) m USING (project, action, t)"
    )
    frames = []
    for g in GRANULARITIES:
        trunc = f"CAST(date_trunc('{_TRUNC[g]}', day) AS DATE)"
        s_aggs = ", ".join(
            f"count({'*' if g == '1_day' else 'DISTINCT s'}){f' FILTER (WHERE f_{n})' if w else ''} AS {n}"
            for n, kind, w in parts
            if kind == "s"
        )
        signers = con.execute(f"SELECT project, action, {trunc} AS period_start, {s_aggs} FROM sd GROUP BY ALL").df()
        single_aggs = ", ".join(f"count(*){f' FILTER (WHERE f_{n})' if w else ''} AS {n}" for n, w in t_parts)
        multi_aggs = ", ".join(f"count(DISTINCT t){f' FILTER (WHERE f_{n})' if w else ''} AS {n}" for n, w in t_parts)
        txs = con.execute(
            f"SELECT project, action, period_start, {', '.join(f'sum({n})::BIGINT AS {n}' for n, _ in t_parts)} "
            f"FROM (SELECT project, action, CAST(date_trunc('{_TRUNC[g]}', d0) AS DATE) AS period_start, "
            f"{single_aggs} FROM td WHERE d0 = d1 GROUP BY ALL "
            f"UNION ALL SELECT project, action, {trunc} AS period_start, {multi_aggs} FROM multi GROUP BY ALL) "
            f"GROUP BY ALL"
        ).df()
        wide = signers.merge(txs, on=["project", "action", "period_start"], how="outer")
        frames.append(wide.fillna(0).astype({n: "int64" for n, _, _ in parts}).assign(granularity=g))
    return frames


def _measures(catalogue) -> list[tuple[str, str]]:
    """(column name, SQL over columns s / t / pool_type) for each distinct measure of the engine."""
    from metrics_kit.server import engine

    out: dict[tuple, str] = {}
    for metric in catalogue:
        if metric.source == "transactions":
            out.setdefault(engine._measure_key(metric), f"m{len(out)}")
    sql = []
    for (aggregation, restriction), name in out.items():
        target = "s" if aggregation == "distinct_count" else "t"
        where = " AND ".join(f"{col} IN ({', '.join(repr(v) for v in vals)})" for col, vals in restriction)
        sql.append((name, f"count(DISTINCT {target})" + (f" FILTER (WHERE {where})" if where else "")))
    return sql


def _long(frames, catalogue):
    """Wide (granularity, project, action, period_start, m0..) -> (granularity, project, period_start,
    metric, value) rows for the catalogue's transaction metrics, as the engine returns them."""
    import pandas as pd

    from metrics_kit.server import engine

    wide = pd.concat(frames, ignore_index=True)
    columns: dict[tuple, str] = {}
    out = []
    for metric in catalogue:
        if metric.source != "transactions":
            continue
        column = columns.setdefault(engine._measure_key(metric), f"m{len(columns)}")
        rows = wide[wide["action"] == metric.select["action"][0]]
        out.append(rows[["granularity", "project", "period_start"]].assign(metric=metric.name, value=rows[column]))
    return pd.concat(out, ignore_index=True)


def _checksum(long) -> str:
    import pandas as pd

    frame = long.copy()
    frame["period_start"] = pd.to_datetime(frame["period_start"]).dt.strftime("%Y-%m-%d")
    frame["value"] = frame["value"].astype("int64")
    frame = frame.sort_values(["granularity", "project", "metric", "period_start"]).reset_index(drop=True)
    text = frame[["granularity", "project", "metric", "period_start", "value"]].to_csv(index=False)
    return f"{len(frame)} rows, sha256 {hashlib.sha256(text.encode()).hexdigest()[:16]}"


def run_variant(variant: str, data: Path, threads: int | None) -> None:
    from metrics_kit.server.data import store
    from metrics_kit.spec.calendar import GRANULARITIES
    from metrics_kit.spec.catalogue import default_catalogue

    catalogue = default_catalogue(None)
    started = time.perf_counter()
    con = store.connect(threads=threads)
    store.load(data, con)
    loaded = time.perf_counter()
    measures = _measures(catalogue)
    aggs = ", ".join(f"{sql} AS {name}" for name, sql in measures)
    frames = []
    long = None
    if variant in ("engine", "engine_two_step"):
        import ibis
        import pandas as pd

        from metrics_kit.server import engine

        backend = ibis.duckdb.from_connection(con)
        if variant == "engine_two_step":
            engine.repeated_transactions = functools.partial(_repeated_two_step, backend)
        names = {m.name for m in catalogue if m.source == "transactions"}
        parts = []
        for g, sparse in engine.compute(backend, catalogue):
            parts.append(sparse[sparse["metric"].isin(names)].assign(granularity=g))
        long = pd.concat(parts, ignore_index=True).dropna(subset=["value"])
    elif variant.startswith("repeated"):
        import ibis

        from metrics_kit.server import engine

        backend = ibis.duckdb.from_connection(con)
        events = backend.table("transactions")
        if variant == "repeated_engine":
            table = backend.create_table("rep", engine.repeated_transactions(events), temp=True)
        else:
            hashed = events.mutate(tx_hash=events.tx_id.hash())
            keys = ["project", "action", "tx_hash"]
            counted = hashed.group_by(keys).aggregate(n=hashed.count())
            repeated_keys = backend.create_table("rep_keys", counted.filter(counted.n > 1).drop("n"), temp=True)
            table = backend.create_table("rep", hashed.semi_join(repeated_keys, keys), temp=True)
        done = time.perf_counter()
        rows = con.execute(f"SELECT project, action, tx_id, block_time FROM {table.get_name()} ORDER BY ALL").fetchall()
        print(f"load {loaded - started:.2f} s, distinct counts {done - loaded:.2f} s", flush=True)
        digest = hashlib.sha256(repr(rows).encode()).hexdigest()[:16]
        print(f"RESULT {len(rows)} rows, sha256 {digest}", flush=True)
        return
    elif variant == "grouped_distinct":
        import ibis

        from metrics_kit.server import engine

        backend = ibis.duckdb.from_connection(con)
        t = backend.table("transactions")
        metrics = [m for m in catalogue if m.source == "transactions"]
        cols = {}
        for metric in metrics:
            cols.setdefault(engine._measure_key(metric), f"m{len(cols)}")
        for g in GRANULARITIES:
            ibis_aggs = {}
            for (aggregation, restriction), column in cols.items():
                target = t.signer if aggregation == "distinct_count" else t.tx_id
                ibis_aggs[column] = target.nunique(where=engine._where(t, dict(restriction)))
            expr = t.group_by(project=t.project, action=t.action, period_start=engine._period(t, g)).aggregate(
                **ibis_aggs
            )
            frames.append(backend.execute(expr).assign(granularity=g))
    elif variant == "dedup_once":
        frames = _dedup_once(con, catalogue)
    else:
        if variant == "materialise":
            con.execute(
                "CREATE TEMP TABLE tx AS SELECT project, action, CAST(block_time AS DATE) AS day, "
                "pool_type, signer AS s, tx_id AS t FROM transactions"
            )
        elif variant in ("hash128", "grouping_sets"):
            con.execute(
                "CREATE TEMP TABLE tx AS SELECT project, action, CAST(block_time AS DATE) AS day, "
                "pool_type, md5_number(signer) AS s, md5_number(tx_id) AS t FROM transactions"
            )
        elif variant == "encode":
            con.execute(
                "CREATE TEMP TABLE raw AS SELECT project, action, CAST(block_time AS DATE) AS day, "
                "pool_type, signer, tx_id FROM transactions"
            )
            con.execute(
                "CREATE TEMP TABLE sig AS SELECT signer, CAST(row_number() OVER () AS UINTEGER) AS s "
                "FROM (SELECT DISTINCT signer FROM raw)"
            )
            con.execute(
                "CREATE TEMP TABLE txn AS SELECT tx_id, CAST(row_number() OVER () AS UINTEGER) AS t "
                "FROM (SELECT DISTINCT tx_id FROM raw)"
            )
            con.execute(
                "CREATE TEMP TABLE tx AS SELECT project, action, day, pool_type, s, t "
                "FROM raw JOIN sig USING (signer) JOIN txn USING (tx_id)"
            )
            con.execute("DROP TABLE raw; DROP TABLE sig; DROP TABLE txn")
        prepared = time.perf_counter()
        print(f"prepare {prepared - loaded:.2f} s", flush=True)
        if variant == "grouping_sets":
            sql = (
                f"SELECT project, action, grouping(w) AS gw, grouping(m) AS gm, "
                f"coalesce(day, w, m) AS period_start, {aggs} FROM "
                f"(SELECT *, date_trunc('week', day) AS w, date_trunc('month', day) AS m FROM tx) "
                f"GROUP BY GROUPING SETS ((project, action, day), (project, action, w), "
                f"(project, action, m))"
            )
            wide = con.execute(sql).df()
            # day rows have w and m ungrouped (1, 1); week rows group w (0, 1); month rows (1, 0)
            names = {(1, 1): "1_day", (0, 1): "1_week", (1, 0): "1_month"}
            wide["granularity"] = [names[(a, b)] for a, b in zip(wide["gw"], wide["gm"], strict=True)]
            frames.append(wide.drop(columns=["gw", "gm"]))
        else:
            for g in GRANULARITIES:
                sql = (
                    f"SELECT project, action, CAST(date_trunc('{_TRUNC[g]}', day) AS DATE) AS period_start, "
                    f"{aggs} FROM tx GROUP BY ALL"
                )
                frames.append(con.execute(sql).df().assign(granularity=g))
    done = time.perf_counter()
    print(f"load {loaded - started:.2f} s, distinct counts {done - loaded:.2f} s", flush=True)
    print(f"RESULT {_checksum(long if long is not None else _long(frames, catalogue))}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=100.0)
    parser.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    parser.add_argument(
        "--variants",
        nargs="+",
        choices=VARIANTS,
        default=["engine", "engine_two_step", "grouped_distinct", "dedup_once", "repeated_engine", "repeated_two_step"],
    )
    parser.add_argument("--threads", type=int, help="DuckDB threads (default: one per core)")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    data = common.data_dir(args.work, args.scale)
    if args.child:
        run_variant(args.child, data, args.threads)
        return 0
    if not common.data_complete(data, args.scale):
        raise SystemExit(f"{data} is not a finished demo data set; run benchmarks/build.py first")
    common.print_machine(common.machine())
    cache = tempfile.mkdtemp(prefix="mk-alt-", dir=args.work)
    rows, reference, reference_rep = [], None, None
    for variant in args.variants:
        cmd = [sys.executable, __file__, "--scale", str(args.scale), "--work", str(args.work), "--child", variant]
        if args.threads:
            cmd += ["--threads", str(args.threads)]
        load = os.getloadavg()[0]
        run = common.run_child(cmd, common.child_env(cache), args.timeout)
        if run.returncode != 0:
            print(f"{variant}: failed ({run.returncode})\n{run.output}", flush=True)
            continue
        found = dict(re.findall(r"^(load|prepare|RESULT) (.*)$", run.output, re.M))
        times = re.search(r"distinct counts ([0-9.]+) s", run.output)
        result = found.get("RESULT", "?")
        if variant.startswith("repeated"):
            reference_rep = reference_rep or result
            same = (
                "reference"
                if result == reference_rep and variant == "repeated_engine"
                else (
                    "yes (same table)"
                    if result == reference_rep
                    else "differs: since ebd67d7 the engine groups by the hash alone and may keep a superset"
                )
            )
        else:
            reference = reference or (result if variant == "engine" else None)
            same = (
                "reference" if variant == "engine" else ("yes" if result == reference else "NO" if reference else "?")
            )
        rows.append(
            [
                variant,
                f"{run.seconds:.1f}",
                found.get("load", "?").split(",")[0].removesuffix(" s"),
                times.group(1) if times else "?",
                f"{run.cpu_seconds:.1f}",
                f"{run.peak_rss_mib:,.0f}",
                f"{load:.1f}",
                result,
                same,
            ]
        )
        print(
            f"{variant}: {run.seconds:.1f} s, peak RSS {run.peak_rss_mib:,.0f} MiB | "
            + " | ".join(run.output.strip().splitlines()),
            flush=True,
        )
    print()
    print(
        common.table(
            [
                "variant",
                "wall s",
                "store.load s",
                "prepare + distinct counts s (3 granularities)",
                "CPU s",
                "peak RSS MiB",
                "load avg",
                "result",
                "same as engine",
            ],
            rows,
            "lrrrrrrll",
        )
    )
    import shutil

    shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
