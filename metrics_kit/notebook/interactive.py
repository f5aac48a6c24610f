"""Where charts are interactive, and the canvas that makes them so.

In a live kernel with a widget frontend (JupyterLab, Voilà), a chart of
:mod:`metrics_kit.notebook.charts` shows as ipympl's canvas (matplotlib's own interactive backend
for Jupyter, a widget): it pans and zooms from its toolbar, and its footer reads out the value
under the pointer (see :mod:`metrics_kit.notebook.pointing`). Where no frontend renders widgets
(nbval, papermill, nbconvert, ``metrics-kit report``, the documentation site, a plain Python), it
shows as a PNG, as a stored notebook or a report needs: a canvas there would render blank.

:func:`enabled` decides: ``$METRICS_KIT_INTERACTIVE_CHARTS`` (``on`` or ``off``) when set; else on
in a kernel that a Jupyter server started for a notebook or console (it sets ``JPY_SESSION_NAME``
in the kernel's environment, which papermill, nbval and nbconvert do not) or that Voilà started
(``SERVER_SOFTWARE=voila/...``), when ipympl is installed (the ``[lab]`` extra).

Rendering: renderers share matplotlib's font cache, so one renders at a time (:data:`RENDERING`);
and a canvas may be given a *guard*, the lock of the panel that redraws its figure, which its
renders and its mouse events take too: a render never sees a figure half redrawn.

A saved notebook: a canvas' output holds its PNG (for nbconvert, reports, a page before the
notebook runs), but JupyterLab shows the widget, which, reopened without the kernel that drew it,
only the widget state saved with the notebook can show (``metrics-kit lab`` has JupyterLab save it:
see :func:`metrics_kit.tools.notebooks.lab_settings`). That state holds each canvas' last picture,
which the canvas' ``keep_picture`` keeps current.

A cell run again: a canvas is a widget, which the kernel keeps (with its figure and its pixels)
until it is closed, and a cell run again shows new ones, its previous output gone from the page.
So what a cell's run shows (:func:`held_by_cell`: a chart's canvas, a panel) is closed when that
cell runs again (IPython's ``pre_run_cell`` event names the cell), unless another cell still shows
it: re-running a chart cell leaves memory and the number of widgets flat, and every chart still on
the page stays interactive. The cell is the one the running request names (JupyterLab, Notebook and
Voilà send its id); where none is named (a console, a plain IPython), nothing is tracked.
"""

from __future__ import annotations

import base64
import io
import logging
import os
import sys
import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from matplotlib.figure import Figure

from metrics_kit.errors import ConfigurationError

