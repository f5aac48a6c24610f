"""Load-time validation of an event data folder (docs/data-format.md), against real DuckDB.

Every test writes a small data folder under ``tmp_path`` and calls :func:`metrics_kit.server.data.store.load`
directly. A broken folder must raise :class:`DataFormatError` naming the file, the column and the
first offending rows (numbered as a person counts data rows); a good one must expose views whose
``block_time`` is the right UTC instant, whatever the file format, timestamp unit or time zone.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from metrics_kit.errors import DataFormatError
from metrics_kit.server.data import store

PROJECTS = """project,kinds,initial_circulating_supply,regular_pools
tok,tokenomics,100,
swp,dex,,true
swp.clmm,dex,,
farm,yield,,
lend,lending,,
sol,chain,,
"""
TRANSACTIONS = """block_time,tx_id,signer,project,action,pool_type
2024-03-13T08:00:00Z,t1,alice,swp,swap,regular
2024-03-14T08:00:00Z,t2,bob,swp.clmm,swap,concentrated
2024-03-15T08:00:00Z,t3,carol,farm,stake,
"""
FEES = """block_time,project,fee_type,recipient,amount_usd
2024-03-13T10:00:00Z,swp,transaction,protocol,1.5
2024-03-14T10:00:00Z,farm,staking,supply_side,-0.25
"""
TOKEN_FLOWS = """block_time,project,flow,amount
2024-03-13T00:00:00Z,tok,mint,10
2024-03-14T00:00:00Z,tok,burn,0
"""
CHAIN_REWARDS = """block_time,project,account,reward_type,amount
2024-03-13T00:00:00Z,sol,v1,rent,-1.5
2024-03-14T00:00:00Z,sol,v2,staking,2
"""
BASE = {
    "projects": PROJECTS,
    "transactions": TRANSACTIONS,
    "fees": FEES,
    "token_flows": TOKEN_FLOWS,
    "chain_rewards": CHAIN_REWARDS,
}
TX_HEADER = "block_time,tx_id,signer,project,action,pool_type\n"


def make(folder: Path, **tables: str | None) -> Path:
    """A data folder of CSV tables: the valid BASE tables, with ``tables`` replacing (None: omitting) some."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in {**BASE, **tables}.items():
        if text is not None:
            (folder / f"{name}.csv").write_text(text, encoding="utf-8")
    return folder


def load_error(folder: Path, con=None) -> str:
    with pytest.raises(DataFormatError) as info:
        store.load(folder, con=con)
    return str(info.value)


def shown_rows(message: str) -> list[tuple[int, str]]:
    """The ``row N: 'value'`` lines of a validation message, in order."""
    return [(int(n), v) for n, v in re.findall(r"^  (?:\S+ )?row (\d+)(?: \(line \d+\))?: (.*)$", message, re.M)]


def user_views(con) -> list[str]:
    return [
        row[0]
        for row in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY view_name").fetchall()
    ]


# -- a valid folder ---------------------------------------------------------------------------------


def test_valid_folder_loads_every_table(tmp_path):
    loaded = store.load(make(tmp_path))
    assert sorted(loaded.projects) == ["farm", "lend", "sol", "swp", "swp.clmm", "tok"]
    assert loaded.projects["swp"].regular_pools is True
    assert loaded.projects["swp.clmm"].regular_pools is False
    assert loaded.projects["tok"].initial_circulating_supply == 100
    assert loaded.projects["farm"].initial_circulating_supply is None
    assert loaded.coverage == (dt.date(2024, 3, 13), dt.date(2024, 3, 15))
    assert user_views(loaded.con) == sorted(store.TABLES)
    assert loaded.con.execute("SELECT count(*) FROM transactions").fetchone() == (3,)


def test_missing_event_tables_mean_no_events(tmp_path):
    loaded = store.load(make(tmp_path, transactions=None, fees=None, token_flows=None, chain_rewards=None))
    assert loaded.coverage is None
    for table in store.EVENT_TABLES:
        assert loaded.con.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)


# -- which files --------------------------------------------------------------------------------------


def test_missing_projects_table(tmp_path):
    message = load_error(make(tmp_path, projects=None))
    assert "no projects table" in message
    assert str(tmp_path) in message


def test_missing_data_folder(tmp_path):
    message = load_error(tmp_path / "nope")
    assert "does not exist" in message and "nope" in message


def test_unknown_data_file_is_an_error_not_zeros(tmp_path):
    folder = make(tmp_path, transactions=None)
    (folder / "transaction.csv").write_text(TRANSACTIONS)  # the typo
    message = load_error(folder)
    assert message.startswith("transaction.csv: not a table of the data format")
    for table in store.TABLES:
        assert table in message


def test_unknown_data_folder_of_parts(tmp_path):
    folder = make(tmp_path)
    (folder / "fee").mkdir()
    (folder / "fee" / "part-0.csv").write_text(FEES)
    assert load_error(folder).startswith("fee: not a table of the data format")


def test_same_table_twice(tmp_path):
    folder = make(tmp_path)
    empty = pa.table(
        {
            "block_time": pa.array([], pa.timestamp("us")),
            "project": pa.array([], pa.string()),
            "fee_type": pa.array([], pa.string()),
            "recipient": pa.array([], pa.string()),
            "amount_usd": pa.array([], pa.float64()),
        }
    )
    pq.write_table(empty, folder / "fees.parquet")
    message = load_error(folder)
    assert message.startswith("table 'fees' is given more than once")
    assert "fees.csv" in message and "fees.parquet" in message


def test_same_table_as_file_and_folder(tmp_path):
    folder = make(tmp_path)
    (folder / "fees").mkdir()
    (folder / "fees" / "part-0.csv").write_text(FEES)
    message = load_error(folder)
    assert "table 'fees' is given more than once" in message
    assert "fees.csv" in message


def test_a_one_part_folder_is_named_in_messages(tmp_path):
    folder = make(tmp_path)
    (folder / "fees").mkdir()
    (folder / "fees" / "part-0.csv").write_text(FEES)
    assert "fees/" in load_error(folder)
    folder = make(tmp_path / "other", transactions=None)
    (folder / "transactions").mkdir()
    (folder / "transactions" / "part-0.csv").write_text(TX_HEADER + "2024-03-13T08:00:00Z,x,a,swp,bridge,\n")
    message = load_error(folder)
    assert message.startswith("transactions/"), message


def test_folder_mixing_parquet_and_csv_parts(tmp_path):
    folder = make(tmp_path, transactions=None)
    (folder / "transactions").mkdir()
    (folder / "transactions" / "part-0.csv").write_text(TRANSACTIONS)
    pq.write_table(pa.Table.from_pylist([]), folder / "transactions" / "part-1.parquet")
    message = load_error(folder)
    assert "transactions/" in message and "mixes Parquet and CSV" in message


def test_other_files_and_hidden_files_are_ignored(tmp_path):
    folder = make(tmp_path)
    (folder / "README.md").write_text("notes")
    (folder / ".fees.csv").write_text("garbage")
    assert store.load(folder).coverage == (dt.date(2024, 3, 13), dt.date(2024, 3, 15))


# -- columns ---------------------------------------------------------------------------------------------


def test_missing_column(tmp_path):
    text = "block_time,tx_id,signer,project,pool_type\n2024-03-13T08:00:00Z,t1,alice,swp,regular\n"
    message = load_error(make(tmp_path, transactions=text))
    assert message.startswith("transactions.csv: missing column 'action'")
    assert "found: block_time, tx_id, signer, project, pool_type" in message


