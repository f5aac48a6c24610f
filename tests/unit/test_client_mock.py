"""The client against services made of functions (MockTransport) and a fake clock: no sockets, no
sleeping, no monkeypatching. The real-server tests (tests/service/test_client.py) are the end-to-end layer."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest
from client_fakes import FakeClock, daily_service, no_discovery

from metrics_kit import Client, ConfigurationError, FetchError, PartialDataWarning, ResponseFormatError
from metrics_kit.client.transports import MockTransport, Request, Response
from metrics_kit.errors import TransportError

COUNT = "swap_transaction_count"
TS = pd.Timestamp
# Daily swaps on 1..20 January 2025: the value of a day is its day of the month.
JANUARY = {dt.date(2025, 1, d): d for d in range(1, 21)}


# -- one calendar, checked against the service's answers ----------------------------------------------


def test_sunday_weeks_are_labelled_with_the_weeks_the_service_answered_for():
    """Worked by hand: Sunday weeks over 1..20 January 2025 (1 January is a Wednesday).
    Sun 29 Dec .. Sat 4 Jan: 1+2+3+4 = 10; Sun 5 .. Sat 11: 5+...+11 = 56;
    Sun 12 .. Sat 18: 12+...+18 = 105; Sun 19 .. Sat 25: 19+20 = 39."""
    transport = MockTransport(daily_service(JANUARY, week_start="sunday"))
    with Client(transport=transport, cache=False, week_start="sunday") as client:
        weeks = client.series(COUNT, "demoswap", "2025-01-01", "2025-01-20", "1_week")
        assert weeks.index.tolist() == [TS("2024-12-29"), TS("2025-01-05"), TS("2025-01-12"), TS("2025-01-19")]
        assert weeks.tolist() == [10, 56, 105, 39]
        assert client.value(COUNT, "demoswap", "week", "2025-01-18") == 105  # a Saturday: the week of the 12th
    asked = [r.params["date"] for r in transport.requests if r.path == "/metrics"]
    assert all(dt.date.fromisoformat(d).weekday() == 6 for d in asked)  # every request names a Sunday


def test_a_client_whose_weeks_start_on_another_day_than_the_services_is_refused():
    with Client(transport=MockTransport(daily_service(JANUARY, week_start="sunday")), cache=False) as client:
        with pytest.raises(ConfigurationError) as caught:
            client.series(COUNT, "demoswap", "2025-01-01", "2025-01-20", "1_week")
    assert caught.value.argument == "week_start"
    message = str(caught.value)
    assert "start on a sunday, not a monday" in message and "week_start='sunday'" in message
    assert "2024-12-30" in message and "2024-12-29" in message  # asked, and answered


def test_the_reverse_mismatch_is_refused_too():
    with Client(transport=MockTransport(daily_service(JANUARY)), cache=False, week_start="sunday") as client:
        with pytest.raises(ConfigurationError, match="week_start='monday'"):
            client.value(COUNT, "demoswap", "1_week", "2025-01-08")


def test_days_and_months_do_not_depend_on_the_week_convention():
    with Client(transport=MockTransport(daily_service(JANUARY)), cache=False, week_start="sunday") as client:
        assert client.value(COUNT, "demoswap", "1_month", "2025-01-31") == sum(range(1, 21))
        assert client.series(COUNT, "demoswap", "2025-01-19", "2025-01-20").tolist() == [19, 20]


def test_an_answer_for_another_day_is_a_format_error():
    def off_by_one(request: Request) -> Response:
        if request.path != "/metrics":
            return no_discovery(request)
        return Response(200, json={"value": 1, "period_start": "2025-01-02", "period_end": "2025-01-02"})

    with Client(transport=MockTransport(off_by_one), cache=False) as client:
        with pytest.raises(ResponseFormatError, match="period starting 2025-01-02, not 2025-01-01"):
            client.value(COUNT, "demoswap", "1_day", "2025-01-01")


# -- what comes back ---------------------------------------------------------------------------------


def test_a_failed_point_is_a_fetch_error_or_a_hole_with_a_warning():
    def flaky(request: Request) -> Response:
        if request.params.get("date") == "2025-01-02":
            raise TransportError("GET ...: connection refused")
        return daily_service(JANUARY)(request)

    with Client(transport=MockTransport(flaky), cache=False) as client:
        with pytest.raises(FetchError, match="1 of 3 points failed"):
            client.series(COUNT, "demoswap", "2025-01-01", "2025-01-03")
        with pytest.warns(PartialDataWarning):
            holes = client.series(COUNT, "demoswap", "2025-01-01", "2025-01-03", errors="coerce")
    assert holes.tolist()[0] == 1 and holes.iloc[1] is pd.NA and holes.tolist()[2] == 3
    assert holes.attrs["failed"] == [
        {"metric": COUNT, "project": "demoswap", "date": "2025-01-02", "error": "GET ...: connection refused"}
    ]


def test_incomplete_is_what_the_service_says_else_what_the_clock_says():
    clock = FakeClock(dt.datetime(2025, 1, 15, tzinfo=dt.UTC).timestamp())
    unsaid = MockTransport(daily_service(JANUARY, complete=None))
    with Client(transport=unsaid, cache=False, clock=clock) as client:
        weeks = client.series(COUNT, "demoswap", "2025-01-01", "2025-01-20", "1_week")
        assert weeks.attrs["incomplete"] == ["2025-01-13", "2025-01-20"]  # not ended on the 15th
        clock.advance(7 * 86400)
        weeks = client.series(COUNT, "demoswap", "2025-01-01", "2025-01-20", "1_week")
        assert weeks.attrs["incomplete"] == ["2025-01-20"]


def test_incomplete_values_expire_from_the_cache_by_the_clock(tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path))  # the environment, not the code
    clock = FakeClock()
    transport = MockTransport(daily_service(JANUARY, complete=False))
    with Client(transport=transport, clock=clock, incomplete_ttl=60) as client:
        first = client.series(COUNT, "demoswap", "2025-01-01", "2025-01-02")
        again = client.series(COUNT, "demoswap", "2025-01-01", "2025-01-02")
        clock.advance(61)
        later = client.series(COUNT, "demoswap", "2025-01-01", "2025-01-02")
    assert (first.attrs["fetched"], again.attrs["from_cache"], later.attrs["fetched"]) == (2, 2, 2)
    assert len([r for r in transport.requests if r.path == "/metrics"]) == 4


def test_the_transport_is_closed_with_the_client():
    transport = MockTransport(daily_service(JANUARY))
    with Client(transport=transport, cache=False) as client:
        assert client.base_url == "mock://service" and not client.embedded
    assert transport.closed


def test_the_key_goes_in_a_header_only():
    transport = MockTransport(daily_service(JANUARY), api_key="secret-key-123")
    with Client(transport=transport, cache=False) as client:
        client.value(COUNT, "demoswap", "1_day", "2025-01-01")
    request = transport.requests[-1]
    assert request.headers["x-api-key"] == "secret-key-123" and "secret-key-123" not in request.url
    assert request.params == {"metric_name": COUNT, "project": "demoswap", "granularity": "1_day", "date": "2025-01-01"}
