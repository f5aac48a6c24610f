"""metrics-kit dashboard, up to the browser: what it serves (a copy of the notebook, its parameters
injected as report injects them, an offline template), the command line that starts Voilà (the token
never on it), the errors it gives before anything starts; and the server, run as a user runs it: a
port taken as it starts, a signal to its PID, the token in its log, a failed cell on its page. The
served dashboard in Chromium: tests/browser/test_dashboard_in_chromium.py."""

from __future__ import annotations

import http.server
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest
import requests
from support import DASHBOARD_START_SECONDS, Dashboard, ServerProcess, command_line

from metrics_kit.client.settings import API_KEY_ENV, BASE_URL_ENV
from metrics_kit.errors import ValidationError
from metrics_kit.tools import dashboard, dashboard_kernel, notebooks
from metrics_kit.tools.cli import main

pytest.importorskip("voila")


def test_the_notebook_served_is_a_copy_with_the_parameters_injected(tmp_path):
    original = notebooks.find("quickstart")
    before = original.read_bytes()
    served = dashboard.prepare(tmp_path, "quickstart", {"granularity": "1_month", "project": "demoswap.clmm"})
    assert served.parent.parent == tmp_path and served.name == original.name
    assert original.read_bytes() == before
    cells = nbformat.read(served, as_version=4).cells
    injected = [c for c in cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1
    assert 'granularity = "1_month"' in injected[0].source and 'project = "demoswap.clmm"' in injected[0].source
    tagged = next(i for i, c in enumerate(cells) if "parameters" in c.metadata.get("tags", []))
    assert cells.index(injected[0]) == tagged + 1  # after the defaults, which it overrides


def test_without_a_notebook_every_notebook_is_served(tmp_path):
    served = dashboard.prepare(tmp_path, None)
    assert sorted(p.name for p in served.glob("*.ipynb")) == [p.name for p in notebooks.available()]


def test_the_template_links_no_other_host(tmp_path):
    dashboard.prepare(tmp_path, "quickstart")
    template = tmp_path / "jupyter" / "voila" / "templates" / dashboard.TEMPLATE
    assert json.loads((template / "conf.json").read_text()) == {"base_template": "lab"}
    index = (template / "index.html.j2").read_text()
    assert "extends 'voila/templates/lab/index.html.j2'" in index and "mermaid" in index


@pytest.mark.parametrize(
    ("notebook", "parameters", "said"),
    [
        ("quickstart", {"colour": "red"}, "has no parameter 'colour'"),
        ("quickstart", {"granularity": "1_year"}, "1_year"),
        (None, {"granularity": "1_month"}, "parameters need a notebook"),
        ("no such notebook", {}, "no notebook 'no such notebook'"),
        # -p reads a number as a number: a date given as one is refused, not handed to the notebook
        ("quickstart", {"start": 12}, "parameter start: a date in the form YYYY-MM-DD (such as 2025-01-01), not 12"),
        ("quickstart", {"end": 20250101}, "parameter end: a date in the form YYYY-MM-DD"),
        ("quickstart", {"end": None}, "parameter end: a date in the form YYYY-MM-DD"),
    ],
)
def test_bad_parameters_are_refused_before_anything_starts(tmp_path, notebook, parameters, said):
    with pytest.raises(ValidationError, match=re.escape(said)):
        dashboard.prepare(tmp_path, notebook, parameters)


def test_the_command_names_the_address_and_port_and_holds_no_token(tmp_path):
    argv = dashboard.command(tmp_path / "01_quickstart.ipynb", ip="127.0.0.1", port=8866, runtime=tmp_path)
    assert argv[1:4] == ["-m", "voila", str(tmp_path / "01_quickstart.ipynb")]
    assert "--Voila.ip=127.0.0.1" in argv and "--port=8866" in argv and "--Voila.port_retries=0" in argv
    assert "--token" in argv and not any(a.startswith("--token=") for a in argv)  # the token comes in a file
    assert "--no-browser" in argv and f"--template={dashboard.TEMPLATE}" in argv
    assert f"--Voila.connection_dir_root={tmp_path}" in argv  # the dashboard's folder, removed when it stops


def test_the_address_printed_holds_the_token():
    assert dashboard.url("127.0.0.1", 8866, "abc") == "http://127.0.0.1:8866/?token=abc"
    assert dashboard.url("0.0.0.0", 8866, "abc") == "http://127.0.0.1:8866/?token=abc"
    assert dashboard.url("::1", 8866, "abc") == "http://[::1]:8866/?token=abc"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["dashboard", "quickstart", "--port", "70000"], "--port must be 0 to 65535 (0: a free port), not 70000"),
        (["dashboard", "quickstart", "-p", "colour", "red"], "has no parameter 'colour'"),
        (["dashboard", "quickstart", "-p", "start", "2025-01-01", "-p", "start", "2025-02-01"], "given twice"),
        (["dashboard", "quickstart", "-p", "start", "20250101"], "parameter start: a date in the form YYYY-MM-DD"),
    ],
)
def test_the_command_says_what_is_wrong(argv, said, capsys):
    assert main([*argv, "--no-browser"]) == 2
    assert said in capsys.readouterr().err


