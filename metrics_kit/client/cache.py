"""The client's persistent on-disk cache of metric VALUES.

What is cached
    One parsed metric value per point: ``(metric, project, granularity, request date)`` ->
    :class:`Entry` (the value with its type, its unit, whether the period is complete, the
    period's bounds and when it was fetched). Not HTTP responses: a warm pull of 365 daily values
    is read back in one query (a range scan; scattered dates go by ~500 per query), with no
    response objects to deserialise.

Complete or not, and how long
    Whether a value is complete is decided once, when it is fetched, and stored with it: complete
    only if its period had ended when it was fetched (the period's end, the day after its last day
    at 00:00 UTC, against the fetch time) and the service, where it sends a ``complete`` flag, says
    so. A value fetched while its period was running stays incomplete however late it is read: it
    holds the number of that moment. Each row also keeps the version of that rule it was decided
    under (``COMPLETENESS_RULE``): a value filed complete under an older one is not read (it is
    fetched again, once). A complete value is kept until the cache is cleared; an incomplete
    one is read back only while it is younger than the *reading* cache's ``incomplete_ttl``
    (600 seconds by default): the policy is the reader's, never the writer's. Incomplete values
    older than the writer's ``incomplete_ttl`` are purged at the start of each write.

Which data version
    A service that names its data version (``X-Data-Version``) gets its values filed under it: each
    row holds the version of the answer it came from, and only the rows of the version the client
    currently trusts are read. The last version seen, when it was seen, and the service's
    ``/projects`` answer under it are kept per service and key (the ``services`` table), for a
    client that cannot reach the service (a client trusts only a version it saw itself).
    Recording another version deletes the rows of every other: values of two data sets are never
    mixed. A service that names no version has the version ``""``. A row holds a one-way digest of
    its version (``version_id``), the ``services`` table the version as the client keeps it (with the
    key masked in it: ``fetching.kept_version``).

No text of a service
    What a row holds of an answer is the number, the unit (the catalogue's: an answer in another
    is refused), the period's bounds as ISO dates (anything else is not stored) and the digest of
    its version; the ``services`` table holds the version and the projects as the client keeps them
    (``discovery``: the fields it uses, and none when the key is in them). So no text of a service,
    and so no key a service echoed, is written to the file.

Where
    One SQLite file, ``cache_dir() / "values.sqlite3"`` (``$METRICS_KIT_CACHE_DIR``, else the
    user's cache folder), in WAL mode, shared safely by the threads of a process (one connection
    behind a lock) and by several processes (SQLite's file locks, with a busy timeout; opening, and
    creating, the file is retried while another process holds it). A file of a previous schema
    version (2, 3 or 4) is migrated, its values kept (and the file rewritten, so that no text of a
    service it held stays in it); a file that is not a database, is damaged, or has
    another schema version is deleted and rebuilt, with a warning in the log: a cache is only ever
    a copy.

When a write fails
    A write that fails once the cache is open (a full disk, a file-size limit, a file made
    read-only, a lock held too long) is skipped: the values are still returned to the caller, which
    warns once (CacheWarning); ``put_many`` says whether it wrote. A read that fails is a miss. A
    folder that cannot be written when the cache is made is a ConfigurationError.

The API key is never stored
    Entries are separated per service and per key by a namespace, ``HMAC-SHA256(key=api_key,
    msg=normalised base URL)`` (the fingerprint in a transport's ``cache_identity``, see
    ``settings.cache_identity``; a cache made from an identity files its values under it). An HMAC
    rather than a plain hash of ``url + key``: it is a keyed one-way function, so the file holds
    nothing the key can be recovered from (API keys are long random strings, so guessing them
    against the namespace is hopeless), and two keys, or two services, never share entries. Neither
    the key nor the base URL is written to the file, and the key appears in no repr.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import math
import os
import re
import sqlite3
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from metrics_kit.client.settings import Secret, check_seconds, normalise_url
from metrics_kit.errors import ClientClosedError, ConfigurationError
from metrics_kit.files import CACHE_DIR_ENV, cache_dir
from metrics_kit.spec.calendar import ISO, Calendar

__all__ = [
    "Entry",
    "Key",
    "Known",
    "ValueCache",
    "complete_when_fetched",
    "default_path",
    "delete_cache_file",
    "namespace",
]

log = logging.getLogger(__name__)

FILE_NAME = "values.sqlite3"
# 2: the data version of each row, and the services table; 3: completeness decided when fetched;
# 4: the completeness rule each row's flag was decided under; 5: no text of a service (a row's version
# as a digest, its period's bounds as ISO dates, the services table as the client keeps it)
SCHEMA_VERSION = "5"
# The version of the rule that decides whether a value is complete (complete_when_fetched, with the
# flags services send). 1: the service's flag as it came (the reference service flagged a day, week
# or month complete while it ran, when its data reached that far); 2: complete only if the period had
# ended when the value was fetched, and the service says so. A complete row of an older rule is not read.
COMPLETENESS_RULE = 2
CHUNK = 500  # dates per query: well under SQLite's 32,766 bound parameters
BUSY_TIMEOUT = 10.0  # seconds another process may hold the write lock before we give up
INT64 = (-(2**63), 2**63 - 1)  # the integers SQLite stores exactly (as INTEGER); counts are read back as int

Key = tuple[str, str, str, str]  # (metric_name canonical, project, granularity, request date ISO)

_SIDE_FILES = ("-wal", "-shm", "-journal")
# Errors that mean the file is not a usable cache (rebuild it), rather than busy or misused.
_BROKEN = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}
_BUSY = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}
_UNWRITABLE = {sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS entries (
    ns TEXT NOT NULL,            -- namespace(base_url, api_key): an HMAC, never the key
    metric TEXT NOT NULL,
    project TEXT NOT NULL,
    granularity TEXT NOT NULL,
    date TEXT NOT NULL,          -- request date, ISO
    value NOT NULL,              -- no declared type: a count stays INTEGER (exact), an amount REAL
    unit TEXT,
    complete INTEGER NOT NULL,   -- 1: the period had ended when the value was fetched, else 0
    period_start TEXT,
    period_end TEXT,
    fetched_at REAL NOT NULL,
    version TEXT NOT NULL,       -- version_id(the data version of the answer), a one-way digest
    rule INTEGER NOT NULL,       -- the completeness rule the flag was decided under (COMPLETENESS_RULE)
    PRIMARY KEY (ns, metric, project, granularity, date)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS services (
    ns TEXT PRIMARY KEY,
    version TEXT NOT NULL,       -- the data version last seen, as the client keeps it (key masked)
    seen_at REAL NOT NULL,       -- when it was last seen, the wall clock
    projects TEXT                -- its project discovery answer as JSON ('null': none offered), NULL: not asked
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS entries_incomplete ON entries (fetched_at) WHERE complete = 0;
"""
# Schema 2 -> 3: a row whose completeness the service did not say is complete if its period had
# ended (the day after period_end, 00:00 UTC, as seconds since the epoch) when it was fetched.
_MIGRATE_2 = """
CREATE TABLE entries_3 (
    ns TEXT NOT NULL, metric TEXT NOT NULL, project TEXT NOT NULL, granularity TEXT NOT NULL,
    date TEXT NOT NULL, value NOT NULL, unit TEXT, complete INTEGER NOT NULL, period_start TEXT,
    period_end TEXT, fetched_at REAL NOT NULL, version TEXT NOT NULL,
    PRIMARY KEY (ns, metric, project, granularity, date)
) WITHOUT ROWID;
INSERT INTO entries_3 SELECT ns, metric, project, granularity, date, value, unit,
    COALESCE(complete, CASE WHEN period_end IS NOT NULL
        AND (julianday(substr(period_end, 1, 10)) + 1 - 2440587.5) * 86400.0 <= fetched_at THEN 1 ELSE 0 END),
    period_start, period_end, fetched_at, version FROM entries;
DROP INDEX IF EXISTS entries_expiry;
DROP TABLE entries;
ALTER TABLE entries_3 RENAME TO entries;
CREATE INDEX IF NOT EXISTS entries_incomplete ON entries (fetched_at) WHERE complete = 0;
"""
# Schema 3 -> 4: every row was decided under the first completeness rule.
_MIGRATE_3 = "ALTER TABLE entries ADD COLUMN rule INTEGER NOT NULL DEFAULT 1"
# Schema 4 -> 5: no text of a service. A row's version becomes its digest (version_id, a function of
# the connection), its period's bounds the ISO dates they begin with (the client checked them so),
# and the services table is emptied: its versions and projects were kept as the service wrote them,
# the key perhaps in them, and are asked again (the version the client keeps is its masked form).
_MIGRATE_4 = """
UPDATE entries SET version = version_id(version), period_start = substr(period_start, 1, 10),
    period_end = substr(period_end, 1, 10);
DELETE FROM services;
"""
_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)

