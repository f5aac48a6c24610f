"""The contract of the HTTP API, in both directions: the server writes with it, the client reads with it.

The names on the wire (the query parameters of ``GET /metrics``, the headers), the error codes, the
rule an API key follows, and the bodies: :func:`value_body` and :func:`error_body` write them (the
reference service), :func:`metric_value` and :func:`api_error` read them (the client). Nothing else
in the package spells these names again.

The specification does not fix the body of a metric value, so the reader accepts several shapes:
the reference service's object, a bare number, ``{"value": x}``, ``{"data": {...}}`` and a
one-element list of any of these. Anything else is a ResponseFormatError that shows the start of
the body. A number is never guessed: null, NaN, booleans and strings are errors, not NaN.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NoReturn

from metrics_kit.errors import APIError, RateLimitError, ResponseFormatError, for_status

# -- names ------------------------------------------------------------------------------------------

METRICS_PATH = "/metrics"
METRIC_NAME, PROJECT, GRANULARITY, DATE = "metric_name", "project", "granularity", "date"
# The query parameters of GET /metrics, all required, in the order a missing one is named.
PARAMETERS = (METRIC_NAME, PROJECT, GRANULARITY, DATE)

# GET /explain, an extension of the reference service: the event rows behind one value. It takes
# PARAMETERS and, optionally, a page: at most LIMIT rows (EXPLAIN_LIMIT unless given, at most
# EXPLAIN_MAX_LIMIT) from row OFFSET (0 unless given, at most EXPLAIN_MAX_OFFSET) of the value's rows
# in their fixed order.
EXPLAIN_PATH = "/explain"
LIMIT, OFFSET = "limit", "offset"
EXPLAIN_PAGE = (LIMIT, OFFSET)
EXPLAIN_LIMIT = 1_000
EXPLAIN_MAX_LIMIT = 10_000
EXPLAIN_MAX_OFFSET = 10**12  # far past any value's rows; bounds the text a server parses

API_KEY_HEADER = "x-api-key"  # the key travels here, and only here
DATA_VERSION_HEADER = "x-data-version"  # every answer names the version of the data it comes from
RETRY_AFTER_HEADER = "retry-after"

# An API key: visible ASCII (a header value that cannot be mangled), nothing else.
API_KEY = re.compile(r"[\x21-\x7e]+", re.ASCII)


def is_api_key(value: object) -> bool:
    """Whether ``value`` is a string an API key can be (see :data:`API_KEY`)."""
    return isinstance(value, str) and API_KEY.fullmatch(value) is not None


class ErrorCode(StrEnum):
    """The error codes of the reference service. Open: ``ErrorCode(code)`` also takes a code it does
    not list (another implementation's), as a member that is not :attr:`known`; it equals its text."""

    MISSING_PARAMETER = "missing_parameter"
    DUPLICATE_PARAMETER = "duplicate_parameter"
    UNKNOWN_METRIC = "unknown_metric"
    INVALID_GRANULARITY = "invalid_granularity"
    INVALID_DATE = "invalid_date"
    INVALID_PROJECT = "invalid_project"
    MALFORMED_REQUEST = "malformed_request"
    MISSING_API_KEY = "missing_api_key"
    INVALID_API_KEY = "invalid_api_key"
    UNKNOWN_PROJECT = "unknown_project"
    METRIC_NOT_APPLICABLE = "metric_not_applicable"
    DATE_OUT_OF_COVERAGE = "date_out_of_coverage"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    NOT_ACCEPTABLE = "not_acceptable"
    REQUEST_TIMEOUT = "request_timeout"
    RATE_LIMITED = "rate_limited"
    HEADERS_TOO_LARGE = "headers_too_large"
    INTERNAL_ERROR = "internal_error"
    # GET /explain only:
    INVALID_PAGE = "invalid_page"
    EVENTS_CHANGED = "events_changed"
    EXPLAIN_UNAVAILABLE = "explain_unavailable"

    @classmethod
    def _missing_(cls, value: object) -> ErrorCode | None:
        if not isinstance(value, str) or not value:
            return None
        member = str.__new__(cls, value)
        member._name_ = value
        member._value_ = value
        return member

    @property
    def known(self) -> bool:
        """Whether this is one of the codes listed here."""
        return self.name in type(self).__members__


# Every code the reference service answers with, by the status it comes with (docs/service.md).
ERROR_CODES: dict[int, tuple[ErrorCode, ...]] = {
    400: (
        ErrorCode.MISSING_PARAMETER,
        ErrorCode.DUPLICATE_PARAMETER,
        ErrorCode.UNKNOWN_METRIC,
        ErrorCode.INVALID_GRANULARITY,
        ErrorCode.INVALID_DATE,
        ErrorCode.INVALID_PROJECT,
        ErrorCode.MALFORMED_REQUEST,
        ErrorCode.INVALID_PAGE,
    ),
    401: (ErrorCode.MISSING_API_KEY, ErrorCode.INVALID_API_KEY),
    404: (
        ErrorCode.UNKNOWN_PROJECT,
        ErrorCode.METRIC_NOT_APPLICABLE,
        ErrorCode.DATE_OUT_OF_COVERAGE,
        ErrorCode.NOT_FOUND,
    ),
    405: (ErrorCode.METHOD_NOT_ALLOWED,),
    406: (ErrorCode.NOT_ACCEPTABLE,),
    408: (ErrorCode.REQUEST_TIMEOUT,),
    409: (ErrorCode.EVENTS_CHANGED,),
    429: (ErrorCode.RATE_LIMITED,),
    431: (ErrorCode.HEADERS_TOO_LARGE,),
    500: (ErrorCode.INTERNAL_ERROR,),
    501: (ErrorCode.EXPLAIN_UNAVAILABLE,),
}
# The codes only GET /explain answers with (a bad page, event files changed under the service, no
# event data to explain from).
EXPLAIN_ONLY = (ErrorCode.INVALID_PAGE, ErrorCode.EVENTS_CHANGED, ErrorCode.EXPLAIN_UNAVAILABLE)

# -- writing (the server) ---------------------------------------------------------------------------

# The fields of a metric value's body, in the order they are written.
VALUE_FIELDS = (
    METRIC_NAME,
    PROJECT,
    GRANULARITY,
    DATE,
    "period_start",
    "period_end",
    "unit",
    "value",
    "complete",
)


def value_body(
    metric_name: str,
    project: str,
    granularity: str,
    date: str,
    period_start: str,
    period_end: str,
    unit: str,
    value: int | float,
    complete: bool,
) -> bytes:
    """The body of one metric value (the reference service's answer to ``GET /metrics``).

    Every string must already be JSON-safe (the service's checked ids, dates and catalogue names):
    the body is formatted directly, as json.dumps costs a third of the request on the hot path."""
    return (
        f'{{"metric_name": "{metric_name}", "project": "{project}", "granularity": "{granularity}", '
        f'"date": "{date}", "period_start": "{period_start}", "period_end": "{period_end}", '
        f'"unit": "{unit}", "value": {value!r}, "complete": {"true" if complete else "false"}}}'
    ).encode()


# The fields of a GET /explain body, in the order they are written: the value's own fields, then how
# it follows from its rows (the formula in words; the same as fields: it is opening_balance, or 0,
# plus the sum of value_column, or the number of rows, over the rows whose counted_column is true,
# or over every row), then one page of the rows (each a list in the order of ``columns``) and where
# the next page starts (null after the last).
EXPLAIN_FIELDS = (
    *VALUE_FIELDS,
    "aggregation",
    "source",
    "select",
    "formula",
    "value_column",
    "counted_column",
    "opening_balance",
    "columns",
    "rows",
    "total_rows",
    OFFSET,
    LIMIT,
    "next_offset",
)


def explain_body(fields: dict[str, Any]) -> bytes:
    """The body of one page of ``GET /explain``: ``fields`` holds every name of EXPLAIN_FIELDS."""
    assert set(fields) == set(EXPLAIN_FIELDS), sorted(set(fields) ^ set(EXPLAIN_FIELDS))
    return json.dumps({name: fields[name] for name in EXPLAIN_FIELDS}, allow_nan=False).encode()


@dataclass(frozen=True)
class ExplainPage:
    """One page of a ``GET /explain`` answer, read and checked (see EXPLAIN_FIELDS)."""

    fields: dict[str, Any]  # everything but the rows
    columns: list[str]
    rows: list[list[Any]]
    total_rows: int
    next_offset: int | None


def explain_page(body: bytes, url: str | None = None) -> ExplainPage:
    """A ``GET /explain`` page from its 200 body; a ResponseFormatError for any other shape."""
    try:
        document = _loads(body)
    except (ValueError, UnicodeDecodeError):
        raise ResponseFormatError(f"the answer{_at(url)} is not JSON; it starts {_start(body)}") from None
    if not isinstance(document, dict) or any(name not in document for name in EXPLAIN_FIELDS):
        missing = [n for n in EXPLAIN_FIELDS if not isinstance(document, dict) or n not in document]
        raise ResponseFormatError(
            f"the answer{_at(url)} is not an explain page (missing {', '.join(missing[:5])}); it starts {_start(body)}"
        )
    columns, rows = document["columns"], document["rows"]
    total, following = document["total_rows"], document["next_offset"]
    shaped = (
        isinstance(columns, list)
        and all(isinstance(c, str) for c in columns)
        and isinstance(rows, list)
        and all(isinstance(r, list) and len(r) == len(columns) for r in rows)
        and _whole(total)
        and (following is None or _whole(following))
        and all(isinstance(document[name], str) for name in ("period_start", "period_end"))
        and isinstance(document["value"], int | float)
        and not isinstance(document["value"], bool)
        and math.isfinite(document["value"])
    )
    if not shaped:
        raise ResponseFormatError(
            f"the answer{_at(url)} has a value, period, columns, rows, total_rows or next_offset of the wrong "
            "shape; it starts "
            f"{_start(body)}"
        )
    fields = {n: document[n] for n in EXPLAIN_FIELDS if n not in ("columns", "rows")}
    return ExplainPage(fields, columns, rows, total, following)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def error_body(code: str, message: str, param: str | None = None) -> bytes:
    """The one error body: ``{"error": {"code", "message", "param"}}``."""
    return json.dumps({"error": {"code": str(code), "message": message, "param": param}}).encode()


# -- reading (the client) ---------------------------------------------------------------------------

_SHOWN = 200


@dataclass(frozen=True)
class Parsed:
    value: int | float
    unit: str | None = None
    complete: bool | None = None
    period_start: str | None = None
    period_end: str | None = None
    metric_name: str | None = None  # what the answer says it is about, when it says
    project: str | None = None


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a number")


def _loads(body: bytes) -> Any:
    return json.loads(body, parse_constant=_reject_constant)


def _start(body: bytes) -> str:
    text = body[:_SHOWN].decode("utf-8", errors="replace")
    return repr(text + ("..." if len(body) > _SHOWN else ""))


def metric_value(body: bytes, *, is_count: bool, url: str | None = None) -> Parsed:
    """The metric value in a 200 body."""
    try:
        document = _loads(body)
    except (ValueError, UnicodeDecodeError):
        raise ResponseFormatError(f"the answer{_at(url)} is not JSON; it starts {_start(body)}") from None
    found = _find(document, depth=0)
    if found is None:
        raise ResponseFormatError(
            f'the answer{_at(url)} holds no metric value in a known shape (a number, {{"value": x}}, '
            f'{{"data": {{...}}}} or a one-element list); it starts {_start(body)}'
        )
    number, fields = found
    return Parsed(
        _number(number, is_count, body, url),
        fields.get("unit"),
        _bool(fields.get("complete")),
        fields.get("period_start"),
        fields.get("period_end"),
        fields.get(METRIC_NAME),
        fields.get(PROJECT),
    )


def _find(document: Any, depth: int) -> tuple[Any, dict[str, Any]] | None:
    if depth > 3:
        return None
    if isinstance(document, (int, float)) and not isinstance(document, bool):
        return document, {}
    if isinstance(document, list):
        return _find(document[0], depth + 1) if len(document) == 1 else None
    if isinstance(document, dict):
        if "value" in document:
            fields = {k: v for k, v in document.items() if isinstance(v, (str, bool))}
            return document["value"], fields
        if "data" in document:
            return _find(document["data"], depth + 1)
    return None


def _number(value: Any, is_count: bool, body: bytes, url: str | None) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ResponseFormatError(
            f"the answer{_at(url)} has a value that is not a finite number ({value!r}); it starts {_start(body)}"
        )
    if is_count:
        if isinstance(value, float) and not value.is_integer():
            raise ResponseFormatError(f"the answer{_at(url)} gives a count that is not a whole number ({value!r})")
        return int(value)
    return float(value)


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _at(url: str | None) -> str:
    return f" from {url}" if url else ""


def api_error(status: int, body: bytes, url: str | None, retry_after: str | None = None) -> APIError:
    """The APIError for an error answer, keeping the server's code and message when it gives them."""
    code = param = None
    message = None
    try:
        document = _loads(body)
    except (ValueError, UnicodeDecodeError):
        document = None
    if isinstance(document, dict):
        error = document.get("error", document)
        if isinstance(error, dict):
            code = error.get("code") if isinstance(error.get("code"), str) else None
            param = error.get("param") if isinstance(error.get("param"), str) else None
            text = error.get("message") or error.get("detail")
            message = text if isinstance(text, str) else None
        elif isinstance(error, str):
            message = error
    if message is None:
        message = f"HTTP {status}; the answer starts {_start(body)}" if body else f"HTTP {status}"
    if status == 429:
        try:
            seconds = float(retry_after) if retry_after is not None else None
        except ValueError:
            seconds = None
        return RateLimitError(status, message, code=code, url=url, param=param, retry_after=seconds)
    return for_status(status)(status, message, code=code, url=url, param=param)
