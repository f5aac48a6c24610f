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
import time
from concurrent.futures import CancelledError
from pathlib import Path

import pytest
from faults import FaultServer, status
from vendor import Vendor, value_of

from metrics_kit import Client
from metrics_kit.client.transports import HTTPTransport
from metrics_kit.client.transports._base import START_WINDOW, Stopped
from metrics_kit.errors import ClientClosedError

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
    """The child's stdout, a line at a time, each waited for at most ``timeout`` seconds (none within
    it: a line that says so, so that the test's assertion shows the child's stderr)."""

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
        try:
            return self._lines.get(timeout=timeout)
        except queue.Empty:
            return f"(no line within {timeout:g} s)"

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


class HeldSleep:
    """A clock and a sleep for a transport's pacer: each sleep is held until ``go`` is set, then moves
    the clock on by what it was asked. ``wait_for(n)``: until ``n`` threads sleep (waiting their turn)."""

    def __init__(self) -> None:
        self.now, self.sleeping = 0.0, 0
        self.go = threading.Event()
        self._changed = threading.Condition()

    def clock(self) -> float:
        with self._changed:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self._changed:
            self.sleeping += 1
            self._changed.notify_all()
        assert self.go.wait(60)
        with self._changed:
            self.now += seconds

    def wait_for(self, sleeping: int) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: self.sleeping == sleeping, 60), f"{self.sleeping} sleeping"


def test_a_request_waiting_for_its_turn_when_the_pull_is_interrupted_is_never_sent():
    # A rate limit of one request a second, on a clock that moves only when a sleep is let go, and two
    # threads: the first request goes at once (and is held by the service), the second waits for its
    # turn in the pacer, and the third for a thread, when the batch is stopped as an interrupt stops it
    # (fetching.run calls received()).
    pace = HeldSleep()
    with Vendor(held=DATES[:1]) as vendor:
        transport = HTTPTransport(vendor.base_url, KEY, pool_size=2, rate_limit=1.0, clock=pace.clock, sleep=pace.sleep)
        answers = transport.answers([("/metrics", {**POINT, "date": date}) for date in DATES[:3]])
        taking = threading.Thread(target=_take_all, args=(answers,))
        try:
            taking.start()  # the caller's thread, waiting for the first answer
            vendor.wait_for(answered=0, waiting=1)
            pace.wait_for(sleeping=1)
            assert answers.received() == []  # the interrupt: no answer had come
        finally:
            pace.go.set()
            vendor.release()
            taking.join(timeout=60)
            transport.close()  # every thread of the pool has ended: nothing more is sent
        assert vendor.requests() == 1  # was 2: the one waiting its turn was sent after the interrupt


POINT = {"metric_name": METRIC, "project": PROJECT, "granularity": "1_day"}


def _take_all(answers) -> None:
    try:
        list(answers)
    except (Stopped, CancelledError, ClientClosedError):  # requests of a stopped batch, never sent, have no answer
        pass


# Every answer says none are left until a reset 100 s away (within retry_deadline, so it is waited).
HOLD = {"RateLimit-Limit": "100", "RateLimit-Remaining": "0", "RateLimit-Reset": "100"}
BOUND = 30  # seconds a stopped pull has to end: far less than the hold it was waiting out


def test_ctrl_c_during_a_stated_hold_ends_metrics_kit_fetch_at_once_and_sends_nothing_more(tmp_path):
    # The client's first requests (as many as its first window) are answered with the hold; every
    # other waits it out. Each waited in one sleep that the interrupt did not end: the command hung
    # for the whole hold.
    env = {k: v for k, v in os.environ.items() if not k.startswith("METRICS_KIT_")}
    with Vendor(stated=HOLD) as vendor:
        env |= {"METRICS_KIT_BASE_URL": vendor.base_url, "METRICS_KIT_API_KEY": KEY}
        command = [sys.executable, "-m", "metrics_kit", "fetch", METRIC, "--project", PROJECT, "--start", DATES[0]]
        command += ["--end", DATES[19], "--no-cache", "--no-progress", "--out", str(tmp_path / "out.csv")]
        with open(tmp_path / "stderr.txt", "w") as stderr:
            child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            _answered_all(vendor)
            child.send_signal(signal.SIGINT)
            code = child.wait(timeout=BOUND)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=10)
        said = (tmp_path / "stderr.txt").read_text()
        assert code == 130 and "interrupted" in said, said
        # Only the first window's requests were sent (START_WINDOW, and one more for the clean answer
        # to /projects), if that: each before the first answer, and its hold, came; none after.
        assert 1 <= vendor.requests() <= START_WINDOW + 1
    assert not (tmp_path / "out.csv").exists()


def _answered_all(vendor: Vendor) -> None:
    """Until /metrics requests came and were all answered (the hold came with each)."""
    until = time.monotonic() + BOUND
    while not 1 <= vendor.answered == vendor.requests():
        assert time.monotonic() < until, f"{vendor.answered} answered of {vendor.requests()}"
        time.sleep(0.01)


def test_close_during_a_stated_hold_returns_at_once_and_sends_nothing_more():
    with Vendor(stated=HOLD) as vendor:
        transport = HTTPTransport(vendor.base_url, KEY, pool_size=4)
        answers = transport.answers([("/metrics", {**POINT, "date": date}) for date in DATES[:10]])
        taking = threading.Thread(target=_take_all, args=(answers,), daemon=True)
        taking.start()
        _answered_all(vendor)
        closing = threading.Thread(target=transport.close, daemon=True)
        closing.start()
        closing.join(BOUND)
        taking.join(BOUND)
        assert not closing.is_alive() and not taking.is_alive()
        assert 1 <= vendor.requests() <= START_WINDOW  # the first window's, if that: none after the hold


def test_a_stopped_batch_ends_a_retry_after_wait_at_once_and_sends_no_retry():
    with FaultServer() as server:
        server.always("/metrics", status(429, headers={"Retry-After": "100"}))
        transport = HTTPTransport(server.base_url, KEY, pool_size=2, retries=3)
        answers = transport.answers([("/metrics", {**POINT, "date": date}) for date in DATES[:2]])
        taking = threading.Thread(target=_take_all, args=(answers,), daemon=True)
        taking.start()
        until = time.monotonic() + BOUND
        while server.attempts("/metrics") < 2:
            assert time.monotonic() < until, "the two requests never came"
            time.sleep(0.01)
        answers.received()  # the interrupt stops the batch: the retries told to wait 100 s are not sent
        taking.join(BOUND)
        closing = threading.Thread(target=transport.close, daemon=True)
        closing.start()
        closing.join(BOUND)
        assert not taking.is_alive() and not closing.is_alive()
        assert server.attempts("/metrics") == 2