# -- the server: started, refused, stopped ----------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
LOAD_SECONDS = 300


def _page(started: Dashboard) -> str:
    """The notebook's page, as Voilà serves it once it has run the notebook in a kernel."""
    with requests.Session() as session:  # the token, then the cookie Voilà sets for it
        answer = session.get(f"{started.base}/?token={started.token}", timeout=LOAD_SECONDS)
    assert answer.status_code == 200, answer.status_code
    return answer.text


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_a_signal_to_its_pid_stops_voila_and_its_kernels_and_removes_its_folder(how, tmp_path):
    """``kill PID`` (a supervisor, SIGTERM) or a closed terminal (SIGHUP) stops the dashboard as
    Ctrl+C (SIGINT; Voilà, in a session of its own, does not get a terminal's) does: Dashboard.stop
    sends it to the PID alone and fails on any process left below it or anything left in the
    temporary folder (the token file)."""
    started = Dashboard(NOTEBOOKS, tmp_path, "quickstart")
    try:
        _page(started)  # a kernel runs the notebook, and stays for its controls
        kernels = [pid for pid in started.below() if "ipykernel" in command_line(pid)]
        assert kernels, [command_line(pid) for pid in started.below()]
        assert [p.name for p in started.tmp.glob("metrics-kit-dashboard-*/token")] == ["token"]
    except BaseException:
        started.stop(check=False)
        raise
    started.stop(how)
    assert started.process.returncode == 128 + how
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", started.port)) != 0, "the port still answers"


