"""The ``metrics-kit`` command: a thin layer over the library."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .errors import MetricsKitError

SAMPLE_QUERY = {"metric_name": "swap_active_users", "granularity": "1_week"}


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number above 0, not {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="metrics-kit", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="serve GET /metrics over an event data folder")
    serve.add_argument("--data", type=Path, help="event data folder (docs/data-format.md); "
                       "default: the synthetic demo data set, built on first use")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000, help="0 picks a free port (default 8000)")
    serve.add_argument("--rate-limit", type=_positive_float, metavar="N",
                       help="per-key limit in requests per second, answered with 429 (default: off)")
    serve.add_argument("--latency-ms", type=float, default=0.0, metavar="MS",
                       help="delay every /metrics answer, to imitate a remote service")
    serve.add_argument("--chain-unit", default=None,
                       help="unit segment of the chain reward metrics (default: sol)")
    serve.add_argument("--rebuild", action="store_true", help="rebuild the aggregates even if cached")
    serve.add_argument("--access-log", action="store_true", help="log every request (never the key)")

    demo = commands.add_parser("demo-data", help="write the synthetic demo data set")
    demo.add_argument("--out", type=Path, required=True, help="folder to write the tables into")
    demo.add_argument("--scale", type=_positive_float, default=1.0,
                      help="size: 1 is about 100,000 transactions, 100 about 10 million (default 1)")
    demo.add_argument("--seed", type=int, default=None, help="random seed (default: the demo seed)")

    build = commands.add_parser("build", help="validate a data folder and build its aggregates")
    build.add_argument("--data", type=Path, required=True)
    build.add_argument("--chain-unit", default=None)
    build.add_argument("--rebuild", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return {"serve": _serve, "demo-data": _demo_data, "build": _build}[args.command](args)
    except MetricsKitError as error:
        print(f"metrics-kit: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _serve(args) -> int:
    from . import aggregates
    from .catalogue import default_catalogue
    from .server import run
    from .server.app import App
    from .service import MetricService

    catalogue = default_catalogue(args.chain_unit)
    data = args.data
    if data is None:
        from . import demo

        data = demo.ensure_default()
        print(f"Serving the SYNTHETIC demo data set ({data})", flush=True)
    built = aggregates.load_or_build(data, catalogue, rebuild=args.rebuild)
    keys = run.api_keys()
    app = App(MetricService(built, catalogue), keys, rate_limit=args.rate_limit,
              latency_ms=args.latency_ms)
    sock = run.bind(args.host, args.port)
    host, port = sock.getsockname()[:2]
    base = f"http://{host if ':' not in host else f'[{host}]'}:{port}"
    project = _sample_project(built, catalogue)
    if project and built.coverage:
        query = "&".join(f"{k}={v}" for k, v in {**SAMPLE_QUERY, "project": project,
                                                  "date": built.coverage[1].isoformat()}.items())
        print(f"Try:\n  curl -H 'Accept: application/json' -H \"x-api-key: $METRICS_KIT_API_KEY\" "
              f"'{base}/metrics?{query}'", flush=True)
    print(f"Serving {base} (Ctrl+C to stop)", flush=True)
    run.serve(app, sock, access_log=args.access_log)
    return 0


def _sample_project(built, catalogue) -> str | None:
    metric = catalogue.get(SAMPLE_QUERY["metric_name"])
    for name, info in sorted(built.projects.items()):
        if metric.applies_to(info["kinds"], info["regular_pools"]):
            return name
    return next(iter(sorted(built.projects)), None)


def _demo_data(args) -> int:
    from . import demo

    kwargs = {} if args.seed is None else {"seed": args.seed}
    counts = demo.generate(args.out, scale=args.scale, **kwargs)
    print(f"Wrote the SYNTHETIC demo data set to {args.out}: "
          + ", ".join(f"{n:,} {t}" for t, n in counts.items()))
    return 0


def _build(args) -> int:
    from . import aggregates
    from .catalogue import default_catalogue

    built = aggregates.load_or_build(args.data, default_catalogue(args.chain_unit), rebuild=args.rebuild)
    print(f"{len(built.projects)} projects, coverage {built.meta['coverage']}, "
          f"{len(built.values):,} series")
    return 0
