"""Charts and captions for notebooks, built on what the library returns.

Every chart is its own ``matplotlib.figure.Figure``, drawn through the object API and never
through pyplot's global state: a control's callback may redraw from a kernel thread (JupyterLab
sends widget messages to a subshell) while the main thread runs a cell, and pyplot's current
figure is shared by both. A cell shows a chart by ending with the figure (``%matplotlib inline``
makes IPython display it as a PNG).

Units come from ``attrs`` (never typed by hand), labels and captions from the catalogue, ticks
read as percentages, USD amounts or counts, and periods that are not complete are shaded so that
nobody reads a half week as a slump: a line's segments into, out of and between incomplete periods
are dashed (its complete part solid, one legend entry per series), and an incomplete period's bars
are hatched and lighter. Figures use constrained layout, so that titles, legends and tick labels
are never clipped.

Pointing: every chart records what it drew (see :mod:`metrics_kit.notebook.pointing`), so that
its axes' ``format_coord`` reads out the value under the pointer: the period the pointer is in,
the series, the exact value with its unit (``no value`` for a missing one: NaN, ``pd.NA``), and
whether the period is complete. Figures made here are
:class:`Figure`, matplotlib's, which shows as ipympl's interactive canvas (pan, zoom, that readout
in its footer) where a widget frontend is, and as a PNG elsewhere (see
:mod:`metrics_kit.notebook.interactive`). :func:`drawing_into` has the next :func:`figure` draw into
a given figure (a panel's, which keeps one canvas) instead of a new one.

For example::

    fig = charts.line_chart(client.dex("demoswap", "2025-01-01", "2025-06-30", "1_week"),
                            ["swap_active_users", "swap_transaction_count"], title="Users and swaps")
    fig = charts.family_chart(frame)   # a family frame, one panel per unit (not df.plot())
"""

from __future__ import annotations

import contextvars
import math
import re
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from decimal import Decimal
from typing import Any, cast

import matplotlib.figure
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.ticker import EngFormatter, Formatter, FuncFormatter, MaxNLocator, PercentFormatter

from metrics_kit.notebook import interactive, pointing
from metrics_kit.spec.catalogue import Catalogue, default_catalogue

WIDTH, HEIGHT, DPI = 10.0, 4.0, 100
_UNIT_LABELS = {"count": "count", "usd": "USD", "native_token": "tokens", "fraction": "share"}
_UNIT_SUFFIX = re.compile(r"_in_[a-z0-9]+(?:_token)?$")
_PERIOD_WORD = {"1_day": "day", "1_week": "week", "1_month": "month"}
SYNTHETIC = "synthetic demo data"
_INTO: contextvars.ContextVar[Figure | None] = contextvars.ContextVar("metrics_kit_chart_target", default=None)


# -- words -----------------------------------------------------------------------------------------


def unit_label(unit: str | None) -> str:
    """``usd`` -> ``USD``, ``native_token`` -> ``tokens``, ``fraction`` -> ``share``; a chain's
    unit (``sol``) in capitals."""
    if unit is None:
        return ""
    return _UNIT_LABELS.get(unit, unit.upper() if len(unit) <= 4 else unit.replace("_", " "))


def label(column: str, catalogue: Catalogue | None = None) -> str:
    """A column's name for a legend or an axis: the metric name without its unit suffix, in words
    (``transaction_fee_revenue_in_usd`` -> ``transaction fee revenue``). Derived columns and
    other names are put in words the same way."""
    metric = (catalogue or default_catalogue()).get(column)
    name = metric.name if metric is not None else column
    return _UNIT_SUFFIX.sub("", name).replace("_", " ")


def describe(metric: str, catalogue: Catalogue | None = None) -> str:
    """``metric``: its catalogue description, in one line, for a notebook caption."""
    found = (catalogue or default_catalogue()).get(metric)
    if found is None:
        raise KeyError(f"{metric!r} is not in the catalogue")
    return f"{found.name} ({unit_label(found.unit)}, {found.aggregation.replace('_', ' ')}): {found.description}"


def period_word(granularity: str) -> str:
    """``1_week`` -> ``week``."""
    return _PERIOD_WORD.get(granularity, granularity)


