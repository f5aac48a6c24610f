"""Server limits, on the wire: a cap on the request head, a timeout for a half-sent one, and a clear
message for each request the HTTP parser rejects, all in the one JSON error shape."""

from __future__ import annotations

import http.client
import json
import select
import socket
from pathlib import Path
from urllib.parse import urlencode

import pytest
from support import ServerProcess

DATA = Path(__file__).parents[1] / "http_data"
GOOD = {"metric_name": "swap_active_users", "project": "swapper", "granularity": "1_week", "date": "2024-03-20"}
MIB = 1 << 20


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with ServerProcess(DATA, "--head-timeout", "1", cache_dir=tmp_path_factory.mktemp("limits-cache")) as proc:
        yield proc


def _connect(server: ServerProcess) -> socket.socket:
    host, port = server.base_url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=30)  # every wait below is bounded by this


def _read(sock: socket.socket) -> tuple[int, dict[str, str], dict]:
    response = http.client.HTTPResponse(sock)
    response.begin()
    body = response.read()
    headers = {name.lower(): value for name, value in response.getheaders()}
    assert headers["content-type"] == "application/json", headers
    return response.status, headers, json.loads(body)


def _exchange(server: ServerProcess, data: bytes) -> tuple[int, dict[str, str], dict]:
    with _connect(server) as sock:
        sock.sendall(data)
        return _read(sock)


def _request(key: str, extra: bytes = b"") -> bytes:
    return (
        f"GET /metrics?{urlencode(GOOD)} HTTP/1.1\r\nHost: test\r\nAccept: application/json\r\nx-api-key: {key}\r\n"
    ).encode() + extra


def _error(answer, status: int, code: str) -> str:
    got, headers, body = answer
    assert got == status, (got, body)
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "param"}, body
    assert body["error"]["code"] == code, body
    assert headers["connection"] == "close"
    assert headers["x-data-version"], headers
    return body["error"]["message"]


def test_a_64_mib_header_is_refused_without_being_read_whole(server):
    with _connect(server) as sock:
        sock.sendall(_request(server.key, b"X-Huge: "))
        sent, answered = 0, False
        chunk = b"a" * MIB
        while sent < 64 * MIB:
            try:
                sock.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(chunk)
            if select.select([sock], [], [], 0)[0]:  # the answer is already here
                answered = True
                break
        assert answered or select.select([sock], [], [], 30)[0]
        # Refused after the first 64 KiB; what was sent meanwhile is socket buffers, not 64 MiB.
        assert sent < 32 * MIB, sent
        message = _error(_read(sock), 431, "headers_too_large")
        assert "64 KiB" in message
        # Meanwhile, on another connection, the service answers as usual.
        status, _, body = _exchange(server, _request(server.key, b"\r\n"))
        assert status == 200 and body["value"] == 2


def test_a_large_but_allowed_header_is_served(server):
    status, _, body = _exchange(server, _request(server.key, b"X-Padding: " + b"p" * 40_000 + b"\r\n\r\n"))
    assert status == 200 and body["value"] == 2


def test_a_half_sent_request_times_out(server):
    message = _error(_exchange(server, _request(server.key)), 408, "request_timeout")  # no blank line: unfinished
    assert "1 s" in message


def test_a_request_line_sent_in_pieces_in_time_is_served(server):
    with _connect(server) as sock:
        request = _request(server.key, b"\r\n")
        for i in range(0, len(request), 40):
            sock.sendall(request[i : i + 40])
        status, _, body = _read(sock)
    assert status == 200 and body["value"] == 2


def test_an_idle_connection_is_closed_without_an_answer(server):
    with _connect(server) as sock:
        assert sock.recv(1024) == b""  # closed by the server after the head timeout (bounded by 30 s)


def test_a_keep_alive_connection_times_out_a_half_sent_second_request(server):
    with _connect(server) as sock:
        sock.sendall(_request(server.key, b"\r\n"))
        response = http.client.HTTPResponse(sock)
        response.begin()
        assert response.status == 200
        response.read()
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: te")
        _error(_read(sock), 408, "request_timeout")


# (request bytes, a phrase of the message): the shapes the HTTP parser rejects.
REJECTED = {
    "unknown-method": (b"BREW /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP method"),
    "lowercase-method": (b"get /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP method"),
    "http-version": (b"GET /metrics HTTP/9.9\r\nHost: x\r\n\r\n", "HTTP version"),
    "space-in-target": (b"GET /met rics HTTP/1.1\r\nHost: x\r\n\r\n", "percent-encode"),
    "control-in-target": (b"GET /met\x01rics HTTP/1.1\r\nHost: x\r\n\r\n", "percent-encode"),
    "non-ascii-target": (b"GET /m\xffx HTTP/1.1\r\nHost: x\r\n\r\n", "percent-encode"),
    "nul-in-header": (b"GET / HTTP/1.1\r\nx-api-key: a\x00b\r\n\r\n", "control character"),
    "del-in-header": (b"GET / HTTP/1.1\r\nx-api-key: \x7f\r\n\r\n", "control character"),
    "space-in-header-name": (b"GET / HTTP/1.1\r\nx api: a\r\n\r\n", "header line"),
    "header-without-colon": (b"GET / HTTP/1.1\r\nxapi\r\n\r\n", "header line"),
    "bare-lf": (b"GET / HTTP/1.1\nHost: x\n\n", "CRLF"),
    "folded-header": (b"GET / HTTP/1.1\r\nHost: x\r\n  folded\r\n\r\n", "line folding"),
    "bad-content-length": (b"POST / HTTP/1.1\r\nContent-Length: abc\r\n\r\n", "Content-Length must be"),
    "two-content-lengths": (b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", "more than once"),
    "length-and-chunked": (
        b"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "not both",
    ),
    "bad-chunk": (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunked request body"),
    "tls-handshake": (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", "http://"),
    "http2-preface": (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "HTTP/2"),
}


@pytest.mark.parametrize(("request_bytes", "phrase"), list(REJECTED.values()), ids=list(REJECTED))
def test_parser_rejections_say_what_was_wrong(server, request_bytes, phrase):
    message = _error(_exchange(server, request_bytes), 400, "malformed_request")
    assert phrase in message, message
    assert "Invalid HTTP request received" not in message


def test_parser_rejections_are_told_apart(server):
    messages = {_error(_exchange(server, data), 400, "malformed_request") for data, _ in REJECTED.values()}
    assert len(messages) >= 12, messages
