"""Incremental builds: when files of a table folder come, change or go, only the periods their rows
touch are computed again and merged into the stored results.

What a build keeps (one Parquet file per data folder, set of metric definitions and engine, in the
cache folder, written atomically, so a reader sees the old state or the new one):

- the *sparse* results: ``(granularity, project, period_start, metric, value)`` for periods with
  events only. The dense grid (zeros, balances carried forward) is derived from them at every
  build, so a balance after a changed period follows from the new values;
- a *manifest*: every file of every table with its size, modification time, the days its rows
  fall on and the time of its last row (found by the validation scan, at no extra read).

How a build decides what to compute (:func:`plan`, then :func:`periods`):

1. Files are compared with the manifest by size and modification time, as the data fingerprint
   does: added, changed, removed, unchanged.
2. A full build instead when the projects table changed, when a table given as one file changed,
   when a table switched between one file and a folder or between CSV and Parquet, or when the
   metric definitions or the engine version differ (they are in the state's file name).
3. Only the added and changed files are validated. Their days, and the manifest's days of the
   changed and removed files, are the *affected days*.
4. Every day, ISO week and month that holds an affected day is computed again, whole: the engine
   reads the rows of the days those periods span, from the files whose days meet them, and keeps
   only those periods. Every other stored value stands.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from metrics_kit import files
from metrics_kit.server.data.schema import EVENT_TABLES
from metrics_kit.server.data.sources import Source
from metrics_kit.spec.calendar import GRANULARITIES, ISO

STATE_VERSION = 2  # 2: each file's last row's time (``last``)
SPARSE_COLUMNS = ["granularity", "project", "period_start", "metric", "value"]


@dataclass
class State:
    manifest: dict
    sparse: pd.DataFrame

    def save(self, path: Path) -> None:
        table = pa.Table.from_pandas(self.sparse[SPARSE_COLUMNS], preserve_index=False)
        table = table.replace_schema_metadata({"metrics_kit_build": json.dumps(self.manifest)})
        with files.atomic_write(path) as tmp:
            pq.write_table(table, tmp)

    @classmethod
    def read(cls, path: Path) -> State | None:
        """The saved state, or None when there is none this version can use (then: a full build)."""
        try:
            table = pq.ParquetFile(path).read()
            manifest = json.loads(table.schema.metadata[b"metrics_kit_build"])
        except Exception:  # missing or damaged: a full build rewrites it
            return None
        if manifest.get("version") != STATE_VERSION:
            return None
        return cls(manifest, normalise(table.to_pandas()))


def state_path(directory: Path, catalogue_key: str, engine_name: str) -> Path:
    """Where the build of ``directory`` on the engine named ``engine_name`` (``Engine.name``) is kept:
    one per engine, so that a build asked of Spark is computed by Spark even when DuckDB built the
    same data before."""
    folder = hashlib.sha256(str(Path(directory).resolve()).encode()).hexdigest()[:16]
    return files.cache_dir() / "builds" / f"{folder}-{catalogue_key}-{engine_name}.parquet"


def normalise(sparse: pd.DataFrame) -> pd.DataFrame:
    """Sparse rows with one dtype per column, whichever engine computed them."""
    out = sparse.dropna(subset=["value"]).reset_index(drop=True)

    def text(column: pd.Series) -> pd.Series:
        # Already pandas' string dtype (what DuckDB and a saved state give): kept, not rebuilt
        # from Python strings, which is slow for a large saved state.
        return column if column.dtype == "str" else column.astype(str)

    return pd.DataFrame(
        {
            "granularity": text(out["granularity"]),
            "project": text(out["project"]),
            "period_start": pd.to_datetime(out["period_start"]).astype("datetime64[us]"),
            "metric": text(out["metric"]),
            "value": out["value"].astype("float64"),
        }
    )


# -- the manifest -------------------------------------------------------------------------------------


def _runs(days: Iterable[dt.date]) -> list[list[str]]:
    """Days as runs of consecutive days, ``[[first, last], ...]``: a year of daily rows is one run."""
    runs: list[list[dt.date]] = []
    for day in sorted(set(days)):
        if runs and day == runs[-1][1] + dt.timedelta(days=1):
            runs[-1][1] = day
        else:
            runs.append([day, day])
    return [[lo.isoformat(), hi.isoformat()] for lo, hi in runs]


def _days(runs: list[list[str]]) -> set[dt.date]:
    out: set[dt.date] = set()
    for lo, hi in runs:
        day, last = dt.date.fromisoformat(lo), dt.date.fromisoformat(hi)
        while day <= last:
            out.add(day)
            day += dt.timedelta(days=1)
    return out


def _name(directory: Path, path: Path) -> str:
    # The files of a source are entries of ``directory`` or of its table folders (find_sources),
    # so their text starts with the directory's: cut it off (thousands of files, every build).
    prefix, text = f"{directory}/", str(path)
    return text[len(prefix) :] if text.startswith(prefix) else path.relative_to(directory).as_posix()


def _stat(path: Path) -> dict:
    stat = path.stat()
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


Stats = dict[Path, dict]


def stat_all(sources: dict[str, Source]) -> Stats:
    """Size and modification time of every file, taken once, before any is read: a file rewritten
    while the build reads it then looks changed to the next build, never unchanged."""
    return {path: _stat(path) for source in sources.values() for path in source.files}


def manifest(
    directory: Path,
    sources: dict[str, Source],
    stats: Stats,
    days: dict[str, dict[Path, tuple[dt.date, ...]]],
    previous: dict | None = None,
    last: dict[str, dict[Path, dt.datetime]] | None = None,
) -> dict:
    """The manifest of ``sources``: days and last rows' times from ``days`` and ``last`` (the files
    just validated), else from ``previous``."""
    tables = {}
    for table, source in sources.items():
        known = (previous or {}).get("tables", {}).get(table, {}).get("files", {})
        entries = {}
        for path in source.files:
            name = _name(directory, path)
            checked = days.get(table, {}).get(path)
            if checked is not None:
                runs, latest = _runs(checked), (last or {}).get(table, {}).get(path)
                ending = None if latest is None else latest.isoformat()
            else:
                runs, ending = known.get(name, {}).get("days", []), known.get(name, {}).get("last")
            entries[name] = {**stats[path], "days": runs, "last": ending}
        tables[table] = {"folder": source.folder, "fmt": source.fmt, "files": entries}
    return {"version": STATE_VERSION, "data_dir": str(Path(directory).resolve()), "tables": tables}


def coverage(manifest: dict) -> tuple[dt.date, dt.date] | None:
    """First and last day with an event, from the manifest's runs."""
    bounds = [
        (dt.date.fromisoformat(run[0]), dt.date.fromisoformat(run[1]))
        for table in EVENT_TABLES
        for entry in manifest["tables"].get(table, {}).get("files", {}).values()
        for run in entry["days"]
    ]
    if not bounds:
        return None
    return min(lo for lo, _ in bounds), max(hi for _, hi in bounds)


