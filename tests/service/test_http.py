"""The HTTP service end to end: a real ``metrics-kit serve`` child process over real DuckDB.

The data set is ``tests/http_data/`` (five small CSV tables, hand made):

* projects: ``tok`` (tokenomics, initial supply 5000), ``yld`` (yield), ``swapper`` (dex with regular
  pools), ``swapper.clmm`` (dex without, a dotted id), ``lend`` (lending), ``solana`` (chain);
* coverage 2024-03-13 (a Wednesday) .. 2024-04-02 (a Tuesday): the ISO week 03-11..03-17 and the
  month of March start before coverage, the week 04-01..04-07 and April end after it, the weeks
  03-18..03-24 and 03-25..03-31 are complete.

Every expected value below is worked out by hand from those rows. Every error is checked for the
one error shape ``{"error": {"code", "message", "param"}}`` with a JSON content type.
"""

from __future__ import annotations

import csv
import http.client
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import pytest
import requests
from support import TEST_KEY, ServerProcess

from metrics_kit.server.metrics import definitions
from metrics_kit.spec.catalogue import default_catalogue

DATA = Path(__file__).parents[1] / "http_data"
COVERAGE = ("2024-03-13", "2024-04-02")
GOOD = {"metric_name": "swap_active_users", "project": "swapper", "granularity": "1_week", "date": "2024-03-20"}
PARAMS = ("metric_name", "project", "granularity", "date")
BODY_KEYS = {"metric_name", "project", "granularity", "date", "period_start", "period_end", "unit", "value", "complete"}


# -- plumbing ---------------------------------------------------------------------------------------------


@dataclass
class Reply:
    status: int
    headers: dict[str, list[str]]  # lower-case name -> every value
    body: bytes

    def header(self, name: str) -> str | None:
        values = self.headers.get(name.lower())
        return values[-1] if values else None

    def json(self):
        return json.loads(self.body)


def _from_requests(response: requests.Response) -> Reply:
    headers: dict[str, list[str]] = {}
    for name, value in response.raw.headers.items():
        headers.setdefault(name.lower(), []).append(value)
    return Reply(response.status_code, headers, response.content)


def get(server: ServerProcess, path: str = "/metrics", params=None, **kwargs) -> Reply:
    return _from_requests(server.get(path, params, **kwargs))


def metric(server: ServerProcess, **params) -> Reply:
    return get(server, params={**GOOD, **params})


