"""Every Client setting, checked when it is made (httpx's ``_config.py`` idea); each setting's name,
default, check and doc are in client/options.py, once.

A bad value raises :class:`~metrics_kit.errors.ConfigurationError` at once, naming the setting
(``error.argument``) and the values it allows, rather than failing later inside a request.

Where the client connects: a transport given as ``transport=``, else the base URL and key from the
arguments, then the environment (``METRICS_KIT_BASE_URL``, ``METRICS_KIT_API_KEY``), else the
embedded default. ``timeout``, ``connect_timeout``, ``retries`` and ``deadline`` shape the HTTP
transport the client makes from a base URL; with a transport of your own or the embedded default
there is no connection to time out or retry, so setting them there is refused, never silently ignored.
A base URL with a user name or password in it (``https://user:pw@host``) is refused without
echoing them: the key goes in ``api_key``. An API key given without a base URL is refused too (it
belongs to a service; the embedded default needs none); a key only in the environment, with no base
URL anywhere, leaves the embedded default in place, with a one-time notice.

The key is a :class:`Secret` from the moment it is read: no repr, message or traceback local shows
it, and it is revealed only where a request is written. Messages show a URL through
:func:`shown_url`, which masks anything in it that may be a key.
``rate_limit`` is honoured by the HTTP and the embedded transports.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# The checks live in checks.py, which the transports import too; they are imported here under
# their old home's names (metrics_kit.client.settings.Secret and the rest still work).
from metrics_kit.client.checks import (
    USER_AGENT,
    Address,
    Secret,
    address,
    cache_identity,
    check_api_key,
    check_base_url,
    check_bool,
    check_int,
    check_rate,
    check_seconds,
    masked_url,
    normalise_url,
    shown_request,
    shown_service,
    shown_url,
)
from metrics_kit.client.options import SETTINGS, check_chain_unit, check_week_start
from metrics_kit.client.transports import Transport
from metrics_kit.errors import ConfigurationError
from metrics_kit.spec.calendar import Calendar

__all__ = [
    "API_KEY_ENV",
    "BASE_URL_ENV",
    "DEFAULTS",
    "HTTP_ONLY",
    "USER_AGENT",
    "Address",
    "Connection",
    "Secret",
    "Settings",
    "address",
    "cache_identity",
    "check_api_key",
    "check_base_url",
    "check_bool",
    "check_chain_unit",
    "check_int",
    "check_rate",
    "check_seconds",
    "check_week_start",
    "masked_url",
    "normalise_url",
    "resolve",
    "shown_request",
    "shown_service",
    "shown_url",
]

log = logging.getLogger("metrics_kit.client")
BASE_URL_ENV = "METRICS_KIT_BASE_URL"
API_KEY_ENV = "METRICS_KIT_API_KEY"

# Each setting's default, and the settings of the connection the client makes from a base URL and
# nothing else: from the one table (client/options.py).
DEFAULTS = {setting.name: setting.default for setting in SETTINGS}
HTTP_ONLY = tuple(setting.name for setting in SETTINGS if setting.http_only)


# -- the connection -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Connection:
    """A remote service (base_url and key) or, with base_url None, the embedded reference service."""

    base_url: str | None
    api_key: Secret | None = field(default=None, repr=False)

    @property
    def embedded(self) -> bool:
        return self.base_url is None


_noticed: set[str] = set()  # the one-time notices given in this process


def _secret(value: object) -> Any:
    """A string key as a Secret at once (so no frame of ours holds it plain); anything else as it is,
    for check_api_key to refuse."""
    return Secret.of(value) if isinstance(value, str | Secret) or value is None else value


def resolve(base_url: str | None = None, api_key: str | Secret | None = None) -> Connection:
    api_key = _secret(api_key)
    given_url = base_url is not None
    base_url = address(base_url or os.environ.get(BASE_URL_ENV) or None)
    if base_url is None:
        if api_key is not None:
            raise ConfigurationError(
                "api_key was given without a base URL: a key belongs to a service, and the embedded "
                "demo service needs none. Give the service's address too (base_url=..., or "
                f"{BASE_URL_ENV}), or leave out api_key for the embedded demo",
                argument="api_key",
            )
        if os.environ.get(API_KEY_ENV) and API_KEY_ENV not in _noticed:
            _noticed.add(API_KEY_ENV)
            # A notice in the log, not a warning: a warning's text carries the caller's file path
            # into a notebook's output, and stops a run that treats warnings as errors.
            log.warning(
                "%s is set but %s is not: the key is not used, and the embedded reference service on "
                "SYNTHETIC demo data answers. Set %s (or give base_url=) for the service the key belongs to",
                API_KEY_ENV,
                BASE_URL_ENV,
                BASE_URL_ENV,
            )
        return Connection(None)
    api_key = api_key if api_key is not None else _secret(os.environ.get(API_KEY_ENV) or None)
    known = api_key if isinstance(api_key, Secret) else None
    base_url = check_base_url(base_url, known)
    if api_key is None:
        where = "base_url=" if given_url else BASE_URL_ENV
        raise ConfigurationError(
            f"a base URL ({shown_url(base_url)}, from {where}) needs an API key; give it in one of these ways:\n"
            f"  - Client(base_url=..., api_key='...')\n"
            f"  - the environment variable {API_KEY_ENV}\n"
            f"or leave out base_url (and unset {BASE_URL_ENV}) to use the embedded reference "
            "service on the synthetic demo data, which needs no key",
            argument="api_key",
        )
    return Connection(base_url, check_api_key(api_key))


# -- every setting of a Client ---------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """The checked settings of one Client: where it connects, and one field a setting of
    ``options.SETTINGS`` (``week_start``: its calendar). Make it with :meth:`make`."""

    connection: Connection
    workers: int
    rate_limit: float | None
    timeout: float
    connect_timeout: float
    retries: int
    whole_series: bool
    cache: bool
    refresh: bool
    progress: bool | None
    calendar: Calendar
    chain_unit: str | None
    incomplete_ttl: float
    version_ttl: float
    clock: Callable[[], float]
    deadline: float | None

    @classmethod
    def make(
        cls,
        *,
        base_url: str | None = None,
        api_key: str | Secret | None = None,
        transport: object = None,
        **given: Any,
    ) -> Settings:
        """The settings of a client given ``given`` (by the names of options.SETTINGS; one left out,
        or None where a signature shows None, is its default), each checked in the table's order."""
        api_key = _secret(api_key)  # from here on no frame of ours holds the key plain
        base_url = address(base_url)  # nor what may be a key given as the base URL
        unknown = sorted(set(given) - set(DEFAULTS))
        if unknown:
            raise TypeError(f"Settings.make() got settings it does not know: {', '.join(unknown)}")
        if transport is not None and not isinstance(transport, Transport):
            raise ConfigurationError(
                "transport must be a Transport (get, get_many, close, base_url, cache_identity), such as "
                f"HTTPTransport, ASGITransport or MockTransport, not {type(transport).__name__}",
                argument="transport",
            )
        connection = Connection(None) if transport is not None else resolve(base_url, api_key)
        checked = {setting.name: setting.checked(given.get(setting.name, setting.keyword)) for setting in SETTINGS}
        made = cls(connection=connection, calendar=checked.pop("week_start"), **checked)
        if transport is not None and (base_url is not None or api_key is not None):
            raise ConfigurationError(
                "give either transport= or base_url=/api_key=, not both: a transport carries its own address and key",
                argument="transport",
            )
        refused = [name for name in HTTP_ONLY if connection.embedded and given.get(name) is not None]
        if refused:
            where = "the transport you gave" if transport is not None else "the embedded default (no base_url)"
            raise ConfigurationError(
                f"{', '.join(refused)} cannot apply to {where}: it has no connection to time out or retry; "
                "leave it out, or give base_url= for a remote service",
                argument=refused[0],
            )
        if transport is not None and given.get("rate_limit") is not None:
            raise ConfigurationError(
                "rate_limit cannot apply to the transport you gave: set it on the transport itself "
                "(HTTPTransport(..., rate_limit=...))",
                argument="rate_limit",
            )
        return made
