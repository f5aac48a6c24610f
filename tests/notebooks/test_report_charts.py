"""``metrics-kit report`` draws every chart as a picture, whatever environment it is run from: its
kernel has no widget frontend, so a canvas there would only be left out of the report (issue 30)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import nbformat

from metrics_kit.notebook.interactive import INTERACTIVE_ENV
from metrics_kit.tools import notebooks

CHART = """\
%matplotlib inline
import pandas as pd
from metrics_kit.notebook import charts, interactive

users = pd.Series([5, 6, 7], index=pd.date_range("2025-01-06", periods=3, freq="7D"), name="swap_active_users")
users.attrs.update(unit="count", granularity="1_week", incomplete=[])
print("interactive charts:", interactive.enabled())
charts.line_chart(users, title="Swap active users")
"""


def test_a_report_run_from_a_jupyterlab_kernel_draws_pictures(tmp_path):
    """As `!metrics-kit report ...` in a notebook runs it: the environment of a kernel that JupyterLab
    started (JPY_SESSION_NAME), and even METRICS_KIT_INTERACTIVE_CHARTS=on."""
    notebook = tmp_path / "chart.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CHART)]), notebook)
    out = tmp_path / "chart.html"
    environment = {**os.environ, "JPY_SESSION_NAME": str(notebook), INTERACTIVE_ENV: "on"}
    done = subprocess.run(
        [sys.executable, "-m", "metrics_kit", "report", str(notebook), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env=environment,
    )
    assert done.returncode == 0, done.stderr
    html = out.read_text(encoding="utf-8")
    assert "interactive charts: False" in html
    assert notebooks.WIDGET_NOTE not in html, "a plain chart became a canvas, left out of the report"
    assert len(re.findall(r"<img\b[^>]*src=\"data:image/png;base64,", html)) == 1
