"""metrics_kit.notebook.controls: options that have data, one draw per change, the stored picture."""

from __future__ import annotations

import base64
import gc
import html
import sys
import threading

import ipywidgets as widgets
import pandas as pd
import pytest
from matplotlib.figure import Figure

import metrics_kit as mk
from metrics_kit.errors import ValidationError
from metrics_kit.notebook import charts, controls


@pytest.fixture(scope="module")
def client():
    with mk.Client(None, progress=False) as embedded:
        yield embedded


def chart(**values):
    index = pd.date_range("2025-01-06", periods=3, freq="7D")
    level = 1 + len(str(values))
    series = pd.Series([level, level + 2, level + 1], index=index, name="swap_active_users")
    series.attrs["unit"] = "count"
    return charts.line_chart(series, title=str(values))


def test_projects_are_those_of_the_kind_the_service_has(client):
    assert controls.projects("dex", client) == ["demoswap", "demoswap.clmm"]
    assert controls.projects("lending", client) == ["demolend"]
    assert controls.projects("no such kind", client) == []


def test_metrics_are_those_that_apply_to_the_project(client):
    regular = ["swap_active_users", "regular_pool_swap_transaction_count"]
    assert controls.metrics("demoswap", regular, client) == regular
    assert controls.metrics("demoswap.clmm", regular, client) == ["swap_active_users"]


def test_coverage_comes_from_the_service(client):
    first, last = controls.coverage("demolend", client)
    assert first < last and controls.coverage("nosuch", client) is None


def test_a_choice_of_one_is_no_control():
    assert controls.choice(["demolend"], "demolend", "market") == "demolend"
    picker = controls.choice(["swap_active_users", "swap_transaction_count"], "swap_transaction_count", "metric")
    assert isinstance(picker, widgets.Dropdown)
    assert picker.options == (  # words, not ids
        ("swap active users", "swap_active_users"),
        ("swap transaction count", "swap_transaction_count"),
    )
    assert picker.value == "swap_transaction_count"


def test_a_panel_draws_once_at_first_and_once_per_change():
    picker = controls.choice(["demoswap", "demoswap.clmm"], "demoswap", "exchange")
    panel = controls.Panel(chart, project=picker, granularity=controls.granularity("1_week"), fixed="x")
    first = bytes(panel.image.value)
    assert panel.draws == 1 and first.startswith(b"\x89PNG")
    picker.value = "demoswap.clmm"
    assert panel.draws == 2 and bytes(panel.image.value) != first
    panel.controls["granularity"].value = "1_month"
    assert panel.draws == 3
    assert panel.values() == {"fixed": "x", "project": "demoswap.clmm", "granularity": "1_month"}


def test_a_change_that_updates_other_controls_draws_once():
    project = controls.choice(["demoswap", "demoswap.clmm"], "demoswap", "exchange")
    metric = controls.choice(
        ["swap_active_users", "regular_pool_swap_transaction_count"], "regular_pool_swap_transaction_count", "metric"
    )
    offered = {
        "demoswap": ["swap_active_users", "regular_pool_swap_transaction_count"],
        "demoswap.clmm": ["swap_active_users"],
    }
    panel = controls.Panel(chart, project=project, metric=metric).link("project", "metric", offered.get)
    project.value = "demoswap.clmm"  # the metric's options shrink, and its value moves
    assert panel.draws == 2
    assert metric.value == "swap_active_users" and len(metric.options) == 1
    project.value = "demoswap"
    assert panel.draws == 3 and metric.value == "swap_active_users"  # still offered: kept


def test_hold_gathers_changes_into_one_draw():
    picker = controls.choice(["a", "b", "c"], "a", "x")
    panel = controls.Panel(chart, x=picker)
    with panel.hold():
        picker.value = "b"
        picker.value = "c"
    assert panel.draws == 2


def test_a_library_error_shows_in_place_of_the_chart():
    def failing(project):
        if project == "b":
            raise ValidationError("no such project 'b'", "project")
        return chart(project=project)

    picker = controls.choice(["a", "b"], "a", "x")
    panel = controls.Panel(failing, project=picker)
    picker.value = "b"
    assert panel.draws == 1 and "no such project" in panel.caption.value