def last_event(manifest: dict) -> dt.datetime | None:
    """The time of the last event (naive UTC), from the manifest's files."""
    times = [
        dt.datetime.fromisoformat(entry["last"])
        for table in EVENT_TABLES
        for entry in manifest["tables"].get(table, {}).get("files", {}).values()
        if entry.get("last")
    ]
    return max(times, default=None)


# -- what changed -----------------------------------------------------------------------------------


@dataclass
class Plan:
    # Per event table, its added and changed files (paths of a folder's build, names of a URL's):
    # the only ones validated again.
    new: dict[str, tuple] = field(default_factory=dict)
    gone_days: set[dt.date] = field(default_factory=set)  # the old days of changed and removed files
    added: int = 0
    changed: int = 0
    removed: int = 0

    def describe(self) -> str:
        return (
            f"{self.added} file{'' if self.added == 1 else 's'} added, {self.changed} changed, {self.removed} removed"
        )


def plan(previous: dict, directory: Path, sources: dict[str, Source], stats: Stats) -> Plan | str:
    """What changed since ``previous``: a :class:`Plan`, or the reason a full build is needed."""
    if previous.get("data_dir") != str(Path(directory).resolve()):
        return "the saved build is of another folder"
    now = {
        table: {"folder": source.folder, "fmt": source.fmt, "files": _entries(directory, source, stats)}
        for table, source in sources.items()
    }
    found = compare(previous["tables"], now)
    if isinstance(found, Plan):
        found.new = {table: tuple(directory / name for name in names) for table, names in found.new.items()}
    return found


