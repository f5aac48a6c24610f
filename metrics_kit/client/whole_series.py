"""Points to answers through ``GET /series``: every value of one series in one request, where the
service advertises it (an extension of the reference service; a vendor's service is asked one value
per request, as the specification says, by :mod:`metrics_kit.client.fetching`).

The points of a pull are grouped by series (metric, project, granularity); a series of two points
or more is asked from its first period to its last, a page at a time (at most the page size the
service advertised, and never more periods than the range has left), every series' first page at
once and then the next pages. Each period an answer lists goes through the very checks and reading
of a ``/metrics`` answer (:func:`~metrics_kit.client.fetching.about`: the same rules and messages;
``wire.series_page`` reads each value as ``wire.metric_value`` does) and is handed to ``take`` with
the page's data version and the time its request was sent, as :func:`~metrics_kit.client.fetching.run`
hands a ``/metrics`` answer. A change of data version between pages is then handled as between two
``/metrics`` answers (``Client.fetch`` asks the values of the older version again).

A listed period answers the point ``/metrics`` would answer with it: the point whose day the period
holds (so a service whose weeks start on another day fails each point as ``/metrics`` fails it,
naming the same week). A period whose value or ``complete`` flag cannot be read fails its point
alone; one whose start cannot be read answers no point (which one it was is not known), so that
point is left to ``/metrics``.

A page is bounded by what was asked: at most the periods its request's ``limit`` asked for (a longer
body is refused unread), a ``total_periods`` within the range's periods, and a ``next_offset`` that
moves on within the range, so a series takes at most as many pages as its range has periods. A
page that breaks these, that lists a period twice (on it or on an earlier page: a contradiction
the client cannot settle), that is about another granularity, or whose body names another data
version than its ``X-Data-Version``, is a ResponseFormatError for every point of the series not yet
answered.

A point a page does not list is outside the data's coverage when the page states a coverage its
period does not meet: it fails at once as ``/metrics`` fails it (``404 date_out_of_coverage``, the
message of ``wire.coverage_message``, for the ``/metrics`` URL that would have asked it), never
asked one value per request. What this path cannot answer as ``/metrics`` would otherwise is left
to ``/metrics``, one value per request, so that its value or error is exactly that path's: a point
the answer does not list inside the coverage (or where no coverage is stated), and every point of
a series whose ``/series`` answer is an error about the question (a 400 or a 404:
``date_out_of_coverage`` for the whole range, ``unknown_project``, ...); the caller bounds how many
that may be (``MAX_POINTS``). An error about the service or the key rather than the question (a 401
or 403, a 429 after the retries, a 5xx, no answer, or an answer that is not a page of a series)
stands for every point of the series not yet answered: asking each of them again would only repeat
it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlencode

from metrics_kit.client.fetching import BATCH, PARAMS, Take, about, detached, error_of, kept_version, shown, version_of
from metrics_kit.client.frames import Point
from metrics_kit.client.settings import shown_request
from metrics_kit.client.transports import Reply, Transport, answers_of
from metrics_kit.errors import (
    APIError,
    ConfigurationError,
    MetricsKitError,
    ResponseFormatError,
    TransportError,
    ValidationError,
)
from metrics_kit.spec import wire
from metrics_kit.spec.calendar import Calendar
from metrics_kit.spec.catalogue import Metric

__all__ = ["run"]

# Statuses of a /series answer that say something about the service or the key, not the question:
# the same for every point of the series.
_ABOUT_THE_SERVICE = frozenset({401, 403, 429})
_WEEK = dt.timedelta(days=6)  # a week's days after its first


@dataclass
class _Series:
    """One series of a pull: its points by their period's first day, those not answered yet, how many
    periods its range has, where its next page starts, the periods its pages listed, and what they
    said of the data's coverage and of their weeks."""

    metric: Metric
    first: Point
    points: dict[str, Point]
    waiting: dict[str, Point] = field(default_factory=dict)
    periods: int = 1  # the periods from its first point's to its last's
    offset: int = 0
    limit: int = 1  # the periods its last request asked for
    listed: set[dt.date] = field(default_factory=set)
    coverage: tuple[dt.date, dt.date] | None = None
    aligned: bool | None = None  # whether every listed period starts where the client's calendar does
    asked_at: str = ""  # the URL of its pages, up to the path: where /metrics would have been asked

    def request(self, most: int) -> tuple[str, dict[str, str]]:
        self.limit = max(1, min(most, self.periods - self.offset))
        dates = sorted(self.points)
        params = {
            wire.METRIC_NAME: self.first.metric,
            wire.PROJECT: self.first.project,
            wire.GRANULARITY: self.first.granularity,
            wire.START: dates[0],
            wire.END: dates[-1],
            wire.LIMIT: str(self.limit),
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
    """Hands each point ``/series`` answers (or fails as ``/metrics`` would) to ``take`` (as
    :func:`fetching.run` does) and returns the points to ask one value per request: those of series
    of one point, those the answers do not list inside the coverage, and those of a series whose
    answer is an error about the question. ``limit``: the most periods of a page, as the service
    advertised it."""
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
            first, last = (dt.date.fromisoformat(day) for day in (min(series.points), max(series.points)))
            series.periods = calendar.index(last, first, series.first.granularity) + 1
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
                    # Another week's answer (a ConfigurationError) never stands in for what stopped the pull.
                    with contextlib.suppress(ConfigurationError):
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
    """One page's answer: its periods taken, and the series either done (its points not listed failed
    as outside the coverage, or left to ``per_value``) or put in ``following`` for its next page."""
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
        page = detached(_page, reply.body, series.metric.is_count, series.limit, url, hide)
        version = detached(_version, reply, page, url)
        days = detached(_checked, series, page, url, hide)
    except MetricsKitError as error:
        return _fail_all(series, error, take, sent)
    series.asked_at = reply.url[: reply.url.rfind(wire.SERIES_PATH)]
    series.coverage = page.coverage or series.coverage
    granularity = series.first.granularity
    for place, (parsed, day) in enumerate(zip(page.periods, days, strict=True)):
        if day is None:  # which point it answers is not known: that point, not listed, is left to /metrics
            continue
        if granularity == "1_week":
            starts = calendar.start(day, granularity) == day
            series.aligned = starts if series.aligned is None else series.aligned and starts
        point = _answering(series, day, calendar)
        if point is None:  # a period not asked (cached, or outside the range), or already answered
            continue
        del series.waiting[point.date]
        if place in page.errors:  # its value or flag cannot be read: it fails, as its /metrics answer would
            take(point, page.errors[place], None, sent)
            continue
        try:
            checked = detached(about, point, parsed, series.metric, calendar, url, hide)
        except (ResponseFormatError, APIError) as error:  # a ConfigurationError (another week) is raised, as there
            take(point, error, None, sent)
        else:
            take(point, checked, version, sent)
    following_offset = page.next_offset
    if following_offset is None or not series.waiting:
        return _done(series, take, sent, per_value)
    if following_offset <= series.offset or following_offset >= series.periods or not page.periods:
        moves = "does not move on" if following_offset <= series.offset or not page.periods else "is past its range"
        bad = ResponseFormatError(f"the answer from {url} names a next page ({following_offset}) that {moves}")
        return _fail_all(series, bad, take, sent)
    series.offset = following_offset
    following.append(series)
    return None


def _page(body: bytes, is_count: bool, most: int, url: str, hide: Callable[[str], str]) -> wire.SeriesPage:
    return wire.series_page(body, is_count=is_count, most=most, url=url, mask=hide)


def _version(reply: Reply, page: wire.SeriesPage, url: str) -> str | None:
    """The page's data version as the client keeps it: its X-Data-Version, else its body's; a
    ResponseFormatError when the two differ (which of them its values are of is not known)."""
    header = reply.header(wire.DATA_VERSION_HEADER)
    if header is not None and page.data_version is not None and header != page.data_version:
        raise ResponseFormatError(
            f"the answer from {url} names one data version in its {wire.DATA_VERSION} and another in its "
            f"{wire.DATA_VERSION_HEADER} header: which one its values are of is not known"
        )
    return version_of(reply) if header is not None else kept_version(page.data_version, reply.mask)


def _checked(series: _Series, page: wire.SeriesPage, url: str, hide: Callable[[str], str]) -> list[dt.date | None]:
    """The day each listed period starts on (None where it cannot be read), once the page is found
    about the series asked, within its range, and listing each period once; else a ResponseFormatError."""
    granularity = series.first.granularity
    if page.granularity is not None and page.granularity != granularity:
        raise ResponseFormatError(
            f"the answer from {url} is not about what was asked: {wire.GRANULARITY} "
            f"{hide(page.granularity)!r}, asked {granularity!r}"
        )
    if page.total_periods > series.periods:
        raise ResponseFormatError(
            f"the answer from {url} says the series has {page.total_periods:,} periods, more than the "
            f"{series.periods:,} of the range asked"
        )
    days = []
    for parsed in page.periods:
        day = wire.period_day(parsed.period_start) if parsed.period_start is not None else None
        if day is not None:
            if day in series.listed:
                raise ResponseFormatError(
                    f"the answer from {url} lists the period starting {day.isoformat()} again: a series lists "
                    "each period once, and which of its values is right is not known"
                )
            series.listed.add(day)
        days.append(day)
    return days


def _answering(series: _Series, day: dt.date, calendar: Calendar) -> Point | None:
    """The point not answered yet that a period starting on ``day`` answers: the one ``/metrics``
    would answer with it, whose first day the period holds (for weeks, the client's week starting in
    it, whatever day the service's weeks start on)."""
    granularity = series.first.granularity
    try:
        start = calendar.start(day + _WEEK if granularity == "1_week" else day, granularity)
    except (OverflowError, ValidationError):  # a week running past the calendar's end
        return None
    return series.waiting.get(start.isoformat())


def _done(series: _Series, take: Take, sent: float, per_value: list[Point]) -> None:
    """The last page came: each point not listed fails as outside the coverage where the pages
    stated one it does not meet, and is left to ``per_value`` otherwise."""
    for point in series.waiting.values():
        if series.coverage is not None and _outside(series, point):
            take(point, _out_of_coverage(series, point), None, sent)
        else:
            per_value.append(point)
    series.waiting.clear()


def _outside(series: _Series, point: Point) -> bool:
    """Whether the period ``/metrics`` would answer for ``point`` misses the stated coverage. Weeks
    whose start the listed periods did not confirm may start up to six days either side of the
    client's: a point is then outside only if every such week is."""
    assert series.coverage is not None
    first, last = series.coverage
    day = dt.date.fromisoformat(point.date)
    granularity = point.granularity
    if granularity == "1_week" and series.aligned is not True:
        return day + _WEEK < first or day - _WEEK > last
    if granularity == "1_day":
        end = day
    elif granularity == "1_week":
        end = day + _WEEK
    else:
        end = (day.replace(day=28) + dt.timedelta(days=4)).replace(day=1) - dt.timedelta(days=1)
    return end < first or day > last


def _out_of_coverage(series: _Series, point: Point) -> APIError:
    """What ``/metrics`` answers for ``point`` outside the stated coverage: ``404 date_out_of_coverage``
    in its words, for the URL that would have asked it."""
    assert series.coverage is not None
    coverage = (series.coverage[0].isoformat(), series.coverage[1].isoformat())
    message = wire.coverage_message(point.date, point.granularity, coverage)
    body = wire.error_body(wire.ErrorCode.DATE_OUT_OF_COVERAGE, message, wire.DATE)
    asked = f"{series.asked_at}{wire.METRICS_PATH}?{urlencode(dict(zip(PARAMS, point, strict=True)))}"
    return wire.api_error(404, body, shown_request(asked))


def _fail_all(series: _Series, error: Exception, take: Take, sent: float) -> None:
    """``error`` stands for every point of ``series`` not answered yet."""
    for point in series.waiting.values():
        take(point, error, None, sent)
    series.waiting.clear()
