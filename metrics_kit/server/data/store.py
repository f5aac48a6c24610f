"""The event store: find a data folder's tables, validate every row, provide clean tables.

The format is documented in ``docs/data-format.md``. Validation (:func:`validate`) always runs on
DuckDB and is all or nothing: every check runs before any table is provided, and the first problem
raises :class:`DataFormatError` naming the file, the column, what is allowed and the first
offending rows.

Providing the validated tables is separate, so that any Ibis backend can compute from them:

- :func:`load` validates and creates one DuckDB view per table with normalised columns:
  ``block_time`` as a naive UTC ``TIMESTAMP`` (microseconds, truncated, never rounded into the
  next day), strings as ``VARCHAR``, amounts as ``DOUBLE``;
- :func:`write_parquet` writes the same normalised tables as Parquet (the *normalised layout*,
  ``block_time`` as microsecond UTC timestamps, which Spark 4 reads; it refuses nanoseconds), which
  an engine registers, from a local path or an object-store URL (``building/engines.py``,
  ``open_layout``: the engines build on the store, never the other way round).

Either way the projects and the coverage are read with Ibis from the provided tables.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import duckdb
import ibis
import pandas as pd

from metrics_kit.errors import DataFormatError
from metrics_kit.server.data import rules
from metrics_kit.server.data.schema import (
    COLUMNS,
    EVENT_TABLES,
    TABLES,
)
from metrics_kit.server.data.sources import (  # noqa: F401 (find_sources: the store's API)
    Source,
    csv_header,
    csv_lines,
    csv_problem,
    empty_table_file,
    find_sources,
    fingerprint,
    unreadable,
)
from metrics_kit.spec.catalogue import KINDS
from metrics_kit.spec.ids import PROJECT_PATTERN

_SQL_TYPE = {"str": "VARCHAR", "float": "DOUBLE", "bool": "BOOLEAN", "time": "TIMESTAMP"}
_TIMESTAMP_SOURCES = ("TIMESTAMP", "VARCHAR", "DATE")
_NUMERIC_SOURCES = (
    "DOUBLE",
    "FLOAT",
    "REAL",
    "DECIMAL",
    "INTEGER",
    "BIGINT",
    "SMALLINT",
    "TINYINT",
    "HUGEINT",
    "UBIGINT",
    "UINTEGER",
    "USMALLINT",
    "UTINYINT",
    "VARCHAR",
    "NULL",
)
_SHOWN_ROWS = 5


@dataclass(frozen=True)
class Project:
    project: str
    kinds: frozenset[str]
    initial_circulating_supply: float | None
    regular_pools: bool


@dataclass(frozen=True)
class EventStore:
    """A validated data set: an Ibis backend holding its five tables by name, its projects and
    coverage; and the watermark declared with it, where one was (aware UTC; docs/data-format.md)."""

    backend: ibis.BaseBackend
    location: str  # the data folder, or the normalised layout's path or URL
    projects: dict[str, Project]
    coverage: tuple[dt.date, dt.date] | None
    fingerprint: str
    watermark: dt.datetime | None = None

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The DuckDB connection holding the views (a store from :func:`load` only)."""
        return self.backend.con


@dataclass(frozen=True)
class Validated:
    """A data folder whose every row passed: each table as a DuckDB query of normalised columns.

    ``days`` holds, per event table and file checked, the days its rows fall on: what an
    incremental build (``server/building/increments.py``) needs to know which periods a file touches.
    ``rows_per_day`` holds, per event table checked whole, its rows per day and combination of its
    low-cardinality columns (``_GROUPED``): the validation scan counts them anyway, and the engine
    takes the transactions' counts from here rather than scanning again. ``last`` holds, per event
    table and file checked, the time of its last row (naive UTC): the aggregates record the data's
    last event, and the service's completeness rule reads it (``server/serving/completeness.py``)."""

    con: duckdb.DuckDBPyConnection
    directory: Path
    relations: dict[str, str]
    fingerprint: str
    days: dict[str, dict[Path, tuple[dt.date, ...]]] = field(default_factory=dict)
    rows_per_day: dict[str, pd.DataFrame] = field(default_factory=dict)
    last: dict[str, dict[Path, dt.datetime]] = field(default_factory=dict)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _sql_list(values) -> str:
    return "[" + ", ".join(_quote(v) for v in values) + "]"


