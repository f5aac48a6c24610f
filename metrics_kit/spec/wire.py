"""The contract of the HTTP API, in both directions: the server writes with it, the client reads with it.

The names on the wire (the query parameters of ``GET /metrics``, the headers), the error codes, the
rule an API key follows, and the bodies: :func:`value_body` and :func:`error_body` write them (the
reference service), :func:`metric_value` and :func:`api_error` read them (the client). Nothing else
in the package spells these names again.

The specification does not fix the body of a metric value, so the reader accepts several shapes:
the reference service's object, a bare number, ``{"value": x}``, ``{"data": {...}}`` and a
one-element list of any of these. Anything else is a ResponseFormatError that shows the start of
the body. A number is never guessed (see :func:`metric_value`): it is read exactly or refused.

Every text of the service that the reader puts in a message (an error's message, code and param,
the start of a body, a header) goes through the ``mask`` it is given first: the client's hides its
key in every form (``Secret.mask``). What is parsed is the body as it came, never a masked copy, so
masking never changes a value.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import functools
import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
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

# The fields of a value's body after its parameters (VALUE_FIELDS), and of an explain page's after the
# value's (EXPLAIN_FIELDS), by name.
PERIOD_START, PERIOD_END, UNIT, VALUE, COMPLETE = "period_start", "period_end", "unit", "value", "complete"
AGGREGATION, SOURCE, SELECT, FORMULA = "aggregation", "source", "select", "formula"
VALUE_COLUMN, COUNTED_COLUMN, OPENING_BALANCE = "value_column", "counted_column", "opening_balance"
COLUMNS, ROWS, TOTAL_ROWS, NEXT_OFFSET = "columns", "rows", "total_rows", "next_offset"
# The error body's fields: {ERROR: {CODE, MESSAGE, PARAM}} (error_body writes it).
ERROR, CODE, MESSAGE, PARAM = "error", "code", "message", "param"

# GET /projects: {DATA_VERSION, PROJECTS: [{PROJECT, KINDS, REGULAR_POOLS, COVERAGE, METRICS}], COVERAGE,
# LAST_EVENT, SERIES}; a coverage is {START, END}, the first and last day with an event (null: no events).
DATA_VERSION, PROJECTS, COVERAGE, LAST_EVENT = "data_version", "projects", "coverage", "last_event"
KINDS, REGULAR_POOLS, METRICS = "kinds", "regular_pools", "metrics"
START, END = "start", "end"
# GET /catalogue: {CHAIN_UNIT, CATALOGUE_GRANULARITIES, METRICS: [each metric's catalogue entry, with
# COMPUTED, how it is computed in words, SQL, its standalone query in DuckDB's dialect, and SPARK_SQL,
# the same in Spark SQL]}.
CHAIN_UNIT, CATALOGUE_GRANULARITIES, COMPUTED, SQL = "chain_unit", "granularities", "computed", "sql"
SPARK_SQL = "spark_sql"

# GET /series, an extension of the reference service: every value of one series, from the period
# containing START to the period containing END (any date inside each), that lies in coverage, a page
# at a time: at most LIMIT periods (SERIES_LIMIT unless given, at most SERIES_LIMIT) from period
# OFFSET of them (0 unless given, at most SERIES_MAX_OFFSET). A page costs one request of the key's
# rate limit, whatever its length. GET /projects advertises it: {SERIES: {PATH, LIMIT}}.
SERIES_PATH = "/series"
SERIES_PARAMETERS = (METRIC_NAME, PROJECT, GRANULARITY, START, END)
SERIES_PAGE = (LIMIT, OFFSET)
SERIES_LIMIT = 10_000
SERIES_MAX_OFFSET = 10**7  # far past any series' periods (about 27,000 years of days)
SERIES, PATH, PERIODS, TOTAL_PERIODS = "series", "path", "periods", "total_periods"
# Each period of a series page, in the order its fields are written.
PERIOD_FIELDS = (PERIOD_START, PERIOD_END, VALUE, COMPLETE)
# The most bytes a page of n periods may take: SERIES_PAGE_BYTES + n x SERIES_PERIOD_BYTES, far more
# than any page written so takes (a period is about 100 bytes). A longer answer is refused unread.
SERIES_PAGE_BYTES, SERIES_PERIOD_BYTES = 64 * 1024, 2 * 1024


def coverage_message(day: str, granularity: str, coverage: tuple[str, str]) -> str:
    """What a ``404 date_out_of_coverage`` says of the period of ``granularity`` containing ``day``
    (ISO dates): GET /metrics' message, and the client's for a point outside the coverage a GET
    /series page states (which it is not asked for one value per request)."""
    return f"the {granularity} period containing {day} lies outside the data's coverage, {coverage[0]} to {coverage[1]}"


API_KEY_HEADER = "x-api-key"  # the key travels here, and only here
DATA_VERSION_HEADER = "x-data-version"  # every answer names the version of the data it comes from
RETRY_AFTER_HEADER = "retry-after"
# Headers of an error answer the client reports (each masked): where a redirect points, what a 401
# asks for; and the answer's own clock, which an HTTP-date Retry-After is counted from.
LOCATION_HEADER = "location"
AUTHENTICATE_HEADER = "www-authenticate"
DATE_HEADER = "date"

# An API key: visible ASCII (a header value that cannot be mangled), nothing else.
API_KEY = re.compile(r"[\x21-\x7e]+", re.ASCII)
# The shortest key that can be masked reliably in a service's text: a shorter one ("demo", "2025")
# is also a project name, a date or a word of a message, so it cannot be told from them. The
# reference service (``serve``) refuses shorter keys; a client given one says once that it cannot
# mask it reliably (and still masks it, in messages only).
API_KEY_MIN_LENGTH = 12


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
    # GET /explain and GET /series only:
    INVALID_PAGE = "invalid_page"
    # GET /explain only:
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
# The codes only the paged paths (GET /explain, GET /series) answer with: a bad page.
PAGED_ONLY = (ErrorCode.INVALID_PAGE,)
# The codes only GET /explain answers with (event files changed under the service, no event data to
# explain from).
EXPLAIN_ONLY = (ErrorCode.EVENTS_CHANGED, ErrorCode.EXPLAIN_UNAVAILABLE)

# -- writing (the server) ---------------------------------------------------------------------------

# The fields of a metric value's body, in the order they are written.
VALUE_FIELDS = (METRIC_NAME, PROJECT, GRANULARITY, DATE, PERIOD_START, PERIOD_END, UNIT, VALUE, COMPLETE)


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
    *(AGGREGATION, SOURCE, SELECT, FORMULA, VALUE_COLUMN, COUNTED_COLUMN, OPENING_BALANCE),
    *(COLUMNS, ROWS, TOTAL_ROWS, OFFSET, LIMIT, NEXT_OFFSET),
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


def explain_page(body: bytes, url: str | None = None, mask: Mask | None = None) -> ExplainPage:
    """A ``GET /explain`` page from its 200 body; a ResponseFormatError for any other shape (its text
    of the service through ``mask``)."""
    mask = mask or _as_is
    try:
        document = _loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise ResponseFormatError(f"the answer{_at(url)} is not JSON; it starts {_start(body, mask)}") from None
    if not isinstance(document, dict) or any(name not in document for name in EXPLAIN_FIELDS):
        missing = [n for n in EXPLAIN_FIELDS if not isinstance(document, dict) or n not in document]
        raise ResponseFormatError(
            f"the answer{_at(url)} is not an explain page (missing {', '.join(missing[:5])}); "
            f"it starts {_start(body, mask)}"
        )
    columns, rows = document[COLUMNS], document[ROWS]
    total, following = document[TOTAL_ROWS], document[NEXT_OFFSET]
    shaped = (
        isinstance(columns, list)
        and all(isinstance(c, str) for c in columns)
        and isinstance(rows, list)
        and all(isinstance(r, list) and len(r) == len(columns) for r in rows)
        and _whole(total)
        and (following is None or _whole(following))
        and all(isinstance(document[name], str) for name in (PERIOD_START, PERIOD_END))
        and isinstance(document[VALUE], int | float)
        and not isinstance(document[VALUE], bool)
        and math.isfinite(document[VALUE])
    )
    if not shaped:
        raise ResponseFormatError(
            f"the answer{_at(url)} has a value, period, columns, rows, total_rows or next_offset of the wrong "
            "shape; it starts "
            f"{_start(body, mask)}"
        )
    fields = {n: document[n] for n in EXPLAIN_FIELDS if n not in (COLUMNS, ROWS)}
    fields[COMPLETE] = complete_flag(fields, url, mask)
    return ExplainPage(fields, columns, rows, total, following)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def error_body(code: str, message: str, param: str | None = None) -> bytes:
    """The one error body: ``{"error": {"code", "message", "param"}}``."""
    return json.dumps({ERROR: {CODE: str(code), MESSAGE: message, PARAM: param}}).encode()


# -- server ---------------------------------------------------------------------------------------
# What the reference service writes besides the value and error bodies above: its other paths, the
# headers of caching and content negotiation, every field of its bodies by name, the bodies of
# discovery (GET /projects, GET /catalogue) and the columns of GET /explain's rows with their types.

PROJECTS_PATH = "/projects"  # discovery (an extension): the projects, their kinds and coverage
CATALOGUE_PATH = "/catalogue"  # discovery (an extension): the metric catalogue, with each metric's SQL
OPENAPI_PATH = "/openapi.json"  # the OpenAPI document of the service, answered without a key
# Every path the reference service answers, in the order it names them (a 404 lists them).
SERVED_PATHS = (METRICS_PATH, SERIES_PATH, PROJECTS_PATH, CATALOGUE_PATH, EXPLAIN_PATH, OPENAPI_PATH)

# Caching: every 200 carries an ETag (the data version in quotes, INCOMPLETE_TAG appended for a value
# whose period is not complete yet), and a request naming it in If-None-Match gets a 304.
ETAG_HEADER = "etag"
IF_NONE_MATCH_HEADER = "if-none-match"
INCOMPLETE_TAG = "-incomplete"
# Content negotiation: every body is JSON (406 when Accept rules it out); a 405 names the methods.
ACCEPT_HEADER = "accept"
CONTENT_TYPE_HEADER = "content-type"
JSON_TYPE = "application/json"
ALLOW_HEADER = "allow"
METHODS = ("GET", "HEAD")
# A key's rate limit, stated on every answer to a request that counts against it (a switch of the
# service leaves them out), as the IETF httpapi draft's fields (draft-ietf-httpapi-ratelimit-headers-06):
# the requests a key may spend at once, those left now, whole seconds until all are available again,
# and the policy ("Q;w=W": Q requests a window of W seconds, never above the rate: 1;w=2 for 0.5 a second).
RATELIMIT_LIMIT_HEADER = "ratelimit-limit"
RATELIMIT_REMAINING_HEADER = "ratelimit-remaining"
RATELIMIT_RESET_HEADER = "ratelimit-reset"
RATELIMIT_POLICY_HEADER = "ratelimit-policy"


def coverage_field(coverage: tuple[str, str] | None) -> dict[str, str] | None:
    """A coverage as the bodies write it: its first and last day (ISO dates), or None."""
    return None if coverage is None else {START: coverage[0], END: coverage[1]}


def project_entry(
    project: str, kinds: list[str], regular_pools: bool, coverage: tuple[str, str] | None, metrics: list[str]
) -> dict[str, Any]:
    """One project of GET /projects: its kinds, whether it has regular pools, its coverage and the
    metrics that apply to it (canonical names)."""
    return {
        PROJECT: project,
        KINDS: kinds,
        REGULAR_POOLS: regular_pools,
        COVERAGE: coverage_field(coverage),
        METRICS: metrics,
    }


def projects_body(
    data_version: str, projects: list[dict[str, Any]], coverage: tuple[str, str] | None, last_event: str | None
) -> bytes:
    """The body of GET /projects: the data version, every project (``project_entry``), the data set's
    coverage, the time of its last event (ISO 8601 UTC; None when not known) and GET /series
    (``series_field``)."""
    body = {
        DATA_VERSION: data_version,
        PROJECTS: projects,
        COVERAGE: coverage_field(coverage),
        LAST_EVENT: last_event,
        SERIES: series_field(),
    }
    return json.dumps(body).encode()


def series_field(limit: int = SERIES_LIMIT) -> dict[str, Any]:
    """How GET /projects advertises GET /series: its path and the most periods of a page."""
    return {PATH: SERIES_PATH, LIMIT: limit}


def series_body(
    *,
    metric_name: str,
    project: str,
    granularity: str,
    start: str,
    end: str,
    unit: str,
    data_version: str,
    coverage: tuple[str, str] | None,
    periods: list[tuple[str, str, int | float, bool]],
    total_periods: int,
    offset: int,
    limit: int,
    next_offset: int | None,
) -> bytes:
    """One page of GET /series: the series asked for (its parameters as given), its unit, the data
    version, the data set's coverage, this page's periods (each PERIOD_FIELDS) and where the next
    page starts (null after the last)."""
    body = {
        METRIC_NAME: metric_name,
        PROJECT: project,
        GRANULARITY: granularity,
        START: start,
        END: end,
        UNIT: unit,
        DATA_VERSION: data_version,
        COVERAGE: coverage_field(coverage),
        PERIODS: [dict(zip(PERIOD_FIELDS, period, strict=True)) for period in periods],
        TOTAL_PERIODS: total_periods,
        OFFSET: offset,
        LIMIT: limit,
        NEXT_OFFSET: next_offset,
    }
    return json.dumps(body, allow_nan=False).encode()


def catalogue_entry(described: dict[str, Any], computed: str, sql: str, spark_sql: str) -> dict[str, Any]:
    """One metric of GET /catalogue: its catalogue entry (``Metric.describe``), how it is computed in
    words and its standalone SQL query, in DuckDB's dialect and in Spark SQL."""
    return {**described, COMPUTED: computed, SQL: sql, SPARK_SQL: spark_sql}


