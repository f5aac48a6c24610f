"""The OpenAPI 3.1 description of the service, generated from the catalogue."""

from __future__ import annotations

from metrics_kit import __version__
from metrics_kit.spec.calendar import GRANULARITIES
from metrics_kit.spec.catalogue import Catalogue
from metrics_kit.spec.ids import MAX_PROJECT, PROJECT_PATTERN

_ERROR_CODES = {
    400: "A parameter is missing, repeated or malformed (including an unknown metric_name).",
    401: "The x-api-key header is missing or holds an unknown key.",
    404: "Unknown project, a metric that does not apply to the project, a date outside coverage, or an unknown path.",
    405: "A method other than GET.",
    406: "The Accept header rules out application/json.",
    429: "The per-key rate limit is exceeded; retry after Retry-After seconds.",
}


def _error_schema() -> dict:
    return {
        "type": "object",
        "required": ["error"],
        "additionalProperties": False,
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message", "param"],
                "additionalProperties": False,
                "properties": {
                    "code": {"type": "string", "description": "Stable machine-readable code."},
                    "message": {"type": "string", "description": "What was wrong and what is allowed."},
                    "param": {"type": ["string", "null"], "description": "The parameter at fault, if any."},
                },
            }
        },
    }


def _error_response(status: int) -> dict:
    response = {
        "description": _ERROR_CODES[status],
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }
    if status == 429:
        response["headers"] = {
            "Retry-After": {"schema": {"type": "integer", "minimum": 1}, "description": "Seconds to wait."}
        }
    return response


def build(catalogue: Catalogue, projects: list[str], coverage: tuple[str, str] | None) -> dict:
    names = list(catalogue.names)
    date_example = coverage[1] if coverage else "2025-01-01"
    parameters = [
        {
            "name": "metric_name",
            "in": "query",
            "required": True,
            "description": "A metric of the catalogue (canonical name or alias).",
            "schema": {"type": "string", "enum": names},
        },
        {
            "name": "project",
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
            "name": "granularity",
            "in": "query",
            "required": True,
            "schema": {"type": "string", "enum": list(GRANULARITIES)},
        },
        {
            "name": "date",
            "in": "query",
            "required": True,
            "description": "Any UTC date inside the wanted period: the day itself (1_day), its ISO week "
            "Monday to Sunday (1_week) or its calendar month (1_month).",
            "schema": {"type": "string", "format": "date", "examples": [date_example]},
        },
    ]
    metric_value = {
        "type": "object",
        "additionalProperties": False,
        "required": [
            "metric_name",
            "project",
            "granularity",
            "date",
            "period_start",
            "period_end",
            "unit",
            "value",
            "complete",
        ],
        "properties": {
            "metric_name": {
                "type": "string",
                "enum": [m.name for m in catalogue],
                "description": "Canonical name, even when an alias was asked.",
            },
            "project": {"type": "string"},
            "granularity": {"type": "string", "enum": list(GRANULARITIES)},
            "date": {"type": "string", "format": "date", "description": "The date asked."},
            "period_start": {"type": "string", "format": "date", "description": "First day of the period."},
            "period_end": {"type": "string", "format": "date", "description": "Last day of the period (inclusive)."},
            "unit": {"type": "string", "enum": sorted({m.unit for m in catalogue})},
            "value": {"type": "number", "description": "Integer for counts, float for amounts."},
            "complete": {
                "type": "boolean",
                "description": "False when the period reaches past either end of the data's "
                "coverage: the value then covers only the days that exist.",
            },
        },
    }
    discovery_note = (
        "Extension for discovery, not part of the metrics service specification; clients must not require it."
    )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "metrics_kit reference metrics service",
            "version": __version__,
            "description": "Read-only blockchain protocol metrics: one metric for one project at "
            "one granularity for one date. All periods are UTC.",
        },
        "security": [{"apiKey": []}],
        "paths": {
            "/metrics": {
                "get": {
                    "operationId": "getMetric",
                    "summary": "One metric value",
                    "parameters": parameters,
                    "responses": {
                        "200": {
                            "description": "The metric value of the period containing date.",
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/MetricValue"}}},
                        },
                        **{str(s): _error_response(s) for s in _ERROR_CODES},
                    },
                }
            },
            "/projects": {
                "get": {
                    "operationId": "listProjects",
                    "summary": "Projects, their kinds and coverage",
                    "description": discovery_note,
                    "x-extension": True,
                    "responses": {
                        "200": {
                            "description": "Projects.",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        },
                        "401": _error_response(401),
                        "406": _error_response(406),
                        "429": _error_response(429),
                    },
                }
            },
            "/catalogue": {
                "get": {
                    "operationId": "getCatalogue",
                    "summary": "The metric catalogue",
                    "description": discovery_note,
                    "x-extension": True,
                    "responses": {
                        "200": {
                            "description": "Metrics.",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        },
                        "401": _error_response(401),
                        "406": _error_response(406),
                        "429": _error_response(429),
                    },
                }
            },
        },
        "components": {
            "securitySchemes": {"apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"}},
            "schemas": {"MetricValue": metric_value, "Error": _error_schema()},
        },
    }
