"""A chart cell run again in JupyterLab: its previous run's canvases are closed, so that canvases
(each with its figure's pixels) and widgets stay flat however often it runs, and every chart still
on the page stays interactive. (A figure a cell returns stays in IPython's ``Out`` as any result
does, pictures too; what it keeps of a canvas is nothing.)

A real kernel (this Python's ipykernel) started as JupyterLab starts one (``JPY_SESSION_NAME`` in
its environment: charts are interactive), sent each cell as JupyterLab sends it: an
``execute_request`` whose metadata name the cell (``cellId``). What is alive is counted in the
kernel after a garbage collection: no timing, no memory reading that could wobble.
"""

from __future__ import annotations

import json
import os

import ipykernel.kernelspec
import pytest
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from traitlets import default

from metrics_kit.notebook.interactive import INTERACTIVE_ENV

pytest.importorskip("ipympl")

RUNS = 12  # enough for a leak of even one widget a run to show; each run is a real chart

SETUP = """\
import gc, json, warnings
import ipywidgets, pandas as pd
from ipympl.backend_nbagg import Canvas
from metrics_kit.notebook import charts, controls

users = pd.Series([5, 6, 7], index=pd.date_range("2025-01-06", periods=3, freq="7D"), name="swap_active_users")
users.attrs.update(unit="count", granularity="1_week", incomplete=[])

def view(k):
    return charts.line_chart(users * k, title=f"k={k}")

def alive():
    gc.collect()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Widget.widgets: the count of open widgets
        open_widgets = len(ipywidgets.Widget.widgets)
    canvases = [o for o in gc.get_objects() if isinstance(o, Canvas)]
    opened = sum(c.comm is not None for c in canvases)
    return {"widgets": open_widgets, "canvases": len(canvases), "open canvases": opened}
"""


class _ThisPython(KernelSpecManager):
    def get_kernel_spec(self, kernel_name):
        return KernelSpec(resource_dir=ipykernel.kernelspec.RESOURCES, **ipykernel.kernelspec.get_kernel_dict())


class _Manager(KernelManager):
    @default("kernel_spec_manager")
    def _this_python(self):
        return _ThisPython()


class Kernel:
    """A kernel that runs cells by id, as JupyterLab runs them."""

    def __init__(self):
        self.manager = _Manager(kernel_name="python3")
        environment = {k: v for k, v in os.environ.items() if k != INTERACTIVE_ENV}
        self.manager.start_kernel(env={**environment, "JPY_SESSION_NAME": "charts.ipynb"})
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=120)

    def run(self, cell: str, code: str) -> str:
        """Run ``code`` as the cell ``cell``; its standard output. Fails on an error."""
        request = self.client.session.msg(
            "execute_request",
            {"code": code, "silent": False, "store_history": True, "user_expressions": {}, "allow_stdin": False},
            metadata={"cellId": cell},
        )
        self.client.shell_channel.send(request)
        printed: list[str] = []
        errors: list[str] = []
        while True:
            message = self.client.get_iopub_msg(timeout=120)
            if message["parent_header"].get("msg_id") != request["header"]["msg_id"]:
                continue
            kind, content = message["msg_type"], message["content"]
            if kind == "stream":
                printed.append(content["text"])
            elif kind == "error":
                errors.append(f"{content['ename']}: {content['evalue']}")
            elif kind == "status" and content["execution_state"] == "idle":
                break
        assert not errors, f"cell {cell}: {errors}"
        return "".join(printed)

    def alive(self) -> dict[str, int]:
        return json.loads(self.run("probe", "print(json.dumps(alive()))"))

    def stop(self):
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


@pytest.fixture(scope="module")
def kernel():
    started = Kernel()
    started.run("setup", SETUP)
    yield started
    started.stop()


def test_a_chart_cell_run_again_closes_its_previous_canvas(kernel):
    kernel.run("chart", "view(1)")
    first = kernel.alive()
    for k in range(2, RUNS + 1):
        kernel.run("chart", f"view({k})")
    assert kernel.alive() == first
    assert first["open canvases"] == 1  # the chart on the page: interactive


def test_a_panel_cell_run_again_closes_the_previous_panel(kernel):
    make = "panel = controls.Panel(view, k=ipywidgets.IntSlider(value=1, min=1, max=99)); panel"
    kernel.run("panel", make)
    first = kernel.alive()
    for _ in range(RUNS):
        kernel.run("panel", make)
    assert kernel.alive() == first
    kernel.run("redraw", "panel.controls['k'].value = 7; assert panel.draws == 2 and panel.error is None")


def test_a_chart_shown_by_another_cell_too_stays_until_that_cell_runs_again(kernel):
    kernel.run("a", "shared = view(3); shared")
    kernel.run("b", "shared")  # the same figure, the same canvas, shown by a second cell
    kernel.run("keep", "kept = shared")
    kernel.run("a", "shared = view(4); shared")
    assert kernel.run("check", "print(kept.canvas.comm is not None)").strip() == "True"  # b still shows it
    kernel.run("b", "shared")  # b now shows the new one: the old one is shown nowhere
    assert kernel.run("check", "print(isinstance(kept.canvas, Canvas))").strip() == "False"
    # shown again, a closed chart gets a new canvas, never a closed one
    kernel.run("c", "kept")
    assert kernel.run("check", "print(kept.canvas.comm is not None)").strip() == "True"
