"""Trusting the cache when the data changes (issue 11, items 1, 2, 4 and 11), against services made of
functions (MockTransport) and a fake clock: no sockets, no sleeping, nothing timed.

- the data version: values are filed under the version their answer named; a trusted version (seen
  less than version_ttl seconds ago, by this client) answers a fully cached pull, discovery included,
  with no request; a fresh client asks once;
  a changed version, in /projects or in any answer, replaces every value of the old one;
- answers checked against the question: metric, project, period and unit;
- nothing lost: values reach the cache in batches as they arrive, and an interrupted pull writes every
  value it received.
"""

from __future__ import annotations

import datetime as dt
import warnings

import pytest
from client_fakes import FakeClock

from metrics_kit import (
    Client,
    ConfigurationError,
    FetchError,
    ResponseFormatError,
    TransportError,
    UnconfirmedDataWarning,
)
from metrics_kit.client import fetching
from metrics_kit.client.cache import ValueCache
from metrics_kit.client.transports import MockTransport, Request, Response

METRIC = "swap_transaction_count"
PROJECT = "demoswap"
MONTHS = ("2023-01-01", "2024-12-31")  # 24 months, all complete at the fake clock's now (June 2025)


class Service:
    """A service whose data set can be swapped: a month's value is ``factor`` times its month number,
    every answer names ``version``, and /projects is not offered (404, with the version too)."""

    def __init__(self, version: str = "v1", factor: int = 1):
        self.version, self.factor = version, factor
        self.answers = 0
        self.interrupt_after: int | None = None
        self.override: dict[str, object] = {}

    def __call__(self, request: Request) -> Response:
        headers = {"X-Data-Version": self.version, "ETag": f'"{self.version}"'}
        if request.path != "/metrics":
            return Response(404, json={"error": {"code": "not_found", "message": "no such path"}}, headers=headers)
        if self.interrupt_after is not None and self.answers >= self.interrupt_after:
            raise KeyboardInterrupt
        self.answers += 1
        day = dt.date.fromisoformat(request.params["date"])
        end = (day.replace(day=28) + dt.timedelta(days=4)).replace(day=1) - dt.timedelta(days=1)
        if request.params["granularity"] == "1_day":
            end = day
        body = {
            **request.params,
            "period_start": day.isoformat(),
            "period_end": end.isoformat(),
            "unit": "count",
            "value": self.factor * day.month,
            "complete": True,
            **self.override,
        }
        return Response(200, json=body, headers=headers)


def refuse(request: Request) -> Response:
    raise AssertionError(f"no request was expected, got {request.url}")


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path))  # the environment, not the code


def _client(service, clock, **settings) -> tuple[Client, MockTransport]:
    # One service named "trust" whatever the handler: a test's "fresh process" is a new handler.
    transport = MockTransport(service, service="trust")
    return Client(transport=transport, clock=clock, **settings), transport


def _pull(client: Client) -> list[int]:
    return client.series(METRIC, PROJECT, *MONTHS, "1_month").tolist()


def _metrics_requests(transport: MockTransport) -> int:
    return sum(r.path == "/metrics" for r in transport.requests)


# -- the data version ---------------------------------------------------------------------------------


def test_a_fresh_client_asks_for_the_version_once_then_trusts_it_for_version_ttl():
    # Changed after issue 21's hostile review: a fresh client no longer trusts a version that another
    # client (another process) saw, however recently: it asks once, then reads every cached value.
    clock, service = FakeClock(), Service()
    with _client(service, clock)[0] as client:
        assert _pull(client) == [m for _ in (1, 2) for m in range(1, 13)]
    clock.advance(59)  # within version_ttl (60 s by default) of the other client's sighting
    again, transport = _client(service, clock)
    with again:
        series = again.series(METRIC, PROJECT, *MONTHS, "1_month")
        assert series.tolist() == [m for _ in (1, 2) for m in range(1, 13)]
        assert series.attrs["from_cache"] == 24
        assert [r.path for r in transport.requests] == ["/projects"]  # was: no request, the other's version trusted
        clock.advance(59)  # within its own version_ttl: no request at all
        assert again.value(METRIC, PROJECT, "month", "2024-03-09") == 3
        assert _pull(again) == [m for _ in (1, 2) for m in range(1, 13)]
    assert [r.path for r in transport.requests] == ["/projects"]


