"""Events -> aggregates: every metric value of a data set, built once and persisted.

The entry points, from the outermost:

- ``load_or_build``: a data folder's aggregates from the cache while the folder is unchanged
  (``serving/aggregates.py``, ``cached``), else ``build_and_save``'s: ``build_folder``'s, saved to
  the cache;
- ``build_on_engine``: a data folder or (on Spark) a URL, built on the engine named (``ENGINES``); a
  URL of raw exports is refreshed from the state ``refresh`` keeps where Spark reads and writes it;
- ``build_folder``: a data folder, validated, then built incrementally from its saved build when
  one applies, else in full;
- ``build_in_full``: an event store already validated, built whole.

A build runs the engine over the event tables in one batch and fills the sparse result into a
dense grid: for every project, every metric that applies to it and every period that
overlaps coverage, a value. No activity is a 0; an ending balance carries forward. The result is
saved as one Parquet file in the cache folder under a key made of the data folder's fingerprint
and the catalogue's (``serving/aggregates.py``, ``cache_path``), so the next start with unchanged
data skips the build, and loads none of these modules.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ibis.backends.duckdb
import numpy as np
import pandas as pd

from metrics_kit import files
from metrics_kit.errors import ConfigurationError
from metrics_kit.server.building import exports, increments, refresh
from metrics_kit.server.building.compute import compute_nothing, sparse_values
from metrics_kit.server.building.engines import DuckDB, Engine, EngineKind
from metrics_kit.server.building.spark import Spark
from metrics_kit.server.data import store
from metrics_kit.server.data.schema import EVENT_TABLES
from metrics_kit.server.data.sources import find_sources
from metrics_kit.server.data.store import EventStore, Project, read_last_event
from metrics_kit.server.serving.aggregates import Aggregates, cache_path, cached, catalogue_key
from metrics_kit.server.serving.completeness import read_declaration, utc_text
from metrics_kit.spec.calendar import GRANULARITIES, period_starts
from metrics_kit.spec.catalogue import Catalogue

BUILD_MEMORY_LIMIT = "2GB"
# Event tables small enough to read into memory once per full build: over a folder of many files,
# every read of a view pays for opening them. The engine's one query over them reads fees and
# token_flows once and chain_rewards twice (its sums and its nets); over a single file, a view
# for the first two is as fast as the copy (docs/performance.md).
SMALL_TABLES = ("fees", "token_flows", "chain_rewards")
WINDOW_IN_MEMORY_BYTES = 64 * 2**20  # an incremental build's files read into memory up to this size
_DECIMALS = 9  # DuckDB's parallel float sums differ in the last bits from run to run


def build_in_full(
    event_store: EventStore,
    catalogue: Catalogue,
    *,
    engine: Engine | None = None,
    transactions_per_day: pd.DataFrame | None = None,
    started: float | None = None,
    why: str = "a data set built whole",
) -> Aggregates:
    """Run the engine over the whole data set, on ``engine`` (which holds the store's tables;
    default: DuckDB, on the store's connection), and densify its result (``transactions_per_day``:
    see ``compute.compute``; ``why``: why it is a full build, as the log says)."""
    engine = engine or DuckDB(event_store.backend)
    started = time.perf_counter() if started is None else started
    coverage = event_store.coverage
    sparse = sparse_values(engine, catalogue, transactions_per_day) if coverage is not None else compute_nothing()
    last = read_last_event(event_store.backend) if coverage is not None else None
    meta = {
        "engine": engine.name,
        "fingerprint": event_store.fingerprint,
        "data_dir": event_store.location,
        "build": "full",
        "why": why,
        "last_event": None if last is None else utc_text(last),
        "watermark": None if event_store.watermark is None else utc_text(event_store.watermark),
    }
    return assemble(sparse, coverage, event_store.projects, catalogue, meta, started)


def assemble(
    sparse: pd.DataFrame,
    coverage: tuple[dt.date, dt.date] | None,
    projects: dict[str, Project],
    catalogue: Catalogue,
    meta: dict,
    started: float,
) -> Aggregates:
    """The dense aggregates of ``sparse``: a value for every applicable metric and period of coverage."""
    values: dict[tuple[str, str, str], list] = {}
    if coverage is not None:
        for granularity in GRANULARITIES:  # a granularity without events is still dense zeros
            rows = sparse[sparse["granularity"] == granularity]
            values.update(_densify(rows, granularity, coverage, projects, catalogue))
    meta = {
        "coverage": None if coverage is None else [coverage[0].isoformat(), coverage[1].isoformat()],
        "projects": {
            p.project: {
                "kinds": sorted(p.kinds),
                "regular_pools": p.regular_pools,
                "initial_circulating_supply": p.initial_circulating_supply,
            }
            for p in projects.values()
        },
        "chain_unit": catalogue.chain_unit,
        "count_metrics": [m.name for m in catalogue if m.is_count],
        "catalogue_key": catalogue_key(catalogue),
        **meta,
        "built_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "build_seconds": round(time.perf_counter() - started, 3),
    }
    return Aggregates(meta, values)


def _densify(
    sparse: pd.DataFrame,
    granularity: str,
    coverage: tuple[dt.date, dt.date],
    projects: dict[str, Project],
    catalogue: Catalogue,
) -> dict:
    starts = list(period_starts(coverage[0], coverage[1], granularity))
    grid = pd.Index(pd.to_datetime(starts)).as_unit("us")
    slots = grid.get_indexer(sparse["period_start"])
    if (slots < 0).any():
        raise AssertionError(f"{granularity} values outside coverage {coverage}")  # a bug, never data
    values = sparse["value"].to_numpy(dtype="float64")
    # Row positions per series, not a frame per series: 600 small frames cost more than the rest.
    groups = sparse.groupby(["metric", "project"], sort=False).indices
    out = {}
    for project in projects.values():
        for metric in catalogue.applicable(project.kinds, project.regular_pools):
            dense = np.zeros(len(starts))
            rows = groups.get((metric.name, project.project))
            if rows is not None:
                dense[slots[rows]] = values[rows]
            if metric.aggregation == "ending_balance":
                dense = (project.initial_circulating_supply or 0.0) + np.cumsum(dense)
            series: list[int] | list[float]
            if metric.is_count:
                series = dense.astype(np.int64).tolist()
            else:
                # + 0.0 turns a -0.0 (an empty negative sum) into 0.0.
                series = [round(v, _DECIMALS) + 0.0 for v in dense.tolist()]
            out[metric.name, project.project, granularity] = series
    return out


def load_or_build(data_dir: str | os.PathLike, catalogue: Catalogue, *, rebuild: bool = False, log=print) -> Aggregates:
    """The aggregates of ``data_dir``: from the cache while the data is unchanged, else built
    (incrementally when only files of table folders changed since the last build)."""
    found = None if rebuild else cached(data_dir, catalogue, log=log)
    return found or build_and_save(data_dir, catalogue, rebuild=rebuild, log=log)


def build_and_save(
    data_dir: str | os.PathLike, catalogue: Catalogue, *, rebuild: bool = False, log=print
) -> Aggregates:
    """Build ``data_dir`` (``build_folder``) and save its aggregates where ``cached`` finds them."""
    aggregates = build_folder(Path(data_dir), catalogue, rebuild=rebuild, log=log)
    aggregates.save(cache_path(aggregates.meta["fingerprint"], catalogue))
    return aggregates


def build_folder(
    directory: Path,
    catalogue: Catalogue,
    *,
    rebuild: bool = False,
    log=print,
    stage: Path | None = None,
    on: Engine | None = None,
) -> Aggregates:
    """Validate and build the data folder ``directory``: incrementally from the saved build of this
    folder when one applies (``increments``), else in full; then save the new build state.

    Validation runs on DuckDB; the values are computed on ``on`` (default: DuckDB, on the
    validating connection). ``stage`` also writes the whole validated data set as the normalised
    layout (which takes a full build)."""
    started = time.perf_counter()
    # Read before the files are listed: a declaration written after new files then never claims
    # them complete before they are built.
    declared = read_declaration(directory)
    engine_name = DuckDB.name if on is None else on.name
    state_file = increments.state_path(directory, catalogue_key(catalogue), engine_name)
    state = None if rebuild or stage is not None else increments.State.read(state_file)
    sources = find_sources(directory)
    stats = increments.stat_all(sources)
    todo = increments.plan(state.manifest, directory, sources, stats) if state else "no saved build of this folder"
    # Closed here, not left to the garbage collector: that also removes any files it spilled.
    with contextlib.closing(_build_connection()) as con:
        engine = on or DuckDB(ibis.backends.duckdb.Backend.from_connection(con))
        job = _Job(directory, catalogue, sources, stats, con, engine, log)
        if isinstance(todo, increments.Plan):
            assert state is not None
            validated, after, sparse, projects, how = job.incremental(todo, state)
        else:
            validated, after, sparse, projects = job.full(stage, None if declared is None else utc_text(declared))
            how = {"build": "full", "why": todo}
    last = increments.last_event(after)
    meta = {
        "engine": engine_name,
        "fingerprint": validated.fingerprint,
        "data_dir": str(directory),
        **how,
        "last_event": None if last is None else utc_text(last),
        "watermark": None if declared is None else utc_text(declared),
    }
    aggregates = assemble(sparse, increments.coverage(after), projects, catalogue, meta, started)
    increments.State(after, sparse).save(state_file)
    log(_summary(aggregates.meta))
    return aggregates


@dataclasses.dataclass
class _Job:
    """One build of a data folder: what both kinds of build need."""

    directory: Path
    catalogue: Catalogue
    sources: dict
    stats: increments.Stats
    con: Any  # a DuckDB connection (validation always runs on DuckDB)
    engine: Engine  # where the values are computed
    log: Callable[[str], Any]

    def full(self, stage: Path | None, watermark: str | None):
        validated = store.validate(self.directory, self.con, sources=self.sources, stats=self.stats)
        if self.engine.slow_start:  # progress before the long part
            self.log(f"Validated {self.directory}")
        if stage is not None:  # the layout carries the folder's declared watermark to its builds
            store.write_parquet(validated, stage, watermark)
            self.log(f"Wrote the normalised layout to {stage}")
        after = increments.manifest(self.directory, self.sources, self.stats, validated.days, last=validated.last)
        rows = increments.coverage(after) is not None
        sparse, projects = _compute(validated, self.catalogue, self.engine, rows, stage)
        return validated, after, sparse, projects

    def incremental(self, todo: increments.Plan, state: increments.State):
        checked = store.validate(self.directory, self.con, only=todo.new, sources=self.sources, stats=self.stats)
        after = increments.manifest(
            self.directory, self.sources, self.stats, checked.days, state.manifest, last=checked.last
        )
        new_days = (set(days) for table in EVENT_TABLES for days in checked.days.get(table, {}).values())
        starts = increments.periods(todo.gone_days.union(*new_days))
        ranges = increments.spans(starts)
        meeting = increments.files_meeting(self.directory, self.sources, after, ranges)
        validated = store.window(checked, meeting, ranges, checked.fingerprint)
        # A window of a few files per table is read into memory once, rather than by each of the
        # engine's scans (each opens every file again); a large one is read where it lies.
        window_bytes = sum(self.stats[p]["size"] for source in meeting.values() for p in source.files)
        in_memory = EVENT_TABLES if window_bytes <= WINDOW_IN_MEMORY_BYTES else ()
        fresh, projects = _compute(validated, self.catalogue, self.engine, bool(ranges), in_memory=in_memory)
        read, total = (sum(len(s.files) for s in group.values()) for group in (meeting, _events(self.sources)))
        how = {
            "build": "incremental",
            "changes": todo.describe(),
            "recomputed": {g: len(s) for g, s in starts.items()},
            "files_read": [read, total],
        }
        return validated, after, increments.merge(state.sparse, fresh, starts), projects, how


def _events(sources: dict) -> dict:
    return {t: s for t, s in sources.items() if t in EVENT_TABLES}


def _summary(meta: dict) -> str:
    if meta["build"] == "full":
        return f"Built aggregates in {meta['build_seconds']} s ({meta['why']}: full build)"
    recomputed = ", ".join(f"{n} {g[2:]}{'' if n == 1 else 's'}" for g, n in meta["recomputed"].items())
    read, total = meta["files_read"]
    return (
        f"Updated aggregates incrementally in {meta['build_seconds']} s: {meta['changes']}; "
        f"recomputed {recomputed} from {read} of {total} event files"
    )


def _compute(
    validated,
    catalogue: Catalogue,
    engine: Engine,
    rows: bool,
    staged: Path | None = None,
    in_memory: tuple[str, ...] = SMALL_TABLES,
) -> tuple[pd.DataFrame, dict[str, Project]]:
    """The sparse values of ``validated``'s tables (``rows``: whether they hold any event) and its
    projects, on ``engine`` (``Engine.tables`` says how it gets them)."""
    with engine.tables(validated, in_memory=in_memory, staged=staged) as projects:
        if not rows:
            return compute_nothing(), projects
        # A full build's validation counted the transactions per day; a window's was not validated whole.
        return sparse_values(engine, catalogue, validated.rows_per_day.get("transactions")), projects


def _build_connection():
    # The cap keeps a data set larger than memory within bounds by
    # spilling, into the cache folder rather than DuckDB's default of the current directory.
    return store.connect(memory_limit=BUILD_MEMORY_LIMIT, temp_directory=files.cache_dir() / "duckdb-tmp")


# The engines by the name ``--engine`` takes (``engine=``): the build asks the engine's class, never
# compares its name.
ENGINES: dict[str, EngineKind] = {"duckdb": DuckDB, "spark": Spark}


def is_url(data: str | os.PathLike) -> bool:
    """Whether ``data`` is a URL (``s3a://bucket/events``, ``file:/data/events``), not a local folder."""
    return exports.is_url(data)


def build_on_engine(
    data: str | os.PathLike,
    catalogue: Catalogue,
    *,
    engine: str = "duckdb",
    spark_master: str | None = None,
    spark_stall_timeout: float | None = None,
    stage: Path | None = None,
    rebuild: bool = False,
    state: str | None = None,
    log=print,
) -> Aggregates:
    """Build ``data`` on the engine named ``engine`` (``metrics-kit build --out`` or ``--engine spark``).

    ``data`` is a data folder, validated on DuckDB whatever the engine, and built incrementally
    when a saved build of it applies; Spark then reads what it computes as the normalised layout.
    For Spark, ``data`` may also be the URL (or a path the cluster reads) of raw exports, refreshed
    from the state saved at ``state`` (default: beside the data; ``refresh``) where it fits, else
    built in full; or of a normalised layout written before, which is built in full. The URL is
    read as ``exports.normalised`` writes it (``file:/x``, ``..``, a ``file:`` URL's ``%20``), and
    ``state`` is refused before Spark starts when it is relative or inside the data
    (``refresh.checked_state``)."""
    kind = ENGINES.get(engine)
    if kind is None:
        raise ConfigurationError(f"unknown engine {engine!r}; the engines are {', '.join(ENGINES)}", argument="engine")
    kind.check(spark_master=spark_master, spark_stall_timeout=spark_stall_timeout)
    if state is not None and not is_url(data):
        raise ConfigurationError(
            f"state={state}: a state location is for a URL built on Spark; a data folder's build keeps its "
            "state in the cache folder",
            argument="state",
        )
    if is_url(data):
        # Checked before Spark starts: the URL as it is read and kept, the state's location.
        url = exports.normalised(str(data))
        state = refresh.checked_state(url, state)
        with kind.started_for_url(
            url, spark_master=spark_master, spark_stall_timeout=spark_stall_timeout, log=log
        ) as reader:
            started = time.perf_counter()
            refreshed = refresh.refresh(reader, url, catalogue, state=state, rebuild=rebuild, log=log)
            if refreshed is None:  # a normalised layout: built in full, as it is
                events, per_day = reader.open_url(url, log)
                why = "a normalised layout is built in full"
                aggregates = build_in_full(
                    events, catalogue, engine=reader, transactions_per_day=per_day, started=started, why=why
                )
            else:
                aggregates = assemble(
                    refreshed.sparse, refreshed.coverage, refreshed.projects, catalogue, refreshed.meta, started
                )
            log(_summary(aggregates.meta))
            return aggregates
    with kind.started(spark_master=spark_master, spark_stall_timeout=spark_stall_timeout, log=log) as on:
        return build_folder(Path(data), catalogue, rebuild=rebuild, log=log, stage=stage, on=on)


def build(*args: Any, **kwargs: Any) -> Aggregates:
    """Deprecated: :func:`build_in_full`."""
    warnings.warn("build.build() is now build.build_in_full()", DeprecationWarning, stacklevel=2)
    return build_in_full(*args, **kwargs)


def build_on(*args: Any, **kwargs: Any) -> Aggregates:
    """Deprecated: :func:`build_on_engine`."""
    warnings.warn("build.build_on() is now build.build_on_engine()", DeprecationWarning, stacklevel=2)
    return build_on_engine(*args, **kwargs)
