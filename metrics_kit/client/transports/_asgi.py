"""A transport to an ASGI application in this process: HTTP without a socket.

Each request is a real HTTP request in ASGI form (method, path, query string, headers with the
key) handed to the application, and its status, headers and body come back exactly as they would
over a socket: the client builds, parses and fails the same way as with a remote service, without
the cost of a socket and an HTTP parser per request (which dominates on a loopback: see
docs/performance.md). The application runs on an event loop of its own thread, so this also works
where a loop is already running, as in a Jupyter kernel. Any ASGI application will do; the
embedded default hands it the reference service's (see metrics_kit/embedded.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any
from urllib.parse import urlencode

from metrics_kit.client import options
from metrics_kit.client.checks import Secret, cache_identity, check_api_key
from metrics_kit.client.transports._base import Answers, OneByOne, Pacer, Reply, object_name, result_of
from metrics_kit.errors import ClientClosedError, TransportError
from metrics_kit.spec.wire import ACCEPT_HEADER, API_KEY_HEADER, HOST_HEADER, JSON_TYPE

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[
    [Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
    Awaitable[None],
]
ANSWER_WAIT = 600.0  # seconds for one hand-off: a safety net against a hung application


class ASGITransport:
    """Speaks HTTP to an ASGI application in this process.

    ``rate_limit`` (requests a second) paces requests as HTTPTransport does; there is no connection,
    so there is nothing to time out or retry.

    Cached values are filed under ``base_url``, this application (the object) and the key's
    fingerprint, so another key, or another application under the same address, never reads them.
    ``cache_identity`` replaces that for an application whose answers do not depend on the key and
    that is the same in every process (the embedded default: its demo data set). ``synthetic``
    marks an application that serves made-up data (results say so in their ``attrs``).
    """

    def __init__(
        self,
        app: ASGIApp,
        api_key: str | Secret,
        base_url: str,
        cache_identity: str | None = None,
        *,
        rate_limit: float | None = options.default("rate_limit"),
        pacer: Pacer | None = None,
        synthetic: bool = False,
    ):
        api_key = check_api_key(api_key)  # a Secret from here on
        self.base_url = base_url
        self.cache_identity = cache_identity or _identity(base_url, app, api_key)
        self.rate_limit = rate_limit
        self.synthetic = synthetic
        self._app = app
        self._key = api_key
        self._closed = False
        self._pacer = pacer or Pacer(rate_limit)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="metrics-kit-asgi", daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return f"ASGITransport(base_url={self.base_url!r})"

    def get(self, path: str, params: Mapping[str, str]) -> Reply:
        reply = self.get_many([(path, params)])[0]
        if isinstance(reply, TransportError):
            raise reply
        return reply

    def get_many(self, requests: Sequence[tuple[str, Mapping[str, str]]]) -> list[Reply | TransportError]:
        """Answers to several requests, in the order asked (see :meth:`answers`)."""
        return [answer for _, answer in self.answers(requests)]

    def answers(self, requests: Sequence[tuple[str, Mapping[str, str]]]) -> Answers:
        """Answers to several requests in one hand-off to the application's thread (a hand-off costs
        more than an answer), taken when the last has come; interrupted, the pull takes those that
        had come, and the application is asked no more. Paced requests go one hand-off each."""
        if self._closed:
            raise ClientClosedError(f"this ASGITransport ({self.base_url}) was closed; make a new one to send requests")
        if self._pacer.rate:
            return OneByOne(requests, self._paced)
        return self._hand_off(requests)

    def _paced(self, request: tuple[str, Mapping[str, str]]) -> Reply | TransportError:
        self._pacer.wait()
        return self._hand_off([request]).all()[0]

    def _hand_off(self, requests: Sequence[tuple[str, Mapping[str, str]]]) -> _HandedOff:
        scopes, urls = [], []
        for path, params in requests:
            scope, url = self._scope(path, params)
            scopes.append(scope)
            urls.append(url)
        loop = self._loop
        return _HandedOff(lambda handed: asyncio.run_coroutine_threadsafe(self._call_many(scopes, urls, handed), loop))

    def _scope(self, path: str, params: Mapping[str, str]) -> tuple[Scope, str]:
        query = urlencode(params)
        scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "client": ("127.0.0.1", 0),
            "server": ("127.0.0.1", 0),
            "headers": [(HOST_HEADER.encode(), b"embedded"), (ACCEPT_HEADER.encode(), JSON_TYPE.encode())],
        }
        return scope, f"{self.base_url}{path}?{query}"

    async def _call_many(self, scopes: list[Scope], urls: list[str], handed: _HandedOff) -> None:
        for scope, url in zip(scopes, urls, strict=True):
            if handed.stopped:  # the pull was interrupted: ask no more
                return
            try:
                status, headers, body = await self._call(scope)
            except Exception as error:  # the application failed without answering, as a socket would
                said = self._key.mask(str(error))
                handed.add(TransportError(f"GET {url}: the application raised {type(error).__name__}: {said}"))
            else:
                handed.add(Reply(status, headers, body, url, self._key.mask))

    async def _call(self, scope: Scope) -> tuple[int, dict[str, str], bytes]:
        sent: dict[str, Any] = {"body": []}

        async def receive() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                sent["status"] = message["status"]
                sent["headers"] = {k.decode("latin-1"): v.decode("latin-1") for k, v in message.get("headers", [])}
            else:
                sent["body"].append(message.get("body", b""))

        # The key is revealed here only, into the request as the application receives it.
        headers = [*scope["headers"], (API_KEY_HEADER.encode(), self._key.reveal().encode())]
        await self._app({**scope, "headers": headers}, receive, send)
        return int(sent["status"]), sent.get("headers", {}), b"".join(sent["body"])

    def close(self) -> None:
        self._closed = True
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
        if not self._loop.is_running():
            self._loop.close()


class _HandedOff(Answers):
    """The answers of one hand-off, added by the application's thread as each comes; taken once the
    last has come (one wake-up of this thread for the batch). The hand-off is made when they are
    first asked for, so that an interrupt that comes while it is made finds them to take."""

    def __init__(self, hand_off: Callable[[_HandedOff], concurrent.futures.Future[None]]) -> None:
        super().__init__()
        self._hand_off = hand_off
        self.stopped = False

    def all(self) -> list[Reply | TransportError]:
        result_of(self._hand_off(self), ANSWER_WAIT)
        taken = super().__iter__()
        return [answer for _, answer in taken]

    def __iter__(self) -> Iterator[tuple[int, Reply | TransportError]]:
        result_of(self._hand_off(self), ANSWER_WAIT)
        return super().__iter__()

    def received(self) -> list[tuple[int, Reply | TransportError]]:
        self.stopped = True
        return super().received()


def _identity(base_url: str, app: object, key: Secret) -> str:
    return cache_identity(f"{base_url.rstrip('/')}/+app-{object_name(app)}", key)
