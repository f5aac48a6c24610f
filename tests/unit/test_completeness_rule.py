"""server/serving/completeness.py: the one rule for which periods are complete, with a clock the test sets.

A period is complete when it starts on or after the first day of coverage and its end (midnight UTC
after its last day) is at or before the watermark: the declared one (never ahead of the clock),
else the earlier of the clock less the lag and the end of the last event's UTC day.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from metrics_kit.errors import ConfigurationError, DataFormatError
from metrics_kit.server.serving.completeness import Completeness, parse_instant, parse_lag, read_declaration
from metrics_kit.spec.calendar import period_index

UTC = dt.UTC
FIRST = dt.date(2025, 5, 1)


class Clock:
    """A clock the test moves, counting how often it is read."""

    def __init__(self, when: dt.datetime):
        self.now = when.timestamp()
        self.reads = 0

    def set(self, when: dt.datetime) -> None:
        self.now = when.timestamp()

    def __call__(self) -> float:
        self.reads += 1
        return self.now


def at(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


def flags(rule: Completeness, *asked: tuple[str, dt.date]) -> list[bool]:
    assert rule.coverage is not None
    return [rule.complete(g, period_index(day, rule.coverage[0], g)) for g, day in asked]


def test_a_historical_data_sets_last_day_is_complete_and_its_partial_week_and_month_are_not():
    # The last event on Wednesday 2025-06-18; asked long after.
    rule = Completeness((FIRST, dt.date(2025, 6, 18)), clock=Clock(at(2026, 11, 27, 10)))
    assert flags(rule, ("1_day", dt.date(2025, 6, 18)), ("1_day", FIRST)) == [True, True]
    assert flags(rule, ("1_week", dt.date(2025, 6, 9)), ("1_week", dt.date(2025, 6, 16))) == [True, False]
    # May starts on the first day of coverage and has ended; June ends after the last event's day.
    assert flags(rule, ("1_month", FIRST), ("1_month", dt.date(2025, 6, 1))) == [True, False]
    # The week of the first day starts before coverage (Monday 04-28): never complete.
    assert flags(rule, ("1_week", FIRST)) == [False]


def test_exports_that_run_up_to_now_never_make_today_complete():
    """Events until two hours ago: today's day, the current week on a Sunday and the current month
    on its last day are not complete; yesterday and the week and month before are."""
    sunday = Completeness((FIRST, dt.date(2025, 6, 29)), clock=Clock(at(2025, 6, 29, 14)))
    assert flags(sunday, ("1_day", dt.date(2025, 6, 29)), ("1_week", dt.date(2025, 6, 29))) == [False, False]
    assert flags(sunday, ("1_day", dt.date(2025, 6, 28)), ("1_week", dt.date(2025, 6, 22))) == [True, True]
    month_end = Completeness((FIRST, dt.date(2025, 6, 30)), clock=Clock(at(2025, 6, 30, 14)))
    assert flags(month_end, ("1_day", dt.date(2025, 6, 30)), ("1_month", dt.date(2025, 6, 30))) == [False, False]
    assert flags(month_end, ("1_week", dt.date(2025, 6, 29)), ("1_month", dt.date(2025, 5, 31))) == [True, True]


def test_a_period_turns_complete_when_the_clock_reaches_its_end():
    clock = Clock(at(2025, 6, 30, 23, 59, 59) + dt.timedelta(microseconds=999_999))
    rule = Completeness((FIRST, dt.date(2025, 6, 30)), clock=clock)
    june = [("1_day", dt.date(2025, 6, 30)), ("1_month", dt.date(2025, 6, 15))]
    assert flags(rule, *june) == [False, False]
    clock.set(at(2025, 7, 1))
    assert flags(rule, *june) == [True, True]
    # The clock set back (a test, a corrected system clock): the flags follow it.
    clock.set(at(2025, 6, 30, 12))
    assert flags(rule, *june) == [False, False]


def test_the_lag_holds_a_period_back_for_late_exports():
    clock = Clock(at(2025, 7, 1, 1, 30))
    rule = Completeness((FIRST, dt.date(2025, 6, 30)), lag=2 * 3600, clock=clock)
    assert flags(rule, ("1_day", dt.date(2025, 6, 30)), ("1_day", dt.date(2025, 6, 29))) == [False, True]
    assert rule.watermark_text() == "2025-06-30T23:30:00.000000Z"
    clock.set(at(2025, 7, 1, 2))
    assert flags(rule, ("1_day", dt.date(2025, 6, 30))) == [True]
    # Past the last event's day the watermark stops there: the lag no longer matters.
    clock.set(at(2026, 1, 1))
    assert rule.watermark_text() == "2025-07-01T00:00:00.000000Z"


def test_a_declared_watermark_wins_and_never_runs_ahead_of_the_clock():
    clock = Clock(at(2025, 7, 10))
    # Declared: everything before 07-03 is in; the last event was on 06-30 (quiet days after it).
    rule = Completeness((FIRST, dt.date(2025, 6, 30)), declared=at(2025, 7, 3), lag=86400, clock=clock)
    assert flags(rule, ("1_day", dt.date(2025, 6, 30)), ("1_month", dt.date(2025, 6, 1))) == [True, True]
    # Declared behind the last event: the days after it are not complete, whatever the clock.
    behind = Completeness((FIRST, dt.date(2025, 6, 30)), declared=at(2025, 6, 29), clock=clock)
    assert flags(behind, ("1_day", dt.date(2025, 6, 28)), ("1_day", dt.date(2025, 6, 29))) == [True, False]
    # Declared in the future: a period is not complete before it has ended.
    ahead = Completeness((FIRST, dt.date(2025, 6, 30)), declared=at(2030, 1, 1), clock=Clock(at(2025, 6, 30, 12)))
    assert flags(ahead, ("1_day", dt.date(2025, 6, 30)), ("1_day", dt.date(2025, 6, 29))) == [False, True]


def test_the_boundaries_are_worked_out_again_only_when_a_period_ends():
    clock = Clock(at(2025, 6, 30, 14))
    rule = Completeness((FIRST, dt.date(2025, 6, 30)), clock=clock)
    flags(rule, ("1_day", dt.date(2025, 6, 29)))
    state = rule._state
    for hour in range(15, 24):
        clock.set(at(2025, 6, 30, hour))
        flags(rule, ("1_day", dt.date(2025, 6, 29)), ("1_week", dt.date(2025, 6, 30)))
        assert rule._state is state, "worked out again before any period ended"
    clock.set(at(2025, 7, 1))
    flags(rule, ("1_day", dt.date(2025, 6, 30)))
    assert rule._state is not state


def test_without_events_nothing_is_complete():
    rule = Completeness(None, clock=Clock(at(2025, 1, 1)))
    assert rule.watermark() is None and rule.last_complete("1_day") is None


def test_the_last_complete_period():
    rule = Completeness((FIRST, dt.date(2025, 6, 30)), clock=Clock(at(2025, 6, 30, 14)))
    starts = {g: rule.last_complete(g) for g in ("1_day", "1_week", "1_month")}
    assert starts == {
        "1_day": period_index(dt.date(2025, 6, 29), FIRST, "1_day"),
        "1_week": period_index(dt.date(2025, 6, 23), FIRST, "1_week"),
        "1_month": period_index(dt.date(2025, 5, 1), FIRST, "1_month"),
    }


@pytest.mark.parametrize(
    ("given", "seconds"), [("2h", 7200), ("90m", 5400), ("45s", 45), ("1d", 86400), ("0", 0), ("1.5h", 5400), (30, 30)]
)
def test_lags(given, seconds):
    assert parse_lag(given) == seconds


@pytest.mark.parametrize("given", ["-1h", "2 hours", "h", "", "1w", "367d", "nan", True, None, float("inf")])
def test_bad_lags(given):
    with pytest.raises(ConfigurationError, match=r"^lag must be a duration from 0 to 366d, such as 2h"):
        parse_lag(given)


def test_instants():
    assert parse_instant("2025-07-01T00:00:00Z", "x") == at(2025, 7, 1)
    assert parse_instant("2025-07-01T02:00:00+02:00", "x") == at(2025, 7, 1)
    # RFC 3339 allows a lower-case t and z (Python's reader does not).
    assert (
        parse_instant("2025-07-01t00:00:00z", "x") == parse_instant("2025-07-01t02:00:00+02:00", "x") == at(2025, 7, 1)
    )


@pytest.mark.parametrize("given", ["2025-07-01", "2025-07-01T00:00:00", "yesterday", "", None, 5])
def test_bad_instants(given):
    with pytest.raises(ValueError, match=r"^watermark must be an ISO 8601 instant with its zone"):
        parse_instant(given, "watermark")


def test_the_declaration_in_a_data_folder(tmp_path):
    assert read_declaration(tmp_path) is None
    (tmp_path / "watermark.json").write_text(json.dumps({"watermark": "2025-07-01T00:00:00Z"}))
    assert read_declaration(tmp_path) == at(2025, 7, 1)
    for bad, said in [
        ("{", "not JSON"),
        ('{"watermark": "2025-07-01"}', "must be an ISO 8601 instant with its zone"),
        ('{"until": "2025-07-01T00:00:00Z"}', 'must be one JSON object, {"watermark": "<instant>"}'),
        ('["2025-07-01T00:00:00Z"]', 'must be one JSON object, {"watermark": "<instant>"}'),
    ]:
        (tmp_path / "watermark.json").write_text(bad)
        with pytest.raises(DataFormatError, match="watermark.json: ") as caught:
            read_declaration(tmp_path)
        assert said in str(caught.value)