def raw(server: ServerProcess, method: str, target: str, headers=(), body: bytes | None = None) -> Reply:
    """Send exactly this request line and these headers (no Accept unless given), as bytes on the wire."""
    host, port = server.base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.putrequest(method, target, skip_accept_encoding=True)
        for name, value in headers:
            conn.putheader(name, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        replied: dict[str, list[str]] = {}
        for name, value in response.getheaders():
            replied.setdefault(name.lower(), []).append(value)
        return Reply(response.status, replied, response.read())
    finally:
        conn.close()


def key_header(key: str = TEST_KEY) -> tuple[str, str]:
    return ("x-api-key", key)


def assert_json(reply: Reply) -> None:
    content_type = reply.header("content-type") or ""
    media_type = content_type.split(";")[0].strip()
    assert media_type == "application/json", (reply.status, content_type, reply.body[:200])


def assert_error(reply: Reply, status: int, code: str | None = None, param: str | None | type = ...) -> dict:
    """The one error shape, with this status (and code and param, when given)."""
    assert reply.status == status, (reply.status, reply.body[:300])
    assert_json(reply)
    body = reply.json()
    assert isinstance(body, dict) and set(body) == {"error"}, body
    error = body["error"]
    assert isinstance(error, dict) and set(error) == {"code", "message", "param"}, body
    assert isinstance(error["code"], str) and re.fullmatch(r"[a-z_]+", error["code"]), body
    assert isinstance(error["message"], str) and error["message"].strip(), body
    assert error["param"] is None or error["param"] in PARAMS, body
    if code is not None:
        assert error["code"] == code, body
    if param is not ...:
        assert error["param"] == param, body
    return error


def assert_value_shape(reply: Reply) -> dict:
    assert reply.status == 200, reply.body[:300]
    assert_json(reply)
    body = reply.json()
    assert set(body) == BODY_KEYS, body
    assert isinstance(body["complete"], bool)
    assert isinstance(body["value"], (int, float)) and not isinstance(body["value"], bool)
    for field in ("date", "period_start", "period_end"):
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", body[field]), body
    assert body["period_start"] <= body["date"] <= body["period_end"], body  # the period containing date
    return body


def output(proc: ServerProcess, settle: float = 0.3) -> str:
    time.sleep(settle)  # let the drain thread catch up with the child's last lines
    return "".join(proc.output)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("http-cache")


@pytest.fixture(scope="module")
def server(cache_dir):
    proc = ServerProcess(DATA, cache_dir=cache_dir)
    try:
        yield proc
    finally:
        proc.stop()


# -- 200 --------------------------------------------------------------------------------------------------


def test_answer_has_exactly_the_documented_fields(server):
    body = assert_value_shape(metric(server))
    assert body == {
        "metric_name": "swap_active_users",
        "project": "swapper",
        "granularity": "1_week",
        "date": "2024-03-20",
        "period_start": "2024-03-18",
        "period_end": "2024-03-24",
        "unit": "count",
        "value": 2,
        "complete": True,
    }


# metric_name, project, granularity, date -> value, period_start, period_end, complete, unit
# ("native" stands for the unit native_token)
EXPECTED_TABLE = """
swap_active_users                      swapper      1_week  2024-03-13 2      2024-03-11 2024-03-17 no  count
swap_active_users                      swapper      1_week  2024-03-24 2      2024-03-18 2024-03-24 yes count
swap_active_users                      swapper      1_month 2024-03-31 4      2024-03-01 2024-03-31 no  count
swap_transaction_count                 swapper      1_month 2024-03-05 6      2024-03-01 2024-03-31 no  count
swap_transaction_count                 swapper      1_day   2024-04-01 1      2024-04-01 2024-04-01 yes count
swap_transaction_count                 swapper      1_day   2024-03-16 0      2024-03-16 2024-03-16 yes count
regular_pool_swap_transaction_count    swapper      1_month 2024-03-13 4      2024-03-01 2024-03-31 no  count
regular_pool_deposit_transaction_count swapper      1_week  2024-03-14 1      2024-03-11 2024-03-17 no  count
double_dip_deposit_transaction_count   swapper      1_day   2024-03-15 1      2024-03-15 2024-03-15 yes count
liquidity_pool_withdraw_active_users   swapper      1_week  2024-03-21 1      2024-03-18 2024-03-24 yes count
swap_transaction_count                 swapper.clmm 1_week  2024-03-22 1      2024-03-18 2024-03-24 yes count
swap_active_users                      swapper.clmm 1_month 2024-03-01 2      2024-03-01 2024-03-31 no  count
staking_active_users                   yld          1_week  2024-03-14 1      2024-03-11 2024-03-17 no  count
staking_active_users                   yld          1_month 2024-03-14 2      2024-03-01 2024-03-31 no  count
farm_withdrawal_transaction_count      yld          1_week  2024-03-27 2      2024-03-25 2024-03-31 yes count
farm_withdraw_active_users             yld          1_week  2024-03-27 2      2024-03-25 2024-03-31 yes count
lending_deposit_active_users           lend         1_day   2024-03-16 1      2024-03-16 2024-03-16 yes count
lending_withdraw_transaction_count     lend         1_week  2024-04-02 1      2024-04-01 2024-04-07 no  count
loan_repayment_active_users            lend         1_month 2024-03-30 1      2024-03-01 2024-03-31 no  count
transaction_fee_revenue_in_usd         swapper      1_day   2024-03-13 1.5    2024-03-13 2024-03-13 yes usd
transaction_fee_revenue_in_usd         swapper      1_day   2024-03-16 0.0    2024-03-16 2024-03-16 yes usd
transaction_fee_revenue_in_usd         swapper      1_week  2024-03-20 2.25   2024-03-18 2024-03-24 yes usd
transaction_fee_revenue_in_usd         yld          1_week  2024-03-20 0.5    2024-03-18 2024-03-24 yes usd
staking_fee_revenue_in_usd             yld          1_month 2024-03-01 4.0    2024-03-01 2024-03-31 no  usd
protocol_revenue_in_usd                lend         1_week  2024-03-25 3.0    2024-03-25 2024-03-31 yes usd
protocol_revenue_in_usd                swapper      1_month 2024-03-20 1.5    2024-03-01 2024-03-31 no  usd
supply_side_revenue_in_usd             swapper      1_month 2024-03-20 2.25   2024-03-01 2024-03-31 no  usd
circulating_supply_in_native_token     tok          1_day   2024-03-13 5100.0 2024-03-13 2024-03-13 yes native
circulating_supply_in_native_token     tok          1_week  2024-03-20 5150.0 2024-03-18 2024-03-24 yes native
circulating_supply_in_native_token     tok          1_week  2024-03-25 5100.0 2024-03-25 2024-03-31 yes native
net_dilution_in_native_token           tok          1_week  2024-03-27 -50.0  2024-03-25 2024-03-31 yes native
token_emission_in_native_token         tok          1_month 2024-03-31 50.0   2024-03-01 2024-03-31 no  native
reward_staking_in_sol                  solana       1_week  2024-03-15 2.5    2024-03-11 2024-03-17 no  sol
reward_negative_rent_in_sol            solana       1_day   2024-03-21 -1.5   2024-03-21 2024-03-21 yes sol
reward_positive_rent_in_sol            solana       1_day   2024-03-21 0.75   2024-03-21 2024-03-21 yes sol
"""
EXPECTED = {
    tuple(row[:4]): (
        int(row[4]) if row[8] == "count" else float(row[4]),
        row[5],
        row[6],
        row[7] == "yes",
        {"native": "native_token"}.get(row[8], row[8]),
    )
    for row in (line.split() for line in EXPECTED_TABLE.strip().splitlines())
}


@pytest.mark.parametrize(("query", "expected"), list(EXPECTED.items()), ids=["/".join(q) for q in EXPECTED])
def test_values(server, query, expected):
    name, project, granularity, date = query
    reply = metric(server, metric_name=name, project=project, granularity=granularity, date=date)
    body = assert_value_shape(reply)
    value, start, end, complete, unit = expected
    assert body == {
        "metric_name": name,
        "project": project,
        "granularity": granularity,
        "date": date,
        "period_start": start,
        "period_end": end,
        "unit": unit,
        "value": value,
        "complete": complete,
    }
    if unit == "count":
        assert type(body["value"]) is int
        assert re.search(rb'"value": -?\d+[,}]', reply.body), reply.body  # a JSON integer, not 2.0
    else:
        assert type(body["value"]) is float


def test_alias_answers_with_the_canonical_name(server):
    body = assert_value_shape(
        metric(
            server,
            metric_name="farm_withdraw_transaction_count",
            project="yld",
            granularity="1_week",
            date="2024-03-27",
        )
    )
    assert body["metric_name"] == "farm_withdrawal_transaction_count"
    assert body["value"] == 2


def test_every_applicable_metric_answers_with_its_unit_and_integer_counts(server):
    catalogue = default_catalogue()
    projects = get(server, "/projects").json()["projects"]
    asked = 0
    for project in projects:
        for name in project["metrics"]:
            reply = metric(
                server, metric_name=name, project=project["project"], granularity="1_month", date="2024-03-20"
            )
            body = assert_value_shape(reply)
            spec = catalogue.get(name)
            assert body["unit"] == spec.unit
            assert body["complete"] is False
            if spec.is_count:
                assert type(body["value"]) is int and body["value"] >= 0, body
                assert re.search(rb'"value": \d+[,}]', reply.body), reply.body
            else:
                assert type(body["value"]) is float, body
            asked += 1
    assert asked >= 43  # every metric at least once (transaction_fee_revenue twice, financials thrice)


@pytest.mark.parametrize(
    ("granularity", "date", "start", "end"),
    [
        ("1_day", "2024-03-13", "2024-03-13", "2024-03-13"),
        ("1_day", "2024-04-02", "2024-04-02", "2024-04-02"),
        ("1_week", "2024-03-11", "2024-03-11", "2024-03-17"),  # the Monday before coverage starts
        ("1_week", "2024-04-07", "2024-04-01", "2024-04-07"),  # the Sunday after it ends
        ("1_month", "2024-03-01", "2024-03-01", "2024-03-31"),
        ("1_month", "2024-04-30", "2024-04-01", "2024-04-30"),
    ],
)
def test_period_overlapping_coverage_answers(server, granularity, date, start, end):
    body = assert_value_shape(metric(server, granularity=granularity, date=date))
    assert (body["period_start"], body["period_end"]) == (start, end)
    assert body["complete"] is (granularity == "1_day")


def test_head_is_get_without_a_body(server):
    full = metric(server)
    head = _from_requests(server.get(params=GOOD, method="HEAD"))
    assert head.status == 200 and head.body == b""
    assert head.header("content-length") == str(len(full.body))
    assert_json(head)


# -- 400 --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("missing", PARAMS)
def test_each_missing_parameter(server, missing):
    params = {k: v for k, v in GOOD.items() if k != missing}
    error = assert_error(get(server, params=params), 400, "missing_parameter", missing)
    assert missing in error["message"]


@pytest.mark.parametrize("empty", PARAMS)
def test_each_empty_parameter_counts_as_missing(server, empty):
    assert_error(metric(server, **{empty: ""}), 400, "missing_parameter", empty)


def test_all_parameters_missing(server):
    error = assert_error(get(server), 400, "missing_parameter", "metric_name")
    for name in PARAMS:
        assert name in error["message"]


@pytest.mark.parametrize("repeated", PARAMS)
def test_each_repeated_parameter(server, repeated):
    pairs = list(GOOD.items()) + [(repeated, GOOD[repeated])]
    error = assert_error(get(server, params=pairs), 400, "duplicate_parameter", repeated)
    assert repeated in error["message"]


def test_repeated_parameter_with_different_values(server):
    pairs = list(GOOD.items()) + [("date", "2024-03-21")]
    assert_error(get(server, params=pairs), 400, "duplicate_parameter", "date")


@pytest.mark.parametrize(
    ("asked", "suggested"),
    [
        ("swap_active_user", "swap_active_users"),
        ("SWAP_ACTIVE_USERS", "swap_active_users"),
        ("farm_withdrawl_transaction_count", "farm_withdrawal_transaction_count"),
        ("reward_staking_in_eth", "reward_staking_in_sol"),
        ("staking_fee_revenue_usd", "staking_fee_revenue_in_usd"),
    ],
)
def test_unknown_metric_suggests_close_names(server, asked, suggested):
    error = assert_error(metric(server, metric_name=asked), 400, "unknown_metric", "metric_name")
    assert suggested in error["message"]
    assert "did you mean" in error["message"]


def test_unknown_metric_without_close_names_points_to_the_catalogue(server):
    error = assert_error(metric(server, metric_name="zzz"), 400, "unknown_metric", "metric_name")
    assert "/catalogue" in error["message"]


@pytest.mark.parametrize("granularity", ["1_year", "1_Day", "daily", "1 day", "1_days", "day", " 1_day"])
def test_bad_granularity(server, granularity):
    error = assert_error(metric(server, granularity=granularity), 400, "invalid_granularity", "granularity")
    assert "1_day" in error["message"] and "1_week" in error["message"] and "1_month" in error["message"]


@pytest.mark.parametrize(
    "date",
    [
        "2024-1-5",
        "2024-02-30",
        "20240105",
        "2024-13-01",
        "2024-03-20T00:00:00",
        "2024/03/20",
        "24-03-20",
        " 2024-03-20",
        "2024-03-20 ",
        "0000-01-01",
        "2023-02-29",
        "yesterday",
        "-2024-03-20",
    ],
)
def test_malformed_date(server, date):
    error = assert_error(metric(server, date=date), 400, "invalid_date", "date")
    assert "YYYY-MM-DD" in error["message"] or "calendar date" in error["message"]


def test_non_ascii_digits_are_not_the_yyyy_mm_dd_form(server):
    error = assert_error(
        metric(server, date="\u0662\u0660\u0662\u0664-\u0660\u0663-\u0661\u0663"), 400, "invalid_date", "date"
    )
    assert "YYYY-MM-DD" in error["message"]


@pytest.mark.parametrize(
    "project",
    [
        "DemoSwap",
        "Swapper",
        "demo swap",
        "swapper ",
        "a..b",
        ".swapper",
        "swapper.",
        "swapper/clmm",
        "swap\u00e9r",
        "x" * 201,
        "swapper..clmm",
        "a.b..c",
    ],
)
def test_malformed_project(server, project):
    error = assert_error(metric(server, project=project), 400, "invalid_project", "project")
    assert "lowercase" in error["message"]


def test_parameters_are_checked_in_the_documented_order(server):
    # metric before granularity before date before project format before existence.
    bad = {"metric_name": "nope", "granularity": "1_year", "date": "2024-1-5", "project": "Bad"}
    assert_error(metric(server, **bad), 400, "unknown_metric", "metric_name")
    assert_error(metric(server, **{**bad, "metric_name": GOOD["metric_name"]}), 400, "invalid_granularity")
    assert_error(metric(server, project="Bad", date="2024-1-5"), 400, "invalid_date", "date")
    assert_error(metric(server, project="nosuch", date="2024-1-5"), 400, "invalid_date", "date")
    assert_error(metric(server, project="Bad", date="1999-01-01"), 400, "invalid_project", "project")


def test_unknown_extra_parameters_are_ignored(server):
    assert_value_shape(get(server, params={**GOOD, "format": "csv", "api_key": "x"}))


# -- 401 (never 403) --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "code"),
    [
        (None, "missing_api_key"),
        ("", "missing_api_key"),
        ("wrong", "invalid_api_key"),
        (TEST_KEY.upper(), "invalid_api_key"),
        (TEST_KEY + "x", "invalid_api_key"),
        (TEST_KEY[:-1], "invalid_api_key"),
    ],
)
@pytest.mark.parametrize("path", ["/metrics", "/projects", "/catalogue"])
def test_unauthenticated(server, path, key, code):
    params = GOOD if path == "/metrics" else None
    reply = get(server, path, params=params, key=key)
    error = assert_error(reply, 401, code, None)
    assert TEST_KEY not in error["message"]
    # 401 (not 403) for a missing and for a wrong key alike, with the challenge RFC 9110 asks for.
    assert reply.header("www-authenticate") == 'ApiKey header="x-api-key"'


