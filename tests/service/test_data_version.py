"""The data version: every answer names the data set it comes from (X-Data-Version, the ETag of a
200, and /projects), the same across restarts on the same data, different once the data changes."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support import ServerProcess

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
