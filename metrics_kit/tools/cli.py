"""The ``metrics-kit`` command: a thin layer over the library."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from metrics_kit.client.settings import API_KEY_ENV, BASE_URL_ENV
from metrics_kit.errors import MetricsKitError
from metrics_kit.spec import wire

# The query that serve prints to try: a weekly metric of a project it applies to.
SAMPLE_METRIC, SAMPLE_GRANULARITY = "swap_active_users", "1_week"
T = TypeVar("T")


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number above 0, not {text}")
    return value


def _parameter_flag(command: argparse.ArgumentParser) -> None:
    """``-p NAME VALUE`` of the commands that run a notebook (report, dashboard): read by ``_parameters``."""
    command.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        dest="parameters",
        metavar=("NAME", "VALUE"),
        help="set a parameter of the notebook, as papermill's -p: numbers, True, False "
        'and None are read as such, lists as JSON (\'["demoswap", "demofarm"]\'), '
        "anything else is a string; repeat for several",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="metrics-kit", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help=f"serve GET {wire.METRICS_PATH} over an event data folder")
    serve.add_argument(
        "--data",
        type=Path,
        help="event data folder (docs/data-format.md); default: the synthetic demo data set, built on first use",
    )
    # The numbers stay strings here: server/http/settings.py checks them, for App(...) as for the CLI.
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", default="8000", help="0 to 65535; 0 picks a free port (default 8000)")
    serve.add_argument(
        "--rate-limit",
        metavar="N",
        help="per-key limit in requests per second (above 0), answered with 429 and stated on every answer "
        "in RateLimit-* headers (default: off)",
    )
    serve.add_argument(
        "--no-rate-limit-headers",
        action="store_true",
        help="leave the RateLimit-* headers out, as services that state no budget do",
    )
    serve.add_argument(
        "--latency-ms",
        default="0",
        metavar="MS",
        help="delay every answer by 0 to 60000 ms, to imitate a remote service",
    )
    serve.add_argument(
        "--head-timeout",
        default="10",
        metavar="S",
        help="seconds a client has to send a request line and headers, else 408 (default 10)",
    )
    serve.add_argument("--chain-unit", default=None, help="unit segment of the chain reward metrics (default: sol)")
    serve.add_argument("--rebuild", action="store_true", help="build the aggregates in full even if cached")
    serve.add_argument(
        "--aggregates",
        type=Path,
        metavar="AGG",
        help="serve the aggregates written by metrics-kit build --out, with no event data (not with --data)",
    )
    serve.add_argument("--access-log", action="store_true", help="log every request (never the key)")
    serve.add_argument(
        "--lag",
        metavar="DURATION",
        help="count a period complete only this long after it ends, for exports that arrive late: 0 to 366d, "
        "such as 2h, 90m, 45s, 1d (default: $METRICS_KIT_LAG, else 0). Not with --watermark; with a watermark "
        "the data declares (watermark.json, or recorded in --aggregates) it does not apply, and serve says so",
    )
    serve.add_argument(
        "--watermark",
        metavar="INSTANT",
        help="declare that every event before INSTANT (such as 2025-07-01T00:00:00Z) is in the data: periods "
        "ending by then are complete (wins over the data folder's watermark.json)",
    )

    demo = commands.add_parser("demo-data", help="write the synthetic demo data set")
    demo.add_argument("--out", type=Path, required=True, help="folder to write the tables into")
    demo.add_argument(
        "--scale",
        type=_positive_float,
        default=1.0,
        help="size: 1 is about 100,000 transactions, 100 about 10 million (default 1)",
    )
    demo.add_argument("--seed", type=int, default=None, help="random seed (default: the demo seed)")

    fetch = commands.add_parser(
        "fetch",
        help="pull metrics into a CSV or Parquet file",
        description="Pull metrics for projects over a date range into a CSV or Parquet file, with the "
        "library's validation, cache and progress bar. The service is --base-url (else "
        f"{BASE_URL_ENV}, else the embedded reference service on the synthetic demo data); "
        f"its API key comes from the environment variable {API_KEY_ENV} only, never from a "
        "flag (flags end up in shell history and in ps).",
    )
    fetch.add_argument("metrics", nargs="+", metavar="METRIC", help="metric names (aliases accepted)")
    fetch.add_argument(
        "--project", nargs="+", required=True, metavar="P", dest="projects", help="one or more project ids"
    )
    fetch.add_argument("--start", required=True, help="first date, YYYY-MM-DD (its period is included)")
    fetch.add_argument("--end", required=True, help="last date, YYYY-MM-DD (its period is included)")
    fetch.add_argument("--granularity", default="1_day", help="1_day (default), 1_week or 1_month")
    fetch.add_argument("--out", type=Path, required=True, metavar="FILE", help="output file: FILE.csv or FILE.parquet")
    fetch.add_argument("--base-url", default=None, help=f"the service (default: ${BASE_URL_ENV})")
    shape = fetch.add_mutually_exclusive_group()
    shape.add_argument(
        "--long",
        dest="shape",
        action="store_const",
        const="long",
        help="tidy rows: period_start, project, metric, value, unit, complete (default)",
    )
    shape.add_argument(
        "--wide",
        dest="shape",
        action="store_const",
        const="wide",
        help="one column per metric (project/metric with several projects)",
    )
    fetch.set_defaults(shape="long")
    fetch.add_argument("--no-cache", action="store_true", help="neither read nor write the value cache")
    fetch.add_argument("--refresh", action="store_true", help="fetch again even what is cached")
    fetch.add_argument("--no-progress", action="store_true", help="no progress bar")
    fetch.add_argument(
        "--deadline",
        type=_positive_float,
        default=None,
        metavar="SECONDS",
        help="the most the whole pull may take; a stated rate limit that would keep it longer fails it at once",
    )
    fetch.add_argument(
        "--per-value",
        action="store_true",
        help=f"one value per request, as the specification says, even from a service that offers {wire.SERIES_PATH}",
    )
    fetch.add_argument(
        "--errors",
        choices=("raise", "coerce"),
        default="raise",
        help="raise (default): fail if any point fails; coerce: leave it empty, with a warning",
    )

    build = commands.add_parser(
        "build",
        help="validate a data folder and build its aggregates",
        description="Validate a data folder (on DuckDB; raw exports at a URL: on Spark) and build every "
        "metric value, on DuckDB (default) or Spark. Without --out the aggregates go to the cache folder, "
        "where serve --data finds them; "
        "with --out, to a file that serve --aggregates serves without the event data (docs/spark.md).",
    )
    build.add_argument(
        "--data",
        required=True,
        metavar="SRC",
        help="event data folder (docs/data-format.md); with --engine spark also a URL Spark reads "
        "(s3a://, hdfs://, file://, ...) of raw exports laid out the same way, validated on Spark, or of a "
        "normalised layout written by --stage",
    )
    build.add_argument("--engine", choices=("duckdb", "spark"), default="duckdb", help="default: duckdb")
    build.add_argument(
        "--spark-master",
        metavar="URL",
        help="local[N], spark://HOST:PORT or sc://HOST:PORT (Spark Connect); default: SPARK_REMOTE, "
        "else spark-submit's master, else local[*]",
    )
    build.add_argument(
        "--spark-stall-timeout",
        type=float,
        metavar="SECONDS",
        help="with --engine spark: stop the build when Spark's running stages have run no task for this "
        "long (no executor left); default 120, 0: wait without end (a cluster that scales up slowly)",
    )
    build.add_argument("--out", type=Path, metavar="AGG", help="write the aggregates to this file, FILE.parquet")
    build.add_argument(
        "--stage",
        type=Path,
        metavar="DIR",
        help="also write the validated data to DIR as the normalised Parquet layout Spark reads "
        "(default with --engine spark: a temporary folder)",
    )
    build.add_argument(
        "--state",
        metavar="URL",
        help="with --engine spark and a URL --data: the folder (a URL Spark reads and writes, or an absolute path "
        "every machine of the job reaches; outside the data folder) that keeps what a refresh needs, so that the "
        "next build computes only the periods that changed (default: beside the data, DATA.metrics-kit-state; "
        "docs/spark.md)",
    )
    build.add_argument("--chain-unit", default=None)
    build.add_argument(
        "--rebuild",
        action="store_true",
        help="build in full, even if cached or if only files of table folders changed (docs/data-format.md)",
    )

    lab = commands.add_parser(
        "lab",
        help="JupyterLab on the example notebooks, with the embedded default ready",
        description="Build the embedded default's demo data and aggregates (once; then from the cache), "
        "then start JupyterLab on the example notebooks, on 127.0.0.1 only. The notebooks "
        f"use the embedded default unless {BASE_URL_ENV} (and {API_KEY_ENV}) are set.",
    )
    lab.add_argument(
        "--port", type=int, default=None, help="the port (default: JupyterLab's, 8888 or the next free one)"
    )
    lab.add_argument("--no-browser", action="store_true", help="do not open a browser")
    lab.add_argument(
        "--ip",
        default="127.0.0.1",
        help="the address to listen on (default 127.0.0.1, this machine only; from another machine "
        "prefer an SSH tunnel, see the README)",
    )
    lab.add_argument(
        "jupyter_args",
        nargs=argparse.REMAINDER,
        metavar="-- JUPYTER_ARGS",
        help="further arguments for jupyter lab, after --",
    )

    report = commands.add_parser(
        "report",
        help="run a notebook with parameters into a standalone HTML report",
        description="Run one of the example notebooks (or any notebook with a cell tagged 'parameters') "
        "with papermill, in a temporary folder, and write the executed notebook as one "
        "standalone HTML file, its charts embedded.",
    )
    report.add_argument(
        "notebook",
        help="a short name (quickstart, tokenomics, dex, lending, chain_rewards, yield) or the path of an .ipynb file",
    )
    _parameter_flag(report)
    report.add_argument("--out", type=Path, required=True, metavar="FILE.html", help="the HTML file to write")
    report.add_argument("--no-input", action="store_true", help="leave the code out of the report")
    dashboard = commands.add_parser(
        "dashboard",
        help="a notebook as a dashboard (Voilà): its controls and charts, no code",
        description="Serve one of the example notebooks (or any notebook with a cell tagged 'parameters'; "
        "without one, every notebook, listed) with Voilà, as an application: its text, controls and "
        "interactive charts, no code, and no way to run any. Built on the embedded default first (as lab); "
        f"the notebooks use {BASE_URL_ENV} (and {API_KEY_ENV}) when set. On 127.0.0.1 only, with a token; "
        "the address to open is printed with it. Needs the [dashboard] extra.",
    )
    dashboard.add_argument(
        "notebook",
        nargs="?",
        help="a short name (quickstart, tokenomics, dex, lending, chain_rewards, yield) or the path of an "
        ".ipynb file (default: every notebook, listed on the first page)",
    )
    _parameter_flag(dashboard)
    dashboard.add_argument(
        "--port",
        type=int,
        default=None,
        help="the port (default: Voilà's, 8866, or a free one if it is taken; 0: any free one)",
    )
    dashboard.add_argument("--no-browser", action="store_true", help="do not open a browser")
    dashboard.add_argument(
        "--ip",
        default="127.0.0.1",
        help="the address to listen on (default 127.0.0.1, this machine only; from another machine "
        "prefer an SSH tunnel, see the README)",
    )
    for command in commands.choices.values():  # an error about a command's flags shows its usage
        command.set_defaults(command_parser=command)
    return parser


# Flags whose value may start with '-' and a digit: argparse takes "--lag -1h" for two flags and says
# "expected one argument"; joined as "--lag=-1h", the value reaches the library's check, which says
# what is allowed.
_SIGNED_VALUES = ("--lag",)


def _signed_values(argv: list[str]) -> list[str]:
    joined: list[str] = []
    for word in argv:
        if joined and joined[-1] in _SIGNED_VALUES and re.match(r"-[0-9.]", word):
            joined[-1] = f"{joined[-1]}={word}"
        else:
            joined.append(word)
    return joined


def main(argv: list[str] | None = None) -> int:
    argv = _signed_values(sys.argv[1:] if argv is None else list(argv))
    args, unknown = _parser().parse_known_args(argv)
    if unknown:
        args.command_parser.error(f"unrecognized arguments: {' '.join(masked_arguments(unknown))}")
    return _dispatch(args)


def masked_arguments(arguments: list[str]) -> list[str]:
    """Unrecognized arguments as an error shows them: the flags, never a value, which may be a
    secret given to a flag the command does not have (``--api-key=KEY``, ``--api-key KEY``)."""
    return [
        argument.partition("=")[0] + "=***" if "=" in argument else argument if argument.startswith("-") else "***"
        for argument in arguments
    ]


def run() -> None:
    """The ``metrics-kit`` command (and ``python -m metrics_kit``): :func:`main`, then the exit."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_interrupt)
    stdout = sys.stdout = _Stdout(sys.stdout)
    try:
        code = main()
    except KeyboardInterrupt:  # Ctrl-C while starting up, before _dispatch catches it
        code = _interrupted()
    stdout.flush()  # what is still buffered, while a reader gone can still be told from a failure
    sys.exit(code)


