"""The metric catalogue as a whole, checked against section 2.1 of the specification.

The expected names below are copied from the spec's tables (with ``<native_unit>`` = ``sol``), not
derived from the catalogue, so a metric dropped or renamed in the code shows up here.
"""

from __future__ import annotations

import pytest

from metrics_kit.errors import ConfigurationError
from metrics_kit.spec.calendar import GRANULARITIES
from metrics_kit.spec.catalogue import (
    AGGREGATIONS,
    DEFAULT_CHAIN_UNIT,
    FAMILIES,
    KINDS,
    Catalogue,
    default_catalogue,
)

# Spec 2.1, table by table: metric_name -> the project kinds its table is about.
SPEC_METRICS: dict[str, dict[str, set[str]]] = {
    "tokenomics": {
        name: {"tokenomics"}
        for name in (
            "circulating_supply_in_native_token",
            "net_dilution_in_native_token",
            "token_emission_in_native_token",
            "token_buyback_in_native_token",
        )
    },
    "yield": {
        name: {"yield"}
        for name in (
            "transaction_fee_revenue_in_usd",
            "protocol_transaction_fee_revenue_in_usd",
            "supply_side_transaction_fee_revenue_in_usd",
            "staking_fee_revenue_in_usd",
            "protocol_staking_fee_revenue_in_usd",
            "supply_side_staking_fee_revenue_in_usd",
            "staking_active_users",
            "unstaking_active_users",
            "farm_deposit_active_users",
            "farm_withdraw_active_users",
            "staking_transaction_count",
            "unstaking_transaction_count",
            "farm_deposit_transaction_count",
            "farm_withdrawal_transaction_count",
        )
    },
    "dex": {
        name: {"dex"}
        for name in (
            "transaction_fee_revenue_in_usd",
            "swap_active_users",
            "liquidity_pool_deposit_active_users",
            "liquidity_pool_withdraw_active_users",
            "swap_transaction_count",
            "liquidity_pool_deposit_transaction_count",
            "liquidity_pool_withdraw_transaction_count",
            "regular_pool_swap_transaction_count",
            "regular_pool_deposit_transaction_count",
            "regular_pool_withdraw_transaction_count",
            "double_dip_deposit_transaction_count",
        )
    },
    "lending": {
        name: {"lending"}
        for name in (
            "lending_deposit_active_users",
            "lending_withdraw_active_users",
            "borrowing_active_users",
            "loan_repayment_active_users",
            "lending_deposit_transaction_count",
            "lending_withdraw_transaction_count",
            "borrowing_transaction_count",
            "loan_repayment_transaction_count",
        )
    },
    "chain_rewards": {
        name: {"chain"}
        for name in (
            "reward_staking_in_sol",
            "reward_mining_fee_in_sol",
            "reward_voting_in_sol",
            "reward_negative_rent_in_sol",
            "reward_positive_rent_in_sol",
        )
    },
    "financials": {name: set() for name in ("protocol_revenue_in_usd", "supply_side_revenue_in_usd")},
}
SPEC_NAMES = sorted({name for table in SPEC_METRICS.values() for name in table})
REGULAR_POOL_METRICS = {
    "regular_pool_swap_transaction_count",
    "regular_pool_deposit_transaction_count",
    "regular_pool_withdraw_transaction_count",
    "double_dip_deposit_transaction_count",
}
CHAIN_STEMS = ("staking", "mining_fee", "voting", "negative_rent", "positive_rent")


@pytest.fixture(scope="module")
def catalogue() -> Catalogue:
    return Catalogue(DEFAULT_CHAIN_UNIT)


def test_default_chain_unit_is_sol():
    assert DEFAULT_CHAIN_UNIT == "sol"
    assert Catalogue().chain_unit == "sol"


def test_every_spec_metric_is_in_the_catalogue_and_nothing_else(catalogue):
    assert len(SPEC_NAMES) == 43
    assert sorted(m.name for m in catalogue) == SPEC_NAMES
    for name in SPEC_NAMES:
        metric = catalogue.get(name)
        assert metric is not None and metric.name == name


def test_default_catalogue_matches():
    assert default_catalogue("sol").names == Catalogue("sol").names
    assert [m.name for m in default_catalogue("eth")] == [m.name for m in Catalogue("eth")]