def title(subject: str, project: str | None = None, *, granularity: str | None = None, synthetic: bool = False) -> str:
    """Every chart title reads the same way: ``Swap active users per week, demoswap (synthetic demo data)``."""
    text = subject[:1].upper() + subject[1:]
    if granularity:
        text += f" per {period_word(granularity)}"
    if project:
        text += f", {project}"
    return text + (f" ({SYNTHETIC})" if synthetic else "")


_title = title  # for the functions below, whose ``title`` argument hides it


def escape_markdown(text: str) -> str:
    """``text`` with its dollar signs escaped, so that Markdown shows ``$1.2 M`` rather than
    reading the span between two dollars as LaTeX."""
    return re.sub(r"(?<!\\)\$", r"\\$", text)


def takeaway(text: str):
    """A bold **Takeaway:** line as Markdown, dollar signs kept as dollars."""
    from IPython.display import Markdown

    return Markdown(f"**Takeaway:** {escape_markdown(text)}")


# -- ticks -----------------------------------------------------------------------------------------


def _engineering(places: int | None = None) -> Callable[[float], str]:
    """1.5 k, 162 M for thousands and up; below, the number itself (never 100 m for 0.1)."""
    large = EngFormatter(places=places, sep=" ")

    def text(x: float, _position: object = None) -> str:
        return large(x) if abs(x) >= 1000 else f"{x:,.{places}f}" if places is not None else f"{x:,.4g}"

    return text


def formatter(unit: str | None) -> Formatter:
    """The tick formatter of a unit: shares as percentages with as many decimals as the axis'
    span needs, USD as ``$1.5 M``, counts and token amounts as ``1.5 k``/``162 M``."""
    if unit == "fraction":
        return PercentFormatter(1.0, decimals=None)
    if unit == "usd":
        engineering = _engineering()
        # "\$": a dollar alone is a dollar, but two in one text would start mathtext
        return FuncFormatter(lambda x, _: ("−" if x < 0 else "") + r"\$" + engineering(abs(x)))
    return FuncFormatter(_engineering())


def format_axis(ax: Axes, unit: str | None) -> None:
    """Label ``ax``'s y axis with ``unit`` and format its ticks; counts get whole ticks."""
    ax.set_ylabel(unit_label(unit))
    ax.yaxis.set_major_formatter(formatter(unit))
    if unit == "count":
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def amount(value: float, unit: str | None) -> str:
    """A number as the axis shows it, for text: ``$1.5 M``, ``12.5%``, ``438.5 M tokens``; a
    missing one (NaN, ``pd.NA``) as ``no value``."""
    if missing(value):
        return pointing.NO_VALUE
    value = float(value)
    if unit == "fraction":
        return f"{value:.1%}"
    if unit == "count" and abs(value) < 1000 and value.is_integer():
        return f"{int(value)}"  # a count of users or transactions is whole: 4, not 4.0
    text = _engineering(1)(value).replace(".0 ", " ").strip()
    if unit == "usd":
        return ("-" if value < 0 else "") + "$" + text.lstrip("-−")
    return f"{text} {unit_label(unit)}" if unit not in (None, "count") else text


def exact(value: Any, unit: str | None) -> str:
    """A value as it is, for a readout, with its unit: ``1,234 count``, ``1,234,567.891 USD``,
    ``0.0734 share (7.34%)``; a missing one (None, NaN, ``pd.NA``) as ``no value``.

    An integer is written whole, with thousands separators. Any other number with the fewest
    digits that give back its first 15 significant digits, which a 64-bit float holds exactly
    (any decimal of 15 significant digits survives the trip through one): the float noise beyond
    them goes (``0.1 + 0.2`` reads ``0.3``), and no digit shown is wrong. Always in positional
    notation, with thousands separators (``1e22`` reads ``10,000,000,000,000,000,000,000``)."""
    if missing(value):
        return pointing.NO_VALUE
    number = value.item() if hasattr(value, "item") else value  # a NumPy scalar as Python's
    text = f"{number:,}" if isinstance(number, int) else _decimal(float(number))
    if unit == "fraction":
        return f"{text} {unit_label(unit)} ({float(number):.2%})"
    return f"{text} {unit_label(unit)}".strip()


def _decimal(number: float) -> str:
    """``number`` rounded to 15 significant digits, trailing zeros dropped, written out in full."""
    if not math.isfinite(number):
        return str(number)
    shortest = Decimal(format(number, ".15g"))
    return format(shortest if shortest else Decimal(0), ",f")  # -0 reads 0


