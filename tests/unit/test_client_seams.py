"""The client at its seams (issue 21), with services made of functions and a fake clock: a closed
client, the cache's identity, completeness decided when a value is fetched, the default client and
the environment, an alias, a cache that cannot be written, the key in messages and reprs, and where
a result came from. Each test here fails on the client before issue 21."""

from __future__ import annotations

import datetime as dt
import json
import logging
import pickle
import sqlite3
import subprocess
import sys

import pytest
from client_fakes import FakeClock, constant, daily_service

import metrics_kit as mk
from metrics_kit import (
    AuthenticationError,
    CacheWarning,
    Client,
    ClientClosedError,
    ConfigurationError,
    IncompletePeriodWarning,
)
from metrics_kit.client import settings
from metrics_kit.client.cache import ValueCache
from metrics_kit.client.settings import Secret
from metrics_kit.client.transports import ASGITransport, HTTPTransport, MockTransport
from metrics_kit.embedded import EMBEDDED_URL
from metrics_kit.embedded import transport as embedded_transport

COUNT = "swap_transaction_count"
JANUARY = {dt.date(2025, 1, d): d for d in range(1, 32)}
KEY = "sk_live_4f9a8b7c6d5e4f3a2b1c0d9e"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path))


# -- the lifecycle --------------------------------------------------------------------------------------


def test_a_closed_client_raises_and_never_answers_from_another_service():
    transport = MockTransport(constant(164))
    client = Client(transport=transport, cache=False)
    assert client.value(COUNT, "demoswap", "1_day", "2025-01-05") == 164
    client.close()
    client.close()  # twice is fine
    for use in (
        lambda: client.value(COUNT, "demoswap", "1_day", "2025-01-05"),  # the demo has demoswap: no fallback
        lambda: client.series(COUNT, "demoswap", "2025-01-01", "2025-01-03"),
        lambda: client.projects(),
        lambda: client.clear_cache(),
    ):
        with pytest.raises(ClientClosedError, match=r"was closed with close\(\)"):
            use()
    assert client.base_url == "mock://service" and not client.embedded and client.is_closed
    assert "closed" in repr(client)
    with pytest.raises(ClientClosedError):
        transport.get("/metrics", {})  # the transport refuses too


def test_a_default_client_replaced_by_configure_raises_where_a_reference_is_held(fresh_default):
    mk.configure(transport=MockTransport(constant(1)), cache=False)
    held = mk.default_client()  # as a panel would hold it
    assert held.value(COUNT, "demoswap", "1_day", "2025-01-05") == 1
    mk.configure(transport=MockTransport(constant(2)), cache=False)
    assert mk.value(COUNT, "demoswap", "1_day", "2025-01-05") == 2
    with pytest.raises(ClientClosedError, match=r"mk.configure\(\)"):
        held.value(COUNT, "demoswap", "1_day", "2025-01-05")
    assert held.base_url == "mock://service"


# -- the default client follows its configuration ---------------------------------------------------------