class _Stdout:
    """The command's standard output, which stops printing when its reader has gone
    (``metrics-kit build ... | head -1``), as command-line tools do: a closed pipe is not a failure
    of the command, which goes on and ends as it would have. Any other write error is raised."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._went()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._went()

    def _went(self) -> None:
        self.gone = True
        # The interpreter flushes the stream once more as it exits: into nothing, not the closed pipe.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _interrupted() -> int:
    """Ctrl-C: one line and the shell's code for SIGINT; every file is written through a temporary
    file, so none is left half written."""
    print("metrics-kit: interrupted", file=sys.stderr)
    return 130


_INTERRUPTS: list[int] = []  # the SIGINTs received


def _on_interrupt(signum: int, frame: object) -> None:
    """Python's own handler, which also remembers the interrupt: DuckDB, pyspark and py4j turn the
    KeyboardInterrupt raised inside their calls into errors of their own."""
    _INTERRUPTS.append(signum)
    raise KeyboardInterrupt


def _by_interrupt(error: BaseException) -> bool:
    """Whether ``error`` came of Ctrl-C: one was received, or the error carries the
    KeyboardInterrupt as its cause or context."""
    if _INTERRUPTS:
        return True
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


# What each command calls the library's arguments it sets: its flags, and for the key the
# environment variable it comes from (no command has a flag for it). A library error names the
# argument at fault in its ``argument`` (errors.py); the command names the flag from there (said()),
# never from the words of the message, which the library may change.
FLAGS: dict[str, dict[str, str]] = {
    "serve": {
        "aggregates_file": "--aggregates",
        "chain_unit": "--chain-unit",
        "data": "--data",
        "head_timeout": "--head-timeout",
        "host": "--host",
        "lag": "--lag",
        "latency_ms": "--latency-ms",
        "port": "--port",
        "rate_limit": "--rate-limit",
        "rebuild": "--rebuild",
        "watermark": "--watermark",
    },
    "build": {
        "chain_unit": "--chain-unit",
        "data": "--data",
        "engine": "--engine",
        "rebuild": "--rebuild",
        "spark_master": "--spark-master",
        "spark_stall_timeout": "--spark-stall-timeout",
        "stage": "--stage",
        "state": "--state",
    },
    "fetch": {
        "api_key": API_KEY_ENV,
        "base_url": "--base-url",
        "end": "--end",
        "granularity": "--granularity",
        "start": "--start",
    },
    "report": {"out": "--out"},
    "dashboard": {"ip": "--ip", "port": "--port"},
}


def said(error: MetricsKitError, flags: Mapping[str, str]) -> str:
    """What the command says of a library error: the message, with the flag of the argument at fault
    (``error.argument``, looked up in ``flags``) in the place of the argument's name where the
    message begins with it (``port must be ...``, ``data=DIR: ...``, ``spark_master= is ...``), else
    before the message (``--host: cannot listen on ...``)."""
    message = _said_once(error)
    name = error.argument
    flag = flags.get(name) if name else None
    if name is None or flag is None:
        return message
    after = message[len(name) :] if message.startswith(name) else None
    if after is None or after[:1] not in (" ", "=", ":"):
        return f"{flag}: {message}"
    if after.startswith("="):  # name=value (the flag's value follows it), or name= alone
        after = after[1:] if after[1:2] in ("", " ", ":", ",", ";") else " " + after[1:]
    return flag + after


def _setting(name: str, check: Callable[[Any], T], value: object) -> T:
    """``check(value)``, the library's check of a setting the command gives from a flag: an error of
    it names ``name`` (the library's) when it names none itself, so that the command names the flag."""
    from metrics_kit.errors import ConfigurationError

    try:
        return check(value)
    except ConfigurationError as error:
        if error.argument is not None:
            raise
        raise ConfigurationError(str(error), name) from None


def _dispatch(args: argparse.Namespace) -> int:
    try:
        return {
            "serve": _serve,
            "demo-data": _demo_data,
            "build": _build,
            "fetch": _fetch,
            "lab": _lab,
            "report": _report,
            "dashboard": _dashboard,
        }[args.command](args)
    except KeyboardInterrupt:
        return _interrupted()
    except MetricsKitError as error:
        if _by_interrupt(error):
            return _interrupted()
        print("metrics-kit: error:", said(error, FLAGS.get(args.command, {})), file=sys.stderr)
        return 2
    except Exception as error:
        if _by_interrupt(error):
            return _interrupted()
        raise


def _said_once(error: MetricsKitError) -> str:
    """The error's message; for a pull whose failed points all failed alike (a wrong key), that
    error once, with how many points it concerned, not once per point."""
    from metrics_kit.errors import APIError, FetchError

    if not isinstance(error, FetchError):
        return str(error)
    instead = "(--errors coerce returns NaN for them instead)"
    # An error of the service is the same one whatever the point: its URL aside (which names the point).
    said = {
        f"{failure.status}{' ' + failure.code if failure.code else ''}: {failure.message}"
        if isinstance(failure, APIError)
        else str(failure)
        for failure in error.failures.values()
    }
    if len(said) == 1:
        return f"{len(error.failures)} of {error.total} points failed, each with: {said.pop()} {instead}"
    lines = [f"  {' '.join(map(str, point))}: {failure}" for point, failure in list(error.failures.items())[:20]]
    more = [f"  ... and {len(error.failures) - 20} more"] if len(error.failures) > 20 else []
    return "\n".join([f"{len(error.failures)} of {error.total} points failed {instead}:", *lines, *more])


def _serve(args) -> int:
    from metrics_kit.server.dataset import open_service
    from metrics_kit.server.http import run, settings
    from metrics_kit.server.http.app import App
    from metrics_kit.spec.catalogue import default_catalogue

    # Every setting is checked before the (possibly long) build of the aggregates.
    host, port = _setting("host", settings.host, args.host), _setting("port", settings.port, args.port)
    rate_limit = _setting("rate_limit", settings.rate_limit, args.rate_limit)
    latency_ms = _setting("latency_ms", settings.latency_ms, args.latency_ms)
    head_timeout = _setting("head_timeout", settings.head_timeout, args.head_timeout)
    lag = _setting("lag", settings.lag, args.lag) if args.lag is not None else None
    watermark = _setting("watermark", settings.watermark, args.watermark)
    catalogue = _setting("chain_unit", default_catalogue, args.chain_unit) if args.chain_unit is not None else None
    if lag is not None and watermark is not None:  # open_service's rule, in flags
        return _fail(
            "--lag does not apply with --watermark: a lag holds back the watermark the service derives from "
            "the data and its clock, and a declared watermark says itself what is in; give one of them"
        )
    if args.aggregates is not None and (args.data is not None or args.rebuild):  # open_service's rule, in flags
        return _fail("--aggregates serves prebuilt aggregates: give it without --data and --rebuild")
    if args.aggregates is not None and not args.aggregates.is_file():  # before a key is made for nothing
        return _fail(f"--aggregates {args.aggregates}: no such file; write one with metrics-kit build --out")
    keys = run.api_keys()
    settings.keys(keys)
    service = open_service(
        args.data,
        catalogue,
        rebuild=args.rebuild,
        aggregates_file=args.aggregates,
        log=lambda line: print(line, flush=True),
        watermark=watermark,
        lag=lag,
    )
    built, catalogue = service.aggregates, service.catalogue
    app = App(
        service, keys, rate_limit=rate_limit, latency_ms=latency_ms, rate_limit_headers=not args.no_rate_limit_headers
    )
    sock = run.bind(host, port)
    host, port = sock.getsockname()[:2]
    base = f"http://{host if ':' not in host else f'[{host}]'}:{port}"
    project = _sample_project(built, catalogue)
    date = service.last_complete(SAMPLE_GRANULARITY) or (built.coverage and built.coverage[1])
    if project and date:
        sample = {wire.METRIC_NAME: SAMPLE_METRIC, wire.GRANULARITY: SAMPLE_GRANULARITY}
        query = "&".join(f"{k}={v}" for k, v in {**sample, wire.PROJECT: project, wire.DATE: date.isoformat()}.items())
        print(
            f"Try:\n  curl -H 'Accept: application/json' -H \"{wire.API_KEY_HEADER}: ${API_KEY_ENV}\" "
            f"'{base}{wire.METRICS_PATH}?{query}'",
            flush=True,
        )
    print(f"Serving {base} (Ctrl+C to stop)", flush=True)
    try:
        run.serve(app, sock, access_log=args.access_log, head_timeout=head_timeout, data_version=service.data_version)
    finally:
        service.close()
    return 0


def _sample_project(built, catalogue) -> str | None:
    metric = catalogue.get(SAMPLE_METRIC)
    for name, info in sorted(built.projects.items()):
        if metric.applies_to(info["kinds"], info["regular_pools"]):
            return name
    return next(iter(sorted(built.projects)), None)


def _demo_data(args) -> int:
    from metrics_kit.server.data import demo

    kwargs = {} if args.seed is None else {"seed": args.seed}
    counts = demo.generate(args.out, scale=args.scale, **kwargs)
    print(f"Wrote the SYNTHETIC demo data set to {args.out}: " + ", ".join(f"{n:,} {t}" for t, n in counts.items()))
    return 0


def _build(args) -> int:
    from metrics_kit.spec.catalogue import default_catalogue

    catalogue = _setting("chain_unit", default_catalogue, args.chain_unit)
    problem = _unfit_flags(args) or (_unwritable_out(args.out) if args.out is not None else None)
    if problem is None and args.spark_master:
        _check_master(args.spark_master)
    if problem is None and args.stage is not None and args.stage.exists() and not args.stage.is_dir():
        problem = f"--stage {args.stage} is a file; give a folder (new or one written by --stage)"
    if problem:
        return _fail(problem)
    try:
        return _build_checked(args, catalogue)
    except OSError as error:  # a full disk, a read-only cache folder; every write goes through a temporary file
        where = f" ({error.filename})" if error.filename else ""
        return _fail(
            f"the build stopped on a file error{where}: {_reason(error)} (writing --out, --stage or the cache)"
        )


def _unfit_flags(args) -> str | None:
    """Flags of build that do not go together, said in the command's terms before anything runs: the
    engine's class says which options it takes and whether it reads a URL (the library refuses the
    same arguments, in its own terms)."""
    from metrics_kit.errors import ConfigurationError
    from metrics_kit.server.building import build as aggregates

    engine = aggregates.ENGINES[args.engine]
    try:
        engine.check(spark_master=args.spark_master, spark_stall_timeout=args.spark_stall_timeout)
    except ConfigurationError as error:
        if error.argument in engine.options:  # the engine takes the option and refuses its value
            return said(error, FLAGS["build"])
        return f"{FLAGS['build'].get(error.argument or '', '--engine')} is for --engine spark"
    if aggregates.is_url(args.data) and not engine.reads_urls:
        return f"--data {args.data}: only --engine spark reads a URL; DuckDB reads a local data folder"
    if args.state is not None and not aggregates.is_url(args.data):
        return "--state is for a URL --data built with --engine spark (a data folder's state is in the cache folder)"
    return None


def _check_master(master: str) -> None:
    """The library's checks of a Spark Connect URL or a local master (those spark.backend() makes),
    told that the master came from --spark-master, so that their message begins with the flag."""
    from metrics_kit.server.building import spark

    if master.startswith("sc:"):
        spark.connect_url(master, "--spark-master")
    elif master.startswith("local"):
        spark.local_master(master, "--spark-master")


def _build_checked(args, catalogue) -> int:
    from metrics_kit.server.building import build as aggregates

    spark_only = args.spark_master or args.spark_stall_timeout is not None
    # A URL goes to build_on_engine, which says that only Spark reads one.
    local = not aggregates.is_url(args.data)
    default = aggregates.ENGINES[args.engine].default  # the engine whose builds the cache holds
    if default and args.out is None and args.stage is None and not spark_only and local:
        built = aggregates.load_or_build(args.data, catalogue, rebuild=args.rebuild)
    else:
        built = aggregates.build_on_engine(
            args.data,
            catalogue,
            engine=args.engine,
            spark_master=args.spark_master,
            spark_stall_timeout=args.spark_stall_timeout,
            stage=args.stage,
            rebuild=args.rebuild,
            state=args.state,
        )
        out = args.out or aggregates.cache_path(built.meta["fingerprint"], catalogue)
        try:  # through a temporary file: a failure leaves no partial file
            built.save(out)
        except OSError as error:
            return _fail(f"cannot write {'--out ' if args.out else ''}{out}: {_reason(error)}")
        print(f"Built on {args.engine} in {built.meta['build_seconds']} s; wrote {out}")
    print(f"{len(built.projects)} projects, coverage {built.meta['coverage']}, {len(built.values):,} series")
    return 0


def _unwritable_out(out: Path) -> str | None:
    """Why the aggregates cannot be written to ``--out``, checked before the (possibly long) build."""
    import tempfile

    if out.is_dir():
        return f"--out {out} is a folder; give a file name ending in .parquet"
    if out.suffix.lower() != ".parquet":
        return f"--out must end in .parquet (the aggregates are a Parquet file), not {out.name!r}"
    folder = out.parent
    if not folder.is_dir():
        return f"the folder of --out ({folder}) does not exist"
    try:  # a real write, not a look at the mode bits: a read-only file system refuses even root
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        return f"the folder of --out ({folder}) is not writable: {_reason(error)}"
    return None


def _reason(error: OSError) -> str:
    """An OSError in a few words: its errno's text (some libraries word the rest at length)."""
    if error.errno:
        return os.strerror(error.errno)
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


OUTPUT_FORMATS = (".csv", ".parquet")


def _fetch(args) -> int:
    import warnings

    from metrics_kit.client.client import Client
    from metrics_kit.errors import ConfigurationError

    suffix = args.out.suffix.lower()
    if suffix not in OUTPUT_FORMATS:
        return _fail(f"--out must end in {' or '.join(OUTPUT_FORMATS)}, not {args.out.name!r}")
    folder = args.out.parent
    if not folder.is_dir():
        return _fail(f"the folder of --out ({folder}) does not exist")
    try:  # the service and its key as the library resolves them: --base-url, else the environment
        client = Client(
            args.base_url,
            cache=not args.no_cache,
            refresh=args.refresh,
            progress=False if args.no_progress else None,
            whole_series=not args.per_value,
            deadline=args.deadline,
        )
    except ConfigurationError as error:
        if error.argument != "api_key" or os.environ.get(API_KEY_ENV):
            raise  # a key that is given and refused: the library's error, naming the variable
        service = "--base-url" if args.base_url is not None else BASE_URL_ENV
        return _fail(
            f"the service of {service} needs an API key: set the environment variable {API_KEY_ENV} "
            "(there is no flag for it, so that it stays out of shell history and ps)"
        )
    with client:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            frame = client.frame(
                args.metrics,
                args.projects,
                args.start,
                args.end,
                args.granularity,
                shape=args.shape,
                errors=args.errors,
            )
        for warning in caught:
            print(f"metrics-kit: warning: {str(warning.message).splitlines()[0]}", file=sys.stderr)
    table = _flat(frame) if args.shape == "wide" else frame
    try:
        _write(table, args.out, suffix)
    except OSError as error:
        return _fail(f"cannot write {args.out}: {error.strerror or error}")
    except ValueError as error:  # pyarrow's ArrowInvalid: never a rounded value in the file
        if suffix != ".parquet":
            raise
        return _fail(
            f"cannot write {args.out}: {str(error).splitlines()[0]}; a long table's value column holds counts "
            "and amounts, and one Parquet column cannot hold a count above 2**53 exactly beside amounts: "
            "write --wide (a column per metric) or a .csv file"
        )
    attrs = frame.attrs
    periods = len(frame) if args.shape == "wide" else frame["period_start"].nunique()
    failed = len(attrs.get("failed", ()))
    print(
        f"metrics-kit: wrote {len(table):,} rows ({periods:,} periods of {attrs.get('granularity')}) to "
        f"{args.out}; {attrs.get('from_cache', 0):,} points from the cache, {attrs.get('fetched', 0):,} "
        f"fetched{f', {failed:,} failed (left empty)' if failed else ''}",
        file=sys.stderr,
    )
    return 0


def _fail(message: str) -> int:
    print(f"metrics-kit: error: {message}", file=sys.stderr)
    return 2


def _flat(wide):
    """The wide frame with period_start as a column and project/metric column names."""
    table = wide.copy()
    if table.columns.nlevels > 1:
        table.columns = ["/".join(map(str, column)) for column in table.columns]
    else:
        table.columns = [str(column) for column in table.columns]
    return table.reset_index()


def _write(table, out: Path, suffix: str) -> None:
    """Write through a temporary file in the same folder, so a failure leaves no half-written file."""
    from metrics_kit.files import atomic_write

    table = table.copy()
    table.attrs = {}  # attrs hold Timestamps and tuples, which the Parquet metadata cannot take
    with atomic_write(out) as temporary:
        if suffix == ".csv":
            table.to_csv(temporary, index=False)
        else:
            table.to_parquet(temporary, index=False)


def _lab(args) -> int:
    from metrics_kit.tools import notebooks

    extra = args.jupyter_args[1:] if args.jupyter_args[:1] == ["--"] else args.jupyter_args
    return notebooks.lab(port=args.port, open_browser=not args.no_browser, extra_args=extra, ip=args.ip)


def _parameters(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """-p NAME VALUE pairs as values, read as papermill reads them; a name given twice is refused."""
    from metrics_kit.errors import ValidationError
    from metrics_kit.tools import notebooks

    values: dict[str, Any] = {}
    for name, text in pairs:
        if name in values:
            raise ValidationError(f"the parameter {name!r} is given twice", "parameters")
        values[name] = notebooks.parse_value(text)
    return values


def _report(args) -> int:
    from metrics_kit.tools import notebooks

    values = _parameters(args.parameters)
    path = notebooks.find(args.notebook)
    out = notebooks.run(path, values, args.out, hide_input=args.no_input)
    given = ", ".join(f"{name}={value!r}" for name, value in values.items()) or "its defaults"
    print(
        f"metrics-kit: wrote {out} ({out.stat().st_size / 1024:,.0f} KiB) from {path.name} with {given}",
        file=sys.stderr,
    )
    return 0


def _dashboard(args) -> int:
    from metrics_kit.tools.dashboard import dashboard

    return dashboard(
        args.notebook, _parameters(args.parameters), ip=args.ip, port=args.port, open_browser=not args.no_browser
    )
