"""The client against a hostile tester's findings after issue 21, where the real part matters: real
servers on 127.0.0.1, a real cache file under a file-size limit, a server restarted on the same
address with other data. Each test here fails on the client before its fix.

Service A serves the golden data set; service B the same with one more staking transaction on
2025-01-02, so ``staking_transaction_count`` of ``farm`` on that day is 1 on A and 2 on B.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import GOLDEN, ServerProcess, golden_plus_one_stake

KEY_A = "key-a-5f1e9c3b7d2a4e6f8091"
KEY_B = "key-b-9a8b7c6d5e4f3a2b1c0d"
QUESTION = ("staking_transaction_count", "farm", "1_day", "2025-01-02")


@pytest.fixture(scope="module")
def data_b(tmp_path_factory):
    return golden_plus_one_stake(tmp_path_factory.mktemp("data-b") / "data")


@pytest.fixture(scope="module")
def servers(tmp_path_factory, data_b):
    cache = tmp_path_factory.mktemp("servers-cache")
    with ServerProcess(GOLDEN, key=KEY_A, cache_dir=cache) as a, ServerProcess(data_b, key=KEY_B, cache_dir=cache) as b:
        yield a, b


def _child_environment(cache: Path) -> dict[str, str]:
    kept = {k: v for k, v in os.environ.items() if not k.startswith("METRICS_KIT_")}
    return {**kept, "METRICS_KIT_CACHE_DIR": str(cache)}


def _run(code: str, *args: str, cache: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-B", "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=_child_environment(cache),
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- 3. a full disk when an existing cache file is first opened --------------------------------------------

SEED = """
    import json, sys
    from metrics_kit import Client
    with Client(sys.argv[1], sys.argv[2]) as client:
        print(json.dumps({"value": client.value("staking_transaction_count", "farm", "1_day", "2025-01-02")}))
"""
FULL_AT_OPEN = """
    import json, os, resource, signal, sys, warnings
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), no signal
    size = os.path.getsize(os.path.join(os.environ["METRICS_KIT_CACHE_DIR"], "values.sqlite3"))
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))  # full
    from metrics_kit import Client
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Client(sys.argv[1], sys.argv[2]) as client:
            cached = client.series("staking_transaction_count", "farm", "2025-01-02", "2025-01-02")
            both = client.series("staking_transaction_count", "farm", "2025-01-02", "2025-01-03")
    print(json.dumps({
        "cached": [cached.tolist(), cached.attrs["from_cache"], cached.attrs["fetched"]],
        "both": [both.tolist(), both.attrs["from_cache"], both.attrs["fetched"]],
        "warnings": [w.category.__name__ for w in caught],
        "texts": [str(w.message) for w in caught],
    }))
"""


def test_a_full_disk_when_an_existing_cache_is_opened_reads_it_and_returns_every_value(servers, tmp_path):
    a, _ = servers
    cache = tmp_path / "cache"
    assert _run(SEED, a.base_url, KEY_A, cache=cache) == {"value": 1}
    (cache / "values.sqlite3-wal").unlink(missing_ok=True)  # a clean close leaves none: it must be made
    (cache / "values.sqlite3-shm").unlink(missing_ok=True)
    out = _run(FULL_AT_OPEN, a.base_url, KEY_A, cache=cache)
    # was: ConfigurationError "cannot create or write the metric value cache ... disk I/O error" for both
    assert out["cached"] == [[1], 1, 0]  # read from the file, which cannot be written
    assert out["both"][0] == [1, 0] and out["both"][2] == 1  # the day not cached is fetched, and returned
    assert out["warnings"] == ["CacheWarning"], out["texts"]  # once, when the cache was opened
    assert KEY_A not in json.dumps(out)


# -- 5. a token-like path segment of the base URL in no message, repr or error attribute -------------------

TOKEN = "sk-live-TOPSECRET-abcdef0123456789"


def test_a_token_in_the_base_url_is_masked_in_every_message(servers, tmp_path):
    import warnings

    import metrics_kit as mk
    from metrics_kit import Client

    a, _ = servers
    url = f"{a.base_url}/{TOKEN}"  # every path under it is a 404 from the reference service
    with Client(url, KEY_A, cache=False, retries=0) as client:
        assert TOKEN not in repr(client) and TOKEN not in repr(client.transport)
        with pytest.raises(mk.NotFoundError) as one:
            client.value("staking_transaction_count", "farm", "1_day", "2025-01-02")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            series = client.series("staking_transaction_count", "farm", "2025-01-01", "2025-01-02", errors="coerce")
    texts = [str(one.value), str(one.value.url), *(str(w.message) for w in caught), json.dumps(series.attrs)]
    assert "***" in str(one.value.url) and "/metrics?" in str(one.value.url)  # the query we wrote is kept
    assert caught and all(TOKEN not in text for text in texts), texts
    closed = Client(url, KEY_A, cache=False)
    closed.close()
    with pytest.raises(mk.ClientClosedError) as refused:
        closed.value("staking_transaction_count", "farm", "1_day", "2025-01-02")
    assert TOKEN not in str(refused.value)
    done = subprocess.run(
        [sys.executable, "-m", "metrics_kit", "fetch", "staking_transaction_count", "--project", "farm"]
        + ["--start", "2025-01-01", "--end", "2025-01-02", "--base-url", url, "--out", str(tmp_path / "x.csv")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**_child_environment(tmp_path / "cache"), "METRICS_KIT_API_KEY": KEY_A},
    )
    assert done.returncode == 2 and "NotFoundError" not in done.stderr and "404" in done.stderr, done.stderr
    assert TOKEN not in done.stderr + done.stdout
    assert "--errors coerce" in done.stderr and "errors='coerce'" not in done.stderr  # the flag, not the argument


# -- 13. a server restarted at the same address on other data, and a fresh process ---------------------------

ASK = """
    import json, sys
    from metrics_kit import Client
    with Client(sys.argv[1], sys.argv[2]) as client:
        print(json.dumps({"value": client.value("staking_transaction_count", "farm", "1_day", "2025-01-02")}))
"""


def test_a_fresh_process_never_answers_from_the_data_of_a_restarted_server(data_b, tmp_path):
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    cache = tmp_path / "cache"
    with ServerProcess(GOLDEN, "--port", port, key=KEY_A, cache_dir=tmp_path / "server") as old:
        assert _run(ASK, old.base_url, KEY_A, cache=cache) == {"value": 1}  # cached, version A seen
    with ServerProcess(data_b, "--port", port, key=KEY_A, cache_dir=tmp_path / "server") as new:
        assert new.base_url == old.base_url
        # within version_ttl (60 s) of the other process's sighting of A: was 1, from A's data set
        assert _run(ASK, new.base_url, KEY_A, cache=cache) == {"value": 2}