def catalogue_body(chain_unit: str, granularities: list[str], metrics: list[dict[str, Any]]) -> bytes:
    """The body of GET /catalogue: the chain unit, the granularities, every metric (``catalogue_entry``)."""
    return json.dumps({CHAIN_UNIT: chain_unit, CATALOGUE_GRANULARITIES: granularities, METRICS: metrics}).encode()


def explain_page_body(
    *,
    metric_name: str,
    project: str,
    granularity: str,
    date: str,
    period_start: str,
    period_end: str,
    unit: str,
    value: int | float,
    complete: bool,
    aggregation: str,
    source: str,
    select: dict[str, list[str]],
    formula: str,
    value_column: str | None,
    counted_column: str | None,
    opening_balance: float | None,
    columns: list[str],
    rows: list[list[Any]],
    total_rows: int,
    offset: int,
    limit: int,
    next_offset: int | None,
) -> bytes:
    """The body of one page of GET /explain, a keyword for each of EXPLAIN_FIELDS, in their order (see
    there); each row a list in the order of ``columns``, its cells as ``explain_cell`` writes them."""
    values = (
        *(metric_name, project, granularity, date, period_start, period_end, unit, value, complete),
        *(aggregation, source, select, formula, value_column, counted_column, opening_balance),
        *(columns, rows, total_rows, offset, limit, next_offset),
    )
    return explain_body(dict(zip(EXPLAIN_FIELDS, values, strict=True)))


