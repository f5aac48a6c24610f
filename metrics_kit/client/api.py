"""One-line functions on a default client, for notebooks: ``metrics_kit.series(...)`` and friends.

The default client is made on first use from the environment (``METRICS_KIT_BASE_URL``,
``METRICS_KIT_API_KEY``), else it is the embedded reference service. ``configure(...)`` replaces
it with one built from your arguments; use ``Client`` directly to hold several.
"""

from __future__ import annotations

import threading

import pandas as pd

from metrics_kit.client.client import Client

_lock = threading.Lock()
_default: Client | None = None


def configure(base_url: str | None = None, api_key: str | None = None, **options) -> Client:
    """Make the default client from these arguments (see ``Client``), closing the previous one."""
    global _default
    client = Client(base_url, api_key, **options)
    with _lock:
        previous, _default = _default, client
    if previous is not None:
        previous.close()
    return client


def default_client() -> Client:
    global _default
    with _lock:
        if _default is None:
            _default = Client()
        return _default


def value(metric: str, project: str, granularity: str, date) -> int | float:
    return default_client().value(metric, project, granularity, date)


def series(metric: str, project: str, start, end, granularity: str = "1_day", **kwargs) -> pd.Series:
    return default_client().series(metric, project, start, end, granularity, **kwargs)


def frame(metrics, projects, start, end, granularity: str = "1_day", **kwargs) -> pd.DataFrame:
    return default_client().frame(metrics, projects, start, end, granularity, **kwargs)


def tokenomics(project: str, start, end, granularity: str = "1_day", **kwargs) -> pd.DataFrame:
    return default_client().tokenomics(project, start, end, granularity, **kwargs)


def yields(project: str, start, end, granularity: str = "1_day", **kwargs) -> pd.DataFrame:
    return default_client().yields(project, start, end, granularity, **kwargs)


def dex(project: str, start, end, granularity: str = "1_day", **kwargs) -> pd.DataFrame:
    return default_client().dex(project, start, end, granularity, **kwargs)


def lending(project: str, start, end, granularity: str = "1_day", **kwargs) -> pd.DataFrame:
    return default_client().lending(project, start, end, granularity, **kwargs)


def chain_rewards(project: str, start, end, granularity: str = "1_day", **kwargs) -> pd.DataFrame:
    return default_client().chain_rewards(project, start, end, granularity, **kwargs)


def financials(project: str, start, end, granularity: str = "1_day", **kwargs) -> pd.DataFrame:
    return default_client().financials(project, start, end, granularity, **kwargs)


def catalogue() -> pd.DataFrame:
    return default_client().catalogue_frame()


def projects() -> pd.DataFrame:
    return default_client().projects()


def clear_cache() -> int:
    return default_client().clear_cache()


for _function in (value, series, frame, tokenomics, yields, dex, lending, chain_rewards, financials):
    _function.__doc__ = getattr(Client, _function.__name__).__doc__
catalogue.__doc__ = Client.catalogue_frame.__doc__
projects.__doc__ = Client.projects.__doc__
clear_cache.__doc__ = Client.clear_cache.__doc__
