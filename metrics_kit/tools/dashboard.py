"""``metrics-kit dashboard``: a notebook served with Voilà as an application, its controls and charts
and no code, for a colleague who does not write code (the ``[dashboard]`` extra).

- What is served is a copy: the notebook (or, given none, every notebook of the folder, listed on
  the first page) in a temporary folder, each with the parameters given on the command line
  injected after its cell tagged ``parameters`` (papermill's way, as ``report`` does, checked the
  same way first). The folder goes when the server stops.
- The embedded default's demo data and aggregates are built first (:func:`notebooks.warm`), as
  ``lab`` does, so that the first page answers at once; with ``$METRICS_KIT_BASE_URL`` (and
  ``$METRICS_KIT_API_KEY``) set, the notebooks use that service instead: the kernels inherit the
  environment.
- Voilà runs as its own server, not as an extension of a Jupyter server: its kernels take widget
  messages only, so that a viewer can move the controls but run no code. Every page load runs the
  notebook in a new kernel, its charts interactive (``$METRICS_KIT_INTERACTIVE_CHARTS`` is ``on``
  for them unless set otherwise).
- On 127.0.0.1 unless ``ip`` says otherwise, on ``port`` (default 8866, else a free one; 0: a free
  one), with a token: a request without it is refused. Once the server answers, the address to open
  is printed with the token (``http://127.0.0.1:8866/?token=...``), as JupyterLab prints its own.
  The token reaches Voilà in a file only this user can read (``$JUPYTER_TOKEN_FILE``): never on a
  command line, which ``ps`` shows, nor in any line Voilà logs (its URLs show ``token=[secret]``).
- The address printed is always this dashboard's: Voilà listens on that port or none, and the
  server answering there must take the token (another program, such as a second dashboard started
  at the same moment, may have taken the port since it was found free: then an error says so).
- Stopped by Ctrl+C, SIGTERM (``kill PID``, a supervisor) or SIGHUP (its terminal closed) alike:
  Voilà is stopped by its PID and shuts its kernels down, and the temporary folder (with the token
  file) goes. Voilà runs in a session of its own, so that a terminal's signals reach this process
  only, which stops it in that order.
- A cell that fails shows its error on the page in a line (``AuthenticationError: 401 ...``): the
  dashboard's kernels load :mod:`~metrics_kit.tools.dashboard_kernel`. Voilà's own message says
  only that a cell failed, and to restart Voilà with ``--show_tracebacks``.
- Offline: Voilà's ``lab`` template loads Font Awesome's stylesheets from a CDN (its notebook page
  and, through its ``base`` page, the list of notebooks and the error pages), and nbconvert's loads
  mermaid from one when a notebook has a diagram. The dashboard's template (``metrics-kit``,
  written into the temporary folder, found through ``$JUPYTER_PATH``) is Voilà's ``lab`` template
  without any stylesheet link to another host and without the mermaid loader: the widgets, ipympl,
  the theme and the icons' fonts all come from Voilà's own files.
- As root too: Voilà has no root check to pass.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from metrics_kit.errors import MetricsKitError, ValidationError
from metrics_kit.notebook.interactive import INTERACTIVE_ENV
from metrics_kit.tools import notebooks

TEMPLATE = "metrics-kit"
DEFAULT_PORT = 8866  # Voilà's
START_SECONDS = 180  # how long the server has to answer before the command gives up
STOP_SECONDS = 30  # how long Voilà has to shut its kernels down before it is killed
PROBE_SECONDS = 5  # one request of the check that the server answering is this dashboard's
# Voilà's lab page, less what it would fetch from another host.
TEMPLATE_INDEX = """{%- extends 'voila/templates/lab/index.html.j2' -%}
{#- Voilà's lab page without what it fetches from another host: the stylesheets it links from a CDN
    (Font Awesome's; Voilà's own style has the icons), and nbconvert's mermaid loader. -#}
{%- block notebook_css -%}
{%- for line in super().split('\\n') if not ('<link' in line and '://' in line) %}
{{ line }}
{%- endfor -%}
{%- endblock notebook_css -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""
TEMPLATE_CONF = {"base_template": "lab"}
KERNEL_EXTENSION = "metrics_kit.tools.dashboard_kernel"
# Voilà's configuration (found through $JUPYTER_CONFIG_PATH): no line it writes on the terminal holds
# the token. Its access log as Jupyter Server writes its own (a URL's token as [secret], successes at
# debug level; tornado's, Voilà's default, writes every URL whole); and every other line, such as
# tornado's warning of a refused request, which writes its URL whole in any Jupyter server, the token
# replaced as it is logged.
VOILA_CONFIG = """# written by metrics-kit dashboard
import logging
import os

from jupyter_server.log import log_request

c.Voila.tornado_settings = {"log_function": log_request}

with open(os.environ["JUPYTER_TOKEN_FILE"], encoding="ascii") as file:
    token = file.read().strip()
make_record = logging.getLogRecordFactory()


def scrubbed(*args, **kwargs):
    record = make_record(*args, **kwargs)
    try:
        message = record.getMessage()
    except Exception:  # a record that cannot be formatted: logging reports it
        return record
    if token and token in message:
        record.msg, record.args = message.replace(token, "[secret]"), None
    return record


logging.setLogRecordFactory(scrubbed)
"""
# The other pages (the list of notebooks, errors) extend Voilà's page.html, whose base links a CDN
# outside any block: the template has its own copies of both, without that link.
PAGE_BASE = "base-page.html"


def prepare(
    folder: Path,
    notebook: str | os.PathLike | None,
    parameters: Mapping[str, Any] | None = None,
) -> Path:
    """Write into ``folder`` what the dashboard serves: the notebook (None: every notebook of the
    notebooks folder) with ``parameters`` injected, and the template. Returns the notebook's copy,
    or the folder of copies."""
    import nbformat
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    values = dict(parameters or {})
    if notebook is None:
        if values:
            raise ValidationError(
                "parameters need a notebook: name the one to serve (every notebook has its own parameters)",
                "parameters",
            )
        sources = notebooks.available()
    else:
        path = notebooks.find(notebook)
        values = notebooks.check_parameters(path, values)
        sources = [path]
    served = folder / "notebooks"
    served.mkdir()
    for source in sources:
        nb = load_notebook_node(str(source))  # as papermill reads one: every cell with its (maybe empty) tags
        if values:
            nb = parameterize_notebook(nb, values)
        nbformat.write(nb, served / source.name)
    templates = folder / "jupyter" / "voila" / "templates" / TEMPLATE
    templates.mkdir(parents=True)
    (templates / "index.html.j2").write_text(TEMPLATE_INDEX, encoding="utf-8")
    (templates / "conf.json").write_text(json.dumps(TEMPLATE_CONF), encoding="utf-8")
    page = _voila_template("lab", "page.html").replace("voila/templates/base/page.html", PAGE_BASE)
    (templates / "page.html").write_text(page, encoding="utf-8")
    (templates / PAGE_BASE).write_text(_offline(_voila_template("base", "page.html")), encoding="utf-8")
    _write_kernel(folder / "jupyter" / "kernels" / notebooks.KERNEL_NAME)
    (folder / "config").mkdir()
    (folder / "config" / "voila.py").write_text(VOILA_CONFIG, encoding="utf-8")
    return served / sources[0].name if notebook is not None else served


def _write_kernel(path: Path) -> None:
    """The kernel the notebooks name (``python3``), as this Python's ipykernel, loading
    :mod:`metrics_kit.tools.dashboard_kernel`: a failed cell shows its error in a line on the page."""
    from ipykernel.kernelspec import write_kernel_spec

    write_kernel_spec(path, extra_arguments=[f"--InteractiveShellApp.extra_extensions={KERNEL_EXTENSION}"])


def _voila_template(name: str, file: str) -> str:
    """The text of ``file`` of Voilà's template ``name``, as installed."""
    from jupyter_core.paths import jupyter_path

    for folder in jupyter_path("voila", "templates"):
        path = Path(folder) / name / file
        if path.is_file():
            return path.read_text(encoding="utf-8")
    raise MetricsKitError(f"Voilà's {name} template has no {file}: reinstall the [dashboard] extra")


def _offline(text: str) -> str:
    """``text`` without its lines that link a stylesheet on another host."""
    return "".join(line for line in text.splitlines(keepends=True) if not ("<link" in line and "://" in line))


def free_port(ip: str, wanted: int | None) -> int:
    """The port to serve on: ``wanted``, checked free on ``ip``; None: Voilà's default, 8866, when
    it is free, else a free one; 0: a free one."""
    if wanted is not None and not 0 <= wanted <= 65535:
        raise ValidationError(f"port must be 0 to 65535 (0: a free port), not {wanted}", "port")
    if wanted is None and _bind(ip, DEFAULT_PORT) is not None:
        return DEFAULT_PORT
    bound = _bind(ip, wanted or 0)
    if bound is None:
        raise ValidationError(f"port {wanted} of {ip} is taken; give another, or 0 for a free one", "port")
    return bound


def command(target: Path, *, ip: str, port: int, runtime: Path, extra_args: Sequence[str] = ()) -> list[str]:
    """The ``voila`` command line: this Python's Voilà on ``target`` (a notebook, or a folder of
    them), on ``ip`` and exactly ``port``, with a token, the offline template, its kernels'
    connection files in ``runtime`` (the dashboard's folder, removed whatever way Voilà ends: when it
    cannot listen, it leaves its own folder behind), and no browser of its own (its page would not
    carry the token)."""
    return [
        sys.executable,
        "-m",
        "voila",
        str(target),
        f"--Voila.ip={ip}",
        f"--port={port}",
        "--Voila.port_retries=0",  # this port or none: the printed address must be the one served
        "--no-browser",
        "--token",
        f"--template={TEMPLATE}",
        f"--Voila.connection_dir_root={runtime}",
        *extra_args,
    ]


def url(ip: str, port: int, token: str) -> str:
    host = "127.0.0.1" if ip in ("", "0.0.0.0") else f"[{ip}]" if ":" in ip else ip
    return f"http://{host}:{port}/?token={token}"


def dashboard(
    notebook: str | os.PathLike | None = None,
    parameters: Mapping[str, Any] | None = None,
    *,
    ip: str = notebooks.LOCAL_ONLY,
    port: int | None = None,
    open_browser: bool = True,
    extra_args: Sequence[str] = (),
    log: Callable[[str], Any] = print,
) -> int:
    """Serve ``notebook`` (None: every notebook) as a dashboard until Voilà stops, or this process is
    stopped (Ctrl+C, SIGTERM, SIGHUP: Voilà and its kernels are stopped and the folder removed);
    returns Voilà's exit status, or 128 + the signal's number. Everything is checked before the demo
    is built or a server starts."""
    _check_voila()
    with _Signals() as signals:
        server = _Server()
        folder: Path | None = None
        try:
            folder = Path(tempfile.mkdtemp(prefix="metrics-kit-dashboard-"))
            target = prepare(folder, notebook, parameters)
            chosen = free_port(ip, port)
            token = secrets.token_hex(24)
            token_file = folder / "token"
            token_file.touch(mode=0o600)
            token_file.write_text(token, encoding="ascii")
            notebooks.warm(log)
            if ip != notebooks.LOCAL_ONLY:
                log(
                    f"The dashboard will listen on {ip}: anyone who can reach this machine and has the token can "
                    "open it (and move its controls; it runs no code of theirs)."
                )
            env = {
                **os.environ,
                "JUPYTER_TOKEN_FILE": str(token_file),
                "JUPYTER_PATH": _paths(folder / "jupyter", os.environ.get("JUPYTER_PATH")),
                "JUPYTER_CONFIG_PATH": _paths(folder / "config", os.environ.get("JUPYTER_CONFIG_PATH")),
                INTERACTIVE_ENV: os.environ.get(INTERACTIVE_ENV) or "on",
            }
            env.pop("JUPYTER_TOKEN", None)  # it would win over the file
            server.start(command(target, ip=ip, port=chosen, runtime=folder, extra_args=extra_args), env)
            server.wait_until_serving(ip, chosen, token, given=port is not None)
            address = url(ip, chosen, token)
            log(f"The dashboard is at (Ctrl+C to stop):\n    {address}")
            sys.stdout.flush()
            if open_browser:
                import webbrowser

                webbrowser.open(address)
            return server.wait()
        except _Stopped as stopped:
            return 128 + stopped.signum
        finally:
            signals.stopping()
            server.stop()
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)


def _paths(first: Path, rest: str | None) -> str:
    return os.pathsep.join(p for p in (str(first), rest) if p)


class _Stopped(BaseException):
    """SIGTERM or SIGHUP, raised in the main thread as Ctrl+C raises KeyboardInterrupt."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class _Signals:
    """While the dashboard runs, SIGTERM (``kill PID``, a supervisor) and SIGHUP (its terminal
    closed) raise :class:`_Stopped`, so that it stops as on Ctrl+C, every ``finally`` run. (Python's
    default for them ends the process at once: Voilà and its kernels went on serving, and the folder
    with the token stayed.) Once it stops (:meth:`stopping`), these and Ctrl+C are ignored: a second
    one would cut the stop short. Only the main thread can set handlers; elsewhere this does nothing."""

    STOP = ("SIGTERM", "SIGHUP")  # by name: Windows has no SIGHUP

    def __init__(self) -> None:
        self.before: dict[int, Any] = {}

    def __enter__(self) -> _Signals:
        if threading.current_thread() is threading.main_thread():
            for name in self.STOP:
                if hasattr(signal, name):
                    number = getattr(signal, name)
                    self.before[number] = signal.signal(number, self._stop)
        return self

    @staticmethod
    def _stop(signum: int, frame: object) -> None:
        raise _Stopped(signum)

    def stopping(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self.before.setdefault(signal.SIGINT, signal.getsignal(signal.SIGINT))
            for number in self.before:
                signal.signal(number, signal.SIG_IGN)

    def __exit__(self, *exc: object) -> None:
        for number, handler in self.before.items():
            signal.signal(number, handler)


class _Server:
    """Voilà, as a child in a session of its own: a terminal's Ctrl+C or hang-up reaches this
    process only, which stops Voilà by its PID with SIGTERM, on which Voilà shuts its kernels down."""

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None

    def start(self, argv: list[str], env: dict[str, str]) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        self.process = subprocess.Popen(argv, env=env, start_new_session=True)

    def wait_until_serving(self, ip: str, port: int, token: str, *, given: bool) -> None:
        """Return once Voilà serves on ``port``: what answers there takes the token (another server,
        such as another dashboard's, would not). Voilà listens on that port or none: if it stops
        first, the port was taken since it was found free, or Voilà failed; an error says which
        (``given``: the port is the user's, not the default)."""
        assert self.process is not None
        deadline = time.monotonic() + START_SECONDS
        while not _serves(ip, port, token):
            if self.process.poll() is not None:
                if _bind(ip, port) is None:
                    raise _taken(ip, port, given)
                raise MetricsKitError(
                    f"Voilà stopped before it served the dashboard (exit status {self.process.returncode}); "
                    "its messages above say why"
                )
            if time.monotonic() > deadline:
                raise MetricsKitError(f"Voilà did not answer on port {port} within {START_SECONDS} s")
            time.sleep(0.2)

    def wait(self) -> int:
        assert self.process is not None
        return self.process.wait()

    def stop(self) -> None:
        """Stop Voilà by its PID (SIGTERM: it shuts its kernels down); kill it if it lingers."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _taken(ip: str, port: int, given: bool) -> MetricsKitError:
    taken = f"port {port} of {ip} was taken by another program while the dashboard started"
    if given:
        return ValidationError(f"{taken}; give another, or 0 for a free one", "port")
    # The default port: started again, the dashboard finds it taken and takes a free one.
    return MetricsKitError(f"{taken} (the default port); start it again, and it takes a free one")


def _check_voila() -> None:
    try:
        import voila  # noqa: F401
    except ImportError:
        raise MetricsKitError(
            "metrics-kit dashboard needs Voilà: pip install 'metrics-kit[dashboard]' (make dashboard installs it)"
        ) from None


def _family(ip: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in ip else socket.AF_INET


def _bind(ip: str, port: int) -> int | None:
    """The port a socket bound to (ip, port) got (None: in use); an address this machine does not
    have is an error. Bound as Voilà binds (tornado sets SO_REUSEADDR): a port whose last
    connections are still closing (TIME_WAIT, for a minute after a dashboard stops) is free to it."""
    try:
        with socket.socket(_family(ip)) as probe:
            if os.name == "posix":  # elsewhere the option means another thing: sharing a port in use
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((ip, port))
            return int(probe.getsockname()[1])
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            return None
        raise ValidationError(f"ip: cannot listen on {ip}: {error.strerror or error}", "ip") from None


# Voilà's login page: asked with the token, it sends the viewer on to the dashboard (302); without
# it, it shows the form (200). Costs no kernel and writes no warning in the log; another server on the
# port answers otherwise (another Voilà or Jupyter does not know the token: it shows its form).
_LOGIN = "/login"


def _serves(ip: str, port: int, token: str) -> bool:
    """Whether the server on ``port`` is this dashboard's Voilà: it takes ``token``, and a request
    without it, it does not."""
    return _status(ip, port, token) == 302 and _status(ip, port, None) == 200


def _status(ip: str, port: int, token: str | None) -> int | None:
    """The status of a GET of the login page, with ``token`` (None: without one); None when nothing
    answers. The token goes in a header, which no access log writes."""
    import http.client

    host = "127.0.0.1" if ip in ("", "0.0.0.0") else "::1" if ip == "::" else ip
    connection = http.client.HTTPConnection(host, port, timeout=PROBE_SECONDS)
    try:
        connection.request("GET", _LOGIN, headers={"Authorization": f"token {token}"} if token else {})
        return connection.getresponse().status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        connection.close()
