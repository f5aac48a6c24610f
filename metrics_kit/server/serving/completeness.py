"""When a period is complete: the service's one rule, applied when it answers (docs/service.md,
"Complete periods").

A period is complete when it starts on or after the first day of coverage and its end, midnight
UTC after its last day, is at or before the data's *watermark*: the instant before which every
event is in the data set. The watermark is

- the one declared with the data set, where there is one (``serve --watermark``, else the data
  folder's ``watermark.json``, else the one prebuilt aggregates recorded from it), but never later
  than the service's clock: no period is complete before it has ended;
- else the earlier of the service's clock less the lag (``serve --lag``, ``METRICS_KIT_LAG``: for
  exports that arrive late) and the end of the UTC day of the last event. A historical data set's
  last day is then complete, and today's partial day never is.

So a period turns complete as time passes, without a rebuild. :meth:`Completeness.complete` is on
the hot path of ``/metrics``: it compares a period's index with a per-granularity boundary, and
works the boundaries out again only when the clock crosses the next period end (or goes back).
"""

from __future__ import annotations

import bisect
import datetime as dt
import json
import math
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from metrics_kit.errors import ConfigurationError, DataFormatError
from metrics_kit.spec.calendar import GRANULARITIES, period_bounds, period_starts

# Declares a data folder's watermark: {"watermark": "2025-07-01T00:00:00Z"} (docs/data-format.md).
WATERMARK_FILE = "watermark.json"
LAG_ENV = "METRICS_KIT_LAG"
# A testing hook: the service's clock stands still at this instant (docs/service.md).
NOW_ENV = "METRICS_KIT_NOW"
MAX_LAG_DAYS = 366
_LAG = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd]?)", re.ASCII)
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_INSTANT_EXAMPLE = "such as 2025-07-01T00:00:00Z"

Clock = Callable[[], float]  # seconds since the epoch, as time.time


def parse_instant(text: object, name: str) -> dt.datetime:
    """An ISO 8601 instant with its zone (``Z`` or an offset), as an aware UTC datetime; a
    ValueError naming ``name`` otherwise. A date alone is refused: whose midnight would it be?"""
    allowed = f"{name} must be an ISO 8601 instant with its zone, {_INSTANT_EXAMPLE}, not {text!r}"
    if not isinstance(text, str) or "T" not in text.upper():
        raise ValueError(allowed)
    try:
        # RFC 3339 allows a lower-case t and z, which Python's reader does not take: the rest of an
        # instant has no letter that upper case would change.
        instant = dt.datetime.fromisoformat(text.strip().upper())
    except ValueError:
        raise ValueError(allowed) from None
    if instant.tzinfo is None:
        raise ValueError(allowed + " (without a zone, the instant is ambiguous; Z is UTC)")
    return instant.astimezone(dt.UTC)


def parse_lag(value: object, name: str = "lag") -> float:
    """Seconds from a duration such as ``2h``, ``90m``, ``45s``, ``1d`` or a number of seconds."""
    allowed = f"{name} must be a duration from 0 to {MAX_LAG_DAYS}d, such as 2h, 90m, 45s or 1d"
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ConfigurationError(f"{allowed}, not {value!r}")
    if isinstance(value, str):
        match = _LAG.fullmatch(value.strip().lower())
        if match is None:
            raise ConfigurationError(f"{allowed}, not {value!r}")
        seconds = float(match[1]) * _UNIT_SECONDS[match[2]]
    else:
        seconds = float(value)
    if not (math.isfinite(seconds) and 0 <= seconds <= MAX_LAG_DAYS * 86400):
        raise ConfigurationError(f"{allowed}, not {value!r}")
    return seconds


def lag_text(seconds: float) -> str:
    """A lag as it is written: ``2d``, ``90m``, ``45s`` (the largest unit that is exact)."""
    for unit in ("d", "h", "m"):
        if seconds and seconds % _UNIT_SECONDS[unit] == 0:
            return f"{seconds / _UNIT_SECONDS[unit]:g}{unit}"
    return f"{seconds:g}s"


def lag_from_environment() -> float:
    """``$METRICS_KIT_LAG`` in seconds (0 when unset)."""
    text = os.environ.get(LAG_ENV, "").strip()
    return parse_lag(text, LAG_ENV) if text else 0.0


def clock_from_environment() -> Clock:
    """The system clock; with ``$METRICS_KIT_NOW`` set (a testing hook), a clock standing at that instant."""
    text = os.environ.get(NOW_ENV, "").strip()
    if not text:
        return time.time
    try:
        fixed = parse_instant(text, NOW_ENV).timestamp()
    except ValueError as error:
        raise ConfigurationError(str(error), argument="now") from None
    return lambda: fixed


def read_declaration(folder: Path) -> dt.datetime | None:
    """The watermark ``folder/watermark.json`` declares, None without the file; a DataFormatError
    naming the file when it is not ``{"watermark": "<instant>"}``."""
    if not Path(folder).is_dir():  # the data folder's own check says what is wrong with it
        return None
    path = Path(folder) / WATERMARK_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise DataFormatError(f"{path}: cannot be read: {error}") from None
    return parse_declaration(text, str(path))


