"""Real JupyterLab and headless Chromium for the browser tests (a real dashboard, Voilà:
``support.Dashboard``): start, drive, stop by PID.

JupyterLab is started the way ``make lab`` starts it (``metrics-kit lab``), on 127.0.0.1 with an
ephemeral port and its own token, with fresh Jupyter config, data and settings folders: so every
JupyterLab setting is its default (``commsOverSubshells`` as shipped), but for the one default
``metrics-kit lab`` changes (the widget state saved with the notebook). It serves a copy of the
notebooks, so that running them (and JupyterLab's autosave) never touches the checkout.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import requests

import metrics_kit as mk
from metrics_kit.notebook import charts
from metrics_kit.tools import notebooks

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1400,1000",
)
_URL = re.compile(r"(http://127\.0\.0\.1:\d+)/lab\?token=(\w+)")
WIDGET_REPR = re.compile(r"\b(?:VBox|HBox|Box|Output|Dropdown|ToggleButtons|SelectionRangeSlider|Image|HTML)\(")


def wait_for(condition: Callable[[], object], timeout: float, what: str, every: float = 0.25):
    """``condition()`` once it is truthy; an AssertionError naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


class Lab:
    """``metrics-kit lab --no-browser --port 0`` on a copy of ``notebooks``; stopped by its PID."""

    def __init__(self, notebooks: Path, home: Path):
        self.folder = home / "notebooks"
        shutil.copytree(notebooks, self.folder, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        env = {
            **os.environ,
            "METRICS_KIT_NOTEBOOKS": str(self.folder),
            "JUPYTER_CONFIG_DIR": str(home / "config"),
            "JUPYTER_DATA_DIR": str(home / "data"),
            "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
            "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
        }
        self.log = home / "lab.log"
        with open(self.log, "w") as sink:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "metrics_kit", "lab", "--no-browser", "--port", "0"],
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=home,
                start_new_session=True,
            )
        try:
            found = wait_for(self._url, 180, "JupyterLab to print its URL", every=0.5)
        except AssertionError:
            self.stop()
            raise AssertionError(f"JupyterLab did not start:\n{self.log.read_text()[-3000:]}") from None
        self.base, self.token = found.groups()
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"token {self.token}"

    def _url(self):
        if self.process.poll() is not None:
            raise AssertionError(f"JupyterLab exited ({self.process.returncode}):\n{self.log.read_text()[-3000:]}")
        return _URL.search(self.log.read_text())

    def kernel_states(self) -> list[str]:
        return [k["execution_state"] for k in self.http.get(f"{self.base}/api/kernels", timeout=10).json()]

    def idle(self) -> bool:
        states = self.kernel_states()
        return bool(states) and all(state == "idle" for state in states)

    def shutdown_kernels(self) -> None:
        for session in self.http.get(f"{self.base}/api/sessions", timeout=10).json():
            self.http.delete(f"{self.base}/api/sessions/{session['id']}", timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            # its own session: the kernels it started go with it
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)