def test_a_fresh_client_never_trusts_another_clients_version_of_a_restarted_service():
    clock, service = FakeClock(), Service()
    with _client(service, clock)[0] as client:
        _pull(client)
    service.version, service.factor = "v2", 10  # restarted at the same address on other data
    clock.advance(5)  # well within version_ttl of the other client's sighting
    again, transport = _client(service, clock)
    with again:
        assert _pull(again) == [10 * m for _ in (1, 2) for m in range(1, 13)]  # was: the old data set's values
    assert _metrics_requests(transport) == 24


def test_an_untrusted_version_is_asked_once_and_kept_when_unchanged():
    clock, service = FakeClock(), Service()
    with _client(service, clock)[0] as client:
        _pull(client)
    clock.advance(61)
    client, transport = _client(service, clock)
    with client:
        assert _pull(client) == [m for _ in (1, 2) for m in range(1, 13)]
        assert _pull(client) == [m for _ in (1, 2) for m in range(1, 13)]
    assert [r.path for r in transport.requests] == ["/projects"]  # one question, no value fetched again


def test_a_changed_version_after_the_ttl_replaces_every_value():
    clock, service = FakeClock(), Service()
    with _client(service, clock)[0] as client:
        _pull(client)
    service.version, service.factor = "v2", 10  # the service restarted on another data set
    clock.advance(61)
    client, transport = _client(service, clock)
    with client:
        assert _pull(client) == [10 * m for _ in (1, 2) for m in range(1, 13)]
    assert _metrics_requests(transport) == 24


def test_a_changed_version_in_any_answer_refetches_the_older_values_so_none_are_mixed():
    clock, service = FakeClock(), Service()
    with _client(service, clock)[0] as client:
        _pull(client)
        service.version, service.factor = "v2", 10
        # Still within the TTL: the 24 cached months are v1's, the 25th month's answer names v2.
        series = client.series(METRIC, PROJECT, MONTHS[0], "2025-01-31", "1_month")
        assert series.tolist() == [10 * m for _ in (1, 2) for m in range(1, 13)] + [10]
        assert series.attrs["from_cache"] == 0
    # v2's 25 values are cached, v1's are gone. The projects may have changed with the data: asked again.
    again, transport = _client(service, clock)
    with again:
        assert again.series(METRIC, PROJECT, MONTHS[0], "2025-01-31", "1_month").tolist()[-2:] == [120, 10]
    assert [r.path for r in transport.requests] == ["/projects"]


def test_a_service_whose_data_keeps_changing_during_a_pull_is_an_error_not_a_mix():
    clock, service = FakeClock(), Service()
    versions = iter(range(1000))

    def changing(request: Request) -> Response:
        service.version = f"v{next(versions)}"
        return service(request)

    with _client(changing, clock, cache=False)[0] as client:
        with pytest.raises(ResponseFormatError, match="changed 4 times during one pull; ask again when it stays"):
            _pull(client)


@pytest.mark.parametrize("ttl", [-1, float("nan"), float("inf"), "60", True])
def test_version_ttl_is_checked(ttl):
    with pytest.raises(ConfigurationError) as caught:
        Client(transport=MockTransport(refuse), version_ttl=ttl)
    assert caught.value.argument == "version_ttl"


def test_version_ttl_zero_asks_every_time():
    clock, service = FakeClock(), Service()
    client, transport = _client(service, clock, version_ttl=0)
    with client:
        _pull(client)
        clock.advance(1)
        _pull(client)
    assert [r.path for r in transport.requests].count("/projects") == 2 and _metrics_requests(transport) == 24


# -- answers checked against the question -------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "wrong", "named"),
    [
        ("metric_name", "swap_active_users", "metric_name 'swap_active_users', asked 'swap_transaction_count'"),
        ("project", "otherswap", "project 'otherswap', asked 'demoswap'"),
        ("period_start", "2024-02-01", "period starting 2024-02-01"),
        ("period_end", "2024-03-30", "period_end '2024-03-30', the period asked ends 2024-03-31"),
        ("unit", "usd", "unit 'usd', the metric is in 'count'"),
    ],
)
def test_an_answer_to_another_question_is_refused_and_not_cached(field, wrong, named):
    clock, service = FakeClock(), Service()
    service.override = {field: wrong}
    day = "2024-03-01"
    client, transport = _client(service, clock)
    with client:
        with pytest.raises(ResponseFormatError) as caught:
            client.value(METRIC, PROJECT, "1_month", day)
        assert named in str(caught.value)
        service.override = {}
        assert client.value(METRIC, PROJECT, "1_month", day) == 3  # nothing was cached: asked again
    assert _metrics_requests(transport) == 2


