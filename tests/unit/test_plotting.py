"""metrics_kit.notebook.charts: what is drawn (the Axes' data, labels and ticks), and how it looks
(image comparisons with a tolerance against the baselines in tests/notebooks/baseline/)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import matplotlib
import matplotlib.dates as mdates
import pandas as pd
import pytest
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.testing.compare import compare_images
from packaging.version import Version

from metrics_kit.notebook import charts
from metrics_kit.spec.catalogue import default_catalogue

BASELINES = Path(__file__).resolve().parents[1] / "notebooks" / "baseline"
TOLERANCE = 2.0  # RMS over 0-255 pixel values: fonts may antialias a little differently
# The matplotlib the baselines were drawn with: an older one (make test-lowest) lays charts out a few
# pixels apart, so there the comparison is skipped; a newer one that differs means: redraw them.
DRAWN_WITH = "3.11.2"
UPDATE = "UPDATE_CHART_BASELINES"  # set to 1 to write new baselines (then look at them)


def frame() -> pd.DataFrame:
    index = pd.DatetimeIndex(pd.date_range("2025-01-06", periods=4, freq="7D"), name="period_start")
    df = pd.DataFrame(
        {"swap_active_users": [5, 6, 7, 2], "transaction_fee_revenue_in_usd": [1500.0, 2000, 3000, 1000]}, index=index
    )
    df.attrs.update(
        units={"swap_active_users": "count", "transaction_fee_revenue_in_usd": "usd"}, incomplete=[index[-1]]
    )
    return df


def family() -> pd.DataFrame:
    index = pd.DatetimeIndex(pd.date_range("2025-01-06", periods=6, freq="7D"), name="period_start")
    df = pd.DataFrame(
        {
            "protocol_revenue_in_usd": [52_000.0, 48_500, 50_100, 61_000, 58_200, 20_000],
            "supply_side_revenue_in_usd": [350_000.0, 331_000, 342_000, 415_000, 398_000, 140_000],
            "swap_transaction_count": [560, 540, 480, 610, 600, 210],
            "protocol_take_rate": [0.1266, 0.1278, 0.1271, 0.1282, 0.1275, 0.1276],
        },
        index=index,
    )
    df.attrs.update(
        units={
            "protocol_revenue_in_usd": "usd",
            "supply_side_revenue_in_usd": "usd",
            "swap_transaction_count": "count",
            "protocol_take_rate": "fraction",
        },
        incomplete=[index[-1]],
        family="financials",
        project="demoswap",
    )
    return df


def _ticks(axis) -> list[str]:
    axis.figure.draw_without_rendering()  # tick labels exist once drawn
    return [t.get_text() for t in axis.get_yticklabels() if t.get_text()]


def _legend(ax) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


# -- what is drawn ---------------------------------------------------------------------------------


def _drawn(line) -> tuple[str, list[str], list[float | None]]:
    """A Line2D as (linestyle, ISO dates, values with None for a gap)."""
    dates = [pd.Timestamp(x).date().isoformat() for x in line.get_xdata()]
    values = [None if pd.isna(y) else float(y) for y in line.get_ydata()]
    return line.get_linestyle(), dates, values


def _series(ax) -> dict[str, list[tuple[str, list[str], list[float | None]]]]:
    """Each colour's lines on ``ax``, as :func:`_drawn` gives them."""
    by_colour: dict[str, list] = {}
    for line in ax.get_lines():
        by_colour.setdefault(line.get_color(), []).append(_drawn(line))
    return by_colour


WEEKS = ["2025-01-06", "2025-01-13", "2025-01-20", "2025-01-27"]


def test_two_units_get_two_labelled_axes_with_their_data_and_the_incomplete_period_is_shaded():
    fig = charts.line_chart(frame(), title="Users and fees")
    assert isinstance(fig, Figure)
    ax, twin = fig.axes
    assert (ax.get_ylabel(), twin.get_ylabel()) == ("count", "USD")
    # both axes' series solid up to the last complete week, dashed into the incomplete one
    assert _series(ax) == {"C0": [("-", WEEKS, [5, 6, 7, None]), ("--", WEEKS[2:], [7, 2])]}
    assert _series(twin) == {"C1": [("-", WEEKS, [1500, 2000, 3000, None]), ("--", WEEKS[2:], [3000, 1000])]}
    assert _legend(ax) == ["swap active users", "transaction fee revenue (right)", "incomplete period"]
    assert [p.get_x() for p in ax.patches] == [pytest.approx(mdates.date2num(pd.Timestamp(WEEKS[-1])))]
    assert ax.get_title(loc="left") == "Users and fees"


