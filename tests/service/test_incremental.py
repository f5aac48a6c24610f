"""Incremental builds equal full builds, value for value.

Each hypothesis example is a random data set (every event table; repeated tx_ids within a day,
across days and across pool types; rent that nets per account; timestamps on the first and last
instants of days and in UTC offsets that move rows across days), over 17 days that cross a year, a
month and three ISO week boundaries. Every table is split at random into files of a table folder
(some of them in subfolders), and the files arrive in a random order, a few at a time; some steps
replace a file already there with other rows, or remove one. After every step the incremental
build (``build_folder``, which starts from the state the previous step saved) must equal a full
build of the folder as it is then (``build`` over ``store.load``, which knows nothing of earlier
steps): the same series, the same coverage, counts equal, amounts equal to 1e-9 (DuckDB adds
floats in a thread-dependent order).
"""

from __future__ import annotations

import csv
import datetime as dt
import math
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

from metrics_kit.server.building import build as aggregates
from metrics_kit.server.data import store
from metrics_kit.spec.catalogue import default_catalogue

START = dt.datetime(2024, 12, 24, tzinfo=dt.UTC)  # a Tuesday; 17 days reach 2025-01-09
NDAYS = 17
PROJECTS = [
    ["gov", "tokenomics", "1000", ""],
    ["swapx", "dex", "", "true"],
    ["farm", "yield", "", ""],
    ["solana", "chain", "", ""],
]
HEADERS = {
    "transactions": ["block_time", "tx_id", "signer", "project", "action", "pool_type"],
    "fees": ["block_time", "project", "fee_type", "recipient", "amount_usd"],
    "token_flows": ["block_time", "project", "flow", "amount"],
    "chain_rewards": ["block_time", "project", "account", "reward_type", "amount"],
}

stamps = st.builds(
    lambda day, seconds, hours: (START + dt.timedelta(days=day, seconds=seconds)).astimezone(
        dt.timezone(dt.timedelta(hours=hours))
    ),
    st.integers(0, NDAYS - 1),
    st.one_of(st.sampled_from([0, 86399]), st.integers(0, 86399)),
    st.sampled_from([0, 0, 0, 5, -7]),
)
rows = {
    # A small pool of tx ids and signers makes repeats within and across days and actions common.
    "transactions": st.tuples(
        stamps,
        st.sampled_from([f"tx{i}" for i in range(12)]),
        st.sampled_from(["ann", "bob", "cy", "dee"]),
        st.sampled_from([("swapx", "swap"), ("swapx", "lp_deposit"), ("farm", "stake"), ("farm", "unstake")]),
        st.sampled_from(["regular", "concentrated", ""]),
    ).map(lambda r: [r[0].isoformat(), r[1], r[2], r[3][0], r[3][1], r[4] if r[3][0] == "swapx" else ""]),
    "fees": st.tuples(
        stamps,
        st.sampled_from(["transaction", "staking"]),
        st.sampled_from(["protocol", "supply_side"]),
        st.integers(-8, 400),
    ).map(lambda r: [r[0].isoformat(), "farm", r[1], r[2], r[3] / 4]),
    "token_flows": st.tuples(stamps, st.sampled_from(["mint", "emission", "burn", "buyback"]), st.integers(0, 50)).map(
        lambda r: [r[0].isoformat(), "gov", r[1], r[2]]
    ),
    "chain_rewards": st.tuples(
        stamps, st.sampled_from(["v1", "v2", "v3"]), st.sampled_from(["staking", "rent", "rent"]), st.integers(-8, 8)
    ).map(lambda r: [r[0].isoformat(), "solana", r[1], r[2], r[3] / 4]),
}