def test_missing_columns_are_all_named(tmp_path):
    message = load_error(make(tmp_path, fees="block_time,project\n2024-03-13T10:00:00Z,swp\n"))
    assert message.startswith("fees.csv: missing columns 'fee_type', 'recipient', 'amount_usd'")


def test_extra_columns_and_column_order_do_not_matter(tmp_path):
    text = (
        "note,action,project,signer,tx_id,block_time,pool_type\nhello,swap,swp,alice,t1,2024-03-20T08:00:00Z,regular\n"
    )
    loaded = store.load(make(tmp_path, transactions=text))
    rows = loaded.con.execute("SELECT tx_id, action, project FROM transactions").fetchall()
    assert rows == [("t1", "swap", "swp")]
    assert loaded.coverage == (dt.date(2024, 3, 13), dt.date(2024, 3, 20))


def test_parquet_column_of_the_wrong_type(tmp_path):
    folder = make(tmp_path, fees=None)
    pq.write_table(
        pa.table(
            {
                "block_time": pa.array([1], pa.int64()),
                "project": ["swp"],
                "fee_type": ["staking"],
                "recipient": ["protocol"],
                "amount_usd": [1.0],
            }
        ),
        folder / "fees.parquet",
    )
    message = load_error(folder)
    assert message.startswith("fees.parquet, column 'block_time': has type BIGINT; expected a timestamp")


def test_unreadable_parquet(tmp_path):
    folder = make(tmp_path, fees=None)
    (folder / "fees.parquet").write_bytes(b"this is not parquet")
    assert load_error(folder).startswith("fees.parquet: cannot be read as PARQUET")


# -- values ----------------------------------------------------------------------------------------------

BAD_VALUES = [
    # (id, table, csv text, column, [(row, shown value), ...])
    (
        "unknown action",
        "transactions",
        TX_HEADER + "2024-03-13T08:00:00Z,t1,a,swp,swap,\n2024-03-13T08:00:00Z,t2,a,swp,Swap,\n"
        "2024-03-13T08:00:00Z,t3,a,swp,swap,\n2024-03-13T08:00:00Z,t4,a,swp,bridge,\n",
        "action",
        [(2, "'Swap'"), (4, "'bridge'")],
    ),
    (
        "bad pool type",
        "transactions",
        TX_HEADER + "2024-03-13T08:00:00Z,t1,a,swp,swap,Regular\n",
        "pool_type",
        [(1, "'Regular'")],
    ),
    (
        "empty tx_id",
        "transactions",
        TX_HEADER + "2024-03-13T08:00:00Z,t1,a,swp,swap,\n2024-03-13T08:00:00Z,,a,swp,swap,\n",
        "tx_id",
        [(2, "(empty)")],
    ),
    ("empty signer", "transactions", TX_HEADER + "2024-03-13T08:00:00Z,t1,,swp,swap,\n", "signer", [(1, "(empty)")]),
    (
        "bad csv timestamps",
        "transactions",
        TX_HEADER + "2024-03-13T08:00:00Z,t1,a,swp,swap,\nyesterday,t2,a,swp,swap,\n"
        "2024-02-30T00:00:00Z,t3,a,swp,swap,\n03/01/2024,t4,a,swp,swap,\n,t5,a,swp,swap,\n"
        "2024-03-01T25:00:00Z,t6,a,swp,swap,\n",
        "block_time",
        [
            (2, "'yesterday'"),
            (3, "'2024-02-30T00:00:00Z'"),
            (4, "'03/01/2024'"),
            (5, "(empty)"),
            (6, "'2024-03-01T25:00:00Z'"),
        ],
    ),
    (
        "event for an unknown project",
        "transactions",
        TX_HEADER + "2024-03-13T08:00:00Z,t1,a,ghost,swap,\n2024-03-13T08:00:00Z,t2,a,swp,swap,\n",
        "project",
        [(1, "'ghost'")],
    ),
    (
        "event with an upper-case project",
        "fees",
        "block_time,project,fee_type,recipient,amount_usd\n2024-03-13T10:00:00Z,SWP,transaction,protocol,1\n",
        "project",
        [(1, "'SWP'")],
    ),
    (
        "upper-case project id",
        "projects",
        "project,kinds,initial_circulating_supply,regular_pools\nswp,dex,,\nDemoSwap,dex,,\n",
        "project",
        [(2, "'DemoSwap'")],
    ),
    (
        "malformed dotted project id",
        "projects",
        "project,kinds,initial_circulating_supply,regular_pools\na..b,dex,,\n.a,dex,,\nb.,dex,,\nc d,dex,,\n",
        "project",
        [(1, "'a..b'"), (2, "'.a'"), (3, "'b.'"), (4, "'c d'")],
    ),
    (
        "duplicated project",
        "projects",
        "project,kinds,initial_circulating_supply,regular_pools\nswp,dex,,\nfarm,yield,,\nswp,dex,,\n",
        "project",
        [(1, "'swp'"), (3, "'swp'")],
    ),
    (
        "bad kinds",
        "projects",
        'project,kinds,initial_circulating_supply,regular_pools\na,dex,,\nb,"dex,bank",,\nc,,,\n'
        'd,"dex,,yield",,\ne,DEX,,\n',
        "kinds",
        [(2, "'dex,bank'"), (3, "(empty)"), (4, "'dex,,yield'"), (5, "'DEX'")],
    ),
    (
        "tokenomics project without initial supply",
        "projects",
        'project,kinds,initial_circulating_supply,regular_pools\ntok,tokenomics,100,\ngov,"dex,tokenomics",,\n',
        "initial_circulating_supply",
        [(2, "(empty)")],
    ),
    (
        "bad initial supply",
        "projects",
        "project,kinds,initial_circulating_supply,regular_pools\ntok,tokenomics,-1,\ngov,tokenomics,lots,\n"
        "x,tokenomics,inf,\n",
        "initial_circulating_supply",
        [(1, "'-1'"), (2, "'lots'"), (3, "'inf'")],
    ),
    (
        "regular_pools on a non-dex",
        "projects",
        "project,kinds,initial_circulating_supply,regular_pools\nswp,dex,,true\nfarm,yield,,true\n",
        "regular_pools",
        [(2, "'true'")],
    ),
    (
        "regular_pools not a boolean",
        "projects",
        "project,kinds,initial_circulating_supply,regular_pools\nswp,dex,,maybe\n",
        "regular_pools",
        [(1, "'maybe'")],
    ),
    (
        "negative token flow",
        "token_flows",
        "block_time,project,flow,amount\n2024-03-13T00:00:00Z,tok,mint,5\n2024-03-14T00:00:00Z,tok,burn,-5\n",
        "amount",
        [(2, "'-5'")],
    ),
    (
        "unknown token flow",
        "token_flows",
        "block_time,project,flow,amount\n2024-03-13T00:00:00Z,tok,airdrop,5\n",
        "flow",
        [(1, "'airdrop'")],
    ),
    (
        "non-finite fee amount",
        "fees",
        "block_time,project,fee_type,recipient,amount_usd\n2024-03-13T10:00:00Z,swp,transaction,protocol,inf\n"
        "2024-03-13T10:00:00Z,swp,transaction,protocol,1\n2024-03-13T10:00:00Z,swp,transaction,protocol,NaN\n"
        "2024-03-13T10:00:00Z,swp,transaction,protocol,-Infinity\n2024-03-13T10:00:00Z,swp,transaction,protocol,"
        "one\n",
        "amount_usd",
        [(1, "'inf'"), (3, "'NaN'"), (4, "'-Infinity'"), (5, "'one'")],
    ),
    (
        "bad fee type and recipient",
        "fees",
        "block_time,project,fee_type,recipient,amount_usd\n2024-03-13T10:00:00Z,swp,swap,protocol,1\n",
        "fee_type",
        [(1, "'swap'")],
    ),
    (
        "bad recipient",
        "fees",
        "block_time,project,fee_type,recipient,amount_usd\n2024-03-13T10:00:00Z,swp,staking,lps,1\n",
        "recipient",
        [(1, "'lps'")],
    ),
    (
        "non-finite chain reward",
        "chain_rewards",
        "block_time,project,account,reward_type,amount\n2024-03-13T00:00:00Z,sol,v1,rent,nan\n",
        "amount",
        [(1, "'nan'")],
    ),
    (
        "chain reward without account",
        "chain_rewards",
        "block_time,project,account,reward_type,amount\n2024-03-13T00:00:00Z,sol,,rent,1\n",
        "account",
        [(1, "(empty)")],
    ),
    (
        "unknown reward type",
        "chain_rewards",
        "block_time,project,account,reward_type,amount\n2024-03-13T00:00:00Z,sol,v1,tips,1\n",
        "reward_type",
        [(1, "'tips'")],
    ),
]