class ColumnType(StrEnum):
    """How a column of GET /explain's rows carries its values."""

    TIME = "time"  # ISO 8601 text in UTC, with microseconds (EXPLAIN_TIME_FORMAT)
    COUNT = "count"  # a whole number
    AMOUNT = "amount"  # a number
    FLAG = "flag"  # true or false
    TEXT = "text"  # a string, or null


EXPLAIN_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"  # a naive time of the event tables, which are UTC
# The columns explain adds to the event tables': for active users, a signer's distinct transactions
# and its first and last block_time; whether a row enters the value; a flow's amount with its sign;
# a key's net over the period (the column named after the key: net_column).
TRANSACTIONS, FIRST_BLOCK_TIME, LAST_BLOCK_TIME = "transactions", "first_block_time", "last_block_time"
COUNTED, SIGNED_AMOUNT = "counted", "signed_amount"


def net_column(key: str) -> str:
    """The column of the net of each ``key`` (``account_net``) in the rows of a net metric."""
    return f"{key}_net"


# Every column GET /explain's rows may have, with its type: the event tables' columns
# (docs/data-format.md), then explain's own.
EXPLAIN_COLUMN_TYPES: dict[str, ColumnType] = {
    "block_time": ColumnType.TIME,
    "tx_id": ColumnType.TEXT,
    "signer": ColumnType.TEXT,
    PROJECT: ColumnType.TEXT,
    "action": ColumnType.TEXT,
    "pool_type": ColumnType.TEXT,
    "fee_type": ColumnType.TEXT,
    "recipient": ColumnType.TEXT,
    "amount_usd": ColumnType.AMOUNT,
    "flow": ColumnType.TEXT,
    "amount": ColumnType.AMOUNT,
    "account": ColumnType.TEXT,
    "reward_type": ColumnType.TEXT,
    TRANSACTIONS: ColumnType.COUNT,
    FIRST_BLOCK_TIME: ColumnType.TIME,
    LAST_BLOCK_TIME: ColumnType.TIME,
    COUNTED: ColumnType.FLAG,
    SIGNED_AMOUNT: ColumnType.AMOUNT,
    net_column("account"): ColumnType.AMOUNT,
}


