"""spec/wire.py is the contract in both directions: what the server writes with it, the client reads
with it; the OpenAPI document says the same; and no other module spells its names again."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from metrics_kit.errors import NotFoundError, RateLimitError
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
    metrics, explain = (document["paths"][path]["get"]["responses"] for path in (wire.METRICS_PATH, wire.EXPLAIN_PATH))
    for status, codes in ERROR_CODES.items():
        # /explain answers with every code; /metrics with all but /explain's own (and not at 409, 501).
        assert all(code in explain[str(status)]["description"] for code in codes)
        for_metrics = [code for code in codes if code not in wire.EXPLAIN_ONLY]
        assert (str(status) in metrics) == bool(for_metrics), status
        if for_metrics:
            described = metrics[str(status)]["description"]
            assert all((code in described) == (code in for_metrics) for code in codes), status
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
