"""The server's settings, each checked when it is made.

``metrics-kit serve`` hands its options here as the strings it was given and ``App(...)`` its
arguments as numbers; either way a bad value raises ConfigurationError naming the setting, what
was wrong and the allowed range, before any data is read or any socket is opened.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import math
import re
from collections.abc import Iterable

from metrics_kit.errors import ConfigurationError
from metrics_kit.server.serving import completeness
from metrics_kit.spec import wire

MAX_LATENCY_MS = 60_000.0
MAX_HEAD_TIMEOUT = 600.0
# A host name: dot-separated labels of letters, digits and inner hyphens (RFC 1123).
_ALL_DIGITS = re.compile(r"[0-9]+", re.ASCII)
_HOST_NAME = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*\.?", re.ASCII)


def _number(name: str, value: object, allowed: str) -> float:
    """``value`` as a float (from a number or the text of one), or the error naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ConfigurationError(f"{name} must be {allowed}, not {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise ConfigurationError(f"{name} must be {allowed}, not {value!r}") from None
    if not math.isfinite(number):
        raise ConfigurationError(f"{name} must be {allowed}, not {value!r}")
    return number


def port(value: object) -> int:
    allowed = "a whole number from 0 to 65535 (0 picks a free port)"
    number = _number("port", value, allowed)
    if not number.is_integer() or not 0 <= number <= 65535:
        raise ConfigurationError(f"port must be {allowed}, not {value!r}")
    return int(number)


def host(value: object) -> str:
    """An IP address or a host name to listen on."""
    why = ""
    if isinstance(value, str):
        try:
            return str(ipaddress.ip_address(value))
        except ValueError:
            # A name whose last label is all digits is no host name (RFC 1123 2.1, RFC 3696 2): it is
            # an address written wrong, such as 0.0.0.0.0 or 127.0.0.256.
            if _ALL_DIGITS.fullmatch(value.rstrip(".").rpartition(".")[2]):
                why = ": it is not a valid IP address (an IPv4 address is four numbers from 0 to 255, such as 0.0.0.0)"
            elif len(value) <= 253 and _HOST_NAME.fullmatch(value):
                return value
    raise ConfigurationError(
        f"host must be an IP address (such as 127.0.0.1, 0.0.0.0 or ::1) or a host name (such as localhost), "
        f"not {value!r}{why}"
    )


def lag(value: object) -> float:
    """Seconds the service waits past a period's end before it counts the period complete, for exports
    that arrive late (``server/serving/completeness.py``); a duration such as 2h, 90m, 45s or 1d."""
    return completeness.parse_lag(value, "lag")


def watermark(value: object) -> dt.datetime | None:
    """The data's watermark, declared: the instant before which every event is in the data; None: not declared."""
    if value is None:
        return None
    try:
        return completeness.parse_instant(value, "watermark")
    except ValueError as error:
        raise ConfigurationError(str(error), argument="watermark") from None


def rate_limit(value: object) -> float | None:
    """Requests per second per key; None turns the limit off."""
    if value is None:
        return None
    allowed = "a number of requests per second above 0 (leave it out for no limit)"
    number = _number("rate_limit", value, allowed)
    if number <= 0:
        raise ConfigurationError(f"rate_limit must be {allowed}, not {value!r}")
    return number


def latency_ms(value: object) -> float:
    allowed = f"a number of milliseconds from 0 to {MAX_LATENCY_MS:,.0f}"
    number = _number("latency_ms", value, allowed)
    if not 0 <= number <= MAX_LATENCY_MS:
        raise ConfigurationError(f"latency_ms must be {allowed}, not {value!r}")
    return number


def head_timeout(value: object) -> float:
    """Seconds a client has to send a request line and headers."""
    allowed = f"a number of seconds above 0 and at most {MAX_HEAD_TIMEOUT:g}"
    number = _number("head_timeout", value, allowed)
    if not 0 < number <= MAX_HEAD_TIMEOUT:
        raise ConfigurationError(f"head_timeout must be {allowed}, not {value!r}")
    return number


def keys(values: Iterable[str]) -> list[bytes]:
    """The API keys as the header carries them. Messages say which key is wrong, never what it is."""
    if isinstance(values, str | bytes):
        raise ConfigurationError("keys must be a list of API keys, not a single string")
    checked = list(values)
    if not checked:
        raise ConfigurationError("keys: the server needs at least one API key")
    out = []
    for number, key in enumerate(checked, 1):
        if not wire.is_api_key(key):
            raise ConfigurationError(
                f"keys: API key {number} of {len(checked)} is not usable: a key must be a non-empty string of "
                "visible ASCII characters without spaces or commas (the key is not shown)"
            )
        if "," in key:
            raise ConfigurationError(
                f"keys: API key {number} of {len(checked)} contains a comma, which separates keys in "
                "METRICS_KIT_API_KEYS (the key is not shown)"
            )
        out.append(key.encode("ascii"))
    return out