@st.composite
def histories(draw):
    """Files (table, name, rows) and the steps that bring them:
    ("add", files), ("replace", file, rows), ("remove", file)."""
    files = []
    for table, strategy in rows.items():
        table_rows = draw(st.lists(strategy, min_size=1, max_size=25))
        parts = draw(st.integers(1, 4))
        split = [draw(st.integers(0, parts - 1)) for _ in table_rows]
        for part in range(parts):
            chosen = [row for row, p in zip(table_rows, split, strict=True) if p == part]
            if chosen:
                # Beside the others, or in a subfolder (a Hive-style level, or plain ones): all read.
                below = draw(st.sampled_from(["", "", "batch=1/", "2025/01/"]))
                ending = draw(st.sampled_from([".csv", ".csv", ".CSV"]))  # a part's ending, in any case
                files.append((table, f"{below}part-{part}{ending}", chosen))
    order = draw(st.permutations(files))
    cuts = sorted(draw(st.lists(st.integers(1, len(order)), max_size=3, unique=True)) + [len(order)])
    steps: list[tuple] = []
    begin = 0
    for cut in cuts:
        if cut > begin:
            steps.append(("add", order[begin:cut]))
            begin = cut
    arrived = [f for step in steps for f in step[1]]
    if draw(st.booleans()):
        table, name, _ = draw(st.sampled_from(arrived))
        steps.append(("replace", (table, name), draw(st.lists(rows[table], min_size=1, max_size=10))))
    if len(arrived) > 1 and draw(st.booleans()):
        table, name, _ = draw(st.sampled_from(arrived))
        steps.append(("remove", (table, name)))
    return steps


def _write(path: Path, table: str, body: list[list]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(HEADERS[table])
        writer.writerows(body)


def assert_same(incremental: aggregates.Aggregates, full: aggregates.Aggregates) -> None:
    assert incremental.meta["coverage"] == full.meta["coverage"]
    assert incremental.values.keys() == full.values.keys()
    counts = set(full.meta["count_metrics"])
    for key, expected in full.values.items():
        got = incremental.values[key]
        assert len(got) == len(expected), key
        if key[0] in counts:
            assert got == expected, key
        else:
            assert all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9) for a, b in zip(got, expected, strict=True)), (
                key,
                got,
                expected,
            )


@pytest.mark.slow
@settings(
    max_examples=8,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(histories())
def test_incremental_equals_full_after_every_step(steps):
    catalogue = default_catalogue()
    folder = Path(tempfile.mkdtemp(prefix="mk-incremental-"))
    try:
        with open(folder / "projects.csv", "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows([["project", "kinds", "initial_circulating_supply", "regular_pools"], *PROJECTS])
        modes = []
        for i, step in enumerate(steps):
            if step[0] == "add":
                for table, name, body in step[1]:
                    _write(folder / table / name, table, body)
            elif step[0] == "replace":
                (table, name), body = step[1], step[2]
                path = folder / table / name
                _write(path, table, body)
                # A replacement the same size within the clock's resolution must still look changed.
                os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000_000))
            else:
                table, name = step[1]
                (folder / table / name).unlink()
            note(f"step {i}: {step}")
            incremental = aggregates.build_folder(folder, catalogue, log=lambda m: None)
            modes.append(incremental.meta["build"])
            assert_same(incremental, aggregates.build_in_full(store.load(folder), catalogue))
        # Only the first build of the folder is full; every later step is incremental.
        assert modes == ["full"] + ["incremental"] * (len(steps) - 1)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


GOLDEN = Path(__file__).parents[1] / "golden" / "data"


def test_parquet_parts_without_an_ending_are_built_incrementally(tmp_path):
    """Hive's parts (000000_0, Parquet without an ending) arriving a day at a time: each new one is
    a file added to the folder, built incrementally, and the values are those of all the rows."""
    import duckdb

    catalogue = default_catalogue()
    folder = tmp_path / "data"
    shutil.copytree(GOLDEN, folder)
    (folder / "transactions.csv").unlink()
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    rows = f"read_csv('{GOLDEN / 'transactions.csv'}', all_varchar = true)"
    days = [day for (day,) in con.execute(f"SELECT DISTINCT block_time[:10] FROM {rows} ORDER BY 1").fetchall()]
    (folder / "transactions").mkdir()
    for i, day in enumerate(days):
        part = folder / "transactions" / f"{i:06d}_0"
        con.execute(
            f"COPY (SELECT * REPLACE (CAST(block_time AS TIMESTAMPTZ) AS block_time) FROM {rows} "
            f"WHERE block_time[:10] = '{day}') TO '{part}' (FORMAT parquet)"
        )
        built = aggregates.build_folder(folder, catalogue, log=lambda m: None)
        assert built.meta["build"] == ("full" if i == 0 else "incremental"), built.meta
        if i:
            assert built.meta["changes"].startswith("1 file added"), built.meta["changes"]
    assert_same(built, aggregates.build_in_full(store.load(GOLDEN), catalogue))
