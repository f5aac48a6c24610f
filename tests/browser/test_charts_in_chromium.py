"""Charts you can point at, in JupyterLab: the quickstart run in real JupyterLab (as ``make lab``
starts it) in headless Chromium; its chart of swap active users is an interactive canvas (ipympl),
and pointing at a week reads out that week, the series, the value as the library returns it, with
its unit, and whether the week is complete; zooming into a stretch and resetting the view work.

Screenshots go to ``$BROWSER_TEST_SCREENS`` when set (``docs/hover.png`` is made from one, see
``tests/browser/screenshots.py``). Needs Debian's ``chromium`` and ``chromium-driver``, and selenium.
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from chromium_lab import (
    CHROMEDRIVER,
    CHROMIUM,
    READOUT,
    Lab,
    by_css,
    charts_in,
    check_readouts,
    chromium,
    drag,
    picture,
    point,
    quickstart_series,
    quit_chromium,
    tool,
    wait_for,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "notebooks" / "01_quickstart.ipynb"
RUN_ALL_SECONDS = 240

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
    driver.set_window_size(1700, 1000)  # the chart's whole width beside JupyterLab's file browser
    yield driver
    quit_chromium(driver)


@pytest.fixture(scope="module")
def chart(lab, browser):
    """The quickstart, run in JupyterLab; its chart of swap active users (the first chart drawn)."""
    driver = browser
    driver.get(f"{lab.base}/lab/tree/{QUICKSTART.name}?reset&token={lab.token}")
    panel = "#main .jp-NotebookPanel:not(.lm-mod-hidden)"
    cells = len(nbformat.read(QUICKSTART, as_version=4).cells)
    wait_for(lambda: len(by_css(driver, f"{panel} .jp-Cell")) == cells, 120, "the quickstart to open")
    wait_for(lab.idle, 120, "the kernel to start")
    by_css(driver, f"{panel} .jp-Notebook")[0].click()
    wait_for(lambda: by_css(driver, ".lm-MenuBar-item"), 30, "the menu bar")
    next(m for m in by_css(driver, ".lm-MenuBar-item") if m.text.strip() == "Run").click()
    wait_for(
        lambda: [i for i in by_css(driver, ".lm-Menu-item") if i.text.split("\n")[0].strip() == "Run All Cells"],
        10,
        "Run > Run All Cells",
    )[0].click()
    wait_for(
        lambda: lab.idle() and not [p for p in by_css(driver, f"{panel} .jp-InputPrompt") if "*" in p.text],
        RUN_ALL_SECONDS,
        "the quickstart to run",
    )
    found = wait_for(lambda: charts_in(driver), 60, "an interactive chart")
    yield found[0]
    lab.shutdown_kernels()


@pytest.fixture
def screens(tmp_path) -> Path:
    folder = Path(os.environ.get("BROWSER_TEST_SCREENS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_pointing_at_a_week_reads_out_its_value_as_the_library_returns_it(browser, chart, screens):
    series = quickstart_series()
    texts = [point(browser, chart, fx / 20, 0.5) for fx in range(2, 20)]
    assert not check_readouts(texts, series), "\n".join(check_readouts(texts, series))
    assert len(set(texts)) >= 12, f"pointing along the chart read out only {sorted(set(texts))}"
    point(browser, chart, 0.62, 0.5)
    browser.save_screenshot(str(screens / "hover.png"))
    chart.screenshot(str(screens / "hover-chart.png"))  # the chart, its toolbar and its readout


def test_zoom_and_reset(browser, chart, screens):
    series = quickstart_series()
    middle = point(browser, chart, 0.5, 0.5)
    before = picture(browser, chart)
    tool(browser, chart, "Zoom").click()
    drag(browser, chart, (0.15, 0.25), (0.3, 0.75))
    tool(browser, chart, "Zoom").click()  # zoom mode off: the pointer points again
    wait_for(lambda: picture(browser, chart)["digest"] != before["digest"], 60, "the chart to zoom")
    zoomed = point(browser, chart, 0.5, 0.5)
    assert not check_readouts([zoomed], series)
    assert READOUT.match(zoomed)["period"] < READOUT.match(middle)["period"], (
        f"after zooming into the chart's left part, its middle reads {zoomed!r}, as before ({middle!r})"
    )
    browser.save_screenshot(str(screens / "zoomed.png"))
    shown = picture(browser, chart)
    tool(browser, chart, "Reset").click()
    wait_for(lambda: picture(browser, chart)["digest"] != shown["digest"], 60, "the chart to return to its view")
    assert point(browser, chart, 0.5, 0.5) == middle, "Reset did not bring back the chart's whole view"
