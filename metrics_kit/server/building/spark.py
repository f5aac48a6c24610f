"""The Spark engine (:class:`Spark`, an ``engines.Engine``): a Spark session for the build, as an
Ibis backend, local, a standalone cluster or Spark Connect; and what only Spark does: reading raw
exports where a cluster reads them (for ``exports``), watching its jobs for a lost cluster.

Only ``metrics-kit build --engine spark`` comes here; nothing else imports pyspark.

Where the session is: ``--spark-master`` if given; else ``SPARK_REMOTE`` (a Spark Connect URL, as
pyspark reads it); else spark-submit's master, else ``local[*]``. A Spark Connect URL
(``sc://HOST[:PORT][/;param=value;...]``) is checked before anything is started, and its
``token`` is never shown: every message and log line carries the URL masked (:func:`masked`).

Ctrl-C during a build, from the session's start to its stop (:class:`_Interrupts`), stops Spark's
jobs and the session, and leaves the build as a ``KeyboardInterrupt``, with nothing of Spark's
said about it. A driver the build starts itself logs errors only, in a line each
(:func:`log_settings`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
import shlex
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.parse
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import FrameType
from typing import Any

import ibis
import ibis.expr.types as ir
import pandas as pd

from metrics_kit import files
from metrics_kit.errors import ConfigurationError, DataFormatError, MetricsKitError
from metrics_kit.server.building import exports
from metrics_kit.server.building.engines import Hash64, Log, open_layout, register_layout
from metrics_kit.server.building.exports import PartGroup
from metrics_kit.server.data import store
from metrics_kit.server.data.schema import COLUMNS
from metrics_kit.server.data.store import EventStore, Project, Validated

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
        raise ConfigurationError(masked(str(error)), error.argument) from None


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
    return masked(exports.one_line(exc))


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


# A Spark of this process alone (a local master) listens on this machine's loopback only: its driver
# (spark.driver.*), and its web UI, which binds to SPARK_LOCAL_IP or else every interface, and
# which is off unless the user's own Spark configuration turns it on. The UI shows the build's
# jobs, SQL plans (the data's paths) and environment to whoever reaches its port.
LOOPBACK = "127.0.0.1"
_LOCAL_SETTINGS = {"spark.driver.bindAddress": LOOPBACK, "spark.driver.host": LOOPBACK, "spark.ui.enabled": "false"}
_LOCAL_IP_ENV = "SPARK_LOCAL_IP"


def user_configuration(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The Spark settings the user gave this process's Spark, as spark-submit reads them when pyspark
    starts its JVM: ``spark-defaults.conf`` (in ``SPARK_CONF_DIR``, else ``SPARK_HOME/conf``), then
    ``--conf KEY=VALUE`` and ``--master`` in ``PYSPARK_SUBMIT_ARGS``, which win."""
    found: dict[str, str] = {}
    defaults = _conf_folder(environ) / "spark-defaults.conf"
    with contextlib.suppress(OSError, UnicodeDecodeError):
        for line in defaults.read_text(encoding="utf-8").splitlines():
            # A Java properties line: KEY VALUE, KEY=VALUE or KEY: VALUE.
            match = re.fullmatch(r"([^\s=:#!][^\s=:]*)(?:\s*[=:]\s*|\s+|$)(.*)", line.strip())
            if match:
                found[match[1]] = match[2].strip()
    try:
        words = shlex.split(environ.get("PYSPARK_SUBMIT_ARGS", ""))
    except ValueError:
        words = []

    def given(flag: str, value: str) -> None:
        if flag == "--master":
            found["spark.master"] = value
        elif flag == "--driver-java-options":
            found["spark.driver.extraJavaOptions"] = value
        elif "=" in value:
            key, _sep, setting = value.partition("=")
            found[key] = setting

    pending = None
    for word in words:
        if pending is not None:
            given(pending, word)
            pending = None
        elif word in ("--conf", "-c", "--master", "--driver-java-options"):
            pending = word
        elif word.startswith(("--conf=", "--master=", "--driver-java-options=")):
            flag, _sep, value = word.partition("=")
            given(flag, value)
    return found