def test_the_default_client_follows_the_environment(fresh_default, monkeypatch):
    first = mk.default_client()
    assert first.embedded
    mk.metrics()  # any use
    monkeypatch.setenv("METRICS_KIT_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("METRICS_KIT_API_KEY", KEY)
    second = mk.default_client()
    assert second.base_url == "http://127.0.0.1:9" and first.is_closed
    assert mk.default_client() is second  # unchanged environment: the same client
    monkeypatch.setenv("METRICS_KIT_API_KEY", KEY + "x")  # another key: another client
    third = mk.default_client()
    assert third is not second and second.is_closed
    monkeypatch.delenv("METRICS_KIT_BASE_URL")
    monkeypatch.delenv("METRICS_KIT_API_KEY")
    assert mk.default_client().embedded and third.is_closed


def test_configure_keeps_the_settings_it_was_given_when_the_environment_changes(fresh_default, monkeypatch):
    mk.configure(workers=3)
    monkeypatch.setenv("METRICS_KIT_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("METRICS_KIT_API_KEY", KEY)
    client = mk.default_client()
    assert client.base_url == "http://127.0.0.1:9" and client.settings.workers == 3


def test_a_key_without_a_base_url_is_refused(fresh_default):
    for make in (lambda: mk.configure(api_key=KEY), lambda: Client(api_key=KEY)):
        with pytest.raises(ConfigurationError, match="without a base URL") as caught:
            make()
        assert caught.value.setting == "api_key" and KEY not in str(caught.value)


def test_a_key_only_in_the_environment_keeps_the_demo_with_one_notice(fresh_default, monkeypatch, caplog):
    monkeypatch.setenv("METRICS_KIT_API_KEY", KEY)
    with caplog.at_level(logging.WARNING, logger="metrics_kit.client"):
        assert Client(cache=False).embedded
        assert Client(cache=False).embedded
    notices = [r.getMessage() for r in caplog.records if "METRICS_KIT_API_KEY is set" in r.getMessage()]
    assert len(notices) == 1  # once per process
    assert "METRICS_KIT_BASE_URL is not" in notices[0] and KEY not in notices[0]


# -- cache identity ---------------------------------------------------------------------------------------


def test_two_mock_handlers_never_share_cached_values():
    with Client(transport=MockTransport(constant(1))) as one:
        assert one.value(COUNT, "demoswap", "1_day", "2025-01-05") == 1
    with Client(transport=MockTransport(constant(2))) as two:
        assert two.value(COUNT, "demoswap", "1_day", "2025-01-05") == 2
    handler = constant(3)  # the same handler is the same service: its values are found again
    with Client(transport=MockTransport(handler)) as three:
        three.value(COUNT, "demoswap", "1_day", "2025-01-05")
    again = MockTransport(handler)
    with Client(transport=again) as four:
        assert four.value(COUNT, "demoswap", "1_day", "2025-01-05") == 3
    assert "/metrics" not in [r.path for r in again.requests]


def keyed_app(good: str):
    """An ASGI service that answers 7 to the key ``good`` and 401 to any other."""

    async def app(scope, receive, send):
        key = dict(scope["headers"]).get(b"x-api-key", b"").decode()
        if scope["path"] != "/metrics":
            status, body = 404, {"error": {"code": "not_found", "message": "no such path"}}
        elif key != good:
            status, body = 401, {"error": {"code": "unauthorized", "message": "unknown key"}}
        else:
            status, body = 200, {"value": 7, "complete": True}
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": json.dumps(body).encode()})

    return app


def test_an_asgi_client_with_a_wrong_key_gets_a_401_not_another_keys_cached_value():
    app = keyed_app("right-key")
    with Client(transport=ASGITransport(app, "right-key", "asgi://svc")) as right:
        assert right.value(COUNT, "demoswap", "1_day", "2025-01-05") == 7
        identity = right.transport.cache_identity
    with Client(transport=ASGITransport(app, "wrong-key", "asgi://svc")) as wrong:
        with pytest.raises(AuthenticationError):
            wrong.value(COUNT, "demoswap", "1_day", "2025-01-05")
    with Client(transport=ASGITransport(keyed_app("right-key"), "right-key", "asgi://svc")) as other_app:
        assert other_app.transport.cache_identity != identity  # another application


def test_every_transport_files_the_cache_by_service_and_key_fingerprint():
    http = HTTPTransport("http://127.0.0.1:9", KEY)
    try:
        made = Client("http://127.0.0.1:9", KEY)
        assert made.transport.cache_identity == http.cache_identity  # the same service and key
        made.close()
        identities = {
            http.cache_identity,
            HTTPTransport("http://127.0.0.1:9", KEY + "x").cache_identity,
            MockTransport(constant(1), api_key=KEY).cache_identity,
            MockTransport(constant(1), api_key=KEY + "x").cache_identity,
        }
        assert len(identities) == 4 and not any(KEY in identity for identity in identities)
    finally:
        http.close()


def test_the_embedded_identity_is_its_data_set_not_its_per_process_key():
    one, two = embedded_transport(), embedded_transport()
    code = "from metrics_kit.embedded import transport; t = transport(); print(t.cache_identity); t.close()"
    restarted = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    try:
        assert one.cache_identity == two.cache_identity == settings.cache_identity(EMBEDDED_URL, None)
        assert restarted.strip() == one.cache_identity  # a restarted kernel files its values the same
        assert one.synthetic
    finally:
        one.close()
        two.close()


# -- one completeness rule, stored with the value ----------------------------------------------------------


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


def test_a_schema_2_cache_is_migrated_with_its_values(tmp_path, caplog):
    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA_2)
    fetched = dt.datetime(2024, 6, 15, 12, tzinfo=dt.UTC).timestamp()
    row = "INSERT INTO entries VALUES (?, 'm', 'p', '1_day', ?, ?, 'count', ?, ?, ?, ?, NULL, 'v1')"
    ns = settings.Secret("k").fingerprint("https://x.test")
    for day, value, complete in (("2024-06-13", 1, None), ("2024-06-15", 2, None), ("2024-06-14", 3, 1)):
        conn.execute(row, (ns, day, value, complete, day, day, fetched))
    conn.execute("INSERT INTO meta VALUES ('schema_version', '2')")
    conn.commit()
    conn.close()
    keys = [("m", "p", "1_day", day) for day in ("2024-06-13", "2024-06-14", "2024-06-15")]
    with caplog.at_level(logging.WARNING), ValueCache("https://x.test", "k", path=path) as cache:
        got = cache.get_many(keys, version="v1", now=fetched + 1)
    # Each row given its completeness by the clock where the service had not said (2024-06-13 had
    # ended when fetched, 2024-06-15 had not); the rows filed complete are of the first completeness
    # rule, and are fetched again once (see the schema 3 test below).
    assert {k[3]: (e.value, e.complete) for k, e in got.items()} == {"2024-06-15": (2, False)}
    rows = sqlite3.connect(path).execute("SELECT date, complete, rule FROM entries ORDER BY date").fetchall()
    assert rows == [("2024-06-13", 1, 1), ("2024-06-14", 1, 1), ("2024-06-15", 0, 1)]  # every value kept
    assert "migrated" in caplog.text


def test_values_filed_complete_under_the_old_completeness_rule_are_fetched_again_once(tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path))
    now = dt.datetime(2025, 1, 15, 12, tzinfo=dt.UTC).timestamp()
    service = daily_service(JANUARY)  # flags every period complete, as the old reference service did its last day

    def versioned(request):
        answer = service(request)
        return type(answer)(answer.status, answer.json, answer.body, {"X-Data-Version": "v1"})

    transport = MockTransport(versioned, service="rule")
    # A cache file as the code before the completeness rule's version wrote it (schema 3): the 14th
    # filed complete with the number of its noon, the 13th long after it ended, the 15th incomplete.
    conn = sqlite3.connect(tmp_path / "values.sqlite3")
    conn.executescript(SCHEMA_3)
    ns = transport.cache_identity.rpartition("#")[2]
    row = "INSERT INTO entries VALUES (?, ?, 'demoswap', '1_day', ?, ?, 'count', ?, ?, ?, ?, 'v1')"
    for day, value, complete, fetched_at in (
        ("2025-01-13", 13, 1, now - 60),
        ("2025-01-14", 999, 1, now - 86400),  # fetched at noon on the 14th, filed complete
        ("2025-01-15", 15, 0, now - 60),
    ):
        conn.execute(row, (ns, COUNT, day, value, complete, day, day, fetched_at))
    conn.execute("INSERT INTO services VALUES (?, 'v1', ?, 'null')", (ns, now - 60))
    conn.execute("INSERT INTO meta VALUES ('schema_version', '3')")
    conn.commit()
    conn.close()
    clock = FakeClock(now)
    with Client(transport=transport, clock=clock, progress=False) as client:
        first = client.series(COUNT, "demoswap", "2025-01-13", "2025-01-15")
        assert first.tolist() == [13, 14, 15]  # was [13, 999, 15]: the old rule's complete values were read
        assert (first.attrs["fetched"], first.attrs["from_cache"]) == (2, 1)
        asked = len(transport.requests)
        again = client.series(COUNT, "demoswap", "2025-01-13", "2025-01-15")
        assert again.tolist() == [13, 14, 15] and again.attrs["from_cache"] == 3  # once: now under the new rule
        assert len(transport.requests) == asked