def connect(
    threads: int | None = None, memory_limit: str | None = None, temp_directory: Path | None = None
) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    # Naive timestamps are UTC, and tz-aware ones are converted to UTC, whatever the machine's zone.
    con.execute("SET TimeZone = 'UTC'")
    # A table folder of many Parquet files is read by every query of a build: keep their footers.
    con.execute("SET parquet_metadata_cache = true")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    if memory_limit:
        con.execute(f"SET memory_limit = {_quote(memory_limit)}")
    if temp_directory:
        con.execute(f"SET temp_directory = {_quote(str(temp_directory))}")
    return con


def _read(fmt: str, files) -> str:
    # Hive-style folder levels are read by ``_parts`` (as on Spark), not guessed from the paths.
    listed = f"{_sql_list(str(p) for p in files)}, hive_partitioning = false"
    if fmt == "parquet":
        return f"read_parquet({listed}, union_by_name = true, filename = true, file_row_number = true)"
    # Every CSV column is read as text so that a bad value is reported, not silently guessed. The
    # dialect is the format's (docs/data-format.md), not sniffed: sniffing took a stray quote for
    # part of a value, and without the encoding named, bytes that are not UTF-8 past the sniffed
    # sample were loaded as they were.
    return (
        f"read_csv({listed}, header = true, all_varchar = true, union_by_name = true, "
        "filename = true, strict_mode = true, delim = ',', quote = '\"', escape = '\"', encoding = 'utf-8')"
    )


@dataclass(frozen=True)
class _Parts:
    """The files of a source that hold rows (a 0-byte part is an empty part: it is not read), and
    the table's columns that each part's Hive-style folders supply (``project=demoswap/``)."""

    files: tuple[Path, ...]
    supplied: dict[Path, dict[str, str | None]]

    @property
    def supplied_columns(self) -> set[str]:
        return {column for given in self.supplied.values() for column in given}


def _scan(source: Source, parts: _Parts) -> str:
    """The parts as one relation: one reader over them all, or, where folders supply columns, one
    reader per set of supplied values with those values as columns, unioned by name."""
    groups: dict[tuple[tuple[str, str | None], ...], list[Path]] = {}
    for path in parts.files:
        groups.setdefault(tuple(sorted(parts.supplied.get(path, {}).items())), []).append(path)
    if list(groups) == [()]:
        return _read(source.fmt, parts.files)
    selects = []
    for given, files in groups.items():
        values = "".join(
            f', {_quote(value) if value is not None else "CAST(NULL AS VARCHAR)"} AS "{column}"'
            for column, value in given
        )
        selects.append(f"SELECT *{values} FROM {_read(source.fmt, files)}")
    return "(" + " UNION ALL BY NAME ".join(selects) + ")"


def _csv_error(source: Source) -> DataFormatError | None:
    """The first line of a CSV source that breaks the format, named (None: not that kind of problem)."""
    if source.fmt != "csv":
        return None
    for path in source.files:
        problem = csv_problem(path, source.named(path))
        if problem:
            return DataFormatError(problem)
    return None


def _row_expr(source: Source) -> str:
    # Rows are numbered from 1 as a person counts data rows (CSV: the header is not a row).
    if source.fmt == "parquet":
        return "file_row_number + 1"
    return "row_number() OVER (PARTITION BY filename)"


def _column_types(con, source: Source, scan: str) -> dict[str, str]:
    try:
        rows = con.execute(f"DESCRIBE SELECT * FROM {scan}").fetchall()
    except duckdb.Error as exc:
        raise _csv_error(source) or DataFormatError(
            f"{source.label}: cannot be read as {source.fmt.upper()}: {str(exc).splitlines()[0]}"
        ) from None
    return {name: typ for name, typ, *_ in rows}


def _file_columns(con, source: Source, files: tuple[Path, ...]) -> dict[Path, dict[str, str]]:
    """Each file's own top-level columns and their types (CSV: all text), from the Parquet footers
    (which DuckDB then keeps for the scan) and the CSV header rows."""
    if not files:
        return {}
    if source.fmt == "csv":
        out: dict[Path, dict[str, str]] = {}
        for path in files:
            try:
                header = csv_header(path)
            except OSError as error:
                raise unreadable(source.named(path), error, path.is_symlink()) from None
            if header is None:
                raise _csv_error(source) or DataFormatError(f"{source.named(path)}: cannot be read as CSV")
            out[path] = dict.fromkeys(header, "VARCHAR")
        return out
    try:
        rows = con.execute(
            f"SELECT file_name, name, num_children, duckdb_type FROM parquet_schema({_sql_list(map(str, files))})"
        ).fetchall()
    except duckdb.Error:
        for path in files:  # which file: on the way to an error only
            try:
                con.execute(f"SELECT count(*) FROM parquet_schema({_quote(str(path))})").fetchall()
            except duckdb.Error as exc:
                raise DataFormatError(
                    f"{source.named(path)}: cannot be read as PARQUET: {str(exc).splitlines()[0]}"
                ) from None
        raise
    elements: dict[str, list[tuple]] = {}
    for name, *element in rows:
        elements.setdefault(name, []).append(element)
    return {path: _top_level(elements.get(str(path), [])) for path in files}


