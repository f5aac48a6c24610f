"""The client against a hostile tester's findings after issue 21: each test here fails on the
client before its fix (a key sent to another service, a value stamped complete after its day ended
in flight, the key in a verbose traceback's locals, a token in a URL shown, ...)."""

from __future__ import annotations

import datetime as dt
import json
import traceback

import pandas as pd
import pytest
from client_fakes import constant

import metrics_kit as mk
from metrics_kit import Client, ConfigurationError
from metrics_kit.client import api, settings
from metrics_kit.client.client import MAX_POINTS
from metrics_kit.client.transports import MockTransport, Request, Response

COUNT = "swap_transaction_count"
KEY = "sk-live-TOPSECRET-abcdef0123456789"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path))


def verbose(error: BaseException) -> str:
    """The traceback as %xmode Verbose or pytest --showlocals would print it: every frame's locals."""
    return "".join(traceback.TracebackException.from_exception(error, capture_locals=True).format())


def utc(text: str) -> float:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp()


# -- 1. a key given to configure() belongs to the base URL given with it ----------------------------------


def test_configure_refuses_a_key_whose_base_url_is_left_to_the_environment(fresh_default, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_BASE_URL", "http://127.0.0.1:9")
    with pytest.raises(ConfigurationError, match="give base_url= with api_key=") as caught:
        mk.configure(api_key=KEY)  # was accepted, and the key later sent wherever the variable pointed
    assert caught.value.setting == "api_key" and KEY not in verbose(caught.value)
    monkeypatch.setenv("METRICS_KIT_API_KEY", KEY)
    mk.configure(workers=2)  # settings without a key: made again from the environment when it changes
    monkeypatch.setenv("METRICS_KIT_API_KEY", "another-key-0123456789")
    monkeypatch.setenv("METRICS_KIT_BASE_URL", "http://127.0.0.1:10")
    assert "api_key" not in api._arguments
    client = mk.default_client()
    assert client.base_url == "http://127.0.0.1:10" and client.settings.workers == 2
    assert client.settings.connection.api_key == settings.Secret("another-key-0123456789")


# -- 2. completeness against the time the request was sent, not the time the answer was read -------------


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


# -- 4. the key in no frame's locals of a verbose traceback ------------------------------------------------


@pytest.mark.parametrize("bad", ["\n", " ", "é", "\t"])
def test_a_malformed_key_is_in_no_local_of_the_traceback(bad, fresh_default, monkeypatch):
    with pytest.raises(ConfigurationError, match="visible ASCII") as given:
        Client("http://127.0.0.1:9", KEY + bad)
    monkeypatch.setenv("METRICS_KIT_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("METRICS_KIT_API_KEY", KEY + bad)
    with pytest.raises(ConfigurationError, match="visible ASCII") as from_environment:
        mk.value(COUNT, "demoswap", "1_day", "2025-01-05")
    for caught in (given, from_environment):
        text = verbose(caught.value)
        assert "check_api_key" in text and KEY not in text  # was: check_api_key's local `text`


def test_a_key_set_as_the_base_url_is_in_no_local_of_the_traceback(fresh_default, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_BASE_URL", KEY)  # the two variables swapped
    monkeypatch.setenv("METRICS_KIT_API_KEY", "https://metrics.example.com")
    with pytest.raises(ConfigurationError, match="base_url") as caught:
        mk.value(COUNT, "demoswap", "1_day", "2025-01-05")
    text = verbose(caught.value)
    assert "default_client" in text and KEY not in text  # was: default_client's local `now`


def test_a_mock_request_holds_the_key_in_no_local():
    def refuse(request: Request) -> Response:
        raise mk.TransportError("no answer")

    with Client(transport=MockTransport(refuse, api_key=KEY), cache=False) as client:
        with pytest.raises(mk.TransportError) as caught:
            client.value(COUNT, "demoswap", "1_day", "2025-01-05")
    text = verbose(caught.value)
    assert "MockTransport" in text and KEY not in text  # was: MockTransport.get's local `headers`


# -- 7. incomplete="drop" says what it dropped, in every shape -----------------------------------------------


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


# -- 8. a call asking for too many points is refused before any request -------------------------------------


def test_a_huge_range_is_refused_before_any_request():
    transport = MockTransport(constant(1))
    with Client(transport=transport, cache=False, progress=False) as client:
        with pytest.raises(mk.ValidationError, match="3,652,059 points") as caught:
            client.series(COUNT, "demoswap", "0001-01-01", "9999-12-31", "1_day")  # was: 3.65 million requests
        assert "100,000" in str(caught.value) and "coarser granularity" in str(caught.value)
        with pytest.raises(mk.ValidationError, match="at most 100,000"):
            client.frame([COUNT, "swap_active_users"], ["demoswap"], "1900-01-01", "2099-12-31", "1_day")
        assert transport.requests == []  # not even discovery
        assert len(client.series(COUNT, "demoswap", "2000-01-01", "2025-12-31", "1_month")) == 312
    assert MAX_POINTS == 100_000  # as docs/client.md says


# -- 9. a transport shared by two clients --------------------------------------------------------------------


def test_configure_with_the_same_transport_twice_keeps_it_open(fresh_default):
    transport = MockTransport(constant(5))
    first = mk.configure(transport=transport, cache=False)
    mk.configure(transport=transport, cache=False)  # the same cell run again
    assert mk.value(COUNT, "demoswap", "1_day", "2025-01-05") == 5  # was: ClientClosedError, is_closed False
    assert first.is_closed and not mk.default_client().is_closed and not transport.closed
    with pytest.raises(mk.ClientClosedError, match=r"mk.configure\(\)"):
        first.value(COUNT, "demoswap", "1_day", "2025-01-05")
    mk.configure(transport=MockTransport(constant(6)), cache=False)  # another transport: the old one is closed
    assert transport.closed


def test_a_client_whose_shared_transport_another_closed_says_so():
    transport = MockTransport(constant(5))
    one, two = Client(transport=transport, cache=False), Client(transport=transport, cache=False)
    one.close()  # closing a client closes the transport it was given, as httpx does
    with pytest.raises(mk.ClientClosedError, match="closed by another Client that shared it"):
        two.value(COUNT, "demoswap", "1_day", "2025-01-05")
    assert "closed by another" not in str(
        pytest.raises(mk.ClientClosedError, one.value, COUNT, "demoswap", "1_day", "2025-01-05").value
    )


# -- 10. a base URL's port and scheme ------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999", "http://127.0.0.1:notaport", "https://h.example:-1/v1"])
def test_a_base_url_with_a_bad_port_is_refused_when_the_client_is_made(url):
    from metrics_kit.client.transports import HTTPTransport

    for make in (lambda: Client(url, KEY, cache=False), lambda: HTTPTransport(url, KEY)):
        with pytest.raises(ConfigurationError, match="port") as caught:  # was: urllib3's LocationParseError at use
            make()
        assert caught.value.setting == "base_url"


def test_an_upper_case_scheme_is_accepted():
    from metrics_kit.client.transports import HTTPTransport

    with Client("HTTP://127.0.0.1:8000/v1", KEY, cache=False) as client:  # was refused
        assert client.base_url == "http://127.0.0.1:8000/v1"
        assert client.transport.base_url == "http://127.0.0.1:8000/v1"
    assert HTTPTransport("HTTPS://metrics.example.com", KEY).base_url == "https://metrics.example.com"


# -- 11. a half-made transport's repr ------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["not a url", "ftp://example.com", "http://127.0.0.1:99999"])
def test_a_refused_transport_can_be_shown_in_a_verbose_traceback(url):
    from metrics_kit.client.transports import HTTPTransport

    with pytest.raises(ConfigurationError) as caught:
        HTTPTransport(url, KEY)
    text = verbose(caught.value)  # was: AttributeError from HTTPTransport.__repr__ while formatting it
    assert "HTTPTransport(<not made>)" in text and KEY not in text


# -- 12. small inputs: calendar dates, a clock, per-call flags, copies -----------------------------------------


def test_the_calendar_takes_iso_strings_and_names_a_wrong_argument():
    with Client(transport=MockTransport(constant(1)), cache=False) as client:
        calendar = client.calendar
        assert calendar.start("2025-01-02", "1_week") == dt.date(2024, 12, 30)  # was: AttributeError
        assert calendar.end("2025-01-02", "1_month") == dt.date(2025, 1, 31)  # was: TypeError
        for wrong in (20250102, "01/02/2025", None):
            with pytest.raises(mk.ValidationError) as caught:
                calendar.start(wrong, "1_week")
            assert caught.value.argument == "day"


@pytest.mark.parametrize("returns", ["x", None, float("nan")])
def test_a_clock_that_returns_no_number_is_refused_when_the_client_is_made(returns):
    with pytest.raises(ConfigurationError, match="clock must return") as caught:  # was: a raw TypeError at use
        Client(transport=MockTransport(constant(1)), clock=lambda: returns)
    assert caught.value.setting == "clock"


@pytest.mark.parametrize("flag", ["refresh", "progress"])
@pytest.mark.parametrize("wrong", ["yes", "no", 1])
def test_per_call_flags_are_checked(flag, wrong):
    transport = MockTransport(constant(1))
    with Client(transport=transport, cache=False) as client:
        with pytest.raises(mk.ValidationError, match=f"{flag} must be True, False or None") as caught:
            client.series(COUNT, "demoswap", "2025-06-02", "2025-06-02", "1_week", **{flag: wrong})
        assert caught.value.argument == flag and transport.requests == []  # was: accepted


def test_a_client_cannot_be_copied_or_pickled():
    import copy
    import pickle

    with Client(transport=MockTransport(constant(1)), cache=False) as client:
        for attempt in (copy.copy, copy.deepcopy, pickle.dumps):
            with pytest.raises(TypeError, match="cannot be copied or pickled"):  # copy.copy shared the transport
                attempt(client)
        assert client.value(COUNT, "demoswap", "1_day", "2025-01-05") == 1
    with pytest.raises(TypeError, match="cannot be copied or pickled"):
        copy.deepcopy(Client(cache=False))  # the embedded default: was "cannot pickle '_thread.lock'"