def test_the_segment_into_a_partial_last_period_is_dashed_in_the_series_colour():
    series = frame()["swap_active_users"]
    series.attrs = {"unit": "count", "incomplete": ["2025-01-27"]}  # as client.series gives them
    ax = charts.line_chart(series, title="t").axes[0]
    (solid, dashed) = ax.get_lines()
    assert _drawn(solid) == ("-", WEEKS, [5, 6, 7, None])
    assert _drawn(dashed) == ("--", ["2025-01-20", "2025-01-27"], [7, 2])
    assert solid.get_color() == dashed.get_color() and solid.get_linewidth() == dashed.get_linewidth()
    assert _legend(ax) == ["swap active users", "incomplete period"]  # one entry per series
    keys = [(line.get_linestyle(), line.get_color()) for line in ax.get_legend().findobj(Line2D)]
    assert ("--", "grey") in keys  # the key of "incomplete period" shows the dashes, over the shading


def test_the_segment_out_of_a_partial_first_period_is_dashed():
    # coverage starting mid-week: the first week is partial
    series = frame()["swap_active_users"]
    series.attrs = {"unit": "count", "incomplete": ["2025-01-06"]}
    ax = charts.line_chart(series, title="t").axes[0]
    assert _series(ax) == {"C0": [("-", WEEKS, [None, 6, 7, 2]), ("--", WEEKS[:2], [5, 6])]}


def test_segments_between_incomplete_periods_are_dashed_and_complete_ones_between_them_solid():
    index = pd.DatetimeIndex(pd.date_range("2025-01-06", periods=6, freq="7D"), name="period_start")
    series = pd.Series([1.0, 2, 3, 4, 5, 6], index=index, name="swap_active_users")
    series.attrs = {"unit": "count", "incomplete": ["2025-01-06", "2025-01-27", "2025-02-03", "2025-02-10"]}
    ax = charts.line_chart(series, title="t").axes[0]
    dates = [d.date().isoformat() for d in index]
    # solid 2-3 only; dashed 1-2, then (apart, a gap) 3-4-5-6
    assert _series(ax) == {
        "C0": [
            ("-", dates, [None, 2, 3, None, None, None]),
            ("--", [*dates[:2], dates[2], *dates[2:]], [1, 2, None, 3, 4, 5, 6]),
        ]
    }


def test_a_series_with_no_incomplete_period_is_one_solid_line():
    series = frame()["swap_active_users"]
    series.attrs = {"unit": "count", "incomplete": []}
    ax = charts.line_chart(series, title="t").axes[0]
    assert _series(ax) == {"C0": [("-", WEEKS, [5, 6, 7, 2])]}
    assert _legend(ax) == ["swap active users"] and not ax.patches


def test_incomplete_periods_outside_the_frame_are_ignored():
    series = frame()["swap_active_users"]
    series.attrs = {"unit": "count", "incomplete": ["2025-02-03"]}  # dropped, or another window's
    assert _series(charts.line_chart(series, title="t").axes[0]) == {"C0": [("-", WEEKS, [5, 6, 7, 2])]}


def test_family_chart_dashes_the_last_segment_of_every_series_in_every_panel():
    fig = charts.family_chart(family())
    weeks = [d.date().isoformat() for d in family().index]
    usd, count, share = fig.axes
    assert _series(usd) == {
        "C0": [
            ("-", weeks, [52_000, 48_500, 50_100, 61_000, 58_200, None]),
            ("--", weeks[-2:], [58_200, 20_000]),
        ],
        "C1": [
            ("-", weeks, [350_000, 331_000, 342_000, 415_000, 398_000, None]),
            ("--", weeks[-2:], [398_000, 140_000]),
        ],
    }
    assert _series(count) == {"C0": [("-", weeks, [560, 540, 480, 610, 600, None]), ("--", weeks[-2:], [600, 210])]}
    assert [style for style, *_ in _series(share)["C0"]] == ["-", "--"]
    assert [_legend(ax) for ax in fig.axes] == [
        ["protocol revenue", "supply side revenue", "incomplete period"],
        ["swap transaction count", "incomplete period"],
        ["protocol take rate", "incomplete period"],
    ]