def test_empty_key_header_on_the_wire(server):
    reply = raw(server, "GET", "/metrics?" + urlencode(GOOD), [("x-api-key", ""), ("Accept", "*/*")])
    assert_error(reply, 401, "missing_api_key")


def test_authentication_comes_before_parameter_checks(server):
    assert_error(get(server, params={"metric_name": "nope"}, key=None), 401, "missing_api_key")
    assert_error(get(server, params={**GOOD, "project": "nosuch"}, key="wrong"), 401, "invalid_api_key")
    assert_error(get(server, "/metrics", params=None, key=""), 401, "missing_api_key")


# -- 404 --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("project", ["nosuch", "swapper.nope", "clmm", "swap", "tok.clmm", "sol"])
def test_unknown_well_formed_project(server, project):
    error = assert_error(metric(server, project=project), 404, "unknown_project", "project")
    assert project in error["message"] and "/projects" in error["message"]


@pytest.mark.parametrize(
    ("metric_name", "project"),
    [
        ("swap_active_users", "yld"),
        ("swap_active_users", "lend"),
        ("staking_active_users", "swapper"),
        ("circulating_supply_in_native_token", "swapper"),
        ("reward_staking_in_sol", "tok"),
        ("protocol_revenue_in_usd", "tok"),
        ("protocol_revenue_in_usd", "solana"),
        ("transaction_fee_revenue_in_usd", "lend"),
        ("lending_deposit_active_users", "yld"),
        ("farm_withdraw_transaction_count", "swapper"),
    ],
)
def test_metric_not_applicable_to_the_project_kind(server, metric_name, project):
    reply = metric(server, metric_name=metric_name, project=project)
    error = assert_error(reply, 404, "metric_not_applicable", "metric_name")
    assert project in error["message"]


