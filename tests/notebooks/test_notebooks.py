"""The example notebooks: their shape, their stored outputs, runs with other parameters, and the
``metrics-kit report`` and ``metrics-kit lab`` commands.

nbval (wired in pyproject.toml) re-runs every notebook with its default parameters and compares
the outputs with the stored ones; here each notebook also runs under papermill with *other*
parameters (another project of the same kind where the demo data has one, another granularity,
another window), which must finish without an error and without leaking a key or a local path.
The headless run time of each is printed at the end of the session (no timed assertion).
"""

from __future__ import annotations

import ast
import base64
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
from support import load_file

from metrics_kit.errors import MetricsKitError, ValidationError
from metrics_kit.tools import notebooks
from metrics_kit.tools.cli import main

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
DOCS = ROOT / "docs"
# One notebook per family, plus the quickstart: export_figures.py names each by a word of its file name.
FAMILIES = load_file(ROOT / "notebooks" / "export_figures.py", "export_figures").FAMILIES
REQUIRED = ("quickstart", *FAMILIES.values())
GOAL_SECONDS = 30

# Another project of the same kind, in the demo data, for each notebook (by a word of its name).
# Lending, chain rewards and yield have one project each in the demo data: they get another
# granularity and another window only.
OTHER_PROJECT = {
    "quickstart": {"demoswap": "demoswap.clmm", "demoswap.clmm": "demoswap"},
    "tokenomics": {"demoswap": "demofarm", "demofarm": "demogov", "demogov": "demoswap"},
    "dex": {"demoswap": "demoswap.clmm", "demoswap.clmm": "demoswap"},
}
OTHER_GRANULARITY = {"1_day": "1_week", "1_week": "1_month", "1_month": "1_week"}
OTHER_WINDOW = ("2024-03-01", "2024-10-31")  # inside the demo data's coverage, 2024-01-01 to 2025-12-31

CANARY_KEY = "canary-key-3b9f0d7e51c24a6f"  # in the kernels' environment: must never reach an output
LOCAL_PATH = re.compile(
    r"(?<![\w/.~-])(?:/root|/home/[\w.-]+|/Users/[\w.-]+|/tmp|/var/folders|/private/var"
    r"|[A-Za-z]:\\\\?Users)(?=[/\\]|\b)"
)
KEY_LIKE = re.compile(
    r"(?i)(?:api[_-]?key|access[_-]?token|auth[_-]?token|authorization|secret|password)"
    r"['\"]?\s*[:=]\s*['\"]?(?!None\b|null\b)[A-Za-z0-9_\-./+=]{8,}"
    r"|embedded-[0-9a-f]{16,}"
)  # the embedded service's key


def _word(path: Path) -> str:
    return next((word for word in REQUIRED if word in path.stem), path.stem)


def _read(path: Path):
    return nbformat.read(path, as_version=4)


def _code_cells(nb):
    return [cell for cell in nb.cells if cell.cell_type == "code"]


def _texts(node, key: str = ""):
    """Every string of an output (or metadata) tree, but images (base64) and cell sources."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for name, value in node.items():
            if not name.startswith("image/") and name != "source":
                yield from _texts(value, name)
    elif isinstance(node, list):
        for value in node:
            yield from _texts(value, key)


def _leaks(nb, extra: tuple[str, ...] = ()) -> list[str]:
    """Key-like strings and local paths in a notebook's outputs and metadata."""
    literal = {
        p
        for p in (
            str(ROOT),
            sys.prefix,
            str(Path.home()),
            tempfile.gettempdir(),
            os.environ.get("METRICS_KIT_CACHE_DIR"),
            *extra,
        )
        if p and len(p) > 4
    }
    found = []
    trees = [("metadata", nb.metadata)] + [(f"cell {i}", cell.get("outputs", [])) for i, cell in enumerate(nb.cells)]
    for where, tree in trees:
        for text in _texts(tree):
            for hit in (
                [m.group(0) for m in LOCAL_PATH.finditer(text)]
                + [m.group(0) for m in KEY_LIKE.finditer(text)]
                + [p for p in literal if p in text]
            ):
                found.append(f"{where}: {hit!r} in {text[max(0, text.find(hit) - 60) : text.find(hit) + 80]!r}")
    return found


def _parameters(path: Path) -> dict[str, str]:
    return notebooks.parameters(path)