def missing(value: Any) -> bool:
    """Whether ``value`` is a missing value: None, NaN, ``pd.NA`` or ``NaT``."""
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # not a scalar: not a value that can be missing
        return False


def period_text(start: Any, granularity: str | None) -> str:
    """A period by its first day (in UTC, as the service's periods are): ``day 2025-03-03``,
    ``week of 2025-03-03``, ``month of 2025-03``."""
    first = _utc(pd.Timestamp(start))
    if granularity == "1_day":
        return f"day {first:%Y-%m-%d}"
    if granularity == "1_month":
        return f"month of {first:%Y-%m}"
    if granularity is not None:
        return f"{period_word(granularity)} of {first:%Y-%m-%d}"
    return f"{first:%Y-%m-%d}"


# -- figures ---------------------------------------------------------------------------------------


class Figure(matplotlib.figure.Figure):
    """matplotlib's Figure, which a notebook shows as an interactive canvas where a widget frontend
    is (:func:`metrics_kit.notebook.interactive.enabled`), and as any Figure elsewhere: a PNG, by
    matplotlib's inline backend. Its text is matplotlib's (``<Figure size 1000x400 with 1 Axes>``)."""

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any] | None:
        if not interactive.enabled():
            return None  # IPython goes on to its other formatters: the inline backend's PNG
        return interactive.bundle(self)


def figure(rows: int = 1, *, height: float = HEIGHT, sharex: bool = True) -> tuple[Figure, list[Axes]]:
    """A new Figure (constrained layout) with ``rows`` axes stacked, sharing their dates; inside
    :func:`drawing_into`, the first call draws into that figure instead, cleared and sized."""
    fig = _INTO.get()
    if fig is None:
        fig = empty_figure(height)
    else:
        _INTO.set(None)  # one figure per draw: a second call makes a new one
        fig.clear()
        if tuple(fig.get_size_inches()) != (WIDTH, height):  # unchanged: no resize for a canvas to redo
            fig.set_size_inches(WIDTH, height)
    axes = fig.subplots(rows, 1, sharex=sharex, squeeze=False)[:, 0]
    return fig, list(axes)


def empty_figure(height: float = HEIGHT) -> Figure:
    """A Figure of the charts' width, dpi and layout, with nothing on it."""
    return Figure(figsize=(WIDTH, height), dpi=DPI, layout="constrained")


@contextmanager
def drawing_into(fig: Figure) -> Iterator[Figure]:
    """Inside, the first chart made without ``ax`` (the first :func:`figure`) draws into ``fig``
    rather than a new figure, so that a panel keeps one figure, and one canvas, for every redraw."""
    token = _INTO.set(fig)
    try:
        yield fig
    finally:
        _INTO.reset(token)


def png(fig: matplotlib.figure.Figure) -> bytes:
    """``fig`` as PNG bytes. Renderers share matplotlib's font cache: one renders at a time."""
    return interactive.png(fig)


def _units(frame: pd.DataFrame | pd.Series, units: Mapping[str, str | None] | None) -> tuple[pd.DataFrame, dict]:
    if isinstance(frame, pd.Series):
        series = frame
        frame = series.to_frame(series.name if series.name is not None else "value")
        frame.attrs = dict(series.attrs)
        frame.attrs["units"] = {frame.columns[0]: series.attrs.get("unit")}
    return frame, {**frame.attrs.get("units", {}), **(units or {})}


def _axes(ax: Axes | None, height: float = HEIGHT) -> Axes:
    return ax if ax is not None else figure(height=height)[1][0]


