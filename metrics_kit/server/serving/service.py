"""The service: turns the query parameters of ``GET /metrics`` into an answer or a QueryError.

It knows nothing of HTTP beyond status codes; the server module is a thin shell around it.
Parameters are checked in the order a person would fix them: missing or repeated, then metric,
granularity, date and project format (400), then existence (404).

:class:`QueryError` is the server's error answer, and lives here rather than in ``errors.py``:
``errors.py`` is the tree of exceptions a user of metrics_kit catches, and a QueryError never
reaches one. The query layer and the HTTP shell (``http/app.py``) raise it and turn it into an
answer, its status and ``wire.error_body``; a client reads that answer back as the library's
``APIError`` (``wire.api_error``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from metrics_kit.errors import ValidationError
from metrics_kit.server.serving.aggregates import Aggregates, catalogue_key
from metrics_kit.server.serving.completeness import Clock, Completeness
from metrics_kit.spec import ids, wire
from metrics_kit.spec.calendar import period_index
from metrics_kit.spec.catalogue import Catalogue, Metric
from metrics_kit.spec.wire import ErrorCode

if TYPE_CHECKING:
    from metrics_kit.server.serving.explain import Events

PARAMETERS = wire.PARAMETERS
# The 400 code of each parameter's format check (spec/ids.py raises ValidationError naming it).
_INVALID = {
    wire.METRIC_NAME: ErrorCode.UNKNOWN_METRIC,
    wire.GRANULARITY: ErrorCode.INVALID_GRANULARITY,
    wire.DATE: ErrorCode.INVALID_DATE,
    wire.START: ErrorCode.INVALID_DATE,
    wire.END: ErrorCode.INVALID_DATE,
    wire.PROJECT: ErrorCode.INVALID_PROJECT,
}


def _page_number(text: str | None, name: str, default: int, lowest: int, highest: int) -> int:
    """A page parameter of ``/explain`` (``limit`` or ``offset``): its default when not given."""
    if text is None:
        return default
    if not (text.isascii() and text.isdigit() and len(text) <= 13 and lowest <= int(text) <= highest):
        raise QueryError(
            400,
            ErrorCode.INVALID_PAGE,
            f"{name} must be a whole number from {lowest:,} to {highest:,} (default {default:,}), not {ids.clip(text)}",
            name,
        )
    return int(text)


def _parameters(pairs: Iterable[tuple[str, str]], required: tuple[str, ...], optional: tuple[str, ...], path: str):
    """The parameters of a query to ``path`` by name: a 400 for one given twice or one of
    ``required`` missing; others than ``required`` and ``optional`` are ignored."""
    params: dict[str, str] = {}
    for name, value in pairs:
        if name in required or name in optional:
            if name in params:
                raise QueryError(
                    400,
                    ErrorCode.DUPLICATE_PARAMETER,
                    f"parameter {name!r} is given more than once; give it once",
                    name,
                )
            params[name] = value
    missing = [p for p in required if not params.get(p)]
    if missing:
        raise QueryError(
            400,
            ErrorCode.MISSING_PARAMETER,
            f"missing required parameter{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)}; {path} needs {', '.join(required)}",
            missing[0],
        )
    return params


class QueryError(Exception):
    """An error answer of the service: its status, code (:class:`~metrics_kit.spec.wire.ErrorCode`),
    message and the parameter it is about; :meth:`body` is the answer's body. Not an exception of
    the library (``errors.py``): it never leaves the server (see the module's docstring)."""

    def __init__(self, status: int, code: ErrorCode, message: str, param: str | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.param = param

    def body(self) -> bytes:
        return wire.error_body(self.code, self.message, self.param)


def data_version(fingerprint: str, catalogue: Catalogue) -> str:
    """Names the values a service answers with: it changes when a data file is added, removed,
    rewritten or touched (the aggregates' fingerprint), or when what a metric computes changes
    (the catalogue key, which also covers the engine version and the chain unit)."""
    return hashlib.sha256(f"{fingerprint}/{catalogue_key(catalogue)}".encode()).hexdigest()[:20]


class MetricService:
    def __init__(
        self,
        aggregates: Aggregates,
        catalogue: Catalogue,
        events: Path | None = None,
        *,
        watermark: dt.datetime | None = None,
        lag: float = 0.0,
        clock: Clock = time.time,
        events_again: Callable[[], Path] | None = None,
    ):
        """``events``: the data folder the aggregates were built from, whose rows ``/explain`` lists
        (None: the service has no event data, as when it serves prebuilt aggregates).

        Which periods are complete (``server/serving/completeness.py``): ``watermark``, the one declared
        with the data set (None: none declared), ``lag`` in seconds, and ``clock``, the service's
        time in seconds since the epoch (tests set it).

        ``events_again``: makes the event folder again when it is gone (the demo data set, which
        is generated: the embedded default cannot be restarted by its user)."""
        self.aggregates = aggregates
        self.catalogue = catalogue
        self.events_dir = None if events is None else Path(events)
        self._events: Events | None = None  # made on the first /explain: it loads Ibis's expressions
        self._events_lock = threading.Lock()
        self._events_again = events_again
        self.coverage = aggregates.coverage
        self.data_version = data_version(aggregates.meta["fingerprint"], catalogue)
        self.completeness = Completeness(self.coverage, declared=watermark, lag=lag, clock=clock)

    def answer(self, pairs: Iterable[tuple[str, str]]) -> bytes:
        """The JSON body for one ``/metrics`` query, given its (name, value) pairs."""
        return self.metrics(pairs)[0]

    def metrics(self, pairs: Iterable[tuple[str, str]]) -> tuple[bytes, bool]:
        """The JSON body for one ``/metrics`` query and whether its period is complete now."""
        metric, project, granularity, date_text, found, _ = self._query(pairs, wire.METRICS_PATH, ())
        value, start, end, index = found
        complete = self.completeness.complete(granularity, index)
        # Every string here has passed a pattern of JSON-safe characters or comes from the catalogue.
        body = wire.value_body(metric.name, project, granularity, date_text, start, end, metric.unit, value, complete)
        return body, complete

    def series(self, pairs: Iterable[tuple[str, str]]) -> tuple[bytes, bool]:
        """One page of ``GET /series`` and whether every period on it is complete now: the values
        ``/metrics`` answers for each period from the one containing ``start`` to the one containing
        ``end`` that lies in coverage, with the same checks and error codes; a 404
        ``date_out_of_coverage`` when none does."""
        params = _parameters(pairs, wire.SERIES_PARAMETERS, wire.SERIES_PAGE, wire.SERIES_PATH)
        page: list[int] = []

        def range_and_page(first: dt.date, last: dt.date) -> None:
            # Formats too, so checked before the project's existence, as every format is.
            if last < first:
                raise QueryError(
                    400,
                    ErrorCode.INVALID_DATE,
                    f"end {last.isoformat()} is before start {first.isoformat()}; give an end on or after the start",
                    wire.END,
                )
            page.append(_page_number(params.get(wire.LIMIT), wire.LIMIT, wire.SERIES_LIMIT, 1, wire.SERIES_LIMIT))
            page.append(_page_number(params.get(wire.OFFSET), wire.OFFSET, 0, 0, wire.SERIES_MAX_OFFSET))

        metric, project, granularity, (first, last) = self._checked(params, (wire.START, wire.END), range_and_page)
        limit, offset = page
        values = self.aggregates.values.get((metric.name, project, granularity))
        lowest = highest = 0
        if values is not None and self.coverage is not None:
            lowest = max(0, period_index(first, self.coverage[0], granularity))
            highest = min(len(values), period_index(last, self.coverage[0], granularity) + 1)
        if values is None or lowest >= highest:
            raise QueryError(
                404, ErrorCode.DATE_OUT_OF_COVERAGE, self._range_message(first, last, granularity), wire.START
            )
        total = highest - lowest
        shown = range(lowest + offset, min(highest, lowest + offset + limit))
        bounds = self.aggregates.periods[granularity]
        complete = [self.completeness.complete(granularity, i) for i in shown]
        periods = [(*bounds[i], values[i], done) for i, done in zip(shown, complete, strict=True)]
        following = offset + len(shown) if offset + len(shown) < total else None
        coverage = self.aggregates.meta["coverage"]
        body = wire.series_body(
            metric_name=metric.name,
            project=project,
            granularity=granularity,
            start=params[wire.START],
            end=params[wire.END],
            unit=metric.unit,
            data_version=self.data_version,
            coverage=None if coverage is None else tuple(coverage),
            periods=periods,
            total_periods=total,
            offset=offset,
            limit=limit,
            next_offset=following,
        )
        return body, all(complete)

    def explain(self, pairs: Iterable[tuple[str, str]]) -> bytes:
        """The JSON body for one page of ``/explain``: the event rows behind one value (``explain``)."""
        return self.explain_page(pairs)[0]

    def explain_page(self, pairs: Iterable[tuple[str, str]]) -> tuple[bytes, bool]:
        """One page of ``/explain`` and whether the value's period is complete now."""
        if self.events_dir is None:
            raise QueryError(
                501,
                ErrorCode.EXPLAIN_UNAVAILABLE,
                f"{wire.EXPLAIN_PATH} lists the event rows behind a value, and this service serves prebuilt "
                "aggregates without their event data; serve the data folder they were built from "
                "(metrics-kit serve --data DIR) to explain values",
            )
        metric, project, granularity, date_text, found, page = self._query(pairs, wire.EXPLAIN_PATH, wire.EXPLAIN_PAGE)
        limit = _page_number(page.get(wire.LIMIT), wire.LIMIT, wire.EXPLAIN_LIMIT, 1, wire.EXPLAIN_MAX_LIMIT)
        offset = _page_number(page.get(wire.OFFSET), wire.OFFSET, 0, 0, wire.EXPLAIN_MAX_OFFSET)
        events = self._event_tables(self.events_dir)
        self._unchanged(events)
        value, start, end, index = found
        complete = self.completeness.complete(granularity, index)
        first, last = dt.date.fromisoformat(start), dt.date.fromisoformat(end)
        try:
            explanation, total, rows = events.page(metric, project, first, last, offset, limit)
        except Exception:
            self._unchanged(events)  # a file changed while it was read is a 409, not a 500
            raise
        # Checked again after the read: a file rewritten between the first check and the read would
        # give rows of other data than the values were built from.
        self._unchanged(events)
        opening = None
        if metric.aggregation == "ending_balance":
            opening = self._opening_balance(metric.name, project, granularity, first)
        following = offset + len(rows) if offset + len(rows) < total else None
        body = wire.explain_page_body(
            metric_name=metric.name,
            project=project,
            granularity=granularity,
            date=date_text,
            period_start=start,
            period_end=end,
            unit=metric.unit,
            value=value,
            complete=complete,
            aggregation=metric.aggregation,
            source=metric.source,
            select={column: list(values) for column, values in metric.select.items()},
            formula=explanation.formula,
            value_column=explanation.value_column,
            counted_column=explanation.counted_column,
            opening_balance=opening,
            columns=explanation.columns,
            rows=rows,
            total_rows=total,
            offset=offset,
            limit=limit,
            next_offset=following,
        )
        return body, complete

    def close(self) -> None:
        """Close the connection ``/explain`` opened on the event files, if any (a later page opens
        another). The service's owner calls it when done: left to the interpreter's exit, the
        connection is torn down after the modules it needs."""
        with self._events_lock:
            events, self._events = self._events, None
        if events is not None:
            events.close()

    def last_complete(self, granularity: str) -> dt.date | None:
        """The last day of the last period of ``granularity`` complete now; None when none is."""
        index = self.completeness.last_complete(granularity)
        return None if index is None else dt.date.fromisoformat(self.aggregates.periods[granularity][index][1])

    def _unchanged(self, events: Events) -> None:
        """A 409 when the event files are no longer those the values were built from."""
        if events.changed():
            remedy = (
                f"delete the folder {events.directory} and it is made again as it was"
                if self._events_again is not None
                else "restart the service to build from them"
            )
            raise QueryError(
                409,
                ErrorCode.EVENTS_CHANGED,
                f"the event files in {events.directory.name}/ changed after this service built its values, "
                f"so their rows would not explain the values it serves; {remedy}",
            )

    def _event_tables(self, directory: Path) -> Events:
        # Imported here: the first /metrics answer never waits for /explain's modules.
        from metrics_kit.server.serving.explain import Events

        with self._events_lock:
            if self._events is None:
                self._events = Events(directory, self.aggregates.meta["fingerprint"])
            if self._events_again is not None and not directory.is_dir():
                # A generated folder (the demo's) deleted with the cache folder: made again, it
                # holds the same files, so its rows explain the values built from the first.
                self._events_again()
                self._events.close()
                self._events = Events(directory, self.aggregates.meta["fingerprint"])
            return self._events

    def _opening_balance(self, metric: str, project: str, granularity: str, first: dt.date) -> float:
        """The balance the period starts from: the previous period's, else (the first period of
        coverage) the initial circulating supply."""
        assert self.coverage is not None
        i = period_index(first, self.coverage[0], granularity)
        if i > 0:
            return float(self.aggregates.values[metric, project, granularity][i - 1])
        return float(self.aggregates.projects[project].get("initial_circulating_supply") or 0.0)

    def _query(
        self, pairs: Iterable[tuple[str, str]], path: str, optional: tuple[str, ...]
    ) -> tuple[Metric, str, str, str, tuple, dict[str, str]]:
        """The checked metric, project, granularity and date of a query to ``path``, what the
        aggregates hold for them (value, period_start, period_end, index in coverage), and the
        ``optional`` parameters given; a QueryError for the first thing wrong."""
        params = _parameters(pairs, PARAMETERS, optional, path)
        metric, project, granularity, (day,) = self._checked(params, (wire.DATE,))
        found = self.aggregates.find(metric.name, project, granularity, day)
        if found is None:
            raise QueryError(404, ErrorCode.DATE_OUT_OF_COVERAGE, self._coverage_message(day, granularity), wire.DATE)
        return metric, project, granularity, params[wire.DATE], found, {k: params[k] for k in optional if k in params}

    def _checked(
        self,
        params: dict[str, str],
        dates: tuple[str, ...],
        formats: Callable[..., None] | None = None,
    ) -> tuple[Metric, str, str, list[dt.date]]:
        """The metric, project, granularity and ``dates`` of a query's parameters, checked in the
        order a person would fix them: formats (400; ``formats(*days)`` checks those of the path's
        own, raising its QueryError), then the project and whether the metric applies to it (404)."""
        name, project, granularity = params[wire.METRIC_NAME], params[wire.PROJECT], params[wire.GRANULARITY]
        metric = self.catalogue.get(name)
        try:
            if metric is None:
                raise ids.unknown_metric(name, self.catalogue.canonical_names, f"GET {wire.CATALOGUE_PATH}")
            ids.check_granularity(granularity)
            days = [ids.parse_date(params[date], date) for date in dates]
            ids.check_project(project)
        except ValidationError as error:
            raise QueryError(400, _INVALID[str(error.argument)], str(error), error.argument) from None
        if formats is not None:
            formats(*days)

        info = self.aggregates.projects.get(project)
        if info is None:
            raise QueryError(
                404,
                ErrorCode.UNKNOWN_PROJECT,
                f"unknown project {ids.clip(project)}; GET {wire.PROJECTS_PATH} lists the projects",
                wire.PROJECT,
            )
        if not metric.applies_to(info["kinds"], info["regular_pools"]):
            raise QueryError(
                404,
                ErrorCode.METRIC_NOT_APPLICABLE,
                f"{metric.name} applies to {metric.restriction}; {project} is of kind "
                f"{', '.join(info['kinds'])}" + (" with regular pools" if info["regular_pools"] else ""),
                wire.METRIC_NAME,
            )
        return metric, project, granularity, days

    def _range_message(self, first: dt.date, last: dt.date, granularity: str) -> str:
        if self.coverage is None:
            return "this data set has no events, so no date is covered"
        return (
            f"the {granularity} periods from the one containing {first.isoformat()} to the one containing "
            f"{last.isoformat()} lie outside the data's coverage, {self.coverage[0].isoformat()} to "
            f"{self.coverage[1].isoformat()}"
        )

    def _coverage_message(self, day: dt.date, granularity: str) -> str:
        if self.coverage is None:
            return "this data set has no events, so no date is covered"
        first, last = self.coverage
        return wire.coverage_message(day.isoformat(), granularity, (first.isoformat(), last.isoformat()))
