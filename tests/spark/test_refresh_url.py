"""Refreshing a URL on Spark: the same values as a full build, after each change a daily job meets.

The golden data, split into a file per day and table, is read as a ``file://`` URL (of a folder
whose name holds a space: the URL as ``Path.as_uri()`` writes it, ``%20``). One child process (one
Spark session, ``local[2]``) builds it, then changes the folder and builds again, step by step: a
day added, a day rewritten, a file removed, a late event in an old week, the newest version of
the state left not whole (as an interrupted write leaves it), a refresh that fails on a bad row
(and the one after it), two builds' writes crossed in one slot, another catalogue and back, the
newest commit's manifest damaged three ways, a part whose name holds Spark's glob characters, the
URL spelt otherwise (``file:/x``, ``..``), a slot that cannot be written, a state location under a
file and one of a scheme Spark does not know. After each step it also builds the folder in full on
DuckDB; every Spark build must give DuckDB's values, and every refresh must say it was one (and
what it recomputed). Spark's log of the whole run holds no warning and no stack trace.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from spark_support import SPARK_ENV, SUBMIT_ARGS, assert_same_values, run_cli
from support import GOLDEN, split_by_day

from metrics_kit.server.serving.aggregates import Aggregates

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1200)]

_SCENARIO = r"""
import json, os, sys
from pathlib import Path

import shutil

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from metrics_kit.errors import ConfigurationError, DataFormatError
from metrics_kit.server.building import build
from metrics_kit.server.data import store
from metrics_kit.spec.catalogue import default_catalogue

folder, out = Path(sys.argv[1]), Path(sys.argv[2])
url = folder.as_uri()
state = Path(str(folder) + ".metrics-kit-state")
SOL = default_catalogue("sol")
TX_HEADER = "block_time,tx_id,signer,project,action,pool_type\n"
steps = {}


def write(path, text, mtime=None):
    path.write_text(text)
    if mtime is not None:  # a rewrite within the same millisecond would look unchanged
        os.utime(path, (mtime, mtime))


def step(name, catalogue=SOL, fails=False, at=None, state=None):
    said = []
    try:
        built = build.build_on_engine(
            at or url, catalogue, engine="spark", spark_master="local[2]", state=state, log=said.append
        )
    except (DataFormatError, ConfigurationError) as error:
        assert fails, error
        steps[name] = {"log": said, "error": str(error), "argument": error.argument}
        return
    assert not fails, said
    built.save(out / f"{name}-spark.parquet")
    build.build_in_full(store.load(folder, duckdb.connect()), catalogue).save(out / f"{name}-duckdb.parquet")
    steps[name] = {"log": said, "meta": {k: built.meta.get(k) for k in ("build", "why", "changes", "recomputed")}}


step("full")
step("again")
write(folder / "transactions" / "2025-02-02.csv", TX_HEADER + "2025-02-02T09:00:00Z,n1,zoe,swapx,swap,regular\n")
write(folder / "fees" / "2025-02-02.csv", "block_time,project,fee_type,recipient,amount_usd\n"
      "2025-02-02T09:00:00Z,swapx,transaction,protocol,2.5\n")
step("day_added")
day = folder / "transactions" / "2025-01-02.csv"
write(day, day.read_text() + "2025-01-02T15:00:00Z,s99,zoe,farm,stake,\n", day.stat().st_mtime + 10)
step("day_rewritten")
(folder / "fees" / "2024-12-30.csv").unlink()
step("file_removed")
write(folder / "transactions" / "late.csv", TX_HEADER + "2024-12-31T08:00:00Z,late1,yan,swapx,swap,regular\n")
step("late_event")
# The newest version's values not whole (a part lost, as a write cut short leaves them): the next
# build refreshes from the version before it, which did not have late.csv yet.
numbers = {slot: pq.read_table(state / f"commit-{slot}").column("number")[0].as_py() for slot in "ab"}
newest = max(numbers, key=numbers.get)
sorted((state / f"values-{newest}").glob("part-*.parquet"))[0].unlink()
write(folder / "transactions" / "2025-02-03.csv", TX_HEADER + "2025-02-03T09:00:00Z,n2,zoe,swapx,swap,regular\n")
step("after_unfinished")
before = sorted(p.name for p in state.iterdir())
write(folder / "transactions" / "2025-02-04.csv", TX_HEADER + "2025-02-04T09:00:00Z,n3,zoe,swapx,teleport,regular\n")
step("failed", fails=True)
steps["failed"]["state_kept"] = sorted(p.name for p in state.iterdir()) == before
(folder / "transactions" / "2025-02-04.csv").unlink()
step("after_failed")
# Two builds at once: a second build's values written over the first's in the slot the first then
# committed (the same version number, other values). That slot is not whole; the next build
# refreshes from the version before it, and its values are still DuckDB's.
numbers = {slot: pq.read_table(state / f"commit-{slot}").column("number")[0].as_py() for slot in "ab"}
values = state / f"values-{max(numbers, key=numbers.get)}"
other = pq.read_table(values)
other = other.set_column(other.column_names.index("value"), "value", pc.add(other["value"], 1.0))
if "token" in other.column_names:
    other = other.set_column(other.column_names.index("token"), "token", pa.array(["other"] * len(other)))
