"""The OpenAPI 3.1 description of the service, generated from the catalogue.

Written for clients generated from it (``openapi-python-client`` is tested against it): values
the service may add to (metric names, units, error codes) are open strings with examples, never
closed enums, so a client generated from one server reads the answers of another (``--chain-unit
eth``, a newer catalogue); ``metric_name`` admits any string, so ``unknown_metric`` is reachable;
every status the service can answer is listed, and the discovery bodies are typed.
"""

from __future__ import annotations

from typing import Any

from metrics_kit.spec import wire
from metrics_kit.spec.calendar import GRANULARITIES
from metrics_kit.spec.catalogue import Catalogue
from metrics_kit.spec.ids import MAX_PROJECT, PROJECT_PATTERN
from metrics_kit.spec.version import __version__
from metrics_kit.spec.wire import API_KEY_HEADER, ERROR_CODES, ErrorCode

Schema = dict[str, Any]


# The header names as the document writes them (HTTP header names are case-insensitive): each part
# capitalised, the acronyms in capitals (ETag, WWW-Authenticate), RateLimit as its draft writes it.
_ACRONYMS = {wire.ETAG_HEADER: "ETag", "www": "WWW", "ratelimit": "RateLimit"}


def _shown(header: str) -> str:
    return "-".join(_ACRONYMS.get(part, part.capitalize()) for part in header.split("-"))


_VERSION = _shown(wire.DATA_VERSION_HEADER)  # X-Data-Version
# RateLimit-Limit, -Remaining, -Reset, -Policy
_RATE_LIMITED = tuple(
    _shown(name)
    for name in (
        wire.RATELIMIT_LIMIT_HEADER,
        wire.RATELIMIT_REMAINING_HEADER,
        wire.RATELIMIT_RESET_HEADER,
        wire.RATELIMIT_POLICY_HEADER,
    )
)
_ETAG = _shown(wire.ETAG_HEADER)  # ETag
_JSON = wire.JSON_TYPE
_ERROR_WHEN = {
    400: f"A parameter is missing, repeated or malformed (an unknown {wire.METRIC_NAME} gets the closest names), or "
    f"the HTTP parser rejected the request ({ErrorCode.MALFORMED_REQUEST}).",
    401: f"The {API_KEY_HEADER} header is missing or empty ({ErrorCode.MISSING_API_KEY}) or holds an unknown key "
    f"({ErrorCode.INVALID_API_KEY}).",
    404: "Unknown project, a metric that does not apply to the project, a date outside coverage.",
    405: f"A method other than {' or '.join(wire.METHODS)}.",
    406: f"The {_shown(wire.ACCEPT_HEADER)} header rules out {_JSON}.",
    408: "The request line and headers did not arrive in time.",
    409: f"{wire.EXPLAIN_PATH} only: the event files changed after the service built its values.",
    429: f"The per-key rate limit is exceeded; retry after {_shown(wire.RETRY_AFTER_HEADER)} seconds.",
    431: "The request line and headers are larger than the server accepts (64 KiB).",
    500: "The server failed unexpectedly (a bug).",
    501: f"{wire.EXPLAIN_PATH} only: the service serves aggregates without their event data.",
}
# The statuses of the discovery operations: no parameters, so no 404.
_DISCOVERY_ERRORS = (400, 401, 405, 406, 408, 429, 431, 500)


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(schema: Schema) -> Schema:
    return {"anyOf": [schema, {"type": "null"}]}


def _strings(description: str, examples: list[str]) -> Schema:
    return {"type": "array", "items": {"type": "string"}, "description": description, "examples": [examples]}


def _object(properties: dict[str, Schema], description: str) -> Schema:
    return {
        "type": "object",
        "description": description,
        "required": list(properties),
        "properties": properties,
    }


