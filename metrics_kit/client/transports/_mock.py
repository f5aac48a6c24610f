"""A transport that answers with a function, for unit tests (httpx's MockTransport, for this client).

    def service(request: Request) -> Response:
        return Response(200, json={"value": 5})

    client = Client(transport=MockTransport(service), cache=False)

The handler sees each request (path, params, headers, url) and returns a :class:`Response`, or
raises :class:`~metrics_kit.errors.TransportError` to stand for "no answer". Everything after that
(parsing, errors, frames, cache) is the client's real code.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from metrics_kit.client.checks import Secret, cache_identity
from metrics_kit.client.transports._base import Answers, OneByOne, Reply, get_each, object_name, one_at_a_time
from metrics_kit.errors import ClientClosedError, TransportError
from metrics_kit.spec.wire import ACCEPT_HEADER, API_KEY_HEADER, JSON_TYPE


@dataclass(frozen=True)
class Request:
    """One GET request as a service would see it."""

    path: str
    params: Mapping[str, str]
    headers: Mapping[str, str] = field(repr=False)  # they hold the key
    url: str
    method: str = "GET"


@dataclass(frozen=True)
class Response:
    """What a handler answers: a status, and a JSON document (``json``) or raw ``body`` bytes."""

    status: int = 200
    json: Any = None
    body: bytes | str = b""
    headers: Mapping[str, str] = field(default_factory=dict)

    def content(self) -> bytes:
        if self.json is not None:
            return json.dumps(self.json).encode()
        return self.body.encode() if isinstance(self.body, str) else self.body


Handler = Callable[[Request], Response]


class MockTransport:
    """Answers every request with ``handler(request)``; ``requests`` records what was asked.

    Cached values are filed under ``base_url``, the key's fingerprint and the handler (the object):
    two handlers are two services and never read each other's values. Give two transports the same
    ``service`` name to have them stand for one service (a test of a restarted process, say).
    A closed transport refuses to send (ClientClosedError)."""

    synthetic = False  # a test's service: its data is not marked made up

    def __init__(
        self,
        handler: Handler,
        *,
        base_url: str = "mock://service",
        api_key: str = "mock-key",
        service: str | None = None,
    ):
        self.base_url = base_url
        self._key = Secret(api_key)
        who = f"service-{service}" if service is not None else f"handler-{object_name(handler)}"
        self.cache_identity = cache_identity(f"{base_url.rstrip('/')}/+{who}", self._key)
        self._handler = handler
        self.requests: list[Request] = []
        self.closed = False

    def get(self, path: str, params: Mapping[str, str]) -> Reply:
        if self.closed:
            raise ClientClosedError(f"this MockTransport ({self.base_url}) was closed; make a new one to send requests")
        query = urlencode(params)
        url = f"{self.base_url}{path}" + (f"?{query}" if query else "")
        # The request as written, the key revealed inline: no local of ours holds it plain (and a
        # Request's repr leaves out its headers).
        request = Request(path, dict(params), {ACCEPT_HEADER: JSON_TYPE, API_KEY_HEADER: self._key.reveal()}, url)
        self.requests.append(request)
        response = self._handler(request)
        return Reply(response.status, dict(response.headers), response.content(), url, self._key.mask)

    def get_many(self, requests: Sequence[tuple[str, Mapping[str, str]]]) -> list[Reply | TransportError]:
        return get_each(self, requests)

    def answers(self, requests: Sequence[tuple[str, Mapping[str, str]]]) -> Answers:
        """The answers one at a time, each asked of the handler when it is taken."""
        return OneByOne(requests, one_at_a_time(self.get))

    def close(self) -> None:
        self.closed = True

    def __repr__(self) -> str:
        return f"MockTransport(base_url={self.base_url!r})"