def test_a_metric_asked_by_an_alias_is_asked_and_answered_by_its_canonical_name():
    clock, service = FakeClock(), Service()
    client, transport = _client(service, clock)
    with client:
        assert client.value("farm_withdraw_transaction_count", "demofarm", "1_month", "2024-03-01") == 3
        service.override = {"metric_name": "farm_withdraw_transaction_count"}  # an answer naming the alias
        assert client.value("farm_withdrawal_transaction_count", "demofarm", "1_month", "2024-04-01") == 4
    assert transport.requests[1].params["metric_name"] == "farm_withdrawal_transaction_count"


def test_answers_that_leave_fields_out_are_accepted():
    def bare(request: Request) -> Response:
        return Response(200, json=7) if request.path == "/metrics" else Response(404, json={})

    with Client(transport=MockTransport(bare), clock=FakeClock(), cache=False) as client:
        assert client.value(METRIC, PROJECT, "1_month", "2024-03-01") == 7


def test_every_mismatch_is_named_at_once():
    clock, service = FakeClock(), Service()
    service.override = {"project": "x", "unit": "usd"}
    with _client(service, clock, cache=False)[0] as client:
        with pytest.raises(FetchError) as caught:
            _pull(client)
    message = str(caught.value)
    assert "project 'x', asked 'demoswap'" in message and "unit 'usd'" in message


# -- nothing lost ---------------------------------------------------------------------------------------


DAYS = ("2023-01-01", "2024-12-31")  # 731 days


@pytest.mark.parametrize("received", [300, 2 * fetching.BATCH])
def test_an_interrupted_pull_keeps_what_arrived_and_the_rerun_fetches_only_the_rest(received):
    clock, service = FakeClock(), Service()
    service.interrupt_after = received
    client, transport = _client(service, clock)
    with client:
        with pytest.raises(KeyboardInterrupt):
            client.series(METRIC, PROJECT, *DAYS)
    # Every answer received is in the cache (was: only whole batches of fetching.BATCH).
    kept = received
    service.interrupt_after = None
    client, transport = _client(service, clock)
    with client:
        series = client.series(METRIC, PROJECT, *DAYS)
    assert len(series) == 731 and series.attrs["from_cache"] == kept
    assert _metrics_requests(transport) == 731 - kept


def test_values_are_in_the_cache_file_while_the_pull_goes_on_so_a_kill_keeps_them():
    """What another process (or this one after a kill) would find in the file, looked at mid-pull."""
    clock, service = FakeClock(), Service()
    found: list[int] = []

    def watched(request: Request) -> Response:
        if service.answers == 300:
            with ValueCache(MockTransport(refuse, service="trust").cache_identity, clock=clock) as other:
                found.append(other.stats()["entries"])
        return service(request)

    with _client(watched, clock)[0] as client:
        client.series(METRIC, PROJECT, *DAYS)
    assert found == [fetching.BATCH]


def _unreachable(request: Request) -> Response:
    raise TransportError(f"connection refused: {request.url}")


def test_cached_values_read_while_the_service_does_not_answer_say_their_version_is_unconfirmed():
    clock = FakeClock()
    first, _ = _client(Service("v1"), clock)
    expected = _pull(first)
    first.close()
    # A fresh client (a restarted kernel) while the service is down: the values it has are the data
    # as last seen, which it cannot confirm; it says so rather than passing them off as current.
    again, _ = _client(_unreachable, clock)
    with pytest.warns(UnconfirmedDataWarning, match="did not answer to confirm its data version: 24 values"):
        series = again.series(METRIC, PROJECT, *MONTHS, "1_month")
    assert series.tolist() == expected
    assert series.attrs["data_version"] == "v1"
    assert series.attrs["data_version_confirmed"] is False


def test_cached_values_under_a_version_the_service_confirmed_raise_no_warning():
    clock = FakeClock()
    first, _ = _client(Service("v1"), clock)
    _pull(first)
    first.close()
    again, _ = _client(Service("v1"), clock)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        series = again.series(METRIC, PROJECT, *MONTHS, "1_month")
    assert series.attrs["from_cache"] == 24
    assert series.attrs["data_version_confirmed"] is True


def test_version_ttl_zero_confirms_on_every_pull_and_never_warns():
    clock = FakeClock()
    client, _ = _client(Service("v1"), clock, version_ttl=0)
    _pull(client)
    clock.advance(5)  # past the TTL: the next pull asks again, and the service answers
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        series = client.series(METRIC, PROJECT, *MONTHS, "1_month")
    assert series.attrs["data_version_confirmed"] is True
