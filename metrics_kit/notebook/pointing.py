"""Pointing at a chart: the text of the value under the pointer.

Every chart of :mod:`metrics_kit.notebook.charts` records what it drew, in *slots*: each period of
a time series (or each category of a ranking or a bridge) is a slot, the stretch of the axis it
covers on the chart, with the *marks* drawn in it (a line's point, a bar's rectangle, in the data
coordinates of their axes), each with what it says, such as
``week of 2025-03-03 · swap active users · 1,234 count · complete``. The axes' ``format_coord``,
which matplotlib calls with the pointer's position and whose text its toolbar shows (ipympl's
footer, in JupyterLab and Voilà), answers with:

- the slot the pointer is in, along the axis the slots lie on (the dates, for a time series):
  slots are half-open stretches ``[low, high)`` side by side, so pointing anywhere above a period
  reads that period and never its neighbour. A line's period is the stretch from its start to the
  next period's start (where the chart shades it when it is incomplete); a bar's, the stretch its
  bar is drawn centred in. Outside every slot (the margins beyond the first or last), nothing;
- in that slot, the mark nearest to the pointer (a line's point, or the bar it is inside): the
  series whose value is drawn closest;
- a slot with no mark (a period without a value: missing, NaN or ``pd.NA``, so nothing is drawn)
  says so, ``week of 2025-03-03 · swap active users · no value · complete``, rather than reading a
  neighbour.

After a zoom the pointer is over what is in view, so it reads what is shown. Twin axes (a second
unit on the right) share one readout: each slot and mark is placed through its own axes.

Values are written by :func:`metrics_kit.notebook.charts.exact`: a whole number with thousands
separators (``1,234,567``), any other number with the fewest digits that give back its first 15
significant digits, which a 64-bit float holds exactly: ``0.1 + 0.2`` reads ``0.3``, never
``0.30000000000000004``, and no digit shown is wrong. Never in scientific notation.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass

from matplotlib.axes import Axes
from matplotlib.patches import Rectangle

SEPARATOR = " · "
NO_VALUE = "no value"


@dataclass(frozen=True)
class Slot:
    """A period or a category: its axes, its key, the stretch ``[low, high)`` of the axis it covers
    (data coordinates of its axes, along the readout's axis), and what it says with no mark."""

    axes: Axes
    key: Hashable
    low: float
    high: float
    empty: str


@dataclass(frozen=True)
class Mark:
    """One value drawn: its axes, its slot's key, its extent in data coordinates, its text."""

    axes: Axes
    slot: Hashable
    x0: float
    x1: float
    y0: float
    y1: float
    text: str


class Readout:
    """The slots and marks of one chart (one axes and its twins). ``across`` is the axis the slots
    lie on: ``"x"`` for time series and bridges, ``"y"`` for a ranking's horizontal bars."""

    def __init__(self, across: str = "x"):
        if across not in ("x", "y"):
            raise ValueError(f"across is 'x' or 'y', not {across!r}")
        self.across = across
        self.slots: list[Slot] = []
        self.marks: list[Mark] = []

    def slot(self, axes: Axes, key: Hashable, low: float, high: float, empty: str) -> None:
        """The slot ``key`` covers ``[low, high)`` along the axis; ``empty``: what it reads when no
        mark was drawn in it."""
        self.slots.append(Slot(axes, key, low, high, empty))

    def point(self, axes: Axes, slot: Hashable, x: float, y: float, text: str) -> None:
        """A point of a line at (x, y); nothing for a missing value (NaN), which is not drawn."""
        if math.isfinite(x) and math.isfinite(y):
            self.marks.append(Mark(axes, slot, x, x, y, y, text))

    def bar(self, axes: Axes, slot: Hashable, bar: Rectangle, text: str) -> None:
        """A bar, by its rectangle (a negative height reaches down from its base); nothing for a bar
        of a missing value, which is not drawn."""
        x, y, width, height = bar.get_x(), bar.get_y(), bar.get_width(), bar.get_height()
        if all(math.isfinite(v) for v in (x, y, width, height)):
            self.marks.append(Mark(axes, slot, x, x + width, y, y + height, text))

    def text_at(self, axes: Axes, x: float, y: float) -> str:
        """The text of the slot pointed at from (x, y), in ``axes``' data coordinates: its mark
        nearest to the pointer, or what it says with no mark; "" outside every slot."""
        axes.viewLim  # noqa: B018 (reading it applies a pending autoscale, which the transform uses)
        pointer = axes.transData.transform((x, y))
        along = 0 if self.across == "x" else 1
        slot = next((s for s in list(self.slots) if _inside(pointer[along], s, along)), None)
        if slot is None:
            return ""
        found: list[tuple[float, Mark]] = []
        for mark in list(self.marks):  # a copy: a redraw on another thread may add marks meanwhile
            if mark.slot != slot.key:
                continue
            mark.axes.viewLim  # noqa: B018 (as above, for a twin's own limits)
            (left, low), (right, high) = mark.axes.transData.transform([(mark.x0, mark.y0), (mark.x1, mark.y1)])
            found.append((math.hypot(_gap(pointer[0], left, right), _gap(pointer[1], low, high)), mark))
        if not found:
            return slot.empty
        return min(found, key=lambda item: item[0])[1].text


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


def _inside(at: float, slot: Slot, along: int) -> bool:
    """Whether ``at`` (display coordinates, along the slots' axis) is in ``slot``'s ``[low, high)``:
    from its low end up to, not including, its high end, whichever way the axis runs."""
    slot.axes.viewLim  # noqa: B018 (as in Readout.text_at)
    ends = [(slot.low, 0.0), (slot.high, 0.0)] if along == 0 else [(0.0, slot.low), (0.0, slot.high)]
    start, end = (point[along] for point in slot.axes.transData.transform(ends))
    return start <= at < end if start <= end else end < at <= start


def _gap(at: float, a: float, b: float) -> float:
    """How far ``at`` is from the interval between ``a`` and ``b`` (0 inside it)."""
    low, high = min(a, b), max(a, b)
    return max(low - at, 0.0, at - high)
