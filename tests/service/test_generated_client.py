"""A client generated from the live /openapi.json by openapi-python-client, calling the live server.

The issue this guards: a client generated from a `sol` server failed on a valid answer of an
`--chain-unit eth` server (closed response enums), and could not even send an unknown metric name
(a closed request enum), so the documented `unknown_metric` answer was unreachable.
"""

from __future__ import annotations

import datetime as dt
import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import ServerProcess

DATA = Path(__file__).parents[1] / "http_data"
PACKAGE = "mk_generated_client"
GENERATOR = shutil.which("openapi-python-client", path=str(Path(sys.executable).parent)) or shutil.which(
    "openapi-python-client"
)

pytestmark = pytest.mark.skipif(GENERATOR is None, reason="openapi-python-client is not installed (the [test] extra)")


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    cache = tmp_path_factory.mktemp("generated-client-cache")
    sol = ServerProcess(DATA, cache_dir=cache)
    try:
        eth = ServerProcess(DATA, "--chain-unit", "eth", cache_dir=cache)
    except BaseException:
        sol.stop()
        raise
    try:
        yield sol, eth
    finally:
        eth.stop()
        sol.stop()


@pytest.fixture(scope="module")
def generated(servers, tmp_path_factory):
    """The client package generated from the sol server's document, imported."""
    sol, _ = servers
    folder = tmp_path_factory.mktemp("generated")
    document = folder / "openapi.json"
    document.write_bytes(sol.get("/openapi.json", key=None).content)
    config = folder / "config.yml"
    config.write_text("post_hooks: []\n")  # no ruff run over the generated code: not needed to import it
    done = subprocess.run(
        [GENERATOR, "generate", "--path", str(document), "--output-path", str(folder / PACKAGE)]
        + ["--meta", "none", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Warning" not in done.stdout + done.stderr, done.stdout + done.stderr  # the document is understood whole
    sys.path.insert(0, str(folder))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(folder))
        for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def _client(package, server: ServerProcess, key: str | None = "default"):
    key = server.key if key == "default" else key
    if key is None:
        return package.Client(base_url=server.base_url, timeout=30)
    return package.AuthenticatedClient(
        base_url=server.base_url, token=key, prefix="", auth_header_name="x-api-key", timeout=30
    )


def _api(package, name: str):
    return importlib.import_module(f"{PACKAGE}.api.default.{name}")


def _metric(package, server: ServerProcess, key: str | None = "default", **query):
    """GET /metrics through the generated client (swap_active_users of swapper on 2024-03-20 unless told)."""
    query = {"metric_name": "swap_active_users", "project": "swapper", "date": dt.date(2024, 3, 20), **query}
    granularity = importlib.import_module(f"{PACKAGE}.models").GetMetricGranularity(query.pop("granularity", "1_day"))
    with _client(package, server, key) as client:
        return _api(package, "get_metric").sync_detailed(client=client, granularity=granularity, **query)


def test_a_value_and_its_data_version(generated, servers):
    reply = _metric(generated, servers[0], granularity="1_week")
    assert reply.status_code == 200
    value = reply.parsed
    assert (value.metric_name, value.value, value.unit) == ("swap_active_users", 2, "count")
    assert (value.period_start, value.period_end, value.complete) == (dt.date(2024, 3, 18), dt.date(2024, 3, 24), True)
    version = reply.headers["x-data-version"]
    assert reply.headers["etag"] == f'"{version}"'


def test_an_answer_from_a_server_with_another_chain_unit(generated, servers):
    """Generated from the sol server, it reads the eth server's metric and unit (open strings)."""
    query = {"metric_name": "reward_staking_in_eth", "project": "solana", "date": dt.date(2024, 3, 15)}
    reply = _metric(generated, servers[1], granularity="1_week", **query)
    assert reply.status_code == 200, reply.content
    assert (reply.parsed.metric_name, reply.parsed.unit, reply.parsed.value) == ("reward_staking_in_eth", "eth", 2.5)


def test_unknown_metric_is_reachable_and_parsed(generated, servers):
    reply = _metric(generated, servers[0], metric_name="swap_activ_users")
    assert reply.status_code == 400
    assert reply.parsed.error.code == "unknown_metric"
    assert "did you mean swap_active_users" in reply.parsed.error.message
    assert reply.parsed.error.param == "metric_name"


@pytest.mark.parametrize(
    ("key", "query", "status", "code"),
    [
        (None, {}, 401, "missing_api_key"),
        ("wrong", {}, 401, "invalid_api_key"),
        ("default", {"project": "nosuch"}, 404, "unknown_project"),
        ("default", {"date": dt.date(1999, 1, 1)}, 404, "date_out_of_coverage"),
        ("default", {"project": "Bad"}, 400, "invalid_project"),
    ],
)
def test_documented_errors_are_parsed(generated, servers, key, query, status, code):
    reply = _metric(generated, servers[0], key, **query)
    assert reply.status_code == status
    assert reply.parsed.error.code == code


def test_if_none_match_gives_304(generated, servers):
    first = _metric(generated, servers[0])
    again = _metric(generated, servers[0], if_none_match=first.headers["etag"])
    assert again.status_code == 304 and again.content == b""
    assert again.headers["x-data-version"] == first.headers["x-data-version"]


def test_typed_projects_and_catalogue(generated, servers):
    sol, _ = servers
    with _client(generated, sol) as client:
        projects = _api(generated, "list_projects").sync_detailed(client=client)
        catalogue = _api(generated, "get_catalogue").sync_detailed(client=client)
    assert projects.status_code == 200 and catalogue.status_code == 200
    body = projects.parsed
    assert body.data_version == projects.headers["x-data-version"]
    assert (body.coverage.start, body.coverage.end) == (dt.date(2024, 3, 13), dt.date(2024, 4, 2))
    by_name = {p.project: p for p in body.projects}
    assert by_name["swapper"].regular_pools is True and by_name["swapper"].kinds == ["dex"]
    assert "regular_pool_swap_transaction_count" in by_name["swapper"].metrics
    assert catalogue.parsed.chain_unit == "sol"
    assert catalogue.parsed.granularities == ["1_day", "1_week", "1_month"]
    names = {m.name for m in catalogue.parsed.metrics}
    assert "reward_staking_in_sol" in names
    farm = next(m for m in catalogue.parsed.metrics if m.name == "farm_withdrawal_transaction_count")
    assert farm.aliases == ["farm_withdraw_transaction_count"]