def _schemas(catalogue: Catalogue) -> dict[str, Schema]:
    names = list(catalogue.canonical_names)
    units = sorted({m.unit for m in catalogue})
    kinds = sorted({k for m in catalogue for k in m.kinds})
    coverage = _object(
        {
            wire.START: {"type": "string", "format": "date", "description": "First day with any event."},
            wire.END: {"type": "string", "format": "date", "description": "Last day with any event."},
        },
        "The days the data set covers, inclusive.",
    )
    metric_value = _object(
        {
            wire.METRIC_NAME: {
                "type": "string",
                "description": "Canonical name, even when an alias was asked. Open: other servers and "
                "catalogues name other metrics.",
                "examples": names[:3],
            },
            wire.PROJECT: {"type": "string"},
            wire.GRANULARITY: {"type": "string", "examples": list(GRANULARITIES)},
            wire.DATE: {"type": "string", "format": "date", "description": "The date asked."},
            wire.PERIOD_START: {"type": "string", "format": "date", "description": "First day of the period."},
            wire.PERIOD_END: {"type": "string", "format": "date", "description": "Last day of the period (inclusive)."},
            wire.UNIT: {"type": "string", "description": "Open: the chain unit varies by server.", "examples": units},
            wire.VALUE: {"type": "number", "description": "Integer for counts, float for amounts."},
            wire.COMPLETE: {
                "type": "boolean",
                "description": "Whether the period is complete, as the service decides when it answers: it "
                "starts on or after the first day of coverage and its end (midnight UTC after its last day) is "
                "at or before the data's watermark, the watermark declared with the data set, else the earlier "
                "of the service's clock (less a lag for late exports) and the end of the UTC day of the last "
                "event. False: the value may still change (a period not over, or data not all in yet).",
            },
        },
        "One metric value.",
    )
    error_detail = _object(
        {
            wire.CODE: {
                "type": "string",
                "description": "Stable machine-readable code. Open: a client must accept codes it does not know.",
                "examples": [code for codes in ERROR_CODES.values() for code in codes],
            },
            wire.MESSAGE: {"type": "string", "description": "What was wrong and what is allowed."},
            wire.PARAM: {"type": ["string", "null"], "description": "The parameter at fault, if any."},
        },
        "What went wrong.",
    )
    project = _object(
        {
            wire.PROJECT: {"type": "string", "examples": ["demoswap"]},
            wire.KINDS: _strings("The project's kinds.", kinds[:2]),
            wire.REGULAR_POOLS: {"type": "boolean", "description": "Whether it has regular (non-concentrated) pools."},
            wire.COVERAGE: _nullable(_ref("Coverage")),
            wire.METRICS: _strings("The metrics that apply to it, canonical names.", names[:2]),
        },
        "A project of the data set.",
    )
    projects = _object(
        {
            wire.DATA_VERSION: {"type": "string", "description": f"The data version, as in the {_VERSION} header."},
            wire.PROJECTS: {"type": "array", "items": _ref("Project")},
            wire.COVERAGE: _nullable(_ref("Coverage")),
            wire.LAST_EVENT: {
                "type": ["string", "null"],
                "format": "date-time",
                "description": "The time of the data set's last event, UTC (null without events, or from "
                "aggregates built before it was recorded).",
            },
            wire.SERIES: _object(
                {
                    wire.PATH: {"type": "string", "examples": [wire.SERIES_PATH]},
                    wire.LIMIT: {"type": "integer", "minimum": 1, "description": "The most periods of a page."},
                },
                f"Where the service answers a whole series ({wire.SERIES_PATH}); absent where it does not.",
            ),
        },
        "Every project of the data set.",
    )
    catalogue_metric = _object(
        {
            "name": {"type": "string", "examples": names[:1]},
            "families": _strings("The families it belongs to.", ["dex"]),
            wire.UNIT: {"type": "string", "examples": units},
            wire.AGGREGATION: {"type": "string", "examples": ["distinct_count", "sum"]},
            "description": {"type": "string"},
            "aliases": _strings("Other accepted names.", []),
            wire.KINDS: _strings("The project kinds it applies to.", kinds[:1]),
            "regular_pools_only": {"type": "boolean"},
            "applies_to": {"type": "string", "description": "The same in words."},
            wire.COMPUTED: {"type": "string", "description": "How a period's value follows from the events, in words."},
            wire.SQL: {
                "type": "string",
                "description": "Its definition as one standalone SQL query (DuckDB) over the event tables, "
                "returning (granularity, project, period_start, value) for every project it applies to and "
                "every period of coverage, as this service serves them (docs/metrics.md, Definitions).",
            },
            wire.SPARK_SQL: {
                "type": "string",
                "description": "The same definition in Spark SQL, to run in a Spark session in UTC over the same "
                "tables (docs/metrics.md, Definitions).",
            },
        },
        "One metric of the catalogue.",
    )
    catalogue_body = _object(
        {
            wire.CHAIN_UNIT: {"type": "string", "examples": [catalogue.chain_unit]},
            wire.CATALOGUE_GRANULARITIES: _strings("The granularities.", list(GRANULARITIES)),
            wire.METRICS: {"type": "array", "items": _ref("CatalogueMetric")},
        },
        "The metric catalogue.",
    )
    error = _object({wire.ERROR: _ref("ErrorDetail")}, "The one error shape.")
    explain_page = _object(
        {
            **metric_value["properties"],
            wire.AGGREGATION: {"type": "string", "examples": ["distinct_count", "count", "sum"]},
            wire.SOURCE: {"type": "string", "description": "The event table the rows are from.", "examples": ["fees"]},
            wire.SELECT: {
                "type": "object",
                "additionalProperties": {"type": "array", "items": {"type": "string"}},
                "description": "Column -> the values that pick the metric's rows (besides project and period).",
            },
            wire.FORMULA: {"type": "string", "description": "How the value follows from the rows, in words."},
            wire.VALUE_COLUMN: {
                "type": ["string", "null"],
                "description": "The column summed; null: the value counts rows.",
            },
            wire.COUNTED_COLUMN: {
                "type": ["string", "null"],
                "description": "The boolean column of the rows that enter the value; null: every row.",
            },
            wire.OPENING_BALANCE: {
                "type": ["number", "null"],
                "description": "A balance's value at the end of the previous period (the initial supply "
                "in the first); the value is it plus the rows' sum. Null for other metrics.",
            },
            wire.COLUMNS: _strings("The rows' columns, in order (docs/data-format.md names).", ["block_time"]),
            wire.ROWS: {
                "type": "array",
                "items": {"type": "array", "items": {"type": ["string", "number", "boolean", "null"]}},
                "description": "This page's rows, each a list in the order of columns; times as ISO 8601 UTC.",
            },
            wire.TOTAL_ROWS: {"type": "integer", "minimum": 0, "description": "The value's rows, all pages."},
            wire.OFFSET: {"type": "integer", "minimum": 0, "description": "The first row of this page."},
            wire.LIMIT: {"type": "integer", "minimum": 1, "description": "The most rows of this page."},
            wire.NEXT_OFFSET: {
                "type": ["integer", "null"],
                "description": f"The {wire.OFFSET} of the next page; null after the last.",
            },
        },
        "The event rows behind one value, one page of them.",
    )
    period = _object(
        {name: metric_value["properties"][name] for name in wire.PERIOD_FIELDS},
        f"One period's value, as {wire.METRICS_PATH} answers it for any date inside the period.",
    )
    series_page = _object(
        {
            **{name: metric_value["properties"][name] for name in (wire.METRIC_NAME, wire.PROJECT, wire.GRANULARITY)},
            wire.START: {"type": "string", "format": "date", "description": "The start asked."},
            wire.END: {"type": "string", "format": "date", "description": "The end asked."},
            wire.UNIT: metric_value["properties"][wire.UNIT],
            wire.DATA_VERSION: {"type": "string", "description": f"The data version, as in the {_VERSION} header."},
            wire.COVERAGE: _nullable(_ref("Coverage")),
            wire.PERIODS: {"type": "array", "items": _ref("Period"), "description": "This page's periods, in order."},
            wire.TOTAL_PERIODS: {
                "type": "integer",
                "minimum": 1,
                "description": "The periods of the range that lie in coverage, all pages.",
            },
            wire.OFFSET: {"type": "integer", "minimum": 0, "description": "The first period of this page."},
            wire.LIMIT: {"type": "integer", "minimum": 1, "description": "The most periods of this page."},
            wire.NEXT_OFFSET: {
                "type": ["integer", "null"],
                "description": f"The {wire.OFFSET} of the next page; null after the last.",
            },
        },
        "Every value of one series over a range of periods, one page of them.",
    )
    return {
        "MetricValue": metric_value,
        "Period": period,
        "SeriesPage": series_page,
        "Error": error,
        "ErrorDetail": error_detail,
        "Coverage": coverage,
        "Project": project,
        "Projects": projects,
        "CatalogueMetric": catalogue_metric,
        "Catalogue": catalogue_body,
        "ExplainPage": explain_page,
    }


