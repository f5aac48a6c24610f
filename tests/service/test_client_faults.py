"""The client against faults a real server won't produce on demand, and every body shape."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest
from faults import FaultServer, reset, slow, status, trickle

import metrics_kit as mk

KEY = "fault-test-key-5f1d"
COUNT = "swap_transaction_count"
AMOUNT = "transaction_fee_revenue_in_usd"


@pytest.fixture
def server():
    with FaultServer() as server:
        server.always("/projects", status(404))  # a service without discovery
        yield server


@pytest.fixture
def client(server):
    with mk.Client(
        server.base_url, KEY, cache=False, progress=False, timeout=0.5, connect_timeout=0.5, retries=2, workers=1
    ) as client:
        yield client


def metric_attempts(server) -> int:
    return server.attempts("/metrics")


def test_429_with_retry_after_then_success_gives_the_value(server, client):
    server.script("/metrics", status(429, headers={"Retry-After": "1"}), status(200, {"value": 5}))
    assert client.value(COUNT, "demoswap", "1_day", "2025-01-01") == 5
    assert metric_attempts(server) == 2


def test_503_then_success_is_retried(server, client):
    server.script("/metrics", status(503), status(200, {"value": 7}))
    assert client.value(COUNT, "demoswap", "1_day", "2025-01-01") == 7


def test_500_is_a_server_error_and_is_not_retried(server, client):
    server.script("/metrics", status(500), status(200, {"value": 7}))
    with pytest.raises(mk.ServerError) as caught:
        client.value(COUNT, "demoswap", "1_day", "2025-01-01")
    assert caught.value.status == 500 and caught.value.code == "scripted"
    assert metric_attempts(server) == 1


def test_other_4xx_keep_the_servers_code_and_message(server, client):
    server.script(
        "/metrics",
        status(404, {"error": {"code": "unknown_project", "message": "no such project", "param": "project"}}),
    )
    with pytest.raises(mk.NotFoundError) as caught:
        client.value(COUNT, "demoswap", "1_day", "2025-01-01")
    error = caught.value
    assert (error.status, error.code, error.message, error.param) == (
        404,
        "unknown_project",
        "no such project",
        "project",
    )
    assert "metric_name=swap_transaction_count" in error.url and KEY not in str(error)
    assert metric_attempts(server) == 1


def test_401_is_an_authentication_error(server, client):
    server.script("/metrics", status(401))
    with pytest.raises(mk.AuthenticationError):
        client.value(COUNT, "demoswap", "1_day", "2025-01-01")


def test_a_response_slower_than_the_timeout_is_retried_then_fails(server, client):
    server.script("/metrics", slow(2.0), status(200, {"value": 3}))
    assert client.value(COUNT, "demoswap", "1_day", "2025-01-01") == 3
    server.always("/metrics", slow(2.0))
    with pytest.raises(mk.TransportError, match="timed out"):
        client.value(COUNT, "demoswap", "1_day", "2025-01-02")


def test_a_reset_connection_is_retried_then_fails(server, client):
    server.script("/metrics", reset(), status(200, {"value": 4}))
    assert client.value(COUNT, "demoswap", "1_day", "2025-01-01") == 4
    server.always("/metrics", reset())
    with pytest.raises(mk.TransportError) as caught:
        client.value(COUNT, "demoswap", "1_day", "2025-01-02")
    assert KEY not in str(caught.value) and caught.value.__context__ is None


def test_a_body_that_is_not_json_shows_its_start(server, client):
    server.script("/metrics", status(200, "<html><body>Gateway says hi</body></html>"))
    with pytest.raises(mk.ResponseFormatError, match="Gateway says hi"):
        client.value(COUNT, "demoswap", "1_day", "2025-01-01")


def test_an_unknown_body_shape_shows_its_start(server, client):
    server.script("/metrics", status(200, {"result": {"amount": 5}}))
    with pytest.raises(mk.ResponseFormatError, match="result"):
        client.value(COUNT, "demoswap", "1_day", "2025-01-01")


@pytest.mark.parametrize(
    "body, expected",
    [
        ("5", 5),
        ({"value": 5}, 5),
        ({"data": {"value": 5}}, 5),
        ({"data": 5}, 5),
        ("[5]", 5),
        ([{"value": 5}], 5),
        ({"value": 5.0}, 5),  # a whole float is a count
        (
            {
                "metric_name": COUNT,
                "project": "demoswap",
                "granularity": "1_day",
                "date": "2025-01-01",
                "period_start": "2025-01-01",
                "period_end": "2025-01-01",
                "unit": "count",
                "value": 5,
                "complete": True,
            },
            5,
        ),
    ],
)
def test_every_known_body_shape_gives_the_count(server, client, body, expected):
    server.script("/metrics", status(200, json.dumps(body) if isinstance(body, list) else body))
    got = client.value(COUNT, "demoswap", "1_day", "2025-01-01")
    assert got == expected and type(got) is int


def test_amounts_are_floats(server, client):
    server.script("/metrics", status(200, "12"))
    got = client.value(AMOUNT, "demoswap", "1_day", "2025-01-01")
    assert got == 12.0 and type(got) is float


@pytest.mark.parametrize(
    "body",
    [
        '{"value": NaN}',
        '{"value": true}',
        '{"value": "five"}',
        '{"value": "NaN"}',
        '{"value": "0x1F"}',
        '{"value": "1_000"}',  # Python's float() would take it; decimal text does not
        '{"value": " 5"}',
        '{"value": "5.5"}',  # decimal text is read exactly, and a count is whole
        "[1, 2]",
        "[]",
        '{"value": 5.5}',
        '{"value": Infinity}',
    ],
)
def test_no_number_is_guessed(server, client, body):
    server.script("/metrics", status(200, body))
    with pytest.raises(mk.ResponseFormatError):
        client.value(COUNT, "demoswap", "1_day", "2025-01-01")


def test_a_failed_point_in_a_range_is_never_silent(server, client):
    server.script("/metrics", status(200, "1"), status(404), status(200, "3"))
    with pytest.warns(mk.PartialDataWarning, match="1 of 3"):
        series = client.series(COUNT, "demoswap", "2025-01-01", "2025-01-03", errors="coerce")
    assert series.dtype == "Int64" and series.isna().tolist() == [False, True, False]
    assert [f["date"] for f in series.attrs["failed"]] == ["2025-01-02"]
    server.script("/metrics", status(200, "1"), status(404), status(200, "3"))
    with pytest.raises(mk.FetchError) as caught:
        client.series(COUNT, "demoswap", "2025-01-01", "2025-01-03")
    assert len(caught.value.failures) == 1 and "2025-01-02" in str(caught.value)


def test_the_key_travels_only_in_the_header(server, client):
    server.script("/metrics", status(200, "1"))
    client.value(COUNT, "demoswap", "1_day", "2025-01-01")
    for request in server.requests:
        assert KEY not in request.target
        assert request.headers.get("x-api-key") == KEY
        assert request.headers.get("accept") == "application/json"


# -- deadlines ---------------------------------------------------------------------------------------------


def test_a_trickled_body_cannot_hold_value_past_the_timeout(server, client):
    # 32 bytes, one every 100 ms: 3.2 s whole, each read far inside timeout=0.5.
    server.always("/metrics", trickle(every=0.1))
    with pytest.raises(mk.TransportError, match="the timeout was exceeded") as caught:
        client.value(COUNT, "demoswap", "1_day", "2025-01-01")
    assert metric_attempts(server) == 3 and "3 attempts" in str(caught.value)  # retries=2
    server.stop()
    assert all(sent < total for sent, total in server.trickled)


def test_the_deadline_bounds_a_whole_pull(server):
    server.always("/metrics", trickle(every=0.1))
    with mk.Client(
        server.base_url, KEY, cache=False, progress=False, timeout=30, retries=5, workers=1, deadline=0.3
    ) as client:
        with pytest.raises(mk.FetchError) as caught:
            client.series(COUNT, "demoswap", "2025-01-01", "2025-01-05")
    failures = list(caught.value.failures.values())
    assert len(failures) == 5 and all(isinstance(f, mk.TransportError) for f in failures)
    assert "deadline (0.3 s) was exceeded" in str(failures[0])
    assert all("not sent" in str(f) for f in failures[1:])
    assert metric_attempts(server) == 1  # neither retried nor followed by the other four


@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan"), "10", True])
def test_a_bad_deadline_is_refused(bad):
    with pytest.raises(mk.ConfigurationError, match="deadline must be a finite number of seconds") as caught:
        mk.Client("http://127.0.0.1:9", KEY, deadline=bad)
    assert caught.value.argument == "deadline"


def test_a_deadline_is_refused_where_there_is_no_connection():
    with pytest.raises(mk.ConfigurationError, match="deadline cannot apply to the embedded default"):
        mk.Client(deadline=10)


# -- credentials in the base URL -----------------------------------------------------------------------------

SECRET = "pw-SECRET-7f3a"
CREDENTIAL_URLS = [
    f"http://alice:{SECRET}@127.0.0.1:9/",
    f"https://{SECRET}@metrics.example.com/v1",
    f"http://alice:{SECRET}@127.0.0.1:9/path@with-at",
    f"htp://alice:{SECRET}@127.0.0.1:9",  # a bad scheme too: the message shows the URL, masked
]


def _error_text(error: BaseException) -> str:
    return f"{error} {error!r} {error.args!r} {vars(error)!r}"


@pytest.mark.parametrize("url", CREDENTIAL_URLS)
def test_credentials_in_the_base_url_are_refused_and_never_shown(url, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    errors = []
    for make in (
        lambda: mk.Client(url, KEY),
        lambda: mk.Client(url),  # no key either: the missing key must not be what is reported
        lambda: mk.configure(url, KEY),
    ):
        with pytest.raises(mk.ConfigurationError) as caught:
            make()
        errors.append(caught.value)
    monkeypatch.setenv("METRICS_KIT_BASE_URL", url)
    monkeypatch.setenv("METRICS_KIT_API_KEY", KEY)
    with pytest.raises(mk.ConfigurationError) as caught:
        mk.Client()
    errors.append(caught.value)
    for error in errors:
        assert error.argument == "base_url"
        assert SECRET not in _error_text(error)
        assert error.__cause__ is None and error.__context__ is None
    assert all(SECRET not in f"{r.getMessage()} {r.args!r}" for r in caplog.records)


@pytest.mark.parametrize("key_set", [True, False], ids=["with a key", "without a key"])
@pytest.mark.parametrize("how", ["flag", "environment"])
def test_metrics_kit_fetch_never_prints_credentials_of_the_base_url(tmp_path, key_set, how):
    url = CREDENTIAL_URLS[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith("METRICS_KIT_")}
    env["METRICS_KIT_CACHE_DIR"] = str(tmp_path / "cache")
    if key_set:
        env["METRICS_KIT_API_KEY"] = KEY
    args = [COUNT, "--project", "demoswap", "--start", "2025-01-01", "--end", "2025-01-02", "--out"]
    args.append(str(tmp_path / "out.csv"))
    if how == "flag":
        args += ["--base-url", url]
    else:
        env["METRICS_KIT_BASE_URL"] = url
    done = subprocess.run(
        [sys.executable, "-m", "metrics_kit", "fetch", *args], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "user name or password" in done.stderr
    assert SECRET not in done.stdout + done.stderr


# -- odd vendors: what the client reads from a service -----------------------------------------------------


def test_a_body_that_is_not_in_its_content_encoding_is_said_so(server, client):
    server.always("/metrics", status(200, {"value": 5}, headers={"Content-Encoding": "gzip"}))
    with pytest.raises(mk.TransportError) as caught:
        client.value(COUNT, "demoswap", "1_day", "2025-01-01")
    text = str(caught.value)
    assert "could not be decoded" in text and "Content-Encoding: gzip" in text and "not retried" in text, text
    assert "_GaveUp" not in text and "check base_url" not in text
    assert metric_attempts(server) == 1  # the same answer would come again


@pytest.mark.parametrize("encoding", ["br", "gzip, br", "x-vendor"])
def test_a_body_in_an_encoding_the_client_does_not_decode_is_refused(server, client, encoding):
    # Hostile round on issue 27: Content-Encoding: br on a plain body was read as plain, unlike gzip.
    server.always("/metrics", status(200, {"value": 5}, headers={"Content-Encoding": encoding}))
    with pytest.raises(mk.TransportError) as caught:
        client.value(COUNT, "demoswap", "1_day", "2025-01-01")
    text = str(caught.value)
    assert f"Content-Encoding: {encoding}, which the client does not decode" in text and "not retried" in text, text
    assert metric_attempts(server) == 1


@pytest.mark.parametrize("code", [301, 302, 307, 308])
def test_a_redirect_is_not_followed_and_says_where_it_pointed(server, client, code):
    server.script("/metrics", status(code, b"", headers={"Location": "https://moved.example/v2/metrics?sig=abc"}))
    with pytest.raises(mk.APIError) as caught:
        client.value(COUNT, "demoswap", "1_day", "2025-01-01")
    text = str(caught.value)
    assert caught.value.status == code and f"redirect ({code}) to 'https://moved.example/v2/metrics?...'" in text
    assert "not followed" in text and "set base_url" in text and "sig=abc" not in text, text
    assert metric_attempts(server) == 1


def test_an_http_date_retry_after_gives_the_seconds_to_wait(server, client):
    import email.utils
    import time

    # An hour away (past retry_deadline, so not waited for), counted from the answer's own Date.
    later = email.utils.formatdate(time.time() + 3600, usegmt=True)
    server.always("/metrics", status(429, headers={"Retry-After": later}))
    with pytest.raises(mk.RateLimitError) as caught:
        client.value(COUNT, "demoswap", "1_day", "2025-01-01")
    assert caught.value.retry_after is not None and 3590 <= caught.value.retry_after <= 3600
    assert metric_attempts(server) == 1


def test_an_answer_that_says_it_failed_is_an_error_with_its_reason(server, client):
    server.script("/metrics", status(200, {"success": False, "value": 0, "error": "upstream timeout"}))
    with pytest.raises(mk.APIError, match="the answer says the request failed: upstream timeout") as caught:
        client.value(AMOUNT, "demoswap", "1_day", "2025-01-01")
    assert caught.value.status == 200


def test_decimal_text_is_read_exactly(server, client):
    server.script("/metrics", status(200, {"value": "123.45"}), status(200, {"value": "9007199254740993"}))
    amount = client.value(AMOUNT, "demoswap", "1_day", "2025-01-01")
    count = client.value(COUNT, "demoswap", "1_day", "2025-01-01")
    assert amount == 123.45 and type(amount) is float
    assert count == 2**53 + 1 and type(count) is int


def test_a_null_value_is_missing_with_its_reason_and_never_cached(server, tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path))
    server.always("/metrics", status(200, {"value": 3}))
    server.script("/metrics", status(200, "1"), status(200, {"value": None, "reason": "not indexed yet"}))
    with mk.Client(server.base_url, KEY, progress=False, workers=1, retries=0) as client:
        with pytest.warns(mk.PartialDataWarning, match=r"no value for 1 of 3 points .*not indexed yet"):
            series = client.series(COUNT, "demoswap", "2025-01-01", "2025-01-03")
        assert series.dtype == "Int64" and series.isna().tolist() == [False, True, False]
        assert series.attrs["missing"] == [
            {"metric": COUNT, "project": "demoswap", "date": "2025-01-02", "reason": "not indexed yet"}
        ]
        assert "failed" not in series.attrs  # a missing value is not a failure: errors="raise" did not raise
        server.script("/metrics", status(200, {"value": None}))
        with pytest.raises(mk.MissingValueError, match="no value for .* 2025-01-05: it gave no reason"):
            client.value(COUNT, "demoswap", "1_day", "2025-01-05")
        asked = metric_attempts(server)
        again = client.series(COUNT, "demoswap", "2025-01-01", "2025-01-03")  # only the missing one is asked
    assert metric_attempts(server) == asked + 1 and again.tolist() == [1, 3, 3]
    assert again.attrs["from_cache"] == 2 and "missing" not in again.attrs


def test_a_count_the_client_cannot_hold_is_refused_and_the_others_are_kept(server, tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path))
    too_big = '{"value": 9223372036854775808}'  # 2**63: what an int64 cannot hold
    server.script("/metrics", status(200, "1"), status(200, too_big), status(200, "3"))
    with mk.Client(server.base_url, KEY, progress=False, workers=1, retries=0) as client:
        with pytest.raises(mk.FetchError) as caught:
            client.series(COUNT, "demoswap", "2025-01-01", "2025-01-03")
        (failure,) = caught.value.failures.values()
        assert isinstance(failure, mk.ResponseFormatError) and "outside what the client holds exactly" in str(failure)
        server.script("/metrics", status(200, "2"))
        again = client.series(COUNT, "demoswap", "2025-01-01", "2025-01-03")
    assert again.tolist() == [1, 2, 3] and again.attrs["from_cache"] == 2  # the values before it were kept
