"""Charts you can point at, in JupyterLab: the quickstart run in real JupyterLab (as ``make lab``
starts it) in headless Chromium; its chart of swap active users is an interactive canvas (ipympl),
and pointing at a week reads out that week, the series, the value as the library returns it, with
its unit, and whether the week is complete; zooming into a stretch and resetting the view work.
Saved, its kernel shut down and reopened, the notebook shows every chart as it was last drawn.

Screenshots go to ``$BROWSER_TEST_SCREENS`` when set (``docs/hover.png`` is made from one, see
``tests/browser/screenshots.py``). Needs Debian's ``chromium`` and ``chromium-driver``, and selenium.
"""

from __future__ import annotations

import base64
import io
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
    change,
    charts_in,
    check_readouts,
    chromium,
    controls_of,
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
    # from the first week's start (12% of the canvas in) to the last week's end (95%): outside, the
    # margins read out nothing, as no period is there
    texts = [point(browser, chart, fx / 25, 0.5) for fx in range(3, 24)]
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


# -- the notebook saved, and reopened without its kernel ------------------------------------------------

# The picture an interactive chart shows: its canvas (the first; the one over it draws the zoom box).
SHOWN = """
const canvas = arguments[0].querySelector('.jupyter-matplotlib-canvas-div canvas');
return canvas && canvas.width > 0 ? canvas.toDataURL('image/png') : null;
"""


class Pixels:
    """What a chart shows: its pixels (RGBA, as numbers)."""

    def __init__(self, array):
        self.array = array


def shown(driver, chart) -> Pixels | None:
    """The pixels ``chart`` shows, or None before it has any."""
    import numpy as np
    from PIL import Image

    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", chart)
    url = driver.execute_script(SHOWN, chart)
    if not url:
        return None
    pixels = np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGBA"), dtype=float)
    return Pixels(pixels) if (pixels[..., :3] < 235).any(axis=-1).mean() > 0.01 else None  # blank: nothing yet


def same_picture(a: Pixels | None, b: Pixels | None) -> bool:
    """Whether ``a`` and ``b`` are the same picture (within a rounding of the colours)."""
    if a is None or b is None or a.array.shape != b.array.shape:
        return False
    return abs(a.array - b.array).mean() < 1.0


def test_a_saved_notebook_reopened_shows_every_chart_as_last_drawn(lab, browser, chart):
    """Issue 30: a stored notebook never holds a canvas that renders blank. JupyterLab saves the
    widgets' state (metrics-kit lab turns that on), each chart's with its last picture; reopened
    without the kernel that drew them, the charts show those pictures, never "model not found"."""
    from selenium.webdriver.common.by import By

    driver = browser
    panel = "#main .jp-NotebookPanel:not(.lm-mod-hidden)"
    # the explorer at the end, redrawn for other periods: the picture saved is its last draw
    explorer = charts_in(driver)[-1]
    cell = explorer.find_element(By.XPATH, "./ancestor::div[contains(concat(' ', @class, ' '), ' jp-Cell ')]")
    first = wait_for(lambda: shown(driver, explorer), 60, "the explorer's chart")
    kind, toggle = next((kind, element) for kind, element in controls_of(cell) if kind == "toggle")
    assert change(driver, kind, toggle) is None
    wait_for(lambda: lab.idle() and not same_picture(shown(driver, explorer), first), 120, "the explorer to redraw")
    live = wait_for(lambda: _settled(driver), 60, "the charts to settle")

    notebook = lab.folder / QUICKSTART.name
    before = notebook.stat().st_mtime_ns
    _menu(driver, "File", "Save Notebook")
    wait_for(lambda: notebook.stat().st_mtime_ns != before, 60, "the notebook to be saved")
    saved = nbformat.read(notebook, as_version=4)
    state = saved.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    pictures = [m["state"].get("_data_url") for m in state.values() if m["model_name"] == "MPLCanvasModel"]
    assert len(pictures) == len(live) and all(pictures), "the saved widget state lacks a chart's picture"

    lab.shutdown_kernels()
    cells = len(saved.cells)
    driver.get(f"{lab.base}/lab/tree/{QUICKSTART.name}?reset&token={lab.token}")
    wait_for(lambda: len(by_css(driver, f"{panel} .jp-Cell")) == cells, 120, "the saved quickstart to open")
    wait_for(lambda: len(charts_in(driver)) == len(live), 60, f"{len(live)} saved charts to show")
    texts = " ".join(o.get_attribute("textContent") or "" for o in by_css(driver, f"{panel} .jp-OutputArea-output"))
    assert "model not found" not in texts and "Error displaying widget" not in texts
    for n, (chart_shown, picture_then) in enumerate(zip(charts_in(driver), live, strict=True)):
        again = wait_for(lambda c=chart_shown: shown(driver, c), 60, f"chart {n + 1} to show its saved picture")
        assert same_picture(again, picture_then), f"chart {n + 1} reopened is not the chart as last drawn"


def _menu(driver, top: str, item: str) -> None:
    """Click ``item`` of the menu ``top`` of JupyterLab's menu bar."""
    next(m for m in by_css(driver, ".lm-MenuBar-item") if m.text.strip() == top).click()
    wait_for(
        lambda: [i for i in by_css(driver, ".lm-Menu-item") if i.text.strip().startswith(item)],
        10,
        f"{top} > {item}",
    )[0].click()


def _settled(driver):
    """The pictures of every chart, once two looks in a row see the same ones (frames still arriving
    change them)."""
    first = [shown(driver, c) for c in charts_in(driver)]
    second = [shown(driver, c) for c in charts_in(driver)]
    if all(same_picture(a, b) for a, b in zip(first, second, strict=True)) and first:
        return second
    return None