def other_parameters(path: Path) -> dict:
    """Parameters that differ from the notebook's defaults: another project of the same kind where
    there is one, another granularity, another window."""
    defaults = {name: ast.literal_eval(source) for name, source in _parameters(path).items()}
    mapping = OTHER_PROJECT.get(_word(path), {})
    values: dict = {
        "granularity": OTHER_GRANULARITY[defaults["granularity"]],
        "start": OTHER_WINDOW[0],
        "end": OTHER_WINDOW[1],
    }
    if isinstance(defaults.get("project"), str):
        other = mapping.get(defaults["project"])
        if other and other != defaults["project"]:
            values["project"] = other
    if isinstance(defaults.get("projects"), list):
        mapped = list(dict.fromkeys(mapping.get(p, p) for p in defaults["projects"]))
        if set(mapped) == set(defaults["projects"]) and len(mapped) > 1:
            mapped = mapped[:1]  # the pair swapped is the same pair: run with one of them
        if mapped != defaults["projects"]:
            values["projects"] = mapped
    return values


# -- the set of notebooks --------------------------------------------------------------------------


def test_there_is_a_notebook_for_the_quickstart_and_every_family():
    names = [p.stem for p in NOTEBOOKS]
    assert len(NOTEBOOKS) >= 6, f"expected at least 6 notebooks in notebooks/, found {names}"
    for word in REQUIRED:
        assert [n for n in names if word in n], f"no notebook for {word!r} among {names}"


notebook_params = pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])


@notebook_params
def test_first_code_cell_is_the_parameters_cell_and_its_defaults_run_offline(path):
    nb = _read(path)
    first = _code_cells(nb)[0]
    assert "parameters" in first.metadata.get("tags", []), (
        f"{path.name}: the first code cell is not tagged 'parameters'"
    )
    params = _parameters(path)
    missing = [name for name in notebooks.REQUIRED_PARAMETERS if name not in params]
    assert not missing, f"{path.name}: the parameters cell lacks {missing}"
    assert "project" in params or "projects" in params, f"{path.name}: no project/projects parameter"
    assert params["base_url"] == "None", f"{path.name}: base_url must default to None (the embedded default)"
    for name, source in params.items():  # plain values, so that nbval's run is the offline default
        try:
            ast.literal_eval(source)
        except ValueError:
            pytest.fail(f"{path.name}: the default of {name} is not a plain value: {source}")


@notebook_params
def test_stored_outputs_are_executed_in_order_and_clean(path):
    nb = _read(path)
    cells = [cell for cell in _code_cells(nb) if cell.source.strip()]
    counts = [cell.execution_count for cell in cells]
    assert None not in counts, (
        f"{path.name}: cells {[i for i, c in enumerate(counts) if c is None]} "
        "were never run; store the outputs of a full run"
    )
    assert counts == list(range(1, len(cells) + 1)), (
        f"{path.name}: execution counts {counts}: run it top to bottom in a fresh kernel before saving"
    )
    errors = [(i, o.get("ename")) for i, cell in enumerate(cells) for o in cell.outputs if o.output_type == "error"]
    assert not errors, f"{path.name}: stored error outputs {errors}"
    assert not _leaks(nb), f"{path.name}: outputs hold keys or local paths:\n" + "\n".join(_leaks(nb))


@notebook_params
def test_stored_outputs_hold_no_stderr(path):
    # Warnings and log lines change with library versions and carry local paths.
    stderr = [
        (i, o.text[:200])
        for i, cell in enumerate(_code_cells(_read(path)))
        for o in cell.outputs
        if o.output_type == "stream" and o.name == "stderr"
    ]
    assert not stderr, f"{path.name}: stderr in stored outputs: {stderr}"


@notebook_params
def test_widget_cells_are_tagged_for_nbval(path):
    untagged = [
        i
        for i, cell in enumerate(_code_cells(_read(path)))
        if any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in cell.outputs)
        and "nbval-ignore-output" not in cell.metadata.get("tags", [])
    ]
    assert not untagged, (
        f"{path.name}: code cells {untagged} show widgets (their model ids change every run) "
        "but are not tagged nbval-ignore-output"
    )


family_notebooks = pytest.mark.parametrize("family", list(FAMILIES))


def _family_notebook(family: str) -> Path:
    found = [p for p in NOTEBOOKS if FAMILIES[family] in p.stem]
    if not found:
        pytest.fail(f"no notebook for {family}")
    return found[0]


