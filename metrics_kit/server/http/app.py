"""The HTTP shell: a plain ASGI application around MetricService.

A bare ASGI callable rather than a framework route, because ``/metrics`` is the hot path and a
framework's request and response objects cost more than the lookup itself (see
docs/performance.md). Every response, errors included, is JSON in one shape, and nothing the
client sends can raise out of here: an unexpected exception becomes a logged 500 body, never a
dropped connection.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import json
import logging
import math
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from urllib.parse import parse_qsl

from metrics_kit.server.http import openapi, settings
from metrics_kit.server.serving.service import MetricService, QueryError
from metrics_kit.spec import wire
from metrics_kit.spec.calendar import GRANULARITIES
from metrics_kit.spec.catalogue import Catalogue
from metrics_kit.spec.wire import API_KEY_HEADER, ErrorCode

log = logging.getLogger("metrics_kit.server")
_JSON = [(wire.CONTENT_TYPE_HEADER.encode(), wire.JSON_TYPE.encode())]
_METHODS = tuple(method.encode() for method in wire.METHODS)
DATA_VERSION_HEADER = wire.DATA_VERSION_HEADER.encode()
_KEY_HEADER = API_KEY_HEADER.encode()
_RETRY_AFTER = wire.RETRY_AFTER_HEADER.encode()
_ETAG = wire.ETAG_HEADER.encode()
_ACCEPT = wire.ACCEPT_HEADER.encode()
_IF_NONE_MATCH = wire.IF_NONE_MATCH_HEADER.encode()
# RFC 9110 asks a 401 to name the way to authenticate; there is no registered scheme for a key header.
_CHALLENGE = [(wire.AUTHENTICATE_HEADER.encode(), f'ApiKey header="{API_KEY_HEADER}"'.encode())]
_ALLOW = [(wire.ALLOW_HEADER.encode(), ", ".join(wire.METHODS).encode())]
_LIMIT = wire.RATELIMIT_LIMIT_HEADER.encode()
_REMAINING = wire.RATELIMIT_REMAINING_HEADER.encode()
_RESET = wire.RATELIMIT_RESET_HEADER.encode()
_POLICY = wire.RATELIMIT_POLICY_HEADER.encode()
# Appended to the data version in the ETag of a value whose period is not complete yet.
INCOMPLETE_TAG = wire.INCOMPLETE_TAG.encode()


@functools.lru_cache(maxsize=256)
def accepts_json(accept: str) -> bool:
    """Whether an Accept header allows application/json (the most specific matching range wins)."""
    best: tuple[int, float] | None = None
    for item in accept.split(","):
        media, *params = (part.strip() for part in item.split(";"))
        media = media.lower()
        specificity = {wire.JSON_TYPE: 3, "application/*": 2, "*/*": 1}.get(media)
        if specificity is None:
            continue
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if best is None or specificity > best[0]:
            best = (specificity, q)
    return best is not None and best[1] > 0


def query_pairs(query: bytes) -> list[tuple[str, str]]:
    """The query string's (name, value) pairs, as ``parse_qsl`` would give them.

    Most queries have nothing to unquote; those skip ``parse_qsl``, which is a quarter of the
    cost of a request on the hot path."""
    text = query.decode("latin-1")
    if "%" in text or "+" in text:
        return parse_qsl(text, keep_blank_values=True)
    return [part.partition("=")[::2] for part in text.split("&") if part]


# The longest window a stated policy uses to come near a fractional rate.
_LONGEST_WINDOW = 60


def stated_policy(rate: float) -> tuple[int, int]:
    """The quota and window (whole requests over whole seconds) that state ``rate`` requests a second:
    never above it, so that a client pacing itself by them never outruns the bucket. The shortest
    window within 1% of the rate (0.5 a second is 1 a 2-second window, 2.5 is 5 a 2-second window),
    else the nearest a window of up to a minute comes, else 1 a window of its own (a rate below one a
    minute)."""
    exact = Fraction(rate).limit_denominator(10**6)  # the rate as given (1.9, not the float below it)
    best = (1, math.ceil(1 / exact)) if exact < 1 else (math.floor(exact), 1)
    for window in range(1, _LONGEST_WINDOW + 1):
        quota = math.floor(exact * window)
        if quota < 1:
            continue
        if Fraction(quota, window) >= exact * Fraction(99, 100):
            return quota, window
        if Fraction(quota, window) > Fraction(*best):
            best = (quota, window)
    return best


class RateLimiter:
    """A token bucket per key: ``rate`` requests a second, bursts of up to ``rate``."""

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic):
        self.rate = rate
        self.capacity = max(1.0, rate)
        self.buckets: dict[bytes, tuple[float, float]] = {}
        self.clock = clock
        # What every answer states of the limit: a quota of whole requests over a window of whole seconds.
        quota, window = stated_policy(rate)
        self.policy = f"{quota};w={window}".encode()

    def retry_after(self, key: bytes) -> int:
        """0 when the request may go ahead, else whole seconds to wait."""
        return self.take(key)[0]

    def take(self, key: bytes) -> tuple[int, list[tuple[bytes, bytes]]]:
        """Spends one request of ``key``'s budget if it has one: (0, or whole seconds to wait; the
        rate-limit headers that state the budget left)."""
        now = self.clock()
        tokens, then = self.buckets.get(key, (self.capacity, now))
        tokens = min(self.capacity, tokens + (now - then) * self.rate)
        wait = 0
        if tokens >= 1:
            tokens -= 1
        else:
            wait = max(1, math.ceil((1 - tokens) / self.rate))
        self.buckets[key] = (tokens, now)
        # Reset: whole seconds until the bucket is full again, so that a client pacing itself at
        # remaining / reset never outruns the refill.
        reset = math.ceil((self.capacity - tokens) / self.rate)
        headers = [
            (_LIMIT, str(math.floor(self.capacity)).encode()),
            (_REMAINING, str(math.floor(tokens)).encode()),
            (_RESET, str(reset).encode()),
            (_POLICY, self.policy),
        ]
        return wait, headers


class App:
    def __init__(
        self,
        service: MetricService,
        keys: Iterable[str],
        *,
        rate_limit: float | None = None,
        latency_ms: float = 0.0,
        rate_limit_headers: bool = True,
    ):
        """``rate_limit``: requests a second per key (None: no limit); ``rate_limit_headers``: whether
        answers state it (``wire.RATELIMIT_*_HEADER``); ``latency_ms``: a delay before every answer,
        to stand for a service far away."""
        self.service = service
        self.keys = settings.keys(keys)
        rate = settings.rate_limit(rate_limit)
        self.limiter = RateLimiter(rate) if rate is not None else None
        self.rate_limit_headers = rate_limit_headers
        self.latency = settings.latency_ms(latency_ms) / 1000.0
        # Every answer names the data version; a 200 also carries an ETag: the data version, and for
        # a value of a period not complete yet, the version marked so. The same URL answers byte for
        # byte the same while its tag stays; a period turning complete changes the tag of its
        # answers, not the data version (the values stay valid).
        version = service.data_version.encode()
        self._versioned = [(DATA_VERSION_HEADER, version)]
        # complete -> (the ETag, the headers that carry it)
        self._tags = {
            complete: (tag, [(DATA_VERSION_HEADER, version), (_ETAG, tag)])
            for complete, tag in ((True, b'"' + version + b'"'), (False, b'"' + version + INCOMPLETE_TAG + b'"'))
        }
        aggregates, catalogue = service.aggregates, service.catalogue
        projects = sorted(aggregates.projects)
        coverage = aggregates.meta["coverage"]
        self.openapi = json.dumps(openapi.build(catalogue, projects, coverage)).encode()
        self.projects = _projects_body(aggregates, catalogue, service.data_version)
        # Made on the first request, not here: its SQL definitions take Ibis's compiler, which a
        # start from prebuilt aggregates, and the embedded default's first value, need not load.
        self.catalogue: bytes | None = None
        self._catalogue_made = asyncio.Lock()
        self.routes = {
            wire.METRICS_PATH: self._metrics,
            wire.SERIES_PATH: self._series,
            wire.EXPLAIN_PATH: self._explain,
            wire.PROJECTS_PATH: self._static(self.projects),
            wire.CATALOGUE_PATH: self._catalogue,
        }

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        try:
            await self._dispatch(scope, send)
        except Exception:  # the last line of defence: a JSON 500, never a traceback to the client
            log.exception("unexpected error on %s", scope.get("path"))
            error = QueryError(500, ErrorCode.INTERNAL_ERROR, "the server failed unexpectedly; this is a bug")
            await self._send(send, 500, error.body(), scope["method"] == "HEAD")

    async def _dispatch(self, scope, send) -> None:
        path, method = scope["path"], scope["method"].encode()
        head = method == b"HEAD"
        if self.latency:  # every answer, as from a service that far away
            await asyncio.sleep(self.latency)
        if path == wire.OPENAPI_PATH:
            handler = None
        else:
            handler = self.routes.get(path)
            if handler is None:
                error = QueryError(
                    404,
                    ErrorCode.NOT_FOUND,
                    f"no such path {path[:80]!r}; the API serves {wire.SERVED_PATHS[0]} "
                    f"(and {', '.join(wire.SERVED_PATHS[1:])})",
                )
                await self._send(send, 404, error.body(), head)
                return
        if method not in _METHODS:
            allowed = f"method {scope['method'][:20]} is not allowed; use {wire.METHODS[0]}"
            error = QueryError(405, ErrorCode.METHOD_NOT_ALLOWED, allowed)
            await self._send(send, 405, error.body(), False, _ALLOW)
            return
        if handler is None:
            # Not tagged: the document also changes with the package version, which the data version ignores.
            await self._send(send, 200, self.openapi, head, tag=False)
            return
        key, accept, if_none_match = None, None, None
        for name, value in scope["headers"]:
            if name == _KEY_HEADER:
                key = value
            elif name == _ACCEPT:  # several Accept lines form one list (RFC 9110, 5.3)
                accept = value if accept is None else accept + b", " + value
            elif name == _IF_NONE_MATCH:
                if_none_match = value if if_none_match is None else if_none_match + b", " + value
        status, body, extra = self._gate(key, accept)
        if status:
            await self._send(send, status, body, head, extra)
            return
        status, body, complete = await handler(scope)
        etag, tagged = self._tags[complete]
        if status == 200 and if_none_match is not None and self._matches(if_none_match, etag):
            await send({"type": "http.response.start", "status": 304, "headers": tagged + extra})
            await send({"type": "http.response.body", "body": b""})
            return
        await self._send(send, status, body, head, extra, tagged=tagged)

    def _matches(self, if_none_match: bytes, etag: bytes) -> bool:
        """If-None-Match names ``etag`` (weak comparison, RFC 9110 13.1.2), or is ``*``."""
        tags = {tag.strip().removeprefix(b"W/") for tag in if_none_match.split(b",")}
        return etag in tags or b"*" in tags

    async def _send(
        self,
        send,
        status: int,
        body: bytes,
        head: bool,
        extra: list | None = None,
        *,
        tag: bool = True,
        tagged: list | None = None,
    ) -> None:
        headers = [*_JSON, (b"content-length", str(len(body)).encode())]
        headers += (tagged or self._tags[True][1]) if status == 200 and tag else self._versioned
        if extra:
            headers += extra
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if head else body})

    def _gate(self, key: bytes | None, accept: bytes | None) -> tuple[int, bytes, list]:
        """Authentication, rate limit and content negotiation, in that order."""
        # 401 for a missing and for a wrong key alike (RFC 9110: no valid credentials); 403 would mean
        # "known, but not allowed", and no key here is limited to part of the service.
        if not key:
            return (
                401,
                QueryError(401, ErrorCode.MISSING_API_KEY, f"send your API key in the {API_KEY_HEADER} header").body(),
                _CHALLENGE,
            )
        matched = None
        for known in self.keys:  # compare with every key, in constant time each
            if hmac.compare_digest(known, key):
                matched = known
        if matched is None:
            invalid = QueryError(401, ErrorCode.INVALID_API_KEY, f"the API key in {API_KEY_HEADER} is not valid")
            return 401, invalid.body(), _CHALLENGE
        stated: list[tuple[bytes, bytes]] = []
        if self.limiter is not None:
            wait, budget = self.limiter.take(matched)
            if self.rate_limit_headers:
                stated = budget
            if wait:
                body = QueryError(
                    429,
                    ErrorCode.RATE_LIMITED,
                    f"rate limit of {self.limiter.rate:g} requests per second exceeded; retry after {wait} s",
                ).body()
                return 429, body, [(_RETRY_AFTER, str(wait).encode()), *stated]
        if accept is not None and not accepts_json(accept.decode("latin-1")):
            return (
                406,
                QueryError(
                    406,
                    ErrorCode.NOT_ACCEPTABLE,
                    f"this service answers only {wire.JSON_TYPE}; send Accept: {wire.JSON_TYPE}",
                ).body(),
                stated,
            )
        return 0, b"", stated

    # Each handler gives (status, body, complete): ``complete`` False marks a 200 whose value's
    # period is not complete yet (its ETag says so); True for everything else.

    async def _metrics(self, scope) -> tuple[int, bytes, bool]:
        pairs = query_pairs(scope["query_string"])
        try:
            return 200, *self.service.metrics(pairs)
        except QueryError as error:
            return error.status, error.body(), True

    async def _series(self, scope) -> tuple[int, bytes, bool]:
        """One page of a series: its periods' values, tagged incomplete when any period on it is."""
        pairs = query_pairs(scope["query_string"])
        try:
            return 200, *self.service.series(pairs)
        except QueryError as error:
            return error.status, error.body(), True

    async def _explain(self, scope) -> tuple[int, bytes, bool]:
        """One page of the event rows behind a value: queries on the event tables, run off the
        event loop so that /metrics answers meanwhile."""
        pairs = query_pairs(scope["query_string"])
        try:
            return 200, *await asyncio.to_thread(self.service.explain_page, pairs)
        except QueryError as error:
            return error.status, error.body(), True

    @staticmethod
    def _static(body: bytes):
        async def handler(scope) -> tuple[int, bytes, bool]:
            return 200, body, True

        return handler

    async def _catalogue(self, scope) -> tuple[int, bytes, bool]:
        """The catalogue's body, made on the first request and then kept; off the event loop, since
        generating the SQL definitions compiles Ibis expressions for every metric."""
        async with self._catalogue_made:
            if self.catalogue is None:
                # In a thread of its own, not the loop's shared pool: /explain pages waiting there
                # for the event tables would hold up the catalogue behind them.
                with ThreadPoolExecutor(max_workers=1, thread_name_prefix="catalogue") as own:
                    loop = asyncio.get_running_loop()
                    self.catalogue = await loop.run_in_executor(own, _catalogue_body, self.service.catalogue)
        return 200, self.catalogue, True


async def _lifespan(receive, send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def _projects_body(aggregates, catalogue: Catalogue, version: str) -> bytes:
    coverage = aggregates.meta["coverage"]
    projects = [
        wire.project_entry(
            name,
            info["kinds"],
            info["regular_pools"],
            coverage,
            [m.name for m in catalogue.applicable(info["kinds"], info["regular_pools"])],
        )
        for name, info in sorted(aggregates.projects.items())
    ]
    return wire.projects_body(version, projects, coverage, aggregates.meta.get("last_event"))


def _catalogue_body(catalogue: Catalogue) -> bytes:
    """Each metric's entry, with how it is computed in words and its standalone SQL query (DuckDB's
    dialect, Spark SQL)."""
    from metrics_kit.server.metrics.definitions import definitions, in_words, spark_definitions

    queries, spark = definitions(catalogue), spark_definitions(catalogue)
    metrics = [wire.catalogue_entry(m.describe(), in_words(m), queries[m.name], spark[m.name]) for m in catalogue]
    return wire.catalogue_body(catalogue.chain_unit, list(GRANULARITIES), metrics)
