"""The transaction passes (metrics_kit/server/building/passes.py) against a plain count of distinct values.

Every transaction metric, for every day, ISO week and month, is compared with pandas' ``nunique``
over the same rows: distinct signers, distinct tx_ids, distinct tx_ids among the regular-pool rows.
The data sets are built to hit each special case of the passes: a tx_id repeated on several days
of one week and of one month, repeated with different pool types and across actions, weeks split
between two months with the same signers on both sides, and hash functions that collide.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import duckdb
import ibis
import numpy as np
import pandas as pd
import pytest

from metrics_kit.server.building import compute, engines, passes
from metrics_kit.spec.catalogue import default_catalogue

CATALOGUE_METRICS = [m for m in default_catalogue() if m.source == "transactions"]
_SWAP_USERS = next(m for m in CATALOGUE_METRICS if m.aggregation == "distinct_count" and "swap" in m.select["action"])


def _swap_users_in(name: str, pool_type: str):
    return dataclasses.replace(_SWAP_USERS, name=name, select={"action": ("swap",), "pool_type": (pool_type,)})


# The catalogue restricts no distinct count today; the passes support it (a mask of its own), and
# these metrics keep that path tested: regular-pool swap users, and users of a pool type no row has.
METRICS = [
    *CATALOGUE_METRICS,
    _swap_users_in("regular_pool_swap_users", "regular"),
    _swap_users_in("no_pool_swap_users", "none such"),
]
PROJECTS = {"swap": "demoswap", "lp_deposit": "demoswap", "stake": "demofarm", "borrow": "demolend"}


def _expected(rows: pd.DataFrame, granularity: str) -> pd.DataFrame:
    day = rows["block_time"].dt.normalize()
    if granularity == "1_week":
        day = day - pd.to_timedelta(day.dt.day_of_week, unit="D")
    elif granularity == "1_month":
        day = day.dt.to_period("M").dt.to_timestamp()
    rows = rows.assign(period_start=day)
    frames = []
    for metric in METRICS:
        chosen = rows[rows["action"] == metric.select["action"][0]]
        keys = ["project", "period_start"]
        periods = chosen[keys].drop_duplicates()
        if "pool_type" in metric.select:
            chosen = chosen[chosen["pool_type"].isin(metric.select["pool_type"])]
        column = "signer" if metric.aggregation == "distinct_count" else "tx_id"
        values = chosen.groupby(keys)[column].nunique()
        out = periods.merge(values.rename("value").reset_index(), on=keys, how="left").fillna({"value": 0})
        frames.append(out.assign(metric=metric.name))
    return _sorted(pd.concat(frames, ignore_index=True))


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.assign(period_start=pd.to_datetime(frame["period_start"]), value=frame["value"].astype("int64"))
    frame = frame[frame["value"] != 0]  # a zero and an absent period densify alike
    return frame.sort_values(["metric", "project", "period_start"])[["metric", "project", "period_start", "value"]]


def _computed(
    rows: pd.DataFrame, hash64, by_sorting: bool | None = None, rows_per_day: pd.DataFrame | None = None
) -> dict[str, pd.DataFrame]:
    backend = ibis.duckdb.connect()
    backend.raw_sql("SET TimeZone = 'UTC'")
    backend.create_table("transactions", rows)
    engine = engines.DuckDB(backend, hash64=hash64)
    if by_sorting is not None:
        engine.repeats_by_sorting = by_sorting
    return passes.transaction_metrics(engine, backend.table("transactions"), METRICS, rows_per_day)


def _per_day(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows per (day, project, action, pool_type), as validation counts them."""
    keyed = rows.assign(day=rows["block_time"].dt.normalize())
    return keyed.groupby(["day", "project", "action", "pool_type"], dropna=False).size().rename("n").reset_index()


