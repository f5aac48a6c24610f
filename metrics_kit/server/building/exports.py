"""Raw exports where the cluster reads them (``s3a://bucket/events``, ``file:///shared/events``):
found from Spark's listing, validated on Spark with the rules of ``rules``, provided as the
engine's tables.

The folder holds the tables as ``--data DIR`` does (docs/data-format.md), and is read by the same
rules (``sources``): ``NAME.parquet``, ``NAME.csv`` or a folder ``NAME/`` of Parquet or CSV parts
at any depth; Hive-style folder levels (``project=demoswap/``) supply the column they name; a
0-byte part is an empty part; a table folder holding ``_delta_log/`` is refused. Each part is
checked on its own (its columns, and their types, as Spark reads that file), and parts whose types
differ are read apart and brought to one type per column, as DuckDB's reader does: a timestamp and
ISO text as text, a nanosecond timestamp as a timestamp, integers and doubles as doubles.

No event row passes through this process: it gets the listing, each part's columns, the projects
table (a few rows of metadata, validated here on DuckDB like a local folder's), one row of counts
per table and, on the way to an error, the first offending values. The data version is the
listing's names, sizes and modification times; a build refreshes from the state ``refresh`` keeps.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import posixpath
import re
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

import ibis
import ibis.expr.datatypes as datatypes
import pandas as pd

from metrics_kit.errors import DataFormatError, MetricsKitError
from metrics_kit.server.data import rules, store
from metrics_kit.server.data.schema import COLUMNS, EVENT_TABLES, TABLES
from metrics_kit.server.data.sources import (
    DELTA_LOG,
    check_readable,
    delta_table,
    empty_table_file,
    hive_levels,
    not_a_part,
    part_format,
    skipped,
)
from metrics_kit.server.serving.completeness import WATERMARK_FILE, parse_declaration

_SHOWN_ROWS = 5
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
# A URL: a scheme of two characters or more (not a drive letter), a colon and a slash.
_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]+):/")
_IBIS_TYPE = {
    "str": datatypes.string,
    "float": datatypes.float64,
    "bool": datatypes.boolean,
    "time": datatypes.timestamp,
}
_TIMES = {"timestamp", "timestamp_ntz", "date"}
_NUMBERS = {"tinyint", "smallint", "int", "bigint", "float", "double"}


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


@dataclass(frozen=True)
class PartGroup:
    """Parts of one table that Spark reads together: the same columns of the same types (``schema``,
    a pyspark StructType, as Spark found it in each), and the same values supplied by their folders."""

    paths: tuple[str, ...]  # as the listing gives them
    schema: Any
    supplied: dict[str, str | None]  # column -> value, from Hive-style folder levels
    nanos: frozenset[str]  # 64-bit integer columns that hold nanosecond timestamps


class Cluster(Protocol):
    """What the validation of raw exports asks of the engine that reads them where a cluster reads
    them: the Spark engine (``spark.Spark``), which also reads the URL (``Spark.open_url``)."""

    @property
    def backend(self) -> Any: ...  # its Ibis backend

    @property
    def session(self) -> Any: ...  # its pyspark session

    def listing(self, root: str) -> list[tuple[str, int, int]]: ...

    def folders_named(self, root: str, name: str) -> list[str] | None: ...

    def contents(self, paths: Sequence[str]) -> dict[str, bytes]: ...

    def small_file(self, path: str) -> bytes | None: ...

    def schemas(self, fmt: str, paths: Sequence[str]) -> list[Any]: ...

    def parquet_files(self, paths: Sequence[str]) -> list[bool]: ...

    def nanosecond(self, paths: Sequence[str], column: str) -> set[str]: ...

    def raw(
        self, name: str, fmt: str, groups: Sequence[PartGroup], types: dict[str, str]
    ) -> tuple[ibis.Table, list[str]]: ...

    def not_utf8(self, paths: Sequence[str]) -> tuple[str, bytes] | None: ...

    def unreadable(self, given: str, location: str, exc: Exception) -> MetricsKitError | None: ...


@dataclass(frozen=True)
class _Source:
    table: str
    fmt: str
    paths: tuple[str, ...]  # as the listing gives them: a scheme, then the path unescaped
    names: tuple[str, ...]  # relative to the root, as messages show them
    sizes: tuple[int, ...]
    folder: bool

    @property
    def label(self) -> str:
        if not self.folder or len(self.paths) == 1:
            return self.names[0]
        return f"{self.table}/ ({len(self.paths)} {self.fmt} files)"

    def parts(self) -> list[tuple[str, str]]:
        """(path, name) of each file that holds rows: a 0-byte part is an empty part."""
        return [(path, name) for path, name, size in zip(self.paths, self.names, self.sizes, strict=True) if size]

    def name(self, uri: str) -> str:
        """A file as messages name it, from its URI as Spark's readers give it."""
        names = {_plain(path): name for path, name in zip(self.paths, self.names, strict=True)}
        return names.get(_from_uri(uri), uri)


