"""Whether a value is complete is decided once, when it is fetched: against the time its request
was sent (not the time the answer was read), never complete before its period ended whatever the
service says, and kept with it in the cache; ``incomplete_ttl`` is the reading client's policy;
``incomplete="drop"`` records what it left out."""

from __future__ import annotations

import datetime as dt
import json

import pandas as pd
import pytest
from client_fakes import FakeClock, constant, daily_service

import metrics_kit as mk
from metrics_kit import (
    Client,
    IncompletePeriodWarning,
)
from metrics_kit.client.transports import MockTransport, Request, Response

COUNT = "swap_transaction_count"
JANUARY = {dt.date(2025, 1, d): d for d in range(1, 32)}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path))


def utc(text: str) -> float:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp()


def test_a_value_asked_before_midnight_and_answered_after_it_is_incomplete():
    now = [utc("2025-07-31T23:59:50")]

    def slow(request: Request) -> Response:  # counts at 23:59:50, answers 20 s later; no completeness field
        now[0] += 20 if request.path == "/metrics" else 0
        return constant(7, complete=None)(request)

    with Client(transport=MockTransport(slow), clock=lambda: now[0], cache=False) as client:
        with pytest.warns(mk.IncompletePeriodWarning):
            assert client.value(COUNT, "demoswap", "1_day", "2025-07-31") == 7  # was: complete, no warning


def test_a_batch_is_stamped_with_the_time_it_was_sent():
    now = [utc("2025-08-31T23:57:00")]

    def tick(request: Request) -> Response:  # one second per answer: the batch ends after midnight
        now[0] += 1 if request.path == "/metrics" else 0
        return constant(1, complete=None)(request)

    with Client(transport=MockTransport(tick), clock=lambda: now[0], cache=False, workers=1, progress=False) as c:
        frame = c.frame([COUNT, "swap_active_users"], "demoswap", "2025-06-01", "2025-08-31", shape="long")
    assert now[0] > utc("2025-09-01T00:00:00")  # answers of 2025-08-31 came after its end
    last = frame[frame.period_start == "2025-08-31"]
    assert len(last) == 2 and not last.complete.any()  # was: complete, for the answers read after midnight
    assert frame[frame.period_start == "2025-08-30"].complete.all()


def test_a_value_fetched_before_its_period_ended_stays_incomplete_when_read_after(tmp_path):
    clock = FakeClock(dt.datetime(2025, 1, 15, 23, 55, tzinfo=dt.UTC).timestamp())
    transport = MockTransport(daily_service(JANUARY, complete=None))  # the service does not say
    with Client(transport=transport, clock=clock) as client:
        with pytest.warns(IncompletePeriodWarning, match="2025-01-15 is not complete"):
            assert client.value(COUNT, "demoswap", "1_day", "2025-01-15") == 15
        clock.advance(7 * 60)  # 00:02 the next day: the day has ended, but the value is of 23:55
        long = client.frame(COUNT, "demoswap", "2025-01-14", "2025-01-15", shape="long")
        assert long.attrs["from_cache"] == 1
        assert long["complete"].tolist() == [True, False]
        series = client.series(COUNT, "demoswap", "2025-01-14", "2025-01-15")
        assert series.attrs["incomplete"] == ["2025-01-15"]
        dropped = client.series(COUNT, "demoswap", "2025-01-14", "2025-01-15", incomplete="drop")
        assert [d.date().isoformat() for d in dropped.index] == ["2025-01-14"]
        fetched = client.value(COUNT, "demoswap", "1_day", "2025-01-14")  # fetched at 23:55: ended
        assert fetched == 14


def test_a_period_that_had_not_ended_is_not_complete_whatever_the_service_says():
    clock = FakeClock(dt.datetime(2025, 1, 15, 22, tzinfo=dt.UTC).timestamp())
    transport = MockTransport(daily_service(JANUARY, complete=True))  # the 15th flagged complete at 22:00
    with Client(transport=transport, clock=clock, cache=False) as client:
        with pytest.warns(IncompletePeriodWarning, match="2025-01-15 is not complete"):
            assert client.value(COUNT, "demoswap", "1_day", "2025-01-15") == 15
        weeks = client.series(COUNT, "demoswap", "2025-01-06", "2025-01-15", "1_week")
        assert weeks.attrs["incomplete"] == ["2025-01-13"]  # was []: the running week taken for complete
        assert client.series(COUNT, "demoswap", "2025-01-14", "2025-01-15", incomplete="drop").tolist() == [14]


def test_incomplete_ttl_is_the_readers_policy_not_the_writers():
    clock = FakeClock(dt.datetime(2025, 1, 15, 12, tzinfo=dt.UTC).timestamp())
    handler = daily_service(JANUARY, complete=False)
    with Client(transport=MockTransport(handler), clock=clock) as writer, pytest.warns(IncompletePeriodWarning):
        writer.value(COUNT, "demoswap", "1_day", "2025-01-15")
    clock.advance(1)
    strict_transport = MockTransport(handler)  # the same service and key
    with Client(transport=strict_transport, clock=clock, incomplete_ttl=0) as strict:
        with pytest.warns(IncompletePeriodWarning):
            strict.value(COUNT, "demoswap", "1_day", "2025-01-15")
    assert [r.path for r in strict_transport.requests].count("/metrics") == 1  # fetched, not served
    patient_transport = MockTransport(handler)
    with Client(transport=patient_transport, clock=clock, incomplete_ttl=3600) as patient:
        with pytest.warns(IncompletePeriodWarning):
            patient.value(COUNT, "demoswap", "1_day", "2025-01-15")
    assert [r.path for r in patient_transport.requests].count("/metrics") == 0


