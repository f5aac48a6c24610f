"""Transaction metrics, exactly, in two queries over the transactions: no hash collision can change a number.

Active users (distinct signers) and transaction counts (distinct transactions) for days, ISO weeks
and months, for every (project, action) and every restriction of the catalogue (``pool_type``).

**Reads of ``transactions``.** Three scans, whatever the data, in two queries:

- the *signer pass* (project, action, block_time, signer and any restricted column);
- the *day counts*: rows per (project, action, day) and restriction, from the short columns only
  (a full DuckDB build takes them from its validation scan, which counts them anyway);
- the *repeated rows*: a semi-join that scans tx_id twice, once to find the tx_id hashes that
  occur more than once and once to pick out the rows that carry them (a few per thousand).

The day counts and the repeated rows come back stacked in one query: on a small table, as an
incremental build's window, a round trip through Ibis costs more than DuckDB's work.

So the signer column is read once and tx_id twice. The one-scan alternatives are slower on
DuckDB (docs/performance.md): grouping (project, action, tx_hash) with the aggregates a one-scan
correction needs (rows, days, a second hash) builds a far larger table than the two tx_id scans,
and GROUPING SETS over one scan costs as much as separate queries. Counting every row and carrying
tx_id for the repeated ones in one grouping (the form before this one) sent tx_id through the
join for every row, not only for the repeated ones.

**Active users.** The signer pass groups the rows by (project, action, signer, month) -- the
signer's own address, never a hash, so no two signers can merge -- and keeps a 31-bit mask of the
days of the month the signer acted on (``bit_or``). From those rows (far fewer than the
events, read twice by one query: DuckDB materialises them once, other engines cache them first),
per (project, action, month):

- month users: the rows;
- day users: for each day of the month, the rows with that day's bit;
- week users: an ISO week inside one month counts the rows whose mask meets that week's days. A
  week split between two months counts the signers of both parts, minus those in both, found by
  joining the rows active in the month's last days to those active in the next month's first days
  (no join when no two months with rows follow each other: none can have signers in both).

A restricted distinct count keeps its own mask: the days the signer acted under the restriction.

**Transaction counts.** A repeated (project, action, tx_id) counts once per period. The
repeated-rows query finds the tx_id hashes that occur more than once (on DuckDB by sorting the
hashes and comparing neighbours, elsewhere by grouping them with ``HAVING count(*) > 1``) and
counts the rows that carry them per (project, action, day, tx_id), by the exact tx_id string.
A period's count is its rows minus, for each repeated tx_id with rows in it, those rows beyond the
first (under a restriction: its rows under the restriction beyond the first). Distinct ids whose
hashes collide come along as if repeated and are counted by their exact strings, so a collision
costs a few more rows in a small result, never a wrong count. That is why, when the rows are known
to be at most 2**25 (a full DuckDB build, whose validation counted them), the query looks for
repeats by the upper 32 bits of the hash only, which DuckDB sorts faster and in less memory than
the 64-bit hash, for a few more rows in its result.
"""

from __future__ import annotations

import datetime as dt

import ibis
import ibis.expr.datatypes as datatypes
import ibis.expr.types as ir
import numpy as np
import pandas as pd

from metrics_kit.server.building.engines import Engine, Hash64
from metrics_kit.server.metrics.expressions import where
from metrics_kit.spec.calendar import GRANULARITIES
from metrics_kit.spec.catalogue import Metric

Restriction = tuple[tuple[str, tuple[str, ...]], ...]
_KEYS = ["project", "action"]
_PERIOD_KEYS = ["granularity", *_KEYS, "period_start"]
_SLOTS = 6  # a month meets at most six ISO weeks
_DAYS = 31
_EVERYONE = "mask"  # the unrestricted day mask: every signer's days, which any restricted mask's are among
# Up to this many rows, repeated tx_ids are looked for by the upper half of their hash: a 32-bit key
# sorts faster, and its chance collisions (about rows**2 / 2**33 pairs: 12,000 at 10 million rows,
# 130,000 at this bound) only add rows to the small repeated-rows result, counted by their exact strings.
_NARROW_UP_TO = 1 << 25


@ibis.udf.agg.builtin(name="bit_or")
def _bit_or(value: int) -> int:  # type: ignore[empty-body]
    """``bit_or``, which DuckDB and Spark both have, while Ibis compiles its own only for DuckDB."""


