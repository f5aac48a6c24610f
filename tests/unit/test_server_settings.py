"""server/http/settings.py: each serve setting checked when made, with the allowed range in the message."""

from __future__ import annotations

import pytest

from metrics_kit.errors import ConfigurationError
from metrics_kit.server.http import settings


@pytest.mark.parametrize(("given", "expected"), [(0, 0), ("0", 0), (8000, 8000), ("65535", 65535), (80.0, 80)])
def test_ports(given, expected):
    assert settings.port(given) == expected


@pytest.mark.parametrize("given", [-1, 65536, "70000", "abc", "", 8000.5, "nan", "inf", None, True, [80]])
def test_bad_ports(given):
    with pytest.raises(ConfigurationError, match=r"^port must be a whole number from 0 to 65535"):
        settings.port(given)


@pytest.mark.parametrize("given", ["127.0.0.1", "0.0.0.0", "::1", "localhost", "my-host.example.org", "::"])
def test_hosts(given):
    assert settings.host(given) == given


@pytest.mark.parametrize("given", ["", " ", "bad host", "-a", "a..b", "http://x", "127.0.0.1:80", "x" * 300, None, 1])
def test_bad_hosts(given):
    with pytest.raises(ConfigurationError, match=r"^host must be an IP address"):
        settings.host(given)


@pytest.mark.parametrize("given", ["0.0.0.0.0", "127.0.0.256", "1.2.3", "10.0.0.1.", "256.1.1.1"])
def test_an_address_written_wrong_is_not_taken_for_a_host_name(given):
    with pytest.raises(ConfigurationError, match=r"^host must be an IP address") as caught:
        settings.host(given)
    assert "it is not a valid IP address (an IPv4 address is four numbers from 0 to 255" in str(caught.value)


@pytest.mark.parametrize("given", ["2h", "90m", "0"])
def test_lags(given):
    assert settings.lag(given) in (7200.0, 5400.0, 0.0)


@pytest.mark.parametrize("given", ["-2h", "two hours", "400d"])
def test_bad_lags(given):
    with pytest.raises(ConfigurationError, match=r"^lag must be a duration from 0 to 366d"):
        settings.lag(given)


def test_watermarks():
    assert settings.watermark(None) is None
    assert settings.watermark("2025-07-01T02:00:00+02:00").isoformat() == "2025-07-01T00:00:00+00:00"
    with pytest.raises(ConfigurationError, match=r"^watermark must be an ISO 8601 instant with its zone") as caught:
        settings.watermark("2025-07-01")
    assert caught.value.argument == "watermark"


def test_rate_limits():
    assert settings.rate_limit(None) is None
    assert settings.rate_limit("2") == 2.0
    assert settings.rate_limit(0.5) == 0.5


@pytest.mark.parametrize("given", [0, "0", -1, "-0.5", "nan", "inf", "fast", True])
def test_bad_rate_limits(given):
    with pytest.raises(ConfigurationError, match=r"^rate_limit must be a number of requests per second above 0"):
        settings.rate_limit(given)


def test_latencies():
    assert settings.latency_ms(0) == 0.0
    assert settings.latency_ms("50") == 50.0
    assert settings.latency_ms(60_000) == 60_000.0


@pytest.mark.parametrize("given", [-1, "-0.1", 60_001, "inf", "nan", "slow", None])
def test_bad_latencies(given):
    with pytest.raises(ConfigurationError, match=r"^latency_ms must be a number of milliseconds from 0 to 60,000"):
        settings.latency_ms(given)


def test_head_timeouts():
    assert settings.head_timeout("10") == 10.0
    assert settings.head_timeout(0.5) == 0.5
    assert settings.head_timeout(600) == 600.0


@pytest.mark.parametrize("given", [0, "0", -1, 601, "inf", "nan", "soon", None])
def test_bad_head_timeouts(given):
    with pytest.raises(ConfigurationError, match=r"^head_timeout must be a number of seconds above 0 and at most 600"):
        settings.head_timeout(given)


def test_keys():
    assert settings.keys(["k1", "k2"]) == [b"k1", b"k2"]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ([], "at least one API key"),
        ("secret-key", "a list of API keys"),
        (["good", ""], "API key 2 of 2 is not usable"),
        (["se cret"], "API key 1 of 1 is not usable"),
        (["s\u00e9cret"], "API key 1 of 1 is not usable"),
        (["sec\nret"], "API key 1 of 1 is not usable"),
        (["sec,ret"], "contains a comma"),
        ([b"bytes"], "is not usable"),
    ],
)
def test_bad_keys_are_refused_without_showing_them(given, message):
    with pytest.raises(ConfigurationError, match=message) as caught:
        settings.keys(given)
    for key in given if isinstance(given, list) else [given]:
        if isinstance(key, str) and len(key) > 3:
            assert key not in str(caught.value)


def test_the_rate_limiter_states_the_budget_left_on_a_fake_clock():
    from metrics_kit.server.http.app import RateLimiter

    now = [100.0]
    limiter = RateLimiter(4, clock=lambda: now[0])

    def stated(key: bytes = b"k") -> tuple[int, dict[str, str]]:
        wait, headers = limiter.take(key)
        return wait, {name.decode(): value.decode() for name, value in headers}

    spent = [stated() for _ in range(5)]
    assert [wait for wait, _ in spent] == [0, 0, 0, 0, 1]
    assert [h["ratelimit-remaining"] for _, h in spent] == ["3", "2", "1", "0", "0"]
    assert {h["ratelimit-limit"] for _, h in spent} == {"4"} and {h["ratelimit-policy"] for _, h in spent} == {"4;w=1"}
    assert spent[-1][1]["ratelimit-reset"] == "1"  # 4 requests come back within the second
    assert stated(b"other")[1]["ratelimit-remaining"] == "3"  # each key has its own budget
    now[0] += 0.5  # two requests' worth refilled
    assert stated() == (0, {**spent[0][1], "ratelimit-remaining": "1", "ratelimit-reset": "1"})
    now[0] += 10
    assert stated()[1]["ratelimit-remaining"] == "3"  # never more than a full bucket


@pytest.mark.parametrize("rate", [0.5, 0.3, 2.5, 7.3, 20])
def test_the_stated_policy_is_never_above_the_rate_so_a_client_pacing_by_it_is_never_refused(rate):
    # A fractional rate is stated over a window of whole seconds (0.5 a second: 1;w=2); stated as
    # 1;w=1, a client pacing itself by it met a 429 every other request.
    from metrics_kit.server.http.app import RateLimiter

    now = [100.0]
    limiter = RateLimiter(rate, clock=lambda: now[0])
    headers = dict(limiter.take(b"k")[1])
    quota, _, window = headers[b"ratelimit-policy"].decode().partition(";w=")
    assert int(quota) / int(window) <= rate
    pace = int(window) / int(quota) / 0.99  # seconds between requests, just under the stated rate
    waits = []
    for _ in range(100):
        now[0] += pace
        waits.append(limiter.take(b"k")[0])
    assert waits == [0] * 100
    assert RateLimiter(0.5).policy == b"1;w=2"
