"""Refreshing the aggregates of raw exports at a URL on Spark: only the days, ISO weeks and months that
the added, changed and removed files touch are computed again, by the rules of a data folder's
incremental build (``increments``: ``compare``, ``periods``, ``spans``, ``merge``).

**The state** a refresh needs is kept where Spark reads and writes, never only on the machine that
ran the last build: in the folder ``--state`` names, by default beside the data (``DATA`` ->
``DATA.metrics-kit-state``, so that the same command run again, from any machine or job, finds
it). It holds, as the local build's state does, the *manifest* (every file of every table, with its
size and modification time from Spark's listing, the days its rows fall on and the time of its
last row) and the *sparse* values (periods with events only).

**Where.** ``--state`` is a URL or an absolute path (a relative one would be a folder of the
machine that runs the build), outside the data folder (whose listing would read the state's files
as data); both are refused before Spark starts (:func:`checked_state`).

**Two slots, in turn.** A build writes its version into the slot (``a`` or ``b``) that does not
hold the version it started from (else the newest whole one): ``values-S/`` (the sparse values,
each row marked with the version's number and the build's own random token) and then
``commit-S/`` (one row: the version's number, the token, the manifest, the number of values). A
version counts only when its commit is read whole, with a manifest of every field, and its values
are all there, each marked with its number and token; so a build interrupted or failed at any
point, even while it overwrites a slot, leaves the version it started from as it was, and the
next build reads that one. A slot that holds a commit but is not whole is said in a line and
ignored. Two builds run at once write the same slot under the same number, but never the same
token: a slot they leave mixed is not whole, and is not read. The state never holds more than two
versions, and needs no file removed (Spark Connect has no way to).

**A state that does not fit** (saved for another data location, other metric definitions, another
engine or another version of metrics-kit, whose rules may differ) is ignored with one line: the
build refreshes from the other slot's version when that one fits (two catalogues sharing a state
location), else runs in full, and saves its own. A state that cannot be written is said in a line,
with Spark's reason; the build's values stand.
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


def checked_state(data: str, given: str | None) -> str | None:
    """``given`` (``--state``) as the build keeps the state there (:func:`exports.normalised`), checked
    before Spark starts: a location every machine of the job reaches (a URL or an absolute path),
    outside the data at ``data`` (a normalised URL), whose listing would read the state's files as
    data."""
    if given is None:
        return None
    if not exports.is_url(given) and not given.startswith("/"):
        raise ConfigurationError(
            f"state={given}: a relative path is a folder of the machine that runs the build (in its current "
            "folder), which the next run, on another machine or in another folder, does not find; give a "
            "location every machine of the job reaches: a URL (s3a://bucket/metrics/state) or an absolute path "
            "on a file system they share",
            argument="state",
        )
    state = exports.normalised(given)
    if _within(state, data):
        raise ConfigurationError(
            f"state={given}: {'this is' if _parts(state) == _parts(data) else 'inside'} the data folder "
            f"{data}, whose every file is read as data: give a folder outside it (the default is beside it, "
            f"{data}{STATE_SUFFIX})",
            argument="state",
        )
    return state


def _parts(location: str) -> tuple[str, str, tuple[str, ...]]:
    """(scheme, authority, path's names) of a normalised location; an absolute path is taken for
    one of this machine's (``file``), as a local master's Spark reads it."""
    scheme, sep, rest = location.partition("://")
    if not sep:
        return ("file", "", tuple(n for n in location.split("/") if n))
    authority, _slash, path = rest.partition("/")
    return (scheme.lower(), authority, tuple(n for n in path.split("/") if n))


def _within(inner: str, outer: str) -> bool:
    """Whether the location ``inner`` is ``outer`` or inside it (both normalised)."""
    (scheme, authority, names), (o_scheme, o_authority, o_names) = _parts(inner), _parts(outer)
    return (scheme, authority) == (o_scheme, o_authority) and names[: len(o_names)] == o_names


def state_location(data: str, given: str | None) -> str:
    """Where the refresh state of the exports at ``data`` is kept: ``given`` (``--state``, from
    :func:`checked_state`), else beside the data folder."""
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


_OTHER_DEFINITIONS = "it was saved for other metric definitions"
_OTHER_DATA = "it was saved for other data"


def _hint(misfit: str) -> str:
    """What to do about a state that two builds share: each its own state location, which keeps both
    (two slots hold one build's version and the one before it, not two builds' versions)."""
    if misfit == _OTHER_DEFINITIONS:
        return " (another catalogue or --chain-unit: give each its own state location, --state)"
    if misfit.startswith(_OTHER_DATA):
        return " (give each data set its own state location, --state)"
    return ""


def _misfit(manifest: dict, identity: dict) -> str | None:
    """Why a saved state does not fit this build (None: it fits)."""
    reasons = {
        "state": "it is of another format",
        "data": f"{_OTHER_DATA} ({manifest.get('data')})",
        "catalogue_key": _OTHER_DEFINITIONS,
        "engine": f"it was saved by another engine ({manifest.get('engine')})",
        "metrics_kit": f"it was saved by metrics-kit {manifest.get('metrics_kit')} (the rules may differ)",
    }
    return next((reason for key, reason in reasons.items() if manifest.get(key) != identity[key]), None)


def refresh(
    engine: Any, location: str, catalogue: Catalogue, *, state: str | None, rebuild: bool, log: Callable[[str], Any]
) -> Refreshed | None:
    """Build the raw exports at ``location`` (a normalised URL) on ``engine`` (a ``spark.Spark``):
    from the newest version of the saved state at ``state`` (from :func:`checked_state`; default:
    :func:`state_location`) that fits, else in full; then save the new state. None when
    ``location`` holds the normalised layout (built in full, without a state)."""
    declared = exports.declared(engine, location)  # before the files are listed
    listed = exports.list_exports(engine, location)
    if listed is None:
        return None
    where = state_location(location, state)
    identity = _identity(listed.location, catalogue, engine.name)
    # Read with --rebuild too: the new version is written beside the newest, not over it.
    versions, damaged = read(engine, where, log)
    misfits = [_misfit(saved.manifest, identity) for saved in versions]
    base = next((saved for saved, misfit in zip(versions, misfits, strict=True) if misfit is None), None)
    newest_misfit = misfits[0] if misfits else None
    todo: increments.Plan | str
    if rebuild:
        todo = "--rebuild"
    elif not versions:
        todo = f"no {'whole ' if damaged else ''}saved state at {where}"
    elif newest_misfit is not None and base is None:
        log(f"Ignoring the saved state at {where}: {newest_misfit}{_hint(newest_misfit)}; building in full")
        todo = newest_misfit
    else:
        assert base is not None
        if newest_misfit is not None:
            log(
                f"Ignoring the newest version of the saved state at {where}: {newest_misfit}"
                f"{_hint(newest_misfit)}; refreshing from the version before it"
            )
        todo = increments.compare(base.manifest["tables"], listed.tables())
    projects = exports.projects_of(engine, listed)
    if isinstance(todo, increments.Plan):
        assert base is not None
        sparse, manifest, how = _incremental(engine, listed, projects, catalogue, todo, base, identity)
    else:
        sparse, manifest = _full(engine, listed, projects, catalogue, identity)
        how = {"build": "full", "why": todo}
        base = None
    log(f"Validated {location} on Spark")
    # The version kept while the new one is written: the one this build started from, else the newest.
    keep = base or (versions[0] if versions else None)
    after = (
        "the next build refreshes from the version saved before"
        if keep is not None and _misfit(keep.manifest, identity) is None
        else "the next build will be a full one"
    )
    number = max((saved.number for saved in versions), default=0) + 1
    _save(engine, where, keep, number, manifest, sparse, log, after)
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


def _folder(root: str, slot: str, commit: bool = False) -> str:
    return f"{root}/{'commit' if commit else 'values'}-{slot}"


_TABLE_FIELDS = {"folder": bool, "fmt": str, "files": dict}
_FILE_FIELDS = {"size": int, "mtime": int, "days": list}


def _manifest_problem(manifest: Any) -> str | None:
    """What is wrong with a manifest read from a commit (None: it has every field a refresh reads,
    of its type); one of another format is left to :func:`_misfit` to say."""
    if not isinstance(manifest, dict):
        return f"its manifest is not a JSON object ({type(manifest).__name__})"
    if manifest.get("state") != STATE_VERSION:
        return None
    missing = [key for key in ("data", "catalogue_key", "engine", "metrics_kit", "tables") if key not in manifest]
    if missing:
        return f"its manifest has no {', '.join(map(repr, missing))}"
    tables = manifest["tables"]
    if not isinstance(tables, dict) or not all(isinstance(entry, dict) for entry in tables.values()):
        return "its manifest's tables are not JSON objects"
    for table, entry in tables.items():
        if not all(isinstance(entry.get(key), kind) for key, kind in _TABLE_FIELDS.items()):
            return f"its manifest's table {table!r} lacks {', '.join(_TABLE_FIELDS)}"
        for name, file in entry["files"].items():
            fields = isinstance(file, dict) and all(isinstance(file.get(k), t) for k, t in _FILE_FIELDS.items())
            if not fields or not _dates(file["days"]) or not isinstance(file.get("last"), str | None):
                return f"its manifest's entry of {table} file {name!r} is damaged"
    return None


def _dates(runs: list) -> bool:
    """Whether ``runs`` are a manifest's runs of days, ``[[first, last], ...]`` in ISO dates."""
    try:
        return all(dt.date.fromisoformat(lo) <= dt.date.fromisoformat(hi) for lo, hi in runs)
    except (TypeError, ValueError):
        return False


def _read_slot(engine: Any, root: str, slot: str) -> Saved | str | None:
    """The version in ``slot`` if it is whole: its commit read, with a manifest of every field, and
    every one of its values there and written by that commit's build (a write cut short, or two
    builds' writes crossed, leave a slot that is not). Else why it is not (a str), or None when the
    slot has no commit (none written yet)."""
    session = engine.session
    try:
        # Given twice: of a single path that does not exist, Spark first looks for a streaming
        # sink's metadata in it and logs not finding it with a stack trace.
        commit_path = _folder(root, slot, commit=True)
        commits = session.read.schema(_COMMIT_SCHEMA).parquet(commit_path, commit_path).limit(1).collect()
    except Exception as exc:
        if engine.by_interrupt(exc):
            raise KeyboardInterrupt from None
        reason = exports.one_line(exc)
        if "PATH_NOT_FOUND" in str(exc) or "Path does not exist" in reason:
            return None
        if "No FileSystem for scheme" in reason:
            raise ConfigurationError(
                f"state={root}: Spark has no file system for this scheme ({reason}); give a location Spark reads "
                "and writes (s3a://bucket/metrics/state, hdfs://..., file:///...)",
                argument="state",
            ) from None
        return f"its commit cannot be read ({reason})"
    if not commits:
        return "its commit is empty"
    (commit,) = commits
    try:
        manifest = json.loads(commit["manifest"])
    except (TypeError, ValueError):
        return "its manifest is not JSON"
    problem = _manifest_problem(manifest)
    if problem is not None:
        return problem
    try:
        # By the schema: a part without one of its columns reads as nulls there, not as ours.
        values = session.read.schema(_SPARSE_SCHEMA).parquet(_folder(root, slot)).toPandas()
    except Exception as exc:
        if engine.by_interrupt(exc):
            raise KeyboardInterrupt from None
        return f"its values cannot be read ({exports.one_line(exc)})"
    number = commit["number"]
    ours = (values["number"] == number) & (values["token"] == commit["token"])
    if len(values) != commit["sparse_rows"] or not ours.all():
        return "its values are not all its commit's (a write stopped before its end, or two builds at once)"
    return Saved(number, manifest, increments.normalise(values.drop(columns=["number", "token"])), slot)


def read(engine: Any, root: str, log: Callable[[str], Any]) -> tuple[list[Saved], bool]:
    """The whole versions of the state at ``root``, the newest first, and whether a slot holds a
    commit but is not whole (said in a line, and ignored)."""
    found, damaged = [], False
    with engine.quiet("OFF"):  # a slot that cannot be read is said here, in a line
        for slot in _SLOTS:
            saved = _read_slot(engine, root, slot)
            if isinstance(saved, str):
                log(f"Ignoring slot {slot} of the saved state at {root}: {saved}")
                damaged = True
            elif saved is not None:
                found.append(saved)
    return sorted(found, key=lambda saved: saved.number, reverse=True), damaged


def _save(
    engine: Any, root: str, keep: Saved | None, number: int, manifest: dict, sparse: pd.DataFrame, log, after: str
) -> None:
    """Write the new state, version ``number``, into the slot that does not hold ``keep`` (the
    version this build started from, or the newest): its values, each row marked with the version's
    number and this build's token, then its commit. A state that cannot be written is said, with
    Spark's reason and ``after`` (what the next build does); the build's values stand."""
    session = engine.session
    slot = _SLOTS[1] if keep is not None and keep.slot == _SLOTS[0] else _SLOTS[0]
    token = uuid.uuid4().hex
    try:
        with engine.quiet("OFF"):  # a write that fails is said here, in a line
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
        if engine.by_interrupt(exc):  # Ctrl-C: Spark was stopped under the write
            raise KeyboardInterrupt from None
        log(f"Could not save the state at {root}: {exports.one_line(exc)}; the aggregates are built, and {after}")