def _assert_exact(rows: pd.DataFrame, hash64) -> None:
    # Both ways of finding repeated hashes: sorting (DuckDB's default) and grouping (the others').
    for by_sorting in (True, False):
        _assert_same(_computed(rows, hash64, by_sorting), rows)
    # The day counts handed over (by a full build's validation) instead of scanned; then a 64-bit
    # hash is narrowed to its upper 32 bits.
    for by_sorting in (True, False):
        _assert_same(_computed(rows, hash64, by_sorting, rows_per_day=_per_day(rows)), rows)


def _assert_same(computed: dict[str, pd.DataFrame], rows: pd.DataFrame) -> None:
    for granularity in ("1_day", "1_week", "1_month"):
        got = _sorted(computed[granularity]).reset_index(drop=True)
        want = _expected(rows, granularity).reset_index(drop=True)
        pd.testing.assert_frame_equal(got, want, check_dtype=False, obj=granularity)


def _rows(records) -> pd.DataFrame:
    frame = pd.DataFrame(records, columns=["block_time", "tx_id", "signer", "action", "pool_type"])
    frame["block_time"] = pd.to_datetime(frame["block_time"], format="ISO8601")
    frame["project"] = frame["action"].map(PROJECTS)
    frame["pool_type"] = frame["pool_type"].astype("string")
    return frame[["block_time", "tx_id", "signer", "project", "action", "pool_type"]]


