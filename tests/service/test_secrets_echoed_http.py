"""A real HTTP vendor (a stdlib server on 127.0.0.1) that repeats the key it was sent, in its body,
its WWW-Authenticate and a redirect's Location: the key is never in the exception, its verbose
traceback, a warning, attrs, a Parquet file or `metrics-kit fetch`'s output. And a short key that is
also a project or a date is never a reason to refuse a request; the client says once that it
cannot mask such a key reliably."""

from __future__ import annotations

import base64
import json
import logging
import os
import subprocess
import sys
import traceback
import warnings
from pathlib import Path

import pandas as pd
import pytest
from faults import FaultServer, echo, status

import metrics_kit as mk

KEY = "sk_live_51HxEchoedBackByTheVendor0123"
COUNT = "swap_transaction_count"
# A vendor's 401: the key as it came, and percent-encoded (the "/" before it too), in its message.
ECHOING_401 = '{"error": {"code": "invalid_api_key", "message": "Invalid API key: {key} (sent as %2F{key})"}}'
CHALLENGE = 'Bearer realm="metrics", error="invalid_token", error_description="{key} is not valid"'


def verbose(error: BaseException) -> str:
    return "".join(traceback.TracebackException.from_exception(error, capture_locals=True).format())


def child_environment(cache: Path) -> dict[str, str]:
    kept = {k: v for k, v in os.environ.items() if not k.startswith("METRICS_KIT_")}
    return {**kept, "METRICS_KIT_CACHE_DIR": str(cache)}


@pytest.fixture
def vendor():
    with FaultServer() as server:
        server.always("/projects", status(404))
        server.always("/metrics", echo(401, ECHOING_401, headers={"WWW-Authenticate": CHALLENGE}))
        yield server


def test_a_vendor_that_echoes_the_key_never_gets_it_shown(vendor, tmp_path):
    with mk.Client(vendor.base_url, KEY, cache=False, retries=0, progress=False) as client:
        with pytest.raises(mk.AuthenticationError) as one:
            client.value(COUNT, "demoswap", "1_day", "2025-01-01")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            series = client.series(COUNT, "demoswap", "2025-01-01", "2025-01-03", errors="coerce")
    assert vendor.requests[0].headers["x-api-key"] == KEY  # it was sent the key, and said it back
    text = str(one.value)
    assert "Invalid API key: *** (sent as %2F***)" in text and 'error_description="*** is not valid"' in text, text
    saved = tmp_path / "series.parquet"
    series.to_frame().to_parquet(saved)
    shown = [text, verbose(one.value), *(str(w.message) for w in caught), json.dumps(series.attrs)]
    shown.append(saved.read_bytes().decode("latin-1"))
    assert caught and len(series.attrs["failed"]) == 3
    assert all(KEY not in part for part in shown), [part for part in shown if KEY in part]
    assert pd.read_parquet(saved).attrs["failed"] == series.attrs["failed"]


def test_a_redirect_is_not_followed_and_its_location_is_masked(vendor):
    vendor.script("/metrics", echo(302, "", headers={"Location": f"{vendor.base_url}/v2/{{key}}/metrics?key={{key}}"}))
    with mk.Client(vendor.base_url, KEY, cache=False, retries=0) as client:
        with pytest.raises(mk.APIError) as caught:
            client.value(COUNT, "demoswap", "1_day", "2025-01-01")
    text = str(caught.value)
    assert caught.value.status == 302 and "not followed" in text and f"'{vendor.base_url}/v2/***/metrics?...'" in text
    assert KEY not in text and KEY not in verbose(caught.value)
    assert vendor.attempts("/metrics") == 1  # asked once, never at the address it pointed to