T = TypeVar("T")


@dataclass(frozen=True)
class Entry:
    """One cached metric value."""

    value: int | float
    unit: str | None
    complete: bool | None  # whether the period had ended when fetched; None: put_many decides by its end
    period_start: str | None  # ISO date, when the service said
    period_end: str | None
    fetched_at: float  # the wall clock (seconds since the epoch) when fetched
    version: str = ""  # the data version of the answer


@dataclass(frozen=True)
class Known:
    """What the cache holds of a service: the data version last seen, when, and its projects then."""

    version: str
    seen_at: float
    projects: str | None  # the JSON of its /projects answer under that version; None: not asked


def default_path() -> Path:
    """``cache_dir() / "values.sqlite3"``."""
    return cache_dir() / FILE_NAME


def namespace(base_url: str, api_key: str | None) -> str:
    """The hex HMAC-SHA256 of the normalised base URL, keyed by the API key.

    Same service and key -> same namespace; another key or another service -> another one. The
    key cannot be recovered from it.
    """
    return Secret(api_key or "").fingerprint(base_url)


def version_id(version: str) -> str:
    """What a row of the cache holds of its data version: a one-way digest of it (the start of its
    SHA-256, in hex), which tells versions apart and holds none of the service's text."""
    return hashlib.sha256(version.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _date(bound: str | None) -> str | None:
    """A period's bound as a row holds it: an ISO date, nothing else (None)."""
    return bound if isinstance(bound, str) and _ISO_DATE.fullmatch(bound) else None


def complete_when_fetched(complete: bool | None, last_day: dt.date | None, fetched_at: float) -> bool:
    """The one completeness rule (version COMPLETENESS_RULE): complete only if the period (whose
    last day is ``last_day``) had ended at ``fetched_at``, and the service's flag, where it sent one,
    says so. A period that had not ended is not complete whatever a service says (its data may run
    up to now), and one that cannot be placed is not complete."""
    if last_day is None or complete is False:
        return False
    ended = dt.datetime.combine(last_day, dt.time(), dt.UTC).timestamp() + 86400  # (9999-12-31 has no next day)
    return ended <= fetched_at


def delete_cache_file(path: Path | None = None) -> None:
    """Delete the cache file and its WAL and shared-memory files (``path`` or the default): every
    service's and key's values. (``Client.clear_cache`` forgets only one service and key's.)

    Caches open in this or another process notice the file is gone and start a fresh one.
    """
    _remove_files(Path(path) if path is not None else default_path())


def _remove_files(path: Path) -> None:
    for name in (str(path), *(str(path) + suffix for suffix in _SIDE_FILES)):
        try:
            os.remove(name)
        except FileNotFoundError:
            pass


class ValueCache:
    """Metric values for one service and one API key, in the shared cache file.

    Made from ``(base_url, api_key)``, or from a transport's ``cache_identity`` alone
    (``service#fingerprint``). ``get_many`` returns only fresh hits; ``put_many`` writes a batch in
    one transaction, or skips it when the file cannot be written (``last_error`` says why). Safe to
    share between threads. Close it (or use it as a context manager) when done.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        path: Path | None = None,
        incomplete_ttl: float = 600.0,
        clock: Callable[[], float] = time.time,
        calendar: Calendar = ISO,
    ):
        self.incomplete_ttl = check_seconds("incomplete_ttl", incomplete_ttl, positive=False)
        self._clock = clock  # the wall clock (seconds since the epoch): expiry outlives the process
        self._calendar = calendar
        if api_key is None:  # a transport's cache identity, service#fingerprint
            service, _, fingerprint = base_url.rpartition("#")
            self._base_url, self._ns = service or base_url, fingerprint or namespace(base_url, None)
        else:
            self._base_url, self._ns = normalise_url(base_url), namespace(base_url, api_key)
        self._explicit_path = path is not None
        self.path = Path(path) if path is not None else default_path()
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._inode: tuple[int, int] | None = None
        self._closed = False
        self.hits = 0
        self.misses = 0
        self.last_error: BaseException | None = None  # why the last operation that failed did
        self._failing = False  # whether the last operation failed
        # Why the file, which exists, could not be opened for writing (a full disk, a file-size
        # limit, a read-only file, -wal/-shm that cannot be made): then it is read only, or not at
        # all, and every write is skipped. None: writable.
        self.read_only: BaseException | None = None
        self._unusable = False  # read_only, and not even readable: every read a miss
        with self._lock:
            self._open()

    # -- public -------------------------------------------------------------------------------

    def get_many(self, keys: Sequence[Key], *, version: str = "", now: float | None = None) -> dict[Key, Entry]:
        """The fresh entries among ``keys`` of data ``version`` (expired or absent keys, and those of
        another version, are left out and count as misses)."""
        now = self._clock() if now is None else now
        groups: dict[tuple[str, str, str], dict[str, Key]] = {}
        for key in keys:
            groups.setdefault(key[:3], {})[key[3]] = key
        nothing: dict[Key, Entry] = {}
        found = self._run(lambda conn: self._select(conn, groups, version, now), default=nothing) if groups else nothing
        with self._lock:
            self.hits += len(found)
            self.misses += sum(map(len, groups.values())) - len(found)
        return found

    def put_many(self, items: Sequence[tuple[Key, Entry]]) -> bool:
        """Store entries (replacing any with the same key) in one transaction. False: not written
        (``last_error`` says why), the entries are simply not cached."""
        rows = []
        for (metric, project, granularity, day), entry in items:
            value = entry.value
            if isinstance(value, float) and math.isnan(value):
                continue  # SQLite would store NaN as NULL; a missing value is not worth caching
            if isinstance(value, bool):
                value = int(value)
            if isinstance(value, int) and not INT64[0] <= value <= INT64[1]:
                # SQLite holds an INTEGER in 64 bits: this one is left out (fetched again next time),
                # and the rest of the batch is written.
                log.warning("a value of %s for %s is beyond a 64-bit integer: not cached", metric, day)
                continue
            complete = int(self._complete((metric, project, granularity, day), entry))
            rows.append(
                (
                    self._ns,
                    metric,
                    project,
                    granularity,
                    day,
                    value,
                    entry.unit,
                    complete,
                    _date(entry.period_start),
                    _date(entry.period_end),
                    entry.fetched_at,
                    version_id(entry.version),
                    COMPLETENESS_RULE,
                )
            )
        if not rows:
            return True
        if self.read_only is not None:
            return False
        return self._run(lambda conn: self._insert(conn, rows), default=False)

    def known(self) -> Known | None:
        """The data version last seen for this service and key, when, and its projects; None if never."""
        row = self._run(
            lambda conn: conn.execute(
                "SELECT version, seen_at, projects FROM services WHERE ns = ?", (self._ns,)
            ).fetchone(),
            default=None,
        )
        return None if row is None else Known(*row)

    def see(self, version: str, seen_at: float, projects: str | None = None) -> bool:
        """Deprecated: :meth:`record_version` (which also deletes the values of an older version)."""
        warnings.warn("ValueCache.see() is now ValueCache.record_version()", DeprecationWarning, stacklevel=2)
        return self.record_version(version, seen_at, projects)

    def record_version(self, version: str, seen_at: float, projects: str | None = None) -> bool:
        """Record that the service answered from data ``version`` at ``seen_at`` (with ``projects``,
        its /projects answer, when given). Another version than the one recorded deletes every value
        of the older one, and its projects, in the same transaction. False: not written."""

        def write(conn: sqlite3.Connection) -> bool:
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "SELECT version, projects, seen_at FROM services WHERE ns = ?", (self._ns,)
                ).fetchone()
                kept = projects
                if row is not None and row[0] == version:
                    kept = row[1] if projects is None else projects
                    seen = max(seen_at, row[2])
                else:
                    conn.execute("DELETE FROM entries WHERE ns = ? AND version != ?", (self._ns, version_id(version)))
                    seen = seen_at
                conn.execute("INSERT OR REPLACE INTO services VALUES (?, ?, ?, ?)", (self._ns, version, seen, kept))
            except BaseException:
                _rollback(conn)
                raise
            conn.execute("COMMIT")
            return True

        if self.read_only is not None:
            return False
        return self._run(write, default=False)

    def clear(self, *, everything: bool = False) -> int:
        """Remove this service and key's entries (or every entry); return how many rows went."""

        def delete(conn: sqlite3.Connection) -> int:
            if everything:
                conn.execute("DELETE FROM services")
                return conn.execute("DELETE FROM entries").rowcount
            conn.execute("DELETE FROM services WHERE ns = ?", (self._ns,))
            return conn.execute("DELETE FROM entries WHERE ns = ?", (self._ns,)).rowcount

        return self._run(delete, default=0, write=True)

    def stats(self) -> dict[str, Any]:
        """``hits`` and ``misses`` since this cache was opened, fresh ``entries`` held for this
        service and key, and the file's ``path``."""
        now = self._clock()
        entries = self._run(
            lambda conn: conn.execute(
                "SELECT count(*) FROM entries WHERE ns = ?"
                " AND (complete = 1 AND rule = ? OR complete = 0 AND fetched_at > ?)",
                (self._ns, COMPLETENESS_RULE, now - self.incomplete_ttl),
            ).fetchone()[0],
            default=0,
        )
        with self._lock:
            return {"hits": self.hits, "misses": self.misses, "entries": entries, "path": str(self.path)}

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._disconnect()

    def __enter__(self) -> ValueCache:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ValueCache(base_url={self._base_url!r}, path={str(self.path)!r})"

    # -- completeness ---------------------------------------------------------------------------

    def _complete(self, key: Key, entry: Entry) -> bool:
        """Whether the entry is complete: its own flag where it has one (decided by the client with
        complete_when_fetched), else whether its period had ended when it was fetched."""
        if entry.complete is not None:
            return bool(entry.complete)
        try:
            if entry.period_end is not None:
                last: dt.date | None = dt.date.fromisoformat(entry.period_end[:10])
            else:
                last = self._calendar.end(dt.date.fromisoformat(key[3]), key[2])
        except ValueError:  # a date or granularity we cannot place (a ValidationError too)
            last = None
        return complete_when_fetched(None, last, entry.fetched_at)

    # -- queries ------------------------------------------------------------------------------

    def _select(
        self,
        conn: sqlite3.Connection,
        groups: dict[tuple[str, str, str], dict[str, Key]],
        version: str,
        now: float,
    ) -> dict[Key, Entry]:
        found: dict[Key, Entry] = {}
        new = object.__new__
        conn.execute("BEGIN")  # one snapshot for every query
        try:
            for (metric, project, granularity), by_date in groups.items():
                head = (self._ns, metric, project, granularity, version_id(version))
                get = by_date.get
                for sql, params in _queries(head, by_date, now - self.incomplete_ttl):
                    for day, value, unit, complete, start, end, fetched_at in conn.execute(sql, params):
                        key = get(day)
                        if key is not None:
                            # Entry(...) inlined at half the cost of six frozen __setattr__ calls;
                            # 18,250 of them are a third of a large pull's time.
                            entry = found[key] = new(Entry)
                            entry.__dict__.update(
                                value=value,
                                unit=unit,
                                complete=complete == 1,
                                period_start=start,
                                period_end=end,
                                fetched_at=fetched_at,
                                version=version,
                            )
        except BaseException:
            _rollback(conn)
            raise
        conn.execute("COMMIT")
        return found

    def _insert(self, conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> bool:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Purge incomplete values past this cache's TTL first (a reader with a longer TTL only
            # fetches them again), so that the rows of this batch are always written.
            purge = self._clock() - self.incomplete_ttl
            conn.execute("DELETE FROM entries WHERE complete = 0 AND fetched_at < ?", (purge,))
            conn.executemany(_INSERT, rows)
        except BaseException:
            _rollback(conn)
            raise
        conn.execute("COMMIT")
        return True

    # -- the connection -----------------------------------------------------------------------

    def _run(self, operation: Callable[[sqlite3.Connection], T], *, default: T, write: bool = False) -> T:
        """Run ``operation`` on a live connection. A broken file is rebuilt and the operation tried
        again. Any other failure (busy past the timeout, a full disk, a file made read-only, a file
        that can no longer be opened) gives ``default`` (a miss, or a write skipped), logged and kept
        in ``last_error``, unless ``write`` says the caller must know (a ConfigurationError)."""
        with self._lock:
            if self._closed:
                raise ClientClosedError(f"this ValueCache ({self.path}) is closed")
            for attempt in (1, 2):
                try:
                    self._reopen_if_replaced()
                    conn = self._conn
                    assert conn is not None
                    try:
                        done = operation(conn)
                        self._failing = False
                        return done
                    except sqlite3.DatabaseError as error:
                        _rollback(conn)
                        if not (_is_broken(error) and attempt == 1):
                            raise
                        self._rebuild(error)
                except (sqlite3.Error, ConfigurationError, OSError) as error:
                    if write:
                        if isinstance(error, ConfigurationError):
                            raise
                        raise self._unwritable(error) from None
                    self.last_error = error
                    # Logged once while it keeps failing (a full disk fails every write of a pull).
                    report = log.debug if self._failing else log.warning
                    report("the metric value cache %s failed (%s); going on without it", self.path, error)
                    self._failing = True
                    return default
            raise AssertionError("unreachable")

    def _open(self) -> None:
        folder = self.path.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise self._unwritable(error) from error
        if self.read_only is not None:
            self._open_read_only()
            return
        try:
            self._connect_when_free()
        except sqlite3.DatabaseError as error:
            if _code(error) in _UNWRITABLE or _code(error) in _BUSY or not _is_broken(error):
                self._disconnect()
                if not self.path.is_file():
                    raise self._unwritable(error) from None
                # The file is there but cannot be written: its values can still be read.
                self.read_only = error
                log.warning("the metric value cache %s cannot be written (%s); reading it only", self.path, error)
                self._open_read_only()
                return
            self._rebuild(error)

    def _open_read_only(self) -> None:
        """Connect without writing anything (``mode=ro``; ``immutable`` when even that needs a -shm
        file that cannot be made), checking the schema; when neither works, no file: every read a miss."""
        for query in ("mode=ro", "immutable=1"):
            uri = f"{self.path.resolve().as_uri()}?{query}"
            try:
                conn = sqlite3.connect(
                    uri, uri=True, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
                )
            except sqlite3.Error:
                continue
            try:
                row = conn.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
                conn.execute("SELECT count(*) FROM entries WHERE 0").fetchone()
            except sqlite3.Error:
                conn.close()
                continue
            if row is None or row[0] != SCHEMA_VERSION:
                conn.close()
                break  # another schema: not migrated without writing, so not read
            self._conn, self._unusable = conn, False
            stat = os.stat(self.path)
            self._inode = (stat.st_dev, stat.st_ino)
            return
        self._unusable = True

    def _connect_when_free(self) -> None:
        """Connect, trying again while another process holds the file (creating it, say: switching
        a new file to WAL takes a lock that SQLite's busy timeout does not wait for)."""
        waited, pause = 0.0, 0.005
        while True:
            try:
                self._connect()
                return
            except sqlite3.OperationalError as error:
                self._disconnect()
                if _code(error) not in _BUSY or waited >= BUSY_TIMEOUT:
                    raise
            time.sleep(pause)  # another process's lock: real time, not the injected clock
            waited += pause
            pause = min(pause * 2, 0.1)

    def _connect(self) -> None:
        if self.path.is_dir():
            raise ConfigurationError(f"the metric value cache file {self.path} is a folder; {self._how_to_change()}")
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False)
        self._conn = conn
        conn.execute("PRAGMA journal_mode=WAL").fetchone()
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("BEGIN IMMEDIATE")
        try:
            tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
            version = None
            if "meta" in tables:
                row = conn.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
                version = row[0] if row else None
            migrated = bool(tables) and version in ("2", "3", "4") and "entries" in tables
            if migrated:
                conn.create_function("version_id", 1, version_id, deterministic=True)
                steps = [_MIGRATE_2 if version == "2" else "", _MIGRATE_3 if version in ("2", "3") else "", _MIGRATE_4]
                for statement in ";".join(steps).split(";"):
                    if statement.strip():
                        conn.execute(statement)
                log.warning(
                    "the metric value cache %s was migrated to schema %s, its values kept (those filed complete "
                    "under an older completeness rule are fetched again once; the service's data version and "
                    "projects are asked again)",
                    self.path,
                    SCHEMA_VERSION,
                )
            elif tables and (version != SCHEMA_VERSION or "entries" not in tables):
                raise sqlite3.DatabaseError(f"schema version {version!r}, expected {SCHEMA_VERSION!r}")
            if not tables:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
            # Always a real write: a read-only file opens without complaint, and fails here instead
            # of at the first put.
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (SCHEMA_VERSION,))
        except BaseException:
            _rollback(conn)
            raise
        conn.execute("COMMIT")
        if migrated:
            _scrub(conn, self.path)
        stat = os.stat(self.path)
        self._inode = (stat.st_dev, stat.st_ino)

    def _rebuild(self, error: Exception) -> None:
        log.warning(
            "the metric value cache %s cannot be read (%s); deleting it and starting a fresh one "
            "(its values will be fetched again)",
            self.path,
            error,
        )
        self._disconnect()
        _remove_files(self.path)
        try:
            self._connect_when_free()
        except sqlite3.DatabaseError as again:
            self._disconnect()
            raise self._unwritable(again) from again

    def _reopen_if_replaced(self) -> None:
        """Follow the file if another process (or ``delete_cache_file``) deleted or replaced it."""
        if self._unusable:
            raise sqlite3.OperationalError(f"the file cannot be written or read ({self.read_only})")
        try:
            stat = os.stat(self.path)
            same = (stat.st_dev, stat.st_ino) == self._inode
        except OSError:
            same = False
        if not same or self._conn is None:
            self._disconnect()
            self._open()

    def _disconnect(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()

    def _how_to_change(self) -> str:
        how = "pass another path, " if self._explicit_path else ""
        return f"{how}set {CACHE_DIR_ENV} to a writable folder, or turn the cache off with cache=False"

    def _unwritable(self, error: BaseException) -> ConfigurationError:
        return ConfigurationError(
            f"cannot create or write the metric value cache {self.path.name} in the folder "
            f"{self.path.parent} ({error}); {self._how_to_change()}"
        )


_SELECT = (
    "SELECT date, value, unit, complete, period_start, period_end, fetched_at FROM entries"
    " WHERE ns = ? AND metric = ? AND project = ? AND granularity = ? AND version = ?"
    f" AND (complete = 1 AND rule = {COMPLETENESS_RULE} OR complete = 0 AND fetched_at > ?) AND "
)


def _queries(
    head: tuple[str, str, str, str, str], by_date: dict[str, Key], fresh_after: float
) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """The queries that read one (metric, project, granularity)'s dates.

    A dense run of dates (a pull of every day, say) is one range scan, whose extra rows, if any,
    are dropped by the caller; at most one row per day lies in the range, so the scan reads at most
    twice the rows asked for. Sparse dates are looked up by ``IN`` lists of up to ``CHUNK``.
    """
    first, last = min(by_date), max(by_date)
    try:
        span = (dt.date.fromisoformat(last[:10]) - dt.date.fromisoformat(first[:10])).days + 1
    except ValueError:
        span = None
    if span is not None and len(by_date) * 2 >= span:
        yield _SELECT + "date BETWEEN ? AND ?", (*head, fresh_after, first, last)
        return
    dates = sorted(by_date)
    for i in range(0, len(dates), CHUNK):
        chunk = dates[i : i + CHUNK]
        yield _SELECT + "date IN (" + ",".join("?" * len(chunk)) + ")", (*head, fresh_after, *chunk)


_INSERT = "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"


def _scrub(conn: sqlite3.Connection, path: Path) -> None:
    """Rewrite the file after a migration, so that none of what the migration replaced (a service's
    text, perhaps a key it echoed) stays in its free pages or its write-ahead log. Not done (another
    process holds the file, a full disk), it is said in the log: the values are the same either way."""
    try:
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    except sqlite3.Error as error:
        log.warning("the metric value cache %s could not be rewritten after its migration (%s)", path, error)


def _code(error: sqlite3.Error) -> int | None:
    code = getattr(error, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF  # primary code of an extended one


def _is_broken(error: sqlite3.DatabaseError) -> bool:
    if _code(error) in _BROKEN:
        return True
    if type(error) is sqlite3.DatabaseError:  # raised by us for a wrong schema, or a code-less error
        return _code(error) is None or _code(error) not in _BUSY | _UNWRITABLE
    message = str(error)
    return message.startswith(("no such table", "no such column", "table entries has"))


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass
