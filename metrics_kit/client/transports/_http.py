"""The HTTP transport: requests' pooled adapter, urllib3 retries, a client-side rate limit.

This module is the one boundary where ``requests``/``urllib3`` errors become metrics_kit errors:
``HTTPTransport.get`` either returns a :class:`Reply` (for every HTTP status, errors included: the
client layer maps them with :func:`metrics_kit.errors.for_status`) or raises
:class:`~metrics_kit.errors.TransportError` (no answer). No ``requests``/``urllib3`` exception escapes.

The API key travels only in the ``x-api-key`` header of each request. It is never put in a URL,
a repr, an exception (message, args or cause chain), a log record or a local variable of a frame an
exception passes through: it is held as a :class:`~metrics_kit.client.settings.Secret` and revealed
inline, in the call that hands the headers to urllib3 (``_send``), whose frame no TransportError's
traceback includes.

Retries: the attempts are made by ``HTTPTransport._send``, each one a single request to urllib3
(``retries=False``); whether to retry and how long to wait is asked of urllib3's ``Retry`` through
its public methods only (``is_retry``, ``increment``, ``sleep``), as urllib3's own loop asks it, with
our clock, sleep and deadlines:

- only ``GET``; on connection errors (refused, reset, connect timeout), read timeouts, and the
  statuses 429, 502, 503 and 504. Other 4xx and **500 are never retried**: a 500 is a bug in the
  service, the same request will fail the same way, and retrying it only multiplies the load.
- exponential backoff with jitter (``backoff_factor``, capped at ``backoff_max``; jitter up to
  ``backoff_factor`` seconds). urllib3 retries the first failure at once and backs off after that.
- ``Retry-After`` is honoured in full (plus the same jitter, so threads that were limited together
  do not come back together); ``backoff_max`` caps only the computed backoff, because retrying
  before the server said so would only earn another 429.
- ``retry_deadline`` bounds the whole exchange: counted from the start of the first attempt, no
  retry is made whose wait would end after the deadline. A 429/503 whose ``Retry-After`` does not
  fit is returned as it is (a Reply; the client raises RateLimitError/ServerError), without
  sleeping; a connection error whose backoff does not fit raises TransportError. The worst case is
  therefore ``retry_deadline`` plus one attempt's timeouts.
- ``read_timeout`` (the Client's ``timeout``) bounds one attempt's whole answer: status line,
  headers and body. urllib3's read timeout bounds each socket read only, so a server sending a byte
  a second held a request forever; here a watchdog thread shuts the socket down when the answer's
  time is up (``_Attempt``, ``_Watchdog``; the pools' connections are a subclass whose public
  ``getresponse`` hands the socket over), and running out is a read timeout, retried like one.
- a pull's deadline (:func:`~metrics_kit.client.transports.pull_deadline`, the Client's
  ``deadline``) bounds every request made under it: none is sent once it has passed, no retry is
  made whose wait would cross it, and an answer still arriving when it passes is cut.
- a redirect is never followed (it comes back as a Reply): following one to another host would
  send the key there.
- the body is read inside the attempt, so a body cut off (reset mid-body, a Content-Length longer
  than what is sent) is retried like a read error; still cut off after the retries, it raises
  TransportError.

Requests go to the urllib3 pool that requests' ``HTTPAdapter`` holds for the service, taken once:
``Session.get`` re-reads proxy variables, CA bundles and ``~/.netrc`` and builds a
``requests.Response`` on every call, which cost four fifths of the client's CPU on a loopback.

The client-side rate limit (``rate_limit`` requests a second across every thread) spaces the
*first attempts* of requests ``1 / rate_limit`` seconds apart (a lock-protected "next free slot";
waiting threads wait, they never spin). Retries are not paced by it: they are already spaced by the
backoff or by the server's ``Retry-After``. Every wait of a request of a batch (its turn, a stated
hold, a Retry-After, a backoff) is a wait on the batch's stop: an interrupt (which stops the batch)
or ``close()`` ends it at once and the request is never sent; a stated hold longer than
``retry_deadline`` is not waited without a pull's deadline (see :class:`Pacer`). The server's limit is the
key's, not one thread's, so a ``Retry-After`` also holds every thread's next first attempt until
the retries that were told to wait have had their answer (rate limit or not): without that, fresh requests
from other threads take the tokens the retries waited for, and a burst from 16 threads against a
limited server ends in RateLimitErrors after the retries.

``pool_size`` is both the number of kept-alive connections and the number of requests in flight at
once (the pool blocks): more threads than that wait for a free connection.
"""

from __future__ import annotations

import http.client
import itertools
import logging
import random
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, cast
from urllib.parse import urlencode

import requests
import urllib3
import urllib3.connection
import urllib3.response
from requests.adapters import HTTPAdapter
from requests.models import PreparedRequest
from requests.structures import CaseInsensitiveDict
from urllib3.exceptions import (
    ConnectTimeoutError,
    InvalidHeader,
    MaxRetryError,
    NameResolutionError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
    ResponseError,
)
from urllib3.util.retry import Retry

