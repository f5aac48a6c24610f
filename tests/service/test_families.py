"""Family helpers against the real reference service on the golden fixture.

Every expected number is worked out from the hand values of ``tests/golden/EXPECTED.md`` (the
fetched columns) and the documented formulas of ``metrics_kit/families.py`` (the derived ones),
never from the code. Weeks: W52 = 2024-12-23.. (incomplete), W01 = 2024-12-30..2025-01-05,
W02 = 2025-01-06.., W03 = 2025-01-13.., W04 = 2025-01-20...
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from support import ServerProcess

from metrics_kit import Client, FetchError, PartialDataWarning, ValidationError
from metrics_kit.client import families
from metrics_kit.client.transports import HTTPTransport, MockTransport, Request, Response
from metrics_kit.spec.catalogue import FAMILIES

GOLDEN = Path(__file__).parents[1] / "golden" / "data"
TS = pd.Timestamp
NAN = float("nan")
WEEKS = ("2024-12-28", "2025-01-20", "1_week")  # W52, W01, W02, W03, W04
MONTHS = ("2024-12-01", "2025-02-01", "1_month")  # Dec, Jan, Feb


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with ServerProcess(GOLDEN, cache_dir=tmp_path_factory.mktemp("golden-server")) as proc:
        yield proc


@pytest.fixture(scope="module", params=[True, False], ids=["whole_series", "per_value"])
def client(server, request):
    """The client both ways: whole series per request (GET /series, which the service advertises),
    and one value per request (whole_series=False): every test's results, attrs and errors alike."""
    with Client(base_url=server.base_url, api_key=server.key, cache=False, whole_series=request.param) as made:
        yield made


@pytest.fixture
def blind(server):
    """A client of a service that offers no discovery (GET /projects): the real service, but the
    client is told there is none, as with a remote service that implements only the spec."""
    real = HTTPTransport(server.base_url, server.key)

    def without_discovery(request: Request) -> Response:
        if request.path == "/projects":
            return Response(404, json={"error": {"code": "not_found", "message": "no such path"}})
        reply = real.get(request.path, request.params)
        return Response(reply.status, body=reply.body, headers=reply.headers)

    with Client(transport=MockTransport(without_discovery), cache=False) as made:
        yield made
    real.close()


def family_metrics(client: Client, family: str, *, without: tuple[str, ...] = ()) -> list[str]:
    """The family's metrics in catalogue order, less the ones named (which do not apply)."""
    names = [m.name for m in client.catalogue.by_family(family)]
    assert set(without) <= set(names)
    return [n for n in names if n not in without]


def check_shape(frame: pd.DataFrame, client: Client, metrics: list[str], derived: list[str]) -> None:
    assert frame.columns.tolist() == metrics + derived
    assert frame.index.name == "period_start" and isinstance(frame.index, pd.DatetimeIndex)
    for name in metrics:
        metric = client.catalogue.get(name)
        assert frame[name].dtype == (np.int64 if metric.is_count else np.float64), name
        assert frame.attrs["units"][name] == metric.unit
    for name in derived:
        assert frame[name].dtype == np.float64, name
        assert name in frame.attrs["units"] and name in frame.attrs["derived"]
    assert_no_inf(frame)


def assert_no_inf(frame: pd.DataFrame) -> None:
    numbers = frame.astype("float64").to_numpy()
    assert not np.isinf(numbers).any()


def values(series: pd.Series) -> list[float]:
    return [None if pd.isna(v) else v for v in series.tolist()]


def close(series: pd.Series, expected: list[float]) -> bool:
    return np.allclose(
        series.astype("float64").to_numpy(), np.array(expected, dtype="float64"), equal_nan=True, rtol=0, atol=1e-12
    )


# --- tokenomics -----------------------------------------------------------------------------------


