"""`metrics-kit fetch` as a subprocess against the real reference service on the golden fixture.

Values are the hand-worked ones of ``tests/golden/EXPECTED.md``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from support import ServerProcess

GOLDEN = Path(__file__).parents[1] / "golden" / "data"
TS = pd.Timestamp
WEEKS = ["--start", "2024-12-28", "--end", "2025-01-12", "--granularity", "1_week"]
SWAPX = ["swap_active_users", "--project", "swapx", "--start", "2025-01-01", "--end", "2025-01-02"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with ServerProcess(GOLDEN, cache_dir=tmp_path_factory.mktemp("golden-server")) as proc:
        yield proc


@pytest.fixture
def env(server, tmp_path):
    """The child's environment: the service and its key, and a cache folder of this test's own."""
    child = {k: v for k, v in os.environ.items() if not k.startswith("METRICS_KIT_")}
    child.update(
        METRICS_KIT_BASE_URL=server.base_url,
        METRICS_KIT_API_KEY=server.key,
        METRICS_KIT_CACHE_DIR=str(tmp_path / "cache"),
    )
    return child


def fetch(env: dict, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "metrics_kit", "fetch", *args], env=env, capture_output=True, text=True, timeout=120
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def assert_no_key(server: ServerProcess, done: subprocess.CompletedProcess, *files: Path) -> None:
    assert server.key not in done.stdout and server.key not in done.stderr
    for path in files:
        assert server.key.encode() not in path.read_bytes()


def test_long_csv_holds_the_golden_values(server, env, tmp_path):
    out = tmp_path / "farm.csv"
    done = fetch(
        env,
        "staking_active_users",
        "farm_withdraw_transaction_count",
        "transaction_fee_revenue_in_usd",
        "--project",
        "farm",
        *WEEKS,
        "--out",
        str(out),
        "--no-progress",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    summary = done.stderr.strip().splitlines()
    assert len(summary) == 1
    assert "9 rows" in summary[0] and "3 periods" in summary[0]
    assert "0 points from the cache, 9 fetched" in summary[0]
    table = pd.read_csv(out, parse_dates=["period_start"])
    assert table.columns.tolist() == ["period_start", "project", "metric", "value", "unit", "complete"]
    got = {(r.metric, r.period_start): (r.value, r.unit, r.complete) for r in table.itertuples()}
    assert got == {
        ("staking_active_users", TS("2024-12-23")): (1, "count", False),
        ("staking_active_users", TS("2024-12-30")): (3, "count", True),
        ("staking_active_users", TS("2025-01-06")): (0, "count", True),
        # the alias is written under the canonical name
        ("farm_withdrawal_transaction_count", TS("2024-12-23")): (0, "count", False),
        ("farm_withdrawal_transaction_count", TS("2024-12-30")): (1, "count", True),
        ("farm_withdrawal_transaction_count", TS("2025-01-06")): (2, "count", True),
        ("transaction_fee_revenue_in_usd", TS("2024-12-23")): (1.5, "usd", False),
        ("transaction_fee_revenue_in_usd", TS("2024-12-30")): (9.25, "usd", True),
        ("transaction_fee_revenue_in_usd", TS("2025-01-06")): (0.0, "usd", True),
    }
    assert_no_key(server, done, out)


def test_wide_parquet_of_two_projects(server, env, tmp_path):
    out = tmp_path / "swaps.parquet"
    done = fetch(
        env,
        "swap_active_users",
        "swap_transaction_count",
        "--project",
        "swapx",
        "swapx.clmm",
        "--start",
        "2024-12-01",
        "--end",
        "2025-01-31",
        "--granularity",
        "month",
        "--wide",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    table = pd.read_parquet(out)
    assert table.columns.tolist() == [
        "period_start",
        "swapx/swap_active_users",
        "swapx/swap_transaction_count",
        "swapx.clmm/swap_active_users",
        "swapx.clmm/swap_transaction_count",
    ]
    assert table["period_start"].tolist() == [TS("2024-12-01"), TS("2025-01-01")]
    assert (table.drop(columns="period_start").dtypes == np.int64).all()
    assert table["swapx/swap_active_users"].tolist() == [2, 1]
    assert table["swapx/swap_transaction_count"].tolist() == [3, 1]
    assert table["swapx.clmm/swap_active_users"].tolist() == [1, 1]
    assert_no_key(server, done, out)


def test_long_parquet_types_and_one_project_wide_csv(server, env, tmp_path):
    out = tmp_path / "rent.parquet"
    done = fetch(
        env,
        "reward_positive_rent_in_sol",
        "reward_negative_rent_in_sol",
        "--project",
        "solana",
        *WEEKS,
        "--out",
        str(out),
        "--long",
    )
    assert done.returncode == 0, done.stderr
    table = pd.read_parquet(out)
    assert table["value"].dtype == np.float64 and table["complete"].dtype == bool
    assert pd.api.types.is_datetime64_dtype(table["period_start"])
    w01 = table[table["period_start"] == TS("2024-12-30")].set_index("metric")["value"]
    assert w01.to_dict() == {"reward_positive_rent_in_sol": 0.5, "reward_negative_rent_in_sol": -0.25}
    wide = tmp_path / "rent.csv"
    done = fetch(env, "reward_positive_rent_in_sol", "--project", "solana", *WEEKS, "--out", str(wide), "--wide")
    assert done.returncode == 0, done.stderr
    assert pd.read_csv(wide).columns.tolist() == ["period_start", "reward_positive_rent_in_sol"]
    assert "from the cache" in done.stderr


def test_cache_refresh_and_no_cache(server, env, tmp_path):
    args = [
        "lending_deposit_active_users",
        "--project",
        "lend",
        "--start",
        "2024-12-28",
        "--end",
        "2025-01-03",
        "--out",
        str(tmp_path / "lend.csv"),
    ]
    first, second, third = fetch(env, *args), fetch(env, *args), fetch(env, *args, "--refresh")
    assert "0 points from the cache, 7 fetched" in first.stderr
    assert "7 points from the cache, 0 fetched" in second.stderr
    assert "0 points from the cache, 7 fetched" in third.stderr
    cache = Path(env["METRICS_KIT_CACHE_DIR"])
    for path in cache.rglob("*"):
        if path.is_file():
            assert server.key.encode() not in path.read_bytes()
    elsewhere = {**env, "METRICS_KIT_CACHE_DIR": str(tmp_path / "unused")}
    for _ in range(2):
        assert "0 points from the cache, 7 fetched" in fetch(elsewhere, *args, "--no-cache").stderr
    assert not (tmp_path / "unused").exists() or not any((tmp_path / "unused").iterdir())


def test_coerce_writes_empty_values_and_warns_in_one_line(server, env, tmp_path):
    out = tmp_path / "late.csv"
    done = fetch(
        env,
        "loan_repayment_transaction_count",
        "--project",
        "lend",
        "--start",
        "2025-01-27",
        "--end",
        "2025-02-03",
        "--granularity",
        "1_week",
        "--errors",
        "coerce",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("metrics-kit: warning: 1 of 2 points failed")
    assert "1 failed" in lines[1]
    table = pd.read_csv(out)
    assert table["value"].tolist()[0] == 1 and np.isnan(table["value"].tolist()[1])
    assert_no_key(server, done, out)
    again = fetch(
        env,
        "loan_repayment_transaction_count",
        "--project",
        "lend",
        "--start",
        "2025-01-27",
        "--end",
        "2025-02-03",
        "--granularity",
        "1_week",
        "--out",
        str(tmp_path / "fails.csv"),
    )
    assert again.returncode == 2
    assert again.stderr.startswith("metrics-kit: error: 1 of 2 points failed")
    assert not (tmp_path / "fails.csv").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["swap_activ_users", "--project", "swapx", "--start", "2025-01-01", "--end", "2025-01-02"],
            "unknown metric 'swap_activ_users'; did you mean swap_active_users",
        ),
        ([*SWAPX, "--granularity", "hourly"], "--granularity must be one of"),
        (
            ["swap_active_users", "--project", "swapx", "--start", "2025-02-30", "--end", "2025-03-02"],
            "--start '2025-02-30' is not a date",
        ),
        (
            ["swap_active_users", "--project", "Swapx", "--start", "2025-01-01", "--end", "2025-01-02"],
            "project 'Swapx' is not a valid project id",
        ),
        (
            ["swap_active_users", "--project", "lend", "--start", "2025-01-01", "--end", "2025-01-02"],
            "swap_active_users does not apply to lend",
        ),
    ],
)
def test_bad_arguments_exit_2_with_one_line(server, env, tmp_path, args, message):
    out = tmp_path / "never.csv"
    done = fetch(env, *args, "--out", str(out))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith(f"metrics-kit: error: {message}")
    assert len(done.stderr.strip().splitlines()) == 1
    assert not out.exists()
    assert_no_key(server, done)


@pytest.mark.parametrize("name", ["out.json", "out", "out.xlsx"])
def test_an_unknown_output_format_is_refused_before_fetching(env, tmp_path, name):
    done = fetch(env, *SWAPX, "--out", str(tmp_path / name))
    assert done.returncode == 2
    assert done.stderr.strip() == f"metrics-kit: error: --out must end in .csv or .parquet, not {name!r}"
    assert list(tmp_path.iterdir()) == []


def test_an_output_folder_that_does_not_exist(env, tmp_path):
    done = fetch(env, *SWAPX, "--out", str(tmp_path / "missing" / "out.csv"))
    assert done.returncode == 2
    assert "does not exist" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_the_key_comes_from_the_environment_only(server, env, tmp_path):
    keyless = {k: v for k, v in env.items() if k != "METRICS_KIT_API_KEY"}
    done = fetch(keyless, *SWAPX, "--out", str(tmp_path / "out.csv"))
    assert done.returncode == 2
    assert "METRICS_KIT_API_KEY" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    flag = fetch(env, *SWAPX, "--out", str(tmp_path / "out.csv"), "--api-key", server.key)
    assert flag.returncode == 2 and "unrecognized arguments" in flag.stderr
    helped = fetch(env, "--help")
    assert helped.returncode == 0 and "--api-key" not in helped.stdout
    assert not (tmp_path / "out.csv").exists()


def test_base_url_flag_overrides_the_environment(server, env, tmp_path):
    elsewhere = {**env, "METRICS_KIT_BASE_URL": "http://127.0.0.1:9"}
    out = tmp_path / "out.csv"
    done = fetch(
        elsewhere,
        "swap_transaction_count",
        "--project",
        "swapx",
        "--start",
        "2025-01-02",
        "--end",
        "2025-01-02",
        "--base-url",
        server.base_url,
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    assert pd.read_csv(out)["value"].tolist() == [1]  # w4 is in the export twice: one transaction


def test_a_wrong_key_is_said_once_for_all_points(server, env, tmp_path):
    out = tmp_path / "never.csv"
    done = fetch({**env, "METRICS_KIT_API_KEY": "not-the-key-0123"}, *SWAPX, "--no-cache", "--out", str(out))
    assert done.returncode == 2 and not out.exists()
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("metrics-kit: error: 2 of 2 points failed, each with: "), done.stderr
    assert "401" in done.stderr and "not-the-key-0123" not in done.stderr


def test_a_count_a_long_parquet_column_cannot_hold_exactly_is_refused_and_wide_keeps_it(tmp_path):
    """Counts beside amounts in a long Parquet file are one double column, exact only up to 2**53:
    a larger count is refused with what to do, never written rounded; wide and CSV keep it exact."""
    from vendor import Vendor, value_of

    factor = 2**60  # every value above 2**53
    with Vendor(factor=factor) as vendor:
        child = {k: v for k, v in os.environ.items() if not k.startswith("METRICS_KIT_")}
        child.update(
            METRICS_KIT_BASE_URL=vendor.base_url,
            METRICS_KIT_API_KEY="vendor-key-0123456789",
            METRICS_KIT_CACHE_DIR=str(tmp_path / "cache"),
        )
        pair = ["swap_transaction_count", "transaction_fee_revenue_in_usd", "--project", "demoswap"]
        dates = ["--start", "2025-01-01", "--end", "2025-01-03"]
        out = tmp_path / "long.parquet"
        done = fetch(child, *pair, *dates, "--long", "--out", str(out))
        assert done.returncode == 2, done.stderr
        assert "cannot hold a count above 2**53 exactly" in done.stderr and "--wide" in done.stderr
        assert not out.exists()
        wide = tmp_path / "wide.parquet"
        done = fetch(child, *pair, *dates, "--wide", "--out", str(wide))
        assert done.returncode == 0, done.stderr
        counts = pd.read_parquet(wide)["swap_transaction_count"]
        assert counts.dtype == "int64"
        assert counts.tolist() == [value_of(d, factor) for d in ("2025-01-01", "2025-01-02", "2025-01-03")]


def test_deadline_bounds_the_whole_pull(env, tmp_path):
    """``--deadline`` is the library's ``deadline``: a service slower than it fails the pull, saying
    so in a line, and writes no file; a bad value is refused before anything is asked."""
    out = tmp_path / "slow.csv"
    with ServerProcess(GOLDEN, "--latency-ms", "3000", cache_dir=tmp_path / "slow-server") as slow:
        child = {**env, "METRICS_KIT_BASE_URL": slow.base_url, "METRICS_KIT_API_KEY": slow.key}
        done = fetch(child, *SWAPX, "--deadline", "1", "--no-cache", "--no-progress", "--out", str(out))
    assert done.returncode != 0 and "deadline" in done.stderr, done.stderr
    assert not out.exists()
    refused = fetch(env, *SWAPX, "--deadline", "0", "--out", str(out))
    assert refused.returncode == 2 and "--deadline" in refused.stderr, refused.stderr
