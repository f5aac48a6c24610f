"""Client benchmark: the pandas client against the reference service, cold and warm.

    python benchmarks/client.py --rounds 3 [--slow-rounds 2] [--diagnose]
                                [--profile-dir DIR --profile STEP ...] [--json FILE]
    python benchmarks/client.py summarise PY-SPY-RAW-FILE ...     # summarise a saved py-spy profile

Figures and what they mean: docs/performance.md, "Client".

Starts two servers on 127.0.0.1 (ports picked by the OS), both ``metrics-kit serve`` over the
synthetic demo data set (generated and built once into a private cache folder under ``--work``):
one with ``--latency-ms 50`` (a remote service) and one without delay (loopback). Every
measurement runs in its own child process (fresh interpreter) and is timed *inside* the child,
after the imports, so the import cost is reported separately; the child's wall time (fork to exit)
and peak RSS (its own ``ru_maxrss``) are reported too. Every "cold" library run starts with an
empty value cache: an empty private ``METRICS_KIT_CACHE_DIR`` for HTTP clients; for the embedded
default, the cache folder that already holds the demo data and its aggregates (built by a
throwaway pre-warm process) with ``values.sqlite3`` deleted.

Goals (one run, ratios per round):

1. latency 50 ms: 365 daily values of one metric, ``Client(base_url, key).series(...)`` at least
   10x faster than a naive loop of ``requests.get`` (one per day, no session);
2. no delay: the same pull through the embedded default (``Client()``) at least 3x faster than the
   naive loop against the loopback server (time to first answer, i.e. service start, reported
   apart); a ``requests.Session`` loop and ``Client(base_url=loopback)`` for information;
3. warm: the same 365 values from the on-disk cache in under 50 ms (the second call in the same
   process, and the first call of a fresh process whose cache file is warm, imports excluded);
4. a panel of 18,250 points (50 applicable (project, metric) pairs x 365 days) over loopback HTTP
   in under 15 s with a client peak RSS under 300 MiB; the embedded default for information.

Every request goes to 127.0.0.1; every child is bounded by a timeout and every process started
here is stopped by its PID.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
from serve import Server  # noqa: E402  (the same server wrapper as the serve benchmark)

HERE = Path(__file__).resolve()
LATENCY_MS = 50.0
WORKERS = 16  # the client's default
PER_VALUE_ENV = "BENCH_PER_VALUE"  # set by --per-value for the children (common.child_env drops METRICS_KIT_*)

SERIES_METRIC, SERIES_PROJECT = "swap_active_users", "demoswap"
START, END = "2025-01-01", "2025-12-31"  # 365 days, all inside the demo coverage (2024-2025)
DAYS = 365

# The panel. No 10 metrics apply to 5 demo projects (demoswap.clmm has 9 metrics, demochain 5,
# demogov 4), so the panel is one `frame` call over these 5 projects and 36 metrics with
# skip_inapplicable=True: exactly 50 applicable (project, metric) pairs, 50 x 365 = 18,250 points.
PANEL_PROJECTS = ["demoswap", "demoswap.clmm", "demofarm", "demolend", "demochain"]
PANEL_METRICS = [
    # revenue: demoswap, demoswap.clmm, demofarm, demolend (the first two), and not demolend (third)
    "protocol_revenue_in_usd",
    "supply_side_revenue_in_usd",
    "transaction_fee_revenue_in_usd",
    # exchange: demoswap and demoswap.clmm (regular pools: demoswap only)
    "swap_active_users",
    "liquidity_pool_deposit_active_users",
    "liquidity_pool_withdraw_active_users",
    "swap_transaction_count",
    "liquidity_pool_deposit_transaction_count",
    "liquidity_pool_withdraw_transaction_count",
    "regular_pool_swap_transaction_count",
    # lending: demolend
    "lending_deposit_active_users",
    "lending_withdraw_active_users",
    "borrowing_active_users",
    "loan_repayment_active_users",
    "lending_deposit_transaction_count",
    "lending_withdraw_transaction_count",
    "borrowing_transaction_count",
    "loan_repayment_transaction_count",
    # yield: demofarm
    "protocol_transaction_fee_revenue_in_usd",
    "supply_side_transaction_fee_revenue_in_usd",
    "staking_fee_revenue_in_usd",
    "protocol_staking_fee_revenue_in_usd",
    "supply_side_staking_fee_revenue_in_usd",
    "staking_active_users",
    "unstaking_active_users",
    "farm_deposit_active_users",
    "farm_withdraw_active_users",
    "staking_transaction_count",
    "unstaking_transaction_count",
    "farm_deposit_transaction_count",
    "farm_withdrawal_transaction_count",
    # chain rewards: demochain
    "reward_staking_in_sol",
    "reward_mining_fee_in_sol",
    "reward_voting_in_sol",
    "reward_negative_rent_in_sol",
    "reward_positive_rent_in_sol",
]
PANEL_PAIRS = 50
PANEL_POINTS = PANEL_PAIRS * DAYS

GOAL1_RATIO = 10.0
GOAL2_RATIO = 3.0
GOAL3_SECONDS = 0.050
GOAL4_SECONDS = 15.0
GOAL4_RSS_MIB = 300.0
_RESULT = "RESULT "


# -- the child -----------------------------------------------------------------------------------


def _days() -> list[str]:
    first, last = dt.date.fromisoformat(START), dt.date.fromisoformat(END)
    return [(first + dt.timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]


def _rss_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def child(spec: dict) -> dict:
    """One measurement, in this (fresh) process. Times are taken after the imports."""
    perf = time.perf_counter
    if spec["kind"] == "diagnose":
        return diagnose(spec)
    if spec["kind"] == "start":
        return start_breakdown(spec)
    out: dict = {"kind": spec["kind"]}
    started = perf()
    if spec["kind"] in ("naive", "session"):
        import requests

        out["import_s"] = perf() - started
        url = spec["base_url"] + "/metrics"
        headers = {"Accept": "application/json", "x-api-key": spec["key"]}
        values = []
        t0 = perf()
        session = requests.Session() if spec["kind"] == "session" else None
        get = session.get if session is not None else requests.get
        for day in _days():  # bounded: 365 requests
            response = get(
                url,
                params={"metric_name": SERIES_METRIC, "project": SERIES_PROJECT, "granularity": "1_day", "date": day},
                headers=headers,
                timeout=30,
            )
            response.raise_for_status()
            values.append(response.json()["value"])
        if session is not None:
            session.close()
        out.update(pull_s=perf() - t0, points=len(values), checksum=float(sum(values)))
        return out

    import metrics_kit as mk

    if spec.get("base_url"):
        # The HTTP transport is imported on first use (it imports requests and urllib3, ~0.1 s);
        # import it here so that, as for the naive loop's `import requests`, no import is timed.
        import metrics_kit.client.transports  # noqa: F401
    for name in spec.get("preimport", ()):  # modules the library would import lazily on the first call
        __import__(name)
    out["import_s"] = perf() - started
    out["rss_after_import_mib"] = _rss_mib()
    t0 = perf()
    # --per-value: one value per request, as against a service without GET /series (and as clients
    # before it asked); otherwise the client's default, whole series where the service offers them.
    options = {"whole_series": False} if os.environ.get(PER_VALUE_ENV) else {}
    if spec.get("base_url"):
        client = mk.Client(
            spec["base_url"], spec["key"], workers=WORKERS, cache=spec["cache"], progress=False, **options
        )
    else:
        client = mk.Client(workers=WORKERS, cache=spec["cache"], progress=False, **options)
    t1 = perf()
    client.discovery()  # the first answer (series/frame would ask it first anyway; cached per client)
    t2 = perf()
    out.update(client_s=t1 - t0, first_answer_s=t2 - t1)
    if spec["what"] == "series":
        series = client.series(SERIES_METRIC, SERIES_PROJECT, START, END, "1_day")
        t3 = perf()
        out.update(
            pull_s=t3 - t2,
            points=len(series),
            fetched=series.attrs["fetched"],
            from_cache=series.attrs["from_cache"],
            checksum=float(series.sum()),
        )
        if spec.get("again"):
            t4 = perf()
            again = client.series(SERIES_METRIC, SERIES_PROJECT, START, END, "1_day")
            out.update(
                again_s=perf() - t4, again_from_cache=again.attrs["from_cache"], again_checksum=float(again.sum())
            )
    else:
        wide = client.frame(PANEL_METRICS, PANEL_PROJECTS, START, END, "1_day", shape="wide", skip_inapplicable=True)
        t3 = perf()
        out.update(
            pull_s=t3 - t2,
            points=int(wide.notna().sum().sum()),
            rows=len(wide),
            columns=len(wide.columns),
            fetched=wide.attrs["fetched"],
            from_cache=wide.attrs["from_cache"],
            checksum=float(wide.astype("float64").sum().sum()),
        )
    out["total_s"] = perf() - t0
    out["rss_before_close_mib"] = _rss_mib()
    client.close()
    return out


DIAG_METRICS = PANEL_METRICS[:8]  # 8 metrics of demoswap x 365 days = 2,920 points (one per request)
DIAG_REQUESTS = 8 * DAYS


def diagnose(spec: dict) -> dict:
    """Client CPU per request on the loopback server, layer by layer, and the client's thread count.

    Each variant makes DIAG_REQUESTS requests for 200 answers (the same kind of query as the pulls);
    CPU is this process's (all threads), so it is the client's own cost, not the server's.
    """
    import http.client
    import threading  # noqa: F401  (imported by the pools anyway; here so it is not timed)
    from concurrent.futures import ThreadPoolExecutor, as_completed
    from urllib.parse import urlencode, urlsplit

    import requests
    import urllib3
    from urllib3.util.retry import Retry

    import metrics_kit as mk
    from metrics_kit.client.transports import HTTPTransport

    base, key, n = spec["base_url"], spec["key"], DIAG_REQUESTS
    first = dt.date(2024, 1, 1)
    days = [(first + dt.timedelta(days=i)).isoformat() for i in range(731)]
    headers = {"Accept": "application/json", "x-api-key": key}
    parts = urlsplit(base)

    def query(i: int) -> dict:
        return {
            "metric_name": SERIES_METRIC,
            "project": SERIES_PROJECT,
            "granularity": "1_day",
            "date": days[i % len(days)],
        }

    def check(status: int) -> None:
        if status != 200:
            raise SystemExit(f"diagnose: a request answered {status}")

    def serial(get):
        def run():
            for i in range(n):
                get(i)

        return run

    def sixteen(get):
        def run():
            with ThreadPoolExecutor(WORKERS) as pool:
                for future in as_completed([pool.submit(get, i) for i in range(n)]):
                    future.result()

        return run

    def transport_get():
        transport = HTTPTransport(base, key)
        return lambda i: check(transport.get("/metrics", query(i)).status), transport.close

    def lean_requests():
        session = requests.Session()
        session.trust_env = False  # no proxy / netrc lookups in the environment per request

        def get(i):
            response = session.get(base + "/metrics?" + urlencode(query(i)), headers=headers, allow_redirects=False)
            _ = response.content  # read the body, as the transport does
            check(response.status_code)

        return get, session.close

    def plain_urllib3():
        pool = urllib3.HTTPConnectionPool(
            parts.hostname,
            parts.port,
            maxsize=WORKERS,
            block=True,
            retries=Retry(
                5, redirect=0, status_forcelist=[429, 502, 503, 504], backoff_factor=0.5, raise_on_status=False
            ),
        )

        def get(i):
            check(pool.request("GET", "/metrics?" + urlencode(query(i)), headers=headers, redirect=False).status)

        return get, pool.close

    def plain_http_client():
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)

        def get(i):
            conn.request("GET", "/metrics?" + urlencode(query(i)), headers=headers)
            response = conn.getresponse()
            response.read()
            check(response.status)

        return get, conn.close

    def library(workers: int):
        def setup():
            client = mk.Client(base, key, workers=workers, cache=False, progress=False)
            client.discovery()

            def run():
                frame = client.frame(DIAG_METRICS, SERIES_PROJECT, START, END, "1_day")
                if frame.size != n:
                    raise SystemExit(f"diagnose: {frame.size} values, expected {n}")

            return run, client.close

        return setup

    variants = [
        ("http.client, one keep-alive connection, 1 thread", plain_http_client, serial),
        ("urllib3 HTTPConnectionPool.request (same Retry), 1 thread", plain_urllib3, serial),
        ("urllib3 HTTPConnectionPool.request, 16 threads", plain_urllib3, sixteen),
        ("requests.Session, trust_env=False, URL built once, 1 thread", lean_requests, serial),
        ("requests.Session, trust_env=False, URL built once, 16 threads", lean_requests, sixteen),
        ("metrics_kit HTTPTransport.get, 1 thread", transport_get, serial),
        ("metrics_kit HTTPTransport.get, 16 threads", transport_get, sixteen),
        ("Client(loopback, workers=1).frame (8 metrics x 365 days)", library(1), None),
        ("Client(loopback, workers=4).frame", library(4), None),
        ("Client(loopback, workers=16).frame (the default)", library(16), None),
    ]
    out: dict = {"kind": "diagnose", "requests": n, "variants": {}}
    for rep in range(spec["reps"]):
        order = variants if rep % 2 == 0 else variants[::-1]
        for name, setup, how in order:
            get, close = setup()
            run = how(get) if how is not None else get
            wall, cpu = time.perf_counter(), time.process_time()
            run()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            close()
            out["variants"].setdefault(name, []).append((1e6 * wall / n, 1e6 * cpu / n))
    out["order"] = [name for name, _, _ in variants]
    return out


def start_breakdown(spec: dict) -> dict:
    """Where the embedded default's time to first answer goes (fresh process, aggregates cached)."""
    perf = time.perf_counter
    t0 = perf()
    import metrics_kit  # noqa: F401

    t1 = perf()
    import duckdb  # noqa: F401  (imported by metrics_kit.server.data.store at module level)

    t2 = perf()
    from metrics_kit import embedded  # noqa: F401
    from metrics_kit.server.building import build  # noqa: F401
    from metrics_kit.server.data import demo  # noqa: F401
    from metrics_kit.server.http import app  # noqa: F401
    from metrics_kit.server.serving import service  # noqa: F401

    t3 = perf()
    transport = embedded.transport()
    t4 = perf()
    before = "requests" in sys.modules
    transport.get("/projects", {})
    t5 = perf()
    after = "requests" in sys.modules
    transport.get("/projects", {})
    t6 = perf()
    transport.close()
    return {
        "kind": "start",
        "import_metrics_kit_s": t1 - t0,
        "import_duckdb_s": t2 - t1,
        "import_service_s": t3 - t2,
        "load_aggregates_s": t4 - t3,
        "first_request_s": t5 - t4,
        "second_request_s": t6 - t5,
        "first_request_imported_requests": (not before) and after,
    }


