"""The embedded default: the reference service on the demo data, inside this process.

The only module that joins the client and the server: it hands the service's ASGI application to
the client's generic :class:`~metrics_kit.client.transports.ASGITransport`, and the package root
registers :func:`transport` as the default transport of a client given no base URL.

The application is built on its first request, not with the transport: a client whose values are
all cached under a version it trusts answers without building the demo data (docs/client.md, "The
data version"). Its answers name the data version like a remote service's, so the client's cache
is filed the same way.

Its cache identity is the demo data set (``embedded://demo``), not its key: the key is made anew in
every process, and a restarted kernel must still find its cached values. Which data the values came
from is then told apart by the data version each is filed under. Its answers are marked synthetic.

Its configuration is the environment, read when the application is built: ``METRICS_KIT_CACHE_DIR``
(where the demo data and its aggregates live), ``METRICS_KIT_LAG`` (how long after a period's end
it counts the period complete; docs/service.md, "Complete periods") and the testing hook
``METRICS_KIT_NOW`` (the service's clock, stopped at an instant). Its user cannot restart it, so
when its demo data folder is deleted while it runs (the cache folder cleared), ``/explain`` makes
the folder again rather than asking for a restart.
"""

from __future__ import annotations

import atexit
import logging
import secrets
import threading
from typing import Any

from metrics_kit.client.settings import cache_identity
from metrics_kit.client.transports import ASGITransport

log = logging.getLogger("metrics_kit.embedded")
_lock = threading.Lock()
_app: Any = None  # the service's ASGI application, built once per process
# Nothing outside this process can reach the service, so its key is no secret and files nothing.
_KEY = "embedded-" + secrets.token_hex(16)
EMBEDDED_URL = "embedded://demo"


def application() -> Any:
    """The reference service's ASGI application on the demo data, built on first use."""
    global _app
    with _lock:
        if _app is None:
            from metrics_kit.server.dataset import open_service
            from metrics_kit.server.http.app import App

            _app = App(open_service(log=log.info), [_KEY])
            # Its DuckDB connection (for /explain) closed while the interpreter still runs: at its
            # exit, objects a daemon thread holds are never freed, and DuckDB reports them as leaks.
            atexit.register(_app.service.close)
        return _app


async def _on_first_request(scope: Any, receive: Any, send: Any) -> None:
    await application()(scope, receive, send)


def check_environment() -> None:
    """Refuse a bad ``METRICS_KIT_LAG`` or ``METRICS_KIT_NOW`` once, as a ConfigurationError naming
    the variable and what it allows (serve's words), before any request: raised by the service on
    its first request, it would fail every point apart, while cached points still answered."""
    from metrics_kit.server.serving.completeness import clock_from_environment, lag_from_environment

    lag_from_environment()
    clock_from_environment()


def transport(*, rate_limit: float | None = None) -> ASGITransport:
    """A transport to the embedded service; the demo data and its aggregates are built on its first
    request. Its settings from the environment are checked first (:func:`check_environment`)."""
    check_environment()
    return ASGITransport(
        _on_first_request,
        _KEY,
        EMBEDDED_URL,
        cache_identity(EMBEDDED_URL, None),
        rate_limit=rate_limit,
        synthetic=True,
    )
