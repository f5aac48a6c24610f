"""The client's cache against the real server when the data changes (issue 11, items 1 and 11).

Serve data set A, pull 24 values (daily: the golden data set covers five weeks) through a cached
client, restart the service on data set B at the same URL and key: the client returns B's values,
once its trust in A's version has run out (version_ttl) or as soon as any answer names B's
version. And with every value cached, a fresh client answers with the service gone, saying it could
not confirm the data version. A fresh process, whose cache another process filled from A a moment
ago, answers from B.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support import ServerProcess, golden_plus_one_stake

from metrics_kit import Client, UnconfirmedDataWarning

GOLDEN = Path(__file__).parents[1] / "golden" / "data"
METRIC, PROJECT = "swap_transaction_count", "swapx"
DAYS = ("2024-12-28", "2025-01-20")  # 24 days, within the golden data's coverage


@pytest.fixture(scope="module")
def data_sets(tmp_path_factory) -> tuple[Path, Path]:
    """A: the golden data set. B: the same with every swap of swapx made twice (new transaction ids)."""
    a = tmp_path_factory.mktemp("data-a") / "data"
    shutil.copytree(GOLDEN, a)
    b = tmp_path_factory.mktemp("data-b") / "data"
    shutil.copytree(GOLDEN, b)
    lines = (b / "transactions.csv").read_text(encoding="utf-8").splitlines()
    doubled = []
    for line in lines[1:]:
        fields = line.split(",")  # block_time, tx_id, signer, project, action, pool_type
        if fields[3] == "swapx":
            fields[1] += "-again"
            doubled.append(",".join(fields))
    (b / "transactions.csv").write_text("\n".join([*lines, *doubled]) + "\n", encoding="utf-8")
    return a, b


@pytest.fixture
def port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Later:
    """The wall clock, moved on by ``ahead`` seconds: a later session without waiting for it."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def __call__(self) -> float:
        return time.time() + self.ahead


def _pull(server: ServerProcess, clock: Later, end: str = DAYS[1]) -> list[int]:
    with Client(server.base_url, server.key, clock=clock, retries=0) as client:
        return client.series(METRIC, PROJECT, DAYS[0], end, "1_day").tolist()


def _direct(server: ServerProcess, end: str = DAYS[1]) -> list[int]:
    with Client(server.base_url, server.key, cache=False) as client:
        return client.series(METRIC, PROJECT, DAYS[0], end, "1_day").tolist()


def test_a_restart_on_other_data_at_the_same_url_and_key_gives_the_new_values(data_sets, port, tmp_path):
    a, b = data_sets
    clock = Later()
    with ServerProcess(a, "--port", str(port), cache_dir=tmp_path / "server") as server:
        old = _pull(server, clock)
        assert len(old) == 24 and sum(old) > 0
    with ServerProcess(b, "--port", str(port), cache_dir=tmp_path / "server") as server:
        new = _direct(server)
        assert new != old and sum(new) == 2 * sum(old)
        clock.ahead = 61  # past version_ttl: the client asks the service's version before reading the cache
        assert _pull(server, clock) == new


def test_any_answer_naming_the_new_version_replaces_every_older_value(data_sets, port, tmp_path):
    a, b = data_sets
    clock = Later()
    with ServerProcess(a, "--port", str(port), cache_dir=tmp_path / "server") as server:
        old = _pull(server, clock)
    with ServerProcess(b, "--port", str(port), cache_dir=tmp_path / "server") as server:
        # Within the TTL: 24 days cached under A's version; the 25th day's answer names B's.
        longer = _pull(server, clock, end="2025-01-21")
        assert longer == _direct(server, end="2025-01-21") and longer[:24] != old


def test_a_fresh_client_with_everything_cached_needs_no_service(data_sets, tmp_path):
    a, _ = data_sets
    clock = Later()
    with ServerProcess(a, cache_dir=tmp_path / "server") as server:
        values = _pull(server, clock)
        base_url, key = server.base_url, server.key
        with Client(base_url, key, clock=clock) as client:
            projects = client.projects()
    # The service is gone: any request would fail (retries=0: at once). Values and projects still
    # answer, saying that the service could not confirm they are its current data.
    with Client(base_url, key, clock=clock, retries=0) as client:
        with pytest.warns(UnconfirmedDataWarning, match="24 values are from the cache"):
            series = client.series(METRIC, PROJECT, *DAYS)
        assert series.tolist() == values and series.attrs["from_cache"] == 24
        assert series.attrs["data_version_confirmed"] is False
        assert client.projects().equals(projects)


ASK = """
    import json, sys
    from metrics_kit import Client
    with Client(sys.argv[1], sys.argv[2]) as client:
        print(json.dumps({"value": client.value("staking_transaction_count", "farm", "1_day", "2025-01-02")}))
"""
KEY_A = "key-a-5f1e9c3b7d2a4e6f8091"


@pytest.fixture(scope="module")
def data_b(tmp_path_factory):
    return golden_plus_one_stake(tmp_path_factory.mktemp("data-b") / "data")


def _run(code: str, *args: str, cache: Path) -> dict:
    """``code`` in a fresh Python with ``args``, its cache in ``cache``: its last line of output, as JSON."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith("METRICS_KIT_")}
    done = subprocess.run(
        [sys.executable, "-B", "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**kept, "METRICS_KIT_CACHE_DIR": str(cache)},
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_fresh_process_never_answers_from_the_data_of_a_restarted_server(data_b, port, tmp_path):
    """B's golden data has one more farm stake on 2025-01-02 (1 on A, 2 on B); each pull is a process
    of its own, on one cache folder."""
    cache = tmp_path / "cache"
    with ServerProcess(GOLDEN, "--port", str(port), key=KEY_A, cache_dir=tmp_path / "server") as old:
        assert _run(ASK, old.base_url, KEY_A, cache=cache) == {"value": 1}  # cached, version A seen
    with ServerProcess(data_b, "--port", str(port), key=KEY_A, cache_dir=tmp_path / "server") as new:
        assert new.base_url == old.base_url
        # within version_ttl (60 s) of the other process's sighting of A: was 1, from A's data set
        assert _run(ASK, new.base_url, KEY_A, cache=cache) == {"value": 2}