# -- the parent ----------------------------------------------------------------------------------


class Bench:
    def __init__(self, args, py_spy: str | None):
        self.args = args
        self.py_spy = py_spy
        self.results: list[dict] = []
        self.extra: list[dict] = []  # --diagnose children

    def run(
        self, step: str, spec: dict, cache_dir: Path, rnd: int, *, profile: Path | None = None, record: bool = True
    ) -> dict:
        """Run one child; record its in-process figures, wall time, peak RSS and the load before."""
        load = os.getloadavg()[0]
        cmd = [sys.executable, str(HERE), "_child", json.dumps(spec)]
        if profile is not None:
            # --gil: only the thread holding the GIL is sampled, so the shares are shares of the Python
            # CPU time (16 worker threads waiting on sockets or locks would otherwise fill the samples);
            # --nonblocking: the child is not paused to be sampled, so its timing stays close to normal.
            cmd = [
                self.py_spy,
                "record",
                "-r",
                "100",
                "--gil",
                "--nonblocking",
                "--format",
                "raw",
                "-o",
                str(profile),
                "--",
                *cmd,
            ]
        run = common.run_child(cmd, common.child_env(cache_dir), self.args.timeout)
        line = next((ln for ln in run.output.splitlines() if ln.startswith(_RESULT)), None)
        if run.returncode != 0 or line is None:
            raise SystemExit(f"{step} failed ({run.returncode}): {' '.join(cmd)}\n{run.output[-4000:]}")
        result = json.loads(line[len(_RESULT) :])
        result.update(
            step=step,
            round=rnd,
            wall_s=run.seconds,
            peak_rss_mib=run.peak_rss_mib,
            cpu_s=run.cpu_seconds,
            load_before=load,
            profiled=profile is not None,
        )
        if profile is None and record:
            self.results.append(result)
        elif profile is None:
            self.extra.append(result)
        shown = {
            k: (round(v, 4) if isinstance(v, float) else v)
            for k, v in result.items()
            if k in ("first_answer_s", "pull_s", "total_s", "again_s", "points", "fetched", "from_cache")
        }
        print(
            f"round {rnd} {step:<22} {shown} | wall {run.seconds:.2f} s, peak RSS {run.peak_rss_mib:.0f} MiB, "
            f"load {load:.2f}",
            flush=True,
        )
        return result

    def pick(self, step: str) -> list[dict]:
        return [r for r in self.results if r["step"] == step]