shutil.rmtree(values)
values.mkdir()
pq.write_table(other, values / "part-00000-other.parquet")
write(folder / "transactions" / "2025-02-05.csv", TX_HEADER + "2025-02-05T09:00:00Z,n4,zoe,swapx,swap,regular\n")
step("after_crossed")
step("other_catalogue", catalogue=default_catalogue("eth"))
# The newest version is the other catalogue's; the other slot holds one of this catalogue's.
step("back_to_sol")


def newest_slot():
    numbers = {slot: pq.read_table(state / f"commit-{slot}").column("number")[0].as_py() for slot in "ab"}
    return max(numbers, key=numbers.get)


# The newest commit's manifest damaged: that slot is not whole; the next build refreshes from the other.
for n, (label, manifest) in enumerate((("not_json", "{not json"), ("null", "null"), ("no_fields", '{"state": 2}'))):
    commit = state / f"commit-{newest_slot()}"
    table = pq.read_table(commit)
    table = table.set_column(table.column_names.index("manifest"), "manifest", pa.array([manifest]))
    shutil.rmtree(commit)
    commit.mkdir()
    pq.write_table(table, commit / "part-00000-damaged.parquet")
    row = f"2025-02-1{n}T09:00:00Z,m{n},zoe,swapx,swap,regular\n"
    write(folder / "transactions" / f"2025-02-1{n}.csv", TX_HEADER + row)
    step(f"manifest_{label}")
