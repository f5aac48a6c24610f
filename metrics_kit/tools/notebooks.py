"""The example notebooks: where they are, running one into an HTML report, JupyterLab on them.

Where the notebooks live
------------------------
They are part of the source checkout (``notebooks/`` next to the ``metrics_kit`` package), not of
the installed package: ``make setup`` installs the package in editable mode, so from a checkout
they are found next to it. ``$METRICS_KIT_NOTEBOOKS`` names another folder (a copy of them, say,
for a non-editable install); ``metrics-kit report`` also takes the path of any notebook.

Every notebook starts with a cell tagged ``parameters`` (``projects``/``project``, ``start``,
``end``, ``granularity``, ``base_url = None``) whose defaults run offline against the embedded
reference service, so that papermill can run it with other values (see notebooks/README.md).
"""

from __future__ import annotations

import ast
import copy
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from metrics_kit import files
from metrics_kit.client.settings import BASE_URL_ENV
from metrics_kit.errors import ConfigurationError, MetricsKitError, ValidationError

NOTEBOOKS_ENV = "METRICS_KIT_NOTEBOOKS"
KERNEL_NAME = "python3"
REQUIRED_PARAMETERS = ("start", "end", "granularity", "base_url")
REPORT_SUFFIXES = (".html", ".htm")
CELL_TIMEOUT = 600  # seconds per cell in run(); a notebook on the embedded default takes seconds


# -- where the notebooks are ------------------------------------------------------------------------


def notebooks_dir() -> Path:
    """``$METRICS_KIT_NOTEBOOKS``, else the ``notebooks/`` folder of the checkout this package is in."""
    configured = os.environ.get(NOTEBOOKS_ENV)
    if configured:
        folder = Path(configured).expanduser()
        if not folder.is_dir():
            raise ConfigurationError(f"{NOTEBOOKS_ENV} names {folder}, which is not a folder")
        return folder
    folder = Path(__file__).resolve().parents[2] / "notebooks"
    if folder.is_dir():
        return folder
    raise ConfigurationError(
        "the example notebooks come with the source checkout (its notebooks/ folder), and this "
        f"metrics_kit is not installed from one; clone the repository and run `make lab`, set "
        f"{NOTEBOOKS_ENV} to a folder of notebooks, or give the path of a notebook"
    )


def available(folder: Path | None = None) -> list[Path]:
    """The notebooks of ``folder`` (default: :func:`notebooks_dir`), in name order."""
    folder = folder or notebooks_dir()
    return sorted(p for p in folder.glob("*.ipynb") if not p.name.startswith("."))


def _short(path: Path) -> str:
    """``02_tokenomics.ipynb`` -> ``tokenomics``."""
    stem = path.stem
    head, _, rest = stem.partition("_")
    return rest if head.isdigit() and rest else stem


def find(notebook: str | os.PathLike) -> Path:
    """A notebook by path, or by a short name: ``tokenomics``, ``02``, ``02_tokenomics``,
    ``chain-rewards`` or any unambiguous part of a name (``yield``)."""
    text = str(notebook)
    path = Path(text).expanduser()
    if path.suffix == ".ipynb" or os.sep in text or "/" in text:
        if path.is_file():
            return path
        if path.suffix != ".ipynb":
            raise ValidationError(f"{text!r} is not a notebook (.ipynb) file", "notebook")
        if path.parent != Path("."):
            raise ValidationError(f"no notebook file {text!r}", "notebook")
    known = available()
    wanted = path.stem.lower().replace("-", "_").replace(" ", "_")
    for test in (
        lambda p: p.stem.lower() == wanted,
        lambda p: _short(p).lower() == wanted,
        lambda p: p.stem.split("_")[0] == wanted,
        lambda p: wanted in p.stem.lower(),
    ):
        found = [p for p in known if test(p)]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise ValidationError(
                f"{text!r} could be any of {', '.join(p.stem for p in found)}; give more of the name", "notebook"
            )
    names = ", ".join(_short(p) for p in known) or "(none)"
    raise ValidationError(
        f"no notebook {text!r} in {notebooks_dir()}; the notebooks are: {names} (or give a path to an .ipynb file)",
        "notebook",
    )


# -- parameters ------------------------------------------------------------------------------------


def parameters(notebook: str | os.PathLike) -> dict[str, str]:
    """The parameters of a notebook (its cell tagged ``parameters``): name -> default, as source."""
    from papermill.inspection import inspect_notebook

    path = find(notebook)
    try:
        found = inspect_notebook(str(path))
    except Exception as error:  # a notebook papermill cannot read
        raise ValidationError(f"cannot read the parameters of {path.name}: {error}", "notebook") from error
    return {name: info["default"] for name, info in found.items()}


