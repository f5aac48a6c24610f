"""spec/ids.py: the one check of each thing a request names, and did-you-mean."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from metrics_kit.errors import ValidationError
from metrics_kit.spec import ids
from metrics_kit.spec.catalogue import Catalogue

CATALOGUE = Catalogue("sol")
NAMES = CATALOGUE.canonical_names


@pytest.mark.parametrize("project", ["demoswap", "demoswap.clmm", "a-b_c.d9", "x" * 200, "0"])
def test_valid_projects(project):
    assert ids.check_project(project) == project


@pytest.mark.parametrize(
    "project",
    ["DemoSwap", "a..b", ".a", "a.", "", "a b", "a/b", "swap\u00e9r", "x" * 201, "demo\n", 5, None, ["a"]],
)
def test_invalid_projects(project):
    with pytest.raises(ValidationError, match="lowercase letters") as caught:
        ids.check_project(project)
    assert caught.value.argument == "project"


def test_project_pattern_is_the_one_the_check_uses():
    assert re.fullmatch(ids.PROJECT_PATTERN, "demoswap.clmm")
    assert not re.fullmatch(ids.PROJECT_PATTERN, "demoswap..clmm")


@pytest.mark.parametrize("granularity", ["1_day", "1_week", "1_month"])
def test_wire_granularities(granularity):
    assert ids.check_granularity(granularity) == granularity
    assert ids.check_granularity(granularity, synonyms=True) == granularity


@pytest.mark.parametrize(
    ("given", "expected"), [("day", "1_day"), (" Weekly ", "1_week"), ("1D", "1_day"), ("MONTH", "1_month")]
)
def test_granularity_synonyms_only_when_asked(given, expected):
    assert ids.check_granularity(given, synonyms=True) == expected
    with pytest.raises(ValidationError, match="1_day, 1_week, 1_month") as caught:
        ids.check_granularity(given)
    assert caught.value.argument == "granularity"
    assert "(or day, week, month)" not in str(caught.value)


@pytest.mark.parametrize("granularity", ["1_year", "1_Day", " 1_day", "", None, 1])
def test_invalid_granularities(granularity):
    with pytest.raises(ValidationError, match="granularity must be one of"):
        ids.check_granularity(granularity)


def test_dates():
    assert ids.parse_date("2024-02-29") == dt.date(2024, 2, 29)
    assert ids.parse_date("9999-12-31") == dt.date(9999, 12, 31)
    for text in ("2024-1-5", "20240105", "2024-03-20T00:00", " 2024-03-20", "\u0662\u0660\u0662\u0664-01-01"):
        with pytest.raises(ValidationError, match="YYYY-MM-DD") as caught:
            ids.parse_date(text)
        assert caught.value.argument == "date"
    for text in ("2023-02-29", "2024-13-01", "0000-01-01", "2024-04-31"):
        with pytest.raises(ValidationError, match="real calendar date"):
            ids.parse_date(text)
    with pytest.raises(ValidationError, match="^start "):
        ids.parse_date("soon", "start")


@pytest.mark.parametrize(
    ("asked", "expected_first"),
    [
        ("swap_active_user", "swap_active_users"),
        ("SWAP_ACTIVE_USERS", "swap_active_users"),
        ("farm_withdraw_transaction_counts", "farm_withdrawal_transaction_count"),
        ("staking_fee_revenue_usd", "staking_fee_revenue_in_usd"),
        ("reward_staking_in_eth", "reward_staking_in_sol"),
        ("borowing_transaction_count", "borrowing_transaction_count"),
    ],
)
def test_suggest_offers_close_names_best_first(asked, expected_first):
    suggestions = ids.suggest(asked, NAMES)
    assert suggestions[0] == expected_first
    assert 1 <= len(suggestions) <= 3
    assert set(suggestions) <= set(NAMES)


def test_suggest_limit_and_nothing_for_garbage():
    assert len(ids.suggest("swap_active_user", NAMES, limit=1)) == 1
    assert ids.suggest("xyz", NAMES) == []
    assert ids.suggest("", NAMES) == []
    assert ids.suggest("q" * 100_000, NAMES) == []  # a huge name is cut, not scanned whole


def test_unknown_metric_message():
    error = ids.unknown_metric("swap_active_user", NAMES, "GET /catalogue")
    assert isinstance(error, ValidationError) and error.argument == "metric_name"
    assert str(error).startswith("unknown metric 'swap_active_user'; did you mean swap_active_users")
    nothing_close = ids.unknown_metric("zzz", NAMES, "GET /catalogue")
    assert str(nothing_close) == "unknown metric 'zzz'; GET /catalogue lists every metric"
    assert "lists every metric" in str(ids.unknown_metric(42, NAMES, "the catalogue"))


def test_clip_cuts_long_values():
    assert ids.clip("abc") == "'abc'"
    assert ids.clip("a" * 100) == repr("a" * 60 + "...")
    assert ids.clip(12) == "'12'"


def test_a_repeated_near_miss_is_answered_from_the_cache():
    ids._close.cache_clear()
    first = ids.suggest("swap_activ_users", NAMES)
    assert ids.suggest("swap_activ_users", NAMES) == first
    info = ids._close.cache_info()
    assert (info.hits, info.misses) == (1, 1)
