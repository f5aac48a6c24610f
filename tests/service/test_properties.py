"""Property tests: invariants of the metrics on small random data sets, through the real server.

Each hypothesis example is one random data set (transactions, fees, token flows and chain rent,
with timestamps at day boundaries and in non-UTC offsets), written as CSV to a temporary folder
and served by one real ``metrics-kit serve``; the invariants are then checked over every day, ISO
week and month of the data set:

* weekly (monthly) distinct users lie between the largest daily count and the sum of the daily
  counts of that week (month);
* circulating supply at the end of a period equals the supply at the end of the previous period
  plus the period's net dilution (the initial supply before the first period);
* total transaction (staking) fees equal protocol plus supply side, and protocol plus supply-side
  revenue equal transaction plus staking fees;
* rent: the weekly (monthly) positive side is at most the sum of the daily positive sides, the
  negative side at least the sum of the daily negative sides, and both sides together equal the
  sum of the daily sides (netting per account only moves amounts between the sides).

Starting a server takes about two seconds, so the number of examples is small and fixed
(``derandomize`` makes the run reproducible) and shrinking is off: a failing data set is printed
in full instead.
"""

from __future__ import annotations

import csv
import datetime as dt
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st
from support import ServerProcess

UTC = dt.UTC
# Coverage is pinned to START .. END (15 days): three ISO weeks, the first and last incomplete,
# and two months, both incomplete.
START = dt.date(2025, 3, 26)  # a Wednesday
END = dt.date(2025, 4, 9)  # a Wednesday
NDAYS = (END - START).days + 1
DAYS = [START + dt.timedelta(days=i) for i in range(NDAYS)]
WEEK_STARTS = sorted({d - dt.timedelta(days=d.weekday()) for d in DAYS})
MONTH_STARTS = sorted({d.replace(day=1) for d in DAYS})
EPS = 1e-6

SIGNERS = ("s1", "s2", "s3", "s4", "s5")
ACCOUNTS = ("r1", "r2", "r3")
OFFSETS_H = (0, 0, 0, 2, -5, 9, -11, 14)

# An instant inside the window, often on the first or the last instant of a day.
instants = st.builds(
    lambda day, seconds, micros: (
        dt.datetime.combine(START + dt.timedelta(days=day), dt.time(), UTC)
        + dt.timedelta(seconds=seconds, microseconds=micros)
    ),
    st.integers(0, NDAYS - 1),
    st.one_of(st.sampled_from([0, 86399]), st.integers(0, 86399)),
    st.sampled_from([0, 0, 999_999]),
)
# (instant, how many hours of UTC offset it is written with)
stamps = st.tuples(instants, st.sampled_from(OFFSETS_H))

data_sets = st.fixed_dictionaries(
    {
        "initial_supply": st.integers(0, 1000),
        # (stamp, signer, written twice: a duplicated tx_id row)
        "stakes": st.lists(st.tuples(stamps, st.sampled_from(SIGNERS), st.booleans()), min_size=1, max_size=30),
        # (stamp, fee_type, recipient, amount in quarters of a dollar; a refund may be negative)
        "fees": st.lists(
            st.tuples(
                stamps,
                st.sampled_from(["transaction", "staking"]),
                st.sampled_from(["protocol", "supply_side"]),
                st.integers(-8, 400),
            ),
            max_size=20,
        ),
        # (stamp, flow, amount)
        "flows": st.lists(
            st.tuples(stamps, st.sampled_from(["mint", "emission", "burn", "buyback"]), st.integers(0, 50)), max_size=20
        ),
        # (stamp, account, rent in quarters: paid < 0, received > 0)
        "rent": st.lists(st.tuples(stamps, st.sampled_from(ACCOUNTS), st.integers(-8, 8)), min_size=1, max_size=25),
    }
)


def _written(stamp: tuple[dt.datetime, int]) -> str:
    instant, hours = stamp
    if hours == 0:
        return instant.isoformat().replace("+00:00", "Z")
    return instant.astimezone(dt.timezone(dt.timedelta(hours=hours))).isoformat()


