"""Points to answers: requests in batches through the transport, each answer read or turned into
the error it stands for, whichever transport carried it.

An answer must be about the period asked for. The client names every period by its first day, in
its own calendar; a service that answers for another period counts weeks differently, and its
weekly values would be labelled with the wrong weeks. That is refused with the week_start to set.
Every other field an answer gives must match the question too: the metric (its canonical name, or an
alias of it), the project, the period's last day and the unit. An answer to another question is a
ResponseFormatError naming each mismatch, and is never cached. Fields an answer leaves out (a bare
number, as the specification allows) are not checked.

A period's bounds are read exactly: an ISO date, or an ISO date-time on that day (in UTC); anything
else (text after the date, another format) is a ResponseFormatError, and the answer is never
cached. What the client keeps of them is the day they name, never the service's text.

Each answer also brings the data version it came from (the ``X-Data-Version`` header), or None: as
the client keeps it (:func:`version_of`), the key masked in it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

from metrics_kit.client.frames import Point
from metrics_kit.client.settings import shown_request
from metrics_kit.client.transports import Reply, Transport, answers_of
from metrics_kit.errors import APIError, ConfigurationError, MetricsKitError, ResponseFormatError, TransportError
from metrics_kit.spec import wire
from metrics_kit.spec.calendar import Calendar
from metrics_kit.spec.catalogue import Metric

PROGRESS_THRESHOLD = 100  # points to fetch before a progress bar is worth showing
BATCH = 256  # requests per hand-off to the transport (a hand-off to another thread costs more than an answer)
PARAMS = wire.PARAMETERS  # a Point's fields, as the wire names them
VERSION_HEADER = wire.DATA_VERSION_HEADER
T = TypeVar("T")


Take = Callable[[Point, wire.Parsed | Exception, str | None, float], None]  # see run


def run(
    transport: Transport,
    points: list[Point],
    metrics: Mapping[str, Metric],
    calendar: Calendar,
    take: Take,
    clock: Callable[[], float] = time.time,
) -> None:
    """Hands each point to ``take`` with its parsed answer (or the exception that stands for its
    failure), the data version the answer names (None when it names none) and when its request was
    sent, as the answers come.

    The send time is read on ``clock`` before the batch goes out, so it is the earliest send time of
    the batch: the service counted the value at that moment or later, never earlier. The completeness
    rule compares a period's end with it, so an answer that arrives after midnight for a value
    counted before is never taken for complete (when in doubt, incomplete).

    Interrupted (a KeyboardInterrupt, wherever it lands while a batch is out), the answers of the
    batch that had come and were not yet taken are taken before the interrupt goes on, and the
    requests not yet sent are not sent: an interrupted pull keeps every answer it received."""
    for i in range(0, len(points), BATCH):
        chunk = points[i : i + BATCH]
        sent = clock()
        answers = answers_of(transport, [(wire.METRICS_PATH, dict(zip(PARAMS, p, strict=True))) for p in chunk])
        try:
            for index, reply in answers:
                point = chunk[index]
                take(point, *_outcome(point, reply, metrics, calendar, clock), sent)
        except BaseException:
            for index, reply in answers.received():
                point = chunk[index]
                # Another week's answer (a ConfigurationError) never stands in for what stopped the pull.
                with contextlib.suppress(ConfigurationError):
                    take(point, *_outcome(point, reply, metrics, calendar, clock), sent)
            raise


def _outcome(
    point: Point,
    reply: Reply | TransportError,
    metrics: Mapping[str, Metric],
    calendar: Calendar,
    clock: Callable[[], float],
) -> tuple[wire.Parsed | Exception, str | None]:
    """The parsed value of an answer and its data version, or the exception that stands for it."""
    if isinstance(reply, TransportError):
        return reply, None
    try:
        return read(point, reply, metrics[point.metric], calendar, clock), version_of(reply)
    except (APIError, ResponseFormatError) as error:
        return error, None


def read(
    point: Point, reply: Reply, metric: Metric, calendar: Calendar, clock: Callable[[], float] = time.time
) -> wire.Parsed:
    """The value in a reply, or the error it stands for (raised).

    Every text of the service in the error is masked (:func:`shown`); the body parsed is the one that
    came. The error is raised from here, without the frames that read the body: a traceback's locals
    (``%xmode Verbose``) would show the service's text as it came, key and all."""
    return detached(_read, point, reply, metric, calendar, clock)


