"""Pointing at a chart: the text of the value under the pointer.

Every chart of :mod:`metrics_kit.notebook.charts` records, for each value it draws, a *mark*: where
it is (a line's point, or a bar's rectangle, in the data coordinates of its axes), which *slot* it
belongs to (the period, or the category of a ranking or a bridge) and what it says, such as
``week of 2025-03-03 · swap active users · 1,234 count · complete``. The axes' ``format_coord``,
which matplotlib calls with the pointer's position and whose text its toolbar shows (ipympl's
footer, in JupyterLab and Voilà), answers with the text of the mark pointed at:

- the slot nearest to the pointer along the axis the slots lie on (the dates, for a time series),
  so that pointing anywhere above a period reads that period, as in a BI tool's tooltip;
- in that slot, the mark nearest to the pointer (a line's point, or the bar it is inside): the
  series whose value is drawn closest.

Only marks inside the current view count, so that after a zoom the pointer reads what is shown.
Twin axes (a second unit on the right) share one readout: each mark is placed through its own axes.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass

from matplotlib.axes import Axes
from matplotlib.patches import Rectangle

SEPARATOR = " · "


@dataclass(frozen=True)
class Mark:
    """One value drawn: its axes, its slot, its extent in data coordinates, its text."""

    axes: Axes
    slot: Hashable
    x0: float
    x1: float
    y0: float
    y1: float
    text: str


class Readout:
    """The marks of one chart (one axes and its twins). ``across`` is the axis the slots lie on:
    ``"x"`` for time series and bridges, ``"y"`` for a ranking's horizontal bars."""

    def __init__(self, across: str = "x"):
        if across not in ("x", "y"):
            raise ValueError(f"across is 'x' or 'y', not {across!r}")
        self.across = across
        self.marks: list[Mark] = []

    def point(self, axes: Axes, slot: Hashable, x: float, y: float, text: str) -> None:
        """A point of a line at (x, y); nothing for a missing value (NaN), which is not drawn."""
        if math.isfinite(x) and math.isfinite(y):
            self.marks.append(Mark(axes, slot, x, x, y, y, text))

    def bar(self, axes: Axes, slot: Hashable, bar: Rectangle, text: str) -> None:
        """A bar, by its rectangle (a negative height reaches down from its base)."""
        x, y, width, height = bar.get_x(), bar.get_y(), bar.get_width(), bar.get_height()
        if all(math.isfinite(v) for v in (x, y, width, height)):
            self.marks.append(Mark(axes, slot, x, x + width, y, y + height, text))

    def text_at(self, axes: Axes, x: float, y: float) -> str:
        """The text of the mark pointed at from (x, y), in ``axes``' data coordinates ("" if no
        mark is in view)."""
        axes.viewLim  # noqa: B018 (reading it applies a pending autoscale, which the transform uses)
        pointer = axes.transData.transform((x, y))
        found: list[tuple[float, float, Mark]] = []
        for mark in list(self.marks):  # a copy: a redraw on another thread may add marks meanwhile
            if not _in_view(mark):  # (reads the mark's axes' viewLim before its transform, as above)
                continue
            (left, low), (right, high) = mark.axes.transData.transform([(mark.x0, mark.y0), (mark.x1, mark.y1)])
            found.append((_gap(pointer[0], left, right), _gap(pointer[1], low, high), mark))
        if not found:
            return ""

        def along(item: tuple[float, float, Mark]) -> float:
            return item[0] if self.across == "x" else item[1]

        slot = min(found, key=along)[2].slot
        same = [item for item in found if item[2].slot == slot]
        return min(same, key=lambda item: math.hypot(item[0], item[1]))[2].text


class _Pointer:
    """The ``format_coord`` of one axes: its readout, asked in that axes' coordinates."""

    def __init__(self, readout: Readout, axes: Axes):
        self.readout = readout
        self.axes = axes

    def __call__(self, x: float, y: float) -> str:
        return self.readout.text_at(self.axes, x, y)


def readout(ax: Axes, *, across: str = "x") -> Readout:
    """The readout of ``ax``: the one it has, else a new one that its ``format_coord`` answers from."""
    current = ax.format_coord
    if isinstance(current, _Pointer):
        return current.readout
    made = Readout(across)
    ax.format_coord = _Pointer(made, ax)  # type: ignore[method-assign]
    return made


def share(made: Readout, *axes: Axes) -> None:
    """Let ``axes`` (twins of the readout's axes) answer from ``made`` too."""
    for ax in axes:
        ax.format_coord = _Pointer(made, ax)  # type: ignore[method-assign]


def say(*parts: str | None) -> str:
    """The parts of a readout, those that are not empty, in one line."""
    return SEPARATOR.join(part for part in parts if part)


def _gap(at: float, a: float, b: float) -> float:
    """How far ``at`` is from the interval between ``a`` and ``b`` (0 inside it)."""
    low, high = min(a, b), max(a, b)
    return max(low - at, 0.0, at - high)


def _in_view(mark: Mark) -> bool:
    view = mark.axes.viewLim
    x_low, x_high = sorted((view.x0, view.x1))
    y_low, y_high = sorted((view.y0, view.y1))
    return (
        max(mark.x0, mark.x1) >= x_low
        and min(mark.x0, mark.x1) <= x_high
        and max(mark.y0, mark.y1) >= y_low
        and min(mark.y0, mark.y1) <= y_high
    )