@pytest.mark.parametrize(
    "error",
    [ValidationError("no such project 'b'", "project"), ZeroDivisionError("division by zero")],
    ids=["library error", "any other exception"],
)
def test_a_failed_draw_replaces_the_chart_with_its_error_on_screen_and_in_the_stored_output(error):
    def failing(project):
        if project == "b":
            raise error
        return chart(project=project)

    picker = controls.choice(["a", "b"], "a", "x")
    panel = controls.Panel(failing, project=picker)
    assert panel._repr_mimebundle_()["image/png"]  # drawn
    picker.value = "b"
    # No picture of project a under the controls of project b: the chart is gone, the error is there.
    assert bytes(panel.image.value) == b"" and panel.image.layout.display == "none"
    assert "Cannot draw this" in panel.caption.value and html.escape(str(error)) in panel.caption.value
    if not isinstance(error, mk.MetricsKitError):
        assert "ZeroDivisionError" in panel.caption.value  # what kind of failure, for a bug in the view
    bundle = panel._repr_mimebundle_()
    assert "image/png" not in bundle and str(error) in bundle["text/plain"]
    picker.value = "a"  # drawing again brings the chart back, and the error goes
    assert bytes(panel.image.value).startswith(b"\x89PNG") and panel.error is None
    assert panel._repr_mimebundle_()["text/plain"] == controls.PLACEHOLDER


def test_a_change_from_another_thread_redraws(client):
    # JupyterLab sends widget messages to a subshell: the redraw runs on a thread of the kernel
    picker = controls.choice(["a", "b"], "a", "x")
    panel = controls.Panel(chart, x=picker)
    before = bytes(panel.image.value)
    thread = threading.Thread(target=setattr, args=(picker, "value", "b"))
    thread.start()
    thread.join(60)
    assert panel.draws == 2 and bytes(panel.image.value) != before


def test_the_stored_output_shows_the_chart_and_a_sentence_not_a_repr():
    panel = controls.Panel(chart, x=controls.choice(["a", "b"], "a", "x"))
    bundle = panel._repr_mimebundle_()
    assert bundle["text/plain"] == controls.PLACEHOLDER and "VBox" not in bundle["text/plain"]
    assert base64.b64decode(bundle["image/png"]) == bytes(panel.image.value)
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == panel.widget.model_id


def test_months_send_when_released():
    months = controls.months("2024-01-01", "2025-12-31", "2025-01-15", "2025-03-02")
    assert months.continuous_update is False
    assert controls.month_span(months.value) == (pd.Timestamp("2025-01-01").date(), pd.Timestamp("2025-03-31").date())


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_an_interrupted_draw_removes_the_chart_and_says_so(interrupt):
    mode = {"interrupt": False}

    def draw(project):
        if mode["interrupt"]:
            raise interrupt
        return chart(project=project)

    picker = controls.choice(["a", "b"], "a", "x")
    panel = controls.Panel(draw, project=picker)
    mode["interrupt"] = True
    with pytest.raises(interrupt):
        picker.value = "b"
    bundle = panel._repr_mimebundle_()
    # was: the chart of "a" on screen and stored, under controls that say "b"
    assert panel.image.value == b"" and "image/png" not in bundle
    assert "interrupted" in panel.caption.value and "interrupted" in bundle["text/plain"]


@pytest.mark.parametrize("caption", [None, 42])
def test_a_caption_that_is_not_text_shows_with_its_own_chart(caption):
    def draw(project):
        return chart(project=project), (f"chart of {project}" if project == "a" else caption)

    picker = controls.choice(["a", "b"], "a", "x")
    panel = controls.Panel(draw, project=picker)
    picker.value = "b"  # was: the new chart under the old caption, and an AttributeError from html.escape
    assert panel.error is None and panel.draws == 2
    assert panel.caption.value == ("" if caption is None else "42")


def test_a_service_that_echoes_the_key_never_gets_it_into_the_panels_output():
    from metrics_kit.client.transports import MockTransport, Response

    key = "sk_live_51HxPanelEchoKey0123456789"

    def vendor(request):
        said = request.headers["x-api-key"]
        return Response(401, json={"error": {"code": "invalid_api_key", "message": f"Invalid API key: {said}"}})

    with mk.Client(transport=MockTransport(vendor, api_key=key), cache=False, progress=False) as echoing:

        def draw(project):
            series = echoing.series("swap_transaction_count", project, "2025-01-06", "2025-01-20", "1_week")
            return charts.line_chart(series)

        panel = controls.Panel(draw, project=controls.choice(["demoswap", "demoswap.clmm"], "demoswap", "exchange"))
    bundle = panel._repr_mimebundle_()
    shown = [panel.caption.value, panel.error_text(), bundle["text/plain"], bundle["text/html"]]
    assert "Invalid API key: ***" in bundle["text/plain"], bundle["text/plain"]
    assert all(key not in text for text in shown), shown