def test_drop_records_every_point_it_left_out_in_every_shape():
    def answer(request: Request) -> Response:  # 2025-06-30 is complete for demolend only
        date = request.params.get("date")
        complete = request.params["project"] == "demolend" if date == "2025-06-30" else True
        return constant(10, complete=complete)(request)

    with Client(transport=MockTransport(answer), cache=False, progress=False) as client:
        projects = ["demoswap", "demolend"]
        wide = client.frame([COUNT], projects, "2025-06-29", "2025-06-30", incomplete="drop")
        long = client.frame([COUNT], projects, "2025-06-29", "2025-06-30", shape="long", incomplete="drop")
        one = client.series(COUNT, "demoswap", "2025-06-29", "2025-06-30", incomplete="drop")
        kept = client.series(COUNT, "demolend", "2025-06-29", "2025-06-30", incomplete="drop")
    dropped = [{"project": "demoswap", "metric": COUNT, "period_start": "2025-06-30"}]
    assert pd.isna(wide.loc["2025-06-30", ("demoswap", COUNT)])  # the cell left empty...
    assert wide.attrs["dropped"] == dropped  # ...is recorded (was: no record, attrs["incomplete"] == [])
    assert long.attrs["dropped"] == dropped and len(long) == 3
    assert one.attrs["dropped"] == dropped and len(one) == 1
    assert kept.attrs["dropped"] == [] and len(kept) == 2
    json.dumps(wide.attrs)  # JSON, so that Parquet keeps it


@pytest.mark.parametrize("flag", ['"false"', '"true"', "0", "1", '"no"', "null", '""'])
def test_a_complete_flag_that_is_not_a_json_boolean_is_refused_and_never_cached(flag, tmp_path):
    # Hostile round on issue 27, D5: "complete": "false", 0 or "no" was ignored, the value filed complete
    # (kept under incomplete="drop", no IncompletePeriodWarning, cached complete for good).
    def answer(request: Request) -> Response:
        if request.path != "/metrics":
            return Response(404, json={"error": {"code": "not_found", "message": "no such path"}})
        return Response(200, json={"value": 7, "period_start": request.params["date"], "complete": json.loads(flag)})

    with Client(transport=MockTransport(answer), progress=False) as client:
        with pytest.raises(mk.ResponseFormatError, match="complete flag that is not a JSON boolean") as caught:
            client.value(COUNT, "demoswap", "1_day", "2025-06-01")
        with pytest.warns(mk.PartialDataWarning, match="3 of 3 points failed"):
            series = client.series(COUNT, "demoswap", "2025-06-01", "2025-06-03", errors="coerce", incomplete="drop")
        assert client._get_cache().stats()["entries"] == 0
    assert f"({flag!r})" in str(caught.value) and "must be true or false" in str(caught.value)
    assert series.isna().all() and len(series.attrs["failed"]) == 3


@pytest.mark.parametrize("flag", [True, False, None])
def test_a_complete_flag_that_is_a_json_boolean_or_left_out_is_read(flag):
    clock = FakeClock(utc("2025-07-01T00:00:00"))
    with Client(transport=MockTransport(constant(7, complete=flag)), clock=clock, cache=False) as client:
        frame = client.frame([COUNT], "demoswap", "2025-06-01", "2025-06-02", shape="long")
    assert frame.complete.tolist() == [flag is not False] * 2


def test_incomplete_period_warning_names_the_service_flag_when_the_period_had_ended():
    # Hostile round on issue 27, D10: a period that ended months before, flagged incomplete by the
    # service (its data stop inside it), was said to have "not ended when the value was fetched".
    def answer(request: Request) -> Response:
        if request.path == "/projects":
            body = {
                "last_event": "2025-01-15T10:00:00Z",
                "projects": [{"project": "demoswap", "kinds": ["dex"]}],
            }
            return Response(200, json=body)
        return daily_service(JANUARY, complete=False)(request)

    clock, transport = FakeClock(utc("2025-06-01T00:00:00")), MockTransport(answer)
    with Client(transport=transport, clock=clock) as client:
        for _ in range(2):  # fetched, then read back from the cache
            with pytest.warns(IncompletePeriodWarning) as caught:
                assert client.value(COUNT, "demoswap", "1_week", "2025-01-13") == sum(range(13, 20))
            said = str(caught[0].message)
            assert "had not ended" not in said and "the service flags the period not complete" in said, said
            assert "its data's last event is at 2025-01-15 10:00:00 UTC" in said, said
    assert [r.path for r in transport.requests].count("/metrics") == 1  # the second read from the cache


def test_incomplete_period_warning_says_the_period_had_not_ended_when_that_is_the_reason():
    clock = FakeClock(utc("2025-01-15T22:00:00"))
    with Client(transport=MockTransport(daily_service(JANUARY, complete=True)), clock=clock, cache=False) as client:
        with pytest.warns(IncompletePeriodWarning) as caught:
            client.value(COUNT, "demoswap", "1_day", "2025-01-15")
    said = str(caught[0].message)
    assert "the period had not ended when the value was fetched (2025-01-15 22:00 UTC)" in said, said
    assert "flags" not in said