def measure_key(metric: Metric) -> tuple[str, Restriction]:
    restriction = tuple(sorted((k, tuple(v)) for k, v in metric.select.items() if k != "action"))
    return metric.aggregation, restriction


class Measures:
    """The columns the passes compute: a day mask per restriction of an active-users metric and a
    row count per restriction of a transaction count; the unrestricted ones always (their periods
    are the periods with events)."""

    def __init__(self, metrics: list[Metric]):
        keys: list[tuple[str, Restriction]] = []
        for metric in metrics:
            assert len(metric.select["action"]) == 1, f"{metric.name}: a distinct count cannot add up several actions"
            if measure_key(metric) not in keys:
                keys.append(measure_key(metric))
        restricted = {f"mask{i}": r for i, (a, r) in enumerate(keys) if a == "distinct_count" and r}
        self.user_masks = {_EVERYONE: ()} | restricted
        self.row_counts = {"n": ()} | {f"n{i}": r for i, (a, r) in enumerate(keys) if a == "count" and r}

    def source(self, key: tuple[str, Restriction]) -> str:
        """The column of the per-period results that holds a measure."""
        aggregation, restriction = key
        columns = self.user_masks if aggregation == "distinct_count" else self.row_counts
        return next(name for name, r in columns.items() if r == restriction)


def _day(t: ir.Table) -> ir.DateValue:
    return t.block_time.truncate("D").date()


# -- the transaction pass -------------------------------------------------------------------------


def _day_counts(t: ir.Table, measures: Measures) -> ir.Table:
    """Rows per (project, action, day), and under each restriction of a transaction count: a scan
    of the short columns only (no tx_id, no signer)."""
    counts = {name: t.count(where=where(t, r)) for name, r in measures.row_counts.items()}
    return t.group_by(project=t.project, action=t.action, day=_day(t)).aggregate(**counts)


def _counted_before(rows_per_day: pd.DataFrame, measures: Measures) -> pd.DataFrame:
    """``_day_counts`` from rows counted per (day, project, action and the restricted columns)."""
    counts = rows_per_day[["project", "action", "day"]].copy()
    for name, restriction in measures.row_counts.items():
        selected = pd.Series(True, index=rows_per_day.index)
        for column, values in restriction:
            selected &= rows_per_day[column].isin(values)
        counts[name] = rows_per_day["n"].where(selected, 0)
    return counts.groupby(["project", "action", "day"], as_index=False, sort=False)[list(measures.row_counts)].sum()


def _repeated_rows(t: ir.Table, measures: Measures, hash64: Hash64, by_sorting: bool) -> ir.Table:
    """Rows per (project, action, day, tx_id), and under each restriction of a transaction count,
    of the rows whose tx_id hash occurs more than once: every repeated tx_id by its exact string
    (with, rarely, distinct ids whose hashes collide: counted by their exact strings, they do no
    harm). A semi-join: only those rows, a few per thousand, go on past the scan."""
    hashes = t.select(tx_hash=hash64(t.tx_id))
    if by_sorting:
        # DuckDB sorts hashes faster than it groups them.
        previous = hashes.tx_hash.lag().over(ibis.window(order_by=hashes.tx_hash))
        repeated = hashes.filter(hashes.tx_hash == previous).distinct()
    else:
        # A grouping by the hash alone, with nothing but a count: the smallest 10-million-group table.
        repeated = hashes.group_by("tx_hash").aggregate(n=hashes.count()).filter(lambda r: r.n > 1)
    # A separate expression for the scan side: one shared expression becomes a CTE that DuckDB
    # materialises whole.
    rows = t.filter(hash64(t.tx_id).isin(repeated.tx_hash))
    counts = {name: rows.count(where=where(rows, r)) for name, r in measures.row_counts.items()}
    grouped = rows.group_by(project=rows.project, action=rows.action, day=_day(rows), tx_id=rows.tx_id)
    return grouped.aggregate(**counts)


def _narrowed(hash64: Hash64) -> Hash64:
    """The upper 32 bits of a 64-bit integer hash (any other hash as it is)."""

    def upper(value: ir.StringValue) -> ir.Value:
        hashed = hash64(value)
        if hashed.type().is_uint64():
            return (hashed >> 32).cast(datatypes.uint32)
        if hashed.type().is_int64():
            return (hashed >> 32).cast(datatypes.int32)
        return hashed

    return upper