def _top_level(elements: list[tuple]) -> dict[str, str]:
    """The top-level columns of one file's Parquet schema: its elements in depth-first order, the
    root first, each with its number of children."""
    columns: dict[str, str] = {}
    pending: list[int] = []  # per open level, its children still to come
    for i, (name, children, typ) in enumerate(elements):
        if i == 0:
            pending = [children or 0]
            continue
        if len(pending) == 1:
            columns[name] = typ
        pending[-1] -= 1
        if children:
            pending.append(children)
        while len(pending) > 1 and pending[-1] == 0:
            pending.pop()
    return columns


def _parts(con, source: Source) -> _Parts:
    """The parts that hold rows, each checked against the table's columns: every column there, in
    the file or from its folders but not both, and of a type the format reads; else the part named
    (``rules.part_columns``, as on Spark)."""
    sizes = {}
    for path in source.files:
        try:
            sizes[path] = os.path.getsize(path)
        except OSError as error:  # gone, or a link to nothing, since the folder was listed
            raise unreadable(source.named(path), error, path.is_symlink()) from None
    if not source.folder and source.fmt == "csv" and not sizes[source.files[0]]:
        raise empty_table_file(source.named(source.files[0]), source.table)
    files = tuple(path for path in source.files if sizes[path] > 0)
    found = _file_columns(con, source, files)
    supplied: dict[Path, dict[str, str | None]] = {}
    for path in files:
        given = rules.part_columns(
            source.named(path),
            source.table,
            found[path],
            source.levels(path),
            _type_ok,
            header_problem=lambda: _csv_error(source),
        )
        if given:
            supplied[path] = given
    return _Parts(files, supplied)


def _normalised(column: str, kind: str, source_type: str) -> str:
    # Kept as cheap as the type allows: the engine's passes re-read these expressions, and id
    # columns hold long strings, so nothing is trimmed or copied that does not need to be.
    col = f'"{column}"'
    if kind == "time":
        if source_type == "TIMESTAMP":
            return col
        if source_type == "TIMESTAMP WITH TIME ZONE":
            # The same instant as CAST(... AS TIMESTAMP) in the UTC session, without the time zone
            # library, whose cast is slower, in every scan.
            return f"make_timestamp(epoch_us({col}))"
        if source_type in ("TIMESTAMP_S", "TIMESTAMP_MS", "DATE"):
            return f"CAST({col} AS TIMESTAMP)"  # exact
        # Casting a nanosecond timestamp straight to microseconds rounds 23:59:59.9999999995 into
        # the next day; truncate from nanoseconds instead (floor division, also before 1970).
        ns = f"epoch_ns(TRY_CAST({col} AS TIMESTAMPTZ_NS))"
        return f"make_timestamp(({ns} - ((({ns}) % 1000) + 1000) % 1000) // 1000)"
    if kind == "str":
        return f"NULLIF({col if source_type == 'VARCHAR' else f'CAST({col} AS VARCHAR)'}, '')"
    if kind == "float":
        return f"TRY_CAST(TRIM({col}) AS DOUBLE)" if source_type == "VARCHAR" else f"CAST({col} AS DOUBLE)"
    if source_type == "VARCHAR":
        return f"TRY_CAST(NULLIF(TRIM(LOWER({col})), '') AS BOOLEAN)"
    return f"CAST({col} AS BOOLEAN)"


def _type_ok(kind: str, source_type: str) -> bool:
    if kind == "time":
        return source_type.startswith(_TIMESTAMP_SOURCES)
    if kind == "float":
        return source_type.startswith(_NUMERIC_SOURCES)
    if kind == "bool":
        return source_type in ("BOOLEAN", "VARCHAR", "NULL")
    return not source_type.endswith("[]") and not source_type.startswith(("STRUCT", "MAP"))