def explain_cell(column_type: ColumnType, value: Any) -> Any:
    """A cell of an explain page's rows as the body carries it: a time as EXPLAIN_TIME_FORMAT's text
    (a naive time is UTC), anything else as it is (None: null)."""
    if column_type is ColumnType.TIME and isinstance(value, dt.datetime):
        return value.strftime(EXPLAIN_TIME_FORMAT)
    return value


# -- reading (the client) ---------------------------------------------------------------------------

_SHOWN = 200
_MASKED = 65_536  # characters of a body masked before its start is shown (see _start)
Mask = Callable[[str], str]  # hides secrets in a service's text before it goes into a message


def _as_is(text: str) -> str:
    return text


# The range of a count: what an int64 holds (the client's frames and cache keep counts as int64).
COUNT_MIN, COUNT_MAX = -(2**63), 2**63 - 1
# A float holds every whole number up to this exactly; above it a count written as a float may have
# been rounded by whoever wrote it.
EXACT_FLOAT = 2**53
# A value sent as text: a decimal number (what vendors send to keep an amount's precision), nothing else.
_DECIMAL_TEXT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
# Where an answer says the request failed, and why.
_FAILED_STATUS = frozenset({"error", "fail", "failed", "failure"})
_REASONS = ("reason", "message", "detail", "note", "error_message", "msg")
_FAILURE_FIELDS = frozenset({"success", "ok", "status", "error", "errors"})
# Types, as tuples: a union written in a call (int | float) is made anew on every call.
_NUMBERS = (int, float, Decimal)
_BARE = (int, float, Decimal, str)  # a value alone: a number or decimal text (or null)
_WORDS = (str, bool)  # the fields kept beside a value (and COMPLETE, whatever it is: see complete_flag)


@dataclass(frozen=True)
class Parsed:
    value: int | float | None  # None: the service says it has no value (``reason`` says why, when it does)
    unit: str | None = None
    complete: bool | None = None
    period_start: str | None = None
    period_end: str | None = None
    metric_name: str | None = None  # what the answer says it is about, when it says
    project: str | None = None
    reason: str | None = None  # why there is no value, as the service said (masked)


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a number")


def _loads(body: bytes) -> Any:
    return json.loads(body, parse_constant=_reject_constant)


class _Written(str):
    """A JSON number written with a fraction or an exponent (``5.0``, ``1e3``), kept as its text: an
    amount becomes the float nearest to it, a count must be a whole number that no float could
    have rounded."""


def _whole_text(text: str) -> int | Decimal:
    # Python refuses to turn more than 4,300 digits into an int (a ValueError, read as "not JSON");
    # such a number is outside every range anyway, and is refused for it.
    return int(text) if len(text) <= 40 else Decimal(text)


def _loads_value(body: bytes) -> Any:
    try:
        return json.loads(body, parse_constant=_reject_constant, parse_float=_Written)
    except ValueError:  # not JSON, or a JSON integer too long for an int: asked again to tell which
        return json.loads(body, parse_constant=_reject_constant, parse_float=_Written, parse_int=_whole_text)


def _start(body: bytes, mask: Mask = _as_is) -> str:
    """The start of a body for a message: its first _MASKED characters masked, then cut to _SHOWN (a
    cut before masking could leave the first characters of a key; the margin holds a key's longest
    escaped form, so a key that starts within what is shown is masked whole)."""
    text = mask(body[: 4 * _MASKED].decode("utf-8", errors="replace")[:_MASKED])
    return _cut(text)


def _cut(text: str) -> str:
    """A masked text of the service, quoted, at most _SHOWN characters of it."""
    return repr(text[:_SHOWN] + ("..." if len(text) > _SHOWN else ""))


