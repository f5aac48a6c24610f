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
    # anywhere in a week, from its start up to the next one's, far above the line too: that week
    assert at(ax, "2025-01-19 23:00", 100) == "week of 2025-01-13 · swap active users · 6 count · complete"
    assert at(ax, "2025-01-20", 100) == "week of 2025-01-20 · swap active users · 7 count · complete"
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


def test_a_monthly_line_reads_the_month_the_pointer_is_in_never_the_nearest_point():
    months = pd.Series([100, 200, 300, 400], index=pd.date_range("2025-01-01", periods=4, freq="MS"))
    months.name = "swap_active_users"
    months.attrs.update(unit="count", granularity="1_month", incomplete=[])
    ax = charts.line_chart(months, title="t").axes[0]
    # the 20th and the 31st of January are nearer February's point than January's: January still
    for day in ("2025-01-01", "2025-01-20", "2025-01-31 23:59"):
        assert at(ax, day, 150) == "month of 2025-01 · swap active users · 100 count · complete", day
    assert at(ax, "2025-02-01", 150) == "month of 2025-02 · swap active users · 200 count · complete"
    assert at(ax, "2025-02-28 12:00", 150).startswith("month of 2025-02 ·")  # February's 28 days, not 31
    assert at(ax, "2025-04-30", 150).startswith("month of 2025-04 ·")  # the last month, to its end
    assert at(ax, "2024-12-31", 150) == ""  # before the first period: none


def test_bars_read_the_period_whose_bar_the_pointer_is_over():
    months = pd.DataFrame(
        {"swap_active_users": [100, 200, 300]}, index=pd.date_range("2025-01-01", periods=3, freq="MS")
    )
    months.attrs.update(units={"swap_active_users": "count"}, granularity="1_month", incomplete=["2025-03-01"])
    ax = charts.line_chart(months, title="t", kind="bar").axes[0]
    # bars are centred on their period's start: the left half of February's bar is in late January
    assert at(ax, "2025-01-25", 10) == "month of 2025-02 · swap active users · 200 count · complete"
    assert at(ax, "2025-02-10", 10) == "month of 2025-02 · swap active users · 200 count · complete"
    assert at(ax, "2025-02-20", 10) == "month of 2025-03 · swap active users · 300 count · incomplete"
    (shade,) = [p for p in ax.patches if p.get_label() == "incomplete period"]
    low, high = sorted(shade.get_path().get_extents(shade.get_patch_transform()).intervalx)
    x = ax.xaxis.convert_units
    # the shading is the stretch that reads out March: from halfway through February
    assert (low, high) == (
        pytest.approx(float(x(pd.Timestamp("2025-02-15")))),
        pytest.approx(float(x(pd.Timestamp("2025-03-16 12:00")))),
    )


@pytest.mark.parametrize("kind", ["line", "bar"])
def test_a_period_without_a_value_says_so_and_never_reads_a_neighbour(kind):
    df = weekly()[["swap_active_users"]].astype("float64")
    df.iloc[1, 0] = math.nan
    ax = charts.line_chart(df, title="t", kind=kind).axes[0]
    for y in (0, 6, 100):
        assert at(ax, "2025-01-13", y) == "week of 2025-01-13 · swap active users · no value · complete"
    assert at(ax, "2025-01-20", 6) == "week of 2025-01-20 · swap active users · 7 count · complete"


def test_nullable_integers_with_a_missing_value_are_drawn_and_read_out_exactly():
    counts = pd.Series([5, None, 7, 2**60], index=weekly().index, name="swap_active_users").astype("Int64")
    counts.attrs.update(unit="count", granularity="1_week", incomplete=[])
    assert counts.isna().iloc[1]  # pd.NA, as the client gives a missing count (test_client_exact_counts)
    for kind in ("line", "bar"):
        ax = charts.line_chart(counts, title="t", kind=kind).axes[0]
        assert at(ax, "2025-01-13", 6) == "week of 2025-01-13 · swap active users · no value · complete"
        assert (
            at(ax, "2025-01-27", 2.0**60)
            == "week of 2025-01-27 · swap active users · 1,152,921,504,606,846,976 count · complete"
        )
    frame = pd.DataFrame({"mints": counts, "burns": -counts}, index=counts.index)
    frame.attrs.update(units={"mints": "count", "burns": "count"}, granularity="1_week", incomplete=[])
    ax = charts.stacked_bars(frame, ["mints", "burns"], title="t").axes[0]
    assert at(ax, "2025-01-13", 0) == "week of 2025-01-13 · mints, burns · no value · complete"
    ranked = charts.ranking(
        pd.Series({"a": 3, "b": None, "c": 5}, name="swap_active_users").astype("Int64"), title="t", unit="count"
    ).axes[0]
    assert ranked.format_coord(1, 0) == "b · swap active users · no value"  # at the bottom, written "no value"
    assert ranked.format_coord(1, 2) == "c · swap active users · 5 count"
    with pytest.raises(ValueError, match="gone has none"):
        charts.bridge(("week 1", 351), {"gone": pd.NA, "new": 190}, "week 2", title="t", unit="count")