from metrics_kit.client import checks as settings  # the checks settings.py shares with the transports
from metrics_kit.client import options
from metrics_kit.client.transports._base import (
    Answers,
    BudgetError,
    Clock,
    Deadline,
    OneByOne,
    OverBudget,
    Pacer,
    Reply,
    Sleep,
    check_stop,
    current_deadline,
    result_of,
)
from metrics_kit.errors import ClientClosedError, ConfigurationError, TransportError, ValidationError
from metrics_kit.spec.wire import (
    ACCEPT_HEADER,
    API_KEY_HEADER,
    API_KEY_MIN_LENGTH,
    JSON_TYPE,
    RETRY_AFTER_HEADER,
    USER_AGENT_HEADER,
)

log = logging.getLogger("metrics_kit.transport")

RETRY_STATUSES = frozenset({429, 502, 503, 504})


class _GaveUp(MaxRetryError):
    """MaxRetryError that says why and after how many attempts (for TransportError's message)."""

    def __init__(self, url: str, reason: Exception | None, *, attempts: int, why: str):
        super().__init__(None, url, reason)  # type: ignore[arg-type]  # no pool: our loop makes the attempts
        self.attempts = attempts
        self.why = why


class _DeadlineRetry(Retry):
    """urllib3 ``Retry`` bounded by a deadline counted from the first attempt.

    The attempts are made by :meth:`HTTPTransport._send`, which asks this object only through
    ``Retry``'s public methods (``is_retry``, ``increment``, ``sleep``); ``retry_deadline``,
    ``started`` and the pull's deadline ``until`` are passed on by :meth:`new`, which ``increment``
    calls for every attempt.
    """

    # urllib3 also retries 413 when it carries Retry-After; only our statuses are retried.
    RETRY_AFTER_STATUS_CODES = frozenset({429, 503})

    def __init__(
        self,
        *args: Any,
        retry_deadline: float = 120.0,
        started: float | None = None,
        until: float | None = None,
        pacer: Pacer | None = None,
        clock: Clock = time.monotonic,
        pause: Sleep = time.sleep,
        jitter: Callable[[float, float], float] = random.uniform,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        self.retry_deadline = retry_deadline
        self.started = started
        self.until = until  # the pull's deadline, on ``clock``
        self.pacer = pacer
        self.clock = clock
        self.pause = pause
        self.jitter = jitter

    def new(self, **kw: Any) -> _DeadlineRetry:
        for name in ("retry_deadline", "started", "until", "pacer", "clock", "pause", "jitter"):
            kw.setdefault(name, getattr(self, name))
        return super().new(**kw)

    def get_retry_after(self, response: Any) -> float | None:
        try:
            return super().get_retry_after(response)
        except InvalidHeader:  # an unreadable Retry-After: back off as if there were none
            return None

    def sleep_for_retry(self, response: Any) -> bool:
        retry_after = self.get_retry_after(response)
        if not retry_after:
            return False
        if self.pacer is not None:
            # The limit is the key's, not this thread's: hold every thread's next first attempt
            # until the retries that were told to wait have waited (``_send`` also holds them until
            # those retries are answered, so they go first).
            self.pacer.hold(self.clock() + retry_after + self.backoff_jitter)
        self.pause(retry_after + self.jitter(0, self.backoff_jitter))
        return True

    def get_backoff_time(self) -> float:
        # urllib3's own draws its jitter from the random module; ours comes from self.jitter
        consecutive = len(list(itertools.takewhile(lambda x: x.redirect_location is None, reversed(self.history))))
        if consecutive <= 1:
            return 0.0
        backoff = self.backoff_factor * 2 ** (consecutive - 1)
        if self.backoff_jitter:
            backoff += self.jitter(0, self.backoff_jitter)
        return float(max(0.0, min(self.backoff_max, backoff)))

    def sleep(self, response: Any = None) -> None:
        """Wait before the next attempt, on ``pause``: the server's Retry-After in full, else the backoff."""
        if self.respect_retry_after_header and response is not None and self.sleep_for_retry(response):
            return
        backoff = self.get_backoff_time()
        if backoff > 0:
            self.pause(backoff)

    def planned_wait(self, response: Any) -> float:
        """The longest :meth:`sleep` will wait before the next attempt."""
        if self.respect_retry_after_header and response is not None:
            retry_after = self.get_retry_after(response)
            if retry_after:
                return retry_after + self.backoff_jitter
        # get_backoff_time() draws its own jitter; plan with the largest it can draw.
        consecutive = len(self.history)
        if consecutive <= 1:
            return 0.0
        return float(min(self.backoff_max, self.backoff_factor * 2 ** (consecutive - 1) + self.backoff_jitter))

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: Any = None,
        error: Exception | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> _DeadlineRetry:
        attempts = len(self.history) + 1
        url = settings.shown_request(url) if url else "?"  # for the log and the error: masked
        try:
            new = super().increment(method, url, response, error)
        except MaxRetryError as exc:
            log.debug("giving up on %s after %d attempts (%s)", url, attempts, _cause(response, error))
            raise _GaveUp(url, exc.reason, attempts=attempts, why=f"{_attempts(attempts)}, retries exhausted") from (
                exc.reason
            )
        wait = new.planned_wait(response)
        if self.until is not None and self.clock() + wait >= self.until:
            log.debug("not retrying %s: waiting %.1f s would cross the pull's deadline", url, wait)
            raise _GaveUp(
                url,
                error or ResponseError(_cause(response, error)),
                attempts=attempts,
                why=f"{_attempts(attempts)}, as the next retry would cross the pull's deadline",
            )
        if self.started is not None:
            elapsed = self.clock() - self.started
            if elapsed + wait > self.retry_deadline:
                log.debug(
                    "not retrying %s: waiting %.1f s after %.1f s would cross retry_deadline=%g s",
                    url,
                    wait,
                    elapsed,
                    self.retry_deadline,
                )
                raise _GaveUp(
                    url,
                    error or ResponseError(_cause(response, error)),
                    attempts=attempts,
                    why=f"{_attempts(attempts)}, as the next retry would cross "
                    f"retry_deadline={self.retry_deadline:g} s",
                )
        log.debug(
            "retrying %s after attempt %d (%s), waiting up to %.2f s", url, attempts, _cause(response, error), wait
        )
        return new


def _attempts(count: int) -> str:
    return f"{count} attempt{'' if count == 1 else 's'}"


def _cause(response: Any, error: Exception | None) -> str:
    if response is not None:
        return f"status {response.status}"
    return type(error).__name__ if error is not None else "unknown"


# The Content-Encodings the client reads a body in: urllib3's decoders (gzip and deflate; br and zstd
# only where their packages are installed), and none. urllib3 hands a body in any other encoding on
# as it came, which would be read as if it were plain.
_DECODED = frozenset({*urllib3.response.BaseHTTPResponse.CONTENT_DECODERS, "identity", ""})


class _Undecodable(urllib3.exceptions.DecodeError):
    """An answer whose body is not in the Content-Encoding it names (a gzip header on a plain body),
    or is in one the client cannot decode (``known`` False: br without its package, say). Not
    retried (``Retry(other=0)``): the same answer would come again."""

    def __init__(self, encoding: str, known: bool = True):
        super().__init__("the body is not in the Content-Encoding its answer names")
        # The header's value, for the message: a known encoding's name, else not repeated.
        self.encoding = encoding.strip().lower() if re.fullmatch(r"[\w, -]{1,40}", encoding.strip()) else "?"
        self.known = known


def _undecoded(encoding: str) -> bool:
    """Whether a Content-Encoding header names an encoding (of a list of them) the client cannot decode."""
    return any(part.strip().lower() not in _DECODED for part in encoding.split(","))


class _AnswerTimeout(TimeoutError):
    """The whole answer did not arrive in time. A socket timeout to urllib3, so it is a read error
    (retried as one); ``pull``: the pull's deadline came first, not the request's timeout."""

    def __init__(self, pull: bool):
        super().__init__("the whole answer did not arrive in time")
        self.pull = pull


class _Attempt:
    """One attempt's answer (status line, headers and body), bounded in time as a whole.

    urllib3's read timeout bounds each socket read only, so a server sending a byte a second would
    hold a request forever. The answer must arrive within ``read_timeout`` of the moment the request
    was sent, or by the pull's deadline if that comes first: :class:`_Watchdog` shuts the socket
    down when that time passes (a read blocked on it returns at once), and the time left is checked
    on the injected clock when the head has arrived.
    """

    def __init__(self, read_timeout: float, clock: Clock, pull_until: float | None, watchdog: _Watchdog):
        self.read_timeout = read_timeout
        self.clock = clock
        self.pull_until = pull_until
        self.watchdog = watchdog
        self.until = float("inf")
        self.pull = False
        self.sock: Any = None
        self.cut = False  # the watchdog shut the socket down

    def answer_from(self, sock: Any) -> None:
        """The request went out on ``sock``: from now on its answer is watched."""
        now = self.clock()
        until = now + self.read_timeout
        self.pull = self.pull_until is not None and self.pull_until < until
        self.until = self.pull_until if self.pull and self.pull_until is not None else until
        self.sock = sock
        self.check()
        self.watchdog.watch(self)

    def check(self) -> None:
        if self.cut or self.clock() >= self.until:
            raise _AnswerTimeout(self.pull)

    def done(self) -> None:
        """The answer was read (or failed): the watchdog lets go of the socket."""
        self.watchdog.unwatch(self)


class _Watchdog:
    """One thread per transport that cuts the answers whose time is up (see :class:`_Attempt`).

    ``watch`` and ``unwatch`` and the cutting hold one lock, so a socket is never shut down once its
    attempt is done (the connection may already serve another request).
    """

    def __init__(self, clock: Clock):
        self._clock = clock
        self._changed = threading.Condition()
        self._watched: set[_Attempt] = set()
        self._thread: threading.Thread | None = None
        self._closed = False

    def watch(self, attempt: _Attempt) -> None:
        with self._changed:
            if self._closed:
                return
            self._watched.add(attempt)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="metrics-kit-answers", daemon=True)
                self._thread.start()
            self._changed.notify()

    def unwatch(self, attempt: _Attempt) -> None:
        with self._changed:
            self._watched.discard(attempt)

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify()
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        with self._changed:
            while not self._closed:
                now = self._clock()
                for attempt in [a for a in self._watched if a.until <= now]:
                    self._watched.discard(attempt)
                    attempt.cut = True
                    _shut(attempt.sock)
                left = min((a.until for a in self._watched), default=None)
                self._changed.wait(None if left is None else left - now)