def fresh_dir(root: Path, name: str) -> Path:
    path = root / name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def clear_values(cache_dir: Path) -> None:
    """Empty the client's value cache in a folder (the SQLite file and its WAL/shared-memory files)."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.remove(cache_dir / f"values.sqlite3{suffix}")
        except FileNotFoundError:
            pass


def check_panel(base_url: str) -> list[tuple[str, str]]:
    """The applicable (project, metric) pairs of the panel, per the server's /projects."""
    import requests

    body = requests.get(
        base_url + "/projects", headers={"x-api-key": common.BENCH_KEY, "Accept": "application/json"}, timeout=30
    ).json()
    offered = {p["project"]: set(p["metrics"]) for p in body["projects"]}
    pairs = [(p, m) for p in PANEL_PROJECTS for m in PANEL_METRICS if m in offered.get(p, ())]
    if len(pairs) != PANEL_PAIRS:
        raise SystemExit(f"the panel has {len(pairs)} applicable pairs, expected {PANEL_PAIRS}")
    return pairs


# -- summaries -----------------------------------------------------------------------------------


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


def fmt_s(x: float) -> str:
    if x != x:  # NaN
        return "-"
    return f"{x * 1000:.1f} ms" if x < 1 else f"{x:.2f} s"


def per_round(results: list[dict], key: str) -> str:
    return " / ".join(fmt_s(r[key]) for r in results)


