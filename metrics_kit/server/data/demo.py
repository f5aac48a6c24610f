"""The SYNTHETIC demo data set: two years of made-up events for six made-up projects.

Nothing here is real blockchain data. Every project id starts with ``demo``, every address and
transaction id is a random base58 string, and the folder gets a ``README.txt`` saying so. The data
exists so that every metric of the catalogue (``metrics_kit/catalogue.py``) has something
plausible to compute from, in exactly the table format of ``docs/data-format.md``.

What is modelled
----------------

* **Projects** (``DEMO_PROJECTS``): an exchange with regular *and* concentrated pools plus
  double-dip farms that is also a governance token (``demoswap``, the one ``regular_pools``
  exchange), its concentrated-liquidity sister product with a dotted id (``demoswap.clmm``), a
  yield farm with its own token (``demofarm``), a lending market (``demolend``), a governance token
  with no transactions of its own (``demogov``, initial circulating supply 0, genesis mint on the
  first second of the data) and a layer-1 chain (``demochain``, chain rewards only).
* **Activity over time**: each transacting project has its own two-year curve (a launch ramp, a
  market-wide bump around December 2024, a slow decline or steady growth, a two-week airdrop
  campaign on the farm), a weekly rhythm (weekends quieter, more so on the exchanges than on the
  lending market), a few holiday dips and autocorrelated day-to-day noise. Daily counts are
  Poisson draws around that curve, so the total is about ``TRANSACTIONS_PER_SCALE * scale``.
* **Users**: signers are drawn from a power law over a pool of addresses per project
  (P(rank r) ~ (r + 8)^-1.15), so a few bots and whales sign a large share of the transactions and
  most addresses sign once or twice. Liquidity / farm / borrow actions come from a narrower,
  more active part of the pool than swaps. Pools overlap across projects (one global address pool,
  a different ordering per project), as real users use several protocols.
* **Actions**: the action mix drifts over the two years (concentrated pools win share from regular
  pools, withdrawals grow as the farm declines). About 2% of ``demoswap`` LP deposits are "zaps"
  that carry a swap in the same transaction (same ``tx_id``, a second row with action ``swap``),
  and about 0.1% of rows are exact duplicates, as exports from indexers often have.
* **Timestamps**: whole seconds (as Solana block times), spread over the whole UTC day with a
  peak in the European/US afternoon; on the first and last day of every month, every Monday /
  Sunday and some random days there are transactions on the very first (00:00:00) and very last
  (23:59:59) second, so period boundaries get exercised.
* **Fees** (USD, cents): trading fees on both exchanges, staking fees on ``demoswap`` and
  ``demofarm``, transaction fees on the farm and interest on the lending market, each split into
  a protocol and a supply-side row. Their size follows the project's activity curve. Dollar
  amounts do not depend on ``scale`` (scale only changes how many rows there are).
* **Token flows** (native tokens, 6 decimals): exact emission schedules (``demoswap`` halves on
  2025-01-01, ``demofarm`` steps down 10% every quarter, ``demogov`` steps down 25% every half year),
  mints in a few big events (genesis, vesting cliffs, ecosystem funds), buybacks paid for from
  protocol fees at a simulated token price (weekly at Monday 00:00:00 for ``demoswap``, monthly
  for ``demofarm``), and occasional burns. The circulating supply never goes negative (checked).
* **Chain rewards** (``demochain``, 9 decimals like lamports): daily epoch staking rewards by stake
  (heavy-tailed stakes, slow disinflation, the odd delinquent validator), daily voting rewards,
  leader fee rewards, and rent: ordinary accounts pay rent (negative amounts), half of it is paid
  out to the leaders (positive amounts), and the biggest validators also pay rent on their own
  accounts now and then, so an account can pay and receive within one week and the per-account
  net (``reward_negative_rent`` / ``reward_positive_rent``) matters.

Determinism and size
--------------------

Everything comes from ``numpy.random.default_rng`` seeded by ``seed`` (one independent stream per
table and per chunk of transactions), with no wall clock, no dict or set ordering and fixed Parquet
writer options: the same ``seed`` and ``scale`` give byte-identical files (with the same numpy and
pyarrow versions).
Transactions are generated and written a month (or part of one, at most ~250k rows) at a time as
Parquet row groups, and the base58 strings are built from flat random digit buffers with numpy, so
``scale=100`` (about 10 million transactions) runs in bounded memory.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from metrics_kit.files import atomic_write, cache_dir
from metrics_kit.server.data.schema import ACTIONS, FEE_TYPES, FLOWS, POOL_TYPES, RECIPIENTS, REWARD_TYPES, TABLES

DEMO_SEED = 7
DEMO_START = dt.date(2024, 1, 1)
DEMO_END = dt.date(2025, 12, 31)
TRANSACTIONS_PER_SCALE = 100_000
# Bump whenever the generated data changes, so that cached default demo folders are rebuilt.
# 2: the default folder's files carry a fixed modification time (ensure_default).
DEMO_VERSION = 2


_TS = pa.timestamp("us", tz="UTC")
SCHEMAS: dict[str, pa.Schema] = {
    "projects": pa.schema(
        [
            ("project", pa.string()),
            ("kinds", pa.string()),
            ("initial_circulating_supply", pa.float64()),
            ("regular_pools", pa.bool_()),
        ]
    ),
    "transactions": pa.schema(
        [
            ("block_time", _TS),
            ("tx_id", pa.string()),
            ("signer", pa.string()),
            ("project", pa.string()),
            ("action", pa.string()),
            ("pool_type", pa.string()),
        ]
    ),
    "fees": pa.schema(
        [
            ("block_time", _TS),
            ("project", pa.string()),
            ("fee_type", pa.string()),
            ("recipient", pa.string()),
            ("amount_usd", pa.float64()),
        ]
    ),
    "token_flows": pa.schema(
        [("block_time", _TS), ("project", pa.string()), ("flow", pa.string()), ("amount", pa.float64())]
    ),
    "chain_rewards": pa.schema(
        [
            ("block_time", _TS),
            ("project", pa.string()),
            ("account", pa.string()),
            ("reward_type", pa.string()),
            ("amount", pa.float64()),
        ]
    ),
}

# Fixed writer options: together with the seeded generators they make the files byte-identical.
# zstd level 1: random tx ids barely compress, and higher levels write much slower for few bytes saved.
_PARQUET_OPTIONS = dict(
    compression="zstd",
    compression_level=1,
    version="2.6",
    data_page_version="1.0",
    write_statistics=True,
    store_schema=True,
)
# Random 88-char tx ids do not dictionary-encode; everything else does (or falls back by itself).
_TX_DICTIONARY_COLUMNS = ["signer", "project", "action", "pool_type"]
_ROW_GROUP_ROWS = 1 << 20
_MIN_BUFFERED_ROWS = 1 << 17  # small chunks (small scales) are gathered into bigger row groups
_CHUNK_ROWS = 250_000  # transactions generated at a time (bounds memory at any scale)


# --------------------------------------------------------------------------------------------
# Projects


@dataclass(frozen=True)
class DemoProject:
    project: str
    kinds: tuple[str, ...]
    initial_circulating_supply: float | None
    regular_pools: bool


DEMO_PROJECTS: tuple[DemoProject, ...] = (
    DemoProject("demoswap", ("dex", "tokenomics"), 250_000_000.0, True),
    DemoProject("demoswap.clmm", ("dex",), None, False),
    DemoProject("demofarm", ("yield", "tokenomics"), 40_000_000.0, False),
    DemoProject("demolend", ("lending",), None, False),
    DemoProject("demogov", ("tokenomics",), 0.0, False),
    DemoProject("demochain", ("chain",), None, False),
)
_PROJECT_IDS = tuple(p.project for p in DEMO_PROJECTS)
_PCODE = {name: i for i, name in enumerate(_PROJECT_IDS)}


@dataclass(frozen=True)
class _TxProject:
    """How one project transacts: its share of all transactions, user pool and action mix."""

    project: str
    share: float  # share of all transactions
    pool: int  # signer pool size at scale 1 (grows as scale ** 0.75)
    peak_hour: float  # UTC hour of the daily activity peak
    weekly: tuple[float, ...]  # Monday .. Sunday activity factors
    # (action, pool_type or None, weight on 2024-01-01, weight on 2025-12-31, narrow signer pool)
    mix: tuple[tuple[str, str | None, float, float, bool], ...]


_DEX_WEEK = (1.03, 1.06, 1.07, 1.05, 1.02, 0.80, 0.74)
_TX_PROJECTS: tuple[_TxProject, ...] = (
    _TxProject(
        "demoswap",
        0.45,
        16_000,
        15.0,
        _DEX_WEEK,
        (
            ("swap", "regular", 0.600, 0.420, False),
            ("swap", "concentrated", 0.200, 0.380, False),
            ("lp_deposit", "regular", 0.045, 0.030, True),
            ("lp_deposit", "concentrated", 0.025, 0.040, True),
            ("lp_withdraw", "regular", 0.035, 0.035, True),
            ("lp_withdraw", "concentrated", 0.015, 0.030, True),
            # Double-dip farms take LP tokens, not pool liquidity: no pool_type.
            ("double_dip_deposit", None, 0.030, 0.015, True),
        ),
    ),
    _TxProject(
        "demoswap.clmm",
        0.20,
        8_000,
        15.5,
        _DEX_WEEK,
        (
            ("swap", "concentrated", 0.86, 0.84, False),
            ("lp_deposit", "concentrated", 0.08, 0.08, True),
            ("lp_withdraw", "concentrated", 0.06, 0.08, True),
        ),
    ),
    _TxProject(
        "demofarm",
        0.15,
        6_000,
        14.0,
        (1.00, 1.02, 1.03, 1.02, 1.00, 0.88, 0.85),
        (
            ("stake", None, 0.30, 0.20, False),
            ("unstake", None, 0.12, 0.25, False),
            ("farm_deposit", None, 0.38, 0.25, True),
            ("farm_withdraw", None, 0.20, 0.30, True),
        ),
    ),
    _TxProject(
        "demolend",
        0.20,
        7_000,
        16.0,
        (1.02, 1.04, 1.05, 1.04, 1.00, 0.86, 0.82),
        (
            ("lending_deposit", None, 0.32, 0.28, False),
            ("lending_withdraw", None, 0.22, 0.27, False),
            ("borrow", None, 0.26, 0.24, True),
            ("repay", None, 0.20, 0.21, True),
        ),
    ),
)

# Power law of signer ranks, P(rank r) ~ (r + C)^-ALPHA: the top 1% of signers sign roughly
# 40-70% of the transactions (more at larger scales), the top address 2-3%, the median 1-2.
_ALPHA = 1.15
_RANK_OFFSET = 8.0
_NARROW_POOL = 0.15  # LP / farm / borrow actions come from the top 15% of a project's pool
_ZAP_RATE = 0.02  # share of demoswap LP deposits that also swap in the same transaction
_DUPLICATE_RATE = 0.001  # exact duplicate rows, as in real indexer exports
_EXTRA_BOUNDARY_DAYS = 0.15  # share of other days that also get 00:00:00 / 23:59:59 transactions

# Independent random streams (numpy SeedSequence([seed, stream, ...])).
_S_PLAN, _S_ADDRESSES, _S_TX, _S_FEES, _S_FLOWS, _S_CHAIN = range(6)


# --------------------------------------------------------------------------------------------
# Calendar

_DAY_DATES = np.arange(
    np.datetime64(DEMO_START.isoformat(), "D"), np.datetime64((DEMO_END + dt.timedelta(days=1)).isoformat(), "D")
)
DAYS = len(_DAY_DATES)  # 731 (2024 is a leap year)
_DAY_START_S = _DAY_DATES.astype("datetime64[s]").astype(np.int64)  # Unix seconds at 00:00:00 UTC
_WEEKDAY = (_DAY_DATES.astype(np.int64) + 3) % 7  # Monday = 0 (1970-01-01 was a Thursday)
_MONTHS = _DAY_DATES.astype("datetime64[M]")
_FIRST_OF_MONTH = _DAY_DATES == _MONTHS.astype("datetime64[D]")
_LAST_OF_MONTH = np.append(_FIRST_OF_MONTH[1:], True)
_MONTH_BOUNDS = np.append(np.flatnonzero(_FIRST_OF_MONTH), DAYS)  # day index where each month starts
_LAST_SECOND = 86_399


def _di(year: int, month: int, day: int) -> int:
    """Day index of a date."""
    return (dt.date(year, month, day) - DEMO_START).days


def _gauss(d: np.ndarray, center: float, width: float) -> np.ndarray:
    return np.exp(-0.5 * ((d - center) / width) ** 2)


def _logistic(d: np.ndarray, mid: float, width: float) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-(d - mid) / width))


# --------------------------------------------------------------------------------------------
# Random building blocks

_B58 = np.frombuffer(b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz", dtype=np.uint8)
# For a uniformly random N-byte value, base58 gives a long or a one-shorter string. The first-digit
# ranges keep every string decodable to exactly N bytes (no leading zero byte, no overflow):
#   32 bytes: 2**256 = 17.2 * 58**43 and 2**248 = 3.9 * 58**42 -> 44 chars (94%) or 43 chars
#   64 bytes: 2**512 = 5.1 * 58**87 and 2**504 = 1.2 * 58**86 -> 88 chars (80%) or 87 chars
_B58_SHAPES = {32: (44, 0.942, (1, 17), (4, 58)), 64: (88, 0.805, (1, 5), (2, 58))}


def _digits(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` uniform random base58 digits (uint8 in [0, 58)), ten from each uniform 64-bit draw."""
    words = rng.integers(0, 58**10, size=-(-n // 10), dtype=np.uint64)
    out = np.empty((len(words), 10), dtype=np.uint8)
    base = np.uint64(58)
    for k in range(10):
        out[:, k] = words % base
        words //= base
    return out.reshape(-1)[:n]


def _base58(rng: np.random.Generator, n: int, nbytes: int) -> pa.StringArray:
    """``n`` random base58 strings that look like (and decode as) ``nbytes``-byte values.

    Built as one flat uint8 buffer of digits and handed to Arrow as raw buffers: no Python object
    per row.
    """
    long_len, p_long, (lo_long, hi_long), (lo_short, hi_short) = _B58_SHAPES[nbytes]
    is_long = rng.random(n) < p_long
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.where(is_long, long_len, long_len - 1), out=offsets[1:])
    digits = _digits(rng, int(offsets[-1]))
    digits[offsets[:-1]] = np.where(is_long, rng.integers(lo_long, hi_long, n), rng.integers(lo_short, hi_short, n))
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(_B58[digits]))