def test_a_period_that_had_not_ended_is_not_complete_whatever_the_service_says():
    clock = FakeClock(dt.datetime(2025, 1, 15, 22, tzinfo=dt.UTC).timestamp())
    transport = MockTransport(daily_service(JANUARY, complete=True))  # the 15th flagged complete at 22:00
    with Client(transport=transport, clock=clock, cache=False) as client:
        with pytest.warns(IncompletePeriodWarning, match="2025-01-15 is not complete"):
            assert client.value(COUNT, "demoswap", "1_day", "2025-01-15") == 15
        weeks = client.series(COUNT, "demoswap", "2025-01-06", "2025-01-15", "1_week")
        assert weeks.attrs["incomplete"] == ["2025-01-13"]  # was []: the running week taken for complete
        assert client.series(COUNT, "demoswap", "2025-01-14", "2025-01-15", incomplete="drop").tolist() == [14]


# The cache's schema 2, as released: completeness could be NULL, expiry fixed by the writer.
SCHEMA_2 = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE entries (
    ns TEXT NOT NULL, metric TEXT NOT NULL, project TEXT NOT NULL, granularity TEXT NOT NULL,
    date TEXT NOT NULL, value NOT NULL, unit TEXT, complete INTEGER, period_start TEXT, period_end TEXT,
    fetched_at REAL NOT NULL, expires_at REAL, version TEXT NOT NULL,
    PRIMARY KEY (ns, metric, project, granularity, date)
) WITHOUT ROWID;
CREATE TABLE services (
    ns TEXT PRIMARY KEY, version TEXT NOT NULL, seen_at REAL NOT NULL, projects TEXT
) WITHOUT ROWID;
CREATE INDEX entries_expiry ON entries (expires_at) WHERE expires_at IS NOT NULL;
"""


# The cache's schema 3, as released before the completeness rule's version was kept with each row.
SCHEMA_3 = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE entries (
    ns TEXT NOT NULL, metric TEXT NOT NULL, project TEXT NOT NULL, granularity TEXT NOT NULL,
    date TEXT NOT NULL, value NOT NULL, unit TEXT, complete INTEGER NOT NULL, period_start TEXT,
    period_end TEXT, fetched_at REAL NOT NULL, version TEXT NOT NULL,
    PRIMARY KEY (ns, metric, project, granularity, date)
) WITHOUT ROWID;
CREATE TABLE services (
    ns TEXT PRIMARY KEY, version TEXT NOT NULL, seen_at REAL NOT NULL, projects TEXT
) WITHOUT ROWID;
CREATE INDEX entries_incomplete ON entries (fetched_at) WHERE complete = 0;
"""


