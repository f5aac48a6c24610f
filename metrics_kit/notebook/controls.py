"""Interactive panels for notebooks: controls (ipywidgets) above a chart that redraws once per change.

For example::

    panel = controls.Panel(draw, project=controls.choice(controls.projects("dex"), "demoswap", "exchange"),
                           granularity=controls.granularity("1_week"))
    panel   # the last expression of a cell: the controls, and the chart under them

``draw(**values)`` returns a matplotlib Figure (see :mod:`metrics_kit.notebook.charts`), or a
``(figure, caption)`` pair. The panel keeps one figure and has every draw draw into it
(:func:`charts.drawing_into`: the draw's first ``charts.figure``, or its chart made without
``ax``, is the panel's figure, cleared). Where charts are interactive
(:func:`metrics_kit.notebook.interactive.enabled`: JupyterLab, Voilà) that figure is shown by one
ipympl canvas, which pans, zooms and reads out the value pointed at, and a redraw redraws that
canvas; elsewhere the panel renders it to a PNG in an ``Image`` widget (so does a draw that returns
a figure of its own). Either way a redraw is made under the panel's lock, which the canvas' renders
and mouse events take too, is safe from the kernel thread that JupyterLab's comm messages run on,
and never goes through pyplot or an Output widget's output capture; memory and figures stay flat
however many redraws there are.

One redraw per change: sliders send their value when released (``continuous_update=False``), and
a change that updates other controls (a project whose metrics differ, see :meth:`Panel.link`) is
applied inside :meth:`Panel.hold`, which draws once when it ends. Options are only what has data:
:func:`projects` lists the projects of a kind the service describes, and :func:`choice` returns a
plain value rather than a dropdown with a single option (a control that cannot change anything).

Before the notebook runs, JupyterLab has no widget to show: the panel's stored output also holds
the chart as a PNG and a short text, which JupyterLab (and reports) show instead of the widget's
repr.

A draw that fails, with any exception, shows the error in place of the chart: the previous picture
is removed (on screen and from the stored output), never left under controls it does not match.

When the cell that made or showed a panel runs again (and no other cell shows it), the panel is
closed: its widgets, its controls among them, and its canvas, so that re-running a panel's cell
leaves memory and widgets flat (see :func:`metrics_kit.notebook.interactive.held_by_cell`).
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import ipywidgets as widgets
import pandas as pd

from metrics_kit.client import api
from metrics_kit.client.client import Client
from metrics_kit.errors import MetricsKitError
from metrics_kit.notebook import charts
from metrics_kit.notebook import interactive as live  # Panel's argument ``interactive`` would hide it
from metrics_kit.spec.catalogue import default_catalogue

log = logging.getLogger("metrics_kit.notebook")
GRANULARITIES = ("1_day", "1_week", "1_month")
PLACEHOLDER = "Interactive chart: run the notebook (Run > Run All Cells) to use its controls."
CLOSED = "This panel was closed when the cell that made it ran again; show the new one."
WIDE = "640px"  # a months slider's width; each slider has its own Layout, closed with its panel


def _client(client: Client | None) -> Client:
    return client if client is not None else api.default_client()


# -- options: only what has data --------------------------------------------------------------------


def projects(kind: str, client: Client | None = None) -> list[str]:
    """The projects of ``kind`` (``dex``, ``lending``, ...) that the service describes, with their
    coverage; empty when it offers no discovery."""
    known = _client(client).discovery() or {}
    return sorted(name for name, info in known.items() if kind in info.get("kinds", ()) and info.get("coverage"))


def metrics(project: str, candidates: Sequence[str], client: Client | None = None) -> list[str]:
    """Those of ``candidates`` that apply to ``project`` (all of them without discovery), in order."""
    info = (_client(client).discovery() or {}).get(project)
    if info is None or "metrics" not in info:
        return list(candidates)
    return [m for m in candidates if m in info["metrics"]]


def coverage(project: str, client: Client | None = None) -> tuple[dt.date, dt.date] | None:
    """First and last day with data for ``project``, from discovery (None without it)."""
    info = (_client(client).discovery() or {}).get(project) or {}
    span = info.get("coverage") or {}
    if not span.get("start") or not span.get("end"):
        return None
    return dt.date.fromisoformat(span["start"]), dt.date.fromisoformat(span["end"])


# -- controls ---------------------------------------------------------------------------------------


def choice(options: Sequence[Any] | Mapping[str, Any], value: Any, description: str) -> Any:
    """A dropdown of ``options`` (a sequence, or a mapping label -> value), starting at ``value``;
    just ``value`` when there is nothing else to choose."""
    pairs = _pairs(options)
    if len(pairs) < 2:
        return value
    if value not in [v for _, v in pairs]:
        value = pairs[0][1]
    return widgets.Dropdown(options=pairs, value=value, description=description)


def _pairs(options: Sequence[Any] | Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(label, value) pairs: metric names in words, anything else (project ids) as it is."""
    if isinstance(options, Mapping):
        return list(options.items())
    return [(charts.label(o) if default_catalogue().get(o) else str(o), o) for o in options]


