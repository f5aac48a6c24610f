"""spec/wire.py is the contract in both directions: what the server writes with it, the client reads
with it; the OpenAPI document says the same; and no other module spells its names again."""

from __future__ import annotations

import ast
import email.utils
import json
import re
from pathlib import Path

import pytest

from metrics_kit.errors import APIError, NotFoundError, RateLimitError, ResponseFormatError
from metrics_kit.server.http import openapi
from metrics_kit.spec import wire
from metrics_kit.spec.catalogue import default_catalogue
from metrics_kit.spec.wire import ERROR_CODES, ErrorCode

PACKAGE = Path(__file__).parents[2] / "metrics_kit"


def test_a_value_body_written_by_the_server_is_read_by_the_client():
    body = wire.value_body("swap_count", "demoswap", "1_week", "2025-01-08", "2025-01-06", "2025-01-12", "", 12, True)
    assert list(json.loads(body)) == list(wire.VALUE_FIELDS)
    parsed = wire.metric_value(body, is_count=True)
    assert (parsed.value, parsed.complete, parsed.metric_name, parsed.project) == (12, True, "swap_count", "demoswap")
    assert (parsed.period_start, parsed.period_end, parsed.unit) == ("2025-01-06", "2025-01-12", "")
    amount = wire.value_body("fees", "demoswap", "1_day", "2025-01-08", "2025-01-08", "2025-01-08", "usd", 0.5, False)
    assert wire.metric_value(amount, is_count=False).value == 0.5


def test_an_error_body_written_by_the_server_is_read_by_the_client():
    body = wire.error_body(ErrorCode.DATE_OUT_OF_COVERAGE, "outside the coverage", wire.DATE)
    assert body == b'{"error": {"code": "date_out_of_coverage", "message": "outside the coverage", "param": "date"}}'
    error = wire.api_error(404, body, "http://x/metrics")
    assert isinstance(error, NotFoundError)
    assert (error.code, error.param, str(error.message)) == ("date_out_of_coverage", "date", "outside the coverage")
    limited = wire.api_error(429, wire.error_body(ErrorCode.RATE_LIMITED, "slow down"), None, "3")
    assert isinstance(limited, RateLimitError) and limited.retry_after == 3.0 and limited.param is None


def test_error_codes_are_open():
    other = ErrorCode("quota_exhausted")  # another implementation's code
    assert other == "quota_exhausted" and str(other) == "quota_exhausted" and not other.known
    assert ErrorCode("not_found") is ErrorCode.NOT_FOUND and ErrorCode.NOT_FOUND.known
    assert json.dumps({"code": ErrorCode.RATE_LIMITED}) == '{"code": "rate_limited"}'
    with pytest.raises(ValueError):
        ErrorCode("")


def test_every_error_code_has_its_status_once():
    listed = [code for codes in ERROR_CODES.values() for code in codes]
    assert sorted(listed) == sorted(ErrorCode) and len(set(listed)) == len(listed)


def test_the_key_rule():
    assert wire.is_api_key("k-1_AbC~!") and not any(
        wire.is_api_key(bad) for bad in ("", "a b", "a\nb", "ключ", "a\tb", None, 12, b"key")
    )