def loads(results: list[dict]) -> str:
    values = [r["load_before"] for r in results]
    return f"{min(values):.1f}-{max(values):.1f}" if values else "-"


def row(name: str, results: list[dict], key: str, note: str = "") -> list:
    if not results:
        return [name, 0, "-", "-", "-", "-", "-", "-", note]
    return [
        name,
        len(results),
        fmt_s(med(r[key] for r in results)),
        fmt_s(min(r[key] for r in results)),
        per_round(results, key),
        fmt_s(med(r["import_s"] for r in results)),
        fmt_s(med(r["wall_s"] for r in results)),
        f"{max(r['peak_rss_mib'] for r in results):.0f}",
        note,
    ]


HEAD = [
    "measurement",
    "runs",
    "median",
    "best",
    "per run",
    "import (not counted)",
    "process wall",
    "peak RSS MiB",
    "note",
]
ALIGN = "lrrrlrrrl"


def ratio_line(
    label: str, slow: list[dict], slow_key: str, fast: list[dict], fast_key: str, goal: float | None
) -> tuple[str, float, bool | None]:
    """Median of per-round ratios (rounds where both ran), and best ÷ best."""
    if not slow or not fast:
        return f"{label}: not measured", float("nan"), None
    by_round = {r["round"]: r for r in fast}
    paired = [(s[slow_key] / by_round[s["round"]][fast_key]) for s in slow if s["round"] in by_round]
    ratio = med(paired)
    best = min(s[slow_key] for s in slow) / min(f[fast_key] for f in fast)
    met = None if goal is None else ratio >= goal
    verdict = "" if goal is None else f" -> goal >= {goal:g}x: {'MET' if met else 'MISSED'}"
    text = (
        f"{label}: {ratio:.1f}x (median of per-round ratios {', '.join(f'{x:.1f}' for x in paired)}; "
        f"best ÷ best {best:.1f}x){verdict}"
    )
    return text, ratio, met


