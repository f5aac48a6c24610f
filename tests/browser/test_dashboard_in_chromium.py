"""The notebooks as dashboards: ``metrics-kit dashboard`` (as ``make dashboard`` starts it, here on
every notebook) in headless Chromium, on the embedded default.

A request without the token is refused. Each notebook loads with no error and no code shown; each
control of each panel redraws its chart once, to a chart that differs and is not blank; pointing at
the quickstart's chart reads out the value the library returns; and no request leaves 127.0.0.1
(Voilà's templates load fonts from a CDN by default; the dashboard's does not). Against a service
that refuses the key, the page says so in a line. Each dashboard, stopped by its PID, leaves no
process and no file behind (``support.Dashboard``).

Screenshots go to ``$BROWSER_TEST_SCREENS`` when set (``docs/dashboard.png`` is made from one, see
``tests/browser/screenshots.py``). Needs Debian's ``chromium`` and ``chromium-driver``, selenium, and Voilà
(the ``[dashboard]`` extra, part of ``[test]``).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from chromium_lab import (
    CHROMEDRIVER,
    CHROMIUM,
    OBSERVE,
    WIDGET_REPR,
    by_css,
    change,
    charts_in,
    check_readouts,
    chromium,
    controls_of,
    picture,
    point,
    quickstart_series,
    quit_chromium,
    wait_for,
)
from support import Dashboard, ServerProcess

from metrics_kit.tools.dashboard_kernel import LABEL as ERROR

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
LOAD_SECONDS = 240
REDRAW_SECONDS = 90
QUIET_SECONDS = 1.5  # no new frame of the chart for this long: the redraw is over
HOST = "127.0.0.1"
# Every host name resolves to nothing but this machine: a page that asks another host fails to reach
# it, and the request still shows in the performance log.
NO_OTHER_HOST = f"--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE {HOST}"
OUTPUT = ".jp-OutputArea-output"
CODE = ".jp-CodeCell .jp-InputArea, .jp-InputArea-editor, .cm-editor, .CodeMirror, .jp-InputPrompt"
STDERR = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'

if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
    pytest.skip(
        f"needs {CHROMIUM} and {CHROMEDRIVER}: apt-get install chromium chromium-driver", allow_module_level=True
    )
pytest.importorskip("selenium")
pytest.importorskip("voila")


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory):
    started = Dashboard(ROOT / "notebooks", tmp_path_factory.mktemp("dashboard"))
    yield started
    started.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = chromium(
        tmp_path_factory.mktemp("chromium-profile"), flags=(NO_OTHER_HOST,), logs=("browser", "performance")
    )
    yield driver
    quit_chromium(driver)


@pytest.fixture
def screens(tmp_path) -> Path:
    folder = Path(os.environ.get("BROWSER_TEST_SCREENS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def requested(driver) -> list[str]:
    """The URLs the page asked for since the last call (DevTools' Network.requestWillBeSent)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def foreign(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("http", "https", "ws", "wss") and parts.hostname != HOST


def test_a_request_without_the_token_is_refused(dashboard):
    for path in ("/", "/voila/render/01_quickstart.ipynb", "/voila/tree"):
        answer = requests.get(dashboard.base + path, allow_redirects=False, timeout=60)
        assert answer.status_code in (302, 403), f"{path} without the token: {answer.status_code}"
        assert answer.status_code == 403 or "/login" in answer.headers["Location"]
        wrong = requests.get(f"{dashboard.base}{path}?token=not-{dashboard.token}", allow_redirects=False, timeout=60)
        assert wrong.status_code in (302, 403), f"{path} with a wrong token: {wrong.status_code}"
    assert requests.get(f"{dashboard.base}/?token={dashboard.token}", timeout=60).status_code == 200


def test_the_first_page_lists_every_notebook(dashboard, browser):
    requested(browser)
    browser.get(f"{dashboard.base}/?token={dashboard.token}")
    names = wait_for(
        lambda: {p.name for p in NOTEBOOKS} <= set(browser.find_element("tag name", "body").text.split()),
        LOAD_SECONDS,
        "the list of notebooks",
    )
    assert names
    assert not [u for u in requested(browser) if foreign(u)]


def _loaded(driver) -> bool:
    """Voilà has run the notebook and shown its outputs (its page says so on <body>)."""
    return driver.execute_script(
        "return document.readyState === 'complete' && !document.querySelector('#loading:not([style*=\"none\"])')"
        " && document.querySelectorAll(arguments[0]).length > 0",
        OUTPUT,
    )


def _quiet(driver) -> bool:
    return driver.execute_script("return Date.now() - window.__lastChange") / 1000 > QUIET_SECONDS


def _settled(driver) -> bool:
    return driver.execute_script("return window.__draws") > 0 and _quiet(driver)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_notebook_works_as_a_dashboard(path, dashboard, browser, screens):
    driver = browser
    name = path.stem
    problems: list[str] = []
    requested(driver)  # what earlier pages asked for is theirs
    driver.get(f"{dashboard.base}/voila/render/{path.name}?token={dashboard.token}")
    wait_for(lambda: _loaded(driver), LOAD_SECONDS, f"{path.name} to run and show its outputs")
    wait_for(lambda: charts_in(driver) or by_css(driver, "img"), 60, f"{path.name}'s charts")
    code = [e.text[:80] for e in by_css(driver, CODE) if e.is_displayed()]
    if code:
        problems.append(f"code shown: {code}")
    texts = [o.get_attribute("textContent") or "" for o in by_css(driver, OUTPUT)]
    raw = [t[:120] for t in texts if WIDGET_REPR.search(t) or "model not found" in t or "Traceback" in t]
    if raw or by_css(driver, STDERR):
        problems.append(f"errors or raw widget reprs: {raw} {[e.text[:300] for e in by_css(driver, STDERR)]}")
    if not charts_in(driver):
        problems.append("no interactive chart")
    driver.save_screenshot(str(screens / f"dashboard-{name}.png"))

    panels = [o for o in by_css(driver, OUTPUT) if controls_of(o)]
    if not panels:
        problems.append("no panel with controls")
    for p, output in enumerate(panels):
        for i in range(len(controls_of(output))):
            kind, element = controls_of(output)[i]
            where = f"panel {p + 1}, control {i + 1} ({kind})"
            driver.execute_script(OBSERVE, output)  # frames still coming from the page's load are not the change's
            wait_for(lambda: _quiet(driver), REDRAW_SECONDS, f"{where}: the chart to be still before the change")
            before = picture(driver, output)
            driver.execute_script(OBSERVE, output)
            dead = change(driver, kind, element)
            if dead:
                problems.append(f"{where}: dead control: {dead}")
                continue
            try:
                wait_for(lambda: _settled(driver), REDRAW_SECONDS, f"{where} to redraw its chart")
            except AssertionError as error:
                problems.append(f"{where}: {error}")
                continue
            draws = driver.execute_script("return window.__draws")
            after = picture(driver, output)
            if draws != 1:
                problems.append(f"{where}: the chart was drawn {draws} times for one change")
            if after is None or after["ink"] < 0.01:
                problems.append(f"{where}: the chart is blank after the change")
            elif before is not None and after["digest"] == before["digest"]:
                problems.append(f"{where}: the chart did not change")
    if by_css(driver, STDERR):
        problems.append(f"errors after changing the controls: {[e.text[:300] for e in by_css(driver, STDERR)]}")

    if name == "01_quickstart":
        chart = charts_in(driver)[0]
        readouts = [point(driver, chart, fx / 10, 0.5) for fx in range(2, 10)]
        problems += check_readouts(readouts, quickstart_series())
        driver.save_screenshot(str(screens / "dashboard-hover.png"))
    away = sorted({u for u in requested(driver) if foreign(u)})
    if away:
        problems.append(f"requests to other hosts: {away}")
    assert not problems, f"{path.name} as a dashboard:\n- " + "\n- ".join(problems)


def test_a_dashboard_uses_the_service_the_environment_names(tmp_path_factory, browser):
    with ServerProcess(None) as server:
        env = {"METRICS_KIT_BASE_URL": server.base_url, "METRICS_KIT_API_KEY": server.key}
        remote = Dashboard(ROOT / "notebooks", tmp_path_factory.mktemp("remote"), "quickstart", env=env)
        try:
            requested(browser)
            browser.get(f"{remote.base}/?token={remote.token}")  # one notebook: served at the root
            wait_for(lambda: _loaded(browser), LOAD_SECONDS, "the quickstart to run against the service")
            page = browser.find_element("tag name", "body").text
            said = next((line for line in page.splitlines() if line.startswith("answering:")), "")
            assert server.base_url.split("//")[1] in said and "embedded" not in said, said
            assert server.key not in page and not by_css(browser, STDERR)
            chart = wait_for(lambda: charts_in(browser), 60, "the quickstart's chart")[0]
            readouts = [point(browser, chart, fx / 10, 0.5) for fx in (3, 6, 9)]
            assert not check_readouts(readouts, quickstart_series())  # the service's values, as the library's
            assert not [u for u in requested(browser) if foreign(u)]
        finally:
            remote.stop()


def test_a_failed_cell_says_what_went_wrong_in_a_line(tmp_path_factory, browser, screens):
    """A colleague opens a dashboard whose service refuses its key: the page says what went wrong in
    a line (the error's class and message), where Voilà's own says "There was an error when executing
    cell [4]. Please run Voilà with --show_tracebacks=True"; no traceback, never the key."""
    wrong = "wrong-key-SECRET-987654321"
    with ServerProcess(None) as server:
        env = {"METRICS_KIT_BASE_URL": server.base_url, "METRICS_KIT_API_KEY": wrong}
        remote = Dashboard(ROOT / "notebooks", tmp_path_factory.mktemp("wrong-key"), "quickstart", env=env)
        try:
            browser.get(f"{remote.base}/?token={remote.token}")
            wait_for(lambda: _loaded(browser), LOAD_SECONDS, "the quickstart to run against the service")
            elements = wait_for(lambda: by_css(browser, f".{ERROR}"), 60, "the error's line")
            shown = [e.text for e in elements]
            page = browser.find_element("tag name", "body").text
            stderr = [e.text[:300] for e in by_css(browser, STDERR)]
            browser.execute_script("arguments[0].scrollIntoView()", elements[0])
            browser.save_screenshot(str(screens / "dashboard-error.png"))
        finally:
            remote.stop()
    assert len(shown) == 1 and re.fullmatch(r"[A-Z]\w*Error: \S.*", shown[0]), shown
    assert server.base_url.split("//")[1] in shown[0]  # the service it asked
    for absent in ("Traceback", "There was an error", wrong):
        assert absent not in page, absent
    assert not stderr