def test_the_openapi_document_says_what_the_wire_module_says():
    document = openapi.build(default_catalogue(), ["demoswap"], ("2025-01-01", "2025-02-01"))
    operation = document["paths"][wire.METRICS_PATH]["get"]
    query = [p["name"] for p in operation["parameters"] if p["in"] == "query"]
    assert tuple(query) == wire.PARAMETERS and all(p["required"] for p in operation["parameters"][:4])
    assert set(document["components"]["schemas"]["MetricValue"]["properties"]) == set(wire.VALUE_FIELDS)
    assert document["components"]["securitySchemes"]["apiKey"]["name"] == wire.API_KEY_HEADER
    assert "X-Data-Version" in document["components"]["headers"]
    paths = (wire.METRICS_PATH, wire.SERIES_PATH, wire.EXPLAIN_PATH)
    responses = {path: document["paths"][path]["get"]["responses"] for path in paths}
    # /explain answers with every code; /series with all but /explain's own; /metrics with neither a bad
    # page nor /explain's own; every status listed names exactly the codes its path answers with.
    left_out = {
        wire.METRICS_PATH: (*wire.PAGED_ONLY, *wire.EXPLAIN_ONLY),
        wire.SERIES_PATH: wire.EXPLAIN_ONLY,
        wire.EXPLAIN_PATH: (),
    }
    for path, excluded in left_out.items():
        for status, codes in ERROR_CODES.items():
            answered = [code for code in codes if code not in excluded]
            assert (str(status) in responses[path]) == bool(answered), (path, status)
            if answered:
                described = responses[path][str(status)]["description"]
                assert all((code in described) == (code in answered) for code in codes), (path, status)
    assert wire.ErrorCode.INVALID_PAGE in wire.PAGED_ONLY and wire.ErrorCode.EVENTS_CHANGED in wire.EXPLAIN_ONLY
    operation = document["paths"][wire.SERIES_PATH]["get"]
    query = [p["name"] for p in operation["parameters"] if p["in"] == "query"]
    assert tuple(query) == (*wire.SERIES_PARAMETERS, *wire.SERIES_PAGE) and operation["x-extension"]
    schemas = document["components"]["schemas"]
    assert set(schemas["Period"]["properties"]) == set(wire.PERIOD_FIELDS)
    assert wire.PERIODS in schemas["SeriesPage"]["required"] and wire.SERIES in schemas["Projects"]["required"]
    for header in ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "RateLimit-Policy"):
        assert header in document["components"]["headers"]
        assert header in responses[wire.SERIES_PATH]["200"]["headers"]
        assert header in responses[wire.METRICS_PATH]["429"]["headers"]
    operation = document["paths"][wire.EXPLAIN_PATH]["get"]
    query = [p["name"] for p in operation["parameters"] if p["in"] == "query"]
    assert tuple(query) == (*wire.PARAMETERS, *wire.EXPLAIN_PAGE) and operation["x-extension"]
    page = document["components"]["schemas"]["ExplainPage"]
    assert set(page["properties"]) == set(wire.EXPLAIN_FIELDS) == set(page["required"])


def _literals(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
            text = node.value.decode("latin-1") if isinstance(node.value, bytes) else node.value
            found.append((node.lineno, text))
    return found


def test_no_module_spells_the_contract_again():
    """Header names and error codes are spelt only in spec/wire.py (as a whole string: a message may
    mention one, through the constant)."""
    spelt = {wire.API_KEY_HEADER, wire.DATA_VERSION_HEADER, *(code.value for code in ErrorCode)}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "spec" / "wire.py":
            continue
        for line, text in _literals(ast.parse(path.read_text())):
            if text.lower() in spelt:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {text!r}")
    assert not found, "spelt again outside spec/wire.py:\n" + "\n".join(found)


# -- what the client reads from a service: exactly, or a clear error ----------------------------------------


@pytest.mark.parametrize(
    ("body", "is_count", "expected"),
    [
        (b'{"value": "123.45"}', False, 123.45),  # decimal text, as crypto vendors send amounts
        (b'"0.1"', False, 0.1),  # the float nearest the decimal
        (b'{"value": "1e-3"}', False, 0.001),
        (b'{"value": "-2.5"}', False, -2.5),
        (b'{"value": "42"}', True, 42),
        (b'{"value": "9007199254740993"}', True, 9007199254740993),  # above 2**53, exact
        (b'{"value": "9223372036854775807"}', True, 2**63 - 1),
        (b'{"value": "-9223372036854775808"}', True, -(2**63)),
        (b'{"value": "1.5e3"}', True, 1500),
        (b'{"value": 9007199254740993}', True, 9007199254740993),  # a JSON integer: exact
        (b'{"value": 9223372036854775807}', True, 2**63 - 1),
        (b'{"value": 9007199254740992.0}', True, 2**53),  # a float up to 2**53 holds a count exactly
        (b'{"value": 12345678901234567890}', False, 12345678901234567890.0),
    ],
)
def test_numbers_are_read_exactly(body, is_count, expected):
    value = wire.metric_value(body, is_count=is_count).value
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize(
    ("body", "is_count", "said"),
    [
        (b'{"value": 9223372036854775808}', True, "outside what the client holds exactly"),
        (b'{"value": -9223372036854775809}', True, "outside what the client holds exactly"),
        (b'{"value": "99999999999999999999999"}', True, "outside what the client holds exactly"),
        (b'{"value": ' + b"9" * 5000 + b"}", True, "outside what the client holds exactly"),
        (b'{"value": "1e999999999"}', True, "outside what the client holds exactly"),
        (b'{"value": 9007199254740993.0}', True, "above 2**53 written as a float"),
        (b'{"value": 1e17}', True, "above 2**53 written as a float"),
        (b'{"value": "1.5"}', True, "not a whole number"),
        (b'{"value": 1e999}', False, "too large for a float"),
        (b'{"value": "1e400"}', False, "too large for a float"),
        (b'{"value": ' + b"9" * 5000 + b"}", False, "too large for a float"),
        (b'{"value": "12,5"}', False, "neither a number nor decimal text"),
        (b'{"value": "1_000"}', False, "neither a number nor decimal text"),
        (b'{"value": "Infinity"}', False, "neither a number nor decimal text"),
        (b'{"value": ""}', False, "neither a number nor decimal text"),
        (b'{"value": true}', False, "not a finite number"),
    ],
)
def test_a_number_the_client_cannot_hold_exactly_is_refused_clearly(body, is_count, said):
    with pytest.raises(ResponseFormatError, match=re.escape(said)) as caught:
        wire.metric_value(body, is_count=is_count, url="http://x/metrics")
    assert len(str(caught.value)) < 400  # a 5,000-digit number is not repeated whole


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"value": null}', None),
        (b"null", None),
        (b"[null]", None),
        (b'{"data": {"value": null, "reason": "no trades that day"}}', "no trades that day"),
        (b'{"value": null, "message": "not indexed yet"}', "not indexed yet"),
    ],
)
def test_a_null_value_is_a_missing_value_with_its_reason(body, reason):
    parsed = wire.metric_value(body, is_count=True)
    assert parsed.value is None and parsed.reason == reason