def parse_declaration(text: str, where: str) -> dt.datetime:
    """The watermark a ``watermark.json``'s text declares (``where``: the file, as messages name it,
    a path or a URL); a DataFormatError naming it when it is not ``{"watermark": "<instant>"}``."""
    try:
        declared = json.loads(text)
    except json.JSONDecodeError as error:
        raise DataFormatError(f"{where}: not JSON ({error})") from None
    if not isinstance(declared, dict) or set(declared) != {"watermark"}:
        raise DataFormatError(
            f'{where}: must be one JSON object, {{"watermark": "<instant>"}}, {_INSTANT_EXAMPLE}: the instant '
            "before which every event is in the data"
        )
    try:
        return parse_instant(declared["watermark"], "watermark")
    except ValueError as error:
        raise DataFormatError(f"{where}: {error}") from None


def utc_text(instant: dt.datetime) -> str:
    """An instant as ISO 8601 in UTC with ``Z`` (a naive datetime is taken as UTC)."""
    if instant.tzinfo is not None:
        instant = instant.astimezone(dt.UTC).replace(tzinfo=None)
    return instant.isoformat(timespec="microseconds") + "Z"


def _epoch(day: dt.date) -> float:
    return dt.datetime.combine(day, dt.time(), dt.UTC).timestamp()


class Completeness:
    """Which periods of a data set are complete at the clock's time.

    ``coverage``: the first and last day with an event (the last event's day: of its time, only the
    day counts); ``declared``: the declared watermark; ``lag``: seconds; ``clock``: the time in
    seconds since the epoch."""

    def __init__(
        self,
        coverage: tuple[dt.date, dt.date] | None,
        *,
        declared: dt.datetime | None = None,
        lag: float = 0.0,
        clock: Clock = time.time,
    ):
        self.coverage = coverage
        self.declared = None if declared is None else declared.timestamp()
        self.lag = lag
        self.clock = clock
        # Per granularity: the exclusive end of each period of coverage (epoch seconds), and the
        # index of the first that starts on or after the first day of coverage (0 or 1).
        self._ends: dict[str, list[float]] = {}
        self._first: dict[str, int] = {}
        self._data_end: float | None = None
        if coverage is not None:
            first, last = coverage
            self._data_end = _epoch(last + dt.timedelta(days=1))
            for granularity in GRANULARITIES:
                starts = list(period_starts(first, last, granularity))
                self._ends[granularity] = [
                    _epoch(period_bounds(s, granularity)[1] + dt.timedelta(days=1)) for s in starts
                ]
                self._first[granularity] = 0 if starts[0] >= first else 1
        # (since, until, {granularity: periods ended by the watermark}): the boundaries hold while
        # since <= clock < until. One tuple, replaced whole: a reader never sees half of a change.
        self._state: tuple[float, float, dict[str, int]] = (math.inf, -math.inf, {})

    def watermark(self, now: float | None = None) -> float | None:
        """The watermark at ``now`` (default: the clock), in epoch seconds; None without events."""
        now = self.clock() if now is None else now
        if self.declared is not None:
            return min(self.declared, now)
        if self._data_end is None:
            return None
        return min(now - self.lag, self._data_end)

    def watermark_text(self, now: float | None = None) -> str | None:
        mark = self.watermark(now)
        return None if mark is None else utc_text(dt.datetime.fromtimestamp(mark, dt.UTC))

    def complete(self, granularity: str, index: int) -> bool:
        """Whether period ``index`` of coverage (``Aggregates.find``'s) at ``granularity`` is complete now."""
        # _ended's body, inline: this is on every /metrics answer.
        now = self.clock()
        state = self._state
        if not state[0] <= now < state[1]:
            state = self._state = self._boundaries(now)
        return self._first[granularity] <= index < state[2][granularity]

    def last_complete(self, granularity: str) -> int | None:
        """The index of the last period of ``granularity`` complete now; None when none is."""
        if self.coverage is None:
            return None
        index = self._ended()[granularity] - 1
        return index if index >= self._first[granularity] else None

    def _ended(self) -> dict[str, int]:
        """Per granularity, how many periods of coverage have ended by the watermark, now."""
        now = self.clock()
        since, until, ended = self._state
        if not since <= now < until:
            since, until, ended = self._state = self._boundaries(now)
        return ended

    def _boundaries(self, now: float) -> tuple[float, float, dict[str, int]]:
        mark = self.watermark(now)
        ended = {g: 0 if mark is None else bisect.bisect_right(ends, mark) for g, ends in self._ends.items()}
        since, until = -math.inf, math.inf
        for granularity, ends in self._ends.items():
            k = ended[granularity]
            if k:
                since = max(since, self._reached(ends[k - 1]))
            if k < len(ends):
                until = min(until, self._reached(ends[k]))
        return min(since, now), until, ended

    def _reached(self, end: float) -> float:
        """The clock time from which the watermark is at or past ``end`` (inf: never)."""
        if self.declared is not None:
            return end if end <= self.declared else math.inf
        assert self._data_end is not None
        return end + self.lag if end <= self._data_end else math.inf
