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

import hashlib
import hmac
import logging
import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from metrics_kit.errors import ConfigurationError
from metrics_kit.spec.calendar import WEEK_STARTS, Calendar
from metrics_kit.spec.version import __version__
from metrics_kit.spec.wire import API_KEY

log = logging.getLogger("metrics_kit.client")
BASE_URL_ENV = "METRICS_KIT_BASE_URL"
API_KEY_ENV = "METRICS_KIT_API_KEY"
_VALID_KEY = API_KEY  # the wire's rule (spec/wire.py): visible ASCII, a header value that cannot be mangled
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


class Secret:
    """An API key that no repr, str, format, ``vars()`` dump or traceback local shows.

    :meth:`reveal` gives the key back; only the code that writes a request calls it, inline, so
    that not even a local variable of ours holds the plain key. :meth:`fingerprint` is what the
    cache files values under: one-way, keyed by the key."""

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    @classmethod
    def of(cls, value: str | Secret | None) -> Secret | None:
        """``value`` as a Secret (None and "" stay None)."""
        if value is None or isinstance(value, Secret):
            return value
        return cls(value) if value else None

    def reveal(self) -> str:
        return self._value

    def fingerprint(self, service: str) -> str:
        """The hex HMAC-SHA256 of the normalised ``service`` address, keyed by the key: the same
        service and key give the same fingerprint, another key or service another one, and the key
        cannot be recovered from it."""
        message = b"metrics-kit value cache\x00" + normalise_url(service).encode()
        return hmac.new(self._value.encode(), message, hashlib.sha256).hexdigest()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash((Secret, self._value))

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("an API key (Secret) is not pickled or copied out of the process")


def normalise_url(base_url: str) -> str:
    """Lower-case scheme and host, no default port, no trailing slash, no fragment."""
    parts = urlsplit(base_url.strip())
    scheme = parts.scheme.lower()
    netloc = parts.netloc
    try:
        host, port = parts.hostname, parts.port
    except ValueError:  # a port that is not a number: keep the URL as written
        host, port = None, None
    if host is not None:
        if ":" in host:  # IPv6 literal
            host = f"[{host}]"
        userinfo = netloc.rpartition("@")[0]
        default = {"http": 80, "https": 443}.get(scheme)
        netloc = (
            (userinfo + "@" if userinfo else "") + host + (f":{port}" if port is not None and port != default else "")
        )
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, ""))


def cache_identity(service: str, key: Secret | None) -> str:
    """``service#fingerprint``: what a transport files cached values under (see :meth:`Secret.fingerprint`).
    Without a key (a service in this process that needs none), the service names itself."""
    return f"{service}#{(key or Secret(service)).fingerprint(service)}"


def check_api_key(value: object) -> Secret:
    text = value.reveal() if isinstance(value, Secret) else value
    if not isinstance(text, str) or not _VALID_KEY.fullmatch(text):
        # Never echo the value: it may be a real key with a stray newline.
        raise ConfigurationError(
            "api_key must be a non-empty string of visible ASCII characters (no spaces or line breaks)",
            setting="api_key",
        )
    return value if isinstance(value, Secret) else Secret(text)


# A path segment that may be a key: long, of token characters, with letters and digits in it.
_TOKEN = re.compile(r"(?=[\w.~+=-]*[0-9])(?=[\w.~+=-]*[A-Za-z])[\w.~+=-]{20,}")


def masked_url(value: str, key: Secret | None = None) -> str | None:
    """``value`` with whatever in it may be a key masked: a user name or password (``***@``), the
    query and the fragment, a long token-like path segment, the key itself. None when ``value`` is
    not an address at all (it may be a key given in the wrong place: nothing of it is shown)."""
    text = value.strip()
    parts = urlsplit(text)
    if not parts.scheme or "://" not in text:
        return None
    netloc = _USERINFO.sub(r"\1***@", "//" + parts.netloc)[2:]
    path = "/".join("***" if _TOKEN.fullmatch(segment) else segment for segment in parts.path.split("/"))
    shown = urlunsplit((parts.scheme, netloc, path, "***" if "?" in text else "", "***" if "#" in text else ""))
    if key is not None and key.reveal() in shown:
        shown = shown.replace(key.reveal(), "***")
    return shown


def shown_url(value: object, limit: int = 80, key: Secret | None = None) -> str:
    """A base URL for a message: quoted and masked (:func:`masked_url`), or, for a value that is not
    an address, only its length."""
    if not isinstance(value, str):
        return f"a {type(value).__name__}"
    shown = masked_url(value, key)
    if shown is None:
        return f"a value of {len(value.strip())} characters that is not an address (not shown: it may be a key)"
    return repr(shown[:limit] + ("..." if len(shown) > limit else ""))


class Address(str):
    """A base URL not yet known to be free of secrets (a key given in its place, a ``?api_key=``):
    a string whose repr masks whatever in it may be a key (:func:`shown_url`), so that a traceback's
    locals (``%xmode Verbose``, ``pytest --showlocals``) never show it."""

    __slots__ = ()

    def __repr__(self) -> str:
        return shown_url(str(self))


def address(value: Any) -> Any:
    """``value`` as an :class:`Address` when it is a string (anything else as it is)."""
    return Address(value) if isinstance(value, str) and not isinstance(value, Address) else value


def check_base_url(value: object, key: Secret | None = None) -> str:
    value = address(value)
    text = Address(value.strip().rstrip("/")) if isinstance(value, str) else Address("")
    if isinstance(value, str) and "@" in urlsplit(text).netloc:
        # Refused, not used as basic auth: the key travels in x-api-key, and a password in a URL ends
        # up in logs, reprs and shell history. The message never repeats what preceded the '@'.
        raise ConfigurationError(
            f"base_url must not hold a user name or password (user:password@host): got {shown_url(text, key=key)}. "
            "Give the service's address alone, and the key as api_key= or in METRICS_KIT_API_KEY",
            setting="base_url",
        )
    if not text.startswith(("http://", "https://")) or "?" in text or "#" in text or len(text) <= len("https://"):
        raise ConfigurationError(
            "base_url must be an http:// or https:// address without a query or fragment, such as "
            f"https://metrics.example.com/v1; got {shown_url(value, key=key)}",
            setting="base_url",
        )
    if key is not None and key.reveal() in text:
        raise ConfigurationError(
            f"base_url must not hold the API key: got {shown_url(text, key=key)}; the key travels in a header only",
            setting="base_url",
        )
    return str(text)


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
