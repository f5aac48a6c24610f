"""The cache file as the client meets it: a file of an older schema is migrated with its values,
values filed complete under an older completeness rule are fetched again once, and a file that
cannot be written (a full disk) skips the write with one warning while the pull keeps its values."""

from __future__ import annotations

import datetime as dt
import json
import logging
import sqlite3
from pathlib import Path

import pytest
from client_fakes import FakeClock, daily_service

from metrics_kit import (
    CacheWarning,
    Client,
)
from metrics_kit.client import settings
from metrics_kit.client.cache import ValueCache
from metrics_kit.client.transports import MockTransport

COUNT = "swap_transaction_count"
JANUARY = {dt.date(2025, 1, d): d for d in range(1, 32)}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path))


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


def test_a_schema_4_cache_is_migrated_without_the_service_text_it_held(tmp_path, caplog):
    # Schema 4 kept a service's text as it came: a data version, a period's bound with text after its
    # date, a /projects answer; a vendor that echoed the key put it in the file (hostile round on issue
    # 27, D1 and D3). The migration keeps the values and leaves none of that text in the file.
    key = "sk_live_Zq9XyW3vT7pLm2Kd"
    path = tmp_path / "values.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(SCHEMA_3)
    conn.execute("ALTER TABLE entries ADD COLUMN rule INTEGER NOT NULL DEFAULT 1")
    ns = settings.Secret(key).fingerprint("https://x.test")
    fetched = dt.datetime(2025, 2, 1, tzinfo=dt.UTC).timestamp()
    row = "INSERT INTO entries VALUES (?, 'm', 'p', '1_day', ?, ?, 'count', 1, ?, ?, ?, ?, 2)"
    conn.execute(row, (ns, "2025-01-01", 1, "2025-01-01", "2025-01-01", fetched, "v1"))
    conn.execute(row, (ns, "2025-01-02", 2, f"2025-01-02{key}", f"2025-01-02 {key}", fetched, "v1"))
    conn.execute(row, (ns, "2025-01-03", 3, "2025-01-03", "2025-01-03", fetched, f"v-{key}"))
    projects = json.dumps({"p": {"kinds": ["dex"], "note": key}})
    conn.execute("INSERT INTO services VALUES (?, ?, ?, ?)", (ns, f"v-{key}", fetched, projects))
    conn.execute("INSERT INTO meta VALUES ('schema_version', '4')")
    conn.commit()
    conn.close()
    assert key.encode() in path.read_bytes()
    keys = [("m", "p", "1_day", f"2025-01-0{day}") for day in (1, 2, 3)]
    with caplog.at_level(logging.WARNING), ValueCache("https://x.test", key, path=path) as cache:
        got = cache.get_many(keys, version="v1", now=fetched + 1)
        assert cache.known() is None  # the version and projects last seen are asked again
    assert {k[3]: (e.value, e.period_start, e.period_end) for k, e in got.items()} == {
        "2025-01-01": (1, "2025-01-01", "2025-01-01"),
        "2025-01-02": (2, "2025-01-02", "2025-01-02"),
    }
    assert "migrated to schema 5" in caplog.text
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        assert not name.exists() or key.encode() not in name.read_bytes(), name


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