def report(bench: Bench, pairs: list[tuple[str, str]], goals: list[int]) -> dict:
    verdicts = {}
    P = bench.pick
    print("\n" + "=" * 100)
    print(
        "All times are measured inside a fresh child process after its imports (import time shown apart); "
        "'process wall' is fork to exit. Medians over the runs; 'best' = fastest run."
    )

    # -- goal 1
    if 1 in goals:
        lib, naive = P("latency/library"), P("latency/naive")
        print(
            f"\n## Goal 1: {LATENCY_MS:g} ms per answer, {DAYS} daily values of {SERIES_METRIC}/{SERIES_PROJECT}, "
            f"cold (empty private cache)\n"
        )
        print(
            common.table(
                HEAD,
                [
                    row(
                        "library: Client(url, key) + discovery + series",
                        lib,
                        "total_s",
                        f"of which series {fmt_s(med(r['pull_s'] for r in lib))}",
                    ),
                    row("naive: requests.get loop, no session", naive, "pull_s"),
                ],
                ALIGN,
            )
        )
        floor = DAYS * LATENCY_MS / 1000 / WORKERS
        text, ratio, met = ratio_line("naive ÷ library", naive, "pull_s", lib, "total_s", GOAL1_RATIO)
        print(
            f"\nfloor with {WORKERS} in flight: {DAYS} x {LATENCY_MS:g} ms / {WORKERS} = {floor:.2f} s; "
            f"load average {loads(lib + naive)}"
        )
        print(f"GOAL 1 {text}")
        verdicts["goal1"] = {"ratio": ratio, "met": met}

    # -- goal 2
    if 2 in goals:
        emb, http, naive0, sess = (
            P("loopback/embedded"),
            P("loopback/http-client"),
            P("loopback/naive"),
            P("loopback/session"),
        )
        print(f"\n## Goal 2: no delay, the same {DAYS} values, cold\n")
        print(
            common.table(
                HEAD,
                [
                    row("embedded Client(): first answer (service start)", emb, "first_answer_s", "aggregates cached"),
                    row("embedded Client(): series (the pull)", emb, "pull_s"),
                    row("embedded Client(): start + pull", emb, "total_s"),
                    row("naive: requests.get loop vs loopback serve", naive0, "pull_s"),
                    row("one requests.Session loop (info)", sess, "pull_s"),
                    row(
                        "Client(loopback url, key): discovery + series (info)",
                        http,
                        "total_s",
                        f"of which series {fmt_s(med(r['pull_s'] for r in http))}",
                    ),
                ],
                ALIGN,
            )
        )
        print(f"\nload average {loads(emb + http + naive0 + sess)}")
        text, ratio, met = ratio_line("naive ÷ embedded pull", naive0, "pull_s", emb, "pull_s", GOAL2_RATIO)
        print(f"GOAL 2 {text}")
        text_b, ratio_b, met_b = ratio_line(
            "naive ÷ embedded start + pull", naive0, "pull_s", emb, "total_s", GOAL2_RATIO
        )
        print(f"       {text_b}")
        print("       " + ratio_line("naive ÷ Client(loopback) (info)", naive0, "pull_s", http, "total_s", None)[0])
        print("       " + ratio_line("naive ÷ Session loop (info)", naive0, "pull_s", sess, "pull_s", None)[0])
        verdicts["goal2"] = {"ratio_pull": ratio, "met_pull": met, "ratio_with_start": ratio_b, "met_with_start": met_b}

    # -- goal 3
    if 2 in goals:
        warm_http, warm_emb = P("warm/http-fresh"), P("warm/embedded-fresh")
        print(f"\n## Goal 3: the same {DAYS} values from a warm on-disk cache (goal < {GOAL3_SECONDS * 1000:.0f} ms)\n")
        print(
            common.table(
                HEAD,
                [
                    row("same process, 2nd series(): Client(loopback)", http, "again_s"),
                    row("same process, 2nd series(): embedded", emb, "again_s"),
                    row(
                        "fresh process, Client(loopback)+discovery+series",
                        warm_http,
                        "total_s",
                        f"series alone {fmt_s(med(r['pull_s'] for r in warm_http))}",
                    ),
                    row(
                        "same, metrics_kit.client.cache imported before timing",
                        P("warm/http-fresh-preimported"),
                        "total_s",
                        f"series alone {fmt_s(med(r['pull_s'] for r in P('warm/http-fresh-preimported')))}",
                    ),
                    row("fresh process, embedded: start", warm_emb, "first_answer_s"),
                    row("fresh process, embedded: series", warm_emb, "pull_s"),
                ],
                ALIGN,
            )
        )
        hits_ok = all(r["again_from_cache"] == DAYS for r in http + emb) and all(
            r["from_cache"] == DAYS for r in warm_http + warm_emb + P("warm/http-fresh-preimported")
        )
        checks = [
            ("same process (loopback client)", med(r["again_s"] for r in http)),
            ("same process (embedded)", med(r["again_s"] for r in emb)),
            ("fresh process, Client(loopback) incl. discovery", med(r["total_s"] for r in warm_http)),
            (
                "fresh process, Client(loopback), metrics_kit.client.cache imported before timing",
                med(r["total_s"] for r in P("warm/http-fresh-preimported")),
            ),
            ("fresh process, embedded series (service start apart)", med(r["pull_s"] for r in warm_emb)),
        ]
        print(f"\nevery warm call served all {DAYS} points from the cache: {'yes' if hits_ok else 'NO'}")
        for label, value in checks:
            print(f"GOAL 3 {label}: {fmt_s(value)} -> {'MET' if value < GOAL3_SECONDS else 'MISSED'}")
        emb_fresh = med(r["total_s"] for r in warm_emb)
        print(
            f"       (fresh process, embedded, start + series: {fmt_s(emb_fresh)}; "
            f"{'under' if emb_fresh < GOAL3_SECONDS else 'over'} the goal)"
        )
        verdicts["goal3"] = {label: {"seconds": v, "met": v < GOAL3_SECONDS} for label, v in checks}

    # -- goal 4
    if 4 in goals:
        ph, pe = P("panel/http"), P("panel/embedded")
        print(
            f"\n## Goal 4: panel of {len(pairs)} (project, metric) pairs x {DAYS} days = {len(pairs) * DAYS:,} "
            f"points, cold\n"
        )
        print(
            common.table(
                HEAD,
                [
                    row(
                        "Client(loopback).frame(wide): discovery + frame",
                        ph,
                        "total_s",
                        f"of which frame {fmt_s(med(r['pull_s'] for r in ph))}",
                    ),
                    row(
                        "embedded Client().frame(wide) (info)",
                        pe,
                        "total_s",
                        f"start {fmt_s(med(r['first_answer_s'] for r in pe))}, "
                        f"frame {fmt_s(med(r['pull_s'] for r in pe))}",
                    ),
                ],
                ALIGN,
            )
        )
        if ph:
            seconds, rss = med(r["total_s"] for r in ph), max(r["peak_rss_mib"] for r in ph)
            cpu = med(r["cpu_s"] for r in ph)
            rate = PANEL_POINTS / med(r["pull_s"] for r in ph)
            print(
                f"\nload average {loads(ph + pe)}; loopback client CPU {cpu:.1f} s per run (median), "
                f"{rate:,.0f} points/s; RSS after imports {med(r['rss_after_import_mib'] for r in ph):.0f} MiB"
            )
            ok = seconds < GOAL4_SECONDS and rss < GOAL4_RSS_MIB
            print(
                f"GOAL 4 {fmt_s(seconds)} (< {GOAL4_SECONDS:g} s: {'yes' if seconds < GOAL4_SECONDS else 'NO'}), "
                f"peak RSS {rss:.0f} MiB (highest run; < {GOAL4_RSS_MIB:g}: {'yes' if rss < GOAL4_RSS_MIB else 'NO'})"
                f" -> {'MET' if ok else 'MISSED'}"
            )
            verdicts["goal4"] = {"seconds": seconds, "peak_rss_mib": rss, "met": ok}

    # consistency: every path returned the same numbers
    series_sums = [r["checksum"] for r in bench.results if not r["step"].startswith("panel")]
    series_sums += [r["again_checksum"] for r in bench.results if "again_checksum" in r]
    panel_sums = [r["checksum"] for r in bench.results if r["step"].startswith("panel")]
    same = len({round(v, 3) for v in series_sums}) <= 1 and len({round(v, 3) for v in panel_sums}) <= 1
    counts = all(r["points"] == (PANEL_POINTS if r["step"].startswith("panel") else DAYS) for r in bench.results)
    print(
        f"\nchecks: every series/panel has the expected point count: {'yes' if counts else 'NO'}; "
        f"the same checksum on every path: {'yes' if same else 'NO'} "
        f"(series sum {series_sums[0] if series_sums else float('nan'):,.0f})"
    )
    verdicts["checks"] = {"counts": counts, "same_values": same}
    return verdicts


