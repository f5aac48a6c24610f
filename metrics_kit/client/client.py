"""The client: any metric, for any projects and dates, as pandas objects.

Every argument is checked before the first request. A pull is a list of points (metric, project,
granularity, request date), one per period; cached points are read in one batch, the rest go to the
transport in batches, and each answer goes through the same parsing and error path, whichever
transport carried it (a remote service over HTTP, an application in this process, a test's function).

A client is open until ``close()`` (or until ``mk.configure`` replaces it as the default client);
a closed client raises ClientClosedError on every use. It never reopens, and never turns into a
client of another service: the service it answers from is fixed when it is made.

Whether a value is complete is decided when it is fetched and kept with it (the cache's
``complete_when_fetched``); every result's ``attrs`` names the service it came from and its data version.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import sys
import threading
import warnings
import weakref
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import pandas as pd

from metrics_kit.client import explain as explaining
from metrics_kit.client import families, fetching, frames, options, whole_series
from metrics_kit.client.cache import Entry, ValueCache, complete_when_fetched
from metrics_kit.client.discovery import Discovery, Projects
from metrics_kit.client.families import DateLike, Errors, Incomplete
from metrics_kit.client.frames import Point, Result
from metrics_kit.client.settings import Secret, Settings, address, shown_service
from metrics_kit.client.source import Source
from metrics_kit.client.transports import HTTPTransport, Transport, default_transport, pull_deadline
from metrics_kit.errors import (
    CacheWarning,
    ClientClosedError,
    ConfigurationError,
    FetchError,
    IncompletePeriodWarning,
    MissingValueError,
    PartialDataWarning,
    UnconfirmedDataWarning,
    ValidationError,
)
from metrics_kit.spec import ids
from metrics_kit.spec import wire as parse
from metrics_kit.spec.calendar import Calendar
from metrics_kit.spec.catalogue import Catalogue, default_catalogue

__all__ = ["Client", "Point", "Result", "close_as"]

log = logging.getLogger("metrics_kit.client")
SAVE_EVERY = fetching.BATCH  # fetched values are written to the cache in batches of this many
# The most points (metric x project x period) one call may ask for, checked before any request: a
# range typed wrong (years 0001 to 9999 by day) would otherwise send millions of requests. A service
# that answers a whole series per request (GET /series) is asked for up to MAX_SERIES_POINTS.
MAX_POINTS = 100_000
MAX_SERIES_POINTS = 1_000_000
Shape = Literal["wide", "long"]
_NOT_COPIED = "a Client cannot be copied or pickled; make another Client(...) with the same arguments"
Names = str | Iterable[str]


class Client:
    """A connection to a metrics service, with its cache and calendar.

    Where it connects: ``transport`` (any :class:`~metrics_kit.client.transports.Transport`), else
    ``base_url``/``api_key`` from the arguments, then ``METRICS_KIT_BASE_URL`` and
    ``METRICS_KIT_API_KEY``; with none of these, the embedded reference service on the synthetic
    demo data answers, offline.

    Close it when done (``close()``, or ``with Client(...) as client:``); a closed client raises
    ClientClosedError on every use and never answers from anywhere again.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | Secret | None = None,
        *,
        transport: Transport | None = None,
        workers: int | None = None,
        rate_limit: float | None = None,
        timeout: float | None = None,
        connect_timeout: float | None = None,
        retries: int | None = None,
        whole_series: bool = True,
        cache: bool = True,
        refresh: bool = False,
        progress: bool | None = None,
        week_start: Literal["monday", "sunday"] = "monday",
        chain_unit: str | None = None,
        incomplete_ttl: float | None = None,
        version_ttl: float | None = None,
        clock: Any = None,
        deadline: float | None = None,
    ):
        # From here on no frame of ours holds the key, or what may be a key given as the base URL, plain.
        api_key = Secret.of(api_key) if isinstance(api_key, str) else api_key
        base_url = address(base_url)
        # The settings by their names in the one table (client/options.py); the signature writes them
        # out for a type checker and for Shift-Tab (a test checks that it lists exactly these).
        settings = options.given(locals())
        self.settings = Settings.make(base_url=base_url, api_key=api_key, transport=transport, **settings)
        self.catalogue: Catalogue = default_catalogue(self.settings.chain_unit)
        self.calendar: Calendar = self.settings.calendar
        self._lock = threading.Lock()
        self._transport: Transport | None = transport
        self._given_transport = transport is not None
        self._cache: ValueCache | None = None
        self._closed: str | None = None  # None: open; else how it was closed (for the error)
        # What value, series, frame and explain use of the service (explain: only through it).
        self._source = Source(
            catalogue=self.catalogue,
            calendar=self.calendar,
            discovery=Discovery(self.settings.clock, self.settings.version_ttl),
            clock=self.settings.clock,
            transport=lambda: self.transport,
            cache=self._get_cache,
            service=self._shown_url(),
        )

    # -- plumbing ------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self._given_transport:
            assert self._transport is not None
            return self._transport.base_url
        return self.settings.connection.base_url or "embedded"

    @property
    def embedded(self) -> bool:
        return self.settings.connection.embedded and not self._given_transport

    @property
    def cache_enabled(self) -> bool:
        return self.settings.cache

    @property
    def week_start(self) -> str:
        return self.calendar.week_start

    @property
    def is_closed(self) -> bool:
        return self._closed is not None

    def __repr__(self) -> str:
        if "settings" not in vars(self):  # a traceback's locals, while __init__ refuses a setting
            return "Client(<not made>)"
        s = self.settings
        state = ", closed" if self.is_closed else ""
        return (
            f"Client(base_url={self._shown_url()!r}, workers={s.workers}, rate_limit={s.rate_limit}, "
            f"cache={s.cache}{state})"
        )

    def _shown_url(self) -> str:
        """The base URL for a message or a repr: anything in it that may be a key masked."""
        return shown_service(self.base_url)

    def _check_open(self) -> None:
        if self._closed is not None:
            raise ClientClosedError(
                f"this Client ({self._shown_url()}) was closed {self._closed}; a closed client never answers again "
                "(and never from another service). Make a new Client, or use the mk.* functions for the default one"
            )

    @property
    def transport(self) -> Transport:
        """The transport, made on first use: HTTP for a base URL, else the registered default."""
        with self._lock:
            self._check_open()
            if self._given_transport and _closed_by(self._transport):
                raise ClientClosedError(
                    f"the transport this Client ({self._shown_url()}) was given was closed by another Client that "
                    "shared it: closing a client closes the transport it was given (as httpx does). Give each "
                    "Client a transport of its own, or close only the last one"
                )
            if self._transport is None:
                s, connection = self.settings, self.settings.connection
                if connection.base_url is None or connection.api_key is None:
                    self._transport = default_transport(rate_limit=s.rate_limit)
                else:
                    # Each setting that shapes the connection, as the HTTPTransport argument it becomes.
                    shaped = {o.transport: getattr(s, o.name) for o in options.SETTINGS if o.transport is not None}
                    self._transport = HTTPTransport(connection.base_url, connection.api_key, **shaped)
            return self._transport

    def _get_cache(self) -> ValueCache | None:
        self._check_open()
        if not self.settings.cache:
            return None
        transport = self.transport
        with self._lock:
            self._check_open()
            if self._cache is None:
                # Filed under the transport's identity: its service and its key's fingerprint (the
                # embedded default: its data set), the same for every transport of that service and key.
                self._cache = ValueCache(
                    transport.cache_identity,
                    incomplete_ttl=self.settings.incomplete_ttl,
                    clock=self.settings.clock,
                    calendar=self.calendar,
                )
                if self._cache.read_only is not None:
                    warnings.warn(
                        f"the metric value cache {self._cache.path} cannot be written ({self._cache.read_only}); "
                        "it is only read: cached values are returned, new ones are not cached",
                        CacheWarning,
                        stacklevel=_caller_level(),
                    )
            return self._cache

    def clear_cache(self) -> int:
        """Forget every cached value of this service and key; returns how many were removed."""
        cache = self._get_cache()
        return cache.clear() if cache is not None else 0

    def close(self) -> None:
        """Close the transport and the cache. The client cannot be used afterwards
        (ClientClosedError); closing twice is fine."""
        self._close("with close()")

    def _close(self, how: str, keep: object = None) -> None:
        """Close, and close the transport unless it is ``keep`` (see :func:`close_as`)."""
        with self._lock:
            if self._closed is not None:
                return
            self._closed = how
            for part in (self._cache, self._transport):
                if part is not None and part is not keep:
                    part.close()
                    if part is self._transport and self._given_transport:
                        with contextlib.suppress(TypeError):  # a transport that cannot be weakly referenced
                            _closed_by_a_client.add(part)
            self._cache = None

    def __copy__(self) -> Client:
        raise TypeError(_NOT_COPIED)

    def __deepcopy__(self, memo: object) -> Client:
        raise TypeError(_NOT_COPIED)

    def __reduce__(self) -> Any:
        # A copy would share the cache and the transport (closing it closes the original's), and a
        # pickle would carry the key out of the process.
        raise TypeError(_NOT_COPIED)

    def __enter__(self) -> Client:
        self._check_open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- validation ----------------------------------------------------------------------------

    def discovery(self) -> Projects | None:
        """The service's projects ({project: {kinds, regular_pools, coverage}}), or None when it offers
        no discovery. The specification does not require it, so nothing depends on it."""
        return self._source.discovery.projects(self.transport, self._get_cache())

    def periods(self, start: DateLike, end: DateLike, granularity: str = "1_day") -> list[dt.date]:
        """First days of every period from the one containing ``start`` to the one containing ``end``."""
        granularity = ids.check_granularity(granularity, synonyms=True)
        first, last = ids.to_date(start, "start"), ids.to_date(end, "end")
        if first > last:
            raise ValidationError(f"start ({first}) is after end ({last})", "start")
        return list(self.calendar.starts(first, last, granularity))

    def period_start(self, day: dt.date, granularity: str) -> dt.date:
        """Deprecated: ``client.calendar.start(day, granularity)``."""
        warnings.warn("Client.period_start() is now client.calendar.start()", DeprecationWarning, stacklevel=2)
        return self.calendar.start(day, granularity)

    def period_end(self, day: dt.date, granularity: str) -> dt.date:
        """Deprecated: ``client.calendar.end(day, granularity)``."""
        warnings.warn("Client.period_end() is now client.calendar.end()", DeprecationWarning, stacklevel=2)
        return self.calendar.end(day, granularity)

    # -- fetching ------------------------------------------------------------------------------

    def fetch(
        self, points: Sequence[Point], *, refresh: bool | None = None, progress: bool | None = None
    ) -> tuple[dict[Point, Result], dict[Point, Exception]]:
        """Values of validated points: from the cache where fresh, the rest from the service.

        Every value of one result comes from one data version: when an answer names another version
        than the others (the service's data changed during the pull), the values of the older one
        are fetched again, up to source.VERSION_CHANGES times (:meth:`Source.settled`). So are cached
        values whose version the answers of the pull do not confirm, when the service names its
        version only in its answers."""
        refresh = self.settings.refresh if refresh is None else refresh
        results: dict[Point, Result] = {}
        failures: dict[Point, Exception] = {}
        versions: dict[Point, str] = {}  # the data version of each result
        asked = list(dict.fromkeys(points))
        again = False

        def one_pass() -> tuple[dict[Point, Result], dict[Point, Exception]] | None:
            """The points asked, then the values of an older version than the latest: None while some are."""
            nonlocal asked, again
            if again:
                log.info("the service's data changed during the pull; fetching %d values again", len(asked))
            found, failed, named, latest = self._fetch_once(asked, refresh, progress)
            results.update(found)
            failures.update(failed)
            versions.update(named)
            for point in failed:
                versions.pop(point, None)
                results.pop(point, None)
            asked = [p for p, v in versions.items() if v != latest]
            again = bool(asked)
            return None if again else (results, failures)

        found, failed = self._source.settled(one_pass, "during one pull")
        self._warn_if_unconfirmed(results)
        # In the order asked, however the answers came (whole series first, say): a FetchError's
        # first failure and attrs["failed"] are the same whichever way the values were asked.
        order = list(dict.fromkeys(points))
        return {p: found[p] for p in order if p in found}, {p: failed[p] for p in order if p in failed}

    def _fetch_once(
        self, points: list[Point], refresh: bool, progress: bool | None
    ) -> tuple[dict[Point, Result], dict[Point, Exception], dict[Point, str], str | None]:
        """One pass: the results, the failures, the data version of each result, and the latest version."""
        cache = self._get_cache()
        results: dict[Point, Result] = {}
        versions: dict[Point, str] = {}
        latest = None
        if cache is not None and not refresh:
            latest = self._source.discovery.version(self.transport, cache)
            if latest is not None:
                for key, entry in cache.get_many(points, version=latest).items():
                    results[Point(*key)] = Result(
                        entry.value, entry.unit, entry.complete, True, latest, fetched_at=entry.fetched_at
                    )
                    versions[Point(*key)] = latest
            if len(results) == len(points) and points and self._source.discovery.needs_confirming():
                # The service names its version only in its answers, and none has named this one within
                # version_ttl: one value is asked again, so that its answer confirms the version of the
                # others before they are used (a version it does not name makes them stale, see fetch).
                del results[points[0]], versions[points[0]]
        missing = [p for p in points if p not in results]
        failures: dict[Point, Exception] = {}
        if not missing:
            return results, failures, versions, latest
        show = self.settings.progress if progress is None else progress
        bar = fetching.progress_bar(len(missing), show)
        saver = _Saver(cache, self._source.discovery)

        def take(point: Point, outcome: parse.Parsed | Exception, version: str | None, sent: float) -> None:
            nonlocal latest
            if isinstance(outcome, Exception):
                failures[point] = outcome
            elif outcome.value is None:  # the service has no value for it: in attrs["missing"], never cached
                latest = version or ""
                results[point] = Result(None, outcome.unit, None, False, latest, outcome.reason or "")
                versions[point] = latest
            else:
                latest = version or ""
                entry = self._entry(point, outcome, latest, sent)
                saver.add(point, entry)
                results[point] = Result(entry.value, entry.unit, entry.complete, False, latest, fetched_at=sent)
                versions[point] = latest
            bar.update(1)

        try:
            metrics = {p.metric: self._source.metric(p.metric) for p in missing}
            with pull_deadline(self.settings.deadline):
                limit = self._series_limit()
                if limit is not None:  # whole series where the service offers them; the rest one by one
                    clock = self.settings.clock
                    asked = len(missing)
                    missing = whole_series.run(self.transport, missing, metrics, self.calendar, take, limit, clock)
                    _check_left(len(missing), asked)
                fetching.run(self.transport, missing, metrics, self.calendar, take, self.settings.clock)
        finally:
            # Also on an interrupt: every answer received is written, and a re-run fetches only the rest.
            saver.flush()
            bar.close()
        return results, failures, versions, latest

    def _series_limit(self) -> int | None:
        """The page size of the service's GET /series when the client asks whole series of it (the
        service advertises it in /projects, and whole_series is on); None: one value per request."""
        if not self.settings.whole_series:
            return None
        return self._source.discovery.series_limit(self.transport, self._get_cache())

    def _entry(self, point: Point, value: parse.Parsed, version: str, fetched_at: float) -> Entry:
        """A fetched value with its completeness decided by the one rule (complete_when_fetched), at
        ``fetched_at``: when its request was sent, not when the answer came (see fetching.run)."""
        try:
            last = dt.date.fromisoformat((value.period_end or "")[:10]) if value.period_end else None
        except ValueError:
            last = None
        if last is None:
            last = self.calendar.end(dt.date.fromisoformat(point.date), point.granularity)
        complete = complete_when_fetched(value.complete, last, fetched_at)
        assert value.value is not None  # a missing value is never cached (_fetch_once)
        return Entry(value.value, value.unit, complete, value.period_start, value.period_end, fetched_at, version)

    def _warn_if_unconfirmed(self, results: dict[Point, Result]) -> None:
        """Say so when cached values were read under a data version the service did not confirm
        (it could not be reached): they are the data as last seen, which may have changed since."""
        cached = {r.version for r in results.values() if r.from_cache and r.version is not None}
        unconfirmed = sorted(v for v in cached if not self._source.discovery.confirmed(v))
        if unconfirmed:
            count = sum(r.from_cache and r.version in unconfirmed for r in results.values())
            warnings.warn(
                f"{self._shown_url()} did not answer to confirm its data version: {count} values are from the "
                f"cache, under data version {', '.join(map(repr, unconfirmed))} as last seen, and may be out of "
                "date. Ask again when the service is reachable",
                UnconfirmedDataWarning,
                stacklevel=_caller_level(),
            )

    # -- public API ----------------------------------------------------------------------------

    def value(self, metric: str, project: str, granularity: str, date: DateLike) -> int | float:
        """One value: ``metric`` for ``project`` over the period of ``granularity`` containing ``date``
        (MissingValueError, with the service's reason, when the service says it has no value)."""
        point = self._source.point(metric, project, granularity, date)
        results, failures = self.fetch([point], progress=False)
        if failures:
            raise failures[point]
        result = results[point]
        about = f"{point.metric} for {point.project} over the {point.granularity} period starting {point.date}"
        if result.value is None:
            raise MissingValueError(
                f"the service has no value for {about}: {result.missing or 'it gave no reason'} (series() and "
                "frame() leave such points empty, listed in attrs['missing'])",
                result.missing or None,
            )
        if not result.complete:
            warnings.warn(
                f"{about} is not complete: {self._why_incomplete(point, result)}, so it may still change "
                "(series() and frame() list such periods in attrs['incomplete'])",
                IncompletePeriodWarning,
                stacklevel=_caller_level(),
            )
        return result.value

    def _why_incomplete(self, point: Point, result: Result) -> str:
        """Why a value is not complete, by the rule that decided it (complete_when_fetched): its
        period had not ended when it was fetched, else the service flagged it so."""
        last = self.calendar.end(dt.date.fromisoformat(point.date), point.granularity)
        try:
            fetched = dt.datetime.fromtimestamp(result.fetched_at, dt.UTC) if result.fetched_at is not None else None
        except (OverflowError, OSError, ValueError):  # a clock far outside the calendar
            fetched = None
        if fetched is None:
            return "whether its period had ended when the value was fetched is not known"
        # The period ends at the start of the day after its last (9999-12-31 has none: it never ends).
        ends = dt.datetime.combine(last, dt.time(), dt.UTC) + dt.timedelta(days=1) if last < dt.date.max else None
        if ends is None or fetched < ends:
            return f"the period had not ended when the value was fetched ({fetched:%Y-%m-%d %H:%M} UTC)"
        last_event = self._source.discovery.last_event()
        data = (
            f"; its data's last event is at {last_event:%Y-%m-%d %H:%M:%S} UTC"
            if last_event is not None and ends is not None and last_event < ends
            else ""
        )
        return (
            "the service flags the period not complete: its data (or the watermark or lag it declares) do not "
            f"cover the whole period yet{data}"
        )

    def explain(
        self, metric: str, project: str, granularity: str, date: DateLike, *, max_rows: int = explaining.MAX_ROWS
    ) -> pd.DataFrame:
        """The event rows behind one value: ``metric`` for ``project`` over the period of
        ``granularity`` containing ``date``, from the reference service's ``GET /explain`` (the
        embedded default or ``metrics-kit serve --data DIR``; another service raises
        ConfigurationError). Active users: one row per signer with its transactions; transaction
        counts: the transactions, ``counted`` false on a tx_id's repeats; amounts: the fee, flow or
        reward rows; supply: the period's flows, from ``attrs["opening_balance"]``. ``attrs`` say how
        the value follows from the rows (``formula``; ``value_column``, ``counted_column``,
        ``opening_balance``), the ``value`` served, whether the period is ``complete``, the service
        and data version. ``max_rows`` (100,000): a value with more rows raises ValidationError."""
        return explaining.explain(self._source, metric, project, granularity, date, max_rows)

    def _long(
        self,
        metrics: Names,
        projects: Names,
        start: DateLike,
        end: DateLike,
        granularity: str,
        options: dict[str, Any],
    ) -> pd.DataFrame:
        """Tidy rows: period_start, project, metric, value, unit, complete (see ``frame`` for ``options``)."""
        errors, incomplete, skip_inapplicable = options["errors"], options["incomplete"], options["skip_inapplicable"]
        _choice("errors", errors, ("raise", "coerce"))
        _choice("incomplete", incomplete, ("keep", "drop"))
        for flag in ("refresh", "progress"):  # None: the client's setting
            if not isinstance(options[flag], bool | None):
                raise ValidationError(f"{flag} must be True, False or None, not {options[flag]!r}", flag)
        granularity = ids.check_granularity(granularity, synonyms=True)
        # A metric named twice, or by its name and an alias, is one metric, fetched and shown once.
        metric_list = list({m.name: m for m in (self._source.metric(x) for x in _as_list(metrics, "metrics"))}.values())
        project_list = [ids.check_project(p) for p in _as_list(projects, "projects")]
        # Every argument checked before the network. The point limit too, counting every pair; with
        # skip_inapplicable, only the pairs that apply count, known after discovery (a range too long
        # for even one pair is refused before it).
        periods = self._count_periods(start, end, granularity)
        self._check_size(1 if skip_inapplicable else len(metric_list) * len(project_list), periods)
        pairs = []
        for project in project_list:
            for metric in metric_list:
                try:
                    self._source.check_applies(metric, project)
                except ValidationError as error:
                    if not (skip_inapplicable and error.argument == "metric"):
                        raise  # an unknown project is a mistake to report, never to skip
                    continue
                pairs.append((metric, project))
        if skip_inapplicable:
            self._check_size(len(pairs), periods, applicable=True)
        starts = self.periods(start, end, granularity)
        points = [Point(m.name, p, granularity, s.isoformat()) for m, p in pairs for s in starts]
        results, failures = self.fetch(points, refresh=options["refresh"], progress=options["progress"])
        if failures and errors == "raise":
            raise FetchError(failures, len(points))
        source = self._source.attrs(result.version for result in results.values())
        frame = frames.long_frame(points, results, failures, self.catalogue, source)
        frame.attrs["granularity"] = granularity
        if failures:
            warnings.warn(
                f"{len(failures)} of {len(points)} points failed and are missing (NaN); "
                f"see .attrs['failed']. First: {next(iter(failures.values()))}",
                PartialDataWarning,
                stacklevel=_caller_level(),
            )
        if "missing" in frame.attrs:
            missing = frame.attrs["missing"]
            warnings.warn(
                f"the service has no value for {len(missing)} of {len(points)} points (null): they are missing "
                f"(NaN); see .attrs['missing'] for each with its reason. First: {frames.point_text(missing[0])}",
                PartialDataWarning,
                stacklevel=_caller_level(),
            )
        return frames.drop_incomplete(frame) if incomplete == "drop" else frame

    def _count_periods(self, start: DateLike, end: DateLike, granularity: str) -> tuple[int, str]:
        """How many periods run from ``start`` to ``end`` (and the range in words, for a message),
        counted without listing them; the arguments are checked as ``periods()`` checks them."""
        first, last = ids.to_date(start, "start"), ids.to_date(end, "end")
        if first > last:
            raise ValidationError(f"start ({first}) is after end ({last})", "start")
        a, b = self.calendar.start(first, granularity), self.calendar.start(last, granularity)
        if granularity == "1_month":
            periods = (b.year - a.year) * 12 + b.month - a.month + 1
        else:
            periods = (b - a).days // (7 if granularity == "1_week" else 1) + 1
        return periods, f"{granularity} periods from {first} to {last}"

    def _check_size(self, pairs: int, periods: tuple[int, str], *, applicable: bool = False) -> None:
        """A ValidationError when ``pairs`` (metric, project) over ``periods`` are more than MAX_POINTS points."""
        count, described = periods
        if pairs * count <= MAX_POINTS:
            return
        # Past the per-value limit, a service that answers whole series may still be asked (which
        # needs its discovery answer) for series of two periods or more (one period is one /metrics
        # request); a range typed wrong is refused without it.
        fits = count >= 2 and pairs * count <= MAX_SERIES_POINTS
        if fits and self._series_limit() is not None:
            return
        whole_path = f"GET {parse.SERIES_PATH}"
        most = f"{MAX_POINTS:,} (a service that offers whole series, {whole_path}: {MAX_SERIES_POINTS:,})"
        which = ("applicable " if applicable else "") + ("metric and project pair" + ("" if pairs == 1 else "s"))
        offered = (
            fits
            and not self.settings.whole_series
            and self._source.discovery.series_limit(self.transport, self._get_cache()) is not None
        )
        hint = (
            f", or set whole_series=True: this service offers whole series ({whole_path}), and then allows "
            f"{MAX_SERIES_POINTS:,}"
            if offered
            else ""
        )
        raise ValidationError(
            f"this call asks for {pairs * count:,} points ({pairs} {which} x {count:,} {described}); "
            f"one call may ask for at most {most}. Narrow the range (start, end), choose a coarser "
            f"granularity, or split the pull into several calls{hint}",
            "start",
        )

    def series(
        self,
        metric: str,
        project: str,
        start: DateLike,
        end: DateLike,
        granularity: str = "1_day",
        *,
        errors: Errors = "raise",
        incomplete: Incomplete = "keep",
        refresh: bool | None = None,
        progress: bool | None = None,
    ) -> pd.Series:
        """One metric for one project over a date range, on a DatetimeIndex of period starts (UTC dates).

        ``granularity``: 1_day, 1_week, 1_month (or day, week, month). ``errors``: "raise" (a
        FetchError listing every failed point) or "coerce" (NaN/<NA> for them, a
        PartialDataWarning, ``attrs["failed"]``). ``incomplete``: "keep" or "drop" the periods that
        are not complete. ``refresh``: fetch again, ignoring the cache. ``progress``: a progress
        bar (None: from 100 points). ``attrs`` (JSON): metric, project, unit, granularity,
        ``incomplete`` (ISO first days of the periods not complete), from_cache, fetched, failed."""
        m = self._source.metric(metric)
        options = {"errors": errors, "incomplete": incomplete, "refresh": refresh, "progress": progress}
        long = self._long([metric], [project], start, end, granularity, {**options, "skip_inapplicable": False})
        return frames.series(long, m, project)

    def frame(
        self,
        metrics: Names,
        projects: Names,
        start: DateLike,
        end: DateLike,
        granularity: str = "1_day",
        *,
        shape: Shape = "wide",
        errors: Errors = "raise",
        incomplete: Incomplete = "keep",
        refresh: bool | None = None,
        progress: bool | None = None,
        skip_inapplicable: bool = False,
    ) -> pd.DataFrame:
        """Many metrics and projects at once. ``shape="long"``: tidy rows (period_start, project, metric,
        value, unit, complete). ``shape="wide"``: one column per metric (per (project, metric) when
        several projects are asked), typed per metric, with ``attrs["units"]`` and
        ``attrs["incomplete"]``. ``errors``, ``incomplete``, ``refresh``, ``progress``: as in
        ``series``; ``skip_inapplicable`` leaves out (metric, project) pairs that do not apply."""
        _choice("shape", shape, ("wide", "long"))
        options = {"errors": errors, "incomplete": incomplete, "refresh": refresh, "progress": progress}
        long = self._long(
            metrics, projects, start, end, granularity, {**options, "skip_inapplicable": skip_inapplicable}
        )
        if shape == "long":
            return long
        return frames.wide(long, self.catalogue, several_projects=len(_as_list(projects, "projects")) > 1)

    def metrics(self) -> pd.DataFrame:
        """Every metric: name, family, families, unit, aggregation, description, aliases, applies_to."""
        return frames.metrics_table(self.catalogue)

    def catalogue_frame(self) -> pd.DataFrame:
        """Deprecated: ``metrics()``."""
        warnings.warn("Client.catalogue_frame() is now Client.metrics()", DeprecationWarning, stacklevel=2)
        return self.metrics()

    def projects(self) -> pd.DataFrame:
        """The service's projects, where it offers discovery (the reference service does); the
        service's AuthenticationError (or the 403's APIError) when it refused the key."""
        found = self.discovery()
        if found is None:
            refused = self._source.discovery.refusal()
            if refused is not None:  # a wrong key, not a service without discovery
                raise refused
            raise ConfigurationError(
                f"the service at {self._shown_url()} offers no project discovery (GET {parse.PROJECTS_PATH}); "
                "name projects yourself"
            )
        return frames.projects_table(found)

    # Family helpers: one definition each in metrics_kit.client.families.
    tokenomics = families.tokenomics
    yields = families.yields
    dex = families.dex
    lending = families.lending
    chain_rewards = families.chain_rewards
    financials = families.financials


