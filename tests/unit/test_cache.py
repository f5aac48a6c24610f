"""The client's on-disk value cache (metrics_kit/cache.py), against real SQLite files under tmp_path.

Time passing is simulated with ``get_many(now=...)`` and fixed ``fetched_at`` stamps; nothing sleeps.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import sqlite3
import threading
from pathlib import Path

import pytest

from metrics_kit.client.cache import Entry, ValueCache, default_path, delete_cache_file, namespace
from metrics_kit.errors import ConfigurationError

URL = "https://metrics.example.test"
API_KEY = "mk_live_S3CRET-7f3a9c1e5b2d4086"
OTHER_KEY = "mk_live_OTHER-0c4e8a2f6b1d3957"
# Noon UTC on Saturday 15 June 2024: "today" for every fetch below.
FETCHED = dt.datetime(2024, 6, 15, 12, tzinfo=dt.UTC).timestamp()
TEN_YEARS = 10 * 366 * 86400.0
TTL = 600.0


def key(
    day: str = "2024-01-01", *, metric: str = "active_users", project: str = "swp", granularity: str = "1_day"
) -> tuple[str, str, str, str]:
    return (metric, project, granularity, day)


def entry(
    value: int | float = 7,
    *,
    complete: bool | None = True,
    fetched_at: float = FETCHED,
    start: str | None = None,
    end: str | None = None,
    unit: str | None = "users",
) -> Entry:
    return Entry(value, unit, complete, start, end, fetched_at)


def days(first: dt.date, count: int, step: int = 1) -> list[str]:
    return [(first + dt.timedelta(days=i * step)).isoformat() for i in range(count)]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "values.sqlite3"


@pytest.fixture
def cache(path: Path):
    with ValueCache(URL, API_KEY, path=path, incomplete_ttl=TTL) as opened:
        yield opened


def count_rows(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT count(*) FROM entries").fetchone()[0]
    finally:
        conn.close()


# -- hits, misses, types ------------------------------------------------------------------------------


def test_hits_and_misses_are_counted(cache, path):
    cache.put_many([(key("2024-01-01"), entry(1)), (key("2024-01-02"), entry(2))])
    wanted = [key("2024-01-01"), key("2024-01-02"), key("2024-01-03"), key("2024-01-01")]
    got = cache.get_many(wanted)
    assert got == {key("2024-01-01"): entry(1), key("2024-01-02"): entry(2)}
    assert cache.get_many([]) == {}
    stats = cache.stats()
    assert stats == {"hits": 2, "misses": 1, "entries": 2, "path": str(path)}  # a repeated key counts once


def test_values_keep_their_type(cache):
    values = {"a": 3, "b": 3.0, "c": 0, "d": 0.0, "e": -(2**62), "f": 0.1, "g": 1e300, "h": float("inf")}
    cache.put_many([(key(metric=name), entry(value)) for name, value in values.items()])
    got = cache.get_many([key(metric=name) for name in values])
    for name, value in values.items():
        back = got[key(metric=name)].value
        assert back == value and type(back) is type(value), name


def test_every_field_round_trips_and_a_put_replaces(cache):
    month = key(granularity="1_month")
    first = Entry(5, None, True, "2024-01-01", "2024-01-31", FETCHED)
    cache.put_many([(month, first)])
    assert cache.get_many([month], now=FETCHED) == {month: first}
    second = Entry(6.5, "usd", False, "2024-01-01", "2024-01-31", FETCHED + 1)
    cache.put_many([(month, second)])
    assert cache.get_many([month], now=FETCHED + 2) == {month: second}
    for complete in (True, False):
        cache.put_many([(key(project=str(complete)), entry(complete=complete))])
        got = cache.get_many([key(project=str(complete))], now=FETCHED)[key(project=str(complete))]
        assert got.complete is complete
    # Unsaid completeness is decided when written, by the period's end against the fetch time.
    cache.put_many([(key(project="unsaid"), entry(complete=None, end="2024-01-31"))])
    assert cache.get_many([key(project="unsaid")], now=FETCHED)[key(project="unsaid")].complete is True


def test_a_nan_is_not_cached(cache):
    cache.put_many([(key(), entry(float("nan")))])
    assert cache.get_many([key()]) == {}


def test_the_default_file_is_in_the_cache_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path / "made" / "here"))
    with ValueCache(URL, API_KEY) as cache:
        assert cache.path == default_path() == tmp_path / "made" / "here" / "values.sqlite3"
        cache.put_many([(key(), entry())])
    assert (tmp_path / "made" / "here" / "values.sqlite3").is_file()


# -- batch reads ------------------------------------------------------------------------------------


@pytest.mark.parametrize("step", [1, 3, 10], ids=["dense", "every-3rd", "every-10th"])
def test_large_batches_read_exactly_the_keys_asked(cache, step):
    stored = days(dt.date(2020, 1, 1), 3000)
    cache.put_many(
        [(key(day), entry(i)) for i, day in enumerate(stored)]
        + [(key(day, project="other"), entry(-1)) for day in stored[:50]]
    )
    # Asked: every step-th stored day from the 10th on (1,200 of them: several IN chunks when
    # sparse, one range scan when dense) and 20 days never stored.
    asked = stored[10::step][:1200] + days(dt.date(2030, 1, 1), 20)
    got = cache.get_many([key(day) for day in asked], now=FETCHED)
    index = {day: i for i, day in enumerate(stored)}
    assert got == {key(day): entry(index[day]) for day in asked if day in index}
    assert cache.stats()["misses"] == 20


def test_keys_of_several_metrics_projects_and_granularities_in_one_call(cache):
    keys = [
        key(day, metric=m, project=p, granularity=g)
        for m in ("active_users", "fees")
        for p in ("swp", "farm")
        for g in ("1_day", "1_week")
        for day in days(dt.date(2023, 1, 2), 30, step=7)
    ]
    cache.put_many([(k, entry(i)) for i, k in enumerate(keys)])
    got = cache.get_many(keys)
    assert got == {k: entry(i) for i, k in enumerate(keys)}


# -- expiry -------------------------------------------------------------------------------------------


def test_complete_periods_never_expire(cache):
    cache.put_many([(key(), entry(complete=True))])
    assert cache.get_many([key()], now=FETCHED + TEN_YEARS) == {key(): entry(complete=True)}


def test_incomplete_periods_expire_after_the_ttl(cache, path):
    cache.put_many([(key(), entry(complete=False))])
    assert key() in cache.get_many([key()], now=FETCHED + TTL - 1)
    assert cache.get_many([key()], now=FETCHED + TTL + 1) == {}
    assert cache.stats()["misses"] == 1
    # The expired row is purged by the next write (its TTL has long passed in real time too).
    cache.put_many([(key(project="farm"), entry(complete=True))])
    assert count_rows(path) == 1


def test_the_ttl_is_a_setting(path):
    with ValueCache(URL, API_KEY, path=path, incomplete_ttl=5) as cache:
        cache.put_many([(key(), entry(complete=False))])
        assert cache.get_many([key()], now=FETCHED + 4) and not cache.get_many([key()], now=FETCHED + 6)
    with pytest.raises(ConfigurationError, match="incomplete_ttl"):
        ValueCache(URL, API_KEY, path=path, incomplete_ttl=-1)


@pytest.mark.parametrize(
    ("day", "granularity", "end", "kept"),
    [
        ("2024-01-01", "1_day", None, True),  # long past
        ("2024-06-13", "1_day", None, True),  # the day before yesterday
        ("2024-06-14", "1_day", None, True),  # yesterday: it had ended when fetched (today, noon)
        ("2024-06-15", "1_day", None, False),  # today
        ("2024-06-01", "1_week", None, True),  # week of 27 May - 2 June
        ("2024-06-12", "1_week", None, False),  # this week (10-16 June)
        ("2024-05-20", "1_month", None, True),  # May
        ("2024-06-01", "1_month", None, False),  # this month
        ("2024-06-14", "1_day", "2024-06-01", True),  # the service's period_end wins over the request date
        ("2024-01-01", "1_month", "2024-06-30", False),
        ("2024-01-01", "1_hour", None, False),  # a granularity the calendar cannot place: short
    ],
)
def test_unknown_completeness_is_decided_by_the_period_end_against_the_fetch_time(cache, day, granularity, end, kept):
    k = key(day, granularity=granularity)
    cache.put_many([(k, entry(complete=None, end=end))])
    assert k in cache.get_many([k], now=FETCHED + TTL - 1)
    assert (k in cache.get_many([k], now=FETCHED + TEN_YEARS)) is kept


# -- separation and clearing --------------------------------------------------------------------------


def test_two_keys_or_two_services_never_see_each_others_entries(path):
    with (
        ValueCache(URL, API_KEY, path=path) as mine,
        ValueCache(URL, OTHER_KEY, path=path) as other_key,
        ValueCache("https://elsewhere.example.test", API_KEY, path=path) as other_url,
    ):
        mine.put_many([(key(), entry(1))])
        other_key.put_many([(key(), entry(2))])
        assert other_url.get_many([key()]) == {}
        assert mine.get_many([key()])[key()].value == 1
        assert other_key.get_many([key()])[key()].value == 2
        assert [c.stats()["entries"] for c in (mine, other_key, other_url)] == [1, 1, 0]


def test_the_namespace_ignores_spelling_differences_of_one_url():
    same = ["https://metrics.example.test", "https://METRICS.example.test/", "HTTPS://metrics.example.test:443"]
    assert len({namespace(url, API_KEY) for url in same}) == 1
    assert namespace(URL, API_KEY) != namespace(URL, OTHER_KEY)
    assert namespace(URL, API_KEY) != namespace(URL + "/v2", API_KEY)
    assert namespace(URL, API_KEY) != namespace("http://metrics.example.test", API_KEY)
    assert namespace(URL, API_KEY) != namespace(URL + ":8443", API_KEY)
    assert len(namespace(URL, API_KEY)) == 64 and API_KEY not in namespace(URL, API_KEY)


def test_clear_removes_this_namespace_only_or_everything(path):
    with ValueCache(URL, API_KEY, path=path) as mine, ValueCache(URL, OTHER_KEY, path=path) as other:
        mine.put_many([(key(day), entry()) for day in days(dt.date(2024, 1, 1), 3)])
        other.put_many([(key(day), entry()) for day in days(dt.date(2024, 1, 1), 2)])
        assert mine.clear() == 3
        assert mine.get_many([key("2024-01-01")]) == {}
        assert other.stats()["entries"] == 2
        mine.put_many([(key(), entry())])
        assert mine.clear(everything=True) == 3
        assert other.stats()["entries"] == 0 and count_rows(path) == 0


def test_delete_cache_file_removes_the_files_and_open_caches_start_afresh(cache, path):
    cache.put_many([(key(), entry())])
    delete_cache_file(path)
    assert not [name for name in os.listdir(path.parent) if name.startswith(path.name)]
    assert cache.get_many([key()]) == {}
    cache.put_many([(key(), entry(9))])
    assert cache.get_many([key()])[key()].value == 9
    delete_cache_file(path.parent / "never-there.sqlite3")  # nothing to remove is fine


# -- the key is never stored ----------------------------------------------------------------------------


def _file_bytes(path: Path) -> bytes:
    return b"".join(
        Path(str(path) + suffix).read_bytes() for suffix in ("", "-wal", "-shm") if Path(str(path) + suffix).exists()
    )


def test_the_api_key_is_never_written_nor_shown(path):
    url = "https://analyst:pa55word@metrics.example.test/"
    cache = ValueCache(url, API_KEY, path=path)
    cache.put_many([(key(day), entry(i)) for i, day in enumerate(days(dt.date(2024, 1, 1), 400))])
    cache.get_many([key("2024-01-01")])
    secrets = [
        API_KEY.encode(),
        API_KEY.encode("utf-16-le"),
        b"pa55word",
        (url + API_KEY).encode(),
        (API_KEY + url).encode(),
    ]
    while_open = _file_bytes(path)
    assert Path(str(path) + "-wal").exists()  # the write-ahead log was checked too
    shown = repr(cache) + str(cache.stats())
    cache.close()
    after_close = _file_bytes(path)
    for secret in secrets:
        assert secret not in while_open and secret not in after_close
    assert API_KEY not in shown and "metrics.example.test" in repr(cache) and str(path) in repr(cache)


# -- a broken file is rebuilt --------------------------------------------------------------------------


def _fill(path: Path) -> None:
    with ValueCache(URL, API_KEY, path=path) as cache:
        cache.put_many([(key(day), entry()) for day in days(dt.date(2024, 1, 1), 300)])


def _works_and_old_data_is_gone(path: Path) -> None:
    with ValueCache(URL, API_KEY, path=path) as cache:
        assert cache.get_many([key("2024-01-01")]) == {}
        cache.put_many([(key(), entry(42))])
        assert cache.get_many([key()])[key()].value == 42
    assert count_rows(path) == 1


def _garbage(path: Path) -> None:
    path.write_bytes(os.urandom(path.stat().st_size))


def _truncated(path: Path) -> None:
    with open(path, "r+b") as file:
        file.truncate(100)


def _old_version(path: Path) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE meta SET value = '0' WHERE name = 'schema_version'")
    conn.close()


def _foreign(path: Path) -> None:
    path.unlink()
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE responses (url TEXT, body BLOB)")
    conn.close()


@pytest.mark.parametrize("damage", [_garbage, _truncated, _old_version, _foreign])
def test_a_broken_file_is_rebuilt(path, caplog, damage):
    _fill(path)
    damage(path)
    with caplog.at_level(logging.WARNING, logger="metrics_kit.client.cache"):
        _works_and_old_data_is_gone(path)
    assert "starting a fresh one" in caplog.text


def test_a_file_damaged_while_open_is_rebuilt(cache, path, caplog):
    cache.put_many([(key(day), entry()) for day in days(dt.date(2024, 1, 1), 300)])
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the rows now live in the main file only
    conn.close()
    _truncated(path)
    with caplog.at_level(logging.WARNING, logger="metrics_kit.client.cache"):
        assert cache.get_many([key("2024-01-01")]) == {}
    assert "starting a fresh one" in caplog.text
    cache.put_many([(key(), entry(42))])
    assert cache.get_many([key()])[key()].value == 42


def test_an_empty_file_is_simply_initialised(path):
    path.touch()
    _works_and_old_data_is_gone(path)


# -- threads, processes, folders ------------------------------------------------------------------------


def _hammer(caches: list[ValueCache]) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(len(caches))

    def work(n: int, cache: ValueCache) -> None:
        try:
            start.wait()
            for round_ in range(20):
                mine = [
                    (key(day, project=f"p{n}"), entry(round_ * 1000 + i))
                    for i, day in enumerate(days(dt.date(2024, 1, 1), 40))
                ]
                cache.put_many(mine)
                assert cache.get_many([k for k, _ in mine]) == dict(mine)
                theirs = cache.get_many(
                    [key(day, project=f"p{(n + 1) % len(caches)}") for day in days(dt.date(2024, 1, 1), 40)]
                )
                assert all(isinstance(e.value, int) for e in theirs.values())
        except BaseException as error:  # reported below, in the test's own thread
            errors.append(error)

    threads = [threading.Thread(target=work, args=(n, cache)) for n, cache in enumerate(caches)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


def test_eight_threads_share_one_cache(cache, path):
    _hammer([cache] * 8)
    assert cache.stats()["entries"] == 8 * 40 and count_rows(path) == 8 * 40


def test_eight_caches_on_one_file(path):
    caches = [ValueCache(URL, API_KEY, path=path) for _ in range(8)]
    try:
        _hammer(caches)
    finally:
        for cache in caches:
            cache.close()
    assert count_rows(path) == 8 * 40


def test_a_folder_that_cannot_be_created_is_a_configuration_error(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("not a folder")
    folder = tmp_path / "a-file" / "cache"
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(folder))
    with pytest.raises(ConfigurationError) as raised:
        ValueCache(URL, API_KEY)
    message = str(raised.value)
    assert str(folder) in message and "METRICS_KIT_CACHE_DIR" in message and "cache=False" in message
    assert API_KEY not in message


def test_a_cache_file_that_is_a_folder_is_a_configuration_error(tmp_path):
    (tmp_path / "values.sqlite3").mkdir()
    with pytest.raises(ConfigurationError, match="METRICS_KIT_CACHE_DIR"):
        ValueCache(URL, API_KEY, path=tmp_path / "values.sqlite3")


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0,
    reason="root writes into read-only folders; the tests above force the error instead",
)
def test_a_read_only_folder_is_a_configuration_error(tmp_path):
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(ConfigurationError, match="cache=False"):
            ValueCache(URL, API_KEY, path=folder / "values.sqlite3")
    finally:
        folder.chmod(0o700)


def test_a_closed_cache_says_so(path):
    cache = ValueCache(URL, API_KEY, path=path)
    cache.close()
    cache.close()  # twice is fine
    with pytest.raises(RuntimeError, match="closed"):
        cache.get_many([key()])


# -- the data version -----------------------------------------------------------------------------------


def test_recording_another_data_version_deletes_the_older_versions_values(cache, path):
    assert cache.record_version("v1", FETCHED)
    cache.put_many([(key(), Entry(7, "users", True, None, None, FETCHED, "v1"))])
    assert cache.record_version("v1", FETCHED + 1) and count_rows(path) == 1  # the same version: kept
    assert cache.record_version("v2", FETCHED + 2) and count_rows(path) == 0
    known = cache.known()
    assert known is not None and (known.version, known.seen_at) == ("v2", FETCHED + 2)


def test_see_is_a_deprecated_name_of_record_version(cache, path):
    cache.record_version("v1", FETCHED)
    cache.put_many([(key(), Entry(7, "users", True, None, None, FETCHED, "v1"))])
    with pytest.warns(DeprecationWarning, match="record_version"):
        assert cache.see("v2", FETCHED + 1)
    assert count_rows(path) == 0
