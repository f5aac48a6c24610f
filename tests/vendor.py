"""Another vendor's metrics service, on the standard library: what the reference service does not do
on demand (answer some requests only when told to, offer no ``/projects``, refuse it).

    with Vendor(version="v1") as vendor:
        Client(vendor.base_url, KEY).series("swap_transaction_count", "demoswap", "2025-01-01", "2025-01-31")

``/metrics`` answers every metric of the catalogue for any project over a day, week or month, with
the value ``value_of(date)`` (the day of the year of the period's first day times ``factor``), complete, and
the header ``X-Data-Version: version`` when ``version`` is set, and the headers ``stated`` (a rate
limit it states, say). ``/projects`` answers ``projects_status``
(404 by default: not offered), with the version header only when ``version_on_errors``. A request
for a date in ``held`` waits, its request recorded, until ``release()`` (or the server stops), so a
test can interrupt a pull at a known point: ``wait_for(answered=..., waiting=...)`` waits for the
answers sent and the requests held. Every wait is bounded.
"""

from __future__ import annotations

import datetime as dt
import json
import socket
import threading
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from metrics_kit.spec.calendar import ISO
from metrics_kit.spec.catalogue import default_catalogue

HOLD_AT_MOST = 60.0  # seconds a held request waits for release() before it is answered anyway


def value_of(date: str, factor: int = 1) -> int:
    return factor * dt.date.fromisoformat(date).timetuple().tm_yday


class Vendor:
    """A metrics service on 127.0.0.1 with an ephemeral port (see the module docstring)."""

    def __init__(
        self,
        *,
        version: str | None = "v1",
        version_on_errors: bool = True,
        projects_status: int = 404,
        held: Iterable[str] = (),
        factor: int = 1,
        stated: dict[str, str] | None = None,
    ):
        self.version, self.version_on_errors, self.projects_status = version, version_on_errors, projects_status
        self.factor = factor
        self.stated = dict(stated or {})
        self.held = set(held)
        self.paths: list[str] = []  # the path of every request, in the order they came
        self.answered = 0  # /metrics answers sent
        self.waiting = 0  # requests held now
        self._changed = threading.Condition()
        self._released = threading.Event()
        self._catalogue = default_catalogue()
        self._httpd = _Server(("127.0.0.1", 0), _handler_for(self))
        host, port = self._httpd.server_address[:2]
        self.base_url = f"http://{host}:{port}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="vendor", daemon=True
        )
        self._thread.start()

    def requests(self, path: str = "/metrics") -> int:
        with self._changed:
            return self.paths.count(path)

    def wait_for(self, *, answered: int, waiting: int, timeout: float = 60.0) -> None:
        """Wait until ``answered`` /metrics answers were sent and ``waiting`` requests are held."""
        with self._changed:
            if not self._changed.wait_for(lambda: (self.answered, self.waiting) == (answered, waiting), timeout):
                raise AssertionError(f"answered {self.answered} and held {self.waiting}, not {answered} and {waiting}")

    def release(self) -> None:
        """Answer the held requests, and every later one at once."""
        self.held = set()
        self._released.set()

    def stop(self) -> None:
        self.release()
        self._httpd.shutdown()
        with self._httpd.lock:
            connections = list(self._httpd.connections)
        for connection in connections:  # a kept-alive connection's handler waits for its next request
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._httpd.server_close()  # joins the handler threads
        self._thread.join(timeout=10)

    def __enter__(self) -> Vendor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- answering --------------------------------------------------------------------------------

    def answer(self, path: str, query: dict[str, list[str]]) -> tuple[int, dict[str, str], bytes]:
        version = {"X-Data-Version": self.version} if self.version is not None else {}
        if path == "/projects":
            body = {"error": {"code": "not_found", "message": "no such path"}}
            return self.projects_status, version if self.version_on_errors else {}, json.dumps(body).encode()
        if path != "/metrics":
            return 404, version if self.version_on_errors else {}, b'{"error": {"code": "not_found"}}'
        params = {name: values[0] for name, values in query.items()}
        date = params["date"]
        if date in self.held:
            with self._changed:
                self.waiting += 1
                self._changed.notify_all()
            self._released.wait(HOLD_AT_MOST)
            with self._changed:
                self.waiting -= 1
        metric = self._catalogue.get(params["metric_name"])
        day = dt.date.fromisoformat(date)
        body = {
            **params,
            "period_start": date,
            "period_end": ISO.end(day, params["granularity"]).isoformat(),
            "unit": metric.unit if metric is not None else "count",
            "value": value_of(date, self.factor),
            "complete": True,
        }
        return 200, {**version, **self.stated}, json.dumps(body).encode()

    def _sent(self, path: str) -> None:
        with self._changed:
            if path == "/metrics":
                self.answered += 1
            self._changed.notify_all()


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # so that server_close() joins them
    block_on_close = True
    request_queue_size = 128  # the default 5 drops the SYNs of a burst from 16 threads

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.connections: set[socket.socket] = set()
        self.lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.lock:
            self.connections.discard(request)
        super().shutdown_request(request)


def _handler_for(vendor: Vendor) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 10

        def log_message(self, format, *args):  # noqa: A002 - quiet
            pass

        def do_GET(self):
            split = urlsplit(self.path)
            with vendor._changed:
                vendor.paths.append(split.path)
            status, headers, body = vendor.answer(split.path, parse_qs(split.query))
            self.send_response(status)
            for name, value in {"Content-Type": "application/json", **headers}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
                self.wfile.flush()
            except OSError:  # the client gave up
                return
            vendor._sent(split.path)

    return Handler
