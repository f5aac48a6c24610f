"""Calendar periods, all UTC: a day, the ISO week (Monday to Sunday), the calendar month.

A period is named by its first day; ``period_end`` is its last day (inclusive). Any date inside
a period answers for that period.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

from .catalogue import GRANULARITIES

ONE_DAY = dt.timedelta(days=1)


def check_granularity(granularity: str) -> str:
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity must be one of {', '.join(GRANULARITIES)}, not {granularity!r}")
    return granularity


def period_start(day: dt.date, granularity: str) -> dt.date:
    if granularity == "1_day":
        return day
    if granularity == "1_week":
        return day - dt.timedelta(days=day.weekday())
    if granularity == "1_month":
        return day.replace(day=1)
    raise ValueError(check_granularity(granularity))


def next_start(start: dt.date, granularity: str) -> dt.date:
    if granularity == "1_day":
        return start + ONE_DAY
    if granularity == "1_week":
        return start + dt.timedelta(days=7)
    if granularity == "1_month":
        return (start.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
    raise ValueError(check_granularity(granularity))


def period_bounds(day: dt.date, granularity: str) -> tuple[dt.date, dt.date]:
    """First and last day of the period containing ``day``."""
    start = period_start(day, granularity)
    return start, next_start(start, granularity) - ONE_DAY


def period_starts(first: dt.date, last: dt.date, granularity: str) -> Iterator[dt.date]:
    """Starts of every period that overlaps ``first``..``last`` (inclusive), in order."""
    start = period_start(first, granularity)
    while start <= last:
        yield start
        start = next_start(start, granularity)


def period_index(day: dt.date, origin: dt.date, granularity: str) -> int:
    """Ordinal of the period containing ``day``, counting from the period containing ``origin``."""
    if granularity == "1_day":
        return (day - origin).days
    if granularity == "1_week":
        return (period_start(day, granularity) - period_start(origin, granularity)).days // 7
    if granularity == "1_month":
        return (day.year - origin.year) * 12 + day.month - origin.month
    raise ValueError(check_granularity(granularity))
