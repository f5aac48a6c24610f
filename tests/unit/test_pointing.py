"""metrics_kit.notebook.pointing: what every chart of metrics_kit.notebook.charts reads out where it
is pointed at (its axes' format_coord, which ipympl's footer shows): the period, the series, the
exact value with its unit, and whether the period is complete; what is in view after a zoom."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from matplotlib.axes import Axes

from metrics_kit.notebook import charts, pointing


def weekly() -> pd.DataFrame:
    index = pd.DatetimeIndex(pd.date_range("2025-01-06", periods=4, freq="7D"), name="period_start")
    df = pd.DataFrame(
        {"swap_active_users": [5, 6, 7, 2], "transaction_fee_revenue_in_usd": [1500.25, 2000, 3000.5, 1000]},
        index=index,
    )
    df.attrs.update(
        units={"swap_active_users": "count", "transaction_fee_revenue_in_usd": "usd"},
        incomplete=[index[-1]],
        granularity="1_week",
    )
    return df


def at(ax: Axes, when, value: float) -> str:
    """What ``ax`` reads out with the pointer at (``when``, ``value``), in its data coordinates."""
    return ax.format_coord(float(ax.xaxis.convert_units(pd.Timestamp(when))), value)


def test_a_line_reads_out_its_period_series_exact_value_unit_and_completeness():
    df = weekly()
    ax = charts.line_chart(df, ["swap_active_users"], title="t").axes[0]
    assert at(ax, "2025-01-13", 6) == "week of 2025-01-13 · swap active users · 6 count · complete"
    # between two weeks, nearer the second: the second; far above the line: still that week's value
    assert at(ax, "2025-01-19", 100) == "week of 2025-01-20 · swap active users · 7 count · complete"
    assert at(ax, "2025-01-27", 2) == "week of 2025-01-27 · swap active users · 2 count · incomplete"


def test_each_unit_on_its_own_axis_reads_out_its_own_series():
    df = weekly()
    fig = charts.line_chart(df, title="t")
    left, right = fig.axes
    # the week of the 20th: users 7 (the top of the left scale), revenue 3,000.5 (the top of the right)
    # the week of the 13th: users 6 (near the top on the left), revenue 2,000 (the middle on the right)
    assert at(left, "2025-01-13", 6) == "week of 2025-01-13 · swap active users · 6 count · complete"
    assert at(right, "2025-01-13", 2000) == "week of 2025-01-13 · transaction fee revenue · 2,000 USD · complete"
    assert at(right, "2025-01-06", 1500) == "week of 2025-01-06 · transaction fee revenue · 1,500.25 USD · complete"


def test_bars_and_a_stacked_total_read_out_their_own_values():
    df = weekly()
    ax = charts.line_chart(df, ["swap_active_users"], title="t", kind="bar").axes[0]
    assert at(ax, "2025-01-13", 3) == "week of 2025-01-13 · swap active users · 6 count · complete"
    stacked = weekly()[["swap_active_users"]].assign(regular=[1, 2, 3, 1])
    stacked.attrs.update(weekly().attrs, units={"swap_active_users": "count", "regular": "count"})
    ax = charts.stacked_bars(stacked, ["regular"], total="swap_active_users", title="t").axes[0]
    assert at(ax, "2025-01-20", 1) == "week of 2025-01-20 · regular · 3 count · complete"
    assert at(ax, "2025-01-20", 7) == "week of 2025-01-20 · swap active users · 7 count · complete"


def test_a_bridge_step_reads_out_its_change_and_the_totals_it_goes_between():
    fig = charts.bridge(("week 1", 351), {"gone": -256, "new": 190}, "week 2", title="t", unit="count")
    ax = fig.axes[0]
    assert ax.format_coord(0, 100) == "week 1 · 351 count"
    assert ax.format_coord(1, 200) == "gone · -256 count · from 351 count to 95 count"
    assert ax.format_coord(2, 200) == "new · +190 count · from 95 count to 285 count"
    assert ax.format_coord(3, 10) == "week 2 · 285 count"


def test_a_ranking_reads_out_the_bar_pointed_at():
    values = pd.Series({"demoswap": 0.0734, "demolend": 0.12}, name="protocol_take_rate")
    ax = charts.ranking(values, title="t", unit="fraction").axes[0]
    assert ax.format_coord(0.01, 1) == "demolend · protocol take rate · 0.12 share (12.00%)"
    assert ax.format_coord(0.01, 0) == "demoswap · protocol take rate · 0.0734 share (7.34%)"


def test_a_missing_value_reads_out_nothing_of_its_own():
    df = weekly()[["swap_active_users"]].astype("float64")
    df.iloc[1, 0] = math.nan
    ax = charts.line_chart(df, title="t").axes[0]
    assert "2025-01-13" not in at(ax, "2025-01-13", 6)  # a neighbour's value, never "nan"
    assert "nan" not in at(ax, "2025-01-13", 6).lower()


def test_after_a_zoom_only_what_is_in_view_is_read_out():
    df = weekly()
    ax = charts.line_chart(df, ["swap_active_users"], title="t").axes[0]
    x = ax.xaxis.convert_units
    ax.set_xlim(float(x(pd.Timestamp("2025-01-18"))), float(x(pd.Timestamp("2025-01-30"))))
    # the pointer at the left edge is nearer the week of the 13th, which is out of view
    assert at(ax, "2025-01-18", 6).startswith("week of 2025-01-20")


def test_granularity_comes_from_attrs_else_from_the_spacing_of_the_dates():
    df = weekly()
    assert charts.granularity_of(df) == "1_week"
    df.attrs.pop("granularity")
    assert charts.granularity_of(df) == "1_week"
    months = pd.Series([1, 2, 3], index=pd.date_range("2025-01-01", periods=3, freq="MS"))
    assert charts.granularity_of(months) == "1_month"
    assert charts.period_text("2025-02-01", "1_month") == "month of 2025-02"
    assert charts.period_text("2025-02-03", "1_day") == "day 2025-02-03"


def test_exact_values_are_never_rounded():
    assert charts.exact(1_234_567, "count") == "1,234,567 count"
    assert charts.exact(1_234_567.891, "usd") == "1,234,567.891 USD"
    assert charts.exact(2.0, "usd") == "2 USD"
    assert charts.exact(12.5, None) == "12.5"


def test_a_readout_is_across_x_or_y():
    with pytest.raises(ValueError, match="across"):
        pointing.Readout("z")
