"""The service: turns the query parameters of ``GET /metrics`` into an answer or a QueryError.

It knows nothing of HTTP beyond status codes; the server module is a thin shell around it.
Parameters are checked in the order a person would fix them: missing or repeated, then metric,
granularity, date and project format (400), then existence (404).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable

from metrics_kit.errors import ValidationError
from metrics_kit.server.build import Aggregates, catalogue_key
from metrics_kit.spec import ids, wire
from metrics_kit.spec.catalogue import Catalogue
from metrics_kit.spec.wire import ErrorCode

PARAMETERS = wire.PARAMETERS
# The 400 code of each parameter's format check (spec/ids.py raises ValidationError naming it).
_INVALID = {
    wire.METRIC_NAME: ErrorCode.UNKNOWN_METRIC,
    wire.GRANULARITY: ErrorCode.INVALID_GRANULARITY,
    wire.DATE: ErrorCode.INVALID_DATE,
    wire.PROJECT: ErrorCode.INVALID_PROJECT,
}


class QueryError(Exception):
    """An error answer: its status, code (:class:`~metrics_kit.spec.wire.ErrorCode`), message and
    the parameter it is about."""

    def __init__(self, status: int, code: ErrorCode, message: str, param: str | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.param = param

    def body(self) -> bytes:
        return wire.error_body(self.code, self.message, self.param)


def data_version(fingerprint: str, catalogue: Catalogue) -> str:
    """Names the values a service answers with: it changes when a data file is added, removed,
    rewritten or touched (the aggregates' fingerprint), or when what a metric computes changes
    (the catalogue key, which also covers the engine version and the chain unit)."""
    return hashlib.sha256(f"{fingerprint}/{catalogue_key(catalogue)}".encode()).hexdigest()[:20]


class MetricService:
    def __init__(self, aggregates: Aggregates, catalogue: Catalogue):
        self.aggregates = aggregates
        self.catalogue = catalogue
        self.coverage = aggregates.coverage
        self.data_version = data_version(aggregates.meta["fingerprint"], catalogue)

    def answer(self, pairs: Iterable[tuple[str, str]]) -> bytes:
        """The JSON body for one ``/metrics`` query, given its (name, value) pairs."""
        params: dict[str, str] = {}
        for name, value in pairs:
            if name in PARAMETERS:
                if name in params:
                    raise QueryError(
                        400,
                        ErrorCode.DUPLICATE_PARAMETER,
                        f"parameter {name!r} is given more than once; give it once",
                        name,
                    )
                params[name] = value
        missing = [p for p in PARAMETERS if not params.get(p)]
        if missing:
            raise QueryError(
                400,
                ErrorCode.MISSING_PARAMETER,
                f"missing required parameter{'s' if len(missing) > 1 else ''} "
                f"{', '.join(missing)}; /metrics needs {', '.join(PARAMETERS)}",
                missing[0],
            )
        name, project = params[wire.METRIC_NAME], params[wire.PROJECT]
        granularity, date_text = params[wire.GRANULARITY], params[wire.DATE]

        metric = self.catalogue.get(name)
        try:
            if metric is None:
                raise ids.unknown_metric(name, self.catalogue.canonical_names, "GET /catalogue")
            ids.check_granularity(granularity)
            day = ids.parse_date(date_text)
            ids.check_project(project)
        except ValidationError as error:
            raise QueryError(400, _INVALID[str(error.argument)], str(error), error.argument) from None

        info = self.aggregates.projects.get(project)
        if info is None:
            raise QueryError(
                404,
                ErrorCode.UNKNOWN_PROJECT,
                f"unknown project {ids.clip(project)}; GET /projects lists the projects",
                wire.PROJECT,
            )
        if not metric.applies_to(info["kinds"], info["regular_pools"]):
            raise QueryError(
                404,
                ErrorCode.METRIC_NOT_APPLICABLE,
                f"{metric.name} applies to {metric.restriction}; {project} is of kind "
                f"{', '.join(info['kinds'])}" + (" with regular pools" if info["regular_pools"] else ""),
                wire.METRIC_NAME,
            )
        found = self.aggregates.find(metric.name, project, granularity, day)
        if found is None:
            raise QueryError(404, ErrorCode.DATE_OUT_OF_COVERAGE, self._coverage_message(day, granularity), wire.DATE)
        value, start, end, complete = found
        # Every string here has passed a pattern of JSON-safe characters or comes from the catalogue.
        return wire.value_body(metric.name, project, granularity, date_text, start, end, metric.unit, value, complete)

    def _coverage_message(self, day: dt.date, granularity: str) -> str:
        if self.coverage is None:
            return "this data set has no events, so no date is covered"
        first, last = self.coverage
        return (
            f"the {granularity} period containing {day.isoformat()} lies outside the data's "
            f"coverage, {first.isoformat()} to {last.isoformat()}"
        )