def chromium(profile: Path, *, flags: tuple[str, ...] = (), logs: tuple[str, ...] = ()):
    """Headless Chromium with ``flags`` added; ``logs``: the logs to keep ("browser" for the console,
    "performance" for the DevTools network events), read with ``driver.get_log(name)``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*CHROMIUM_FLAGS, *flags, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    if logs:
        options.set_capability("goog:loggingPrefs", dict.fromkeys(logs, "ALL"))
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(30)
    return driver


def quit_chromium(driver) -> None:
    """Quit, then stop chromedriver by its PID if quitting did not."""
    process = driver.service.process
    try:
        driver.quit()
    finally:
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(10)


def by_css(node, css):
    from selenium.webdriver.common.by import By

    return node.find_elements(By.CSS_SELECTOR, css)


def controls_of(cell) -> list[tuple[str, object]]:
    """The controls of an interactive panel, in page order, as (kind, element)."""
    found = []
    for widget in by_css(
        cell,
        ".widget-dropdown select, .widget-toggle-buttons, .noUi-target, .widget-checkbox input, .widget-radio-box",
    ):
        kind = {"SELECT": "dropdown", "INPUT": "checkbox"}.get(widget.tag_name.upper())
        if kind is None:
            classes = widget.get_attribute("class") or ""
            kind = "toggle" if "toggle" in classes else "radio" if "radio" in classes else "slider"
        found.append((kind, widget))
    return found


def change(driver, kind: str, element) -> str | None:
    """Change one control as a user would; a reason when it cannot be changed (a dead control)."""
    from selenium.webdriver.common.keys import Keys

    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    if kind == "dropdown":
        count = driver.execute_script("return arguments[0].options.length", element)
        if count < 2:
            return f"a dropdown with {count} option(s)"
        driver.execute_script(
            "const s = arguments[0]; s.selectedIndex = (s.selectedIndex + 1) % s.options.length;"
            "s.dispatchEvent(new Event('change', {bubbles: true}));",
            element,
        )
    elif kind in ("toggle", "radio"):
        css = "button" if kind == "toggle" else "input"
        choices = by_css(element, css)
        idle = [c for c in choices if "mod-active" not in (c.get_attribute("class") or "") and not c.is_selected()]
        if len(choices) < 2 or not idle:
            return f"{kind} buttons with {len(choices)} choice(s)"
        idle[0].click()
    elif kind == "slider":
        handle = by_css(element, ".noUi-handle")[0]
        handle.click()
        handle.send_keys(Keys.ARROW_RIGHT)
    else:
        element.click()
    return None


# -- in the page ------------------------------------------------------------------------------------

# Counts, under a node, the chart images drawn: an <img> added, or an <img> given a new src; and the
# frames an interactive chart (ipympl's canvas) draws from the kernel: each frame is an image that the
# canvas' model draws on its offscreen canvas, which its view then copies (counted once per frame).
OBSERVE = """
const root = arguments[0];
if (!window.__frameCounter) {
  window.__frameCounter = true;
  const offscreen = (c) => !(c instanceof HTMLCanvasElement) || !c.isConnected;
  for (const kind of [CanvasRenderingContext2D, window.OffscreenCanvasRenderingContext2D].filter(Boolean)) {
    const original = kind.prototype.drawImage;
    kind.prototype.drawImage = function (source, ...rest) {
      if (source instanceof HTMLImageElement || source instanceof ImageBitmap) {
        if (offscreen(this.canvas)) this.canvas.__frame = (this.canvas.__frame || 0) + 1;
      } else if (!offscreen(this.canvas) && window.__frameRoot && window.__frameRoot.contains(this.canvas)) {
        const frame = source.__frame || 0;
        if (!window.__framesSeen.has(frame)) { window.__framesSeen.add(frame); window.__draws += 1; }
        window.__lastChange = Date.now();
      }
      return original.call(this, source, ...rest);
    };
  }
}
window.__frameRoot = root;
window.__framesSeen = new Set();
if (window.__chartObserver) window.__chartObserver.disconnect();
window.__draws = 0;
window.__lastChange = Date.now();
window.__chartObserver = new MutationObserver((mutations) => {
  for (const m of mutations) {
    if (m.type === 'attributes' && m.target.tagName === 'IMG') window.__draws += 1;
    for (const node of m.addedNodes) {
      if (node.tagName === 'IMG') window.__draws += 1;
      else if (node.querySelectorAll) window.__draws += node.querySelectorAll('img').length;
    }
  }
  window.__lastChange = Date.now();
});
window.__chartObserver.observe(root, {subtree: true, childList: true, attributes: true, attributeFilter: ['src']});
"""

# The largest chart shown under a node (a loaded image, or an interactive chart's canvas): its
# pixels' digest, and the share of them that are not (nearly) white or transparent. None: null.
PICTURE = """
const shown = (e) => e.offsetParent !== null;
const imgs = [...arguments[0].querySelectorAll('img')].filter(i => i.complete && i.naturalWidth > 0 && shown(i))
  .map(i => ({node: i, width: i.naturalWidth, height: i.naturalHeight}));
const canvases = [...arguments[0].querySelectorAll('.jupyter-matplotlib-canvas-div canvas:first-child')]
  .filter(c => c.width > 0 && shown(c)).map(c => ({node: c, width: c.width, height: c.height}));
