"""Bad `metrics-kit serve` options and App(...) settings: one clear line and exit 2, before any build."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import ServerProcess

from metrics_kit.errors import ConfigurationError
from metrics_kit.server.dataset import open_service
from metrics_kit.server.http import run
from metrics_kit.server.http.app import App
from metrics_kit.spec.catalogue import Catalogue
from metrics_kit.tools.cli import FLAGS, said

DATA = Path(__file__).parents[1] / "http_data"


KEY = "serve-key-0123456789"  # serve refuses keys shorter than 12 characters


def serve(*args: str, keys: str = KEY, cache_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("METRICS_KIT_")}
    env.update(METRICS_KIT_API_KEYS=keys, METRICS_KIT_CACHE_DIR=str(cache_dir))
    command = [sys.executable, "-m", "metrics_kit", "serve", "--data", str(DATA), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize(
    ("args", "keys", "expected"),
    [
        (["--port", "70000"], KEY, "--port must be a whole number from 0 to 65535"),
        (["--port", "-1"], KEY, "--port must be a whole number from 0 to 65535"),
        (["--port", "http"], KEY, "--port must be a whole number from 0 to 65535"),
        (["--host", "not a host"], KEY, "--host must be an IP address"),
        (["--host", "0.0.0.0.0"], KEY, "not '0.0.0.0.0': it is not a valid IP address"),
        (["--lag", "two hours"], KEY, "--lag must be a duration from 0 to 366d, such as 2h"),
        (["--lag", "-1h"], KEY, "--lag must be a duration from 0 to 366d, such as 2h, 90m, 45s or 1d, not '-1h'"),
        (["--lag", "2h", "--watermark", "2025-07-01T00:00:00Z"], KEY, "--lag does not apply with --watermark"),
        (["--watermark", "2025-07-01"], KEY, "--watermark must be an ISO 8601 instant with its zone"),
        (["--rate-limit", "0"], KEY, "--rate-limit must be a number of requests per second above 0"),
        (["--rate-limit", "inf"], KEY, "--rate-limit must be a number of requests per second above 0"),
        (["--latency-ms", "-5"], KEY, "--latency-ms must be a number of milliseconds from 0 to 60,000"),
        (["--latency-ms", "nan"], KEY, "--latency-ms must be a number of milliseconds from 0 to 60,000"),
        (["--head-timeout", "0"], KEY, "--head-timeout must be a number of seconds above 0 and at most 600"),
        (["--chain-unit", "ETH"], KEY, "--chain-unit must be a lowercase identifier"),
        (["--chain-unit", ""], KEY, "--chain-unit must be a lowercase identifier"),
        ([], f"{KEY},caf\u00e9-secret", "API key 2 of 2 is not usable"),
        ([], "demo", "METRICS_KIT_API_KEYS: API key 1 of 1 is shorter than 12 characters (the key is not shown)"),
        ([], f"{KEY},2025,tiny", "API keys [2, 3] of 3 are shorter than 12 characters"),
    ],
)
def test_a_bad_serve_option_is_one_line_and_exit_2(tmp_path, args, keys, expected):
    done = serve(*args, keys=keys, cache_dir=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("metrics-kit: error: "), done.stderr
    assert expected in lines[0]
    assert "Traceback" not in done.stdout + done.stderr
    for key in keys.split(","):  # no key is shown, usable or not
        assert key not in done.stdout + done.stderr
    # Refused before the data set was read: nothing was built into the cache folder.
    assert not any(tmp_path.iterdir()), list(tmp_path.iterdir())


@pytest.fixture(scope="module")
def service():
    return open_service(DATA, Catalogue("sol"), log=lambda line: None)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"keys": []}, "at least one API key"),
        ({"keys": ["k1"], "rate_limit": 0}, "rate_limit must be"),
        ({"keys": ["k1"], "rate_limit": -3.0}, "rate_limit must be"),
        ({"keys": ["k1"], "latency_ms": -1}, "latency_ms must be"),
        ({"keys": ["k1"], "latency_ms": float("inf")}, "latency_ms must be"),
    ],
)
def test_app_refuses_bad_settings_when_made(service, kwargs, expected):
    keys = kwargs.pop("keys")
    with pytest.raises(ConfigurationError, match=expected):
        App(service, keys, **kwargs)


def test_app_accepts_good_settings(service):
    app = App(service, ["k1", "k2"], rate_limit=2, latency_ms=0)
    assert app.limiter is not None and app.limiter.rate == 2.0
    assert App(service, ["k1"]).limiter is None


def test_an_address_not_of_this_machine_blames_the_host_not_the_port():
    with pytest.raises(ConfigurationError, match="it is not an address of this machine") as caught:
        run.bind("192.0.2.1", 0)  # TEST-NET-1: never an address of this machine
    assert caught.value.argument == "host" and "port" not in str(caught.value)
    line = said(caught.value, FLAGS["serve"])  # what metrics-kit serve --host 192.0.2.1 says
    assert line.startswith("--host: cannot listen on 192.0.2.1") and line.endswith(
        "must be one of its addresses, such as 127.0.0.1, or 0.0.0.0 for all of them"
    )


def test_the_sample_query_asks_a_complete_period(tmp_path):
    """The curl line serve prints asks a period that is complete (the README's example is one): the
    last complete week of the data, not the partial week of its last day."""
    with ServerProcess(DATA, cache_dir=tmp_path) as server:
        tried = next(line for line in server.output if line.strip().startswith("curl "))
        url = re.search(r"'(http://[^']+)'", tried)
        assert url is not None and url[1].startswith(server.base_url + "/metrics?"), tried
        answer = server.session.get(url[1], headers={"x-api-key": server.key}, timeout=30)
    assert answer.status_code == 200 and answer.json()["complete"] is True, answer.text
    assert answer.json()["period_end"] == "2024-03-31"  # the last whole week of tests/http_data


def test_keys_set_to_blanks_are_said_to_be_blank_not_unset(tmp_path):
    """METRICS_KIT_API_KEYS set to blanks (an empty secret exported) serves a key made for the run,
    as when it is not set, and says which of the two it was."""
    with ServerProcess(DATA, cache_dir=tmp_path, env={"METRICS_KIT_API_KEYS": " , "}) as server:
        said = "".join(server.output)
    assert "METRICS_KIT_API_KEYS is set but blank (no key in it): generated an API key for this run" in said, said
    assert "No METRICS_KIT_API_KEYS set" not in said