# -- interactive panels (ipympl's canvas: JupyterLab, Voilà) ----------------------------------------


def _figures_alive() -> int:
    gc.collect()
    return sum(isinstance(o, Figure) for o in gc.get_objects())


def test_an_interactive_panel_draws_on_one_figure_and_canvas_and_stores_its_picture():
    pytest.importorskip("ipympl")
    picker = controls.choice(["a", "b"], "a", "x")
    panel = controls.Panel(chart, interactive=True, x=picker)
    figure, canvas = panel.figure, panel.canvas
    assert canvas is not None and figure.canvas is canvas and canvas in panel.widget.children
    first = panel.picture()
    picker.value = "b"
    assert panel.draws == 2 and panel.figure is figure and figure.canvas is canvas
    assert panel.image.layout.display == "none" and canvas.layout.display is None  # the canvas shows it
    assert figure.axes and figure.axes[0].get_title("left") == str({"x": "b"})  # drawn into the panel's figure
    assert panel.picture() != first and panel.picture().startswith(b"\x89PNG")
    bundle = panel._repr_mimebundle_()  # stored: the chart as a PNG, for a page without a kernel
    assert base64.b64decode(bundle["image/png"]) == panel.picture()


def test_an_interactive_panel_whose_draw_makes_its_own_figure_shows_its_picture():
    pytest.importorskip("ipympl")
    from matplotlib.figure import Figure as Plain

    def draw(x):
        fig = Plain(figsize=(4, 2))
        fig.subplots().set_title(x)
        return fig

    panel = controls.Panel(draw, interactive=True, x=controls.choice(["a", "b"], "a", "x"))
    assert bytes(panel.image.value).startswith(b"\x89PNG") and panel.image.layout.display is None
    assert panel.canvas is None and panel.picture() == bytes(panel.image.value)


def test_a_failed_draw_hides_the_canvas_and_clears_its_figure():
    pytest.importorskip("ipympl")

    def draw(x):
        if x == "b":
            raise ValidationError("no such project 'b'", "project")
        return chart(x=x)

    picker = controls.choice(["a", "b"], "a", "x")
    panel = controls.Panel(draw, interactive=True, x=picker)
    picker.value = "b"
    assert panel.canvas.layout.display == "none" and not panel.figure.axes  # nothing half drawn is shown
    assert panel.picture() == b"" and "image/png" not in panel._repr_mimebundle_()


@pytest.mark.slow
def test_500_redraws_of_an_interactive_panel_leave_memory_and_figures_flat():
    pytest.importorskip("ipympl")
    picker = controls.choice(["a", "b"], "a", "x")
    panel = controls.Panel(chart, interactive=True, x=picker)
    figure, canvas = panel.figure, panel.canvas

    def redraw(times: int) -> tuple[int, int, int]:
        for _ in range(times):
            picker.value = "b" if picker.value == "a" else "a"
            panel.canvas.draw()  # what the page asks for after each redraw: a render of the canvas
        gc.collect()
        return len(gc.get_objects()), sys.getallocatedblocks(), _figures_alive()

    objects, blocks, figures = redraw(100)  # caches (fonts, tick formatters, widget state) are warm
    objects_after, blocks_after, figures_after = redraw(400)
    assert panel.draws == 501
    assert figures_after == figures, f"{figures_after - figures} more figures after 400 more redraws"
    assert "matplotlib.pyplot" not in sys.modules or not sys.modules["matplotlib.pyplot"].get_fignums()
    # a figure left behind per redraw would be thousands of objects and blocks each
    assert objects_after - objects < 1_000, f"{objects_after - objects:,} more objects after 400 more redraws"
    assert blocks_after - blocks < 20_000, f"{blocks_after - blocks:,} more memory blocks after 400 more redraws"
    assert panel.figure is figure and figure.canvas is canvas  # one figure, one canvas