def compare(old_tables: dict, now: dict) -> Plan | str:
    """What changed from the manifest's tables ``old_tables`` to ``now`` (per table: ``folder``,
    ``fmt`` and ``files``, each file's name -> its size and time, as the manifest keeps them): a
    :class:`Plan` whose ``new`` names the added and changed files, or the reason a full build is
    needed. The one rule for a data folder and for a URL."""
    if set(old_tables) - set(EVENT_TABLES) != {"projects"} or "projects" not in now:
        return "the projects table changed"
    if now["projects"]["files"] != _entries_of(old_tables["projects"]):
        return "the projects table changed"
    result = Plan()
    for table in EVENT_TABLES:
        source, old = now.get(table), old_tables.get(table)
        if source is None and old is None:
            continue
        if (source is not None and not source["folder"]) or (old is not None and not old["folder"]):
            if source is not None and old is not None and source["files"] == _entries_of(old):
                result.new[table] = ()  # unchanged: nothing to validate again
                continue
            return f"the {table} table is one file, and it changed (a folder of files is built incrementally)"
        if source is not None and old is not None and source["fmt"] != old["fmt"]:
            return f"the {table} folder changed from {old['fmt']} to {source['fmt']}"
        files = source["files"] if source is not None else {}
        before = old["files"] if old is not None else {}
        new = []
        for name, stat in files.items():
            if name not in before:
                result.added += 1
                new.append(name)
            elif {k: before[name].get(k) for k in stat} != stat:
                result.changed += 1
                new.append(name)
                result.gone_days |= _days(before[name]["days"])
        for name in before.keys() - files.keys():
            result.removed += 1
            result.gone_days |= _days(before[name]["days"])
        result.new[table] = tuple(new)
    return result


def _entries(directory: Path, source: Source, stats: Stats) -> dict[str, dict]:
    return {_name(directory, path): stats[path] for path in source.files}


def _entries_of(table: dict) -> dict[str, dict]:
    return {name: {k: v for k, v in entry.items() if k not in _NOT_STAT} for name, entry in table["files"].items()}


_NOT_STAT = ("days", "last")  # what a manifest's file entry holds besides the file's size and time


def days_of(runs: list[list[str]]) -> set[dt.date]:
    """The days of a manifest's runs (``[[first, last], ...]``)."""
    return _days(runs)


def runs_of(days: Iterable[dt.date]) -> list[list[str]]:
    """Days as a manifest keeps them: runs of consecutive days."""
    return _runs(days)


# -- what to compute again --------------------------------------------------------------------------


def periods(affected: set[dt.date]) -> dict[str, set[dt.date]]:
    """The start of every period, per granularity, that holds an affected day."""
    return {granularity: {ISO.start(day, granularity) for day in affected} for granularity in GRANULARITIES}


def spans(starts: dict[str, set[dt.date]]) -> list[tuple[dt.date, dt.date]]:
    """The days those periods cover, as few inclusive ranges as possible."""
    ranges = sorted(ISO.bounds(start, granularity) for granularity, chosen in starts.items() for start in chosen)
    merged: list[tuple[dt.date, dt.date]] = []
    for lo, hi in ranges:
        if merged and lo <= merged[-1][1] + dt.timedelta(days=1):
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def files_meeting(
    directory: Path, sources: dict[str, Source], after: dict, ranges: list[tuple[dt.date, dt.date]]
) -> dict[str, Source]:
    """Each event table's files with rows on a day of ``ranges``, per the manifest ``after``."""

    out = {}
    for table in EVENT_TABLES:
        source = sources.get(table)
        if source is not None:
            entries = after["tables"][table]["files"]
            chosen = tuple(path for path in source.files if meets(entries[_name(directory, path)]["days"], ranges))
            out[table] = replace(source, files=chosen)
    return out


def meets(runs: list[list[str]], ranges: list[tuple[dt.date, dt.date]]) -> bool:
    """Whether a manifest's runs of days meet one of ``ranges`` (inclusive)."""
    wanted = [(lo.isoformat(), hi.isoformat()) for lo, hi in ranges]  # ISO dates compare as strings
    return any(first <= hi and last >= lo for first, last in runs for lo, hi in wanted)


def merge(stored: pd.DataFrame, fresh: pd.DataFrame, starts: dict[str, set[dt.date]]) -> pd.DataFrame:
    """``stored`` with the recomputed periods replaced by ``fresh``'s values for them."""

    def recomputed(frame: pd.DataFrame) -> np.ndarray:
        hit = np.zeros(len(frame), dtype=bool)
        for granularity, chosen in starts.items():
            periods = pd.to_datetime(sorted(chosen)).as_unit("us")
            hit |= (frame["granularity"] == granularity).to_numpy() & frame["period_start"].isin(periods).to_numpy()
        return hit

    return pd.concat([stored[~recomputed(stored)], fresh[recomputed(fresh)]], ignore_index=True)