@pytest.mark.parametrize(
    ("table", "text", "column", "rows"), [case[1:] for case in BAD_VALUES], ids=[case[0] for case in BAD_VALUES]
)
def test_bad_values_name_file_column_and_rows(tmp_path, table, text, column, rows):
    message = load_error(make(tmp_path, **{table: text}))
    noun = "row breaks" if len(rows) == 1 else "rows break"
    expected = f"{table}.csv, column '{column}': {len(rows)} {noun} the rule; allowed: "
    assert message.startswith(expected), message
    assert shown_rows(message) == rows, message


def test_only_the_first_five_bad_rows_are_shown(tmp_path):
    lines = [f"2024-03-13T08:00:00Z,t{i},a,swp,{'nope' if i % 2 else 'swap'},\n" for i in range(1, 21)]
    message = load_error(make(tmp_path, transactions=TX_HEADER + "".join(lines)))
    assert message.startswith("transactions.csv, column 'action': 10 rows break the rule")
    assert "allowed: one of swap, lp_deposit," in message
    assert shown_rows(message) == [(1, "'nope'"), (3, "'nope'"), (5, "'nope'"), (7, "'nope'"), (9, "'nope'")]
    assert message.rstrip().endswith("... and 5 more")


def test_the_first_problem_found_stops_the_load(tmp_path):
    # Two broken tables: projects is checked first, so its problem is the one reported.
    message = load_error(
        make(
            tmp_path,
            projects=PROJECTS + "Bad,dex,,\n",
            transactions=TX_HEADER + "2024-03-13T08:00:00Z,t1,a,swp,bridge,\n",
        )
    )
    assert message.startswith("projects.csv, column 'project'")


def test_values_allowed_by_the_format_pass(tmp_path):
    projects = (
        "project,kinds,initial_circulating_supply,regular_pools\n"
        'tok,"tokenomics, yield",0,\nswp,dex,,TRUE\nswp.v2-x_y,"dex,lending",,false\n'
        "sol,chain,,\n"
    )
    loaded = store.load(
        make(
            tmp_path,
            projects=projects,
            transactions=TX_HEADER + "2024-03-13T08:00:00Z,t1,a,swp.v2-x_y,borrow,\n",
            fees="block_time,project,fee_type,recipient,amount_usd\n2024-03-13T10:00:00Z,tok,staking,protocol,-2.5e3\n",
        )
    )
    assert loaded.projects["tok"].kinds == frozenset({"tokenomics", "yield"})
    assert loaded.projects["tok"].initial_circulating_supply == 0
    assert loaded.projects["swp"].regular_pools is True
    assert loaded.projects["swp.v2-x_y"].kinds == frozenset({"dex", "lending"})
    assert loaded.con.execute("SELECT amount_usd FROM fees").fetchone() == (-2500.0,)


# -- nothing half loaded ---------------------------------------------------------------------------------


def test_failed_load_creates_no_view(tmp_path):
    # chain_rewards is the last table checked: every other table passed before it failed.
    folder = make(
        tmp_path, chain_rewards="block_time,project,account,reward_type,amount\n2024-03-13T00:00:00Z,sol,v1,tips,1\n"
    )
    con = store.connect()
    message = load_error(folder, con=con)
    assert message.startswith("chain_rewards.csv, column 'reward_type'")
    assert user_views(con) == []
    with pytest.raises(Exception, match="transactions"):
        con.execute("SELECT * FROM transactions")


def test_failed_reload_leaves_the_previous_data_untouched(tmp_path):
    con = store.connect()
    store.load(make(tmp_path / "good"), con=con)
    before = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone() for t in store.TABLES}
    bad = make(
        tmp_path / "bad",
        transactions=TX_HEADER + "2024-03-20T08:00:00Z,t9,z,swp,swap,\n" * 3,
        chain_rewards="block_time,project,account,reward_type,amount\n2024-03-13T00:00:00Z,sol,v1,rent,x\n",
    )
    load_error(bad, con=con)
    assert {t: con.execute(f"SELECT count(*) FROM {t}").fetchone() for t in store.TABLES} == before
    latest = con.execute("SELECT max(block_time) FROM transactions").fetchone()
    assert latest == (dt.datetime(2024, 3, 15, 8),)


# -- row numbers of large files --------------------------------------------------------------------------


def test_row_numbers_are_right_in_a_large_csv(tmp_path):
    n = 200_000
    bad = {123_457, 199_998}
    lines = [f"2024-03-13T08:00:00Z,t{i},s{i % 97},swp,{'bridge' if i in bad else 'swap'},\n" for i in range(1, n + 1)]
    folder = make(tmp_path, transactions=TX_HEADER + "".join(lines))
    message = load_error(folder, con=store.connect(threads=4))
    assert message.startswith("transactions.csv, column 'action': 2 rows break the rule")
    assert shown_rows(message) == [(123_457, "'bridge'"), (199_998, "'bridge'")]


def test_row_numbers_are_right_in_a_large_parquet(tmp_path):
    n = 200_000
    actions = np.full(n, "swap", dtype=object)
    actions[[123_456, 199_997]] = "bridge"
    folder = make(tmp_path, transactions=None)
    pq.write_table(
        pa.table(
            {
                "block_time": pa.array(np.full(n, np.datetime64("2024-03-13T08:00:00", "us"))),
                "tx_id": pa.array([f"t{i}" for i in range(n)]),
                "signer": pa.array(["s"] * n),
                "project": pa.array(["swp"] * n),
                "action": pa.array(actions.tolist()),
                "pool_type": pa.array([None] * n, pa.string()),
            }
        ),
        folder / "transactions.parquet",
        row_group_size=10_000,
    )
    message = load_error(folder, con=store.connect(threads=4))
    assert message.startswith("transactions.parquet, column 'action': 2 rows break the rule")
    assert shown_rows(message) == [(123_457, "'bridge'"), (199_998, "'bridge'")]


# -- timestamps --------------------------------------------------------------------------------------------


def _epoch_ns(text: str) -> int:
    return int(np.datetime64(text, "ns").astype("int64"))


def _parquet_transactions(folder: Path, block_time: pa.Array) -> None:
    n = len(block_time)
    pq.write_table(
        pa.table(
            {
                "block_time": block_time,
                "tx_id": [f"t{i}" for i in range(n)],
                "signer": ["a"] * n,
                "project": ["swp"] * n,
                "action": ["swap"] * n,
                "pool_type": pa.array([None] * n, pa.string()),
            }
        ),
        folder / "transactions.parquet",
    )