@dataclass(frozen=True)
class Exports:
    store: store.EventStore
    rows_per_day: pd.DataFrame | None  # the transactions' rows per (day, project, action, pool_type)


def one_line(exc: BaseException) -> str:
    """Why a Spark call failed, in one line: for an error of the JVM (py4j's ``Py4JJavaError``,
    whose own first line only names the call), the message of the innermost exception that has
    one (Hadoop's ``Parent path is not a directory: ...``, not ``An error occurred while calling
    o540.parquet.``); else the error's first line."""
    java = getattr(exc, "java_exception", None)
    found = None
    try:
        for _ in range(_CAUSES):  # a cause chain is short; bounded all the same
            if java is None:
                break
            message = java.getMessage()
            if message is not None and str(message).strip():
                found = str(message).strip()
            java = java.getCause()
    except Exception:  # the JVM is gone (a stopped session): what was found, else the text
        pass
    text = found or str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


_CAUSES = 20  # the causes of a JVM error looked through for its reason


def is_url(data: object) -> bool:
    """Whether ``data`` is a URL (``s3a://bucket/events``, ``file:///data/events``, ``file:/data/events``
    as Spark prints it) rather than a local path."""
    return _URL.match(str(data)) is not None


def normalised(url: str) -> str:
    """``url`` as the build reads it and keeps it (the data location in the state's manifest):
    ``SCHEME://AUTHORITY/PATH`` without ``.`` or ``..`` segments, doubled or trailing slashes
    (``file:/x``, as Spark prints a path, is ``file:///x``). A ``file:`` URL is read as the URI it
    is: its escapes decoded (``%20`` a space, as ``Path.as_uri()`` writes one, ``%25`` a ``%``),
    since Spark would take ``%20`` as part of the name. Any other scheme goes to Spark as given
    (Hadoop reads its path as it is written). A path without a scheme is normalised alike."""
    match = _URL.match(url)
    if match is None:
        return _path(url)
    scheme, rest = match["scheme"], url[match.end("scheme") + 1 :]
    authority = ""
    if rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        rest = slash + path
    if scheme.lower() == "file":
        rest = unquote(rest)
    path = _path(rest) if rest else ""
    return f"{scheme}://{authority}{'' if path == '/' else path}"


def _path(path: str) -> str:
    """A path without ``.`` or ``..`` segments, doubled or trailing slashes (as a URI's dot-segments
    are removed: by the text, not through symbolic links)."""
    if not path.startswith("/"):
        return posixpath.normpath(path)
    return "/" + posixpath.normpath(path).lstrip("/")


def _plain(path: str) -> str:
    """The file system path of a path as Spark's listing gives it (``file:/a/b #2.csv``,
    ``s3a://bucket/a/b.csv``): not a URI, so a '#' or '%' in it is part of a name."""
    rest = _SCHEME.sub("", path, count=1)
    return "/" + rest[2:].partition("/")[2] if rest.startswith("//") else rest


def _from_uri(uri: str) -> str:
    """The file system path of a file as Spark's readers name it (``_metadata.file_path``,
    ``inputFiles()``): a URI, its names escaped (``b%20%232.csv``)."""
    return unquote(urlparse(uri).path)


