"""What differs between the engines a build runs on: one class per backend, DuckDB and Spark.

The metric definitions (``metrics/expressions.py``, run by ``compute`` and ``passes``) are the same
Ibis expressions on every backend.
What is not the same lives here, and nowhere else checks a backend's name:

- ``hash64``: the backend's 64-bit string hash, with which repeated tx_ids are found (a hash only
  makes grouping cheaper: rows whose hashes match are counted by their exact strings);
- ``repeats_by_sorting``: find repeated hashes by sorting them (a window) rather than grouping them;
- ``reused``: how a table that one query reads twice is kept (DuckDB computes a CTE read twice
  once; elsewhere it is cached first and released after);
- ``tables``: how a build's validated tables (validated on DuckDB) reach the backend: DuckDB's
  own views, or, for Spark, the normalised layout written where Spark reads it;
- ``parquet_parts``: how a folder of Parquet parts is named to the backend's reader;
- ``unreadable``: what a failure to read a location means to the person who gave it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import ibis
import ibis.expr.datatypes as dt
import ibis.expr.types as ir

from metrics_kit import files
from metrics_kit.errors import ConfigurationError, DataFormatError, MetricsKitError
from metrics_kit.server.data import store
from metrics_kit.server.data.schema import COLUMNS, TABLES
from metrics_kit.server.data.store import EventStore, Project, Validated

Hash64 = Callable[[ir.StringValue], ir.Value]


@ibis.udf.scalar.builtin(name="xxhash64")
def _xxhash64(value: str) -> int:  # type: ignore[empty-body]
    """Spark's 64-bit xxHash: Ibis compiles ``hash()`` to Spark's 32-bit ``HASH``, whose collisions
    among millions of tx_ids would carry many thousands of rows that are not repeated through the
    repeated-rows pass (exact still, as every collision is, but slower)."""


@ibis.udf.scalar.builtin(name="hash")
def _duckdb_hash(value: str) -> dt.UInt64:  # type: ignore[empty-body]
    """DuckDB's 64-bit hash as it is: Ibis's ``hash()`` casts it through BIT to a signed integer,
    which makes the repeated-rows pass slower."""


def plain(value: ir.StringValue) -> ir.Value:
    """No hash: the string itself, which gives the same results (hashing only makes grouping cheaper)."""
    return value


_SPARK_TYPE = {"str": "STRING", "float": "DOUBLE", "bool": "BOOLEAN", "time": "TIMESTAMP"}
# Spark reads a path as a glob pattern when it holds one of these: a file named with one is read by
# its name with the character escaped.
_GLOB = re.compile(r"([\\\[\]{}*?])")
# Each part's columns are read by a Spark job of their own: a few at a time.
_SCHEMA_THREADS = 8
# Spark's reading of raw exports, so that it takes what DuckDB takes: Parquet nanosecond timestamps
# (which Spark 4 refuses as a type) as 64-bit integers, converted here; a timestamp without a time
# zone as a timestamp like any other (UTC: the session's zone), not as a type of its own that does
# not mix with the others across parts; and the vectorized reader, with which the nanosecond probe
# (``Spark.nanosecond``) tells those integers from plain ones.
EXPORT_SETTINGS = {
    "spark.sql.legacy.parquet.nanosAsLong": "true",
    "spark.sql.parquet.inferTimestampNTZ.enabled": "false",
    "spark.sql.parquet.enableVectorizedReader": "true",
}


@dataclasses.dataclass(frozen=True)
class PartGroup:
    """Parts of one table that Spark reads together: the same columns of the same types (``schema``,
    a pyspark StructType, as Spark found it in each), and the same values supplied by their folders."""

    paths: tuple[str, ...]  # as the listing gives them
    schema: Any
    supplied: dict[str, str | None]  # column -> value, from Hive-style folder levels
    nanos: frozenset[str]  # 64-bit integer columns that hold nanosecond timestamps


@dataclasses.dataclass
class DuckDB:
    """The embedded engine: the build's DuckDB connection, as an Ibis backend."""

    con: Any  # ibis.backends.duckdb.Backend
    hash64: Hash64 = _duckdb_hash
    # DuckDB sorts hashes faster than it groups them.
    repeats_by_sorting: bool = True
    name = "duckdb"
    slow_start = False  # nothing to report before the values are computed

    @contextlib.contextmanager
    def tables(
        self, validated: Validated, in_memory: tuple[str, ...], staged: Path | None = None
    ) -> Iterator[dict[str, Project]]:
        """The validated tables as views of the validating connection (which ``con`` wraps), those
        named in ``in_memory`` read into memory once; the projects."""
        store.provide(validated, in_memory=in_memory)
        yield store.read_projects(self.con)

    def reused(self, table: ir.Table) -> contextlib.AbstractContextManager[ir.Table]:
        # DuckDB materialises a CTE read twice in one query once: caching first only adds a round trip.
        return contextlib.nullcontext(table)

    def parquet_parts(self, root: str, table: str) -> str:
        return f"{root}/{table}/*.parquet"

    def register_written(self, root: str, table: str) -> None:
        """Register ``table`` of a normalised layout this build wrote."""
        self.con.read_parquet(self.parquet_parts(root, table), table_name=table)

    def unreadable(self, given: str, location: str, exc: Exception) -> MetricsKitError | None:
        return None


