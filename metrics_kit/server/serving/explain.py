"""The event rows behind one value (``GET /explain``), read from the event tables with Ibis.

The rows are chosen as the engine chooses them: the metric's table (``Metric.source``), its
selection (``Metric.select`` through ``expressions.where``), the project, and the period's bounds from
``spec/calendar.py`` (every ``block_time`` from the first day's midnight to the last day's end,
UTC); what is summed and which nets are kept are the engine's own expressions (``amount_of``,
``kept_net``). Each kind of metric shows the rows its value is made of, with the data format's column names
(docs/data-format.md) in a fixed order, and says how the value follows from them (every column,
with the type its cells have in the answer, is in ``spec/wire.py``'s ``EXPLAIN_COLUMN_TYPES``):

- ``distinct_count`` (active users): one row per signer (``signer``, ``transactions``: its distinct
  tx_ids, ``first_block_time``, ``last_block_time``); the value is the number of rows;
- ``count`` (transactions): the transaction rows, with ``counted`` true on the first row of each
  tx_id in the period (a tx_id repeated in the period counts once, as in ``passes``); the value is
  the number of counted rows;
- ``sum``: the rows; the value is the sum of the amount column;
- ``net_sum``, ``ending_balance``: the token flows with ``signed_amount`` (``FLOW_SIGNS``); the value
  is their sum (plus, for a balance, the previous period's balance, which the service adds);
- ``positive_net``, ``negative_net``: the rows with their key's net in the period (``account_net``)
  and ``counted`` true for the keys whose net has the metric's sign; the value is the sum of the
  counted rows' amounts, which is the sum of those nets.

A page is two queries on the event tables (the number of rows, then the page in its fixed order);
no table is read into memory.
"""

from __future__ import annotations

import datetime as dt
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ibis
import ibis.expr.types as ir

from metrics_kit.server.data import store
from metrics_kit.server.data.schema import COLUMNS
from metrics_kit.server.data.sources import find_sources, fingerprint
from metrics_kit.server.metrics.expressions import AMOUNT, NET_KEY, amount_of, kept_net, where
from metrics_kit.spec import wire
from metrics_kit.spec.catalogue import FLOW_SIGNS, Metric
from metrics_kit.spec.wire import COUNTED, FIRST_BLOCK_TIME, LAST_BLOCK_TIME, SIGNED_AMOUNT, TRANSACTIONS

CLOSE_WAIT = 10.0  # seconds Events.close waits for a page being read


@dataclass(frozen=True)
class Explanation:
    """The rows behind a value (an Ibis table with the columns in order), the order they are shown
    in, and how the value follows from them: ``formula`` in words; as fields, the value is the
    opening balance (a balance only; the service adds it) plus the sum of ``value_column`` (None:
    the number of rows) over the rows whose ``counted_column`` is true (None: every row)."""

    rows: ir.Table
    order: list[Any]
    formula: str
    value_column: str | None
    counted_column: str | None

    @property
    def columns(self) -> list[str]:
        return list(self.rows.columns)


def _selection(metric: Metric) -> str:
    chosen = [f"{column} {' or '.join(values)}" for column, values in sorted(metric.select.items())]
    return f"the {metric.source} rows" + (f" of {' and '.join(chosen)}" if chosen else "")