def _sources(
    location: str, listing: list[tuple[str, int, int]], parquet: Callable[[list[str]], list[bool]]
) -> dict[str, _Source]:
    """The tables of the listing, by the rules of a local folder (``sources``): ``parquet`` says
    which of the files of a table folder whose names end otherwise than .parquet or .csv are
    Parquet (Hive's ``000000_0``); any other is refused, as is a table given as one 0-byte CSV file."""
    base = PurePosixPath(_plain(location) or "/")
    found: dict[str, list[tuple[str, str, int, str, bool]]] = {}
    unnamed: list[tuple[str, str, int]] = []  # files of table folders without a part's ending
    for path, size, _mtime in sorted(listing):
        try:
            relative = PurePosixPath(_plain(path)).relative_to(base)
        except ValueError:  # a path that reaches the folder another way (a link on the way to it)
            raise DataFormatError(
                f"data={location}: Spark lists its files as {path}, not under this path; give the folder's "
                "own path (without symbolic links on the way)",
                argument="data",
            ) from None
        folder = len(relative.parts) > 1
        fmt = part_format(relative.name)
        if any(map(skipped, relative.parts)) or (fmt is None and not folder):
            continue  # left out, or beside the tables (watermark.json, notes)
        if fmt is None:
            unnamed.append((path, str(relative), size))
            continue
        _add(found, location, path, relative, size, fmt)
    if unnamed:
        # Too small for a Parquet file's magic numbers and footer: not read at all.
        candidates = [(path, name, size) for path, name, size in unnamed if size >= 12]
        is_parquet = dict(zip((p for p, _n, _s in candidates), parquet([p for p, _n, _s in candidates]), strict=True))
        for path, name, size in unnamed:
            if not is_parquet.get(path, False):
                raise not_a_part(name)
            _add(found, location, path, PurePosixPath(name), size, "parquet")
    sources = {}
    for table, files in found.items():
        files.sort()
        kinds = {(fmt, folder) for *_, fmt, folder in files}
        if len(kinds) > 1:
            raise _given_twice(location, table, files)
        ((fmt, folder),) = kinds
        if not folder and len(files) > 1:
            raise DataFormatError(f"{location}: table {table!r} is given more than once")
        paths, names, sizes = (tuple(column) for column in list(zip(*files, strict=True))[:3])
        sources[table] = _Source(table, fmt, paths, names, sizes, folder)
    if "projects" not in sources:
        raise DataFormatError(
            f"{location}: no projects table (projects.parquet, projects.csv or projects/); see docs/data-format.md"
        )
    return sources


def _given_twice(location: str, table: str, files: list[tuple[str, str, int, str, bool]]) -> DataFormatError:
    """A table given as a file and a folder (or as two files), or as a folder of parts of both
    formats, said as DuckDB says it of a local folder; the parts of the less common format named."""
    ways: dict[tuple[str, bool], list[str]] = {}
    for _path, name, _size, fmt, folder in files:
        ways.setdefault((fmt, folder), []).append(name)
    if all(folder for _fmt, folder in ways):  # one folder, parts of both formats
        (odd_fmt, _), (usual_fmt, _) = sorted(ways, key=lambda way: (len(ways[way]), way[0] == "csv"))
        odd, usual = ways[odd_fmt, True], ways[usual_fmt, True]
        return DataFormatError(
            f"{location}: {table}/ mixes Parquet and CSV parts ({_names(odd)}, among {len(usual)} "
            f"{usual_fmt.upper()} part{'s' if len(usual) > 1 else ''}); use one format per table"
        )
    labels = [
        f"{table}/ ({len(names)} {fmt} file{'s' if len(names) > 1 else ''})" if folder else ", ".join(names)
        for (fmt, folder), names in sorted(ways.items(), key=lambda way: (way[0][1], way[0][0]))
    ]
    return DataFormatError(f"{location}: table {table!r} is given more than once: {', '.join(labels)}")


def _names(names: list[str]) -> str:
    more = len(names) - _SHOWN_ROWS
    return ", ".join(names[:_SHOWN_ROWS]) + (f" and {more} more" if more > 0 else "")


def _add(found: dict, location: str, path: str, relative: PurePosixPath, size: int, fmt: str) -> None:
    folder = len(relative.parts) > 1
    table = relative.parts[0] if folder else relative.stem
    if table not in TABLES:
        raise DataFormatError(
            f"{location}: {relative}: not a table of the data format; the tables are {', '.join(TABLES)} "
            "(as NAME.parquet, NAME.csv or a folder NAME/)"
        )
    if fmt == "csv" and size == 0 and not folder:
        # Spark reads an empty file as no rows of the other files' columns; it has no header.
        raise empty_table_file(str(relative), table)
    found.setdefault(table, []).append((path, str(relative), size, fmt, folder))