def _shut(sock: Any) -> None:
    """Shut a socket down for reading and writing (a TLS socket: the TCP socket under it)."""
    try:
        if isinstance(sock, socket.socket):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        elif sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
    except (OSError, AttributeError):  # already closed, or nothing to shut down
        pass


_this_thread = threading.local()  # .attempt: the _Attempt of the request this thread is making


def _watched_getresponse(connection: urllib3.connection.HTTPConnection, get: Callable[[], Any]) -> Any:
    attempt: _Attempt | None = getattr(_this_thread, "attempt", None)
    if attempt is None:
        return get()
    attempt.answer_from(connection.sock)
    try:
        response = get()
    except Exception:
        if attempt.cut:
            raise _AnswerTimeout(attempt.pull) from None
        raise
    try:
        attempt.check()
    except _AnswerTimeout:
        response.close()  # its socket's reader: the connection is closed by urllib3 on this error
        raise
    return response


class _WatchedHTTPConnection(urllib3.connection.HTTPConnection):
    """urllib3's connection, whose answer is watched by the attempt that sent the request."""

    def getresponse(self) -> urllib3.response.HTTPResponse:  # type: ignore[override]  # as urllib3's own
        return cast(urllib3.response.HTTPResponse, _watched_getresponse(self, super().getresponse))


