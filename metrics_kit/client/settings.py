"""Every Client setting, checked when it is made (httpx's ``_config.py`` idea).

A bad value raises :class:`~metrics_kit.errors.ConfigurationError` at once, naming the setting
(``error.setting``) and the values it allows, rather than failing later inside a request.

Where the client connects: a transport given as ``transport=``, else the base URL and key from the
arguments, then the environment (``METRICS_KIT_BASE_URL``, ``METRICS_KIT_API_KEY``), else the
embedded default. ``timeout``, ``connect_timeout``, ``retries`` and ``deadline`` shape the HTTP
transport the client makes from a base URL; with a transport of your own or the embedded default
there is no connection to time out or retry, so setting them there is refused, never silently ignored.
A base URL with a user name or password in it (``https://user:pw@host``) is refused without
echoing them: the key goes in ``api_key``.
``rate_limit`` is honoured by the HTTP and the embedded transports.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from metrics_kit.errors import ConfigurationError
from metrics_kit.spec.calendar import WEEK_STARTS, Calendar
from metrics_kit.spec.version import __version__

BASE_URL_ENV = "METRICS_KIT_BASE_URL"
API_KEY_ENV = "METRICS_KIT_API_KEY"
_VALID_KEY = re.compile(r"[\x21-\x7e]+")  # visible ASCII: a header value that cannot be mangled
_CHAIN_UNIT = re.compile(r"[a-z_][a-z0-9_]*")
_USERINFO = re.compile(r"^((?:[A-Za-z][A-Za-z0-9+.-]*:)?//|)[^/?#@]*@")


USER_AGENT = f"metrics-kit/{__version__}"
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


# -- the checks (also used by HTTPTransport) ------------------------------------------------------


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_int(name: str, value: object, *, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigurationError(f"{name} must be a whole number >= {minimum}, not {value!r}", setting=name)
    return value


def check_seconds(name: str, value: object, *, positive: bool) -> float:
    """A finite number of seconds, above 0 (``positive``) or at least 0."""
    if not _is_number(value) or not math.isfinite(value) or not (value > 0 if positive else value >= 0):  # type: ignore[arg-type, operator]
        allowed = "above 0" if positive else ">= 0"
        raise ConfigurationError(f"{name} must be a finite number of seconds {allowed}, not {value!r}", setting=name)
    return float(value)  # type: ignore[arg-type]


def check_rate(value: object) -> float | None:
    if value is None:
        return None
    if not _is_number(value) or not math.isfinite(value) or not value > 0:  # type: ignore[arg-type, operator]
        raise ConfigurationError(
            f"rate_limit must be a number of requests a second above 0, or None (no limit), not {value!r}",
            setting="rate_limit",
        )
    return float(value)  # type: ignore[arg-type]


def check_bool(name: str, value: object, *, allow_none: bool = False) -> bool | None:
    if isinstance(value, bool) or (allow_none and value is None):
        return value
    allowed = "True, False or None" if allow_none else "True or False"
    raise ConfigurationError(f"{name} must be {allowed}, not {value!r}", setting=name)


def check_api_key(value: object) -> str:
    if not isinstance(value, str) or not _VALID_KEY.fullmatch(value):
        # Never echo the value: it may be a real key with a stray newline.
        raise ConfigurationError(
            "api_key must be a non-empty string of visible ASCII characters (no spaces or line breaks)",
            setting="api_key",
        )
    return value


def shown_url(value: str, limit: int = 80) -> str:
    """A URL for a message: anything before an '@' in its host part (a user name, a password) masked."""
    return _USERINFO.sub(r"\1***@", value[:limit])


def check_base_url(value: object) -> str:
    text = value.strip().rstrip("/") if isinstance(value, str) else ""
    if isinstance(value, str) and "@" in urlsplit(text).netloc:
        # Refused, not used as basic auth: the key travels in x-api-key, and a password in a URL ends
        # up in logs, reprs and shell history. The message never repeats what preceded the '@'.
        raise ConfigurationError(
            f"base_url must not hold a user name or password (user:password@host): got {shown_url(text)!r}. "
            "Give the service's address alone, and the key as api_key= or in METRICS_KIT_API_KEY",
            setting="base_url",
        )
    if not text.startswith(("http://", "https://")) or "?" in text or "#" in text or len(text) <= len("https://"):
        shown = shown_url(value) if isinstance(value, str) else value
        raise ConfigurationError(
            "base_url must be an http:// or https:// address without a query, such as "
            f"https://metrics.example.com/v1, not {shown!r}",
            setting="base_url",
        )
    return text


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
    api_key: str | None = field(default=None, repr=False)

    @property
    def embedded(self) -> bool:
        return self.base_url is None


def resolve(base_url: str | None = None, api_key: str | None = None) -> Connection:
    base_url = base_url or os.environ.get(BASE_URL_ENV) or None
    if base_url is None:
        return Connection(None)
    base_url = check_base_url(base_url)
    api_key = api_key or os.environ.get(API_KEY_ENV) or None
    if not api_key:
        raise ConfigurationError(
            f"a base URL ({base_url}) needs an API key; give it in one of these ways:\n"
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
        api_key: str | None,
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
        if clock is not None and not callable(clock):
            raise ConfigurationError(f"clock must be a function returning seconds, not {clock!r}", setting="clock")
        from metrics_kit.client.transports import Transport  # the transports use these checks too

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