def granularity(value: str = "1_week") -> widgets.ToggleButtons:
    return widgets.ToggleButtons(
        options=[(charts.period_word(g) + "s", g) for g in GRANULARITIES], value=value, description="periods"
    )


def months(first: Any, last: Any, start: Any, end: Any) -> widgets.SelectionRangeSlider:
    """A range of calendar months from ``first`` to ``last`` (the data's coverage), starting at the
    months of ``start`` and ``end``. Sent when released, so that dragging draws once."""
    begin = pd.Timestamp(first).to_period("M").start_time
    options = [(f"{m:%b %Y}", m) for m in pd.date_range(begin, pd.Timestamp(last), freq="MS")]
    starts = [m for _, m in options]

    def index(day: Any, default: int) -> int:
        month = pd.Timestamp(day).to_period("M").start_time
        return starts.index(month) if month in starts else default

    return widgets.SelectionRangeSlider(
        options=options,
        index=(index(start, 0), index(end, len(options) - 1)),
        description="months",
        continuous_update=False,
        layout=widgets.Layout(width=WIDE),
    )


def month_span(selected: tuple[pd.Timestamp, pd.Timestamp]) -> tuple[dt.date, dt.date]:
    """A months slider's value as first and last day."""
    return selected[0].date(), (selected[1] + pd.offsets.MonthEnd(0)).date()


# -- the panel --------------------------------------------------------------------------------------


