"""Start the service: keys, aggregates, a bound socket, uvicorn."""

from __future__ import annotations

import os
import secrets
import socket
import sys

from metrics_kit.errors import ConfigurationError
from metrics_kit.server.http import settings

KEYS_ENV = "METRICS_KIT_API_KEYS"


def api_keys(out=sys.stdout) -> list[str]:
    """Keys from ``$METRICS_KIT_API_KEYS`` (comma-separated); else one new key, printed once."""
    configured = [k.strip() for k in os.environ.get(KEYS_ENV, "").split(",") if k.strip()]
    if configured:
        return configured
    key = secrets.token_urlsafe(24)
    print(
        f"No {KEYS_ENV} set: generated an API key for this run (shown once):\n  export METRICS_KIT_API_KEY={key}",
        file=out,
        flush=True,
    )
    return [key]


def bind(host: str, port: int) -> socket.socket:
    host, port = settings.host(host), settings.port(port)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigurationError(
            f"cannot listen on {host}:{port}: {exc.strerror}; choose another port= (0 picks a free one)",
            setting="port",
        ) from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def serve(
    app,
    sock: socket.socket,
    *,
    access_log: bool = False,
    head_timeout: float | None = None,
    data_version: str | None = None,
) -> None:
    """Run uvicorn on ``sock``; ``data_version`` is also sent with the answers given without ``app``."""
    import uvicorn

    from metrics_kit.server.http import protocol

    http = protocol.protocol_class(
        head_timeout=protocol.DEFAULT_HEAD_TIMEOUT if head_timeout is None else settings.head_timeout(head_timeout),
        data_version=data_version,
    )

    # uvicorn's access lines are logged at INFO: a WARNING level would silence --access-log.
    config = uvicorn.Config(
        app,
        lifespan="off",
        access_log=access_log,
        log_level="info" if access_log else "warning",
        http=http,
        ws="none",  # no WebSocket here: an Upgrade request is an ordinary request
        loop="uvloop",
        server_header=False,
        date_header=False,
        proxy_headers=False,
    )  # nothing here reads forwarded headers
    uvicorn.Server(config).run(sockets=[sock])
