"""What a near-miss metric name costs the service, against a valid request.

    python benchmarks/did_you_mean.py [--requests 20000] [--seconds 5] [--http]

An unknown metric name is answered with the closest names (spec/ids.suggest: rapidfuzz over
the catalogue, with an LRU cache). This script measures requests per second for

* ``valid``: a valid query;
* ``near miss, repeated``: the same misspelt name every time (the cache's case);
* ``near miss, distinct``: a new misspelling every request (no cache hit: the worst case);
* ``far off``: a name close to nothing (answered with the pointer to /catalogue).

By default the application is called directly (ASGI, no socket), which is the service's own cost
and where the suggestion's cost shows; ``--http`` also runs a real ``metrics-kit serve`` on
127.0.0.1 and sends the same requests over one keep-alive connection (the figures then include
this Python client, which dominates). Each case is bounded by ``--requests`` and ``--seconds``.
The data set is ``tests/http_data`` (the suggestion's cost depends on the catalogue, not the data).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

DATA = common.REPO / "tests" / "http_data"
QUERY = {"project": "swapper", "granularity": "1_week", "date": "2024-03-20"}
_READY = re.compile(r"Serving (http://127\.0\.0\.1:\d+)")


def _misspell(name: str, rng: random.Random) -> str:
    """``name`` with two random letters changed: close to it, and almost never seen before."""
    letters = list(name)
    for _ in range(2):
        letters[rng.randrange(len(letters))] = rng.choice("abcdefghijklmnopqrstuvwxyz")
    return "".join(letters)


def _cases(names: tuple[str, ...], count: int, seed: int) -> dict[str, list[str]]:
    rng = random.Random(seed)
    distinct = []
    while len(distinct) < count:
        candidate = _misspell(rng.choice(names), rng)
        if candidate not in names:
            distinct.append(candidate)
    return {
        "valid": ["swap_active_users"],
        "near miss, repeated": ["swap_activ_users"],
        "near miss, distinct": distinct,
        "far off": ["zzzz"],
    }


def _measure(call: Callable[[str], int], names: list[str], requests: int, seconds: float) -> tuple[float, int, set]:
    """(requests per second, requests made, statuses) of ``call`` over ``names`` in turn, bounded."""
    statuses = set()
    started = time.perf_counter()
    deadline = started + seconds
    done = 0
    while done < requests and (done % 256 or time.perf_counter() < deadline):
        statuses.add(call(names[done % len(names)]))
        done += 1
    return done / (time.perf_counter() - started), done, statuses


def _in_process(cases: dict[str, list[str]], requests: int, seconds: float) -> dict[str, float]:
    from metrics_kit.server.dataset import open_service
    from metrics_kit.server.http.app import App
    from metrics_kit.spec.catalogue import Catalogue

    app = App(open_service(DATA, Catalogue("sol"), log=lambda _line: None), [common.BENCH_KEY])
    headers = [(b"x-api-key", common.BENCH_KEY.encode()), (b"accept", b"application/json")]
    status: list[int] = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        if message["type"] == "http.response.start":
            status.append(message["status"])

    async def drive(names: list[str], count: int) -> tuple[float, int, set]:
        # The scopes are made before the clock starts: only the application is timed.
        scopes = [
            {
                "type": "http",
                "method": "GET",
                "path": "/metrics",
                "query_string": urlencode({"metric_name": name, **QUERY}).encode(),
                "headers": headers,
            }
            for name in names[:count]
        ]
        started = time.perf_counter()
        deadline = started + seconds
        done = 0
        while done < count and (done % 256 or time.perf_counter() < deadline):
            await app(scopes[done % len(scopes)], receive, send)
            done += 1
        rate = done / (time.perf_counter() - started)
        statuses = set(status)
        status.clear()
        return rate, done, statuses

    loop = asyncio.new_event_loop()
    try:
        return _report(
            "in process (ASGI, no socket)",
            cases,
            lambda names, count: loop.run_until_complete(drive(names, count)),
            requests,
        )
    finally:
        loop.close()


def _over_http(cases: dict[str, list[str]], requests: int, seconds: float, cache: str) -> dict[str, float]:
    env = common.child_env(cache)
    command = common.metrics_kit("serve", "--data", str(DATA), "--host", "127.0.0.1", "--port", "0")
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        base = None
        deadline = time.monotonic() + 120
        while base is None and time.monotonic() < deadline:
            line = server.stdout.readline()
            if not line:
                break
            match = _READY.search(line)
            base = match.group(1) if match else None
        if base is None:
            raise SystemExit("the server did not start")
        host, port = base.removeprefix("http://").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        headers = {"x-api-key": common.BENCH_KEY, "Accept": "application/json"}

        def call(name: str) -> int:
            connection.request("GET", "/metrics?" + urlencode({"metric_name": name, **QUERY}), headers=headers)
            response = connection.getresponse()
            response.read()
            return response.status

        try:
            return _report(
                "over HTTP (one keep-alive connection, Python client)",
                cases,
                lambda names, count: _measure(call, names, count, seconds),
                requests,
            )
        finally:
            connection.close()
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


def _report(title: str, cases: dict[str, list[str]], measure, requests: int) -> dict[str, float]:
    """Run ``measure(names, count)`` -> (req/s, requests, statuses) for each case and print a table."""
    print(f"\n{title}")
    rates, rows = {}, []
    for case, names in cases.items():
        measure(names, min(requests, 1000))  # warm-up
        rate, done, statuses = measure(names, requests)
        rates[case] = rate
        rows.append([case, f"{rate:,.0f}", f"{done:,}", ",".join(map(str, sorted(statuses)))])
    for row, case in zip(rows, cases, strict=True):
        row.append(f"{rates['valid'] / rates[case]:.2f}x")
    print(common.table(["case", "req/s", "requests", "statuses", "cost vs valid"], rows))
    return rates


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20_000, help="per case (default 20,000)")
    parser.add_argument("--seconds", type=float, default=5.0, help="at most this long per case (default 5)")
    parser.add_argument("--http", action="store_true", help="also over HTTP against a real server")
    args = parser.parse_args(argv)
    if not 1 <= args.requests <= 1_000_000 or not 0 < args.seconds <= 60:
        parser.error("--requests must be 1 to 1,000,000 and --seconds above 0, at most 60")
    cache = tempfile.mkdtemp(prefix="mk-dym-")
    os.environ["METRICS_KIT_CACHE_DIR"] = cache
    try:
        from metrics_kit.spec.catalogue import Catalogue

        common.print_machine(common.machine())
        cases = _cases(Catalogue("sol").canonical_names, args.requests, seed=1)
        _in_process(cases, args.requests, args.seconds)
        if args.http:
            _over_http(cases, args.requests, args.seconds, cache)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
