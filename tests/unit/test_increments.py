"""How an incremental build decides what to compute again (``server/building/increments.py``), without a build."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pandas as pd

from metrics_kit.server.building import increments
from metrics_kit.server.data.sources import find_sources, fingerprint

D = dt.date


def test_days_are_stored_as_runs_and_read_back():
    days = {D(2024, 12, 30), D(2024, 12, 31), D(2025, 1, 1), D(2025, 1, 5)}
    runs = increments._runs(days)
    assert runs == [["2024-12-30", "2025-01-01"], ["2025-01-05", "2025-01-05"]]
    assert increments._days(runs) == days


def test_an_affected_day_recomputes_its_day_iso_week_and_month():
    starts = increments.periods({D(2025, 1, 1)})  # a Wednesday; its ISO week began in 2024
    assert starts == {"1_day": {D(2025, 1, 1)}, "1_week": {D(2024, 12, 30)}, "1_month": {D(2025, 1, 1)}}
    # The rows read are those of every day of those periods: the week reaches back into December.
    assert increments.spans(starts) == [(D(2024, 12, 30), D(2025, 1, 31))]


def test_spans_of_periods_far_apart_stay_apart():
    starts = increments.periods({D(2024, 3, 15), D(2024, 7, 2)})
    assert increments.spans(starts) == [(D(2024, 3, 1), D(2024, 3, 31)), (D(2024, 7, 1), D(2024, 7, 31))]


def _folder(tmp_path: Path) -> Path:
    (tmp_path / "transactions").mkdir()
    (tmp_path / "projects.csv").write_text("project,kinds,initial_circulating_supply,regular_pools\nx,dex,,\n")
    for day in ("2025-01-01", "2025-01-02"):
        (tmp_path / "transactions" / f"{day}.csv").write_text("block_time,tx_id,signer,project,action,pool_type\n")
    (tmp_path / "fees.csv").write_text("block_time,project,fee_type,recipient,amount_usd\n")
    return tmp_path


def _manifest(folder: Path) -> dict:
    days = {
        "transactions": {
            folder / "transactions" / "2025-01-01.csv": (D(2025, 1, 1),),
            folder / "transactions" / "2025-01-02.csv": (D(2025, 1, 2),),
        }
    }
    sources = find_sources(folder)
    return increments.manifest(folder, sources, increments.stat_all(sources), days)


def _plan(before: dict, folder: Path):
    sources = find_sources(folder)
    return increments.plan(before, folder, sources, increments.stat_all(sources))


def _touch(path: Path) -> None:
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def test_added_changed_and_removed_files_of_a_folder(tmp_path):
    folder = _folder(tmp_path)
    before = _manifest(folder)
    assert increments.coverage(before) == (D(2025, 1, 1), D(2025, 1, 2))
    (folder / "transactions" / "2025-01-03.csv").write_text("block_time,tx_id,signer,project,action,pool_type\n")
    _touch(folder / "transactions" / "2025-01-02.csv")
    (folder / "transactions" / "2025-01-01.csv").unlink()
    plan = _plan(before, folder)
    assert isinstance(plan, increments.Plan)
    assert (plan.added, plan.changed, plan.removed) == (1, 1, 1)
    assert set(plan.new["transactions"]) == {
        folder / "transactions" / "2025-01-02.csv",
        folder / "transactions" / "2025-01-03.csv",
    }
    # The old days of the changed and the removed file: their periods lose rows.
    assert plan.gone_days == {D(2025, 1, 1), D(2025, 1, 2)}


def test_parts_in_subfolders_are_files_of_the_plan_and_of_the_fingerprint(tmp_path):
    """A part in a Hive-style subfolder, added, touched or removed, is seen by the data version and
    planned like a part beside the others."""
    folder = _folder(tmp_path)
    before = _manifest(folder)
    versions = [fingerprint(find_sources(folder))]
    nested = folder / "transactions" / "day=2025-01-03" / "part-0.csv"
    nested.parent.mkdir()
    nested.write_text("block_time,tx_id,signer,project,action,pool_type\n")
    versions.append(fingerprint(find_sources(folder)))
    plan = _plan(before, folder)
    assert isinstance(plan, increments.Plan) and plan.added == 1 and plan.new["transactions"] == (nested,)
    sources = find_sources(folder)
    after = increments.manifest(
        folder, sources, increments.stat_all(sources), {"transactions": {nested: (D(2025, 1, 3),)}}, before
    )
    assert after["tables"]["transactions"]["files"]["transactions/day=2025-01-03/part-0.csv"]["days"] == [
        ["2025-01-03", "2025-01-03"]
    ]
    _touch(nested)
    versions.append(fingerprint(find_sources(folder)))
    changed = _plan(after, folder)
    assert isinstance(changed, increments.Plan) and changed.changed == 1 and changed.gone_days == {D(2025, 1, 3)}
    nested.unlink()
    versions.append(fingerprint(find_sources(folder)))
    removed = _plan(after, folder)
    assert isinstance(removed, increments.Plan) and removed.removed == 1 and removed.gone_days == {D(2025, 1, 3)}
    # Added, then touched: each another version; removed: the version of the files before it came.
    assert len(set(versions[:3])) == 3 and versions[3] == versions[0]


def test_unchanged_files_plan_nothing(tmp_path):
    folder = _folder(tmp_path)
    plan = _plan(_manifest(folder), folder)
    assert isinstance(plan, increments.Plan)
    assert (plan.added, plan.changed, plan.removed, plan.gone_days) == (0, 0, 0, set())


def test_what_takes_a_full_build(tmp_path):
    folder = _folder(tmp_path)
    before = _manifest(folder)
    _touch(folder / "fees.csv")
    assert "fees table is one file" in _plan(before, folder)
    before = _manifest(folder)
    _touch(folder / "projects.csv")
    assert _plan(before, folder) == "the projects table changed"
    before = _manifest(folder)
    other = tmp_path.parent / (tmp_path.name + "-moved")
    folder.rename(other)
    assert _plan(before, other) == "the saved build is of another folder"


def test_only_files_with_rows_in_the_window_are_read(tmp_path):
    folder = _folder(tmp_path)
    meeting = increments.files_meeting(
        folder, find_sources(folder), _manifest(folder), [(D(2025, 1, 2), D(2025, 1, 31))]
    )
    assert meeting["transactions"].files == (folder / "transactions" / "2025-01-02.csv",)
    assert meeting["fees"].files == ()  # its rows fall on no day (it is empty)


def test_merge_replaces_exactly_the_recomputed_periods():
    def sparse(rows):
        frame = pd.DataFrame(rows, columns=["granularity", "project", "period_start", "metric", "value"])
        return increments.normalise(frame)

    stored = sparse(
        [
            ("1_day", "x", "2025-01-01", "m", 1.0),
            ("1_day", "x", "2025-01-02", "m", 2.0),
            ("1_week", "x", "2024-12-30", "m", 3.0),
        ]
    )
    fresh = sparse(
        [
            ("1_day", "x", "2025-01-02", "m", 5.0),
            ("1_day", "x", "2025-01-01", "m", 9.0),  # computed from part of its rows only: not kept
            ("1_week", "x", "2024-12-30", "m", 8.0),
        ]
    )
    starts = {"1_day": {D(2025, 1, 2)}, "1_week": {D(2024, 12, 30)}, "1_month": set()}
    merged = increments.merge(stored, fresh, starts).sort_values(["granularity", "period_start"])
    assert merged["value"].tolist() == [1.0, 5.0, 8.0]


def test_a_damaged_state_file_means_a_full_build(tmp_path):
    path = tmp_path / "state.parquet"
    path.write_bytes(b"not parquet")
    assert increments.State.read(path) is None
    assert increments.State.read(tmp_path / "missing.parquet") is None
