"""Which files hold a data folder's tables, and a fingerprint that changes when any of them does;
and, for a CSV file the store could not read, the first line that breaks the format, in words.

A table folder is read recursively, as Spark reads it, by the same rules on every engine
(``exports`` applies them to a URL's listing):

- entries Spark's listing leaves out are left out (:func:`skipped`): names starting with ``.`` or
  ``_`` (``_SUCCESS``, ``_temporary/``, ``.part-0.parquet.crc``), except a ``_name=value`` folder;
- a folder level ``name=value`` (Hive-style partitions, :func:`hive_levels`) supplies the column
  ``name`` to the files below it that lack it;
- a table folder holding ``_delta_log/`` is refused: a Delta table's folder also keeps the files
  of its older versions, which are not its rows;
- a part is a file whose name ends in ``.parquet`` or ``.csv``, in any case (:func:`part_format`),
  or a Parquet file by its bytes whatever its name (:func:`parquet_bytes`: Hive and Impala write
  ``000000_0``); anything else in a table folder is refused (:func:`not_a_part`), and so is a part
  that cannot be read, such as a symbolic link to nothing (:func:`unreadable`): a file left out
  without a word would take its rows out of every number.

Kept apart from the store so that finding saved aggregates (a fingerprint from file names, sizes
and times) needs no database engine: the embedded service starts without importing DuckDB.
"""

from __future__ import annotations

import csv
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from metrics_kit.errors import DataFormatError
from metrics_kit.server.data.schema import COLUMNS, TABLES

FORMATS = ("parquet", "csv")
# A Parquet file starts and ends with these bytes (the footer's length comes before the last four).
PARQUET_MAGIC = b"PAR1"
_PARQUET_SMALLEST = 12  # the two magic numbers and the footer's length: no Parquet file is shorter
DELTA_LOG = "_delta_log"
# How Spark (and Hive) write a missing value as a folder level: name=__HIVE_DEFAULT_PARTITION__.
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


def skipped(name: str) -> bool:
    """Whether a file or folder of a data folder is left out, as Spark's listing leaves it out:
    hidden and bookkeeping entries, and files still being copied (``._COPYING_``)."""
    return name.startswith(".") or (name.startswith("_") and "=" not in name) or name.endswith("._COPYING_")


def part_format(name: str) -> str | None:
    """``parquet`` or ``csv`` for a file whose name ends in ``.parquet`` or ``.csv`` in any case
    (``part-1.PARQUET``); None for any other name."""
    lower = name.lower()
    return next((fmt for fmt in FORMATS if lower.endswith("." + fmt)), None)


def parquet_bytes(head: bytes, tail: bytes) -> bool:
    """Whether a file whose first and last bytes are ``head`` and ``tail`` is Parquet by its magic
    numbers (what Hive and Impala write as ``000000_0``, without an ending)."""
    return head[:4] == PARQUET_MAGIC and tail[-4:] == PARQUET_MAGIC


def _is_parquet(path: str, size: int) -> bool:
    if size < _PARQUET_SMALLEST:
        return False
    with open(path, "rb") as file:
        head = file.read(4)
        file.seek(-4, os.SEEK_END)
        return parquet_bytes(head, file.read(4))


def not_a_part(name: str) -> DataFormatError:
    """A file in a table folder that is no part of it: refused rather than left out."""
    return DataFormatError(
        f"{name}: not a part of its table folder: a part's name ends in .parquet or .csv (in any case), or "
        "the file is Parquet whatever its name (as Hive and Impala write 000000_0); rename or move the file, "
        "or start its name with _ or . to have it skipped"
    )


def unreadable(name: str, error: OSError, link: bool = False) -> DataFormatError:
    """A data file that cannot be read, named: never left out, never taken for an empty part."""
    reason = os.strerror(error.errno) if error.errno else str(error)
    why = " (a symbolic link to a file that does not exist)" if link and isinstance(error, FileNotFoundError) else ""
    return DataFormatError(f"{name}: a data file that cannot be read: {reason}{why}")


