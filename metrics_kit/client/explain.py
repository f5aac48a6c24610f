"""``Client.explain``: the event rows behind one value, as a DataFrame, from ``GET /explain``.

``/explain`` is an extension of the reference service (the embedded default, ``metrics-kit serve
--data DIR``), not part of the metrics service specification: a service without it (a 404 on the
path) or without its event data (``serve --aggregates``: ``explain_unavailable``) gets a
ConfigurationError saying so. The rows come in pages, followed up to ``max_rows``; a value with
more rows is refused after the first page (at most ``max_rows`` rows), with how many it has. Every page must come from
one data version (a change while paging fetches the value's rows again), and the answer must be
about the value asked (the same checks as ``/metrics`` answers). The point is resolved, the pages
made again while the data changes and the ``attrs`` of where the rows came from made as for
``value`` and ``series``: by the client's :class:`~metrics_kit.client.source.Source`, which is all
this module uses of the client.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pandas as pd

from metrics_kit.client.cache import complete_when_fetched
from metrics_kit.client.checks import shown_request
from metrics_kit.client.families import DateLike
from metrics_kit.client.fetching import about, detached, error_of, shown, version_of
from metrics_kit.client.frames import Point
from metrics_kit.client.source import Source
from metrics_kit.errors import APIError, ConfigurationError, ResponseFormatError, ValidationError
from metrics_kit.spec import wire
from metrics_kit.spec.wire import ErrorCode

MAX_ROWS = 100_000  # the default bound of one explain call
MOST_ROWS = 10_000_000  # the highest max_rows allowed
# A 404 with one of these codes is about the question (the service has /explain); any other 404
# means the service has no such path.
_ABOUT_THE_QUESTION = (ErrorCode.UNKNOWN_PROJECT, ErrorCode.METRIC_NOT_APPLICABLE, ErrorCode.DATE_OUT_OF_COVERAGE)
# How the client holds each type of explain column (times: see _frame).
_DTYPES = {
    wire.ColumnType.COUNT: "int64",
    wire.ColumnType.FLAG: bool,
    wire.ColumnType.AMOUNT: "float64",
    wire.ColumnType.TEXT: object,
}
# The first page, its value checked against the question, every row, the data version, when the
# first page was asked and what masks the service's text.
Pages = tuple[wire.ExplainPage, wire.Parsed, list[list[Any]], str, float, Callable[[str], str]]


def check_max_rows(max_rows: object) -> int:
    if isinstance(max_rows, bool) or not isinstance(max_rows, int) or not 1 <= max_rows <= MOST_ROWS:
        raise ValidationError(f"max_rows must be a whole number from 1 to {MOST_ROWS:,}, not {max_rows!r}", "max_rows")
    return max_rows


def explain(source: Source, metric: str, project: str, granularity: str, date: DateLike, max_rows: int) -> pd.DataFrame:
    """See ``Client.explain``: the rows behind one value of ``source``'s service."""
    max_rows = check_max_rows(max_rows)
    point = source.point(metric, project, granularity, date)
    first, value, rows, version, sent, hide = source.settled(
        lambda: detached(_pages, source, point, max_rows),
        f"while the rows of {point.metric} for {point.project} were fetched page by page",
    )
    frame = _frame(first.columns, rows)
    fields = first.fields
    last = dt.date.fromisoformat(str(value.period_end))
    # The service's words about the value (its formula, say) are text of the service: masked.
    answered = {
        name: _hidden(fields[name], hide) if name in wire.EXPLAIN_WORDS else fields[name] for name in wire.EXPLAIN_ABOUT
    }
    # The bounds as the days they name (checked with the first page): as written, they are the service's text.
    answered.update(period_start=value.period_start, period_end=value.period_end)
    answered["complete"] = complete_when_fetched(value.complete, last, sent)
    source.discovery.saw(version, source.cache())
    frame.attrs = {
        "metric": point.metric,
        "project": point.project,
        "granularity": point.granularity,
        **answered,
        # fresh: every page came from the service now, under this version
        **source.attrs([version], fresh=True),
    }
    return frame