@pytest.mark.parametrize(
    "metric_name",
    [
        "regular_pool_swap_transaction_count",
        "regular_pool_deposit_transaction_count",
        "regular_pool_withdraw_transaction_count",
        "double_dip_deposit_transaction_count",
    ],
)
def test_regular_pool_metrics_only_on_the_dex_with_regular_pools(server, metric_name):
    assert_value_shape(metric(server, metric_name=metric_name, project="swapper"))
    error = assert_error(
        metric(server, metric_name=metric_name, project="swapper.clmm"), 404, "metric_not_applicable", "metric_name"
    )
    assert "regular pools" in error["message"]
    assert_error(metric(server, metric_name=metric_name, project="yld"), 404, "metric_not_applicable")


@pytest.mark.parametrize(
    ("granularity", "date"),
    [
        ("1_day", "2024-03-12"),
        ("1_day", "2024-04-03"),
        ("1_day", "1999-01-01"),
        ("1_day", "9999-12-31"),
        ("1_week", "2024-03-10"),
        ("1_week", "2024-04-08"),
        ("1_week", "0001-01-01"),
        ("1_week", "9999-12-31"),
        ("1_month", "2024-02-29"),
        ("1_month", "2024-05-01"),
        ("1_month", "2023-03-20"),
        ("1_month", "9999-12-31"),
    ],
)
def test_date_wholly_outside_coverage(server, granularity, date):
    reply = metric(server, granularity=granularity, date=date)
    error = assert_error(reply, 404, "date_out_of_coverage", "date")
    assert COVERAGE[0] in error["message"] and COVERAGE[1] in error["message"]


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/metric",
        "/metrics/",
        "/METRICS",
        "/Metrics",
        "/metrics.json",
        "/openapi",
        "/openapi.json/",
        "/projects/swapper",
        "/v1/metrics",
        "//metrics",
    ],
)
def test_unknown_path(server, path):
    for key in ("default", None):
        assert_error(get(server, path, params=GOOD, key=key), 404, "not_found", None)