def _random_rows(seed: int, n: int = 3000) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    start = np.datetime64("2024-01-20")  # crosses month ends inside ISO weeks (Jan/Feb, Feb/Mar, Mar/Apr)
    times = start + rng.integers(0, 80 * 86400, n).astype("timedelta64[s]")
    actions = rng.choice(list(PROJECTS), n)
    pools = np.where(np.isin(actions, ["swap", "lp_deposit"]), rng.choice(["regular", "concentrated"], n), None)
    return _rows(
        zip(
            times,
            [f"tx{i}" for i in rng.integers(0, n // 3, n)],  # few ids: repeats across days, actions and pools
            [f"signer{i}" for i in rng.integers(0, 40, n)],  # few signers: the same ones on both sides of a week
            actions,
            pools,
            strict=True,
        )
    )


def _duckdb_hash(value):
    return value.hash()


def _colliding(value):
    """A 'hash' that maps many distinct tx_ids to one value: every id of the same length collides."""
    return value.length()


def _identity(value):
    return value


HASHES = pytest.mark.parametrize("hash64", [_duckdb_hash, _colliding, _identity], ids=["hash", "colliding", "string"])


@HASHES
def test_repeated_transactions_across_days_weeks_months_and_pools(hash64):
    rows = _rows(
        [
            # One swap repeated on Monday and Sunday of one week (and month), and once more the next month.
            ("2024-01-08 10:00", "a", "s1", "swap", "regular"),
            ("2024-01-14 23:59", "a", "s1", "swap", "regular"),
            ("2024-02-05 00:00", "a", "s2", "swap", "concentrated"),
            # Repeated with different pool types on one day: one regular transaction, one transaction.
            ("2024-01-09 01:00", "b", "s1", "swap", "regular"),
            ("2024-01-09 02:00", "b", "s1", "swap", "concentrated"),
            ("2024-01-09 03:00", "b", "s3", "swap", "regular"),
            # Repeated in two weeks of one month.
            ("2024-01-15 12:00", "c", "s4", "lp_deposit", "concentrated"),
            ("2024-01-29 12:00", "c", "s4", "lp_deposit", "regular"),
            # The same id under two actions: one transaction of each.
            ("2024-01-15 12:00", "c", "s4", "swap", "regular"),
            # Distinct ids of equal length: the colliding hash puts them together, the counts must not.
            ("2024-01-10 05:00", "d", "s5", "swap", "regular"),
            ("2024-01-10 06:00", "e", "s5", "swap", "regular"),
            ("2024-01-10 07:00", "f", "s6", "stake", None),
        ]
    )
    _assert_exact(rows, hash64)


@HASHES
def test_weeks_split_between_months_count_each_signer_once(hash64):
    # The ISO week of Monday 2024-01-29 ends on Sunday 2024-02-04; the week of 2024-03-25 ends on 2024-03-31.
    rows = _rows(
        [
            ("2024-01-30", "t1", "both", "stake", None),
            ("2024-02-02", "t2", "both", "stake", None),
            ("2024-01-31", "t3", "january", "stake", None),
            ("2024-02-04 23:59:59", "t4", "february", "stake", None),
            ("2024-02-05", "t5", "both", "stake", None),  # the next week
            ("2024-03-31", "t6", "march", "borrow", None),  # a month ending on a Sunday
            ("2024-04-01", "t7", "march", "borrow", None),
            ("2024-02-29", "t8", "leap", "borrow", None),
            ("2024-03-01", "t9", "leap", "borrow", None),
        ]
    )
    _assert_exact(rows, hash64)


@HASHES
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_data_sets_match_distinct_counts(seed, hash64):
    _assert_exact(_random_rows(seed), hash64)


def _ids_sharing_the_upper_half_of_their_hash() -> tuple[str, str]:
    """Two distinct tx_ids whose DuckDB hashes differ but agree in their upper 32 bits (among
    400,000 ids about 19 such pairs are expected)."""
    sql = (
        "SELECT list(id ORDER BY id) FROM (SELECT 'tx' || range AS id FROM range(400000)) "
        "GROUP BY hash(id) >> 32 HAVING count(DISTINCT hash(id)) > 1 ORDER BY 1 LIMIT 1"
    )
    found = duckdb.connect().execute(sql).fetchone()
    assert found is not None
    return found[0][0], found[0][1]


def test_tx_ids_whose_narrowed_hashes_collide_count_apart():
    first, second = _ids_sharing_the_upper_half_of_their_hash()
    rows = _rows(
        [
            ("2024-01-10 05:00", first, "s1", "swap", "regular"),
            ("2024-01-10 06:00", second, "s2", "swap", "regular"),
            ("2024-01-11 06:00", second, "s2", "swap", "concentrated"),  # repeated: one transaction
            ("2024-01-11 07:00", first, "s3", "stake", None),
        ]
    )
    # The engine's own hash, narrowed since validation's day counts are handed over.
    computed = _computed(rows, engines.DuckDB(ibis.duckdb.connect()).hash64, rows_per_day=_per_day(rows))
    _assert_same(computed, rows)
    weeks = computed["1_week"].set_index("metric")["value"]
    assert weeks["swap_transaction_count"] == 2 and weeks["regular_pool_swap_transaction_count"] == 2


def test_only_periods_with_events_appear():
    rows = _rows([("2024-01-03", "a", "s", "swap", "concentrated"), ("2024-03-03", "b", "s", "swap", None)])
    computed = _computed(rows, _duckdb_hash)
    days = computed["1_day"]
    assert set(pd.to_datetime(days["period_start"]).dt.date) == {dt.date(2024, 1, 3), dt.date(2024, 3, 3)}
    regular = days[days["metric"] == "regular_pool_swap_transaction_count"]
    assert regular["value"].tolist() == [0, 0]  # a period with events, none of them in a regular pool


def test_compute_uses_the_passes_for_transactions_and_yields_every_granularity():
    rows = _random_rows(4, 500)
    backend = ibis.duckdb.connect()
    backend.raw_sql("SET TimeZone = 'UTC'")
    backend.create_table("transactions", rows)
    # compute only iterates the catalogue: the transaction metrics suffice
    out = dict(compute.compute(engines.DuckDB(backend), METRICS))
    assert list(out) == ["1_day", "1_week", "1_month"]
    for granularity, frame in out.items():
        pd.testing.assert_frame_equal(
            _sorted(frame).reset_index(drop=True),
            _expected(rows, granularity).reset_index(drop=True),
            check_dtype=False,
        )


def test_no_transactions_give_no_rows():
    # An empty table: a data set without transactions, or an incremental window holding none.
    computed = _computed(_random_rows(1, 10).iloc[:0], _duckdb_hash)
    assert all(frame.empty for frame in computed.values()) and list(computed) == ["1_day", "1_week", "1_month"]
