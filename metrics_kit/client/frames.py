"""Points -> pandas: tidy (long) frames, Series, wide frames; dtypes per metric; ``attrs``.

Every ``attrs`` value is JSON (strings, numbers, lists, dicts): dates are ISO strings, a failed
point is a dict. So ``to_parquet`` keeps the attrs (pandas stores them as JSON), and any format
that does not (CSV, Feather) loses only them, never a value. Periods are labelled by their first
day, as the client asked for them and the service answered (the client checks that it did).
Every result's ``attrs`` also says where its values came from (``SOURCE``: the service, whether its
data is synthetic, the data version), and its ``complete`` flags are those decided when each value
was fetched, never worked out again when it is read.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import pandas as pd

from metrics_kit.spec.catalogue import Catalogue, Metric

DATES = "datetime64[us]"
SOURCE = ("service", "synthetic", "data_version", "data_version_confirmed")  # where a result came from, in attrs
LONG_COLUMNS = ["period_start", "project", "metric", "value", "unit", "complete"]


class Point(NamedTuple):
    """One value to fetch: a metric for a project over the period that starts on ``date``."""

    metric: str
    project: str
    granularity: str
    date: str  # ISO date sent as `date`: the first day of the period


class Result(NamedTuple):
    value: int | float | None  # None: the service has no value for it (``missing`` says why)
    unit: str | None
    complete: bool | None  # whether its period had ended when it was fetched (None: unknown, not complete)
    from_cache: bool
    version: str | None = None  # the data version of its answer
    missing: str | None = None  # value None: the service's reason ("" when it gave none)
    fetched_at: float | None = None  # when its request was sent (the wall clock), for IncompletePeriodWarning's reason


def failure(point: Point, error: BaseException) -> dict[str, str]:
    return {"metric": point.metric, "project": point.project, "date": point.date, "error": str(error)}


def point_text(listed: Mapping[str, str]) -> str:
    """A point of ``attrs['missing']`` in a line: metric, project, date and the service's reason."""
    return f"{listed['metric']} {listed['project']} {listed['date']}: {listed['reason'] or 'no reason given'}"


