"""The client's two ways of asking the real reference service (``metrics-kit serve`` on the golden
fixture, 127.0.0.1): whole series (``GET /series``, which the service advertises in ``/projects``)
and one value per request (``whole_series=False``). Every pull of every metric, project and
granularity, over a range reaching past the data's coverage on both sides, gives the same frame,
the same ``attrs`` and the same errors both ways, and the whole-series way asks one request a series.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
import warnings
from pathlib import Path

import pandas as pd
import pytest
from support import ServerProcess

from metrics_kit import AuthenticationError, Client, FetchError

GOLDEN = Path(__file__).parents[1] / "golden" / "data"
# Coverage is 2024-12-28 .. 2025-02-01: a week either side is outside it (answered per value, 404).
START, END = "2024-12-21", "2025-02-08"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with ServerProcess(GOLDEN, "--access-log", cache_dir=tmp_path_factory.mktemp("golden-series")) as proc:
        yield proc


def _pull(server: ServerProcess, whole: bool, granularity: str, **options) -> tuple[pd.DataFrame, list[str]]:
    with Client(base_url=server.base_url, api_key=server.key, cache=False, whole_series=whole) as client:
        metrics = list(client.metrics().index)
        projects = list(client.projects().index)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            frame = client.frame(
                metrics,
                projects,
                START,
                END,
                granularity,
                shape="long",
                errors="coerce",
                skip_inapplicable=True,
                progress=False,
            )
    return frame, [f"{w.category.__name__}: {w.message}" for w in caught]


def _requests(server: ServerProcess, path: str) -> int:
    """How many requests to ``path`` the server's access log holds, once every request made so far is
    in it (a marker request is awaited there first)."""
    token = uuid.uuid4().hex
    assert server.get("/projects", {"mark": token}).status_code == 200
    deadline = time.monotonic() + 10
    while not any(token in line for line in list(server.output)):
        assert time.monotonic() < deadline, "the marker request never reached the access log"
        time.sleep(0.01)
    return sum(f"GET {path}" in line for line in list(server.output))


@pytest.mark.parametrize("granularity", ["1_day", "1_week", "1_month"])
def test_every_golden_value_and_error_is_the_same_both_ways(server, granularity):
    before = (_requests(server, "/series"), _requests(server, "/metrics"))
    whole, whole_warnings = _pull(server, True, granularity)
    asked = _requests(server, "/series") - before[0]
    asked_one_by_one = _requests(server, "/metrics") - before[1]
    per_value, per_value_warnings = _pull(server, False, granularity)
    pd.testing.assert_frame_equal(whole, per_value)
    assert whole.attrs == per_value.attrs
    assert whole_warnings == per_value_warnings
    # Every series was asked whole (one page each), and the points outside coverage failed as
    # /metrics fails them: date_out_of_coverage, in attrs["failed"] (the same both ways), without a
    # request each (the pages state the coverage).
    series = whole.groupby(["metric", "project"]).ngroups
    assert asked == series and asked_one_by_one == 0
    failed = whole.attrs.get("failed", [])
    assert all("date_out_of_coverage" in f["error"] for f in failed)
    assert bool(failed) == (granularity != "1_month")  # every month of the range holds a covered day
    assert whole["value"].notna().sum() > 0


def test_an_error_about_the_key_is_the_same_for_every_point_both_ways(server):
    errors = {}
    for whole in (True, False):
        with Client(base_url=server.base_url, api_key="not-the-key-0123456789", cache=False, whole_series=whole) as c:
            with pytest.raises(FetchError) as raised:
                c.series("swap_transaction_count", "swapx", "2024-12-30", "2025-01-05")
        errors[whole] = {point: (type(e), e.status, e.code, e.message) for point, e in raised.value.failures.items()}
        assert all(isinstance(e, AuthenticationError) for e in raised.value.failures.values())
    assert errors[True] == errors[False] and len(errors[True]) == 7


def test_whole_series_false_asks_one_value_per_request(server):
    before = (_requests(server, "/series"), _requests(server, "/metrics"))
    with Client(base_url=server.base_url, api_key=server.key, cache=False, whole_series=False) as client:
        client.series("swap_transaction_count", "swapx", "2024-12-30", "2025-01-05")
    after = (_requests(server, "/series"), _requests(server, "/metrics"))
    assert after[0] == before[0]
    assert after[1] - before[1] == 7


def test_fetch_asks_whole_series_unless_told_per_value(server, tmp_path):
    """`metrics-kit fetch` takes the library's path (one /series request for the series), and
    ``--per-value`` one /metrics request per point instead; the files are the same."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("METRICS_KIT_")}
    env |= {"METRICS_KIT_BASE_URL": server.base_url, "METRICS_KIT_API_KEY": server.key}
    asked = {}
    for how in ("whole", "per-value"):
        before = (_requests(server, "/series"), _requests(server, "/metrics"))
        flags = ["--per-value"] if how == "per-value" else []
        done = subprocess.run(
            [sys.executable, "-m", "metrics_kit", "fetch", "swap_active_users", "--project", "swapx"]
            + ["--start", "2025-01-01", "--end", "2025-01-14", "--no-cache", "--no-progress"]
            + ["--out", str(tmp_path / f"{how}.csv"), *flags],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        asked[how] = (_requests(server, "/series") - before[0], _requests(server, "/metrics") - before[1])
    assert asked == {"whole": (1, 0), "per-value": (0, 14)}
    assert (tmp_path / "whole.csv").read_text() == (tmp_path / "per-value.csv").read_text()