def test_metrics_kit_fetch_never_prints_an_echoed_key(vendor, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "metrics_kit", "fetch", COUNT, "--project", "demoswap"]
        + ["--start", "2025-01-01", "--end", "2025-01-02", "--base-url", vendor.base_url]
        + ["--out", str(tmp_path / "out.csv"), "--no-cache"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**child_environment(tmp_path / "cache"), "METRICS_KIT_API_KEY": KEY},
    )
    assert done.returncode == 2 and "401" in done.stderr and "Invalid API key: ***" in done.stderr, done.stderr
    assert KEY not in done.stderr + done.stdout
    coerced = subprocess.run(
        [sys.executable, "-m", "metrics_kit", "fetch", COUNT, "--project", "demoswap", "--errors", "coerce"]
        + ["--start", "2025-01-01", "--end", "2025-01-02", "--base-url", vendor.base_url]
        + ["--out", str(tmp_path / "out.csv"), "--no-cache"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**child_environment(tmp_path / "cache"), "METRICS_KIT_API_KEY": KEY},
    )
    assert coerced.returncode == 0 and "warning" in coerced.stderr, coerced.stderr
    assert KEY not in coerced.stderr + coerced.stdout + (tmp_path / "out.csv").read_text()


@pytest.mark.parametrize(("key", "project"), [("2025", "demoswap"), ("demo", "demo"), ("swap", "demoswap")])
def test_a_short_key_in_a_project_or_a_date_is_sent_and_said_once(key, project, caplog):
    with FaultServer() as server:
        server.always("/projects", status(404))
        server.always("/metrics", status(200, {"value": 7}))
        caplog.set_level(logging.WARNING, logger="metrics_kit.transport")
        with mk.Client(server.base_url, key, cache=False, progress=False) as client:
            series = client.series(COUNT, project, "2025-01-01", "2025-01-03")
            assert client.value(COUNT, project, "1_day", "2025-01-02") == 7
        assert series.tolist() == [7, 7, 7]
        assert all(r.headers["x-api-key"] == key for r in server.requests)
        assert all(key not in r.target.partition("?")[0] for r in server.requests)  # the key is in no path
    said = [r.getMessage() for r in caplog.records if "cannot be masked reliably" in r.getMessage()]
    assert len(said) == 1 and "fewer than 12 characters" in said[0] and key not in said[0].split("characters")[0]


def test_a_long_key_in_the_parameters_is_still_refused(caplog):
    # A key long enough to be told apart is no coincidence in a URL: it was put there.
    with FaultServer() as server:
        server.always("/projects", status(404))
        with mk.Client(server.base_url, "project-key-012345", cache=False) as client:
            with pytest.raises(mk.ValidationError, match="must not be part of the path or the parameters"):
                client.series(COUNT, "project-key-012345", "2025-01-01", "2025-01-02")
        assert server.attempts("/metrics") == 0


def test_a_vendor_that_echoes_the_key_upper_cased_or_in_base64_never_gets_it_shown(tmp_path):
    # D2 of the hostile round on issue 27: "INVALID API KEY: SK_LIVE_..." showed the key up to case.
    said = '{"error": {"code": "invalid_api_key", "message": "INVALID API KEY: {KEY}", "param": "{key64}"}}'
    with FaultServer() as server:
        server.always("/projects", status(404))
        server.always("/metrics", echo(401, said, headers={"WWW-Authenticate": 'Basic realm="{KEY}"'}))
        with mk.Client(server.base_url, KEY, cache=False, retries=0, progress=False) as client:
            with pytest.raises(mk.AuthenticationError) as one:
                client.value(COUNT, "demoswap", "1_day", "2025-01-01")
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                series = client.series(COUNT, "demoswap", "2025-01-01", "2025-01-03", errors="coerce")
        done = subprocess.run(
            [sys.executable, "-m", "metrics_kit", "fetch", COUNT, "--project", "demoswap", "--errors", "coerce"]
            + ["--start", "2025-01-01", "--end", "2025-01-02", "--base-url", server.base_url]
            + ["--out", str(tmp_path / "out.csv"), "--no-cache"],
            capture_output=True,
            text=True,
            timeout=120,
            env={**child_environment(tmp_path / "cache"), "METRICS_KIT_API_KEY": KEY},
        )
    error = one.value
    assert "INVALID API KEY: ***" in str(error) and 'realm="***"' in str(error), str(error)
    saved = tmp_path / "series.parquet"
    series.to_frame().to_parquet(saved)
    shown = [str(error), repr(error), repr(error.args), str(error.param), verbose(error), json.dumps(series.attrs)]
    shown += [str(w.message) for w in caught] + [saved.read_bytes().decode("latin-1"), done.stderr, done.stdout]
    assert caught and len(series.attrs["failed"]) == 3 and done.returncode == 0, done.stderr
    assert not [part for part in shown if any(form in part.lower() for form in _lowered_forms())]