def detached(read: Callable[..., T], *args: Any) -> T:
    """``read(*args)``, whose error (a MetricsKitError) is raised from here without the frames it was
    raised in, nor the exceptions it was raised while handling: their locals (``%xmode Verbose``,
    ``pytest --showlocals``) hold a service's text as it came, before it was masked."""
    try:
        return read(*args)
    except MetricsKitError as error:
        failed = error.with_traceback(None)
        failed.__context__ = failed.__cause__ = None
    raise failed  # outside the except block: no link to the frames it was raised in


def _read(point: Point, reply: Reply, metric: Metric, calendar: Calendar, clock: Callable[[], float]) -> wire.Parsed:
    url = shown_request(reply.url)
    hide = shown(reply, url)
    if reply.status != 200:
        raise error_of(reply, url, clock)
    parsed = wire.metric_value(reply.body, is_count=metric.is_count, url=url, mask=hide)
    return about(point, parsed, metric, calendar, url, hide)


def about(
    point: Point, parsed: wire.Parsed, metric: Metric, calendar: Calendar, url: str, hide: Callable[[str], str]
) -> wire.Parsed:
    """``parsed`` checked against the question (``point``), its period's bounds as the ISO days they
    name (the service's text of them is kept nowhere); raised: the ResponseFormatError of a bound
    that is not a date, of an answer about another question, or the ConfigurationError of another week."""
    days = []
    for name, bound in ((wire.PERIOD_START, parsed.period_start), (wire.PERIOD_END, parsed.period_end)):
        day = wire.period_day(bound) if bound is not None else None
        if bound is not None and day is None:
            said = hide(str(bound))
            raise ResponseFormatError(
                f"the answer from {url} has a {name} that is neither an ISO date (such as 2025-06-01) nor an "
                f"ISO date-time on that day: {said[:200] + ('...' if len(said) > 200 else '')!r}"
            )
        days.append(day)
    start, end = days
    if start is not None and start.isoformat() != point.date:
        raise other_period(point, str(parsed.period_start), url, calendar.week_start, hide)
    wrong = mismatches(point, parsed, metric, calendar, hide, end)
    if wrong:
        raise ResponseFormatError(f"the answer from {url} is not about what was asked: {'; '.join(wrong)}")
    # Made anew: dataclasses.replace is slow for a call made once a value.
    return wire.Parsed(
        parsed.value,
        parsed.unit,
        parsed.complete,
        start.isoformat() if start is not None else None,
        end.isoformat() if end is not None else None,
        parsed.metric_name,
        parsed.project,
        parsed.reason,
    )


def version_of(reply: Reply) -> str | None:
    """The data version ``reply`` names (its ``X-Data-Version``), as the client keeps it (see
    :func:`kept_version`); None when it names none."""
    return kept_version(reply.header(VERSION_HEADER), reply.mask)


def kept_version(version: str | None, mask: Callable[[str], str]) -> str | None:
    """A data version of the service as the client keeps it, in the cache, ``attrs`` and messages
    alike: as it came, or, when it holds the key, masked (``mask``) with ``#`` and the start of its
    SHA-256 appended, a one-way digest that still tells apart two versions the mask makes alike."""
    if version is None:
        return None
    masked = mask(version)
    if masked == version:
        return version
    return f"{masked}#{hashlib.sha256(version.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