# A part named with Spark's glob characters: read as it is named.
write(folder / "transactions" / "2025-02-20[1].csv", TX_HEADER + "2025-02-20T09:00:00Z,g1,zoe,swapx,swap,regular\n")
step("glob_name")
# The same folder spelt as Spark prints it, and through '..': the same data, the same state.
step("spelt_file_colon", at="file:" + str(folder))
step("spelt_dot_dot", at=f"file://{folder.parent}/elsewhere/../{folder.name}")
# The slot the next version goes to cannot be written (its values folder a link to nowhere): the
# build says why, and that the next build refreshes from the version it started from.
other = state / f"values-{'b' if newest_slot() == 'a' else 'a'}"
shutil.rmtree(other)
other.symlink_to(state / "nowhere" / "values")
write(folder / "transactions" / "2025-02-21.csv", TX_HEADER + "2025-02-21T09:00:00Z,u1,zoe,swapx,swap,regular\n")
step("slot_unwritable")
other.unlink()
step("after_unwritable")
# A state location under a file: nothing there to refresh from, nothing can be written there.
(folder.parent / "a-file").write_text("not a folder")
step("state_under_a_file", state=(folder.parent / "a-file" / "state").as_uri())
step("state_unknown_scheme", state="nosuchfs://bucket/metrics/state", fails=True)
(out / "steps.json").write_text(json.dumps(steps))
"""


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    work = tmp_path_factory.mktemp("refresh")
    folder = work / "my events"
    folder.mkdir()
    shutil.copy(GOLDEN / "projects.csv", folder)
    for table in ("transactions", "fees", "token_flows", "chain_rewards"):
        split_by_day(GOLDEN, folder, table)
    (work / "scenario.py").write_text(_SCENARIO)
    env = {**os.environ, **SPARK_ENV, "PYSPARK_SUBMIT_ARGS": SUBMIT_ARGS}
    run = subprocess.run(
        [sys.executable, str(work / "scenario.py"), str(folder), str(work)],
        capture_output=True,
        text=True,
        timeout=1100,
        env=env,
    )
    assert run.returncode == 0, run.stderr[-6000:]
    (work / "stderr.txt").write_text(run.stderr)
    return work, json.loads((work / "steps.json").read_text())


REFRESHES = [
    "again",
    "day_added",
    "day_rewritten",
    "file_removed",
    "late_event",
    "after_unfinished",
    "after_failed",
    "after_crossed",
    "back_to_sol",
    "manifest_not_json",
    "manifest_null",
    "manifest_no_fields",
    "glob_name",
    "spelt_file_colon",
    "spelt_dot_dot",
    "slot_unwritable",
    "after_unwritable",
]


@pytest.mark.parametrize("name", ["full", *REFRESHES, "other_catalogue", "state_under_a_file"])
def test_each_build_gives_a_full_duckdb_builds_values(scenario, name):
    work, _steps = scenario
    spark, duckdb = (Aggregates.read(work / f"{name}-{engine}.parquet") for engine in ("spark", "duckdb"))
    assert assert_same_values(duckdb, spark, same_files=False) > 0


def test_each_change_is_refreshed_at_the_cost_of_the_periods_it_touches(scenario):
    _work, steps = scenario
    meta = {name: steps[name]["meta"] for name in steps if "meta" in steps[name]}
    assert meta["full"]["build"] == "full" and meta["full"]["why"].startswith("no saved state at file:")
    for name in REFRESHES:
        assert meta[name]["build"] == "incremental", (name, meta[name])
    assert meta["again"]["recomputed"] == {"1_day": 0, "1_week": 0, "1_month": 0}
    assert meta["day_added"]["changes"] == "2 files added, 0 changed, 0 removed"
    assert meta["day_added"]["recomputed"] == {"1_day": 1, "1_week": 1, "1_month": 1}
    assert meta["day_rewritten"]["changes"] == "0 files added, 1 changed, 0 removed"
    assert meta["file_removed"]["changes"] == "0 files added, 0 changed, 1 removed"
    # 2024-12-31: its day, its ISO week (from Monday 2024-12-30, into January) and December.
    assert meta["late_event"]["recomputed"] == {"1_day": 1, "1_week": 1, "1_month": 1}
    # From the version before the damaged one: late.csv is new to it too.
    assert meta["after_unfinished"]["changes"] == "2 files added, 0 changed, 0 removed"


def test_a_failed_refresh_leaves_the_state_and_a_misfit_state_is_said_and_ignored(scenario):
    _work, steps = scenario
    assert "teleport" in steps["failed"]["error"] and steps["failed"]["state_kept"]
    other = steps["other_catalogue"]
    assert other["meta"]["build"] == "full"
    ignored = [line for line in other["log"] if line.startswith("Ignoring the saved state")]
    assert len(ignored) == 1 and "other metric definitions" in ignored[0], other["log"]


def _lines(steps: dict, name: str, start: str) -> list[str]:
    return [line for line in steps[name]["log"] if line.startswith(start)]


def test_a_version_that_does_not_fit_or_is_not_whole_is_passed_over_for_the_other_slots(scenario):
    """The newest version of another catalogue's: the other slot's, this catalogue's, refreshed from,
    with a line that says to give each catalogue its own state. A newest commit whose manifest is
    damaged: that slot ignored with a line, the other slot's version refreshed from."""
    _work, steps = scenario
    assert steps["back_to_sol"]["meta"]["build"] == "incremental"
    (said,) = _lines(steps, "back_to_sol", "Ignoring the newest version of the saved state at file:///")
    assert said.endswith(
        ": it was saved for other metric definitions (another catalogue or --chain-unit: give each its own "
        "state location, --state); refreshing from the version before it"
    ), said
    # Each time from the same version (the new one goes into the damaged slot): a day more each time.
    for added, (name, reason) in enumerate(
        [
            ("manifest_not_json", "its manifest is not JSON"),
            ("manifest_null", "its manifest is not a JSON object (NoneType)"),
            ("manifest_no_fields", "its manifest has no 'data', 'catalogue_key', 'engine', 'metrics_kit', 'tables'"),
        ],
        start=1,
    ):
        assert steps[name]["meta"]["build"] == "incremental", (name, steps[name])
        changes = f"{added} file{'s' if added > 1 else ''} added, 0 changed, 0 removed"
        assert steps[name]["meta"]["changes"] == changes, (name, steps[name])
        (said,) = _lines(steps, name, "Ignoring")
        assert said.startswith("Ignoring slot ") and said.endswith(f": {reason}"), said