def fingerprint(location: str, listing: list[tuple[str, int, int]]) -> str:
    """Changes whenever a file of ``listing`` (the tables' files under ``location``) is added,
    removed, rewritten or touched."""
    digest = hashlib.sha256(location.rstrip("/").encode() + b"\n")
    for path, size, mtime in sorted(listing):
        digest.update(f"{path}\0{size}\0{mtime}\n".encode())
    return digest.hexdigest()[:32]


@dataclass
class _Part:
    path: str
    name: str
    columns: dict[str, Any]  # its own columns: name -> pyspark DataType
    schema: Any  # the same, as a pyspark StructType
    supplied: dict[str, str | None]  # the table's columns its folders give


def _projects(engine: Cluster, source: _Source) -> dict[str, store.Project]:
    """The projects table, a few rows: copied here and validated as a local folder's is."""
    parts = source.parts()
    contents = engine.contents([path for path, _name in parts]) if parts else {}
    _all_read(source, map(_plain, contents))
    with tempfile.TemporaryDirectory() as tmp:
        for path, name in zip(source.paths, source.names, strict=True):
            (Path(tmp) / name).parent.mkdir(parents=True, exist_ok=True)
            (Path(tmp) / name).write_bytes(contents.get(path, b""))
        validated = store.validate(tmp)
        return store.read_projects(store.provide(validated))


def _all_read(source: _Source, read: Iterable[str]) -> None:
    """Refuse a listed file that Spark did not read: its rows would be missing from every number."""
    done = set(read)
    missing = [name for path, name in source.parts() if _plain(path) not in done]
    if missing:
        raise DataFormatError(
            f"{source.label}: Spark listed but did not read {', '.join(missing[:_SHOWN_ROWS])}"
            f"{' and more' if len(missing) > _SHOWN_ROWS else ''}; rename the file (plain letters, digits, '-', '_')"
        )


def _utf8(engine: Cluster, source: _Source, parts: list[_Part]) -> None:
    """Refuse CSV files that are not UTF-8, as DuckDB does, naming the file and the column."""
    found = engine.not_utf8([part.path for part in parts])
    if found is None:
        return
    uri, line = found
    header = next((list(p.columns) for p in parts if _plain(p.path) == _from_uri(uri)), [])
    text = line.decode("utf-8", errors="surrogateescape")
    where = ""
    for fields in csv.reader([text]):
        # A line of a quoted value over several lines cannot be matched to the header: no column.
        bad = [column for column, value in zip(header, fields, strict=False) if _escaped(value)]
        if len(fields) == len(header) and bad:
            where = f", column {bad[0]!r}"
    byte = next(ord(c) - 0xDC00 for c in text if _escaped(c))
    raise DataFormatError(
        f"{source.name(uri)}{where}: byte 0x{byte:02x} is not UTF-8; CSV files must be UTF-8 (save it again as UTF-8, "
        "for example as 'CSV UTF-8' from a spreadsheet)"
    )


def _escaped(text: str) -> bool:
    return any("\udc80" <= c <= "\udcff" for c in text)


def _empty(table: str) -> ibis.Table:
    schema = ibis.schema({c: _IBIS_TYPE[k] for c, k in COLUMNS[table].items()})
    return ibis.memtable(pd.DataFrame({c: pd.Series([], dtype=object) for c in schema.names}), schema=schema)


def _parts(engine: Cluster, source: _Source) -> list[_Part]:
    """Each part that holds rows, with its own columns, checked against the table's: every column
    there, in the file or from its folders but not both, of a type the format reads; else the part
    named, as on DuckDB (``rules.part_columns``)."""
    listed = source.parts()
    found = engine.schemas(source.fmt, [path for path, _name in listed])
    parts = []
    for (path, name), schema in zip(listed, found, strict=True):
        if isinstance(schema, Exception):
            raise engine.unreadable(name, path, schema) or DataFormatError(
                f"{name}: cannot be read as {source.fmt.upper()}: {one_line(schema)}"
            ) from None
        own = {field.name: field.dataType for field in schema.fields}
        try:
            levels = hive_levels(name.partition("/")[2]) if source.folder else {}
        except DataFormatError as error:
            raise DataFormatError(f"{source.table}/{error}") from None
        given = rules.part_columns(
            name, source.table, own, levels, _type_ok, lambda found: found.simpleString().upper()
        )
        parts.append(_Part(path, name, own, schema, given))
    return parts