def _rate_limit_headers() -> dict[str, Schema]:
    """The headers that state a key's rate limit, sent when the service limits keys (and states it)."""
    limit, remaining, reset, policy = _RATE_LIMITED
    described = {
        limit: ("integer", "The requests a key may spend at once (its whole budget; at least 1)."),
        remaining: ("integer", "The requests the key has left now."),
        reset: ("integer", "Whole seconds until the key's whole budget is available again."),
        policy: (
            "string",
            'The limit as a policy: "Q;w=W", Q requests a window of W seconds, never above the key\'s rate '
            '("20;w=1" for 20 a second, "1;w=2" for 0.5).',
        ),
    }
    when = " Sent when the service limits each key's rate (draft-ietf-httpapi-ratelimit-headers-06)."
    return {name: {"description": text + when, "schema": {"type": kind}} for name, (kind, text) in described.items()}


def _headers(*names: str) -> dict[str, Schema]:
    return {name: {"$ref": f"#/components/headers/{name}"} for name in names}


def _codes(status: int, path: str) -> list[ErrorCode]:
    """The codes the operation of ``path`` answers with at ``status``: a bad page only on the paged
    paths, /explain's own only on /explain."""
    left_out = {
        wire.METRICS_PATH: (*wire.PAGED_ONLY, *wire.EXPLAIN_ONLY),
        wire.SERIES_PATH: wire.EXPLAIN_ONLY,
        wire.EXPLAIN_PATH: (),
    }.get(path, ())
    return [code for code in ERROR_CODES[status] if code not in left_out]