class _WatchedHTTPSConnection(urllib3.connection.HTTPSConnection):
    """urllib3's TLS connection, whose answer is watched by the attempt that sent the request."""

    def getresponse(self) -> urllib3.response.HTTPResponse:  # type: ignore[override]  # as urllib3's own
        return cast(urllib3.response.HTTPResponse, _watched_getresponse(self, super().getresponse))


# The connection classes urllib3's pools use (HTTPConnectionPool.ConnectionCls), and ours for them.
_WATCHED: dict[type, type] = {
    urllib3.connection.HTTPConnection: _WatchedHTTPConnection,
    urllib3.connection.HTTPSConnection: _WatchedHTTPSConnection,
}


class _Adapter(HTTPAdapter):
    """An HTTPAdapter whose pools make connections whose answers are watched (see :class:`_Attempt`).

    A pool of another connection class (a SOCKS proxy's) is left as it is: there, only urllib3's
    read timeout bounds each read.
    """

    def get_connection_with_tls_context(self, *args: Any, **kwargs: Any) -> Any:
        pool = super().get_connection_with_tls_context(*args, **kwargs)
        pool.ConnectionCls = _WATCHED.get(pool.ConnectionCls, pool.ConnectionCls)
        return pool


class HTTPTransport:
    """GET requests against the metrics service, from many threads at once.

    ``get`` returns a :class:`Reply` for every HTTP status and raises
    :class:`~metrics_kit.errors.TransportError` when there is no answer. See the module docstring
    for the retry, deadline and rate-limit rules.
    """

    synthetic = False  # a remote service's data is its own

    def __init__(
        self,
        base_url: str,
        api_key: str | settings.Secret,
        *,
        pool_size: int = options.default("workers"),
        connect_timeout: float = options.default("connect_timeout"),
        read_timeout: float = options.default("timeout"),
        retries: int = options.default("retries"),
        backoff_factor: float = 0.5,
        backoff_max: float = 20.0,
        retry_deadline: float = 120.0,
        rate_limit: float | None = options.default("rate_limit"),
        user_agent: str | None = None,
        clock: Clock = time.monotonic,
        sleep: Sleep | None = None,
    ):
        api_key = settings.check_api_key(api_key)  # a Secret from here on
        if not api_key.maskable():
            # Once per transport, in the log (a warning would stop a run that treats warnings as errors).
            log.warning(
                "the API key has fewer than %d characters: it cannot be masked reliably where a service's "
                "message repeats it, and masking it may hide parts of messages where it also stands for a "
                "project, a date or a word (values are never changed). Ask the service for a longer key",
                API_KEY_MIN_LENGTH,
            )
        base_url = settings.address(base_url)  # its repr masks what may be a key
        # Refuses credentials or a key in it (without echoing them) and a bad port; lower-cases the scheme.
        base_url = settings.address(settings.check_base_url(base_url, api_key))
        if not re.match(r"https?://[^/?#\s]+", base_url):
            raise ConfigurationError(
                f"base_url must be an http:// or https:// URL, got {settings.shown_url(base_url, key=api_key)}",
                argument="base_url",
            )
        settings.check_int("pool_size", pool_size, minimum=1)
        settings.check_int("retries", retries, minimum=0)
        for name, number in (
            ("connect_timeout", connect_timeout),
            ("read_timeout", read_timeout),
            ("retry_deadline", retry_deadline),
        ):
            settings.check_seconds(name, number, positive=True)
        settings.check_seconds("backoff_factor", backoff_factor, positive=False)
        settings.check_seconds("backoff_max", backoff_max, positive=False)
        settings.check_rate(rate_limit)

        self.base_url = str(base_url).rstrip("/")
        parts = urllib3.util.parse_url(self.base_url)
        self._origin = f"{parts.scheme}://{parts.netloc}"  # what precedes the path in every URL
        self._key = api_key
        self.timeout = (float(connect_timeout), float(read_timeout))
        self.retries = retries
        self.retry_deadline = float(retry_deadline)
        self.rate_limit = rate_limit
        self.pool_size = pool_size
        self._clock = clock
        # A stated hold longer than retry_deadline is not waited without a pull's deadline, as a
        # Retry-After that long is not: the request fails at once (BudgetError).
        self._pacer = Pacer(rate_limit, clock, sleep, workers=pool_size, longest=self.retry_deadline)
        self._threads: ThreadPoolExecutor | None = None
        self._threads_lock = threading.Lock()
        self._closed = False
        user_agent = user_agent or settings.USER_AGENT

        retry = _DeadlineRetry(
            total=retries,
            other=0,  # anything else (e.g. a malformed answer) is not a transient state
            redirect=0,
            allowed_methods=frozenset({"GET"}),
            status_forcelist=RETRY_STATUSES,
            backoff_factor=backoff_factor,
            backoff_jitter=backoff_factor,
            backoff_max=backoff_max,
            respect_retry_after_header=True,
            raise_on_status=False,
            raise_on_redirect=False,
            remove_headers_on_redirect=Retry.DEFAULT_REMOVE_HEADERS_ON_REDIRECT | {API_KEY_HEADER},
            retry_deadline=self.retry_deadline,
            pacer=self._pacer,
            clock=clock,
            pause=self._pacer.pause,
        )
        # pool_connections: pools kept per host; there is one host. pool_block: at most pool_size
        # connections, ever (threads beyond that wait for one instead of opening throwaway ones).
        # max_retries: one attempt, its error raised as it is; the retries are made by _send.
        adapter = _Adapter(
            pool_connections=1, pool_maxsize=pool_size, pool_block=True, max_retries=Retry(total=False, redirect=False)
        )
        self._retry = retry
        self._watchdog = _Watchdog(clock)
        session = requests.Session()
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        session.headers.update({USER_AGENT_HEADER: user_agent, ACCEPT_HEADER: JSON_TYPE})
        self._session = session
        self._adapter = adapter
        self._user_agent = user_agent
        # Session.get re-reads proxy and CA-bundle variables and ~/.netrc and re-prepares the URL
        # on every call: two thirds of the client's CPU on a loopback. The environment is read once
        # here, and each request goes straight to the adapter (same pool, same urllib3 Retry).
        self._settings = session.merge_environment_settings(self.base_url, {}, False, None, None)
        # Without a proxy, requests would hand every request to this one urllib3 pool: take it once
        # and skip building a requests.Response per answer (half of what was left of the cost).
        self._pool = None
        if not requests.utils.select_proxy(self.base_url, self._settings["proxies"]):
            probe = PreparedRequest()
            probe.prepare(method="GET", url=self.base_url + "/")
            self._pool = adapter.get_connection_with_tls_context(
                probe, self._settings["verify"], None, self._settings["cert"]
            )

    def get(self, path: str, params: Mapping[str, str]) -> Reply:
        """GET ``base_url + path`` with ``params`` as the query string.

        Returns the Reply of the last attempt for every HTTP status; raises TransportError when no
        answer came, still after the retries, or when the pull's deadline (:func:`pull_deadline`) passed.
        """
        return self._get(path, params, current_deadline())

    def _get(
        self, path: str, params: Mapping[str, str], deadline: Deadline | None, stop: threading.Event | None = None
    ) -> Reply:
        """``get`` under ``deadline``; a request of a batch also ends with Stopped, never sent, once its
        batch is stopped (``stop`` set) before it goes out, while it waits for its turn."""
        if self._closed:
            raise self._closed_error()
        url = self._url(path, params)
        until = deadline.at(self._clock) if deadline is not None else None
        self._pacer.enter(stop)
        try:
            return self._paced(url, until, deadline, stop)
        finally:
            self._pacer.leave()

    def _paced(self, url: str, until: float | None, deadline: Deadline | None, stop: threading.Event | None) -> Reply:
        """The request, sent once the pacer lets it start (:class:`Pacer`), unless its batch was stopped."""
        try:
            self._pacer.wait(until, stop)
        except OverBudget as over:
            if over.longest is not None:
                why = (
                    f"longer than the client waits for a request's turn without a deadline (retry_deadline="
                    f"{over.longest:g} s). What to do: ask again after that, or give the pull a deadline "
                    "(deadline=..., metrics-kit fetch --deadline) long enough to wait for it"
                )
            else:
                assert deadline is not None
                why = (
                    f"after the pull's deadline ({deadline.seconds:g} s). What to do: ask again later, raise "
                    "deadline, or pull fewer points at once"
                )
            raise BudgetError(
                429,
                f"not sent: the service's rate limit for this key allows the next request in {over.wait:.1f} s, {why}",
                url=settings.shown_request(url),
                retry_after=over.wait,
            ) from None
        started = self._clock()
        error: TransportError | None = None
        connect_timeout, read_timeout = self.timeout
        if until is not None:
            if started >= until:
                assert deadline is not None
                raise _too_late(url, deadline)
            connect_timeout = min(connect_timeout, until - started)
        try:
            check_stop(stop)  # the batch may have been stopped while the pacer let this request wait
            status, response_headers, body = self._send(url, connect_timeout, read_timeout, started, until, stop)
        except (requests.RequestException, urllib3.exceptions.HTTPError) as exc:
            # The URL masked in the message and the attribute: a base URL may hold a token-like segment.
            error = TransportError(self._describe(exc, settings.shown_request(url), self._clock() - started, deadline))
            error.url = settings.shown_request(url)  # type: ignore[attr-defined]
        else:
            reply = Reply(status, response_headers, body, url, self._key.mask)
            log.debug(
                "GET %s -> %d in %.2f s", settings.shown_request(reply.url), reply.status, self._clock() - started
            )
            return reply
        # Raised outside the except block, so that neither __cause__ nor __context__ links to the
        # requests exception, whose .request carries the headers (and so the key).
        log.debug("GET %s failed: %s", settings.shown_request(url), error)
        raise error

    def _send(
        self,
        url: str,
        connect_timeout: float,
        read_timeout: float,
        started: float,
        until: float | None,
        stop: threading.Event | None = None,
    ) -> tuple[int, Mapping[str, str], bytes]:
        """The attempts of one request, each asked of urllib3's ``Retry`` through its public methods
        (what urllib3's own loop in ``urlopen`` does, with our clock, sleep and deadlines). No retry is
        sent once the request's batch is stopped (``stop``): Stopped."""
        # Every wait of its retries (a Retry-After, a backoff) ends at once when the batch is stopped.
        retry = self._retry.new(started=started, until=until, pause=lambda seconds: self._pacer.pause(seconds, stop))
        holding = False  # this request's retry was told to wait: other threads' first attempts wait for it
        try:
            first = True
            while True:
                if not first:
                    check_stop(stop)
                first = False
                failure: Exception | None = None
                sent = self._clock()
                try:
                    status, headers, body = self._attempt(url, connect_timeout, read_timeout, until)
                except (requests.RequestException, urllib3.exceptions.HTTPError) as exc:
                    failure = exc
                    if _is_timeout(exc):
                        self._pacer.strained(sent)
                else:
                    self._pacer.observe(status, headers.get, sent)
                if holding:
                    holding = False
                    self._pacer.retry_answered()
                if failure is not None:
                    retry = retry.increment("GET", url, error=_urllib3_error(failure))  # raises when not retried
                    retry.sleep()
                    continue
                answer = _Answer(status, headers)
                if not retry.is_retry("GET", status, bool(headers.get(RETRY_AFTER_HEADER))):
                    return status, headers, body
                try:
                    retry = retry.increment("GET", url, response=answer)
                except MaxRetryError:  # retries exhausted, or no time for another: the last answer is the reply
                    return status, headers, body
                if retry.respect_retry_after_header and retry.get_retry_after(answer):
                    holding = True
                    self._pacer.retry_pending()
                retry.sleep(answer)
        finally:
            if holding:  # interrupted during the wait
                self._pacer.retry_answered()

    def _attempt(
        self, url: str, connect_timeout: float, read_timeout: float, until: float | None
    ) -> tuple[int, Mapping[str, str], bytes]:
        """One attempt, its whole answer read within the read timeout (see :class:`_Attempt`): the one
        place the key is revealed, inline in the headers handed over (an exception from here is
        turned into a TransportError raised by ``_get``, whose traceback does not include this frame).
        The body is read here, so a body cut off is retried like any read error."""
        attempt = _Attempt(read_timeout, self._clock, until, self._watchdog)
        _this_thread.attempt = attempt
        raw: urllib3.response.BaseHTTPResponse | None = None
        try:
            if self._pool is not None:
                raw = self._pool.urlopen(
                    "GET",
                    url[len(self._origin) :],
                    headers=self._headers(self._key.reveal()),
                    body=None,
                    retries=False,
                    redirect=False,
                    assert_same_host=False,
                    timeout=urllib3.Timeout(connect=connect_timeout, read=read_timeout),
                    preload_content=False,
                    decode_content=True,
                )
            else:
                request = PreparedRequest()
                request.method, request.url, request.body = "GET", url, None
                request.headers = CaseInsensitiveDict(self._headers(self._key.reveal()))
                response = self._adapter.send(
                    request, stream=True, timeout=(connect_timeout, read_timeout), **self._settings
                )
                raw = response.raw
            assert raw is not None
            encoding = raw.headers.get("content-encoding", "")
            # A body in an encoding urllib3 has no decoder for would come as it was sent, never read as plain.
            undecoded = _undecoded(encoding)
            try:
                body = raw.read(decode_content=not undecoded)
            except urllib3.exceptions.DecodeError:
                # The body is not in the Content-Encoding the answer names: said so, not retried.
                raise _Undecodable(encoding) from None
            except (urllib3.exceptions.HTTPError, OSError):
                if attempt.cut:  # the watchdog cut the body short
                    raise ReadTimeoutError(None, url, "the whole answer did not arrive in time") from _AnswerTimeout(  # type: ignore[arg-type]
                        attempt.pull
                    )
                raise
            if undecoded and body:
                raise _Undecodable(encoding, known=False)
            return raw.status, raw.headers, body
        finally:
            attempt.done()
            _this_thread.attempt = None
            if raw is not None:
                raw.release_conn()

    def _headers(self, key: str) -> dict[str, str]:
        return {USER_AGENT_HEADER: self._user_agent, ACCEPT_HEADER: JSON_TYPE, API_KEY_HEADER: key}

    def _url(self, path: str, params: Mapping[str, str]) -> str:
        query = urlencode(params)
        url = f"{self.base_url}/{path.lstrip('/')}" + (f"?{query}" if query else "")
        # A key long enough to be told apart is never a coincidence in a URL: it was put there. A
        # shorter one ("demo", "2025") may be a project or a date as well: never a reason to refuse.
        if self._key.maskable() and self._key.reveal() in url:
            raise ValidationError(
                "the API key must not be part of the path or the parameters: "
                f"it is sent in the {API_KEY_HEADER} header",
                argument="params",
            )
        return url

    def _describe(self, exc: Exception, url: str, elapsed: float, deadline: Deadline | None = None) -> str:
        """What happened, for whom, and what to do.

        Built from the error types (and an OS error's strerror), never from the exceptions' own text.
        """
        inner: BaseException | None = exc
        if isinstance(exc, requests.RequestException):  # requests wraps the urllib3 error
            inner = exc.args[0] if exc.args and isinstance(exc.args[0], BaseException) else None
        when = f" ({elapsed:.1f} s)"
        if isinstance(inner, MaxRetryError):
            if isinstance(inner, _GaveUp):
                why = inner.why
            else:
                why = f"{_attempts(self.retries + 1)}, retries exhausted"
            when = f"; gave up after {why} ({elapsed:.1f} s in all)"
            inner = inner.reason
        connect_timeout, read_timeout = self.timeout
        if isinstance(inner, NameResolutionError):
            what = "the host name could not be resolved"
            todo = "check base_url"
        elif isinstance(inner, NewConnectionError):
            if _has_cause(inner, ConnectionRefusedError):
                what = "connection refused"
            else:
                what = f"could not connect ({_os_error(inner) or type(inner).__name__})"
            shown = settings.shown_request(self.base_url)
            todo = f"check that the service is running at {shown} and that base_url is right"
        elif _has_cause(inner, _AnswerTimeout) or _has_cause(exc, _AnswerTimeout):
            if any(isinstance(e, _AnswerTimeout) and e.pull for e in (*_chain(inner), *_chain(exc))):
                seconds = f" ({deadline.seconds:g} s)" if deadline is not None else ""
                what = f"the pull's deadline{seconds} was exceeded before the whole answer arrived"
                todo = "raise deadline, or pull fewer points at once"
            else:
                what = f"timed out after {read_timeout:g} s: the timeout was exceeded before the whole answer arrived"
                todo = "try again later, or raise the timeout (Client timeout=, HTTPTransport read_timeout=)"
        elif isinstance(inner, ConnectTimeoutError) or isinstance(exc, requests.ConnectTimeout):
            what = f"connecting timed out after {connect_timeout:g} s"
            todo = f"check that {settings.shown_request(self.base_url)} is reachable, or raise connect_timeout"
        elif isinstance(inner, ReadTimeoutError) or isinstance(exc, requests.Timeout):
            what = f"timed out after {read_timeout:g} s waiting for the answer"
            todo = "try again later, or raise read_timeout"
        elif isinstance(inner, ProtocolError) or isinstance(exc, requests.exceptions.ChunkedEncodingError):
            if _has_cause(inner, http.client.IncompleteRead):
                what = "the connection was closed before the whole answer arrived (truncated body)"
            elif _has_cause(inner, http.client.RemoteDisconnected):
                what = "the server closed the connection without answering (connection reset)"
            elif _has_cause(inner, ConnectionResetError):
                what = "the connection was reset by the server"
            elif _has_cause(inner, ConnectionAbortedError, BrokenPipeError):
                what = "the connection was closed by the server"
            else:
                what = "the connection broke"
            todo = "try again later; if it persists, the service or a proxy in between is failing"
        elif isinstance(inner, _Undecodable):
            if inner.known:
                what = (
                    f"the answer's body could not be decoded: it names Content-Encoding: {inner.encoding}, but "
                    "its body is not in that encoding"
                )
            else:
                what = (
                    f"the answer's body could not be decoded: it names Content-Encoding: {inner.encoding}, which "
                    f"the client does not decode (it reads {', '.join(sorted(_DECODED - {'', 'identity'}))} or "
                    "none, and asks for no other)"
                )
            when = f"; not retried, as the same answer would come again ({elapsed:.1f} s)"
            todo = "the service, or a proxy in between, sends a wrong Content-Encoding; tell its operator"
        else:
            what = f"the request failed ({type(inner or exc).__name__})"
            todo = "check base_url and the network"
        return f"GET {url}: {what}{when}. What to do: {todo}."

    @property
    def cache_identity(self) -> str:
        """The base URL and a one-way fingerprint of the key (``base_url#hmac``): two keys or two
        services never share cached values, and the key cannot be recovered from it."""
        return settings.cache_identity(self.base_url, self._key)

    def get_many(self, requests: Sequence[tuple[str, Mapping[str, str]]]) -> list[Reply | TransportError]:
        """Answers to several requests, ``pool_size`` in flight at once, in the order asked."""
        return [answer for _, answer in self.answers(requests)]

    def answers(self, requests: Sequence[tuple[str, Mapping[str, str]]]) -> Answers:
        """Answers to several requests, ``pool_size`` in flight at once, taken in the order asked as
        they come. Interrupted, the pull takes those that came in the meantime, in any order, and the
        requests not yet started are not sent (:class:`~metrics_kit.client.transports.Answers`)."""
        deadline = current_deadline()  # the worker threads do not share this thread's context
        if deadline is not None and not self._closed and self._clock() >= deadline.at(self._clock):
            # Past the pull's deadline, no request is sent: each fails at once, not one by one on the pool.
            return Answers(_too_late(self._url(path, params), deadline) for path, params in requests)
        if self.pool_size == 1 or len(requests) <= 1:
            return OneByOne(requests, lambda request: self._get_or_error(request, deadline))
        with self._threads_lock:
            if self._closed:  # never a pool made again, left running, for a closed transport
                raise self._closed_error()
            if self._threads is None:
                self._threads = ThreadPoolExecutor(self.pool_size, thread_name_prefix="metrics-kit")
            threads = self._threads
        stop = self._pacer.batch()  # set when the batch is stopped: a request still waiting for its turn is not sent

        def submit(request: tuple[str, Mapping[str, str]]) -> Future[Reply | TransportError]:
            try:
                return threads.submit(self._get_or_error, request, deadline, stop)
            except RuntimeError:  # the pool was shut down: the transport was closed while the batch was handed
                raise self._closed_error() from None

        return _Pooled(requests, submit, stop)

    def _get_or_error(
        self, request: tuple[str, Mapping[str, str]], deadline: Deadline | None, stop: threading.Event | None = None
    ) -> Reply | TransportError:
        """The answer to ``request``, or its TransportError (Stopped, from a stopped batch, is raised)."""
        try:
            return self._get(*request, deadline, stop)
        except TransportError as error:
            return error

    def _closed_error(self) -> ClientClosedError:
        return ClientClosedError(
            f"this HTTPTransport ({settings.shown_request(self.base_url)}) was closed; make a new one to send requests"
        )

    def close(self) -> None:
        """Close the pooled connections. The transport cannot be used afterwards (ClientClosedError)."""
        with self._threads_lock:
            self._closed = True
            self._pacer.close()  # a request waiting for its turn (a stated hold, say) is not sent: its wait ends
            if self._threads is not None:
                self._threads.shutdown(wait=True)
                self._threads = None
        self._watchdog.close()
        self._session.close()

    def __enter__(self) -> HTTPTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if "rate_limit" not in vars(self):  # a traceback's locals, while __init__ refuses an argument
            return "HTTPTransport(<not made>)"
        return (
            f"HTTPTransport(base_url={settings.shown_request(self.base_url)!r}, retries={self.retries}, "
            f"timeout={self.timeout}, rate_limit={self.rate_limit!r})"
        )