@dataclasses.dataclass
class Spark:
    """A Spark session (local, a cluster, or Spark Connect) as Ibis's PySpark backend.

    ``remote``: the Spark Connect URL, its secrets masked (None: a session of this process's JVM)."""

    con: Any  # ibis.backends.pyspark.Backend
    remote: str | None = None
    session: Any = None  # the pyspark session ``con`` runs on
    hash64: Hash64 = _xxhash64
    # A global sort may run on one worker; a grouping by the hash spreads over all of them.
    repeats_by_sorting: bool = False
    name = "pyspark"
    slow_start = True  # validation is done before the long part: say so

    @contextlib.contextmanager
    def tables(
        self, validated: Validated, in_memory: tuple[str, ...], staged: Path | None = None
    ) -> Iterator[dict[str, Project]]:
        """The validated tables read by Spark as the normalised layout: ``staged`` if it was
        written, else a temporary one in the cache folder, removed after; the projects, read on
        DuckDB from the validating connection (no Spark job for a few rows)."""
        with contextlib.ExitStack() as stack:
            if staged is None:
                (files.cache_dir() / "stage").mkdir(parents=True, exist_ok=True)
                staged = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=files.cache_dir() / "stage")))
                store.write_parquet(validated, staged)
            # Absolute: executors do not share the driver's working directory. Symbolic links are
            # left as they are: the path is resolved where Spark reads it.
            register_layout(self, os.path.abspath(staged), given=str(validated.directory))
            yield store.read_projects(store.provide(validated, in_memory=()))

    @contextlib.contextmanager
    def reused(self, table: ir.Table) -> Iterator[ir.Table]:
        # Spark would compute a subquery read twice twice: persisted, released after the query.
        with table.cache() as cached:
            yield cached

    def parquet_parts(self, root: str, table: str) -> str:
        # Spark reads a folder of parts (a glob makes it log a stack trace).
        return f"{root}/{table}"

    def register_written(self, root: str, table: str) -> None:
        """Register ``table`` of a normalised layout this build wrote: its schema is known, so
        Spark reads no file to infer it (a job per table otherwise)."""
        schema = ", ".join(f"`{c}` {_SPARK_TYPE[kind]}" for c, kind in COLUMNS[table].items())
        self.session.read.schema(schema).parquet(self.parquet_parts(root, table)).createOrReplaceTempView(table)

    # -- raw exports where the cluster reads them (``exports``) ---------------------------

    def listing(self, root: str) -> list[tuple[str, int, int]]:
        """(path, size, modification time in ms) of every file under ``root``, from Spark's own
        listing (the binaryFile source reads no file's content unless asked for it); Spark leaves
        out names starting with '_' or '.'."""
        files = (
            self.session.read.format("binaryFile")
            .option("recursiveFileLookup", "true")
            .load(root)
            .selectExpr("path", "length", "unix_millis(modificationTime) AS mtime")
        )
        listed = [(r["path"], int(r["length"]), int(r["mtime"])) for r in files.collect()]
        # The binaryFile source leaves out empty files; a reader's file index keeps them (as URIs,
        # names escaped): each one it has that the listing lacks is an empty file (0 bytes).
        known = {path for path, _size, _mtime in listed}
        for uri in self.session.read.option("recursiveFileLookup", "true").text(root).inputFiles():
            path = _listed(uri)
            if path not in known:
                listed.append((path, 0, 0))
        return listed

    def folders_named(self, root: str, name: str) -> list[str] | None:
        """The files in the folders ``root/name`` and ``root/*/name``, which Spark's listing leaves
        out when ``name`` starts with '_' (``_delta_log``); None when there is no such folder."""
        pattern = f"{_pattern(root)}/{{{name},*/{name}}}"
        try:
            # Given twice: of a single path that does not exist, Spark first looks for a streaming
            # sink's metadata in it and logs not finding it with a stack trace.
            found = self.session.read.format("binaryFile").load([pattern, pattern]).select("path").collect()
        except Exception as exc:
            if "PATH_NOT_FOUND" in str(exc):
                return None
            raise
        return sorted({row["path"] for row in found})

    def contents(self, paths: Sequence[str]) -> dict[str, bytes]:
        """The bytes of a few small files (the projects table), by path as the listing gives it."""
        files = self.session.read.format("binaryFile").load(list(map(_pattern, paths))).select("path", "content")
        return {r["path"]: bytes(r["content"]) for r in files.collect()}

    def _reader(self, fmt: str) -> Any:
        # Named files, never partition discovery: the folders' Hive-style levels are read by
        # ``exports`` as they are on DuckDB.
        reader = self.session.read.option("recursiveFileLookup", "true")
        if fmt == "parquet":
            return reader.format("parquet")
        # The format's dialect (docs/data-format.md): a header row, comma, double quotes; every
        # value as text, so that a bad one is reported rather than guessed; a malformed line fails.
        return reader.format("csv").options(
            header=True, inferSchema=False, sep=",", quote='"', escape='"', encoding="UTF-8", mode="FAILFAST"
        )

    def schemas(self, fmt: str, paths: Sequence[str]) -> list[Any]:
        """Each file's own columns (a pyspark StructType: Parquet's types as Spark reads them, a CSV
        header's names as text), or the exception that reading it raised. A file at a time: read
        together, Spark merges the files' columns and cannot say which file has which (a job each,
        a few at a time)."""

        def one(path: str) -> Any:
            try:
                return self._reader(fmt).load(_pattern(path)).schema
            except Exception as exc:
                return exc

        if len(paths) == 1:
            return [one(paths[0])]
        with ThreadPoolExecutor(min(_SCHEMA_THREADS, len(paths)), thread_name_prefix="metrics-kit schema") as pool:
            return list(pool.map(one, paths))

    def nanosecond(self, paths: Sequence[str], column: str) -> set[str]:
        """Which of ``paths`` (Parquet files in which Spark reads ``column`` as a 64-bit integer)
        hold nanosecond timestamps in it, rather than integers: Spark reads both as integers
        (``EXPORT_SETTINGS``), but its vectorized reader reads only a plain integer column as a
        decimal. The files it could read so are the plain ones; a file with no rows is counted
        with the timestamps (it has no value to read either way). Paths as the listing gives them."""
        frame = (
            self.session.read.schema(f"`{column}` DECIMAL(20,0)")
            .option("ignoreCorruptFiles", "true")
            .option("recursiveFileLookup", "true")
            .parquet(*map(_pattern, paths))
        )
        counted = frame.groupBy(frame["_metadata.file_path"].alias("file")).agg({column: "count"})
        with self._quiet():  # each timestamp file is logged as corrupt, with a stack trace
            plain = {_listed(row["file"]) for row in counted.collect()}
        return {path for path in paths if path not in plain}

    @contextlib.contextmanager
    def _quiet(self) -> Iterator[None]:
        """Spark's log below errors left out while it runs, in a session of this process (a Spark
        Connect server logs on its own machine)."""
        if self.remote is not None:
            yield
            return
        context = self.session.sparkContext
        context.setLogLevel("ERROR")
        try:
            yield
        finally:
            context.setLogLevel(context.getConf().get("spark.log.level", "WARN"))

    def raw(
        self, name: str, fmt: str, groups: Sequence[PartGroup], types: dict[str, str]
    ) -> tuple[ir.Table, list[str]]:
        """The parts of ``groups`` as one table ``name``: each column of ``types`` (column -> Spark
        type) as that type, nanosecond integers as timestamps (truncated to microseconds, as
        DuckDB's normalisation does), values supplied by folders as columns, and each row's file
        (``_file``); and the files read, as URIs."""
        from pyspark.sql import functions as F

        frames = []
        for group in groups:
            frame = self._reader(fmt).schema(group.schema).load(list(map(_pattern, group.paths)))
            columns = []
            for column, target in types.items():
                if column in group.supplied:
                    value = F.lit(group.supplied[column]).cast("string")
                elif column in group.nanos:
                    value = F.expr(f"timestamp_micros((`{column}` - pmod(`{column}`, 1000)) div 1000)")
                else:
                    value = F.col(f"`{column}`")
                columns.append(value.cast(target).alias(column))
            frames.append(frame.select(*columns, frame["_metadata.file_path"].alias("_file")))
        table = functools.reduce(lambda a, b: a.unionByName(b), frames)
        read = table.inputFiles()
        table.createOrReplaceTempView(name)
        return self.con.table(name), list(read)

    def not_utf8(self, paths: Sequence[str]) -> tuple[str, bytes] | None:
        """(file as a URI, the line's bytes) of a line of the CSV files ``paths`` that is not UTF-8,
        or None. The CSV reader decodes each line replacing a bad byte with U+FFFD, which is also a
        legal character of UTF-8 text: it cannot tell the two apart. The text source keeps each
        line's bytes as they are, and a line re-encoded as UTF-8 differs from its bytes exactly
        when they are not UTF-8 (the bad bytes come back as U+FFFD's three)."""
        lines = self.session.read.text(list(map(_pattern, paths)))
        bad = lines.where("CAST(value AS BINARY) <> encode(value, 'UTF-8')")
        found = bad.selectExpr("_metadata.file_path AS file", "CAST(value AS BINARY) AS line").limit(1).collect()
        return (found[0]["file"], bytes(found[0]["line"])) if found else None

    def unreadable(self, given: str, location: str, exc: Exception) -> MetricsKitError | None:
        """A path that a Spark Connect server cannot read: named as the user gave it, with what to do."""
        if self.remote is None or "PATH_NOT_FOUND" not in str(exc):
            return None
        if given == location:
            return DataFormatError(
                f"data={given}: the Spark Connect server at {self.remote} cannot read this path: it reads "
                "paths on its own machine, not on this one. Put the data where the cluster reads it "
                "(s3a://bucket/events, hdfs://..., or a file system the server mounts at the same path) "
                "and give that URL or path as data= (docs/spark.md)"
            )
        return DataFormatError(
            f"data={given}: the Spark Connect server at {self.remote} cannot read {location}, where this "
            "machine wrote the validated data for it: the server reads paths on its own machine, not on "
            "this one. Give stage= a folder on a file system the server mounts at the same path, or put "
            "the data where the cluster reads it (s3a://bucket/events, hdfs://...) and give that URL as "
            "data= (docs/spark.md)"
        )


