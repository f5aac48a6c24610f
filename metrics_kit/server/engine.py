"""The metric engine: every catalogue entry turned into an Ibis expression over the event tables.

Ibis keeps the definitions portable: the same expressions run on the embedded DuckDB backend and
on Spark (Ibis's PySpark backend), with the same results. What differs between them (the 64-bit
hash, how the one intermediate table read twice is kept) is in ``backends``. The engine returns,
per granularity, a sparse long table ``(project, period_start, metric, value)``: only periods with
events appear. Filling the gaps (zeros, carried balances) happens in ``aggregates``.

One query computes every metric of the small tables (fees, token_flows, chain_rewards) for the three
granularities: a part per table and kind of metric, each grouping every row once per granularity,
all stacked with a UNION ALL. The transactions, by far the largest table, are computed for all
granularities at once by ``passes`` (its docstring says how they stay exact and what each scan reads).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import ibis
import ibis.expr.datatypes as dt
import ibis.expr.types as ir
import pandas as pd

from metrics_kit.server.backends import Backend
from metrics_kit.server.passes import no_values, transaction_metrics
from metrics_kit.server.passes import where as _where
from metrics_kit.spec.calendar import GRANULARITIES
from metrics_kit.spec.catalogue import FLOW_SIGNS, Catalogue, Metric

_TRUNCATE = {"1_day": "D", "1_week": "W", "1_month": "M"}  # ISO weeks start on Monday
# The column whose per-value nets a positive_net / negative_net metric splits by sign.
NET_KEY = {"chain_rewards": "account"}
# The column a metric of each table adds up.
AMOUNT = {"fees": "amount_usd", "token_flows": "amount", "chain_rewards": "amount"}


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


def _split(rows: pd.DataFrame, names: list[str]) -> dict[str, pd.DataFrame]:
    """Stacked wide rows (a column per metric) -> per granularity, long rows (project,
    period_start, metric, value) of the values that are not missing."""
    long = rows.melt(id_vars=["granularity", "project", "period_start"], value_vars=names, var_name="metric")
    long = long[long["value"].notna()]
    found = dict(tuple(long.groupby("granularity", sort=False)))
    return {g: found[g].drop(columns="granularity") if g in found else no_values() for g in GRANULARITIES}


def sums(t: ir.Table, metrics: list[Metric]) -> ir.Table:
    """Metrics that add up an amount over selected rows (or the signed flows, for net_sum), a column
    each, per granularity. A sum over no selected rows is missing, not 0."""
    t, period = each_granularity(t)
    aggregations = {}
    for metric in metrics:
        aggregations[metric.name] = amount_of(t, metric).sum(where=_where(t, metric.select)).cast(dt.float64)
    return t.group_by(granularity=t.granularity, project=t.project, period_start=period).aggregate(**aggregations)


def nets(t: ir.Table, metrics: list[Metric], key: str, amount: str) -> ir.Table:
    """Per-key nets inside each period, summed by sign (rent paid against rent received), a column
    per metric, per granularity. The metrics share one selection, so the nets are grouped once."""
    (select,) = {tuple(sorted(m.select.items())) for m in metrics}
    rows, period = each_granularity(t.filter(_where(t, dict(select))) if select else t)
    per_key = rows.group_by(
        granularity=rows.granularity, project=rows.project, period_start=period, **{key: rows[key]}
    ).aggregate(net=rows[amount].sum())
    net = per_key.net
    wanted = {m.name: kept_net(net, m) for m in metrics}
    return per_key.group_by("granularity", "project", "period_start").aggregate(
        **{name: ibis.ifelse(keep, net, 0.0).sum().cast(dt.float64) for name, keep in wanted.items()}
    )


def _small_tables(con, by_source: Mapping[str, list[Metric]]) -> dict[str, pd.DataFrame]:
    """The metrics of the tables other than transactions, per granularity, in one query: each kind
    of metric of each table is a part, and the parts are stacked (UNION ALL) with a column per
    metric (missing where a part has no such metric). One round trip: on a small table, as in an
    incremental build, a query's Python (expression, compilation, conversion) costs more than
    DuckDB's work."""
    parts = []
    for source, metrics in by_source.items():
        t = con.table(source)
        summed = [m for m in metrics if m.aggregation not in ("positive_net", "negative_net")]
        if summed:
            parts.append(sums(t, summed))
        netted: dict[tuple, list[Metric]] = {}
        for m in metrics:
            if m not in summed:
                netted.setdefault(tuple(sorted(m.select.items())), []).append(m)
        parts.extend(nets(t, group, NET_KEY[source], AMOUNT[source]) for group in netted.values())
    if not parts:
        return {g: no_values() for g in GRANULARITIES}
    keys = ["granularity", "project", "period_start"]
    names = [c for part in parts for c in part.columns if c not in keys]
    missing = ibis.null(dt.float64)
    padded = [part.select(*keys, **{n: part[n] if n in part.columns else missing for n in names}) for part in parts]
    return _split(con.execute(ibis.union(*padded)), names)


def compute(
    backend: Backend, catalogue: Catalogue, transactions_per_day: pd.DataFrame | None = None
) -> Iterator[tuple[str, pd.DataFrame]]:
    """Yield (granularity, sparse long frame) for every metric of the catalogue.

    Reads: ``transactions`` in two queries, for all granularities at once (``passes``: signer
    read once, tx_id twice, whatever the data); fees, token_flows and chain_rewards in one query,
    which reads each once per kind of metric (a build reads them into memory first).
    ``transactions_per_day``: the transactions' rows counted per day by validation
    (``store.Validated.rows_per_day``), which spares the scan for the day counts."""
    by_source: dict[str, list[Metric]] = {}
    for metric in catalogue:
        by_source.setdefault(metric.source, []).append(metric)
    transactions = by_source.pop("transactions", [])
    con = backend.con
    per_granularity = (
        [transaction_metrics(backend, con.table("transactions"), transactions, transactions_per_day)]
        if transactions
        else []
    )
    if by_source:
        per_granularity.append(_small_tables(con, by_source))
    for granularity in GRANULARITIES:
        # Frames without rows are left out: their columns are untyped, and pandas 2 warns that a
        # concatenation will one day let them decide the result's types.
        found = [frames[granularity] for frames in per_granularity if len(frames[granularity])]
        yield granularity, pd.concat(found, ignore_index=True) if found else no_values()
