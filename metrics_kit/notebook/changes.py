"""A change between two periods, explained: where a series changed most, and which signers made it.

``largest_change(series)`` finds the two consecutive *complete* periods with the largest change
between them: a period that is not complete (the last week of the data, three days long) is never
one of them, so that a partial period never reads as a collapse. ``compare_signers(before, after)``
lines up the explain rows of an active-users value (``client.explain``: one row per signer with
its transactions) of two periods, signer by signer: who is new, who is gone, who is in both, and
how many transactions each gained or lost.

For example::

    before, after = changes.largest_change(client.series("swap_active_users", "demoswap", start, end, "1_week"))
    signers = changes.compare_signers(client.explain("swap_active_users", "demoswap", "1_week", before),
                                      client.explain("swap_active_users", "demoswap", "1_week", after))
"""

from __future__ import annotations

import pandas as pd

from metrics_kit.errors import ValidationError

NEW, GONE, BOTH = "new", "gone", "both"
_SIGNER_COLUMNS = ("signer", "transactions")


def largest_change(series: pd.Series) -> tuple[pd.Timestamp, pd.Timestamp]:
    """The starts of the two consecutive complete periods of ``series`` between which its value
    changed most (up or down; the earliest such pair on a tie). A period listed in
    ``attrs["incomplete"]`` or without a value is in no pair, and neither are periods on either
    side of it."""
    incomplete = {pd.Timestamp(t) for t in series.attrs.get("incomplete", [])}
    values = series.sort_index()
    usable = [t not in incomplete and pd.notna(v) for t, v in values.items()]
    best: tuple[float, int] | None = None
    for i in range(1, len(values)):
        if usable[i - 1] and usable[i]:
            change = abs(float(values.iloc[i]) - float(values.iloc[i - 1]))
            if best is None or change > best[0]:
                best = (change, i)
    if best is None:
        raise ValidationError(
            f"{series.name or 'the series'} has no two consecutive complete periods with values "
            f"(it has {len(values)} periods, {sum(usable)} of them complete with a value): "
            "widen start and end, or choose a finer granularity",
            argument="series",
        )
    i = best[1]
    return pd.Timestamp(values.index[i - 1]), pd.Timestamp(values.index[i])


def compare_signers(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """One row per signer of either period, indexed by ``signer``: ``transactions_before``,
    ``transactions_after`` (0 where the signer has no row), ``change`` (after minus before) and
    ``status``: ``"new"`` (a row in ``after`` only), ``"gone"`` (in ``before`` only) or ``"both"``.
    Ordered by the size of the change, largest first, then by signer, so the order is the same on
    every call. ``before`` and ``after`` are ``client.explain`` rows of an active-users metric."""
    for name, rows in (("before", before), ("after", after)):
        missing = [c for c in _SIGNER_COLUMNS if c not in rows.columns]
        if missing:
            raise ValidationError(
                f"{name} has no column {', '.join(missing)}: give the explain rows of an active-users "
                f"metric (one row per signer with its transactions); its columns are {list(rows.columns)}",
                argument=name,
            )
        if rows["signer"].duplicated().any():
            raise ValidationError(f"{name} lists a signer twice: give the explain rows of one value", argument=name)
    counts = pd.concat(
        {
            "transactions_before": before.set_index("signer")["transactions"],
            "transactions_after": after.set_index("signer")["transactions"],
        },
        axis=1,
    )
    status = pd.Series(BOTH, index=counts.index, dtype="object")
    status[counts["transactions_before"].isna()] = NEW
    status[counts["transactions_after"].isna()] = GONE
    counts = counts.fillna(0).astype("int64")
    table = counts.assign(change=counts["transactions_after"] - counts["transactions_before"], status=status)
    table.index.name = "signer"
    table = table.sort_index(kind="stable")
    return table.iloc[(-table["change"].abs()).to_numpy().argsort(kind="stable")]
