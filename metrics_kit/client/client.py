"""The client: any metric, for any projects and dates, as pandas objects.

Every argument is checked before the first request. A pull is a list of points (metric, project,
granularity, request date), one per period; cached points are read in one batch, the rest fetched
concurrently, and each answer goes through the same parsing and error path, whichever transport
carried it (a remote service over HTTP, or the embedded reference service in this process).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import sys
import threading
import time
import warnings
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import NamedTuple

import numpy as np
import pandas as pd

from metrics_kit.client import settings as config
from metrics_kit.client.cache import Entry, ValueCache
from metrics_kit.errors import (
    APIError,
    ConfigurationError,
    FetchError,
    PartialDataWarning,
    ResponseFormatError,
    TransportError,
    ValidationError,
)
from metrics_kit.spec import wire as parse
from metrics_kit.spec.calendar import GRANULARITIES
from metrics_kit.spec.catalogue import Catalogue, Metric, default_catalogue
from metrics_kit.spec.ids import PROJECT_PATTERN, suggest

log = logging.getLogger("metrics_kit.client")
_PROJECT = re.compile(PROJECT_PATTERN, re.ASCII)
_GRANULARITY_SYNONYMS = {
    "day": "1_day",
    "daily": "1_day",
    "1d": "1_day",
    "week": "1_week",
    "weekly": "1_week",
    "1w": "1_week",
    "month": "1_month",
    "monthly": "1_month",
}
WEEK_STARTS = ("monday", "sunday")
PROGRESS_THRESHOLD = 100  # points to fetch before a progress bar is worth showing
_BATCH = 256  # requests per hand-off to an in-process service
_ISO = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}([T ].*)?$")


class Point(NamedTuple):
    metric: str
    project: str
    granularity: str
    date: str  # ISO date sent as `date`: the first day of the period


class Result(NamedTuple):
    value: int | float
    unit: str | None
    complete: bool | None
    from_cache: bool


class Client:
    """A connection to a metrics service, with its cache, rate limit and worker pool.

    ``base_url``/``api_key`` come from the arguments, then ``METRICS_KIT_BASE_URL`` and
    ``METRICS_KIT_API_KEY``; with no base URL at all, the embedded reference service on the
    synthetic demo data answers, offline.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        workers: int = 16,
        rate_limit: float | None = None,
        timeout: float = 30.0,
        connect_timeout: float = 5.0,
        retries: int = 5,
        cache: bool = True,
        refresh: bool = False,
        progress: bool | None = None,
        week_start: str = "monday",
        chain_unit: str | None = None,
        incomplete_ttl: float = 600.0,
    ):
        self._connection = config.resolve(base_url, api_key)
        if not isinstance(workers, int) or workers < 1:
            raise ValidationError(f"workers must be a whole number of at least 1, not {workers!r}", "workers")
        if rate_limit is not None and not rate_limit > 0:
            raise ValidationError(
                f"rate_limit must be a number of requests per second above 0, or None "
                f"to switch it off, not {rate_limit!r}",
                "rate_limit",
            )
        if week_start not in WEEK_STARTS:
            raise ValidationError(
                f"week_start must be one of {', '.join(WEEK_STARTS)}, not {week_start!r}", "week_start"
            )
        self.workers = workers
        self.rate_limit = rate_limit
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.retries = retries
        self.cache_enabled = cache
        self.refresh = refresh
        self.progress = progress
        self.week_start = week_start
        self.incomplete_ttl = incomplete_ttl
        self.catalogue: Catalogue = default_catalogue(chain_unit)
        self._lock = threading.Lock()
        self._transport = None
        self._cache = None
        self._pool: ThreadPoolExecutor | None = None
        self._discovery: dict | None | bool = False  # False: not asked yet; None: not offered

    # -- plumbing ------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return self._connection.base_url or "embedded"

    @property
    def embedded(self) -> bool:
        return self._connection.embedded

    def __repr__(self) -> str:
        return (
            f"Client(base_url={self.base_url!r}, workers={self.workers}, rate_limit={self.rate_limit}, "
            f"cache={self.cache_enabled})"
        )

    def _get_transport(self):
        with self._lock:
            if self._transport is None:
                if self.embedded:
                    from metrics_kit.client.transports import default_transport

                    self._transport = default_transport()
                else:
                    from metrics_kit.client.transports import HTTPTransport

                    self._transport = HTTPTransport(
                        self._connection.base_url,
                        self._connection.api_key,
                        pool_size=self.workers,
                        connect_timeout=self.connect_timeout,
                        read_timeout=self.timeout,
                        retries=self.retries,
                        rate_limit=self.rate_limit,
                    )
            return self._transport

    def _get_cache(self):
        if not self.cache_enabled:
            return None
        transport = self._get_transport()
        with self._lock:
            if self._cache is None:
                identity = getattr(transport, "cache_identity", transport.base_url)
                key = self._connection.api_key or identity
                self._cache = ValueCache(identity, key, incomplete_ttl=self.incomplete_ttl)
            return self._cache

    def clear_cache(self) -> int:
        """Forget every cached value of this service and key; returns how many were removed."""
        cache = self._get_cache()
        return cache.clear() if cache is not None else 0

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None
            for part in (self._cache, self._transport):
                if part is not None:
                    part.close()
            self._cache = self._transport = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- validation ----------------------------------------------------------------------------

    def _metric(self, name) -> Metric:
        if not isinstance(name, str):
            raise ValidationError(f"metric must be a metric name (a string), not {type(name).__name__}", "metric")
        metric = self.catalogue.get(name.strip())
        if metric is None:
            close = suggest(name, self.catalogue.canonical_names)
            hint = (
                f"; did you mean {' or '.join(map(repr, close))}?"
                if close
                else "; metrics_kit.spec.catalogue() lists every metric"
            )
            raise ValidationError(f"unknown metric {name!r}{hint}", "metric")
        return metric

    def _project(self, project) -> str:
        if not isinstance(project, str) or len(project) > 200 or not _PROJECT.fullmatch(project):
            raise ValidationError(
                f"project {project!r} is not a valid project id: lowercase letters, digits, '-' and '_', "
                "in parts joined by single dots (such as 'demoswap' or 'demoswap.clmm')",
                "project",
            )
        return project

    @staticmethod
    def _granularity(granularity) -> str:
        if isinstance(granularity, str):
            granularity = _GRANULARITY_SYNONYMS.get(granularity.strip().lower(), granularity.strip())
            if granularity in GRANULARITIES:
                return granularity
        raise ValidationError(
            f"granularity must be one of {', '.join(GRANULARITIES)} (or day, week, month), not {granularity!r}",
            "granularity",
        )

    def _check_applies(self, metric: Metric, project: str) -> None:
        """When the service says which projects it has, catch mistakes before the network."""
        projects = self.discovery()
        if projects is None:
            return
        info = projects.get(project)
        if info is None:
            known = ", ".join(sorted(projects))
            raise ValidationError(f"unknown project {project!r}; the service has {known}", "project")
        if not metric.applies_to(info["kinds"], info.get("regular_pools", False)):
            raise ValidationError(
                f"{metric.name} does not apply to {project} (of kind "
                f"{', '.join(info['kinds'])}); it applies to {metric.restriction}",
                "metric",
            )

    def discovery(self) -> dict | None:
        """The service's projects ({project: {kinds, regular_pools, coverage}}), or None when it offers
        no discovery. The specification does not require it, so nothing depends on it."""
        if self._discovery is False:
            try:
                reply = self._get_transport().get("/projects", {})
            except TransportError as error:  # no answer: ask again next time, check nothing now
                log.debug("project discovery unreachable: %s", error)
                return None
            projects = None
            if reply.status == 200:
                try:
                    projects = {p["project"]: p for p in parse._loads(reply.body)["projects"]}
                except (ValueError, KeyError, TypeError) as error:
                    log.debug("project discovery unreadable: %s", error)
            self._discovery = projects  # the service answered: that answer stands
        return self._discovery

    # -- dates ---------------------------------------------------------------------------------

    def period_start(self, day: dt.date, granularity: str) -> dt.date:
        if granularity == "1_day":
            return day
        if granularity == "1_week":
            offset = day.weekday() if self.week_start == "monday" else (day.weekday() + 1) % 7
            return day - dt.timedelta(days=offset)
        return day.replace(day=1)

    def period_end(self, start: dt.date, granularity: str) -> dt.date:
        if granularity == "1_day":
            return start
        if granularity == "1_week":
            return start + dt.timedelta(days=6)
        return (start.replace(day=28) + dt.timedelta(days=4)).replace(day=1) - dt.timedelta(days=1)

    def periods(self, start, end, granularity: str = "1_day") -> list[dt.date]:
        """First days of every period from the one containing ``start`` to the one containing ``end``."""
        granularity = self._granularity(granularity)
        first, last = to_date(start, "start"), to_date(end, "end")
        if first > last:
            raise ValidationError(f"start ({first}) is after end ({last})", "start")
        out, current = [], self.period_start(first, granularity)
        while current <= last:
            out.append(current)
            current = self.period_end(current, granularity) + dt.timedelta(days=1)
        return out

    # -- fetching ------------------------------------------------------------------------------

    @staticmethod
    def _params(point: Point) -> dict[str, str]:
        return {
            "metric_name": point.metric,
            "project": point.project,
            "granularity": point.granularity,
            "date": point.date,
        }

    @staticmethod
    def _read(reply, is_count: bool) -> parse.Parsed:
        """The value in a reply, or the error it stands for (raised)."""
        if reply.status == 200:
            return parse.metric_value(reply.body, is_count=is_count, url=reply.url)
        retry_after = next((v for k, v in reply.headers.items() if k.lower() == "retry-after"), None)
        raise parse.api_error(reply.status, reply.body, reply.url, retry_after)

    def fetch(
        self, points: Sequence[Point], *, refresh: bool | None = None, progress: bool | None = None
    ) -> tuple[dict[Point, Result], dict[Point, Exception]]:
        """Values of validated points: from the cache where fresh, the rest from the service."""
        refresh = self.refresh if refresh is None else refresh
        cache = self._get_cache()
        results: dict[Point, Result] = {}
        if cache is not None and not refresh:
            for point, entry in cache.get_many(list(points)).items():
                results[Point(*point)] = Result(entry.value, entry.unit, entry.complete, True)
        missing = [p for p in dict.fromkeys(points) if p not in results]
        failures: dict[Point, Exception] = {}
        fetched = []
        if missing:
            show = self.progress if progress is None else progress
            show = (len(missing) >= PROGRESS_THRESHOLD) if show is None else show
            bar = _progress_bar(len(missing), show)
            try:
                for point, outcome in self._run(missing):
                    if isinstance(outcome, Exception):
                        failures[point] = outcome
                    else:
                        results[point] = Result(outcome.value, outcome.unit, outcome.complete, False)
                        fetched.append((point, outcome))
                    bar.update(1)
            finally:
                bar.close()
        if cache is not None and fetched:
            cache.put_many([(point, _entry(parsed)) for point, parsed in fetched])
        return results, failures

    def _run(self, points: list[Point]) -> Iterable[tuple[Point, parse.Parsed | Exception]]:
        counts = {p.metric: self.catalogue.get(p.metric).is_count for p in points}

        transport = self._get_transport()

        def read(point: Point, reply):
            try:
                return point, self._read(reply, counts[point.metric])
            except (APIError, ResponseFormatError) as error:
                return point, error

        def one(point: Point):
            try:
                return read(point, transport.get("/metrics", self._params(point)))
            except TransportError as error:
                return point, error

        if hasattr(transport, "get_many"):  # in-process: batches, so the progress bar still moves
            for i in range(0, len(points), _BATCH):
                chunk = points[i : i + _BATCH]
                replies = transport.get_many([("/metrics", self._params(p)) for p in chunk])
                yield from map(read, chunk, replies)
            return
        workers = min(self.workers, len(points))
        if workers <= 1:
            yield from map(one, points)
            return
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="metrics-kit")
            pool = self._pool
        futures = [pool.submit(one, point) for point in points]
        try:
            for future in as_completed(futures):
                yield future.result()
        finally:
            for future in futures:
                future.cancel()

    # -- public API ----------------------------------------------------------------------------

    def value(self, metric: str, project: str, granularity: str, date) -> int | float:
        """One value: ``metric`` for ``project`` over the period of ``granularity`` containing ``date``."""
        m, project, granularity = self._metric(metric), self._project(project), self._granularity(granularity)
        day = self.period_start(to_date(date, "date"), granularity)
        self._check_applies(m, project)
        point = Point(m.name, project, granularity, day.isoformat())
        results, failures = self.fetch([point], progress=False)
        if failures:
            raise failures[point]
        return results[point].value

    def long(
        self,
        metrics,
        projects,
        start,
        end,
        granularity: str = "1_day",
        *,
        errors: str = "raise",
        incomplete: str = "keep",
        refresh: bool | None = None,
        progress: bool | None = None,
        skip_inapplicable: bool = False,
    ) -> pd.DataFrame:
        """Tidy rows: period_start, project, metric, value, unit, complete."""
        if errors not in ("raise", "coerce"):
            raise ValidationError(f"errors must be 'raise' or 'coerce', not {errors!r}", "errors")
        if incomplete not in ("keep", "drop"):
            raise ValidationError(f"incomplete must be 'keep' or 'drop', not {incomplete!r}", "incomplete")
        granularity = self._granularity(granularity)
        metric_list = [self._metric(m) for m in _as_list(metrics, "metrics")]
        project_list = [self._project(p) for p in _as_list(projects, "projects")]
        starts = self.periods(start, end, granularity)  # every argument checked before the network
        pairs = []
        for project in project_list:
            for metric in metric_list:
                try:
                    self._check_applies(metric, project)
                except ValidationError as error:
                    if not (skip_inapplicable and error.argument == "metric"):
                        raise  # an unknown project is a mistake to report, never to skip
                    continue
                pairs.append((metric, project))
        points = [Point(m.name, p, granularity, s.isoformat()) for m, p in pairs for s in starts]
        results, failures = self.fetch(points, refresh=refresh, progress=progress)
        if failures and errors == "raise":
            raise FetchError(failures, len(points))
        today = dt.datetime.now(dt.UTC).date()
        rows = []
        for point in points:
            result = results.get(point)
            start_day = dt.date.fromisoformat(point.date)
            if result is None:
                complete = None
                value = None
                unit = self.catalogue.get(point.metric).unit
            else:
                complete = result.complete
                if complete is None:  # the service did not say: the calendar decides
                    complete = self.period_end(start_day, granularity) < today
                value, unit = result.value, result.unit or self.catalogue.get(point.metric).unit
            rows.append((pd.Timestamp(start_day), point.project, point.metric, value, unit, complete))
        frame = pd.DataFrame(rows, columns=["period_start", "project", "metric", "value", "unit", "complete"])
        frame["value"] = frame["value"].astype("float64") if len(frame) else frame["value"]
        frame.attrs.update(
            granularity=granularity,
            from_cache=sum(r.from_cache for r in results.values()),
            fetched=sum(not r.from_cache for r in results.values()),
        )
        if failures:
            frame.attrs["failed"] = [(p.metric, p.project, p.date, str(e)) for p, e in failures.items()]
            warnings.warn(
                f"{len(failures)} of {len(points)} points failed and are missing (NaN); "
                f"see .attrs['failed']. First: {next(iter(failures.values()))}",
                PartialDataWarning,
                stacklevel=_caller_level(),
            )
        if incomplete == "drop":
            frame = frame[frame["complete"] != False].reset_index(drop=True)  # noqa: E712 (None stays)
        return frame

    def series(self, metric: str, project: str, start, end, granularity: str = "1_day", **kwargs) -> pd.Series:
        """One metric for one project over a date range, on a DatetimeIndex of period starts (UTC dates).

        ``attrs`` holds metric, project, unit, granularity, ``incomplete`` (the period starts that are
        not complete) and, with errors='coerce', ``failed``."""
        frame = self.long([metric], [project], start, end, granularity, **kwargs)
        m = self._metric(metric)
        series = pd.Series(
            frame["value"].to_numpy(), index=pd.DatetimeIndex(frame["period_start"], name="period_start"), name=m.name
        )
        series = _typed(series, m)
        series.attrs.update(
            metric=m.name,
            project=project,
            unit=m.unit,
            granularity=frame.attrs["granularity"],
            incomplete=list(frame.loc[frame["complete"] == False, "period_start"]),  # noqa: E712
            from_cache=frame.attrs["from_cache"],
            fetched=frame.attrs["fetched"],
        )
        if "failed" in frame.attrs:
            series.attrs["failed"] = frame.attrs["failed"]
        return series

    def frame(
        self, metrics, projects, start, end, granularity: str = "1_day", *, shape: str = "wide", **kwargs
    ) -> pd.DataFrame:
        """Many metrics and projects at once. ``shape="long"``: tidy rows (period_start, project, metric,
        value, unit, complete). ``shape="wide"``: one column per metric (per (project, metric) when
        several projects are asked), typed per metric, with units and incomplete periods in ``attrs``."""
        if shape not in ("wide", "long"):
            raise ValidationError(f"shape must be 'wide' or 'long', not {shape!r}", "shape")
        long = self.long(metrics, projects, start, end, granularity, **kwargs)
        if shape == "long":
            return long
        return self.widen(long, several_projects=len(_as_list(projects, "projects")) > 1)

    def widen(self, long: pd.DataFrame, several_projects: bool) -> pd.DataFrame:
        columns = ["project", "metric"] if several_projects else ["metric"]
        order = list(dict.fromkeys(map(tuple, long[columns].to_numpy()))) if len(long) else []
        wide = (
            long.pivot_table(
                index="period_start", columns=columns, values="value", aggfunc="first", dropna=False, sort=False
            )
            if len(long)
            else pd.DataFrame()
        )
        if len(long):
            wide = wide.reindex(
                columns=pd.MultiIndex.from_tuples(order, names=columns)
                if several_projects
                else pd.Index([o[0] for o in order], name="metric")
            )
            wide = wide.reindex(pd.DatetimeIndex(sorted(long["period_start"].unique()), name="period_start"))
            for column in wide.columns:
                wide[column] = _typed(wide[column], self.catalogue.get(column[-1] if several_projects else column))
        wide.attrs.update(long.attrs)
        wide.attrs["units"] = {m: self.catalogue.get(m).unit for m in long["metric"].unique()}
        wide.attrs["incomplete"] = sorted(set(long.loc[long["complete"] == False, "period_start"]))  # noqa: E712
        return wide

    def catalogue_frame(self) -> pd.DataFrame:
        """Every metric: name, family, families, unit, aggregation, description, aliases, applies_to."""
        return pd.DataFrame(
            [
                {
                    "name": m.name,
                    "family": m.family,
                    "families": list(m.families),
                    "unit": m.unit,
                    "aggregation": m.aggregation,
                    "description": m.description,
                    "aliases": list(m.aliases),
                    "kinds": sorted(m.kinds),
                    "regular_pools_only": m.regular_pools_only,
                    "applies_to": m.restriction,
                }
                for m in self.catalogue
            ]
        ).set_index("name")

    def projects(self) -> pd.DataFrame:
        """The service's projects, where it offers discovery (the reference service does)."""
        found = self.discovery()
        if found is None:
            raise ConfigurationError(
                f"the service at {self.base_url} offers no project discovery (GET /projects); name projects yourself"
            )
        rows = []
        for name, info in found.items():
            coverage = info.get("coverage") or {}
            rows.append(
                {
                    "project": name,
                    "kinds": info.get("kinds"),
                    "regular_pools": info.get("regular_pools"),
                    "coverage_start": coverage.get("start"),
                    "coverage_end": coverage.get("end"),
                    "metrics": info.get("metrics"),
                }
            )
        return pd.DataFrame(rows).set_index("project")

    # -- family helpers (metrics_kit.client.families) ---------------------------------------------------

    def tokenomics(self, project: str, start, end, granularity: str = "1_day", **kwargs) -> pd.DataFrame:
        """The tokenomics metrics of ``project`` in one wide frame, with supply_change and
        net_dilution_share (see ``metrics_kit.client.families``)."""
        from metrics_kit.client import families

        return families.build(self, "tokenomics", project, start, end, granularity, **kwargs)

    def yields(self, project: str, start, end, granularity: str = "1_day", **kwargs) -> pd.DataFrame:
        """The yield metrics that apply to ``project`` in one wide frame, with protocol_take_rate,
        staking_per_user and farm_deposits_per_user (see ``metrics_kit.client.families``)."""
        from metrics_kit.client import families

        return families.build(self, "yield", project, start, end, granularity, **kwargs)

    def dex(self, project: str, start, end, granularity: str = "1_day", **kwargs) -> pd.DataFrame:
        """The exchange metrics that apply to ``project`` in one wide frame, with swaps_per_user and,
        with regular pools, regular_pool_swap_share (see ``metrics_kit.client.families``)."""
        from metrics_kit.client import families

        return families.build(self, "dex", project, start, end, granularity, **kwargs)

    def lending(self, project: str, start, end, granularity: str = "1_day", **kwargs) -> pd.DataFrame:
        """The lending metrics of ``project`` in one wide frame, with transactions per user and
        borrow_to_repay_ratio (see ``metrics_kit.client.families``)."""
        from metrics_kit.client import families

        return families.build(self, "lending", project, start, end, granularity, **kwargs)

    def chain_rewards(self, project: str, start, end, granularity: str = "1_day", **kwargs) -> pd.DataFrame:
        """The chain reward metrics of ``project`` in one wide frame, with net_rent and total_rewards
        (see ``metrics_kit.client.families``)."""
        from metrics_kit.client import families

        return families.build(self, "chain_rewards", project, start, end, granularity, **kwargs)

    def financials(self, project: str, start, end, granularity: str = "1_day", **kwargs) -> pd.DataFrame:
        """The financial metrics of ``project`` in one wide frame, with total_revenue_in_usd and
        protocol_take_rate (see ``metrics_kit.client.families``)."""
        from metrics_kit.client import families

        return families.build(self, "financials", project, start, end, granularity, **kwargs)