@dataclass(frozen=True)
class _Check:
    column: str
    allowed: str  # what the rule allows, in words
    bad: str  # SQL predicate over raw ("r_") and normalised columns that flags a bad row
    per_row: bool = True  # False: it reads only _GROUPED columns, so it runs on distinct values
    required: bool = False  # "not null, not empty": Parquet statistics may settle it without a read
    rejects_empty: bool = False  # passing it means the column holds no null and no empty string


# Low-cardinality columns: validation groups by them, so their checks (lowercase ids, known
# projects, allowed values) run once per distinct combination instead of once per row.
_GROUPED = {
    "transactions": ("project", "action", "pool_type"),
    "fees": ("project", "fee_type", "recipient"),
    "token_flows": ("project", "flow"),
    "chain_rewards": ("project", "reward_type"),
}


def _checks(table: str, projects: list[str]) -> list[_Check]:
    def column_check(rule: rules.ColumnRule) -> _Check:
        column, allowed = rule.column, rule.allowed
        if rule.kind == "required":
            return _Check(column, allowed, f'"{column}" IS NULL', required=True, rejects_empty=True)
        if rule.kind in ("one_of", "one_of_or_empty"):
            test = f'NOT list_contains({_sql_list(rule.values)}, "{column}")'
            if rule.kind == "one_of_or_empty":
                return _Check(column, allowed, f'"{column}" IS NOT NULL AND {test}', per_row=False)
            return _Check(column, allowed, f'"{column}" IS NULL OR {test}', per_row=False, rejects_empty=True)
        extra = f' OR "{column}" < 0' if rule.kind == "non_negative" else ""
        return _Check(column, allowed, f'"{column}" IS NULL OR NOT isfinite("{column}"){extra}')

    def project_ref() -> list[_Check]:
        return [
            _Check(
                "project",
                rules.PROJECT_ID,
                f"project IS NULL OR NOT regexp_full_match(project, {_quote(PROJECT_PATTERN)})",
                per_row=False,
                rejects_empty=True,
            ),
            _Check(
                "project",
                rules.project_listed(projects),
                f"NOT list_contains({_sql_list(projects)}, project)",
                per_row=False,
            ),
        ]

    if table == "projects":
        kinds_ok = (
            f"len(string_split(kinds, ',')) > 0 AND "
            f"list_bool_and(list_transform(string_split(kinds, ','), "
            f"lambda k: list_contains({_sql_list(KINDS)}, trim(k))))"
        )
        return [
            _Check(
                "project",
                rules.PROJECT_ID,
                f"project IS NULL OR NOT regexp_full_match(project, {_quote(PROJECT_PATTERN)})",
            ),
            _Check("project", "each project listed once", "count(*) OVER (PARTITION BY project) > 1"),
            _Check(
                "kinds",
                "a comma-separated, non-empty subset of " + ",".join(KINDS),
                f"kinds IS NULL OR NOT ({kinds_ok})",
            ),
            _Check(
                "initial_circulating_supply",
                "a finite number >= 0 (required for tokenomics projects)",
                "(r_initial_circulating_supply IS NOT NULL AND initial_circulating_supply IS NULL) OR "
                "(initial_circulating_supply IS NOT NULL AND (NOT isfinite(initial_circulating_supply)"
                " OR initial_circulating_supply < 0)) OR "
                "(initial_circulating_supply IS NULL AND "
                "list_contains(list_transform(string_split(kinds, ','), lambda k: trim(k)), 'tokenomics'))",
            ),
            _Check(
                "regular_pools",
                "true, false or empty; true only for a project of kind dex",
                "(r_regular_pools IS NOT NULL AND regular_pools IS NULL) OR (regular_pools AND NOT "
                "list_contains(list_transform(string_split(kinds, ','), lambda k: trim(k)), 'dex'))",
            ),
        ]
    timestamp = _Check("block_time", rules.TIMESTAMP, "block_time IS NULL")
    return [timestamp, *project_ref(), *map(column_check, rules.EVENT_COLUMNS[table])]


def _never_empty(table: str) -> frozenset[str]:
    """The text columns that hold no null and no empty string once ``table`` passed validation."""
    return frozenset(c.column for c in _checks(table, []) if c.rejects_empty)


