"""A fault-injecting HTTP server, only for faults the real server won't produce on demand.

    with FaultServer() as server:
        server.script("/metrics", status(429, headers={"Retry-After": "1"}), status(200, body=b"{}"))
        ...
        assert len(server.requests) == 2

Each path has a queue of scripted actions, used one per request; when a path's queue is empty its
default answers (``server.always(path, action)``; the server-wide default is a 200 with a small JSON
body). Every request is recorded (path, query, headers, client port) before it is answered.

Actions: ``status(code, body=, headers=, delay=)`` answers (after ``delay`` seconds, to be slower
than a read timeout); ``echo(code, body, headers=)`` answers with ``{key}`` in its body and headers
replaced by the x-api-key the request came with (a vendor that repeats the key it was sent);
``reset()`` closes the connection without answering, with SO_LINGER 0 so the client gets a real RST;
``truncated(body, missing=)`` announces a Content-Length longer than what it sends, then closes;
``trickle(body, every=)`` sends the answer one byte at a time (the body, or with ``headers=True``
the whole answer), recording in ``server.trickled`` how many bytes went out. Every
wait is bounded and cut short when the server stops; on exit the server closes its listening socket
and every open connection, and joins every thread.
"""

from __future__ import annotations

import base64
import json
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

MAX_DELAY = 5.0  # no scripted wait is longer than this
OK_BODY = json.dumps({"metric_name": "m", "value": 1}).encode()


@dataclass(frozen=True)
class Action:
    kind: str  # "status", "reset", "truncated" or "trickle"
    code: int = 200
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    missing: int = 0
    every: float = 0.0  # trickle: seconds between bytes
    slow_headers: bool = False  # trickle: the status line and headers too
    echo: bool = False  # status: "{key}" in the body and headers is the request's x-api-key


def status(
    code: int, body: bytes | str | dict | None = None, *, headers: Mapping[str, str] | None = None, delay: float = 0.0
) -> Action:
    """Answer ``code`` with ``body`` (a dict is sent as JSON; None: an error body in the service's shape)."""
    if body is None:
        body = OK_BODY if code == 200 else {"error": {"code": "scripted", "message": f"scripted {code}", "param": None}}
    if isinstance(body, dict):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode()
    return Action("status", code, body, dict(headers or {}), min(delay, MAX_DELAY))


def echo(code: int, body: str, *, headers: Mapping[str, str] | None = None) -> Action:
    """Answer ``code`` with ``body`` and ``headers``, each ``{key}`` in them replaced by the x-api-key
    the request came with, ``{KEY}`` by it upper-cased and ``{key64}`` by the base64 of ``user:key``
    (formatted by ``str.replace``: the rest of the text is sent as it is)."""
    return Action("status", code, body.encode(), dict(headers or {}), echo=True)


def echoed(text: str, key: str) -> str:
    """``text`` with the forms of ``key`` that ``echo`` writes (see there)."""
    key64 = base64.b64encode(b"user:" + key.encode()).decode()
    return text.replace("{key}", key).replace("{KEY}", key.upper()).replace("{key64}", key64)


def slow(delay: float, code: int = 200, body: bytes | str | dict | None = None) -> Action:
    """Answer after ``delay`` seconds (bounded by MAX_DELAY and by the server stopping)."""
    return status(code, body, delay=delay)


def reset() -> Action:
    """Close the connection without answering, as a TCP reset."""
    return Action("reset")


def truncated(body: bytes = OK_BODY, missing: int = 100) -> Action:
    """A 200 whose Content-Length promises ``missing`` more bytes than are sent before closing."""
    return Action("truncated", 200, body, missing=missing)


def trickle(body: bytes = OK_BODY, *, every: float = 0.05, headers: bool = False) -> Action:
    """A 200 whose body (with ``headers``, the whole answer) is sent one byte every ``every`` seconds.

    Each byte goes out before its pause, and the whole is bounded by MAX_DELAY: a client that waits
    long enough gets the whole answer."""
    every = min(every, MAX_DELAY / max(1, len(body) + (200 if headers else 0)))
    return Action("trickle", 200, body, every=every, slow_headers=headers)


@dataclass(frozen=True)
class Recorded:
    method: str
    target: str  # the request target as sent: path and query
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-case names
    client_port: int
    at: float  # time.monotonic() when the request arrived


@contextmanager
def unaccepting_port():
    """A port whose listen queue is full, so a new connection gets no SYN-ACK: a connect timeout.

    (Linux drops the SYN when the accept queue is full; the listener never accepts.)
    """
    listener = socket.socket()
    fillers: list[socket.socket] = []
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        for _ in range(3):
            filler = socket.socket()
            fillers.append(filler)
            filler.setblocking(False)
            try:
                filler.connect(("127.0.0.1", port))
            except BlockingIOError:
                pass
        time.sleep(0.1)  # let the handshakes fill the queue
        yield port
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