def report_diagnosis(bench: Bench) -> None:
    starts = [r for r in bench.extra if r["kind"] == "start"]
    if starts:
        print(
            f"\n## Diagnosis: the embedded default's time to first answer (fresh process, aggregates cached; "
            f"{len(starts)} runs)\n"
        )
        parts = [
            ("import metrics_kit (not in 'first answer')", "import_metrics_kit_s"),
            ("import duckdb (metrics_kit.server.data.store imports it at module level)", "import_duckdb_s"),
            ("import the service modules (aggregates, demo, embedded, service, server.app)", "import_service_s"),
            ("embedded.transport(): read the cached aggregates, build the App", "load_aggregates_s"),
            ("first request (GET /projects)", "first_request_s"),
            ("second request (GET /projects)", "second_request_s"),
        ]
        print(
            common.table(
                ["part", "median", "best", "per run"],
                [
                    [
                        label,
                        fmt_s(med(r[key] for r in starts)),
                        fmt_s(min(r[key] for r in starts)),
                        per_round(starts, key),
                    ]
                    for label, key in parts
                ],
                "lrrl",
            )
        )
        print(
            "the first request imported requests (metrics_kit.client.transports, for its Reply class): "
            + ("yes" if all(r["first_request_imported_requests"] for r in starts) else "no")
        )
    layers = next((r for r in bench.extra if r["kind"] == "diagnose"), None)
    if layers:
        print(
            f"\n## Diagnosis: client cost per request on the loopback server ({layers['requests']:,} requests "
            f"per variant, {len(next(iter(layers['variants'].values())))} repetitions; CPU = the client "
            f"process, all threads)\n"
        )
        rows = []
        for name in layers["order"]:
            runs = layers["variants"][name]
            cpu = med(c for _, c in runs)
            rows.append(
                [
                    name,
                    f"{med(w for w, _ in runs):,.0f}",
                    f"{min(w for w, _ in runs):,.0f}",
                    f"{cpu:,.0f}",
                    f"{min(c for _, c in runs):,.0f}",
                    f"{PANEL_POINTS * cpu / 1e6:.1f}",
                ]
            )
        print(
            common.table(
                ["variant", "wall us/req", "best", "client CPU us/req", "best", "CPU s for 18,250"], rows, "lrrrrr"
            )
        )


# -- profiling -----------------------------------------------------------------------------------

_GROUPS = [  # (label, pattern matched against one frame "Qualified.name (package/file.py:line)")
    ("Client.long (the pull, main thread)", r"^Client\.long \(metrics_kit/client\.py"),
    ("  Client.fetch", r"^Client\.fetch \(metrics_kit/client\.py"),
    ("    ValueCache.get_many / put_many", r"^ValueCache\.(get|put)_many \(metrics_kit/cache\.py"),
    ("    InProcessTransport.get_many (embedded)", r"^InProcessTransport\.get_many \("),
    ("    as_completed", r"^as_completed \(concurrent/"),
    ("  building the long frame (pandas DataFrame)", r"^DataFrame\.__init__ \(pandas/core/frame\.py"),
    ("Client.widen (pivot to wide)", r"^Client\.widen \(metrics_kit/client\.py"),
    ("worker threads (ThreadPoolExecutor _worker)", r"^_worker \(concurrent/futures/thread\.py"),
    ("  HTTPTransport.get", r"^HTTPTransport\.get \(metrics_kit/transport\.py"),
    ("    HTTPTransport._url (PreparedRequest.prepare_url)", r"^HTTPTransport\._url \(metrics_kit/"),
    ("    Session.request", r"^Session\.request \(requests/sessions\.py"),
    ("      Session.prepare_request (prepare_url again, cookies, netrc)", r"^Session\.prepare_request \("),
    ("        get_netrc_auth (looks for ~/.netrc on every request)", r"^get_netrc_auth \(requests/"),
    ("      Session.merge_environment_settings (proxy variables)", r"^Session\.merge_environment_settings \("),
    ("      Session.send", r"^Session\.send \(requests/sessions\.py"),
    ("        HTTPConnectionPool.urlopen (urllib3)", r"^HTTPConnectionPool\.urlopen \(urllib3/"),
    ("          http.client send / getresponse", r"^HTTP(Connection|Response)\.\w+ \(http/client\.py"),
    ("  Client._read / parse.metric_value", r"^(Client\._read|metric_value) \(metrics_kit/"),
    ("  Future.set_result (wakes as_completed)", r"^Future\.set_result \(concurrent/"),
    ("embedded event loop thread", r"^BaseEventLoop\.run_forever \(asyncio/"),
]
_GROUPS_RE = [(label, re.compile(pattern)) for label, pattern in _GROUPS]
_IMPORT = re.compile(r"^<module> \(")