def empty_table_file(name: str, table: str) -> DataFormatError:
    """A table given as one 0-byte CSV file: it has no header row, so every column is missing (a
    0-byte part of a table folder is an empty part)."""
    columns = COLUMNS[table]
    return DataFormatError(
        f"{name}: an empty file (0 bytes), without a header row: missing columns "
        f"{', '.join(map(repr, columns))}; the {table} table has columns {', '.join(columns)}"
    )


def delta_table(label: str) -> DataFormatError:
    return DataFormatError(
        f"{label}: a Delta table (it holds {DELTA_LOG}/), not a folder of parts: its folder also keeps files "
        "of the table's older versions, which are not its rows. Export the table's current version as "
        "Parquet (for example spark.read.format('delta').load(PATH).write.parquet(OUT)) and give that folder"
    )


def hive_levels(part: str) -> dict[str, str | None]:
    """The ``name=value`` folder levels of ``part`` (a file's path below its table folder, with
    '/'), name to value, unescaped as Spark escapes them (``%3A`` is ':'); Spark's missing value is
    None. A name given at two levels is an error."""
    levels: dict[str, str | None] = {}
    if "=" not in part:
        return levels
    for folder in part.split("/")[:-1]:
        name, equals, value = folder.partition("=")
        if not equals or not name:
            continue  # a plain folder: it supplies nothing
        name, value = unquote(name), unquote(value)
        if name in levels:
            raise DataFormatError(
                f"{part}: the folder level {name!r} is given twice on the way to this file; give each "
                "Hive-style level (name=value) once"
            )
        levels[name] = None if value == HIVE_NULL else value
    return levels


@dataclass(frozen=True)
class Source:
    table: str
    files: tuple[Path, ...]  # every file, 0-byte ones too (the fingerprint and the manifest see them)
    fmt: str  # "parquet" or "csv"
    folder: bool = False  # a folder of parts rather than one file
    root: Path | None = None  # the table folder (a folder of parts)

    @property
    def label(self) -> str:
        if not self.folder:
            return self.files[0].name
        if len(self.files) == 1:
            return self.named(self.files[0])
        return f"{self.table}/ ({len(self.files)} {self.fmt} files)"

    def part(self, path: Path) -> str:
        """A file as shown beside its folder's label: its path below the table folder."""
        if self.root is None:
            return path.name
        text, prefix = str(path), f"{self.root}/"
        return text[len(prefix) :] if text.startswith(prefix) else path.relative_to(self.root).as_posix()

    def named(self, path: Path) -> str:
        """A file as messages name it: ``fees.csv``, ``transactions/day=2025-01-01/part-0.parquet``."""
        return f"{self.table}/{self.part(path)}" if self.folder else path.name

    def levels(self, path: Path) -> dict[str, str | None]:
        """The Hive-style folder levels above ``path`` (none for a table given as one file)."""
        if not self.folder:
            return {}
        try:
            return hive_levels(self.part(path))
        except DataFormatError as error:
            raise DataFormatError(f"{self.table}/{error}") from None


def _files(folder: Path) -> Iterator[os.DirEntry[str]]:
    """The entries below ``folder`` that are not folders, at any depth, leaving out what
    :func:`skipped` names; a Delta table is refused. A folder reached twice through a symbolic link
    is read once."""
    seen: set[tuple[int, int]] = set()
    pending = [folder]
    while pending:
        current = pending.pop()
        stat = current.stat()
        if (stat.st_dev, stat.st_ino) in seen:
            continue
        seen.add((stat.st_dev, stat.st_ino))
        with os.scandir(current) as entries:
            for entry in entries:
                if entry.name == DELTA_LOG and entry.is_dir():
                    raise delta_table(f"{folder.name}/")
                if skipped(entry.name):
                    continue
                if entry.is_dir():
                    pending.append(Path(entry.path))
                else:
                    yield entry