def _pages(source: Source, point: Point, max_rows: int) -> Pages | None:
    """The first page, every row, the data version, when the first page was asked and what masks the
    service's text; None when the data version changed between pages."""
    transport, calendar, metric = source.transport(), source.calendar, source.metric(point.metric)
    params = dict(zip(wire.PARAMETERS, point, strict=True))
    limit = min(max_rows, wire.EXPLAIN_MAX_LIMIT)
    offset, rows, first, checked, version = 0, [], None, None, ""
    sent = source.clock()
    while True:
        reply = transport.get(wire.EXPLAIN_PATH, {**params, wire.LIMIT: str(limit), wire.OFFSET: str(offset)})
        url, hide = shown_request(reply.url), shown(reply)  # the service's text in a message: masked
        if reply.status != 200:
            raise _refused(source.service, error_of(reply, url, source.clock))
        page = wire.explain_page(reply.body, url, hide)
        answered_version = version_of(reply) or ""
        if first is None:
            checked = about(point, wire.explained(page), metric, calendar, url, hide)
            if page.total_rows > max_rows:
                raise ValidationError(
                    f"{point.metric} for {point.project} over the {point.granularity} period starting {point.date} "
                    f"is made of {page.total_rows:,} event rows; explain returns at most max_rows={max_rows:,}. "
                    f"Pass a larger max_rows= (up to {MOST_ROWS:,})"
                    + (", or explain a shorter period (granularity='1_day')" if point.granularity != "1_day" else ""),
                    "max_rows",
                )
            first, version = page, answered_version
        elif answered_version != version or page.total_rows != first.total_rows or page.columns != first.columns:
            return None
        rows.extend(page.rows)
        if page.next_offset is None or len(rows) >= first.total_rows:
            break
        if page.next_offset <= offset or not page.rows:
            raise ResponseFormatError(
                f"the answer from {url} names a next page ({page.next_offset}) that does not move on"
            )
        offset = page.next_offset
    if len(rows) != first.total_rows:
        raise ResponseFormatError(
            f"{shown_request(reply.url)}: the pages held {len(rows):,} rows where the answer says {first.total_rows:,}"
        )
    assert checked is not None
    return first, checked, rows, version, sent, hide


def _refused(service: str, error: APIError) -> Exception:
    """The error for an answer other than 200: a service without /explain, or without the event
    data it needs, is told as such; any other error as the service gave it."""
    if error.status == 404 and error.code not in _ABOUT_THE_QUESTION:
        return ConfigurationError(
            f"the service at {service} does not offer explain (GET {wire.EXPLAIN_PATH} answered 404): "
            "explain is an extension of the metrics_kit reference service (the embedded default, or "
            "metrics-kit serve --data DIR), not part of the metrics service specification. Its values can be "
            "fetched (value, series, frame) but not explained"
        )
    if error.code == ErrorCode.EXPLAIN_UNAVAILABLE:
        return ConfigurationError(
            f"the service at {service} cannot explain values: {error.message}",
        )
    return error


def _hidden(words: Any, hide: Callable[[str], str]) -> Any:
    """The service's words (text, or text in lists and dicts, as ``select``) through ``hide``."""
    if isinstance(words, str):
        return hide(words)
    if isinstance(words, list):
        return [_hidden(word, hide) for word in words]
    if isinstance(words, dict):
        return {key: _hidden(word, hide) for key, word in words.items()}
    return words


def _frame(columns: list[str], rows: list[list[Any]]) -> pd.DataFrame:
    """The rows with each column typed by the wire's type of it (``wire.explain_column``): times as
    UTC timestamps (microseconds), counts as int64, amounts as float64, flags (``counted``) as bool,
    the rest as text."""
    frame = pd.DataFrame(rows, columns=columns) if rows else pd.DataFrame({c: [] for c in columns}, dtype=object)
    for column in columns:
        kind = wire.explain_column(column)
        if kind == wire.ColumnType.TIME:
            # Microseconds, as the service writes them (and as frames.DATES): pandas would infer
            # seconds for a value without rows.
            frame[column] = pd.to_datetime(frame[column], utc=True, format="ISO8601").astype("datetime64[us, UTC]")
        else:
            frame[column] = frame[column].astype(_DTYPES[kind])
    return frame