# -- 405 --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
@pytest.mark.parametrize("path", ["/metrics", "/projects", "/catalogue", "/openapi.json"])
def test_other_methods_are_not_allowed(server, path, method):
    reply = _from_requests(server.get(path, params=GOOD if path == "/metrics" else None, method=method))
    error = assert_error(reply, 405, "method_not_allowed", None)
    assert method in error["message"]
    allow = {m.strip() for m in (reply.header("allow") or "").split(",")}
    assert "GET" in allow and method not in allow


def test_post_with_a_body_is_not_allowed(server):
    headers = [key_header(), ("Accept", "application/json"), ("Content-Type", "application/json")]
    reply = raw(server, "POST", "/metrics", headers, body=json.dumps(GOOD).encode())
    assert_error(reply, 405, "method_not_allowed")
    assert "GET" in reply.header("allow")


# -- 406 --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "accept",
    [
        "text/html",
        "application/json;q=0",
        "application/json; q=0.0",
        "*/*;q=0",
        "application/xml",
        "text/*",
        "text/plain, text/html;q=0.9",
        "application/json;q=0, */*",
        "application/*;q=0",
        # the most specific range (application/json) decides
        "application/json;q=0, application/*",
    ],
)
@pytest.mark.parametrize("path", ["/metrics", "/projects", "/catalogue"])
def test_accept_ruling_out_json(server, path, accept):
    reply = get(server, path, params=GOOD if path == "/metrics" else None, headers={"Accept": accept})
    assert_error(reply, 406, "not_acceptable", None)


@pytest.mark.parametrize(
    "accept",
    [
        "*/*",
        "application/*",
        "application/json",
        "APPLICATION/JSON",
        "application/json; charset=utf-8",
        "text/html, application/json;q=0.1",
        "text/html;q=0.9, */*;q=0.1",
        "application/*;q=0, application/json",
        None,
    ],
)
def test_accept_allowing_json(server, accept):
    headers = [key_header()] + ([("Accept", accept)] if accept is not None else [])
    assert_value_shape(raw(server, "GET", "/metrics?" + urlencode(GOOD), headers))


def test_accept_split_over_two_header_lines(server):
    single = raw(
        server, "GET", "/metrics?" + urlencode(GOOD), [key_header(), ("Accept", "application/json, text/html")]
    )
    assert_value_shape(single)
    split = raw(
        server,
        "GET",
        "/metrics?" + urlencode(GOOD),
        [key_header(), ("Accept", "application/json"), ("Accept", "text/html")],
    )
    assert_value_shape(split)


# -- never a 500 --------------------------------------------------------------------------------------------

NASTY_QUERIES = [
    "",
    "&&&",
    "&&&metric_name=swap_active_users&&&project=swapper&&granularity=1_week&&&date=2024-03-20&&&",
    "metric_name=swap_active_users;project=swapper;granularity=1_week;date=2024-03-20",
    ";;;=;=&=&==",
    "metric_name=%00&project=%00&granularity=%00&date=%00",
    "metric_name=swap_active_users&project=swapper%00&granularity=1_week&date=2024-03-20",
    "metric_name=swap_active_users%00&project=swapper&granularity=1_week&date=2024-03-20",
    "metric_name=%ff%fe&project=%ff&granularity=%c3%28&date=%ed%a0%80",
    "metric_name=%&project=%%&granularity=%zz&date=%2",
    "metric_name=%25%32%35&project=%2e%2e&granularity=%2e&date=%2d",
    "metric_name=swap_active_users&project=swapper&granularity=1_week&date=2024-03-20%00",
    "metric_name=swap_active_users&project=" + "a" * 5000 + "&granularity=1_week&date=2024-03-20",
    "metric_name=" + "swap_active_users" * 500 + "&project=swapper&granularity=1_week&date=2024-03-20",
    "metric_name=swap_active_users&project=swapper&granularity=" + "1_week" * 2000 + "&date=2024-03-20",
    "metric_name=swap_active_users&project=swapper&granularity=1_week&date=" + "2024-03-20" * 2000,
    "x=" + "y" * 60000,
    "metric_name=" + "%E2%82%AC" * 3000 + "&project=swapper&granularity=1_week&date=2024-03-20",
    "metric_name=%F0%9F%92%A5&project=%F0%9F%92%A5.%F0%9F%92%A5&granularity=%E2%80%8B1_week&date=%EF%BC%92024-03-20",
    "metric_name=swap_active_users&project=swapper&granularity=1_week&date=%D9%A2%D9%A0%D9%A2%D9%A4-%D9%A0%D9%A3-%D9%A1%D9%A3",
    "metric_name=swap_active_users&project=swapper&granularity=1_week&date=9999-12-31",
    "metric_name=swap_active_users&project=swapper&granularity=1_month&date=0001-01-01",
    "metric_name=swap_active_users&project=swapper&granularity=1_week&date=+2024-03-20",
    "metric_name=swap_active_users&project=swapper&granularity=1_week&date=2024-03-20&date",
    "metric_name&project&granularity&date",
    "metric_name=swap_active_users&metric_name=swap_active_users&metric_name=swap_active_users",
    "metric_name=__class__&project=__init__&granularity=__dict__&date=2024-03-20",
    "metric_name=%27%3B+DROP+TABLE+transactions%3B--&project=swapper&granularity=1_week&date=2024-03-20",
    "metric_name=swap_active_users&project=swapper'--&granularity=1_week&date=2024-03-20",
    "metric_name={}&project=[]&granularity=null&date=true",
    "metric_name=swap_active_users&project=swapper&granularity=1_week&date=2024-03-20#fragment",
    "%6d%65%74%72%69%63_name=swap_active_users&project=swapper&granularity=1_week&date=2024-03-20",
]
NASTY_PATHS = [
    "/%00",
    "/%ff",
    "/metrics%00",
    "/metrics%2F",
    "/..%2f..%2fetc%2fpasswd",
    "/metrics/../metrics",
    "/%E2%82%AC",
    "/" + "a" * 5000,
    "/metrics;a=b",
    "/*",
]