@dataclass(frozen=True)
class _Relation:
    source: Source
    parts: _Parts
    scan: str  # the parts as one relation (``_scan``)
    raw: str  # the columns as found, prefixed r_
    normalised: dict[str, str]  # each column as the views show it
    types: dict[str, str]  # each column's type as found

    def sql(self, *, detail: bool = False, files: bool = False, checked: bool = False) -> str:
        """The normalised table; with ``files``, also each row's file (``_file``); with ``detail``,
        also the raw columns, row numbers and file names. ``checked``: the table passed validation,
        so a text column that cannot be empty any more is read as it is (the engine scans tx_id,
        88 characters a row, several times: NULLIF on it is a sizeable part of a scan)."""
        clean = _never_empty(self.source.table) if checked else frozenset()
        columns = ", ".join(
            f'"{c}"' if c in clean and self.types[c] == "VARCHAR" else f'{expr} AS "{c}"'
            for c, expr in self.normalised.items()
        )
        if not detail:
            return f"SELECT {columns}{', filename AS _file' if files else ''} FROM {self.scan}"
        numbered = f"(SELECT *, {_row_expr(self.source)} AS _row, filename AS _file FROM {self.scan})"
        return f"SELECT {columns}, {self.raw}, _row, _file FROM {numbered}"


def _relation(con, source: Source) -> _Relation | None:
    """The source's parts as one relation of normalised columns; None when no part holds a row."""
    parts = _parts(con, source)
    if not parts.files:
        return None
    scan = _scan(source, parts)
    types = _column_types(con, source, scan)
    wanted = COLUMNS[source.table]
    missing = [c for c in wanted if c not in types]
    if missing:
        # Every part has its columns: the reader did not find them where the header has them (a
        # short or long row, a stray quote).
        raise _csv_error(source) or DataFormatError(
            f"{source.label}: missing column{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}; "
            f"the {source.table} table has columns {', '.join(wanted)} "
            f"(found: {', '.join(c for c in types if c not in ('filename', 'file_row_number'))})"
        )
    for column, kind in wanted.items():
        # Each part's own types passed: this is the type of the parts together (text, if a part
        # gives a column as text and another as a timestamp).
        if not _type_ok(kind, types[column]):
            raise DataFormatError(
                f"{source.label}, column {column!r}: has type {types[column]}; expected {rules.expected(kind)}"
            )
    return _Relation(
        source=source,
        parts=parts,
        scan=scan,
        raw=", ".join(f'"{c}" AS "r_{c}"' for c in wanted),
        normalised={c: _normalised(c, k, types[c]) for c, k in wanted.items()},
        types=types,
    )


_PROFILE = "_metrics_kit_profile"


@dataclass
class _Profile:
    counts: tuple  # rows breaking each check
    days: dict[Path, tuple[dt.date, ...]] = field(default_factory=dict)  # per file
    last: dict[Path, dt.datetime] = field(default_factory=dict)  # per file: its last row's time
    rows_per_day: pd.DataFrame | None = None  # (day, the _GROUPED columns, n)


def _profile(con, table: str, relation: _Relation, checks: list[_Check], per_day: bool) -> _Profile:
    """One scan that counts the rows breaking each check, finds the days each file's rows fall on
    and, with ``per_day``, counts the rows per day and combination of the low-cardinality columns."""
    grouped = _GROUPED.get(table)
    if not grouped:  # small tables (projects): flag every row, window checks included
        flags = ", ".join(f"({c.bad}) AS bad_{i}" for i, c in enumerate(checks))
        counts = ", ".join(f"count(*) FILTER (WHERE bad_{i})" for i in range(len(checks)))
        return _Profile(
            con.execute(f"SELECT {counts} FROM (SELECT {flags} FROM ({relation.sql(detail=True)}))").fetchone()
        )
    # Grouped by file and day too: few more groups, and the days come with the same scan.
    row_counts = "".join(f", count(*) FILTER (WHERE {c.bad}) AS bad_{i}" for i, c in enumerate(checks) if c.per_row)
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {_PROFILE} AS SELECT _file, CAST(block_time AS DATE) AS _day, "
        f"{', '.join(grouped)}, count(*) AS n, max(block_time) AS _last{row_counts} "
        f"FROM ({relation.sql(files=True)}) GROUP BY ALL"
    )
    try:
        totals = ", ".join(
            f"coalesce(sum(bad_{i}), 0)" if c.per_row else f"coalesce(sum(n) FILTER (WHERE {c.bad}), 0)"
            for i, c in enumerate(checks)
        )
        counts = con.execute(f"SELECT {totals} FROM {_PROFILE}").fetchone()
        rows = con.execute(
            f"SELECT _file, list(DISTINCT _day ORDER BY _day), max(_last) FROM {_PROFILE} "
            "WHERE _day IS NOT NULL GROUP BY _file"
        ).fetchall()
        counted = None
        if per_day:
            counted = con.execute(
                f"SELECT _day AS day, {', '.join(grouped)}, sum(n)::BIGINT AS n FROM {_PROFILE} "
                "WHERE _day IS NOT NULL GROUP BY ALL"
            ).fetchall()
    finally:
        con.execute(f"DROP TABLE IF EXISTS {_PROFILE}")
    profile = _Profile(counts, {Path(name): tuple(days) for name, days, _ in rows})
    profile.last = {Path(name): last for name, _, last in rows}
    if counted is not None:
        profile.rows_per_day = pd.DataFrame(counted, columns=["day", *grouped, "n"])
        profile.rows_per_day["day"] = pd.to_datetime(profile.rows_per_day["day"]).astype("datetime64[us]")
    return profile


def _first_bad_rows(con, source: Source, relation: _Relation, check: _Check) -> list[tuple]:
    sql = (
        f'SELECT _file, _row, "r_{check.column}" FROM (SELECT *, ({check.bad}) AS bad '
        f"FROM ({relation.sql(detail=True)})) WHERE bad ORDER BY _file, _row LIMIT {_SHOWN_ROWS}"
    )
    if source.fmt == "parquet":
        return con.execute(sql).fetchall()
    # CSV rows are numbered in scan order, which only a single thread keeps.
    threads = con.execute("SELECT current_setting('threads')").fetchone()[0]
    con.execute("SET threads = 1")
    try:
        return con.execute(sql).fetchall()
    finally:
        con.execute(f"SET threads = {int(threads)}")


def _shown_rows(source: Source, rows: list[tuple]) -> list[str]:
    """``row N (line L): 'value'`` for each bad row; an empty value shown as such, not as None."""
    lines: dict[str, dict[int, int]] = {}
    if source.fmt == "csv":
        for name in {f for f, _row, _value in rows}:
            lines[name] = csv_lines(Path(name), {row for f, row, _value in rows if f == name})
    out = []
    for name, row, value in rows:
        where = f"{source.part(Path(name))} " if source.folder else ""
        line = lines.get(name, {}).get(row)
        at = f" (line {line})" if line else ""
        shown = repr(value) if value is not None else "(empty)" if source.fmt == "csv" else "(null)"
        out.append(f"  {where}row {row}{at}: {shown}")
    return out


def _settled(con, relation: _Relation) -> set[str]:
    """The text columns of a Parquet source that its own statistics show to hold no null and no
    empty string in any row group: their "required" check needs no read of the column (reading
    the long id columns is most of validation's cost). Statistics missing anywhere settle nothing,
    and a column that a folder supplies to some parts is not in their statistics."""
    source, types = relation.source, relation.types
    if source.fmt != "parquet":
        return set()
    supplied = relation.parts.supplied_columns
    columns = [
        c
        for c, kind in COLUMNS[source.table].items()
        if kind == "str" and types.get(c) == "VARCHAR" and c not in supplied
    ]
    if not columns:
        return set()
    rows = con.execute(
        # coalesce: a row group without statistics gives NULL, which bool_and would skip.
        "SELECT path_in_schema, bool_and(coalesce(stats_null_count = 0 AND stats_min_value > '', false)) "
        f"FROM parquet_metadata({_sql_list(str(p) for p in relation.parts.files)}) "
        f"WHERE path_in_schema IN ({', '.join(_quote(c) for c in columns)}) GROUP BY 1"
    ).fetchall()
    return {column for column, clean in rows if clean}


def _validate(con, source: Source, relation: _Relation, checks: list[_Check], per_day: bool) -> _Profile:
    try:
        settled = _settled(con, relation)
        checks = [replace(c, bad="false") if c.required and c.column in settled else c for c in checks]
        profile = _profile(con, source.table, relation, checks, per_day)
    except duckdb.Error as exc:
        raise _csv_error(source) or DataFormatError(
            f"{source.label}: cannot be read: {str(exc).splitlines()[0]}"
        ) from None
    for check, count in zip(checks, profile.counts, strict=True):
        if not count:
            continue
        # Only now, on the way to an error, is the slower numbered scan worth it.
        rows = _first_bad_rows(con, source, relation, check)
        shown = "\n".join(_shown_rows(source, rows))
        more = f"\n  ... and {count - len(rows)} more" if count > len(rows) else ""
        noun = "row breaks" if count == 1 else "rows break"
        raise DataFormatError(
            f"{source.label}, column {check.column!r}: {count} {noun} the rule; allowed: {check.allowed}\n{shown}{more}"
        )
    return profile


def _empty_view(table: str) -> str:
    cols = ", ".join(f'CAST(NULL AS {_SQL_TYPE[k]}) AS "{c}"' for c, k in COLUMNS[table].items())
    return f"SELECT {cols} WHERE false"


def validate(
    directory: str | os.PathLike,
    con: duckdb.DuckDBPyConnection | None = None,
    *,
    only: dict[str, tuple[Path, ...]] | None = None,
    sources: dict[str, Source] | None = None,
    stats: dict[Path, dict] | None = None,
) -> Validated:
    """Check every rule of the data format on DuckDB; nothing is created in ``con``.

    ``only`` restricts the check of the tables it names to those of their files (an incremental
    build checks the new files only); the relations then hold those files alone. A build passes
    the ``sources`` it found and the file ``stats`` it took first, which the fingerprint is then
    made of: a file rewritten during the build is never filed under its new version."""
    directory = Path(directory)
    sources = sources or find_sources(directory)
    con = con or connect()
    relations: dict[str, str] = {}
    days: dict[str, dict[Path, tuple[dt.date, ...]]] = {}
    last: dict[str, dict[Path, dt.datetime]] = {}
    rows_per_day: dict[str, pd.DataFrame] = {}
    projects: list[str] = []
    for table in TABLES:
        source = sources.get(table)
        if source is not None and only is not None and table in only:
            source = replace(source, files=only[table]) if only[table] else None
        relation = None if source is None else _relation(con, source)
        if relation is None:  # no such table, or none of its parts holds a row
            relations[table] = _empty_view(table)
            continue
        # Rows per day only of a table checked whole: those of a few files would mislead.
        whole = only is None or table not in only
        profile = _validate(con, relation.source, relation, _checks(table, projects), per_day=whole)
        days[table] = profile.days
        last[table] = profile.last
        if profile.rows_per_day is not None:
            rows_per_day[table] = profile.rows_per_day
        relations[table] = relation.sql(checked=True)
        if table == "projects":
            rows = con.execute(f"SELECT project FROM ({relations[table]}) ORDER BY 1").fetchall()
            projects = [project for (project,) in rows]
    return Validated(con, directory, relations, fingerprint(sources, stats), days, rows_per_day, last)


def window(
    validated: Validated, sources: dict[str, Source], days: list[tuple[dt.date, dt.date]], fingerprint: str
) -> Validated:
    """The event tables of files validated before (``sources``), restricted to rows on ``days``
    (inclusive ranges), with ``validated``'s projects: what an incremental build recomputes from.
    Nothing is checked again."""
    con = validated.con
    spans = " OR ".join(
        f"(block_time >= TIMESTAMP '{lo}' AND block_time < TIMESTAMP '{hi + dt.timedelta(days=1)}')" for lo, hi in days
    )
    relations = {"projects": validated.relations["projects"]}
    for table in EVENT_TABLES:
        source = sources.get(table)
        relation = None if source is None or not source.files or not days else _relation(con, source)
        if relation is None:
            relations[table] = _empty_view(table)
        else:
            relations[table] = f"SELECT * FROM ({relation.sql(checked=True)}) WHERE {spans}"
    return Validated(con, validated.directory, relations, fingerprint)


def load(directory: str | os.PathLike, con: duckdb.DuckDBPyConnection | None = None) -> EventStore:
    """Validate the data folder and create its views in ``con`` (a new connection if None)."""
    return views(validate(directory, con))


def open_views(directory: str | os.PathLike, con: duckdb.DuckDBPyConnection | None = None) -> ibis.BaseBackend:
    """A data folder's tables as views with normalised columns, as :func:`load` makes them, without
    checking a row: only for a folder whose files passed validation before (the caller compares
    its fingerprint with that of the build, as ``server/serving/explain.py`` does)."""
    directory = Path(directory)
    sources = find_sources(directory)
    con = con or connect()
    relations = {}
    for table in TABLES:
        relation = _relation(con, sources[table]) if table in sources else None
        relations[table] = _empty_view(table) if relation is None else relation.sql(checked=True)
    return provide(Validated(con, directory, relations, fingerprint(sources)))


def views(validated: Validated) -> EventStore:
    """The validated tables as views in the validating DuckDB connection."""
    return event_store(provide(validated), str(validated.directory), validated.fingerprint)