def _error_response(status: int, path: str) -> Schema:
    response: Schema = {
        "description": _ERROR_WHEN[status] + " Codes: " + ", ".join(_codes(status, path)) + ".",
        "headers": _headers(_VERSION, *_RATE_LIMITED),
        "content": {_JSON: {"schema": _ref("Error")}},
    }
    if status == 429:
        response["headers"][_shown(wire.RETRY_AFTER_HEADER)] = {
            "schema": {"type": "integer", "minimum": 1},
            "description": "Seconds to wait.",
        }
    if status == 401:
        response["headers"][_shown(wire.AUTHENTICATE_HEADER)] = {
            "schema": {"type": "string"},
            "description": "How to authenticate.",
        }
    if status == 405:
        response["headers"][_shown(wire.ALLOW_HEADER)] = {
            "schema": {"type": "string"},
            "description": f"{', '.join(wire.METHODS)}.",
        }
    return response


def _responses(body: str, description: str, errors: tuple[int, ...], path: str) -> dict[str, Schema]:
    return {
        "200": {
            "description": description,
            "headers": _headers(_VERSION, _ETAG, *_RATE_LIMITED),
            "content": {_JSON: {"schema": _ref(body)}},
        },
        "304": {
            "description": f"{_shown(wire.IF_NONE_MATCH_HEADER)} named the answer's current {_ETAG}: the answer is "
            "unchanged.",
            "headers": _headers(_VERSION, _ETAG, *_RATE_LIMITED),
        },
        **{str(status): _error_response(status, path) for status in errors if _codes(status, path)},
    }