def metric_value(body: bytes, *, is_count: bool, url: str | None = None, mask: Mask = _as_is) -> Parsed:
    """The metric value in a 200 body, read exactly.

    A count must be a whole number an int64 holds; a JSON integer, or decimal text (``"123"``), is
    read exactly; a number written with a fraction or exponent (``5.0``, ``1e3``) is taken only up
    to 2**53, above which a float may have rounded it. An amount is the float nearest the number,
    given as a number or as decimal text (``"123.45"``). A ``null`` value is the service saying it has
    no value: Parsed.value None, with its ``reason`` when the body gives one. A body that says the
    request failed (``"success": false``, ``"ok": false``, ``"status": "error"``, an ``error`` or
    ``errors`` field) is an APIError with the service's reason, whatever value it also carries.
    Anything else (NaN, a boolean, text that is not a decimal number, a count out of range) is a
    ResponseFormatError: a number is never guessed."""
    try:
        document = _loads_value(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise ResponseFormatError(f"the answer{_at(url)} is not JSON; it starts {_start(body, mask)}") from None
    found = _find(document, depth=0)
    if found is None:
        raise ResponseFormatError(
            f'the answer{_at(url)} holds no metric value in a known shape (a number, {{"value": x}}, '
            f'{{"data": {{...}}}} or a one-element list); it starts {_start(body, mask)}'
        )
    number, fields, failed = found
    if failed is not None:
        reason, code = failed
        raise APIError(
            200,
            f"the answer says the request failed: {mask(reason or 'no reason given')}",
            code=_shown_code(code, mask),
            url=url,
        )
    reason = None
    if number is None:  # no value: why, when the body says
        reason = next((mask(fields[name]) for name in _REASONS if isinstance(fields.get(name), str)), None)
    return Parsed(
        None if number is None else _number(number, is_count, body, url, mask),
        fields.get("unit"),
        complete_flag(fields, url, mask),
        fields.get("period_start"),
        fields.get("period_end"),
        fields.get(METRIC_NAME),
        fields.get(PROJECT),
        reason,
    )


_Found = tuple[Any, dict[str, Any], tuple[str | None, Any] | None]


def _find(document: Any, depth: int) -> _Found | None:
    """(the value, the fields beside it, (reason, code) when a dict on the way says it failed)."""
    if depth > 3:
        return None
    if document is None or (isinstance(document, _BARE) and not isinstance(document, bool)):
        return document, {}, None  # a bare value: a number, decimal text, or null (no value)
    if isinstance(document, list):
        return _find(document[0], depth + 1) if len(document) == 1 else None
    if isinstance(document, dict):
        failed = _failed(document) if not _FAILURE_FIELDS.isdisjoint(document) else None
        if failed is not None:
            return None, {}, failed
        if "value" in document:
            fields = {k: v for k, v in document.items() if isinstance(v, _WORDS) or k == COMPLETE}
            return document["value"], fields, None
        if "data" in document:
            return _find(document["data"], depth + 1)
    return None


def _failed(document: dict[str, Any]) -> tuple[str | None, Any] | None:
    """(the reason, the code) when ``document`` says the request failed; None when it does not."""
    status = document.get("status")
    error, errors = document.get("error"), document.get("errors")
    says = (
        document.get("success") is False
        or document.get("ok") is False
        or (isinstance(status, str) and status.strip().lower() in _FAILED_STATUS)
        or error not in (None, "", False, [], {})
        or errors not in (None, "", False, [], {})
    )
    if not says:
        return None
    if isinstance(errors, list) and errors and error in (None, "", False):
        error = errors[0]
    code = document.get("code")
    if isinstance(error, dict):
        code = error.get("code", code)
        error = next((error[n] for n in ("message", "detail", "reason", "msg") if isinstance(error.get(n), str)), None)
    reason = error if isinstance(error, str) and error else None
    if reason is None:
        reason = next((document[n] for n in _REASONS if isinstance(document.get(n), str) and document[n]), None)
    return reason, code


def _number(value: Any, is_count: bool, body: bytes, url: str | None, mask: Mask) -> int | float:
    if type(value) is int and COUNT_MIN <= value <= COUNT_MAX:  # the common case: a JSON integer
        return value if is_count else float(value)
    if isinstance(value, _Written):  # a JSON number with a fraction or an exponent
        if not is_count:
            return _amount(value, url)
        return _count(Decimal(value), True, url)
    if isinstance(value, str):
        if not _DECIMAL_TEXT.fullmatch(value):
            raise ResponseFormatError(
                f"the answer{_at(url)} has a value that is neither a number nor decimal text "
                f"({_cut(mask(value))}); it starts {_start(body, mask)}"
            )
        exact: int | Decimal = Decimal(value)
    elif isinstance(value, bool) or not isinstance(value, _NUMBERS):
        raise ResponseFormatError(
            f"the answer{_at(url)} has a value that is not a finite number ({mask(repr(value))}); "
            f"it starts {_start(body, mask)}"
        )
    else:
        exact = Decimal(value) if isinstance(value, float) else value  # a float: its exact value
    if not is_count:
        return _amount(exact, url)
    return _count(exact, False, url)


def _amount(exact: int | Decimal | str, url: str | None) -> float:
    try:
        number = float(exact)  # the float nearest the number (from an int, a Decimal or JSON text alike)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ResponseFormatError(f"the answer{_at(url)} has an amount too large for a float ({_short(exact)})")
    return number


def _count(exact: int | Decimal, written_as_float: bool, url: str | None) -> int:
    if isinstance(exact, Decimal) and (not exact.is_finite() or exact != exact.to_integral_value()):
        raise ResponseFormatError(f"the answer{_at(url)} gives a count that is not a whole number ({_short(exact)})")
    if not COUNT_MIN <= exact <= COUNT_MAX:  # compared before int(): 1e999999 stays a Decimal
        raise ResponseFormatError(
            f"the answer{_at(url)} gives a count ({_short(exact)}) outside what the client holds exactly "
            f"(a whole number from -2**63 to 2**63-1)"
        )
    if written_as_float and not -EXACT_FLOAT <= exact <= EXACT_FLOAT:
        raise ResponseFormatError(
            f"the answer{_at(url)} gives a count above 2**53 written as a float ({_short(exact)}): a float that "
            "large may have been rounded, so the count cannot be held exactly; the service must send it as a "
            "JSON integer or as decimal text"
        )
    return int(exact)


def _short(number: int | float | Decimal | str) -> str:
    text = str(number)
    return text if len(text) <= 40 else f"{text[:20]}...{text[-10:]} ({len(text)} characters)"


def complete_flag(fields: dict[str, Any], url: str | None = None, mask: Mask = _as_is) -> bool | None:
    """The ``complete`` flag of an answer's ``fields``, read exactly: None when the answer has none
    (the client then decides by the period's end), JSON true or false as those. Anything else (the
    text "false", 0, 1, null) is a ResponseFormatError naming the field and what is allowed: a flag
    that cannot be read is never taken for complete, nor silently dropped."""
    if COMPLETE not in fields:
        return None
    flag = fields[COMPLETE]
    if isinstance(flag, bool):
        return flag
    raise ResponseFormatError(
        f"the answer{_at(url)} has a {COMPLETE} flag that is not a JSON boolean ({_cut(mask(_json_text(flag)))}): "
        f"{COMPLETE} must be true or false (JSON booleans, not text or numbers), or left out"
    )


def _json_text(value: Any) -> str:
    """A JSON value as the service wrote it, near enough for a message (a number kept as its text
    is shown unquoted)."""
    return str(value) if isinstance(value, _Written | Decimal) else json.dumps(value, default=str)


def _at(url: str | None) -> str:
    return f" from {url}" if url else ""


# A period's bound as an answer may write it: an ISO date, or an ISO 8601 date-time (RFC 3339's
# space or lower-case t and z allowed) whose day in UTC is the bound's.
_ISO_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)
_ISO_INSTANT = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2})[Tt ]([0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,9})?)?)"
    r"([Zz]|[+-][0-9]{2}:?[0-9]{2})?",
    re.ASCII,
)


