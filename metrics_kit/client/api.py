"""One-line functions on a default client, for notebooks: ``metrics_kit.series(...)`` and friends.

The default client is made on first use from the environment (``METRICS_KIT_BASE_URL``,
``METRICS_KIT_API_KEY``, ``METRICS_KIT_CACHE_DIR``), else it is the embedded reference service, and
it follows that environment: when any of those variables changes, the next call makes a new default
client from them (closing the old one). ``configure(...)`` replaces it with one built from your
arguments (closing the old one too; a base URL or transport given there is kept whatever the
environment says). A closed client raises ClientClosedError if used through a reference held to it:
it never answers from the new service, nor from any other. Use ``Client`` directly to hold several.

Each function is the Client method of the same name, on the default client, with the method's own
signature and docstring (generated from it, so the two cannot drift apart).
"""

from __future__ import annotations

import hashlib
import inspect
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pandas as pd

from metrics_kit.client.client import Client
from metrics_kit.client.settings import API_KEY_ENV, BASE_URL_ENV, Secret, address
from metrics_kit.client.signatures import presented
from metrics_kit.errors import ConfigurationError
from metrics_kit.files import CACHE_DIR_ENV

__all__ = [
    "catalogue",
    "chain_rewards",
    "clear_cache",
    "configure",
    "default_client",
    "dex",
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
_arguments: dict[str, Any] = {}  # what configure() was given, to make the default again from


def _environment() -> tuple[str, ...]:
    """What of the environment decides the default client: the base URL, a digest of the key (never
    the key itself), the cache folder."""
    key = os.environ.get(API_KEY_ENV) or ""
    digest = hashlib.sha256(b"metrics-kit environment\x00" + key.encode()).hexdigest() if key else ""
    # The base URL as an Address: it may be a key set in the wrong variable, and the tuple is a local
    # of default_client() (a verbose traceback shows it); its repr masks it.
    return (address(os.environ.get(BASE_URL_ENV) or ""), digest, os.environ.get(CACHE_DIR_ENV) or "")


def configure(base_url: str | None = None, api_key: str | None = None, **settings: Any) -> Client:
    """Make the default client from these arguments, closing the previous one (a reference held to
    it then raises ClientClosedError). ``api_key`` without a base URL is a ConfigurationError."""
    global _default, _made_from, _arguments
    key = Secret.of(api_key)
    del api_key  # no frame of ours holds the key plain, nor what may be one given as the base URL
    base_url = address(base_url)
    if key is not None and base_url is None and settings.get("transport") is None:
        # A key belongs to the service it was given with: with the base URL left to the environment,
        # it would be sent to whatever METRICS_KIT_BASE_URL points at later.
        raise ConfigurationError(
            "api_key was given without a base URL: give base_url= with api_key=, or set both "
            f"environment variables ({BASE_URL_ENV} and {API_KEY_ENV}) and call configure() without them",
            setting="api_key",
        )
    client = Client(base_url, key, **settings)
    # Made again from the environment when it changes: never with a key given here (see above).
    arguments = {"base_url": base_url, **settings}
    with _lock:
        previous, _default = _default, client
        # A base URL or transport given here stands; otherwise the environment still decides.
        fixed = base_url is not None or settings.get("transport") is not None
        _made_from = None if fixed else _environment()
        _arguments = {} if fixed else arguments
    if previous is not None:  # the transport the new default shares with it (given twice) stays open
        previous._close("by mk.configure(), which replaced it as the default client", keep=settings.get("transport"))
    return client


_made = inspect.signature(Client.__init__)
configure.__signature__ = _made.replace(  # type: ignore[attr-defined]
    parameters=list(_made.parameters.values())[1:], return_annotation="Client"
)
configure.__doc__ = (configure.__doc__ or "") + "\n\n" + (Client.__doc__ or "")


def default_client() -> Client:
    """The default client, made again from the environment when the variables it was made under
    changed since (the old one is closed)."""
    global _default, _made_from
    previous = None
    with _lock:
        now = _environment()
        if _default is not None and _made_from is not None and now != _made_from:
            previous, _default = _default, None
        if _default is None:
            _default = Client(**_arguments)
            _made_from = now
        client = _default
    if previous is not None:
        previous._close("because the environment it was made from changed, and the default client with it")
    return client


def _on_default(method: Callable[..., Any]) -> Callable[..., Any]:
    name = method.__name__
    return presented(
        lambda *args, **kwargs: getattr(default_client(), name)(*args, **kwargs),
        method,
        drop=next(iter(inspect.signature(method).parameters)),  # self, or a family helper's client
        name=name,
        doc=method.__doc__,
        module=__name__,
    )


value = _on_default(Client.value)
series = _on_default(Client.series)
frame = _on_default(Client.frame)
tokenomics = _on_default(Client.tokenomics)
yields = _on_default(Client.yields)
dex = _on_default(Client.dex)
lending = _on_default(Client.lending)
chain_rewards = _on_default(Client.chain_rewards)
financials = _on_default(Client.financials)
clear_cache = _on_default(Client.clear_cache)


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