def test_nasty_inputs_never_break_the_server(server):
    started = time.monotonic()
    targets = ["/metrics?" + q for q in NASTY_QUERIES] + NASTY_PATHS
    seen = set()
    for target in targets:
        for headers in ([key_header(), ("Accept", "application/json")], [("Accept", "application/json")]):
            reply = raw(server, "GET", target, headers)
            assert reply.status < 500, (target[:120], reply.status, reply.body[:300])
            if reply.status == 200:
                assert_value_shape(reply)
            else:
                assert_error(reply, reply.status)
            seen.add(reply.status)
        assert time.monotonic() - started < 60
    assert {200, 400, 401, 404} <= seen
    # Nasty headers, too.
    for headers in (
        [("x-api-key", "k" * 50000), ("Accept", "application/json")],
        [("x-api-key", "\t" + TEST_KEY + " "), ("Accept", "application/json")],
        [key_header(), ("Accept", "application/json;q=abc")],
        [key_header(), ("Accept", "\t application/json")],
        [key_header(), ("Accept", "," * 1000)],
        [key_header(), ("Accept", ";q=1")],
        [key_header(), ("Accept", "application/json;q=1e999")],
        [key_header(), ("Accept", "application/json;q=nan")],
        [key_header(), ("Accept", "application/json;;;q;=;")],
    ):
        reply = raw(server, "GET", "/metrics?" + urlencode(GOOD), headers)
        assert reply.status < 500, (headers, reply.status, reply.body[:300])
        if reply.status == 200:
            assert_value_shape(reply)
        else:
            assert_error(reply, reply.status)
    # Non-ASCII bytes in a header value, sent raw (latin-1 on the wire).
    reply = raw(server, "GET", "/metrics?" + urlencode(GOOD), [("x-api-key", "cl\u00e9"), ("Accept", "*/*")])
    assert_error(reply, 401, "invalid_api_key")
    # And the server still answers normally afterwards.
    assert_value_shape(metric(server))


@pytest.mark.parametrize(
    ("method", "target", "headers"),
    [
        ("GET", "/metrics?x=" + "a" * 70000, []),
        ("GET", "/metrics?" + urlencode({**GOOD, "metric_name": "a" * 100000}), []),
        ("BREW", "/metrics", []),
        ("GET", "/metrics?" + urlencode(GOOD), [("x-api-key", "a\x00b")]),
        ("GET", "/metrics?" + urlencode(GOOD), [("x-api-key", "\x7f" * 10)]),
        ("GET", "/metrics?" + urlencode(GOOD), [("Accept", "\x01;q=\x02, application/json")]),
    ],
    ids=["target-70KiB", "metric_name-100KB", "method-BREW", "key-NUL", "key-DEL", "accept-0x01"],
)
def test_requests_the_parser_rejects_still_get_the_error_shape(server, method, target, headers):
    names = {name.lower() for name, _ in headers}
    defaults = (key_header(), ("Accept", "application/json"))
    headers = headers + [h for h in defaults if h[0].lower() not in names]
    reply = raw(server, method, target, headers)
    assert reply.status < 500
    assert_error(reply, reply.status)


# -- discovery: /openapi.json, /projects, /catalogue ------------------------------------------------------


def test_openapi_is_served_without_a_key(server):
    reply = raw(server, "GET", "/openapi.json")
    assert reply.status == 200
    assert_json(reply)
    document = reply.json()
    assert document["openapi"].startswith("3.")
    # With a key, or a wrong one, it is the same document.
    assert get(server, "/openapi.json").json() == document
    assert get(server, "/openapi.json", key="wrong").json() == document


