"""One HTTP/1.1 connection: uvicorn's httptools protocol, with the service's limits and error shape.

uvicorn's httptools protocol reads a request head of any size (a 64 MB header is read whole),
never times out a half-sent one, and answers every request the parser rejects with the same
text, "Invalid HTTP request received.". Its h11 protocol has a size cap
(``h11_max_incomplete_event_size``) but costs several times more per request, and neither has a
header-read timeout. So the limits live here, on the fast protocol:

* a request line and headers over :data:`MAX_HEAD_BYTES` get ``431 headers_too_large`` as soon
  as that much has arrived, and the connection is closed;
* a request head still incomplete ``head_timeout`` seconds after the connection opened (or
  after the previous answer) gets ``408 request_timeout``; an idle connection is just closed;
* a request the parser rejects gets ``400 malformed_request`` with what was wrong in words.

Each is the service's JSON error shape with ``connection: close``. Imported only by
``run.serve``: uvicorn is an optional dependency.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from metrics_kit.spec import wire
from metrics_kit.spec.wire import ErrorCode

MAX_HEAD_BYTES = 64 * 1024
DEFAULT_HEAD_TIMEOUT = 10.0
# After an error answer, incoming bytes are read and dropped for this long before the close, so
# a client still sending sees the answer rather than a connection reset (a "lingering close").
LINGER_SECONDS = 2.0
_REASONS = {400: b"Bad Request", 408: b"Request Timeout", 431: b"Request Header Fields Too Large"}

# llhttp's reason (its start) -> what was wrong, in the client's terms.
_PARSER_MESSAGES = (
    ("Invalid method", "the request does not start with an HTTP method this server knows; it answers GET and HEAD"),
    ("Invalid HTTP version", "the HTTP version is not one this server speaks; send HTTP/1.1"),
    (
        "Expected HTTP/",
        "the request line must be 'METHOD TARGET HTTP/1.1', one space apart; percent-encode a space in the "
        "target as %20",
    ),
    ("Invalid char in url", "the request target holds a space or a control character; percent-encode it (%20, %00)"),
    (
        "Invalid header value char",
        "a header value holds a control character (such as NUL or DEL); header values must be visible text",
    ),
    (
        "Invalid header token",
        "a header line is not 'Name: value', or its name holds a character a header name cannot have (a space)",
    ),
    ("Expected CRLF", "the request's lines must end with CRLF (\\r\\n)"),
    ("Expected LF after CR", "the request's lines must end with CRLF (\\r\\n)"),
    (
        "Unexpected whitespace after header value",
        "a header line starts with whitespace (obsolete line folding); send each header on one line",
    ),
    ("Invalid character in Content-Length", "Content-Length must be a decimal number"),
    ("Duplicate Content-Length", "Content-Length is given more than once"),
    ("Transfer-Encoding can't be present with Content-Length", "send Content-Length or Transfer-Encoding, not both"),
    ("Request has invalid `Transfer-Encoding`", "Transfer-Encoding must end with chunked"),
    ("Invalid character in chunk size", "the chunked request body is malformed"),
    ("Pause on PRI/Upgrade", "HTTP/2 is not served; send HTTP/1.1"),
)


def parser_message(error: Exception, start: bytes) -> str:
    """What the HTTP parser's ``error`` means, for a request whose first bytes are ``start``."""
    if start[:1] == b"\x16":
        return "this is a TLS handshake, but the service speaks plain HTTP: use an http:// URL, not https://"
    if isinstance(error.__context__, UnicodeDecodeError):
        return "the request target holds bytes that are not ASCII; percent-encode them"
    reason = str(error)
    for prefix, message in _PARSER_MESSAGES:
        if reason.startswith(prefix):
            return message
    return f"the HTTP parser rejected the request: {reason}"


def error_response(status: int, code: ErrorCode, message: str, extra: bytes = b"") -> bytes:
    """A whole HTTP/1.1 answer in the JSON error shape, closing the connection."""
    body = wire.error_body(code, message)
    return b"HTTP/1.1 %d %s\r\n%s: %s\r\ncontent-length: %d\r\n%sconnection: close\r\n\r\n%s" % (
        status,
        _REASONS[status],
        wire.CONTENT_TYPE_HEADER.encode(),
        wire.JSON_TYPE.encode(),
        len(body),
        extra,
        body,
    )


class ServiceProtocol(HttpToolsProtocol):
    """HttpToolsProtocol with the head cap, the head timeout and clear parser errors."""

    head_timeout = DEFAULT_HEAD_TIMEOUT
    extra_headers = b""  # raw header lines for every error answer here (the data version)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True  # the next bytes belong to a request line or headers
        self._head_bytes = 0
        self._started = b""  # the connection's first bytes, to recognise a TLS handshake
        self._refused = False
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport) -> None:  # type: ignore[no-untyped-def, override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # lingering: read and drop
        if not self._started:
            self._started = data[:8]
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)  # feeds the parser; a request it rejects comes to send_400_response
        if not self._refused and self._in_head and self._head_bytes > MAX_HEAD_BYTES:
            self._refuse(
                431,
                ErrorCode.HEADERS_TOO_LARGE,
                f"the request line and headers exceed {MAX_HEAD_BYTES // 1024} KiB; send a shorter request",
            )

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request its parser rejected: ours says what was wrong, in the JSON
        error shape. uvicorn calls it while handling the parser's error, which is read here."""
        error = sys.exc_info()[1]
        if isinstance(error, httptools.HttpParserError):
            message = parser_message(error, self._started)
        else:
            message = "the HTTP parser rejected the request"
        self._refuse(400, ErrorCode.MALFORMED_REQUEST, message)

    def on_headers_complete(self) -> None:
        self._in_head, self._head_bytes = False, 0
        self._disarm()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_head = True
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    # -- the head timeout -------------------------------------------------------------------

    def _arm(self) -> None:
        self._disarm()
        self._timer = self.loop.call_later(self.head_timeout, self._head_timed_out)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _head_timed_out(self) -> None:
        self._timer = None
        busy = self.cycle is not None and not self.cycle.response_complete
        if self._refused or self.transport.is_closing() or not self._in_head or busy:
            return
        if self._head_bytes:
            self._refuse(
                408,
                ErrorCode.REQUEST_TIMEOUT,
                f"the request line and headers did not arrive within {self.head_timeout:g} s; send the whole "
                "request at once",
            )
        else:
            self.transport.close()  # idle: nothing to answer

    # -- answering without the application ----------------------------------------------------

    def _refuse(self, status: int, code: ErrorCode, message: str) -> None:
        self.logger.warning("refused a request: %d %s", status, code)  # never the request's bytes
        self._refused = True
        self._disarm()
        self.transport.write(error_response(status, code, message, self.extra_headers))
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self.loop.call_later(LINGER_SECONDS, self.transport.close)
        else:
            self.transport.close()


def protocol_class(*, head_timeout: float, data_version: str | None) -> type[ServiceProtocol]:
    """A ServiceProtocol with these settings (uvicorn makes one instance per connection)."""
    extra = b"%s: %s\r\n" % (wire.DATA_VERSION_HEADER.encode(), data_version.encode()) if data_version else b""
    return type("ServiceProtocol", (ServiceProtocol,), {"head_timeout": head_timeout, "extra_headers": extra})