@pytest.mark.parametrize(
    ("body", "said", "code"),
    [
        (b'{"success": false, "value": 0, "error": "upstream timeout"}', "upstream timeout", None),
        (b'{"ok": false, "value": 5, "message": "stale"}', "stale", None),
        (b'{"status": "error", "data": {"value": 1}, "reason": "maintenance"}', "maintenance", None),
        (b'{"value": 0, "error": {"code": "quota", "message": "over quota"}}', "over quota", "quota"),
        (b'{"data": {"value": 0}, "errors": [{"message": "resolver failed"}]}', "resolver failed", None),
        (b'{"success": false, "value": 0}', "no reason given", None),
    ],
)
def test_an_answer_that_says_it_failed_is_an_error_never_a_value(body, said, code):
    with pytest.raises(APIError) as caught:
        wire.metric_value(body, is_count=True, url="http://x/metrics")
    assert caught.value.status == 200 and said in str(caught.value) and "failed" in str(caught.value)
    assert caught.value.code == code


def test_a_value_beside_an_empty_error_is_a_value():
    assert wire.metric_value(b'{"value": 5, "error": null, "errors": [], "success": true}', is_count=True).value == 5


def test_retry_after_in_both_forms():
    assert wire.retry_after_seconds("7") == 7.0
    date, later = "Wed, 21 Oct 2015 07:28:00 GMT", "Wed, 21 Oct 2015 07:29:30 GMT"
    assert wire.retry_after_seconds(later, date=date) == 90.0  # counted from the answer's own Date
    clock = email.utils.parsedate_to_datetime(date).timestamp()
    assert wire.retry_after_seconds(later, now=clock + 30) == 60.0  # no Date: from the clock
    assert wire.retry_after_seconds(date, now=clock + 30) == 0.0  # already past
    assert wire.retry_after_seconds("soon") is None and wire.retry_after_seconds(None) is None
    limited = wire.api_error(429, b"", None, later, header={"date": date, "retry-after": later}.get, now=clock + 1000)
    assert isinstance(limited, RateLimitError) and limited.retry_after == 90.0


def test_a_redirect_says_it_is_not_followed_and_where_it_pointed():
    error = wire.api_error(
        301,
        b"",
        "http://x/metrics",
        header={"location": "https://moved.example/v2/metrics?token=abc#x"}.get,
        mask=lambda text: text.replace("v2", "***"),
    )
    text = str(error)
    assert "redirect (301) to 'https://moved.example/***/metrics?...'" in text and "not followed" in text
    assert "abc" not in text and "set base_url" in text


@pytest.mark.parametrize(
    ("location", "shown"),
    [
        ("../v2/metrics#part", "'../v2/metrics#...'"),  # was '../v2/metrics?...', as if it had a query
        ("../v2/metrics?sig=abc#part", "'../v2/metrics?...'"),
        ("../v2/metrics", "'../v2/metrics'"),
    ],
)
def test_a_redirect_shows_what_it_left_out_of_where_it_pointed(location, shown):
    error = wire.api_error(308, b"", "http://x/metrics", header={"location": location}.get)
    assert f"redirect (308) to {shown}" in str(error) and "part" not in str(error)