def test_openapi_describes_metrics(server):
    document = get(server, "/openapi.json", key=None).json()
    catalogue = default_catalogue()
    operation = document["paths"]["/metrics"]["get"]
    params = {p["name"]: p for p in operation["parameters"]}
    assert set(params) == {*PARAMS, "If-None-Match"}
    assert all(params[name]["in"] == "query" and params[name]["required"] is True for name in PARAMS)
    assert params["If-None-Match"]["in"] == "header" and params["If-None-Match"]["required"] is False
    # metric_name is an open string, so that unknown_metric (with its suggestions) is reachable.
    assert "enum" not in params["metric_name"]["schema"]
    assert set(params["metric_name"]["schema"]["examples"]) <= set(catalogue.names)
    assert params["granularity"]["schema"]["enum"] == ["1_day", "1_week", "1_month"]
    assert params["date"]["schema"]["format"] == "date"
    assert re.fullmatch(params["project"]["schema"]["pattern"], "swapper.clmm")
    assert not re.fullmatch(params["project"]["schema"]["pattern"], "DemoSwap")
    expected = {"200", "304", "400", "401", "404", "405", "406", "408", "429", "431", "500"}
    assert set(operation["responses"]) == expected
    for status, response in operation["responses"].items():
        assert "X-Data-Version" in response["headers"], status
        if status == "304":
            assert "content" not in response
            continue
        ref = response["content"]["application/json"]["schema"]["$ref"]
        assert ref == f"#/components/schemas/{'MetricValue' if status == '200' else 'Error'}"
    assert "ETag" in operation["responses"]["200"]["headers"]
    assert "Retry-After" in operation["responses"]["429"]["headers"]
    schemas = document["components"]["schemas"]
    assert set(schemas["MetricValue"]["required"]) == BODY_KEYS
    # Response values the service may add to are open strings with examples, never enums.
    for field in ("metric_name", "unit", "granularity"):
        assert "enum" not in schemas["MetricValue"]["properties"][field], field
        assert schemas["MetricValue"]["properties"][field]["examples"], field
    assert "enum" not in schemas["ErrorDetail"]["properties"]["code"]
    assert "unknown_metric" in schemas["ErrorDetail"]["properties"]["code"]["examples"]
    assert set(schemas["ErrorDetail"]["required"]) == {"code", "message", "param"}
    scheme = document["components"]["securitySchemes"]["apiKey"]
    assert (scheme["type"], scheme["in"], scheme["name"]) == ("apiKey", "header", "x-api-key")
    assert document["security"] == [{"apiKey": []}]
    for extension, body in (("/projects", "Projects"), ("/catalogue", "Catalogue")):
        responses = document["paths"][extension]["get"]["responses"]
        assert document["paths"][extension]["get"]["x-extension"] is True
        assert {"200", "401", "405", "500"} <= set(responses)
        assert responses["200"]["content"]["application/json"]["schema"]["$ref"] == f"#/components/schemas/{body}"
    assert set(schemas["Projects"]["required"]) == {"data_version", "projects", "coverage", "last_event", "series"}
    assert schemas["Catalogue"]["properties"]["metrics"]["items"]["$ref"] == "#/components/schemas/CatalogueMetric"


def _fixture_projects() -> dict[str, dict]:
    with open(DATA / "projects.csv", newline="") as f:
        return {row["project"]: row for row in csv.DictReader(f)}


def test_projects_extension_matches_the_data(server):
    body = get(server, "/projects").json()
    catalogue = default_catalogue()
    rows = _fixture_projects()
    assert body["coverage"] == {"start": COVERAGE[0], "end": COVERAGE[1]}
    assert body["last_event"] == "2024-04-02T06:00:00.000000Z"  # the latest block_time of any table
    assert [p["project"] for p in body["projects"]] == sorted(rows)
    for project in body["projects"]:
        row = rows[project["project"]]
        assert project["kinds"] == sorted(k.strip() for k in row["kinds"].split(","))
        assert project["regular_pools"] is (row["regular_pools"].strip().lower() == "true")
        assert project["coverage"] == body["coverage"]
        expected = [m.name for m in catalogue.applicable(project["kinds"], project["regular_pools"])]
        assert project["metrics"] == expected
    by_name = {p["project"]: p for p in body["projects"]}
    assert "regular_pool_swap_transaction_count" in by_name["swapper"]["metrics"]
    assert "regular_pool_swap_transaction_count" not in by_name["swapper.clmm"]["metrics"]
    stems = ("staking", "mining_fee", "voting", "negative_rent", "positive_rent")
    assert by_name["solana"]["metrics"] == [f"reward_{s}_in_sol" for s in stems]


def test_catalogue_extension_lists_every_metric(server):
    body = get(server, "/catalogue").json()
    catalogue = default_catalogue()
    assert body["chain_unit"] == "sol"
    assert body["granularities"] == ["1_day", "1_week", "1_month"]
    assert [m["name"] for m in body["metrics"]] == [m.name for m in catalogue]
    for entry, spec in zip(body["metrics"], catalogue, strict=True):
        assert entry == {
            "name": spec.name,
            "families": list(spec.families),
            "unit": spec.unit,
            "aggregation": spec.aggregation,
            "description": spec.description,
            "aliases": list(spec.aliases),
            "kinds": sorted(spec.kinds),
            "regular_pools_only": spec.regular_pools_only,
            "applies_to": spec.restriction,
            "computed": definitions.in_words(spec),
            "sql": definitions.definitions(catalogue)[spec.name],
            "spark_sql": definitions.spark_definitions(catalogue)[spec.name],
        }
    assert {a for m in body["metrics"] for a in m["aliases"]} == {"farm_withdraw_transaction_count"}


# -- 429 --------------------------------------------------------------------------------------------------


# The keys of the rate-limited service (serve refuses keys shorter than 12 characters).
K1, K2, K3 = "limited-key-one-0123", "limited-key-two-4567", "limited-key-three-89"


@pytest.fixture(scope="module")
def limited(cache_dir):
    proc = ServerProcess(
        DATA, "--rate-limit", "2", key=K1, cache_dir=cache_dir, env={"METRICS_KIT_API_KEYS": f"{K1}, {K2}"}
    )
    try:
        yield proc
    finally:
        proc.stop()


def test_rate_limit_burst_then_retry_after(limited):
    started = time.monotonic()
    replies = [get(limited, "/metrics", params=GOOD, key=K1) for _ in range(20)]
    elapsed = time.monotonic() - started
    ok = [r for r in replies if r.status == 200]
    limited_replies = [r for r in replies if r.status == 429]
    assert len(ok) + len(limited_replies) == 20, [r.status for r in replies]
    assert 1 <= len(ok) <= 2 + int(elapsed * 2) + 1, (len(ok), elapsed)
    assert limited_replies, "a burst of 20 at 2 requests/s must be limited"
    for reply in ok:
        assert_value_shape(reply)
    waits = []
    for reply in limited_replies:
        assert_error(reply, 429, "rate_limited", None)
        retry_after = reply.header("retry-after")
        assert retry_after is not None and re.fullmatch(r"[1-9]\d*", retry_after), retry_after
        waits.append(int(retry_after))
    assert max(waits) <= 5
    time.sleep(waits[-1])
    assert_value_shape(get(limited, "/metrics", params=GOOD, key=K1))