log = logging.getLogger("metrics_kit.notebook")
INTERACTIVE_ENV = "METRICS_KIT_INTERACTIVE_CHARTS"
ON, OFF = ("on", "1", "true", "yes"), ("off", "0", "false", "no")
RENDERING = threading.RLock()
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether charts show as interactive canvases here (see the module's docstring); ``environ``:
    the environment to read (default: this process's)."""
    environ = os.environ if environ is None else environ
    said = environ.get(INTERACTIVE_ENV, "").strip().lower()
    if said in ON:
        if not installed():
            raise ConfigurationError(
                f"{INTERACTIVE_ENV}={environ[INTERACTIVE_ENV]} asks for interactive charts, which need ipympl: "
                "pip install 'metrics-kit[lab]'",
                "interactive",
            )
        return True
    if said in OFF:
        return False
    if said:
        raise ConfigurationError(
            f"{INTERACTIVE_ENV} is {environ[INTERACTIVE_ENV]!r}; say on or off, or leave it unset "
            "(interactive in JupyterLab and Voilà, pictures where no widget frontend is)",
            "interactive",
        )
    return widget_frontend(environ) and installed()


def widget_frontend(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this is a kernel that a widget frontend drives: started by a Jupyter server for a
    notebook or a console (JupyterLab, Notebook), or by Voilà."""
    ipython = sys.modules.get("IPython")  # not imported: not in IPython, so not in a kernel
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or getattr(shell, "kernel", None) is None:
        return False
    environ = os.environ if environ is None else environ
    return bool(environ.get("JPY_SESSION_NAME")) or environ.get("SERVER_SOFTWARE", "").startswith("voila/")


def installed() -> bool:
    try:
        import ipympl.backend_nbagg  # noqa: F401
    except ImportError:
        return False
    return True


def png(fig: Figure) -> bytes:
    """``fig`` as PNG bytes, drawn by Agg at the figure's size and dpi; the figure keeps its canvas."""
    from matplotlib.backend_bases import FigureCanvasBase
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    buffer = io.BytesIO()
    with RENDERING:
        shown = fig.canvas
        FigureCanvasAgg(fig).print_png(buffer)
        if type(shown) is not FigureCanvasBase:  # a canvas that shows the figure (ipympl's) keeps it
            fig.set_canvas(shown)
    return buffer.getvalue()


def canvas(fig: Figure, guard: AbstractContextManager[Any] | None = None) -> Any:
    """The interactive canvas (an ipympl widget) of ``fig``: the one it has, else a new one, with
    a toolbar (pan, zoom, back, home, download) and a footer that reads out the value pointed at.
    Its renders and mouse events take ``guard`` (a panel's lock) when given."""
    kind = _canvas_class()
    current: Any = fig.canvas
    if isinstance(current, kind) and getattr(current, "comm", None) is not None:  # not closed: see retire
        return current
    from ipympl.backend_nbagg import FigureManager

    made = kind(fig)
    made.guard = guard if guard is not None else nullcontext()
    FigureManager(made, 1)  # the toolbar, and the resize and refresh messages of the canvas
    made.header_visible = False  # "Figure 1": the chart has its own title
    made.footer_visible = True  # the readout of the value under the pointer
    made.toolbar_visible = "fade-in-fade-out"  # over the chart while the pointer is: the y label stays readable
    made.toolbar_position = "left"
    made.capture_scroll = False  # scrolling scrolls the page
    return made


def bundle(fig: Figure, guard: AbstractContextManager[Any] | None = None) -> dict[str, Any]:
    """What a notebook stores of ``fig`` shown as a canvas: the widget, and its PNG and text for a
    page without a kernel (JupyterLab before the notebook runs, nbconvert). The canvas is the
    running cell's (:func:`held_by_cell`)."""
    shown = canvas(fig, guard)
    with shown.guard, RENDERING:  # the widget's own bundle renders its PNG
        data = shown._repr_mimebundle_()
    held_by_cell(shown, lambda: retire(shown))
    return {WIDGET_VIEW: data[WIDGET_VIEW], "image/png": data["image/png"], "text/plain": repr(fig)}


def retire(shown: Any) -> None:
    """Close the canvas ``shown`` (its widgets: the canvas, its toolbar, their layouts) and take it
    off its figure, which lets go of its pixels; shown again, the figure gets a new canvas."""
    from matplotlib.backend_bases import FigureCanvasBase

    close_widgets(shown)
    fig, manager = shown.figure, shown.manager
    with shown.guard:
        if fig is not None and fig.canvas is shown:
            FigureCanvasBase(fig)  # a plain canvas in its place
        if manager is not None:
            # The figure keeps its manager for good (matplotlib's axes observer holds it), and a
            # figure a cell returned stays in IPython's Out: the manager lets go of the canvas.
            manager.canvas, manager.toolbar, manager.web_sockets = None, None, []


def close_widgets(*roots: Any) -> None:
    """Close each widget of ``roots`` and every widget they hold in their synced traits (children,
    layout, style, toolbar), each once."""
    from ipywidgets import Widget

    seen: set[int] = set()
    waiting = list(roots)
    while waiting:
        widget = waiting.pop()
        if not isinstance(widget, Widget) or id(widget) in seen:
            continue
        seen.add(id(widget))
        for name in list(widget.keys):
            value = getattr(widget, name, None)
            waiting += value if isinstance(value, list | tuple) else [value]
        widget.close()


# -- what a cell's run shows, closed when the cell runs again ---------------------------------------

_HELD_LOCK = threading.Lock()
_HELD: dict[int, tuple[Any, Callable[[], None], set[str]]] = {}  # id(thing) -> (thing, close, cells); the
# thing is kept with its id, so that the id is never another's while it is here
_HOOKED: set[int] = set()  # id of each IPython shell whose pre_run_cell calls _cell_starts


def held_by_cell(thing: Any, close: Callable[[], None]) -> None:
    """Note that the running cell's run shows ``thing`` (a canvas, a panel): ``close()`` is called
    when that cell runs again and no other cell's run shows it. Nothing where no cell is named."""
    cell, shell = _running_cell()
    if cell is None:
        return
    with _HELD_LOCK:
        if id(shell) not in _HOOKED:
            shell.events.register("pre_run_cell", _cell_starts)
            _HOOKED.add(id(shell))
        _HELD.setdefault(id(thing), (thing, close, set()))[2].add(cell)


def _running_cell() -> tuple[str | None, Any]:
    """The id of the cell the running request executes (JupyterLab sends it with the request), and
    the IPython shell; None where there is no kernel or no cell id (a console)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    kernel = getattr(shell, "kernel", None)
    if kernel is None or threading.current_thread() is not threading.main_thread():
        return None, shell  # a comm message's redraw (on another thread) shows nothing new
    request = kernel.get_parent("shell") or {}
    cell = (request.get("metadata") or {}).get("cellId")
    return (str(cell) if cell else None), shell


def _cell_starts(info: Any) -> None:
    """IPython's pre_run_cell: the cell ``info.cell_id`` runs again, its previous output is gone
    from the page; close what its runs showed that no other cell shows."""
    cell = getattr(info, "cell_id", None)
    if not cell:
        return
    closing = []
    with _HELD_LOCK:
        for key, (_thing, close, cells) in list(_HELD.items()):
            if cell in cells:
                cells.discard(cell)
                if not cells:
                    del _HELD[key]
                    closing.append(close)
    for close in closing:
        try:
            close()
        except Exception:  # a widget that cannot be closed must not stop the cell from running
            log.warning("could not close a chart of an earlier run of this cell", exc_info=True)


_CANVAS: type | None = None


def _canvas_class() -> type:
    """ipympl's Canvas whose renders take RENDERING and its guard (made once, on first use: ipympl is
    imported only where charts are interactive)."""
    global _CANVAS
    if _CANVAS is None:
        from ipympl.backend_nbagg import Canvas

        class GuardedCanvas(Canvas):
            guard: AbstractContextManager[Any] = nullcontext()
            dragging = False  # a mouse button is down over the chart: a pan or a zoom under way

            def draw(self) -> None:
                with self.guard, RENDERING:
                    super().draw()

            def handle_event(self, event: Any) -> Any:
                kind = event.get("type") if isinstance(event, Mapping) else None
                if kind in ("button_press", "button_release"):
                    self.dragging = kind == "button_press"
                with self.guard:
                    return super().handle_event(event)

            def send_binary(self, data: Any) -> None:
                super().send_binary(data)
                if not self.dragging and not self.syncing_data_url:
                    self.keep_picture()

            def keep_picture(self) -> None:
                """Give the page's model of this canvas the picture it shows now, as the PNG data
                URL that JupyterLab saves with the widget state (ipympl's ``_data_url`` field): a
                saved notebook reopened without a kernel shows it in place of the live chart.

                ipympl's page code sets that picture itself on each frame, but from its buffer
                before the frame is drawn into it, one frame behind: a panel redrawn, then saved,
                would show the draw before. Sent after each frame that ends a change (a redraw, the
                end of a pan or a zoom; not the frames while the mouse drags), it follows the frame,
                so the model's picture is the last one. The field is ipympl's own (an underscore
                name, allowed in tests/unit/test_dependencies_public_apis.py, ipympl capped)."""
                import numpy as np
                from ipywidgets import DOMWidget
                from PIL import Image

                with io.BytesIO() as encoded:
                    Image.fromarray(np.asarray(self.buffer_rgba())).save(encoded, format="png")
                    self._data_url = "data:image/png;base64," + base64.b64encode(encoded.getvalue()).decode("ascii")
                DOMWidget.send_state(self, "_data_url")  # ipympl's own send_state leaves it out once the page is up

        _CANVAS = GuardedCanvas
    return _CANVAS