def test_bars_of_an_incomplete_period_are_hatched_and_lighter():
    ax = charts.line_chart(frame(), ["swap_active_users"], kind="bar", title="t").axes[0]
    bars = [p for p in ax.patches if p.get_label() != "incomplete period" and p.get_width() < 7]
    assert [b.get_height() for b in bars] == [5, 6, 7, 2]
    assert [bool(b.get_hatch()) for b in bars] == [False, False, False, True]
    assert bars[-1].get_alpha() < bars[0].get_alpha()
    stacked = charts.stacked_bars(
        family(), ["supply_side_revenue_in_usd", "protocol_revenue_in_usd"], total="protocol_revenue_in_usd", title="t"
    ).axes[0]
    for bars in stacked.containers:
        assert [bool(b.get_hatch()) for b in bars] == [False] * 5 + [True]
    (shade,) = [p for p in stacked.patches if p.get_label() == "incomplete period"]
    low, high = sorted(shade.get_path().get_extents(shade.get_patch_transform()).intervalx)
    last = stacked.containers[0][-1]  # centred on the last week's start: the shading covers it
    assert low <= last.get_x() and last.get_x() + last.get_width() <= high
    keys = [patch.get_hatch() for patch in stacked.get_legend().findobj(Rectangle)]
    assert "///" in keys  # the key of "incomplete period" shows the hatching
    total = [_drawn(line)[0] for line in stacked.get_lines() if "protocol revenue" in line.get_label()]
    assert total == ["-", "--"]  # the total's line too


def test_labels_are_words_from_the_catalogue_never_raw_ids():
    assert charts.label("transaction_fee_revenue_in_usd") == "transaction fee revenue"
    assert charts.label("circulating_supply_in_native_token") == "circulating supply"
    assert charts.label("reward_staking_in_sol") == "reward staking"
    assert charts.label("net_dilution_share") == "net dilution share"  # derived columns too
    for metric in default_catalogue():
        assert "_" not in charts.label(metric.name)


def test_percent_ticks_keep_the_decimals_a_narrow_range_needs():
    # a take rate between 12.66% and 12.82%: whole percents would all read "13%"
    fig = charts.line_chart(family(), ["protocol_take_rate"], title="t")
    ticks = _ticks(fig.axes[0])
    assert len(set(ticks)) == len(ticks) > 2, ticks
    assert all(t.endswith("%") for t in ticks) and any("." in t for t in ticks), ticks


def test_usd_ticks_read_as_dollars_and_are_not_mathtext():
    fig = charts.line_chart(family(), ["protocol_revenue_in_usd"], title="Revenue, in $")
    fig.draw_without_rendering()
    shown = [t._preprocess_math(t.get_text()) for t in fig.axes[0].get_yticklabels() if t.get_text()]
    assert shown and not any(is_math for _, is_math in shown), "a dollar sign started mathtext"
    texts = [text for text, _ in shown]
    assert all(t.startswith(("$", "−$")) for t in texts) and any(t.endswith(" k") for t in texts), texts


def test_count_ticks_are_whole_and_small_amounts_have_no_milli_prefix():
    assert all(
        float(t.replace(",", "")) == int(float(t.replace(",", "")))
        for t in _ticks(charts.line_chart(frame(), ["swap_active_users"], title="t").axes[0])
    )
    assert charts.formatter("sol")(0.1) == "0.1" and charts.formatter("native_token")(162_500_000) == "162.5 M"
    assert charts.amount(1_234_567, "usd") == "$1.2 M" and charts.amount(0.1234, "fraction") == "12.3%"


def test_counts_in_text_are_whole_numbers():
    assert charts.amount(4.0, "count") == "4" and charts.amount(-256, "count") == "-256"
    assert charts.amount(1_500, "count") == "1.5 k" and charts.amount(2.5, "count") == "2.5"


