"""The transports on their own: the ASGI one with a tiny application (no server, no socket), the
mock one, and the protocol they share."""

from __future__ import annotations

import json

import pytest
from client_fakes import FakeClock, daily_service

from metrics_kit.client.transports import ASGITransport, HTTPTransport, MockTransport, Pacer, Reply, Transport
from metrics_kit.errors import TransportError


async def echo_app(scope, receive, send):
    """Answers with what it was asked: path, query string and key; /boom raises."""
    if scope["path"] == "/boom":
        raise RuntimeError("the application broke")
    headers = dict(scope["headers"])
    body = json.dumps(
        {"path": scope["path"], "query": scope["query_string"].decode(), "key": headers[b"x-api-key"].decode()}
    ).encode()
    await send({"type": "http.response.start", "status": 418, "headers": [(b"Retry-After", b"7")]})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
def asgi():
    transport = ASGITransport(echo_app, "k-1", "asgi://test")
    yield transport
    transport.close()


def test_an_asgi_app_answers_in_process(asgi):
    reply = asgi.get("/metrics", {"project": "a b", "date": "2025-01-01"})
    assert reply.status == 418 and reply.header("retry-after") == "7"
    assert json.loads(reply.body) == {"path": "/metrics", "query": "project=a+b&date=2025-01-01", "key": "k-1"}
    assert reply.url == "asgi://test/metrics?project=a+b&date=2025-01-01" and "k-1" not in reply.url


def test_get_many_keeps_the_order_and_a_failure_stays_with_its_request(asgi):
    replies = asgi.get_many([("/a", {}), ("/boom", {}), ("/c", {"x": "1"})])
    assert [json.loads(r.body)["path"] for r in (replies[0], replies[2])] == ["/a", "/c"]
    assert isinstance(replies[1], TransportError) and "the application broke" in str(replies[1])
    with pytest.raises(TransportError, match="RuntimeError"):
        asgi.get("/boom", {})


def test_the_asgi_transport_honours_a_rate_limit():
    clock = FakeClock(0.0)
    transport = ASGITransport(echo_app, "k-1", "asgi://test", pacer=Pacer(5.0, clock, clock.sleep))
    try:
        transport.get_many([("/a", {})] * 4)
    finally:
        transport.close()
    assert clock.slept == pytest.approx([0.2, 0.2, 0.2])


def test_every_transport_is_a_transport(asgi):
    http = HTTPTransport("http://127.0.0.1:9", "k-1")
    try:
        for transport in (asgi, http, MockTransport(daily_service({}))):
            assert isinstance(transport, Transport)
    finally:
        http.close()
    assert not isinstance("http://127.0.0.1:9", Transport)


def test_the_mock_transport_turns_a_raise_into_a_failed_request():
    def down(request):
        raise TransportError("connection refused")

    replies = MockTransport(down).get_many([("/metrics", {"a": "1"})])
    assert isinstance(replies[0], TransportError)
    assert isinstance(MockTransport(daily_service({})).get("/projects", {}), Reply)


def test_two_keys_of_one_service_never_share_cached_values():
    one, other = HTTPTransport("http://127.0.0.1:9", "key-one"), HTTPTransport("http://127.0.0.1:9", "key-two")
    try:
        assert one.cache_identity != other.cache_identity
        assert one.cache_identity.startswith("http://127.0.0.1:9#") and "key-one" not in one.cache_identity
    finally:
        one.close()
        other.close()


class OwnTransport:
    """A transport of a user's, with the protocol's methods only (no ``answers``)."""

    base_url = "own://service"
    cache_identity = "own://service#0"

    def __init__(self, handler):
        self._mock = MockTransport(handler)
        self.batches: list[int] = []

    def get(self, path, params):
        return self._mock.get(path, params)

    def get_many(self, requests):
        self.batches.append(len(requests))
        return [self._mock.get(path, params) for path, params in requests]

    def close(self):
        self._mock.close()


def test_whether_the_data_is_synthetic_is_declared_and_optional(asgi, tmp_path, monkeypatch):
    from metrics_kit import Client
    from metrics_kit.client.transports import SaysSynthetic, is_synthetic

    http = HTTPTransport("http://127.0.0.1:9", "k-1")
    demo = ASGITransport(echo_app, "k-1", "asgi://demo", synthetic=True)
    try:
        for transport in (asgi, http, MockTransport(daily_service({})), demo):
            assert isinstance(transport, SaysSynthetic)
        assert [is_synthetic(t) for t in (asgi, http, demo)] == [False, False, True]
    finally:
        http.close()
        demo.close()
    own = OwnTransport(daily_service({}))  # says nothing: not synthetic, and still a Transport
    assert not isinstance(own, SaysSynthetic) and not is_synthetic(own) and isinstance(own, Transport)
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path))
    with Client(transport=own, clock=FakeClock(), progress=False) as client:
        assert (
            client.series("swap_transaction_count", "demoswap", "2025-01-01", "2025-01-01").attrs["synthetic"] is False
        )


def test_a_transport_without_answers_is_asked_with_get_many(tmp_path, monkeypatch):
    import datetime as dt

    from metrics_kit import Client

    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path))
    daily = {dt.date(2025, 1, 1) + dt.timedelta(days=i): i for i in range(300)}
    own = OwnTransport(daily_service(daily))
    with Client(transport=own, clock=FakeClock(), progress=False) as client:
        series = client.series("swap_transaction_count", "demoswap", "2025-01-01", "2025-10-27")
    assert series.tolist() == list(range(300))
    assert own.batches == [256, 44]


def test_answers_taken_after_an_interrupt_are_those_not_yet_taken():
    from metrics_kit.client.transports import Answers, Response, answers_of

    def one(request):
        return Response(200, json=1)

    replies = MockTransport(one).get_many([("/metrics", {})] * 3)
    answers = Answers(replies)
    taken = []
    with pytest.raises(KeyboardInterrupt):
        for index, _ in answers:
            taken.append(index)
            if index == 1:
                raise KeyboardInterrupt
    # The one being taken when the interrupt came is given again: taking twice is harmless, losing is not.
    assert taken == [0, 1] and [i for i, _ in answers.received()] == [1, 2]
    mock = MockTransport(one)
    lazy = answers_of(mock, [("/metrics", {})] * 3)
    assert mock.requests == []  # nothing is sent before the answers are asked for
    assert [i for i, _ in lazy] == [0, 1, 2] and lazy.received() == []