def _ranks(rng: np.random.Generator, n: int, size: np.ndarray | int) -> np.ndarray:
    """Power-law ranks in [0, size): inverse CDF of the density (x + C)^-ALPHA on [0, size)."""
    e = 1.0 - _ALPHA
    lo = _RANK_OFFSET**e
    hi = (np.asarray(size, dtype=np.float64) + _RANK_OFFSET) ** e
    x = (lo + rng.random(n) * (hi - lo)) ** (1.0 / e) - _RANK_OFFSET
    return np.minimum(x.astype(np.int64), np.asarray(size, dtype=np.int64) - 1)


def _seconds_of_day(rng: np.random.Generator, n: int, peak_hour: float) -> np.ndarray:
    """Whole seconds of the UTC day: 40% flat (bots, other continents), 60% around ``peak_hour``."""
    flat = rng.integers(0, 86_400, n)
    peaked = np.floor(rng.normal(peak_hour * 3600.0, 4.5 * 3600.0, n)).astype(np.int64) % 86_400
    return np.where(rng.random(n) < 0.4, flat, peaked)


def _utc_us(day: np.ndarray, seconds: np.ndarray) -> np.ndarray:
    return (_DAY_START_S[day] + seconds) * 1_000_000


def _strings(values: tuple[str, ...], codes: np.ndarray) -> pa.Array:
    """Look ``codes`` up in ``values``; negative codes become null (an empty value)."""
    codes = np.asarray(codes)
    indices = pa.array(codes.astype(np.int32), mask=codes < 0)
    return pa.array(values, type=pa.string()).take(indices)


