"""The client as an analyst lives with it (issue 21), against two real services on 127.0.0.1 that
answer the same question differently: environment variables changed in the middle of a session,
clients closed and configured again, two keys, a full disk (during a pull, and when an existing
cache is opened), verbose tracebacks, a token in the base URL, two processes creating the cache at
once.

Service A serves the golden data set; service B the same with one more staking transaction on
2025-01-02, so ``staking_transaction_count`` of ``farm`` on that day is 1 on A and 2 on B.
The keys are module constants, never locals of a test, so a traceback's locals can be scanned for them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import traceback
import warnings
from pathlib import Path

import pytest
from support import GOLDEN, ServerProcess, golden_plus_one_stake

import metrics_kit as mk
from metrics_kit import AuthenticationError, Client, ClientClosedError, ConfigurationError, TransportError
from metrics_kit.client import api, settings
from metrics_kit.client.transports import HTTPTransport

KEY_A = "key-a-5f1e9c3b7d2a4e6f8091"
KEY_A2 = "key-a2-0c4d8e2f6a1b3c5d7e9f"
KEY_B = "key-b-9a8b7c6d5e4f3a2b1c0d"
QUESTION = ("staking_transaction_count", "farm", "1_day", "2025-01-02")
METRICS = ["staking_transaction_count", "staking_active_users"]


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    folder_b = golden_plus_one_stake(tmp_path_factory.mktemp("data-b") / "data")
    cache = tmp_path_factory.mktemp("servers-cache")
    with (
        ServerProcess(GOLDEN, key=f"{KEY_A},{KEY_A2}", cache_dir=cache) as a,
        ServerProcess(folder_b, key=KEY_B, cache_dir=cache) as b,
    ):
        yield a, b


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def fresh_default(monkeypatch):
    """mk.*'s default client as if nothing had been configured, put back afterwards."""
    monkeypatch.setattr(api, "_default", None)
    monkeypatch.setattr(api, "_made_from", None)
    monkeypatch.setattr(api, "_arguments", {})
    yield
    if api._default is not None:
        api._default.close()


def use(monkeypatch, server: ServerProcess, key: str) -> None:
    monkeypatch.setenv("METRICS_KIT_BASE_URL", server.base_url)
    monkeypatch.setenv("METRICS_KIT_API_KEY", key)


def test_the_two_services_answer_the_question_differently(servers):
    a, b = servers
    with Client(a.base_url, KEY_A) as on_a, Client(b.base_url, KEY_B) as on_b:
        assert (on_a.value(*QUESTION), on_b.value(*QUESTION)) == (1, 2)


def test_after_the_environment_changes_the_next_call_answers_from_the_new_service(servers, fresh_default, monkeypatch):
    a, b = servers
    use(monkeypatch, a, KEY_A)
    assert mk.value(*QUESTION) == 1
    held = mk.default_client()  # a reference kept, as a panel keeps it
    own = Client()  # a client of the user's, made from the same environment
    assert own.value(*QUESTION) == 1
    use(monkeypatch, b, KEY_B)
    assert mk.value(*QUESTION) == 2  # the next mk.* call: the new service
    assert mk.series(*QUESTION[:2], "2025-01-02", "2025-01-02").attrs["service"] == b.base_url
    assert own.value(*QUESTION) == 1  # a client keeps its own service
    with pytest.raises(ClientClosedError):
        held.value(*QUESTION)  # the replaced default raises: it never answers from B, nor from the demo
    monkeypatch.delenv("METRICS_KIT_BASE_URL")
    monkeypatch.delenv("METRICS_KIT_API_KEY")
    assert mk.default_client().embedded  # and back to the demo when the variables go
    own.close()


