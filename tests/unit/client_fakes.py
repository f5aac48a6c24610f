"""Fakes for client unit tests: a clock that moves only when told, and small services for MockTransport."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Mapping

from metrics_kit.client.transports import MockTransport, Request, Response
from metrics_kit.spec.catalogue import default_catalogue

NOW = dt.datetime(2025, 6, 15, 12, 0, tzinfo=dt.UTC).timestamp()  # a Sunday, noon UTC


class FakeClock:
    """Seconds that move only by ``advance`` or by a ``sleep`` (which records what was asked)."""

    def __init__(self, now: float = NOW):
        self.now = now
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def no_discovery(request: Request) -> Response:
    return Response(404, json={"error": {"code": "not_found", "message": "no such path"}})


def daily_service(
    daily: Mapping[dt.date, int], week_start: str = "monday", unit: str | None = None, complete: bool | None = True
) -> Callable[[Request], Response]:
    """A service answering every metric from ``daily`` values: a period's value is the sum of its
    days; weeks start on ``week_start``; the unit is the metric's (or ``unit``); no discovery."""

    def answer(request: Request) -> Response:
        if request.path != "/metrics":
            return no_discovery(request)
        day = dt.date.fromisoformat(request.params["date"])
        granularity = request.params["granularity"]
        if granularity == "1_day":
            first = last = day
        elif granularity == "1_week":
            back = (day.weekday() + (1 if week_start == "sunday" else 0)) % 7
            first = day - dt.timedelta(days=back)
            last = first + dt.timedelta(days=6)
        else:
            first = day.replace(day=1)
            last = (first.replace(day=28) + dt.timedelta(days=4)).replace(day=1) - dt.timedelta(days=1)
        value = sum(v for d, v in daily.items() if first <= d <= last)
        body = {
            **request.params,
            "period_start": first.isoformat(),
            "period_end": last.isoformat(),
            "unit": unit or _unit(request.params["metric_name"]),
            "value": value,
        }
        if complete is not None:
            body["complete"] = complete
        return Response(200, json=body)

    return answer


def _unit(name: str) -> str:
    metric = default_catalogue().get(name)
    return metric.unit if metric is not None else "count"


def mock(handler: Callable[[Request], Response]) -> MockTransport:
    return MockTransport(handler)


class ThreadClock:
    """A fake clock per thread: each thread's time starts at ``start`` and moves only by its own
    sleeps, so what threads sharing a pacer wait for does not depend on how they are scheduled."""

    def __init__(self, start: float = 0.0):
        self._start = start
        self._local = threading.local()
        self._lock = threading.Lock()
        self.slept: list[float] = []
        self.woke: list[float] = []

    def __call__(self) -> float:
        return getattr(self._local, "now", self._start)

    def sleep(self, seconds: float) -> None:
        self._local.now = self() + seconds
        with self._lock:
            self.slept.append(seconds)
            self.woke.append(self._local.now)


def constant(value: int, *, complete: bool | None = True, version: str | None = None):
    """A service answering ``value`` for every point (no discovery)."""

    def answer(request: Request) -> Response:
        if request.path != "/metrics":
            return Response(404, json={"error": {"code": "not_found", "message": "no such path"}})
        body = {"value": value, "period_start": request.params["date"]}
        if complete is not None:
            body["complete"] = complete
        return Response(200, json=body, headers={"X-Data-Version": version} if version else {})

    return answer