class FaultServer:
    """A scripted HTTP/1.1 server (keep-alive) on 127.0.0.1 with an ephemeral port."""

    def __init__(self, default: Action | None = None):
        self._default = default or status(200)
        self._defaults: dict[str, Action] = {}
        self._queues: dict[str, deque[Action]] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self.requests: list[Recorded] = []
        self.in_flight = 0
        self.max_in_flight = 0  # the most requests being answered at once
        self.errors: list[BaseException] = []
        self.trickled: list[tuple[int, int]] = []  # per trickled answer: (bytes sent, bytes in the answer)
        self._httpd = _Server(("127.0.0.1", 0), _handler_for(self))
        self._httpd.owner = self
        host, port = self._httpd.server_address[:2]
        self.base_url = f"http://{host}:{port}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fault-server", daemon=True
        )
        self._thread.start()

    # -- scripting ----------------------------------------------------------------------------------------

    def script(self, path: str, *actions: Action) -> None:
        """Queue ``actions`` for ``path``, one per request, after any already queued."""
        with self._lock:
            self._queues.setdefault(path, deque()).extend(actions)

    def always(self, path: str, action: Action) -> None:
        """What ``path`` does once its queue is empty."""
        with self._lock:
            self._defaults[path] = action

    def _next_action(self, path: str) -> Action:
        with self._lock:
            queue = self._queues.get(path)
            if queue:
                return queue.popleft()
            return self._defaults.get(path, self._default)

    def _record(self, recorded: Recorded) -> None:
        with self._lock:
            self.requests.append(recorded)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _done(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def attempts(self, path: str | None = None) -> int:
        return sum(1 for r in self.requests if path is None or r.path == path)

    def client_ports(self) -> set[int]:
        return {r.client_port for r in self.requests}

    # -- lifecycle ----------------------------------------------------------------------------------------

    def stop(self) -> None:
        if self._stopping.is_set():
            return
        self._stopping.set()  # cuts every scripted delay short
        self._httpd.shutdown()
        with self._lock:
            open_connections = list(self._connections)
        for conn in open_connections:  # unblock handlers waiting for a next keep-alive request
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._httpd.server_close()  # closes the listening socket and joins the handler threads
        self._thread.join(timeout=10)

    def __enter__(self) -> FaultServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # so that server_close() joins them
    block_on_close = True
    request_queue_size = 128  # socketserver's 5 drops the SYNs of a 16-thread burst (1 s retransmit)
    owner: FaultServer

    def process_request(self, request, client_address):
        with self.owner._lock:
            self.owner._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        with self.owner._lock:
            self.owner._connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request, client_address):
        # A client that gave up (timeout) makes the late answer fail: expected, recorded, not printed.
        import sys

        self.owner.errors.append(sys.exc_info()[1])


def _handler_for(owner: FaultServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 10  # an idle keep-alive connection is dropped after this (stop() is faster)

        def log_message(self, format, *args):  # noqa: A002 - quiet
            pass

        def do_GET(self):
            split = urlsplit(self.path)
            owner._record(
                Recorded(
                    self.command,
                    self.path,
                    split.path,
                    parse_qs(split.query),
                    {k.lower(): v for k, v in self.headers.items()},
                    self.client_address[1],
                    time.monotonic(),
                )
            )
            try:
                self._answer(owner._next_action(split.path))
            finally:
                owner._done()

        def _answer(self, action: Action) -> None:
            if action.kind == "reset":
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.close_connection = True
                self.connection.close()
                return
            if action.delay and owner._stopping.wait(action.delay):
                self.close_connection = True
                return
            if action.echo:  # the key this request came with, repeated where the action says
                key = self.headers.get("x-api-key", "")
                action = Action(
                    "status",
                    action.code,
                    echoed(action.body.decode(), key).encode(),
                    {name: echoed(value, key) for name, value in action.headers.items()},
                )
            self.send_response(action.code)
            for name, value in action.headers.items():
                self.send_header(name, value)
            if action.kind == "trickle":
                self._trickle(action)
                return
            if "content-type" not in {name.lower() for name in action.headers}:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(action.body) + action.missing))
            if action.kind == "truncated":
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(action.body)

        def _trickle(self, action: Action) -> None:
            head = (
                f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(action.body)}\r\n"
                "Connection: close\r\n\r\n"
            ).encode()
            self.close_connection = True
            slow = head + action.body if action.slow_headers else action.body
            total = len(slow)
            sent = 0
            try:
                if not action.slow_headers:
                    self.wfile.write(head)
                for byte in slow:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    sent += 1
                    if owner._stopping.wait(action.every):
                        break
            except OSError:  # the client gave up and closed the connection
                pass
            with owner._lock:
                owner.trickled.append((sent, total))

    return Handler