def _type_ok(kind: str, found: Any) -> bool:
    """Whether Spark's type ``found`` is one the format reads for a column of ``kind``."""
    from ibis.backends.pyspark.datatypes import PySparkType

    return _integer_time(kind, found) or rules.kind_ok(kind, PySparkType.to_ibis(found))


def _integer_time(kind: str, found: Any) -> bool:
    # With EXPORT_SETTINGS, Spark reads a Parquet nanosecond timestamp as a 64-bit integer.
    return kind == "time" and found.simpleString() == "bigint"


def _nanosecond(engine: Cluster, source: _Source, parts: list[_Part]) -> set[tuple[str, str]]:
    """(part's path, column) of each 64-bit integer time column that holds nanosecond timestamps;
    a plain integer column is refused as DuckDB refuses it."""
    times = [c for c, kind in COLUMNS[source.table].items() if kind == "time"]
    nanos: set[tuple[str, str]] = set()
    for column in times:
        integers = [p for p in parts if column in p.columns and _integer_time("time", p.columns[column])]
        if not integers:
            continue
        found = engine.nanosecond([p.path for p in integers], column)
        for part in integers:
            if part.path not in found:
                raise DataFormatError(f"{part.name}, column {column!r}: has type BIGINT; expected a timestamp")
        nanos |= {(path, column) for path in found}
    return nanos


def _groups(source: _Source, parts: list[_Part], nanos: set[tuple[str, str]]) -> tuple[list[PartGroup], dict[str, str]]:
    """The parts in groups that Spark reads together (the same columns and types, the same values
    from their folders), and each column's one type across the groups."""
    wanted = COLUMNS[source.table]
    groups: dict[tuple, PartGroup] = {}
    found: dict[str, set[str]] = {c: set() for c in wanted}
    for part in parts:
        late = frozenset(c for c in wanted if (part.path, c) in nanos)
        key = (part.schema.json(), tuple(sorted(part.supplied.items(), key=str)), late)
        group = groups.get(key)
        if group is None:
            groups[key] = PartGroup((part.path,), part.schema, part.supplied, late)
        else:
            groups[key] = PartGroup((*group.paths, part.path), group.schema, group.supplied, group.nanos)
        for column in wanted:
            if column in part.supplied:
                found[column].add("string")
            elif column in late:
                found[column].add("timestamp")
            else:
                found[column].add(part.columns[column].simpleString())
    return list(groups.values()), {column: _common(types) for column, types in found.items()}


def _common(types: set[str]) -> str:
    """One type for a column that parts give as ``types`` (Spark's names), as DuckDB's reader
    unites them: the type itself, a timestamp for times, a double for numbers, else text (which the
    normalisation reads as it reads a CSV's)."""
    types = types - {"void"} or types
    if len(types) == 1:
        return next(iter(types))
    if types <= _TIMES:
        return "timestamp"
    if all(t in _NUMBERS or t.startswith("decimal") for t in types):
        return "double"
    return "string"


def _check(engine: Cluster, source: _Source, projects: list[str], validate: bool = True) -> ibis.Table:
    """The table's rows, normalised, with each row's file (``_file``, a URI), after every rule passed;
    else the first problem, named. ``validate=False``: files that passed before (unchanged since),
    read without checking a row again (a refresh's window)."""
    parts = _parts(engine, source)
    if not parts:
        return _empty(source.table).mutate(_file=ibis.literal("", type=datatypes.string))
    groups, types = _groups(source, parts, _nanosecond(engine, source, parts))
    try:
        raw, read = engine.raw(f"_metrics_kit_raw_{source.table}", source.fmt, groups, types)
        problem = rules.type_problem(source.table, raw.schema())
    except Exception as exc:
        raise DataFormatError(f"{source.label}: cannot be read as {source.fmt.upper()}: {one_line(exc)}") from None
    _all_read(source, map(_from_uri, read))
    if validate and source.fmt == "csv":
        _utf8(engine, source, parts)
    if problem is not None:
        column, what = problem
        raise DataFormatError(f"{source.label}, column {column!r}: {what}")
    columns = COLUMNS[source.table]
    rows = raw.select(**rules.normalised(raw, source.table), **{f"r_{c}": raw[c] for c in columns}, _file=raw["_file"])
    checks = rules.rules(source.table, projects) if validate else []
    try:
        counts = rows.aggregate(**{f"bad_{i}": rows.count(where=c.bad(rows)) for i, c in enumerate(checks)})
        found = counts.to_pyarrow().to_pylist()[0] if checks else {}
    except Exception as exc:  # a malformed CSV line, a file that changed under the scan
        raise DataFormatError(f"{source.label}: cannot be read: {one_line(exc)}") from None
    for i, check in enumerate(checks):
        count = found[f"bad_{i}"]
        if not count:
            continue
        bad = rows.filter(check.bad(rows)).select("_file", value=rows[f"r_{check.column}"]).limit(_SHOWN_ROWS)
        shown = "\n".join(_shown(source, row) for row in bad.to_pyarrow().to_pylist())
        more = f"\n  ... and {count - _SHOWN_ROWS} more" if count > _SHOWN_ROWS else ""
        noun = "row breaks" if count == 1 else "rows break"
        raise DataFormatError(
            f"{source.label}, column {check.column!r}: {count} {noun} the rule; allowed: {check.allowed}\n{shown}{more}"
        )
    return rows.select(*columns, "_file")