def parse_value(text: str) -> Any:
    """A parameter value from the command line, as papermill's ``-p NAME VALUE`` reads it: True,
    False, None, integers and floats become Python values (the rules of papermill's CLI); lists
    and dicts written as JSON or Python literals (``'["demoswap", "demofarm"]'``) too; anything
    else stays a string (dates too)."""
    stripped = text.strip()
    if stripped[:1] and stripped[0] in "[{":
        for parse in (json.loads, ast.literal_eval):
            try:
                return parse(stripped)
            except Exception:
                continue
        raise ValidationError(
            f'cannot read {text!r} as a list or a dict; write it as JSON, such as \'["demoswap", "demofarm"]\'',
            "parameters",
        )
    if text in _CONSTANTS:
        return _CONSTANTS[text]
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            continue
    return text


_CONSTANTS = {"True": True, "False": False, "None": None}


def check_parameters(notebook: str | os.PathLike, values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` checked against the notebook's parameters cell; a string given for a parameter
    whose default is a list becomes a list of one."""
    path = find(notebook)
    defaults = parameters(path)
    if values and not defaults:
        raise ValidationError(f"{path.name} has no cell tagged 'parameters', so it takes no parameters", "parameters")
    unknown = [name for name in values if name not in defaults]
    if unknown:
        raise ValidationError(
            f"{path.name} has no parameter {', '.join(map(repr, unknown))}; its parameters are: {', '.join(defaults)}",
            "parameters",
        )
    checked = dict(values)
    for name, value in values.items():
        if isinstance(value, str) and _literal(defaults[name], list):
            checked[name] = [value]
    check_values(checked)
    return checked


PROJECT_PARAMETERS = ("project", "projects")  # and any name ending in _projects


def check_values(values: Mapping[str, Any]) -> None:
    """The values of the parameters every notebook shares checked before anything runs, with the
    rules the service applies: dates, granularity, and project ids (against the service's own
    projects, when it describes them), each refused with what is allowed."""
    from metrics_kit.spec import ids

    for name in ("start", "end"):
        if name not in values:
            continue
        # -p reads 12 or 20250101 as a number: the notebook would get a number where it takes a date
        if not isinstance(values[name], str):
            raise ValidationError(
                f"parameter {name}: a date in the form YYYY-MM-DD (such as 2025-01-01), not {values[name]!r}", name
            )
        ids.parse_date(values[name], name)
    if "granularity" in values:
        ids.check_granularity(values["granularity"])
    named = [
        (name, project)
        for name, value in values.items()
        if name in PROJECT_PARAMETERS or name.endswith("_projects")
        for project in (value if isinstance(value, list) else [value])
    ]
    if not named:
        return
    for name, project in named:
        try:
            ids.check_project(project)
        except ValidationError as error:
            raise ValidationError(f"parameter {name}: {error}", name) from error
    known = _service_projects(values.get("base_url"))
    for name, project in named:
        if known is not None and project not in known:
            close = ids.suggest(project, sorted(known))
            hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
            raise ValidationError(
                f"parameter {name}: the service has no project {project!r}{hint or '.'} Its projects are: "
                f"{', '.join(sorted(known))}",
                name,
            )


def _service_projects(base_url: str | None) -> set[str] | None:
    """The project ids the notebook's service describes (None if it does not)."""
    from metrics_kit.client.client import Client

    with Client(base_url, progress=False) as client:
        found = client.discovery()
    return set(found) if found is not None else None


def _literal(source: str, kind: type) -> bool:
    try:
        return isinstance(ast.literal_eval(source), kind)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


# -- running a notebook ----------------------------------------------------------------------------


POLL_SLICE = 1.0  # seconds; see _kernel_manager_class


def _kernel_manager_class():
    """A kernel manager that starts ``python3`` as this interpreter's own ipykernel, whatever
    kernels are installed elsewhere (a user-level ``python3`` spec may point at another Python),
    with ``$METRICS_KIT_INTERACTIVE_CHARTS=off``: no widget frontend shows what it runs, so its
    charts are pictures (see :mod:`metrics_kit.notebook.interactive`).

    Its client waits for the kernel's messages in slices of at most POLL_SLICE seconds. The
    asyncio client polls the ZeroMQ sockets through an edge-triggered file descriptor, and now and
    then a wake-up is lost: the message is there, but nobody looks until the wait times out (after
    the whole cell timeout; seen as cells that took exactly 600 s and then succeeded). Each slice
    ends with a look at the socket, so a lost wake-up costs at most a slice."""
    import subprocess
    import time
    from queue import Empty

    import ipykernel.kernelspec
    from jupyter_client import AsyncKernelManager
    from jupyter_client.asynchronous import AsyncKernelClient
    from jupyter_client.channels import AsyncZMQSocketChannel
    from jupyter_client.kernelspec import KernelSpecManager
    from traitlets import Type, default

    from metrics_kit.notebook.interactive import INTERACTIVE_ENV

    class SlicedChannel(AsyncZMQSocketChannel):
        async def get_msg(self, timeout=None):
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    return await super().get_msg(POLL_SLICE if left is None else min(POLL_SLICE, left))
                except Empty:
                    if left is not None and left <= POLL_SLICE:
                        raise

    class SlicedClient(AsyncKernelClient):
        shell_channel_class = Type(SlicedChannel)
        iopub_channel_class = Type(SlicedChannel)
        control_channel_class = Type(SlicedChannel)

    class ThisPythonSpecs(KernelSpecManager):
        def get_kernel_spec(self, kernel_name):
            if kernel_name == KERNEL_NAME:
                return self.kernel_spec_class(
                    resource_dir=ipykernel.kernelspec.RESOURCES, **ipykernel.kernelspec.get_kernel_dict()
                )
            return super().get_kernel_spec(kernel_name)

    class ThisPythonKernelManager(AsyncKernelManager):
        @default("kernel_spec_manager")
        def _this_python_specs(self):
            return ThisPythonSpecs(data_dir=self.data_dir)

        @default("client_factory")
        def _sliced_client(self):
            return SlicedClient

        async def start_kernel(self, **kw):
            # The kernel's own log (a warning about its TCP transport, say) is not the notebook's
            # output: keep it off the terminal, as nbval does. Errors still reach the notebook.
            # (start_kernel hands its keywords to the kernel's Popen; a restart reuses them.)
            kw.setdefault("stderr", subprocess.DEVNULL)
            # No widget frontend ever draws this kernel's outputs: its charts are pictures, whatever
            # environment it inherits (run from a JupyterLab kernel, JPY_SESSION_NAME is set; or
            # METRICS_KIT_INTERACTIVE_CHARTS=on is), never canvases that a report leaves out.
            kw["env"] = {**(kw.get("env") or os.environ), INTERACTIVE_ENV: "off"}
            return await super().start_kernel(**kw)

    return ThisPythonKernelManager


# A FetchError's text (errors.py): its count, what errors= could do instead, then a line per point,
# "  POINT: REASON", where a point (metric, project, granularity, date) holds no ': ' and an
# APIError's reason ends with the URL of its point.
_FETCH_COUNT = re.compile(r"(\d+ of \d+ points failed)\b")
_POINT_URL = re.compile(r" for \S+://\S+$")


def failure_reason(ename: str, evalue: str) -> str:
    """The reason a notebook's cell failed, in one line: the error's first line; for a FetchError,
    how many points failed and why (the reason once where all failed alike, else the first one's),
    without its suggestion of errors='coerce', an argument of the notebook's code, not of the
    command that ran it."""
    lines = evalue.strip().splitlines()
    if not lines:
        return ""
    count = _FETCH_COUNT.match(lines[0]) if ename == "FetchError" else None
    points = [line.strip().partition(": ") for line in lines[1:] if line.startswith("  ") and ": " in line]
    if count is None or not points:
        return lines[0]
    reasons = [_POINT_URL.sub("", reason) for _point, _sep, reason in points]
    if len(set(reasons)) == 1:
        more = any(line.strip().startswith("... and") for line in lines[1:])  # points the text leaves out
        return f"{count[1]}, {f'the first {len(points)} ' if more else ''}each with: {reasons[0]}"
    first, _sep, _reason = points[0]
    return f"{count[1]}; the first, {first}, with: {reasons[0]}"


def execute(notebook: str | os.PathLike, parameters: Mapping[str, Any] | None = None, *, timeout: float = CELL_TIMEOUT):
    """Run a notebook with ``parameters`` under papermill (kernel ``python3`` of this Python, in a
    temporary working folder) and return the executed notebook (an ``nbformat`` node)."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    path = find(notebook)
    values = check_parameters(path, parameters or {})
    with tempfile.TemporaryDirectory(prefix="metrics-kit-notebook-") as workdir:
        try:
            nb = papermill.execute_notebook(
                str(path),
                None,
                parameters=values,
                kernel_name=KERNEL_NAME,
                progress_bar=False,
                cwd=workdir,
                execution_timeout=timeout,
                kernel_manager_class=_kernel_manager_class(),
            )
        except PapermillExecutionError as error:
            reason = failure_reason(error.ename, error.evalue or "")
            raise MetricsKitError(
                f"{path.name} failed in cell {error.exec_count}: {error.ename}{': ' + reason if reason else ''}"
            ) from error
        except Exception as error:  # the kernel died, timed out or never started
            raise MetricsKitError(
                f"{path.name} did not run: {type(error).__name__}: "
                f"{str(error).strip().splitlines()[0] if str(error).strip() else ''}"
            ) from error
    run_info = nb.metadata.get("papermill", {})
    run_info.update(input_path=path.name, output_path=None)  # no local path in what is passed on
    return nb


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE = (
    "<p><em>Interactive controls (ipywidgets) are left out of this report: open the notebook "
    "in JupyterLab (<code>metrics-kit lab</code>) to use them.</em></p>"
)
# JupyterLab's page without what it would fetch from a CDN (require.js, MathJax, mermaid, the
# widget manager): the report opens with the network off. Its styles are inline already.
OFFLINE_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""


def _without_widgets(output):
    """A widget output as what a page without a kernel can show: its chart (interactive panels
    carry one as a PNG) and a note."""
    from nbformat import NotebookNode

    data = {"text/html": WIDGET_NOTE, "text/plain": "(interactive controls)"}
    shown = [NotebookNode(output_type="display_data", metadata={}, data=data)]
    if "image/png" in output.get("data", {}):
        picture = {"image/png": output["data"]["image/png"], "text/plain": "(the chart's default view)"}
        shown.insert(0, NotebookNode(output_type="display_data", metadata={}, data=picture))
    return shown


def to_html(nb, *, title: str, hide_input: bool = False) -> str:
    """A self-contained HTML page of an executed notebook: one file that needs no network, its
    images embedded as data URIs, no script or stylesheet from elsewhere.

    Widgets need a live kernel (or a widget manager fetched from a CDN), so each widget output
    becomes its chart's picture and a short note, and the widget state is dropped."""
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    nb = copy.deepcopy(nb)
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        outputs: list[Any] = []
        for output in cell.get("outputs", []):
            outputs += _without_widgets(output) if WIDGET_VIEW in output.get("data", {}) else [output]
        cell.outputs = outputs
    exporter = HTMLExporter(
        template_name="lab",
        extra_loaders=[DictLoader({"metrics-kit-offline.html.j2": OFFLINE_TEMPLATE})],
        template_file="metrics-kit-offline.html.j2",
        embed_images=True,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
        exclude_input=hide_input,
    )
    html, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
    return html


def run(
    notebook: str | os.PathLike,
    parameters: Mapping[str, Any] | None = None,
    out_html: str | os.PathLike | None = None,
    *,
    hide_input: bool = False,
    timeout: float = CELL_TIMEOUT,
) -> Path:
    """Run ``notebook`` with ``parameters`` and write a standalone HTML report to ``out_html``
    (default: the notebook's name with ``.html``, in the current folder). Returns its path."""
    path = find(notebook)
    out = Path(out_html) if out_html is not None else Path(f"{path.stem}.html")
    if out.suffix.lower() not in REPORT_SUFFIXES:
        raise ValidationError(f"the report must be an .html file, not {out.name!r}", "out")
    if not out.parent.is_dir():
        raise ValidationError(f"the folder of the report ({out.parent}) does not exist", "out")
    nb = execute(path, parameters, timeout=timeout)
    html = to_html(nb, title=path.stem, hide_input=hide_input)
    with files.atomic_write(out) as tmp:  # a failure leaves no half-written report
        tmp.write_text(html, encoding="utf-8")
    return out


# -- JupyterLab -------------------------------------------------------------------------------------


def warm(log: Callable[[str], Any] = print) -> None:
    """Build the embedded default's demo data and aggregates now (once per machine, then from the
    cache), so that the first notebook cell that asks for data answers at once. Nothing to do when
    ``$METRICS_KIT_BASE_URL`` points the notebooks at a remote service."""
    if os.environ.get(BASE_URL_ENV):
        log(f"The notebooks will use the service {os.environ[BASE_URL_ENV]} (${BASE_URL_ENV})")
        return
    from metrics_kit.server.dataset import open_service

    open_service(log=log)
    log("Embedded default ready")


LOCAL_ONLY = "127.0.0.1"


def running_as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


# What `metrics-kit lab` changes of JupyterLab's defaults: JupyterLab saves the state of the widgets
# with the notebook (Settings > Settings Editor > Widgets: "Save Widget State Automatically", off as
# shipped), so that a saved notebook reopened without a kernel shows each chart's last picture (its
# canvas' state holds it) rather than "Error displaying widget: model not found".
LAB_DEFAULTS = {"@jupyter-widgets/jupyterlab-manager:plugin": {"saveState": True}}
_DEFAULTS_FILE = "metrics-kit.json"


def lab_settings(folder: Path | None = None, shipped: Path | None = None) -> Path:
    """The application settings folder of the JupyterLab ``metrics-kit lab`` starts (in ``folder``,
    default the cache's ``jupyterlab/settings``), written now: JupyterLab's own (``shipped``, default
    ``{its application folder}/settings``: page config and settings overrides), copied as they are,
    and :data:`LAB_DEFAULTS` as one more file of overrides. Overrides are defaults: a setting the
    user changed (their user settings) still wins, and so does their ``overrides.json``. Only that
    server reads the folder; no other JupyterLab, and no user setting, changes."""
    if shipped is None:
        try:
            from jupyterlab.commands import get_app_dir
        except ImportError as error:
            raise ConfigurationError("metrics-kit lab needs JupyterLab: pip install 'metrics-kit[lab]'") from error
        shipped = Path(get_app_dir()) / "settings"
    folder = folder or files.cache_dir() / "jupyterlab" / "settings"
    patterns = ("page_config.json*", "overrides.json*", "overrides.d/*.json*")  # what JupyterLab reads there
    copies = {
        path.relative_to(shipped): path.read_bytes()
        for pattern in patterns
        for path in sorted(shipped.glob(pattern))
        if path.is_file()
    }
    copies[Path("overrides.d", _DEFAULTS_FILE)] = json.dumps(LAB_DEFAULTS, indent=2).encode()
    # JupyterLab reads its build's package.json beside the settings folder (its extensions' metadata)
    package = shipped.parent / "static" / "package.json"
    if package.is_file():
        copies[Path("..", "static", "package.json")] = package.read_bytes()
    for pattern in patterns:
        for stale in folder.glob(pattern):
            if stale.relative_to(folder) not in copies:
                stale.unlink(missing_ok=True)  # a file of the shipped settings since removed
    for name, content in copies.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        with files.atomic_write(target) as temporary:  # another lab starting at once reads whole files
            temporary.write_bytes(content)
    return folder


def lab_command(
    port: int | None = None,
    open_browser: bool = True,
    folder: Path | None = None,
    extra_args: Sequence[str] = (),
    *,
    ip: str = LOCAL_ONLY,
    settings: Path | None = None,
) -> list[str]:
    """The ``jupyter lab`` command line: this Python's JupyterLab on the notebooks folder, on
    ``ip`` (127.0.0.1 unless told otherwise), opening the quickstart if there is one, with the
    application ``settings`` folder given (see :func:`lab_settings`). As root (a container, a
    fresh cloud machine) it says ``--allow-root``, which JupyterLab demands."""
    folder = (folder or notebooks_dir()).resolve()
    command = [sys.executable, "-m", "jupyterlab", f"--notebook-dir={folder}", f"--ServerApp.ip={ip}"]
    if settings is not None:
        command.append(f"--LabApp.app_settings_dir={settings}")
    if port is not None:
        command.append(f"--ServerApp.port={port}")
    if not open_browser:
        command.append("--no-browser")
    if running_as_root() and "--allow-root" not in extra_args:
        command.append("--allow-root")
    first = available(folder)
    if first and open_browser:
        command.append(str(first[0]))
    return command + list(extra_args)


def lab(
    port: int | None = None,
    open_browser: bool = True,
    *,
    extra_args: Sequence[str] = (),
    ip: str = LOCAL_ONLY,
    log: Callable[[str], Any] = print,
) -> int:
    """Warm the embedded default, then replace this process with JupyterLab on the notebooks
    (``extra_args`` go to ``jupyter lab``), its settings' defaults those of :func:`lab_settings`.
    JupyterLab prints the address to open, with its token (``http://127.0.0.1:8888/lab?token=...``)."""
    command = lab_command(port, open_browser, extra_args=extra_args, ip=ip, settings=lab_settings())
    warm(log)
    if ip != LOCAL_ONLY:
        log(
            f"JupyterLab will listen on {ip}: anyone who can reach this machine and has the token can run "
            "code here. An SSH tunnel keeps it on 127.0.0.1 (see the README)."
        )
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name == "posix":
        os.execv(command[0], command)  # does not return; Ctrl+C goes straight to JupyterLab
    import subprocess

    return subprocess.call(command)
