"""The metric engine: every catalogue entry turned into an Ibis expression over the event tables.

Ibis keeps the definitions portable: the same expressions run on the embedded DuckDB backend
and, later, on a distributed backend such as Spark. Each function below reads one event table and
returns, for one granularity, a sparse long table ``(project, period_start, metric, value)``: only
periods with events appear. Filling the gaps (zeros, carried balances) happens in ``aggregates``.

One pass per table and granularity computes all of that table's metrics: transactions are grouped
by (project, action, period) with one distinct count per measure the catalogue asks for, because
distinct counts over long address strings dominate the cost.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import ibis
import ibis.expr.types as ir
import pandas as pd

from .catalogue import FLOW_SIGNS, GRANULARITIES, Catalogue, Metric

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
    out = wide.melt(id_vars=["project", "period_start"], value_vars=list(names),
                    var_name="metric", value_name="value")
    out["metric"] = out["metric"].map(names)
    return out


def transactions(con, t: ir.Table, metrics: list[Metric], granularity: str) -> pd.DataFrame:
    # Every transaction metric picks one action; what varies is the measure: distinct signers or
    # distinct tx_ids, possibly restricted further (pool_type). One column per distinct measure.
    measures: dict[tuple, str] = {}
    for metric in metrics:
        actions = metric.select["action"]
        assert len(actions) == 1, f"{metric.name}: a distinct count cannot add up several actions"
        measures.setdefault(_measure_key(metric), f"m{len(measures)}")
    aggregations = {}
    for (aggregation, restriction), column in measures.items():
        target = t.signer if aggregation == "distinct_count" else t.tx_id
        aggregations[column] = target.nunique(where=_where(t, dict(restriction)))
    expr = t.group_by(project=t.project, action=t.action,
                      period_start=_period(t, granularity)).aggregate(**aggregations)
    wide = con.execute(expr)
    frames = []
    for metric in metrics:
        rows = wide[wide["action"] == metric.select["action"][0]]
        frames.append(rows[["project", "period_start"]].assign(
            metric=metric.name, value=rows[measures[_measure_key(metric)]]))
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
        per_key = rows.group_by(project=rows.project, period_start=_period(rows, granularity),
                                key=rows[key]).aggregate(net=rows[amount].sum())
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
    for granularity in GRANULARITIES:
        frames = []
        for source, metrics in by_source.items():
            t = con.table(source)
            if source == "transactions":
                frames.append(transactions(con, t, metrics, granularity))
                continue
            summed = [m for m in metrics if m.aggregation not in ("positive_net", "negative_net")]
            netted = [m for m in metrics if m not in summed]
            if summed:
                frames.append(sums(con, t, summed, granularity, _AMOUNT[source]))
            if netted:
                frames.append(nets(con, t, netted, granularity, _NET_KEY[source], _AMOUNT[source]))
        yield granularity, pd.concat(frames, ignore_index=True)