def error_of(reply: Reply, url: str, clock: Callable[[], float] = time.time) -> APIError:
    """The APIError an answer other than 200 stands for, every text of the service in it masked
    (:func:`shown`): its message, code and param, a redirect's Location, a 401's WWW-Authenticate.
    An HTTP-date Retry-After is counted from the answer's Date, else from ``clock`` (the wall clock)."""
    return wire.api_error(
        reply.status,
        reply.body,
        url,
        reply.header(wire.RETRY_AFTER_HEADER),
        header=reply.header,
        mask=shown(reply, url),
        now=clock() if reply.status == 429 else None,
    )


def shown(reply: Reply, url: str | None = None) -> Callable[[str], str]:
    """What a text of ``reply`` goes through before it goes into a message: the transport's mask (the
    key, in every form: ``Secret.mask``), and the path segments that ``shown_request`` masks in the
    URL asked (a service's 404 may echo the path, a token in the base URL and all). ``url``: the URL
    as shown, when the caller has it. The segments are found on the first text hidden: most answers
    put none into a message, and reading every answer pays for nothing it does not use."""
    segments: list[str] | None = None

    def hide(text: str) -> str:
        nonlocal segments
        if segments is None:
            raw = urlsplit(reply.url).path.split("/")
            hidden = urlsplit(url or shown_request(reply.url)).path.split("/")
            segments = [s for s, as_shown in zip(raw, hidden, strict=False) if s and s != as_shown]
        text = reply.mask(text)
        for segment in segments:
            text = text.replace(segment, "***")
        return text

    return hide


def mismatches(
    point: Point,
    parsed: wire.Parsed,
    metric: Metric,
    calendar: Calendar,
    hide: Callable[[str], str],
    last_day: dt.date | None = None,
) -> list[str]:
    """What an answer says it is about that differs from the question (its period's start aside); the
    answer's words shown through ``hide`` (compared as they came). ``last_day``: the day its
    period_end names, when the caller has read it."""
    wrong = []
    if (
        parsed.metric_name is not None
        and parsed.metric_name != metric.name
        and parsed.metric_name not in metric.aliases
    ):
        wrong.append(f"{wire.METRIC_NAME} {hide(parsed.metric_name)!r}, asked {metric.name!r}")
    if parsed.project is not None and parsed.project != point.project:
        wrong.append(f"{wire.PROJECT} {hide(parsed.project)!r}, asked {point.project!r}")
    if parsed.period_end is not None:
        last = calendar.end(dt.date.fromisoformat(point.date), point.granularity)
        if (last_day if last_day is not None else wire.period_day(parsed.period_end)) != last:
            wrong.append(f"period_end {hide(str(parsed.period_end))!r}, the period asked ends {last.isoformat()}")
    if parsed.unit is not None and parsed.unit != metric.unit:
        wrong.append(f"unit {hide(parsed.unit)!r}, the metric is in {metric.unit!r}")
    return wrong


def other_period(point: Point, answered: str, url: str, week_start: str, hide: Callable[[str], str]) -> Exception:
    """The error for an answer about another period than the one asked for (``answered``: the
    period_start it gave, shown whole through ``hide``: a cut could leave part of a key)."""
    said = hide(answered)
    if point.granularity != "1_week":
        return ResponseFormatError(f"the answer from {url} is for the period starting {said}, not {point.date}")
    day = wire.period_day(answered)
    weekday = day.strftime("%A").lower() if day is not None else "another day"
    hint = f"set week_start={weekday!r}" if weekday in ("monday", "sunday") else "no week_start fits it"
    return ConfigurationError(
        f"the service's weeks start on a {weekday}, not a {week_start}: asked for the week of "
        f"{point.date}, it answered for the week of {said} ({url}). Its weekly values would be "
        f"labelled with the wrong weeks; {hint} (Client(week_start=...))",
        argument="week_start",
    )


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(total: int, show: bool | None) -> Any:
    """A tqdm bar for ``total`` values; ``show`` None: only from PROGRESS_THRESHOLD values."""
    if not (total >= PROGRESS_THRESHOLD if show is None else show):
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="metrics", unit="value", leave=False)