def to_date(value, argument: str) -> dt.date:
    """A UTC calendar date from an ISO 8601 string, date, datetime, pandas Timestamp or numpy
    datetime64. Strings must be ISO: '01/02/2025' means January to some and February to others."""
    if isinstance(value, dt.datetime) or isinstance(value, (pd.Timestamp, np.datetime64)) or isinstance(value, str):
        try:
            if isinstance(value, str):
                stamp = pd.to_datetime(value.strip(), format="ISO8601") if _ISO.match(value.strip()) else None
            else:
                stamp = pd.Timestamp(value)
        except (ValueError, TypeError, OverflowError):
            stamp = None
        if stamp is None or stamp is pd.NaT:
            raise ValidationError(
                f"{argument} {value!r} is not a date; give an ISO date such as '2025-01-31', "
                "a datetime.date, a datetime or a pandas Timestamp",
                argument,
            )
        if stamp.tzinfo is not None:
            stamp = stamp.tz_convert("UTC")
        return stamp.date()
    if isinstance(value, dt.date):
        return value
    raise ValidationError(
        f"{argument} must be a date (ISO string, datetime.date, datetime or pandas Timestamp), "
        f"not {type(value).__name__}",
        argument,
    )


def _caller_level() -> int:
    """The stacklevel that points a warning at the first caller outside metrics_kit."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("metrics_kit"):
        frame, level = frame.f_back, level + 1
    return level


def _as_list(values, argument: str) -> list:
    if isinstance(values, str):
        return [values]
    try:
        out = list(values)
    except TypeError:
        raise ValidationError(f"{argument} must be a name or a list of names, not {values!r}", argument) from None
    if not out:
        raise ValidationError(f"{argument} is empty; give at least one", argument)
    return list(dict.fromkeys(out))


def _typed(series: pd.Series, metric: Metric) -> pd.Series:
    """Counts as int64 (Int64 with <NA> where points failed), amounts as float64."""
    if not metric.is_count:
        return series.astype("float64")
    if series.isna().any():
        return series.astype("Int64")
    return series.astype("int64")


def _entry(parsed: parse.Parsed) -> Entry:
    return Entry(parsed.value, parsed.unit, parsed.complete, parsed.period_start, parsed.period_end, time.time())


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress_bar(total: int, show: bool):
    if not show:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="metrics", unit="value", leave=False)
