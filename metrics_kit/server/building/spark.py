"""A Spark session for the build, as an Ibis backend: local, a standalone cluster, or Spark Connect.

Only ``metrics-kit build --engine spark`` comes here; nothing else imports pyspark.

Where the session is: ``--spark-master`` if given; else ``SPARK_REMOTE`` (a Spark Connect URL, as
pyspark reads it); else spark-submit's master, else ``local[*]``. A Spark Connect URL
(``sc://HOST[:PORT][/;param=value;...]``) is checked before anything is started, and its
``token`` is never shown: every message and log line carries the URL masked (:func:`masked`).

Ctrl-C during a build (:func:`_interrupts`) stops Spark's jobs and the session, and leaves the
build as a ``KeyboardInterrupt``, with nothing of Spark's said about it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from metrics_kit.errors import ConfigurationError
from metrics_kit.server.building.engines import Spark

INSTALL_HINT = "install it with: pip install 'metrics-kit[spark]'"
CONNECT_PORT = 15002  # Spark Connect's default port
REMOTE_ENV = "SPARK_REMOTE"
_CONNECT = re.compile(
    r"sc://(?P<host>\[[0-9A-Fa-f:.]+\]|[^\s:/;\[\]]+)(?P<port>:[^/;]*)?(?P<params>[/;].*)?", re.DOTALL
)
_PARAM = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*=[^;]*")
_SECRET = re.compile(r"(\btoken\s*=)[^;&\s'\"]*", re.IGNORECASE)
_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)[^/\s@;?'\"]*@")
_QUERY = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s?'\"]*\?)[^\s'\"]*")


def masked(text: str) -> str:
    """``text`` with the secrets a URL may carry replaced by ``***``: the user info (``USER:PASSWORD@``),
    the query (``?...``) and the value of every ``token=``."""
    return _SECRET.sub(r"\1***", _QUERY.sub(r"\1***", _USERINFO.sub(r"\1***@", text)))


def connect_url(url: str, given_as: str = "spark_master=") -> str:
    """``url`` if it is a well-formed Spark Connect URL, else a :class:`ConfigurationError` saying
    what is allowed (the URL masked)."""
    try:
        return _checked_connect_url(url, given_as)
    except ConfigurationError as error:  # any part of the URL a message quotes is shown masked
        raise ConfigurationError(masked(str(error)), error.setting) from None


def _checked_connect_url(url: str, given_as: str) -> str:
    shown = f"'{masked(url)}'"
    form = "sc://HOST[:PORT][/;param=value;...], for example sc://127.0.0.1:15002"
    if "@" in url.partition("/;")[0] or "?" in url:
        raise ConfigurationError(
            f"{given_as} {shown}: a Spark Connect URL has no USER:PASSWORD@ and no ?query; "
            f"give a token in a ';token' parameter: {form}"
        )
    match = _CONNECT.fullmatch(url)
    if match is None:
        raise ConfigurationError(f"{given_as} {shown}: not a Spark Connect URL; write {form}")
    port = match["port"]
    if port is not None:
        digits = port[1:]
        if not digits:
            raise ConfigurationError(
                f"{given_as} {shown}: no port after ':'; give one (Spark Connect's default is {CONNECT_PORT}) "
                f"or leave out the ':': {form}"
            )
        if not digits.isdigit() or not 0 < int(digits) < 65536:
            raise ConfigurationError(f"{given_as} {shown}: port {digits!r} is not a number from 1 to 65535; {form}")
    params = match["params"]
    if params is not None:
        if not params.startswith("/;") and params != "/":
            raise ConfigurationError(f"{given_as} {shown}: after HOST:PORT comes '/;param=value'; {form}")
        for param in params[2:].split(";") if params != "/" else []:
            if not _PARAM.fullmatch(param):
                raise ConfigurationError(f"{given_as} {shown}: {masked(';' + param)[1:]!r} is not param=value; {form}")
    return url


_LOCAL = re.compile(r"local(\[(\*|[1-9][0-9]*)(,[1-9][0-9]*)?\]|-cluster\[[1-9][0-9]*,[1-9][0-9]*,[1-9][0-9]*\])?")


def local_master(master: str, given_as: str = "spark_master=") -> str:
    """``master`` if it is a well-formed ``local`` master, else a :class:`ConfigurationError`
    saying what is allowed, before a JVM is started for it."""
    if not _LOCAL.fullmatch(master):
        raise ConfigurationError(
            f"{given_as} '{masked(master)}': not a local master; write local (one thread), local[N] "
            "(N threads, N from 1), local[*] (a thread per core) or local[N,F] (F retries of a failed task)"
        )
    return master


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return masked(text.splitlines()[0]) if text else type(exc).__name__


# Retries of the first call to a Spark Connect server, few and short, backing off:
# no answer by then is no server, or none that speaks plain gRPC (a token asks for TLS). After
# it, the client's own policy applies, which rides out a server restart.
_FIRST_CONTACT_RETRIES = 4


def _remote_session(url: str, given_as: str):
    from pyspark.sql import SparkSession

    shown = f"'{masked(url)}'"
    session: Any  # pyspark types it as the classic session, whose ``client`` is not a Connect client
    try:
        session = SparkSession.builder.remote(url).getOrCreate()
    except ImportError as exc:  # pyspark's PySparkImportError: grpcio or another Connect client package
        raise ConfigurationError(
            f"{given_as} {shown}: the Spark Connect client needs a package that is not installed "
            f"({_first_line(exc)}); {INSTALL_HINT}"
        ) from None
    except Exception as exc:
        raise ConfigurationError(
            f"{given_as} {shown}: cannot start a Spark Connect session: {_first_line(exc)}"
        ) from None
    client = session.client
    policies = client.get_retry_policies() if hasattr(client, "set_retry_policies") else None
    if policies is not None:  # pyspark 4 (in 3.5 the client's own retries apply)
        from pyspark.sql.connect.client.retries import DefaultPolicy

        client.set_retry_policies([DefaultPolicy(max_retries=_FIRST_CONTACT_RETRIES)])
    try:
        _ = session.version  # the first call to the server: is anyone there?
    except Exception as exc:
        with contextlib.suppress(Exception):
            session.stop()
        raise ConfigurationError(f"{given_as} {shown}: no Spark Connect server answered: {_first_line(exc)}") from None
    if policies is not None:
        client.set_retry_policies(policies)
    return session


def _local_session(master: str | None):
    from pyspark.sql import SparkSession

    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        raise ConfigurationError(
            "engine='spark' needs a Java runtime (17 or later) for Spark: install one "
            "(Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or set JAVA_HOME; "
            "or give spark_master=sc://HOST:PORT to use a Spark Connect server"
        )
    builder = SparkSession.builder.appName("metrics-kit build")
    if master:
        builder = builder.master(master)
    if master and master.startswith("local"):
        # One machine: Spark's default of 200 shuffle partitions is mostly per-task overhead here.
        builder = builder.config("spark.sql.shuffle.partitions", "8")
    # Under spark-submit (no --spark-master) the master and every other setting come from spark-submit.
    builder = (
        builder.config("spark.sql.session.timeZone", "UTC")
        # Let adaptive execution also coalesce the partitions of the two cached tables (off by default).
        .config("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning", "true")
        .config("spark.ui.showConsoleProgress", "false")
    )
    try:
        return builder.getOrCreate()
    except Exception as exc:  # a master Spark does not know, a JVM that would not start
        shown = f"spark_master={masked(master)}" if master else "Spark"
        raise ConfigurationError(
            f"{shown}: Spark did not start: {_first_line(exc)} (its own output above says why); "
            "a master is local[N], spark://HOST:PORT, yarn, k8s://..., or sc://HOST:PORT for Spark Connect"
        ) from None


def where(master: str | None) -> tuple[str | None, str]:
    """The master to use (``--spark-master``, else ``SPARK_REMOTE``) and how the user gave it."""
    if master:
        return master, "spark_master="
    remote = os.environ.get(REMOTE_ENV)
    if remote:
        return remote, REMOTE_ENV
    return None, "spark_master="


# Where this process waits for Spark: py4j's socket to a session's JVM, gRPC's channel to a Spark
# Connect server. A KeyboardInterrupt raised in there would leave the socket with an answer
# unread, which the next call (the session's stop) would take for its own.
def _client_folders() -> tuple[str, ...]:
    folders = []
    for name in ("py4j", "grpc"):
        module = sys.modules.get(name)
        if module is not None and module.__file__:
            folders.append(str(Path(module.__file__).parent) + os.sep)
    return tuple(folders)


def _waiting_for_spark(frame: FrameType | None, folders: tuple[str, ...]) -> bool:
    while frame is not None:
        if frame.f_code.co_filename.startswith(folders):
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def _interrupts(session: Any, remote: bool, before: Any) -> Iterator[None]:
    """Ctrl-C during the build, as one ``KeyboardInterrupt``. When it comes while this process
    waits for Spark, the wait is not broken: another thread quiets Spark's log, stops its jobs and
    the session, and the call waited for returns with an error, which leaves as the interrupt.
    Anywhere else (DuckDB's validation, pandas) it is the handler that was there before, as
    without Spark. pyspark's own handler is not used: it calls the JVM from inside the waiting
    call (a reentrant call on the same socket) and lets the build go on."""
    interrupted = threading.Event()
    folders = _client_folders()
    stopper: list[threading.Thread] = []

    def stop() -> None:
        with contextlib.suppress(Exception):  # the session may be stopping already
            if remote:
                session.interruptAll()
            else:
                session.sparkContext.setLogLevel("OFF")
                session.sparkContext.cancelAllJobs()
        with contextlib.suppress(Exception):
            session.stop()

    def handler(signum: int, frame: FrameType | None) -> None:
        if interrupted.is_set() or before == signal.SIG_IGN:
            return  # a second Ctrl-C, while the first is acted on; or a process that ignores them
        if not _waiting_for_spark(frame, folders):
            if callable(before):
                before(signum, frame)
            raise KeyboardInterrupt
        interrupted.set()
        stopper.append(threading.Thread(target=stop, name="metrics-kit spark stop", daemon=True))
        stopper[0].start()

    installed = threading.current_thread() is threading.main_thread()
    if installed:
        signal.signal(signal.SIGINT, handler)
    try:
        yield
    except BaseException:
        if interrupted.is_set():
            raise KeyboardInterrupt from None
        raise
    else:
        if interrupted.is_set():  # the build ended as the interrupt came: it was still asked to stop
            raise KeyboardInterrupt
    finally:
        if installed:
            signal.signal(signal.SIGINT, before if before is not None else signal.default_int_handler)
        for thread in stopper:
            thread.join()


@contextlib.contextmanager
def backend(master: str | None = None) -> Iterator[Spark]:
    """An Ibis PySpark backend on a new (or spark-submit's) session, stopped on leaving."""
    master, given_as = where(master)
    remote_url = master if master and (master.startswith("sc:") or given_as == REMOTE_ENV) else None
    # The master is checked first: a typo is told as such whether pyspark is installed or not.
    if remote_url is not None:
        connect_url(remote_url, given_as)
    elif master and master.startswith("local"):
        local_master(master, given_as)
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise ConfigurationError(f"engine='spark' needs pyspark; {INSTALL_HINT}") from None
    import ibis

    # The handler in place before pyspark's session replaces it with its own (see _interrupts).
    before: Callable[..., Any] | int | None = None
    if threading.current_thread() is threading.main_thread():
        before = signal.getsignal(signal.SIGINT)
    remote = None
    if remote_url is not None:
        # Spark Connect: the cluster runs the JVM, this process only a gRPC client.
        remote = masked(remote_url)
        session = _remote_session(remote_url, given_as)
    else:
        if os.environ.get(REMOTE_ENV):
            # pyspark itself would take SPARK_REMOTE over the master given here.
            os.environ.pop(REMOTE_ENV)
        session = _local_session(master)
    try:
        with _interrupts(session, remote is not None, before), warnings.catch_warnings():
            # Ibis's in-memory tables ask for verifySchema, which a Connect session ignores, with a warning.
            warnings.filterwarnings("ignore", message="'verifySchema' is ignored", category=UserWarning)
            # Ibis also sets the session's time zone to UTC: periods are UTC days, weeks and months.
            yield Spark(ibis.pyspark.connect(session), remote=remote, session=session)
    finally:
        session.stop()