def open_layout(backend: Backend, location: str, given: str | None = None) -> EventStore:
    """Register the normalised layout at ``location`` (a path or a URL the backend reads, such as
    ``s3a://bucket/events``) as the backend's five tables. Its rows were validated when it was
    written, so only the marker is checked. ``given``: what the user gave for it (``--data``), which
    an error names when the backend cannot read ``location``."""
    root = location.rstrip("/")
    try:
        marker = backend.con.read_json(f"{root}/{store.LAYOUT_FILE}").to_pyarrow().to_pylist()
    except Exception as exc:
        raise backend.unreadable(given or location, location, exc) or DataFormatError(
            f"{given or location}: not a normalised layout (no readable {store.LAYOUT_FILE}): "
            f"{str(exc).splitlines()[0]}; "
            "write one with `metrics-kit build --data FOLDER --stage DIR` (docs/spark.md)"
        ) from None
    if len(marker) != 1 or marker[0].get("layout") != store.LAYOUT_VERSION:
        raise DataFormatError(
            f"{location}/{store.LAYOUT_FILE}: not a layout this version reads ({store.LAYOUT_VERSION})"
        )
    register_layout(backend, location, given)
    return store.event_store(backend.con, location, str(marker[0]["fingerprint"]))


def register_layout(backend: Backend, location: str, given: str | None = None) -> None:
    """Register the tables of the normalised layout at ``location`` in ``backend``, reading none
    of its rows: for a layout this build has just written (no marker to check)."""
    root = location.rstrip("/")
    for table in TABLES:
        try:
            backend.register_written(root, table)
        except Exception as exc:
            raise backend.unreadable(given or location, location, exc) or DataFormatError(
                f"{given or location}: cannot read {root}/{table}: {str(exc).splitlines()[0]}"
            ) from None


