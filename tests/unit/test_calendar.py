"""spec/calendar.py against hand-worked dates: ISO and Sunday weeks, year boundaries, leap days,
month ends and the end of the calendar (9999-12-31), which is a ValidationError, never an OverflowError."""

from __future__ import annotations

import datetime as dt

import pytest

from metrics_kit.errors import ValidationError
from metrics_kit.spec.calendar import GRANULARITIES, ISO, Calendar, period_bounds, period_index, period_starts

D = dt.date
SUNDAY = Calendar("sunday")


def test_the_three_granularities():
    assert GRANULARITIES == ("1_day", "1_week", "1_month")


@pytest.mark.parametrize(
    ("day", "start", "end", "label"),
    [
        # 2025-01-01 is a Wednesday: its ISO week runs Monday 2024-12-30 to Sunday 2025-01-05, week 1 of 2025.
        (D(2025, 1, 1), D(2024, 12, 30), D(2025, 1, 5), "2025-W01"),
        (D(2024, 12, 30), D(2024, 12, 30), D(2025, 1, 5), "2025-W01"),
        (D(2025, 1, 5), D(2024, 12, 30), D(2025, 1, 5), "2025-W01"),
        # 2021-01-01 is a Friday: it belongs to week 53 of 2020 (Monday 2020-12-28 to Sunday 2021-01-03).
        (D(2021, 1, 1), D(2020, 12, 28), D(2021, 1, 3), "2020-W53"),
        (D(2021, 1, 4), D(2021, 1, 4), D(2021, 1, 10), "2021-W01"),
        # a leap day, a Thursday: week 2024-02-26 .. 2024-03-03
        (D(2024, 2, 29), D(2024, 2, 26), D(2024, 3, 3), "2024-W09"),
    ],
)
def test_iso_weeks(day, start, end, label):
    assert ISO.bounds(day, "1_week") == (start, end)
    assert period_bounds(day, "1_week") == (start, end)
    assert ISO.label(start, "1_week") == label


@pytest.mark.parametrize(
    ("day", "start", "end"),
    [
        (D(2025, 6, 4), D(2025, 6, 1), D(2025, 6, 7)),  # Wednesday -> Sunday 06-01 .. Saturday 06-07
        (D(2025, 6, 1), D(2025, 6, 1), D(2025, 6, 7)),  # a Sunday starts its own week
        (D(2025, 6, 7), D(2025, 6, 1), D(2025, 6, 7)),  # a Saturday ends it
        (D(2025, 6, 8), D(2025, 6, 8), D(2025, 6, 14)),
        (D(2025, 1, 1), D(2024, 12, 29), D(2025, 1, 4)),  # across the year boundary
        (D(2024, 2, 29), D(2024, 2, 25), D(2024, 3, 2)),
    ],
)
def test_sunday_weeks(day, start, end):
    assert SUNDAY.bounds(day, "1_week") == (start, end)
    assert SUNDAY.label(start, "1_week") == f"week of {start.isoformat()}"


def test_sunday_and_iso_weeks_differ_by_the_sunday():
    # Sunday 2025-06-08 ends the ISO week of 2025-06-02 and starts a Sunday week.
    assert ISO.start(D(2025, 6, 8), "1_week") == D(2025, 6, 2)
    assert SUNDAY.start(D(2025, 6, 8), "1_week") == D(2025, 6, 8)
    # Counting weeks from Sunday 2024-12-29: Wednesday 2025-01-01 is in the same Sunday week,
    # but in the next ISO week (2024-12-30 starts it).
    assert SUNDAY.index(D(2025, 1, 1), D(2024, 12, 29), "1_week") == 0
    assert ISO.index(D(2025, 1, 1), D(2024, 12, 29), "1_week") == 1


@pytest.mark.parametrize(
    ("day", "end"),
    [
        (D(2024, 2, 10), D(2024, 2, 29)),  # leap year
        (D(2023, 2, 10), D(2023, 2, 28)),
        (D(2000, 2, 1), D(2000, 2, 29)),  # divisible by 400: leap
        (D(2100, 2, 1), D(2100, 2, 28)),  # divisible by 100 only: not
        (D(2025, 4, 30), D(2025, 4, 30)),
        (D(2025, 12, 1), D(2025, 12, 31)),
        (D(2025, 1, 31), D(2025, 1, 31)),
    ],
)
def test_month_ends(day, end):
    assert ISO.bounds(day, "1_month") == (day.replace(day=1), end)


