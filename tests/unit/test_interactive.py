"""metrics_kit.notebook.interactive: charts are interactive (ipympl's canvas) where a widget frontend
is, pictures elsewhere, with $METRICS_KIT_INTERACTIVE_CHARTS to force either; what a chart shown
as a canvas stores (its PNG too, never a canvas that renders blank)."""

from __future__ import annotations

import base64

import pytest

from metrics_kit.errors import ConfigurationError
from metrics_kit.notebook import charts, interactive
from metrics_kit.notebook.interactive import INTERACTIVE_ENV

pytest.importorskip("ipympl")


def test_off_where_no_widget_frontend_is_whatever_the_server_says():
    # no kernel here (as under nbval, papermill, nbconvert, report, a plain Python): pictures
    assert not interactive.enabled({})
    assert not interactive.enabled({"JPY_SESSION_NAME": "/home/a/01_quickstart.ipynb"})
    assert not interactive.enabled({"SERVER_SOFTWARE": "voila/0.5"})


@pytest.mark.parametrize("said", ["on", "ON", "1", "true", "yes"])
def test_the_environment_variable_turns_it_on(said):
    assert interactive.enabled({INTERACTIVE_ENV: said})


@pytest.mark.parametrize("said", ["off", "0", "false", "no"])
def test_the_environment_variable_turns_it_off(said):
    assert not interactive.enabled({INTERACTIVE_ENV: said, "JPY_SESSION_NAME": "x"})


def test_any_other_value_is_an_error_that_says_what_is_allowed():
    with pytest.raises(ConfigurationError, match=f"{INTERACTIVE_ENV} is 'sometimes'; say on or off"):
        interactive.enabled({INTERACTIVE_ENV: "sometimes"})


def test_a_chart_shows_as_a_png_where_charts_are_not_interactive():
    fig = charts.line_chart(_series(), title="t")
    assert isinstance(fig, charts.Figure)
    assert fig._repr_mimebundle_() is None  # IPython goes on to the inline backend's PNG


def test_a_chart_shown_as_a_canvas_stores_its_png_and_text_too():
    fig = charts.line_chart(_series(), title="t")
    shown = interactive.bundle(fig)
    assert set(shown) == {interactive.WIDGET_VIEW, "image/png", "text/plain"}
    assert base64.b64decode(shown["image/png"]).startswith(b"\x89PNG")
    assert shown["text/plain"] == repr(fig) and "Figure" in shown["text/plain"]
    canvas = interactive.canvas(fig)
    assert canvas is fig.canvas and interactive.canvas(fig) is canvas  # one canvas per figure
    assert charts.png(fig).startswith(b"\x89PNG") and fig.canvas is canvas  # a PNG leaves the canvas in place
    assert canvas.footer_visible and not canvas.header_visible


def test_the_readout_reaches_the_canvas_footer():
    from matplotlib.backend_bases import MouseEvent

    fig = charts.line_chart(_series(), title="t")
    canvas = interactive.canvas(fig)
    canvas.draw()
    ax = fig.axes[0]
    x, y = ax.transData.transform((float(ax.xaxis.convert_units(_series().index[1])), 6.0))
    canvas.toolbar.mouse_move(MouseEvent("motion_notify_event", canvas, x, y))
    assert canvas._message == "week of 2025-01-13 · swap active users · 6 count · complete"


def _series():
    import pandas as pd

    series = pd.Series(
        [5, 6, 7], index=pd.date_range("2025-01-06", periods=3, freq="7D"), name="swap_active_users", dtype="int64"
    )
    series.attrs.update(unit="count", granularity="1_week", incomplete=[])
    return series


def test_the_canvas_model_keeps_the_picture_it_shows_for_a_saved_notebook():
    """What JupyterLab saves of a canvas (its ``_data_url``) is the frame it shows last: set from the
    kernel after each frame that ends a change, never while the mouse drags a pan or a zoom."""
    import io

    import numpy as np
    from PIL import Image

    def picture(url: str):
        return np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGBA"))

    def frame(canvas) -> None:  # what a redraw sends to the page
        canvas.draw()
        canvas.manager.refresh_all()

    fig = charts.line_chart(_series(), title="t")
    canvas = interactive.canvas(fig)
    canvas.syncing_data_url = False  # the page is up (ipympl's "initialized"): it keeps its own picture
    frame(canvas)
    assert (picture(canvas._data_url) == np.asarray(canvas.buffer_rgba())).all()
    fig.axes[0].set_ylim(0, 100)  # a redraw (a zoom's end, a panel's draw) changes the picture: so does the model's
    frame(canvas)
    assert (picture(canvas._data_url) == np.asarray(canvas.buffer_rgba())).all()
    kept = canvas._data_url
    press = {"type": "button_press", "x": 300, "y": 200, "button": 0, "buttons": 1, "modifiers": [], "guiEvent": {}}
    canvas.handle_event(press)
    fig.axes[0].set_ylim(0, 50)  # frames while the mouse drags: the model keeps the last settled one
    frame(canvas)
    assert canvas._data_url == kept
    canvas.handle_event({**press, "type": "button_release", "buttons": 0})
    frame(canvas)
    assert (picture(canvas._data_url) == np.asarray(canvas.buffer_rgba())).all() and canvas._data_url != kept