def explain(backend: ibis.BaseBackend, metric: Metric, project: str, first: dt.date, last: dt.date) -> Explanation:
    """The rows of ``metric`` for ``project`` over the days ``first`` to ``last`` (inclusive)."""
    t = backend.table(metric.source)
    start = dt.datetime.combine(first, dt.time())
    end = dt.datetime.combine(last + dt.timedelta(days=1), dt.time())
    chosen = (t.project == project) & (t.block_time >= start) & (t.block_time < end)
    selected = where(t, metric.select)
    t = t.filter(chosen if selected is None else chosen & selected)
    rows_of = f"{_selection(metric)} of the period"
    aggregation = metric.aggregation
    if aggregation == "distinct_count":
        signers = t.group_by("signer").aggregate(
            **{
                TRANSACTIONS: t.tx_id.nunique(),
                FIRST_BLOCK_TIME: t.block_time.min(),
                LAST_BLOCK_TIME: t.block_time.max(),
            }
        )
        return Explanation(
            signers,
            [ibis.desc(TRANSACTIONS), "signer"],
            f"the number of rows: one row per signer of {rows_of} ({TRANSACTIONS}: its distinct tx_ids in them)",
            None,
            None,
        )
    columns = list(COLUMNS[metric.source])
    if aggregation == "count":
        # The first row of each tx_id counts: a repeated tx_id counts once in the period.
        first_row = ibis.window(group_by=t.tx_id, order_by=[t.block_time, t.signer, t.pool_type])
        rows = t.select(*columns, **{COUNTED: ibis.row_number().over(first_row) == 0})
        order = ["block_time", "tx_id", ibis.desc(COUNTED), "signer", "pool_type", "project", "action"]
        formula = (
            f"the number of rows whose {COUNTED} is true: {rows_of}, where a tx_id repeated in the period "
            f"counts once ({COUNTED} is true on its first row, by block_time)"
        )
        return Explanation(rows, order, formula, None, COUNTED)
    amount = AMOUNT[metric.source]
    order = ["block_time", *(c for c in columns if c != "block_time")]
    if aggregation in ("net_sum", "ending_balance"):
        rows = t.select(*columns, **{SIGNED_AMOUNT: amount_of(t, metric).cast("float64")})
        signed = ", ".join(f"{flow} {'+' if sign > 0 else '-'}" for flow, sign in FLOW_SIGNS.items())
        formula = f"the sum of {SIGNED_AMOUNT} over the rows: {rows_of}, each {amount} signed by its flow ({signed})"
        if aggregation == "ending_balance":
            formula = (
                "opening_balance (the balance at the end of the previous period; in the first period of "
                f"coverage, the initial circulating supply) plus {formula}"
            )
        return Explanation(rows, order, formula, SIGNED_AMOUNT, None)
    if aggregation in ("positive_net", "negative_net"):
        key = NET_KEY[metric.source]
        net = wire.net_column(key)
        per_key = t[amount].sum().over(ibis.window(group_by=t[key]))
        rows = t.select(*columns, **{net: per_key})
        above = aggregation == "positive_net"
        rows = rows.mutate(**{COUNTED: kept_net(rows[net], metric)})
        formula = (
            f"the sum of {amount} over the rows whose {COUNTED} is true: {rows_of}; each {key}'s net ({net}, "
            f"the sum of its rows) is kept when it is {'above' if above else 'below'} zero, and the kept "
            f"nets are summed, which is the sum of the {key}s' rows marked {COUNTED}"
        )
        return Explanation(rows, order, formula, amount, COUNTED)
    assert aggregation == "sum", aggregation
    return Explanation(t.select(*columns), order, f"the sum of {amount} over the rows: {rows_of}", amount, None)


class Events:
    """The event tables of the data folder a service's aggregates were built from, opened on the
    first ``GET /explain`` as views over its files. No row is validated again: the folder's
    fingerprint must be the aggregates' (:meth:`changed`), so these are the files that passed."""

    def __init__(self, directory: Path, built_from: str):
        self.directory = Path(directory)
        self.built_from = built_from
        self._lock = threading.Lock()  # one DuckDB connection: one query at a time
        self._backend: ibis.BaseBackend | None = None

    def close(self, wait: float = CLOSE_WAIT) -> None:
        """Close the DuckDB connection of the views, if one was opened, and let go of it; a later
        page opens another. A page being read is waited for, up to ``wait`` seconds (then the
        connection is left open to it)."""
        if not self._lock.acquire(timeout=wait):
            return
        try:
            backend, self._backend = self._backend, None
        finally:
            self._lock.release()
        if backend is not None:
            backend.disconnect()

    def changed(self) -> bool:
        """Whether the folder's files are no longer those the aggregates were built from."""
        try:
            return fingerprint(find_sources(self.directory)) != self.built_from
        except Exception:  # a folder gone or unreadable: not the one built from
            return True

    def page(
        self, metric: Metric, project: str, first: dt.date, last: dt.date, offset: int, limit: int
    ) -> tuple[Explanation, int, list[list[Any]]]:
        """The explanation, its number of rows and the rows from ``offset`` (at most ``limit``)."""
        with self._lock:
            if self._backend is None:
                self._backend = store.open_views(self.directory)
            found = explain(self._backend, metric, project, first, last)
            total = int(found.rows.count().to_pyarrow().as_py())
            rows: list[list[Any]] = []
            if offset < total:
                page = found.rows.order_by(found.order).limit(limit, offset=offset).to_pyarrow()
                # Each cell as the contract types its column (a column not in it is a bug, never sent).
                types = [wire.EXPLAIN_COLUMN_TYPES[c] for c in found.columns]
                columns = [page.column(c).to_pylist() for c in found.columns]
                cells = zip(*columns, strict=True)
                rows = [[wire.explain_cell(k, v) for k, v in zip(types, row, strict=True)] for row in cells]
            return found, total, rows
