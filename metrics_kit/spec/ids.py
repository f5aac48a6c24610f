"""The rules for what a request names: project ids, metric names (with did-you-mean), granularities, dates.

The server and the client check each of these here and nowhere else. Each check raises
:class:`~metrics_kit.errors.ValidationError` naming the argument, what was wrong and what is
allowed; the server turns that into its 400 answer, the client raises it before any request.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Sequence

from rapidfuzz import fuzz, process

from metrics_kit.errors import ValidationError
from metrics_kit.spec.calendar import GRANULARITIES, utc_day
from metrics_kit.spec.wire import METRIC_NAME

# Project ids: lowercase letters, digits, '-' and '_', in parts joined by single dots.
PROJECT_PATTERN = r"^[a-z0-9_-]+(\.[a-z0-9_-]+)*$"
MAX_PROJECT = 200
_PROJECT = re.compile(PROJECT_PATTERN, re.ASCII)
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
GRANULARITY_SYNONYMS = {
    "day": "1_day",
    "daily": "1_day",
    "1d": "1_day",
    "week": "1_week",
    "weekly": "1_week",
    "1w": "1_week",
    "month": "1_month",
    "monthly": "1_month",
}


def clip(value: object, limit: int = 60) -> str:
    """A value for a message: its repr, cut to ``limit`` characters (requests may be huge)."""
    text = value if isinstance(value, str) else str(value)
    return repr(text if len(text) <= limit else text[:limit] + "...")


def check_project(project: object) -> str:
    if not isinstance(project, str) or len(project) > MAX_PROJECT or not _PROJECT.fullmatch(project):
        raise ValidationError(
            f"project {clip(project)} is not a valid project id: lowercase letters, digits, '-' and '_', "
            "in parts joined by single dots (such as 'demoswap' or 'demoswap.clmm')",
            "project",
        )
    return project


def check_granularity(granularity: object, *, synonyms: bool = False) -> str:
    """A granularity of the wire; with ``synonyms``, also day/week/month and friends, any case."""
    if isinstance(granularity, str):
        name = granularity
        if synonyms:
            name = GRANULARITY_SYNONYMS.get(name.strip().lower(), name.strip())
        if name in GRANULARITIES:
            return name
    extra = " (or day, week, month)" if synonyms else ""
    raise ValidationError(
        f"granularity must be one of {', '.join(GRANULARITIES)}{extra}, not {clip(granularity)}", "granularity"
    )


def parse_date(text: str, argument: str = "date") -> dt.date:
    """A date as the wire gives it: exactly ``YYYY-MM-DD``, and a real calendar date."""
    if not _DATE.fullmatch(text):
        raise ValidationError(f"{argument} {clip(text)} is not a date in the form YYYY-MM-DD", argument)
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise ValidationError(f"{argument} {clip(text)} is not a real calendar date", argument) from None


@functools.lru_cache(maxsize=4096)
def _close(name: str, names: tuple[str, ...], limit: int) -> tuple[str, ...]:
    found = process.extract(name.lower(), names, scorer=fuzz.ratio, limit=limit, score_cutoff=50)
    return tuple(match for match, _score, _index in found)


def suggest(name: str, names: Sequence[str], limit: int = 3) -> list[str]:
    """The names closest to ``name``, best first (a C edit-distance scan, cached: cheap per request)."""
    return list(_close(name[:200], tuple(names), limit))


def unknown_metric(name: object, names: Sequence[str], listing: str) -> ValidationError:
    """The error for a metric name not in ``names``; ``listing`` says where the full list is."""
    close = suggest(name, names) if isinstance(name, str) else []
    hint = f"; did you mean {' or '.join(close)}?" if close else f"; {listing} lists every metric"
    return ValidationError(f"unknown metric {clip(name)}{hint}", METRIC_NAME)


_ISO_START = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}([T ].*)?$")
_BEYOND_MICROSECONDS = re.compile(r"(\.[0-9]{6})[0-9]+")


def _parse_iso(text: str) -> dt.date | None:
    """A date or datetime from ISO 8601 text; None when it is not one. Python's own parser first, as
    pandas' nanosecond Timestamps end in 2262; pandas for the ISO forms Python does not read."""
    import pandas as pd

    if not _ISO_START.match(text):
        return None
    try:
        if len(text) == 10:
            return dt.date.fromisoformat(text)
        return dt.datetime.fromisoformat(_BEYOND_MICROSECONDS.sub(r"\1", text))
    except ValueError:
        pass
    try:
        stamp = pd.to_datetime(text, format="ISO8601")
    except (ValueError, TypeError, OverflowError):
        return None
    return None if stamp is pd.NaT else stamp


def to_date(value: object, argument: str) -> dt.date:
    """A UTC calendar date from a user's ISO 8601 string, date, datetime, pandas Timestamp or numpy
    datetime64. Strings must be ISO: '01/02/2025' means January to some and February to others. A
    time zone is converted to UTC before the date is taken; a date that is then outside 0001-01-01
    to 9999-12-31 is a ValidationError."""
    import numpy as np
    import pandas as pd

    given = value
    if isinstance(value, str):
        value = _parse_iso(value.strip())
        if value is None:
            raise _not_a_date(given, argument)
    elif isinstance(value, np.datetime64):
        try:
            value = pd.Timestamp(value)
        except (ValueError, OverflowError):
            raise _out_of_range(given, argument) from None
    if value is pd.NaT:
        raise _not_a_date(given, argument)
    if isinstance(value, dt.datetime):
        try:
            return utc_day(value)
        except (ValueError, OverflowError, NotImplementedError):  # pandas: outside its or Python's range
            raise _out_of_range(given, argument) from None
    if isinstance(value, dt.date):
        return value
    raise ValidationError(
        f"{argument} must be a date (ISO string, datetime.date, datetime or pandas Timestamp), "
        f"not {type(value).__name__}",
        argument,
    )


def _not_a_date(value: object, argument: str) -> ValidationError:
    return ValidationError(
        f"{argument} {clip(value)} is not a date; give an ISO date such as '2025-01-31', "
        "a datetime.date, a datetime or a pandas Timestamp",
        argument,
    )


def _out_of_range(value: object, argument: str) -> ValidationError:
    return ValidationError(
        f"{argument} {clip(value)} falls outside the dates metrics_kit can represent, 0001-01-01 to "
        "9999-12-31 (in UTC); choose a date within them",
        argument,
    )