@family_notebooks
def test_each_family_notebook_has_one_readme_figure(family):
    path = _family_notebook(family)
    tagged = [cell for cell in _code_cells(_read(path)) if "readme-figure" in cell.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{path.name}: {len(tagged)} cells tagged readme-figure, expected 1"
    assert any("image/png" in o.get("data", {}) for o in tagged[0].outputs), (
        f"{path.name}: the readme-figure cell has no stored PNG output"
    )


@family_notebooks
def test_readme_pictures_are_the_notebooks_figures(family):
    """docs/<family>.png is exactly the stored chart: run notebooks/export_figures.py after a change."""
    path = _family_notebook(family)
    picture = DOCS / f"{family}.png"
    assert picture.is_file(), f"{picture} is missing: run .venv/bin/python notebooks/export_figures.py"
    cell = next(c for c in _code_cells(_read(path)) if "readme-figure" in c.metadata.get("tags", []))
    png = next(base64.b64decode(o.data["image/png"]) for o in cell.outputs if "image/png" in o.get("data", {}))
    assert picture.read_bytes() == png, f"{picture} is not {path.name}'s figure: run notebooks/export_figures.py"
    assert f"docs/{family}.png" in (ROOT / "README.md").read_text(), f"README.md does not show docs/{family}.png"


# -- each notebook with other parameters, headless ------------------------------------------------


class _Timings:
    """Prints each notebook's headless run time at the end of the session."""

    def __init__(self):
        self.seconds: dict[str, tuple[float, dict]] = {}

    def pytest_terminal_summary(self, terminalreporter):
        if not self.seconds:
            return
        terminalreporter.write_sep(
            "-", f"notebooks run headless with other parameters (goal: under {GOAL_SECONDS} s each)"
        )
        for name, (seconds, values) in sorted(self.seconds.items()):
            over = "  (over the goal)" if seconds > GOAL_SECONDS else ""
            shown = ", ".join(f"{k}={v}" for k, v in values.items())
            terminalreporter.write_line(f"{name:28} {seconds:6.1f} s{over}   {shown}")


@pytest.fixture(scope="module")
def timings(request):
    plugin = request.config.pluginmanager.get_plugin("metrics-kit-notebook-timings")
    if plugin is None:
        plugin = _Timings()
        request.config.pluginmanager.register(plugin, "metrics-kit-notebook-timings")
    return plugin


@notebook_params
def test_runs_headless_with_other_parameters(path, tmp_path, monkeypatch, timings, record_property):
    monkeypatch.setenv("METRICS_KIT_API_KEY", CANARY_KEY)  # ignored by the embedded default; must not leak
    values = other_parameters(path)
    began = time.perf_counter()
    nb = notebooks.execute(path, values, timeout=300)
    seconds = time.perf_counter() - began
    timings.seconds[path.stem] = (seconds, values)
    record_property("headless_seconds", round(seconds, 1))
    nbformat.write(nb, tmp_path / path.name)  # to look at, when it fails
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected, "papermill did not inject the parameters"
    leaks = _leaks(nb, extra=(CANARY_KEY, str(tmp_path)))
    assert not leaks, f"{path.name} with {values}: outputs hold keys or local paths:\n" + "\n".join(leaks)


# -- the library: notebooks.run, parameters, names -------------------------------------------------


def test_short_names_find_the_notebooks():
    for word in REQUIRED:
        assert word in notebooks.find(word).stem
    assert notebooks.find(NOTEBOOKS[0]) == NOTEBOOKS[0]
    assert notebooks.find(NOTEBOOKS[0].stem) == NOTEBOOKS[0]
    assert notebooks.find(NOTEBOOKS[0].stem.split("_")[0]) == NOTEBOOKS[0]  # "01"
    with pytest.raises(ValidationError, match="no notebook 'nosuch'.*the notebooks are: quickstart"):
        notebooks.find("nosuch")
    with pytest.raises(ValidationError, match="no notebook file"):
        notebooks.find("elsewhere/nosuch.ipynb")


def test_parameter_values_are_read_like_papermills():
    parse = notebooks.parse_value
    assert parse("1_week") == "1_week" and parse("2025-01-01") == "2025-01-01"
    assert parse("None") is None and parse("True") is True and parse("3") == 3 and parse("0.5") == 0.5
    assert parse('["demoswap", "demofarm"]') == ["demoswap", "demofarm"]
    assert parse("['demoswap']") == ["demoswap"]
    with pytest.raises(ValidationError, match="as JSON"):
        parse("[demoswap")


def test_an_unknown_parameter_is_refused_before_anything_runs():
    quickstart = notebooks.find("quickstart")
    with pytest.raises(ValidationError) as caught:
        notebooks.execute(quickstart, {"projcet": "demoswap"})
    message = str(caught.value)
    assert "has no parameter 'projcet'; its parameters are: " in message and "granularity" in message


def test_a_failing_cell_is_a_clear_error():
    with pytest.raises(MetricsKitError, match=r"failed in cell \d+: ValidationError: start .* is after end"):
        notebooks.execute(notebooks.find("quickstart"), {"start": "2025-06-01", "end": "2025-01-01"}, timeout=120)


@pytest.mark.parametrize(
    "values, message",
    [
        ({"project": "nosuchproject"}, "the service has no project 'nosuchproject'. Its projects are: demochain"),
        ({"project": "demoswap.clm"}, "did you mean 'demoswap.clmm'"),
        ({"project": "Demo Swap"}, "is not a valid project id"),
        ({"granularity": "1_fortnight"}, "granularity must be one of 1_day, 1_week, 1_month"),
        ({"start": "01/02/2025"}, "start"),
    ],
)
def test_an_unknown_parameter_value_is_refused_before_anything_runs(values, message):
    with pytest.raises(ValidationError, match=re.escape(message)):
        notebooks.check_parameters(notebooks.find("quickstart"), values)


def test_a_project_list_parameter_is_checked_too():
    with pytest.raises(ValidationError, match="parameter financial_projects: the service has no project 'nosuch'"):
        notebooks.check_parameters(notebooks.find("yield"), {"financial_projects": ["demoswap", "nosuch"]})


def test_report_is_a_standalone_html_page(tmp_path):
    """metrics-kit report, as a user runs it: a subprocess, a short name, -p, --out."""
    out = tmp_path / "quickstart.html"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "metrics_kit",
            "report",
            "quickstart",
            "-p",
            "granularity",
            "1_month",
            "-p",
            "end",
            "2025-06-30",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "wrote" in done.stderr and "granularity='1_month'" in done.stderr
    html = out.read_text(encoding="utf-8")
    assert html.lstrip().lower().startswith("<!doctype html>")
    assert html.count("data:image/png;base64,") >= 2, "charts are not embedded"
    sources = re.findall(r"""<(?:img|link|iframe|script)\b[^>]*?(?:src|href)=["']([^"']+)""", html)
    assert all(s.startswith(("data:", "#")) for s in sources), f"the report needs the network or files: {sources}"
    text = re.sub(r"data:[^\"')\s]+", "data:", html)  # no base64 in what is searched
    fetched = re.findall(r"(?i)<script[^>]*\bsrc=|@import\s+url|cdnjs|unpkg\.com|jsdelivr|mathjax|require\.js", text)
    assert not fetched, f"the report loads scripts or styles from elsewhere: {fetched}"
    assert not re.search(r"""(?:src|href)=["'](?:file:|/)""", html), "refers to local files"
    assert "application/vnd.jupyter.widget-state+json" not in html, "widget state needs a CDN widget manager"
    assert notebooks.WIDGET_NOTE in html and "VBox(" not in html
    assert "1_month" in html  # the injected parameters cell
    assert str(tmp_path) not in html and str(ROOT) not in html


@pytest.mark.parametrize(
    "argv, message",
    [
        (["report", "nosuch", "--out", "x.html"], "no notebook 'nosuch'"),
        (["report", "quickstart", "-p", "projcet", "demoswap", "--out", "x.html"], "has no parameter 'projcet'"),
        (["report", "quickstart", "--out", "x.pdf"], "must be an .html file"),
        (["report", "quickstart", "--out", "no/such/folder/x.html"], "does not exist"),
        (
            ["report", "quickstart", "-p", "start", "2025-01-01", "-p", "start", "2025-02-01", "--out", "x.html"],
            "given twice",
        ),
    ],
)
def test_report_errors_are_one_line_and_exit_2(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.startswith("metrics-kit: error: ") and err.count("\n") == 1, err
    assert not list(tmp_path.iterdir()), "nothing is written on an error"


# -- metrics-kit lab --------------------------------------------------------------------------------


def test_lab_command_serves_the_notebooks_on_localhost_only():
    command = notebooks.lab_command(port=8899, open_browser=False, extra_args=["--allow-root"])
    assert command[:3] == [sys.executable, "-m", "jupyterlab"]
    assert f"--notebook-dir={NOTEBOOKS_DIR}" in command and "--ServerApp.ip=127.0.0.1" in command
    assert "--ServerApp.port=8899" in command and "--no-browser" in command and command[-1] == "--allow-root"
    assert command.count("--allow-root") == 1
    opened = notebooks.lab_command()
    assert opened[-1] == str(NOTEBOOKS[0]) and "--no-browser" not in opened
    assert "--ServerApp.ip=0.0.0.0" in notebooks.lab_command(ip="0.0.0.0")


def test_lab_saves_widget_state_by_default_for_its_server_only(tmp_path):
    """metrics-kit lab starts JupyterLab with its own application settings folder: JupyterLab's own
    (page config, overrides) copied, and the widgets' state saved with the notebook by default, so
    that a saved notebook reopened shows its charts (tests/browser/test_charts_in_chromium.py)."""
    shipped = tmp_path / "lab" / "settings"
    (shipped / "overrides.d").mkdir(parents=True)
    (shipped / "page_config.json").write_text('{"disabledExtensions": {"x": true}}')
    (shipped / "overrides.json").write_text('{"@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"}}')
    (shipped / "overrides.d" / "other.json").write_text("{}")
    (tmp_path / "lab" / "static").mkdir()
    (tmp_path / "lab" / "static" / "package.json").write_text('{"jupyterlab": {}}')
    ours = tmp_path / "cache" / "settings"
    (ours / "overrides.d").mkdir(parents=True)
    (ours / "overrides.d" / "removed-since.json").write_text("{}")
    assert notebooks.lab_settings(ours, shipped) == ours
    for name in ("page_config.json", "overrides.json", "overrides.d/other.json"):
        assert (ours / name).read_text() == (shipped / name).read_text()
    assert json.loads((ours / "overrides.d" / "metrics-kit.json").read_text()) == {
        "@jupyter-widgets/jupyterlab-manager:plugin": {"saveState": True}
    }
    assert (ours.parent / "static" / "package.json").read_text() == '{"jupyterlab": {}}'
    assert not (ours / "overrides.d" / "removed-since.json").exists()
    assert not list(shipped.glob("overrides.d/metrics-kit*")), "JupyterLab's own settings are never changed"
    command = notebooks.lab_command(open_browser=False, settings=ours, extra_args=["--LabApp.app_settings_dir=/x"])
    assert command.index(f"--LabApp.app_settings_dir={ours}") < command.index("--LabApp.app_settings_dir=/x")


@pytest.mark.parametrize("uid, allowed", [(0, True), (1000, False)])
def test_lab_allows_root_only_as_root(uid, allowed, monkeypatch):
    # JupyterLab refuses to start as root without --allow-root (a container, a fresh cloud machine)
    monkeypatch.setattr(os, "geteuid", lambda: uid)
    assert ("--allow-root" in notebooks.lab_command(open_browser=False)) is allowed


@pytest.mark.slow
def test_lab_starts_jupyterlab_with_the_embedded_default_ready(tmp_path):
    env = {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "ws"),
        "JUPYTER_DATA_DIR": str(tmp_path / "data"),
    }
    log = tmp_path / "lab.log"
    with open(log, "w") as sink:  # as make lab runs it, as root or not
        process = subprocess.Popen(
            [sys.executable, "-m", "metrics_kit", "lab", "--no-browser", "--port", "0"],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=tmp_path,
        )
    try:
        deadline = time.monotonic() + 120
        url = None
        while url is None and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.5)
            found = re.search(r"(http://127\.0\.0\.1:\d+)/lab\?token=(\w+)", log.read_text())
            url = found and found.groups()
        assert url, f"JupyterLab did not start:\n{log.read_text()[-3000:]}"
        import requests

        base, token = url
        listing = requests.get(f"{base}/api/contents", headers={"Authorization": f"token {token}"}, timeout=30)
        assert listing.status_code == 200
        names = {item["name"] for item in listing.json()["content"]}
        assert {p.name for p in NOTEBOOKS} <= names
        text = log.read_text()
        assert "Embedded default ready" in text and text.index("Embedded default ready") < text.index(base)
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def test_notebooks_folder_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(notebooks.NOTEBOOKS_ENV, str(tmp_path))
    assert notebooks.notebooks_dir() == tmp_path and notebooks.available() == []
    monkeypatch.setenv(notebooks.NOTEBOOKS_ENV, str(tmp_path / "missing"))
    with pytest.raises(MetricsKitError, match="not a folder"):
        notebooks.notebooks_dir()