def period_day(text: object) -> dt.date | None:
    """The day a ``period_start`` or ``period_end`` names: exactly an ISO date (``2025-06-01``), or an
    ISO 8601 date-time taken for the UTC day it falls on (``2025-06-01T00:00:00Z``; without a zone it
    is UTC). None for anything else (text after the date, another format): such a bound is refused."""
    # The same few days come back in every series of a pull: each text is read once.
    return _period_day(text) if type(text) is str and len(text) <= 40 else _read_day(text)


def _read_day(text: object) -> dt.date | None:
    if isinstance(text, str) and _ISO_DAY.fullmatch(text):
        try:
            return dt.date.fromisoformat(text)
        except ValueError:
            return None
    when = instant(text)
    return when.date() if when is not None else None


_period_day = functools.lru_cache(maxsize=8192)(_read_day)


def instant(text: object) -> dt.datetime | None:
    """An ISO 8601 date-time (see _ISO_INSTANT; UTC without a zone) as a UTC datetime; None for
    anything else."""
    found = _ISO_INSTANT.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        return None
    day, clock, zone = found.groups()
    zone = "+00:00" if zone is None or zone in "Zz" else zone
    try:
        return dt.datetime.fromisoformat(f"{day}T{clock[:15]}{zone}").astimezone(dt.UTC)
    except (ValueError, OverflowError):
        return None


