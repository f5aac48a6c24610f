"""The client against the real reference service (``metrics-kit serve`` on 127.0.0.1), no mocks.

The values are the hand-worked golden values of ``tests/golden/EXPECTED.md`` (coverage
2024-12-28 .. 2025-02-01; W52 = 2024-12-23.., W01 = 2024-12-30..2025-01-05, across the year
boundary). The leap day, which the golden fixture does not cover, comes from the synthetic demo
data (2024-01-01 .. 2025-12-31), served both by the embedded default ``Client()`` and by
``metrics-kit serve``.
"""

from __future__ import annotations

import datetime as dt
import socket
import time
import traceback
import uuid
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from support import ServerProcess

from metrics_kit import (
    AuthenticationError,
    Client,
    FetchError,
    IncompletePeriodWarning,
    NotFoundError,
    PartialDataWarning,
    ValidationError,
)

GOLDEN = Path(__file__).parents[1] / "golden" / "data"
COVERAGE = (dt.date(2024, 12, 28), dt.date(2025, 2, 1))
TS = pd.Timestamp


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with ServerProcess(GOLDEN, "--access-log", cache_dir=tmp_path_factory.mktemp("golden-server")) as proc:
        yield proc


@pytest.fixture(scope="module", params=[True, False], ids=["whole_series", "per_value"])
def client(server, request):
    """The client both ways: whole series per request (GET /series, which the service advertises),
    and one value per request (whole_series=False): every test's results, attrs and errors alike."""
    with Client(base_url=server.base_url, api_key=server.key, cache=False, whole_series=request.param) as made:
        yield made


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A fresh, empty METRICS_KIT_CACHE_DIR for one test."""
    folder = tmp_path / "cache"
    folder.mkdir()
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(folder))
    return folder


def mark(server: ServerProcess) -> int:
    """Put a marker request in the server's access log, wait until it is logged and return its
    line number: requests logged between two marks are those made in between."""
    token = uuid.uuid4().hex
    assert server.get("/projects", {"mark": token}).status_code == 200
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for number, line in enumerate(list(server.output)):
            if token in line:
                return number
        time.sleep(0.01)
    raise AssertionError("the marker request never reached the access log")


def requests_between(server: ServerProcess, first: int, last: int, path: str = "/metrics") -> list[str]:
    return [line for line in server.output[first + 1 : last] if f"GET {path}" in line]


def dead_url() -> str:
    """An address on which nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# --- value ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "metric, project, granularity, date, expected",
    [
        # W01: {alice, bob, carol}, though the daily counts sum to 5
        ("staking_active_users", "farm", "1_week", "2025-01-01", 3),
        # s6 is in the export twice: counted once
        ("staking_transaction_count", "farm", "1_day", "2025-01-02", 1),
        # u5 is written 2024-12-31T20:00-05:00, so it lands on 01-01 UTC
        ("unstaking_active_users", "farm", "1_day", "2025-01-01", 2),
        # F8 is written 2025-01-01T01:30+02:00, so it lands in December UTC
        ("staking_fee_revenue_in_usd", "farm", "1_month", "2024-12-31", 0.75),
        ("circulating_supply_in_native_token", "gov", "1_month", "2024-12-15", 1092.0),
        ("reward_positive_rent_in_sol", "solana", "1_week", "2025-01-05", 0.5),
        ("reward_negative_rent_in_sol", "solana", "1_week", "2024-12-30", -0.25),
        ("regular_pool_swap_transaction_count", "swapx", "1_week", "2025-01-01", 3),
        ("swap_active_users", "swapx.clmm", "1_week", "2025-01-01", 2),
        ("loan_repayment_transaction_count", "lend", "1_month", "2025-01-20", 2),
        ("farm_withdraw_transaction_count", "farm", "1_week", "2025-01-06", 2),  # the alias
    ],
)
def test_value_is_the_golden_value_typed_by_metric(client, metric, project, granularity, date, expected):
    day = dt.date.fromisoformat(date)
    covered = (
        client.calendar.start(day, granularity) >= COVERAGE[0] and client.calendar.end(day, granularity) <= COVERAGE[1]
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = client.value(metric, project, granularity, date)
    assert value == expected
    assert type(value) is type(expected)  # counts are int, amounts float
    # A period the data does not wholly cover is one the service calls incomplete: value() says so.
    partial = [w for w in caught if issubclass(w.category, IncompletePeriodWarning)]
    assert len(partial) == (0 if covered else 1) and len(caught) == len(partial)


def test_value_accepts_dates_in_many_forms(client):
    for date in (
        "2025-01-01",
        dt.date(2025, 1, 1),
        dt.datetime(2025, 1, 1, 23, 59),
        TS("2025-01-01"),
        np.datetime64("2025-01-01"),
        TS("2025-01-02 00:30", tz="Europe/Berlin"),
    ):
        assert client.value("unstaking_active_users", "farm", "1_day", date) == 2, date


# --- series --------------------------------------------------------------------------------------


def test_series_of_weeks_across_the_year_boundary(client):
    series = client.series("staking_active_users", "farm", "2024-12-28", "2025-01-12", "1_week")
    assert isinstance(series.index, pd.DatetimeIndex)
    assert series.index.name == "period_start"
    assert list(series.index) == [TS("2024-12-23"), TS("2024-12-30"), TS("2025-01-06")]
    assert series.name == "staking_active_users"
    assert series.dtype == np.int64
    assert series.tolist() == [1, 3, 0]
    assert series.attrs["unit"] == "count"
    assert series.attrs["project"] == "farm"
    assert series.attrs["granularity"] == "1_week"
    assert series.attrs["incomplete"] == ["2024-12-23"]  # the week starts before coverage


def test_series_of_amounts_is_float64(client):
    series = client.series("transaction_fee_revenue_in_usd", "farm", "2024-12-28", "2025-01-05", "1_week")
    assert series.dtype == np.float64
    assert series.tolist() == [1.5, 4.25 + 2.0 + 3.0]
    assert series.attrs["unit"] == "usd"


def test_series_of_months_and_their_ends(client, server):
    series = client.series("circulating_supply_in_native_token", "gov", "2024-12-31", "2025-02-01", "1_month")
    assert list(series.index) == [TS("2024-12-01"), TS("2025-01-01"), TS("2025-02-01")]
    assert series.tolist() == [1092.0, 1116.0, 1120.0]
    assert series.attrs["incomplete"] == ["2024-12-01", "2025-02-01"]
    # the last day of a month is in that month, the first day of the next is not
    assert client.series(
        "circulating_supply_in_native_token", "gov", "2025-01-01", "2025-01-31", "1_month"
    ).index.tolist() == [TS("2025-01-01")]
    # the client's period ends agree with the service's
    for start in ("2024-12-01", "2025-01-01", "2025-02-01"):
        body = server.metric("net_dilution_in_native_token", "gov", "1_month", start).json()
        day = dt.date.fromisoformat(start)
        assert client.calendar.end(day, "1_month").isoformat() == body["period_end"]
        assert client.calendar.start(day + dt.timedelta(days=20), "1_month").isoformat() == body["period_start"]


def test_start_and_end_snap_to_the_periods_that_contain_them(client):
    # Wednesday 2025-01-01 .. Wednesday 2025-01-08: the weeks of Monday 12-30 and Monday 01-06
    weeks = client.series("staking_transaction_count", "farm", "2025-01-01", "2025-01-08", "1_week")
    assert weeks.index.tolist() == [TS("2024-12-30"), TS("2025-01-06")]
    assert weeks.tolist() == [6, 0]
    months = client.series("staking_transaction_count", "farm", "2025-01-15", "2025-01-15", "1_month")
    assert months.index.tolist() == [TS("2025-01-01")] and months.tolist() == [2]
    day = client.series("staking_transaction_count", "farm", "2024-12-31", "2024-12-31")
    assert day.index.tolist() == [TS("2024-12-31")] and day.tolist() == [3]


def test_an_alias_answers_under_the_canonical_name(client):
    series = client.series("farm_withdraw_transaction_count", "farm", "2025-01-01", "2025-01-06", "1_week")
    assert series.name == "farm_withdrawal_transaction_count"
    assert series.tolist() == [1, 2]
    wide = client.frame(["farm_withdraw_transaction_count"], "farm", "2025-01-01", "2025-01-06", "1_week")
    assert wide.columns.tolist() == ["farm_withdrawal_transaction_count"]


def test_weekly_active_users_are_not_the_sum_of_daily_ones(client):
    # alice stakes on 12-30, 12-31 and 01-02: three daily counts, one weekly user
    daily = client.series("staking_active_users", "farm", "2024-12-30", "2025-01-05")
    weekly = client.series("staking_active_users", "farm", "2024-12-30", "2025-01-05", "1_week")
    assert daily.tolist() == [1, 2, 0, 1, 0, 0, 1]
    assert weekly.tolist() == [3]
    assert daily.max() < weekly.iloc[0] < daily.sum()


# --- frame ---------------------------------------------------------------------------------------


def test_wide_frame_of_one_project_has_a_column_per_metric(client):
    wide = client.frame(
        ["staking_active_users", "transaction_fee_revenue_in_usd"], "farm", "2024-12-28", "2025-01-05", "1_week"
    )
    assert wide.columns.tolist() == ["staking_active_users", "transaction_fee_revenue_in_usd"]
    assert wide.index.name == "period_start"
    assert wide.index.tolist() == [TS("2024-12-23"), TS("2024-12-30")]
    assert wide.dtypes.tolist() == [np.dtype("int64"), np.dtype("float64")]
    assert wide["staking_active_users"].tolist() == [1, 3]
    assert wide["transaction_fee_revenue_in_usd"].tolist() == [1.5, 9.25]
    assert wide.attrs["units"] == {"staking_active_users": "count", "transaction_fee_revenue_in_usd": "usd"}
    assert wide.attrs["incomplete"] == ["2024-12-23"]


def test_wide_frame_of_several_projects_has_project_metric_columns(client):
    wide = client.frame(
        ["swap_active_users", "swap_transaction_count"], ["swapx", "swapx.clmm"], "2024-12-30", "2025-01-05", "1_week"
    )
    assert isinstance(wide.columns, pd.MultiIndex)
    assert wide.columns.names == ["project", "metric"]
    assert wide.columns.tolist() == [
        ("swapx", "swap_active_users"),
        ("swapx", "swap_transaction_count"),
        ("swapx.clmm", "swap_active_users"),
        ("swapx.clmm", "swap_transaction_count"),
    ]
    assert (wide.dtypes == np.int64).all()
    # ivan swaps on both exchanges; the projects are counted apart
    assert wide.loc[TS("2024-12-30")].tolist() == [2, 4, 2, 2]


def test_long_frame_columns_and_dtypes(client):
    long = client.frame(
        ["staking_active_users", "transaction_fee_revenue_in_usd"],
        "farm",
        "2024-12-28",
        "2025-01-05",
        "1_week",
        shape="long",
    )
    assert long.columns.tolist() == ["period_start", "project", "metric", "value", "unit", "complete"]
    assert pd.api.types.is_datetime64_dtype(long["period_start"])
    # Counts and amounts share the column, each exact: Python ints and floats (was float64, which
    # rounds a count above 2**53).
    assert long["value"].dtype == object
    assert [type(v) for v in long["value"]] == [int, int, float, float]
    assert long["complete"].dtype == bool
    assert pd.api.types.is_string_dtype(long["project"]) and pd.api.types.is_string_dtype(long["metric"])
    rows = {(r.period_start, r.metric): (r.value, r.unit, r.complete) for r in long.itertuples()}
    assert rows == {
        (TS("2024-12-23"), "staking_active_users"): (1.0, "count", False),
        (TS("2024-12-30"), "staking_active_users"): (3.0, "count", True),
        (TS("2024-12-23"), "transaction_fee_revenue_in_usd"): (1.5, "usd", False),
        (TS("2024-12-30"), "transaction_fee_revenue_in_usd"): (9.25, "usd", True),
    }


def test_incomplete_periods_are_flagged_and_can_be_dropped(client):
    args = ("loan_repayment_active_users", "lend", "2024-12-28", "2025-02-01", "1_week")
    kept = client.series(*args)
    assert kept.index[0] == TS("2024-12-23") and kept.index[-1] == TS("2025-01-27")
    assert kept.attrs["incomplete"] == ["2024-12-23", "2025-01-27"]
    assert kept[TS("2025-01-27")] == 1  # r3 on 02-01, in a week that ends after coverage
    dropped = client.series(*args, incomplete="drop")
    assert dropped.index.tolist() == [TS("2024-12-30"), TS("2025-01-06"), TS("2025-01-13"), TS("2025-01-20")]
    assert dropped.tolist() == [1, 0, 0, 1]
    assert dropped.attrs["incomplete"] == []
    months = client.frame(
        ["protocol_revenue_in_usd"], "farm", "2024-12-01", "2025-02-28", "1_month", shape="long", incomplete="drop"
    )
    assert months["period_start"].tolist() == [TS("2025-01-01")]
    assert months["value"].tolist() == [17.25]


# --- validation, before any request -----------------------------------------------------------

INVALID = [
    # (call, arguments, argument named, a word the message must hold)
    ("value", ("swap_activ_users", "swapx", "1_day", "2025-01-01"), "metric", "swap_active_users"),
    ("series", ("swap_active_users", "swapx", "2025-01-01", "2025-01-03", "2_day"), "granularity", "1_week"),
    ("series", ("swap_active_users", "swapx", "2025-13-45", "2025-01-03"), "start", "2025-13-45"),
    ("series", ("swap_active_users", "swapx", "2025-01-01", "next tuesday"), "end", "next tuesday"),
    ("series", ("swap_active_users", "swapx", "2025-01-10", "2025-01-01"), "start", "after"),
    ("value", ("swap_active_users", "SwapX", "1_day", "2025-01-01"), "project", "SwapX"),
    ("frame", (["swap_active_users"], ["swapx..clmm"], "2025-01-01", "2025-01-03"), "project", "swapx..clmm"),
    ("value", ("swap_active_users", "swapx", "1_day", "2025-02-30"), "date", "2025-02-30"),
    ("value", ("swap_active_users", "swapx", "1_day", 20250101), "date", "int"),
]


@pytest.mark.parametrize("call, args, argument, word", INVALID)
def test_invalid_arguments_fail_without_reaching_the_network(call, args, argument, word):
    # Nothing listens at this address: a request would be a TransportError, not a ValidationError.
    with Client(base_url=dead_url(), api_key="not-a-real-key", cache=False, retries=0) as offline:
        with pytest.raises(ValidationError) as caught:
            getattr(offline, call)(*args)
    assert caught.value.argument == argument
    assert word in str(caught.value)


def test_an_ambiguous_non_iso_date_is_refused():
    with Client(base_url=dead_url(), api_key="not-a-real-key", cache=False, retries=0) as offline:
        with pytest.raises(ValidationError):
            offline.periods("01/02/2025", "01/02/2025")


def test_unknown_metric_names_the_closest_ones():
    with Client(base_url=dead_url(), api_key="not-a-real-key", cache=False, retries=0) as offline:
        with pytest.raises(ValidationError, match=r"did you mean swap_active_users"):
            offline.series("swap_activ_users", "swapx", "2025-01-01", "2025-01-02")


@pytest.mark.parametrize("call, args, argument, word", INVALID)
def test_invalid_arguments_send_no_metrics_request(server, client, call, args, argument, word):
    before = mark(server)
    with pytest.raises(ValidationError) as caught:
        getattr(client, call)(*args)
    assert caught.value.argument == argument
    assert requests_between(server, before, mark(server)) == []


@pytest.mark.parametrize(
    "call, args, argument, word",
    [
        ("value", ("staking_active_users", "swapx", "1_day", "2025-01-01"), "metric", "yield"),
        (
            "series",
            ("regular_pool_swap_transaction_count", "swapx.clmm", "2025-01-01", "2025-01-02"),
            "metric",
            "regular pools",
        ),
        ("frame", (["swap_active_users"], ["swapx", "lend"], "2025-01-01", "2025-01-02"), "metric", "lend"),
        ("series", ("swap_active_users", "nosuchdex", "2025-01-01", "2025-01-02"), "project", "swapx.clmm"),
    ],
)
def test_discovery_catches_inapplicable_metrics_and_unknown_projects(server, client, call, args, argument, word):
    before = mark(server)
    with pytest.raises(ValidationError) as caught:
        getattr(client, call)(*args)
    assert caught.value.argument == argument
    assert word in str(caught.value)
    assert requests_between(server, before, mark(server)) == []


def test_a_bad_date_is_rejected_before_any_request_at_all(server):
    with Client(base_url=server.base_url, api_key=server.key, cache=False) as fresh:
        before = mark(server)
        with pytest.raises(ValidationError):
            fresh.series("swap_active_users", "swapx", "2025-13-45", "2025-01-03")
        assert requests_between(server, before, mark(server), path="/") == []


def test_skip_inapplicable_does_not_hide_an_unknown_project(client):
    with pytest.raises(ValidationError):
        client.frame(["swap_active_users"], "swapz", "2025-01-01", "2025-01-03", skip_inapplicable=True)


def test_skip_inapplicable_skips_pairs_that_do_not_apply(client):
    wide = client.frame(
        ["swap_active_users", "regular_pool_swap_transaction_count"],
        ["swapx", "swapx.clmm"],
        "2024-12-30",
        "2025-01-05",
        "1_week",
        skip_inapplicable=True,
    )
    assert wide.columns.tolist() == [
        ("swapx", "swap_active_users"),
        ("swapx", "regular_pool_swap_transaction_count"),
        ("swapx.clmm", "swap_active_users"),
    ]
    assert wide.iloc[0].tolist() == [2, 3, 2]


# --- errors="raise" / "coerce" ------------------------------------------------------------------


def test_coerce_leaves_failed_points_missing_with_a_warning(client):
    with pytest.warns(PartialDataWarning, match="1 of 2 points failed"):
        counts = client.series("staking_active_users", "farm", "2025-01-27", "2025-02-03", "1_week", errors="coerce")
    assert counts.index.tolist() == [TS("2025-01-27"), TS("2025-02-03")]  # 02-03.. is outside coverage
    assert str(counts.dtype) == "Int64"
    assert counts.iloc[0] == 0 and counts.iloc[1] is pd.NA
    failed = [(f["metric"], f["project"], f["date"]) for f in counts.attrs["failed"]]
    assert failed == [("staking_active_users", "farm", "2025-02-03")]
    assert "404" in counts.attrs["failed"][0]["error"]
    with pytest.warns(PartialDataWarning):
        amounts = client.series("reward_voting_in_sol", "solana", "2025-02-01", "2025-02-02", errors="coerce")
    assert amounts.dtype == np.float64
    assert amounts.iloc[0] == 1.0 and np.isnan(amounts.iloc[1])


def test_raise_gives_a_fetch_error_listing_the_failed_points(client):
    with pytest.raises(FetchError) as caught:
        client.frame(["reward_voting_in_sol", "reward_staking_in_sol"], "solana", "2024-12-27", "2024-12-28")
    error = caught.value
    assert error.total == 4
    assert sorted((p.metric, p.date) for p in error.failures) == [
        ("reward_staking_in_sol", "2024-12-27"),
        ("reward_voting_in_sol", "2024-12-27"),
    ]
    assert all(isinstance(e, NotFoundError) and e.status == 404 for e in error.failures.values())
    assert str(error).startswith("2 of 4 points failed")
    assert "2024-12-27" in str(error)


# --- cache -------------------------------------------------------------------------------------


@pytest.mark.parametrize("whole, path, requests", [(True, "/series", 1), (False, "/metrics", 9)])
def test_second_pull_comes_from_the_cache_and_refresh_fetches_again(server, cache_dir, whole, path, requests):
    """A whole series is one request, and its values are cached point by point as one value's are."""
    args = ("staking_transaction_count", "farm", "2024-12-28", "2025-01-05")
    with Client(base_url=server.base_url, api_key=server.key, whole_series=whole) as cached:
        first_mark = mark(server)
        first = cached.series(*args)
        second_mark = mark(server)
        second = cached.series(*args)
        third_mark = mark(server)
        third = cached.series(*args, refresh=True)
        fourth_mark = mark(server)
    assert (first.attrs["from_cache"], first.attrs["fetched"]) == (0, 9)
    assert (second.attrs["from_cache"], second.attrs["fetched"]) == (9, 0)
    assert (third.attrs["from_cache"], third.attrs["fetched"]) == (0, 9)
    assert len(requests_between(server, first_mark, second_mark, path)) == requests
    assert requests_between(server, second_mark, third_mark, path) == []
    assert len(requests_between(server, third_mark, fourth_mark, path)) == requests
    assert requests_between(server, first_mark, fourth_mark, "/series" if path == "/metrics" else "/metrics") == []
    pd.testing.assert_series_equal(first, second)
    pd.testing.assert_series_equal(first, third)
    assert first.tolist() == [1, 0, 1, 3, 0, 1, 0, 0, 1]
    assert (cache_dir / "values.sqlite3").is_file()


def test_cache_false_never_touches_the_cache_folder(server, cache_dir):
    with Client(base_url=server.base_url, api_key=server.key, cache=False) as uncached:
        for _ in range(2):
            series = uncached.series("swap_transaction_count", "swapx", "2024-12-30", "2025-01-02")
            assert series.attrs["from_cache"] == 0 and series.attrs["fetched"] == 4
        assert uncached.clear_cache() == 0
    assert list(cache_dir.iterdir()) == []


# --- the key is never shown ------------------------------------------------------------------------


def test_the_api_key_never_appears_in_reprs_errors_or_cache_files(server, cache_dir):
    key = server.key
    texts = []
    with Client(base_url=server.base_url, api_key=key) as keyed:
        texts += [repr(keyed), str(keyed), str(vars(keyed))]
        keyed.series("swap_active_users", "swapx", "2024-12-28", "2025-01-05", "1_week")
        with pytest.warns(PartialDataWarning) as warned:
            partial = keyed.series(
                "reward_voting_in_sol", "solana", "2025-01-27", "2025-02-09", "1_week", errors="coerce"
            )
        texts += [str(w.message) for w in warned] + [str(partial.attrs)]
        texts += [repr(keyed), str(vars(keyed))]
        for expected, call in (
            (FetchError, lambda: keyed.series("reward_voting_in_sol", "solana", "2025-02-01", "2025-02-09")),
            (NotFoundError, lambda: keyed.value("swap_active_users", "swapx", "1_day", "2027-01-01")),
            (ValidationError, lambda: keyed.value("swap_activ_users", "swapx", "1_day", "2025-01-01")),
        ):
            with pytest.raises(expected) as caught:
                call()
            texts.append("".join(traceback.format_exception(caught.value)))
            texts += [repr(caught.value), repr(caught.value.args)]
    # a wrong key (which holds the right one) is not shown either, and projects() says it was
    # refused (not that the service offers no discovery)
    with Client(base_url=server.base_url, api_key="wrong-" + key, cache=False) as wrong:
        with pytest.raises(AuthenticationError) as refused:
            wrong.value("swap_active_users", "swapx", "1_day", "2025-01-01")
        texts.append("".join(traceback.format_exception(refused.value)))
        with pytest.raises(AuthenticationError) as listing:
            wrong.projects()
        texts.append("".join(traceback.format_exception(listing.value)))
    assert refused.value.status == 401 and listing.value.status == 401
    assert "/projects" in listing.value.url and "discovery" not in str(listing.value)
    for text in texts:
        assert key not in text
    files = [path for path in cache_dir.rglob("*") if path.is_file()]
    assert any(path.name.startswith("values.sqlite3") for path in files)
    for path in files:
        assert key.encode() not in path.read_bytes(), path


# --- the embedded default and the leap day (demo data) --------------------------------------------


@pytest.fixture(scope="module")
def embedded():
    """The default Client(): no base URL (conftest strips the environment), the embedded service
    on the demo data, built in this session's cache folder on first use."""
    with Client(cache=False) as made:
        assert made.embedded and made.base_url == "embedded"
        made.value("swap_active_users", "demoswap", "1_day", "2024-02-29")  # build before serving
        yield made


@pytest.fixture(scope="module")
def demo_server(embedded):
    # data_dir None: `metrics-kit serve` on the default demo data of the same cache folder
    with ServerProcess(None, cache_dir=None) as proc:
        assert any("SYNTHETIC" in line for line in proc.output)
        yield proc


def test_the_leap_day_is_a_day_of_its_own_and_ends_february(embedded, demo_server):
    days = embedded.series("swap_transaction_count", "demoswap", "2024-02-01", "2024-02-29")
    assert len(days) == 29 and days.index[-1] == TS("2024-02-29")
    leap = embedded.value("swap_transaction_count", "demoswap", "1_day", "2024-02-29")
    assert type(leap) is int and leap > 0
    served = demo_server.value("swap_transaction_count", "demoswap", "1_day", "2024-02-29")
    assert leap == days.iloc[-1] == served
    month = embedded.series("swap_transaction_count", "demoswap", "2024-02-29", "2024-02-29", "1_month")
    assert month.index.tolist() == [TS("2024-02-01")]
    assert month.iloc[0] == days.sum()  # transaction counts add up; the 29th is in February
    body = demo_server.metric("swap_transaction_count", "demoswap", "1_month", "2024-02-29").json()
    assert (body["period_start"], body["period_end"]) == ("2024-02-01", "2024-02-29")
    assert body["value"] == month.iloc[0]
    assert embedded.calendar.end(dt.date(2024, 2, 1), "1_month") == dt.date(2024, 2, 29)
    week = embedded.series("swap_transaction_count", "demoswap", "2024-02-29", "2024-02-29", "1_week")
    assert week.index.tolist() == [TS("2024-02-26")]  # Thursday the 29th is in the week of Monday 26th
    around = embedded.series("swap_transaction_count", "demoswap", "2024-02-28", "2024-03-01")
    assert around.index.tolist() == [TS("2024-02-28"), TS("2024-02-29"), TS("2024-03-01")]


@pytest.mark.parametrize(
    "metric, project, granularity, date",
    [
        ("swap_active_users", "demoswap", "1_week", "2025-06-18"),
        ("regular_pool_swap_transaction_count", "demoswap", "1_week", "2024-12-30"),
        ("circulating_supply_in_native_token", "demogov", "1_month", "2024-02-29"),
        ("reward_negative_rent_in_sol", "demochain", "1_day", "2024-12-31"),
        ("farm_withdraw_transaction_count", "demofarm", "1_day", "2025-01-01"),
        ("protocol_revenue_in_usd", "demolend", "1_month", "2025-12-01"),
        ("borrowing_active_users", "demolend", "1_day", "2025-12-31"),
    ],
)
def test_the_embedded_default_answers_as_metrics_kit_serve(embedded, demo_server, metric, project, granularity, date):
    served = demo_server.value(metric, project, granularity, date)
    assert embedded.value(metric, project, granularity, date) == served
    with Client(base_url=demo_server.base_url, api_key=demo_server.key, cache=False) as remote:
        assert remote.value(metric, project, granularity, date) == served
        start = dt.date.fromisoformat(date) - dt.timedelta(days=40)
        pd.testing.assert_series_equal(
            embedded.series(metric, project, start, date, granularity),
            remote.series(metric, project, start, date, granularity),
        )


def test_the_embedded_default_validates_like_a_remote_client(embedded):
    with pytest.raises(ValidationError) as caught:
        embedded.value("swap_active_users", "demolend", "1_day", "2025-01-01")
    assert caught.value.argument == "metric"
    with pytest.raises(FetchError) as failed:
        embedded.series("swap_active_users", "demoswap", "2025-12-31", "2026-01-01")
    assert [p.date for p in failed.value.failures] == ["2026-01-01"]  # after the demo coverage