def _page(items: str, limit: str, most: int, most_offset: int) -> list[Schema]:
    """The page parameters of a paged path: at most ``limit`` of its ``items`` (up to ``most``), from
    item ``offset`` (up to ``most_offset``)."""
    return [
        {
            "name": wire.LIMIT,
            "in": "query",
            "required": False,
            "description": f"The most {items} of the page ({limit}).",
            "schema": {"type": "integer", "minimum": 1, "maximum": most},
        },
        {
            "name": wire.OFFSET,
            "in": "query",
            "required": False,
            "description": f"The first of the page's {items}, from 0 (the next_offset of the page before).",
            "schema": {"type": "integer", "minimum": 0, "maximum": most_offset},
        },
    ]


def _explain_operation(parameters: list[Schema]) -> Schema:
    page = _page("rows", f"default {wire.EXPLAIN_LIMIT:,}", wire.EXPLAIN_MAX_LIMIT, wire.EXPLAIN_MAX_OFFSET)
    return {
        "get": {
            "operationId": "explainMetric",
            "summary": "The event rows behind one metric value",
            "description": "Extension of the reference service, not part of the metrics service specification: "
            f"the rows of the event tables that make up the value of {wire.METRICS_PATH} for the same parameters, in a "
            "fixed order, a page at a time, and how the value follows from them. Needs the event data "
            f"(501 {ErrorCode.EXPLAIN_UNAVAILABLE} when the service serves aggregates alone).",
            "x-extension": True,
            "parameters": [*parameters[:4], *page, *parameters[4:]],
            "responses": _responses(
                "ExplainPage", "One page of the value's rows.", tuple(ERROR_CODES), wire.EXPLAIN_PATH
            ),
        }
    }


def _series_operation(parameters: list[Schema]) -> Schema:
    dates = [
        {
            "name": name,
            "in": "query",
            "required": True,
            "description": f"Any UTC date inside the {which} period of the series{also}.",
            "schema": {"type": "string", "format": "date"},
        }
        for name, which, also in (
            (wire.START, "first", ""),
            (wire.END, "last", f", not before {wire.START} (else 400 {ErrorCode.INVALID_DATE})"),
        )
    ]
    page = _page("periods", f"default and most {wire.SERIES_LIMIT:,}", wire.SERIES_LIMIT, wire.SERIES_MAX_OFFSET)
    return {
        "get": {
            "operationId": "getSeries",
            "summary": "Every value of one series over a range of periods",
            "description": "Extension of the reference service, not part of the metrics service specification: "
            f"for each period from the one containing {wire.START} to the one containing {wire.END} that lies in "
            f"coverage, the value {wire.METRICS_PATH} answers for it (the same checks and error codes; 404 "
            f"{ErrorCode.DATE_OUT_OF_COVERAGE} when no period of the range does), a page at a time. A page "
            "counts as one request against the key's rate limit.",
            "x-extension": True,
            "parameters": [*parameters[:3], *dates, *page, *parameters[4:]],
            "responses": _responses(
                "SeriesPage", "One page of the series' periods.", tuple(ERROR_CODES), wire.SERIES_PATH
            ),
        }
    }