def retry_after_seconds(value: str | None, date: str | None = None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: a number of seconds, or an HTTP-date counted from
    the answer's own ``Date`` (``date``) when it has one, else from ``now`` (the clock, seconds since
    the epoch). None when there is none or it cannot be read; never below 0."""
    if value is None:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        until = _http_date(text)
        if until is None:
            return None
        sent = _http_date(date) if date is not None else None
        base = sent if sent is not None else (time.time() if now is None else now)
        seconds = until - base
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _http_date(text: str) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP-date is always GMT
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


Header = Callable[[str], str | None]


def _no_header(name: str) -> None:
    return None


def api_error(
    status: int,
    body: bytes,
    url: str | None,
    retry_after: str | None = None,
    *,
    header: Header = _no_header,
    mask: Mask = _as_is,
    now: float | None = None,
) -> APIError:
    """The APIError for an error answer, keeping the server's code and message when it gives them.

    ``header`` reads the answer's headers: a redirect's ``Location`` and a 401's ``WWW-Authenticate``
    are reported (masked), and an HTTP-date ``Retry-After`` is counted from its ``Date`` (else from
    ``now``). Every text of the service goes through ``mask``; a code this module lists is kept as it
    is (it is no secret, and the client acts on it)."""
    code = param = None
    message = None
    try:
        document = _loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        document = None
    if isinstance(document, dict):
        error = document.get("error", document)
        if isinstance(error, dict):
            code = error.get("code") if isinstance(error.get("code"), str) else None
            param = error.get("param") if isinstance(error.get("param"), str) else None
            text = error.get("message") or error.get("detail")
            message = mask(text) if isinstance(text, str) else None
        elif isinstance(error, str):
            message = mask(error)
    code = _shown_code(code, mask)
    param = mask(param) if param is not None else None
    if 300 <= status < 400:
        location = header(LOCATION_HEADER)
        where = f" to {_shown_location(location, mask)}" if location else ""
        message = (
            f"the service answered with a redirect ({status}){where}, which is not followed: the API key would "
            "go with the request to another place. If the service has moved, set base_url to its new address"
            + (f" (it said: {message})" if message else "")
        )
    if message is None:
        message = f"HTTP {status}; the answer starts {_start(body, mask)}" if body else f"HTTP {status}"
    challenge = header(AUTHENTICATE_HEADER) if status in (401, 403) else None
    if challenge:
        message = f"{message} (WWW-Authenticate: {mask(challenge)[:_SHOWN]})"
    if status == 429:
        date = header(DATE_HEADER)
        seconds = retry_after_seconds(retry_after if retry_after is not None else header(RETRY_AFTER_HEADER), date, now)
        return RateLimitError(status, message, code=code, url=url, param=param, retry_after=seconds)
    return for_status(status)(status, message, code=code, url=url, param=param)


def _shown_code(code: Any, mask: Mask) -> str | None:
    """An error code for the exception: one this module lists as it is (the client acts on it, and it
    is no secret), any other masked."""
    if not isinstance(code, str) or not code:
        return None
    return code if ErrorCode(code).known else mask(code)


def _shown_location(location: str, mask: Mask) -> str:
    """Where a redirect points, for a message: its query and fragment left out (they may carry a
    token of the service's), each shown as ``?...`` or ``#...``, the rest masked."""
    cut = min((location.find(mark) for mark in "?#" if mark in location), default=len(location))
    left_out = location[cut : cut + 1]  # "?" (a query, perhaps a fragment after it), "#" (a fragment alone) or ""
    return repr(mask(location[:cut])[:_SHOWN] + (left_out + "..." if left_out else ""))


# -- client: what the client reads beyond /metrics, and the headers it sends --------------------------

# Every request carries, besides the key: what it accepts (ACCEPT_HEADER: JSON_TYPE), and who asks;
# an in-process request (the embedded default's) names its host too.
USER_AGENT_HEADER = "user-agent"
HOST_HEADER = "host"

# GET /projects (PROJECTS_PATH), an extension of the reference service: its projects (each an object
# that names itself in its PROJECT field: kinds, regular_pools, coverage, metrics) under the data
# version it names in DATA_VERSION_HEADER, and in the body's DATA_VERSION field.


@dataclass(frozen=True)
class ProjectsAnswer:
    """A ``GET /projects`` answer, read: each project's entry by its name (only the fields the client
    uses: PROJECT_FIELDS), the data version the body names (None when it names none as text), the
    time of the data's last event (a UTC datetime; None when it gives none that can be read), and the
    most periods of a GET /series page when the service advertises it (None: it does not)."""

    projects: dict[str, dict[str, Any]]
    data_version: str | None
    last_event: dt.datetime | None = None
    series_limit: int | None = None


# What the client uses of a project in GET /projects: its kinds and whether it has regular pools
# (whether a metric applies to it), its coverage and its metrics (Client.projects()). Any other field
# is left out where it is read, so it is kept nowhere (a vendor's note that echoes the key, say).
PROJECT_FIELDS = (KINDS, REGULAR_POOLS, COVERAGE, METRICS)


def projects_answer(body: bytes) -> ProjectsAnswer:
    """A ``GET /projects`` 200 body read; a ResponseFormatError for a body of another shape (none of
    the service's text is in its message: the client only logs that it could not read it)."""
    try:
        document = _loads(body)
        projects = {
            entry[PROJECT]: {name: entry[name] for name in PROJECT_FIELDS if name in entry}
            for entry in document[PROJECTS]
        }
        version = document.get(DATA_VERSION)
        last_event = document.get(LAST_EVENT)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as error:
        raise ResponseFormatError(
            f"the {PROJECTS_PATH} answer is not a list of projects ({type(error).__name__})"
        ) from None
    return ProjectsAnswer(
        projects, version if isinstance(version, str) else None, instant(last_event), series_offered(document)
    )


def series_offered(document: Any) -> int | None:
    """The most periods of a GET /series page, when a GET /projects body advertises GET /series at
    SERIES_PATH ({SERIES: {PATH, LIMIT}}, LIMIT a whole number from 1), at most SERIES_LIMIT; None
    when it does not (the client then asks one value per request, as the specification says)."""
    offered = document.get(SERIES) if isinstance(document, dict) else None
    if not isinstance(offered, dict) or offered.get(PATH) != SERIES_PATH:
        return None
    limit = offered.get(LIMIT)
    if type(limit) is not int or limit < 1:
        return None
    return min(limit, SERIES_LIMIT)


@dataclass(frozen=True)
class SeriesPage:
    """A GET /series page, read: each period as a GET /metrics answer about it would be read (its
    value exact, its bounds and ``complete`` flag as written, the page's metric, project and unit),
    how many periods the series has in all, and where the next page starts (None after the last).
    ``errors``: by their place on the page, the periods whose value or flag cannot be read (each
    fails as the /metrics answer giving it would: the rest of the page stands). ``granularity``,
    ``data_version`` (as written, unmasked: compare it, never show it) and ``coverage`` (the first
    and last day of the data) as the page states them, None where it does not."""

    periods: list[Parsed]
    total_periods: int
    next_offset: int | None
    errors: dict[int, ResponseFormatError] = field(default_factory=dict)
    granularity: str | None = None
    data_version: str | None = None
    coverage: tuple[dt.date, dt.date] | None = None


def series_page(
    body: bytes, *, is_count: bool, most: int | None = None, url: str | None = None, mask: Mask = _as_is
) -> SeriesPage:
    """A GET /series 200 body read exactly: every value as :func:`metric_value` reads one (a count a
    whole number an int64 holds, an amount the float nearest it, null: no value, with the period's
    reason when it gives one), every ``complete`` flag as :func:`complete_flag` reads it. A body of
    another shape is a ResponseFormatError saying what is wrong; a number is never guessed. ``most``:
    the most periods asked for (the request's limit): a page listing more, or longer than such a page
    can be (SERIES_PAGE_BYTES, SERIES_PERIOD_BYTES: refused before it is read), is a ResponseFormatError."""
    if most is not None and len(body) > SERIES_PAGE_BYTES + most * SERIES_PERIOD_BYTES:
        raise ResponseFormatError(
            f"the answer{_at(url)} is {len(body):,} bytes, more than a page of the {most:,} periods asked for "
            f"can take; it was not read"
        )
    try:
        document = _loads_value(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise ResponseFormatError(f"the answer{_at(url)} is not JSON; it starts {_start(body, mask)}") from None
    periods = document.get(PERIODS) if isinstance(document, dict) else None
    total, following = (document.get(TOTAL_PERIODS), document.get(NEXT_OFFSET)) if periods is not None else (0, 0)
    if (
        not isinstance(periods, list)
        or not all(isinstance(period, dict) for period in periods)
        or type(total) is not int
        or total < 0
        or not (following is None or (type(following) is int and following > 0))
    ):
        raise ResponseFormatError(
            f"the answer{_at(url)} is not a page of a series ({{{PERIODS!r}: [...], {TOTAL_PERIODS!r}: n, "
            f"{NEXT_OFFSET!r}: n or null}}); it starts {_start(body, mask)}"
        )
    if most is not None and len(periods) > most:
        raise ResponseFormatError(
            f"the answer{_at(url)} lists {len(periods):,} periods, more than the {most:,} asked for (its limit)"
        )
    about = {
        name: document[name]
        for name in (METRIC_NAME, PROJECT, UNIT, GRANULARITY, DATA_VERSION)
        if isinstance(document.get(name), str)
    }
    read, errors = [], {}
    for place, period in enumerate(periods):
        number = period.get(VALUE)
        reason = None
        if number is None:  # no value: why, when the period says
            reason = next((mask(period[name]) for name in _REASONS if isinstance(period.get(name), str)), None)
        value: int | float | None = None
        complete: bool | None = None
        try:
            value = None if number is None else _number(number, is_count, body, url, mask)
            complete = complete_flag(period, url, mask)
        except ResponseFormatError as error:
            errors[place] = error
        start, end = period.get(PERIOD_START), period.get(PERIOD_END)
        read.append(
            Parsed(value, about.get(UNIT), complete, start, end, about.get(METRIC_NAME), about.get(PROJECT), reason)
        )
    coverage = _coverage(document.get(COVERAGE), url, body, mask)
    return SeriesPage(read, total, following, errors, about.get(GRANULARITY), about.get(DATA_VERSION), coverage)


def _coverage(stated: Any, url: str | None, body: bytes, mask: Mask) -> tuple[dt.date, dt.date] | None:
    """A page's coverage ({START, END}, ISO dates), or None where it states none (null, or left out);
    one written otherwise is a ResponseFormatError (what it says of the periods it does not list
    would be guessed)."""
    if stated is None:
        return None
    days = [stated.get(name) for name in (START, END)] if isinstance(stated, dict) else []
    read = [_read_day(day) if isinstance(day, str) and _ISO_DAY.fullmatch(day) else None for day in days]
    if len(read) == 2 and read[0] is not None and read[1] is not None and read[0] <= read[1]:
        return read[0], read[1]
    raise ResponseFormatError(
        f"the answer{_at(url)} has a {COVERAGE} that is not {{{START!r}: first day, {END!r}: last day}} "
        f"(ISO dates); it starts {_start(body, mask)}"
    )


# What an explain page says of its value beside the rows and the page, in EXPLAIN_FIELDS order (the
# attrs of the client's explain), and which of these are the service's own words (free text, or text
# in lists and dicts), which the client masks before it shows them.
EXPLAIN_ABOUT = tuple(
    name for name in EXPLAIN_FIELDS if name not in (*PARAMETERS, *EXPLAIN_PAGE, COLUMNS, ROWS, NEXT_OFFSET)
)
EXPLAIN_WORDS = (AGGREGATION, SOURCE, SELECT, FORMULA)


def explained(page: ExplainPage) -> Parsed:
    """What an explain page says its value is, and what it is about, as the fields of a ``/metrics``
    answer (to be checked against the question as those are)."""
    fields = page.fields
    return Parsed(
        fields[VALUE],
        unit=fields.get(UNIT),
        complete=fields.get(COMPLETE),
        period_start=fields.get(PERIOD_START),
        period_end=fields.get(PERIOD_END),
        metric_name=fields.get(METRIC_NAME),
        project=fields.get(PROJECT),
    )


# A column of another name than EXPLAIN_COLUMN_TYPES' is typed by how it ends, else it is text.
EXPLAIN_COLUMN_ENDINGS = {"block_time": ColumnType.TIME, "_net": ColumnType.AMOUNT}


def explain_column(name: str) -> ColumnType:
    """The type of the explain column ``name`` (see EXPLAIN_COLUMN_TYPES)."""
    if name in EXPLAIN_COLUMN_TYPES:
        return EXPLAIN_COLUMN_TYPES[name]
    return next((kind for end, kind in EXPLAIN_COLUMN_ENDINGS.items() if name.endswith(end)), ColumnType.TEXT)