def _lowered_forms() -> list[str]:
    """KEY in any case, and the middle of its base64 (user:KEY), lower-cased: made here, not in the
    test's frame, whose locals the verbose traceback shows."""
    return [KEY.lower(), base64.b64encode(b"user:" + KEY.encode()).decode()[8:-4].lower()]


PROJECTS = (
    '{"data_version": "{key}", "owner": "{key}", "projects": [{"project": "demoswap", "kinds": ["dex"], '
    '"regular_pools": true, "note": "issued to key {key}"}]}'
)


def test_a_key_echoed_as_the_data_version_or_in_projects_is_in_no_output_nor_the_cache_file(tmp_path, monkeypatch):
    # D1 and D3 of the hostile round on issue 27: X-Data-Version and /projects that repeat the key put
    # it in attrs["data_version"], UnconfirmedDataWarning, fetch's stderr and the cache file.
    cache = tmp_path / "cache"
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(cache))
    with FaultServer() as server:
        server.always("/projects", echo(200, PROJECTS, headers={"X-Data-Version": "{key}"}))
        server.always("/metrics", echo(200, '{"value": 5, "note": "{key}"}', headers={"X-Data-Version": "{key}"}))
        with mk.Client(server.base_url, KEY, retries=0, progress=False) as client:
            series = client.series(COUNT, "demoswap", "2025-01-01", "2025-01-03")
        # The vendor fails (a 500, not retried): the values as last seen, their version unconfirmed, said so.
        server.always("/projects", status(500))
        server.always("/metrics", status(500))
        with mk.Client(server.base_url, KEY, retries=0, progress=False, version_ttl=0) as client:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                cached = client.series(COUNT, "demoswap", "2025-01-01", "2025-01-03")
        done = subprocess.run(
            [sys.executable, "-m", "metrics_kit", "fetch", COUNT, "--project", "demoswap"]
            + ["--start", "2025-01-01", "--end", "2025-01-03", "--base-url", server.base_url]
            + ["--out", str(tmp_path / "out.csv")],
            capture_output=True,
            text=True,
            timeout=120,
            env={**child_environment(cache), "METRICS_KIT_API_KEY": KEY},
        )
    assert series.tolist() == cached.tolist() == [5, 5, 5] and series.attrs["data_version"].startswith("***#")
    said = [str(w.message) for w in caught if issubclass(w.category, mk.UnconfirmedDataWarning)]
    assert said and "'***#" in said[0], said
    assert done.returncode == 0 and "confirm its data version" in done.stderr and "'***#" in done.stderr, done.stderr
    saved = tmp_path / "series.parquet"
    series.to_frame().to_parquet(saved)
    shown = [json.dumps(series.attrs), json.dumps(cached.attrs), *said, done.stderr, done.stdout]
    shown += [saved.read_bytes().decode("latin-1")] + [p.read_bytes().decode("latin-1") for p in cache.iterdir()]
    assert [p.name for p in cache.iterdir()] and not [part for part in shown if KEY.lower() in part.lower()]


def test_a_period_with_the_key_after_its_date_is_refused_and_never_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path / "cache"))
    with FaultServer() as server:
        server.always("/projects", status(404))
        server.always("/metrics", echo(200, '{"value": 5, "period_start": "2025-01-01{key}"}'))
        with mk.Client(server.base_url, KEY, retries=0, progress=False) as client:
            with pytest.raises(mk.ResponseFormatError, match="period_start that is neither an ISO date") as caught:
                client.value(COUNT, "demoswap", "1_day", "2025-01-01")
    assert "'2025-01-01***'" in str(caught.value) and KEY not in verbose(caught.value)
    assert all(KEY.encode() not in p.read_bytes() for p in (tmp_path / "cache").iterdir())