def _times(loaded) -> list[tuple[dt.date, dt.datetime]]:
    return loaded.con.execute("SELECT CAST(block_time AS DATE), block_time FROM transactions ORDER BY tx_id").fetchall()


UNIT_DIVISOR = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
# (unit, UTC instant written, the UTC day it belongs to, the microsecond timestamp it becomes)
INSTANTS = [
    ("s", "2024-03-15T23:59:59", dt.datetime(2024, 3, 15, 23, 59, 59)),
    ("s", "2024-03-16T00:00:00", dt.datetime(2024, 3, 16)),
    ("ms", "2024-03-15T23:59:59.999", dt.datetime(2024, 3, 15, 23, 59, 59, 999000)),
    ("us", "2024-03-15T23:59:59.999999", dt.datetime(2024, 3, 15, 23, 59, 59, 999999)),
    ("ns", "2024-03-15T23:59:59.999999999", dt.datetime(2024, 3, 15, 23, 59, 59, 999999)),
    ("ns", "2024-03-16T00:00:00.000000001", dt.datetime(2024, 3, 16)),
    ("ns", "1969-12-31T23:59:59.999999999", dt.datetime(1969, 12, 31, 23, 59, 59, 999999)),
    ("us", "1969-12-31T23:59:59.999999", dt.datetime(1969, 12, 31, 23, 59, 59, 999999)),
    ("ms", "1969-12-31T23:59:59.999", dt.datetime(1969, 12, 31, 23, 59, 59, 999000)),
    # 20:00 UTC is already the next day in Kolkata (+05:30): the UTC day counts.
    ("ms", "2024-03-15T20:00:00.000", dt.datetime(2024, 3, 15, 20)),
    # 02:00 UTC is still the previous day in New York: the UTC day counts.
    ("us", "2024-03-16T02:00:00.000000", dt.datetime(2024, 3, 16, 2)),
]


@pytest.mark.parametrize("tz", [None, "UTC", "Asia/Kolkata", "America/New_York"])
@pytest.mark.parametrize(("unit", "instant", "expected"), INSTANTS, ids=[f"{u}-{i}" for u, i, _ in INSTANTS])
def test_parquet_timestamp_lands_on_its_utc_day(tmp_path, tz, unit, instant, expected):
    folder = make(tmp_path, transactions=None, fees=None, token_flows=None, chain_rewards=None)
    value = _epoch_ns(instant) // UNIT_DIVISOR[unit]
    _parquet_transactions(folder, pa.array([value], pa.timestamp(unit, tz=tz)))
    loaded = store.load(folder)
    assert _times(loaded) == [(expected.date(), expected)]
    assert loaded.coverage == (expected.date(), expected.date())


def test_parquet_timestamps_ignore_the_machine_time_zone(tmp_path, monkeypatch):
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    try:
        folder = make(tmp_path, transactions=None, fees=None, token_flows=None, chain_rewards=None)
        micros = _epoch_ns("2024-03-15T20:00:00") // 1000
        _parquet_transactions(folder, pa.array([micros], pa.timestamp("us")))
        assert _times(store.load(folder)) == [(dt.date(2024, 3, 15), dt.datetime(2024, 3, 15, 20))]
    finally:
        monkeypatch.undo()
        time.tzset()


def test_parquet_string_timestamps_are_read_as_iso_text(tmp_path):
    folder = make(tmp_path, transactions=None, fees=None, token_flows=None, chain_rewards=None)
    _parquet_transactions(folder, pa.array(["2024-03-01T02:00:00+05:00", "2024-03-01 13:45:10"]))
    assert _times(store.load(folder)) == [
        (dt.date(2024, 2, 29), dt.datetime(2024, 2, 29, 21)),
        (dt.date(2024, 3, 1), dt.datetime(2024, 3, 1, 13, 45, 10)),
    ]


def test_parquet_bad_string_timestamp_is_reported(tmp_path):
    folder = make(tmp_path, transactions=None)
    _parquet_transactions(folder, pa.array(["2024-03-01T02:00:00Z", "not a time"]))
    message = load_error(folder)
    assert message.startswith("transactions.parquet, column 'block_time': 1 row breaks the rule")
    assert shown_rows(message) == [(2, "'not a time'")]


def test_csv_timestamps_with_offsets_convert_to_utc(tmp_path):
    text = TX_HEADER + "".join(
        f"{ts},t{i},a,swp,swap,\n"
        for i, ts in enumerate(
            [
                "2024-03-01T13:45:10Z",  # t0
                "2024-03-01 13:45:10",  # t1: no offset is UTC
                "2024-03-01T18:45:10+05:00",  # t2: the same instant
                "2024-03-01T02:00:00+05:00",  # t3: the previous UTC day
                "2024-03-01T22:00:00-05:00",  # t4: the next UTC day
                "2024-03-01T23:59:59.999999999Z",  # t5: truncated, never rounded into the next day
                "2024-03-01T05:30:00+05:30",  # t6: exactly UTC midnight
            ]
        )
    )
    loaded = store.load(make(tmp_path, transactions=text, fees=None, token_flows=None, chain_rewards=None))
    assert _times(loaded) == [
        (dt.date(2024, 3, 1), dt.datetime(2024, 3, 1, 13, 45, 10)),
        (dt.date(2024, 3, 1), dt.datetime(2024, 3, 1, 13, 45, 10)),
        (dt.date(2024, 3, 1), dt.datetime(2024, 3, 1, 13, 45, 10)),
        (dt.date(2024, 2, 29), dt.datetime(2024, 2, 29, 21)),
        (dt.date(2024, 3, 2), dt.datetime(2024, 3, 2, 3)),
        (dt.date(2024, 3, 1), dt.datetime(2024, 3, 1, 23, 59, 59, 999999)),
        (dt.date(2024, 3, 1), dt.datetime(2024, 3, 1)),
    ]
    assert loaded.coverage == (dt.date(2024, 2, 29), dt.date(2024, 3, 2))


# -- folders of parts --------------------------------------------------------------------------------------


def test_folder_of_parquet_parts(tmp_path):
    folder = make(tmp_path, transactions=None, fees=None, token_flows=None, chain_rewards=None)
    parts = folder / "transactions"
    parts.mkdir()
    written = [("2024-03-13T08:00:00", None), ("2024-03-20T23:59:59.999999999", "Asia/Kolkata")]
    for i, (day, tz) in enumerate(written):
        unit = "ns" if tz else "us"
        value = _epoch_ns(day) // UNIT_DIVISOR[unit]
        pq.write_table(
            pa.table(
                {
                    "block_time": pa.array([value], pa.timestamp(unit, tz=tz)),
                    "tx_id": [f"p{i}"],
                    "signer": ["a"],
                    "project": ["swp"],
                    "action": ["swap"],
                    "pool_type": pa.array([None], pa.string()),
                }
            ),
            parts / f"part-{i}.parquet",
        )
    loaded = store.load(folder)
    assert _times(loaded) == [
        (dt.date(2024, 3, 13), dt.datetime(2024, 3, 13, 8)),
        (dt.date(2024, 3, 20), dt.datetime(2024, 3, 20, 23, 59, 59, 999999)),
    ]
    assert loaded.coverage == (dt.date(2024, 3, 13), dt.date(2024, 3, 20))


def test_folder_of_csv_parts(tmp_path):
    folder = make(tmp_path, fees=None)
    (folder / "fees").mkdir()
    (folder / "fees" / "part-0.csv").write_text(FEES)
    (folder / "fees" / "part-1.csv").write_text(
        "recipient,amount_usd,project,fee_type,block_time\nprotocol,2,swp,transaction,2024-03-25T00:00:00Z\n"
    )
    loaded = store.load(folder)
    assert loaded.con.execute("SELECT count(*), sum(amount_usd) FROM fees").fetchone() == (3, 3.25)
    assert loaded.coverage == (dt.date(2024, 3, 13), dt.date(2024, 3, 25))


