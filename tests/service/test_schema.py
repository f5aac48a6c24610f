"""Schemathesis against the live ``/openapi.json`` of a real server.

Every operation the document describes is exercised with generated requests, valid ones and
(schemathesis 4.x's negative mode) invalid ones: malformed dates, out-of-enum metric names and
granularities, projects breaking the id pattern, missing and extra parameters. Each response must

* never be a 5xx;
* carry a status code the document lists for the operation;
* be ``application/json`` and conform to the documented body schema (``MetricValue`` or ``Error``),
  and carry the documented headers;
* accept schema-valid requests, except that a generated metric name may be unknown (400
  ``unknown_metric``): the document admits any name on purpose.

The run is bounded: at most ``MAX_EXAMPLES`` fuzzed examples per operation, no deadline, no
Hypothesis ``explain`` phase, and a fixed derandomised seed so a failure replays.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import hypothesis
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase
from support import ServerProcess

DATA = Path(__file__).parents[1] / "http_data"
MAX_EXAMPLES = 60
SEEN: list[tuple[str, str | None, int]] = []  # (operation, generation mode, status) of every call
OPERATIONS = {"GET /metrics", "GET /projects", "GET /catalogue", "GET /explain"}
FUZZING = "test_api_conforms_to_its_openapi_document"
# Where a child pytest writes SEEN when its module ends (not a METRICS_KIT_ name: conftest.py clears those).
SEEN_FILE = "TEST_SCHEMA_SEEN_FILE"


@pytest.fixture(scope="module", autouse=True)
def _seen_to_file():
    yield
    if os.environ.get(SEEN_FILE):
        Path(os.environ[SEEN_FILE]).write_text(json.dumps(SEEN))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc = ServerProcess(DATA, cache_dir=tmp_path_factory.mktemp("schema-cache"))
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def api_schema(server):
    schema = schemathesis.openapi.from_url(server.base_url + "/openapi.json", timeout=30)
    schema.config.update(base_url=server.base_url)
    # Fuzz for real: positive and negative generation; the examples, coverage and fuzzing phases.
    schema.config.generation.update(modes=list(schemathesis.GenerationMode), max_examples=MAX_EXAMPLES)
    schema.config.phases.update(phases=["examples", "coverage", "fuzzing"])
    return schema


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.fixture(autouse=True)
def _schemathesis_pytest9_compat(request):
    """schemathesis 4.32's lazy loader reads and writes ``item._nodeid``, which pytest 9 no longer
    has (node ids live in ``item._id``); give it a plain attribute so it runs (ids stay pytest's)."""
    if not hasattr(request.node, "_nodeid"):
        request.node._nodeid = request.node.nodeid
    yield


def _validate_error_shape(response) -> None:
    """Every non-200 is the one error shape (also asserted by the schema, spelt out here)."""
    if response.status_code == 200:
        return
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "param"}, body
    assert isinstance(body["error"]["code"], str) and body["error"]["code"]
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]


def positive_data_is_accepted_but_unknown_metrics(ctx, response, case):
    """schemathesis's positive_data_acceptance, less two rejections by design: metric_name is any
    string in the document (so that clients generated from it can send a name they do not know, and
    read the 400 unknown_metric with its suggestions), so a generated name can be unknown; and a
    /series end before its start, a relation between two parameters the document cannot state (a
    format, so said before an unknown project)."""
    if case.meta is None or not case.meta.generation.mode.is_positive or response.status_code != 400:
        return None
    error = json.loads(response.content)["error"]
    reversed_range = (error["code"], error["param"]) == ("invalid_date", "end") and "is before start" in error[
        "message"
    ]
    assert error["code"] == "unknown_metric" or reversed_range, (
        f"a schema-valid request was rejected: {response.content[:300]!r}"
    )
    return None


@schema.parametrize()
@hypothesis.settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_openapi_document(case, server):
    response = case.call_and_validate(
        headers={"x-api-key": server.key},
        timeout=30,
        excluded_checks=[schemathesis.checks.positive_data_acceptance],
        additional_checks=[positive_data_is_accepted_but_unknown_metrics],
    )
    SEEN.append((case.operation.label, case.meta.generation.mode.value if case.meta else None, response.status_code))
    assert response.status_code < 500, response.text
    if response.status_code == 304:  # If-None-Match matched (such as "*"): no body, so no content type
        assert response.content == b""
        return
    content_type = response.headers["content-type"]  # schemathesis keeps every value of a header
    assert [value.split(";")[0].strip() for value in content_type] == ["application/json"]
    _validate_error_shape(response)


def test_openapi_document_is_served_without_a_key(server):
    response = requests.get(server.base_url + "/openapi.json", timeout=30)
    assert response.status_code == 200
    document = json.loads(response.content)
    assert document["openapi"].startswith("3.")
    assert set(document["paths"]) == {"/metrics", "/series", "/projects", "/catalogue", "/explain"}


def test_fuzzing_reached_valid_and_invalid_inputs(tmp_path):
    """The fuzzing really exercised both sides: answered queries and rejected ones. After the run
    above, of what it saw; run without it (alone, or after a part of it), it runs it first, whole,
    in a child pytest."""
    seen = SEEN if OPERATIONS <= {label for label, _, _ in SEEN} else _fuzzed_in_a_child(tmp_path / "seen.json")
    metrics = [(mode, status) for label, mode, status in seen if label == "GET /metrics"]
    print(sorted(set(metrics)))
    assert {"positive", "negative"} <= {mode for mode, _ in metrics}
    statuses = {status for _, status in metrics}
    assert {200, 400, 404} <= statuses, statuses
    assert all(status < 500 for _, _, status in seen)
    assert OPERATIONS <= {label for label, _, _ in seen}


def _fuzzed_in_a_child(path: Path) -> list[tuple[str, str | None, int]]:
    """SEEN of test_api_conforms_to_its_openapi_document run in a child pytest, as in the suite."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"{__file__}::{FUZZING}"],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=Path(__file__).parents[2],
        env={**os.environ, SEEN_FILE: str(path)},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return [tuple(call) for call in json.loads(path.read_text())]
