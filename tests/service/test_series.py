"""GET /series against GET /metrics on the real server: every value of the golden data set, for every
metric, project and granularity, is the value /metrics answers for its period (the same fields, the
same JSON number, the same completeness and data version), and the errors are /metrics' errors."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import pytest
from support import TEST_KEY, ServerProcess

from metrics_kit.spec import wire
from metrics_kit.spec.calendar import GRANULARITIES
from metrics_kit.spec.catalogue import default_catalogue

DATA = Path(__file__).parents[1] / "golden" / "data"
# Wider than the golden coverage (2024-12-28 .. 2025-02-01) on both sides.
WIDE = ("2024-12-01", "2025-03-31")
ONE_DAY = dt.timedelta(days=1)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with ServerProcess(DATA, cache_dir=tmp_path_factory.mktemp("cache")) as proc:
        yield proc


def _series(server, metric, project, granularity, start=WIDE[0], end=WIDE[1], **page):
    params = {"metric_name": metric, "project": project, "granularity": granularity, "start": start, "end": end}
    return server.get(wire.SERIES_PATH, {**params, **page})


def _days(first: str, last: str):
    day, end = dt.date.fromisoformat(first), dt.date.fromisoformat(last)
    while day <= end:
        yield day.isoformat()
        day += ONE_DAY


def test_every_golden_value_from_series_is_the_value_metrics_answers(server):
    projects = [p[wire.PROJECT] for p in server.get(wire.PROJECTS_PATH).json()[wire.PROJECTS]]
    compared = applicable = 0
    for metric in default_catalogue():
        for project in projects:
            for granularity in GRANULARITIES:
                reply = _series(server, metric.name, project, granularity)
                probe = server.metric(metric.name, project, granularity, "2025-01-15")
                if probe.status_code != 200:  # not applicable: /series says what /metrics says
                    assert reply.status_code == probe.status_code, reply.text
                    assert reply.json() == probe.json()
                    continue
                applicable += 1
                assert reply.status_code == 200, reply.text
                body = reply.json()
                assert reply.headers[wire.DATA_VERSION_HEADER] == probe.headers[wire.DATA_VERSION_HEADER]
                assert body[wire.DATA_VERSION] == reply.headers[wire.DATA_VERSION_HEADER]
                assert body[wire.NEXT_OFFSET] is None and body[wire.TOTAL_PERIODS] == len(body[wire.PERIODS])
                assert body[wire.UNIT] == metric.unit and body[wire.METRIC_NAME] == metric.name
                listed = {period[wire.PERIOD_START]: period for period in body[wire.PERIODS]}
                assert list(listed) == sorted(listed)
                # Every day of the range: /metrics answers it exactly when /series lists its period.
                answered = {}
                for day in _days(*WIDE):
                    one = server.metric(metric.name, project, granularity, day)
                    if one.status_code == 404:
                        assert one.json()[wire.ERROR][wire.CODE] == wire.ErrorCode.DATE_OUT_OF_COVERAGE
                        continue
                    assert one.status_code == 200, one.text
                    value = one.json()
                    answered[value[wire.PERIOD_START]] = value
                assert list(answered) == list(listed), (metric.name, project, granularity)
                for start, value in answered.items():
                    period = listed[start]
                    assert {name: value[name] for name in wire.PERIOD_FIELDS} == period
                    assert type(value[wire.VALUE]) is type(period[wire.VALUE])  # 3 and 3.0 are not the same answer
                    compared += 1
    assert applicable > 100 and compared > 2_000, (applicable, compared)


def test_pages_make_up_the_whole_series(server):
    whole = _series(server, "swap_transaction_count", "swapx", "1_day").json()
    periods, offset, pages = [], 0, 0
    while offset is not None and pages < 100:
        page = _series(server, "swap_transaction_count", "swapx", "1_day", limit=7, offset=offset).json()
        assert page[wire.LIMIT] == 7 and page[wire.OFFSET] == offset and len(page[wire.PERIODS]) <= 7
        periods += page[wire.PERIODS]
        offset, pages = page[wire.NEXT_OFFSET], pages + 1
    assert periods == whole[wire.PERIODS] and pages == -(-whole[wire.TOTAL_PERIODS] // 7)
    past = _series(server, "swap_transaction_count", "swapx", "1_day", offset=whole[wire.TOTAL_PERIODS] + 5).json()
    assert past[wire.PERIODS] == [] and past[wire.NEXT_OFFSET] is None


def test_a_range_partly_outside_coverage_lists_the_periods_inside_and_says_the_coverage(server):
    body = _series(server, "swap_transaction_count", "swapx", "1_week", "2024-11-01", "2025-01-01").json()
    assert [p[wire.PERIOD_START] for p in body[wire.PERIODS]] == ["2024-12-23", "2024-12-30"]
    assert body[wire.COVERAGE] == {wire.START: "2024-12-28", wire.END: "2025-02-01"}
    assert [p[wire.COMPLETE] for p in body[wire.PERIODS]] == [False, True]
    assert (body[wire.START], body[wire.END]) == ("2024-11-01", "2025-01-01")  # as asked


@pytest.mark.parametrize(
    ("params", "status", "code", "param"),
    [
        ({"start": None}, 400, wire.ErrorCode.MISSING_PARAMETER, "start"),
        ({"start": "2025-1-01"}, 400, wire.ErrorCode.INVALID_DATE, "start"),
        ({"end": "2025-02-30"}, 400, wire.ErrorCode.INVALID_DATE, "end"),
        ({"start": "2025-02-01", "end": "2025-01-01"}, 400, wire.ErrorCode.INVALID_DATE, "end"),
        ({"granularity": "1_year"}, 400, wire.ErrorCode.INVALID_GRANULARITY, "granularity"),
        ({"metric_name": "swap_cnt"}, 400, wire.ErrorCode.UNKNOWN_METRIC, "metric_name"),
        ({"project": "Demo Swap"}, 400, wire.ErrorCode.INVALID_PROJECT, "project"),
        ({"project": "nosuchproject"}, 404, wire.ErrorCode.UNKNOWN_PROJECT, "project"),
        ({"project": "gov"}, 404, wire.ErrorCode.METRIC_NOT_APPLICABLE, "metric_name"),
        ({"start": "2023-01-01", "end": "2023-12-31"}, 404, wire.ErrorCode.DATE_OUT_OF_COVERAGE, "start"),
        ({"limit": "0"}, 400, wire.ErrorCode.INVALID_PAGE, "limit"),
        ({"limit": str(wire.SERIES_LIMIT + 1)}, 400, wire.ErrorCode.INVALID_PAGE, "limit"),
        ({"offset": "-1"}, 400, wire.ErrorCode.INVALID_PAGE, "offset"),
        # Formats first, then existence: a range or a page written wrong is said before an unknown project.
        (
            {"start": "2025-02-01", "end": "2025-01-01", "project": "nosuchproject"},
            400,
            wire.ErrorCode.INVALID_DATE,
            "end",
        ),
        ({"limit": "0", "project": "nosuchproject"}, 400, wire.ErrorCode.INVALID_PAGE, "limit"),
    ],
)
def test_a_bad_series_query_gets_the_error_metrics_gives(server, params, status, code, param):
    query = {"metric_name": "swap_transaction_count", "project": "swapx", "granularity": "1_day", "start": WIDE[0]}
    query |= {"end": WIDE[1], **params}
    reply = server.get(wire.SERIES_PATH, {k: v for k, v in query.items() if v is not None})
    assert reply.status_code == status, reply.text
    error = reply.json()[wire.ERROR]
    assert (error[wire.CODE], error[wire.PARAM]) == (code, param)
    assert "Traceback" not in error[wire.MESSAGE] and len(error[wire.MESSAGE]) < 400
    if code == wire.ErrorCode.METRIC_NOT_APPLICABLE:  # word for word what /metrics says
        assert error == server.metric("swap_transaction_count", "gov", "1_day", "2025-01-15").json()[wire.ERROR]


def test_a_repeated_parameter_and_an_alias(server):
    url = f"{server.base_url}{wire.SERIES_PATH}?metric_name=swap_count&project=demoswap&granularity=1_day"
    reply = server.session.get(
        url + "&start=2025-01-01&start=2025-01-02&end=2025-01-05", headers={"x-api-key": TEST_KEY}
    )
    assert reply.status_code == 400 and reply.json()[wire.ERROR][wire.CODE] == wire.ErrorCode.DUPLICATE_PARAMETER
    alias = next(m for m in default_catalogue() if m.aliases)
    reply = _series(server, alias.aliases[0], "farm", "1_day")
    assert reply.status_code == 200, reply.text
    assert (
        reply.json()[wire.METRIC_NAME]
        == alias.name
        == _series(server, alias.name, "farm", "1_day").json()[wire.METRIC_NAME]
    )
    assert reply.json()[wire.PERIODS] == _series(server, alias.name, "farm", "1_day").json()[wire.PERIODS]


def test_a_series_is_tagged_incomplete_while_any_period_on_the_page_is(server):
    done = _series(server, "swap_transaction_count", "swapx", "1_month", "2025-01-01", "2025-01-31")
    open_ = _series(server, "swap_transaction_count", "swapx", "1_month", "2025-01-01", "2025-02-01")
    version = done.headers[wire.DATA_VERSION_HEADER]
    assert done.headers[wire.ETAG_HEADER] == f'"{version}"'
    assert open_.headers[wire.ETAG_HEADER] == f'"{version}{wire.INCOMPLETE_TAG}"'
    again = _series(server, "swap_transaction_count", "swapx", "1_month", "2025-01-01", "2025-01-31")
    assert again.headers[wire.ETAG_HEADER] == done.headers[wire.ETAG_HEADER]
    january = {"metric_name": "swap_transaction_count", "project": "swapx", "granularity": "1_month"}
    january |= {"start": "2025-01-01", "end": "2025-01-31"}
    cached = server.get(wire.SERIES_PATH, january, headers={"If-None-Match": done.headers[wire.ETAG_HEADER]})
    assert cached.status_code == 304 and cached.content == b""


def test_projects_advertises_series_and_the_key_is_required(server):
    body = server.get(wire.PROJECTS_PATH).json()
    assert body[wire.SERIES] == {wire.PATH: wire.SERIES_PATH, wire.LIMIT: wire.SERIES_LIMIT}
    reply = server.get(wire.SERIES_PATH, {"metric_name": "swap_transaction_count"}, key=None)
    assert reply.status_code == 401 and reply.json()[wire.ERROR][wire.CODE] == wire.ErrorCode.MISSING_API_KEY


# -- the key's rate limit, stated --------------------------------------------------------------------

LIMITED_KEY = "series-limited-key-0123"


def test_answers_state_the_rate_limit_and_a_page_costs_one_request(tmp_path):
    with ServerProcess(DATA, "--rate-limit", "3", key=LIMITED_KEY, cache_dir=tmp_path) as limited:
        replies = [_series(limited, "swap_transaction_count", "swapx", "1_day") for _ in range(6)]
        stated = [r for r in replies if r.status_code == 200]
        refused = [r for r in replies if r.status_code == 429]
        assert stated and refused, [r.status_code for r in replies]
        for reply in replies:
            assert reply.headers[wire.RATELIMIT_LIMIT_HEADER] == "3"
            assert reply.headers[wire.RATELIMIT_POLICY_HEADER] == "3;w=1"
            assert 0 <= int(reply.headers[wire.RATELIMIT_REMAINING_HEADER]) <= 2
            assert 0 <= int(reply.headers[wire.RATELIMIT_RESET_HEADER]) <= 1
        remaining = [int(r.headers[wire.RATELIMIT_REMAINING_HEADER]) for r in stated]
        assert remaining == sorted(remaining, reverse=True)  # each page spent one request
        assert refused[0].headers[wire.RATELIMIT_REMAINING_HEADER] == "0"
        assert int(refused[0].headers[wire.RETRY_AFTER_HEADER]) >= 1


def test_the_rate_limit_headers_can_be_left_out(tmp_path):
    args = ("--rate-limit", "3", "--no-rate-limit-headers")
    with ServerProcess(DATA, *args, key=LIMITED_KEY, cache_dir=tmp_path) as quiet:
        replies = [quiet.get(wire.PROJECTS_PATH) for _ in range(6)]
        assert {r.status_code for r in replies} == {200, 429}
        assert not any(name.lower().startswith("ratelimit") for r in replies for name in r.headers)
        assert all(wire.RETRY_AFTER_HEADER in r.headers for r in replies if r.status_code == 429)


def test_latency_delays_every_answer_series_and_projects_too(tmp_path):
    with ServerProcess(DATA, "--latency-ms", "300", cache_dir=tmp_path) as far:
        for ask in (
            lambda: far.get(wire.PROJECTS_PATH),
            lambda: _series(far, "swap_transaction_count", "swapx", "1_day"),
        ):
            began = time.monotonic()
            assert ask().status_code == 200
            assert time.monotonic() - began >= 0.3  # at least the delay asked for (a lower bound)
