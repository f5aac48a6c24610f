"""One-line functions on a default client, for notebooks: ``metrics_kit.series(...)`` and friends.

The default client is made on first use from the environment (``METRICS_KIT_BASE_URL``,
``METRICS_KIT_API_KEY``, ``METRICS_KIT_CACHE_DIR``), else it is the embedded reference service, and
it follows that environment: when any of those variables changes, the next call makes a new default
client from them (closing the old one, even when none can be made from them: the error says what is
missing). ``configure(...)`` replaces it with one built from what it was given, on top of what
earlier calls gave it: it changes only what it is given (``configure(workers=3)`` after
``configure(base_url=..., api_key=...)`` keeps that service), and closes the old one too; a base URL
or transport configured is kept whatever the environment says. A closed client raises
ClientClosedError if used through a reference held to it: it never answers from the new service,
nor from any other. Use ``Client`` directly to hold several.

Each function is the Client method of the same name, on the default client: written out with the
method's parameters and annotations (so a type checker sees them), and given the method's docstring;
tests/unit/test_client_signatures.py checks that each signature is the method's, less ``self``.
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import inspect
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any, Literal, ParamSpec, TypedDict, TypeVar

import pandas as pd

from metrics_kit.client import explain as explaining
from metrics_kit.client import options
from metrics_kit.client.client import Client, Names, Shape, close_as
from metrics_kit.client.families import DateLike, Errors, Incomplete
from metrics_kit.client.settings import API_KEY_ENV, BASE_URL_ENV, Secret, address, shown_service
from metrics_kit.client.transports import Transport
from metrics_kit.errors import ConfigurationError
from metrics_kit.files import CACHE_DIR_ENV

__all__ = [
    "catalogue",
    "chain_rewards",
    "clear_cache",
    "configure",
    "default_client",
    "dex",
    "explain",
    "financials",
    "frame",
    "lending",
    "metrics",
    "projects",
    "series",
    "tokenomics",
    "value",
    "yields",
]

_lock = threading.Lock()
_default: Client | None = None
_made_from: tuple[str, ...] | None = None  # the environment the default was made under (None: not from it)
_arguments: dict[str, Any] = {}  # the settings configure() was given, to make the default again from
# Everything configure() was given so far (the key as a Secret): what the next configure() changes.
_configured: dict[str, Any] = {}
# The service's part of it: given as a whole, except a key alone, which changes the configured service's key.
_SERVICE = ("base_url", "api_key", "transport")
# The names of the arguments the running configure() call was given (see _knows_what_it_is_given).
_given: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar("metrics_kit_configure_given")


def _environment() -> tuple[str, ...]:
    """What of the environment decides the default client: the base URL, a digest of the key (never
    the key itself), the cache folder."""
    key = os.environ.get(API_KEY_ENV) or ""
    digest = hashlib.sha256(b"metrics-kit environment\x00" + key.encode()).hexdigest() if key else ""
    # The base URL as an Address: it may be a key set in the wrong variable, and the tuple is a local
    # of default_client() (a verbose traceback shows it); its repr masks it.
    return (address(os.environ.get(BASE_URL_ENV) or ""), digest, os.environ.get(CACHE_DIR_ENV) or "")


Function = TypeVar("Function", bound=Callable[..., Any])
Parameters = ParamSpec("Parameters")


def _knows_what_it_is_given(function: Callable[Parameters, Client]) -> Callable[Parameters, Client]:
    """``configure`` told (in ``_given``) which arguments its caller gave, which a default cannot say:
    ``configure(cache=True)`` changes the setting, ``configure()`` leaves it as configured. Its
    signature, docstring and type are ``function``'s."""
    signature = inspect.signature(function)
    call: Callable[..., Client] = function

    @functools.wraps(function)
    def called(*args: Parameters.args, **kwargs: Parameters.kwargs) -> Client:
        bound = signature.bind(*args, **kwargs)
        del args, kwargs  # no frame of ours holds the key plain (a verbose traceback shows the locals)
        if "api_key" in bound.arguments:
            bound.arguments["api_key"] = Secret.of(bound.arguments["api_key"])
        if "base_url" in bound.arguments:  # it may be a key given in its place: an Address masks it
            bound.arguments["base_url"] = address(bound.arguments["base_url"])
        token = _given.set(frozenset(bound.arguments))
        try:
            return call(*bound.args, **bound.kwargs)
        finally:
            _given.reset(token)

    return called


def _documented_as(method: Callable[..., Any]) -> Callable[[Function], Function]:
    """Gives a function ``method``'s docstring (help() and Shift-Tab show it; a type checker shows
    the function's own one-line pointer to the method)."""

    def document(function: Function) -> Function:
        function.__doc__ = method.__doc__
        return function

    return document