def test_executed_notebook_json_is_valid():  # nbformat's own schema, as JupyterLab reads it
    for path in NOTEBOOKS:
        nbformat.validate(json.loads(path.read_text(encoding="utf-8")))


# -- the notebooks' code ----------------------------------------------------------------------------


def _functions(path: Path) -> dict[str, str]:
    """name -> source of every function a notebook's code cells define (magics left out)."""
    found = {}
    for cell in _code_cells(_read(path)):
        code = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        tree = ast.parse(code)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found[node.name] = ast.unparse(node)
    return found


def test_no_function_is_defined_in_two_notebooks():
    """Helpers shared by notebooks belong in metrics_kit.notebook, not copied from cell to cell."""
    defined: dict[str, list[str]] = {}
    bodies: dict[str, list[str]] = {}
    for path in NOTEBOOKS:
        for name, source in _functions(path).items():
            defined.setdefault(name, []).append(path.stem)
            bodies.setdefault(source.split(":", 1)[1], []).append(f"{path.stem}:{name}")
    twice = {name: where for name, where in defined.items() if len(where) > 1}
    copied = [where for where in bodies.values() if len(where) > 1]
    assert not twice and not copied, f"defined in several notebooks: {twice or copied}"


@notebook_params
def test_panels_are_stored_with_their_chart_and_a_sentence_not_a_repr(path):
    """Before a notebook runs, JupyterLab has no widget to show: it shows the stored picture and text."""
    raw = re.compile(r"\b(?:VBox|HBox|Box|Output|Dropdown|Image)\(")
    panels = 0
    for i, cell in enumerate(_code_cells(_read(path))):
        for output in cell.outputs:
            data = output.get("data", {})
            if "application/vnd.jupyter.widget-view+json" in data:
                panels += 1
                assert "image/png" in data, f"{path.name} cell {i}: a widget output without its chart"
            assert not raw.search(data.get("text/plain", "")), f"{path.name} cell {i}: {data['text/plain'][:80]}"
    assert panels >= 1, f"{path.name}: no interactive panel"
    assert "widgets" in _read(path).metadata, f"{path.name}: no widget state stored"