def test_stacked_bars_draw_the_parts_that_exist_when_one_is_missing():
    months = pd.date_range("2025-01-01", periods=4, freq="MS")
    df = pd.DataFrame(
        {"mints": [5.0, math.nan, 7, 8], "burns": [-1.0, -2, -3, -4], "net": [4.0, math.nan, 4, 4]}, index=months
    )
    df.attrs.update(units=dict.fromkeys(df, "native_token"), granularity="1_month", incomplete=[])
    ax = charts.stacked_bars(df, ["mints", "burns"], total="net", title="t").axes[0]
    mints, burns = ax.containers
    assert [(b.get_y(), b.get_height()) for b in burns] == [(0, -1), (0, -2), (0, -3), (0, -4)]
    assert [b.get_y() for b in mints] == [0, 0, 0, 0]  # a missing part never shifts another period's
    assert at(ax, "2025-02-01", -1) == "month of 2025-02 · burns · -2 tokens · complete"
    assert at(ax, "2025-02-01", 3) == "month of 2025-02 · burns · -2 tokens · complete"  # the part that is drawn
    assert at(ax, "2025-03-01", 3) == "month of 2025-03 · mints · 7 tokens · complete"


@pytest.mark.parametrize("zone", ["UTC", "America/New_York"])
def test_a_time_zone_aware_index_reads_its_incomplete_periods_from_attrs(zone):
    df = weekly()[["swap_active_users"]]
    df.index = df.index.tz_localize("UTC").tz_convert(zone)
    df.attrs.update(weekly().attrs, incomplete=["2025-01-27"])  # naive ISO days, as the client gives them
    assert charts.incomplete_periods(df) == [pd.Timestamp("2025-01-27", tz="UTC").tz_convert(zone)]
    ax = charts.line_chart(df, title="t").axes[0]
    last = pd.Timestamp("2025-01-27", tz="UTC")
    assert at(ax, last, 2) == "week of 2025-01-27 · swap active users · 2 count · incomplete"  # its day in UTC
    assert at(ax, last - pd.Timedelta(hours=1), 7) == "week of 2025-01-20 · swap active users · 7 count · complete"
    assert [p.get_label() for p in ax.patches] == ["incomplete period"]


def test_after_a_zoom_the_pointer_reads_the_period_shown_under_it():
    df = weekly()
    ax = charts.line_chart(df, ["swap_active_users"], title="t").axes[0]
    x = ax.xaxis.convert_units
    ax.set_xlim(float(x(pd.Timestamp("2025-01-22"))), float(x(pd.Timestamp("2025-01-30"))))
    # the view starts inside the week of the 20th, whose point (its start) is out of view
    assert at(ax, "2025-01-22", 6) == "week of 2025-01-20 · swap active users · 7 count · complete"
    ax.set_ylim(100, 200)  # no point in view: the periods under the pointer still read out
    assert at(ax, "2025-01-28", 150) == "week of 2025-01-27 · swap active users · 2 count · incomplete"


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
    assert charts.exact(2**70, "count") == "1,180,591,620,717,411,303,424 count"  # an integer as it is


def test_exact_values_carry_no_float_noise_and_no_exponent():
    assert charts.exact(0.1 + 0.2, "fraction") == "0.3 share (30.00%)"
    assert charts.exact(-0.04954824099999999, "sol") == "-0.049548241 SOL"
    assert charts.exact(1e22, "usd") == "10,000,000,000,000,000,000,000 USD"
    assert charts.exact(float(2**60), "count") == "1,152,921,504,606,850,000 count"
    assert charts.exact(1.5e-7, "native_token") == "0.00000015 tokens"
    assert charts.exact(-0.0, "usd") == "0 USD"
    assert charts.exact(1 / 3, None) == "0.333333333333333"
    for missing in (None, math.nan, pd.NA, pd.NaT):
        assert charts.exact(missing, "count") == "no value"


def test_exact_values_keep_their_first_15_significant_digits():
    import random

    rng = random.Random(30)
    values = [rng.uniform(-1, 1) * 10 ** rng.randint(-12, 20) for _ in range(2000)]
    values += [0.1 * n for n in range(100)] + [2.675, 1.005, 9_007_199_254_740_993.0, 123_456_789.123_456_78]
    for value in values:
        text = charts.exact(value, None)
        assert "e" not in text
        shown = float(text.replace(",", ""))
        assert f"{shown:.15g}" == f"{value:.15g}", (value, text)  # the same 15 digits: none wrong
        assert len(text.replace(",", "").lstrip("-").replace(".", "").strip("0")) <= 15, (value, text)


def test_a_readout_is_across_x_or_y():
    with pytest.raises(ValueError, match="across"):
        pointing.Readout("z")