def close_as(client: Client, how: str, *, keep: object = None) -> None:
    """Close ``client`` as ``close()`` does, its ClientClosedError then saying it was closed ``how``
    ("by mk.configure(), which replaced it as the default client", say), and leave its transport open
    if that is ``keep`` (the transport a new default client shares with it: ``mk.configure(transport=t)``
    run twice). The default client's life (client/api.py) ends this way."""
    client._close(how, keep)


# The settings, each as the one table (client/options.py) describes it.
Client.__doc__ = f"{(Client.__doc__ or '').rstrip()}\n\n{options.described()}\n"

# The given transports that a Client closed: another Client given the same transport says so
# rather than a bare "closed".
_closed_by_a_client: weakref.WeakSet[Any] = weakref.WeakSet()


def _closed_by(transport: object) -> bool:
    try:
        return transport in _closed_by_a_client
    except TypeError:  # not weakly referenced, or not hashable: never recorded
        return False


class _Saver:
    """Writes fetched values to the cache as they arrive, in batches of SAVE_EVERY, each under the
    data version of its answer; recording a new version drops the older one's values from the cache.
    A value leaves the batch only once its write is done, so a write cut short by an interrupt is
    made again by the last flush (the one in ``finally``). A batch the cache cannot write (a full
    disk) is skipped, with one CacheWarning for the pull: the values are still returned."""

    def __init__(self, cache: ValueCache | None, discovery: Discovery):
        self._cache, self._discovery = cache, discovery
        self._pending: list[tuple[Point, Entry]] = []
        self._warned = False

    def add(self, point: Point, entry: Entry) -> None:
        self._pending.append((point, entry))
        if len(self._pending) >= SAVE_EVERY:
            self.flush()

    def flush(self) -> None:
        pending = self._pending
        while pending:  # one run of answers per version, in the order they came
            version = pending[0][1].version
            j = 1
            while j < len(pending) and pending[j][1].version == version:
                j += 1
            self._discovery.saw(version, self._cache)
            written = self._cache is None or self._cache.put_many(pending[:j])
            del pending[:j]
            if not written and not self._warned and self._cache is not None and self._cache.read_only is None:
                self._warned = True  # a cache opened read only warned when it was opened
                warnings.warn(
                    f"the metric value cache {self._cache.path} could not be written ({self._cache.last_error}); "
                    "the values are returned but not cached, and will be fetched again next time",
                    CacheWarning,
                    stacklevel=_caller_level(),
                )


