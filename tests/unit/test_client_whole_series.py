"""The client's whole-series path (``GET /series``) against small services (MockTransport): used only
where ``/projects`` advertises it, paged, every period checked and read as a ``/metrics`` answer,
a change of data version between pages fetched again, what it cannot answer left to ``/metrics``,
and the point limit raised for it."""

from __future__ import annotations

import datetime as dt

import pytest
from client_fakes import FakeClock

from metrics_kit import AuthenticationError, Client, FetchError, ValidationError
from metrics_kit.client.transports import MockTransport, Request, Response

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
        return Response(200, json=body, headers={"x-data-version": self.version()})


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