def _repeated(backend, t: ir.Table, measures: Measures, hash64: Hash64, by_sorting: bool) -> pd.DataFrame:
    return _as_periods(backend.execute(_repeated_rows(t, measures, hash64, by_sorting)), "day")


def _counted(
    backend, t: ir.Table, measures: Measures, hash64: Hash64, by_sorting: bool
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The day counts and the repeated rows, in one round trip: stacked, the day counts with a
    missing tx_id (validated transactions have none, and ``repeated`` tells them apart anyway)."""
    counts = list(measures.row_counts)
    days = _day_counts(t, measures).mutate(tx_id=ibis.null(datatypes.string), repeated=False)
    repeats = _repeated_rows(t, measures, hash64, by_sorting).mutate(repeated=True)
    columns = ["project", "action", "day", "tx_id", *counts, "repeated"]
    both = _as_periods(backend.execute(ibis.union(days.select(*columns), repeats.select(*columns))), "day")
    repeated = both.pop("repeated").to_numpy(dtype=bool)
    return both[~repeated].drop(columns="tx_id").reset_index(drop=True), both[repeated].reset_index(drop=True)


# -- the signer pass ------------------------------------------------------------------------------


def _signer_months(t: ir.Table, measures: Measures) -> ir.Table:
    """One row per (project, action, signer, month): the days of the month it acted on, as bits."""
    bit = ibis.literal(1, datatypes.int64) << (t.block_time.day() - 1).cast(datatypes.int64)
    masks = {name: _bit_or(bit, where=where(t, r)) for name, r in measures.user_masks.items()}
    month = t.block_time.truncate("M").date()
    return t.group_by(project=t.project, action=t.action, signer=t.signer, month=month).aggregate(**masks)


def _per_month(months: ir.Table, measures: Measures, month_starts: list[dt.date]) -> ir.Table:
    """Per (project, action, month) and mask: its signers, signers per day, signers per week slot,
    and the signers of a week split with the month before who acted in both parts (``_both``)."""
    # Shifted by the weekday of the 1st (Monday 0), a mask's bit 7k..7k+6 are the month's days in its k-th week.
    offset = months.month.day_of_week.index().cast(datatypes.int64)
    aggregations = {}
    for name in measures.user_masks:
        mask = months[name].cast(datatypes.int64)
        active = mask.notnull() & (mask != 0)
        aggregations[f"{name}_month"] = months.count(where=active)
        for k in range(_DAYS):
            aggregations[f"{name}_d{k}"] = ((mask >> k) & 1).sum()
        shifted = mask << offset
        for k in range(_SLOTS):
            aggregations[f"{name}_w{k}"] = months.count(where=((shifted >> (7 * k)) & 127) != 0)
    per_month = months.group_by("project", "action", "month").aggregate(**aggregations)
    present = set(month_starts)
    if not any(_next_month(m) in present for m in month_starts):
        # No month with rows follows another (as in a window of one month): no week has signers
        # in two months, and the join would find nothing. Without it the query is smaller, and
        # compiles faster.
        return per_month.mutate(**{f"{n}_both": ibis.literal(0, datatypes.int64) for n in measures.user_masks})
    # One query for both: each is small next to the cost of a round trip through Ibis.
    return per_month.left_join(_split_weeks(months, measures, month_starts), ["project", "action", "month"])


def _split_weeks(months: ir.Table, measures: Measures, month_starts: list[dt.date]) -> ir.Table:
    """Per (project, action, month) and mask (``{mask}_both``): the signers active both in the last
    days of the previous month and in the first days of this one, within the ISO week they share."""
    calendar = pd.DataFrame(
        [(m, _next_month(m), *_edges(m)) for m in month_starts],
        columns=["month", "next_month", "head_bits", "tail_bits"],
    )
    for column in ("month", "next_month"):
        calendar[column] = pd.to_datetime(calendar[column])
    edges = ibis.memtable(calendar)
    # A dtype, not its name: parsing "date" builds Ibis's type grammar, a noticeable part of a small build.
    edges = edges.mutate(month=edges.month.cast(datatypes.date), next_month=edges.next_month.cast(datatypes.date))
    rows = months.join(edges, "month")
    # A restricted mask's days are among the unrestricted mask's, so rows that meet an edge by the
    # latter are all the candidates; each mask then counts its own.
    everyone = rows[_EVERYONE].cast(datatypes.int64)
    masks = {name: rows[name].cast(datatypes.int64) for name in measures.user_masks}
    keys = ["project", "action", "signer"]
    tails = rows.filter((everyone & rows.tail_bits) != 0).select(
        *keys, month=rows.next_month, **{f"t_{n}": m & rows.tail_bits for n, m in masks.items()}
    )
    heads = rows.filter((everyone & rows.head_bits) != 0).select(
        *keys, "month", **{f"h_{n}": m & rows.head_bits for n, m in masks.items()}
    )
    both = tails.join(heads, [*keys, "month"])
    counts = {f"{n}_both": both.count(where=(both[f"t_{n}"] != 0) & (both[f"h_{n}"] != 0)) for n in masks}
    return both.group_by("project", "action", "month").aggregate(**counts)


def _signers(engine: Engine, t: ir.Table, measures: Measures, month_starts: list[dt.date]) -> pd.DataFrame:
    """``_per_month`` of ``t``'s signer months, in one query, which reads them twice (the counts
    and the split weeks): kept as the engine keeps such a table (``Engine.reused``)."""
    with engine.reused(_signer_months(t, measures)) as months:
        return _as_periods(engine.backend.execute(_per_month(months, measures, month_starts)), "month")


def _next_month(month: dt.date) -> dt.date:
    return dt.date(month.year + month.month // 12, month.month % 12 + 1, 1)


def _edges(month: dt.date) -> tuple[int, int]:
    """Day-of-month bits of the month's first days in a week begun the month before, and of its
    last days in a week that ends the month after (0 where the month starts on a Monday or ends on
    a Sunday)."""
    days = (_next_month(month) - month).days
    first = month.weekday()
    head = (1 << (7 - first)) - 1 if first else 0
    last = (first + days) % 7  # days of the last week inside the month; 0: the month ends on a Sunday
    tail = ((1 << last) - 1) << (days - last) if last else 0
    return head, tail


# -- putting it together --------------------------------------------------------------------------


def _as_periods(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    frame[column] = pd.to_datetime(frame[column]).astype("datetime64[us]")
    return frame


def _week_start(days: pd.Series) -> pd.Series:
    return days - pd.to_timedelta(days.dt.day_of_week, unit="D")


def period_of(days: pd.Series, granularity: str) -> pd.Series:
    """The start of the period of each day (datetime64) in ``granularity``."""
    if granularity == "1_day":
        return days
    if granularity == "1_week":
        return _week_start(days)
    return days.dt.to_period("M").dt.to_timestamp()


def no_values() -> pd.DataFrame:
    """A sparse long frame without rows."""
    return pd.DataFrame(columns=["project", "period_start", "metric", "value"])


def _summed(frame: pd.DataFrame, keys: list[str], values: list[str]) -> pd.DataFrame:
    return frame.groupby(keys, as_index=False, sort=False)[values].sum()


def _in_periods(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """``columns`` of ``frame`` once per granularity, with the start of the period of each row's
    day: the three granularities then take one grouping, not three (on a window's few thousand
    rows, pandas' cost per step outweighs its cost per row)."""
    return pd.concat(
        [
            frame[columns].assign(granularity=g, period_start=period_of(frame["day"], g).to_numpy())
            for g in GRANULARITIES
        ],
        ignore_index=True,
    )


def _counts(rows: pd.DataFrame, repeated: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """(granularity, project, action, period_start, one column per row count) of distinct
    transactions: the period's rows minus, for each repeated tx_id with rows in it, those beyond
    the first."""
    counted = _summed(_in_periods(rows, [*_KEYS, *names]), _PERIOD_KEYS, names)
    if repeated.empty:
        return counted
    per_tx = _summed(_in_periods(repeated, [*_KEYS, "tx_id", *names]), [*_PERIOD_KEYS, "tx_id"], names)
    beyond = per_tx[names] - (per_tx[names] > 0).astype("int64")
    extra = _summed(per_tx[_PERIOD_KEYS].join(beyond), _PERIOD_KEYS, names)
    counted = counted.merge(extra, on=_PERIOD_KEYS, how="left", suffixes=("", "_extra"))
    for name in names:
        counted[name] -= counted.pop(f"{name}_extra").fillna(0).astype("int64")
    return counted


def _slots(per_month: pd.DataFrame, columns: dict[str, list[str]], starts: pd.Series, step: int) -> pd.DataFrame:
    """One row per (project, action, month) and slot k: its period starting ``step * k`` days after
    ``starts``, with the slot's column of each measure (``columns[measure][k]``)."""
    width = len(next(iter(columns.values())))
    offsets = pd.to_timedelta(np.tile(np.arange(width) * step, len(per_month)), unit="D")
    long = {key: np.repeat(per_month[key].to_numpy(), width) for key in _KEYS}
    long["period_start"] = np.repeat(starts.to_numpy(), width) + offsets
    for name, slot_columns in columns.items():
        long[name] = per_month[slot_columns].to_numpy().ravel()
    return pd.DataFrame(long)


def _users(per_month: pd.DataFrame, names: list[str], granularity: str) -> pd.DataFrame:
    """(project, action, period_start, one column per mask) of distinct signers."""
    if granularity == "1_month":
        return per_month[[*_KEYS, "month", *(f"{n}_month" for n in names)]].set_axis(
            [*_KEYS, "period_start", *names], axis=1
        )
    if granularity == "1_day":
        days = _slots(per_month, {n: [f"{n}_d{k}" for k in range(_DAYS)] for n in names}, per_month["month"], 1)
        # Bits past the month's end are zeros dated in the next month: dropped.
        inside = days["period_start"].dt.month.to_numpy() == np.repeat(per_month["month"].dt.month.to_numpy(), _DAYS)
        return days[inside]
    slots = {n: [f"{n}_w{k}" for k in range(_SLOTS)] for n in names}
    weeks = _slots(per_month, slots, _week_start(per_month["month"]), 7)
    # A week split between two months has a slot in each: their signers added up, minus those in
    # both, which the later month's row holds (missing: none).
    weeks = _summed(weeks, [*_KEYS, "period_start"], names)
    both = per_month[[*_KEYS, *(f"{n}_both" for n in names)]].assign(period_start=_week_start(per_month["month"]))
    weeks = weeks.merge(both, on=[*_KEYS, "period_start"], how="left")
    for name in names:
        weeks[name] -= weeks.pop(f"{name}_both").fillna(0).astype("int64")
    return weeks


def transaction_metrics(
    engine: Engine,
    t: ir.Table,
    metrics: list[Metric],
    rows_per_day: pd.DataFrame | None = None,
) -> dict[str, pd.DataFrame]:
    """Per granularity, the sparse long frame (project, period_start, metric, value) of ``metrics``.

    The engine's ``hash64`` finds repeated tx_ids, by sorting the hashes or grouping them as its
    ``repeats_by_sorting`` says. ``rows_per_day``: the rows of ``t`` already counted per (day,
    project, action, pool_type) (column ``n``), as validation does; then the day counts take no scan."""
    backend, hash64, by_sorting = engine.backend, engine.hash64, engine.repeats_by_sorting
    measures = Measures(metrics)
    if rows_per_day is None:
        rows, repeated = _counted(backend, t, measures, hash64, by_sorting)
    else:
        rows = _counted_before(rows_per_day, measures)
        if not rows.empty:
            few = int(rows["n"].sum()) <= _NARROW_UP_TO
            repeated = _repeated(backend, t, measures, _narrowed(hash64) if few else hash64, by_sorting)
    if rows.empty:  # no transactions (an empty table or window): nothing to count, nothing to join
        return {granularity: no_values() for granularity in GRANULARITIES}
    month_starts = sorted({d.date() for d in rows["day"].dt.to_period("M").dt.to_timestamp()})
    per_month = _signers(engine, t, measures, month_starts)
    # Which metric each (action, measure) is: the wide columns become long rows by one merge.
    named = pd.DataFrame(
        [(m.select["action"][0], measures.source(measure_key(m)), m.name) for m in metrics],
        columns=["action", "measure", "metric"],
    )
    users, counts = list(measures.user_masks), list(measures.row_counts)
    # Only periods with events: the (granularity, project, action, period) that have rows.
    wide = _counts(rows, repeated, counts)
    signers = [_users(per_month, users, g).assign(granularity=g) for g in GRANULARITIES]
    wide = wide.merge(pd.concat(signers, ignore_index=True), on=_PERIOD_KEYS, how="left")
    long = wide.melt(id_vars=_PERIOD_KEYS, value_vars=[*users, *counts], var_name="measure")
    long = long.merge(named, on=["action", "measure"])
    long["value"] = long["value"].fillna(0).astype("int64")
    found = dict(tuple(long.groupby("granularity", sort=False)))
    columns = ["project", "period_start", "metric", "value"]
    return {g: found[g][columns] if g in found else no_values() for g in GRANULARITIES}