class _OtherServer(http.server.ThreadingHTTPServer):
    """Another program's HTTP server on ``port``: it answers every request."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"not a dashboard"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    def __init__(self, port: int):
        super().__init__(("127.0.0.1", port), self.Handler)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    def __enter__(self) -> _OtherServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_port_taken_as_it_starts_is_an_error_not_another_servers_address(tmp_path):
    """The port is free when the dashboard checks it, and another program takes it before Voilà
    listens (as a second dashboard on the default port did): one metrics-kit error line, exit status
    2, no address printed (it would reach the other server), nothing left running or on disk."""
    port = _free_port()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "JUPYTER_CONFIG_DIR": str(tmp_path / "config")}
    log = tmp_path / "dashboard.log"
    argv = [sys.executable, "-m", "metrics_kit", "dashboard", "quickstart", "--no-browser", "--port", str(port)]
    with open(log, "w") as sink:
        process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        # Its token file is written once the port is checked, before the demo is built and Voilà started.
        deadline = time.monotonic() + 120
        while not list(tmp.glob("metrics-kit-dashboard-*/token")) and process.poll() is None:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.02)
        with _OtherServer(port):
            status = process.wait(DASHBOARD_START_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    text = log.read_text()
    assert "The dashboard is at" not in text, text
    said = [line for line in text.splitlines() if line.startswith("metrics-kit")]
    assert said == [
        f"metrics-kit: error: --port {port} of 127.0.0.1 was taken by another program while the dashboard "
        "started; give another, or 0 for a free one"
    ], text
    assert status == 2
    left = [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc"))) if str(tmp) in command_line(pid)]
    assert not left and not list(tmp.iterdir()), (left, list(tmp.iterdir()))


def test_a_port_whose_last_connection_is_closing_is_free():
    """After a dashboard stops, its port's connections stay in TIME_WAIT for a minute: Voilà can
    listen there again (tornado binds with SO_REUSEADDR), so the check must find it free: the
    default port was passed over for a random one, and a port given refused."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Voilà's (tornado's)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _address = listener.accept()
            accepted.close()  # the side that closes first keeps the connection in TIME_WAIT
            client.recv(1)
    assert dashboard.free_port("127.0.0.1", port) == port


def test_its_log_holds_the_token_only_in_the_address_it_prints(tmp_path):
    """Voilà's access log writes a URL's token as [secret], as Jupyter Server's does."""
    started = Dashboard(NOTEBOOKS, tmp_path, "quickstart")
    try:
        for path in ("/", "/voila/static/no-such-file", "/no-such-page"):
            requests.get(f"{started.base}{path}?token={started.token}", allow_redirects=False, timeout=60)
    finally:
        started.stop()
    text = started.log.read_text()
    assert [line for line in text.splitlines() if started.token in line] == [
        f"    {started.base}/?token={started.token}"
    ]
    assert "?token=[secret]" in text  # the requests were logged, without it


def test_a_failed_cell_says_what_went_wrong_in_a_line_on_the_page(tmp_path):
    """A colleague opens a dashboard whose service refuses the key: the page says so in a line, the
    error's class and message, where Voilà's default says "There was an error when executing cell
    [1]. Please run Voilà with --show_tracebacks=True"; no traceback, never the key; the cells after
    it do not run (they would fail the same way)."""
    notebook = tmp_path / "wrong_key.ipynb"
    cells = [
        nbformat.v4.new_code_cell('project = "demoswap"', metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(
            'import metrics_kit as mk\nmk.value("swap_active_users", project, "1_day", "2025-01-02")'
        ),
        nbformat.v4.new_code_cell('print("the cell after it")'),
    ]
    nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata=_PYTHON3), notebook)
    wrong = "wrong-key-SECRET-987654321"
    with ServerProcess(None) as server:
        started = Dashboard(
            NOTEBOOKS, tmp_path / "home", str(notebook), env={BASE_URL_ENV: server.base_url, API_KEY_ENV: wrong}
        )
        try:
            page = _page(started)
        finally:
            started.stop()
    outputs = _outputs(page)
    assert [o["output_type"] for o in outputs] == ["display_data"], outputs  # no error output, no other cell's
    line = outputs[0]["data"]["text/plain"]
    assert re.fullmatch(r"AuthenticationError: 401 \S+: .+", line), line
    assert "\n" not in line and server.base_url.split("//")[1] in line  # the service that refused it
    assert f'class="{dashboard_kernel.LABEL}"' in outputs[0]["data"]["text/html"]
    for absent in ("Traceback", "There was an error when executing cell", "the cell after it", wrong):
        assert absent not in page, absent
    assert wrong not in started.log.read_text()


def _outputs(page: str) -> list[dict]:
    """The outputs of the page's cells: Voilà's page carries each as JSON, which its script shows."""
    found = re.findall(r'<script type="application/vnd\.voila\.cell-output\+json">(.*?)</script>', page, re.S)
    return [json.loads(text) for text in found]


_PYTHON3 = {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}}