def _conf_folder(environ: Mapping[str, str]) -> Path:
    """Where spark-submit reads the user's Spark configuration: ``SPARK_CONF_DIR``, else ``SPARK_HOME/conf``."""
    home = environ.get("SPARK_HOME")
    if home is None:
        import pyspark

        home = str(Path(pyspark.__file__).parent)
    return Path(environ.get("SPARK_CONF_DIR") or Path(home, "conf"))


# The log of a driver the build starts itself: errors only, in one line each (the file says why).
LOG_CONFIGURATION = Path(__file__).with_name("spark-log4j2.properties")
_LOG_LEVEL = "ERROR"  # the file's, which the build returns to after quieting Spark's log further


def log_settings(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """What a build sets on a Spark driver it starts itself for its log (:data:`LOG_CONFIGURATION`),
    unless the user's Spark configuration says how that driver logs: a log4j2 file in its
    configuration folder, ``spark.driver.extraJavaOptions`` (or ``--driver-java-options``) or
    ``spark.log.level``. Nothing under spark-submit, which has started the JVM already."""
    if "PYSPARK_GATEWAY_PORT" in environ:
        return {}
    user = user_configuration(environ)
    if {"spark.driver.extraJavaOptions", "spark.log.level"} & user.keys():
        return {}
    with contextlib.suppress(OSError):
        if any(_conf_folder(environ).glob("log4j2*")):
            return {}
    return {"spark.driver.extraJavaOptions": _LOG_OPTION}


_LOG_OPTION = f"-Dlog4j2.configurationFile={LOG_CONFIGURATION.as_uri()}"


def runs_here(master: str | None, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether a session started for ``master`` is a Spark of this machine alone: a local master, or
    none given and none configured (pyspark's own default is ``local[*]``); never under spark-submit,
    which has started the JVM with its own settings."""
    if master is not None:
        return master.startswith("local")
    configured = user_configuration(environ).get("spark.master", "local")
    return "PYSPARK_GATEWAY_PORT" not in environ and configured.startswith("local")


def local_settings(master: str | None, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """What a build sets on a Spark of this machine alone (:func:`runs_here`) that the user's Spark
    configuration does not set itself: the driver on the loopback, the web UI off."""
    if not runs_here(master, environ):
        return {}
    user = user_configuration(environ)
    return {key: value for key, value in _LOCAL_SETTINGS.items() if key not in user}


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
    for key, value in {**local_settings(master), **log_settings()}.items():
        builder = builder.config(key, value)
    loopback = runs_here(master) and _LOCAL_IP_ENV not in os.environ
    try:
        with _environment({_LOCAL_IP_ENV: LOOPBACK} if loopback else {}):
            return builder.getOrCreate()
    except Exception as exc:  # a master Spark does not know, a JVM that would not start
        shown = f"spark_master={masked(master)}" if master else "Spark"
        raise ConfigurationError(
            f"{shown}: Spark did not start: {_first_line(exc)} (its own output above says why); "
            "a master is local[N], spark://HOST:PORT, yarn, k8s://..., or sc://HOST:PORT for Spark Connect"
        ) from None


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` in this process's environment while the JVM is started (it inherits it), removed after."""
    os.environ.update(values)
    try:
        yield
    finally:
        for name in values:
            os.environ.pop(name, None)


def where(master: str | None) -> tuple[str | None, str]:
    """The master to use (``--spark-master``, else ``SPARK_REMOTE``) and how the user gave it."""
    if master:
        return master, "spark_master="
    remote = os.environ.get(REMOTE_ENV)
    if remote:
        return remote, REMOTE_ENV
    return None, "spark_master="


# Where this process waits for Spark: pyspark's calls, py4j's socket to a session's JVM (and the
# socket pyspark reads a result's rows from), gRPC's channel to a Spark Connect server. A
# KeyboardInterrupt raised in there would leave a socket with an answer unread, which the next
# call (the session's stop) would take for its own, or close it under the JVM's writing.
def _client_folders() -> tuple[str, ...]:
    folders = []
    for name in ("pyspark", "py4j", "grpc"):
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


# After Ctrl-C during Spark's start, how long the build waits for the start to end, so that it
# can stop the session it started (the JVM also ends with this process in any case).
_START_WAIT_SECONDS = 120.0


class _Interrupts:
    """Ctrl-C from the start of a Spark session to its stop, as one ``KeyboardInterrupt``.

    The session is started in a thread of its own, while this one waits: pyspark then installs no
    SIGINT handler of its own (it does so only on the main thread; its handler calls the JVM from
    inside the call it interrupts, and lets the build go on), and Ctrl-C during the start breaks the
    wait, not a call to the JVM; the session is stopped once it has started.

    Once the session runs, Ctrl-C stops Spark from another thread (its log quieted, its jobs
    cancelled or, on Spark Connect, its operations interrupted, the session stopped). When it comes
    while this process waits for Spark (:func:`_waiting_for_spark`), the wait is not broken: the
    call waited for returns with an error, which leaves as the interrupt. Anywhere else (DuckDB's
    validation, pandas) the handler that was there before runs too, as without Spark. Every error
    after the interrupt leaves as the interrupt (:attr:`interrupted`, which the build also asks,
    ``Spark.by_interrupt``, where it catches Spark's errors)."""

    def __init__(self, remote: bool, before: Any) -> None:
        self.remote = remote
        self.before = before
        self.interrupted = threading.Event()
        self.session: Any = None
        self._stopper: threading.Thread | None = None
        self._installed = False

    def __enter__(self) -> _Interrupts:
        self._installed = threading.current_thread() is threading.main_thread()
        if self._installed:
            signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, kind: Any, error: BaseException | None, _traceback: Any) -> None:
        try:
            if error is not None and (self.interrupted.is_set() or _by_interrupt(error)):
                self._stop_in_thread()
                self._join()
                raise KeyboardInterrupt from None
            if error is None and self.interrupted.is_set():  # the build ended as the interrupt came
                self._join()
                raise KeyboardInterrupt
        finally:
            if self._installed:
                before = self.before
                signal.signal(signal.SIGINT, before if before is not None else signal.default_int_handler)

    def starting(self, start: Callable[[], Any]) -> Any:
        """The session ``start()`` gives, started in a thread of its own (the class's docstring)."""
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["session"] = start()
            except BaseException as error:  # given to the waiting thread
                box["error"] = error

        thread = threading.Thread(target=run, name="metrics-kit spark start", daemon=True)
        thread.start()
        try:
            thread.join()
            if "error" in box:
                raise box.pop("error")
            self.session = box["session"]
            return self.session
        except KeyboardInterrupt:
            thread.join(_START_WAIT_SECONDS)
            session = box.get("session")
            if session is not None:
                self.session = session
                self._stop_in_thread()
                self._join()
            raise

    def _stop(self) -> None:
        session = self.session
        with contextlib.suppress(Exception):  # the session may be stopping already
            if self.remote:
                session.interruptAll()
            else:
                session.sparkContext.setLogLevel("OFF")
                session.sparkContext.cancelAllJobs()
        with contextlib.suppress(Exception):
            session.stop()

    def _stop_in_thread(self) -> None:
        if self._stopper is None and self.session is not None:
            self._stopper = threading.Thread(target=self._stop, name="metrics-kit spark stop", daemon=True)
            self._stopper.start()

    def _join(self) -> None:
        if self._stopper is not None:
            self._stopper.join()

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        if self.interrupted.is_set() or self.before == signal.SIG_IGN:
            return  # a second Ctrl-C, while the first is acted on; or a process that ignores them
        self.interrupted.set()
        if self.session is not None and _waiting_for_spark(frame, _client_folders()):
            self._stop_in_thread()
            return
        if self.session is not None:
            if not self.remote:
                # Here, not in the thread: quiet before the interrupt closes anything under the JVM.
                with contextlib.suppress(Exception):
                    self.session.sparkContext.setLogLevel("OFF")
            self._stop_in_thread()
        if callable(self.before):
            self.before(signum, frame)
        raise KeyboardInterrupt


def _by_interrupt(error: BaseException) -> bool:
    """Whether ``error`` is a KeyboardInterrupt or carries one as its cause or context (py4j and
    pyspark raise errors of their own from one)."""
    seen: BaseException | None = error
    for _ in range(_CHAIN):
        if seen is None:
            return False
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


_CHAIN = 50  # the causes of an error looked through for a KeyboardInterrupt


@contextlib.contextmanager
def start(master: str | None = None) -> Iterator[Spark]:
    """The Spark engine: an Ibis PySpark backend on a new (or spark-submit's) session, stopped on
    leaving; Ctrl-C from its start to its stop leaves as one KeyboardInterrupt (:class:`_Interrupts`)."""
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

    before: Callable[..., Any] | int | None = None
    if threading.current_thread() is threading.main_thread():
        before = signal.getsignal(signal.SIGINT)
    remote = None
    if remote_url is not None:
        # Spark Connect: the cluster runs the JVM, this process only a gRPC client.
        remote = masked(remote_url)
    elif os.environ.get(REMOTE_ENV):
        # pyspark itself would take SPARK_REMOTE over the master given here.
        os.environ.pop(REMOTE_ENV)
    with _Interrupts(remote is not None, before) as interrupts:
        if remote_url is not None:
            session = interrupts.starting(lambda: _remote_session(remote_url, given_as))
        else:
            session = interrupts.starting(lambda: _local_session(master))
        try:
            with warnings.catch_warnings():
                # Ibis's in-memory tables ask for verifySchema, which a Connect session ignores, with a warning.
                warnings.filterwarnings("ignore", message="'verifySchema' is ignored", category=UserWarning)
                # Ibis also sets the session's time zone to UTC: periods are UTC days, weeks and months.
                yield Spark(
                    ibis.pyspark.connect(session), remote=remote, session=session, interrupted=interrupts.interrupted
                )
        finally:
            with contextlib.suppress(Exception) if interrupts.interrupted.is_set() else contextlib.nullcontext():
                session.stop()


# -- the engine ------------------------------------------------------------------------------------


@ibis.udf.scalar.builtin(name="xxhash64")
def _xxhash64(value: str) -> int:  # type: ignore[empty-body]
    """Spark's 64-bit xxHash: Ibis compiles ``hash()`` to Spark's 32-bit ``HASH``, whose collisions
    among millions of tx_ids would carry many thousands of rows that are not repeated through the
    repeated-rows pass (exact still, as every collision is, but slower)."""


_SPARK_TYPE = {"str": "STRING", "float": "DOUBLE", "bool": "BOOLEAN", "time": "TIMESTAMP"}
# Spark reads a path as a glob pattern when it holds one of these: a file named with one is read by
# its name with the character escaped.
_GLOB = re.compile(r"([\\\[\]{}*?])")
# Each part's columns are read by a Spark job of their own: a few at a time.
_SCHEMA_THREADS = 8
# How Spark says a file is not Parquet: its error class, and parquet-mr's words.
_NOT_PARQUET = re.compile(r"CANNOT_READ_FILE_FOOTER|is not a Parquet file|magic number")


@dataclasses.dataclass
class Spark:
    """A Spark session (local, a cluster, or Spark Connect) as Ibis's PySpark backend.

    ``remote``: the Spark Connect URL, its secrets masked (None: a session of this process's JVM)."""

    backend: Any  # ibis.backends.pyspark.Backend
    remote: str | None = None
    session: Any = None  # the pyspark session ``backend`` runs on
    # Set on Ctrl-C, when the build stops Spark (``_Interrupts``): every error after it is the interrupt's.
    interrupted: threading.Event = dataclasses.field(default_factory=threading.Event)
    hash64: Hash64 = _xxhash64
    # A global sort may run on one worker; a grouping by the hash spreads over all of them.
    repeats_by_sorting: bool = False
    name = "pyspark"
    slow_start = True  # validation is done before the long part: say so
    default = False  # a build asked of Spark is computed by Spark, never taken from the cache
    reads_urls = True
    options = frozenset({"spark_master", "spark_stall_timeout"})

    def by_interrupt(self, error: BaseException) -> bool:
        """Whether ``error``, of a call to Spark, came of Ctrl-C: the build stopped Spark for one
        (the call then ends with an error of its own), or the error carries a KeyboardInterrupt.
        Code that catches Spark's errors (``except Exception``) asks this and raises the interrupt."""
        return self.interrupted.is_set() or _by_interrupt(error)

    @staticmethod
    def check(*, spark_master: str | None, spark_stall_timeout: float | None) -> None:
        if spark_stall_timeout is not None and not spark_stall_timeout >= 0:
            raise ConfigurationError(
                f"spark_stall_timeout={spark_stall_timeout}: give seconds >= 0 (0: no limit)",
                argument="spark_stall_timeout",
            )

    @staticmethod
    @contextlib.contextmanager
    def started(*, spark_master: str | None, spark_stall_timeout: float | None, log: Log) -> Iterator[Spark]:
        """A session (:func:`start`), its jobs watched for a lost cluster (:func:`watched`), said when
        it has started."""
        begun = time.perf_counter()
        stall = STALL_SECONDS if spark_stall_timeout is None else spark_stall_timeout
        with start(spark_master) as engine, watched(engine, stall):
            where = f" (Spark Connect {engine.remote})" if engine.remote else ""
            log(f"Spark {engine.backend.version}{where} started in {time.perf_counter() - begun:.1f} s")
            yield engine

    @staticmethod
    def started_for_url(
        url: str, *, spark_master: str | None, spark_stall_timeout: float | None, log: Log
    ) -> contextlib.AbstractContextManager[Spark]:
        """The same session as for a data folder: Spark reads the URL (:meth:`open_url`)."""
        return Spark.started(spark_master=spark_master, spark_stall_timeout=spark_stall_timeout, log=log)

    @contextlib.contextmanager
    def tables(
        self, validated: Validated, in_memory: tuple[str, ...], staged: Path | None = None
    ) -> Iterator[dict[str, Project]]:
        """The validated tables read by Spark as the normalised layout: ``staged`` if it was
        written, else a temporary one in the cache folder, removed after; the projects, read on
        DuckDB from the validating connection (no Spark job for a few rows)."""
        with contextlib.ExitStack() as stack:
            if staged is None:
                (files.cache_dir() / "stage").mkdir(parents=True, exist_ok=True)
                staged = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=files.cache_dir() / "stage")))
                store.write_parquet(validated, staged)
            # Absolute: executors do not share the driver's working directory. Symbolic links are
            # left as they are: the path is resolved where Spark reads it.
            register_layout(self, os.path.abspath(staged), given=str(validated.directory))
            yield store.read_projects(store.provide(validated, in_memory=()))

    @contextlib.contextmanager
    def reused(self, table: ir.Table) -> Iterator[ir.Table]:
        # Spark would compute a subquery read twice twice: persisted, released after the query.
        with table.cache() as cached:
            yield cached

    def parquet_parts(self, root: str, table: str) -> str:
        # Spark reads a folder of parts (a glob makes it log a stack trace).
        return f"{root}/{table}"

    def register_written(self, root: str, table: str) -> None:
        """Register ``table`` of a normalised layout this build wrote: its schema is known, so
        Spark reads no file to infer it (a job per table otherwise)."""
        schema = ", ".join(f"`{c}` {_SPARK_TYPE[kind]}" for c, kind in COLUMNS[table].items())
        self.session.read.schema(schema).parquet(self.parquet_parts(root, table)).createOrReplaceTempView(table)

    def open_url(self, location: str, log: Log) -> tuple[EventStore, pd.DataFrame | None]:
        """The event tables at ``location``, a URL or a path the cluster reads: raw exports,
        validated here on Spark (``exports``), with the transactions' rows per day their validation
        counted; else a normalised layout, validated when it was written (``engines.open_layout``)."""
        declared = exports.declared(self, location)  # before the files are listed
        raw = exports.open_exports(self, location)
        if raw is None:  # a layout carries the watermark its data folder declared; watermark.json beside it wins
            events = open_layout(self, location)
            return dataclasses.replace(events, watermark=declared or events.watermark), None
        log(f"Validated {location} on Spark")
        return dataclasses.replace(raw.store, watermark=declared), raw.rows_per_day

    # -- raw exports where the cluster reads them (``exports``) ---------------------------

    def listing(self, root: str) -> list[tuple[str, int, int]]:
        """(path, size, modification time in ms) of every file under ``root``, from Spark's own
        listing (the binaryFile source reads no file's content unless asked for it); Spark leaves
        out names starting with '_' or '.'."""
        files = (
            self.session.read.format("binaryFile")
            .option("recursiveFileLookup", "true")
            .load(root)
            .selectExpr("path", "length", "unix_millis(modificationTime) AS mtime")
        )
        listed = [(r["path"], int(r["length"]), int(r["mtime"])) for r in files.collect()]
        # The binaryFile source leaves out empty files; a reader's file index keeps them (as URIs,
        # names escaped): each one it has that the listing lacks is an empty file (0 bytes).
        known = {path for path, _size, _mtime in listed}
        for uri in self.session.read.option("recursiveFileLookup", "true").text(root).inputFiles():
            path = _listed(uri)
            if path not in known:
                listed.append((path, 0, 0))
        return listed

    def folders_named(self, root: str, name: str) -> list[str] | None:
        """The files in the folders ``root/name`` and ``root/*/name``, which Spark's listing leaves
        out when ``name`` starts with '_' (``_delta_log``); None when there is no such folder."""
        pattern = f"{_pattern(root)}/{{{name},*/{name}}}"
        try:
            # Given twice: of a single path that does not exist, Spark first looks for a streaming
            # sink's metadata in it and logs not finding it with a stack trace.
            found = self.session.read.format("binaryFile").load([pattern, pattern]).select("path").collect()
        except Exception as exc:
            if "PATH_NOT_FOUND" in str(exc):
                return None
            raise
        return sorted({row["path"] for row in found})

    def contents(self, paths: Sequence[str]) -> dict[str, bytes]:
        """The bytes of a few small files (the projects table), by path as the listing gives it."""
        files = self.session.read.format("binaryFile").load(list(map(_pattern, paths))).select("path", "content")
        return {r["path"]: bytes(r["content"]) for r in files.collect()}

    def small_file(self, path: str) -> bytes | None:
        """The bytes of one small file (``watermark.json``), None when there is no such file (an
        empty one gives no row of Spark's binaryFile source: ``b""``)."""
        pattern = _pattern(path)
        try:
            # Given twice, as in folders_named: a single missing path has Spark log a stack trace.
            found = self.session.read.format("binaryFile").load([pattern, pattern]).select("content").limit(1).collect()
        except Exception as exc:
            if "PATH_NOT_FOUND" in str(exc):
                return None
            raise
        return bytes(found[0]["content"]) if found else b""

    def _reader(self, fmt: str) -> Any:
        # Named files, never partition discovery: the folders' Hive-style levels are read by
        # ``exports`` as they are on DuckDB.
        reader = self.session.read.option("recursiveFileLookup", "true")
        if fmt == "parquet":
            return reader.format("parquet")
        # The format's dialect (docs/data-format.md): a header row, comma, double quotes; every
        # value as text, so that a bad one is reported rather than guessed; a malformed line fails.
        return reader.format("csv").options(
            header=True, inferSchema=False, sep=",", quote='"', escape='"', encoding="UTF-8", mode="FAILFAST"
        )

    def schemas(self, fmt: str, paths: Sequence[str]) -> list[Any]:
        """Each file's own columns (a pyspark StructType: Parquet's types as Spark reads them, a CSV
        header's names as text), or the exception that reading it raised. A file at a time: read
        together, Spark merges the files' columns and cannot say which file has which (a job each,
        a few at a time)."""

        def one(path: str) -> Any:
            try:
                return self._reader(fmt).load(_pattern(path)).schema
            except Exception as exc:
                return exc

        if len(paths) == 1:
            return [one(paths[0])]
        pool = ThreadPoolExecutor(min(_SCHEMA_THREADS, len(paths)), thread_name_prefix="metrics-kit schema")
        try:
            return list(pool.map(one, paths))
        finally:  # on Ctrl-C, the files not read yet are not read
            pool.shutdown(cancel_futures=True)

    def parquet_files(self, paths: Sequence[str]) -> list[bool]:
        """Which of ``paths`` (files of table folders whose names end otherwise than .parquet or
        .csv) are Parquet, by Spark's reading of their footers: a file in which Spark finds no
        Parquet footer is not; one it cannot read for another reason is taken for one, and named
        with that reason when its columns are read."""
        with self.quiet("OFF"):  # Spark logs each file that is not Parquet with a stack trace
            found = self.schemas("parquet", paths)
        return [not (isinstance(schema, Exception) and _NOT_PARQUET.search(str(schema))) for schema in found]

    def nanosecond(self, paths: Sequence[str], column: str) -> set[str]:
        """Which of ``paths`` (Parquet files in which Spark reads ``column`` as a 64-bit integer)
        hold nanosecond timestamps in it, rather than integers: Spark reads both as integers
        (``exports.EXPORT_SETTINGS``), but its vectorized reader reads only a plain integer column as a
        decimal. The files it could read so are the plain ones; a file with no rows is counted
        with the timestamps (it has no value to read either way). Paths as the listing gives them."""
        frame = (
            self.session.read.schema(f"`{column}` DECIMAL(20,0)")
            .option("ignoreCorruptFiles", "true")
            .option("recursiveFileLookup", "true")
            .parquet(*map(_pattern, paths))
        )
        counted = frame.groupBy(frame["_metadata.file_path"].alias("file")).agg({column: "count"})
        with self.quiet():  # each timestamp file is logged as corrupt, with a stack trace
            plain = {_listed(row["file"]) for row in counted.collect()}
        return {path for path in paths if path not in plain}

    @contextlib.contextmanager
    def quiet(self, level: str = "ERROR") -> Iterator[None]:
        """Spark's log below ``level`` left out while it runs, in a session of this process (a Spark
        Connect server logs on its own machine); then at the session's level again (its
        ``spark.log.level``; else ERROR where the build set the driver's log, :func:`log_settings`;
        else Spark's WARN), unless Ctrl-C has silenced it for good."""
        if self.remote is not None:
            yield
            return
        context = self.session.sparkContext
        context.setLogLevel(level)
        try:
            yield
        finally:
            if not self.interrupted.is_set():
                conf = context.getConf()
                ours = _LOG_OPTION in conf.get("spark.driver.extraJavaOptions", "")
                context.setLogLevel(conf.get("spark.log.level", _LOG_LEVEL if ours else "WARN"))

    def raw(
        self, name: str, fmt: str, groups: Sequence[PartGroup], types: dict[str, str]
    ) -> tuple[ir.Table, list[str]]:
        """The parts of ``groups`` as one table ``name``: each column of ``types`` (column -> Spark
        type) as that type, nanosecond integers as timestamps (truncated to microseconds, as
        DuckDB's normalisation does), values supplied by folders as columns, and each row's file
        (``_file``); and the files read, as URIs."""
        from pyspark.sql import functions as F

        frames = []
        for group in groups:
            frame = self._reader(fmt).schema(group.schema).load(list(map(_pattern, group.paths)))
            columns = []
            for column, target in types.items():
                if column in group.supplied:
                    value = F.lit(group.supplied[column]).cast("string")
                elif column in group.nanos:
                    value = F.expr(f"timestamp_micros((`{column}` - pmod(`{column}`, 1000)) div 1000)")
                else:
                    value = F.col(f"`{column}`")
                columns.append(value.cast(target).alias(column))
            frames.append(frame.select(*columns, frame["_metadata.file_path"].alias("_file")))
        table = functools.reduce(lambda a, b: a.unionByName(b), frames)
        read = table.inputFiles()
        table.createOrReplaceTempView(name)
        return self.backend.table(name), list(read)

    def not_utf8(self, paths: Sequence[str]) -> tuple[str, bytes] | None:
        """(file as a URI, the line's bytes) of a line of the CSV files ``paths`` that is not UTF-8,
        or None. The CSV reader decodes each line replacing a bad byte with U+FFFD, which is also a
        legal character of UTF-8 text: it cannot tell the two apart. The text source keeps each
        line's bytes as they are, and a line re-encoded as UTF-8 differs from its bytes exactly
        when they are not UTF-8 (the bad bytes come back as U+FFFD's three)."""
        lines = self.session.read.text(list(map(_pattern, paths)))
        bad = lines.where("CAST(value AS BINARY) <> encode(value, 'UTF-8')")
        found = bad.selectExpr("_metadata.file_path AS file", "CAST(value AS BINARY) AS line").limit(1).collect()
        return (found[0]["file"], bytes(found[0]["line"])) if found else None

    def unreadable(self, given: str, location: str, exc: Exception) -> MetricsKitError | None:
        """A path that a Spark Connect server cannot read: named as the user gave it, with what to do."""
        if self.remote is None or "PATH_NOT_FOUND" not in str(exc):
            return None
        if given == location:
            return DataFormatError(
                f"data={given}: the Spark Connect server at {self.remote} cannot read this path: it reads "
                "paths on its own machine, not on this one. Put the data where the cluster reads it "
                "(s3a://bucket/events, hdfs://..., or a file system the server mounts at the same path) "
                "and give that URL or path as data= (docs/spark.md)",
                argument="data",
            )
        return DataFormatError(
            f"data={given}: the Spark Connect server at {self.remote} cannot read {location}, where this "
            "machine wrote the validated data for it: the server reads paths on its own machine, not on "
            "this one. Give stage= a folder on a file system the server mounts at the same path, or put "
            "the data where the cluster reads it (s3a://bucket/events, hdfs://...) and give that URL as "
            "data= (docs/spark.md)",
            argument="data",
        )


