"""Reading the service's answers.

The specification does not fix the body of a metric value, so several shapes are accepted: the
reference service's object, a bare number, ``{"value": x}``, ``{"data": {...}}`` and a one-element
list of any of these. Anything else is a ResponseFormatError that shows the start of the body.
A number is never guessed: null, NaN, booleans and strings are errors, not NaN.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, NoReturn

from metrics_kit.errors import APIError, RateLimitError, ResponseFormatError, for_status

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
        fields.get("metric_name"),
        fields.get("project"),
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
