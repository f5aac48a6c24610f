"""metrics_kit.notebook.changes: the largest change over complete periods, and signers compared
between two periods, against values worked out by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from metrics_kit.errors import ValidationError
from metrics_kit.notebook import changes

WEEKS = pd.date_range("2025-01-06", periods=5, freq="7D", name="period_start")


def weekly(values, incomplete=()):
    series = pd.Series(values, index=WEEKS[: len(values)], name="swap_active_users")
    series.attrs["incomplete"] = list(incomplete)
    return series


def test_the_largest_change_is_between_two_consecutive_periods_up_or_down():
    # changes: +10, -30, +5, +20: the fall of 30 from the week of 13 Jan to the week of 20 Jan
    before, after = changes.largest_change(weekly([100, 110, 80, 85, 105]))
    assert (before, after) == (pd.Timestamp("2025-01-13"), pd.Timestamp("2025-01-20"))


def test_an_incomplete_last_period_is_never_the_change():
    # the last week is incomplete: its fall of 80 is no collapse; the largest is then +20
    series = weekly([100, 110, 115, 135, 55], incomplete=["2025-02-03"])
    assert changes.largest_change(series) == (pd.Timestamp("2025-01-20"), pd.Timestamp("2025-01-27"))


def test_periods_on_either_side_of_an_incomplete_or_missing_period_are_not_paired():
    # week 3 is missing: 110 -> (nan) -> 200 is not a change of 90; the pairs left are +10 and +1
    series = weekly([100, 110, float("nan"), 200, 201])
    assert changes.largest_change(series) == (pd.Timestamp("2025-01-06"), pd.Timestamp("2025-01-13"))
    # a tie keeps the earliest pair
    assert changes.largest_change(weekly([1, 3, 5])) == (pd.Timestamp("2025-01-06"), pd.Timestamp("2025-01-13"))


def test_fewer_than_two_complete_periods_is_a_clear_error():
    with pytest.raises(ValidationError, match="no two consecutive complete periods.*2 periods, 1 of them complete"):
        changes.largest_change(weekly([100, 40], incomplete=["2025-01-13"]))


def rows(**transactions):
    return pd.DataFrame({"signer": list(transactions), "transactions": list(transactions.values())})


def test_signers_are_new_gone_or_in_both_and_add_up_to_both_values():
    before = rows(alice=3, bob=1, carol=2)
    after = rows(alice=1, carol=6, dave=4, erin=1)
    table = changes.compare_signers(before, after)
    # by the size of the change, then by name: carol +4, dave +4, alice -2, bob -1, erin +1
    assert list(table.index) == ["carol", "dave", "alice", "bob", "erin"]
    assert table.index.name == "signer"
    assert table.loc["carol"].tolist() == [2, 6, 4, "both"]
    assert table.loc["dave"].tolist() == [0, 4, 4, "new"]
    assert table.loc["bob"].tolist() == [1, 0, -1, "gone"]
    assert table[["transactions_before", "transactions_after", "change"]].dtypes.eq("int64").all()
    status = table["status"].value_counts()
    assert status[changes.BOTH] + status[changes.GONE] == len(before)
    assert status[changes.BOTH] + status[changes.NEW] == len(after)
    assert table["change"].sum() == after["transactions"].sum() - before["transactions"].sum()


def test_rows_that_are_not_an_active_users_explain_are_refused():
    transactions = pd.DataFrame({"block_time": [], "tx_id": [], "signer": []})
    with pytest.raises(ValidationError, match="after has no column transactions: give the explain rows of an active"):
        changes.compare_signers(rows(alice=1), transactions)
    with pytest.raises(ValidationError, match="before lists a signer twice"):
        changes.compare_signers(pd.concat([rows(alice=1), rows(alice=2)]), rows(alice=1))
