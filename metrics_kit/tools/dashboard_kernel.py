"""What the dashboard's kernels load (an IPython extension, named in the kernel spec that
``metrics-kit dashboard`` writes): a cell that fails shows what went wrong in a line, on the page,
never a traceback.

Voilà replaces a failed cell's traceback with "There was an error when executing cell [4]. Please
run Voilà with --show_tracebacks=True ...", which a colleague who opened the dashboard can do
nothing with; with ``show_tracebacks`` it would show them the traceback instead, and every warning
the notebook prints. Here the kernel shows the error itself, as a display output (which Voilà
keeps as it is), and the cell still fails: Voilà stops there, as it does at any failed cell (the
cells after it would fail the same way). Voilà's log, on the terminal of whoever started the
dashboard, names the cell and the error.
"""

from __future__ import annotations

import html
import os
from typing import Any

from metrics_kit.client.settings import API_KEY_ENV
from metrics_kit.tools.notebooks import failure_reason

LABEL = "metrics-kit-error"  # the class of the page's element that says what went wrong
COLOUR = "var(--jp-error-color1, #d32f2f)"  # JupyterLab's (and Voilà's) colour of errors


def load_ipython_extension(shell: Any) -> None:
    shell.set_custom_exc((Exception,), _show)


def said(error: BaseException, key: str | None) -> str:
    """The error in a line: its class and the first line of its message (for a FetchError, how many
    points failed and why), never ``key`` (the API key: no error of the library holds it, but an
    error of other code might)."""
    name = type(error).__name__
    reason = failure_reason(name, str(error))
    line = f"{name}: {reason}" if reason else name
    return line.replace(key, "***") if key else line


def _show(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: int | None = None) -> None:
    from IPython.display import display

    line = said(value, os.environ.get(API_KEY_ENV))
    name, _sep, reason = line.partition(": ")
    shown = f"<b>{html.escape(name)}</b>{': ' + html.escape(reason) if reason else ''}"
    display({"text/plain": line, "text/html": f'<p class="{LABEL}" style="color: {COLOUR}">{shown}</p>'}, raw=True)