def _pattern(path: str) -> str:
    """A path as the listing gives it, as a reader takes it: Spark reads a path as a glob pattern,
    in which a file's own '[', '*', ... are escaped. Neither a URI nor escaped further: a '#' or a
    '%' in it is part of a name."""
    return _GLOB.sub(r"\\\1", path)


def _listed(uri: str) -> str:
    """A file as the listing names it (``file:/a/b #2.csv``), from its URI as a reader gives it
    (``_metadata.file_path``, ``inputFiles()``: ``file:///a/b%20%232.csv``)."""
    parts = urllib.parse.urlparse(uri)
    return f"{parts.scheme}:{'//' + parts.netloc if parts.netloc else ''}{urllib.parse.unquote(parts.path)}"


# A Spark job whose stages have tasks waiting and none running for this long has no executor to
# run on (every worker lost, or none with free cores): the build stops rather than wait forever.
STALL_SECONDS = 120.0
_POLL_SECONDS = 2.0


@contextlib.contextmanager
def watched(engine: Spark, stall_seconds: float = STALL_SECONDS) -> Iterator[None]:
    """Stop the session's jobs, and the build with a clear error, when its running stages make no
    progress (no task running, none finishing or failing) for ``stall_seconds`` (0: never). Spark itself
    re-runs the tasks of a lost executor on the others, and waits without end when there are none.
    Only a session of this process can be watched (pyspark's status tracker); a Spark Connect
    server schedules its jobs itself."""
    if engine.remote is not None or not stall_seconds:
        yield
        return
    context = engine.session.sparkContext
    tracker = context.statusTracker()
    done = threading.Event()
    stalled: list[float] = []

    def watch() -> None:
        last, changed = None, time.monotonic()
        while not done.wait(_POLL_SECONDS):
            stages = [info for info in map(tracker.getStageInfo, tracker.getActiveStageIds()) if info is not None]
            now = time.monotonic()
            state = tuple((i.stageId, i.numCompletedTasks, i.numFailedTasks) for i in stages)
            if not stages or any(i.numActiveTasks for i in stages) or state != last:
                last, changed = state, now
            elif now - changed > stall_seconds:
                stalled.append(now - changed)
                context.cancelAllJobs()
                return

    watcher = threading.Thread(target=watch, name="metrics-kit spark watcher", daemon=True)
    watcher.start()
    try:
        yield
    except Exception:
        if stalled:
            raise ConfigurationError(
                f"Spark ran no task for {stalled[0]:.0f} s while the build waited: the cluster has no executor "
                "left to run on (its workers stopped or were lost, or none has free cores). Nothing was written; "
                "check the cluster (its master's web page lists the workers) and build again"
            ) from None
        raise
    finally:
        done.set()
        watcher.join()