def test_tokenomics_supply_change_and_dilution_share(client):
    frame = client.tokenomics("gov", "2024-12-30", "2025-01-05")
    check_shape(frame, client, family_metrics(client, "tokenomics"), ["supply_change", "net_dilution_share"])
    supply = [1105, 1092, 1092, 1104, 1074, 1074, 1124]
    dilution = [-5, -13, 0, 12, -30, 0, 50]
    assert frame["circulating_supply_in_native_token"].tolist() == supply
    assert frame["net_dilution_in_native_token"].tolist() == dilution
    # day 12-30 is the first of the frame: its change is its net dilution (1110 -> 1105)
    assert frame["supply_change"].tolist() == [-5, -13, 0, 12, -30, 0, 50]
    assert close(frame["net_dilution_share"], [d / s for d, s in zip(dilution, supply, strict=True)])
    assert frame.attrs["units"]["supply_change"] == "native_token"
    assert frame.attrs["units"]["net_dilution_share"] == "fraction"
    assert frame.attrs["skipped"] == [] and frame.attrs["applicability"] == "discovery"


def test_tokenomics_by_month_and_without_the_incomplete_first_period(client):
    frame = client.tokenomics("gov", *MONTHS)
    assert frame["circulating_supply_in_native_token"].tolist() == [1092, 1116, 1120]
    assert frame["supply_change"].tolist() == [92, 24, 4]  # Dec from 1000 (its dilution), then diffs
    assert frame.attrs["incomplete"] == ["2024-12-01", "2025-02-01"]
    dropped = client.tokenomics("gov", *MONTHS, incomplete="drop")
    assert dropped.index.tolist() == [TS("2025-01-01")]
    assert dropped["supply_change"].tolist() == [24]  # 1116 - 1092: January's net dilution


# --- yield ----------------------------------------------------------------------------------------


def test_yield_on_a_yield_project(client):
    frame = families.yields(client, "farm", *WEEKS)
    check_shape(
        frame,
        client,
        family_metrics(client, "yield"),
        ["protocol_take_rate", "staking_per_user", "farm_deposits_per_user"],
    )
    assert frame.index.tolist() == [
        TS("2024-12-23"),
        TS("2024-12-30"),
        TS("2025-01-06"),
        TS("2025-01-13"),
        TS("2025-01-20"),
    ]
    # protocol transaction fees / all transaction fees: W52 1.5/1.5, W01 2.0/9.25, none afterwards
    assert close(frame["protocol_take_rate"], [1.0, 2.0 / 9.25, NAN, NAN, NAN])
    # staking transactions / stakers: W52 1/1, W01 {s2..s7}=6 / {alice,bob,carol}=3
    assert close(frame["staking_per_user"], [1.0, 2.0, NAN, NAN, NAN])
    # farm deposits / depositors: W01 3 / {alice,hank}, W04 1 / {hank}
    assert close(frame["farm_deposits_per_user"], [NAN, 1.5, NAN, NAN, 1.0])


def test_yield_on_an_exchange_keeps_only_the_shared_fee_metric(client):
    frame = client.yields("swapx", "2024-12-28", "2025-01-05", "1_week")
    shared = [m.name for m in client.catalogue.by_family("yield") if "dex" in m.kinds]
    assert shared == ["transaction_fee_revenue_in_usd"]
    check_shape(frame, client, shared, [])
    assert frame["transaction_fee_revenue_in_usd"].tolist() == [0.0, 4.0]  # F9 + F10 + F11
    assert frame.attrs["skipped"] == family_metrics(client, "yield", without=tuple(shared))


# --- dex --------------------------------------------------------------------------------------------


