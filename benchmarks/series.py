"""Whole-series and pacing benchmark (issue 29): the client's two ways of asking, and its pacing.

    python benchmarks/series.py [--rounds 3] [--pacing-requests 800] [--json FILE]

Figures and what they mean: docs/performance.md, "Whole series and pacing".

Starts ``metrics-kit serve`` children on 127.0.0.1 (ports picked by the OS) over the synthetic demo
data set (generated and built once into a private cache folder under ``--work``), and measures,
every pull in a child process of its own (timed inside it, after the imports; its peak RSS is its
own ``ru_maxrss``), with an empty value cache (cold):

1. the panel of benchmarks/client.py (50 applicable project-metric pairs x 365 days, 18,250
   points) from ``serve --latency-ms 50``: whole series (``GET /series``) and one value per request
   (``whole_series=False``), in the same run. Goals: whole series at most 1.5 s, and at least 30x
   the per-value pull;
2. the same panel over loopback (no latency): whole series at most 1.0 s (per value for information);
3. pacing, one value per request: N requests (default 800) against ``serve --rate-limit 20``, whose
   answers state the key's budget (RateLimit-* headers), then against the same service with
   ``--no-rate-limit-headers``; the 429 answers counted by the server (its access log). Goals: with
   headers, at most 1.1 x N/R seconds and at most 1% of answers 429; without, at least 0.8 R
   requests a second with at most 5% of answers 429;
4. a pull of 1,000,000 points in one call against a service that answers whole series: the client's
   time and peak RSS (the service is a function answering ``/series`` pages in the child itself, a
   MockTransport, so that the figure is the client's alone).

Every request goes to 127.0.0.1; every child is bounded by ``--timeout`` and every process started
here is stopped by its PID.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
from client import PANEL_METRICS, PANEL_POINTS, PANEL_PROJECTS  # noqa: E402  (the same panel)
from serve import Server  # noqa: E402

HERE = Path(__file__).resolve()
LATENCY_MS = 50.0
PANEL_START, PANEL_END = "2025-01-01", "2025-12-31"
RATE = 20  # the server's per-key limit in the pacing runs
MILLION = 1_000_000
_RESULT = "RESULT "

GOAL_REMOTE_S, GOAL_RATIO, GOAL_LOOPBACK_S = 1.5, 30.0, 1.0
GOAL_STATED_FACTOR, GOAL_STATED_429 = 1.1, 0.01
GOAL_UNSTATED_SHARE, GOAL_UNSTATED_429 = 0.8, 0.05


# -- the child -----------------------------------------------------------------------------------


def _rss_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def child(spec: dict) -> dict:
    import warnings

    import metrics_kit as mk

    warnings.simplefilter("ignore")
    kind = spec["kind"]
    if kind == "million":
        return _million()
    with mk.Client(spec["base_url"], common.BENCH_KEY, whole_series=spec["whole"], progress=False) as client:
        began = time.perf_counter()
        if kind == "panel":
            frame = client.frame(
                PANEL_METRICS, PANEL_PROJECTS, PANEL_START, PANEL_END, shape="long", skip_inapplicable=True
            )
        else:  # pacing: spec["points"] values of two series, one request each
            days = spec["points"] // 2
            first = "2024-01-01"
            import datetime as dt

            last = (dt.date.fromisoformat(first) + dt.timedelta(days=days - 1)).isoformat()
            frame = client.frame(["swap_active_users", "swap_transaction_count"], "demoswap", first, last, shape="long")
        seconds = time.perf_counter() - began
    return {"pull_s": seconds, "points": len(frame), "failed": len(frame.attrs.get("failed", [])), "rss": _rss_mib()}


def _million() -> dict:
    """1,000,000 points in one call (ten count metrics for four projects, by day over 25,000 days)
    from a function answering /projects and /series pages, in this process."""
    import datetime as dt
    import math

    import metrics_kit as mk
    from metrics_kit.client.transports import MockTransport, Request, Response

    projects = ["p1", "p2", "p3", "p4"]
    listed = [{"project": p, "kinds": ["dex", "lending", "yield"], "regular_pools": True} for p in projects]
    advertised = {"path": "/series", "limit": 10_000}

    def service(request: Request) -> Response:
        if request.path == "/projects":
            return Response(200, json={"data_version": "v", "projects": listed, "series": advertised})
        params = request.params
        start = dt.date.fromisoformat(params["start"])
        offset, limit = int(params["offset"]), int(params["limit"])
        total = (dt.date.fromisoformat(params["end"]) - start).days + 1
        shown = range(offset, min(total, offset + limit))
        periods = []
        for i in shown:
            day = (start + dt.timedelta(days=i)).isoformat()
            periods.append({"period_start": day, "period_end": day, "value": i, "complete": True})
        body = {"metric_name": params["metric_name"], "project": params["project"], "unit": "count",
                "periods": periods, "total_periods": total,
                "next_offset": shown.stop if shown.stop < total else None}  # fmt: skip
        return Response(200, json=body, headers={"x-data-version": "v"})

    with mk.Client(transport=MockTransport(service), cache=False, progress=False) as client:
        metrics = [m for m in client.metrics().index if m.endswith("_count")][:10]  # 40 pairs
        first = dt.date(1950, 1, 1)
        last = first + dt.timedelta(days=math.ceil(MILLION / (len(metrics) * len(projects))) - 1)
        began = time.perf_counter()
        frame = client.frame(metrics, projects, first.isoformat(), last.isoformat(), shape="long")
        seconds = time.perf_counter() - began
    return {"pull_s": seconds, "points": len(frame), "failed": len(frame.attrs.get("failed", [])), "rss": _rss_mib()}


# -- the parent ----------------------------------------------------------------------------------


def run_child(spec: dict, cache_dir: Path, timeout: float) -> dict:
    for name in ("values.sqlite3", "values.sqlite3-wal", "values.sqlite3-shm"):
        (cache_dir / name).unlink(missing_ok=True)  # cold: an empty value cache
    cmd = [sys.executable, str(HERE), "_child", json.dumps(spec)]
    run = common.run_child(cmd, common.child_env(cache_dir), timeout)
    line = next((ln for ln in run.output.splitlines() if ln.startswith(_RESULT)), None)
    if run.returncode != 0 or line is None:
        raise SystemExit(f"{spec} failed ({run.returncode}):\n{run.output[-4000:]}")
    result = json.loads(line[len(_RESULT) :])
    result.update(wall_s=run.seconds, peak_rss_mib=run.peak_rss_mib)
    return result


def count_429(server: Server) -> int:
    return sum('" 429' in line for line in list(server.output))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_child"]:
        print(_RESULT + json.dumps(child(json.loads(argv[1]))), flush=True)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the panels (medians shown)")
    parser.add_argument("--pacing-requests", type=int, default=800, help="N of the pacing runs (default 800)")
    parser.add_argument("--skip", nargs="*", default=[], choices=["remote", "loopback", "pacing", "million"])
    parser.add_argument("--timeout", type=float, default=600, help="seconds before a child is killed")
    parser.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    parser.add_argument("--json", type=Path, help="also write every measurement to this file")
    args = parser.parse_args(argv)
    if not 1 <= args.rounds <= 20 or not 2 <= args.pacing_requests <= 2000:
        parser.error("--rounds must be in [1, 20] and --pacing-requests in [2, 2000]")
    info = common.machine()
    common.print_machine(info)
    args.work.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="mk-series-", dir=args.work))
    service_cache = scratch / "service-cache"
    client_cache = scratch / "client-cache"
    client_cache.mkdir(parents=True)
    env = common.child_env(service_cache)
    serve = common.metrics_kit("serve", "--host", "127.0.0.1", "--port", "0")
    results: list[dict] = []
    rows: list[list] = []
    servers: list[Server] = []
    try:
        print("starting the servers (the first generates the demo data and builds its aggregates once) ...")
        loopback = Server("serve", serve, env, timeout=900)
        servers.append(loopback)
        if "remote" not in args.skip:
            remote = Server("serve --latency-ms", [*serve, "--latency-ms", f"{LATENCY_MS:g}"], env, timeout=300)
            servers.append(remote)
            whole, single = [], []
            for rnd in range(1, args.rounds + 1):
                for way, kept in ((True, whole), (False, single)):
                    spec = {"kind": "panel", "base_url": remote.base_url, "whole": way}
                    found = run_child(spec, client_cache, args.timeout)
                    assert found["points"] == PANEL_POINTS and not found["failed"], found
                    kept.append(found)
                    results.append({"step": f"remote/{'whole' if way else 'per_value'}", "round": rnd, **found})
                    print(f"round {rnd} {LATENCY_MS:g} ms, {'whole series' if way else 'per value'}: {found}")
            w, s = (statistics.median(r["pull_s"] for r in kept) for kept in (whole, single))
            ratio = s / w
            rows.append([f"panel, {LATENCY_MS:g} ms, whole series", f"{w:.2f} s", f"<= {GOAL_REMOTE_S} s",
                         _met(w <= GOAL_REMOTE_S), _rss(whole)])  # fmt: skip
            rows.append([f"panel, {LATENCY_MS:g} ms, per value", f"{s:.2f} s", f"whole >= {GOAL_RATIO:g}x faster",
                         _met(ratio >= GOAL_RATIO) + f" ({ratio:.0f}x)", _rss(single)])  # fmt: skip
        if "loopback" not in args.skip:
            whole, single = [], []
            for rnd in range(1, args.rounds + 1):
                for way, kept in ((True, whole), (False, single)):
                    spec = {"kind": "panel", "base_url": loopback.base_url, "whole": way}
                    found = run_child(spec, client_cache, args.timeout)
                    assert found["points"] == PANEL_POINTS and not found["failed"], found
                    kept.append(found)
                    results.append({"step": f"loopback/{'whole' if way else 'per_value'}", "round": rnd, **found})
                    print(f"round {rnd} loopback, {'whole series' if way else 'per value'}: {found}")
            w, s = (statistics.median(r["pull_s"] for r in kept) for kept in (whole, single))
            rows.append(["panel, loopback, whole series", f"{w:.2f} s", f"<= {GOAL_LOOPBACK_S} s",
                         _met(w <= GOAL_LOOPBACK_S), _rss(whole)])  # fmt: skip
            rows.append(["panel, loopback, per value", f"{s:.2f} s", "(information)", "", _rss(single)])
        if "pacing" not in args.skip:
            n = args.pacing_requests - args.pacing_requests % 2
            for stated in (True, False):
                flags = ["--rate-limit", str(RATE), "--access-log"] + ([] if stated else ["--no-rate-limit-headers"])
                limited = Server(f"serve --rate-limit {RATE}", [*serve, *flags], env, timeout=300)
                servers.append(limited)
                before = count_429(limited)
                spec = {"kind": "pacing", "base_url": limited.base_url, "whole": False, "points": n}
                found = run_child(spec, client_cache, args.timeout)
                time.sleep(1.0)  # the access log's last lines
                refused = count_429(limited) - before
                answers = n + refused
                share = refused / answers
                rate = n / found["pull_s"]
                results.append({"step": f"pacing/{'stated' if stated else 'unstated'}", **found, "429": refused})
                print(f"pacing, {'stated' if stated else 'no'} headers: {found}, {refused} answers 429")
                if stated:
                    bound = GOAL_STATED_FACTOR * n / RATE
                    met = found["pull_s"] <= bound and share <= GOAL_STATED_429
                    goal = f"<= {bound:.1f} s, <= {GOAL_STATED_429:.0%} 429"
                else:
                    met = rate >= GOAL_UNSTATED_SHARE * RATE and share <= GOAL_UNSTATED_429
                    goal = f">= {GOAL_UNSTATED_SHARE * RATE:g}/s, <= {GOAL_UNSTATED_429:.0%} 429"
                rows.append([
                    f"{n} requests, limit {RATE}/s, {'stated in headers' if stated else 'no headers'}",
                    f"{found['pull_s']:.1f} s ({rate:.1f}/s), {refused} 429 ({share:.1%})",
                    goal,
                    _met(met),
                    f"{found['peak_rss_mib']:.0f} MiB",
                ])  # fmt: skip
                limited.stop()
        if "million" not in args.skip:
            found = run_child({"kind": "million"}, client_cache, args.timeout)
            results.append({"step": "million", **found})
            print(f"1,000,000 points: {found}")
            rows.append([f"{found['points']:,} points in one call (whole series)", f"{found['pull_s']:.1f} s",
                         "allowed", _met(found["points"] >= MILLION and not found["failed"]),
                         f"{found['peak_rss_mib']:.0f} MiB"])  # fmt: skip
    finally:
        for server in servers:
            server.stop()
    print()
    print(common.table(["measurement", "figure", "goal", "met", "client peak RSS"], rows))
    if args.json:
        common.write_results(args.json, info, results)
    return 0


def _met(ok: bool) -> str:
    return "yes" if ok else "NO"


def _rss(found: list[dict]) -> str:
    return f"{max(r['peak_rss_mib'] for r in found):.0f} MiB"


if __name__ == "__main__":
    sys.exit(main())