class _Pooled(Answers):
    """The answers of requests sent by a pool of threads: ``_futures`` holds their futures. The
    requests are handed to the pool when the answers are first asked for, so that an interrupt that
    comes while they are handed finds the futures to take. ``stop`` is set when the batch is stopped
    (:meth:`received`): a request a thread holds but has not sent yet (waiting for its turn in the
    pacer's window or pace) is then never sent, its future ending with Stopped."""

    def __init__(
        self,
        requests: Sequence[tuple[str, Mapping[str, str]]],
        submit: Callable[[Any], Future[Reply | TransportError]],
        stop: threading.Event,
    ) -> None:
        super().__init__()
        self._requests, self._submit, self._stop = requests, submit, stop
        self._futures: list[Future[Reply | TransportError]] = []
        self._taken = 0  # the answers before this one were taken

    def __iter__(self) -> Iterator[tuple[int, Reply | TransportError]]:
        futures = self._futures
        for request in self._requests:
            futures.append(self._submit(request))
        for index, future in enumerate(futures):
            yield index, result_of(future)
            self._taken = index + 1

    def received(self) -> list[tuple[int, Reply | TransportError]]:
        self._stop.set()  # first: no thread sends a request of this batch from now on
        waiting = self._futures[self._taken :]
        for future in waiting:
            future.cancel()  # only a request not yet started is cancelled: it is never sent
        return [
            (self._taken + i, future.result())
            for i, future in enumerate(waiting)
            if future.done() and not future.cancelled() and future.exception() is None
        ]


