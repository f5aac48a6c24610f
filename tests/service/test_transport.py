"""metrics_kit.client.transports: retries, deadline, timeouts, rate limit, pool, error translation, the key.

The faults a real server won't produce on demand come from tests/faults.py; the last tests run the
real `metrics-kit serve --rate-limit 5` on tests/http_data.
"""

from __future__ import annotations

import http.client
import json
import logging
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from faults import OK_BODY, FaultServer, reset, slow, status, trickle, truncated, unaccepting_port
from support import TEST_KEY, ServerProcess

from metrics_kit import __version__
from metrics_kit.client.transports import HTTPTransport, Reply, pull_deadline
from metrics_kit.client.transports._http import _DeadlineRetry
from metrics_kit.errors import ClientClosedError, ConfigurationError, TransportError, ValidationError

KEY = "fault-key-SECRET-0123456789abcdef"
SECOND_KEY = "second-key-SECRET-fedcba9876543210"
KEYS = (KEY, TEST_KEY, SECOND_KEY)
PARAMS = {"metric_name": "swap_active_users", "project": "swapper", "granularity": "1_week", "date": "2024-03-20"}
FAST = {"connect_timeout": 2.0, "read_timeout": 2.0, "backoff_factor": 0.01, "backoff_max": 0.1}
DATA = Path(__file__).parents[1] / "http_data"


# -- plumbing ---------------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def no_key_in_logs(caplog):
    """Every test runs with urllib3 and metrics_kit logging at DEBUG; no record may hold a key."""
    caplog.set_level(logging.DEBUG, logger="urllib3")
    caplog.set_level(logging.DEBUG, logger="metrics_kit")
    caplog.set_level(logging.DEBUG, logger="requests")
    assert http.client.HTTPConnection.debuglevel == 0  # http.client would print headers to stdout
    yield caplog
    for record in caplog.records:
        text = f"{record.getMessage()} {record.args!r} {record.exc_text or ''}"
        for key in KEYS:
            assert key not in text, f"key in log record {record.name}: {text}"


@pytest.fixture
def server():
    with FaultServer() as fault_server:
        yield fault_server


@pytest.fixture
def make_transport():
    made: list[HTTPTransport] = []

    def make(base_url: str, **options) -> HTTPTransport:
        transport = HTTPTransport(base_url, options.pop("api_key", KEY), **{**FAST, **options})
        made.append(transport)
        return transport

    yield make
    for transport in made:
        transport.close()


def assert_no_key(error: BaseException) -> None:
    """Neither the message, the args, the attributes nor the cause/context chain hold the key."""
    seen = error
    while seen is not None:
        text = f"{seen} {seen.args!r} {vars(seen)!r}"
        for key in KEYS:
            assert key not in text
        seen = seen.__cause__ or seen.__context__


