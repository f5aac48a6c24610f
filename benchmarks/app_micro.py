"""The application's own cost per request, without sockets: metrics_kit's App vs the trivial app.

    python benchmarks/app_micro.py --scale 1 [--requests 100000] [--profile]

Calls each ASGI application directly in one event loop with the scope uvicorn would pass (the
same rotating /metrics queries as ``serve.py``, x-api-key and Accept headers) and reports the
microseconds per request. The difference from the HTTP benchmark is what uvicorn, httptools,
uvloop and the kernel add. ``--profile`` adds a cProfile of the /metrics calls.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import datetime as dt
import os
import pstats
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402


def _queries(aggregates, catalogue, count: int, seed: int) -> list[bytes]:
    first, last = aggregates.coverage
    days = (last - first).days + 1
    combos = [
        (p, m.name)
        for p, info in sorted(aggregates.projects.items())
        for m in catalogue.applicable(info["kinds"], info["regular_pools"])
    ]
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        project, metric = rng.choice(combos)
        granularity = rng.choice(("1_day", "1_week", "1_month"))
        date = first + dt.timedelta(days=rng.randrange(days))
        out.append(f"metric_name={metric}&project={project}&granularity={granularity}&date={date.isoformat()}".encode())
    return out


async def _drive(app, scopes: list[dict], n: int) -> tuple[float, int]:
    statuses = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    started = time.perf_counter()
    for i in range(n):
        await app(scopes[i % len(scopes)], receive, send)
    elapsed = time.perf_counter() - started
    return elapsed, sum(1 for s in statuses if s != 200)


def _scope(path: str, query: bytes) -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
        "scheme": "http",
        "method": "GET",
        "root_path": "",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "headers": [
            (b"host", b"127.0.0.1:8000"),
            (b"x-api-key", common.BENCH_KEY.encode()),
            (b"accept", b"application/json"),
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    if not 1 <= args.requests <= 5_000_000:
        parser.error("--requests must be between 1 and 5,000,000")
    common.ensure_data(args.work, args.scale, timeout=1800)
    scratch = tempfile.mkdtemp(prefix="mk-micro-", dir=args.work)
    os.environ["METRICS_KIT_CACHE_DIR"] = scratch
    try:
        return _run(args)
    finally:
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)


def _run(args) -> int:
    import trivial_app

    from metrics_kit.server.building import build as aggregates
    from metrics_kit.server.http.app import App
    from metrics_kit.server.serving.service import MetricService
    from metrics_kit.spec.catalogue import default_catalogue

    catalogue = default_catalogue(None)
    built = aggregates.load_or_build(common.data_dir(args.work, args.scale), catalogue, log=lambda *_: None)
    app = App(MetricService(built, catalogue), [common.BENCH_KEY])
    metrics_scopes = [_scope("/metrics", q) for q in _queries(built, catalogue, 2000, 1)]
    trivial_scopes = [_scope("/", b"")]
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    results = {}
    for name, target, scopes in (
        ("trivial", trivial_app.app, trivial_scopes),
        ("/metrics", app, metrics_scopes),
        ("trivial ", trivial_app.app, trivial_scopes),
        ("/metrics ", app, metrics_scopes),
    ):
        runner(_drive(target, scopes, min(args.requests, 5000)))  # warm-up
        elapsed, bad = runner(_drive(target, scopes, args.requests))
        results.setdefault(name.strip(), []).append(1e6 * elapsed / args.requests)
        print(
            f"{name.strip():>8}: {1e6 * elapsed / args.requests:6.1f} us per request "
            f"({args.requests:,} calls, non-200 {bad})",
            flush=True,
        )
    best = {k: min(v) for k, v in results.items()}
    print(
        f"best of two: trivial {best['trivial']:.1f} us, /metrics {best['/metrics']:.1f} us, "
        f"difference /metrics - trivial: {best['/metrics'] - best['trivial']:+.1f} us per request"
    )
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        runner(_drive(app, metrics_scopes, args.requests))
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(18)
    return 0


if __name__ == "__main__":
    sys.exit(main())
