"""The SYNTHETIC demo data set (metrics_kit.server.data.demo): format, determinism, coverage and realism."""

from __future__ import annotations

import datetime as dt
import re

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from metrics_kit.server.data import demo
from metrics_kit.spec.catalogue import FLOW_SIGNS, KINDS, default_catalogue

SCALE = 0.2
TABLES = ("projects", "transactions", "fees", "token_flows", "chain_rewards")
TS = pa.timestamp("us", tz="UTC")
# The column types of docs/data-format.md, as written by the generator.
EXPECTED = {
    "projects": {
        "project": pa.string(),
        "kinds": pa.string(),
        "initial_circulating_supply": pa.float64(),
        "regular_pools": pa.bool_(),
    },
    "transactions": {
        "block_time": TS,
        "tx_id": pa.string(),
        "signer": pa.string(),
        "project": pa.string(),
        "action": pa.string(),
        "pool_type": pa.string(),
    },
    "fees": {
        "block_time": TS,
        "project": pa.string(),
        "fee_type": pa.string(),
        "recipient": pa.string(),
        "amount_usd": pa.float64(),
    },
    "token_flows": {"block_time": TS, "project": pa.string(), "flow": pa.string(), "amount": pa.float64()},
    "chain_rewards": {
        "block_time": TS,
        "project": pa.string(),
        "account": pa.string(),
        "reward_type": pa.string(),
        "amount": pa.float64(),
    },
}
ACTION_KIND = {
    "swap": "dex",
    "lp_deposit": "dex",
    "lp_withdraw": "dex",
    "double_dip_deposit": "dex",
    "stake": "yield",
    "unstake": "yield",
    "farm_deposit": "yield",
    "farm_withdraw": "yield",
    "lending_deposit": "lending",
    "lending_withdraw": "lending",
    "borrow": "lending",
    "repay": "lending",
}
B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
DAY_US = 86_400 * 1_000_000


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo-data")
    counts = demo.generate(folder, scale=SCALE)
    return folder, counts


@pytest.fixture(scope="module")
def tables(generated):
    folder, _ = generated
    return {name: pq.read_table(folder / f"{name}.parquet") for name in TABLES}