# --------------------------------------------------------------------------------------------
# The plan: daily activity per transacting project


@dataclass(frozen=True)
class _Plan:
    counts: np.ndarray  # (projects, DAYS) transactions per day before zaps and duplicates
    activity: np.ndarray  # (projects, DAYS) daily activity, mean 1 over the two years
    pools: np.ndarray  # signer pool size per project
    addresses: int  # size of the global address pool


def _plan(seed: int, scale: float) -> _Plan:
    rng = np.random.default_rng([seed, _S_PLAN])
    d = np.arange(DAYS, dtype=np.float64)
    # A market-wide season around December 2024 lifts everything, the exchanges the most.
    season = _gauss(d, _di(2024, 12, 5), 30)
    holiday = np.ones(DAYS)
    for year in (2024, 2025):
        for month, day in ((1, 1), (12, 24), (12, 25), (12, 26), (12, 31)):
            holiday[_di(year, month, day)] = 0.85
    airdrop = _logistic(d, _di(2025, 4, 1), 1.5) * (1 - _logistic(d, _di(2025, 4, 21), 1.5))
    shapes = {
        # Launch ramp in spring 2024, the bump, then a slow decline through 2025.
        "demoswap": (0.45 + 0.55 * _logistic(d, 120, 30))
        * (1 + 0.9 * season)
        * (1 - 0.35 * np.clip((d - 420) / 310, 0, 1)),
        # Concentrated liquidity catches on in the second half of 2024 and keeps growing.
        "demoswap.clmm": (0.15 + 1.05 * _logistic(d, 260, 55)) * (1 + 0.9 * season),
        # Farm hype right after launch, decaying, with a two-week airdrop campaign in April 2025.
        "demofarm": (0.35 + 1.4 * np.exp(-d / 160) * (1 - np.exp(-d / 15)) + 1.6 * airdrop) * (1 + 0.4 * season),
        # Lending grows steadily and cares less about the market mood.
        "demolend": (0.6 + 0.5 * d / (DAYS - 1)) * (1 + 0.3 * season),
    }
    total = TRANSACTIONS_PER_SCALE * scale
    counts, activity = [], []
    for spec in _TX_PROJECTS:
        noise = np.empty(DAYS)
        level = 0.0
        shocks = rng.normal(0.0, 0.09, DAYS)
        for i in range(DAYS):  # AR(1): busy days tend to follow busy days
            level = 0.6 * level + shocks[i]
            noise[i] = level
        shape = shapes[spec.project] * np.asarray(spec.weekly)[_WEEKDAY] * holiday * np.exp(noise)
        act = shape / shape.mean()
        activity.append(act)
        counts.append(rng.poisson(total * spec.share * act / DAYS))
    growth = scale**0.75
    pools = np.array([max(50, round(spec.pool * growth)) for spec in _TX_PROJECTS], dtype=np.int64)
    return _Plan(
        np.array(counts, dtype=np.int64), np.array(activity), pools, int(max(pools.max(), round(30_000 * growth)))
    )


