"""Ctrl-C during a pull keeps every answer received (issue 27, item 6): a real SIGINT to a child
process pulling from a slow service, over HTTP (a stdlib vendor that holds some requests) and through
the in-process ASGI transport (an application that holds one), then a re-run that fetches only the rest.

The held requests fix what was received when the interrupt comes: the service answers the others at
once, and holds as many as the client has workers, so that no worker is free to receive more.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from vendor import Vendor, value_of

from metrics_kit import Client

KEY = "vendor-key-0123456789abcdef"
METRIC, PROJECT = "swap_transaction_count", "demoswap"
START = dt.date(2025, 1, 1)
DATES = [(START + dt.timedelta(days=i)).isoformat() for i in range(200)]  # one batch of the client's
RECEIVED = 99  # answers received before the interrupt
WORKERS = 16  # the client's default: requests in flight at once

HTTP_PULL = textwrap.dedent(
    """
    import sys
    from metrics_kit import Client
    base_url, key, metric, project, start, end = sys.argv[1:7]
    client = Client(base_url, key, timeout=120, progress=False)
    try:
        client.series(metric, project, start, end)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    else:
        print("finished", flush=True)
    client.close()  # waits for the held requests, which the parent releases once it read the line above
    """
)

ASGI_PULL = textwrap.dedent(
    """
    import datetime as dt, json, sys, threading, asyncio
    from urllib.parse import parse_qs
    from metrics_kit import Client
    from metrics_kit.client.transports import ASGITransport

    metric, project, start, end, held = sys.argv[1:6]
    asked, release = [], threading.Event()

    async def app(scope, receive, send):
        params = {k: v[0] for k, v in parse_qs(scope["query_string"].decode()).items()}
        if scope["path"] != "/metrics":
            status, body = 404, {"error": {"code": "not_found", "message": "no such path"}}
        else:
            asked.append(params["date"])
            if params["date"] == held and not release.is_set():
                print("held", flush=True)
                await asyncio.to_thread(release.wait, 60)
            day = dt.date.fromisoformat(params["date"])
            status = 200
            body = {**params, "period_start": params["date"], "period_end": params["date"], "unit": "count",
                    "value": day.timetuple().tm_yday, "complete": True}
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps(body).encode()})

    def client():
        return Client(transport=ASGITransport(app, "asgi-key-0123456789abcdef", "asgi://vendor"), progress=False)

    first = client()
    try:
        first.series(metric, project, start, end)
        said = "finished"
    except KeyboardInterrupt:
        said = "interrupted"
    release.set()
    first.close()
    before = len(asked)
    with client() as again:  # the same application and key: the same cache
        series = again.series(metric, project, start, end)
    print(json.dumps({
        "said": said,
        "from_cache": series.attrs["from_cache"],
        "asked_again": len(asked) - before,
        "values": series.tolist(),
    }), flush=True)
    """
)


def _child(script: str, *args: str, cache: Path) -> subprocess.Popen:
    """A child process running ``script``; its stderr goes to a file beside the cache folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("METRICS_KIT_")}
    env["METRICS_KIT_CACHE_DIR"] = str(cache)
    with open(cache.parent / "stderr.txt", "w") as stderr:
        return subprocess.Popen(
            [sys.executable, "-c", script, *args], stdout=subprocess.PIPE, stderr=stderr, text=True, env=env
        )


class Lines:
    """The child's stdout, a line at a time, each waited for at most ``timeout`` seconds."""

    def __init__(self, child: subprocess.Popen):
        self._lines: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, args=(child,), daemon=True)
        self._reader.start()

    def _read(self, child: subprocess.Popen) -> None:
        assert child.stdout is not None
        for line in child.stdout:
            self._lines.put(line.strip())
        self._lines.put("")  # the end

    def next(self, timeout: float = 60) -> str:
        return self._lines.get(timeout=timeout)

    def join(self) -> None:
        self._reader.join(timeout=10)


def _stop(child: subprocess.Popen, lines: Lines, cache: Path) -> str:
    """Wait for the child (killing it, by its PID, if it outlives the bound); its stderr."""
    try:
        child.wait(timeout=60)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait(timeout=10)
    lines.join()  # the child has exited: its stdout reaches its end
    assert child.stdout is not None
    child.stdout.close()
    return (cache.parent / "stderr.txt").read_text()


@pytest.mark.parametrize(
    "held",
    [
        # The answers come in the order asked: the client has taken each one when the interrupt comes.
        DATES[RECEIVED : RECEIVED + WORKERS],
        # The first request is held: the 99 answers after it have come but wait, in the pool, to be taken.
        [DATES[0], *DATES[RECEIVED + 1 : RECEIVED + WORKERS]],
    ],
    ids=["in-order", "first-held"],
)
def test_an_interrupted_http_pull_keeps_every_answer_received_and_the_rerun_fetches_the_rest(
    held, tmp_path, monkeypatch
):
    cache = tmp_path / "cache"
    with Vendor(held=held) as vendor:
        child = _child(HTTP_PULL, vendor.base_url, KEY, METRIC, PROJECT, DATES[0], DATES[-1], cache=cache)
        lines = Lines(child)
        try:
            vendor.wait_for(answered=RECEIVED, waiting=WORKERS)
            child.send_signal(signal.SIGINT)
            said = lines.next()
        finally:
            vendor.release()
            stderr = _stop(child, lines, cache)
        assert said == "interrupted", stderr
        assert child.returncode == 0, stderr
        monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(cache))
        before = vendor.requests()
        with Client(vendor.base_url, KEY, progress=False) as again:
            series = again.series(METRIC, PROJECT, DATES[0], DATES[-1])
        assert series.attrs["from_cache"] == RECEIVED  # was 0: only whole batches of 256 were written
        assert vendor.requests() - before == len(DATES) - RECEIVED
        assert series.tolist() == [value_of(d) for d in DATES]


def test_an_interrupted_asgi_pull_keeps_every_answer_received_and_the_rerun_fetches_the_rest(tmp_path):
    cache = tmp_path / "cache"
    child = _child(ASGI_PULL, METRIC, PROJECT, DATES[0], DATES[-1], DATES[RECEIVED], cache=cache)
    lines = Lines(child)
    try:
        assert lines.next() == "held"  # the application holds the 100th request; 99 answers have come
        child.send_signal(signal.SIGINT)
        said = lines.next()
    finally:
        stderr = _stop(child, lines, cache)
    assert said, stderr
    outcome = json.loads(said)
    assert outcome["said"] == "interrupted", stderr
    assert outcome["from_cache"] == RECEIVED  # was 0
    assert outcome["asked_again"] == len(DATES) - RECEIVED
    assert outcome["values"] == [value_of(d) for d in DATES]