def test_names_are_unique(catalogue):
    canonical = [m.name for m in catalogue]
    assert len(canonical) == len(set(canonical)) == len(catalogue)
    aliases = [a for m in catalogue for a in m.aliases]
    assert len(aliases) == len(set(aliases))
    assert not set(aliases) & set(canonical)
    assert sorted(catalogue.names) == sorted(canonical + aliases)
    assert len(catalogue.names) == len(set(catalogue.names))


def test_names_lists_canonical_names_then_aliases(catalogue):
    canonical = [m.name for m in catalogue]
    aliases = [a for m in catalogue for a in m.aliases]
    assert list(catalogue.names) == canonical + aliases


def test_the_spec_sample_alias_resolves(catalogue):
    metric = catalogue.get("farm_withdraw_transaction_count")
    assert metric is catalogue.get("farm_withdrawal_transaction_count")
    assert metric.name == "farm_withdrawal_transaction_count"
    assert "farm_withdraw_transaction_count" in catalogue.names
    assert [(m.name, a) for m in catalogue for a in m.aliases] == [
        ("farm_withdrawal_transaction_count", "farm_withdraw_transaction_count")
    ]


def test_every_alias_resolves_to_its_metric(catalogue):
    for metric in catalogue:
        for alias in metric.aliases:
            assert catalogue.get(alias) is metric


def test_unknown_names_do_not_resolve(catalogue):
    for name in ("", "swap_active_user", "SWAP_ACTIVE_USERS", "reward_staking_in_eth", " swap_active_users"):
        assert catalogue.get(name) is None


@pytest.mark.parametrize("name", SPEC_NAMES)
def test_every_metric_is_fully_described(catalogue, name):
    metric = catalogue.get(name)
    assert metric.description.strip() and metric.description.strip().endswith(".")
    assert metric.unit
    assert metric.aggregation in AGGREGATIONS
    assert metric.families and set(metric.families) <= set(FAMILIES)
    assert metric.family == metric.families[0]
    assert metric.kinds and set(metric.kinds) <= set(KINDS)
    assert metric.source in ("transactions", "fees", "token_flows", "chain_rewards")
    assert metric.restriction.startswith("projects of kind ")


@pytest.mark.parametrize("name", SPEC_NAMES)
def test_unit_and_aggregation_follow_the_name(catalogue, name):
    metric = catalogue.get(name)
    if name.endswith("_in_usd"):
        assert (metric.unit, metric.aggregation, metric.source) == ("usd", "sum", "fees")
    elif name.endswith("_in_native_token"):
        assert metric.unit == "native_token" and metric.source == "token_flows"
    elif name.endswith("_in_sol"):
        assert metric.unit == "sol" and metric.source == "chain_rewards"
    elif name.endswith("_active_users"):
        assert (metric.unit, metric.aggregation, metric.source) == ("count", "distinct_count", "transactions")
        assert metric.is_count
    else:
        assert name.endswith("_transaction_count")
        assert (metric.unit, metric.aggregation, metric.source) == ("count", "count", "transactions")
        assert metric.is_count
    assert metric.is_count == (metric.unit == "count")


def test_tokenomics_aggregations(catalogue):
    assert catalogue.get("circulating_supply_in_native_token").aggregation == "ending_balance"
    assert catalogue.get("net_dilution_in_native_token").aggregation == "net_sum"
    assert catalogue.get("token_emission_in_native_token").select == {"flow": ("emission",)}
    assert catalogue.get("token_buyback_in_native_token").select == {"flow": ("buyback",)}


def test_storage_rent_is_two_metrics_and_no_combined_one(catalogue):
    assert catalogue.get("reward_negative_rent_in_sol").aggregation == "negative_net"
    assert catalogue.get("reward_positive_rent_in_sol").aggregation == "positive_net"
    assert not [
        m.name
        for m in catalogue
        if "rent" in m.name and m.name not in ("reward_negative_rent_in_sol", "reward_positive_rent_in_sol")
    ]


@pytest.mark.parametrize("family", [f for f in SPEC_METRICS if f != "financials"])
def test_metrics_apply_to_the_kind_of_their_spec_table(catalogue, family):
    for name, kinds in SPEC_METRICS[family].items():
        metric = catalogue.get(name)
        assert kinds <= metric.kinds, name
        assert metric.applies_to(kinds, regular_pools=True)
        assert metric.applies_to(kinds, regular_pools=False) == (name not in REGULAR_POOL_METRICS)