# --------------------------------------------------------------------------------------------
# Transactions, a month (or part of a month) at a time


def _chunks(plan: _Plan) -> Iterator[tuple[int, int, int, int]]:
    """(month, part, first day, end day): each month, cut into runs of whole days of at most about
    ``_CHUNK_ROWS`` transactions, so memory stays bounded at any scale."""
    for month in range(len(_MONTH_BOUNDS) - 1):
        lo, hi = int(_MONTH_BOUNDS[month]), int(_MONTH_BOUNDS[month + 1])
        parts = max(1, min(hi - lo, -(-int(plan.counts[:, lo:hi].sum()) // _CHUNK_ROWS)))
        for part, days in enumerate(np.array_split(np.arange(lo, hi), parts)):
            yield month, part, int(days[0]), int(days[-1]) + 1


def _transactions_chunk(
    seed: int, month: int, part: int, lo: int, hi: int, plan: _Plan, perms: list[np.ndarray], addresses: pa.StringArray
) -> pa.Table | None:
    """The transactions of days ``lo`` .. ``hi - 1``, sorted by time."""
    rng = np.random.default_rng([seed, _S_TX, month, part])
    days, secs, pcodes, acodes, tcodes, signers = [], [], [], [], [], []
    for p, spec in enumerate(_TX_PROJECTS):
        counts = plan.counts[p, lo:hi]
        n = int(counts.sum())
        day = np.repeat(np.arange(lo, hi), counts)
        # Action mix drifts linearly from the first to the last day.
        w0 = np.array([m[2] for m in spec.mix])
        w1 = np.array([m[3] for m in spec.mix])
        weights = w0 + (w1 - w0) * (day / (DAYS - 1))[:, None]
        cdf = np.cumsum(weights, axis=1)
        cdf /= cdf[:, -1:]
        pick = (rng.random(n)[:, None] > cdf).sum(axis=1)
        narrow = np.array([m[4] for m in spec.mix])[pick]
        pool = plan.pools[p]
        size = np.where(narrow, max(20, int(pool * _NARROW_POOL)), pool)
        days.append(day)
        secs.append(_seconds_of_day(rng, n, spec.peak_hour))
        pcodes.append(np.full(n, _PCODE[spec.project], dtype=np.int8))
        acodes.append(np.array([ACTIONS.index(m[0]) for m in spec.mix], dtype=np.int8)[pick])
        tcodes.append(np.array([POOL_TYPES.index(m[1]) if m[1] else -1 for m in spec.mix], dtype=np.int8)[pick])
        signers.append(perms[p][_ranks(rng, n, size)])
    day, sec, pcode, acode, tcode, signer = (np.concatenate(x) for x in (days, secs, pcodes, acodes, tcodes, signers))
    n = len(day)
    if n == 0:
        return None

    # Events on the first and the last second of the day: always on month starts / ends, Mondays
    # and Sundays (period boundaries), and on some other days.
    present, first_row = np.unique(day, return_index=True)
    last_row = n - 1 - np.unique(day[::-1], return_index=True)[1]
    extra = rng.random((2, len(present))) < _EXTRA_BOUNDARY_DAYS
    at_first = _FIRST_OF_MONTH[present] | (_WEEKDAY[present] == 0) | extra[0]
    at_last = _LAST_OF_MONTH[present] | (_WEEKDAY[present] == 6) | extra[1]
    sec[first_row[at_first]] = 0
    sec[last_row[at_last]] = _LAST_SECOND

    # Zaps (an LP deposit with a swap in the same transaction) and exact duplicate rows.
    zap = np.flatnonzero(
        (pcode == _PCODE["demoswap"]) & (acode == ACTIONS.index("lp_deposit")) & (rng.random(n) < _ZAP_RATE)
    )
    dup = np.sort(rng.choice(n, size=rng.binomial(n, _DUPLICATE_RATE), replace=False))
    src = np.concatenate([np.arange(n), zap, dup])
    action = np.concatenate([acode, np.full(len(zap), ACTIONS.index("swap"), dtype=np.int8), acode[dup]])

    block_us = _utc_us(day, sec)[src]
    order = np.argsort(block_us, kind="stable")
    src = src[order]
    tx_ids = _base58(rng, n, 64)
    return pa.table(
        [
            pa.array(block_us[order], type=_TS),
            tx_ids.take(pa.array(src)),
            addresses.take(pa.array(signer[src])),
            _strings(_PROJECT_IDS, pcode[src]),
            _strings(ACTIONS, action[order]),
            _strings(POOL_TYPES, tcode[src]),
        ],
        schema=SCHEMAS["transactions"],
    )


def _write_transactions(path: Path, seed: int, plan: _Plan) -> int:
    rng = np.random.default_rng([seed, _S_ADDRESSES])
    addresses = _base58(rng, plan.addresses, 32)
    # One global address pool, ordered differently per project: users overlap across protocols.
    perms = [rng.permutation(plan.addresses) for _ in _TX_PROJECTS]
    rows = 0
    with atomic_write(path) as tmp:
        with pq.ParquetWriter(
            tmp, SCHEMAS["transactions"], use_dictionary=_TX_DICTIONARY_COLUMNS, **_PARQUET_OPTIONS
        ) as writer:
            buffered: list[pa.Table] = []
            chunks = list(_chunks(plan))
            for i, (month, part, lo, hi) in enumerate(chunks):
                table = _transactions_chunk(seed, month, part, lo, hi, plan, perms, addresses)
                if table is not None:
                    buffered.append(table)
                last = i == len(chunks) - 1
                if buffered and (sum(t.num_rows for t in buffered) >= _MIN_BUFFERED_ROWS or last):
                    chunk = pa.concat_tables(buffered)
                    writer.write_table(chunk, row_group_size=_ROW_GROUP_ROWS)
                    rows += chunk.num_rows
                    buffered = []
    return rows


# --------------------------------------------------------------------------------------------
# Fees

# (project, fee_type, USD per day at average activity, protocol share, events per day at scale 1,
#  second of the day of the first event of each day or None)
_FEES = (
    ("demoswap", "transaction", 42_000.0, 0.12, 4.0, None),
    ("demoswap", "staking", 2_500.0, 0.25, 1.0, None),
    ("demoswap.clmm", "transaction", 18_000.0, 0.16, 3.0, None),
    ("demofarm", "transaction", 6_500.0, 0.30, 2.0, None),
    ("demofarm", "staking", 4_200.0, 0.10, 1.0, 0),  # harvest at the epoch start
    ("demolend", "transaction", 23_000.0, 0.15, 2.0, _LAST_SECOND),  # daily interest accrual sweep
)
_TX_INDEX = {spec.project: i for i, spec in enumerate(_TX_PROJECTS)}


def _fees(seed: int, scale: float, plan: _Plan) -> tuple[pa.Table, dict[str, np.ndarray]]:
    """The fees table and, per project, the protocol's daily fee income (it funds buybacks)."""
    rng = np.random.default_rng([seed, _S_FEES])
    parts = []
    protocol_daily: dict[str, np.ndarray] = {}
    for project, fee_type, usd, share, per_day, sweep in _FEES:
        act = plan.activity[_TX_INDEX[project]]
        k = 1 + rng.poisson(per_day * math.sqrt(scale) * act)
        day = np.repeat(np.arange(DAYS), k)
        total = usd * act * rng.lognormal(0.0, 0.12, DAYS)
        weight = rng.gamma(2.0, size=len(day))
        amount = np.maximum(np.round(total[day] * weight / np.bincount(day, weight, DAYS)[day], 2), 0.01)
        protocol = np.round(amount * share, 2)
        supply = np.round(amount - protocol, 2)
        sec = _seconds_of_day(rng, len(day), 15.0)
        if sweep is not None:
            sec[np.cumsum(k) - k] = sweep
        us = _utc_us(day, sec)
        n = len(day)
        parts.append(
            (
                np.concatenate([us, us]),
                np.full(2 * n, _PCODE[project]),
                np.full(2 * n, FEE_TYPES.index(fee_type)),
                np.repeat([RECIPIENTS.index("protocol"), RECIPIENTS.index("supply_side")], n),
                np.concatenate([protocol, supply]),
            )
        )
        protocol_daily[project] = protocol_daily.get(project, 0) + np.bincount(day, protocol, DAYS)
    us, pcode, fcode, rcode, amount = (np.concatenate(x) for x in zip(*parts, strict=True))
    order = np.argsort(us, kind="stable")
    table = pa.table(
        [
            pa.array(us[order], type=_TS),
            _strings(_PROJECT_IDS, pcode[order]),
            _strings(FEE_TYPES, fcode[order]),
            _strings(RECIPIENTS, rcode[order]),
            pa.array(amount[order], type=pa.float64()),
        ],
        schema=SCHEMAS["fees"],
    )
    return table, protocol_daily


# --------------------------------------------------------------------------------------------
# Token flows


def _price(rng: np.random.Generator, start: float, activity: np.ndarray) -> np.ndarray:
    """A token price in USD: follows the (smoothed) activity, plus a random walk."""
    smooth = np.convolve(activity, np.ones(14) / 14, mode="same")
    return start * smooth**0.8 * np.exp(np.cumsum(rng.normal(0.0, 0.03, DAYS)))


def _token_flows(seed: int, plan: _Plan, protocol_daily: dict[str, np.ndarray]) -> pa.Table:
    rng = np.random.default_rng([seed, _S_FLOWS])
    rows: list[tuple[int, int, int, float]] = []  # (unix us, project code, flow code, amount)

    def add(project: str, flow: str, day: int, sec: int, amount: float) -> None:
        rows.append(
            (
                int(_utc_us(np.array([day]), np.array([sec]))[0]),
                _PCODE[project],
                FLOWS.index(flow),
                round(float(amount), 6),
            )
        )

    halving = _di(2025, 1, 1)
    # demoswap: emission every 4 hours, halving on 2025-01-01; mints for an ecosystem fund and a
    # liquidity programme; buyback every Monday 00:00:00 with 40% of last week's protocol trading
    # fees; a burn on the last second of every quarter.
    swap_fees = protocol_daily["demoswap"] + protocol_daily["demoswap.clmm"]
    swap_price = _price(rng, 1.10, plan.activity[_TX_INDEX["demoswap"]])
    for day in range(DAYS):
        rate = 300_000.0 if day < halving else 150_000.0
        for slot in range(6):
            add("demoswap", "emission", day, slot * 4 * 3600 + int(rng.integers(0, 20)), rate / 6)
        if _WEEKDAY[day] == 0 and day >= 7:
            add("demoswap", "buyback", day, 0, 0.4 * swap_fees[day - 7 : day].sum() / swap_price[day - 1])
        if _LAST_OF_MONTH[day] and str(_MONTHS[day])[5:7] in ("03", "06", "09", "12"):
            add("demoswap", "burn", day, _LAST_SECOND, rng.uniform(500_000, 1_500_000))
    add("demoswap", "mint", _di(2024, 6, 17), 14 * 3600 + 3 * 60 + 12, 25_000_000)
    add("demoswap", "mint", _di(2025, 3, 3), 9 * 3600 + 30 * 60, 10_000_000)

    # demofarm: emission at each daily epoch start (00:00:00), 10% less every quarter; one mint for
    # partner incentives; monthly buyback with half of last month's protocol fees.
    farm_price = _price(rng, 0.35, plan.activity[_TX_INDEX["demofarm"]])
    quarter = (_MONTHS.astype(np.int64) - _MONTHS[0].astype(np.int64)) // 3
    for day in range(DAYS):
        add("demofarm", "emission", day, 0, 90_000.0 * 0.9 ** int(quarter[day]))
        if _FIRST_OF_MONTH[day] and day > 0:
            prev = int(_MONTH_BOUNDS[np.searchsorted(_MONTH_BOUNDS, day) - 1])
            add(
                "demofarm",
                "buyback",
                day,
                int(rng.integers(9 * 3600, 18 * 3600)),
                0.5 * protocol_daily["demofarm"][prev:day].sum() / farm_price[day - 1],
            )
    add("demofarm", "mint", _di(2024, 9, 2), 16 * 3600, 5_000_000)

    # demogov: starts at 0 and mints its genesis supply on the very first second; vesting cliffs
    # every half year; staking emission paid at the last second of each day, 25% less every half
    # year; a buyback every other Wednesday and burns at random (about one a month).
    add("demogov", "mint", 0, 0, 100_000_000)
    for cliff in ((2024, 7, 1), (2025, 1, 1), (2025, 7, 1)):
        add("demogov", "mint", _di(*cliff), 12 * 3600, 20_000_000)
    half_year = (_MONTHS.astype(np.int64) - _MONTHS[0].astype(np.int64)) // 6
    burns = rng.random(DAYS) < 12 / 365
    for day in range(DAYS):
        add("demogov", "emission", day, _LAST_SECOND, 40_000.0 * 0.75 ** int(half_year[day]))
        if _WEEKDAY[day] == 2 and (day // 7) % 2 == 1:
            add("demogov", "buyback", day, int(rng.integers(0, 86_400)), rng.uniform(100_000, 400_000))
        if burns[day]:
            add("demogov", "burn", day, int(rng.integers(0, 86_400)), rng.uniform(50_000, 500_000))

    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    us, pcode, fcode, amount = (np.array(x) for x in zip(*rows, strict=True))
    _check_supply(pcode, fcode, us, amount)
    return pa.table(
        [
            pa.array(us, type=_TS),
            _strings(_PROJECT_IDS, pcode),
            _strings(FLOWS, fcode),
            pa.array(amount, type=pa.float64()),
        ],
        schema=SCHEMAS["token_flows"],
    )


def _check_supply(pcode: np.ndarray, fcode: np.ndarray, us: np.ndarray, amount: np.ndarray) -> None:
    """The circulating supply of every tokenomics project stays >= 0 at every event."""
    signs = np.array([1.0, 1.0, -1.0, -1.0])  # mint, emission, burn, buyback (catalogue.FLOW_SIGNS)
    for p in DEMO_PROJECTS:
        if p.initial_circulating_supply is None:
            continue
        mine = pcode == _PCODE[p.project]
        supply = p.initial_circulating_supply + np.cumsum(signs[fcode[mine]] * amount[mine])
        if len(supply) and supply.min() < 0:
            raise AssertionError(f"demo supply of {p.project} goes negative")


# --------------------------------------------------------------------------------------------
# Chain rewards


def _chain_rewards(seed: int, scale: float, plan: _Plan) -> pa.Table:
    rng = np.random.default_rng([seed, _S_CHAIN])
    root = math.sqrt(scale)
    n_val = max(12, round(25 * root))
    n_payers = max(60, round(400 * root))
    validators = _base58(rng, n_val, 32)
    payers = _base58(rng, n_payers, 32)
    # Account codes: validators first, then the rent payers.
    accounts = pa.concat_arrays([validators, payers])
    stake = np.sort(rng.pareto(1.2, n_val) + 1)[::-1]
    stake /= stake.sum()
    # Fees on the chain follow the overall on-chain activity, damped (there is much more on a
    # real chain than these four protocols).
    chain_act = 0.5 + 0.5 * plan.activity.mean(axis=0)
    rtype = {name: i for i, name in enumerate(REWARD_TYPES)}
    us_parts, acct_parts, type_parts, amount_parts = [], [], [], []

    def emit(day, sec, account, reward_type, amount):
        us_parts.append(_utc_us(np.asarray(day), np.asarray(sec)))
        acct_parts.append(np.asarray(account))
        type_parts.append(np.full(len(acct_parts[-1]), rtype[reward_type]))
        amount_parts.append(np.round(np.asarray(amount, dtype=np.float64), 9))

    d = np.arange(DAYS)
    # Staking: one epoch a day, rewards by stake paid out over a few minutes after the epoch
    # boundary (the first epoch starts on the first second); about 2% of validators are delinquent
    # on a given day and earn nothing. Inflation falls 15% a year.
    epoch = rng.integers(0, 86_400 - 600, DAYS)
    epoch[0] = 0
    inflation = 52_000.0 * 0.85 ** (d / 365.0) * rng.normal(1.0, 0.01, DAYS)
    vd, vv = np.divmod(np.arange(DAYS * n_val), n_val)
    live = rng.random(len(vd)) > 0.02
    vd, vv = vd[live], vv[live]
    spread = rng.integers(0, 300, len(vd))
    spread[np.searchsorted(vd, 0)] = 0
    emit(vd, epoch[vd] + spread, vv, "staking", inflation[vd] * stake[vv] * rng.normal(1.0, 0.03, len(vd)))
    # Voting: every live validator, once a day, at a random time.
    emit(vd, rng.integers(0, 86_400, len(vd)), vv, "voting", 0.5 * chain_act[vd] * rng.uniform(0.8, 1.1, len(vd)))
    # Leader fees: leaders are picked by stake, busier days pay more.
    k = rng.poisson(1.5 * n_val * chain_act)
    fd = np.repeat(d, k)
    emit(
        fd,
        rng.integers(0, 86_400, len(fd)),
        rng.choice(n_val, len(fd), p=stake),
        "fee",
        rng.lognormal(math.log(0.15), 0.8, len(fd)) * chain_act[fd],
    )
    # Rent: ordinary accounts pay (negative); half of it goes to 1-3 leaders that day (positive,
    # the other half is burnt); the five biggest validators also pay rent on their own accounts
    # now and then, so some accounts pay and receive in the same week.
    k = 1 + rng.poisson(14 * root * chain_act)
    rd = np.repeat(d, k)
    paid = -rng.lognormal(math.log(0.0021), 0.5, len(rd))
    emit(rd, rng.integers(0, 86_400, len(rd)), n_val + _ranks(rng, len(rd), n_payers), "rent", paid)
    collected = -np.bincount(rd, paid, DAYS)
    for day in range(DAYS):
        leaders = rng.choice(n_val, size=min(n_val, 1 + int(rng.integers(0, 3))), replace=False, p=stake)
        shares = rng.dirichlet(np.ones(len(leaders)))
        emit(
            np.full(len(leaders), day),
            rng.integers(0, 86_400, len(leaders)),
            leaders,
            "rent",
            0.5 * collected[day] * shares,
        )
        if rng.random() < 0.35:
            emit(
                [day],
                [int(rng.integers(0, 86_400))],
                [int(rng.integers(0, 5))],
                "rent",
                [-0.5 * collected[day] * rng.uniform(0.2, 1.2)],
            )

    us, acct, rcode, amount = (np.concatenate(x) for x in (us_parts, acct_parts, type_parts, amount_parts))
    order = np.argsort(us, kind="stable")
    return pa.table(
        [
            pa.array(us[order], type=_TS),
            _strings(_PROJECT_IDS, np.full(len(us), _PCODE["demochain"])),
            accounts.take(pa.array(acct[order])),
            _strings(REWARD_TYPES, rcode[order]),
            pa.array(amount[order], type=pa.float64()),
        ],
        schema=SCHEMAS["chain_rewards"],
    )


# --------------------------------------------------------------------------------------------
# Writing


def _write(path: Path, table: pa.Table) -> int:
    with atomic_write(path) as tmp:
        pq.write_table(table, tmp, row_group_size=_ROW_GROUP_ROWS, use_dictionary=True, **_PARQUET_OPTIONS)
    return table.num_rows


def _projects_table() -> pa.Table:
    return pa.table(
        [
            pa.array([p.project for p in DEMO_PROJECTS], type=pa.string()),
            pa.array([",".join(p.kinds) for p in DEMO_PROJECTS], type=pa.string()),
            pa.array([p.initial_circulating_supply for p in DEMO_PROJECTS], type=pa.float64()),
            pa.array([p.regular_pools for p in DEMO_PROJECTS], type=pa.bool_()),
        ],
        schema=SCHEMAS["projects"],
    )


def _readme(seed: int, scale: float, counts: dict[str, int]) -> str:
    lines = [
        "SYNTHETIC DEMO DATA - NOT REAL BLOCKCHAIN DATA",
        "",
        "Generated by metrics-kit (metrics_kit.server.data.demo) with",
        f"  seed  = {seed}",
        f"  scale = {scale!r} (about {TRANSACTIONS_PER_SCALE:,} transactions per unit of scale)",
        f"  days  = {DEMO_START.isoformat()} .. {DEMO_END.isoformat()} (UTC)",
        "",
        "Every project id starts with 'demo'; addresses and transaction ids are random base58",
        "strings. The same seed and scale always give the same files. The table format is",
        "described in docs/data-format.md, the data set in docs/demo-data.md.",
        "",
        "Projects:",
    ]
    for p in DEMO_PROJECTS:
        supply = (
            ""
            if p.initial_circulating_supply is None
            else f", initial circulating supply {p.initial_circulating_supply:,.0f}"
        )
        pools = ", regular pools" if p.regular_pools else ""
        lines.append(f"  {p.project:<14} {','.join(p.kinds)}{supply}{pools}")
    lines += ["", "Rows:"] + [f"  {name + '.parquet':<22} {counts[name]:>12,}" for name in TABLES]
    return "\n".join(lines) + "\n"


def generate(out_dir: str | os.PathLike, scale: float = 1.0, seed: int = DEMO_SEED) -> dict[str, int]:
    """Write projects/transactions/fees/token_flows/chain_rewards .parquet into out_dir; return row counts per table.

    Also writes ``README.txt``. ``scale`` 1 is about 100,000 transactions, ``scale`` 100 about
    10 million (written in chunks of at most ~250k rows, in bounded memory). Existing demo files are replaced
    atomically; a ``NAME.csv`` or ``NAME/`` of one of the tables in ``out_dir`` is refused, since
    the folder would then hold that table twice.
    """
    scale = float(scale)
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale must be a positive number, not {scale!r}")
    seed = int(seed)
    if seed < 0:
        raise ValueError(f"seed must be a non-negative integer, not {seed!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    clashes = [str(out / c) for name in TABLES for c in (f"{name}.csv", name) if (out / c).exists()]
    if clashes:
        raise FileExistsError("the demo data would give these tables twice; remove them first: " + ", ".join(clashes))
    plan = _plan(seed, scale)
    counts: dict[str, int] = {}
    counts["projects"] = _write(out / "projects.parquet", _projects_table())
    counts["transactions"] = _write_transactions(out / "transactions.parquet", seed, plan)
    fees, protocol_daily = _fees(seed, scale, plan)
    counts["fees"] = _write(out / "fees.parquet", fees)
    counts["token_flows"] = _write(out / "token_flows.parquet", _token_flows(seed, plan, protocol_daily))
    counts["chain_rewards"] = _write(out / "chain_rewards.parquet", _chain_rewards(seed, scale, plan))
    readme = out / "README.txt"
    with atomic_write(readme) as tmp:
        tmp.write_text(_readme(seed, scale, counts), encoding="utf-8")
    return counts


_FIXED_MTIME_NS = int(dt.datetime.combine(DEMO_END, dt.time(), dt.UTC).timestamp()) * 10**9


def ensure_default() -> Path:
    """The default demo data folder (``DEMO_SEED``, scale 1) in the metrics-kit cache folder.

    Built on first use into a hidden sibling folder and renamed into place, so a half-written folder
    is never seen and two processes racing to build it both end up with one complete copy.
    """
    folder = cache_dir() / f"demo-data-v{DEMO_VERSION}-seed{DEMO_SEED}-scale1"
    if (folder / "README.txt").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.with_name(f".{folder.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        generate(tmp)
        # The same bytes every time, and the same modification time: a copy made again (after the
        # cache folder was deleted) has the fingerprint of the one a running service built from.
        for path in tmp.iterdir():
            os.utime(path, ns=(_FIXED_MTIME_NS, _FIXED_MTIME_NS))
        try:
            os.rename(tmp, folder)
        except OSError:
            if not (folder / "README.txt").is_file():  # not a lost race: a real problem
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder
