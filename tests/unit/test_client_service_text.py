"""What the client keeps of a service's text (hostile round on issue 27, D1 and D3), against services
made of functions (MockTransport) and a fake clock:

- the data version a service names is kept with the key masked in it, in ``attrs``, in
  UnconfirmedDataWarning and in the cache file, and two versions that the mask makes alike are
  still told apart;
- a period's bounds are read exactly (an ISO date, or an ISO date-time on that day) and kept as the
  days they name; anything else is refused, never cached;
- of a ``/projects`` answer, the cache keeps only what the client uses, and nothing when the key is
  in it.

Each test reads the cache file's bytes (and its -wal) for the key in any case and in base64.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import sqlite3
import warnings
from pathlib import Path

import pytest
from client_fakes import FakeClock

from metrics_kit import Client, MetricsKitError, ResponseFormatError, TransportError, UnconfirmedDataWarning
from metrics_kit.client.transports import MockTransport, Request, Response

KEY = "sk_live_Zq9XyW3vT7pLm2Kd"
METRIC = "swap_transaction_count"
PROJECT = "demoswap"
DAYS = ("2025-01-01", "2025-01-03")


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path))


def holds_the_key(folder: Path) -> list[str]:
    """The files of the cache folder whose bytes hold the key, in any case or as base64."""
    forms = [KEY.lower().encode()]
    forms += [base64.b64encode(b"\0" * n + KEY.encode())[4:-4].lower() for n in range(3)]
    return [p.name for p in folder.iterdir() if p.is_file() and any(f in p.read_bytes().lower() for f in forms)]


class Vendor:
    """Answers every /metrics request with its day's number, every answer naming the data version
    ``version(key)`` (the key the request came with); /projects answers ``projects(key)``, or 404."""

    def __init__(self, version=lambda key: key, projects=None, period=lambda day: day, factor: int = 1):
        self.version, self.projects, self.period, self.factor = version, projects, period, factor

    def __call__(self, request: Request) -> Response:
        key = request.headers["x-api-key"]
        headers = {"X-Data-Version": self.version(key)}
        if request.path == "/projects" and self.projects is not None:
            return Response(200, json=self.projects(key), headers=headers)
        if request.path != "/metrics":
            return Response(404, json={"error": {"code": "not_found", "message": "no such path"}}, headers=headers)
        day = request.params["date"]
        body = {**request.params, "period_start": self.period(day), "period_end": self.period(day)}
        body.update(unit="count", value=self.factor * dt.date.fromisoformat(day).day, complete=True)
        return Response(200, json=body, headers=headers)


def _client(handler, clock, **settings) -> Client:
    return Client(
        transport=MockTransport(handler, api_key=KEY, service="vendor"), clock=clock, progress=False, **settings
    )


def _unreachable(request: Request) -> Response:
    raise TransportError("connection refused")


def test_a_data_version_that_is_the_key_is_kept_masked_in_attrs_warnings_and_the_cache(tmp_path):
    clock = FakeClock()
    with _client(Vendor(), clock) as client:
        first = client.series(METRIC, PROJECT, *DAYS)
    shown = first.attrs["data_version"]
    assert shown.startswith("***#") and KEY.lower() not in json.dumps(first.attrs).lower(), shown
    first.to_frame().to_parquet(tmp_path / "saved.parquet")
    # A fresh client while the service does not answer: the values as last seen, under that version.
    with _client(_unreachable, clock) as again:
        with pytest.warns(UnconfirmedDataWarning) as caught:
            cached = again.series(METRIC, PROJECT, *DAYS)
    said = " ".join(str(w.message) for w in caught)
    assert cached.tolist() == first.tolist() == [1, 2, 3] and cached.attrs["data_version"] == shown
    assert repr(shown) in said and KEY.lower() not in said.lower(), said
    assert holds_the_key(tmp_path) == []


def test_two_versions_that_the_mask_makes_alike_are_told_apart():
    # Both mask to "***": the digest after it tells them apart, so a change is seen as a change.
    clock = FakeClock()
    with _client(Vendor(), clock, version_ttl=0) as client:
        before = client.series(METRIC, PROJECT, *DAYS)
    # The service's data changed: its version is now the key upper-cased.
    with _client(Vendor(version=str.upper, factor=10), clock, version_ttl=0) as client:
        after = client.series(METRIC, PROJECT, *DAYS)
    assert before.attrs["data_version"] != after.attrs["data_version"]
    assert after.attrs["data_version"].startswith("***#") and after.attrs["from_cache"] == 0
    assert after.tolist() == [10, 20, 30]  # never the older data's values


def test_a_plain_data_version_is_kept_as_it_came():
    with _client(Vendor(version=lambda key: "2025-06-30.1"), FakeClock()) as client:
        assert client.series(METRIC, PROJECT, *DAYS).attrs["data_version"] == "2025-06-30.1"


@pytest.mark.parametrize(
    "bound",
    [
        "{day}{key}",  # the key after the date: the first ten characters were all that was compared
        "{day} (UTC)",
        "{day}T00:00:00 UTC",
        "{day}x",
        "{day}T25:00:00Z",
    ],
)
def test_a_period_bound_that_is_not_an_iso_date_is_refused_and_not_cached(bound, tmp_path):
    period = lambda day: bound.replace("{day}", day).replace("{key}", KEY)  # noqa: E731
    with _client(Vendor(version=lambda key: "v1", period=period), FakeClock()) as client:
        with pytest.raises(ResponseFormatError, match="period_start that is neither an ISO date") as caught:
            client.value(METRIC, PROJECT, "1_day", DAYS[0])
        assert client._get_cache().stats()["entries"] == 0
    assert KEY.lower() not in str(caught.value).lower()
    assert holds_the_key(tmp_path) == []


@pytest.mark.parametrize("bound", ["{day}T00:00:00Z", "{day}T12:30:00.123456+00:00", "{day} 23:59:59", "{day}t00:00z"])
def test_a_period_bound_written_as_a_date_time_on_its_day_is_kept_as_the_day(bound, tmp_path):
    period = lambda day: bound.replace("{day}", day)  # noqa: E731
    with _client(Vendor(version=lambda key: "v1", period=period), FakeClock()) as client:
        assert client.series(METRIC, PROJECT, *DAYS).tolist() == [1, 2, 3]
    rows = sqlite3.connect(tmp_path / "values.sqlite3").execute("SELECT date, period_start, period_end FROM entries")
    assert sorted(rows) == [(d, d, d) for d in ("2025-01-01", "2025-01-02", "2025-01-03")]


def test_a_date_time_in_another_zone_is_taken_for_its_utc_day():
    # 2025-01-02T00:00:00+02:00 is 2025-01-01T22:00Z: an answer about the day before the one asked.
    period = lambda day: f"{day}T00:00:00+02:00"  # noqa: E731
    with _client(Vendor(version=lambda key: "v1", period=period), FakeClock()) as client:
        with pytest.raises(MetricsKitError, match="for the period starting 2025-01-02T00:00:00\\+02:00"):
            client.value(METRIC, PROJECT, "1_day", "2025-01-02")


def _projects(extra: dict, kinds: list[str] | None = None):
    def answer(key: str) -> dict:
        project = {"project": PROJECT, "kinds": kinds or ["dex"], "regular_pools": True, **extra}
        return {"data_version": "v1", "projects": [project], "owner": f"account of {key}"}

    return answer


def test_a_projects_answer_is_kept_only_in_what_the_client_uses(tmp_path):
    extra = {"note": f"issued to key {KEY}", "coverage": {"start": "2025-01-01", "end": "2025-06-30"}}
    with _client(Vendor(version=lambda key: "v1", projects=_projects(extra)), FakeClock()) as client:
        assert client.series(METRIC, PROJECT, *DAYS).tolist() == [1, 2, 3]
        assert client.projects().loc[PROJECT, "coverage_end"] == "2025-06-30"
    (stored,) = sqlite3.connect(tmp_path / "values.sqlite3").execute("SELECT projects FROM services").fetchone()
    assert json.loads(stored) == {PROJECT: {"kinds": ["dex"], "regular_pools": True, "coverage": extra["coverage"]}}
    assert holds_the_key(tmp_path) == []


def test_a_projects_answer_with_the_key_in_what_the_client_uses_is_not_kept(tmp_path):
    vendor = Vendor(version=lambda key: "v1", projects=_projects({}, kinds=["dex", f"tenant-{KEY}"]))
    with _client(vendor, FakeClock()) as client:
        assert client.series(METRIC, PROJECT, *DAYS).tolist() == [1, 2, 3]
    (stored,) = sqlite3.connect(tmp_path / "values.sqlite3").execute("SELECT projects FROM services").fetchone()
    assert stored is None  # not kept: asked again when it is needed
    assert holds_the_key(tmp_path) == []


def test_no_warning_when_nothing_is_cached_under_a_masked_version():
    with _client(Vendor(), FakeClock()) as client, warnings.catch_warnings():
        warnings.simplefilter("error")
        assert client.series(METRIC, PROJECT, *DAYS).attrs["data_version_confirmed"] is True
