"""Refreshing the aggregates of raw exports at a URL on Spark: only the days, ISO weeks and months that
the added, changed and removed files touch are computed again, by the rules of a data folder's
incremental build (``increments``: ``compare``, ``periods``, ``spans``, ``merge``).

**The state** a refresh needs is kept where Spark reads and writes, never only on the machine that
ran the last build: in the folder ``--state`` names, by default beside the data (``DATA`` ->
``DATA.metrics-kit-state``, so that the same command run again, from any machine or job, finds
it). It holds, as the local build's state does, the *manifest* (every file of every table, with its
size and modification time from Spark's listing, the days its rows fall on and the time of its
last row) and the *sparse* values (periods with events only).

**Two slots, in turn.** A build writes its version into the slot (``a`` or ``b``) that does not
hold the newest whole one: ``values-S/`` (the sparse values, each row marked with the version's
number and the build's own random token) and then ``commit-S/`` (one row: the version's number,
the token, the manifest, the number of values). A version counts only when its commit is read
whole and its values are all there, each marked with its number and token; so a build interrupted
or failed at any point, even while it overwrites a slot, leaves the newest whole version as it
was, and the next build reads that one. Two builds run at once write the same slot under the same
number, but never the same token: a slot they leave mixed is not whole, and is not read. The state
never holds more than two versions, and needs no file removed (Spark Connect has no way to).

**A state that does not fit** (saved for another data location, other metric definitions, another
engine or another version of metrics-kit, whose rules may differ) is ignored with one line, and
the build runs in full and saves its own.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import pandas as pd

from metrics_kit.errors import ConfigurationError
from metrics_kit.server.building import exports, increments
from metrics_kit.server.building.compute import compute_nothing, sparse_values
from metrics_kit.server.data.schema import EVENT_TABLES
from metrics_kit.server.data.store import Project
from metrics_kit.server.serving.aggregates import catalogue_key
from metrics_kit.server.serving.completeness import utc_text
from metrics_kit.spec.catalogue import Catalogue
from metrics_kit.spec.version import __version__

STATE_VERSION = 2
STATE_SUFFIX = ".metrics-kit-state"
_SLOTS = ("a", "b")  # the two places a version is written to, in turn
_SPARSE_SCHEMA = (
    "granularity STRING, project STRING, period_start STRING, metric STRING, value DOUBLE, number BIGINT, token STRING"
)
_COMMIT_SCHEMA = "number BIGINT, token STRING, manifest STRING, sparse_rows BIGINT"


def state_location(data: str, given: str | None) -> str:
    """Where the refresh state of the exports at ``data`` is kept: ``given`` (``--state``), else
    beside the data folder."""
    if given:
        return given.rstrip("/")
    root = data.rstrip("/")
    if urlparse(root).path in ("", "/"):
        raise ConfigurationError(
            f"data={data}: the refresh state is kept beside the data folder, and this is the root of its "
            "store; give state= a folder Spark reads and writes (s3a://bucket/metrics/state)",
            argument="state",
        )
    return root + STATE_SUFFIX


@dataclass
class Saved:
    number: int
    manifest: dict
    sparse: pd.DataFrame
    slot: str = "a"  # where it is kept


@dataclass
class Refreshed:
    """What a build of a URL computed, for ``build`` to assemble."""

    sparse: pd.DataFrame
    coverage: tuple[dt.date, dt.date] | None
    projects: dict[str, Project]
    meta: dict


def _identity(location: str, catalogue: Catalogue, engine_name: str) -> dict:
    return {
        "state": STATE_VERSION,
        "data": location,
        "catalogue_key": catalogue_key(catalogue),
        "engine": engine_name,
        "metrics_kit": __version__,
    }


def _misfit(manifest: dict, identity: dict) -> str | None:
    """Why a saved state does not fit this build (None: it fits)."""
    reasons = {
        "state": "it is of another format",
        "data": f"it was saved for other data ({manifest.get('data')})",
        "catalogue_key": "it was saved for other metric definitions",
        "engine": f"it was saved by another engine ({manifest.get('engine')})",
        "metrics_kit": f"it was saved by metrics-kit {manifest.get('metrics_kit')} (the rules may differ)",
    }
    return next((reason for key, reason in reasons.items() if manifest.get(key) != identity[key]), None)


def refresh(
    engine: Any, location: str, catalogue: Catalogue, *, state: str | None, rebuild: bool, log: Callable[[str], Any]
) -> Refreshed | None:
    """Build the raw exports at ``location`` on ``engine`` (a ``spark.Spark``): from the saved state
    at ``state`` (default: :func:`state_location`) where it fits, else in full; then save the new
    state. None when ``location`` holds the normalised layout (built in full, without a state)."""
    declared = exports.declared(engine, location)  # before the files are listed
    listed = exports.list_exports(engine, location)
    if listed is None:
        return None
    where = state_location(location, state)
    identity = _identity(listed.location, catalogue, engine.name)
    saved = read(engine, where)  # with --rebuild too: the new version is written beside it, not over it
    todo: increments.Plan | str
    if rebuild:
        todo = "--rebuild"
    elif saved is None:
        todo = f"no saved state at {where}"
    elif (misfit := _misfit(saved.manifest, identity)) is not None:
        log(f"Ignoring the saved state at {where}: {misfit}; building in full")
        todo = misfit
    else:
        todo = increments.compare(saved.manifest["tables"], listed.tables())
    projects = exports.projects_of(engine, listed)
    if isinstance(todo, increments.Plan):
        assert saved is not None
        sparse, manifest, how = _incremental(engine, listed, projects, catalogue, todo, saved, identity)
    else:
        sparse, manifest = _full(engine, listed, projects, catalogue, identity)
        how = {"build": "full", "why": todo}
    log(f"Validated {location} on Spark")
    _save(engine, where, saved, manifest, sparse, log)
    last = increments.last_event(manifest)
    meta = {
        "engine": engine.name,
        "fingerprint": listed.version,
        "data_dir": location,
        **how,
        "last_event": None if last is None else utc_text(last),
        "watermark": None if declared is None else utc_text(declared),
    }
    return Refreshed(sparse, increments.coverage(manifest), projects, meta)


def _full(engine: Any, listed: exports.Listed, projects: dict, catalogue: Catalogue, identity: dict):
    """Every table validated and computed; the manifest of every file."""
    tables = {t: exports.checked(engine, listed.sources.get(t), t, projects) for t in EVENT_TABLES}
    days = {t: exports.file_days(listed.sources[t], tables[t]) for t in EVENT_TABLES if t in listed.sources}
    manifest = _manifest(identity, listed, days, None)
    exports.provide(engine, tables)
    if increments.coverage(manifest) is None:
        return compute_nothing(), manifest
    per_day = exports.transactions_per_day(engine) if "transactions" in listed.sources else None
    return sparse_values(engine, catalogue, per_day), manifest


def _incremental(
    engine: Any,
    listed: exports.Listed,
    projects: dict,
    catalogue: Catalogue,
    todo: increments.Plan,
    saved: Saved,
    identity: dict,
):
    """Only the added and changed files validated; only the periods they (and the removed files)
    touch computed again, from the files with rows in them, and merged into the saved values."""
    days = {}
    for table, names in todo.new.items():
        source = listed.only(table, names)
        if source is not None:
            # Validated, and the days of their rows found, before the window is read: reading the
            # window registers this table's raw files again under the same name.
            days[table] = exports.file_days(source, exports.checked(engine, source, table, projects))
    manifest = _manifest(identity, listed, days, saved.manifest)
    affected = todo.gone_days.union(*(seen for found in days.values() for seen, _last in found.values()))
    starts = increments.periods(affected)
    ranges = increments.spans(starts)
    meeting = {t: _meeting(manifest, t, ranges) for t in EVENT_TABLES}
    window = {
        t: exports.within(exports.checked(engine, listed.only(t, meeting[t]), t, projects, validate=False), ranges)
        for t in EVENT_TABLES
    }
    exports.provide(engine, window)
    fresh = sparse_values(engine, catalogue) if ranges else compute_nothing()
    read = sum(len(names) for names in meeting.values())
    total = sum(len(listed.sources[t].names) for t in EVENT_TABLES if t in listed.sources)
    how = {
        "build": "incremental",
        "changes": todo.describe(),
        "recomputed": {g: len(s) for g, s in starts.items()},
        "files_read": [read, total],
    }
    return increments.merge(saved.sparse, fresh, starts), manifest, how


def _meeting(manifest: dict, table: str, ranges: list[tuple[dt.date, dt.date]]) -> list[str]:
    """The files of ``table`` with rows on a day of ``ranges``, per the manifest."""
    files = manifest["tables"].get(table, {}).get("files", {})
    return [name for name, entry in files.items() if increments.meets(entry["days"], ranges)]


def _manifest(identity: dict, listed: exports.Listed, days: dict, previous: dict | None) -> dict:
    """The manifest of the listed files: days and last rows' times from ``days`` (the files just
    validated), else from ``previous``."""
    tables = {}
    for table, entry in listed.tables().items():
        known = (previous or {}).get("tables", {}).get(table, {}).get("files", {})
        files = {}
        for name, stat in entry["files"].items():
            found = days.get(table, {}).get(name)
            if found is not None:
                seen, last = found
                runs, ending = increments.runs_of(seen), None if last is None else last.isoformat()
            else:
                runs, ending = known.get(name, {}).get("days", []), known.get(name, {}).get("last")
            files[name] = {**stat, "days": runs, "last": ending}
        tables[table] = {**entry, "files": files}
    return {**identity, "tables": tables}


# -- the state, where Spark reads and writes it -----------------------------------------------------


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _folder(root: str, slot: str, commit: bool = False) -> str:
    return f"{root}/{'commit' if commit else 'values'}-{slot}"


def _read_slot(engine: Any, root: str, slot: str) -> Saved | None:
    """The version in ``slot`` if it is whole: its commit read, and every one of its values there
    and written by that commit's build (a write cut short, or two builds' writes crossed, leave a
    slot that is not)."""
    session = engine.session
    try:
        # Given twice: of a single path that does not exist, Spark first looks for a streaming
        # sink's metadata in it and logs not finding it with a stack trace.
        commit_path = _folder(root, slot, commit=True)
        (commit,) = session.read.parquet(commit_path, commit_path).limit(1).collect()
        values = session.read.parquet(_folder(root, slot)).toPandas()
    except Exception:  # none there, or not whole
        return None
    number = commit["number"]
    ours = (values["number"] == number) & (values["token"] == commit["token"])
    if len(values) != commit["sparse_rows"] or not ours.all():
        return None
    manifest = json.loads(commit["manifest"])
    return Saved(number, manifest, increments.normalise(values.drop(columns=["number", "token"])), slot)


def read(engine: Any, root: str) -> Saved | None:
    """The newest whole version of the state at ``root``; None when there is none."""
    found = [saved for saved in (_read_slot(engine, root, slot) for slot in _SLOTS) if saved is not None]
    return max(found, key=lambda saved: saved.number, default=None)


def _save(engine: Any, root: str, saved: Saved | None, manifest: dict, sparse: pd.DataFrame, log) -> None:
    """Write the new state into the slot that does not hold ``saved`` (the newest whole version):
    its values, each row marked with the version's number and this build's token, then its commit.
    A state that cannot be written is said; the build's values stand (and the next build is then a
    full one)."""
    session = engine.session
    slot = _SLOTS[1] if saved is not None and saved.slot == _SLOTS[0] else _SLOTS[0]
    number = (saved.number if saved is not None else 0) + 1
    token = uuid.uuid4().hex
    try:
        frame = sparse[increments.SPARSE_COLUMNS].assign(
            period_start=sparse["period_start"].dt.strftime("%Y-%m-%d"), number=number, token=token
        )
        # Plain object columns: pyspark's Arrow conversion does not take pandas' Arrow-backed strings.
        frame = frame.astype({c: object for c in [*increments.SPARSE_COLUMNS, "token"] if c != "value"})
        session.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")  # the frame goes over as Arrow
        session.createDataFrame(frame, _SPARSE_SCHEMA).write.mode("overwrite").parquet(_folder(root, slot))
        commit = session.createDataFrame([(number, token, json.dumps(manifest), len(frame))], _COMMIT_SCHEMA)
        commit.coalesce(1).write.mode("overwrite").parquet(_folder(root, slot, commit=True))
    except Exception as exc:
        log(f"Could not save the state at {root} ({_first_line(exc)}): the next build will be a full one")
