"""Family helpers: every metric of one family for one project, in one wide DataFrame, with the
derived columns an analyst wants.

    client.dex("swapx", "2025-01-01", "2025-03-31", "1_week")
    families.build(client, "chain_rewards", "solana", "2025-01-01", "2025-01-31")

Which metrics
    The family's metrics come from the catalogue (``catalogue.by_family``), in catalogue order;
    the ones that do not apply to the project are skipped, not failed: the dex family on an
    exchange without regular pools has no ``regular_pool_*``/``double_dip_*`` columns, and the
    yield family on an exchange keeps only the shared ``transaction_fee_revenue_in_usd``. Skipped
    metrics are listed in ``attrs["skipped"]``.

    Applicability comes from the service's project discovery (``GET /projects``) when it offers
    it: the project's kinds and whether it has regular pools decide, before any ``/metrics``
    request, and an unknown project, or a family of which nothing applies to the project, is a
    ValidationError. The specification does not require discovery, so without it the helper
    *probes*: it pulls every metric of the family, and drops a metric when **every** one of its
    points was answered 404 (NotFoundError) — unless the service's error code says the period is
    outside coverage or the project is unknown, which are not reasons to drop a metric. When
    nothing answered at all, the FetchError of that pull is raised. The probing pull stores what
    it got in the cache, so the frame is then read from the cache (with ``cache=False`` the
    applicable metrics are fetched a second time), and its ``attrs["from_cache"]`` counts the
    values the probe has just fetched. ``attrs["applicability"]`` says which way was
    used: ``"discovery"`` or ``"probe"``.

Derived columns
    Each is computed from the fetched columns, and only when all its inputs are among them (so a
    dex without regular pools has no ``regular_pool_swap_share``). The inputs are found in the
    catalogue by family, aggregation and row selection, never by a spelled-out metric name.
    ``attrs["units"]`` gives every column's unit and ``attrs["derived"]`` how each derived column
    is computed. Ratios are float64; a division by zero (no users, no fees) gives NaN, never inf,
    and so does a missing input point (``errors="coerce"``). The fetched columns keep their
    dtypes: counts stay integers.

    tokenomics    ``supply_change``: circulating supply at the end of the period less at the end
                  of the previous one. For the first period of the frame, which has no previous
                  one in it, it is that period's net dilution, which is the same quantity (the
                  supply at a period's end is the previous end plus the period's net dilution).
                  ``net_dilution_share``: net dilution / circulating supply at the period's end.
    yield         ``protocol_take_rate``: protocol transaction fees / all transaction fees.
                  ``staking_per_user``, ``farm_deposits_per_user``: transactions per active user.
    dex           ``swaps_per_user``; ``regular_pool_swap_share``: regular-pool swaps / all swaps
                  (only the exchange with regular pools). No take rate: the service splits a
                  dex's fees by recipient only across every fee type, in the financials family,
                  so the take rate of an exchange is ``financials(...)["protocol_take_rate"]``.
    lending       ``deposits_per_user``, ``withdrawals_per_user``, ``borrows_per_user``,
                  ``repayments_per_user``; ``borrow_to_repay_ratio``: borrow transactions /
                  repayment transactions.
    chain_rewards ``net_rent``: positive rent + negative rent (the negative side is a negative
                  number), i.e. the period's rent netted over every account.
                  ``total_rewards``: staking + mining fee + voting rewards + net rent.
    financials    ``total_revenue_in_usd``: protocol + supply-side revenue.
                  ``protocol_take_rate``: protocol revenue / total revenue (every fee type).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias, TypeVar

import numpy as np
import pandas as pd

from metrics_kit.client.discovery import Projects, listing
from metrics_kit.client.fetching import detached
from metrics_kit.errors import FetchError, NotFoundError, ValidationError
from metrics_kit.spec import ids
from metrics_kit.spec.catalogue import FAMILIES, Catalogue, Metric
from metrics_kit.spec.wire import ErrorCode

Errors = Literal["raise", "coerce"]
Incomplete = Literal["keep", "drop"]
# What a date argument (start, end, date) may be; spec/ids.py's to_date reads each as a UTC date.
DateLike: TypeAlias = str | dt.date | dt.datetime | pd.Timestamp | np.datetime64


class Puller(Protocol):
    """What the family helpers use of a :class:`~metrics_kit.client.client.Client`. A protocol, so
    that this module, which client.py imports for the helpers, never imports client.py."""

    @property
    def catalogue(self) -> Catalogue: ...

    @property
    def cache_enabled(self) -> bool: ...

    def periods(self, start: DateLike, end: DateLike, granularity: str = ..., /) -> list[dt.date]: ...

    def discovery(self) -> Projects | None: ...

    def frame(
        self,
        metrics: str | Iterable[str],
        projects: str | Iterable[str],
        start: DateLike,
        end: DateLike,
        granularity: str = ...,
        /,
        *,
        shape: Literal["wide", "long"] = ...,
        errors: Errors = ...,
        incomplete: Incomplete = ...,
        refresh: bool | None = ...,
        progress: bool | None = ...,
        skip_inapplicable: bool = ...,
    ) -> pd.DataFrame: ...


__all__ = [
    "FAMILIES",
    "Puller",
    "build",
    "chain_rewards",
    "derived_columns",
    "dex",
    "financials",
    "lending",
    "tokenomics",
    "yields",
]

# 404 codes of the reference service that do not mean "this metric does not apply".
_NOT_A_REASON_TO_DROP = frozenset({ErrorCode.DATE_OUT_OF_COVERAGE, ErrorCode.UNKNOWN_PROJECT})


@dataclass(frozen=True)
class _Ref:
    """A metric of a family, found by its aggregation and row selection."""

    aggregation: str
    select: tuple[tuple[str, str], ...] = ()

    def find(self, catalogue: Catalogue, family: str) -> Metric:
        want = {column: (value,) for column, value in self.select}
        found = [m for m in catalogue.by_family(family) if m.aggregation == self.aggregation and dict(m.select) == want]
        if len(found) != 1:  # a catalogue change this module has not followed
            raise LookupError(f"{len(found)} {family} metrics aggregate {self.aggregation} over {want}")
        return found[0]


def _ref(aggregation: str, **select: str) -> _Ref:
    return _Ref(aggregation, tuple(sorted(select.items())))


@dataclass(frozen=True)
class _Derived:
    name: str
    unit: str | None  # None: the unit of the first input
    description: str
    inputs: tuple[_Ref, ...]
    compute: Callable[..., pd.Series]


def _ratio(numerator: pd.Series, denominator: pd.Series) -> pd.Series:
    """numerator / denominator as float64: NaN (never inf) where the denominator is 0 or missing."""
    top, bottom = numerator.astype("float64"), denominator.astype("float64")
    return top / bottom.where(bottom != 0)


def _total(*parts: pd.Series) -> pd.Series:
    out = parts[0].astype("float64")
    for part in parts[1:]:
        out = out + part.astype("float64")
    return out


def _share(part: pd.Series, rest: pd.Series) -> pd.Series:
    """part / (part + rest), as _ratio."""
    return _ratio(part, _total(part, rest))


def _supply_change(supply: pd.Series, net_dilution: pd.Series) -> pd.Series:
    change = supply.astype("float64").diff()
    if len(change):
        change.iloc[0] = float(net_dilution.iloc[0]) if pd.notna(net_dilution.iloc[0]) else float("nan")
    return change


def _users(action: str) -> _Ref:
    return _ref("distinct_count", action=action)


def _txs(action: str, **more: str) -> _Ref:
    return _ref("count", action=action, **more)


_SUPPLY, _DILUTION = _ref("ending_balance"), _ref("net_sum")
_RENT_POSITIVE = _ref("positive_net", reward_type="rent")
_RENT_NEGATIVE = _ref("negative_net", reward_type="rent")
_PROTOCOL_REVENUE = _ref("sum", recipient="protocol")
_SUPPLY_SIDE_REVENUE = _ref("sum", recipient="supply_side")

DERIVED: dict[str, tuple[_Derived, ...]] = {
    "tokenomics": (
        _Derived(
            "supply_change",
            None,
            "circulating supply at the end of the period less at the end of the previous period "
            "(for the first period of the frame: its net dilution, the same quantity)",
            (_SUPPLY, _DILUTION),
            _supply_change,
        ),
        _Derived(
            "net_dilution_share",
            "fraction",
            "net dilution / circulating supply at the end of the period (NaN where the supply is 0)",
            (_DILUTION, _SUPPLY),
            _ratio,
        ),
    ),
    "yield": (
        _Derived(
            "protocol_take_rate",
            "fraction",
            "protocol transaction fee revenue / all transaction fee revenue (NaN where there were no fees)",
            (_ref("sum", fee_type="transaction", recipient="protocol"), _ref("sum", fee_type="transaction")),
            _ratio,
        ),
        _Derived(
            "staking_per_user",
            "transactions_per_user",
            "staking transactions / staking active users (NaN where there were no users)",
            (_txs("stake"), _users("stake")),
            _ratio,
        ),
        _Derived(
            "farm_deposits_per_user",
            "transactions_per_user",
            "farm deposit transactions / farm deposit active users (NaN where there were no users)",
            (_txs("farm_deposit"), _users("farm_deposit")),
            _ratio,
        ),
    ),
    "dex": (
        _Derived(
            "swaps_per_user",
            "transactions_per_user",
            "swap transactions / swap active users (NaN where there were no users)",
            (_txs("swap"), _users("swap")),
            _ratio,
        ),
        _Derived(
            "regular_pool_swap_share",
            "fraction",
            "regular-pool swap transactions / all swap transactions (NaN where there were no swaps)",
            (_txs("swap", pool_type="regular"), _txs("swap")),
            _ratio,
        ),
    ),
    "lending": (
        _Derived(
            "deposits_per_user",
            "transactions_per_user",
            "lending deposit transactions / lending deposit active users (NaN where there were none)",
            (_txs("lending_deposit"), _users("lending_deposit")),
            _ratio,
        ),
        _Derived(
            "withdrawals_per_user",
            "transactions_per_user",
            "lending withdrawal transactions / lending withdrawal active users (NaN where there were none)",
            (_txs("lending_withdraw"), _users("lending_withdraw")),
            _ratio,
        ),
        _Derived(
            "borrows_per_user",
            "transactions_per_user",
            "borrowing transactions / borrowing active users (NaN where there were none)",
            (_txs("borrow"), _users("borrow")),
            _ratio,
        ),
        _Derived(
            "repayments_per_user",
            "transactions_per_user",
            "loan repayment transactions / loan repayment active users (NaN where there were none)",
            (_txs("repay"), _users("repay")),
            _ratio,
        ),
        _Derived(
            "borrow_to_repay_ratio",
            "ratio",
            "borrowing transactions / loan repayment transactions (NaN where there were no repayments)",
            (_txs("borrow"), _txs("repay")),
            _ratio,
        ),
    ),
    "chain_rewards": (
        _Derived(
            "net_rent",
            None,
            "positive rent + negative rent (a negative number): the rent netted over every account",
            (_RENT_POSITIVE, _RENT_NEGATIVE),
            _total,
        ),
        _Derived(
            "total_rewards",
            None,
            "staking + mining fee + voting rewards + net rent",
            (
                _ref("sum", reward_type="staking"),
                _ref("sum", reward_type="fee"),
                _ref("sum", reward_type="voting"),
                _RENT_POSITIVE,
                _RENT_NEGATIVE,
            ),
            _total,
        ),
    ),
    "financials": (
        _Derived(
            "total_revenue_in_usd",
            None,
            "protocol revenue + supply-side revenue",
            (_PROTOCOL_REVENUE, _SUPPLY_SIDE_REVENUE),
            _total,
        ),
        _Derived(
            "protocol_take_rate",
            "fraction",
            "protocol revenue / (protocol + supply-side revenue), every fee type (NaN where there was no revenue)",
            (_PROTOCOL_REVENUE, _SUPPLY_SIDE_REVENUE),
            _share,
        ),
    ),
}


def _family(family: object) -> str:
    if family not in FAMILIES:
        raise ValidationError(f"family must be one of {', '.join(FAMILIES)}, not {family!r}", "family")
    return str(family)


def derived_columns(frame: pd.DataFrame, family: str, catalogue: Catalogue) -> pd.DataFrame:
    """Add ``family``'s derived columns to a one-project wide frame, where their inputs are present;
    their units go to ``attrs["units"]`` and their formulas to ``attrs["derived"]``."""
    family = _family(family)
    units = dict(frame.attrs.get("units", {}))
    described = dict(frame.attrs.get("derived", {}))
    added = {}
    for derived in DERIVED[family]:
        metrics = [ref.find(catalogue, family) for ref in derived.inputs]
        if not all(m.name in frame.columns for m in metrics):
            continue
        added[derived.name] = derived.compute(*(frame[m.name] for m in metrics))
        units[derived.name] = derived.unit or metrics[0].unit
        described[derived.name] = derived.description
    out = frame.assign(**added) if added else frame.copy()
    out.attrs.update(frame.attrs)
    out.attrs.update(units=units, derived=described)
    return out


def build(
    client: Puller,
    family: str,
    project: str,
    start: DateLike,
    end: DateLike,
    granularity: str = "1_day",
    *,
    errors: Errors = "raise",
    incomplete: Incomplete = "keep",
    refresh: bool | None = None,
    progress: bool | None = None,
) -> pd.DataFrame:
    """Every metric of ``family`` that applies to ``project``, one wide column each on a
    DatetimeIndex of period starts, plus the family's derived columns (see ``metrics_kit.client.families``).

    ``granularity``: 1_day, 1_week, 1_month (or day, week, month). ``errors``: "raise" (a
    FetchError listing every failed point) or "coerce" (NaN/<NA> for them and a PartialDataWarning).
    ``incomplete``: "keep" or "drop" the periods that are not complete. ``refresh``: fetch again,
    ignoring the cache. ``progress``: a progress bar (None: from 100 points).
    ``attrs`` (JSON): units, derived, skipped, applicability, family, project, granularity,
    incomplete, from_cache, fetched (and failed, with errors="coerce")."""
    family = _family(family)
    if not isinstance(project, str):
        raise ValidationError(f"project must be one project id (a string), not {type(project).__name__}", "project")
    ids.check_project(project)  # every argument is checked before the first request
    client.periods(start, end, granularity)
    pull = _Pull(project, start, end, granularity, errors, incomplete, refresh, progress)
    metrics = client.catalogue.by_family(family)
    # Raised from here, without the frames that held the service's list (its words, unmasked).
    applicable = detached(_applicable, client, family, metrics, project)
    if applicable is not None:
        chosen, skipped = applicable
        wide, how = pull.frame(client, chosen, skip_inapplicable=True), "discovery"
    else:
        (wide, skipped), how = _by_probing(client, metrics, pull), "probe"
    wide = derived_columns(wide, family, client.catalogue)
    wide.attrs.update(family=family, project=project, skipped=skipped, applicability=how)
    return wide


@dataclass(frozen=True)
class _Pull:
    """What a family helper was asked for, passed on to ``Client.frame``."""

    project: str
    start: DateLike
    end: DateLike
    granularity: str
    errors: Errors
    incomplete: Incomplete
    refresh: bool | None
    progress: bool | None

    def frame(self, client: Puller, metrics: list[str], **override: Any) -> pd.DataFrame:
        options: dict[str, Any] = {
            "errors": self.errors,
            "incomplete": self.incomplete,
            "refresh": self.refresh,
            "progress": self.progress,
            **override,
        }
        return client.frame(metrics, self.project, self.start, self.end, self.granularity, shape="wide", **options)


def _applicable(
    client: Puller, family: str, metrics: Sequence[Metric], project: str
) -> tuple[list[str], list[str]] | None:
    """The family's metrics that apply to ``project`` and those that do not, by the service's project
    discovery; None when it offers none. Its words go into a message masked, as the client's own
    checks put them (``Projects.known``)."""
    found = client.discovery()
    if found is None:
        return None
    projects = listing(found)
    info = projects.known(project)
    kinds, regular_pools = info["kinds"], info.get("regular_pools", False)
    chosen = [m.name for m in metrics if m.applies_to(kinds, regular_pools)]
    if not chosen:
        raise ValidationError(
            f"no {family} metric applies to {project} (of kind {projects.shown(kinds)}); "
            f"they apply to {_kinds_of(metrics)}",
            "family",
        )
    return chosen, [m.name for m in metrics if m.name not in chosen]


def _by_probing(client: Puller, metrics: Sequence[Metric], pull: _Pull) -> tuple[pd.DataFrame, list[str]]:
    names = [m.name for m in metrics]
    try:
        return pull.frame(client, names, errors="raise"), []
    except FetchError as error:
        probe_error = error
    periods = len(client.periods(pull.start, pull.end, pull.granularity))
    skipped = [
        name
        for name in names
        if periods == sum(_not_applicable(e) for p, e in probe_error.failures.items() if p.metric == name)
    ]
    kept = [name for name in names if name not in skipped]
    if not kept:
        raise probe_error
    # the probe has just stored every value it got: read them back from the cache
    return pull.frame(client, kept, **({"refresh": False} if client.cache_enabled else {})), skipped


def _not_applicable(error: BaseException) -> bool:
    return isinstance(error, NotFoundError) and error.code not in _NOT_A_REASON_TO_DROP


def _kinds_of(metrics: Sequence[Metric]) -> str:
    return " or ".join(sorted({k for m in metrics for k in m.kinds}))


Helper = TypeVar("Helper", bound=Callable[..., pd.DataFrame])


def _options_documented(helper: Helper) -> Helper:
    """A family helper, its docstring followed by build's, which says what the options do (the
    helper's signature is build's less ``family``; tests/unit/test_client_signatures.py checks that)."""
    helper.__doc__ = (helper.__doc__ or "") + "\n\n" + (build.__doc__ or "").split("\n\n", 1)[1]
    return helper


def _frame_of(
    client: Puller,
    family: str,
    project: str,
    start: DateLike,
    end: DateLike,
    granularity: str,
    errors: Errors,
    incomplete: Incomplete,
    refresh: bool | None,
    progress: bool | None,
) -> pd.DataFrame:
    """What every family helper does: build with its family filled in (each argument passed on)."""
    return build(
        client,
        family,
        project,
        start,
        end,
        granularity,
        errors=errors,
        incomplete=incomplete,
        refresh=refresh,
        progress=progress,
    )


@_options_documented
def tokenomics(
    client: Puller,
    project: str,
    start: DateLike,
    end: DateLike,
    granularity: str = "1_day",
    *,
    errors: Errors = "raise",
    incomplete: Incomplete = "keep",
    refresh: bool | None = None,
    progress: bool | None = None,
) -> pd.DataFrame:
    """The tokenomics metrics of ``project`` in one wide frame, with supply_change and net_dilution_share."""
    return _frame_of(client, "tokenomics", project, start, end, granularity, errors, incomplete, refresh, progress)


@_options_documented
def yields(
    client: Puller,
    project: str,
    start: DateLike,
    end: DateLike,
    granularity: str = "1_day",
    *,
    errors: Errors = "raise",
    incomplete: Incomplete = "keep",
    refresh: bool | None = None,
    progress: bool | None = None,
) -> pd.DataFrame:
    """The yield metrics that apply to ``project`` in one wide frame, with protocol_take_rate, staking_per_user
    and farm_deposits_per_user (named ``yields``: ``yield`` is a Python keyword)."""
    return _frame_of(client, "yield", project, start, end, granularity, errors, incomplete, refresh, progress)


@_options_documented
def dex(
    client: Puller,
    project: str,
    start: DateLike,
    end: DateLike,
    granularity: str = "1_day",
    *,
    errors: Errors = "raise",
    incomplete: Incomplete = "keep",
    refresh: bool | None = None,
    progress: bool | None = None,
) -> pd.DataFrame:
    """The exchange metrics that apply to ``project`` in one wide frame, with swaps_per_user and, with
    regular pools, regular_pool_swap_share."""
    return _frame_of(client, "dex", project, start, end, granularity, errors, incomplete, refresh, progress)


@_options_documented
def lending(
    client: Puller,
    project: str,
    start: DateLike,
    end: DateLike,
    granularity: str = "1_day",
    *,
    errors: Errors = "raise",
    incomplete: Incomplete = "keep",
    refresh: bool | None = None,
    progress: bool | None = None,
) -> pd.DataFrame:
    """The lending metrics of ``project`` in one wide frame, with transactions per user and
    borrow_to_repay_ratio."""
    return _frame_of(client, "lending", project, start, end, granularity, errors, incomplete, refresh, progress)


@_options_documented
def chain_rewards(
    client: Puller,
    project: str,
    start: DateLike,
    end: DateLike,
    granularity: str = "1_day",
    *,
    errors: Errors = "raise",
    incomplete: Incomplete = "keep",
    refresh: bool | None = None,
    progress: bool | None = None,
) -> pd.DataFrame:
    """The chain reward metrics of ``project`` in one wide frame, with net_rent and total_rewards."""
    return _frame_of(client, "chain_rewards", project, start, end, granularity, errors, incomplete, refresh, progress)


@_options_documented
def financials(
    client: Puller,
    project: str,
    start: DateLike,
    end: DateLike,
    granularity: str = "1_day",
    *,
    errors: Errors = "raise",
    incomplete: Incomplete = "keep",
    refresh: bool | None = None,
    progress: bool | None = None,
) -> pd.DataFrame:
    """The financial metrics of ``project`` in one wide frame, with total_revenue_in_usd and
    protocol_take_rate."""
    return _frame_of(client, "financials", project, start, end, granularity, errors, incomplete, refresh, progress)
