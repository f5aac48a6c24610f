"""Far dates: a pull reaching past 9999-12-31 (or before 0001-01-01) is a ValidationError before any
request, never a raw OverflowError; December 9999, whole, is an ordinary period."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from metrics_kit.client.client import Client
from metrics_kit.client.transports import MockTransport, Request, Response
from metrics_kit.errors import IncompletePeriodWarning, ValidationError
from metrics_kit.spec import ids
from metrics_kit.spec.calendar import ISO, Calendar, period_index

METRIC = "swap_transaction_count"
D = dt.date
MINUS_5 = dt.timezone(dt.timedelta(hours=-5))
PLUS_5 = dt.timezone(dt.timedelta(hours=5))


def answer(request: Request) -> Response:
    """Every day is worth 1: a period's value is its number of days."""
    if request.path != "/metrics":
        return Response(404, json={"error": {"code": "not_found", "message": "no discovery"}})
    start, end = ISO.bounds(D.fromisoformat(request.params["date"]), request.params["granularity"])
    body = {**request.params, "period_start": start.isoformat(), "period_end": end.isoformat()}
    return Response(200, json={**body, "unit": "count", "value": (end - start).days + 1, "complete": True})


@pytest.fixture
def service() -> MockTransport:
    return MockTransport(answer)


@pytest.fixture
def client(service) -> Client:
    return Client(transport=service, cache=False, progress=False)


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.series(METRIC, "demoswap", "9999-12-01", "9999-12-31", "1_week"),
        lambda c: c.series(METRIC, "demoswap", D(9999, 12, 1), D(9999, 12, 31), "week"),
        lambda c: c.value(METRIC, "demoswap", "1_week", "9999-12-31"),
        lambda c: c.value(METRIC, "demoswap", "1_week", D(9999, 12, 27)),
        lambda c: c.frame([METRIC], ["demoswap"], "9999-11-01", "9999-12-31", "1_week", shape="long"),
        lambda c: c.periods("9999-12-01", "9999-12-31", "1_week"),
        lambda c: c.series(METRIC, "demoswap", "9999-12-01", "9999-12-31T23:00:00-05:00", "1_day"),
        lambda c: c.value(METRIC, "demoswap", "1_day", np.datetime64("12000-01-01")),
        lambda c: c.value(METRIC, "demoswap", "1_day", dt.datetime(1, 1, 1, 1, tzinfo=PLUS_5)),
    ],
    ids=[
        "series of weeks",
        "series of weeks from dates",
        "value of the last week",
        "value of the week from its Monday",
        "frame of weeks",
        "periods",
        "end past 9999 in UTC",
        "datetime64 past 9999",
        "datetime before year 1 in UTC",
    ],
)
def test_reaching_past_the_calendar_is_a_validation_error_before_any_request(client, service, call):
    with pytest.raises(ValidationError, match=r"9999-12-31|0001-01-01") as caught:
        call(client)
    assert not isinstance(caught.value, OverflowError)
    assert service.requests == []


def test_december_9999_is_a_whole_month_with_its_days(client):
    months = client.series(METRIC, "demoswap", "9999-11-15", "9999-12-31", "1_month")
    assert list(months.index) == [pd.Timestamp("9999-11-01"), pd.Timestamp("9999-12-01")]
    assert list(months) == [30, 31]
    days = client.frame([METRIC], ["demoswap"], "9999-12-30", "9999-12-31T23:59:59.999999999", "1_day")
    assert list(days.index) == [pd.Timestamp("9999-12-30"), pd.Timestamp("9999-12-31")]
    with pytest.warns(IncompletePeriodWarning):  # a period that has not ended is not complete, whatever the flag
        assert client.value(METRIC, "demoswap", "1_month", "9999-12-31T23:00:00+05:00") == 31
    weeks = client.series(METRIC, "demoswap", "9999-12-13", "9999-12-26", "1_week")  # the last whole week
    assert list(weeks.index) == [pd.Timestamp("9999-12-13"), pd.Timestamp("9999-12-20")]
    assert ISO.label(D(9999, 12, 20), "1_week") == "9999-W51"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("9999-12-31", D(9999, 12, 31)),
        ("9999-12-31 23:59:59.999999999", D(9999, 12, 31)),  # past pandas' nanosecond range
        ("9999-12-31T23:00:00+05:00", D(9999, 12, 31)),
        ("2262-04-12", D(2262, 4, 12)),
        ("1677-09-21", D(1677, 9, 21)),
        ("2025-03-01T01:30:00+05:00", D(2025, 2, 28)),
        (np.datetime64("9999-12-31T23:00"), D(9999, 12, 31)),
        (pd.Timestamp("9999-12-31"), D(9999, 12, 31)),
        (dt.datetime(9999, 12, 31, 23, 59), D(9999, 12, 31)),
    ],
)
def test_to_date_reads_far_dates(value, expected):
    assert ids.to_date(value, "date") == expected


@pytest.mark.parametrize(
    "value",
    [
        "9999-12-31T23:00:00-05:00",
        "0001-01-01T01:00:00+05:00",
        dt.datetime(9999, 12, 31, 23, tzinfo=MINUS_5),
        pd.Timestamp("9999-12-31T23:00:00-05:00"),
        np.datetime64("12000-01-01"),
        np.datetime64("-0001-01-01"),
    ],
)
def test_to_date_outside_the_calendar_is_a_validation_error(value):
    with pytest.raises(ValidationError, match="0001-01-01 to 9999-12-31") as caught:
        ids.to_date(value, "end")
    assert caught.value.argument == "end"


def test_the_last_week_does_not_exist_but_the_server_can_still_count_to_it():
    for calendar in (ISO, Calendar("sunday")):
        with pytest.raises(ValidationError, match="9999-12-31"):
            calendar.start(D(9999, 12, 31), "1_week")
    # period_index (the server's lookup) still places it, one week after the week of 9999-12-20
    assert period_index(D(9999, 12, 31), D(9999, 12, 20), "1_week") == 1
    assert period_index(D(2024, 3, 17), D(2024, 3, 11), "1_week") == 0
    assert Calendar("sunday").index(D(2024, 3, 17), D(2024, 3, 11), "1_week") == 1