@pytest.fixture(scope="module")
def db(tables):
    """DuckDB over the tables, each event table with ``day`` (days since 1970-01-01 UTC), ``sec``
    (second of the UTC day) and ``week`` (ISO week ordinal, Monday to Sunday)."""
    con = duckdb.connect()
    for name, table in tables.items():
        if "block_time" in table.column_names:
            us = table["block_time"].cast(pa.int64()).to_numpy()
            day = us // DAY_US
            table = (
                table.append_column("day", pa.array(day))
                .append_column("sec", pa.array((us - day * DAY_US) // 1_000_000))
                .append_column("week", pa.array((day + 3) // 7))
            )  # 1970-01-01 is a Thursday
        con.register(name, table)
    yield con
    con.close()


def one(con, sql):
    return con.execute(sql).fetchone()


def epoch_day(day: dt.date) -> int:
    return (day - dt.date(1970, 1, 1)).days


def b58decode(text: str) -> bytes:
    value = 0
    for char in text:
        value = value * 58 + B58.index(char)
    zeros = len(text) - len(text.lstrip("1"))
    return b"\0" * zeros + value.to_bytes((value.bit_length() + 7) // 8, "big")


# --- (a) determinism ---------------------------------------------------------------------------


def test_same_seed_is_byte_identical_and_another_seed_differs(generated, tmp_path):
    folder, counts = generated
    again = tmp_path / "again"
    assert demo.generate(again, scale=SCALE) == counts
    for name in (*[f"{t}.parquet" for t in TABLES], "README.txt"):
        assert (again / name).read_bytes() == (folder / name).read_bytes(), name
    other = tmp_path / "other"
    demo.generate(other, scale=SCALE, seed=demo.DEMO_SEED + 1)
    for name in ("transactions", "fees", "token_flows", "chain_rewards"):
        assert (other / f"{name}.parquet").read_bytes() != (folder / f"{name}.parquet").read_bytes(), name
    # Only the generated files are written: no temporary file is left behind.
    assert sorted(p.name for p in again.iterdir()) == sorted([f"{t}.parquet" for t in TABLES] + ["README.txt"])


def test_chunked_generation_stays_sorted_and_valid(tmp_path, monkeypatch):
    # The bounded-memory path (many chunks, several row groups) at a small scale.
    monkeypatch.setattr(demo, "_CHUNK_ROWS", 1_000)
    monkeypatch.setattr(demo, "_MIN_BUFFERED_ROWS", 4_000)
    counts = demo.generate(tmp_path, scale=0.1)
    meta = pq.ParquetFile(tmp_path / "transactions.parquet").metadata
    assert meta.num_rows == counts["transactions"] and meta.num_row_groups > 1
    times = pq.read_table(tmp_path / "transactions.parquet")["block_time"].cast(pa.int64()).to_numpy()
    assert np.all(np.diff(times) >= 0)


def test_bad_arguments_and_clashing_tables_are_refused(tmp_path):
    with pytest.raises(ValueError):
        demo.generate(tmp_path, scale=0)
    with pytest.raises(ValueError):
        demo.generate(tmp_path, scale=float("nan"))
    (tmp_path / "fees.csv").write_text("block_time,project,fee_type,recipient,amount_usd\n")
    with pytest.raises(FileExistsError, match="fees.csv"):
        demo.generate(tmp_path, scale=0.05)
    assert not (tmp_path / "projects.parquet").exists()


# --- (b) the table format ----------------------------------------------------------------------


def test_every_table_and_column_has_the_format_type(generated, tables):
    folder, counts = generated
    for name in TABLES:
        schema = pq.read_schema(folder / f"{name}.parquet")
        assert {f.name: f.type for f in schema} == EXPECTED[name], name
        assert counts[name] == tables[name].num_rows > 0


def test_values_follow_the_format_rules(db, tables):
    projects = tables["projects"].to_pylist()
    ids = [p["project"] for p in projects]
    assert len(set(ids)) == len(ids)
    for p in projects:
        assert re.fullmatch(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*", p["project"])
        assert p["project"].startswith("demo"), "synthetic projects are labelled demo*"
        kinds = p["kinds"].split(",")
        assert kinds and set(kinds) <= set(KINDS)
        if "tokenomics" in kinds:
            assert p["initial_circulating_supply"] is not None and p["initial_circulating_supply"] >= 0
        assert p["regular_pools"] is not None
    quoted = ", ".join(f"'{i}'" for i in ids)
    for table in ("transactions", "fees", "token_flows", "chain_rewards"):
        assert one(db, f"SELECT count(*) FROM {table} WHERE project IS NULL OR project NOT IN ({quoted})")[0] == 0
        assert one(db, f"SELECT count(*) FROM {table} WHERE block_time IS NULL")[0] == 0
    assert (
        one(
            db,
            "SELECT count(*) FROM transactions WHERE tx_id IS NULL OR tx_id = '' "
            "OR signer IS NULL OR signer = '' OR action IS NULL",
        )[0]
        == 0
    )
    assert (
        one(
            db,
            "SELECT count(*) FROM transactions WHERE pool_type IS NOT NULL "
            "AND pool_type NOT IN ('regular', 'concentrated')",
        )[0]
        == 0
    )
    assert (
        one(
            db,
            "SELECT count(*) FROM fees WHERE NOT isfinite(amount_usd) OR amount_usd <= 0 "
            "OR abs(amount_usd * 100 - round(amount_usd * 100)) > 1e-6",
        )[0]
        == 0
    ), "whole cents"
    assert one(db, "SELECT count(*) FROM token_flows WHERE NOT isfinite(amount) OR amount < 0")[0] == 0
    assert (
        one(db, "SELECT count(*) FROM chain_rewards WHERE NOT isfinite(amount) OR account IS NULL OR account = ''")[0]
        == 0
    )


def test_addresses_and_tx_ids_look_like_solana(tables):
    tx = tables["transactions"]
    tx_len = pc.utf8_length(tx["tx_id"])
    signer_len = pc.utf8_length(tx["signer"])
    assert pc.min(tx_len).as_py() == 87 and pc.max(tx_len).as_py() == 88
    assert pc.min(signer_len).as_py() >= 43 and pc.max(signer_len).as_py() == 44
    alphabet = f"^[{B58}]+$"
    for column in (tx["tx_id"], tx["signer"], tables["chain_rewards"]["account"]):
        assert pc.all(pc.match_substring_regex(column, alphabet)).as_py()
    for text in tx["tx_id"].to_pylist()[:500]:
        assert len(b58decode(text)) == 64
    for text in tx["signer"].to_pylist()[:500] + tables["chain_rewards"]["account"].to_pylist()[:500]:
        assert len(b58decode(text)) == 32


# --- (c) coverage ------------------------------------------------------------------------------


def test_coverage_is_exactly_the_two_years(db):
    first, last = epoch_day(demo.DEMO_START), epoch_day(demo.DEMO_END)
    assert demo.DEMO_START == dt.date(2024, 1, 1) and demo.DEMO_END == dt.date(2025, 12, 31)
    days = " UNION ALL ".join(f"SELECT day FROM {t}" for t in ("transactions", "fees", "token_flows", "chain_rewards"))
    lo, hi = one(db, f"SELECT min(day), max(day) FROM ({days})")
    assert (lo, hi) == (first, last)
    # The very first and the very last second are both used.
    assert one(db, f"SELECT count(*) FROM transactions WHERE day = {first} AND sec = 0")[0] > 0
    assert one(db, f"SELECT count(*) FROM transactions WHERE day = {last} AND sec = 86399")[0] > 0
    # Every day, leap day included, has events in every event table.
    for table in ("transactions", "fees", "token_flows", "chain_rewards"):
        assert one(db, f"SELECT count(DISTINCT day) FROM {table}")[0] == last - first + 1, table
    assert one(db, f"SELECT count(*) FROM transactions WHERE day = {epoch_day(dt.date(2024, 2, 29))}")[0] > 0


def test_days_have_events_on_their_first_and_last_second(db):
    firsts = one(db, "SELECT count(DISTINCT day) FROM transactions WHERE sec = 0")[0]
    lasts = one(db, "SELECT count(DISTINCT day) FROM transactions WHERE sec = 86399")[0]
    assert firsts > 200 and lasts > 200
    # ... and in between, all hours of the day are used.
    assert one(db, "SELECT count(DISTINCT sec // 3600) FROM transactions")[0] == 24


# --- (d) every kind, action, fee, flow and reward --------------------------------------------


def test_projects_cover_every_kind_and_one_regular_pool_exchange(tables):
    projects = tables["projects"].to_pylist()
    kinds = {k for p in projects for k in p["kinds"].split(",")}
    assert kinds == set(KINDS)
    assert any("." in p["project"] for p in projects)
    regular = [p for p in projects if p["regular_pools"]]
    assert len(regular) == 1 and "dex" in regular[0]["kinds"].split(",")
    assert any(len(p["kinds"].split(",")) > 1 for p in projects)


def test_every_catalogue_metric_has_data_for_some_project(db, tables):
    projects = tables["projects"].to_pylist()
    for metric in default_catalogue("sol"):
        applicable = [
            p["project"] for p in projects if metric.applies_to(p["kinds"].split(","), bool(p["regular_pools"]))
        ]
        assert applicable, f"no demo project for {metric.name}"
        where = " AND ".join(
            [f"project IN ({', '.join(repr(p) for p in applicable)})"]
            + [f"{col} IN ({', '.join(repr(v) for v in values)})" for col, values in metric.select.items()]
        )
        assert one(db, f"SELECT count(*) FROM {metric.source} WHERE {where}")[0] > 0, metric.name


def test_actions_belong_to_projects_of_their_kind(db, tables):
    kinds = {p["project"]: set(p["kinds"].split(",")) for p in tables["projects"].to_pylist()}
    regular = {p["project"] for p in tables["projects"].to_pylist() if p["regular_pools"]}
    seen = db.execute("SELECT DISTINCT project, action, pool_type FROM transactions").fetchall()
    assert {a for _, a, _ in seen} == set(ACTION_KIND)
    for project, action, pool_type in seen:
        assert ACTION_KIND[action] in kinds[project], (project, action)
        if action == "double_dip_deposit" or pool_type == "regular":
            assert project in regular, (project, action, pool_type)
    (exchange,) = regular
    for action in ("swap", "lp_deposit", "lp_withdraw"):
        for pool_type in ("regular", "concentrated"):
            assert (exchange, action, pool_type) in seen
    assert (exchange, "double_dip_deposit", None) in seen


def test_fees_flows_and_rewards_are_all_present(db, tables):
    kinds = {p["project"]: set(p["kinds"].split(",")) for p in tables["projects"].to_pylist()}
    fee_pairs = set(db.execute("SELECT DISTINCT fee_type, recipient FROM fees").fetchall())
    assert fee_pairs == {(f, r) for f in ("transaction", "staking") for r in ("protocol", "supply_side")}
    for (project,) in db.execute("SELECT DISTINCT project FROM fees").fetchall():
        assert kinds[project] & {"yield", "dex", "lending"}, project
    for project in kinds:
        if kinds[project] & {"yield", "dex", "lending"}:
            assert one(db, f"SELECT count(*) FROM fees WHERE project = '{project}'")[0] > 0, project
        if "yield" in kinds[project]:
            assert one(db, f"SELECT count(*) FROM fees WHERE project = '{project}' AND fee_type = 'staking'")[0] > 0, (
                project
            )
    flows = db.execute("SELECT DISTINCT project, flow FROM token_flows").fetchall()
    assert {f for _, f in flows} == set(FLOW_SIGNS)
    assert all("tokenomics" in kinds[p] for p, _ in flows)
    assert {p for p, _ in flows} == {p for p, k in kinds.items() if "tokenomics" in k}
    rewards = db.execute("SELECT DISTINCT project, reward_type FROM chain_rewards").fetchall()
    assert {r for _, r in rewards} == {"staking", "fee", "voting", "rent"}
    assert all("chain" in kinds[p] for p, _ in rewards)


def test_rent_is_paid_and_received_and_some_accounts_do_both_in_a_week(db):
    assert one(db, "SELECT count(*) FROM chain_rewards WHERE reward_type = 'rent' AND amount < 0")[0] > 0
    assert one(db, "SELECT count(*) FROM chain_rewards WHERE reward_type = 'rent' AND amount > 0")[0] > 0
    both = db.execute("""
        SELECT account, week, sum(amount) AS net FROM chain_rewards WHERE reward_type = 'rent'
        GROUP BY account, week HAVING min(amount) < 0 AND max(amount) > 0""").fetchall()
    assert len(both) >= 10
    # The per-account net matters: such accounts end up on either side.
    assert any(net < 0 for *_, net in both) and any(net > 0 for *_, net in both)


# --- (e) supply --------------------------------------------------------------------------------


def test_circulating_supply_never_goes_negative(db, tables):
    initial = {
        p["project"]: p["initial_circulating_supply"]
        for p in tables["projects"].to_pylist()
        if "tokenomics" in p["kinds"].split(",")
    }
    signs = " ".join(f"WHEN '{flow}' THEN {sign}" for flow, sign in FLOW_SIGNS.items())
    rows = db.execute(f"""
        SELECT project, day, sum(sum(CASE flow {signs} END * amount))
               OVER (PARTITION BY project ORDER BY day) AS cumulative
        FROM token_flows GROUP BY project, day""").fetchall()
    lowest: dict[str, float] = {}
    for project, _, cumulative in rows:
        lowest[project] = min(lowest.get(project, float("inf")), initial[project] + cumulative)
    assert set(lowest) == set(initial)
    assert all(value >= 0 for value in lowest.values()), lowest
    # A project that starts at zero must mint on the very first second.
    for project, supply in initial.items():
        if supply == 0:
            assert (
                one(
                    db, f"SELECT min(day * 86400 + sec) FROM token_flows WHERE project = '{project}' AND flow = 'mint'"
                )[0]
                == epoch_day(demo.DEMO_START) * 86400
            )


# --- (f) realism -------------------------------------------------------------------------------


def test_weekends_are_quieter_than_weekdays(db):
    # (day + 3) % 7: Monday = 0 ... Sunday = 6
    weekday, weekend = one(
        db,
        """
        SELECT avg(n) FILTER (WHERE dow < 5), avg(n) FILTER (WHERE dow >= 5)
        FROM (SELECT day, (day + 3) % 7 AS dow, count(*) AS n FROM transactions GROUP BY day)""",
    )
    assert weekend < 0.9 * weekday


def test_activity_is_heavy_tailed(db):
    counts = np.array(
        sorted((n for (n,) in db.execute("SELECT count(*) FROM transactions GROUP BY signer").fetchall()), reverse=True)
    )
    top = max(1, len(counts) // 100)
    assert counts[:top].sum() / counts.sum() > 0.2  # the top 1% sign far more than 1%
    assert np.median(counts) <= 2  # most addresses sign a few
    assert counts[0] > 50 * np.median(counts)


def test_activity_grows_and_declines(db):
    monthly = [
        n for _, n in db.execute("SELECT day // 30, count(*) FROM transactions GROUP BY 1 ORDER BY 1").fetchall()
    ][:-1]
    peak = int(np.argmax(monthly))
    assert 0 < peak < len(monthly) - 1
    assert monthly[peak] > 1.3 * monthly[0] and monthly[peak] > 1.2 * monthly[-1]


def test_a_few_exact_duplicate_rows(db):
    total, distinct = one(db, "SELECT count(*), count(DISTINCT (tx_id, action)) FROM transactions")
    assert 0 < total - distinct < 0.005 * total
    # Duplicates are exact copies of the row.
    assert (
        one(
            db,
            "SELECT count(*) FROM (SELECT tx_id, action FROM transactions GROUP BY tx_id, action "
            "HAVING count(DISTINCT (block_time, signer, project, pool_type)) > 1)",
        )[0]
        == 0
    )


def test_readme_says_synthetic_with_seed_and_scale(generated):
    folder, counts = generated
    text = (folder / "README.txt").read_text(encoding="utf-8")
    assert "SYNTHETIC" in text and "metrics-kit" in text
    assert f"seed  = {demo.DEMO_SEED}" in text and f"scale = {SCALE!r}" in text
    assert f"{counts['transactions']:,}" in text


def test_default_folder_is_built_once_in_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path / "cache"))
    folder = demo.ensure_default()
    assert folder.parent == tmp_path / "cache" and (folder / "README.txt").is_file()
    stamp = (folder / "transactions.parquet").stat().st_mtime_ns
    assert demo.ensure_default() == folder
    assert (folder / "transactions.parquet").stat().st_mtime_ns == stamp
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [folder.name]  # no temp left over