# -- a metric and its alias --------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["long", "wide"])
def test_a_metric_and_its_alias_are_one_metric_once(shape):
    names = ["farm_withdrawal_transaction_count", "farm_withdraw_transaction_count"]
    with Client(transport=MockTransport(daily_service(JANUARY)), cache=False) as client:
        frame = client.frame(names, "farm", "2025-01-01", "2025-01-03", shape=shape)
    if shape == "long":
        assert frame["value"].tolist() == [1, 2, 3] and set(frame["metric"]) == {names[0]}
    else:
        assert list(frame.columns) == [names[0]] and frame[names[0]].sum() == 6


# -- a cache that cannot be written ---------------------------------------------------------------------


def test_a_full_cache_skips_the_write_with_one_warning_and_the_pull_keeps_its_values():
    clock = FakeClock()
    transport = MockTransport(daily_service({dt.date(2024, 1, 1) + dt.timedelta(days=i): i for i in range(600)}))
    with Client(transport=transport, clock=clock) as client:
        client.clear_cache()  # opens the cache
        cache = client._get_cache()
        assert cache is not None and cache._conn is not None
        pages = cache._conn.execute("PRAGMA page_count").fetchone()[0]
        cache._conn.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own "database or disk is full"
        with pytest.warns(CacheWarning, match="could not be written") as caught:
            series = client.series(COUNT, "demoswap", "2024-01-01", "2025-08-22")
        assert len([w for w in caught if w.category is CacheWarning]) == 1
        assert series.tolist() == list(range(600)) and series.attrs["fetched"] == 600


