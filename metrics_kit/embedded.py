"""The embedded default: the reference service on the demo data, inside this process.

Each request is a real HTTP request in ASGI form (method, path, query string, headers with the
key) handed to the service's own application, and its status, headers and body come back exactly
as they would over a socket: the client builds, parses and fails the same way as with a remote
service, without the cost of a socket and an HTTP parser per request (which dominates on a
loopback: see docs/performance.md). The service runs on an event loop of its own thread, so this
also works where a loop is already running, as in a Jupyter kernel.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping, Sequence
from urllib.parse import urlencode

from metrics_kit.spec.wire import Reply

log = logging.getLogger("metrics_kit.embedded")
_lock = threading.Lock()
_service = None  # (app, key, identity), built once per process
EMBEDDED_URL = "embedded://demo"


class InProcessTransport:
    """Speaks HTTP to an ASGI application in this process."""

    def __init__(self, app, api_key: str, base_url: str, cache_identity: str | None = None):
        self.base_url = base_url
        self.cache_identity = cache_identity or base_url
        self._app = app
        self._key = api_key.encode()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="metrics-kit-embedded", daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return f"InProcessTransport(base_url={self.base_url!r})"

    def get(self, path: str, params: Mapping[str, str]):
        return self.get_many([(path, params)])[0]

    def get_many(self, requests: Sequence[tuple[str, Mapping[str, str]]]) -> list:
        """Answers to several requests in one hand-off to the service's thread (a hand-off costs
        more than an answer)."""
        scopes, urls = [], []
        for path, params in requests:
            scope, url = self._scope(path, params)
            scopes.append(scope)
            urls.append(url)
        answers = asyncio.run_coroutine_threadsafe(self._call_many(scopes), self._loop).result(600)
        return [Reply(status, headers, body, url) for (status, headers, body), url in zip(answers, urls, strict=True)]

    def _scope(self, path: str, params: Mapping[str, str]) -> tuple[dict, str]:
        query = urlencode(params)
        scope = {
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
            "headers": [(b"host", b"embedded"), (b"accept", b"application/json"), (b"x-api-key", self._key)],
        }
        return scope, f"{self.base_url}{path}?{query}"

    async def _call_many(self, scopes: list[dict]) -> list[tuple[int, dict, bytes]]:
        return [await self._call(scope) for scope in scopes]

    async def _call(self, scope) -> tuple[int, dict, bytes]:
        sent: dict = {"body": []}

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message):
            if message["type"] == "http.response.start":
                sent["status"] = message["status"]
                sent["headers"] = {k.decode("latin-1"): v.decode("latin-1") for k, v in message["headers"]}
            else:
                sent["body"].append(message.get("body", b""))

        await self._app(scope, receive, send)
        return sent["status"], sent["headers"], b"".join(sent["body"])

    def close(self) -> None:
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
        if not self._loop.is_running():
            self._loop.close()


def transport() -> InProcessTransport:
    """A transport to the embedded service, building the demo data and its aggregates on first use."""
    global _service
    with _lock:
        if _service is None:
            from metrics_kit.server.dataset import open_service
            from metrics_kit.server.http.app import App

            service = open_service(log=log.info)
            built = service.aggregates
            # Nothing outside this process can reach the service, so its key is no secret; it is
            # stable per data set so that the client's cache carries over between sessions.
            # The address in URLs and messages is constant; the cache is filed per data set.
            identity = f"embedded://demo/{built.meta['fingerprint']}"
            key = f"embedded-{built.meta['fingerprint']}"
            _service = (App(service, [key]), key, identity)
        app, key, identity = _service
    return InProcessTransport(app, key, EMBEDDED_URL, cache_identity=identity)
