"""Points to answers: requests in batches through the transport, each answer read or turned into
the error it stands for, whichever transport carried it.

An answer must be about the period asked for. The client names every period by its first day, in
its own calendar; a service that answers for another period counts weeks differently, and its
weekly values would be labelled with the wrong weeks. That is refused with the week_start to set.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping
from typing import Any

from metrics_kit.client.frames import Point
from metrics_kit.client.transports import Reply, Transport
from metrics_kit.errors import APIError, ConfigurationError, ResponseFormatError, TransportError
from metrics_kit.spec import wire

PROGRESS_THRESHOLD = 100  # points to fetch before a progress bar is worth showing
BATCH = 256  # requests per hand-off to the transport (a hand-off to another thread costs more than an answer)
PARAMS = ("metric_name", "project", "granularity", "date")  # a Point's fields, as the wire names them


def run(
    transport: Transport, points: list[Point], is_count: Mapping[str, bool], week_start: str
) -> Iterator[tuple[Point, wire.Parsed | Exception]]:
    """Each point with its parsed answer, or the exception that stands for its failure."""
    for i in range(0, len(points), BATCH):
        chunk = points[i : i + BATCH]
        replies = transport.get_many([("/metrics", dict(zip(PARAMS, p, strict=True))) for p in chunk])
        for point, reply in zip(chunk, replies, strict=True):
            if isinstance(reply, TransportError):
                yield point, reply
                continue
            try:
                yield point, read(point, reply, is_count[point.metric], week_start)
            except (APIError, ResponseFormatError) as error:
                yield point, error


def read(point: Point, reply: Reply, is_count: bool, week_start: str) -> wire.Parsed:
    """The value in a reply, or the error it stands for (raised)."""
    if reply.status != 200:
        raise wire.api_error(reply.status, reply.body, reply.url, reply.header("retry-after"))
    parsed = wire.metric_value(reply.body, is_count=is_count, url=reply.url)
    answered = (parsed.period_start or point.date)[:10]
    if answered != point.date:
        raise other_period(point, answered, reply.url, week_start)
    return parsed


def other_period(point: Point, answered: str, url: str, week_start: str) -> Exception:
    """The error for an answer about another period than the one asked for."""
    if point.granularity != "1_week":
        return ResponseFormatError(f"the answer from {url} is for the period starting {answered}, not {point.date}")
    try:
        weekday = dt.date.fromisoformat(answered).strftime("%A").lower()
    except ValueError:
        weekday = "another day"
    hint = f"set week_start={weekday!r}" if weekday in ("monday", "sunday") else "no week_start fits it"
    return ConfigurationError(
        f"the service's weeks start on a {weekday}, not a {week_start}: asked for the week of "
        f"{point.date}, it answered for the week of {answered} ({url}). Its weekly values would be "
        f"labelled with the wrong weeks; {hint} (Client(week_start=...))",
        setting="week_start",
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