def test_any_spelling_of_the_url_and_any_file_name_refresh_the_same_state(scenario):
    """The folder's URL as ``Path.as_uri()`` writes it (its space as %20), as Spark prints it
    (``file:/x``) and through ``..``: one data location, one state; a part named with Spark's glob
    characters is read by its name."""
    _work, steps = scenario
    assert steps["glob_name"]["meta"]["changes"] == "1 file added, 0 changed, 0 removed"
    for name in ("spelt_file_colon", "spelt_dot_dot"):
        assert steps[name]["meta"]["build"] == "incremental", (name, steps[name])
        assert steps[name]["meta"]["changes"] == "0 files added, 0 changed, 0 removed", (name, steps[name])
        assert not _lines(steps, name, "Ignoring"), steps[name]["log"]


def test_a_state_that_cannot_be_written_is_said_with_spark_s_reason_and_what_the_next_build_does(scenario):
    _work, steps = scenario
    (said,) = _lines(steps, "slot_unwritable", "Could not save the state at file:///")
    assert "An error occurred while calling" not in said, said
    assert said.endswith("; the aggregates are built, and the next build refreshes from the version saved before")
    assert steps["after_unwritable"]["meta"]["changes"] == "1 file added, 0 changed, 0 removed"
    (said,) = _lines(steps, "state_under_a_file", "Could not save the state at file:///")
    assert "a-file/state: Parent path is not a directory: file:/" in said, said
    assert said.endswith("; the aggregates are built, and the next build will be a full one"), said
    refused = steps["state_unknown_scheme"]
    assert refused["argument"] == "state" and refused["error"].startswith(
        "state=nosuchfs://bucket/metrics/state: Spark has no file system for this scheme "
        '(No FileSystem for scheme "nosuchfs")'
    ), refused


def test_spark_s_log_holds_no_warning_and_no_stack_trace(scenario):
    """A run of builds (refreshes, a failed one, names with glob characters, a state that cannot be
    written) on a driver the build started: Spark's log says only errors, each in a line."""
    work, _steps = scenario
    stderr = (work / "stderr.txt").read_text()
    for noise in ("\tat ", " WARN ", "Traceback", "Exception:", "Setting default log level"):
        assert noise not in stderr, stderr[-6000:]


def test_the_state_flag_places_the_state_and_is_for_a_url_only(tmp_path):
    """``--state`` puts the state where it says (the same command run again refreshes); a data
    folder's build refuses it."""
    folder = tmp_path / "events"
    shutil.copytree(GOLDEN, folder)
    refused = run_cli("build", "--data", folder, "--state", tmp_path.as_uri(), "--out", tmp_path / "a.parquet")
    assert refused.returncode == 2 and "--state is for a URL --data" in refused.stderr, refused.stderr
    state = (tmp_path / "elsewhere").as_uri()
    args = ("build", "--data", folder.as_uri(), "--engine", "spark", "--spark-master", "local[1]", "--state", state)
    first = run_cli(*args, "--out", tmp_path / "a.parquet", timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    assert sorted(p.name for p in (tmp_path / "elsewhere").iterdir()) == ["commit-a", "values-a"]
    assert not Path(str(folder) + ".metrics-kit-state").exists()


def test_a_url_with_nothing_there_is_one_line_and_nothing_of_spark_s(tmp_path):
    """A --data URL that does not exist (a typo): the one-line error, and before it only the JVM's
    own line from its start; Spark's log (its warnings, their stack traces) says nothing."""
    missing = (tmp_path / "no such events").as_uri()
    done = run_cli(
        "build", "--data", missing, "--engine", "spark", "--spark-master", "local[1]", "--out", tmp_path / "a.parquet"
    )
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith("WARNING: Using incubator modules")]
    assert lines == [
        f"metrics-kit: error: --data file://{tmp_path}/no such events: cannot be listed: [PATH_NOT_FOUND] Path "
        f"does not exist: file:{tmp_path}/no such events. SQLSTATE: 42K03"
    ], done.stderr
