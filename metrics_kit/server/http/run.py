"""Start the service: keys, aggregates, a bound socket, uvicorn."""

from __future__ import annotations

import errno
import logging
import os
import re
import secrets
import socket
import sys
from urllib.parse import unquote

from metrics_kit.errors import ConfigurationError
from metrics_kit.server.http import settings
from metrics_kit.spec.wire import API_KEY_MIN_LENGTH

KEYS_ENV = "METRICS_KIT_API_KEYS"
# A query parameter whose name says it holds a credential: its value is never logged, whoever's it is.
_SECRET_NAME = re.compile(r"key|token|secret|passw|auth", re.IGNORECASE)
_MASK = "***"


class KeysMasked(logging.Filter):
    """Masks credentials in uvicorn's access lines (their third argument is the path and query):
    the value of a query parameter named like one, and any of the service's keys wherever it
    stands. The key belongs in the x-api-key header, but a client that puts it in the URL must not
    get it written to the log."""

    def __init__(self, keys: list[bytes]):
        super().__init__()
        self.keys = [key.decode("ascii") for key in keys if key]

    def masked(self, target: str) -> str:
        path, mark, query = target.partition("?")
        pairs = []
        for pair in query.split("&") if mark else []:
            name, equals, value = pair.partition("=")
            if equals and (_SECRET_NAME.search(unquote(name)) or self._holds_key(value)):
                value = _MASK
            pairs.append(name + equals + value)
        if self._holds_key(path):
            path = unquote(path)
            for key in self.keys:
                path = path.replace(key, _MASK)
        return path + mark + "&".join(pairs)

    def _holds_key(self, text: str) -> bool:
        plain = unquote(text.replace("+", " "))
        return any(key in text or key in plain for key in self.keys)

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], self.masked(args[2]), *args[3:])
        return True


def api_keys(out=sys.stdout) -> list[str]:
    """Keys from ``$METRICS_KIT_API_KEYS`` (comma-separated); else one new key, printed once.

    A key shorter than API_KEY_MIN_LENGTH is refused: it is also a project name, a date or a word
    ("demo", "2025"), so no client could mask it where a message repeats it. Messages say which key,
    never what it is."""
    configured = [k.strip() for k in os.environ.get(KEYS_ENV, "").split(",") if k.strip()]
    if configured:
        settings.keys(configured)  # their characters first
    short = [number for number, key in enumerate(configured, 1) if len(key) < API_KEY_MIN_LENGTH]
    if short:
        total = len(configured)
        del configured  # no local holds a key when the error passes (a verbose traceback shows locals)
        which = f"key {short[0]} of {total} is" if len(short) == 1 else f"keys {short} of {total} are"
        raise ConfigurationError(
            f"{KEYS_ENV}: API {which} shorter than {API_KEY_MIN_LENGTH} characters "
            f"(the key is not shown). A key must have at least {API_KEY_MIN_LENGTH} visible ASCII characters, "
            "so that a client can mask it wherever a message repeats it; make one with "
            "python -c 'import secrets; print(secrets.token_urlsafe(24))'",
            argument="api_keys",
        )
    if configured:
        return configured
    key = secrets.token_urlsafe(24)
    # Set to blanks (an export of an empty secret, say) is told apart from not set: both serve a new key.
    why = f"{KEYS_ENV} is set but blank (no key in it)" if KEYS_ENV in os.environ else f"No {KEYS_ENV} set"
    print(
        f"{why}: generated an API key for this run (shown once):\n  export METRICS_KIT_API_KEY={key}",
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
        raise _unbound(host, port, exc) from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _unbound(host: str, port: int, exc: OSError) -> ConfigurationError:
    """Why the socket cannot listen on ``host``:``port``, blaming the setting at fault: a port is
    advised only when the port is what was refused."""
    if isinstance(exc, socket.gaierror):
        return ConfigurationError(
            f"cannot listen on {host}: no such host ({exc.strerror}); host= must be an address of this machine "
            "(such as 127.0.0.1, 0.0.0.0 or ::1) or a name that resolves to one (such as localhost)",
            argument="host",
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return ConfigurationError(
            f"cannot listen on {host}: {exc.strerror} (it is not an address of this machine); host= must be "
            "one of its addresses, such as 127.0.0.1, or 0.0.0.0 for all of them",
            argument="host",
        )
    return ConfigurationError(
        f"cannot listen on {host}:{port}: {exc.strerror}; choose another port= (0 picks a free one)",
        argument="port",
    )


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
    if access_log:
        # Added after the Config, which sets up uvicorn's loggers.
        logging.getLogger("uvicorn.access").addFilter(KeysMasked(list(getattr(app, "keys", []))))
    uvicorn.Server(config).run(sockets=[sock])