def long_frame(
    points: Sequence[Point],
    results: Mapping[Point, Result],
    failures: Mapping[Point, BaseException],
    catalogue: Catalogue,
    source: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Tidy rows, one a point: period_start, project, metric, value (missing where it failed), unit, complete.

    ``value`` holds every number exactly: int64 when every metric is a count (Int64, with <NA> where
    a point failed), float64 when every one is an amount (NaN), and object when they mix (Python
    ints for counts, floats for amounts; <NA> and NaN): a count never goes through a float, which
    holds whole numbers exactly only up to 2**53. ``complete`` is what was decided when the value
    was fetched (kept with it in the cache), never worked out again at read time; ``source``
    (service, synthetic, data_version) goes to ``attrs``."""
    rows, values, counts = [], [], set()
    for point in points:
        result = results.get(point)
        start = dt.date.fromisoformat(point.date)
        metric = _metric(catalogue, point.metric)
        counts.add(metric.is_count)
        if result is None or result.value is None:
            value: Any = pd.NA if metric.is_count else math.nan
            unit, complete = metric.unit, None
        else:
            complete = bool(result.complete)  # unknown is not complete
            value, unit = result.value, result.unit or metric.unit
        values.append(value)
        rows.append((pd.Timestamp(start), point.project, point.metric, None, unit, complete))
    frame = pd.DataFrame(rows, columns=LONG_COLUMNS)
    # pandas' own resolution for dates (date_range, to_datetime), which Parquet also keeps
    frame["period_start"] = frame["period_start"].astype(DATES)
    if counts == {True}:
        frame["value"] = exact_counts(values)
    elif counts == {False}:
        frame["value"] = pd.Series(values, dtype="float64")
    elif counts:
        frame["value"] = pd.Series(values, dtype=object)
    frame.attrs.update(source or {})
    frame.attrs.update(
        granularity=points[0].granularity if points else None,
        from_cache=sum(r.from_cache for r in results.values()),
        fetched=sum(not r.from_cache for r in results.values()),
    )
    if failures:
        frame.attrs["failed"] = [failure(p, e) for p, e in failures.items()]
    missing = [(p, results[p].missing) for p in points if p in results and results[p].value is None]
    if missing:  # the service said it has no value: never a NaN without its reason
        frame.attrs["missing"] = [
            {"metric": p.metric, "project": p.project, "date": p.date, "reason": reason or ""} for p, reason in missing
        ]
    return frame


def exact_counts(values: Sequence[Any] | pd.Series) -> pd.Series:
    """Whole numbers (Python ints, or missing) as int64, or Int64 with <NA> where any is missing:
    never through a float."""
    counts = pd.Series(pd.array(list(values), dtype="Int64"))
    return counts if counts.isna().any() else counts.astype("int64")


def drop_incomplete(long: pd.DataFrame) -> pd.DataFrame:
    """The rows that are complete (or failed); ``attrs["dropped"]`` records each point left out
    (project, metric, period_start), so that a cell left empty in a wide frame of several projects
    (another project has that period) is never taken for a value that is missing for no reason."""
    kept = long["complete"] != False  # noqa: E712 (None stays)
    out = long[kept].reset_index(drop=True)
    out.attrs.update(long.attrs)
    out.attrs["dropped"] = [
        {"project": project, "metric": metric, "period_start": start.date().isoformat()}
        for start, project, metric in long.loc[~kept, ["period_start", "project", "metric"]].itertuples(index=False)
    ]
    return out


def series(long: pd.DataFrame, metric: Metric, project: str) -> pd.Series:
    """One metric of one project on a DatetimeIndex of period starts, typed by the metric."""
    index = pd.DatetimeIndex(long["period_start"], name="period_start")
    out = typed(pd.Series(long["value"].array, index=index, name=metric.name), metric)
    out.attrs.update(
        metric=metric.name,
        project=project,
        unit=metric.unit,
        granularity=long.attrs["granularity"],
        incomplete=incomplete(long),
        from_cache=long.attrs["from_cache"],
        fetched=long.attrs["fetched"],
        **{key: long.attrs[key] for key in SOURCE if key in long.attrs},
    )
    for key in ("failed", "missing", "dropped"):
        if key in long.attrs:
            out.attrs[key] = long.attrs[key]
    return out


def wide(long: pd.DataFrame, catalogue: Catalogue, several_projects: bool) -> pd.DataFrame:
    """One column per metric (per (project, metric) with ``several_projects``), typed per metric: a
    period a column has no point for is missing (<NA> in a column of counts, NaN of amounts)."""
    keys = ["project", "metric"] if several_projects else ["metric"]
    out = pd.DataFrame()
    if len(long):
        index = pd.DatetimeIndex(sorted(long["period_start"].unique()), name="period_start", dtype=DATES)
        columns = {}
        for key, rows in long.groupby(keys, sort=False):
            values = pd.Series(rows["value"].array, index=pd.DatetimeIndex(rows["period_start"]), dtype=object)
            values = values[~values.index.duplicated()].reindex(index)
            columns[key] = typed(values, _metric(catalogue, key[-1]))
        out = pd.DataFrame(columns, index=index)
        out.columns = (
            pd.MultiIndex.from_tuples(list(columns), names=keys)
            if several_projects
            else pd.Index([key[0] for key in columns], name="metric")
        )
    out.attrs.update(long.attrs)
    out.attrs["units"] = {m: _metric(catalogue, m).unit for m in long["metric"].unique()}
    out.attrs["incomplete"] = incomplete(long)
    return out


def incomplete(long: pd.DataFrame) -> list[str]:
    """The ISO first days of the periods that are not complete, in order."""
    starts = long.loc[long["complete"] == False, "period_start"]  # noqa: E712
    return [stamp.date().isoformat() for stamp in sorted(set(starts))]


def typed(values: pd.Series, metric: Metric) -> pd.Series:
    """Counts as int64 (Int64 with <NA> where points failed), exactly; amounts as float64."""
    if not metric.is_count:
        return values.astype("float64")
    if values.dtype == "int64":
        return values
    counts = values.astype("Int64")
    return counts if counts.isna().any() else counts.astype("int64")


def metrics_table(catalogue: Catalogue) -> pd.DataFrame:
    """Every metric: name, family, families, unit, aggregation, description, aliases, kinds, applies_to."""
    rows: list[dict[str, Any]] = [{"name": m.name, "family": m.family, **m.describe()} for m in catalogue]
    return pd.DataFrame(rows).set_index("name")


def projects_table(found: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """The service's projects: kinds, regular_pools, coverage_start, coverage_end, metrics."""
    rows = []
    for name, info in found.items():
        coverage = info.get("coverage") or {}
        rows.append(
            {
                "project": name,
                "kinds": info.get("kinds"),
                "regular_pools": info.get("regular_pools"),
                "coverage_start": coverage.get("start"),
                "coverage_end": coverage.get("end"),
                "metrics": info.get("metrics"),
            }
        )
    return pd.DataFrame(
        rows, columns=["project", "kinds", "regular_pools", "coverage_start", "coverage_end", "metrics"]
    ).set_index("project")


def _metric(catalogue: Catalogue, name: str) -> Metric:
    metric = catalogue.get(name)
    if metric is None:  # every point was checked against this catalogue before it was fetched
        raise LookupError(name)
    return metric