def test_error_in_a_part_names_the_folder_the_part_and_its_row(tmp_path):
    folder = make(tmp_path, transactions=None)
    parts = folder / "transactions"
    parts.mkdir()
    (parts / "part-0.csv").write_text(TRANSACTIONS)
    (parts / "part-1.csv").write_text(
        TX_HEADER + "2024-03-13T08:00:00Z,x1,a,swp,swap,\n2024-03-13T08:00:00Z,x2,a,swp,bridge,\n"
    )
    message = load_error(folder)
    assert message.startswith("transactions/ (2 csv files), column 'action': 1 row breaks the rule")
    assert "  part-1.csv row 2 (line 3): 'bridge'" in message


def test_error_in_a_parquet_part_names_the_part_and_its_row(tmp_path):
    folder = make(tmp_path, transactions=None)
    parts = folder / "transactions"
    parts.mkdir()
    for i, action in enumerate(["swap", "teleport"]):
        pq.write_table(
            pa.table(
                {
                    "block_time": pa.array([np.datetime64("2024-03-13T08:00:00", "us")] * 2),
                    "tx_id": [f"a{i}", f"b{i}"],
                    "signer": ["s", "s"],
                    "project": ["swp", "swp"],
                    "action": ["swap", action],
                    "pool_type": pa.array([None, None], pa.string()),
                }
            ),
            parts / f"part-{i}.parquet",
        )
    message = load_error(folder)
    assert message.startswith("transactions/ (2 parquet files), column 'action': 1 row breaks the rule")
    assert "  part-1.parquet row 2: 'teleport'" in message


# -- table folders read recursively (issue 27) ------------------------------------------------------------