def test_rate_limit_is_per_key(limited):
    time.sleep(1.5)  # let K1's bucket refill from any earlier test
    k1 = [get(limited, "/projects", key=K1).status for _ in range(10)]
    assert 429 in k1
    # K2 was never used: its whole burst is available right after K1's.
    k2 = get(limited, "/projects", key=K2)
    assert k2.status == 200, k2.body
    # An unknown key is refused as such, not rate limited.
    assert_error(get(limited, "/projects", key=K3), 401, "invalid_api_key")


def test_openapi_is_not_rate_limited(limited):
    for _ in range(10):
        assert raw(limited, "GET", "/openapi.json").status == 200


# -- keys ------------------------------------------------------------------------------------------------


def _key_free(reply: Reply, key: str) -> None:
    assert key.encode() not in reply.body, reply.body[:200]
    for name, values in reply.headers.items():
        for value in values:
            assert key not in name and key not in value, (name, value)


def test_the_key_never_appears_in_responses_or_output(server, limited):
    replies = [
        metric(server),
        metric(server, metric_name="nope"),
        metric(server, project="nosuch"),
        metric(server, date="1999-01-01"),
        metric(server, project="yld"),
        get(server, params={**GOOD, "date": None}),
        get(server, params=list(GOOD.items()) + [("date", "2024-03-20")]),
        get(server, "/projects"),
        get(server, "/catalogue"),
        get(server, "/openapi.json"),
        get(server, "/nowhere"),
        get(server, headers={"Accept": "text/html"}, params=GOOD),
        _from_requests(server.get(params=GOOD, method="POST")),
        _from_requests(server.get(params=GOOD, method="HEAD")),
        get(server, params=GOOD, key=TEST_KEY[:-1]),
        get(server, params=GOOD, key=TEST_KEY + TEST_KEY),
    ]
    assert {r.status for r in replies} >= {200, 400, 401, 404, 405, 406}
    for reply in replies:
        _key_free(reply, TEST_KEY)
    assert TEST_KEY not in output(server)
    burst = [get(limited, "/metrics", params=GOOD, key=K2) for _ in range(6)]
    assert 429 in {r.status for r in burst}
    for reply in burst:
        _key_free(reply, K2)
        assert K1 not in reply.body.decode()
    text = output(limited)
    assert K1 not in text and K2 not in text, text


def _generated_key(text: str) -> str:
    found = re.findall(r"export METRICS_KIT_API_KEY=(\S+)", text)
    assert len(found) == 1, text
    return found[0]


@pytest.mark.parametrize("configured", ["", " , ,"])
def test_without_keys_the_server_generates_one_and_prints_it_once(cache_dir, configured):
    proc = ServerProcess(DATA, cache_dir=cache_dir, env={"METRICS_KIT_API_KEYS": configured})
    try:
        key = _generated_key(output(proc, settle=0.5))
        assert len(key) >= 16
        assert key != TEST_KEY
        body = assert_value_shape(get(proc, params=GOOD, key=key))
        assert body["value"] == 2
        assert get(proc, "/projects", key=key).status == 200
        assert_error(get(proc, params=GOOD, key=TEST_KEY), 401, "invalid_api_key")
        assert_error(get(proc, params=GOOD, key=None), 401, "missing_api_key")
        assert_error(get(proc, params={**GOOD, "project": "Bad"}, key=key), 400, "invalid_project")
        _key_free(get(proc, params={**GOOD, "project": "nosuch"}, key=key), key)
        _key_free(get(proc, "/catalogue", key=key), key)
        assert output(proc).count(key) == 1
    finally:
        proc.stop()


def test_keys_are_comma_separated_and_trimmed(limited):
    time.sleep(1.5)
    for key in (K1, K2):
        assert get(limited, "/catalogue", key=key).status == 200
    for key in (f"{K1}, {K2}", f"{K1},{K2}", f"{K1},", K1[:-1], K1.upper()):
        assert get(limited, "/catalogue", key=key).status == 401


def test_access_log_logs_requests_but_never_the_key(cache_dir):
    proc = ServerProcess(DATA, "--access-log", cache_dir=cache_dir)
    try:
        for _ in range(3):
            assert get(proc, "/projects").status == 200
        assert get(proc, params=GOOD, key="wrong").status == 401
        # A client that puts a key in the URL gets no answer from it, and no line that shows it: the
        # service's own key anywhere, any value of a parameter named like a credential.
        encoded = "".join(f"%{byte:02X}" for byte in TEST_KEY.encode())  # every character percent-encoded
        assert get(proc, params={**GOOD, "api_key": TEST_KEY}, key=None).status == 401
        assert get(proc, f"/metrics?{urlencode(GOOD)}&x-api-key={encoded}").status == 200
        assert get(proc, params={**GOOD, "q": "a" + TEST_KEY}).status == 200
        assert get(proc, params={**GOOD, "token": "their-other-secret-0123"}).status == 200
        assert get(proc, f"/metrics/{TEST_KEY}").status == 404
        text = output(proc, settle=1.0)
        assert TEST_KEY not in text and encoded not in text and "their-other-secret-0123" not in text, text
        assert "GET /projects" in text, text
        assert "api_key=***" in text and "token=***" in text and "GET /metrics/*** " in text, text
    finally:
        proc.stop()
