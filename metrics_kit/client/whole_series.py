"""Points to answers through ``GET /series``: every value of one series in one request, where the
service advertises it (an extension of the reference service; a vendor's service is asked one value
per request, as the specification says, by :mod:`metrics_kit.client.fetching`).

The points of a pull are grouped by series (metric, project, granularity); a series of two points
or more is asked from its first period to its last, a page at a time (at most the page size the
service advertised), every series' first page at once and then the next pages. Each period an
answer lists goes through the very checks and reading of a ``/metrics`` answer
(:func:`~metrics_kit.client.fetching.about`: the same rules and messages; ``wire.series_page``
reads each value as ``wire.metric_value`` does) and is handed to ``take`` with the page's data
version and the time its request was sent, as :func:`~metrics_kit.client.fetching.run` hands a
``/metrics`` answer. A change of data version between pages is then handled as between two
``/metrics`` answers (``Client.fetch`` asks the values of the older version again).

What this path cannot answer as ``/metrics`` would is left to ``/metrics``, one value per request,
so that its value or error is exactly that path's: a point the answer does not list (outside the
data's coverage), and every point of a series whose ``/series`` answer is an error about the
question (a 400 or a 404: ``date_out_of_coverage``, ``unknown_project``, ...). An error about the
service or the key rather than the question (a 401 or 403, a 429 after the retries, a 5xx, no
answer, or an answer that is not a page of a series) stands for every point of the series not yet
answered: asking each of them again would only repeat it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from metrics_kit.client.fetching import BATCH, Take, about, detached, error_of, shown, version_of
from metrics_kit.client.frames import Point
from metrics_kit.client.settings import shown_request
from metrics_kit.client.transports import Reply, Transport, answers_of
from metrics_kit.errors import APIError, ConfigurationError, MetricsKitError, ResponseFormatError, TransportError
from metrics_kit.spec import wire
from metrics_kit.spec.calendar import Calendar
from metrics_kit.spec.catalogue import Metric

__all__ = ["run"]

# Statuses of a /series answer that say something about the service or the key, not the question:
# the same for every point of the series.
_ABOUT_THE_SERVICE = frozenset({401, 403, 429})


@dataclass
class _Series:
    """One series of a pull: its points by their period's first day, those not answered yet, and
    where its next page starts."""

    metric: Metric
    first: Point
    points: dict[str, Point]
    waiting: dict[str, Point] = field(default_factory=dict)
    offset: int = 0
    pages: int = 0
    limit: int = 1

    def request(self, limit: int) -> tuple[str, dict[str, str]]:
        self.limit = limit
        dates = sorted(self.points)
        params = {
            wire.METRIC_NAME: self.first.metric,
            wire.PROJECT: self.first.project,
            wire.GRANULARITY: self.first.granularity,
            wire.START: dates[0],
            wire.END: dates[-1],
            wire.LIMIT: str(limit),
            wire.OFFSET: str(self.offset),
        }
        return wire.SERIES_PATH, params


def run(
    transport: Transport,
    points: list[Point],
    metrics: Mapping[str, Metric],
    calendar: Calendar,
    take: Take,
    limit: int,
    clock: Callable[[], float] = time.time,
) -> list[Point]:
    """Hands each point ``/series`` answers to ``take`` (as :func:`fetching.run` does) and returns
    the points to ask one value per request: those of series of one point, those the answers do not
    list, and those of a series whose answer is an error about the question. ``limit``: the most
    periods of a page, as the service advertised it."""
    groups: dict[tuple[str, str, str], _Series] = {}
    alone: list[Point] = []
    for point in points:
        key = (point.metric, point.project, point.granularity)
        series = groups.get(key)
        if series is None:
            series = groups[key] = _Series(metrics[point.metric], point, {})
        series.points[point.date] = point
    per_value: list[Point] = []
    asking: list[_Series] = []
    for series in groups.values():
        if len(series.points) == 1:
            alone.append(series.first)
        else:
            series.waiting = dict(series.points)
            asking.append(series)
    while asking:
        following: list[_Series] = []
        for i in range(0, len(asking), BATCH):
            chunk = asking[i : i + BATCH]
            sent = clock()
            answers = answers_of(transport, [series.request(limit) for series in chunk])
            try:
                for index, reply in answers:
                    _answered(chunk[index], reply, calendar, take, sent, clock, per_value, following)
            except BaseException:
                for index, reply in answers.received():
                    _answered(chunk[index], reply, calendar, take, sent, clock, per_value, following)
                raise
        asking = following
    return alone + per_value


def _answered(
    series: _Series,
    reply: Reply | TransportError,
    calendar: Calendar,
    take: Take,
    sent: float,
    clock: Callable[[], float],
    per_value: list[Point],
    following: list[_Series],
) -> None:
    """One page's answer: its periods taken, and the series either done (its points not listed left
    to ``per_value``) or put in ``following`` for its next page."""
    if isinstance(reply, TransportError):
        return _fail_all(series, reply, take, sent)
    url = shown_request(reply.url)
    hide = shown(reply, url)
    if reply.status != 200:
        error = error_of(reply, url, clock)
        if error.status in _ABOUT_THE_SERVICE or error.status >= 500:
            return _fail_all(series, error, take, sent)
        per_value.extend(series.waiting.values())  # the question's error: as /metrics gives it, point by point
        series.waiting.clear()
        return None
    try:
        page = detached(_page, reply.body, series.metric.is_count, url, hide)
    except MetricsKitError as error:
        return _fail_all(series, error, take, sent)
    version = version_of(reply)
    granularity = series.first.granularity
    for parsed in page.periods:
        day = wire.period_day(parsed.period_start)
        point = series.waiting.get(calendar.start(day, granularity).isoformat()) if day is not None else None
        if day is None:  # an unreadable bound: about() words the error, for every point not answered
            try:
                detached(about, series.first, parsed, series.metric, calendar, url, hide)
            except (ResponseFormatError, ConfigurationError, APIError) as error:
                return _fail_all(series, error, take, sent)
            continue
        if point is None:  # a period not asked (cached), or already answered
            continue
        del series.waiting[point.date]
        try:
            checked = detached(about, point, parsed, series.metric, calendar, url, hide)
        except (ResponseFormatError, ConfigurationError, APIError) as error:
            take(point, error, None, sent)
        else:
            take(point, checked, version, sent)
    series.pages += 1
    moved = page.next_offset is not None and page.next_offset > series.offset and page.periods
    if page.next_offset is None or not series.waiting:
        per_value.extend(series.waiting.values())  # not listed: outside the data's coverage
        series.waiting.clear()
    elif not moved or series.pages > page.total_periods // series.limit + 1:
        bad = ResponseFormatError(f"the answer from {url} names a next page ({page.next_offset}) that does not move on")
        _fail_all(series, bad, take, sent)
    else:
        series.offset = page.next_offset
        following.append(series)
    return None


def _page(body: bytes, is_count: bool, url: str, hide: Callable[[str], str]) -> wire.SeriesPage:
    return wire.series_page(body, is_count=is_count, url=url, mask=hide)


def _fail_all(series: _Series, error: Exception, take: Take, sent: float) -> None:
    """``error`` stands for every point of ``series`` not answered yet."""
    for point in series.waiting.values():
        take(point, error, None, sent)
    series.waiting.clear()