@_knows_what_it_is_given
def configure(
    base_url: str | None = None,
    api_key: str | Secret | None = None,
    *,
    transport: Transport | None = None,
    workers: int | None = None,
    rate_limit: float | None = None,
    timeout: float | None = None,
    connect_timeout: float | None = None,
    retries: int | None = None,
    whole_series: bool = True,
    cache: bool = True,
    refresh: bool = False,
    progress: bool | None = None,
    week_start: Literal["monday", "sunday"] = "monday",
    chain_unit: str | None = None,
    incomplete_ttl: float | None = None,
    version_ttl: float | None = None,
    clock: Any = None,
    deadline: float | None = None,
) -> Client:
    """Make the default client from what this call gives, on top of what earlier calls gave: only
    what is given changes (``configure(workers=3)`` keeps the configured service and settings).
    Giving ``base_url`` or ``transport`` names another service (a key not given with it is dropped);
    ``api_key`` alone changes the configured service's key; ``base_url=None`` hands the service back
    to the environment. The previous default client is closed (a reference held to it then raises
    ClientClosedError). A key without a configured base URL is a ConfigurationError."""
    global _default, _made_from, _arguments, _configured
    given = _given.get(frozenset(_SERVICE) | {s.name for s in options.SETTINGS})
    key = Secret.of(api_key)
    del api_key  # no frame of ours holds the key plain, nor what may be one given as the base URL
    called = {"base_url": address(base_url), "api_key": key, "transport": transport, **options.given(locals())}
    with _lock:
        merged = {**_configured, **{name: called[name] for name in given}}
    if given & {"base_url", "transport"}:  # another service: a key belongs to the one it was given with
        merged.update({name: called[name] for name in _SERVICE})
    if merged.get("api_key") is not None and merged.get("base_url") is None and merged.get("transport") is None:
        # A key belongs to the service it was given with: with the base URL left to the environment,
        # it would be sent to whatever METRICS_KIT_BASE_URL points at later.
        raise ConfigurationError(
            "api_key was given without a base URL: give base_url= with api_key=, or set both "
            f"environment variables ({BASE_URL_ENV} and {API_KEY_ENV}) and call configure() without them",
            argument="api_key",
        )
    settings = {name: merged[name] for name in options.given(called) if name in merged}
    client = Client(merged.get("base_url"), merged.get("api_key"), transport=merged.get("transport"), **settings)
    with _lock:
        previous, _default, _configured = _default, client, merged
        # A base URL or transport configured stands; otherwise the environment still decides, and
        # the default is made again from it with these settings (never with a key: see above).
        fixed = merged.get("base_url") is not None or merged.get("transport") is not None
        _made_from = None if fixed else _environment()
        _arguments = {} if fixed else settings
    if previous is not None:  # the transport the new default shares with it (given twice) stays open
        close_as(previous, "by mk.configure(), which replaced it as the default client", keep=merged.get("transport"))
    return client


configure.__doc__ = (configure.__doc__ or "") + "\n\n" + (Client.__doc__ or "")


def default_client() -> Client:
    """The default client, made again from the environment when the variables it was made under
    changed since. The old one is closed then, even when no client can be made from the new
    environment (a base URL set before its key, say): a reference held to it never answers again."""
    global _default, _made_from
    previous = None
    try:
        with _lock:
            now = _environment()
            if _default is not None and _made_from is not None and now != _made_from:
                previous, _default = _default, None
            if _default is None:
                _default = _made_again(previous)
                _made_from = now
            return _default
    finally:
        if previous is not None:
            close_as(previous, "because the environment it was made from changed, and the default client with it")


def _made_again(previous: Client | None) -> Client:
    """A default client made from the environment; when it cannot be, the error says that the
    environment changed and that the previous default client (if any) is closed."""
    try:
        return Client(**_arguments)
    except ConfigurationError as error:
        if previous is None:
            raise
        was = "the embedded demo" if previous.embedded else shown_service(previous.base_url)
        raise ConfigurationError(
            f"the environment changed since the default client was made, so that client (of {was}) is closed "
            f"and answers nothing more; no default client can be made from the new environment: {error}",
            argument=error.argument,
        ) from None


class _Options(TypedDict):
    errors: Errors
    incomplete: Incomplete
    refresh: bool | None
    progress: bool | None


def _pull(errors: Errors, incomplete: Incomplete, refresh: bool | None, progress: bool | None) -> _Options:
    """The options of every pull (series, the family helpers), to pass on as keywords."""
    return {"errors": errors, "incomplete": incomplete, "refresh": refresh, "progress": progress}


@_documented_as(Client.value)
def value(metric: str, project: str, granularity: str, date: DateLike) -> int | float:
    """``Client.value`` on the default client."""
    return default_client().value(metric, project, granularity, date)


