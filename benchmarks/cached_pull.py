"""A fresh process whose values are all cached: what a pull costs when only the data version is asked.

    python benchmarks/cached_pull.py --rounds 5 [--days 365] [--json FILE]

Figures and what they mean: docs/performance.md, "A fully cached pull in a fresh process".

Starts ``metrics-kit serve --latency-ms 50`` on 127.0.0.1 (a port picked by the OS) over the
synthetic demo data (built once into a private cache folder under ``--work``), then runs, each in
its own child process (a fresh interpreter, timed inside after the imports):

1. cold: ``Client(base_url, key).series(...)`` of ``--days`` daily values into an empty value cache;
2. warm, ``--rounds`` times: the same pull (``Client(...)`` and ``series(...)``; ``close()`` is
   timed apart) in a fresh process with every value cached. A client trusts only a data version it
   has seen itself, so it asks the service's version once (one ``GET /projects``, which
   ``--latency-ms`` does not delay: it delays ``/metrics`` and ``/explain``; against a remote
   service, add one round trip) and then reads every value from the cache.

The child counts every request its HTTP stack sends (a counting wrapper around urllib3's pool, in
the child only). Every child is bounded by ``--timeout`` and the server is stopped by its PID.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BENCH_KEY, DEFAULT_WORK, child_env, metrics_kit, run_child, table  # noqa: E402

READY = re.compile(r"Serving (http://127\.0\.0\.1:\d+)")
METRIC, PROJECT = "reward_staking_in_sol", "demochain"


def child(spec: dict) -> dict:
    """One pull in this (fresh) process: its time after the imports, and the requests it sent."""
    started = time.perf_counter()
    import urllib3.connectionpool

    import metrics_kit as mk

    imported = time.perf_counter()
    sent: list[str] = []
    urlopen = urllib3.connectionpool.HTTPConnectionPool.urlopen

    def counting(self, method, url, *args, **kwargs):  # type: ignore[no-untyped-def]
        sent.append(url.split("?")[0])  # every request, whichever path the transport takes
        return urlopen(self, method, url, *args, **kwargs)

    urllib3.connectionpool.HTTPConnectionPool.urlopen = counting  # type: ignore[method-assign]
    begin = time.perf_counter()
    client = mk.Client(spec["base_url"], BENCH_KEY, version_ttl=spec["version_ttl"])
    series = client.series(METRIC, PROJECT, "2024-01-01", spec["end"])
    seconds = time.perf_counter() - begin
    client.close()  # apart: the cache file's last close checkpoints its log, after the answer is out
    return {
        "import_s": imported - started,
        "close_s": time.perf_counter() - begin - seconds,
        "pull_s": seconds,
        "values": len(series),
        "from_cache": series.attrs["from_cache"],
        "requests": sent,
    }


def start_server(work: Path, timeout: float) -> tuple[subprocess.Popen, str]:
    cmd = metrics_kit("serve", "--host", "127.0.0.1", "--port", "0", "--latency-ms", "50")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env(work))
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        match = READY.search(line)
        if match:
            return proc, match.group(1)
    stop(proc)
    raise SystemExit("the server did not start")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def run(spec: dict, cache: Path, timeout: float) -> dict:
    cmd = [sys.executable, __file__, "child", json.dumps(spec)]
    done = run_child(cmd, child_env(cache), timeout)
    if done.returncode != 0:
        raise SystemExit(f"child failed ({done.returncode}):\n{done.output}")
    result = json.loads(done.output.strip().splitlines()[-1])
    result["process_s"] = done.seconds
    return result


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "child":
        print(json.dumps(child(json.loads(argv[1]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, choices=range(1, 21), metavar="1..20")
    parser.add_argument("--days", type=int, default=365, choices=range(1, 732), metavar="1..731")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds for each child and the server start")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    end = (dt.date(2024, 1, 1) + dt.timedelta(days=args.days - 1)).isoformat()
    server_cache = args.work / "cached-pull-server"
    client_cache = args.work / "cached-pull-client"
    (client_cache / "values.sqlite3").unlink(missing_ok=True)
    proc, base_url = start_server(server_cache, args.timeout)
    try:
        spec = {"base_url": base_url, "end": end, "version_ttl": 60.0}
        cold = run(spec, client_cache, args.timeout)
        warm = [run(spec, client_cache, args.timeout) for _ in range(args.rounds)]
    finally:
        stop(proc)

    def line(name: str, results: list[dict]) -> list:
        pulls = [r["pull_s"] * 1000 for r in results]
        sent = sorted({len(r["requests"]) for r in results})
        return [
            name,
            len(results),
            f"{statistics.median(pulls):.1f}",
            f"{max(pulls):.1f}",
            f"{statistics.median(r['import_s'] for r in results) * 1000:.0f}",
            f"{statistics.median(r['close_s'] for r in results) * 1000:.1f}",
            "/".join(map(str, sent)),
            f"{min(r['from_cache'] for r in results)}/{results[0]['values']}",
        ]

    headers = [
        "fresh process",
        "runs",
        "pull ms (median)",
        "pull ms (max)",
        "import ms",
        "close ms",
        "requests",
        "from cache",
    ]
    print(f"{args.days} daily values of {METRIC} for {PROJECT}, behind --latency-ms 50 at {base_url}")
    print(table(headers, [line("cold", [cold]), line("warm", warm)]))
    # What a warm pull must be: the version asked once, every value from the cache.
    ok = all(r["requests"] == ["/projects"] and r["from_cache"] == r["values"] for r in warm)
    print("warm: one request (/projects) and every value from the cache in every run:", "yes" if ok else "NO")
    if args.json:
        args.json.write_text(json.dumps({"cold": cold, "warm": warm}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
