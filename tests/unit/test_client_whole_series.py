"""The client's whole-series path (``GET /series``) against small services (MockTransport): used only
where ``/projects`` advertises it, paged, every period checked and read as a ``/metrics`` answer,
a change of data version between pages fetched again, what it cannot answer left to ``/metrics``,
and the point limit raised for it."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pytest
from client_fakes import FakeClock

from metrics_kit import (
    AuthenticationError,
    Client,
    ConfigurationError,
    FetchError,
    ResponseFormatError,
    ValidationError,
)
from metrics_kit.client.transports import Answers, MockTransport, Request, Response

DAYS = [dt.date(2025, 1, 1) + dt.timedelta(days=i) for i in range(10)]  # the days the data covers
METRIC, PROJECT = "swap_transaction_count", "swapx"


class SeriesService:
    """Daily counts 10**18 + i for DAYS, served by /metrics and (when ``advertised``) /series in
    pages of ``limit``; ``versions`` names the data version of each answer in turn (the last stays)."""

    def __init__(self, *, advertised: bool = True, limit: int = 4, versions: tuple[str, ...] = ("v1",)):
        self.advertised, self.limit, self.versions = advertised, limit, list(versions)
        self.series_status: int | None = None  # an error status for every /series request
        self.unlisted: set[str] = set()  # days /series leaves out
        self.unit = "count"  # the unit both paths answer with
        self.coverage = False  # whether a page states the data's coverage (DAYS)
        self.odd: Callable[[dict], object] | None = None  # makes a page odd (changes the body it is given)
        self.pages = 0  # /series requests answered

    def version(self) -> str:
        return self.versions.pop(0) if len(self.versions) > 1 else self.versions[0]

    def __call__(self, request: Request) -> Response:
        if request.path == "/projects":
            body = {"data_version": "v1", "projects": [{"project": PROJECT, "kinds": ["dex"], "regular_pools": True}]}
            if self.advertised:
                body["series"] = {"path": "/series", "limit": self.limit}
            return Response(200, json=body)
        if request.path == "/metrics":
            day = dt.date.fromisoformat(request.params["date"])
            if day not in DAYS:
                return Response(404, json={"error": {"code": "date_out_of_coverage", "message": "outside"}})
            value = {"period_start": day.isoformat(), "period_end": day.isoformat(), "unit": self.unit}
            value.update(value=10**18 + DAYS.index(day), complete=True)
            return Response(200, json=value, headers={"x-data-version": self.version()})
        assert request.path == "/series"
        self.pages += 1
        assert self.pages <= 50, "the client kept asking for pages"
        if self.series_status is not None:
            code = {401: "invalid_api_key", 404: "date_out_of_coverage"}[self.series_status]
            return Response(self.series_status, json={"error": {"code": code, "message": "refused"}})
        first, last = (dt.date.fromisoformat(request.params[k]) for k in ("start", "end"))
        listed = [d for d in DAYS if first <= d <= last and d.isoformat() not in self.unlisted]
        offset, limit = int(request.params["offset"]), int(request.params["limit"])
        page = listed[offset : offset + limit]
        body = {
            "metric_name": METRIC,
            "project": PROJECT,
            "unit": self.unit,
            "periods": [
                {
                    "period_start": d.isoformat(),
                    "period_end": d.isoformat(),
                    "value": 10**18 + DAYS.index(d),
                    "complete": True,
                }
                for d in page
            ],
            "total_periods": len(listed),
            "next_offset": offset + len(page) if offset + len(page) < len(listed) else None,
        }
        if self.coverage:
            body["coverage"] = {"start": DAYS[0].isoformat(), "end": DAYS[-1].isoformat()}
        headers = {"x-data-version": self.version()}
        if self.odd is not None:
            made = self.odd(body)
            if isinstance(made, Response):
                return made
        return Response(200, json=body, headers=headers)


def client(service: SeriesService, **settings) -> tuple[Client, MockTransport]:
    transport = MockTransport(service)
    return Client(transport=transport, cache=False, clock=FakeClock(), **settings), transport


def paths(transport: MockTransport) -> list[str]:
    return [r.path for r in transport.requests]


def test_a_whole_series_is_asked_in_pages_and_read_exactly():
    made, transport = client(SeriesService(limit=4))
    series = made.series(METRIC, PROJECT, DAYS[0], DAYS[-1])
    assert series.tolist() == [10**18 + i for i in range(10)]  # exact: above 2**53
    assert paths(transport) == ["/projects", "/series", "/series", "/series"]
    assert [r.params["offset"] for r in transport.requests[1:]] == ["0", "4", "8"]


def test_a_service_that_does_not_advertise_it_is_asked_one_value_per_request():
    made, transport = client(SeriesService(advertised=False))
    made.series(METRIC, PROJECT, DAYS[0], DAYS[-1])
    assert paths(transport) == ["/projects"] + ["/metrics"] * 10
    made, transport = client(SeriesService(), whole_series=False)
    made.series(METRIC, PROJECT, DAYS[0], DAYS[-1])
    assert "/series" not in paths(transport)


def test_points_the_series_does_not_list_are_asked_one_by_one_and_fail_as_metrics_fails_them():
    service = SeriesService()
    service.unlisted = {DAYS[3].isoformat()}
    made, transport = client(service)
    start = DAYS[0] - dt.timedelta(days=1)  # outside coverage
    with pytest.warns(UserWarning, match="1 of 11 points failed"):
        series = made.series(METRIC, PROJECT, start, DAYS[-1], errors="coerce")
    assert series.iloc[4] == 10**18 + 3
    asked_one_by_one = [r.params["date"] for r in transport.requests if r.path == "/metrics"]
    assert asked_one_by_one == [start.isoformat(), DAYS[3].isoformat()]
    assert "date_out_of_coverage" in series.attrs["failed"][0]["error"]


def test_an_error_about_the_question_goes_per_value_and_one_about_the_key_stands_for_each_point():
    service = SeriesService()
    service.series_status = 404
    made, transport = client(service)
    assert made.series(METRIC, PROJECT, DAYS[0], DAYS[2]).tolist() == [10**18, 10**18 + 1, 10**18 + 2]
    assert paths(transport).count("/metrics") == 3
    service.series_status = 401
    made, transport = client(service)
    with pytest.raises(FetchError) as raised:
        made.series(METRIC, PROJECT, DAYS[0], DAYS[2])
    assert len(raised.value.failures) == 3
    assert all(isinstance(e, AuthenticationError) for e in raised.value.failures.values())
    assert "/metrics" not in paths(transport)


def test_a_change_of_data_version_between_pages_fetches_the_older_values_again():
    service = SeriesService(limit=4, versions=("v1", "v1", "v2"))  # the third page is of v2
    made, transport = client(service)
    series = made.series(METRIC, PROJECT, DAYS[0], DAYS[-1])
    assert series.attrs["data_version"] == "v2"
    assert series.tolist() == [10**18 + i for i in range(10)]
    # The eight values of v1 asked again, as a whole series (two pages of four).
    assert paths(transport).count("/series") == 3 + 2


def test_a_series_capable_service_may_be_asked_for_more_points_than_the_per_value_limit():
    service = SeriesService()
    service.series_status = 401  # fails fast: what is tested is that the call is not refused
    made, _ = client(service)
    start, end = "1800-01-01", "2099-12-31"  # 109,572 days: past MAX_POINTS, within MAX_SERIES_POINTS
    with pytest.raises(FetchError):
        made.series(METRIC, PROJECT, start, end)
    made, transport = client(SeriesService(advertised=False))
    with pytest.raises(ValidationError, match=r"at most 100,000 \(a service that offers whole series"):
        made.series(METRIC, PROJECT, start, end)
    assert "/metrics" not in paths(transport)
    with pytest.raises(ValidationError, match="1,000,000"):
        client(SeriesService())[0].series(METRIC, PROJECT, "0001-01-01", "9999-12-31")


def test_every_period_of_a_page_is_checked_against_the_question_as_a_metrics_answer_is():
    failures = {}
    for whole in (True, False):
        service = SeriesService()
        service.unit = "usd"
        made, _ = client(service, whole_series=whole)
        with pytest.raises(FetchError) as raised:
            made.series(METRIC, PROJECT, DAYS[0], DAYS[2])
        failures[whole] = [str(e).split(" is not about what was asked: ")[1] for e in raised.value.failures.values()]
    assert failures[True] == failures[False] == ["unit 'usd', the metric is in 'count'"] * 3


def value(day: dt.date) -> int:
    return 10**18 + DAYS.index(day)


def failed_errors(series) -> list[str]:
    return [f["error"] for f in series.attrs.get("failed", [])]


def test_a_page_token_that_never_ends_is_bounded_by_the_periods_asked():
    # Each page repeats the first period and moves next_offset on by one, saying there are 10**9:
    # the client paged on for hours, trusting total_periods.
    def endless(body: dict) -> None:
        first = DAYS[0].isoformat()
        body["periods"] = [{"period_start": first, "period_end": first, "value": value(DAYS[0]), "complete": True}]
        body["next_offset"] = (body["next_offset"] or 10) - 3  # the offset asked, plus one

    for total, pages in ((10**9, 1), (10, 2)):  # a total past the range at once; else the repeat
        service = SeriesService(limit=4)

        def odd(body: dict, total: int = total) -> None:
            endless(body)
            body["total_periods"] = total

        service.odd = odd
        made, transport = client(service)
        with pytest.raises(FetchError) as raised:
            made.series(METRIC, PROJECT, DAYS[0], DAYS[-1])
        assert paths(transport).count("/series") == pages
        said = (
            "says the series has 1,000,000,000 periods" if total > 10 else "lists the period starting 2025-01-01 again"
        )
        assert all(isinstance(e, ResponseFormatError) and said in str(e) for e in raised.value.failures.values())


def test_a_page_may_not_hold_more_periods_than_asked_and_asks_no_more_than_the_range_has():
    made, transport = client(SeriesService(limit=10_000))
    made.series(METRIC, PROJECT, DAYS[0], DAYS[4])
    assert transport.requests[-1].params["limit"] == "5"  # the five days of the range, not 10,000

    def oversized(body: dict) -> None:  # the periods asked, and many others
        extra = [
            {"period_start": f"{1000 + i}-01-01", "period_end": f"{1000 + i}-01-01", "value": i} for i in range(500)
        ]
        body["periods"] = body["periods"] + extra

    service = SeriesService(limit=10_000)
    service.odd = oversized
    made, transport = client(service)
    with pytest.raises(FetchError, match="lists 505 periods, more than the 5 asked for"):
        made.series(METRIC, PROJECT, DAYS[0], DAYS[4])

    def huge(body: dict) -> Response:  # longer than a page of 5 periods can be: refused unread
        return Response(200, body=b'{"periods": [' + b" " * 200_000 + b"]}")

    service.odd = huge
    with pytest.raises(FetchError, match="more than a page of the 5 periods asked for can take"):
        client(service)[0].series(METRIC, PROJECT, DAYS[0], DAYS[4])


def test_a_period_listed_twice_is_a_contradiction_not_its_first_value():
    def twice(body: dict) -> None:  # the first period twice, the first copy wrong (within the limit asked)
        body["periods"] = [{**body["periods"][0], "value": 1}] + body["periods"][:4]

    service = SeriesService(limit=20)
    service.odd = twice
    made, _ = client(service)
    with pytest.warns(UserWarning, match="5 of 5 points failed"):
        series = made.series(METRIC, PROJECT, DAYS[0], DAYS[4], errors="coerce")
    assert series.isna().all()
    assert all("lists the period starting 2025-01-01 again" in e for e in failed_errors(series))


def test_a_bad_period_fails_only_its_point():
    def bad_start(body: dict) -> None:  # which point it answers cannot be told: /metrics is asked for it
        if len(body["periods"]) > 2:
            body["periods"][2]["period_start"] = "2025-01-03 or so"

    service = SeriesService(limit=4)
    service.odd = bad_start
    made, transport = client(service)
    series = made.series(METRIC, PROJECT, DAYS[0], DAYS[-1])
    assert series.tolist() == [value(d) for d in DAYS]  # later pages too
    assert [r.params["date"] for r in transport.requests if r.path == "/metrics"] == ["2025-01-03", "2025-01-07"]

    def bad_value(body: dict) -> None:  # its point fails, as the /metrics answer giving it would
        if len(body["periods"]) > 1:
            body["periods"][1]["value"] = 1.5

    service = SeriesService(limit=4)
    service.odd = bad_value
    made, transport = client(service)
    with pytest.warns(UserWarning, match="3 of 10 points failed"):
        series = made.series(METRIC, PROJECT, DAYS[0], DAYS[-1], errors="coerce")
    assert series.isna().tolist() == [i in (1, 5, 9) for i in range(10)]
    assert all("not a whole number" in e for e in failed_errors(series))
    assert "/metrics" not in paths(transport)


def test_a_page_about_another_granularity_or_naming_two_data_versions_is_refused():
    service = SeriesService()
    service.odd = lambda body: body.update(granularity="1_week")  # says weeks, lists days
    with pytest.raises(FetchError, match="granularity '1_week', asked '1_day'"):
        client(service)[0].series(METRIC, PROJECT, DAYS[0], DAYS[2])
    service.odd = lambda body: body.update(data_version="v2")  # the header says v1
    with pytest.raises(FetchError, match="names one data version in its data_version and another"):
        client(service)[0].series(METRIC, PROJECT, DAYS[0], DAYS[2])

    def body_only(body: dict) -> Response:  # the body names the version, no header: the page's version
        return Response(200, json={**body, "data_version": "v7"})

    service.odd = body_only
    assert client(service)[0].series(METRIC, PROJECT, DAYS[0], DAYS[2]).attrs["data_version"] == "v7"


def test_points_outside_the_stated_coverage_fail_as_metrics_fails_them_without_a_request_each():
    start, end = DAYS[0] - dt.timedelta(days=3), DAYS[-1] + dt.timedelta(days=2)
    failures = {}
    for whole in (True, False):
        service = SeriesService()
        service.coverage = True

        def metrics_404(request: Request, service: SeriesService = service) -> Response:
            if request.path == "/metrics":  # /metrics as the reference service words it
                day = request.params["date"]
                if dt.date.fromisoformat(day) not in DAYS:
                    message = (
                        f"the 1_day period containing {day} lies outside the data's coverage, 2025-01-01 to 2025-01-10"
                    )
                    error = {"code": "date_out_of_coverage", "message": message, "param": "date"}
                    return Response(404, json={"error": error})
            return service(request)

        transport = MockTransport(metrics_404)
        made = Client(transport=transport, cache=False, clock=FakeClock(), whole_series=whole)
        with pytest.warns(UserWarning, match="5 of 15 points failed"):
            series = made.series(METRIC, PROJECT, start, end, errors="coerce")
        failures[whole] = series.attrs["failed"]
        asked = paths(transport).count("/metrics")
        assert asked == (0 if whole else 15)
    assert failures[True] == failures[False]  # the same errors, word for word, the same URLs


def test_points_left_to_ask_one_by_one_are_held_to_the_point_limit():
    service = SeriesService()
    service.series_status = 404  # an error about the question: its points would be asked one by one
    made, transport = client(service)
    with pytest.raises(ValidationError, match=r"109,573 of the 109,573 points .* at most 100,000"):
        made.series(METRIC, PROJECT, "1800-01-01", "2099-12-31")
    assert "/metrics" not in paths(transport)


def test_a_service_with_other_weeks_names_the_same_week_both_ways():
    def monday_weeks(request: Request) -> Response:  # weeks start on Mondays; the client's on Sundays
        if request.path == "/projects":
            body = {"projects": [{"project": PROJECT, "kinds": ["dex"], "regular_pools": True}]}
            return Response(200, json={**body, "series": {"path": "/series", "limit": 100}})
        if request.path == "/metrics":
            day = dt.date.fromisoformat(request.params["date"])
            first = day - dt.timedelta(days=day.weekday())
            return Response(200, json={"period_start": first.isoformat(), "value": 1})
        first = dt.date.fromisoformat(request.params["start"])
        first -= dt.timedelta(days=first.weekday())
        last = dt.date.fromisoformat(request.params["end"])
        starts = [first + dt.timedelta(weeks=i) for i in range((last - first).days // 7 + 1)]
        periods = [{"period_start": s.isoformat(), "value": 1} for s in starts]
        return Response(200, json={"periods": periods, "total_periods": len(periods), "next_offset": None})

    said = {}
    for whole in (True, False):
        made = Client(transport=MockTransport(monday_weeks), cache=False, week_start="sunday", whole_series=whole)
        with pytest.raises(ConfigurationError) as raised:  # raised at once, as every mistake of the settings
            made.series(METRIC, PROJECT, "2025-01-05", "2025-01-26", "1_week")
        said[whole] = str(raised.value).split("(mock://")[0]
    assert said[True] == said[False]
    assert "asked for the week of 2025-01-05, it answered for the week of 2024-12-30" in said[True]


def test_the_point_limit_message_names_whole_series_where_the_service_offers_it():
    made, _ = client(SeriesService(), whole_series=False)
    with pytest.raises(ValidationError, match=r"set whole_series=True: this service offers whole series"):
        made.series(METRIC, PROJECT, "1800-01-01", "2099-12-31")
    made, _ = client(SeriesService(advertised=False), whole_series=False)
    with pytest.raises(ValidationError) as raised:
        made.series(METRIC, PROJECT, "1800-01-01", "2099-12-31")
    assert "whole_series=True" not in str(raised.value)


class InterruptedAtOnce(MockTransport):
    """A MockTransport whose batches are interrupted (a KeyboardInterrupt, as Ctrl-C) before their
    first answer is taken, every answer having come: the pull takes them (``received``) and goes on
    with the interrupt."""

    def answers(self, requests):
        came = [self.get(*request) for request in requests]

        class Interrupted(Answers):
            def __iter__(self):
                raise KeyboardInterrupt
                yield  # a generator

        return Interrupted(came)


def test_an_answer_about_another_week_taken_after_an_interrupt_never_stands_in_for_it():
    def monday_weeks(request: Request) -> Response:  # every answer is of a Monday week
        if request.path == "/projects":
            return Response(404, json={"error": {"code": "not_found"}})
        day = dt.date.fromisoformat(request.params.get("date") or request.params["start"])
        first = (day - dt.timedelta(days=day.weekday())).isoformat()
        if request.path == "/metrics":
            return Response(200, json={"period_start": first, "value": 1})
        periods = [{"period_start": first, "value": 1}]
        return Response(200, json={"periods": periods, "total_periods": 1, "next_offset": None})

    for whole in (True, False):
        service = SeriesService() if whole else None
        transport = InterruptedAtOnce(monday_weeks if not whole else _with_projects(service, monday_weeks))
        made = Client(transport=transport, cache=False, week_start="sunday", whole_series=whole)
        with pytest.raises(KeyboardInterrupt):  # was the ConfigurationError of an answer taken on the way out
            made.frame(["swap_transaction_count", "swap_active_users"], PROJECT, "2025-01-05", "2025-01-26", "1_week")


def _with_projects(service: SeriesService, answer: Callable[[Request], Response]) -> Callable[[Request], Response]:
    """``answer``, with ``service``'s /projects (which advertises /series)."""
    return lambda request: service(request) if request.path == "/projects" else answer(request)
