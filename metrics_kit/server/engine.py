"""The metric engine: every catalogue entry turned into an Ibis expression over the event tables.

Ibis keeps the definitions portable: the same expressions run on the embedded DuckDB backend and
on Spark (Ibis's PySpark backend), with the same results. The one thing chosen per backend is the
64-bit hash (:func:`hasher`); intermediate tables are materialised with ``Table.cache()``, which
every backend supports, and released after the build. Each function below reads one event table and
returns, for one granularity, a sparse long table ``(project, period_start, metric, value)``: only
periods with events appear. Filling the gaps (zeros, carried balances) happens in ``aggregates``.

One pass per table computes all of that table's metrics, at day level, and the weeks and months
are added up from the days (sums and per-key nets add up; distinct counts do not). The transactions, by far
the largest table, are computed for all granularities at once by ``passes`` (its docstring says how
they stay exact and what each scan reads).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import ibis
import ibis.expr.types as ir
import pandas as pd

from metrics_kit.server.passes import Hash64, period_of, transaction_metrics
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


def _long(wide: pd.DataFrame, names: Mapping[str, str]) -> pd.DataFrame:
    """Wide (project, period_start, measure columns) -> long rows for the named metrics."""
    if not names:
        return pd.DataFrame(columns=["project", "period_start", "metric", "value"])
    out = wide.melt(id_vars=["project", "period_start"], value_vars=list(names), var_name="metric", value_name="value")
    out["metric"] = out["metric"].map(names)
    return out


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


def sums(con, t: ir.Table, metrics: list[Metric], amount: str) -> dict[str, pd.DataFrame]:
    """Metrics that add up an amount over selected rows (or the signed flows, for net_sum), per
    granularity: one query for the days, whose sums add up to the weeks' and months'."""
    aggregations = {}
    for i, metric in enumerate(metrics):
        if metric.aggregation in ("net_sum", "ending_balance"):
            value = _signed_amount(t)
        else:
            value = t[amount]
        aggregations[f"m{i}"] = value.sum(where=_where(t, metric.select))
    days = con.execute(t.group_by(project=t.project, day=_period(t, "1_day")).aggregate(**aggregations))
    names = {f"m{i}": m.name for i, m in enumerate(metrics)}
    return {g: _long(_rolled(days, ["project"], list(names), g), names) for g in GRANULARITIES}


def nets(con, t: ir.Table, metrics: list[Metric], key: str, amount: str) -> dict[str, pd.DataFrame]:
    """Per-key nets inside each period, summed by sign (rent paid against rent received), per
    granularity: one query for the per-key nets of the days, which add up to the weeks' and months'."""
    out: dict[str, list[pd.DataFrame]] = {g: [] for g in GRANULARITIES}
    for metric in metrics:
        rows = t.filter(_where(t, metric.select)) if metric.select else t
        per_day = con.execute(
            rows.group_by(project=rows.project, day=_period(rows, "1_day"), key=rows[key]).aggregate(
                net=rows[amount].sum()
            )
        )
        for granularity in GRANULARITIES:
            per_key = _rolled(per_day, ["project", "key"], ["net"], granularity)
            wanted = per_key["net"] > 0 if metric.aggregation == "positive_net" else per_key["net"] < 0
            signed = per_key.assign(m0=per_key["net"].where(wanted, 0.0))
            totals = signed.groupby(["project", "period_start"], as_index=False)["m0"].sum()
            out[granularity].append(_long(totals, {"m0": metric.name}))
    return {g: pd.concat(frames, ignore_index=True) for g, frames in out.items()}


def _rolled(days: pd.DataFrame, keys: list[str], values: list[str], granularity: str) -> pd.DataFrame:
    """Day sums added up per (keys, period of ``granularity``); a sum of no rows stays missing."""
    days = days.assign(period_start=period_of(pd.to_datetime(days["day"]), granularity))
    return days.groupby([*keys, "period_start"], as_index=False)[values].sum(min_count=1)


_AMOUNT = {"fees": "amount_usd", "token_flows": "amount", "chain_rewards": "amount"}


def compute(con: ibis.BaseBackend, catalogue: Catalogue) -> Iterator[tuple[str, pd.DataFrame]]:
    """Yield (granularity, sparse long frame) for every metric of the catalogue.

    Reads: ``transactions`` in three queries, for all granularities at once (``passes``: signer
    read once, tx_id twice, whatever the data); fees, token_flows and chain_rewards once per kind of
    metric (sums; nets per netted metric), at day level, added up into weeks and months here."""
    by_source: dict[str, list[Metric]] = {}
    for metric in catalogue:
        by_source.setdefault(metric.source, []).append(metric)
    transactions = by_source.pop("transactions", [])
    per_granularity = (
        [transaction_metrics(con, con.table("transactions"), transactions, hasher(con))] if transactions else []
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