def _check_left(left: int, asked: int) -> None:
    """A ValidationError when the points whole series did not answer, left to ask one value per
    request, are more than MAX_POINTS: the limit of that path holds however its points came to it."""
    if left <= MAX_POINTS:
        return
    raise ValidationError(
        f"{left:,} of the {asked:,} points this call asks for are left to ask one value per request (the "
        f"service's GET {parse.SERIES_PATH} answered their series with an error about the question, or did "
        f"not list them inside the coverage it states, or they are series of one period); one call may ask for "
        f"at most {MAX_POINTS:,} so. Narrow the range (start, end), choose a coarser granularity, or split the "
        "pull into several calls",
        "start",
    )


def _choice(argument: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValidationError(f"{argument} must be {' or '.join(map(repr, allowed))}, not {value!r}", argument)


def _caller_level() -> int:
    """The stacklevel that points a warning at the first caller outside metrics_kit."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("metrics_kit"):
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    return level


def _as_list(values: Names, argument: str) -> list[str]:
    if isinstance(values, str):
        return [values]
    try:
        out = list(values)
    except TypeError:
        raise ValidationError(f"{argument} must be a name or a list of names, not {values!r}", argument) from None
    if not out:
        raise ValidationError(f"{argument} is empty; give at least one", argument)
    return list(dict.fromkeys(out))