def _walk(folder: Path) -> Iterator[tuple[Path, str]]:
    """Each part below the table folder ``folder`` (:func:`_files`) with its format; a file that
    is no part (:func:`not_a_part`) or that cannot be read (:func:`unreadable`) is refused."""
    prefix = len(str(folder.parent)) + 1
    for entry in _files(folder):
        name = entry.path[prefix:]
        try:
            size = entry.stat().st_size  # through a symbolic link: the file it points to
            fmt = part_format(entry.name) or ("parquet" if _is_parquet(entry.path, size) else None)
        except OSError as error:
            raise unreadable(name, error, entry.is_symlink()) from None
        if fmt is None:
            raise not_a_part(name)
        yield Path(entry.path), fmt


def check_readable(directory: Path) -> None:
    """Refuse a data file of ``directory`` that cannot be read (a symbolic link to nothing), at any
    depth of its table folders, as :func:`find_sources` does; nothing else is checked. Spark's own
    listing of a ``file:`` URL leaves such a file out without a word: ``exports`` asks here."""
    prefix = len(str(directory).rstrip("/")) + 1
    with os.scandir(directory) as top:
        for entry in top:
            if skipped(entry.name):
                continue
            if entry.is_dir():
                files = list(_files(Path(entry.path)))
            elif part_format(entry.name) is not None:
                files = [entry]
            else:
                continue  # beside the tables (watermark.json, notes): not a data file
            for file in files:
                try:
                    file.stat()
                except OSError as error:
                    raise unreadable(file.path[prefix:], error, file.is_symlink()) from None


def find_sources(directory: Path) -> dict[str, Source]:
    """The files of each table in ``directory``; an unknown or doubled data file is an error."""
    if not directory.is_dir():
        raise DataFormatError(f"data folder {str(directory)!r} does not exist or is not a folder")
    if (directory / DELTA_LOG).is_dir():
        raise delta_table(f"data folder {str(directory)!r}")
    found: dict[str, list[Source]] = {}
    for entry in sorted(directory.iterdir()):
        if skipped(entry.name):
            continue
        fmt = part_format(entry.name)
        if entry.is_dir():
            # By the path below the folder, as text: the order is the same on every run, without
            # pathlib's slow comparisons over thousands of files.
            prefix = len(str(entry)) + 1
            found_parts = sorted(_walk(entry), key=lambda part: str(part[0])[prefix:])
            fmts = {fmt for _path, fmt in found_parts}
            if not found_parts:
                continue
            if len(fmts) > 1:
                raise DataFormatError(f"{entry.name}/ mixes Parquet and CSV parts; use one format per table")
            parts = tuple(path for path, _fmt in found_parts)
            source = Source(entry.name, parts, fmts.pop(), folder=True, root=entry)
        elif fmt is not None:
            try:
                entry.stat()  # through a symbolic link: the file it points to
            except OSError as error:
                raise unreadable(entry.name, error, entry.is_symlink()) from None
            source = Source(entry.stem, (entry,), fmt)
        else:
            continue
        if source.table not in TABLES:
            raise DataFormatError(
                f"{entry.name}: not a table of the data format; the tables are {', '.join(TABLES)} "
                "(as NAME.parquet, NAME.csv or a folder NAME/)"
            )
        found.setdefault(source.table, []).append(source)
    for table, sources in found.items():
        if len(sources) > 1:
            raise DataFormatError(f"table {table!r} is given more than once: " + ", ".join(s.label for s in sources))
    if "projects" not in found:
        raise DataFormatError(
            f"data folder {str(directory)!r} has no projects table "
            "(projects.parquet or projects.csv); see docs/data-format.md"
        )
    return {table: sources[0] for table, sources in found.items()}


def fingerprint(sources: dict[str, Source], stats: dict[Path, dict] | None = None) -> str:
    """Changes whenever a file is added, removed, rewritten or touched. ``stats``: each file's
    ``size`` and ``mtime_ns`` as taken before a build read them (else taken now)."""
    digest = hashlib.sha256()
    # A table folder may hold thousands of files: each folder is resolved once, and names are joined
    # as text (pathlib's operators are slow over thousands of files).
    folders: dict[str, str] = {}
    for table in sorted(sources):
        for path in sources[table].files:
            if stats is None:
                stat = path.stat()
                size, mtime_ns = stat.st_size, stat.st_mtime_ns
            else:
                size, mtime_ns = stats[path]["size"], stats[path]["mtime_ns"]
            parent, name = os.path.split(str(path))
            folder = folders.get(parent) or folders.setdefault(parent, str(Path(parent).resolve()))
            digest.update(f"{os.path.join(folder, name)}\0{size}\0{mtime_ns}\n".encode())
    return digest.hexdigest()[:32]


