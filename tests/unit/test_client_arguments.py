"""The arguments of a call, checked before any request: a metric and its alias are one metric,
fetched once; the calendar takes ISO strings and names a wrong argument; the per-call flags take
True, False or None."""

from __future__ import annotations

import datetime as dt

import pytest
from client_fakes import constant, daily_service

import metrics_kit as mk
from metrics_kit import (
    Client,
)
from metrics_kit.client.transports import MockTransport

COUNT = "swap_transaction_count"
JANUARY = {dt.date(2025, 1, d): d for d in range(1, 32)}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path))


@pytest.mark.parametrize("shape", ["long", "wide"])
def test_a_metric_and_its_alias_are_one_metric_once(shape):
    names = ["farm_withdrawal_transaction_count", "farm_withdraw_transaction_count"]
    with Client(transport=MockTransport(daily_service(JANUARY)), cache=False) as client:
        frame = client.frame(names, "farm", "2025-01-01", "2025-01-03", shape=shape)
    if shape == "long":
        assert frame["value"].tolist() == [1, 2, 3] and set(frame["metric"]) == {names[0]}
    else:
        assert list(frame.columns) == [names[0]] and frame[names[0]].sum() == 6


def test_the_calendar_takes_iso_strings_and_names_a_wrong_argument():
    with Client(transport=MockTransport(constant(1)), cache=False) as client:
        calendar = client.calendar
        assert calendar.start("2025-01-02", "1_week") == dt.date(2024, 12, 30)  # was: AttributeError
        assert calendar.end("2025-01-02", "1_month") == dt.date(2025, 1, 31)  # was: TypeError
        for wrong in (20250102, "01/02/2025", None):
            with pytest.raises(mk.ValidationError) as caught:
                calendar.start(wrong, "1_week")
            assert caught.value.argument == "day"


@pytest.mark.parametrize("flag", ["refresh", "progress"])
@pytest.mark.parametrize("wrong", ["yes", "no", 1])
def test_per_call_flags_are_checked(flag, wrong):
    transport = MockTransport(constant(1))
    with Client(transport=transport, cache=False) as client:
        with pytest.raises(mk.ValidationError, match=f"{flag} must be True, False or None") as caught:
            client.series(COUNT, "demoswap", "2025-06-02", "2025-06-02", "1_week", **{flag: wrong})
        assert caught.value.argument == flag and transport.requests == []  # was: accepted
