"""Every notebook as an analyst uses it: real JupyterLab (started as ``make lab`` starts it, with
its default settings), opened in headless Chromium, Run All, then every control changed by hand.

For each notebook: before running, no output shows a widget's raw repr (``VBox(...)``); after Run
All, no cell shows an error or stderr; then each control of each interactive panel is changed in
turn, and the panel's chart must be redrawn exactly once, differ from before, and not be blank.
Screenshots go to ``$BROWSER_TEST_SCREENS`` when set (else the test's temporary folder).

Needs Debian's ``chromium`` and ``chromium-driver`` (``.ci/apt-packages``) and selenium (the
``test`` extra); skipped, saying so, without them.
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from chromium_lab import (
    CHROMEDRIVER,
    CHROMIUM,
    OBSERVE,
    WIDGET_REPR,
    Lab,
    by_css,
    change,
    chromium,
    controls_of,
    picture,
    quit_chromium,
    wait_for,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
RUN_ALL_SECONDS = 240
REDRAW_SECONDS = 90
QUIET_SECONDS = 1.5  # no change to the chart for this long after the kernel is idle: the redraw is over

if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
    pytest.skip(
        f"needs {CHROMIUM} and {CHROMEDRIVER}: apt-get install chromium chromium-driver", allow_module_level=True
    )
pytest.importorskip("selenium")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    started = Lab(ROOT / "notebooks", tmp_path_factory.mktemp("lab"))
    yield started
    started.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = chromium(tmp_path_factory.mktemp("chromium-profile"))
    yield driver
    quit_chromium(driver)


@pytest.fixture
def screens(tmp_path) -> Path:
    folder = Path(os.environ.get("BROWSER_TEST_SCREENS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _panel():
    return "#main .jp-NotebookPanel:not(.lm-mod-hidden)"


def _cells(driver):
    return by_css(driver, f"{_panel()} .jp-Notebook .jp-Cell")


def _menu(driver, menu: str, label: str) -> None:
    """Menu > label, clicked."""
    next(m for m in by_css(driver, ".lm-MenuBar-item") if m.text.strip() == menu).click()

    def item():
        return [i for i in by_css(driver, ".lm-Menu-item") if i.text.split("\n")[0].strip() == label]

    wait_for(item, 10, f"{menu} > {label}")[0].click()


def _running(driver) -> list[str]:
    return [p.text for p in by_css(driver, f"{_panel()} .jp-InputPrompt") if "*" in p.text]


def _output_texts(driver) -> list[str]:
    return [o.get_attribute("textContent") or "" for o in by_css(driver, f"{_panel()} .jp-OutputArea-output")]


def _quiet(driver) -> bool:
    return driver.execute_script("return Date.now() - window.__lastChange") / 1000 > QUIET_SECONDS


def _settled(driver, lab) -> bool:
    return driver.execute_script("return window.__draws") > 0 and _quiet(driver) and lab.idle()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_works_in_jupyterlab(path, lab, browser, screens):
    driver = browser
    name = path.stem
    problems: list[str] = []
    driver.get(f"{lab.base}/lab/tree/{path.name}?reset&token={lab.token}")
    cells = len(nbformat.read(path, as_version=4).cells)
    wait_for(lambda: len(_cells(driver)) == cells, 120, f"{path.name} to open with its {cells} cells")
    wait_for(lab.idle, 120, "the kernel to start")
    wait_for(lambda: len(by_css(driver, f"{_panel()} .jp-OutputArea-output")) > 0, 30, "the stored outputs")
    raw = [text[:120] for text in _output_texts(driver) if WIDGET_REPR.search(text) or "model not found" in text]
    if raw:
        problems.append(f"before running, outputs show raw widget reprs: {raw}")
    driver.save_screenshot(str(screens / f"{name}-opened.png"))

    _menu(driver, "Run", "Run All Cells")
    wait_for(lambda: not _running(driver) and lab.idle(), RUN_ALL_SECONDS, f"{path.name} to run all its cells")
    errors = [
        (o.get_attribute("textContent") or "")[:300]
        for o in by_css(driver, f'{_panel()} .jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
    ]
    if errors:
        problems.append(f"error or stderr outputs after Run All: {errors}")

    panels = [cell for cell in _cells(driver) if by_css(cell, ".jp-OutputArea-output .jupyter-widgets")]
    if not panels:
        problems.append("no interactive panel (ipywidgets) after Run All")
    changed = 0
    for p, cell in enumerate(panels):
        for i in range(len(controls_of(cell))):
            kind, element = controls_of(cell)[i]  # found again: a change may rebuild the panel's views
            where = f"panel {p + 1}, control {i + 1} ({kind})"
            outputs = by_css(cell, ".jp-Cell-outputArea")[0]
            # Frames still coming from the run or the change before (a loaded machine delays them)
            # are not this change's: the chart is still, and the kernel idle, before it.
            driver.execute_script(OBSERVE, outputs)
            wait_for(lambda: _quiet(driver) and lab.idle(), REDRAW_SECONDS, f"{where}: the chart to be still")
            before = picture(driver, outputs)
            driver.execute_script(OBSERVE, outputs)
            dead = change(driver, kind, element)
            if dead:
                problems.append(f"{where}: dead control: {dead}")
                continue
            changed += 1
            try:
                wait_for(lambda: _settled(driver, lab), REDRAW_SECONDS, f"{where} to redraw its chart")
            except AssertionError as error:
                problems.append(f"{where}: {error} (images drawn: {driver.execute_script('return window.__draws')})")
                continue
            draws = driver.execute_script("return window.__draws")
            after = picture(driver, outputs)
            if draws != 1:
                problems.append(f"{where}: the chart was drawn {draws} times for one change")
            if after is None or after["ink"] < 0.01:
                problems.append(f"{where}: the chart is blank after the change ({after and round(after['ink'], 4)})")
            elif before is not None and after["digest"] == before["digest"]:
                problems.append(f"{where}: the chart did not change")
            driver.save_screenshot(str(screens / f"{name}-panel{p + 1}-control{i + 1}.png"))
    errors = by_css(driver, f'{_panel()} .jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
    if errors:
        problems.append(f"error or stderr outputs after changing the controls: {[e.text[:300] for e in errors]}")
    driver.save_screenshot(str(screens / f"{name}-after-controls.png"))
    lab.shutdown_kernels()
    if changed == 0 and panels:
        problems.append("no control could be changed")
    assert not problems, f"{path.name} in JupyterLab:\n- " + "\n- ".join(problems)