def provide(validated: Validated, in_memory: tuple[str, ...] = ()) -> ibis.BaseBackend:
    """The validated tables in the validating DuckDB connection, as an Ibis backend: views, but
    the tables named in ``in_memory`` read once into temporary tables (over a folder of many files,
    every read of a view opens each file again; ``building/build.py``'s ``SMALL_TABLES`` says what a build reads)."""
    # Only now that every table passed does anything become visible.
    for table, relation in validated.relations.items():
        kind = "TABLE" if table in in_memory else "VIEW"
        validated.con.execute(f"DROP VIEW IF EXISTS {table}; DROP TABLE IF EXISTS {table}")
        validated.con.execute(f"CREATE TEMP {kind} {table} AS {relation}")
    # The backend class itself: ``ibis.duckdb`` would first look it up among the installed
    # packages' entry points, in every build.
    from ibis.backends.duckdb import Backend as DuckDBBackend

    return DuckDBBackend.from_connection(validated.con)


# Marks a folder as a normalised layout (one JSON line). No leading "_" or ".": Spark skips such files.
LAYOUT_FILE = "metrics_kit_layout.json"
LAYOUT_VERSION = 1


def write_parquet(validated: Validated, out: Path, watermark: str | None = None) -> None:
    """Write the validated tables as the normalised layout: ``out/TABLE/part-0.parquet`` for each
    of the five tables (an absent table as zero rows), and the marker file, written last, which
    carries the data folder's declared ``watermark`` (ISO 8601 text; None: none declared)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / LAYOUT_FILE).unlink(missing_ok=True)
    for table, relation in validated.relations.items():
        folder = out / table
        folder.mkdir(exist_ok=True)
        for old in folder.glob("*.parquet"):
            old.unlink()
        columns = ", ".join(
            # TIMESTAMPTZ is written as an instant (isAdjustedToUTC) in microseconds; the session zone is UTC.
            f'CAST("{c}" AS TIMESTAMPTZ) AS "{c}"' if kind == "time" else f'"{c}"'
            for c, kind in COLUMNS[table].items()
        )
        target = _quote(str(folder / "part-0.parquet"))
        validated.con.execute(f"COPY (SELECT {columns} FROM ({relation})) TO {target} (FORMAT parquet)")
    marker = {
        "layout": LAYOUT_VERSION,
        "fingerprint": validated.fingerprint,
        "source": str(validated.directory),
        "watermark": watermark,
    }
    (out / LAYOUT_FILE).write_text(json.dumps(marker) + "\n", encoding="utf-8")


def event_store(backend: ibis.BaseBackend, location: str, fingerprint: str) -> EventStore:
    """The event store of the five tables ``backend`` holds (validated before): its projects and coverage read."""
    return EventStore(backend, location, read_projects(backend), read_coverage(backend), fingerprint)


def read_projects(backend: ibis.BaseBackend) -> dict[str, Project]:
    table = backend.table("projects")
    rows = table.select("project", "kinds", "initial_circulating_supply", "regular_pools").order_by("project")
    return {
        row["project"]: Project(
            row["project"],
            frozenset(k.strip() for k in row["kinds"].split(",")),
            row["initial_circulating_supply"],
            bool(row["regular_pools"]),
        )
        for row in rows.to_pyarrow().to_pylist()
    }


def coverage_of(tables: list[ibis.Table]) -> ibis.Table:
    """One row: the first and last day with an event in any of ``tables`` (``first_day``,
    ``last_day``; missing when they hold no rows)."""
    spans = [t.aggregate(lo=t.block_time.min(), hi=t.block_time.max()) for t in tables]
    union = ibis.union(*spans)
    return union.aggregate(first_day=union.lo.min().date(), last_day=union.hi.max().date())


def read_coverage(backend: ibis.BaseBackend) -> tuple[dt.date, dt.date] | None:
    """The first and last day with an event in any event table, as one query."""
    row = coverage_of([backend.table(n) for n in EVENT_TABLES]).to_pyarrow().to_pylist()[0]
    if row["first_day"] is None:
        return None
    return pd.Timestamp(row["first_day"]).date(), pd.Timestamp(row["last_day"]).date()


def read_last_event(backend: ibis.BaseBackend) -> dt.datetime | None:
    """The time of the last event in any event table (naive UTC), as one query."""
    spans = [backend.table(n).aggregate(hi=backend.table(n).block_time.max()) for n in EVENT_TABLES]
    union = ibis.union(*spans)
    last = union.aggregate(hi=union.hi.max()).to_pyarrow().to_pylist()[0]["hi"]
    if last is None:
        return None
    last = pd.Timestamp(last)
    return (last.tz_convert("UTC").tz_localize(None) if last.tzinfo is not None else last).to_pydatetime()
