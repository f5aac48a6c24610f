"""Every catalogue entry as Ibis expressions over the event tables: the rows it reads, what it adds
up, and its values per period.

The expressions are the one definition of each metric, on any Ibis backend: the build computes
them on an engine (``building/compute.py``; the transaction metrics by the exact passes of
``building/passes.py``, which select rows with :func:`where`), ``GET /explain`` lists the rows they
pick (``serving/explain.py``), and ``definitions`` writes each metric as one standalone SQL query
from them. Nothing here runs a query.
"""

from __future__ import annotations

from collections.abc import Mapping

import ibis
import ibis.expr.datatypes as datatypes
import ibis.expr.types as ir

from metrics_kit.spec.calendar import GRANULARITIES
from metrics_kit.spec.catalogue import FLOW_SIGNS, Metric

_TRUNCATE = {"1_day": "D", "1_week": "W", "1_month": "M"}  # ISO weeks start on Monday
# The column whose per-value nets a positive_net / negative_net metric splits by sign.
NET_KEY = {"chain_rewards": "account"}
# The column a metric of each table adds up.
AMOUNT = {"fees": "amount_usd", "token_flows": "amount", "chain_rewards": "amount"}


def where(
    t: ir.Table, select: Mapping[str, tuple[str, ...]] | tuple[tuple[str, tuple[str, ...]], ...]
) -> ir.BooleanValue | None:
    """The rows whose columns hold one of the selected values (None: no selection, every row)."""
    predicate = None
    for column, values in dict(select).items():
        term = t[column].isin(list(values))
        predicate = term if predicate is None else predicate & term
    return predicate


def _signed_amount(t: ir.Table) -> ir.NumericValue:
    cases = [(t.flow == flow, sign) for flow, sign in FLOW_SIGNS.items()]
    return ibis.cases(*cases, else_=0) * t.amount


def amount_of(t: ir.Table, metric: Metric) -> ir.NumericValue:
    """What a summing metric adds up over its rows: the signed flows (net_sum, ending_balance: the
    flows of one period, which an ending balance carries forward), else the table's amount."""
    if metric.aggregation in ("net_sum", "ending_balance"):
        return _signed_amount(t)
    return t[AMOUNT[metric.source]]


def kept_net(net: ir.NumericValue, metric: Metric) -> ir.BooleanValue:
    """Whether a per-key net counts towards a positive_net (above zero) or negative_net (below) metric."""
    return net > 0 if metric.aggregation == "positive_net" else net < 0


def each_granularity(t: ir.Table) -> tuple[ir.Table, ir.DateValue]:
    """Every row once per granularity (a ``granularity`` column), and the start of its period in
    it: one grouping then computes the three granularities. Three groupings stacked with a UNION
    ALL give the same rows, but Ibis takes longer to compile them than DuckDB to run them."""
    t = t.mutate(granularity=ibis.array(list(GRANULARITIES)).unnest())
    period = ibis.cases(
        *((t.granularity == g, t.block_time.truncate(unit)) for g, unit in _TRUNCATE.items() if g != "1_month"),
        else_=t.block_time.truncate(_TRUNCATE["1_month"]),
    )
    return t, period.date()


def sums(t: ir.Table, metrics: list[Metric]) -> ir.Table:
    """Metrics that add up an amount over selected rows (or the signed flows, for net_sum), a column
    each, per granularity. A sum over no selected rows is missing, not 0."""
    t, period = each_granularity(t)
    aggregations = {}
    for metric in metrics:
        aggregations[metric.name] = amount_of(t, metric).sum(where=where(t, metric.select)).cast(datatypes.float64)
    return t.group_by(granularity=t.granularity, project=t.project, period_start=period).aggregate(**aggregations)


def nets(t: ir.Table, metrics: list[Metric], key: str, amount: str) -> ir.Table:
    """Per-key nets inside each period, summed by sign (rent paid against rent received), a column
    per metric, per granularity. The metrics share one selection, so the nets are grouped once."""
    (select,) = {tuple(sorted(m.select.items())) for m in metrics}
    rows, period = each_granularity(t.filter(where(t, dict(select))) if select else t)
    per_key = rows.group_by(
        granularity=rows.granularity, project=rows.project, period_start=period, **{key: rows[key]}
    ).aggregate(net=rows[amount].sum())
    net = per_key.net
    wanted = {m.name: kept_net(net, m) for m in metrics}
    return per_key.group_by("granularity", "project", "period_start").aggregate(
        **{name: ibis.ifelse(keep, net, 0.0).sum().cast(datatypes.float64) for name, keep in wanted.items()}
    )