@_documented_as(Client.explain)
def explain(
    metric: str, project: str, granularity: str, date: DateLike, *, max_rows: int = explaining.MAX_ROWS
) -> pd.DataFrame:
    """``Client.explain`` on the default client."""
    return default_client().explain(metric, project, granularity, date, max_rows=max_rows)


@_documented_as(Client.series)
def series(
    metric: str,
    project: str,
    start: DateLike,
    end: DateLike,
    granularity: str = "1_day",
    *,
    errors: Errors = "raise",
    incomplete: Incomplete = "keep",
    refresh: bool | None = None,
    progress: bool | None = None,
) -> pd.Series:
    """``Client.series`` on the default client."""
    return default_client().series(
        metric, project, start, end, granularity, **_pull(errors, incomplete, refresh, progress)
    )


@_documented_as(Client.frame)
def frame(
    metrics: Names,
    projects: Names,
    start: DateLike,
    end: DateLike,
    granularity: str = "1_day",
    *,
    shape: Shape = "wide",
    errors: Errors = "raise",
    incomplete: Incomplete = "keep",
    refresh: bool | None = None,
    progress: bool | None = None,
    skip_inapplicable: bool = False,
) -> pd.DataFrame:
    """``Client.frame`` on the default client."""
    return default_client().frame(
        metrics,
        projects,
        start,
        end,
        granularity,
        shape=shape,
        errors=errors,
        incomplete=incomplete,
        refresh=refresh,
        progress=progress,
        skip_inapplicable=skip_inapplicable,
    )


@_documented_as(Client.tokenomics)
def tokenomics(
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
    """``Client.tokenomics`` on the default client."""
    return default_client().tokenomics(project, start, end, granularity, **_pull(errors, incomplete, refresh, progress))


@_documented_as(Client.yields)
def yields(
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
    """``Client.yields`` on the default client."""
    return default_client().yields(project, start, end, granularity, **_pull(errors, incomplete, refresh, progress))


@_documented_as(Client.dex)
def dex(
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
    """``Client.dex`` on the default client."""
    return default_client().dex(project, start, end, granularity, **_pull(errors, incomplete, refresh, progress))


@_documented_as(Client.lending)
def lending(
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
    """``Client.lending`` on the default client."""
    return default_client().lending(project, start, end, granularity, **_pull(errors, incomplete, refresh, progress))


@_documented_as(Client.chain_rewards)
def chain_rewards(
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
    """``Client.chain_rewards`` on the default client."""
    return default_client().chain_rewards(
        project, start, end, granularity, **_pull(errors, incomplete, refresh, progress)
    )


@_documented_as(Client.financials)
def financials(
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
    """``Client.financials`` on the default client."""
    return default_client().financials(project, start, end, granularity, **_pull(errors, incomplete, refresh, progress))


@_documented_as(Client.clear_cache)
def clear_cache() -> int:
    """``Client.clear_cache`` on the default client."""
    return default_client().clear_cache()


class Listing:
    """A table of names that also completes them: call it for the DataFrame, index it by name for
    one row, and in JupyterLab ``mk.metrics["swa`` + Tab completes the names."""

    def __init__(self, table: Callable[[], pd.DataFrame], what: str):
        self._table = table
        self._what = what
        self.__doc__ = table.__doc__

    def __call__(self) -> pd.DataFrame:
        return self._table()

    def __getitem__(self, name: str) -> pd.Series:
        table = self._table()
        if name not in table.index:
            raise KeyError(f"no {self._what} {name!r}; {', '.join(map(str, table.index))}")
        row: pd.Series = table.loc[name]
        return row

    def __iter__(self) -> Iterator[str]:
        return iter(self._ipython_key_completions_())

    def __contains__(self, name: object) -> bool:
        return name in self._ipython_key_completions_()

    def __len__(self) -> int:
        return len(self._ipython_key_completions_())

    def _ipython_key_completions_(self) -> list[str]:
        return [str(name) for name in self._table().index]

    def __repr__(self) -> str:
        return f"<metrics_kit {self._what}s: call for the table, [name] for one, Tab completes names>"


metrics = Listing(lambda: default_client().metrics(), "metric")
metrics.__doc__ = Client.metrics.__doc__
projects = Listing(lambda: default_client().projects(), "project")
projects.__doc__ = Client.projects.__doc__


def catalogue() -> pd.DataFrame:
    """Deprecated: ``metrics_kit.metrics()`` (the metric catalogue as a table)."""
    warnings.warn(
        "metrics_kit.catalogue() is now metrics_kit.metrics(): 'catalogue' names the metric definitions "
        "(metrics_kit.spec.catalogue), the table of them is metrics()",
        DeprecationWarning,
        stacklevel=2,
    )
    return metrics()
