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
"""

from __future__ import annotations

import io
import os
import sys
import threading
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from matplotlib.figure import Figure

from metrics_kit.errors import ConfigurationError

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
    if isinstance(fig.canvas, kind):
        return fig.canvas
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
    page without a kernel (JupyterLab before the notebook runs, nbconvert)."""
    shown = canvas(fig, guard)
    with shown.guard, RENDERING:  # the widget's own bundle renders its PNG
        data = shown._repr_mimebundle_()
    return {WIDGET_VIEW: data[WIDGET_VIEW], "image/png": data["image/png"], "text/plain": repr(fig)}


_CANVAS: type | None = None


def _canvas_class() -> type:
    """ipympl's Canvas whose renders take RENDERING and its guard (made once, on first use: ipympl is
    imported only where charts are interactive)."""
    global _CANVAS
    if _CANVAS is None:
        from ipympl.backend_nbagg import Canvas

        class GuardedCanvas(Canvas):
            guard: AbstractContextManager[Any] = nullcontext()

            def draw(self) -> None:
                with self.guard, RENDERING:
                    super().draw()

            def handle_event(self, event: Any) -> Any:
                with self.guard:
                    return super().handle_event(event)

        _CANVAS = GuardedCanvas
    return _CANVAS
