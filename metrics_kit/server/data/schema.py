"""The event data format as constants: tables, columns and allowed values (docs/data-format.md).

The store validates against these and the demo generator writes them; nothing else spells them.
"""

from __future__ import annotations

ACTIONS = (
    "swap",
    "lp_deposit",
    "lp_withdraw",
    "double_dip_deposit",
    "stake",
    "unstake",
    "farm_deposit",
    "farm_withdraw",
    "lending_deposit",
    "lending_withdraw",
    "borrow",
    "repay",
)
POOL_TYPES = ("regular", "concentrated")
FEE_TYPES = ("transaction", "staking")
RECIPIENTS = ("protocol", "supply_side")
FLOWS = ("mint", "emission", "burn", "buyback")
REWARD_TYPES = ("staking", "fee", "voting", "rent")
EVENT_TABLES = ("transactions", "fees", "token_flows", "chain_rewards")
TABLES = ("projects", *EVENT_TABLES)

# Column types after normalisation; the order is the order of the views.
COLUMNS: dict[str, dict[str, str]] = {
    "projects": {"project": "str", "kinds": "str", "initial_circulating_supply": "float", "regular_pools": "bool"},
    "transactions": {
        "block_time": "time",
        "tx_id": "str",
        "signer": "str",
        "project": "str",
        "action": "str",
        "pool_type": "str",
    },
    "fees": {"block_time": "time", "project": "str", "fee_type": "str", "recipient": "str", "amount_usd": "float"},
    "token_flows": {"block_time": "time", "project": "str", "flow": "str", "amount": "float"},
    "chain_rewards": {
        "block_time": "time",
        "project": "str",
        "account": "str",
        "reward_type": "str",
        "amount": "float",
    },
}
