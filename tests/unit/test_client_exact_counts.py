"""Counts stay exact at any size an int64 holds (issue 27, item 10): value(), series, long and wide
frames, the family helpers and the cache, with the cache on and off. float64 holds whole numbers
exactly only up to 2**53, so a count must never go through one."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest
from client_fakes import FakeClock

from metrics_kit import Client
from metrics_kit.client.cache import Entry, ValueCache
from metrics_kit.client.transports import MockTransport, Request, Response
from metrics_kit.spec.catalogue import default_catalogue

ABOVE_FLOAT = 2**53 + 1  # the first whole number float64 cannot hold
LARGEST = 2**63 - 1  # the largest int64
COUNT, AMOUNT = "swap_transaction_count", "transaction_fee_revenue_in_usd"
DAYS = ("2025-01-01", "2025-01-03")
CATALOGUE = default_catalogue()


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path))


def large(request: Request) -> Response:
    """Counts of 2**53 + 1, 2**63 - 1 and 7 on the 1st, 2nd and 3rd of a month; amounts 1.5. The
    dex project "swapper" is the service's only project; the 4th of a month fails."""
    if request.path == "/projects":
        return Response(200, json={"projects": [{"project": "swapper", "kinds": ["dex"], "regular_pools": False}]})
    day = request.params["date"]
    if day.endswith("-04"):
        return Response(500, json={"error": {"code": "internal", "message": "it broke"}})
    metric = CATALOGUE.get(request.params["metric_name"])
    assert metric is not None
    value = {1: ABOVE_FLOAT, 2: LARGEST}.get(int(day[8:]), 7) if metric.is_count else 1.5
    return Response(200, json={"value": value, "period_start": day, "complete": True})


def _client(**settings) -> Client:
    return Client(transport=MockTransport(large, service="large"), clock=FakeClock(), progress=False, **settings)


@pytest.mark.parametrize("cache", [False, True])
def test_a_series_of_large_counts_is_exact_with_or_without_the_cache(cache):
    with _client(cache=cache) as client:
        fetched = client.series(COUNT, "swapper", *DAYS)
        again = client.series(COUNT, "swapper", *DAYS)
        assert client.value(COUNT, "swapper", "1_day", DAYS[0]) == ABOVE_FLOAT
    for series in (fetched, again):
        assert series.dtype == "int64"
        assert series.tolist() == [ABOVE_FLOAT, LARGEST, 7]  # was [2**53, -2**63, 7]
    assert again.attrs["from_cache"] == (3 if cache else 0)


def test_a_missing_count_is_int64_na_and_the_others_stay_exact():
    with _client(cache=False) as client, pytest.warns(Warning, match="1 of 4 points failed"):
        series = client.series(COUNT, "swapper", "2025-01-01", "2025-01-04", errors="coerce")
    assert series.dtype == "Int64"  # was float64, NaN
    assert series.tolist()[:3] == [ABOVE_FLOAT, LARGEST, 7] and series.isna().tolist() == [False] * 3 + [True]


def test_long_and_wide_frames_hold_large_counts_exactly():
    with _client() as client:
        counts = client.frame([COUNT, "swap_active_users"], "swapper", *DAYS, shape="long")
        mixed = client.frame([COUNT, AMOUNT], "swapper", *DAYS, shape="long")
        wide = client.frame([COUNT, AMOUNT], "swapper", *DAYS)
        several = client.frame(COUNT, ["swapper", "swapper"], *DAYS)
    assert counts["value"].dtype == "int64" and counts["value"].tolist() == [ABOVE_FLOAT, LARGEST, 7] * 2
    assert mixed["value"].dtype == object  # counts and amounts: each exact
    assert mixed["value"].tolist() == [ABOVE_FLOAT, LARGEST, 7, 1.5, 1.5, 1.5]
    assert wide.dtypes.tolist() == ["int64", "float64"]
    assert wide[COUNT].tolist() == [ABOVE_FLOAT, LARGEST, 7] and wide[AMOUNT].tolist() == [1.5] * 3
    assert several[COUNT].tolist() == [ABOVE_FLOAT, LARGEST, 7]


def test_a_wide_frame_of_several_projects_leaves_a_missing_count_na():
    def two(request: Request) -> Response:
        if request.path == "/metrics" and request.params["project"] == "other" and request.params["date"] != DAYS[0]:
            return Response(404, json={"error": {"code": "date_out_of_coverage", "message": "not covered"}})
        return large(request) if request.path == "/metrics" else Response(404, json={})

    with Client(transport=MockTransport(two), cache=False, clock=FakeClock(), progress=False) as client:
        with pytest.warns(Warning, match="2 of 6 points failed"):
            wide = client.frame(COUNT, ["swapper", "other"], *DAYS, errors="coerce")
    assert wide[("swapper", COUNT)].dtype == "int64"
    assert wide[("swapper", COUNT)].tolist() == [ABOVE_FLOAT, LARGEST, 7]
    assert wide[("other", COUNT)].dtype == "Int64"
    assert wide[("other", COUNT)].tolist()[0] == ABOVE_FLOAT and wide[("other", COUNT)].isna().sum() == 2


def test_a_family_helper_keeps_its_counts_exact():
    with _client() as client:
        dex = client.dex("swapper", *DAYS)
    assert dex["swap_transaction_count"].dtype == "int64"
    assert dex["swap_transaction_count"].tolist() == [ABOVE_FLOAT, LARGEST, 7]


def test_the_cache_stores_counts_as_integers_and_a_value_it_cannot_hold_loses_no_other(tmp_path):
    fetched = dt.datetime(2025, 2, 1, tzinfo=dt.UTC).timestamp()

    def entry(value: int) -> Entry:
        return Entry(value, "count", True, None, None, fetched)

    keys = [(COUNT, "swapper", "1_day", f"2025-01-0{day}") for day in (1, 2, 3)]
    with ValueCache("mock://large", "key-0123456789abcdef", path=tmp_path / "values.sqlite3") as cache:
        # 2**63 is beyond what SQLite holds (the wire refuses such a count): left out, the rest written.
        assert cache.put_many([(keys[0], entry(ABOVE_FLOAT)), (keys[1], entry(2**63)), (keys[2], entry(LARGEST))])
        found = cache.get_many(keys)
    assert {key[3]: e.value for key, e in found.items()} == {"2025-01-01": ABOVE_FLOAT, "2025-01-03": LARGEST}
    assert all(type(e.value) is int for e in found.values())
    assert pd.Series([e.value for e in found.values()]).dtype == "int64"