# -- what is wrong with a CSV file -----------------------------------------------------------------------
# DuckDB reports a bad CSV as "CSV Error on Line: 2", or, when a short row or a stray quote upsets
# its dialect detection, as missing columns. On that path only, the file is read again here, with the
# csv module, to name the line, the column and the problem.


class _BadBytes(Exception):
    def __init__(self, line: int, column: str, detail: str):
        super().__init__(detail)
        self.line, self.column, self.detail = line, column, detail


def _utf8_lines(path: Path, header: list[str]) -> Iterator[str]:
    """The file's lines as text; bytes that are not UTF-8 raise _BadBytes naming the line and column."""
    with path.open("rb") as raw:
        for number, line in enumerate(raw, 1):
            try:
                yield line.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as error:
                before = line[: error.start].decode("utf-8", "replace")
                fields = next(csv.reader([before])) if before else [""]
                index = len(fields) - 1
                column = header[index] if number > 1 and index < len(header) else f"field {index + 1}"
                bad = line[error.start : error.end]
                raise _BadBytes(
                    number,
                    column,
                    f"byte{'s' if len(bad) > 1 else ''} {' '.join(f'0x{b:02x}' for b in bad)} "
                    f"(character {len(before) + 1} of the line) is not UTF-8",
                ) from None


def csv_header(path: Path) -> list[str] | None:
    """The column names of a CSV file's header row (none for an empty file); None when the row is
    not readable as UTF-8 CSV (:func:`csv_problem` then says why)."""
    try:
        with path.open(encoding="utf-8-sig", newline="") as text:
            return next(csv.reader(text, strict=True), [])
    except (UnicodeDecodeError, csv.Error):
        return None


def csv_problem(path: Path, label: str) -> str | None:
    """The first line of ``path`` that breaks "comma-separated, a header row, UTF-8", or None."""
    header: list[str] = []
    reader = csv.reader(_utf8_lines(path, header), strict=True)
    try:
        header.extend(next(reader, []))
        for record in reader:
            if not record:
                continue  # a blank line
            if len(record) < len(header):
                missing = header[len(record) :]
                return (
                    f"{label}, line {reader.line_num}: the row has {len(record)} values where the header has "
                    f"{len(header)}; it ends after column {header[len(record) - 1]!r}, so "
                    f"{', '.join(map(repr, missing))} {'is' if len(missing) == 1 else 'are'} missing "
                    "(a short or cut-off row)"
                )
            if len(record) > len(header):
                return (
                    f"{label}, line {reader.line_num}: the row has {len(record)} values where the header has "
                    f"{len(header)}; the extra values come after column {header[-1]!r} (an unquoted comma?)"
                )
    except _BadBytes as bad:
        return (
            f"{label}, line {bad.line}, column {bad.column!r}: {bad.detail}; CSV files must be UTF-8 "
            "(save it again as UTF-8, for example as 'CSV UTF-8' from a spreadsheet)"
        )
    except csv.Error as error:
        return f"{label}, line {reader.line_num}: {error} (a quote without its closing quote?)"
    return None


def csv_lines(path: Path, rows: set[int]) -> dict[int, int]:
    """The line on which each of ``rows`` (data rows numbered from 1) starts in a readable CSV file."""
    found: dict[int, int] = {}
    if not rows:
        return found
    with path.open(encoding="utf-8-sig", errors="replace", newline="") as text:
        reader = csv.reader(text)
        next(reader, None)
        row, line = 0, reader.line_num + 1
        for record in reader:
            if record:
                row += 1
                if row in rows:
                    found[row] = line
                    if len(found) == len(rows):
                        break
            line = reader.line_num + 1
    return found
