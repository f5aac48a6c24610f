"""Aggregates are built once per data set, reused while it is unchanged, rebuilt when it changes."""

from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path

import pytest

from metrics_kit.server import build as aggregates
from metrics_kit.spec.catalogue import default_catalogue

GOLDEN = Path(__file__).parent / "golden" / "data"


@pytest.fixture
def data(tmp_path) -> Path:
    folder = tmp_path / "data"
    shutil.copytree(GOLDEN, folder)
    return folder


def test_second_start_reuses_the_saved_aggregates(data):
    messages = []
    first = aggregates.load_or_build(data, default_catalogue(), log=messages.append)
    second = aggregates.load_or_build(data, default_catalogue(), log=messages.append)
    assert messages[0].startswith("Built aggregates") and messages[1].startswith("Using aggregates")
    assert second.values == first.values
    assert second.meta["coverage"] == first.meta["coverage"]
    # Types survive the round trip: counts stay integers.
    key = next(k for k in first.values if k[0] == "swap_transaction_count")
    assert all(type(v) is int for v in second.values[key])


def test_a_changed_file_is_rebuilt(data):
    messages = []
    catalogue = default_catalogue()
    before = aggregates.load_or_build(data, catalogue, log=messages.append)
    with open(data / "transactions.csv", "a") as f:
        f.write("2025-01-01T12:00:00Z,zz-new,zoe,swapx,swap,regular\n")
    after = aggregates.load_or_build(data, catalogue, log=messages.append)
    assert messages[-1].startswith("Built aggregates")
    day = dt.date(2025, 1, 1)
    assert (
        after.lookup("swap_transaction_count", "swapx", "1_day", day).value
        == before.lookup("swap_transaction_count", "swapx", "1_day", day).value + 1
    )


def test_a_corrupt_saved_file_is_rebuilt_not_fatal(data):
    catalogue = default_catalogue()
    built = aggregates.load_or_build(data, catalogue, log=lambda m: None)
    saved = list((Path(os.environ["METRICS_KIT_CACHE_DIR"]) / "aggregates").glob("*.parquet"))
    assert saved
    for path in saved:
        path.write_bytes(b"not parquet at all")
    messages = []
    again = aggregates.load_or_build(data, catalogue, log=messages.append)
    assert any(m.startswith("Rebuilding unreadable") for m in messages)
    assert again.values == built.values


def test_a_failed_load_leaves_the_saved_aggregates_alone(data):
    catalogue = default_catalogue()
    aggregates.load_or_build(data, catalogue, log=lambda m: None)
    cache = Path(os.environ["METRICS_KIT_CACHE_DIR"]) / "aggregates"
    before = sorted(p.name for p in cache.iterdir())
    with open(data / "transactions.csv", "a") as f:
        f.write("2025-01-01T12:00:00Z,bad,zoe,swapx,teleport,\n")
    with pytest.raises(Exception, match="teleport"):
        aggregates.load_or_build(data, catalogue, log=lambda m: None)
    assert sorted(p.name for p in cache.iterdir()) == before


def test_the_cache_key_is_the_same_in_every_process():
    # Set and dict orders follow the per-process hash seed: the key must not.
    import subprocess
    import sys

    code = (
        "from metrics_kit.server import build as aggregates; from metrics_kit.spec.catalogue import Catalogue; "
        "print(aggregates.catalogue_key(Catalogue('sol')))"
    )
    keys = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
        ).stdout.strip()
        for seed in (0, 1, 2, 3)
    }
    assert len(keys) == 1, keys