def _too_late(url: str, deadline: Deadline) -> TransportError:
    """The error of a request not sent, as the pull's deadline had passed (its URL masked)."""
    shown = settings.shown_request(url)
    error = TransportError(
        f"GET {shown}: not sent, as the pull's deadline ({deadline.seconds:g} s) had passed. What to do: raise "
        "deadline, or pull fewer points at once."
    )
    error.url = shown  # type: ignore[attr-defined]
    return error


def _chain(error: BaseException | None) -> Iterator[BaseException]:
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        yield from (arg for arg in error.args if isinstance(arg, BaseException))
        error = error.__cause__ or error.__context__


def _is_timeout(error: BaseException) -> bool:
    """Whether an attempt's failure is a timeout (a strain on the service, as a 429 is)."""
    return _has_cause(error, ReadTimeoutError, ConnectTimeoutError, _AnswerTimeout, requests.Timeout)


def _has_cause(error: BaseException | None, *types: type[BaseException]) -> bool:
    return any(isinstance(e, types) for e in _chain(error))


def _os_error(error: BaseException | None) -> str:
    for e in _chain(error):
        if isinstance(e, OSError) and e.strerror:
            return e.strerror
    return ""


class _Answer:
    """An answer as urllib3's ``Retry`` reads it (status, headers; never a redirect to follow)."""

    def __init__(self, status: int, headers: Mapping[str, str]):
        self.status = status
        self.headers = headers

    def get_redirect_location(self) -> None:
        return None


def _urllib3_error(error: Exception) -> Exception:
    """The urllib3 error a requests exception wraps (what ``Retry`` tells apart), else the error."""
    if isinstance(error, requests.RequestException) and error.args and isinstance(error.args[0], Exception):
        return error.args[0]
    return error
