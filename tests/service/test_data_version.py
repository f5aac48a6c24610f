"""The data version: every answer names the data set it comes from (X-Data-Version, the ETag of a
200, and /projects), the same across restarts on the same data, different once the data changes.
And the client of a vendor that names its version only in its answers (no /projects): its cache is
reused once an answer of the pull confirms the version, never before."""

from __future__ import annotations

import os
import shutil
import time
import warnings
from pathlib import Path

import pytest
from support import ServerProcess
from vendor import Vendor

from metrics_kit import Client, PartialDataWarning, UnconfirmedDataWarning

DATA = Path(__file__).parents[1] / "http_data"
GOOD = {"metric_name": "swap_active_users", "project": "swapper", "granularity": "1_week", "date": "2024-03-20"}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("version-cache")


@pytest.fixture(scope="module")
def server(cache):
    with ServerProcess(DATA, cache_dir=cache) as proc:
        yield proc


def _version(server: ServerProcess) -> str:
    reply = server.get("/projects")
    assert reply.status_code == 200
    version = reply.json()["data_version"]
    assert reply.headers["x-data-version"] == version
    return version


def test_every_answer_names_the_version(server):
    version = _version(server)
    assert len(version) >= 16
    answers = {
        200: server.get(params=GOOD),
        400: server.get(params={**GOOD, "metric_name": "nope"}),
        401: server.get(params=GOOD, key="wrong"),
        404: server.get(params={**GOOD, "project": "nosuch"}),
        405: server.get(params=GOOD, method="POST"),
        406: server.get(params=GOOD, headers={"Accept": "text/html"}),
    }
    for status, reply in answers.items():
        assert reply.status_code == status, (status, reply.text)
        assert reply.headers["x-data-version"] == version, status
        # Only an answer of the data carries it as its ETag.
        assert (reply.headers.get("etag") == f'"{version}"') is (status == 200), status
    for path in ("/catalogue", "/projects"):
        assert server.get(path).headers["etag"] == f'"{version}"'
    assert server.get("/openapi.json", key=None).headers["x-data-version"] == version


@pytest.mark.parametrize("form", ['"{v}"', 'W/"{v}"', '"other", "{v}"', "*"])
def test_if_none_match_with_the_version_is_304(server, form):
    version = _version(server)
    reply = server.get(params=GOOD, headers={"If-None-Match": form.format(v=version)})
    assert reply.status_code == 304 and reply.content == b""
    assert reply.headers["etag"] == f'"{version}"'
    head = server.get("/catalogue", headers={"If-None-Match": form.format(v=version)}, method="HEAD")
    assert head.status_code == 304


def test_if_none_match_with_another_version_or_on_an_error(server):
    version = _version(server)
    assert server.get(params=GOOD, headers={"If-None-Match": '"0000"'}).status_code == 200
    assert server.get(params=GOOD, headers={"If-None-Match": version}).status_code == 200  # unquoted: no tag
    error = server.get(params={**GOOD, "project": "nosuch"}, headers={"If-None-Match": f'"{version}"'})
    assert error.status_code == 404  # a 304 stands only for a 200
    refused = server.get(params=GOOD, key="wrong", headers={"If-None-Match": f'"{version}"'})
    assert refused.status_code == 401  # never a 304 that would confirm a guess without a key