def _readme_reports() -> list[tuple[str, list[str]]]:
    """Every `metrics-kit report` example in the README and notebooks/README.md, as argv."""
    found = []
    for readme in (ROOT / "README.md", NOTEBOOKS_DIR / "README.md"):
        for line in readme.read_text(encoding="utf-8").splitlines():
            command = line.strip()
            if re.match(r"^(?:\.venv/bin/)?metrics-kit report ", command):
                found.append((f"{readme.relative_to(ROOT)}: {command}", shlex.split(command)[1:]))
    return found


README_REPORTS = _readme_reports()


def test_the_readmes_show_report_examples():
    assert len(README_REPORTS) >= 2, README_REPORTS


@pytest.mark.slow
@pytest.mark.parametrize("argv", [argv for _, argv in README_REPORTS], ids=[name for name, _ in README_REPORTS])
def test_every_report_example_in_the_readmes_works(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)  # the examples run from the checkout
    out = argv.index("--out")
    argv = [*argv[: out + 1], str(tmp_path / Path(argv[out + 1]).name), *argv[out + 2 :]]
    assert main(argv) == 0, capsys.readouterr().err
    assert (tmp_path / Path(argv[out + 1]).name).stat().st_size > 10_000


def test_the_kernels_own_log_stays_off_the_terminal():
    """The kernel metrics-kit report starts writes its stderr to /dev/null (through the public
    start_kernel, whose keywords reach the kernel's Popen)."""
    import asyncio

    from metrics_kit.tools.notebooks import KERNEL_NAME, _kernel_manager_class

    async def stderr_of_a_kernel() -> str:
        manager = _kernel_manager_class()(kernel_name=KERNEL_NAME)
        await manager.start_kernel()
        try:
            return os.readlink(f"/proc/{manager.provisioner.process.pid}/fd/2")
        finally:
            await manager.shutdown_kernel(now=True)

    if not Path("/proc/self/fd").exists():
        pytest.skip("needs /proc")
    assert asyncio.run(stderr_of_a_kernel()) == os.devnull