def test_dex_with_regular_pools(client):
    frame = client.dex("swapx", *MONTHS)
    check_shape(frame, client, family_metrics(client, "dex"), ["swaps_per_user", "regular_pool_swap_share"])
    assert frame["swap_transaction_count"].tolist() == [3, 1, 0]
    assert frame["swap_active_users"].tolist() == [2, 1, 0]
    assert frame["regular_pool_swap_transaction_count"].tolist() == [2, 1, 0]
    # Dec {w1,w2,w3} by {ivan,judy}; Jan w4 by ivan; Feb nothing (0/0: NaN, not inf)
    assert close(frame["swaps_per_user"], [1.5, 1.0, NAN])
    assert close(frame["regular_pool_swap_share"], [2 / 3, 1.0, NAN])
    week = client.dex("swapx", "2025-01-01", "2025-01-01", "1_week")
    assert week["swaps_per_user"].tolist() == [2.0] and week["regular_pool_swap_share"].tolist() == [0.75]


def test_dex_without_regular_pools_skips_their_metrics(client):
    regular = tuple(m.name for m in client.catalogue.by_family("dex") if m.regular_pools_only)
    assert len(regular) == 4
    frame = client.dex("swapx.clmm", *WEEKS)
    check_shape(frame, client, family_metrics(client, "dex", without=regular), ["swaps_per_user"])
    assert not any(c.startswith(("regular_pool", "double_dip")) for c in frame.columns)
    assert frame.attrs["skipped"] == list(regular)
    # W01: c1 by ivan, c2 by kate
    assert close(frame["swaps_per_user"], [NAN, 1.0, NAN, NAN, NAN])
    assert frame["transaction_fee_revenue_in_usd"].tolist() == [0.0] * 5


# --- lending ----------------------------------------------------------------------------------------


def test_lending_ratios(client):
    frame = client.lending("lend", *MONTHS)
    check_shape(
        frame,
        client,
        family_metrics(client, "lending"),
        [
            "deposits_per_user",
            "withdrawals_per_user",
            "borrows_per_user",
            "repayments_per_user",
            "borrow_to_repay_ratio",
        ],
    )
    # Dec: l1, l2 by nick; b1, b2 by olga; no repayment -> borrow/repay is 2/0: NaN, not inf
    # Jan: l3 by olga; lw1 by nick; b3 by nick; r1, r2 by olga.  Feb: r3 by nick
    assert close(frame["deposits_per_user"], [2.0, 1.0, NAN])
    assert close(frame["withdrawals_per_user"], [NAN, 1.0, NAN])
    assert close(frame["borrows_per_user"], [2.0, 1.0, NAN])
    assert close(frame["repayments_per_user"], [NAN, 2.0, 1.0])
    assert close(frame["borrow_to_repay_ratio"], [NAN, 0.5, 0.0])
    weeks = client.lending("lend", "2024-12-30", "2025-01-05", "1_week")
    assert weeks.iloc[0][["deposits_per_user", "borrows_per_user", "borrow_to_repay_ratio"]].tolist() == [1.0, 1.5, 3.0]


# --- chain rewards ----------------------------------------------------------------------------------


def test_chain_rewards_net_rent_and_total(client):
    frame = client.chain_rewards("solana", "2024-12-28", "2025-01-05", "1_week")
    check_shape(frame, client, family_metrics(client, "chain_rewards"), ["net_rent", "total_rewards"])
    # W52: R1 -1.0 and voting C5 0.5.  W01: positive 0.5, negative -0.25 (netted per account),
    # staking 2.5 + 1.25, mining fee 0.125 + 0.375, voting 0.25
    assert frame["net_rent"].tolist() == [-1.0, 0.5 + -0.25]
    assert frame["total_rewards"].tolist() == [0.5 - 1.0, 3.75 + 0.5 + 0.25 + 0.25]
    units = frame.attrs["units"]
    assert units["net_rent"] == units["total_rewards"] == client.catalogue.chain_unit
    months = client.chain_rewards("solana", "2024-12-01", "2025-01-31", "1_month")
    assert months["net_rent"].tolist() == [0.75 - 1.5, 0.5 - 0.5]
    assert months["total_rewards"].tolist() == [2.5 + 0.125 + 0.5 - 0.75, 1.25 + 0.375 + 0.25 + 0.0]