class Panel:
    """Controls above a chart that ``draw(**values)`` draws; one draw per change.

    ``controls`` are keyword arguments named as ``draw``'s parameters: a widget (its ``value`` is
    passed) or a plain value (passed as it is; nothing to show). ``rows`` lays the widgets out
    (default: one per row). A draw that fails, with any exception, shows its message in place of
    the chart (the chart is removed, never left stale): a library error as it is, anything else
    with its type (the traceback goes to the log). ``error`` holds the last draw's failure, or None.

    ``interactive``: show the chart as an interactive canvas (True) or a picture (False); None
    (default): as :func:`metrics_kit.notebook.interactive.enabled` says. ``figure`` is the panel's
    figure; ``canvas`` its canvas (None where charts are pictures, and until a draw draws on the
    figure), ``image`` the picture."""

    def __init__(
        self,
        draw: Callable[..., Any],
        *,
        rows: Sequence[Sequence[widgets.Widget] | widgets.Widget] | None = None,
        interactive: bool | None = None,
        **controls: Any,
    ):
        self._draw = draw
        self.controls = {name: c for name, c in controls.items() if isinstance(c, widgets.ValueWidget)}
        self.fixed = {name: c for name, c in controls.items() if name not in self.controls}
        self.draws = 0
        self.error: BaseException | None = None
        self._held = 0
        self._pending = False
        self._lock = threading.RLock()
        self._links: list[tuple[str, str, Callable[[Any], Any]]] = []
        self.image = widgets.Image(format="png", layout=widgets.Layout(max_width="100%", height="auto"))
        self.caption = widgets.HTML()
        self.figure = charts.empty_figure()
        self._live = live.enabled() if interactive is None else interactive
        self.closed = False
        self.canvas: Any = None  # made by the first draw on the figure, at the size that draw gave it
        laid = rows if rows is not None else list(self.controls.values())
        boxes = [widgets.HBox(list(r)) if isinstance(r, list | tuple) else r for r in laid]
        self.widget = widgets.VBox([*boxes, self.image, self.caption])
        for control in self.controls.values():
            control.observe(self._changed, "value")
        live.held_by_cell(self, self.close)
        self.redraw()

    def values(self) -> dict[str, Any]:
        return {**self.fixed, **{name: control.value for name, control in self.controls.items()}}

    def link(self, source: str, target: str, options: Callable[[Any], Any]) -> Panel:
        """When control ``source`` changes, control ``target`` gets ``options(new value)`` (keeping
        its value when it is still offered) before the one redraw."""
        self._links.append((source, target, options))
        return self

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Changes made inside draw once, when the outermost hold ends."""
        with self._lock:
            self._held += 1
            try:
                yield
            finally:
                self._held -= 1
                if self._held == 0 and self._pending:
                    self._pending = False
                    self.redraw()

    def _changed(self, change: Mapping[str, Any]) -> None:
        with self.hold():
            self._pending = True
            name = next((n for n, c in self.controls.items() if c is change["owner"]), None)
            for source, target, options in self._links:
                if source == name and target in self.controls:
                    control = self.controls[target]
                    kept = control.value
                    pairs = _pairs(options(change["new"]))
                    control.options = pairs
                    offered = [value for _, value in pairs]
                    control.value = kept if kept in offered else offered[0]

    def redraw(self) -> None:
        """Draw the chart for the controls' current values (nothing once the panel is closed)."""
        with self._lock:
            if self.closed:
                return
            try:
                with charts.drawing_into(self.figure):
                    drawn = self._draw(**self.values())
                fig, caption = drawn if isinstance(drawn, tuple) else (drawn, "")
                on_canvas = self._live and fig is self.figure
                picture = b"" if on_canvas else charts.png(fig)
                if on_canvas and self.canvas is None:
                    # Made now, not with the figure: a canvas shown at the empty figure's size, then
                    # resized by the first draw (a chart of another height), can lose its frames.
                    self.canvas = live.canvas(self.figure, guard=self._lock)
                    shown = list(self.widget.children)
                    shown.insert(shown.index(self.image), self.canvas)
                    self.widget.children = tuple(shown)
                # The caption's text before any widget changes: a picture never under another's caption.
                text = html.escape("" if caption is None else caption if isinstance(caption, str) else str(caption))
            except Exception as error:  # any failure: shown in place of the chart, never a stale one
                self._failed(error)
                return
            except BaseException as error:  # an interrupt (KeyboardInterrupt, SystemExit): shown, then raised
                self._failed(error)
                raise
            self.error = None
            self.image.value = picture
            self.image.layout.display = "none" if on_canvas else None
            if self.canvas is not None:
                self.canvas.layout.display = None if on_canvas else "none"
                if on_canvas:
                    self.canvas.draw_idle()
            self.caption.value = text
            self.draws += 1

    def close(self) -> None:
        """Close the panel: its controls stop drawing, and its widgets (the controls, the canvas and
        its toolbar, the picture, the caption, their layouts) are closed, which lets go of the
        figure and its pixels. Called when the cell that made the panel runs again."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            for control in self.controls.values():
                control.unobserve(self._changed, "value")
            shown = self.canvas
            live.close_widgets(self.widget)
            if shown is not None:
                live.retire(shown)
            # A panel a cell returned stays in IPython's Out: it lets go of its canvas and pictures.
            self.canvas = None
            self.widget.children = ()
            self.image.value = b""
            self.figure.clear()

    def _failed(self, error: BaseException) -> None:
        self.error = error
        self.image.value = b""
        self.image.layout.display = "none"
        self.figure.clear()  # what a failed draw left half drawn is never shown
        if self.canvas is not None:
            self.canvas.layout.display = "none"
        if isinstance(error, Exception) and not isinstance(error, MetricsKitError):
            log.error("the panel's chart could not be drawn", exc_info=error)
        self.caption.value = f"<b>Cannot draw this:</b> {html.escape(_failure(error))}"

    def error_text(self) -> str | None:
        """The last draw's failure as a line of text, or None when it drew."""
        return None if self.error is None else f"Cannot draw this: {_failure(self.error)}"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        """The widget, plus a PNG of its chart and a short text: what shows where no widget can
        (a notebook not run yet, a report)."""
        if self.closed:
            return {"text/plain": CLOSED}
        live.held_by_cell(self, self.close)
        bundle = self.widget._repr_mimebundle_(**kwargs)
        failure = self.error_text()
        if failure is not None:  # the error, never the picture of an earlier draw
            bundle.pop("image/png", None)
            bundle["text/plain"] = failure
            bundle["text/html"] = f"<p><b>Cannot draw this:</b> {html.escape(failure.split(': ', 1)[1])}</p>"
            return bundle
        bundle["image/png"] = base64.b64encode(self.picture()).decode("ascii")
        bundle["text/plain"] = PLACEHOLDER
        return bundle

    def picture(self) -> bytes:
        """The chart shown, as PNG bytes (b"" when the last draw failed)."""
        with self._lock:
            if self.error is None and self.canvas is not None and self.image.layout.display == "none":
                return charts.png(self.figure)
            return bytes(self.image.value)


def _failure(error: BaseException) -> str:
    """What went wrong, in a line: a library error's own message; anything else with its type."""
    if isinstance(error, MetricsKitError):
        return str(error)
    if not isinstance(error, Exception):
        return f"the draw was interrupted ({type(error).__name__})"
    return f"{type(error).__name__}: {error}"