const all = [...imgs, ...canvases];
if (!all.length) return null;
const img = all.reduce((a, b) => (a.width * a.height >= b.width * b.height ? a : b));
const canvas = document.createElement('canvas');
canvas.width = img.width; canvas.height = img.height;
const ctx = canvas.getContext('2d');
ctx.drawImage(img.node, 0, 0);
const data = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
let ink = 0;
for (let i = 0; i < data.length; i += 4) {
  if (data[i + 3] > 16 && (data[i] < 235 || data[i + 1] < 235 || data[i + 2] < 235)) ink += 1;
}
return {url: canvas.toDataURL('image/png'), ink: ink / (data.length / 4), width: img.width};
"""


def picture(driver, node) -> dict | None:
    found = driver.execute_script(PICTURE, node)
    if found:
        found["digest"] = hashlib.sha256(found.pop("url").encode()).hexdigest()
    return found


# -- interactive charts (ipympl's canvas) -------------------------------------------------------------

CHART = ".jupyter-matplotlib"
FOOTER = ".jupyter-matplotlib-footer"
# what a chart says where it is pointed at: period · series · value unit [· complete|incomplete]
READOUT = re.compile(r"^(?P<period>.+?) · (?P<series>.+?) · (?P<value>.+?)(?: · (?P<status>complete|incomplete))?$")


def charts_in(node) -> list:
    """The interactive charts under ``node``, in page order."""
    return by_css(node, CHART)


def _top_canvas(chart):
    return by_css(chart, ".jupyter-matplotlib-canvas-div canvas")[-1]  # the one on top takes the mouse


def point(driver, chart, fx: float, fy: float, timeout: float = 30) -> str:
    """Point at (fx, fy) of ``chart`` (fractions of its canvas from the top left) and return what its
    footer reads out. The pointer goes first to the canvas' corner, outside the axes, where the
    readout empties, so that the text returned is the answer to this pointing."""
    from selenium.webdriver.common.action_chains import ActionChains

    canvas = _top_canvas(chart)
    footer = by_css(chart, FOOTER)[0]
    width, height = canvas.size["width"], canvas.size["height"]
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", canvas)
    ActionChains(driver, duration=0).move_to_element_with_offset(canvas, 0, 2 - height // 2).perform()
    wait_for(
        lambda: not footer.text.strip(), timeout, f"the readout to empty outside the axes (it says {footer.text!r})"
    )
    x, y = int(width * (fx - 0.5)), int(height * (fy - 0.5))
    ActionChains(driver, duration=0).move_to_element_with_offset(canvas, x, y).perform()
    return wait_for(lambda: footer.text.strip(), timeout, f"a readout at ({fx}, {fy}) of the chart")


def drag(driver, chart, start: tuple[float, float], end: tuple[float, float]) -> None:
    """Press at ``start``, move to ``end`` and release (fractions of the canvas, as in :func:`point`)."""
    from selenium.webdriver.common.action_chains import ActionChains

    canvas = _top_canvas(chart)
    width, height = canvas.size["width"], canvas.size["height"]
    (x0, y0), (x1, y1) = ((int(width * (fx - 0.5)), int(height * (fy - 0.5))) for fx, fy in (start, end))
    actions = ActionChains(driver, duration=0).move_to_element_with_offset(canvas, x0, y0).click_and_hold()
    actions.move_by_offset((x1 - x0) // 2, (y1 - y0) // 2).move_by_offset(
        x1 - x0 - (x1 - x0) // 2, y1 - y0 - (y1 - y0) // 2
    )
    actions.release().perform()


def tool(driver, chart, title: str):
    """A button of the chart's toolbar, by the start of its tooltip (``Zoom``, ``Reset``), shown: the
    toolbar fades in while the pointer is over the chart."""
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(driver, duration=0).move_to_element(_top_canvas(chart)).perform()
    toolbar = by_css(chart, ".jupyter-matplotlib-toolbar")[0]
    wait_for(lambda: toolbar.value_of_css_property("opacity") == "1", 10, "the chart's toolbar to show")
    buttons = [b for b in by_css(chart, "button") if (b.get_attribute("title") or "").startswith(title)]
    assert buttons, f"no {title!r} button in the chart's toolbar"
    return buttons[0]


QUICKSTART_METRIC = "swap_active_users"  # what the quickstart's first chart draws


def quickstart_series() -> pd.Series:
    """What the library returns for the quickstart's first chart (swap active users), with the
    notebook's default parameters."""
    given = {name: ast.literal_eval(text) for name, text in notebooks.parameters("quickstart").items()}
    with mk.Client(None, progress=False) as client:
        return client.series(QUICKSTART_METRIC, given["project"], given["start"], given["end"], given["granularity"])


def check_readouts(texts: list[str], series: pd.Series) -> list[str]:
    """What is wrong with ``texts``, the readouts of a chart of ``series``: each must name a period of
    it, its series, its value exactly as the library returns it, with its unit, and its completeness."""
    problems = []
    by_period = {charts.period_text(start, series.attrs["granularity"]): start for start in series.index}
    incomplete = {pd.Timestamp(t) for t in series.attrs["incomplete"]}
    for text in texts:
        said = READOUT.match(text)
        if said is None or said["period"] not in by_period:
            problems.append(f"{text!r} is not a readout of a period of the chart")
            continue
        start = by_period[said["period"]]
        wanted = charts.exact(series[start], series.attrs["unit"])
        status = "incomplete" if start in incomplete else "complete"
        if said["series"] != charts.label(QUICKSTART_METRIC) or said["value"] != wanted or said["status"] != status:
            problems.append(f"{text!r}: the library says {charts.label(QUICKSTART_METRIC)} · {wanted} · {status}")
    return problems