def test_net_rent_adds_up_over_days_where_each_side_does_not(client):
    days = client.chain_rewards("solana", "2024-12-30", "2025-01-05")
    week = client.chain_rewards("solana", "2024-12-30", "2025-01-05", "1_week")
    assert days["net_rent"].tolist() == [-0.5, 0.75, 0.0, 0.5, -0.5, 0.0, 0.0]
    assert days["net_rent"].sum() == week["net_rent"].iloc[0] == 0.25
    positive = [m.name for m in client.catalogue.by_family("chain_rewards") if m.aggregation == "positive_net"]
    assert days[positive[0]].sum() == 1.25 != week[positive[0]].iloc[0] == 0.5


# --- financials ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "project, period, protocol, supply_side",
    [
        ("farm", ("2024-12-28", "2025-01-06", "1_week"), [1.5, 12.0, 7.25], [0.0, 8.5, 0.0]),
        ("swapx", MONTHS, [0.3, 0.0, 0.0], [2.7, 1.0, 0.0]),
        ("lend", ("2025-01-03", "2025-01-04"), [0.2, 0.0], [1.8, 0.0]),
    ],
)
def test_financials_total_and_take_rate(client, project, period, protocol, supply_side):
    frame = client.financials(project, *period)
    check_shape(frame, client, family_metrics(client, "financials"), ["total_revenue_in_usd", "protocol_take_rate"])
    assert close(frame["protocol_revenue_in_usd"], protocol)
    assert close(frame["supply_side_revenue_in_usd"], supply_side)
    totals = [p + s for p, s in zip(protocol, supply_side, strict=True)]
    assert close(frame["total_revenue_in_usd"], totals)
    rates = [p / t if t else NAN for p, t in zip(protocol, totals, strict=True)]
    assert close(frame["protocol_take_rate"], rates)
    assert frame.attrs["units"]["total_revenue_in_usd"] == "usd"
    assert frame.attrs["units"]["protocol_take_rate"] == "fraction"


def test_farm_w01_fees_add_up_both_ways(client):
    # EXPECTED.md's check: transaction 9.25 + staking 11.25 = 20.5 = protocol 12.0 + supply side 8.5
    fees = client.yields("farm", "2025-01-01", "2025-01-01", "1_week")
    money = client.financials("farm", "2025-01-01", "2025-01-01", "1_week")
    assert money["total_revenue_in_usd"].iloc[0] == 20.5
    fee_totals = [
        m.name for m in client.catalogue.by_family("yield") if m.source == "fees" and "recipient" not in m.select
    ]
    assert fees[fee_totals].sum(axis=1).iloc[0] == 20.5


# --- every helper, and what it refuses --------------------------------------------------------------

PROJECT_OF = {
    "tokenomics": "gov",
    "yield": "farm",
    "dex": "swapx",
    "lending": "lend",
    "chain_rewards": "solana",
    "financials": "lend",
}
METHOD_OF = {
    "tokenomics": "tokenomics",
    "yield": "yields",
    "dex": "dex",
    "lending": "lending",
    "chain_rewards": "chain_rewards",
    "financials": "financials",
}


@pytest.mark.parametrize("family", FAMILIES)
def test_client_methods_and_module_functions_agree(client, family):
    project = PROJECT_OF[family]
    by_method = getattr(client, METHOD_OF[family])(project, "2024-12-28", "2025-02-01", "1_week")
    by_function = getattr(families, METHOD_OF[family])(client, project, "2024-12-28", "2025-02-01", "1_week")
    by_build = families.build(client, family, project, "2024-12-28", "2025-02-01", "1_week")
    pd.testing.assert_frame_equal(by_method, by_function)
    pd.testing.assert_frame_equal(by_method, by_build)
    assert len(by_method) == 6
    assert by_method.attrs["family"] == family and by_method.attrs["project"] == project
    assert_no_inf(by_method)
    assert set(by_method.attrs["units"]) == set(by_method.columns)