def _pattern(path: str) -> str:
    """A path as the listing gives it, as a reader takes it: Spark reads a path as a glob pattern,
    in which a file's own '[', '*', ... are escaped. Neither a URI nor escaped further: a '#' or a
    '%' in it is part of a name."""
    return _GLOB.sub(r"\\\1", path)


def _listed(uri: str) -> str:
    """A file as the listing names it (``file:/a/b #2.csv``), from its URI as a reader gives it
    (``_metadata.file_path``, ``inputFiles()``: ``file:///a/b%20%232.csv``)."""
    parts = urllib.parse.urlparse(uri)
    return f"{parts.scheme}:{'//' + parts.netloc if parts.netloc else ''}{urllib.parse.unquote(parts.path)}"


# A Spark job whose stages have tasks waiting and none running for this long has no executor to
# run on (every worker lost, or none with free cores): the build stops rather than wait forever.
STALL_SECONDS = 120.0
_POLL_SECONDS = 2.0


@contextlib.contextmanager
def watched(backend: Spark, stall_seconds: float = STALL_SECONDS) -> Iterator[None]:
    """Stop the session's jobs, and the build with a clear error, when its running stages make no
    progress (no task running, none finishing or failing) for ``stall_seconds`` (0: never). Spark itself
    re-runs the tasks of a lost executor on the others, and waits without end when there are none.
    Only a session of this process can be watched (pyspark's status tracker); a Spark Connect
    server schedules its jobs itself."""
    if backend.remote is not None or not stall_seconds:
        yield
        return
    context = backend.session.sparkContext
    tracker = context.statusTracker()
    done = threading.Event()
    stalled: list[float] = []

    def watch() -> None:
        last, changed = None, time.monotonic()
        while not done.wait(_POLL_SECONDS):
            stages = [info for info in map(tracker.getStageInfo, tracker.getActiveStageIds()) if info is not None]
            now = time.monotonic()
            state = tuple((i.stageId, i.numCompletedTasks, i.numFailedTasks) for i in stages)
            if not stages or any(i.numActiveTasks for i in stages) or state != last:
                last, changed = state, now
            elif now - changed > stall_seconds:
                stalled.append(now - changed)
                context.cancelAllJobs()
                return

    watcher = threading.Thread(target=watch, name="metrics-kit spark watcher", daemon=True)
    watcher.start()
    try:
        yield
    except Exception:
        if stalled:
            raise ConfigurationError(
                f"Spark ran no task for {stalled[0]:.0f} s while the build waited: the cluster has no executor "
                "left to run on (its workers stopped or were lost, or none has free cores). Nothing was written; "
                "check the cluster (its master's web page lists the workers) and build again"
            ) from None
        raise
    finally:
        done.set()
        watcher.join()


Backend = DuckDB | Spark
