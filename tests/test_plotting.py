"""Chart helpers: units from attrs, incomplete periods shaded, captions from the catalogue."""

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from metrics_kit.notebook import charts as plotting  # noqa: E402
from metrics_kit.spec.catalogue import default_catalogue  # noqa: E402


def frame():
    index = pd.DatetimeIndex(pd.date_range("2025-01-06", periods=4, freq="7D"), name="period_start")
    df = pd.DataFrame(
        {"swap_active_users": [5, 6, 7, 2], "transaction_fee_revenue_in_usd": [1.5, 2, 3, 1]}, index=index
    )
    df.attrs.update(
        units={"swap_active_users": "count", "transaction_fee_revenue_in_usd": "usd"}, incomplete=[index[-1]]
    )
    return df


def test_two_units_get_two_labelled_axes_and_the_incomplete_period_is_shaded():
    ax = plotting.line_chart(frame(), title="t")
    assert ax.get_ylabel() == "count"
    twin = [a for a in ax.figure.axes if a is not ax][0]
    assert twin.get_ylabel() == "USD"
    assert "incomplete period" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_three_units_are_refused():
    df = frame().assign(x=1.0)
    df.attrs["units"]["x"] = "sol"
    with pytest.raises(ValueError, match="split it"):
        plotting.line_chart(df, title="t")


def test_every_metric_has_a_caption_from_the_catalogue():
    for metric in default_catalogue():
        assert metric.description in plotting.describe(metric.name)
