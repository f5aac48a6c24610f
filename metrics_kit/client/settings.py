"""Every Client setting, checked when it is made (httpx's ``_config.py`` idea).

A bad value raises :class:`~metrics_kit.errors.ConfigurationError` at once, naming the setting
(``error.setting``) and the values it allows, rather than failing later inside a request.

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
import math
import os
import re
import time
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
from metrics_kit.client.transports import Transport
from metrics_kit.errors import ConfigurationError
from metrics_kit.spec.calendar import WEEK_STARTS, Calendar

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
_CHAIN_UNIT = re.compile(r"[a-z_][a-z0-9_]*")

# version_ttl: seconds a data version, once seen, is trusted without asking the service again.
DEFAULTS = {
    "workers": 16,
    "timeout": 30.0,
    "connect_timeout": 5.0,
    "retries": 5,
    "incomplete_ttl": 600.0,
    "version_ttl": 60.0,
}
# Settings of the connection the client makes from a base URL, and nothing else.
HTTP_ONLY = ("timeout", "connect_timeout", "retries", "deadline")


def check_week_start(value: object) -> Calendar:
    if value not in WEEK_STARTS:
        raise ConfigurationError(
            f"week_start must be one of {', '.join(map(repr, WEEK_STARTS))} (the first day of the service's "
            f"weeks), not {value!r}",
            setting="week_start",
        )
    return Calendar(str(value))


def check_chain_unit(value: object) -> str | None:
    if value is None or (isinstance(value, str) and _CHAIN_UNIT.fullmatch(value)):
        return value
    raise ConfigurationError(
        f"chain_unit must be a lowercase identifier such as 'sol', or None, not {value!r}", setting="chain_unit"
    )


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
                setting="api_key",
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
            setting="api_key",
        )
    return Connection(base_url, check_api_key(api_key))


# -- every setting of a Client ---------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """The checked settings of one Client. Make it with :meth:`make`."""

    connection: Connection
    workers: int
    rate_limit: float | None
    timeout: float
    connect_timeout: float
    retries: int
    deadline: float | None
    incomplete_ttl: float
    version_ttl: float
    calendar: Calendar
    chain_unit: str | None
    cache: bool
    refresh: bool
    progress: bool | None
    clock: Callable[[], float]

    @classmethod
    def make(
        cls,
        *,
        base_url: str | None,
        api_key: str | Secret | None,
        transport: object,
        workers: int | None,
        rate_limit: float | None,
        timeout: float | None,
        connect_timeout: float | None,
        retries: int | None,
        incomplete_ttl: float | None,
        week_start: str,
        chain_unit: str | None,
        cache: bool,
        refresh: bool,
        progress: bool | None,
        clock: Callable[[], float] | None,
        deadline: float | None = None,
        version_ttl: float | None = None,
    ) -> Settings:
        api_key = _secret(api_key)  # from here on no frame of ours holds the key plain
        base_url = address(base_url)  # nor what may be a key given as the base URL
        if clock is not None and not callable(clock):
            raise ConfigurationError(f"clock must be a function returning seconds, not {clock!r}", setting="clock")
        if clock is not None:  # asked once now, rather than failing inside a pull
            now = clock()
            if not isinstance(now, int | float) or isinstance(now, bool) or not math.isfinite(now):
                raise ConfigurationError(
                    f"clock must return the seconds since the epoch as a finite number; it returned {now!r}",
                    setting="clock",
                )
        if transport is not None and not isinstance(transport, Transport):
            raise ConfigurationError(
                "transport must be a Transport (get, get_many, close, base_url, cache_identity), such as "
                f"HTTPTransport, ASGITransport or MockTransport, not {type(transport).__name__}",
                setting="transport",
            )
        connection = Connection(None) if transport is not None else resolve(base_url, api_key)
        made = cls(
            connection=connection,
            workers=check_int("workers", DEFAULTS["workers"] if workers is None else workers, minimum=1),
            rate_limit=check_rate(rate_limit),
            timeout=check_seconds("timeout", DEFAULTS["timeout"] if timeout is None else timeout, positive=True),
            connect_timeout=check_seconds(
                "connect_timeout",
                DEFAULTS["connect_timeout"] if connect_timeout is None else connect_timeout,
                positive=True,
            ),
            retries=check_int("retries", DEFAULTS["retries"] if retries is None else retries, minimum=0),
            deadline=None if deadline is None else check_seconds("deadline", deadline, positive=True),
            incomplete_ttl=check_seconds(
                "incomplete_ttl",
                DEFAULTS["incomplete_ttl"] if incomplete_ttl is None else incomplete_ttl,
                positive=False,
            ),
            version_ttl=check_seconds(
                "version_ttl", DEFAULTS["version_ttl"] if version_ttl is None else version_ttl, positive=False
            ),
            calendar=check_week_start(week_start),
            chain_unit=check_chain_unit(chain_unit),
            cache=bool(check_bool("cache", cache)),
            refresh=bool(check_bool("refresh", refresh)),
            progress=check_bool("progress", progress, allow_none=True),
            clock=clock or time.time,
        )
        if transport is not None and (base_url is not None or api_key is not None):
            raise ConfigurationError(
                "give either transport= or base_url=/api_key=, not both: a transport carries its own address and key",
                setting="transport",
            )
        given = {"timeout": timeout, "connect_timeout": connect_timeout, "retries": retries, "deadline": deadline}
        refused = [name for name in HTTP_ONLY if connection.embedded and given[name] is not None]
        if refused:
            where = "the transport you gave" if transport is not None else "the embedded default (no base_url)"
            raise ConfigurationError(
                f"{', '.join(refused)} cannot apply to {where}: it has no connection to time out or retry; "
                "leave it out, or give base_url= for a remote service",
                setting=refused[0],
            )
        if transport is not None and rate_limit is not None:
            raise ConfigurationError(
                "rate_limit cannot apply to the transport you gave: set it on the transport itself "
                "(HTTPTransport(..., rate_limit=...))",
                setting="rate_limit",
            )
        return made
