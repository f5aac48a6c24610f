"""Aggregates are built once per data set, reused while it is unchanged, rebuilt when it changes."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from support import ServerProcess, split_by_day

from metrics_kit.server.building import build as aggregates
from metrics_kit.spec.catalogue import default_catalogue

GOLDEN = Path(__file__).parents[1] / "golden" / "data"


@pytest.fixture
def data(tmp_path, monkeypatch) -> Path:
    # A cache folder of the test's own: a copy keeps the golden files' sizes and times, so it has their
    # fingerprint, and another test's saved build of them would be found in a shared folder.
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path / "cache"))
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
        after.find("swap_transaction_count", "swapx", "1_day", day)[0]
        == before.find("swap_transaction_count", "swapx", "1_day", day)[0] + 1
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
    code = (
        "from metrics_kit.server.serving.aggregates import catalogue_key; "
        "from metrics_kit.spec.catalogue import Catalogue; print(catalogue_key(Catalogue('sol')))"
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


def _cli(*args: str) -> subprocess.CompletedProcess:
    # Without PYTHONUNBUFFERED, which some shells and CI set: output into a pipe is block buffered.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return subprocess.run(
        [sys.executable, "-m", "metrics_kit", *args], capture_output=True, text=True, timeout=300, check=False, env=env
    )


def test_build_out_writes_what_serve_aggregates_serves_without_the_data(data, tmp_path):
    out = tmp_path / "agg.parquet"
    done = _cli("build", "--data", str(data), "--out", str(out))
    assert done.returncode == 0, done.stderr
    built = aggregates.Aggregates.read(out)
    assert built.meta["engine"] == "duckdb"
    # A build that succeeded ends the process without Python's finalisation: its output, block
    # buffered into a pipe, is still all there.
    wrote = f"Built on duckdb in {built.meta['build_seconds']} s; wrote {out}"
    summary = f"{len(built.projects)} projects, coverage {built.meta['coverage']}, {len(built.values):,} series"
    assert done.stdout.splitlines()[-2:] == [wrote, summary], done.stdout
    shutil.rmtree(data)  # the service needs no event data
    with ServerProcess(None, "--aggregates", str(out)) as server:
        for (metric, project, granularity), series in list(built.values.items())[:40]:
            start = built.periods[granularity][-1][0]
            assert server.value(metric, project, granularity, start) == series[-1]


# What serving prebuilt aggregates must not load: the build's modules, the metrics' expressions (for
# /explain and /catalogue only, which prebuilt aggregates do not answer or answer later), and the
# engines' libraries.
NOT_FOR_SERVING = ("metrics_kit.server.building", "metrics_kit.server.metrics", "duckdb", "ibis", "sqlglot", "pyspark")


def test_serving_prebuilt_aggregates_loads_no_build_module(data, tmp_path):
    """`metrics-kit serve --aggregates FILE` answers /metrics and /projects without loading a module
    of the build (server/building/): serving is apart from the build in the tree, not by a comment
    in it. The child's own record of its imports (PYTHONPROFILEIMPORTTIME, as -X importtime) names
    every module it loaded, at its start and while it answered."""
    out = tmp_path / "agg.parquet"
    done = _cli("build", "--data", str(data), "--out", str(out))
    assert done.returncode == 0, done.stderr
    built = aggregates.Aggregates.read(out)
    (metric, project, granularity), series = next(iter(built.values.items()))
    start = built.periods[granularity][-1][0]
    with ServerProcess(None, "--aggregates", str(out), env={"PYTHONPROFILEIMPORTTIME": "1"}) as server:
        assert server.value(metric, project, granularity, start) == series[-1]
        assert server.get("/projects").status_code == 200
        server.stop()  # its output, the record of its imports, read to the end
    imported = {line.rpartition("|")[2].strip() for line in server.output if line.startswith("import time:")}
    assert "metrics_kit.server.http.app" in imported  # the record holds what serving loaded
    loaded = sorted(m for m in imported if any(m == n or m.startswith(n + ".") for n in NOT_FOR_SERVING))
    assert loaded == [], loaded


def test_serve_aggregates_refuses_a_missing_or_foreign_file(tmp_path, monkeypatch):
    monkeypatch.delenv("METRICS_KIT_API_KEYS", raising=False)  # so that serve would generate a key
    missing = _cli("serve", "--aggregates", str(tmp_path / "nope.parquet"), "--port", "0")
    assert missing.returncode == 2 and "no such file" in missing.stderr
    assert missing.stdout == "", missing.stdout  # checked before an API key is generated and shown
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    junk = _cli("serve", "--aggregates", str(tmp_path / "junk.parquet"), "--port", "0")
    assert junk.returncode == 2 and "not an aggregates file" in junk.stderr
    both = _cli("serve", "--aggregates", str(tmp_path / "junk.parquet"), "--data", str(GOLDEN))
    assert both.returncode == 2 and "without --data" in both.stderr


def test_serve_aggregates_refuses_aggregates_of_other_definitions(data, tmp_path):
    built = aggregates.load_or_build(data, default_catalogue(), log=lambda m: None)
    stale = aggregates.Aggregates({**built.meta, "catalogue_key": "0" * 16}, built.values)
    stale.save(tmp_path / "stale.parquet")
    done = _cli("serve", "--aggregates", str(tmp_path / "stale.parquet"), "--port", "0")
    assert done.returncode == 2 and "other metric definitions" in done.stderr


def test_build_options_that_do_not_fit_are_clear_errors(data):
    url = _cli("build", "--data", "s3a://bucket/events", "--out", "x.parquet")
    assert url.returncode == 2 and "only --engine spark reads a URL" in url.stderr
    # Nothing else: no traceback, and no leak report from DuckDB's bindings at the exit.
    assert url.stderr.count("\n") == 1 and url.stderr.startswith("metrics-kit: error:"), url.stderr
    master = _cli("build", "--data", str(data), "--spark-master", "local[2]", "--out", "x.parquet")
    assert master.returncode == 2 and "--spark-master is for --engine spark" in master.stderr


def test_a_day_added_to_a_table_folder_is_built_incrementally(tmp_path):
    """``metrics-kit build`` on a folder of day files: the first build is full, adding a day's files
    recomputes that day, its week and its month only, and the values equal a fresh full build."""
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(GOLDEN / "projects.csv", data)
    for table in ("fees", "token_flows", "chain_rewards"):
        shutil.copy(GOLDEN / f"{table}.csv", data)
    split_by_day(GOLDEN, data, "transactions", days={"2024-12-28", "2024-12-30", "2024-12-31"})
    first = _cli("build", "--data", str(data))
    assert first.returncode == 0 and "full build" in first.stdout, first.stdout + first.stderr
    split_by_day(GOLDEN, data, "transactions", days={"2025-01-01"})
    second = _cli("build", "--data", str(data))
    assert second.returncode == 0, second.stderr
    assert "Updated aggregates incrementally" in second.stdout, second.stdout
    # One row of the file is 01:30 at UTC+2: on 2024-12-31 in UTC, in the same ISO week, another month.
    assert "1 file added, 0 changed, 0 removed; recomputed 2 days, 1 week, 2 months" in second.stdout
    incremental = aggregates.load_or_build(data, default_catalogue(), log=lambda m: None)
    full = aggregates.load_or_build(data, default_catalogue(), rebuild=True, log=lambda m: None)
    assert incremental.meta["build"] == "incremental" and full.meta["build"] == "full"
    assert incremental.values == full.values
    day = dt.date(2025, 1, 1)
    # u4 at 00:00Z and u5 at 20:00-05:00 on 2024-12-31 (a file of the first build): both on 2025-01-01 UTC.
    assert incremental.find("unstaking_transaction_count", "farm", "1_day", day)[0] == 2


def _nested(data: Path, day: str = "2024-12-31") -> Path:
    """The golden data with the transactions as a table folder: ``day``'s rows in a Hive-style
    subfolder (``day=...``), as Spark and most export jobs write them, the others beside it."""
    lines = (data / "transactions.csv").read_text().splitlines()
    (data / "transactions.csv").unlink()
    (data / "transactions" / f"day={day}").mkdir(parents=True)
    (data / "transactions" / "part-0.csv").write_text("\n".join(x for x in lines if not x.startswith(day)) + "\n")
    nested = [lines[0], *(line for line in lines if line.startswith(day))]
    (data / "transactions" / f"day={day}" / "part-1.csv").write_text("\n".join(nested) + "\n")
    return data / "transactions"


def test_a_table_folder_with_a_hive_style_subfolder_is_served_whole(data, tmp_path):
    """The rows of a part in ``transactions/day=2024-12-31/`` count: served as from the same rows
    in one file (w3 is swapx's one regular-pool swap that day)."""
    flat = aggregates.load_or_build(data, default_catalogue(), log=lambda m: None)
    _nested(data)
    day = "2024-12-31"
    asked = [
        ("regular_pool_swap_transaction_count", "swapx", "1_day"),
        ("swap_transaction_count", "swapx", "1_week"),
        ("staking_transaction_count", "farm", "1_month"),
    ]
    with ServerProcess(data, cache_dir=tmp_path / "serve-cache") as server:
        served = [server.value(metric, project, granularity, day) for metric, project, granularity in asked]
    expected = [
        flat.find(metric, project, granularity, dt.date(2024, 12, 31))[0] for metric, project, granularity in asked
    ]
    assert served == expected and served[0] == 1, (served, expected)


def test_a_part_without_pool_type_is_refused_naming_it(data):
    """A part of the transactions without the pool_type column is refused, as a single file
    without it is, rather than read with every pool_type empty (its regular-pool swaps would
    stop counting: regular_pool_swap_transaction_count 0 where it is 1)."""
    parts = _nested(data)
    nested = parts / "day=2024-12-31" / "part-1.csv"
    rows = [line.rsplit(",", 1)[0] for line in nested.read_text().splitlines()]
    nested.write_text("\n".join(rows) + "\n")
    done = _cli("build", "--data", str(data), "--out", str(data.parent / "agg.parquet"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(
        "metrics-kit: error: transactions/day=2024-12-31/part-1.csv: missing column 'pool_type'; "
        "the transactions table has columns block_time, tx_id, signer, project, action, pool_type"
    ), done.stderr
    assert not (data.parent / "agg.parquet").exists()


def test_a_part_added_in_a_subfolder_is_built_incrementally(tmp_path):
    """A day's part added in a Hive-style subfolder of a table folder: found, built incrementally
    (its day, week and month), equal to a full build."""
    data = tmp_path / "data"
    shutil.copytree(GOLDEN, data)
    nested = _nested(data, day="2025-01-02") / "day=2025-01-02" / "part-1.csv"
    text = nested.read_text()
    nested.unlink()
    first = _cli("build", "--data", str(data))
    assert first.returncode == 0 and "full build" in first.stdout, first.stdout + first.stderr
    nested.write_text(text)
    second = _cli("build", "--data", str(data))
    assert "1 file added, 0 changed, 0 removed; recomputed 1 day, 1 week, 1 month" in second.stdout, second.stdout
    incremental = aggregates.load_or_build(data, default_catalogue(), log=lambda m: None)
    full = aggregates.load_or_build(data, default_catalogue(), rebuild=True, log=lambda m: None)
    assert incremental.meta["build"] == "incremental" and incremental.values == full.values
    # s6 twice on 2025-01-02, in the added part: one staking transaction that day.
    assert incremental.find("staking_transaction_count", "farm", "1_day", dt.date(2025, 1, 2))[0] == 1


def test_the_old_names_of_the_build_entry_points_still_work_and_say_the_new_ones(data):
    from metrics_kit.errors import ConfigurationError
    from metrics_kit.server.data import store

    catalogue = default_catalogue()
    event_store = store.load(data)
    with warnings.catch_warnings(record=True) as caught:  # not pytest.warns: Ibis warns of DuckDB's API too
        warnings.simplefilter("always")
        old = aggregates.build(event_store, catalogue)
    assert any(w.category is DeprecationWarning and "build_in_full" in str(w.message) for w in caught)
    assert old.values == aggregates.build_in_full(store.load(data), catalogue).values
    with pytest.warns(DeprecationWarning, match="build_on_engine"), pytest.raises(ConfigurationError):
        aggregates.build_on(data, catalogue, engine="nope")