def test_a_bridge_goes_from_the_first_value_to_the_last_by_its_steps():
    fig = charts.bridge(("week 1", 351), {"gone": -256, "new": 190}, "week 2", title="t", unit="count")
    ax = fig.axes[0]
    bars = [p for p in ax.patches if isinstance(p, Rectangle)]
    # 351, then down 256 to 95 (a bar from 95 to 351), up 190 to 285 (from 95 to 285), then 285
    assert [(b.get_y(), b.get_height()) for b in bars] == [(0, 351), (95, 256), (95, 190), (0, 285)]
    assert [t.get_text() for t in ax.texts] == ["351", "-256", "+190", "285"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["week 1", "gone", "new", "week 2"]
    assert bars[1].get_facecolor() != bars[2].get_facecolor()  # down and up look different
    assert [line.get_ydata()[0] for line in ax.lines] == [351, 95, 285]  # each bar's end to the next


def test_takeaways_keep_dollars_as_dollars():
    assert charts.escape_markdown("from $1.2 M to $3 M") == r"from \$1.2 M to \$3 M"
    assert charts.takeaway("$5 and $6").data == r"**Takeaway:** \$5 and \$6"


def test_family_chart_keeps_each_unit_on_its_own_axis():
    fig = charts.family_chart(family())
    assert [ax.get_ylabel() for ax in fig.axes] == ["USD", "count", "share"]
    usd, count, share = fig.axes
    named = [line.get_label() for line in usd.get_lines() if not line.get_label().startswith("_")]
    assert named == ["protocol revenue", "supply side revenue"]
    assert list(count.get_lines()[0].get_ydata())[:5] == [560, 540, 480, 610, 600]  # the last: dashed
    assert usd.get_title(loc="left") == "Financials metrics, demoswap"


def test_bars_are_not_clipped():
    fig = charts.stacked_bars(family(), ["supply_side_revenue_in_usd", "protocol_revenue_in_usd"], title="t")
    ax = fig.axes[0]
    tops = [patch.get_y() + patch.get_height() for patch in ax.patches if patch.get_height() > 0]
    assert max(tops) == pytest.approx(415_000 + 61_000) and ax.get_ylim()[1] > max(tops)
    charts.png(fig)  # laid out and drawn as shown
    renderer = fig.canvas.get_renderer()
    inside = fig.bbox.expanded(1.001, 1.001)
    low, high = ax.get_ylim()
    ticks = [t for t in ax.get_yticklabels() if low <= t.get_position()[1] <= high]  # the ones drawn
    for artist in (ax._left_title, ax.get_legend(), ax.xaxis.label, ax.yaxis.label, *ticks):
        box = artist.get_window_extent(renderer)
        assert box.width == 0 or inside.contains(box.x0, box.y0) and inside.contains(box.x1, box.y1), artist


def test_three_units_in_one_line_chart_are_refused():
    with pytest.raises(ValueError, match="split it"):
        charts.line_chart(
            family(), ["protocol_revenue_in_usd", "swap_transaction_count", "protocol_take_rate"], title="t"
        )


def test_every_metric_has_a_caption_from_the_catalogue():
    for metric in default_catalogue():
        assert metric.description in charts.describe(metric.name)


def test_titles_read_the_same_way():
    assert charts.title("swap active users", "demoswap", granularity="1_week", synthetic=True) == (
        "Swap active users per week, demoswap (synthetic demo data)"
    )


def test_figures_drawn_from_threads_at_once_are_each_complete():
    # a control's redraw runs on a kernel thread while the main thread may draw too
    pictures: dict[int, bytes] = {}

    def draw(n: int) -> None:
        data = frame().assign(swap_active_users=[n, n + 1, n + 2, n + 3])
        pictures[n] = charts.png(charts.line_chart(data, ["swap_active_users"], title=f"chart {n}"))

    threads = [threading.Thread(target=draw, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(pictures) == list(range(6))
    assert len(set(pictures.values())) == 6 and all(p.startswith(b"\x89PNG") for p in pictures.values())


# -- how it looks ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, draw",
    [
        (
            "line_two_units",
            lambda: charts.line_chart(frame(), title="Users and fees per week, demo (synthetic demo data)"),
        ),
        ("family_financials", lambda: charts.family_chart(family())),
        (
            "stacked_revenue",
            lambda: charts.stacked_bars(
                family(),
                ["supply_side_revenue_in_usd", "protocol_revenue_in_usd"],
                total=None,
                title="Revenue by recipient",
            ),
        ),
        (
            "ranking_take_rate",
            lambda: charts.ranking(
                family()["protocol_take_rate"].iloc[:3].set_axis(["a", "b", "c"]), title="Take rate", unit="fraction"
            ),
        ),
    ],
)
def test_chart_matches_its_baseline(name, draw, tmp_path):
    if Version(matplotlib.__version__) < Version(DRAWN_WITH):
        pytest.skip(f"the baselines were drawn with matplotlib {DRAWN_WITH}, this is {matplotlib.__version__}")
    actual = tmp_path / f"{name}.png"
    actual.write_bytes(charts.png(draw()))
    baseline = BASELINES / f"{name}.png"
    if os.environ.get(UPDATE) == "1":
        BASELINES.mkdir(parents=True, exist_ok=True)
        baseline.write_bytes(actual.read_bytes())
    assert baseline.is_file(), f"no baseline {baseline}: run with {UPDATE}=1 and look at the picture"
    difference = compare_images(str(baseline), str(actual), tol=TOLERANCE)
    assert difference is None, difference


def test_an_image_comparison_can_fail(tmp_path):
    """The comparison above is not vacuous: a chart with other data does not match."""
    other = frame().assign(swap_active_users=[1, 9, 1, 9])
    actual = tmp_path / "other.png"
    actual.write_bytes(
        charts.png(charts.line_chart(other, title="Users and fees per week, demo (synthetic demo data)"))
    )
    assert compare_images(str(BASELINES / "line_two_units.png"), str(actual), tol=TOLERANCE) is not None
