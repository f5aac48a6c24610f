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
  command line, which ``ps`` shows.
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
import socket
import subprocess
import sys
import tempfile
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
    return served / sources[0].name if notebook is not None else served


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


def command(target: Path, *, ip: str, port: int, extra_args: Sequence[str] = ()) -> list[str]:
    """The ``voila`` command line: this Python's Voilà on ``target`` (a notebook, or a folder of
    them), on ``ip`` and exactly ``port``, with a token, the offline template, and no browser of its
    own (its page would not carry the token)."""
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
    """Serve ``notebook`` (None: every notebook) as a dashboard until Voilà stops (Ctrl+C); returns
    Voilà's exit status. Everything is checked before the demo is built or a server starts."""
    _check_voila()
    folder = Path(tempfile.mkdtemp(prefix="metrics-kit-dashboard-"))
    try:
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
            "JUPYTER_PATH": os.pathsep.join(p for p in (str(folder / "jupyter"), os.environ.get("JUPYTER_PATH")) if p),
            INTERACTIVE_ENV: os.environ.get(INTERACTIVE_ENV) or "on",
        }
        env.pop("JUPYTER_TOKEN", None)  # it would win over the file
        return _serve(
            command(target, ip=ip, port=chosen, extra_args=extra_args),
            env,
            url(ip, chosen, token),
            ip,
            chosen,
            open_browser,
            log,
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _serve(argv: list[str], env: dict[str, str], address: str, ip: str, port: int, open_browser: bool, log) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    process = subprocess.Popen(argv, env=env)
    try:
        deadline = time.monotonic() + START_SECONDS
        while not _answers(ip, port):
            if process.poll() is not None:
                return process.returncode or 1
            if time.monotonic() > deadline:
                raise MetricsKitError(f"Voilà did not answer on port {port} within {START_SECONDS} s")
            time.sleep(0.2)
        log(f"The dashboard is at (Ctrl+C to stop):\n    {address}")
        sys.stdout.flush()
        if open_browser:
            import webbrowser

            webbrowser.open(address)
        return process.wait()
    finally:
        _stop(process)


def _stop(process: subprocess.Popen) -> None:
    """Stop Voilà (it shuts its kernels down on SIGTERM), by its PID; kill it if it lingers."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


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
    have is an error."""
    try:
        with socket.socket(_family(ip)) as probe:
            probe.bind((ip, port))
            return int(probe.getsockname()[1])
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            return None
        raise ValidationError(f"ip: cannot listen on {ip}: {error.strerror or error}", "ip") from None


def _answers(ip: str, port: int) -> bool:
    host = "127.0.0.1" if ip in ("", "0.0.0.0") else "::1" if ip == "::" else ip
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False