def test_the_version_is_stable_for_the_same_data_and_changes_with_it(server, cache, tmp_path):
    version = _version(server)
    with ServerProcess(DATA, cache_dir=cache) as again:
        assert _version(again) == version  # a restart on the same data: the same version
    with ServerProcess(DATA, "--chain-unit", "eth", cache_dir=cache) as eth:
        assert _version(eth) != version  # what the chain metrics are called and measure changed
    copy = tmp_path / "data"
    shutil.copytree(DATA, copy)
    with ServerProcess(copy, cache_dir=cache) as first:
        before = _version(first)
        value_before = first.value(**GOOD)
    assert before != version  # another data set (another folder)
    # The data set changes in place: one more swap by a new signer in the week asked.
    with open(copy / "transactions.csv", "a", encoding="utf-8") as out:
        out.write(_extra_swap(copy / "transactions.csv"))
    stat = (copy / "transactions.csv").stat()
    os.utime(copy / "transactions.csv", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    with ServerProcess(copy, cache_dir=cache) as second:
        after = _version(second)
        assert after != before
        assert second.value(**GOOD) == value_before + 1


def _extra_swap(path: Path) -> str:
    """A row like the file's first swap of project swapper, by a new signer, on 2024-03-20."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    header = lines[0].split(",")
    for line in lines[1:]:
        row = dict(zip(header, line.split(","), strict=True))
        if row.get("project") == "swapper" and row.get("action") == "swap":
            break
    else:
        raise AssertionError("no swap of swapper in the fixture")
    row.update(tx_id="tx-data-version-test", signer="signer-data-version-test")
    for name in header:
        if "time" in name:
            row[name] = "2024-03-20T12:00:00Z"
    return ("" if text.endswith("\n") else "\n") + ",".join(row[name] for name in header) + "\n"


# -- a vendor that names its version only in its answers (no /projects, or /projects refused) ---------

VENDOR_KEY = "vendor-key-0123456789abcdef"
DAYS = ("2025-01-01", "2025-01-30")  # 30 days


class Later:
    """The wall clock, moved on by ``ahead`` seconds: a later session without waiting for it."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def __call__(self) -> float:
        return time.time() + self.ahead


def _pull(vendor: Vendor, clock: Later):
    """A fresh client's pull (a restarted kernel); the series and the /metrics requests it made."""
    before = vendor.requests()
    with Client(vendor.base_url, VENDOR_KEY, clock=clock, progress=False) as client:
        series = client.series("swap_transaction_count", "demoswap", *DAYS)
    return series, vendor.requests() - before


@pytest.mark.parametrize("projects_status", [404, 401, 403])
def test_a_vendor_without_projects_gets_its_cache_reused_once_an_answer_confirms_the_version(
    projects_status, tmp_path, monkeypatch
):
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path))
    clock = Later()
    with Vendor(version="v1", version_on_errors=False, projects_status=projects_status) as vendor:
        first, asked = _pull(vendor, clock)
        assert asked == 30 and first.attrs["data_version"] == "v1"
        # A fresh client: one value asked again confirms v1, the other 29 come from the cache.
        again, asked = _pull(vendor, clock)
        assert asked == 1  # was 30: every pull wiped the cache
        assert again.attrs["from_cache"] == 29 and again.tolist() == first.tolist()
        assert again.attrs["data_version"] == "v1" and again.attrs["data_version_confirmed"] is True
        # Within version_ttl of that answer, the same client reads the cache without asking.
        with Client(vendor.base_url, VENDOR_KEY, clock=clock, progress=False) as client:
            client.series("swap_transaction_count", "demoswap", *DAYS)
            before = vendor.requests()
            assert client.series("swap_transaction_count", "demoswap", *DAYS).attrs["from_cache"] == 30
            assert vendor.requests() == before
            clock.ahead += 61  # past it: one value is asked again before the cache is read
            assert client.series("swap_transaction_count", "demoswap", *DAYS).attrs["from_cache"] == 29
            assert vendor.requests() == before + 1
        # The vendor's data changes (another version): the answer that would have confirmed the old
        # version names the new one, and no value of the old one is returned.
        vendor.version, vendor.factor = "v2", 10
        clock.ahead += 61
        changed, asked = _pull(vendor, clock)
        assert changed.tolist() == [10 * v for v in first.tolist()] and asked == 1 + 29
        assert changed.attrs["data_version"] == "v2" and changed.attrs["from_cache"] == 0


def test_when_no_answer_confirms_the_version_the_cached_values_say_so(tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path))
    clock = Later()
    with Vendor(version="v1", version_on_errors=False) as vendor:
        first, _ = _pull(vendor, clock)
        vendor.held = {DAYS[0]}  # the value asked to confirm the version gets no answer in time
        with Client(vendor.base_url, VENDOR_KEY, clock=clock, progress=False, timeout=0.5, retries=0) as client:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                series = client.series("swap_transaction_count", "demoswap", *DAYS, errors="coerce")
        vendor.release()
    said = {type(w.message): str(w.message) for w in caught}
    assert "29 values are from the cache" in said[UnconfirmedDataWarning]  # and the failed value is missing:
    assert "1 of 30 points failed" in said[PartialDataWarning]
    assert series.attrs["data_version_confirmed"] is False and series.attrs["from_cache"] == 29
    assert series.tolist()[1:] == first.tolist()[1:]