def test_next_start_and_ranges_across_month_and_year_ends():
    assert ISO.next_start(D(2024, 2, 1), "1_month") == D(2024, 3, 1)
    assert ISO.next_start(D(2024, 12, 1), "1_month") == D(2025, 1, 1)
    assert ISO.next_start(D(2024, 2, 28), "1_day") == D(2024, 2, 29)
    assert ISO.next_start(D(2024, 12, 30), "1_week") == D(2025, 1, 6)
    assert list(period_starts(D(2024, 11, 15), D(2025, 2, 1), "1_month")) == [
        D(2024, 11, 1),
        D(2024, 12, 1),
        D(2025, 1, 1),
        D(2025, 2, 1),
    ]
    assert list(SUNDAY.starts(D(2024, 12, 31), D(2025, 1, 6), "1_week")) == [D(2024, 12, 29), D(2025, 1, 5)]
    assert list(period_starts(D(2024, 2, 28), D(2024, 3, 1), "1_day")) == [
        D(2024, 2, 28),
        D(2024, 2, 29),
        D(2024, 3, 1),
    ]
    assert period_index(D(2025, 1, 15), D(2024, 11, 3), "1_month") == 2
    assert period_index(D(2024, 3, 1), D(2024, 2, 28), "1_day") == 2


def test_a_day_is_its_own_period():
    assert ISO.bounds(D(2024, 2, 29), "1_day") == (D(2024, 2, 29), D(2024, 2, 29))
    assert SUNDAY.bounds(D(9999, 12, 31), "1_day") == (D(9999, 12, 31), D(9999, 12, 31))


def test_labels():
    assert ISO.label(D(2025, 6, 4), "1_day") == "2025-06-04"
    assert ISO.label(D(2025, 6, 1), "1_month") == "2025-06"


def test_the_last_month_of_the_calendar_is_whole_but_has_no_successor():
    assert ISO.bounds(D(9999, 12, 15), "1_month") == (D(9999, 12, 1), D(9999, 12, 31))
    assert list(period_starts(D(9999, 11, 1), D(9999, 12, 31), "1_month")) == [D(9999, 11, 1), D(9999, 12, 1)]
    assert list(period_starts(D(9999, 12, 30), D(9999, 12, 31), "1_day")) == [D(9999, 12, 30), D(9999, 12, 31)]
    with pytest.raises(ValidationError, match="9999-12-31") as caught:
        ISO.next_start(D(9999, 12, 1), "1_month")
    assert caught.value.argument == "date"
    with pytest.raises(ValidationError, match="9999-12-31"):
        ISO.next_start(D(9999, 12, 31), "1_day")


def test_a_week_reaching_past_9999_is_a_validation_error():
    # 9999-12-31 is a Friday: its ISO week would end on 10000-01-02.
    with pytest.raises(ValidationError, match="9999-12-31") as caught:
        ISO.end(D(9999, 12, 31), "1_week")
    assert not isinstance(caught.value, OverflowError) and caught.value.argument == "date"
    assert list(period_starts(D(9999, 12, 20), D(9999, 12, 26), "1_week")) == [D(9999, 12, 20)]
    # The Sunday week of Friday 9999-12-31 starts 12-26 and would end on 10000-01-01.
    with pytest.raises(ValidationError):
        SUNDAY.end(D(9999, 12, 31), "1_week")


def test_a_week_starting_before_year_1_is_a_validation_error():
    assert ISO.start(D(1, 1, 1), "1_week") == D(1, 1, 1)  # 0001-01-01 is a Monday
    with pytest.raises(ValidationError, match="0001-01-01"):
        SUNDAY.start(D(1, 1, 3), "1_week")


def test_unknown_granularity_and_week_start():
    for call in (ISO.start, ISO.end, ISO.next_start, ISO.label):
        with pytest.raises(ValidationError, match="1_day, 1_week, 1_month") as caught:
            call(D(2025, 1, 1), "1_year")
        assert caught.value.argument == "granularity"
    with pytest.raises(ValidationError, match="1_day, 1_week, 1_month"):
        ISO.index(D(2025, 1, 1), D(2024, 1, 1), "1_year")
    with pytest.raises(ValidationError, match="monday, sunday") as caught:
        Calendar("friday")
    assert caught.value.argument == "week_start"


def test_a_datetime_or_timestamp_is_its_utc_day():
    import pandas as pd

    calendar = Calendar()
    # A pandas Timestamp is a datetime, and a datetime a date: each is taken as its UTC day.
    assert calendar.end(pd.Timestamp("2025-01-31 23:00"), "1_week") == dt.date(2025, 2, 2)
    assert calendar.start(pd.Timestamp("2025-01-31 23:00", tz="America/New_York"), "1_day") == dt.date(2025, 2, 1)
    assert calendar.bounds(dt.datetime(2025, 1, 1, 5), "1_month") == (dt.date(2025, 1, 1), dt.date(2025, 1, 31))
    assert type(calendar.start(dt.datetime(2025, 1, 1, 5), "1_day")) is dt.date
    with pytest.raises(ValidationError, match="not NaT"):
        calendar.start(pd.NaT, "1_day")
