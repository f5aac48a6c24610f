"""The metric engine: every catalogue entry turned into an Ibis expression over the event tables.

Ibis keeps the definitions portable: the same expressions run on the embedded DuckDB backend and
on Spark (Ibis's PySpark backend), with the same results. The one thing chosen per backend is the
64-bit hash (:func:`hasher`); intermediate tables are materialised with ``Table.cache()``, which
every backend supports, and released after the build. Each function below reads one event table and
returns, for one granularity, a sparse long table ``(project, period_start, metric, value)``: only
periods with events appear. Filling the gaps (zeros, carried balances) happens in ``aggregates``.

One query per small table (and per netted metric) computes that table's metrics for the three
granularities at once, each granularity grouped from the rows (a UNION ALL); the transactions, by far
the largest table, are computed for all granularities at once by ``passes`` (its docstring says how
they stay exact and what each scan reads).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import ibis
import ibis.expr.types as ir
import pandas as pd

from metrics_kit.server.passes import Hash64, no_values, transaction_metrics
from metrics_kit.server.passes import where as _where
from metrics_kit.spec.calendar import GRANULARITIES
from metrics_kit.spec.catalogue import FLOW_SIGNS, Catalogue, Metric

_TRUNCATE = {"1_day": "D", "1_week": "W", "1_month": "M"}  # ISO weeks start on Monday
# The column whose per-value nets a positive_net / negative_net metric splits by sign.
_NET_KEY = {"chain_rewards": "account"}


def _period(t: ir.Table, granularity: str) -> ir.DateValue:
    return t.block_time.truncate(_TRUNCATE[granularity]).date()


def _signed_amount(t: ir.Table) -> ir.NumericValue:
    cases = [(t.flow == flow, sign) for flow, sign in FLOW_SIGNS.items()]
    return ibis.cases(*cases, else_=0) * t.amount


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


def _stacked(per_granularity: Callable[[str], ir.Table]) -> ir.Table:
    """The three granularities' tables in one query, each row tagged with its granularity: one
    round trip instead of three, and no adding up in pandas (a small table's query costs less than
    the Python around it)."""
    return ibis.union(*(per_granularity(g).mutate(granularity=ibis.literal(g)) for g in GRANULARITIES))


def _split(rows: pd.DataFrame, names: Mapping[str, str]) -> dict[str, pd.DataFrame]:
    """Stacked wide rows -> per granularity, long rows (project, period_start, metric, value)."""
    long = rows.melt(id_vars=["granularity", "project", "period_start"], value_vars=list(names), var_name="metric")
    long["metric"] = long["metric"].map(names)
    found = dict(tuple(long.groupby("granularity", sort=False)))
    return {g: found[g].drop(columns="granularity") if g in found else no_values() for g in GRANULARITIES}


def sums(con, t: ir.Table, metrics: list[Metric], amount: str) -> dict[str, pd.DataFrame]:
    """Metrics that add up an amount over selected rows (or the signed flows, for net_sum), per
    granularity, in one query. A sum over no selected rows is missing, not 0."""
    aggregations = {}
    for i, metric in enumerate(metrics):
        if metric.aggregation in ("net_sum", "ending_balance"):
            value = _signed_amount(t)
        else:
            value = t[amount]
        aggregations[f"m{i}"] = value.sum(where=_where(t, metric.select))
    rows = con.execute(
        _stacked(lambda g: t.group_by(project=t.project, period_start=_period(t, g)).aggregate(**aggregations))
    )
    return _split(rows, {f"m{i}": m.name for i, m in enumerate(metrics)})


def nets(con, t: ir.Table, metrics: list[Metric], key: str, amount: str) -> dict[str, pd.DataFrame]:
    """Per-key nets inside each period, summed by sign (rent paid against rent received), per
    granularity, in one query per metric."""
    out: dict[str, list[pd.DataFrame]] = {g: [] for g in GRANULARITIES}
    for metric in metrics:
        rows = t.filter(_where(t, metric.select)) if metric.select else t

        def per_granularity(g: str, rows: ir.Table = rows, metric: Metric = metric) -> ir.Table:
            per_key = rows.group_by(project=rows.project, period_start=_period(rows, g), key=rows[key]).aggregate(
                net=rows[amount].sum()
            )
            wanted = per_key.net > 0 if metric.aggregation == "positive_net" else per_key.net < 0
            return per_key.group_by("project", "period_start").aggregate(m0=ibis.ifelse(wanted, per_key.net, 0.0).sum())

        for g, frame in _split(con.execute(_stacked(per_granularity)), {"m0": metric.name}).items():
            out[g].append(frame)
    return {g: pd.concat(frames, ignore_index=True) for g, frames in out.items()}


_AMOUNT = {"fees": "amount_usd", "token_flows": "amount", "chain_rewards": "amount"}


def compute(
    con: ibis.BaseBackend, catalogue: Catalogue, transactions_per_day: pd.DataFrame | None = None
) -> Iterator[tuple[str, pd.DataFrame]]:
    """Yield (granularity, sparse long frame) for every metric of the catalogue.

    Reads: ``transactions`` in three queries, for all granularities at once (``passes``: signer
    read once, tx_id twice, whatever the data); fees, token_flows and chain_rewards once per kind of
    metric (sums; nets per netted metric), three times in that query (a full build reads them into
    memory first). ``transactions_per_day``: the transactions' rows counted per day by validation
    (``store.Validated.rows_per_day``), which spares one of the three queries."""
    by_source: dict[str, list[Metric]] = {}
    for metric in catalogue:
        by_source.setdefault(metric.source, []).append(metric)
    transactions = by_source.pop("transactions", [])
    per_granularity = (
        [transaction_metrics(con, con.table("transactions"), transactions, hasher(con), None, transactions_per_day)]
        if transactions
        else []
    )
    for source, metrics in by_source.items():
        t = con.table(source)
        summed = [m for m in metrics if m.aggregation not in ("positive_net", "negative_net")]
        netted = [m for m in metrics if m not in summed]
        if summed:
            per_granularity.append(sums(con, t, summed, _AMOUNT[source]))
        if netted:
            per_granularity.append(nets(con, t, netted, _NET_KEY[source], _AMOUNT[source]))
    for granularity in GRANULARITIES:
        yield granularity, pd.concat([frames[granularity] for frames in per_granularity], ignore_index=True)