def test_a_half_set_environment_closes_the_old_default_and_says_what_is_missing(servers, fresh_default, monkeypatch):
    a, _ = servers
    held = mk.default_client()  # the embedded demo, as a notebook's first cell makes it
    monkeypatch.setenv("METRICS_KIT_BASE_URL", a.base_url)  # the base URL set, the key not yet
    with pytest.raises(ConfigurationError, match="METRICS_KIT_API_KEY") as caught:
        mk.value(*QUESTION)
    assert held.is_closed  # was: still open, answering the demo data
    assert "closed" in str(caught.value) and caught.value.argument == "api_key"
    with pytest.raises(ClientClosedError):
        held.value(*QUESTION)
    monkeypatch.setenv("METRICS_KIT_API_KEY", KEY_A)
    assert mk.value(*QUESTION) == 1  # the environment complete: the new service answers
    on_a = mk.default_client()
    monkeypatch.delenv("METRICS_KIT_API_KEY")  # half-set again, from a service this time
    with pytest.raises(ConfigurationError, match="METRICS_KIT_API_KEY"):
        mk.series(*QUESTION[:2], "2025-01-02", "2025-01-02")
    with pytest.raises(ClientClosedError):
        on_a.value(*QUESTION)


def test_clients_closed_and_configured_again_never_answer_from_another_service(servers, fresh_default):
    a, b = servers
    mk.configure(a.base_url, KEY_A)
    first = mk.default_client()
    assert mk.value(*QUESTION) == 1
    mk.configure(b.base_url, KEY_B)
    assert mk.value(*QUESTION) == 2
    with pytest.raises(ClientClosedError, match=r"mk.configure\(\)"):
        first.value(*QUESTION)
    assert first.base_url == a.base_url
    given = Client(transport=HTTPTransport(a.base_url, KEY_A))
    assert given.value(*QUESTION) == 1
    given.close()
    with pytest.raises(ClientClosedError):
        given.value(*QUESTION)  # was: 347 from the embedded demo, base_url "embedded"
    assert given.base_url == a.base_url and not given.embedded
    mk.configure(api_key=KEY_B)  # a key alone is the configured service's new key (b's)
    assert mk.value(*QUESTION) == 2
    mk.configure(base_url=None)  # the service handed back to the environment, which names none
    with pytest.raises(ConfigurationError, match="without a base URL"):
        mk.configure(api_key=KEY_B)


def test_two_keys_never_share_cached_values(servers):
    a, _ = servers
    with Client(a.base_url, KEY_A) as right:
        assert right.series(*QUESTION[:2], "2024-12-28", "2025-01-03").attrs["fetched"] == 7
    with Client(a.base_url, "a-key-the-service-does-not-know") as wrong:
        with pytest.raises(AuthenticationError):
            wrong.value(*QUESTION)  # a 401, not the other key's cached value
    with Client(a.base_url, KEY_A2) as other:  # another good key: its own cache entries
        assert other.series(*QUESTION[:2], "2024-12-28", "2025-01-03").attrs["fetched"] == 7
    with Client(a.base_url, KEY_A) as again:
        assert again.series(*QUESTION[:2], "2024-12-28", "2025-01-03").attrs["from_cache"] == 7


FULL_DISK = textwrap.dedent(
    """
    import json, resource, signal, sys, warnings
    from metrics_kit import Client
    base_url, key = sys.argv[1], sys.argv[2]
    client = Client(base_url, key)
    client.clear_cache()  # the cache file is made while the disk still has room
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), no signal
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame = client.frame(
            ["staking_transaction_count", "staking_active_users"], "farm", "2024-12-28", "2025-02-01"
        )
    print(json.dumps({
        "values": {name: frame[name].tolist() for name in frame.columns},
        "warnings": [w.category.__name__ for w in caught],
    }))
    """
)


