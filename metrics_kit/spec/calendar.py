"""Calendar periods, all UTC: a day, a week, a calendar month. The one calendar of metrics_kit.

A period is named by its first day; its end is its last day (inclusive). Any date inside a period
answers for that period. Weeks are ISO weeks (Monday to Sunday) unless a calendar is made with
``week_start="sunday"``, for a service whose weeks run Sunday to Saturday. The reference service
uses ISO weeks (:data:`ISO`); the client takes the week convention of the service it talks to.

Dates past 9999-12-31 do not exist in Python: a period that would end after it (the week of
9999-12-27, Monday, would end on 10000-01-02) does not exist either, and naming one (``start``,
``end``, ``starts``) is a ValidationError, never an OverflowError. December 9999 is whole.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass

from metrics_kit.errors import ValidationError

GRANULARITIES = ("1_day", "1_week", "1_month")
WEEK_STARTS = ("monday", "sunday")
ONE_DAY = dt.timedelta(days=1)


def _unknown(granularity: str) -> ValidationError:
    return ValidationError(f"granularity must be one of {', '.join(GRANULARITIES)}, not {granularity!r}", "granularity")


def _too_far(what: str) -> ValidationError:
    return ValidationError(
        f"{what} reaches past 9999-12-31, the last date metrics_kit can represent; choose an earlier date", "date"
    )


@dataclass(frozen=True)
class Calendar:
    """Period arithmetic for one week convention."""

    week_start: str = "monday"

    def __post_init__(self) -> None:
        if self.week_start not in WEEK_STARTS:
            raise ValidationError(
                f"week_start must be one of {', '.join(WEEK_STARTS)}, not {self.week_start!r}", "week_start"
            )

    @property
    def _week_offset(self) -> int:
        return 0 if self.week_start == "monday" else 1

    def start(self, day: dt.date, granularity: str) -> dt.date:
        """The first day of the period containing ``day`` (a date, or an ISO date string such as
        "2025-01-02"; anything else is a ValidationError naming ``day``)."""
        if type(day) is not dt.date:  # a datetime (pandas' Timestamp too) is a date, but not a day
            day = _a_date(day)
        if granularity == "1_day":
            return day
        if granularity == "1_week":
            back = dt.timedelta(days=(day.weekday() + self._week_offset) % 7)
            if day - dt.date.min < back:
                raise ValidationError(f"the week containing {day.isoformat()} starts before 0001-01-01", "date")
            if dt.date.max - (day - back) < dt.timedelta(days=6):
                raise _too_far(f"the week containing {day.isoformat()}")
            return day - back
        if granularity == "1_month":
            return day.replace(day=1)
        raise _unknown(granularity)

    def next_start(self, start: dt.date, granularity: str) -> dt.date:
        """The first day of the period after the one that starts on ``start``."""
        try:
            if granularity == "1_day":
                return start + ONE_DAY
            if granularity == "1_week":
                return start + dt.timedelta(days=7)
            if granularity == "1_month":
                return (start.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
        except OverflowError:
            raise _too_far(f"the period after the one starting {start.isoformat()}") from None
        raise _unknown(granularity)

    def end(self, day: dt.date, granularity: str) -> dt.date:
        """The last day of the period containing ``day``."""
        start = self.start(day, granularity)  # refuses an unknown granularity
        if granularity == "1_week":
            return start + dt.timedelta(days=6)  # start() refused a week that would end after 9999-12-31
        if granularity == "1_month":
            if start.month == 12:
                return start.replace(day=31)
            return start.replace(month=start.month + 1) - ONE_DAY
        return start

    def bounds(self, day: dt.date, granularity: str) -> tuple[dt.date, dt.date]:
        """First and last day of the period containing ``day``."""
        return self.start(day, granularity), self.end(day, granularity)

    def starts(self, first: dt.date, last: dt.date, granularity: str) -> Iterator[dt.date]:
        """Starts of every period that overlaps ``first``..``last`` (inclusive), in order."""
        start, final = self.start(first, granularity), self.start(last, granularity)
        while start <= final:
            yield start
            if start == final:  # stepping past it could leave the calendar (after 9999-12)
                return
            start = self.next_start(start, granularity)

    def index(self, day: dt.date, origin: dt.date, granularity: str) -> int:
        """Ordinal of the period containing ``day``, counting from the period containing ``origin``."""
        if granularity == "1_day":
            return (day - origin).days
        if granularity == "1_week":
            # Week numbers from the ordinals, not from start(): the server looks up any date, even in
            # a week that would end after 9999-12-31 (it answers that it lies outside its coverage).
            return self._week_number(day) - self._week_number(origin)
        if granularity == "1_month":
            return (day.year - origin.year) * 12 + day.month - origin.month
        raise _unknown(granularity)

    def _week_number(self, day: dt.date) -> int:
        # 0001-01-01 (ordinal 1) is a Monday
        return (day.toordinal() - 1 + self._week_offset) // 7

    def label(self, start: dt.date, granularity: str) -> str:
        """A short human label: ``2025-06-04``, ``week of 2025-06-02`` (``2025-W23`` for ISO weeks), ``2025-06``."""
        if granularity == "1_day":
            return start.isoformat()
        if granularity == "1_week":
            if self.week_start == "monday":
                year, week, _ = start.isocalendar()
                return f"{year}-W{week:02d}"
            return f"week of {start.isoformat()}"
        if granularity == "1_month":
            return f"{start.year:04d}-{start.month:02d}"
        raise _unknown(granularity)


ISO = Calendar("monday")

# The reference service's calendar, as functions.
period_start = ISO.start
period_bounds = ISO.bounds
period_starts = ISO.starts
period_index = ISO.index


def utc_day(moment: dt.datetime) -> dt.date:
    """The UTC calendar day of ``moment`` (an aware one converted to UTC first; a naive one is UTC).
    Raises what the conversion raises for a moment whose UTC day is not a date (pandas' NaT, or
    beyond 0001-01-01 to 9999-12-31)."""
    if moment.utcoffset() is not None:
        moment = moment.astimezone(dt.UTC)
    return dt.date(moment.year, moment.month, moment.day)


def _a_date(value: object) -> dt.date:
    """An ISO date string, or a datetime's UTC date (an aware one converted to UTC first, as the
    client's arguments are), as a date (Calendar's methods take all three); anything else a
    ValidationError."""
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return dt.date(value.year, value.month, value.day)  # a subclass of date: plain date arithmetic
    if isinstance(value, dt.datetime):
        try:
            return utc_day(value)
        except (ValueError, TypeError, OverflowError, NotImplementedError):  # pandas' NaT, or beyond the calendar
            pass
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise ValidationError(
        f"day must be a date, a datetime or an ISO date string such as '2025-01-02', not {value!r}", "day"
    )
