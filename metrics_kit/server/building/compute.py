"""The metric engine: every catalogue entry's values over the event tables, computed on an engine.

The metrics are Ibis expressions (``metrics/expressions.py``), so the same definitions run on the
embedded DuckDB engine and on Spark (Ibis's PySpark backend), with the same results. What differs
between the engines (the 64-bit hash, how the one intermediate table read twice is kept) is in
``engines``. The engine returns, per granularity, a sparse long table ``(project, period_start,
metric, value)``: only periods with events appear. Filling the gaps (zeros, carried balances)
happens in ``build``.

One query computes every metric of the small tables (fees, token_flows, chain_rewards) for the three
granularities: a part per table and kind of metric, each grouping every row once per granularity,
all stacked with a UNION ALL. The transactions, by far the largest table, are computed for all
granularities at once by ``passes`` (its docstring says how they stay exact and what each scan reads).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import ibis
import ibis.expr.datatypes as datatypes
import pandas as pd

from metrics_kit.server.building import increments
from metrics_kit.server.building.engines import Engine
from metrics_kit.server.building.passes import no_values, transaction_metrics
from metrics_kit.server.metrics.expressions import AMOUNT, NET_KEY, nets, sums
from metrics_kit.spec.calendar import GRANULARITIES
from metrics_kit.spec.catalogue import Catalogue, Metric


def _split(rows: pd.DataFrame, names: list[str]) -> dict[str, pd.DataFrame]:
    """Stacked wide rows (a column per metric) -> per granularity, long rows (project,
    period_start, metric, value) of the values that are not missing."""
    long = rows.melt(id_vars=["granularity", "project", "period_start"], value_vars=names, var_name="metric")
    long = long[long["value"].notna()]
    found = dict(tuple(long.groupby("granularity", sort=False)))
    return {g: found[g].drop(columns="granularity") if g in found else no_values() for g in GRANULARITIES}


def _small_tables(backend, by_source: Mapping[str, list[Metric]]) -> dict[str, pd.DataFrame]:
    """The metrics of the tables other than transactions, per granularity, in one query: each kind
    of metric of each table is a part, and the parts are stacked (UNION ALL) with a column per
    metric (missing where a part has no such metric). One round trip: on a small table, as in an
    incremental build, a query's Python (expression, compilation, conversion) costs more than
    DuckDB's work."""
    parts = []
    for source, metrics in by_source.items():
        t = backend.table(source)
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
    missing = ibis.null(datatypes.float64)
    padded = [part.select(*keys, **{n: part[n] if n in part.columns else missing for n in names}) for part in parts]
    return _split(backend.execute(ibis.union(*padded)), names)


def compute(
    engine: Engine, catalogue: Catalogue, transactions_per_day: pd.DataFrame | None = None
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
    backend = engine.backend
    per_granularity = (
        [transaction_metrics(engine, backend.table("transactions"), transactions, transactions_per_day)]
        if transactions
        else []
    )
    if by_source:
        per_granularity.append(_small_tables(backend, by_source))
    for granularity in GRANULARITIES:
        # Frames without rows are left out: their columns are untyped, and pandas 2 warns that a
        # concatenation will one day let them decide the result's types.
        found = [frames[granularity] for frames in per_granularity if len(frames[granularity])]
        yield granularity, pd.concat(found, ignore_index=True) if found else no_values()


def sparse_values(
    engine: Engine, catalogue: Catalogue, transactions_per_day: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Every metric's sparse values over the tables ``engine`` holds, all granularities in one frame
    (``transactions_per_day``: see :func:`compute`)."""
    frames = [sparse.assign(granularity=g) for g, sparse in compute(engine, catalogue, transactions_per_day)]
    return increments.normalise(pd.concat(frames, ignore_index=True)) if frames else compute_nothing()


def compute_nothing() -> pd.DataFrame:
    """The sparse values of tables without an event: none."""
    return increments.normalise(pd.DataFrame(columns=increments.SPARSE_COLUMNS))