def _shown(source: _Source, row: dict) -> str:
    value = row["value"]
    return f"  {source.name(row['_file'])}: {'(empty)' if value is None or value == '' else repr(value)}"


def declared(engine: Cluster, location: str) -> dt.datetime | None:
    """The watermark ``location/watermark.json`` declares (docs/data-format.md), read through the
    engine as a local folder's is read; None without the file. Read before the tables are listed,
    so that a declaration written after new files never claims them."""
    where = f"{location.rstrip('/')}/{WATERMARK_FILE}"
    try:
        content = engine.small_file(where)
    except Exception as exc:
        raise DataFormatError(f"{where}: cannot be read: {one_line(exc)}") from None
    if content is None:
        return None
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataFormatError(f"{where}: cannot be read: {error}") from None
    return parse_declaration(text, where)


@dataclass(frozen=True)
class Listed:
    """The raw exports at a URL as Spark's listing gives them, in tables (``sources``)."""

    location: str  # the root, without a trailing '/'
    listing: list[tuple[str, int, int]]  # (path, size, modification time in ms) of every file under it
    sources: dict[str, _Source]

    @property
    def version(self) -> str:
        """The data version: the tables' files, as a local folder's (not watermark.json nor notes beside them)."""
        files = {path for source in self.sources.values() for path in source.paths}
        return fingerprint(self.location, [entry for entry in self.listing if entry[0] in files])

    def tables(self) -> dict[str, dict]:
        """Each table's files as a refresh compares them with its manifest (``increments.compare``):
        ``folder``, ``fmt`` and, per file name, its size and modification time."""
        times = {path: mtime for path, _size, mtime in self.listing}
        return {
            table: {
                "folder": source.folder,
                "fmt": source.fmt,
                "files": {
                    name: {"size": size, "mtime": times[path]}
                    for path, name, size in zip(source.paths, source.names, source.sizes, strict=True)
                },
            }
            for table, source in self.sources.items()
        }

    def only(self, table: str, names: Iterable[str]) -> _Source | None:
        """The files of ``table`` named in ``names`` (None: none)."""
        source, wanted = self.sources.get(table), set(names)
        if source is None or not wanted:
            return None
        keep = [i for i, name in enumerate(source.names) if name in wanted]
        if not keep:
            return None
        pick = lambda column: tuple(column[i] for i in keep)  # noqa: E731
        return _Source(table, source.fmt, pick(source.paths), pick(source.names), pick(source.sizes), source.folder)


def list_exports(engine: Cluster, location: str) -> Listed | None:
    """The tables of the raw exports at ``location``, from Spark's listing, by the rules of a local
    folder; None when ``location`` holds the normalised layout instead (``engines.open_layout``)."""
    root = location.rstrip("/")
    try:
        listing = engine.listing(root)
    except Exception as exc:
        raise engine.unreadable(location, location, exc) or DataFormatError(
            f"data={location}: cannot be listed: {one_line(exc)}", argument="data"
        ) from None
    if any(PurePosixPath(_plain(path)).name == store.LAYOUT_FILE for path, _s, _m in listing):
        return None
    # Spark's listing leaves out names starting with '_': a Delta table's log is asked for by name.
    logs = engine.folders_named(root, DELTA_LOG)
    if logs is not None:
        where = PurePosixPath(_plain(logs[0])).relative_to(PurePosixPath(_plain(root) or "/")).parts if logs else ()
        raise delta_table(f"{where[0]}/" if len(where) > 2 else f"data={location}")
    local = Path(_plain(root)) if urlparse(root).scheme == "file" else None
    if local is not None and local.is_dir():
        # Spark's listing of a file: URL leaves out a file it cannot read (a symbolic link to
        # nothing) without a word; where that folder is this machine's too, it is looked at here.
        check_readable(local)
    for key, value in EXPORT_SETTINGS.items():
        engine.session.conf.set(key, value)
    return Listed(root, listing, _sources(root, listing, lambda paths: _parquet(engine, paths)))