# -- the key ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "base_url",
    [
        KEY,  # the arguments swapped
        f"https://metrics.example.test/v1?api_key={KEY}",
        f"https://metrics.example.test/v1#{KEY}",
        f"https://metrics.example.test/{KEY}",
        f"metrics.example.test/{KEY}",
    ],
)
def test_a_key_where_the_base_url_belongs_is_never_echoed(base_url, monkeypatch):
    # Refused as a base URL, or (a key-like path segment) for the missing key: never echoed.
    with pytest.raises(ConfigurationError) as caught:
        Client(base_url)
    assert KEY not in str(caught.value)
    assert "metrics.example.test" in str(caught.value) or "://" not in base_url  # the rest of an address is shown
    monkeypatch.setenv("METRICS_KIT_BASE_URL", base_url)
    with pytest.raises(ConfigurationError) as caught:
        Client()
    assert KEY not in str(caught.value)


def test_the_key_itself_in_the_base_url_is_refused_and_masked():
    with pytest.raises(ConfigurationError, match="must not hold the API key") as caught:
        Client("https://metrics.example.test/v1/k-123", "k-123")
    assert "k-123" not in str(caught.value)


def test_the_key_is_a_secret_in_every_repr():
    client = Client("http://127.0.0.1:9", KEY)
    try:
        shown = [repr(client), repr(client.settings), repr(client.settings.connection), repr(client.transport)]
        shown += [str(vars(client)), str(client.settings.connection.api_key), f"{client.settings.connection.api_key}"]
        assert not any(KEY in text for text in shown)
        with pytest.raises(TypeError):
            pickle.dumps(client.settings.connection.api_key)
        assert Secret(KEY) == Secret(KEY) and Secret(KEY) != Secret(KEY + "x")
    finally:
        client.close()


# -- where a result came from ----------------------------------------------------------------------------


def test_results_name_their_service_and_data_version():
    transport = MockTransport(constant(5, version="v7"), base_url="https://metrics.example.test/v1")
    with Client(transport=transport, cache=False) as client:
        series = client.series(COUNT, "demoswap", "2025-01-01", "2025-01-02")
        wide = client.frame([COUNT], "demoswap", "2025-01-01", "2025-01-02")
        long = client.frame([COUNT], "demoswap", "2025-01-01", "2025-01-02", shape="long")
    for result in (series, wide, long):
        assert result.attrs["service"] == "https://metrics.example.test/v1"
        assert result.attrs["synthetic"] is False and result.attrs["data_version"] == "v7"


def test_the_embedded_demo_is_marked_synthetic():
    with Client(cache=False) as client:
        series = client.series(COUNT, "demoswap", "2025-01-01", "2025-01-02")
    assert series.attrs["service"] == EMBEDDED_URL and series.attrs["synthetic"] is True
    assert isinstance(series.attrs["data_version"], str) and series.attrs["data_version"]
