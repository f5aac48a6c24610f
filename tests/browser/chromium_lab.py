"""Real JupyterLab and headless Chromium for the browser tests: start, drive, stop by PID.

JupyterLab is started the way ``make lab`` starts it (``metrics-kit lab``), on 127.0.0.1 with an
ephemeral port and its own token, with fresh Jupyter config, data and settings folders: so every
JupyterLab setting is its default (``commsOverSubshells`` as shipped). It serves a copy of the
notebooks, so that running them (and JupyterLab's autosave) never touches the checkout.
"""

from __future__ import annotations

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

import requests

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


# -- in the page ------------------------------------------------------------------------------------

# Counts, under a node, the chart images drawn: an <img> added, or an <img> given a new src.
OBSERVE = """
const root = arguments[0];
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

# The largest loaded image under a node: its pixels' digest, and the share of them that are not
# (nearly) white or transparent. No image: null.
PICTURE = """
const imgs = [...arguments[0].querySelectorAll('img')].filter(i => i.complete && i.naturalWidth > 0);
if (!imgs.length) return null;
const img = imgs.reduce((a, b) => (a.naturalWidth * a.naturalHeight >= b.naturalWidth * b.naturalHeight ? a : b));
const canvas = document.createElement('canvas');
canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
const ctx = canvas.getContext('2d');
ctx.drawImage(img, 0, 0);
const data = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
let ink = 0;
for (let i = 0; i < data.length; i += 4) {
  if (data[i + 3] > 16 && (data[i] < 235 || data[i + 1] < 235 || data[i + 2] < 235)) ink += 1;
}
return {url: canvas.toDataURL('image/png'), ink: ink / (data.length / 4), width: img.naturalWidth};
"""


def picture(driver, node) -> dict | None:
    found = driver.execute_script(PICTURE, node)
    if found:
        found["digest"] = hashlib.sha256(found.pop("url").encode()).hexdigest()
    return found