def projects_of(engine: Cluster, listed: Listed) -> dict[str, store.Project]:
    """The projects table of the exports, a few rows, validated here as a local folder's is."""
    return _projects(engine, listed.sources["projects"])


def checked(
    engine: Cluster, source: _Source | None, table: str, projects: Iterable[str], validate: bool = True
) -> ibis.Table:
    """The rows of ``source`` (files of ``table``; None: none), normalised, with each row's file
    (``_file``), after every rule passed (``validate=False``: files that passed before)."""
    if source is None:
        return _empty(table).mutate(_file=ibis.literal("", type=datatypes.string))
    return _check(engine, source, list(projects), validate)


def provide(engine: Cluster, tables: dict[str, ibis.Table]) -> None:
    """Register each event table's rows (from :func:`checked`) as the engine's table of that name."""
    for table in EVENT_TABLES:
        engine.backend.create_view(table, tables[table].drop("_file"), overwrite=True)


def file_days(source: _Source, rows: ibis.Table) -> dict[str, tuple[set[dt.date], dt.datetime | None]]:
    """Per file of ``source`` (its name), the days its rows fall on and the time of its last row
    (naive UTC), from the rows :func:`checked` gave: one Spark job, a row per file and day back."""
    days = rows.group_by(file=rows["_file"], day=rows.block_time.date()).aggregate(last=rows.block_time.max())
    found: dict[str, tuple[set[dt.date], dt.datetime | None]] = {name: (set(), None) for _p, name in source.parts()}
    for row in days.to_pyarrow().to_pylist():
        name = source.name(row["file"])
        seen, last = found.setdefault(name, (set(), None))
        seen.add(row["day"])
        latest = row["last"].replace(tzinfo=None) if row["last"].tzinfo is None else _naive_utc(row["last"])
        found[name] = (seen, latest if last is None or latest > last else last)
    return found


def _naive_utc(moment: dt.datetime) -> dt.datetime:
    return moment.astimezone(dt.UTC).replace(tzinfo=None)


def within(rows: ibis.Table, ranges: Sequence[tuple[dt.date, dt.date]]) -> ibis.Table:
    """The rows on a day of ``ranges`` (inclusive), as a refresh's window keeps them."""
    if not ranges:
        return rows.limit(0)
    inside = [
        (rows.block_time >= ibis.timestamp(lo.isoformat()))
        & (rows.block_time < ibis.timestamp((hi + dt.timedelta(days=1)).isoformat()))
        for lo, hi in ranges
    ]
    return rows.filter(ibis.or_(*inside))


def transactions_per_day(engine: Cluster) -> pd.DataFrame:
    """The transactions' rows per (day, project, action, pool_type) of the engine's table, which
    spares the engine's own scan for its day counts (``passes``)."""
    t = engine.backend.table("transactions")
    per_day = t.group_by(day=t.block_time.date(), project=t.project, action=t.action, pool_type=t.pool_type).aggregate(
        n=t.count()
    )
    per_day = per_day.to_pandas()
    per_day["day"] = pd.to_datetime(per_day["day"]).astype("datetime64[us]")
    return per_day


def open_exports(engine: Cluster, location: str) -> Exports | None:
    """Validate the raw exports at ``location`` on Spark and register their tables; None when
    ``location`` holds the normalised layout instead (``engines.open_layout`` reads it)."""
    listed = list_exports(engine, location)
    if listed is None:
        return None
    projects = projects_of(engine, listed)
    provide(engine, {table: checked(engine, listed.sources.get(table), table, projects) for table in EVENT_TABLES})
    per_day = transactions_per_day(engine) if "transactions" in listed.sources else None
    coverage = store.read_coverage(engine.backend)
    return Exports(store.EventStore(engine.backend, location, projects, coverage, listed.version), per_day)


def _parquet(engine: Cluster, paths: list[str]) -> list[bool]:
    return engine.parquet_files(paths) if paths else []