def _write(folder: Path, name: str, header: list[str], rows: list[list]) -> None:
    with open(folder / f"{name}.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def write_data_set(folder: Path, data: dict) -> None:
    _write(
        folder,
        "projects",
        ["project", "kinds", "initial_circulating_supply", "regular_pools"],
        [
            ["gov", "tokenomics", data["initial_supply"], ""],
            ["farm", "yield", "", ""],
            ["solana", "chain", "", ""],
        ],
    )
    transactions = []
    for i, (stamp, signer, twice) in enumerate(data["stakes"]):
        row = [_written(stamp), f"tx{i}", signer, "farm", "stake", ""]
        transactions += [row, row] if twice else [row]
    _write(folder, "transactions", ["block_time", "tx_id", "signer", "project", "action", "pool_type"], transactions)
    _write(
        folder,
        "fees",
        ["block_time", "project", "fee_type", "recipient", "amount_usd"],
        [[_written(s), "farm", t, r, q / 4] for s, t, r, q in data["fees"]],
    )
    # Two zero mints pin coverage to START .. END whatever else was drawn.
    anchors = [["2025-03-26T00:00:00Z", "gov", "mint", 0], ["2025-04-09T23:59:59.999999Z", "gov", "mint", 0]]
    _write(
        folder,
        "token_flows",
        ["block_time", "project", "flow", "amount"],
        anchors + [[_written(s), "gov", flow, amount] for s, flow, amount in data["flows"]],
    )
    _write(
        folder,
        "chain_rewards",
        ["block_time", "project", "account", "reward_type", "amount"],
        [[_written(s), "solana", acc, "rent", q / 4] for s, acc, q in data["rent"]],
    )


class Values:
    """Queries one served data set, remembering every answer."""

    def __init__(self, server: ServerProcess):
        self.server = server
        self.seen: dict[tuple, float] = {}

    def __call__(self, metric: str, project: str, granularity: str, date: dt.date):
        key = (metric, project, granularity, date)
        if key not in self.seen:
            response = self.server.metric(metric, project, granularity, date.isoformat())
            assert response.status_code == 200, (key, response.text)
            value = response.json()["value"]
            if metric.endswith(("_active_users", "_transaction_count")):
                assert type(value) is int, (key, value)
            self.seen[key] = value
        return self.seen[key]


def _days_of(start: dt.date, granularity: str) -> list[dt.date]:
    if granularity == "1_week":
        return [d for d in DAYS if start <= d < start + dt.timedelta(days=7)]
    return [d for d in DAYS if (d.year, d.month) == (start.year, start.month)]


PERIODS = [("1_day", d) for d in DAYS] + [("1_week", w) for w in WEEK_STARTS] + [("1_month", m) for m in MONTH_STARTS]
LONG_PERIODS = [(g, s) for g, s in PERIODS if g != "1_day"]


def check_distinct_users(v: Values) -> None:
    for granularity, start in LONG_PERIODS:
        daily = [v("staking_active_users", "farm", "1_day", d) for d in _days_of(start, granularity)]
        total = v("staking_active_users", "farm", granularity, start)
        assert max(daily) <= total <= sum(daily), (granularity, start, daily, total)


def check_supply_follows_net_dilution(v: Values, initial: int) -> None:
    for granularity in ("1_day", "1_week", "1_month"):
        previous = initial
        for g, start in PERIODS:
            if g != granularity:
                continue
            supply = v("circulating_supply_in_native_token", "gov", g, start)
            net = v("net_dilution_in_native_token", "gov", g, start)
            assert supply == pytest.approx(previous + net, abs=EPS), (g, start, previous, net, supply)
            previous = supply


FEE_METRICS = (
    "transaction_fee_revenue_in_usd",
    "protocol_transaction_fee_revenue_in_usd",
    "supply_side_transaction_fee_revenue_in_usd",
    "staking_fee_revenue_in_usd",
    "protocol_staking_fee_revenue_in_usd",
    "supply_side_staking_fee_revenue_in_usd",
    "protocol_revenue_in_usd",
    "supply_side_revenue_in_usd",
)


def check_fee_splits(v: Values) -> None:
    for g, start in PERIODS:
        fee = {name: v(name, "farm", g, start) for name in FEE_METRICS}.__getitem__
        tx, stk = fee("transaction_fee_revenue_in_usd"), fee("staking_fee_revenue_in_usd")
        assert tx == pytest.approx(
            fee("protocol_transaction_fee_revenue_in_usd") + fee("supply_side_transaction_fee_revenue_in_usd"), abs=EPS
        ), (g, start)
        assert stk == pytest.approx(
            fee("protocol_staking_fee_revenue_in_usd") + fee("supply_side_staking_fee_revenue_in_usd"), abs=EPS
        ), (g, start)
        assert tx + stk == pytest.approx(fee("protocol_revenue_in_usd") + fee("supply_side_revenue_in_usd"), abs=EPS), (
            g,
            start,
        )


def check_rent_nets_per_account(v: Values) -> None:
    def rent(side: str, g: str, start: dt.date) -> float:
        return v(f"reward_{side}_rent_in_sol", "solana", g, start)

    for g, start in PERIODS:
        assert rent("positive", g, start) >= -EPS and rent("negative", g, start) <= EPS, (g, start)
    for granularity, start in LONG_PERIODS:
        days = _days_of(start, granularity)
        pos, neg = rent("positive", granularity, start), rent("negative", granularity, start)
        daily_pos = sum(rent("positive", "1_day", d) for d in days)
        daily_neg = sum(rent("negative", "1_day", d) for d in days)
        assert pos <= daily_pos + EPS, (granularity, start, pos, daily_pos)
        assert neg >= daily_neg - EPS, (granularity, start, neg, daily_neg)
        assert pos + neg == pytest.approx(daily_pos + daily_neg, abs=EPS), (granularity, start)


@settings(
    max_examples=8,
    deadline=None,
    derandomize=True,
    database=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=data_sets)
def test_invariants_hold_on_random_data_sets(data):
    with tempfile.TemporaryDirectory(prefix="metrics-kit-prop-") as tmp:
        folder = Path(tmp) / "data"
        folder.mkdir()
        write_data_set(folder, data)
        for name in sorted(p.name for p in folder.iterdir()):
            note(f"--- {name}\n" + (folder / name).read_text())
        with ServerProcess(folder, cache_dir=Path(tmp) / "cache") as server:
            values = Values(server)
            check_distinct_users(values)
            check_supply_follows_net_dilution(values, data["initial_supply"])
            check_fee_splits(values)
            check_rent_nets_per_account(values)
