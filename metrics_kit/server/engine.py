"""The metric engine: every catalogue entry turned into an Ibis expression over the event tables.

Ibis keeps the definitions portable: the same expressions run on the embedded DuckDB backend and
on Spark (Ibis's PySpark backend), with the same results. The one thing chosen per backend is the
64-bit hash (:func:`hasher`); intermediate tables are materialised with ``Table.cache()``, which
every backend supports, and released after the build. Each function below reads one event table and
returns, for one granularity, a sparse long table ``(project, period_start, metric, value)``: only
periods with events appear. Filling the gaps (zeros, carried balances) happens in ``aggregates``.

One pass per table and granularity computes all of that table's metrics. Distinct counts over long
address strings dominate the cost, so transactions avoid grouped distinct counts altogether (see
``transactions``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import ibis
import ibis.expr.types as ir
import pandas as pd

from metrics_kit.spec.calendar import GRANULARITIES
from metrics_kit.spec.catalogue import FLOW_SIGNS, Catalogue, Metric

_TRUNCATE = {"1_day": "D", "1_week": "W", "1_month": "M"}  # ISO weeks start on Monday
# The column whose per-value nets a positive_net / negative_net metric splits by sign.
_NET_KEY = {"chain_rewards": "account"}


def _period(t: ir.Table, granularity: str) -> ir.DateValue:
    return t.block_time.truncate(_TRUNCATE[granularity]).date()


def _where(t: ir.Table, select: Mapping[str, tuple[str, ...]]) -> ir.BooleanValue | None:
    predicate = None
    for column, values in select.items():
        term = t[column].isin(list(values))
        predicate = term if predicate is None else predicate & term
    return predicate


def _signed_amount(t: ir.Table) -> ir.NumericValue:
    cases = [(t.flow == flow, sign) for flow, sign in FLOW_SIGNS.items()]
    return ibis.cases(*cases, else_=0) * t.amount


def _long(wide: pd.DataFrame, names: Mapping[str, str]) -> pd.DataFrame:
    """Wide (project, period_start, measure columns) -> long rows for the named metrics."""
    if not names:
        return pd.DataFrame(columns=["project", "period_start", "metric", "value"])
    out = wide.melt(id_vars=["project", "period_start"], value_vars=list(names), var_name="metric", value_name="value")
    out["metric"] = out["metric"].map(names)
    return out


Hash64 = Callable[[ir.StringValue], ir.Value]


@ibis.udf.scalar.builtin(name="xxhash64")
def _xxhash64(value: str) -> int:  # type: ignore[empty-body]
    """Spark's 64-bit xxHash: Ibis compiles ``hash()`` to Spark's 32-bit ``HASH``, which collides
    on a million signers and would make every build take the slow path."""


# Backends whose 64-bit hash is known. DuckDB's hash() is 64-bit and what Ibis compiles hash() to.
_HASH64: dict[str, Hash64] = {"duckdb": lambda value: value.hash(), "pyspark": _xxhash64}


def hasher(con: ibis.BaseBackend) -> Hash64:
    """The backend's 64-bit string hash; on a backend without a known one, the string itself, which
    gives the same results (hashing only makes grouping cheaper)."""
    return _HASH64.get(con.name, lambda value: value)


def repeated_transactions(t: ir.Table, hash64: Hash64) -> ir.Table:
    """A superset of the rows whose (project, action, tx_id) occurs more than once.

    Grouping 10 million long tx_id strings is slow; grouping their 64-bit hashes is not. The rows
    whose hash repeats within (project, action) include every truly repeated tx_id, all of its rows,
    plus, rarely, distinct tx_ids whose hashes collide. Those extra rows are harmless: each adds
    one row and one distinct tx_id to the correction below, so they cancel out exactly.
    """
    # Grouping by the hash alone (not with project and action) keeps the grouping small; the rows
    # taken are still every row of each repeated (project, action, tx_id), which is all it needs.
    # The two sides are separate expressions on purpose: one shared expression becomes a CTE that
    # DuckDB materialises whole, every column of every event (3 GB at 10M rows).
    hashes = t.select(tx_hash=hash64(t.tx_id))
    repeated = hashes.group_by("tx_hash").aggregate(n=hashes.count()).filter(lambda r: r.n > 1).drop("n")
    return t.mutate(tx_hash=hash64(t.tx_id)).semi_join(repeated, "tx_hash")


def _measures(metrics: list[Metric]) -> dict[tuple, str]:
    """One column per distinct (aggregation, restriction) among transaction metrics."""
    measures: dict[tuple, str] = {}
    for metric in metrics:
        actions = metric.select["action"]
        assert len(actions) == 1, f"{metric.name}: a distinct count cannot add up several actions"
        measures.setdefault(_measure_key(metric), f"m{len(measures)}")
    return measures


def signer_key(con, t: ir.Table, hash64: Hash64) -> ir.Value:
    """What identifies a signer when grouping: its 64-bit hash where that is one-to-one on this data
    set's signers (checked, not assumed), else the address itself. Grouping by an integer instead
    of a 44-character string halves the memory of the largest grouping of the build."""
    signers = t.select("signer").distinct()
    counts = con.execute(signers.aggregate(n=signers.count(), hashes=hash64(signers.signer).nunique()))
    if int(counts["n"].iloc[0]) == int(counts["hashes"].iloc[0]):
        return hash64(t.signer)
    return t.signer


def signer_days(t: ir.Table, measures: dict[tuple, str], signer: ir.Value) -> ir.Table:
    """One row per (project, action, day, signer): its rows per count measure, and whether it
    acted under each restricted distinct-count measure. Weeks and months are built from this
    table instead of the events, so the events are grouped by signer only once."""
    aggregations = {}
    for (aggregation, restriction), column in measures.items():
        where = _where(t, dict(restriction))
        if aggregation == "count":
            aggregations[column] = t.count(where=where)
        elif where is not None:
            aggregations[column] = where.any()
    return t.group_by(project=t.project, action=t.action, day=_period(t, "1_day"), signer=signer).aggregate(
        **aggregations, n=t.count()
    )


def transactions(
    con, days: ir.Table, repeated: ir.Table, measures: dict[tuple, str], metrics: list[Metric], granularity: str
) -> pd.DataFrame:
    """Active users and transaction counts for one granularity, exactly.

    Grouped distinct counts over long strings are slow, so neither measure uses one. Active users
    are a count of (project, action, period, signer) rows. Transaction counts add up rows, then
    subtract, per group, what repeated tx_ids add beyond one each, computed on that small set.
    """
    if granularity == "1_day":
        per_signer = days.rename(period_start="day")
    else:
        sums_or_flags = {
            column: days[column].sum() if aggregation == "count" else days[column].any()
            for (aggregation, _), column in measures.items()
            if column in days.columns
        }
        per_signer = days.group_by(
            project=days.project,
            action=days.action,
            period_start=days.day.truncate(_TRUNCATE[granularity]),
            signer=days.signer,
        ).aggregate(**sums_or_flags)
    totals = {}
    for (aggregation, _), column in measures.items():
        if aggregation == "count":
            totals[column] = per_signer[column].sum()
        elif column in days.columns:
            totals[column] = per_signer.count(where=per_signer[column])
        else:
            totals[column] = per_signer.count()
    wide = con.execute(per_signer.group_by("project", "action", "period_start").aggregate(**totals))

    corrections = {}
    for (aggregation, restriction), column in measures.items():
        if aggregation == "count":
            where = _where(repeated, dict(restriction))
            corrections[column] = repeated.count(where=where) - repeated.tx_id.nunique(where=where)
    if corrections:
        extra = con.execute(
            repeated.group_by(
                project=repeated.project, action=repeated.action, period_start=_period(repeated, granularity)
            ).aggregate(**corrections)
        )
        wide = wide.merge(extra, on=["project", "action", "period_start"], how="left", suffixes=("", "_extra"))
        for column in corrections:
            wide[column] = wide[column] - wide[f"{column}_extra"].fillna(0).astype("int64")

    frames = []
    for metric in metrics:
        rows = wide[wide["action"] == metric.select["action"][0]]
        frames.append(
            rows[["project", "period_start"]].assign(metric=metric.name, value=rows[measures[_measure_key(metric)]])
        )
    return pd.concat(frames, ignore_index=True)


def _measure_key(metric: Metric) -> tuple:
    restriction = tuple(sorted((k, v) for k, v in metric.select.items() if k != "action"))
    return metric.aggregation, restriction


def sums(con, t: ir.Table, metrics: list[Metric], granularity: str, amount: str) -> pd.DataFrame:
    """Metrics that add up an amount over selected rows (or the signed flows, for net_sum)."""
    aggregations = {}
    for i, metric in enumerate(metrics):
        if metric.aggregation in ("net_sum", "ending_balance"):
            value = _signed_amount(t)
        else:
            value = t[amount]
        aggregations[f"m{i}"] = value.sum(where=_where(t, metric.select))
    expr = t.group_by(project=t.project, period_start=_period(t, granularity)).aggregate(**aggregations)
    return _long(con.execute(expr), {f"m{i}": m.name for i, m in enumerate(metrics)})


def nets(con, t: ir.Table, metrics: list[Metric], granularity: str, key: str, amount: str) -> pd.DataFrame:
    """Per-key nets inside each period, summed by sign (rent paid against rent received)."""
    frames = []
    for metric in metrics:
        rows = t.filter(_where(t, metric.select)) if metric.select else t
        per_key = rows.group_by(project=rows.project, period_start=_period(rows, granularity), key=rows[key]).aggregate(
            net=rows[amount].sum()
        )
        wanted = per_key.net > 0 if metric.aggregation == "positive_net" else per_key.net < 0
        expr = per_key.group_by("project", "period_start").aggregate(m0=per_key.net.sum(where=wanted))
        frames.append(_long(con.execute(expr), {"m0": metric.name}))
    return pd.concat(frames, ignore_index=True)


_AMOUNT = {"fees": "amount_usd", "token_flows": "amount", "chain_rewards": "amount"}


def compute(con: ibis.BaseBackend, catalogue: Catalogue) -> Iterator[tuple[str, pd.DataFrame]]:
    """Yield (granularity, sparse long frame) for every metric of the catalogue."""
    by_source: dict[str, list[Metric]] = {}
    for metric in catalogue:
        by_source.setdefault(metric.source, []).append(metric)
    # Built once, materialised (cache(): a temporary table on DuckDB, a persisted DataFrame on
    # Spark), reused by every granularity and released at the end, even when the caller stops early.
    events = con.table("transactions")
    measures = _measures(by_source.get("transactions", []))
    hash64 = hasher(con)
    repeated = repeated_transactions(events, hash64).cache()
    with repeated, signer_days(events, measures, signer_key(con, events, hash64)).cache() as days:
        yield from _granularities(con, by_source, days, repeated, measures)


def _granularities(con, by_source, days, repeated, measures) -> Iterator[tuple[str, pd.DataFrame]]:
    for granularity in GRANULARITIES:
        frames = []
        for source, metrics in by_source.items():
            t = con.table(source)
            if source == "transactions":
                frames.append(transactions(con, days, repeated, measures, metrics, granularity))
                continue
            summed = [m for m in metrics if m.aggregation not in ("positive_net", "negative_net")]
            netted = [m for m in metrics if m not in summed]
            if summed:
                frames.append(sums(con, t, summed, granularity, _AMOUNT[source]))
            if netted:
                frames.append(nets(con, t, netted, granularity, _NET_KEY[source], _AMOUNT[source]))
        yield granularity, pd.concat(frames, ignore_index=True)
