"""The embedded default: the reference service on the demo data, inside this process.

The only module that joins the client and the server: it hands the service's ASGI application to
the client's generic :class:`~metrics_kit.client.transports.ASGITransport`, and the package root
registers :func:`transport` as the default transport of a client given no base URL.
"""

from __future__ import annotations

import logging
import threading

from metrics_kit.client.transports import ASGITransport
from metrics_kit.client.transports._asgi import ASGIApp

log = logging.getLogger("metrics_kit.embedded")
_lock = threading.Lock()
_service: tuple[ASGIApp, str, str] | None = None  # (app, key, identity), built once per process
EMBEDDED_URL = "embedded://demo"


def transport(*, rate_limit: float | None = None) -> ASGITransport:
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
    return ASGITransport(app, key, EMBEDDED_URL, cache_identity=identity, rate_limit=rate_limit)
