"""The metric catalogue: one declarative entry per metric, the single source of truth.

The server validates, routes and documents from it; the engine derives each metric's
computation from its ``source`` and ``select`` fields; the client (later) validates and types
from it. No other module spells a metric name out.

Each entry says what it measures in terms of the event tables (see ``docs/data-format.md``):

* ``source``: the event table it reads.
* ``aggregation``: ``distinct_count`` (distinct signers), ``count`` (distinct transactions),
  ``sum``, ``ending_balance`` (initial supply plus every signed flow up to the period's end),
  ``net_sum`` (signed flows inside the period), ``positive_net`` / ``negative_net`` (per-account
  nets inside the period, keeping only those above / below zero).
* ``select``: column -> allowed values that pick the rows it aggregates.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from metrics_kit.errors import ConfigurationError

KINDS = ("tokenomics", "yield", "dex", "lending", "chain")
FAMILIES = ("tokenomics", "yield", "dex", "lending", "chain_rewards", "financials")
AGGREGATIONS = ("distinct_count", "count", "sum", "ending_balance", "net_sum", "positive_net", "negative_net")
DEFAULT_CHAIN_UNIT = "sol"
CHAIN_UNIT_ENV = "METRICS_KIT_CHAIN_UNIT"

# How each token flow moves the circulating supply.
FLOW_SIGNS: Mapping[str, int] = {"mint": 1, "emission": 1, "burn": -1, "buyback": -1}


@dataclass(frozen=True)
class Metric:
    name: str
    families: tuple[str, ...]
    unit: str
    aggregation: str
    description: str
    source: str
    select: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    kinds: frozenset[str] = frozenset()
    regular_pools_only: bool = False

    @property
    def family(self) -> str:
        return self.families[0]

    @property
    def is_count(self) -> bool:
        return self.aggregation in ("distinct_count", "count")

    def applies_to(self, kinds: Iterable[str], regular_pools: bool) -> bool:
        if self.regular_pools_only and not regular_pools:
            return False
        return not self.kinds.isdisjoint(kinds)

    @property
    def restriction(self) -> str:
        text = "projects of kind " + " or ".join(sorted(self.kinds))
        if self.regular_pools_only:
            text += " with regular pools"
        return text

    def describe(self) -> dict[str, Any]:
        """The entry as JSON-ready data: what GET /catalogue serves and what metrics_kit.metrics() tabulates."""
        return {
            "name": self.name,
            "families": list(self.families),
            "unit": self.unit,
            "aggregation": self.aggregation,
            "description": self.description,
            "aliases": list(self.aliases),
            "kinds": sorted(self.kinds),
            "regular_pools_only": self.regular_pools_only,
            "applies_to": self.restriction,
        }


def _tx(
    name: str,
    families: tuple[str, ...],
    aggregation: str,
    description: str,
    action: str,
    kinds: Iterable[str],
    *,
    pool: str | None = None,
    aliases: Iterable[str] = (),
    regular: bool = False,
) -> Metric:
    select = {"action": (action,)}
    if pool:
        select["pool_type"] = (pool,)
    unit = "count"
    return Metric(
        name,
        families,
        unit,
        aggregation,
        description,
        "transactions",
        select,
        tuple(aliases),
        frozenset(kinds),
        regular,
    )


def _users(name: str, family: str, action: str, what: str) -> Metric:
    return _tx(
        name,
        (family,),
        "distinct_count",
        f"Unique signer addresses with at least one {what} transaction in the interval.",
        action,
        (family,),
    )


def _txs(
    name: str,
    family: str,
    action: str,
    what: str,
    *,
    kinds: Iterable[str] | None = None,
    pool: str | None = None,
    aliases: Iterable[str] = (),
    regular: bool = False,
) -> Metric:
    return _tx(
        name,
        (family,),
        "count",
        f"Count of {what} transactions in the interval.",
        action,
        (family,) if kinds is None else kinds,
        pool=pool,
        aliases=aliases,
        regular=regular,
    )


def _fee(
    name: str,
    families: tuple[str, ...],
    description: str,
    kinds: Iterable[str],
    *,
    fee_type: str | None = None,
    recipient: str | None = None,
) -> Metric:
    select: dict[str, tuple[str, ...]] = {}
    if fee_type:
        select["fee_type"] = (fee_type,)
    if recipient:
        select["recipient"] = (recipient,)
    return Metric(name, families, "usd", "sum", description, "fees", select, (), frozenset(kinds))


def _build(chain_unit: str) -> tuple[Metric, ...]:
    tok = ("tokenomics",)
    fin_kinds = ("yield", "dex", "lending")
    metrics = [
        Metric(
            "circulating_supply_in_native_token",
            tok,
            "native_token",
            "ending_balance",
            "Ending balance of the circulating supply of the governance token in the interval.",
            "token_flows",
            {},
            (),
            frozenset(tok),
        ),
        Metric(
            "net_dilution_in_native_token",
            tok,
            "native_token",
            "net_sum",
            "Dilution of the circulating supply in the interval: token mint and token emission, "
            "against token burn and token buyback.",
            "token_flows",
            {},
            (),
            frozenset(tok),
        ),
        Metric(
            "token_emission_in_native_token",
            tok,
            "native_token",
            "sum",
            "Number of governance tokens issued into the circulating supply in the interval.",
            "token_flows",
            {"flow": ("emission",)},
            (),
            frozenset(tok),
        ),
        Metric(
            "token_buyback_in_native_token",
            tok,
            "native_token",
            "sum",
            "Number of governance tokens taken from the circulating supply back into the locked "
            "supply account in the interval.",
            "token_flows",
            {"flow": ("buyback",)},
            (),
            frozenset(tok),
        ),
        # Shared by yield projects and exchanges: the meaning follows the project's kind.
        _fee(
            "transaction_fee_revenue_in_usd",
            ("yield", "dex"),
            "USD fee revenue paid to facilitate transactions (trading fees on an exchange) in the "
            "period; protocol plus supply-side transaction fees.",
            ("yield", "dex"),
            fee_type="transaction",
        ),
        _fee(
            "protocol_transaction_fee_revenue_in_usd",
            ("yield",),
            "USD transaction fee revenue paid to the protocol in the period.",
            ("yield",),
            fee_type="transaction",
            recipient="protocol",
        ),
        _fee(
            "supply_side_transaction_fee_revenue_in_usd",
            ("yield",),
            "USD transaction fee revenue paid to the supply side (liquidity providers) in the period.",
            ("yield",),
            fee_type="transaction",
            recipient="supply_side",
        ),
        _fee(
            "staking_fee_revenue_in_usd",
            ("yield",),
            "USD revenue from staking fees in the period; protocol plus supply-side staking fees.",
            ("yield",),
            fee_type="staking",
        ),
        _fee(
            "protocol_staking_fee_revenue_in_usd",
            ("yield",),
            "USD staking fee revenue earned by the protocol in the period.",
            ("yield",),
            fee_type="staking",
            recipient="protocol",
        ),
        _fee(
            "supply_side_staking_fee_revenue_in_usd",
            ("yield",),
            "USD staking fee revenue earned by the supply side in the period.",
            ("yield",),
            fee_type="staking",
            recipient="supply_side",
        ),
        _users("staking_active_users", "yield", "stake", "staking"),
        _users("unstaking_active_users", "yield", "unstake", "unstaking"),
        _users("farm_deposit_active_users", "yield", "farm_deposit", "farm deposit"),
        _users("farm_withdraw_active_users", "yield", "farm_withdraw", "farm withdrawal"),
        _txs("staking_transaction_count", "yield", "stake", "staking"),
        _txs("unstaking_transaction_count", "yield", "unstake", "unstaking"),
        _txs("farm_deposit_transaction_count", "yield", "farm_deposit", "farm deposit"),
        # The spec's sample request spells it "farm_withdraw_..." (spec 2.2): both are accepted.
        _txs(
            "farm_withdrawal_transaction_count",
            "yield",
            "farm_withdraw",
            "farm withdrawal",
            aliases=("farm_withdraw_transaction_count",),
        ),
        _users("swap_active_users", "dex", "swap", "swap"),
        _users("liquidity_pool_deposit_active_users", "dex", "lp_deposit", "liquidity pool deposit"),
        _users("liquidity_pool_withdraw_active_users", "dex", "lp_withdraw", "liquidity pool withdrawal"),
        _txs("swap_transaction_count", "dex", "swap", "swap"),
        _txs("liquidity_pool_deposit_transaction_count", "dex", "lp_deposit", "liquidity pool deposit"),
        _txs("liquidity_pool_withdraw_transaction_count", "dex", "lp_withdraw", "liquidity pool withdrawal"),
        _txs(
            "regular_pool_swap_transaction_count",
            "dex",
            "swap",
            "swap (regular, non-concentrated pools)",
            pool="regular",
            regular=True,
        ),
        _txs(
            "regular_pool_deposit_transaction_count",
            "dex",
            "lp_deposit",
            "regular pool deposit",
            pool="regular",
            regular=True,
        ),
        _txs(
            "regular_pool_withdraw_transaction_count",
            "dex",
            "lp_withdraw",
            "regular pool withdrawal",
            pool="regular",
            regular=True,
        ),
        _txs("double_dip_deposit_transaction_count", "dex", "double_dip_deposit", "double-dip deposit", regular=True),
        _users("lending_deposit_active_users", "lending", "lending_deposit", "lending deposit"),
        _users("lending_withdraw_active_users", "lending", "lending_withdraw", "lending withdrawal"),
        _users("borrowing_active_users", "lending", "borrow", "borrowing"),
        _users("loan_repayment_active_users", "lending", "repay", "loan repayment"),
        _txs("lending_deposit_transaction_count", "lending", "lending_deposit", "lending deposit"),
        _txs("lending_withdraw_transaction_count", "lending", "lending_withdraw", "lending withdrawal"),
        _txs("borrowing_transaction_count", "lending", "borrow", "borrowing"),
        _txs("loan_repayment_transaction_count", "lending", "repay", "loan repayment"),
        _fee(
            "protocol_revenue_in_usd",
            ("financials",),
            "USD revenue earned by the protocol in the period (all fee types).",
            fin_kinds,
            recipient="protocol",
        ),
        _fee(
            "supply_side_revenue_in_usd",
            ("financials",),
            "USD revenue earned by the supply side (liquidity providers, lenders, stakers) in the "
            "period (all fee types).",
            fin_kinds,
            recipient="supply_side",
        ),
    ]
    chain = ("chain_rewards",)
    rewards = [
        ("staking", "sum", "staking", "Sum of rewards earned by staking in the network's staking contract."),
        ("mining_fee", "sum", "fee", "Sum of transaction fees earned by the leader validation client."),
        ("voting", "sum", "voting", "Sum of transaction fees earned by validators that validate correct blocks."),
        (
            "negative_rent",
            "negative_net",
            "rent",
            "Storage rent, negative side: the sum of the per-account net rent of accounts that paid more "
            "rent than they received in the interval (a negative number).",
        ),
        (
            "positive_rent",
            "positive_net",
            "rent",
            "Storage rent, positive side: the sum of the per-account net rent of accounts that received "
            "more rent than they paid in the interval.",
        ),
    ]
    for stem, aggregation, reward_type, description in rewards:
        metrics.append(
            Metric(
                f"reward_{stem}_in_{chain_unit}",
                chain,
                chain_unit,
                aggregation,
                description,
                "chain_rewards",
                {"reward_type": (reward_type,)},
                (),
                frozenset({"chain"}),
            )
        )
    return tuple(metrics)


class Catalogue:
    """The metrics, looked up by canonical name or alias."""

    def __init__(self, chain_unit: str = DEFAULT_CHAIN_UNIT):
        if not chain_unit.isidentifier() or chain_unit != chain_unit.lower():
            raise ConfigurationError(
                f"chain_unit must be a lowercase identifier such as 'sol' or 'eth' (letters, digits, '_'), "
                f"not {chain_unit!r}"
            )
        self.chain_unit = chain_unit
        self.metrics: tuple[Metric, ...] = _build(chain_unit)
        self._by_name: dict[str, Metric] = {}
        for metric in self.metrics:
            for name in (metric.name, *metric.aliases):
                assert name not in self._by_name, name
                self._by_name[name] = metric
        self.canonical_names: tuple[str, ...] = tuple(m.name for m in self.metrics)
        """The canonical names, in catalogue order: what did-you-mean offers."""
        self.names: tuple[str, ...] = self.canonical_names + tuple(a for m in self.metrics for a in m.aliases)
        """Every accepted name: canonical names, then aliases."""

    def get(self, name: str) -> Metric | None:
        return self._by_name.get(name)

    def by_family(self, family: str) -> tuple[Metric, ...]:
        return tuple(m for m in self.metrics if family in m.families)

    def applicable(self, kinds: Iterable[str], regular_pools: bool) -> tuple[Metric, ...]:
        kinds = frozenset(kinds)
        return tuple(m for m in self.metrics if m.applies_to(kinds, regular_pools))

    def __iter__(self) -> Iterator[Metric]:
        return iter(self.metrics)

    def __len__(self) -> int:
        return len(self.metrics)


@functools.cache
def default_catalogue(chain_unit: str | None = None) -> Catalogue:
    """The catalogue for ``chain_unit``; if None, for ``$METRICS_KIT_CHAIN_UNIT``, else for sol."""
    if chain_unit is None:
        chain_unit = os.environ.get(CHAIN_UNIT_ENV) or DEFAULT_CHAIN_UNIT
    return Catalogue(chain_unit)