def test_a_family_of_which_nothing_applies_is_refused(client):
    with pytest.raises(ValidationError, match="no financials metric applies to gov") as caught:
        client.financials("gov", "2025-01-01", "2025-01-05")
    assert caught.value.argument == "family"


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda c: c.dex("nosuchdex", "2025-01-01", "2025-01-05"), "project"),
        (lambda c: c.dex("Swapx", "2025-01-01", "2025-01-05"), "project"),
        (lambda c: c.dex("swapx", "2025-01-05", "2025-01-01"), "start"),
        (lambda c: c.dex("swapx", "2025-01-01", "2025-01-05", "fortnight"), "granularity"),
        (lambda c: families.build(c, "nft", "swapx", "2025-01-01", "2025-01-05"), "family"),
    ],
)
def test_bad_arguments_are_validation_errors(client, call, argument):
    with pytest.raises(ValidationError) as caught:
        call(client)
    assert caught.value.argument == argument


def test_only_pull_options_pass_through(client):
    with pytest.raises(TypeError, match="shape"):
        client.dex("swapx", "2025-01-01", "2025-01-05", shape="long")


def test_coerce_leaves_holes_that_the_ratios_keep_as_nan(client):
    with pytest.warns(PartialDataWarning, match="points failed"):
        frame = client.lending("lend", "2025-01-27", "2025-02-03", "1_week", errors="coerce")
    assert frame.index.tolist() == [TS("2025-01-27"), TS("2025-02-03")]  # 02-03.. is outside coverage
    assert str(frame["loan_repayment_transaction_count"].dtype) == "Int64"
    assert frame["loan_repayment_transaction_count"].iloc[0] == 1
    assert frame["loan_repayment_transaction_count"].iloc[1] is pd.NA
    assert values(frame["repayments_per_user"]) == [1.0, None]
    assert_no_inf(frame)
    with pytest.raises(FetchError):
        client.lending("lend", "2025-01-27", "2025-02-03", "1_week")


# --- without discovery: probing ------------------------------------------------------------------


def test_without_discovery_metrics_answered_404_everywhere_are_dropped(client, blind):
    probed = blind.dex("swapx.clmm", *WEEKS)
    assert probed.attrs["applicability"] == "probe"
    regular = [m.name for m in blind.catalogue.by_family("dex") if m.regular_pools_only]
    assert probed.attrs["skipped"] == regular
    known = client.dex("swapx.clmm", *WEEKS)
    pd.testing.assert_frame_equal(probed, known)  # attrs are not compared
    fees = blind.yields("swapx", *WEEKS)
    assert fees.columns.tolist() == ["transaction_fee_revenue_in_usd"]


def test_without_discovery_nothing_is_dropped_where_everything_applies(blind):
    frame = blind.chain_rewards("solana", "2024-12-30", "2025-01-05", "1_week")
    assert frame.attrs["skipped"] == [] and frame.attrs["applicability"] == "probe"
    assert frame["net_rent"].tolist() == [0.25]


def test_without_discovery_a_period_outside_coverage_does_not_drop_a_metric(blind):
    # W06 (02-03..) is outside coverage: a 404 too, but not one that says "does not apply"
    with pytest.warns(PartialDataWarning):
        frame = blind.dex("swapx.clmm", "2025-01-27", "2025-02-03", "1_week", errors="coerce")
    assert "swap_active_users" in frame.columns
    assert not any(c.startswith("regular_pool") for c in frame.columns)
    assert frame["swap_active_users"].iloc[1] is pd.NA
    assert_no_inf(frame)


def test_without_discovery_a_family_that_applies_nowhere_raises(blind):
    with pytest.raises(FetchError, match="metric_not_applicable"):
        blind.financials("gov", "2025-01-01", "2025-01-02")