def test_a_full_disk_skips_the_cache_with_one_warning_and_keeps_every_value(servers, tmp_path):
    a, _ = servers
    with Client(a.base_url, KEY_A, cache=False) as plain:
        expected = plain.frame(
            ["staking_transaction_count", "staking_active_users"], "farm", "2024-12-28", "2025-02-01"
        )
    done = subprocess.run(
        [sys.executable, "-B", "-c", FULL_DISK, a.base_url, KEY_A],
        capture_output=True,
        text=True,
        timeout=120,
        env={**_child_environment(), "METRICS_KIT_CACHE_DIR": str(tmp_path / "full")},
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["values"] == {name: expected[name].tolist() for name in expected.columns}
    assert out["warnings"] == ["CacheWarning"]  # one warning for the pull, however many writes failed
    assert "Traceback" not in done.stderr


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


def _run(code: str, *args: str, cache: Path) -> dict:
    """``code`` in a fresh Python with ``args``, its cache in ``cache``: its last line of output, as JSON."""
    done = subprocess.run(
        [sys.executable, "-B", "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**_child_environment(), "METRICS_KIT_CACHE_DIR": str(cache)},
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _child_environment() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("METRICS_KIT_")}


def verbose(error: BaseException) -> str:
    """The traceback as %xmode Verbose or pytest --showlocals would print it: every frame's locals."""
    return "".join(traceback.TracebackException.from_exception(error, capture_locals=True).format())


def test_verbose_tracebacks_never_hold_the_key(servers):
    a, _ = servers
    with Client(_nothing_listening(), KEY_A, retries=0) as dead:
        with pytest.raises(TransportError) as refused:
            dead.value(*QUESTION)
    with Client(a.base_url, KEY_B) as client, pytest.raises(AuthenticationError) as unknown:
        client.value(*QUESTION)  # B's key at A: a 401
    with pytest.raises(ConfigurationError) as swapped:
        Client(KEY_A, a.base_url)  # the arguments swapped
    with pytest.raises(ConfigurationError) as in_query:
        Client(f"{a.base_url}/?api_key={KEY_A}", KEY_A)
    for caught in (refused, unknown, swapped, in_query):
        text = verbose(caught.value)
        assert "Traceback" in text and KEY_A not in text and KEY_B not in text, text
    assert "HTTPTransport" in verbose(refused.value)  # the transport's frames are there, with their locals


TOKEN = "sk-live-TOPSECRET-abcdef0123456789"


def test_a_token_in_the_base_url_is_masked_in_every_message(servers, tmp_path):
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
        env={**_child_environment(), "METRICS_KIT_CACHE_DIR": str(tmp_path / "cache"), "METRICS_KIT_API_KEY": KEY_A},
    )
    assert done.returncode == 2 and "NotFoundError" not in done.stderr and "404" in done.stderr, done.stderr
    assert TOKEN not in done.stderr + done.stdout
    assert "--errors coerce" in done.stderr and "errors='coerce'" not in done.stderr  # the flag, not the argument


def _nothing_listening() -> str:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


RACE = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from metrics_kit.client.cache import ValueCache
    folder, start, rounds, step = Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    failures = []
    for r in range(rounds):  # every process opens a new file at the same moment, round after round
        at = start + r * step
        while (left := at - time.time()) > 0:
            time.sleep(min(left, 0.01) if left > 0.002 else 0)
        try:
            with ValueCache("http://x.test", "k", path=folder / str(r) / "values.sqlite3") as cache:
                cache.put_many([])
        except Exception as error:
            failures.append(f"{r}: {type(error).__name__}: {error}")
    print(json.dumps(failures))
    """
)


def test_processes_creating_the_cache_at_once_all_open_it(tmp_path):
    rounds, step = 30, 0.15
    start = time.time() + 4  # after the children have imported metrics_kit
    children = [
        subprocess.Popen(
            [sys.executable, "-B", "-c", RACE, str(tmp_path), str(start), str(rounds), str(step)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_child_environment(),
        )
        for _ in range(3)
    ]
    failures = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        failures += json.loads(out.strip().splitlines()[-1])
    assert failures == []  # was: "database is locked" from PRAGMA journal_mode=WAL, in 2 of 40 tries or more
    assert all((tmp_path / str(r) / "values.sqlite3").is_file() for r in range(rounds))


def test_results_say_where_they_came_from(servers):
    a, _ = servers
    with Client(a.base_url, KEY_A, cache=False) as client:
        series = client.series(*QUESTION[:2], "2025-01-01", "2025-01-02")
        frame = client.frame([QUESTION[0]], ["farm", "gov"], "2025-01-01", "2025-01-02", skip_inapplicable=True)
    for result in (series, frame):
        assert result.attrs["service"] == a.base_url and result.attrs["synthetic"] is False
        assert len(result.attrs["data_version"]) == 20  # the reference service's version
    assert settings.API_KEY_ENV not in str(series.attrs) and KEY_A not in json.dumps(series.attrs)
