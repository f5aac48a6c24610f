"""Charts and captions for notebooks, built on what the library returns.

Units come from ``attrs`` (never typed by hand), descriptions from the catalogue, dates are
readable, and periods that are not complete are shaded so that nobody reads a half week as a
slump. matplotlib is imported only when a chart is drawn.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from metrics_kit.spec.catalogue import Catalogue, default_catalogue

_UNIT_LABELS = {"count": "count", "usd": "USD", "native_token": "native tokens", "fraction": "share (%)"}


def unit_label(unit: str | None) -> str:
    if unit is None:
        return ""
    return _UNIT_LABELS.get(unit, unit.upper() if len(unit) <= 4 else unit.replace("_", " "))


def describe(metric: str, catalogue: Catalogue | None = None) -> str:
    """``metric``: its catalogue description, in one line, for a notebook caption."""
    found = (catalogue or default_catalogue()).get(metric)
    if found is None:
        raise KeyError(f"{metric!r} is not in the catalogue")
    return f"{found.name} ({unit_label(found.unit)}, {found.aggregation.replace('_', ' ')}): {found.description}"


def line_chart(
    frame: pd.DataFrame | pd.Series,
    columns: Sequence[str] | None = None,
    *,
    title: str,
    ax=None,
    kind: str = "line",
    units: dict | None = None,
    labels: dict | None = None,
):
    """Plot ``columns`` of a wide frame (or a series) against period starts, one y-axis per unit.

    A second unit goes on a right-hand axis; more than two units is refused (split the chart).
    Incomplete periods (``attrs["incomplete"]``) are shaded and named in the legend."""
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter, PercentFormatter

    if isinstance(frame, pd.Series):
        frame = frame.to_frame()
        units = units or {frame.columns[0]: frame.columns.name or frame[frame.columns[0]].attrs.get("unit")}
    columns = list(columns or frame.columns)
    units = {**frame.attrs.get("units", {}), **(units or {})}
    by_unit: dict[str | None, list[str]] = {}
    for column in columns:
        by_unit.setdefault(units.get(column), []).append(column)
    if len(by_unit) > 2:
        raise ValueError(f"{len(by_unit)} units in one chart ({', '.join(map(str, by_unit))}); split it")
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 4))
    axes = [ax] if len(by_unit) == 1 else [ax, ax.twinx()]
    handles = []
    styles = ["-", "--"]
    for axis, (unit, cols), style in zip(axes, by_unit.items(), styles[: len(axes)], strict=True):
        for column in cols:
            label = (labels or {}).get(column, column)
            data = frame[column].astype("float64")
            if kind == "bar":
                width = _bar_width(frame.index)
                handles.append(axis.bar(frame.index, data, width=width, label=label, alpha=0.7))
            else:
                (line,) = axis.plot(frame.index, data, style, label=label, linewidth=1.6)
                handles.append(line)
        axis.set_ylabel(unit_label(unit))
        # 162.5 M rather than an offset of 1e8; shares as percentages
        axis.yaxis.set_major_formatter(PercentFormatter(1.0) if unit == "fraction" else EngFormatter(sep=" "))
    incomplete = [pd.Timestamp(t) for t in frame.attrs.get("incomplete", []) if pd.Timestamp(t) in frame.index]
    if incomplete:
        span = _period_span(frame.index)
        for start in incomplete:
            shade = ax.axvspan(start, start + span, color="grey", alpha=0.15, linewidth=0)
        shade.set_label("incomplete period")
        handles.append(shade)
    ax.set_title(title)
    ax.xaxis.set_major_locator(mdates.AutoDateLocator(maxticks=10))
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(ax.xaxis.get_major_locator()))
    ax.set_xlabel("period start (UTC)")
    ax.grid(True, alpha=0.3)
    ax.legend(handles=handles, labels=[h.get_label() for h in handles], loc="upper left", fontsize="small")
    return ax


def _period_span(index: pd.DatetimeIndex) -> pd.Timedelta:
    if len(index) > 1:
        return pd.Timedelta(index[1] - index[0])
    return pd.Timedelta(days=1)


def _bar_width(index: pd.DatetimeIndex) -> float:
    return 0.8 * _period_span(index).days