def _tx_part(path: Path, rows: list[dict], **types: pa.DataType) -> None:
    """A Parquet part of transactions: ``rows`` of some of the columns, ``types`` for some of them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = {name: [row[name] for row in rows] for name in rows[0]}
    pq.write_table(
        pa.table({name: pa.array(values, types.get(name, pa.string())) for name, values in columns.items()}), path
    )


def _row(**changes) -> dict:
    row = {
        "block_time": dt.datetime(2024, 3, 13, 8, tzinfo=dt.UTC),
        "tx_id": "t1",
        "signer": "a",
        "project": "swp",
        "action": "swap",
        "pool_type": "regular",
    }
    return {k: v for k, v in {**row, **changes}.items() if v is not ...}


US = pa.timestamp("us", "UTC")


def test_parts_in_subfolders_are_read_at_any_depth(tmp_path):
    folder = make(tmp_path, transactions=None)
    parts = folder / "transactions"
    parts.mkdir()
    (parts / "part-0.csv").write_text(TX_HEADER + "2024-03-13T08:00:00Z,t1,a,swp,swap,regular\n")
    (parts / "day=2024-03-14").mkdir()
    (parts / "day=2024-03-14" / "part-1.csv").write_text(TX_HEADER + "2024-03-14T08:00:00Z,t2,b,swp,swap,regular\n")
    (parts / "2024" / "03" / "15").mkdir(parents=True)
    (parts / "2024" / "03" / "15" / "part-2.csv").write_text(TX_HEADER + "2024-03-15T08:00:00Z,t3,c,swp,swap,\n")
    loaded = store.load(folder)
    assert loaded.con.execute("SELECT list(tx_id ORDER BY tx_id) FROM transactions").fetchone()[0] == ["t1", "t2", "t3"]
    assert loaded.coverage == (dt.date(2024, 3, 13), dt.date(2024, 3, 15))
    # A Hive-style level that names no column of the table (day=) is a folder like any other.
    assert "day" not in loaded.con.execute("SELECT * FROM transactions").fetchdf().columns


def test_hive_style_levels_supply_the_columns_the_parts_lack(tmp_path):
    folder = make(tmp_path, transactions=None)
    parts = folder / "transactions"
    rows = [_row(project=..., pool_type=..., tx_id="t1"), _row(project=..., pool_type=..., tx_id="t2")]
    _tx_part(parts / "project=swp" / "pool_type=regular" / "part-0.parquet", rows, block_time=US)
    # Values as Spark writes them: escaped ('.' as %2E), and a missing value as Hive's default partition.
    _tx_part(parts / "project=swp%2Eclmm" / "pool_type=__HIVE_DEFAULT_PARTITION__" / "p.parquet", rows, block_time=US)
    _tx_part(parts / "part-9.parquet", [_row(tx_id="t9", pool_type="concentrated")], block_time=US)
    loaded = store.load(folder)
    got = loaded.con.execute("SELECT project, pool_type, tx_id FROM transactions ORDER BY ALL").fetchall()
    assert got == [
        ("swp", "concentrated", "t9"),
        ("swp", "regular", "t1"),
        ("swp", "regular", "t2"),
        ("swp.clmm", None, "t1"),
        ("swp.clmm", None, "t2"),
    ]


def test_a_column_both_in_a_part_and_in_its_folder_is_refused_naming_both(tmp_path):
    folder = make(tmp_path, transactions=None)
    _tx_part(folder / "transactions" / "pool_type=regular" / "part-0.parquet", [_row()], block_time=US)
    message = load_error(folder)
    assert message.startswith(
        "transactions/pool_type=regular/part-0.parquet, column 'pool_type': given both in the file and by its "
        "folder pool_type=regular; give it in one place"
    ), message


def test_a_folder_level_given_twice_is_refused(tmp_path):
    folder = make(tmp_path, transactions=None)
    rows = [_row(project=...)]
    _tx_part(folder / "transactions" / "project=swp" / "project=farm" / "part-0.parquet", rows, block_time=US)
    message = load_error(folder)
    assert message.startswith("transactions/project=swp/project=farm/part-0.parquet: the folder level 'project'")


def test_entries_spark_leaves_out_are_left_out(tmp_path):
    folder = make(tmp_path, transactions=None)
    parts = folder / "transactions"
    parts.mkdir()
    (parts / "part-0.csv").write_text(TRANSACTIONS)
    (parts / "_SUCCESS").write_text("")
    (parts / "_temporary" / "0").mkdir(parents=True)
    (parts / "_temporary" / "0" / "part-1.csv").write_text("half written")
    (parts / ".part-0.csv.crc").write_text("checksum")
    (parts / ".hidden").mkdir()
    (parts / ".hidden" / "part-2.csv").write_text("not ours")
    (parts / "part-3.csv._COPYING_").write_text("still copying")
    (folder / "_fees.csv").write_text("not a table")
    sources = store.find_sources(folder)
    assert [p.name for p in sources["transactions"].files] == ["part-0.csv"]
    assert store.load(folder).con.execute("SELECT count(*) FROM transactions").fetchone() == (3,)


def test_a_delta_table_is_refused_as_not_a_folder_of_parts(tmp_path):
    folder = make(tmp_path, transactions=None)
    parts = folder / "transactions"
    (parts / "_delta_log").mkdir(parents=True)
    (parts / "_delta_log" / "00000000000000000000.json").write_text("{}")
    (parts / "part-0.csv").write_text(TRANSACTIONS)
    message = load_error(folder)
    assert message.startswith("transactions/: a Delta table (it holds _delta_log/), not a folder of parts"), message
    (folder / "_delta_log").mkdir()
    assert load_error(folder).startswith(f"data folder {str(folder)!r}: a Delta table")


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_part_without_a_column_is_refused_naming_the_part(tmp_path, fmt):
    """A part without pool_type, beside parts with it: refused, not read as if every row's
    pool_type were empty (which took its regular-pool swaps out of every regular_pool_* count)."""
    folder = make(tmp_path, transactions=None)
    parts = folder / "transactions"
    parts.mkdir()
    if fmt == "csv":
        (parts / "part-0.csv").write_text(TRANSACTIONS)
        without = "block_time,tx_id,signer,project,action\n2024-03-13T09:00:00Z,t9,a,swp,swap\n"
        (parts / "part-1.csv").write_text(without)
    else:
        _tx_part(parts / "part-0.parquet", [_row()], block_time=US)
        _tx_part(parts / "part-1.parquet", [_row(pool_type=..., tx_id="t9")], block_time=US)
    message = load_error(folder)
    assert message.startswith(
        f"transactions/part-1.{fmt}: missing column 'pool_type'; the transactions table has columns "
        "block_time, tx_id, signer, project, action, pool_type (found: block_time, tx_id, signer, project, action)"
    ), message


def test_a_part_of_another_type_is_refused_naming_the_part(tmp_path):
    """An integer block_time in one part beside timestamps in another: DuckDB's reader would make
    the column a timestamp and fail on that file with a cast error; refused as a single file is."""
    folder = make(tmp_path, transactions=None)
    parts = folder / "transactions"
    _tx_part(parts / "part-0.parquet", [_row()], block_time=US)
    _tx_part(parts / "sub" / "part-1.parquet", [_row(block_time=1_710_316_800)], block_time=pa.int64())
    message = load_error(folder)
    assert message.startswith(
        "transactions/sub/part-1.parquet, column 'block_time': has type BIGINT; expected a timestamp"
    ), message


def test_parts_with_timestamps_of_different_units_zones_and_text_give_the_same_instants(tmp_path):
    folder = make(tmp_path, transactions=None)
    parts = folder / "transactions"
    instant = "2024-03-13T23:59:59.999999999"
    ns = _epoch_ns(instant)
    for i, (typ, value) in enumerate(
        [
            (pa.timestamp("ns", "UTC"), ns),  # what pandas writes
            (pa.timestamp("ns"), ns),
            (pa.timestamp("us"), ns // 1000),
            (pa.timestamp("ms", "Asia/Kolkata"), ns // 10**6),
            (pa.string(), "2024-03-14T05:29:59.999999+05:30"),
        ]
    ):
        _tx_part(parts / f"part-{i}.parquet", [_row(block_time=value, tx_id=f"t{i}")], block_time=typ)
    times = store.load(folder).con.execute("SELECT tx_id, block_time FROM transactions ORDER BY 1").fetchall()
    last = dt.datetime(2024, 3, 13, 23, 59, 59, 999999)
    assert times == [
        ("t0", last),
        ("t1", last),
        ("t2", last),
        ("t3", dt.datetime(2024, 3, 13, 23, 59, 59, 999000)),
        ("t4", last),
    ]


def test_a_0_byte_part_is_an_empty_part(tmp_path):
    """A 0-byte CSV part (an export job's empty output) and a header-only part hold no rows; so do
    a 0-byte Parquet part and a folder of nothing else, which is a table without events."""
    folder = make(tmp_path, transactions=None, fees=None)
    (folder / "transactions").mkdir()
    (folder / "transactions" / "part-0.csv").write_text(TRANSACTIONS)
    (folder / "transactions" / "part-1.csv").write_text("")
    (folder / "transactions" / "part-2.csv").write_text(TX_HEADER)
    (folder / "fees").mkdir()
    (folder / "fees" / "part-0.parquet").write_bytes(b"")
    loaded = store.load(folder)
    assert loaded.con.execute("SELECT count(*) FROM transactions").fetchone() == (3,)
    assert loaded.con.execute("SELECT count(*) FROM fees").fetchone() == (0,)
    # The empty parts are files of the data set all the same: adding one changes its fingerprint.
    before = loaded.fingerprint
    (folder / "transactions" / "part-3.csv").write_text("")
    assert store.load(folder).fingerprint != before


def test_a_table_given_as_one_0_byte_csv_file_is_refused(tmp_path):
    """A 0-byte fees.csv has no header row: its columns are missing (it is not a table without
    fees, as a 0-byte part of a table folder is an empty part), as a URL build on Spark says too."""
    folder = make(tmp_path, fees="")
    assert load_error(folder) == (
        "fees.csv: an empty file (0 bytes), without a header row: missing columns 'block_time', 'project', "
        "'fee_type', 'recipient', 'amount_usd'; the fees table has columns block_time, project, fee_type, "
        "recipient, amount_usd"
    )


def test_parts_named_in_any_case_and_parquet_parts_without_an_ending_are_read(tmp_path):
    """Hive and Impala write Parquet parts as 000000_0; other jobs part-1.PARQUET or .parq: every one
    is a part (by its ending in any case, else by its Parquet bytes), and the data version sees it."""
    folder = make(tmp_path, transactions=None)
    parts = folder / "transactions"
    names = ["000000_0", "part-1.PARQUET", "day=2024-03-14/part-2.parq", "part-3.Parquet"]
    for i, name in enumerate(names):
        _tx_part(parts / name, [_row(tx_id=f"t{i}")], block_time=US)
    sources = store.find_sources(folder)
    assert [sources["transactions"].part(p) for p in sources["transactions"].files] == sorted(names)
    loaded = store.load(folder)
    assert loaded.con.execute("SELECT count(*) FROM transactions").fetchone() == (4,)
    before = loaded.fingerprint
    _tx_part(parts / "000001_0", [_row(tx_id="t9")], block_time=US)
    assert store.load(folder).fingerprint != before


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("notes.txt", b"not a part"),
        ("part-0.csv.gz", b"\x1f\x8b compressed"),
        ("000000_0", TRANSACTIONS.encode()),  # text, not Parquet, without an ending
        ("000001_0", b""),  # 0 bytes without an ending: no format to be an empty part of
        ("part-0.json", b"{}"),
    ],
)
def test_a_file_of_a_table_folder_that_is_no_part_is_refused_naming_it(tmp_path, name, content):
    folder = make(tmp_path, transactions=None)
    (folder / "transactions" / "sub").mkdir(parents=True)
    (folder / "transactions" / "part-9.csv").write_text(TRANSACTIONS)
    (folder / "transactions" / "sub" / name).write_bytes(content)
    assert load_error(folder) == (
        f"transactions/sub/{name}: not a part of its table folder: a part's name ends in .parquet or .csv "
        "(in any case), or the file is Parquet whatever its name (as Hive and Impala write 000000_0); "
        "rename or move the file, or start its name with _ or . to have it skipped"
    )


def test_a_part_that_cannot_be_read_is_refused_naming_it_never_left_out(tmp_path):
    """A symbolic link to nothing among the parts, or as a table file: a data file that cannot be
    read, named, not a file error of the build's own writing."""
    folder = make(tmp_path, transactions=None)
    (folder / "transactions" / "day=2024-03-13").mkdir(parents=True)
    (folder / "transactions" / "part-0.csv").write_text(TRANSACTIONS)
    (folder / "transactions" / "day=2024-03-13" / "part-1.csv").symlink_to(tmp_path / "gone.csv")
    expected = ": a data file that cannot be read: No such file or directory"
    expected += " (a symbolic link to a file that does not exist)"
    assert load_error(folder) == "transactions/day=2024-03-13/part-1.csv" + expected
    (folder / "transactions" / "day=2024-03-13" / "part-1.csv").unlink()
    (folder / "fees.csv").unlink()
    (folder / "fees.csv").symlink_to(tmp_path / "gone.csv")
    assert load_error(folder) == "fees.csv" + expected


# -- the normalised layout (what Spark reads) -------------------------------------------------------------


def _open_layout(folder: Path):
    import ibis

    from metrics_kit.server.building.engines import DuckDB, open_layout

    return open_layout(DuckDB(ibis.duckdb.from_connection(store.connect())), str(folder))


def test_normalised_layout_has_microsecond_utc_times_and_the_same_tables(tmp_path):
    folder = make(tmp_path / "data", transactions=None)
    # Nanoseconds in a zone: the layout holds the UTC instant, truncated (not rounded into the next day).
    value = _epoch_ns("2024-03-15T23:59:59.999999999")
    _parquet_transactions(folder, pa.array([value], pa.timestamp("ns", tz="Asia/Kolkata")))
    loaded = store.load(folder)
    store.write_parquet(store.validate(folder), tmp_path / "layout")
    for table in store.TABLES:
        schema = pq.read_schema(tmp_path / "layout" / table / "part-0.parquet")
        assert schema.names == list(store.COLUMNS[table])
        if "block_time" in schema.names:
            assert schema.field("block_time").type == pa.timestamp("us", tz="UTC")
    times = pq.read_table(tmp_path / "layout" / "transactions").column("block_time").to_pylist()
    assert times == [dt.datetime(2024, 3, 15, 23, 59, 59, 999999, tzinfo=dt.UTC)]
    opened = _open_layout(tmp_path / "layout")
    assert (opened.projects, opened.coverage, opened.fingerprint) == (
        loaded.projects,
        loaded.coverage,
        loaded.fingerprint,
    )
    assert opened.location == str(tmp_path / "layout")


def test_absent_event_tables_are_written_as_empty_tables(tmp_path):
    folder = make(tmp_path / "data", transactions=None, fees=None, token_flows=None, chain_rewards=None)
    store.write_parquet(store.validate(folder), tmp_path / "layout")
    assert pq.read_table(tmp_path / "layout" / "fees").num_rows == 0
    assert _open_layout(tmp_path / "layout").coverage is None


def test_a_layout_carries_the_watermark_its_data_folder_declared(tmp_path):
    """build --stage writes the folder's watermark.json into the layout's marker; a build of the
    layout (on Spark, at its URL: here on DuckDB) records it as a build of the folder does."""
    from metrics_kit.server.building import build
    from metrics_kit.spec.catalogue import default_catalogue

    folder = make(tmp_path / "data")
    (folder / "watermark.json").write_text('{"watermark": "2024-03-14t12:00:00z"}')  # RFC 3339 allows t, z
    layout = tmp_path / "layout"
    catalogue = default_catalogue()
    from_folder = build.build_on_engine(folder, catalogue, stage=layout, log=lambda line: None)
    assert json.loads((layout / store.LAYOUT_FILE).read_text())["watermark"] == "2024-03-14T12:00:00.000000Z"
    opened = _open_layout(layout)
    assert opened.watermark == dt.datetime(2024, 3, 14, 12, tzinfo=dt.UTC)
    from_layout = build.build_in_full(opened, catalogue)
    assert from_layout.meta["watermark"] == from_folder.meta["watermark"] == "2024-03-14T12:00:00.000000Z"
    # A layout written without a declaration (or by an earlier version, without the field) declares none.
    store.write_parquet(store.validate(folder), tmp_path / "plain")
    assert _open_layout(tmp_path / "plain").watermark is None


def test_a_folder_without_the_marker_is_not_a_layout(tmp_path):
    folder = make(tmp_path / "data")
    with pytest.raises(DataFormatError, match="not a normalised layout"):
        _open_layout(folder)


def test_a_failed_validation_writes_nothing(tmp_path):
    folder = make(tmp_path / "data", transactions=TX_HEADER + "2024-03-13T08:00:00Z,t1,a,swp,bridge,\n")
    with pytest.raises(DataFormatError):
        store.write_parquet(store.validate(folder), tmp_path / "layout")
    assert not (tmp_path / "layout").exists()


# -- a CSV that breaks the format: the file, the line, the column ----------------------------------------

GOOD_ROWS = "".join(f"2024-03-13T08:00:00Z,g{i},a,swp,swap,\n" for i in range(30_000))  # past DuckDB's sample


def write_transactions(folder: Path, data: bytes | str) -> Path:
    make(folder, transactions=None)
    (folder / "transactions.csv").write_bytes(data if isinstance(data, bytes) else data.encode())
    return folder


@pytest.mark.parametrize("before", ["", GOOD_ROWS], ids=["near the top", "past the sniffed sample"])
def test_a_short_row_names_the_line_and_the_missing_columns(tmp_path, before):
    text = TX_HEADER + before + "2024-03-13T08:00:00Z,t1,a,swp,swap,\n2024-03-13T08:00:00Z,t2,a,swp\n"
    line = 2 + before.count("\n") + 1
    message = load_error(write_transactions(tmp_path, text))
    assert message == (
        f"transactions.csv, line {line}: the row has 4 values where the header has 6; it ends after column "
        "'project', so 'action', 'pool_type' are missing (a short or cut-off row)"
    )


def test_a_long_row_names_the_line(tmp_path):
    message = load_error(write_transactions(tmp_path, TX_HEADER + "2024-03-13T08:00:00Z,t1,a,swp,swap,,x\n"))
    assert message.startswith("transactions.csv, line 2: the row has 7 values where the header has 6")


@pytest.mark.parametrize("before", ["", GOOD_ROWS], ids=["near the top", "past the sniffed sample"])
def test_a_csv_that_is_not_utf8_names_the_line_column_and_bytes(tmp_path, before):
    # Past the sample, DuckDB used to load the Latin-1 byte as it was.
    data = (TX_HEADER + before + "2024-03-13T08:00:00Z,t1,Jos\xe9,swp,swap,\n").encode("latin-1")
    line = 2 + before.count("\n")
    message = load_error(write_transactions(tmp_path, data))
    assert message.startswith(
        f"transactions.csv, line {line}, column 'signer': byte 0xe9 (character 28 of the line) is not UTF-8; "
        "CSV files must be UTF-8"
    ), message


def test_a_quote_never_closed_is_an_error_not_part_of_a_value(tmp_path):
    # Sniffed, the stray quote was taken as text: tx_id '"t1' loaded.
    message = load_error(write_transactions(tmp_path, TX_HEADER + '2024-03-13T08:00:00Z,"t1,a,swp,swap,\n'))
    assert message.startswith("transactions.csv, line 2: unexpected end of data"), message


def test_a_part_of_a_folder_is_named_with_its_line(tmp_path):
    folder = make(tmp_path, transactions=None)
    (folder / "transactions").mkdir()
    (folder / "transactions" / "part-0.csv").write_text(TRANSACTIONS)
    (folder / "transactions" / "part-1.csv").write_text(TX_HEADER + "2024-03-13T08:00:00Z,x1\n")
    assert load_error(folder).startswith("transactions/part-1.csv, line 2: the row has 2 values")


def test_an_empty_required_value_names_the_row_its_line_and_the_column(tmp_path):
    # A quoted line break inside row 1: row 2 starts on line 4.
    text = TX_HEADER + '2024-03-13T08:00:00Z,"t\n1",a,swp,swap,\n2024-03-13T08:00:00Z,,a,swp,swap,\n'
    message = load_error(write_transactions(tmp_path, text))
    assert message == (
        "transactions.csv, column 'tx_id': 1 row breaks the rule; allowed: a non-empty transaction id\n"
        "  row 2 (line 4): (empty)"
    )


def test_a_null_in_parquet_is_shown_as_null(tmp_path):
    folder = make(tmp_path, transactions=None)
    _parquet_transactions(folder, pa.array([_epoch_ns("2024-03-13T08:00:00")] * 2, pa.timestamp("ns")))
    table = pq.read_table(folder / "transactions.parquet")
    table = table.set_column(1, "tx_id", pa.array(["t0", None], pa.string()))
    pq.write_table(table, folder / "transactions.parquet")
    assert load_error(folder).endswith("  row 2: (null)")


@pytest.mark.parametrize(
    ("data", "rows"),
    [
        (("\ufeff" + TRANSACTIONS).encode(), 3),
        (TRANSACTIONS.replace("\n", "\r\n").encode(), 3),
        (TX_HEADER.encode(), 0),
        ((TX_HEADER + '2024-03-13T08:00:00Z,"t,1","Jos\u00e9 ""J""",swp,swap,\n').encode(), 1),
    ],
    ids=["byte order mark", "CRLF", "header only", "quoted commas, quotes and UTF-8"],
)
def test_csv_the_format_allows_still_loads(tmp_path, data, rows):
    loaded = store.load(write_transactions(tmp_path, data))
    found = loaded.con.execute("SELECT tx_id, signer FROM transactions ORDER BY tx_id").fetchall()
    assert len(found) == rows
    if b"Jos" in data:
        assert found == [("t,1", 'Jos\u00e9 "J"')]


def test_validation_finds_the_utc_days_of_each_file(tmp_path):
    folder = make(tmp_path, transactions=None)
    (folder / "transactions").mkdir()
    (folder / "transactions" / "a.csv").write_text(
        TX_HEADER + "2024-03-13T08:00:00Z,t1,alice,swp,swap,regular\n2024-03-14T01:00:00+02:00,t2,bob,farm,stake,\n"
    )
    (folder / "transactions" / "b.csv").write_text(TX_HEADER + "2024-03-15T23:59:59.999999Z,t3,carol,farm,stake,\n")
    validated = store.validate(folder)
    days = validated.days["transactions"]
    # 01:00 at UTC+2 on the 14th is the 13th in UTC.
    assert days[folder / "transactions" / "a.csv"] == (dt.date(2024, 3, 13),)
    assert days[folder / "transactions" / "b.csv"] == (dt.date(2024, 3, 15),)
    assert validated.days["fees"] == {folder / "fees.csv": (dt.date(2024, 3, 13), dt.date(2024, 3, 14))}
    # The same scan counts the rows per UTC day and (project, action, pool_type), for the engine.
    counted = validated.rows_per_day["transactions"].sort_values(["day", "project", "action"])
    assert [
        (d.date(), p, a, n) for d, p, a, n in counted[["day", "project", "action", "n"]].itertuples(index=False)
    ] == [
        (dt.date(2024, 3, 13), "farm", "stake", 1),
        (dt.date(2024, 3, 13), "swp", "swap", 1),
        (dt.date(2024, 3, 15), "farm", "stake", 1),
    ]


def test_validating_only_some_files_reads_only_those(tmp_path):
    folder = make(tmp_path, transactions=None)
    (folder / "transactions").mkdir()
    (folder / "transactions" / "good.csv").write_text(TX_HEADER + "2024-03-13T08:00:00Z,t1,alice,swp,swap,regular\n")
    (folder / "transactions" / "bad.csv").write_text(TX_HEADER + "2024-03-13T08:00:00Z,t1,alice,swp,teleport,\n")
    checked = store.validate(folder, only={"transactions": (folder / "transactions" / "good.csv",)})
    assert list(checked.days["transactions"]) == [folder / "transactions" / "good.csv"]
    assert "transactions" not in checked.rows_per_day  # a few files' counts are not the table's
    with pytest.raises(DataFormatError, match="teleport"):
        store.validate(folder)


def test_a_window_holds_the_rows_of_its_days_only(tmp_path):
    folder = make(tmp_path)
    validated = store.validate(folder)
    sources = store.find_sources(folder)
    window = store.window(validated, sources, [(dt.date(2024, 3, 14), dt.date(2024, 3, 15))], validated.fingerprint)
    rows = validated.con.execute(f"SELECT tx_id FROM ({window.relations['transactions']}) ORDER BY 1").fetchall()
    assert rows == [("t2",), ("t3",)]
    empty = store.window(validated, sources, [], validated.fingerprint)
    assert validated.con.execute(f"SELECT count(*) FROM ({empty.relations['fees']})").fetchone() == (0,)


@pytest.mark.parametrize("statistics", [True, False])
@pytest.mark.parametrize(("column", "value", "shown"), [("tx_id", "", "''"), ("signer", None, "(null)")])
def test_parquet_statistics_never_hide_an_empty_id(tmp_path, statistics, column, value, shown):
    # Validation skips reading an id column only when the file's statistics show no null and no
    # empty string; a file with one (or without statistics) is read and the row is named.
    folder = make(tmp_path, transactions=None)
    rows = {
        "block_time": pa.array([dt.datetime(2024, 3, 13, 8, tzinfo=dt.UTC)] * 3, pa.timestamp("us", "UTC")),
        "tx_id": ["t1", "t2", "t3"],
        "signer": ["alice", "bob", "carol"],
        "project": ["swp"] * 3,
        "action": ["swap"] * 3,
        "pool_type": ["regular"] * 3,
    }
    rows[column] = [rows[column][0], value, rows[column][2]]
    pq.write_table(pa.table(rows), folder / "transactions.parquet", write_statistics=statistics, row_group_size=2)
    with pytest.raises(
        DataFormatError, match=rf"column '{column}': 1 row breaks the rule(.|\n)*row 2: {re.escape(shown)}"
    ):
        store.validate(folder)


def test_parquet_statistics_settle_clean_id_columns(tmp_path):
    folder = make(tmp_path, transactions=None)
    rows = {
        "block_time": pa.array([dt.datetime(2024, 3, 13, 8, tzinfo=dt.UTC)] * 2, pa.timestamp("us", "UTC")),
        "tx_id": ["t1", "t2"],
        "signer": ["alice", "bob"],
        "project": ["swp"] * 2,
        "action": ["swap"] * 2,
        "pool_type": ["regular", None],
    }
    pq.write_table(pa.table(rows), folder / "transactions.parquet")
    source = store.find_sources(folder)["transactions"]
    con = store.connect()
    assert store._settled(con, store._relation(con, source)) == {"tx_id", "signer", "project", "action"}
    assert store.load(folder).backend.table("transactions").count().execute() == 2


def test_one_file_without_statistics_is_read_even_beside_clean_ones(tmp_path):
    folder = make(tmp_path, transactions=None)
    (folder / "transactions").mkdir()

    def rows(tx_ids):
        return pa.table(
            {
                "block_time": pa.array([dt.datetime(2024, 3, 13, 8, tzinfo=dt.UTC)] * 2, pa.timestamp("us", "UTC")),
                "tx_id": tx_ids,
                "signer": ["alice", "bob"],
                "project": ["swp"] * 2,
                "action": ["swap"] * 2,
                "pool_type": ["regular"] * 2,
            }
        )

    pq.write_table(rows(["t1", "t2"]), folder / "transactions" / "a.parquet")
    pq.write_table(rows(["t3", ""]), folder / "transactions" / "b.parquet", write_statistics=False)
    with pytest.raises(DataFormatError, match=r"column 'tx_id': 1 row breaks the rule"):
        store.validate(folder)
