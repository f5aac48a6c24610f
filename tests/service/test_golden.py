"""Golden values: every metric of the catalogue on a tiny hand-made data set, worked out by hand.

The data set is ``tests/golden/data/`` (five CSV tables, ~90 rows) and every expected value below
is derived row by row in ``tests/golden/EXPECTED.md``. The values are literals on purpose: they
are never computed by the engine or by a re-implementation of it.

Coverage of the data set is 2024-12-28 (Sat) .. 2025-02-01 (Sat), so:

* week 2024-12-23..2024-12-29 and month 2024-12 start before coverage (``complete: false``);
* week 2024-12-30..2025-01-05 (ISO 2025-W01) spans two years and two months and is complete;
* month 2025-01 is complete; week 2025-01-27..02-02 and month 2025-02 end after the watermark,
  the end of the last event's day, 2025-02-02T00:00Z (see EXPECTED.md, "Calendar and coverage").
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import ServerProcess

from metrics_kit.spec.catalogue import DEFAULT_CHAIN_UNIT, default_catalogue

DATA = Path(__file__).parents[1] / "golden" / "data"


# The probes every metric is asserted at: (granularity, date) -> (period_start, period_end, complete).
DAYS = (
    "2024-12-28",
    "2024-12-29",
    "2024-12-30",
    "2024-12-31",
    "2025-01-01",
    "2025-01-02",
    "2025-01-03",
    "2025-01-04",
    "2025-01-05",
    "2025-01-06",
    "2025-01-15",
    "2025-01-20",
    "2025-02-01",
)
WEEKS = {  # date asked -> (period_start, period_end, complete)
    "2024-12-28": ("2024-12-23", "2024-12-29", False),  # starts before coverage
    "2025-01-01": ("2024-12-30", "2025-01-05", True),  # ISO 2025-W01, across the year boundary
    "2025-01-06": ("2025-01-06", "2025-01-12", True),
    "2025-01-22": ("2025-01-20", "2025-01-26", True),
    "2025-01-30": ("2025-01-27", "2025-02-02", False),  # ends after coverage
}
MONTHS = {
    "2024-12-15": ("2024-12-01", "2024-12-31", False),  # starts before coverage
    "2025-01-15": ("2025-01-01", "2025-01-31", True),
    "2025-02-01": ("2025-02-01", "2025-02-28", False),  # ends after coverage
}
PROBES: list[tuple[str, str, tuple[str, str, bool]]] = (
    [("1_day", day, (day, day, True)) for day in DAYS]
    + [("1_week", date, bounds) for date, bounds in WEEKS.items()]
    + [("1_month", date, bounds) for date, bounds in MONTHS.items()]
)

# (metric_name, project) -> (13 days, 5 weeks, 3 months), in the order of DAYS, WEEKS, MONTHS:
#   days:   12-28 12-29 12-30 12-31 01-01 01-02 01-03 01-04 01-05 01-06 01-15 01-20 02-01
#   weeks:  W52 (12-23..12-29), W01 (12-30..01-05), W02 (01-06..), W04 (01-20..), W05 (01-27..02-02)
#   months: 2024-12, 2025-01, 2025-02
Row = tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]
GOLDEN: dict[tuple[str, str], Row] = {
    # --- tokenomics: gov, initial circulating supply 1000 ---------------------------------------
    ("circulating_supply_in_native_token", "gov"): (
        (1100, 1110, 1105, 1092, 1092, 1104, 1074, 1074, 1124, 1124, 1124, 1116, 1120),
        (1110, 1124, 1124, 1116, 1120),
        (1092, 1116, 1120),
    ),
    ("net_dilution_in_native_token", "gov"): (
        (100, 10, -5, -13, 0, 12, -30, 0, 50, 0, 0, -8, 4),
        (110, 14, 0, -8, 4),
        (92, 24, 4),
    ),
    ("token_emission_in_native_token", "gov"): (
        (0, 10, 0, 7, 0, 12, 0, 0, 0, 0, 0, 0, 4),
        (10, 19, 0, 0, 4),
        (17, 12, 4),
    ),
    ("token_buyback_in_native_token", "gov"): (
        (0, 0, 0, 20, 0, 0, 30, 0, 0, 0, 0, 0, 0),
        (0, 50, 0, 0, 0),
        (20, 30, 0),
    ),
    # --- yield: farm -----------------------------------------------------------------------------
    ("transaction_fee_revenue_in_usd", "farm"): (
        (1.5, 0, 4.25, 2.0, 3.0, 0, 0, 0, 0, 0, 0, 0, 0),
        (1.5, 9.25, 0, 0, 0),
        (7.75, 3.0, 0),
    ),
    ("protocol_transaction_fee_revenue_in_usd", "farm"): (
        (1.5, 0, 0, 2.0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
        (1.5, 2.0, 0, 0, 0),
        (3.5, 0, 0),
    ),
    ("supply_side_transaction_fee_revenue_in_usd", "farm"): (
        (0, 0, 4.25, 0, 3.0, 0, 0, 0, 0, 0, 0, 0, 0),
        (0, 7.25, 0, 0, 0),
        (4.25, 3.0, 0),
    ),
    ("staking_fee_revenue_in_usd", "farm"): (
        (0, 0, 0, 0.75, 0, 10.5, 0, 0, 0, 7.25, 0, 0, 0),
        (0, 11.25, 7.25, 0, 0),
        (0.75, 17.75, 0),
    ),
    ("protocol_staking_fee_revenue_in_usd", "farm"): (
        (0, 0, 0, 0, 0, 10.0, 0, 0, 0, 7.25, 0, 0, 0),
        (0, 10.0, 7.25, 0, 0),
        (0, 17.25, 0),
    ),
    ("supply_side_staking_fee_revenue_in_usd", "farm"): (
        (0, 0, 0, 0.75, 0, 0.5, 0, 0, 0, 0, 0, 0, 0),
        (0, 1.25, 0, 0, 0),
        (0.75, 0.5, 0),
    ),
    ("staking_active_users", "farm"): ((1, 0, 1, 2, 0, 1, 0, 0, 1, 0, 0, 0, 0), (1, 3, 0, 0, 0), (3, 2, 0)),
    ("unstaking_active_users", "farm"): ((0, 1, 1, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0), (1, 3, 0, 0, 0), (2, 2, 0)),
    ("farm_deposit_active_users", "farm"): ((0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0), (0, 2, 0, 1, 0), (0, 2, 0)),
    ("farm_withdraw_active_users", "farm"): ((0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0), (0, 1, 1, 0, 0), (0, 2, 0)),
    ("staking_transaction_count", "farm"): ((1, 0, 1, 3, 0, 1, 0, 0, 1, 0, 0, 0, 0), (1, 6, 0, 0, 0), (5, 2, 0)),
    ("unstaking_transaction_count", "farm"): ((0, 1, 1, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0), (1, 4, 0, 0, 0), (3, 2, 0)),
    ("farm_deposit_transaction_count", "farm"): ((0, 0, 0, 0, 0, 0, 2, 1, 0, 0, 0, 1, 0), (0, 3, 0, 1, 0), (0, 4, 0)),
    ("farm_withdrawal_transaction_count", "farm"): (
        (0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0),
        (0, 1, 2, 0, 0),
        (0, 3, 0),
    ),
    # the alias of the spec's sample request (spec 2.2): same values, canonical name in the body
    ("farm_withdraw_transaction_count", "farm"): ((0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0), (0, 1, 2, 0, 0), (0, 3, 0)),
    # --- dex: swapx (regular_pools = true) and swapx.clmm (a dotted id, no regular pools) ----------
    ("transaction_fee_revenue_in_usd", "swapx"): (
        (0, 0, 3.0, 0, 0, 1.0, 0, 0, 0, 0, 0, 0, 0),
        (0, 4.0, 0, 0, 0),
        (3.0, 1.0, 0),
    ),
    ("swap_active_users", "swapx"): ((0, 0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0), (0, 2, 0, 0, 0), (2, 1, 0)),
    ("swap_active_users", "swapx.clmm"): ((0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0), (0, 2, 0, 0, 0), (1, 1, 0)),
    ("liquidity_pool_deposit_active_users", "swapx"): (
        (0, 0, 0, 1, 0, 0, 2, 0, 0, 0, 0, 0, 0),
        (0, 2, 0, 0, 0),
        (1, 2, 0),
    ),
    ("liquidity_pool_withdraw_active_users", "swapx"): (
        (0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0),
        (0, 1, 1, 0, 0),
        (0, 2, 0),
    ),
    ("swap_transaction_count", "swapx"): ((0, 0, 2, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0), (0, 4, 0, 0, 0), (3, 1, 0)),
    ("swap_transaction_count", "swapx.clmm"): ((0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0), (0, 2, 0, 0, 0), (1, 1, 0)),
    ("liquidity_pool_deposit_transaction_count", "swapx"): (
        (0, 0, 0, 1, 0, 0, 2, 0, 0, 0, 0, 0, 0),
        (0, 3, 0, 0, 0),
        (1, 2, 0),
    ),
    ("liquidity_pool_withdraw_transaction_count", "swapx"): (
        (0, 0, 0, 0, 0, 0, 0, 2, 0, 1, 0, 0, 0),
        (0, 2, 1, 0, 0),
        (0, 3, 0),
    ),
    ("regular_pool_swap_transaction_count", "swapx"): (
        (0, 0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0),
        (0, 3, 0, 0, 0),
        (2, 1, 0),
    ),
    ("regular_pool_deposit_transaction_count", "swapx"): (
        (0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0),
        (0, 1, 0, 0, 0),
        (1, 0, 0),
    ),
    ("regular_pool_withdraw_transaction_count", "swapx"): (
        (0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0),
        (0, 2, 0, 0, 0),
        (0, 2, 0),
    ),
    ("double_dip_deposit_transaction_count", "swapx"): (
        (0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
        (0, 2, 0, 0, 0),
        (1, 1, 0),
    ),
    # --- lending: lend ---------------------------------------------------------------------------
    ("lending_deposit_active_users", "lend"): ((1, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0), (1, 2, 0, 0, 0), (1, 1, 0)),
    ("lending_withdraw_active_users", "lend"): ((0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0), (0, 1, 0, 0, 0), (0, 1, 0)),
    ("borrowing_active_users", "lend"): ((0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0), (0, 2, 0, 0, 0), (1, 1, 0)),
    ("loan_repayment_active_users", "lend"): ((0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 1), (0, 1, 0, 1, 1), (0, 1, 1)),
    ("lending_deposit_transaction_count", "lend"): (
        (1, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0),
        (1, 2, 0, 0, 0),
        (2, 1, 0),
    ),
    ("lending_withdraw_transaction_count", "lend"): (
        (0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0),
        (0, 1, 0, 0, 0),
        (0, 1, 0),
    ),
    ("borrowing_transaction_count", "lend"): ((0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0), (0, 3, 0, 0, 0), (2, 1, 0)),
    ("loan_repayment_transaction_count", "lend"): ((0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 1), (0, 1, 0, 1, 1), (0, 2, 1)),
    # --- financials: farm (yield), swapx (dex), lend (lending) -----------------------------------
    ("protocol_revenue_in_usd", "farm"): (
        (1.5, 0, 0, 2.0, 0, 10.0, 0, 0, 0, 7.25, 0, 0, 0),
        (1.5, 12.0, 7.25, 0, 0),
        (3.5, 17.25, 0),
    ),
    ("supply_side_revenue_in_usd", "farm"): (
        (0, 0, 4.25, 0.75, 3.0, 0.5, 0, 0, 0, 0, 0, 0, 0),
        (0, 8.5, 0, 0, 0),
        (5.0, 3.5, 0),
    ),
    ("protocol_revenue_in_usd", "swapx"): ((0, 0, 0.3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), (0, 0.3, 0, 0, 0), (0.3, 0, 0)),
    ("supply_side_revenue_in_usd", "swapx"): (
        (0, 0, 2.7, 0, 0, 1.0, 0, 0, 0, 0, 0, 0, 0),
        (0, 3.7, 0, 0, 0),
        (2.7, 1.0, 0),
    ),
    ("protocol_revenue_in_usd", "lend"): ((0, 0, 0, 0, 0, 0, 0.2, 0, 0, 0, 0, 0, 0), (0, 0.2, 0, 0, 0), (0, 0.2, 0)),
    ("supply_side_revenue_in_usd", "lend"): ((0, 0, 0, 0, 0, 0, 1.8, 0, 0, 0, 0, 0, 0), (0, 1.8, 0, 0, 0), (0, 1.8, 0)),
    # --- chain rewards: solana -------------------------------------------------------------------
    ("reward_staking_in_sol", "solana"): (
        (0, 0, 2.5, 0, 0, 0, 0, 1.25, 0, 0, 0, 0, 0),
        (0, 3.75, 0, 0, 0),
        (2.5, 1.25, 0),
    ),
    ("reward_mining_fee_in_sol", "solana"): (
        (0, 0, 0, 0.125, 0.375, 0, 0, 0, 0, 0, 0, 0, 0),
        (0, 0.5, 0, 0, 0),
        (0.125, 0.375, 0),
    ),
    ("reward_voting_in_sol", "solana"): (
        (0, 0.5, 0, 0, 0, 0.25, 0, 0, 0, 0, 0, 0, 1.0),
        (0.5, 0.25, 0, 0, 1.0),
        (0.5, 0.25, 1.0),
    ),
    ("reward_negative_rent_in_sol", "solana"): (
        (-1.0, 0, -0.5, 0, 0, 0, -0.5, 0, 0, 0, 0, 0, 0),
        (-1.0, -0.25, 0, 0, 0),
        (-1.5, -0.5, 0),
    ),
    ("reward_positive_rent_in_sol", "solana"): (
        (0, 0, 0, 0.75, 0, 0.5, 0, 0, 0, 0, 0, 0, 0),
        (0, 0.5, 0, 0, 0),
        (0.75, 0.5, 0),
    ),
}

ALIASES = {"farm_withdraw_transaction_count": "farm_withdrawal_transaction_count"}

# The unit each family reports, written out by hand (not read from the catalogue).
UNITS = {
    "circulating_supply_in_native_token": "native_token",
    "net_dilution_in_native_token": "native_token",
    "token_emission_in_native_token": "native_token",
    "token_buyback_in_native_token": "native_token",
    "reward_staking_in_sol": "sol",
    "reward_mining_fee_in_sol": "sol",
    "reward_voting_in_sol": "sol",
    "reward_negative_rent_in_sol": "sol",
    "reward_positive_rent_in_sol": "sol",
}


def unit_of(name: str) -> str:
    if name in UNITS:
        return UNITS[name]
    if name.endswith("_in_usd"):
        return "usd"
    assert name.endswith(("_active_users", "_transaction_count")), name
    return "count"


def _cases():
    for (name, project), (days, weeks, months) in GOLDEN.items():
        assert (len(days), len(weeks), len(months)) == (13, 5, 3), (name, project)
        for (granularity, date, bounds), value in zip(PROBES, days + weeks + months, strict=True):
            yield pytest.param(
                name, project, granularity, date, bounds, value, id=f"{name}-{project}-{granularity}-{date}"
            )


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with ServerProcess(DATA, cache_dir=tmp_path_factory.mktemp("cache")) as proc:
        yield proc


@pytest.mark.parametrize(("name", "project", "granularity", "date", "bounds", "expected"), list(_cases()))
def test_golden_value(server, name, project, granularity, date, bounds, expected):
    response = server.metric(name, project, granularity, date)
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {
        "metric_name",
        "project",
        "granularity",
        "date",
        "period_start",
        "period_end",
        "unit",
        "value",
        "complete",
    }
    assert body["metric_name"] == ALIASES.get(name, name)
    assert body["project"] == project
    assert body["granularity"] == granularity
    assert body["date"] == date
    assert (body["period_start"], body["period_end"], body["complete"]) == bounds
    assert body["unit"] == unit_of(name)
    value = body["value"]
    if unit_of(name) == "count":
        assert type(value) is int, f"count {value!r} is not a JSON integer"
        assert value == expected
    else:
        assert type(value) is float, f"amount {value!r} is not a JSON float"
        assert value == pytest.approx(expected, abs=1e-9)


def test_every_catalogue_metric_has_a_golden_value():
    golden = {name for name, _ in GOLDEN}
    catalogue = default_catalogue(DEFAULT_CHAIN_UNIT)
    missing = [m.name for m in catalogue if m.name not in golden]
    assert not missing, f"metrics without a golden value: {missing}"
    missing_aliases = [a for m in catalogue for a in m.aliases if a not in golden]
    assert not missing_aliases, f"aliases without a golden value: {missing_aliases}"
    unknown = sorted(golden - set(catalogue.names))
    assert not unknown, f"golden values for names not in the catalogue: {unknown}"


# Every date inside a period answers for that period, including dates outside coverage
# as long as the period overlaps it (2024-12-23, 2024-12-01, 2025-02-28).
SAME_PERIOD = [
    (
        "staking_active_users",
        "farm",
        "1_week",
        ["2024-12-30", "2024-12-31", "2025-01-01", "2025-01-02", "2025-01-03", "2025-01-04", "2025-01-05"],
        ("2024-12-30", "2025-01-05", True),
        3,
    ),
    (
        "circulating_supply_in_native_token",
        "gov",
        "1_week",
        ["2024-12-30", "2025-01-02", "2025-01-05"],
        ("2024-12-30", "2025-01-05", True),
        1124,
    ),
    (
        "reward_positive_rent_in_sol",
        "solana",
        "1_week",
        ["2024-12-30", "2025-01-03", "2025-01-05"],
        ("2024-12-30", "2025-01-05", True),
        0.5,
    ),
    (
        "staking_active_users",
        "farm",
        "1_week",
        ["2024-12-23", "2024-12-26", "2024-12-29"],
        ("2024-12-23", "2024-12-29", False),
        1,
    ),
    (
        "staking_active_users",
        "farm",
        "1_month",
        ["2024-12-01", "2024-12-28", "2024-12-31"],
        ("2024-12-01", "2024-12-31", False),
        3,
    ),
    (
        "transaction_fee_revenue_in_usd",
        "farm",
        "1_month",
        ["2025-01-01", "2025-01-15", "2025-01-31"],
        ("2025-01-01", "2025-01-31", True),
        3.0,
    ),
    (
        "net_dilution_in_native_token",
        "gov",
        "1_month",
        ["2025-02-01", "2025-02-14", "2025-02-28"],
        ("2025-02-01", "2025-02-28", False),
        4,
    ),
    (
        "loan_repayment_transaction_count",
        "lend",
        "1_week",
        ["2025-01-27", "2025-02-01", "2025-02-02"],
        ("2025-01-27", "2025-02-02", False),
        1,
    ),
]


@pytest.mark.parametrize(
    ("name", "project", "granularity", "dates", "bounds", "expected"),
    SAME_PERIOD,
    ids=[f"{c[0]}-{c[2]}-{c[3][0]}" for c in SAME_PERIOD],
)
def test_any_date_inside_a_period_gives_the_same_answer(server, name, project, granularity, dates, bounds, expected):
    for date in dates:
        response = server.metric(name, project, granularity, date)
        assert response.status_code == 200, (date, response.text)
        body = response.json()
        assert body["date"] == date
        assert (body["period_start"], body["period_end"], body["complete"]) == bounds, date
        assert body["value"] == pytest.approx(expected, abs=1e-9), date


def test_a_day_without_activity_inside_coverage_is_zero_and_carries_supply(server):
    # 2025-01-15 has no event in any table, yet lies inside coverage.
    assert server.value("staking_active_users", "farm", "1_day", "2025-01-15") == 0
    assert server.value("swap_transaction_count", "swapx", "1_day", "2025-01-15") == 0
    assert server.value("protocol_revenue_in_usd", "farm", "1_day", "2025-01-15") == 0
    assert server.value("reward_negative_rent_in_sol", "solana", "1_day", "2025-01-15") == 0
    assert server.value("net_dilution_in_native_token", "gov", "1_day", "2025-01-15") == 0
    assert server.value("circulating_supply_in_native_token", "gov", "1_day", "2025-01-15") == 1124
    # 2025-01-01 has no token flow (the 01:30+02:00 emission is 2024-12-31 in UTC).
    assert server.value("circulating_supply_in_native_token", "gov", "1_day", "2025-01-01") == 1092


def _assert_error(response, status):
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert {"code", "message", "param"} <= set(body["error"])
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]


# Periods wholly outside coverage 2024-12-28 .. 2025-02-01.
OUTSIDE = [
    ("1_day", "2024-12-27"),
    ("1_day", "2025-02-02"),
    ("1_day", "2023-06-01"),
    ("1_week", "2024-12-22"),  # week 12-16..12-22
    ("1_week", "2025-02-03"),  # week 02-03..02-09
    ("1_month", "2024-11-30"),
    ("1_month", "2025-03-01"),
]


@pytest.mark.parametrize(("granularity", "date"), OUTSIDE, ids=[f"{g}-{d}" for g, d in OUTSIDE])
@pytest.mark.parametrize(
    ("name", "project"),
    [
        ("staking_active_users", "farm"),
        ("circulating_supply_in_native_token", "gov"),
        ("reward_positive_rent_in_sol", "solana"),
    ],
)
def test_period_wholly_outside_coverage_is_404(server, name, project, granularity, date):
    _assert_error(server.metric(name, project, granularity, date), 404)


NOT_APPLICABLE = [
    ("circulating_supply_in_native_token", "farm"),  # tokenomics metric, yield project
    ("staking_active_users", "swapx"),  # yield metric, dex project
    ("protocol_transaction_fee_revenue_in_usd", "swapx"),  # yield only, even if dex shares the total
    ("transaction_fee_revenue_in_usd", "lend"),  # yield or dex only
    ("swap_active_users", "lend"),  # dex metric, lending project
    ("regular_pool_swap_transaction_count", "swapx.clmm"),  # dex without regular pools
    ("regular_pool_deposit_transaction_count", "swapx.clmm"),
    ("regular_pool_withdraw_transaction_count", "swapx.clmm"),
    ("double_dip_deposit_transaction_count", "swapx.clmm"),
    ("lending_deposit_active_users", "farm"),  # lending metric, yield project
    ("reward_staking_in_sol", "swapx"),  # chain metric, dex project
    ("protocol_revenue_in_usd", "gov"),  # financials: yield, dex or lending only
    ("supply_side_revenue_in_usd", "solana"),
]


@pytest.mark.parametrize(("name", "project"), NOT_APPLICABLE, ids=[f"{n}-{p}" for n, p in NOT_APPLICABLE])
def test_metric_not_applicable_to_project_is_404(server, name, project):
    # 2025-01-01 is inside coverage, so only applicability can refuse it.
    _assert_error(server.metric(name, project, "1_day", "2025-01-01"), 404)