def line_chart(
    frame: pd.DataFrame | pd.Series,
    columns: Sequence[str] | None = None,
    *,
    title: str,
    ax: Axes | None = None,
    kind: str = "line",
    units: Mapping[str, str | None] | None = None,
    labels: Mapping[str, str] | None = None,
) -> Figure:
    """``columns`` of a wide frame (or a series) against period starts, one y axis per unit.

    A second unit goes on a right-hand axis, its series named "(right)" in the legend (as pandas
    does); more than two is refused (use :func:`family_chart`). ``kind="bar"`` draws bars.
    Incomplete periods (``attrs["incomplete"]``) are shaded and named in the legend; each line is
    dashed where it touches one (see :func:`plot_line`), and their bars are hatched and lighter.
    Each point and bar reads out its period, series, value and completeness where it is pointed at.
    Draws on ``ax`` when given (a panel of a larger figure); returns the figure."""
    frame, units = _units(frame, units)
    columns = list(columns or frame.columns)
    by_unit: dict[str | None, list[str]] = {}
    for column in columns:
        by_unit.setdefault(units.get(column), []).append(column)
    if len(by_unit) > 2:
        raise ValueError(f"{len(by_unit)} units in one chart ({', '.join(map(str, by_unit))}); split it")
    ax = _axes(ax)
    axes = [ax] if len(by_unit) == 1 else [ax, ax.twinx()]
    readout = pointing.readout(ax)
    pointing.share(readout, *axes[1:])
    says = _readout_text(frame)
    bars = [c for c in columns if kind == "bar"]
    width = _bar_width(frame.index) / max(1, len(bars))
    colours = iter(f"C{i}" for i in range(10))
    incomplete = incomplete_periods(frame)
    names = {column: (labels or {}).get(column) or label(column) for column in columns}
    # dashes mean "incomplete", so the right-hand axis' series are told apart by name, not by style
    for axis, (unit, cols), side in zip(axes, by_unit.items(), ("", " (right)"), strict=False):
        for column in cols:
            series = names[column]
            data = floats(frame[column])
            texts = [says(start, series, value, unit) for start, value in frame[column].items()]
            if kind == "bar":
                offset = pd.Timedelta(days=width * (bars.index(column) - (len(bars) - 1) / 2))
                drawn = axis.bar(
                    frame.index + offset, data, width=width, label=series + side, color=next(colours), alpha=0.8
                )
                mark_incomplete_bars(drawn.patches, frame.index, incomplete)
                _read_bars(readout, axis, frame.index, drawn.patches, texts)
            else:
                plot_line(axis, data, incomplete, label=series + side, color=next(colours), linewidth=1.6)
                _read_points(readout, axis, data, texts)
        format_axis(axis, unit)
        axis.margins(y=0.08)
    if kind == "bar":
        ax.axhline(0, color="black", linewidth=0.8)
    centred = kind == "bar" or len(frame) == 1  # bars (and a lone point) are drawn centred on their start
    _read_periods(readout, ax, frame, says, list(names.values()), centred=centred)
    shade_incomplete(ax, frame, centred=centred)
    finish(ax, title, extra_axes=axes[1:])
    return _figure_of(ax)


def stacked_bars(
    frame: pd.DataFrame,
    columns: Sequence[str],
    *,
    title: str,
    total: str | None = None,
    ax: Axes | None = None,
    labels: Mapping[str, str] | None = None,
) -> Figure:
    """Signed stacked bars: positive parts stack up from zero, negative ones down from it; ``total``
    (a column) is drawn over them as a line. One unit (the first column's). A part without a value
    in a period is left out of that period's stack (its other parts are drawn, from zero up or down
    as if it were not there), and reads ``no value`` where it is pointed at when nothing is drawn."""
    import numpy as np

    frame, units = _units(frame, None)
    ax = _axes(ax)
    readout, says = pointing.readout(ax), _readout_text(frame)
    width = _bar_width(frame.index)
    incomplete = incomplete_periods(frame)
    up, down = np.zeros(len(frame)), np.zeros(len(frame))
    names = [(labels or {}).get(column) or label(column) for column in columns]
    for i, (column, name) in enumerate(zip(columns, names, strict=True)):
        values = floats(frame[column]).to_numpy()
        bottom = np.where(values >= 0, up, down)
        drawn = ax.bar(frame.index, values, width=width, bottom=bottom, color=f"C{i}", alpha=0.8, label=name, zorder=2)
        mark_incomplete_bars(drawn.patches, frame.index, incomplete)
        texts = [says(start, name, value, units.get(column)) for start, value in frame[column].items()]
        _read_bars(readout, ax, frame.index, drawn.patches, texts)
        present = np.nan_to_num(values, nan=0.0)  # a missing part adds nothing to the stack
        up, down = up + present.clip(min=0), down + present.clip(max=0)
    if total is not None:
        name = (labels or {}).get(total) or label(total)
        data = floats(frame[total])
        plot_line(ax, data, incomplete, label=name, color="black", linewidth=1.4, zorder=3)
        texts = [
            says(start, name, value, units.get(total, units.get(columns[0]))) for start, value in frame[total].items()
        ]
        _read_points(readout, ax, data, texts)
        names.append(name)
    ax.axhline(0, color="black", linewidth=0.8)
    format_axis(ax, units.get(columns[0]))
    ax.margins(y=0.08)
    _read_periods(readout, ax, frame, says, names, centred=True)
    shade_incomplete(ax, frame, centred=True)
    finish(ax, title)
    return _figure_of(ax)