def refused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Waits:
    """A clock that moves only when the transport sleeps, and the sleeps it asked for: how long a wait
    was meant to be, without waiting or timing anything (one thread only)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


# -- retried statuses -------------------------------------------------------------------------------------


def test_429_retry_after_is_honoured_in_full(server, make_transport):
    server.script("/metrics", status(429, headers={"Retry-After": "1"}), status(200))
    waits = Waits()
    # backoff_max caps backoff, not Retry-After
    transport = make_transport(server.base_url, backoff_max=0.1, clock=waits.clock, sleep=waits.sleep)
    reply = transport.get("/metrics", PARAMS)
    assert isinstance(reply, Reply)
    assert reply.status == 200
    assert len(waits.slept) == 1 and waits.slept[0] >= 1.0  # the whole second, plus jitter
    assert server.attempts() == 2


@pytest.mark.parametrize("code", [502, 503, 504])
def test_transient_statuses_are_retried(server, make_transport, code):
    server.script("/metrics", status(code), status(200))
    reply = make_transport(server.base_url).get("/metrics", PARAMS)
    assert reply.status == 200
    assert server.attempts() == 2


@pytest.mark.parametrize("code", [500, 400, 401, 403, 404, 405, 406])
def test_other_errors_are_not_retried(server, make_transport, code):
    server.script("/metrics", status(code, body={"error": {"code": "x", "message": "m", "param": None}}), status(200))
    reply = make_transport(server.base_url).get("/metrics", PARAMS)
    assert reply.status == code
    assert b'"code": "x"' in reply.body
    assert server.attempts() == 1


def test_status_retries_exhausted_return_the_last_reply(server, make_transport):
    server.always("/metrics", status(503))
    reply = make_transport(server.base_url, retries=3).get("/metrics", PARAMS)
    assert reply.status == 503
    assert reply.headers["content-type"] == "application/json"  # headers are case-insensitive
    assert server.attempts() == 4


def test_unreadable_retry_after_falls_back_to_backoff(server, make_transport):
    server.script("/metrics", status(503, headers={"Retry-After": "soon"}), status(200))
    assert make_transport(server.base_url).get("/metrics", PARAMS).status == 200
    assert server.attempts() == 2


def test_413_with_retry_after_is_not_retried(server, make_transport):
    server.script("/metrics", status(413, headers={"Retry-After": "1"}), status(200))
    assert make_transport(server.base_url).get("/metrics", PARAMS).status == 413
    assert server.attempts() == 1


def test_redirect_is_returned_not_followed(server, make_transport):
    server.script("/metrics", status(302, headers={"Location": "http://example.invalid/steal"}))
    reply = make_transport(server.base_url).get("/metrics", PARAMS)
    assert reply.status == 302
    assert server.attempts() == 1


# -- the deadline -----------------------------------------------------------------------------------------


def test_retry_after_beyond_the_deadline_returns_the_429_without_sleeping(server, make_transport):
    server.always("/metrics", status(429, headers={"Retry-After": "30"}))
    waits = Waits()
    transport = make_transport(server.base_url, retry_deadline=2.0, clock=waits.clock, sleep=waits.sleep)
    reply = transport.get("/metrics", PARAMS)
    assert reply.status == 429
    assert reply.headers["Retry-After"] == "30"
    assert server.attempts() == 1
    assert waits.slept == []  # not the 30 s asked for, nor any part of it


def test_backoff_beyond_the_deadline_stops_the_retries(server, make_transport):
    server.always("/metrics", reset())
    transport = make_transport(server.base_url, retries=20, backoff_factor=0.2, backoff_max=5.0, retry_deadline=1.0)
    with pytest.raises(TransportError, match="retry_deadline=1 s") as caught:
        transport.get("/metrics", PARAMS)
    assert 2 <= server.attempts() < 21
    assert_no_key(caught.value)


def test_retry_subclass_survives_new_and_increment():
    retry = _DeadlineRetry(total=3, retry_deadline=7.0, started=123.0, backoff_factor=0.5, status_forcelist={429})
    copy = retry.new(total=1)
    assert isinstance(copy, _DeadlineRetry)
    assert (copy.retry_deadline, copy.started, copy.total, copy.backoff_factor) == (7.0, 123.0, 1, 0.5)
    fresh = _DeadlineRetry(total=3, retry_deadline=7.0, started=time.monotonic())
    after = fresh.increment("GET", "/metrics", error=ConnectionResetError())
    assert isinstance(after, _DeadlineRetry)
    assert (after.retry_deadline, after.started, after.total) == (7.0, fresh.started, 2)


# -- connection faults ------------------------------------------------------------------------------------


def test_reset_then_answer_is_retried(server, make_transport):
    server.script("/metrics", reset(), status(200))
    assert make_transport(server.base_url).get("/metrics", PARAMS).status == 200
    assert server.attempts() == 2


def test_reset_every_time_raises_transport_error(server, make_transport):
    server.always("/metrics", reset())
    with pytest.raises(TransportError) as caught:
        make_transport(server.base_url, retries=3).get("/metrics", PARAMS)
    assert server.attempts() == 4
    message = str(caught.value)
    assert f"{server.base_url}/metrics?metric_name=swap_active_users" in message
    assert "reset" in message and "4 attempts" in message and "retries exhausted" in message
    assert caught.value.__cause__ is None and caught.value.__context__ is None
    assert caught.value.url.startswith(server.base_url)
    assert_no_key(caught.value)


def test_slow_answer_is_retried(server, make_transport):
    server.script("/metrics", slow(3.0), status(200))
    transport = make_transport(server.base_url, read_timeout=0.3)
    assert transport.get("/metrics", PARAMS).status == 200
    assert server.attempts() == 2


def test_always_slow_raises_timed_out(server, make_transport):
    server.always("/metrics", slow(3.0))
    with pytest.raises(TransportError, match=r"timed out after 0\.3 s") as caught:
        make_transport(server.base_url, read_timeout=0.3, retries=2).get("/metrics", PARAMS)
    assert server.attempts() == 3
    assert "read_timeout" in str(caught.value)
    assert_no_key(caught.value)


def test_connection_refused_raises_transport_error_quickly(make_transport):
    port = refused_port()
    waits = Waits()
    transport = make_transport(f"http://127.0.0.1:{port}", retries=3, clock=waits.clock, sleep=waits.sleep)
    with pytest.raises(TransportError, match="refused") as caught:
        transport.get("/metrics", PARAMS)
    assert sum(waits.slept) < 1  # a few 10 ms backoffs, no timeout
    message = str(caught.value)
    assert f"http://127.0.0.1:{port}/metrics?" in message
    assert "is running" in message  # what to do
    assert_no_key(caught.value)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="relies on Linux dropping SYNs")
def test_connect_timeout_raises_transport_error(make_transport):
    with unaccepting_port() as port:
        transport = make_transport(f"http://127.0.0.1:{port}", connect_timeout=0.3, retries=1)
        with pytest.raises(TransportError, match=r"connecting timed out after 0\.3 s") as caught:
            transport.get("/metrics", PARAMS)
    assert "2 attempts, retries exhausted" in str(caught.value)
    assert "connect_timeout" in str(caught.value)
    assert_no_key(caught.value)


def test_no_retries_means_one_attempt(server, make_transport):
    server.always("/metrics", reset())
    with pytest.raises(TransportError, match="gave up after 1 attempt, retries exhausted"):
        make_transport(server.base_url, retries=0).get("/metrics", PARAMS)
    assert server.attempts() == 1


def test_a_truncated_body_is_retried(server, make_transport):
    server.script("/metrics", truncated())
    reply = make_transport(server.base_url).get("/metrics", PARAMS)
    assert reply.status == 200 and server.attempts() == 2  # the body is read inside the attempt


def test_a_body_that_stays_truncated_raises_transport_error(server, make_transport):
    server.always("/metrics", truncated())
    with pytest.raises(TransportError, match="truncated") as caught:
        make_transport(server.base_url).get("/metrics", PARAMS)
    assert server.attempts() > 1
    assert_no_key(caught.value)


@pytest.mark.parametrize("body", [b"<html>not json</html>", b'{"unexpected": ["shape"]}', b""])
def test_any_body_comes_back_as_bytes(server, make_transport, body):
    server.script("/metrics", status(200, body=body, headers={"Content-Type": "text/html"}))
    reply = make_transport(server.base_url).get("/metrics", PARAMS)
    assert (reply.status, reply.body) == (200, body)


# -- the key ----------------------------------------------------------------------------------------------


def test_key_only_in_the_header(server, make_transport, caplog):
    transport = make_transport(server.base_url)
    server.script("/metrics", reset())  # so urllib3 logs a retry warning too
    reply = transport.get("metrics", PARAMS)
    assert (
        reply.url == f"{server.base_url}/metrics?metric_name=swap_active_users&project=swapper"
        "&granularity=1_week&date=2024-03-20"
    )
    for request in server.requests:
        assert request.headers["x-api-key"] == KEY
        assert KEY not in request.target
    request = server.requests[-1]
    assert request.headers["accept"] == "application/json"
    assert request.headers["user-agent"] == f"metrics-kit/{__version__}"
    assert request.query == {k: [v] for k, v in PARAMS.items()}
    # the no_key_in_logs fixture checks these records: make sure there are some to check
    assert {r.name for r in caplog.records} >= {"urllib3.connectionpool", "urllib3.util.retry", "metrics_kit.transport"}
    for text in (
        repr(transport),
        str(vars(transport)),
        reply.url,
        repr(reply.headers),
        repr(dict(transport._session.headers)),
    ):
        assert KEY not in text
    assert server.base_url in repr(transport)


def test_key_in_parameters_is_refused_before_sending(server, make_transport):
    with pytest.raises(ValidationError) as caught:
        make_transport(server.base_url).get("/metrics", {**PARAMS, "api_key": KEY})
    assert server.attempts() == 0
    assert_no_key(caught.value)


@pytest.mark.parametrize("bad_key", ["", "with space", "line\nbreak", "tab\tkey"])
def test_unusable_key_is_refused_without_echo(bad_key):
    with pytest.raises(ConfigurationError) as caught:
        HTTPTransport("http://127.0.0.1:1", bad_key)
    if bad_key:
        assert bad_key not in str(caught.value)


def test_base_url_must_be_http():
    with pytest.raises(ConfigurationError, match="base_url"):
        HTTPTransport("127.0.0.1:8000", KEY)


# -- rate limit and pool ----------------------------------------------------------------------------------


def run_many(transport: HTTPTransport, count: int, threads: int) -> list[Reply]:
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(lambda _: transport.get("/metrics", PARAMS), range(count)))


def test_rate_limit_paces_first_attempts_across_threads(server, make_transport):
    # Real requests; the pacer's clock is per thread and moved only by its sleeps: no real waiting.
    local = threading.local()

    def sleep(seconds: float) -> None:
        local.now = getattr(local, "now", 0.0) + seconds

    transport = make_transport(server.base_url, rate_limit=20, clock=lambda: getattr(local, "now", 0.0), sleep=sleep)
    replies = run_many(transport, 30, threads=8)
    assert [r.status for r in replies] == [200] * 30
    assert transport._pacer._next == pytest.approx(30 / 20)  # 30 slots 1/20 s apart, from 0


def test_no_rate_limit_means_no_pacing(server, make_transport):
    # Each answer takes 0.5 s: unpaced, 8 threads are answered at once (paced at 20/s, at most ~10
    # would overlap anyway, so the point is only that nothing serializes them).
    server.always("/metrics", slow(0.5))
    replies = run_many(make_transport(server.base_url, rate_limit=None), 16, threads=8)
    assert [r.status for r in replies] == [200] * 16
    assert server.max_in_flight >= 4


def test_retry_after_holds_other_threads_first_attempts(server, make_transport):
    server.script("/metrics", status(429, headers={"Retry-After": "1"}), status(200), status(200))
    retry_waiting = threading.Event()

    def sleep(seconds: float) -> None:
        if seconds >= 1:  # the retry's wait for Retry-After, entered after the hold is set
            retry_waiting.set()
        time.sleep(seconds)

    transport = make_transport(server.base_url, rate_limit=None, sleep=sleep)
    limited = threading.Thread(target=transport.get, args=("/metrics", PARAMS))
    limited.start()
    # An event, not a fixed pause: on a loaded machine the 429 may take longer than any pause to settle.
    assert retry_waiting.wait(timeout=10)
    other = {**PARAMS, "date": "2024-03-27"}
    assert transport.get("/metrics", other).status == 200
    limited.join()
    # Held as well: the other thread's first attempt goes after the retry, not during its wait.
    assert [r.query["date"] for r in server.requests] == [[PARAMS["date"]], [PARAMS["date"]], [other["date"]]]


@pytest.mark.parametrize("pool_size", [16, 4])
def test_connections_are_pooled_and_reused(server, make_transport, pool_size):
    transport = make_transport(server.base_url, pool_size=pool_size)
    replies = run_many(transport, 64, threads=16)
    assert [r.status for r in replies] == [200] * 64
    assert server.attempts() == 64
    assert len(server.client_ports()) <= pool_size
    assert server.max_in_flight <= pool_size


# -- against the real server ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def limited_server(tmp_path_factory):
    # Two keys, so each test starts with a full bucket (the limit is per key).
    with ServerProcess(
        DATA,
        "--rate-limit",
        "5",
        key=TEST_KEY,
        cache_dir=tmp_path_factory.mktemp("transport-cache"),
        env={"METRICS_KIT_API_KEYS": f"{TEST_KEY},{SECOND_KEY}"},
    ) as proc:
        yield proc


def test_real_server_burst_ends_200_thanks_to_retry_after(limited_server):
    # 16 threads (the client's most) against 5 requests a second: 25 of the first attempts get 429.
    with HTTPTransport(
        limited_server.base_url,
        TEST_KEY,
        rate_limit=None,
        retries=5,
        backoff_factor=0.3,
        backoff_max=1.0,
        read_timeout=10,
    ) as transport:
        replies = run_many(transport, 30, threads=16)
    assert [r.status for r in replies] == [200] * 30, [r.status for r in replies]
    assert all(json.loads(r.body)["metric_name"] == "swap_active_users" for r in replies)


def test_real_server_never_limits_a_client_paced_below_its_rate(limited_server):
    count = 12
    # retries=0: a 429 would come back as a Reply, so all-200 means the server never limited us.
    with HTTPTransport(limited_server.base_url, SECOND_KEY, rate_limit=4, retries=0, read_timeout=10) as transport:
        replies = run_many(transport, count, threads=8)
    assert [r.status for r in replies] == [200] * count


# -- the timeout bounds the whole answer; a deadline bounds the whole pull -------------------------------


def _trickles_cut_short(server: FaultServer) -> bool:
    """Every trickled answer was abandoned by the client before its last byte went out."""
    server.stop()  # joins the handlers, so every trickle has recorded what it sent
    return bool(server.trickled) and all(sent < total for sent, total in server.trickled)


@pytest.mark.parametrize("headers", [False, True], ids=["body", "headers and body"])
def test_a_trickled_answer_cannot_hold_a_request_past_the_timeout(server, make_transport, headers):
    # One byte every 100 ms: each read is far inside the timeout, the whole answer is not.
    server.always("/metrics", trickle(every=0.1, headers=headers))
    transport = make_transport(server.base_url, read_timeout=0.3, retries=1)
    with pytest.raises(TransportError, match=r"timed out after 0\.3 s: the timeout was exceeded") as caught:
        transport.get("/metrics", PARAMS)
    assert "2 attempts" in str(caught.value)
    assert server.attempts() == 2
    assert _trickles_cut_short(server)
    assert_no_key(caught.value)


def test_a_trickle_that_ends_within_the_timeout_is_read_whole(server, make_transport):
    server.script("/metrics", trickle(every=0.002))
    reply = make_transport(server.base_url, read_timeout=5.0).get("/metrics", PARAMS)
    assert (reply.status, reply.body) == (200, OK_BODY)
    assert server.attempts() == 1


def test_the_pull_deadline_stops_sending_once_passed(server, make_transport):
    # A clock that moves 10 s with every request the server sees: deterministic, whatever the machine.
    def clock() -> float:
        return 10.0 * len(server.requests)

    transport = make_transport(server.base_url, pool_size=1, clock=clock, read_timeout=1000.0)  # only the deadline
    with pull_deadline(35):
        replies = transport.get_many([("/metrics", {**PARAMS, "date": f"2024-03-{day}"}) for day in range(10, 16)])
    assert [isinstance(r, Reply) for r in replies] == [True, True, True, False, False, False]
    assert "deadline (35 s) was exceeded before the whole answer arrived" in str(replies[3])  # sent at 30, read at 40
    assert all("not sent, as the pull's deadline (35 s) had passed" in str(r) for r in replies[4:])
    assert server.attempts() == 4
    assert transport.get("/metrics", PARAMS).status == 200  # outside the block, no deadline


def test_a_transport_closed_while_a_batch_is_handed_to_it_says_so(server, make_transport):
    # close() from another thread while a pull hands its batch to the pool: ThreadPoolExecutor's
    # RuntimeError ("cannot schedule new futures after shutdown") came out of the pull.
    transport = make_transport(server.base_url, pool_size=4)
    answers = transport.answers([("/metrics", {**PARAMS, "date": f"2024-03-{day}"}) for day in range(10, 14)])
    transport.close()  # the batch's requests are handed to the pool when they are first asked for
    with pytest.raises(ClientClosedError, match="was closed"):
        list(answers)
    with pytest.raises(ClientClosedError, match="was closed"):  # and no pool is made again for the next
        transport.answers([("/metrics", PARAMS)] * 4)
    assert server.attempts() == 0


def test_a_batch_asked_after_the_pull_deadline_fails_at_once_without_the_pool(server, make_transport):
    # Each request past the deadline went through the pool's threads to be refused: a pull of 100,000
    # points given deadline=15 ran on for a minute and more, one "not sent" at a time.
    now = [0.0]
    transport = make_transport(server.base_url, pool_size=4, clock=lambda: now[0])
    with pull_deadline(35):
        assert transport.get("/metrics", PARAMS).status == 200  # the deadline starts with it
        now[0] = 40.0
        before = set(threading.enumerate())
        replies = transport.get_many([("/metrics", {**PARAMS, "date": f"2024-03-{day}"}) for day in range(10, 30)])
        started = [thread.name for thread in threading.enumerate() if thread not in before]
    assert all("not sent, as the pull's deadline (35 s) had passed" in str(r) for r in replies)
    assert len(replies) == 20 and started == []  # no thread was set to each
    assert server.attempts() == 1


def test_the_pull_deadline_cuts_a_trickle_and_is_not_retried_past(server, make_transport):
    server.always("/metrics", trickle(every=0.1))
    transport = make_transport(server.base_url, read_timeout=30.0, retries=5, pool_size=4)
    with pull_deadline(0.3), pytest.raises(TransportError, match=r"deadline \(0\.3 s\) was exceeded") as caught:
        transport.get("/metrics", PARAMS)
    assert "1 attempt," in str(caught.value) and server.attempts() == 1
    assert _trickles_cut_short(server)


def test_the_pull_deadline_reaches_the_worker_threads(server, make_transport):
    server.always("/metrics", trickle(every=0.1))
    transport = make_transport(server.base_url, read_timeout=30.0, retries=0, pool_size=4)
    with pull_deadline(0.3):
        replies = transport.get_many([("/metrics", {**PARAMS, "date": f"2024-03-{day}"}) for day in range(10, 14)])
    assert all(isinstance(r, TransportError) and "deadline" in str(r) for r in replies)
    assert _trickles_cut_short(server)


@pytest.mark.parametrize(
    "url",
    [
        "http://alice:pw-SECRET-1@127.0.0.1:9/",
        "https://alice:pw-SECRET-1@metrics.example.com/v1",
        "http://pw-SECRET-1@127.0.0.1:9",
        "ftp://alice:pw-SECRET-1@127.0.0.1:9",
    ],
)
def test_credentials_in_the_base_url_are_refused_unechoed(url):
    with pytest.raises(ConfigurationError, match="user name or password") as caught:
        HTTPTransport(url, KEY)
    assert caught.value.argument == "base_url"
    assert "pw-SECRET-1" not in f"{caught.value} {caught.value.args!r} {vars(caught.value)!r}"
    assert caught.value.__cause__ is None and caught.value.__context__ is None


def test_closing_the_transport_stops_its_watchdog_thread(server, make_transport):
    before = set(threading.enumerate())
    transport = make_transport(server.base_url)
    assert transport.get("/metrics", PARAMS).status == 200
    watchdogs = [t for t in set(threading.enumerate()) - before if t.name == "metrics-kit-answers"]
    assert len(watchdogs) == 1
    transport.close()
    assert not watchdogs[0].is_alive()
