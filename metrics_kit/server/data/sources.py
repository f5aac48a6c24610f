"""Which files hold a data folder's tables, and a fingerprint that changes when any of them does.

Kept apart from the store so that finding saved aggregates (a fingerprint from file names, sizes
and times) needs no database engine: the embedded service starts without importing DuckDB.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from metrics_kit.errors import DataFormatError
from metrics_kit.server.data.schema import TABLES


@dataclass(frozen=True)
class Source:
    table: str
    files: tuple[Path, ...]
    fmt: str  # "parquet" or "csv"
    folder: bool = False  # a folder of parts rather than one file

    @property
    def label(self) -> str:
        if not self.folder:
            return self.files[0].name
        if len(self.files) == 1:
            return f"{self.table}/{self.files[0].name}"
        return f"{self.table}/ ({len(self.files)} {self.fmt} files)"


def find_sources(directory: Path) -> dict[str, Source]:
    """The files of each table in ``directory``; an unknown or doubled data file is an error."""
    if not directory.is_dir():
        raise DataFormatError(f"data folder {str(directory)!r} does not exist or is not a folder")
    found: dict[str, list[Source]] = {}
    for entry in sorted(directory.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            parts = sorted(p for p in entry.iterdir() if p.suffix in (".parquet", ".csv"))
            fmts = {p.suffix[1:] for p in parts}
            if not parts:
                continue
            if len(fmts) > 1:
                raise DataFormatError(f"{entry.name}/ mixes Parquet and CSV parts; use one format per table")
            source = Source(entry.name, tuple(parts), fmts.pop(), folder=True)
        elif entry.suffix in (".parquet", ".csv"):
            source = Source(entry.stem, (entry,), entry.suffix[1:])
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


def fingerprint(sources: dict[str, Source]) -> str:
    """Changes whenever a file is added, removed, rewritten or touched."""
    digest = hashlib.sha256()
    for table in sorted(sources):
        for path in sources[table].files:
            stat = path.stat()
            digest.update(f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:32]