def family_chart(
    frame: pd.DataFrame,
    columns: Sequence[str] | None = None,
    *,
    title: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> Figure:
    """A family frame (``client.dex(...)``, ``client.tokenomics(...)``...) as one panel per unit,
    sharing the dates: USD, counts, tokens and shares never share an axis. Use it instead of
    ``df.plot()``, which draws every column on one axis."""
    frame, units = _units(frame, None)
    columns = list(columns or frame.columns)
    by_unit: dict[str | None, list[str]] = {}
    for column in columns:
        by_unit.setdefault(units.get(column), []).append(column)
    fig, axes = figure(len(by_unit), height=max(HEIGHT, 2.6 * len(by_unit)))
    heading = title or _title(f"{frame.attrs.get('family', '')} metrics".strip(), frame.attrs.get("project"))
    for i, (ax, (_, cols)) in enumerate(zip(axes, by_unit.items(), strict=True)):
        line_chart(frame, cols, ax=ax, title=heading if i == 0 else "", units=units, labels=labels)
        if i < len(axes) - 1:
            ax.set_xlabel("")
    fig.align_ylabels(axes)
    return fig


def ranking(values: pd.Series, *, title: str, unit: str | None, ax: Axes | None = None) -> Figure:
    """One horizontal bar per index entry (projects, say), largest on top, its value written at
    the bar's end; an entry without a value at the bottom, written ``no value``."""
    order = floats(values).reset_index(drop=True).sort_values(na_position="first").index
    given = values.iloc[order]  # as given (exact integers stay integers), smallest first
    ordered = floats(given)
    ax = _axes(ax, height=max(2.5, 0.45 * len(ordered) + 1.2))
    bars = ax.barh([str(i) for i in ordered.index], ordered.to_numpy(), color="C0", alpha=0.85)
    readout = pointing.readout(ax, across="y")
    series = label(str(values.name)) if values.name is not None else title
    for at, (bar, (name, value)) in enumerate(zip(bars.patches, given.items(), strict=True)):
        readout.slot(ax, str(name), at - 0.5, at + 0.5, pointing.say(str(name), series, pointing.NO_VALUE))
        readout.bar(ax, str(name), bar, pointing.say(str(name), series, exact(value, unit)))
    ax.bar_label(bars, labels=[amount(v, unit) for v in ordered], padding=4, fontsize="small")
    ax.xaxis.set_major_formatter(formatter(unit))
    ax.set_xlabel(unit_label(unit))
    ax.margins(x=0.15)
    ax.set_title(title, loc="left")
    ax.grid(True, axis="x", alpha=0.3)
    return _figure_of(ax)


def bridge(
    first: tuple[str, float],
    steps: Mapping[str, float],
    last: str,
    *,
    title: str,
    unit: str | None,
    ax: Axes | None = None,
) -> Figure:
    """How one value became another, step by step (a waterfall): a bar for the first value, one
    floating bar per step (up in green, down in red, each written with its sign), and a bar for
    the last value, which is the first plus every step. ``first`` is (label, value), ``steps``
    label -> change, ``last`` the last bar's label."""
    label, start = first
    given = {label: start, **steps}
    lacking = [name for name, value in given.items() if missing(value)]
    if lacking:
        raise ValueError(f"a bridge needs a value for its start and every step; {', '.join(lacking)} has none")
    totals = [float(start)]
    for change in steps.values():
        totals.append(totals[-1] + float(change))
    names = [label, *steps, last]
    bottoms = [0.0, *(min(a, b) for a, b in zip(totals, totals[1:], strict=False)), 0.0]
    heights = [float(start), *(abs(float(c)) for c in steps.values()), totals[-1]]
    colours = ["C0", *("C2" if float(c) >= 0 else "C3" for c in steps.values()), "C0"]
    texts = [
        amount(start, unit),
        *(("+" if float(c) >= 0 else "-") + amount(abs(float(c)), unit) for c in steps.values()),
        amount(totals[-1], unit),
    ]
    ax = _axes(ax)
    bars = ax.bar(names, heights, bottom=bottoms, color=colours, alpha=0.85)
    readout = pointing.readout(ax)
    said = [
        pointing.say(label, exact(start, unit)),
        *(
            pointing.say(
                step, ("+" if float(c) >= 0 else "") + exact(c, unit), f"from {exact(a, unit)} to {exact(b, unit)}"
            )
            for step, c, a, b in zip(steps, steps.values(), totals, totals[1:], strict=False)
        ),
        pointing.say(last, exact(totals[-1], unit)),
    ]
    for at, (name, bar, text) in enumerate(zip(names, bars.patches, said, strict=True)):
        readout.slot(ax, name, at - 0.5, at + 0.5, "")
        readout.bar(ax, name, bar, text)
    ax.bar_label(bars, labels=texts, label_type="center", fontsize="small")
    for i in range(len(names) - 1):  # a thin line from each bar's end to the next bar's start
        ax.plot([i + 0.4, i + 0.6], [totals[i]] * 2, color="0.4", linewidth=0.8)
    format_axis(ax, unit)
    ax.set_title(title, loc="left")
    ax.grid(True, axis="y", alpha=0.3)
    return _figure_of(ax)


# -- the parts every chart shares -------------------------------------------------------------------


def incomplete_periods(frame: pd.DataFrame | pd.Series) -> list[pd.Timestamp]:
    """The starts of ``frame``'s incomplete periods: those of ``attrs["incomplete"]`` (ISO first
    days or timestamps, in UTC when they name no zone) that are in its index, as its index has
    them (a time-zone-aware index in its own zone)."""
    zone = getattr(frame.index, "tz", None)
    found = []
    for given in frame.attrs.get("incomplete", []):
        start = _in_zone(pd.Timestamp(given), zone)
        if start in frame.index:
            found.append(start)
    return found


def _in_zone(stamp: pd.Timestamp, zone: Any) -> pd.Timestamp:
    """``stamp`` as an index in ``zone`` (None: naive, in UTC) holds it; a naive one is in UTC."""
    if zone is None:
        return _utc(stamp).tz_localize(None) if stamp.tzinfo is not None else stamp
    return (stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp).tz_convert(zone)


def _utc(stamp: pd.Timestamp) -> pd.Timestamp:
    """A time-zone-aware ``stamp`` in UTC; a naive one as it is (naive times are UTC here)."""
    return stamp.tz_convert("UTC") if stamp.tzinfo is not None else stamp


def floats(values: pd.Series) -> pd.Series:
    """``values`` as float64, a missing value (``pd.NA``, None) as NaN: what matplotlib draws."""
    import numpy as np

    return pd.Series(values.to_numpy(dtype="float64", na_value=np.nan), index=values.index, name=values.name)


def granularity_of(frame: pd.DataFrame | pd.Series) -> str | None:
    """``attrs["granularity"]``, else what the spacing of the index says (days, weeks, months)."""
    if frame.attrs.get("granularity"):
        return str(frame.attrs["granularity"])
    index = frame.index
    if not isinstance(index, pd.DatetimeIndex) or len(index) < 2:
        return None
    days = {step.days for step in index[1:] - index[:-1]}
    if days == {1}:
        return "1_day"
    if days == {7}:
        return "1_week"
    if days <= {28, 29, 30, 31} and bool((index.day == 1).all()):
        return "1_month"
    return None


class _Says:
    """What a value of a frame says where it is pointed at: its period, its series, the value with
    its unit, and whether the period is complete (said only when ``attrs`` tell)."""

    def __init__(self, frame: pd.DataFrame):
        self.granularity = granularity_of(frame)
        self.told = "incomplete" in frame.attrs
        self.incomplete = set(incomplete_periods(frame))

    def __call__(self, start: Any, series: str, value: Any, unit: str | None) -> str:
        return pointing.say(period_text(start, self.granularity), series, exact(value, unit), self.status(start))

    def empty(self, start: Any, series: Sequence[str]) -> str:
        """What a period says with no value drawn in it, of any of ``series``."""
        return pointing.say(
            period_text(start, self.granularity), ", ".join(series), pointing.NO_VALUE, self.status(start)
        )

    def status(self, start: Any) -> str | None:
        if not self.told:
            return None
        return "incomplete" if pd.Timestamp(start) in self.incomplete else "complete"


def _readout_text(frame: pd.DataFrame) -> _Says:
    return _Says(frame)


def period_bands(
    index: pd.DatetimeIndex, granularity: str | None, *, centred: bool = False
) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """The stretch of the time axis each period of ``index`` covers on a chart, ``(low, high)``, for
    its readout and its shading. A line draws a period at its start: the period is its own
    ``[start, end)`` (the next period's start, one day, week or calendar month later, in UTC).
    Bars are drawn ``centred`` on their start: from halfway to the previous period's start to
    halfway to the period's end, so that bands lie side by side, each around its bar."""
    starts = list(index)
    ends = [_period_end(starts, i, granularity) for i in range(len(starts))]
    if not centred:
        return list(zip(starts, ends, strict=True))
    bands = []
    for i, (start, end) in enumerate(zip(starts, ends, strict=True)):
        after = (end - start) / 2
        before = (start - starts[i - 1]) / 2 if i and ends[i - 1] == start else after
        bands.append((start - before, start + after))
    return bands


_LENGTHS = {"1_day": pd.DateOffset(days=1), "1_week": pd.DateOffset(weeks=1), "1_month": pd.DateOffset(months=1)}


def _period_end(starts: Sequence[pd.Timestamp], i: int, granularity: str | None) -> pd.Timestamp:
    """The end of the period that starts at ``starts[i]``: one ``granularity`` later in UTC, else the
    next start, else as long as the period before it (a day when it is alone)."""
    start = starts[i]
    length = _LENGTHS.get(granularity or "")
    if length is not None:
        end = _utc(start) + length
        return end.tz_convert(start.tzinfo) if start.tzinfo is not None else end
    if i + 1 < len(starts):
        return starts[i + 1]
    return start + (start - starts[i - 1] if i else pd.Timedelta(days=1))


def _read_periods(
    readout: pointing.Readout, ax: Axes, frame: pd.DataFrame, says: _Says, series: Sequence[str], *, centred: bool
) -> None:
    """A slot for each period of ``frame``, where :func:`period_bands` puts it, which reads ``no
    value`` when none of ``series`` has one there."""
    if not len(frame):
        return
    ax.xaxis.update_units(frame.index)
    bands = period_bands(frame.index, granularity_of(frame), centred=centred)
    for start, (low, high) in zip(frame.index, bands, strict=True):
        x0, x1 = (float(ax.xaxis.convert_units(end)) for end in (low, high))
        readout.slot(ax, start, x0, x1, says.empty(start, series))


def _read_points(readout: pointing.Readout, ax: Axes, data: pd.Series, texts: Sequence[str]) -> None:
    xs = ax.xaxis.convert_units(data.index)
    for start, x, y, text in zip(data.index, xs, data.to_numpy(dtype="float64"), texts, strict=True):
        readout.point(ax, start, float(x), float(y), text)


def _read_bars(readout: pointing.Readout, ax: Axes, index: pd.Index, bars: Sequence, texts: Sequence[str]) -> None:
    slots: Sequence[Hashable] = list(index)
    for start, bar, text in zip(slots, bars, texts, strict=True):
        readout.bar(ax, start, bar, text)


def plot_line(
    ax: Axes,
    data: pd.Series,
    incomplete: Sequence[pd.Timestamp],
    *,
    label: str,
    color: str,
    linewidth: float,
    zorder: float | None = None,
) -> list[Line2D]:
    """``data`` (indexed by period start) as a line whose complete part is solid and whose segments
    into, out of or between ``incomplete`` periods are dashed, in the same colour: a partial period's
    smaller value then never reads as a collapse. The solid line carries ``label`` (one legend
    entry per series); the dashed one, drawn only when there is such a segment, is left out of the
    legend. Returns the lines drawn, solid first."""
    import numpy as np

    values = data.to_numpy(dtype="float64")
    partial = np.asarray(data.index.isin(list(incomplete)), dtype=bool)
    solid = np.where(partial, np.nan, values)
    lines = ax.plot(data.index, solid, "-", label=label, color=color, linewidth=linewidth, zorder=zorder)
    # a segment is dashed when either end is incomplete; each run of such segments is drawn joined,
    # and a NaN keeps runs apart, so that no complete segment between two of them is dashed
    segments = np.flatnonzero(partial[:-1] | partial[1:])
    xs: list[pd.Timestamp] = []
    ys: list[float] = []
    for run in np.split(segments, np.flatnonzero(np.diff(segments) > 1) + 1) if len(segments) else []:
        if xs:
            xs.append(data.index[run[0]])
            ys.append(np.nan)
        xs += list(data.index[run[0] : run[-1] + 2])
        ys += list(values[run[0] : run[-1] + 2])
    if xs:
        lines += ax.plot(xs, ys, "--", label=f"_{label} (incomplete)", color=color, linewidth=linewidth, zorder=zorder)
    return lines


def mark_incomplete_bars(bars: Sequence, index: pd.DatetimeIndex, incomplete: Sequence[pd.Timestamp]) -> None:
    """Hatch and lighten the bars (one per period of ``index``, in order) of incomplete periods."""
    for bar, start in zip(bars, index, strict=True):
        if start in incomplete:
            bar.set_hatch("///")
            bar.set_alpha(0.4)


def shade_incomplete(ax: Axes, frame: pd.DataFrame, *, centred: bool = False) -> None:
    """Shade the periods of ``attrs["incomplete"]``, labelled once for the legend, each over the
    stretch :func:`period_bands` gives it (the stretch that reads out that period): from its start
    to its end, or, with ``centred`` (bars, drawn centred on their period's start), around its start,
    so that the shading covers the bars."""
    incomplete = set(incomplete_periods(frame))
    bands = period_bands(frame.index, granularity_of(frame), centred=centred)
    shaded = [band for start, band in zip(frame.index, bands, strict=True) if start in incomplete]
    for n, (low, high) in enumerate(shaded):
        ax.axvspan(low, high, color="grey", alpha=0.15, linewidth=0, label="incomplete period" if n == 0 else None)


def finish(ax: Axes, title: str, *, extra_axes: Sequence[Axes] = ()) -> None:
    """Dates on x, a grid, the title, and one legend for ``ax`` and its twins, above the plot
    area (where it covers no data) and below the title."""
    import matplotlib.dates as mdates

    locator = mdates.AutoDateLocator(maxticks=10)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.set_xlabel("period start (UTC)")
    ax.grid(True, alpha=0.3)
    handles: list[Artist | tuple[Artist, ...]] = []
    names: list[str] = []
    for axis in (ax, *extra_axes):
        h, n = axis.get_legend_handles_labels()
        handles += h
        names += n
    if "incomplete period" in names:  # the shading last: it explains, it is not a series
        at = names.index("incomplete period")
        names.append(names.pop(at))
        handles.append(_incomplete_key(handles.pop(at), (ax, *extra_axes)))
    rows = 0
    if handles:
        columns = min(4, len(handles))
        rows = -(-len(handles) // columns)
        ax.legend(
            handles,
            names,
            loc="lower left",
            bbox_to_anchor=(0, 1.0),
            ncols=columns,
            frameon=False,
            fontsize="small",
            borderaxespad=0.2,
        )
    ax.set_title(title, loc="left", pad=6 + 15 * rows)


def _incomplete_key(shading: Artist | tuple[Artist, ...], axes: Sequence[Axes]) -> tuple[Artist, ...]:
    """The legend key of "incomplete period": the shading, with a dashed line and hatching over it
    when the chart has dashed lines or hatched bars, so that the key explains how they are drawn."""
    key = list(shading) if isinstance(shading, tuple) else [shading]
    if any(line.get_linestyle() == "--" for axis in axes for line in axis.get_lines()):
        key.append(Line2D([], [], color="grey", linestyle="--", linewidth=1.4))
    if any(patch.get_hatch() for axis in axes for patch in axis.patches):
        key.append(Rectangle((0, 0), 1, 1, facecolor="none", edgecolor="grey", hatch="///", linewidth=0))
    return tuple(key)


def _figure_of(ax: Axes) -> Figure:
    return cast(Figure, ax.figure)  # charts make Figures, never SubFigures


def _period_span(index: pd.DatetimeIndex) -> pd.Timedelta:
    if len(index) > 1:
        return pd.Timedelta(index[1] - index[0])
    return pd.Timedelta(days=1)


def _bar_width(index: pd.DatetimeIndex) -> float:
    return 0.8 * _period_span(index) / pd.Timedelta(days=1)