def test_shared_fee_metric_applies_to_yield_and_dex(catalogue):
    metric = catalogue.get("transaction_fee_revenue_in_usd")
    assert metric.kinds == frozenset({"yield", "dex"})
    assert set(metric.families) == {"yield", "dex"}
    assert not metric.applies_to({"lending"}, regular_pools=False)


def test_financial_metrics(catalogue):
    for name in SPEC_METRICS["financials"]:
        metric = catalogue.get(name)
        assert metric.families == ("financials",)
        assert metric.kinds and "chain" not in metric.kinds and "tokenomics" not in metric.kinds


def test_regular_pool_metrics_need_a_dex_with_regular_pools(catalogue):
    assert {m.name for m in catalogue if m.regular_pools_only} == REGULAR_POOL_METRICS
    for name in REGULAR_POOL_METRICS:
        metric = catalogue.get(name)
        assert metric.kinds == frozenset({"dex"})
        assert not metric.applies_to({"dex"}, regular_pools=False)
        assert metric.applies_to({"dex"}, regular_pools=True)
        assert not metric.applies_to({"yield"}, regular_pools=True)
        assert metric.restriction == "projects of kind dex with regular pools"
    assert catalogue.get("regular_pool_swap_transaction_count").select["pool_type"] == ("regular",)


def test_applicable_and_by_family(catalogue):
    dex = {m.name for m in catalogue.applicable({"dex"}, regular_pools=False)}
    assert dex == ({n for n in SPEC_METRICS["dex"]} - REGULAR_POOL_METRICS) | set(SPEC_METRICS["financials"])
    dex_regular = {m.name for m in catalogue.applicable({"dex"}, regular_pools=True)}
    assert dex_regular == dex | REGULAR_POOL_METRICS
    assert {m.name for m in catalogue.applicable({"chain"}, False)} == set(SPEC_METRICS["chain_rewards"])
    assert {m.name for m in catalogue.applicable({"tokenomics"}, False)} == set(SPEC_METRICS["tokenomics"])
    assert catalogue.applicable(set(), False) == ()
    for family in FAMILIES:
        assert {m.name for m in catalogue.by_family(family)} == set(SPEC_METRICS[family])


def test_granularities_are_the_spec_three():
    assert GRANULARITIES == ("1_day", "1_week", "1_month")


def test_chain_unit_renames_the_five_chain_metrics():
    sol, eth = Catalogue("sol"), Catalogue(chain_unit="eth")
    assert eth.chain_unit == "eth"
    renamed = {m.name for m in eth} - {m.name for m in sol}
    assert renamed == {f"reward_{stem}_in_eth" for stem in CHAIN_STEMS}
    assert {m.name for m in sol} - {m.name for m in eth} == {f"reward_{stem}_in_sol" for stem in CHAIN_STEMS}
    for stem in CHAIN_STEMS:
        metric = eth.get(f"reward_{stem}_in_eth")
        assert metric.unit == "eth" and metric.kinds == frozenset({"chain"})
        assert eth.get(f"reward_{stem}_in_sol") is None
    # Nothing else changes.
    same = [m for m in sol if m.family != "chain_rewards"]
    assert same == [m for m in eth if m.family != "chain_rewards"]
    assert len(eth) == len(sol)


@pytest.mark.parametrize("unit", ["ETH", "", "1x", "e-th", "s o l"])
def test_chain_unit_must_be_a_lowercase_identifier(unit):
    with pytest.raises(ConfigurationError, match="chain_unit"):
        Catalogue(unit)


def test_default_catalogue_takes_the_chain_unit_from_the_environment(monkeypatch):
    monkeypatch.setenv("METRICS_KIT_CHAIN_UNIT", "eth")
    assert default_catalogue.__wrapped__(None).chain_unit == "eth"
    assert default_catalogue.__wrapped__("sui").chain_unit == "sui"
    monkeypatch.setenv("METRICS_KIT_CHAIN_UNIT", "")
    assert default_catalogue.__wrapped__(None).chain_unit == DEFAULT_CHAIN_UNIT