def build(catalogue: Catalogue, projects: list[str], coverage: tuple[str, str] | None) -> Schema:
    date_example = coverage[1] if coverage else "2025-01-01"
    if_none_match = {
        "name": _shown(wire.IF_NONE_MATCH_HEADER),
        "in": "header",
        "required": False,
        "description": f"An {_ETAG} from an earlier answer: 304 without a body while the answer's {_ETAG} is the same.",
        "schema": {"type": "string"},
    }
    parameters = [
        {
            "name": wire.METRIC_NAME,
            "in": "query",
            "required": True,
            "description": "A metric of the catalogue (canonical name or alias; "
            f"GET {wire.CATALOGUE_PATH} lists them). Any other name is answered with 400 "
            f"{ErrorCode.UNKNOWN_METRIC} and the closest names.",
            "schema": {"type": "string", "minLength": 1, "examples": list(catalogue.canonical_names[:3])},
        },
        {
            "name": wire.PROJECT,
            "in": "query",
            "required": True,
            "description": "Project id: lowercase, may contain a dot.",
            "schema": {
                "type": "string",
                "pattern": PROJECT_PATTERN,
                "maxLength": MAX_PROJECT,
                **({"examples": projects[:5]} if projects else {}),
            },
        },
        {
            "name": wire.GRANULARITY,
            "in": "query",
            "required": True,
            "schema": {"type": "string", "enum": list(GRANULARITIES)},
        },
        {
            "name": wire.DATE,
            "in": "query",
            "required": True,
            "description": "Any UTC date inside the wanted period: the day itself (1_day), its ISO week "
            "Monday to Sunday (1_week) or its calendar month (1_month).",
            "schema": {"type": "string", "format": "date", "examples": [date_example]},
        },
        if_none_match,
    ]
    discovery_note = (
        "Extension for discovery, not part of the metrics service specification; clients must not require it."
    )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "metrics_kit reference metrics service",
            "version": __version__,
            "description": "Read-only blockchain protocol metrics: one metric for one project at "
            "one granularity for one date. All periods are UTC. Every answer carries the data "
            f"version ({_VERSION}); a 200 also as its {_ETAG}, marked {wire.INCOMPLETE_TAG} for a value whose period "
            "is not complete yet.",
        },
        "security": [{"apiKey": []}],
        "paths": {
            wire.METRICS_PATH: {
                "get": {
                    "operationId": "getMetric",
                    "summary": "One metric value",
                    "parameters": parameters,
                    "responses": _responses(
                        "MetricValue",
                        "The metric value of the period containing date.",
                        tuple(ERROR_CODES),
                        wire.METRICS_PATH,
                    ),
                }
            },
            wire.SERIES_PATH: _series_operation(parameters),
            wire.EXPLAIN_PATH: _explain_operation(parameters),
            wire.PROJECTS_PATH: {
                "get": {
                    "operationId": "listProjects",
                    "summary": "Projects, their kinds and coverage, and the data version",
                    "description": discovery_note,
                    "x-extension": True,
                    "parameters": [if_none_match],
                    "responses": _responses("Projects", "Projects.", _DISCOVERY_ERRORS, wire.PROJECTS_PATH),
                }
            },
            wire.CATALOGUE_PATH: {
                "get": {
                    "operationId": "getCatalogue",
                    "summary": "The metric catalogue",
                    "description": discovery_note,
                    "x-extension": True,
                    "parameters": [if_none_match],
                    "responses": _responses("Catalogue", "Metrics.", _DISCOVERY_ERRORS, wire.CATALOGUE_PATH),
                }
            },
        },
        "components": {
            "securitySchemes": {"apiKey": {"type": "apiKey", "in": "header", "name": API_KEY_HEADER}},
            "headers": {
                _VERSION: {
                    "description": "The version of the data set the answer comes from; it changes when the data "
                    "or what a metric computes changes.",
                    "schema": {"type": "string"},
                },
                **_rate_limit_headers(),
                _ETAG: {
                    "description": f'The data version in quotes, "<{_VERSION}>"; for a value (or an explanation) '
                    f'whose period is not complete yet, "<{_VERSION}>{wire.INCOMPLETE_TAG}". A period turning '
                    f"complete changes the {_ETAG} of its answers, not the {_VERSION}.",
                    "schema": {"type": "string"},
                },
            },
            "schemas": _schemas(catalogue),
        },
    }
