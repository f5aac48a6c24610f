"""The engines a build computes on, behind one protocol: :class:`Engine`, the members every engine
has, typed (as pyhf's ``TensorBackend``), with one class per engine: :class:`DuckDB` here, ``Spark``
in ``spark.py`` with what only Spark does (its session, reading files where a cluster reads them,
watching its jobs).

The metric definitions (``metrics/expressions.py``, run by ``compute`` and ``passes``) are the same
Ibis expressions on every engine. What is not the same is a member of the engine's class, and code
outside the engine classes holds an :class:`Engine` and asks it: it never compares an engine's name
or class. The members:

- ``name``: the engine's name as the aggregates' meta and a build's saved state record it;
- ``backend``: the Ibis backend its values are computed on;
- ``hash64``: its 64-bit string hash, with which repeated tx_ids are found (a hash only
  makes grouping cheaper: rows whose hashes match are counted by their exact strings);
- ``repeats_by_sorting``: find repeated hashes by sorting them (a window) rather than grouping them;
- ``slow_start``: whether a build says it has validated before the long part;
- ``tables``: how a build's validated tables (validated on DuckDB) reach the engine: DuckDB's
  own views, or, for Spark, the normalised layout written where Spark reads it;
- ``reused``: how a table that one query reads twice is kept (DuckDB computes a CTE read twice
  once; elsewhere it is cached first and released after);
- ``register_written``: how a table of a normalised layout is registered (:func:`open_layout`);
- ``unreadable``: what a failure to read a location means to the person who gave it.

An engine's class (:class:`EngineKind`) checks the options a build is given for it and starts the
engine: the build picks the class by the name ``--engine`` takes (``build.ENGINES``). Reading the
event data at a URL (:class:`ReadsURLs`) is Spark's alone; DuckDB's class says it does not.

The engines build on the event store (``data/store.py``), which imports none of them.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import ibis
import ibis.expr.datatypes as datatypes
import ibis.expr.types as ir
import pandas as pd

from metrics_kit.errors import ConfigurationError, DataFormatError, MetricsKitError
from metrics_kit.server.data import store
from metrics_kit.server.data.schema import TABLES
from metrics_kit.server.data.store import EventStore, Project, Validated

Hash64 = Callable[[ir.StringValue], ir.Value]
Log = Callable[[str], Any]


class Engine(Protocol):
    """What a build asks of the engine it computes on, whichever it is (see the module's docstring)."""

    @property
    def name(self) -> str: ...

    @property
    def backend(self) -> Any: ...  # an ibis.BaseBackend

    @property
    def hash64(self) -> Hash64: ...

    @property
    def repeats_by_sorting(self) -> bool: ...

    @property
    def slow_start(self) -> bool: ...

    def tables(
        self, validated: Validated, in_memory: tuple[str, ...], staged: Path | None = None
    ) -> contextlib.AbstractContextManager[dict[str, Project]]: ...

    def reused(self, table: ir.Table) -> contextlib.AbstractContextManager[ir.Table]: ...

    def register_written(self, root: str, table: str) -> None: ...

    def unreadable(self, given: str, location: str, exc: Exception) -> MetricsKitError | None: ...


class ReadsURLs(Engine, Protocol):
    """An engine that reads the event data at a URL, where a cluster reads it (Spark)."""

    def open_url(self, location: str, log: Log) -> tuple[EventStore, pd.DataFrame | None]: ...


class EngineKind(Protocol):
    """An engine's class, as a build picks it by the name ``--engine`` takes: whether it is the
    default, what it says of the options given for it, and the engine started for a data folder
    (None: DuckDB, which computes on the connection the folder's build validates on, and has nothing
    to start) or for a URL (an engine that does not read one says so)."""

    @property
    def default(self) -> bool: ...  # the engine ``serve --data`` builds on, whose aggregates the cache holds

    @property
    def reads_urls(self) -> bool: ...  # whether ``started_for_url`` starts one (else it says why not)

    @property
    def options(self) -> frozenset[str]: ...  # those of check's options it takes; others it refuses as not its own

    def check(self, *, spark_master: str | None, spark_stall_timeout: float | None) -> None: ...

    def started(
        self, *, spark_master: str | None, spark_stall_timeout: float | None, log: Log
    ) -> contextlib.AbstractContextManager[Engine | None]: ...

    def started_for_url(
        self, url: str, *, spark_master: str | None, spark_stall_timeout: float | None, log: Log
    ) -> contextlib.AbstractContextManager[ReadsURLs]: ...


@ibis.udf.scalar.builtin(name="hash")
def _duckdb_hash(value: str) -> datatypes.UInt64:  # type: ignore[empty-body]
    """DuckDB's 64-bit hash as it is: Ibis's ``hash()`` casts it through BIT to a signed integer,
    which makes the repeated-rows pass slower."""


def plain(value: ir.StringValue) -> ir.Value:
    """No hash: the string itself, which gives the same results (hashing only makes grouping cheaper)."""
    return value


@dataclasses.dataclass
class DuckDB:
    """The embedded engine: the build's DuckDB connection, as an Ibis backend."""

    backend: Any  # ibis.backends.duckdb.Backend
    hash64: Hash64 = _duckdb_hash
    # DuckDB sorts hashes faster than it groups them.
    repeats_by_sorting: bool = True
    name = "duckdb"
    slow_start = False  # nothing to report before the values are computed
    default = True
    reads_urls = False
    options = frozenset[str]()

    @staticmethod
    def check(*, spark_master: str | None, spark_stall_timeout: float | None) -> None:
        """DuckDB takes none of Spark's options."""
        if spark_master:
            raise ConfigurationError("spark_master= is for engine='spark'", argument="spark_master")
        if spark_stall_timeout is not None:
            raise ConfigurationError("spark_stall_timeout= is for engine='spark'", argument="spark_stall_timeout")

    @staticmethod
    @contextlib.contextmanager
    def started(*, spark_master: str | None, spark_stall_timeout: float | None, log: Log) -> Iterator[None]:
        """Nothing to start: DuckDB computes on the connection the build validates on (``build_folder``)."""
        yield None

    @staticmethod
    def started_for_url(
        url: str, *, spark_master: str | None, spark_stall_timeout: float | None, log: Log
    ) -> contextlib.AbstractContextManager[ReadsURLs]:
        """DuckDB reads a local data folder, not a URL."""
        raise ConfigurationError(
            f"data={url}: only engine='spark' reads a URL; DuckDB reads a local data folder", argument="data"
        )

    @contextlib.contextmanager
    def tables(
        self, validated: Validated, in_memory: tuple[str, ...], staged: Path | None = None
    ) -> Iterator[dict[str, Project]]:
        """The validated tables as views of the validating connection (which ``backend`` wraps),
        those named in ``in_memory`` read into memory once; the projects."""
        store.provide(validated, in_memory=in_memory)
        yield store.read_projects(self.backend)

    def reused(self, table: ir.Table) -> contextlib.AbstractContextManager[ir.Table]:
        # DuckDB materialises a CTE read twice in one query once: caching first only adds a round trip.
        return contextlib.nullcontext(table)

    def parquet_parts(self, root: str, table: str) -> str:
        return f"{root}/{table}/*.parquet"

    def register_written(self, root: str, table: str) -> None:
        """Register ``table`` of a normalised layout this build wrote."""
        self.backend.read_parquet(self.parquet_parts(root, table), table_name=table)

    def unreadable(self, given: str, location: str, exc: Exception) -> MetricsKitError | None:
        return None


def open_layout(engine: Engine, location: str, given: str | None = None) -> EventStore:
    """Register the normalised layout at ``location`` (a path or a URL the engine reads, such as
    ``s3a://bucket/events``) as the engine's five tables. Its rows were validated when it was
    written, so only the marker is checked. ``given``: what the user gave for it (``--data``), which
    an error names when the engine cannot read ``location``."""
    root = location.rstrip("/")
    try:
        marker = engine.backend.read_json(f"{root}/{store.LAYOUT_FILE}").to_pyarrow().to_pylist()
    except Exception as exc:
        raise engine.unreadable(given or location, location, exc) or DataFormatError(
            f"{given or location}: not a normalised layout (no readable {store.LAYOUT_FILE}): "
            f"{str(exc).splitlines()[0]}; "
            "write one with `metrics-kit build --data FOLDER --stage DIR` (docs/spark.md)"
        ) from None
    if len(marker) != 1 or marker[0].get("layout") != store.LAYOUT_VERSION:
        raise DataFormatError(
            f"{location}/{store.LAYOUT_FILE}: not a layout this version reads ({store.LAYOUT_VERSION})"
        )
    register_layout(engine, location, given)
    return store.event_store(engine.backend, location, str(marker[0]["fingerprint"]))


def register_layout(engine: Engine, location: str, given: str | None = None) -> None:
    """Register the tables of the normalised layout at ``location`` in ``engine``, reading none
    of its rows: for a layout this build has just written (no marker to check)."""
    root = location.rstrip("/")
    for table in TABLES:
        try:
            engine.register_written(root, table)
        except Exception as exc:
            raise engine.unreadable(given or location, location, exc) or DataFormatError(
                f"{given or location}: cannot read {root}/{table}: {str(exc).splitlines()[0]}"
            ) from None