def summarise_py_spy(path: Path, top: int = 12) -> str:
    """Inclusive shares of the frames of interest and the top self-time frames, as shares of the samples
    outside imports (the child's imports come before its timed part)."""
    import collections

    total, imports, inclusive, leaf = 0, 0, collections.Counter(), collections.Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = stack.split(";")
        if any(_IMPORT.search(f) for f in frames[1:]):  # frames[0] is this script's own <module>
            imports += n
            continue
        total += n
        leaf[frames[-1]] += n
        for label, pattern in _GROUPS_RE:
            if any(pattern.search(f) for f in frames):
                inclusive[label] += n
    if not total:
        return "  (no samples)"
    lines = [
        f"  {total} samples outside imports (and {imports} in imports), 100 Hz, the thread holding the GIL; "
        "inclusive shares:"
    ]
    lines += [f"  {100 * inclusive[label] / total:5.1f}%  {label}" for label, _ in _GROUPS if inclusive[label]]
    lines.append("  self (top frames):")
    lines += [f"  {100 * n / total:5.1f}%  {frame[:120]}" for frame, n in leaf.most_common(top)]
    return "\n".join(lines)


# -- main ----------------------------------------------------------------------------------------

STEPS = (
    "latency/library",
    "latency/naive",
    "loopback/embedded",
    "loopback/naive",
    "loopback/session",
    "loopback/http-client",
    "panel/http",
    "panel/embedded",
)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_child"]:
        print(_RESULT + json.dumps(child(json.loads(argv[1]))), flush=True)
        return 0
    if argv[:1] == ["summarise"]:  # python benchmarks/client.py summarise PY-SPY-RAW-FILE ...
        for name in argv[1:]:
            print(f"{name}:\n{summarise_py_spy(Path(name))}")
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every step (default 3); medians shown")
    parser.add_argument(
        "--slow-rounds",
        type=int,
        default=2,
        help=f"rounds of the naive loop against the {LATENCY_MS:g} ms server (~19 s each; default 2)",
    )
    parser.add_argument(
        "--goals",
        type=int,
        nargs="+",
        default=[1, 2, 3, 4],
        choices=[1, 2, 3, 4],
        help="which goals to measure (3 comes with 2)",
    )
    parser.add_argument("--timeout", type=float, default=300, help="seconds before a child is killed")
    parser.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    parser.add_argument("--json", type=Path, help="also write every measurement to this file")
    parser.add_argument(
        "--diagnose",
        action="store_true",
        help="after the rounds: client CPU per request layer by layer (requests, urllib3, "
        "http.client, the client at 1/4/16 workers) on the loopback server, and where the "
        "embedded default's start goes",
    )
    parser.add_argument("--diagnose-reps", type=int, default=2, help="repetitions of each --diagnose variant")
    parser.add_argument(
        "--per-value",
        action="store_true",
        help="the library asks one value per request (whole_series=False), as against a service without "
        "GET /series; by default it asks whole series where the service offers them",
    )
    parser.add_argument(
        "--profile-dir",
        type=Path,
        help="after the rounds, run the --profile steps once more under py-spy (250 Hz) and summarise them",
    )
    parser.add_argument("--profile", nargs="*", default=[], choices=STEPS, help="steps to profile")
    args = parser.parse_args(argv)
    if args.per_value:
        os.environ[PER_VALUE_ENV] = "1"  # read by every child
    if not 1 <= args.rounds <= 20 or not 0 <= args.slow_rounds <= args.rounds:
        parser.error("--rounds must be in [1, 20] and --slow-rounds in [0, rounds]")
    if 3 in args.goals and 2 not in args.goals:
        args.goals.append(2)
    py_spy = None
    if args.profile:
        py_spy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
        if py_spy is None or args.profile_dir is None:
            print("client.py: --profile needs --profile-dir and py-spy (pip install py-spy)", file=sys.stderr)
            return 3
        args.profile_dir.mkdir(parents=True, exist_ok=True)

    info = common.machine()
    common.print_machine(info)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=common.REPO, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "--no-optional-locks", "status", "--porcelain", "--", "metrics_kit"],
        cwd=common.REPO,
        capture_output=True,
        text=True,
    ).stdout.strip()
    import hashlib

    digest = hashlib.sha256()
    for path in sorted((common.REPO / "metrics_kit").rglob("*.py")):
        digest.update(str(path.relative_to(common.REPO)).encode() + b"\0" + path.read_bytes())
    code = digest.hexdigest()[:12]
    print(
        f"# commit {commit}{' + uncommitted changes in metrics_kit/' if dirty else ''} (metrics_kit/*.py "
        f"sha256 {code}); load average before {os.getloadavg()[0]:.2f}",
        flush=True,
    )

    args.work.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="mk-client-", dir=args.work))
    service_cache = scratch / "service-cache"  # demo data + aggregates; shared by both servers + embedded
    servers: list[Server] = []
    bench = Bench(args, py_spy)
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    began = time.monotonic()
    try:
        env = common.child_env(service_cache)
        serve_cmd = common.metrics_kit("serve", "--host", "127.0.0.1", "--port", "0")
        print("starting the loopback server (generates the demo data and builds its aggregates once) ...", flush=True)
        loopback = Server("metrics-kit serve", serve_cmd, env, timeout=900)
        servers.append(loopback)
        remote = Server(
            "metrics-kit serve --latency-ms", serve_cmd + ["--latency-ms", f"{LATENCY_MS:g}"], env, timeout=300
        )
        servers.append(remote)
        print(
            f"loopback {loopback.base_url} (PID {loopback.pid}); {LATENCY_MS:g} ms latency {remote.base_url} "
            f"(PID {remote.pid})",
            flush=True,
        )
        pairs = check_panel(loopback.base_url)
        http = {"cache": True, "key": common.BENCH_KEY}

        # pre-warm the embedded default: demo data and aggregates already there, values cache dropped
        prewarm = bench.run("prewarm/embedded", {"kind": "library", "what": "series", "cache": False}, service_cache, 0)
        bench.results.remove(prewarm)

        for rnd in range(1, args.rounds + 1):
            if 1 in args.goals:
                order = ["library", "naive"] if rnd % 2 else ["naive", "library"]
                for name in order:
                    if name == "library":
                        bench.run(
                            "latency/library",
                            {"kind": "library", "what": "series", "base_url": remote.base_url, **http},
                            fresh_dir(scratch, f"lat-lib-{rnd}"),
                            rnd,
                        )
                    elif rnd <= args.slow_rounds:
                        bench.run(
                            "latency/naive",
                            {"kind": "naive", "base_url": remote.base_url, "key": common.BENCH_KEY},
                            fresh_dir(scratch, "empty"),
                            rnd,
                        )
            if 2 in args.goals:
                steps = ["embedded", "naive", "session", "http-client"]
                steps = steps[(rnd - 1) % 4 :] + steps[: (rnd - 1) % 4]
                for name in steps:
                    if name == "embedded":
                        clear_values(service_cache)
                        bench.run(
                            "loopback/embedded",
                            {"kind": "library", "what": "series", "cache": True, "again": True},
                            service_cache,
                            rnd,
                        )
                        bench.run(
                            "warm/embedded-fresh",
                            {"kind": "library", "what": "series", "cache": True},
                            service_cache,
                            rnd,
                        )
                    elif name == "http-client":
                        folder = fresh_dir(scratch, f"loop-lib-{rnd}")
                        bench.run(
                            "loopback/http-client",
                            {"kind": "library", "what": "series", "base_url": loopback.base_url, "again": True, **http},
                            folder,
                            rnd,
                        )
                        bench.run(
                            "warm/http-fresh",
                            {"kind": "library", "what": "series", "base_url": loopback.base_url, **http},
                            folder,
                            rnd,
                        )
                        bench.run(
                            "warm/http-fresh-preimported",
                            {
                                "kind": "library",
                                "what": "series",
                                "base_url": loopback.base_url,
                                "preimport": ["metrics_kit.client.cache"],
                                **http,
                            },
                            folder,
                            rnd,
                        )
                    else:
                        bench.run(
                            f"loopback/{name}",
                            {"kind": name, "base_url": loopback.base_url, "key": common.BENCH_KEY},
                            fresh_dir(scratch, "empty"),
                            rnd,
                        )
            if 4 in args.goals:
                order = ["http", "embedded"] if rnd % 2 else ["embedded", "http"]
                for name in order:
                    if name == "http":
                        bench.run(
                            "panel/http",
                            {"kind": "library", "what": "panel", "base_url": loopback.base_url, **http},
                            fresh_dir(scratch, f"panel-{rnd}"),
                            rnd,
                        )
                    else:
                        clear_values(service_cache)
                        bench.run(
                            "panel/embedded", {"kind": "library", "what": "panel", "cache": True}, service_cache, rnd
                        )
        print(f"measured in {time.monotonic() - began:.0f} s", flush=True)
        if args.diagnose:
            for rnd in range(1, args.rounds + 1):
                bench.run("diagnose/start", {"kind": "start"}, service_cache, rnd, record=False)
            bench.run(
                "diagnose/layers",
                {
                    "kind": "diagnose",
                    "base_url": loopback.base_url,
                    "key": common.BENCH_KEY,
                    "reps": args.diagnose_reps,
                },
                fresh_dir(scratch, "empty"),
                1,
                record=False,
            )

        for step in args.profile:
            out = args.profile_dir / f"py-spy-{step.replace('/', '-')}.txt"
            spec = {
                "latency/library": {"kind": "library", "what": "series", "base_url": remote.base_url, **http},
                "latency/naive": {"kind": "naive", "base_url": remote.base_url, "key": common.BENCH_KEY},
                "loopback/embedded": {"kind": "library", "what": "series", "cache": True},
                "loopback/naive": {"kind": "naive", "base_url": loopback.base_url, "key": common.BENCH_KEY},
                "loopback/session": {"kind": "session", "base_url": loopback.base_url, "key": common.BENCH_KEY},
                "loopback/http-client": {"kind": "library", "what": "series", "base_url": loopback.base_url, **http},
                "panel/http": {"kind": "library", "what": "panel", "base_url": loopback.base_url, **http},
                "panel/embedded": {"kind": "library", "what": "panel", "cache": True},
            }[step]
            if "base_url" in spec:
                folder = fresh_dir(scratch, "profile")
            else:
                folder = service_cache
                clear_values(service_cache)
            bench.run(f"profile {step}", spec, folder, 0, profile=out)
            print(f"\npy-spy of {step} ({out}):\n{summarise_py_spy(out)}", flush=True)
    finally:
        for server in servers:
            server.stop()
        signal.signal(signal.SIGTERM, previous)
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"stopped both servers (PIDs {', '.join(str(s.pid) for s in servers)})")

    verdicts = report(bench, pairs, args.goals)
    if args.diagnose:
        report_diagnosis(bench)
    per_project = {p: sum(1 for q, _ in pairs if q == p) for p in PANEL_PROJECTS}
    print(
        f"panel: {len(PANEL_METRICS)} metrics x {len(PANEL_PROJECTS)} projects, skip_inapplicable=True -> "
        + ", ".join(f"{p} {n}" for p, n in per_project.items())
        + " metrics"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "machine": info,
                    "commit": commit,
                    "dirty": bool(dirty),
                    "code_sha256": code,
                    "args": {k: str(v) for k, v in vars(args).items()},
                    "results": bench.results,
                    "verdicts": verdicts,
                    "panel_pairs": pairs,
                },
                indent=1,
                default=str,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
