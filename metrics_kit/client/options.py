"""Every setting of a Client, once: its name, its default, its check and what it does (httpx's
``_config.py``: each default defined once, and everything else reads it from there).

``Client`` and ``mk.configure`` take these settings (their signatures write them out, for a type
checker and for Shift-Tab; a test checks that they are exactly these), ``Settings.make`` checks them,
the Client's docstring lists them from here (:func:`described`), and the transports' defaults are
these (``transport``: the HTTPTransport argument a setting becomes). A new setting is one line here,
one parameter in each signature, and one field of ``Settings``.
"""

from __future__ import annotations

import math
import re
import textwrap
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from metrics_kit.client.checks import check_bool, check_int, check_rate, check_seconds
from metrics_kit.errors import ConfigurationError
from metrics_kit.spec.calendar import WEEK_STARTS, Calendar
from metrics_kit.spec.wire import SERIES_PATH

__all__ = [
    "SETTINGS",
    "Setting",
    "check_chain_unit",
    "check_clock",
    "check_week_start",
    "default",
    "described",
    "given",
]

_CHAIN_UNIT = re.compile(r"[a-z_][a-z0-9_]*")


def check_week_start(value: object) -> Calendar:
    if value not in WEEK_STARTS:
        raise ConfigurationError(
            f"week_start must be one of {', '.join(map(repr, WEEK_STARTS))} (the first day of the service's "
            f"weeks), not {value!r}",
            argument="week_start",
        )
    return Calendar(str(value))


def check_chain_unit(value: object) -> str | None:
    if value is None or (isinstance(value, str) and _CHAIN_UNIT.fullmatch(value)):
        return value
    raise ConfigurationError(
        f"chain_unit must be a lowercase identifier such as 'sol', or None, not {value!r}", argument="chain_unit"
    )


def check_clock(value: object) -> Callable[[], float]:
    """A function returning the seconds since the epoch: asked once now, rather than failing inside a pull."""
    if not callable(value):
        raise ConfigurationError(f"clock must be a function returning seconds, not {value!r}", argument="clock")
    now = value()
    if not isinstance(now, int | float) or isinstance(now, bool) or not math.isfinite(now):
        raise ConfigurationError(
            f"clock must return the seconds since the epoch as a finite number; it returned {now!r}", argument="clock"
        )
    return value


def _whole(name: str, minimum: int) -> Callable[[object], int]:
    return lambda value: check_int(name, value, minimum=minimum)


def _seconds(name: str, *, positive: bool, optional: bool = False) -> Callable[[object], float | None]:
    return lambda value: None if optional and value is None else check_seconds(name, value, positive=positive)


def _flag(name: str, *, optional: bool = False) -> Callable[[object], bool | None]:
    if optional:
        return lambda value: check_bool(name, value, allow_none=True)
    return lambda value: bool(check_bool(name, value))


@dataclass(frozen=True)
class Setting:
    """One setting of a Client.

    ``default`` is what a client uses when the setting is not given; ``keyword`` the default that
    Client's and configure's signatures show (None stands for ``default``, which None given then
    means). ``check`` turns what was given into the checked value, or raises ConfigurationError
    naming the setting and what it allows. ``http_only``: it shapes only the connection a client
    makes from a base URL (refused elsewhere); ``transport``: the HTTPTransport argument it becomes.
    ``unit``: how the docstring shows a number's unit."""

    name: str
    default: Any
    check: Callable[[Any], Any]
    doc: str
    keyword: Any = None
    http_only: bool = False
    transport: str | None = None
    unit: str = ""

    def checked(self, given: Any) -> Any:
        """The checked value of what was given (None: the default, where the signature shows None)."""
        return self.check(self.default if given is None and self.keyword is None else given)

    def described(self) -> str:
        """The setting for a docstring: its name, its default, what it does."""
        value = self.default
        if callable(value):
            shown = f"{value.__module__}.{value.__qualname__}"
        elif isinstance(value, int | float) and not isinstance(value, bool):
            shown = f"{value:g}" + (f" {self.unit}" if self.unit else "")
        else:
            shown = repr(value).replace("'", '"')
        return f"``{self.name}`` ({shown}): {self.doc}" + (" (a base URL only)" if self.http_only else "")


SETTINGS = (
    Setting("workers", 16, _whole("workers", 1), "requests in flight", transport="pool_size"),
    Setting("rate_limit", None, check_rate, "requests a second (None: no limit)", transport="rate_limit"),
    Setting(
        "timeout",
        30.0,
        _seconds("timeout", positive=True),
        "the most one attempt waits for its whole answer",
        http_only=True,
        transport="read_timeout",
        unit="s",
    ),
    Setting(
        "connect_timeout",
        5.0,
        _seconds("connect_timeout", positive=True),
        "the most one attempt waits for a connection",
        http_only=True,
        transport="connect_timeout",
        unit="s",
    ),
    Setting(
        "retries",
        5,
        _whole("retries", 0),
        "retries of a request without an answer, or answered 429, 502, 503 or 504",
        http_only=True,
        transport="retries",
    ),
    Setting(
        "whole_series",
        True,
        _flag("whole_series"),
        f"ask a service that advertises GET {SERIES_PATH} (the reference service) for a whole series per request; "
        "False: one value per request, as the specification says (a service that does not advertise it "
        "is always asked so)",
        keyword=True,
    ),
    Setting("cache", True, _flag("cache"), "the on-disk cache of values", keyword=True),
    Setting("refresh", False, _flag("refresh"), "fetch again, overwriting the cache", keyword=False),
    Setting("progress", None, _flag("progress", optional=True), "a progress bar (None: from 100 points)"),
    Setting("week_start", "monday", check_week_start, "the first day of the service's weeks", keyword="monday"),
    Setting("chain_unit", None, check_chain_unit, 'the unit in the chain reward metric names (None: "sol")'),
    Setting(
        "incomplete_ttl",
        600.0,
        _seconds("incomplete_ttl", positive=False),
        "how long an incomplete period's cached value is read back",
        unit="s",
    ),
    Setting(
        "version_ttl",
        60.0,
        _seconds("version_ttl", positive=False),
        "how long the service's data version, once seen, is trusted before cached values are read under it "
        'again only after asking (docs/client.md, "The data version")',
        unit="s",
    ),
    Setting("clock", time.time, check_clock, "the wall clock, for tests"),
    Setting(
        "deadline",
        None,
        _seconds("deadline", positive=True, optional=True),
        "the most seconds one pull may take on the network, retries included; None, no bound",
        http_only=True,
    ),
)
_BY_NAME = {setting.name: setting for setting in SETTINGS}


def default(name: str) -> Any:
    """The default of the setting ``name``."""
    return _BY_NAME[name].default


def given(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The settings among ``arguments`` (a signature's, by name), in the table's order."""
    return {setting.name: arguments[setting.name] for setting in SETTINGS}


def described(indent: str = "    ") -> str:
    """Every setting for a docstring, one paragraph, lines of at most 100 characters after ``indent``."""
    text = (
        "Settings (each checked when the client is made; a bad one raises ConfigurationError naming it and "
        "what it allows): " + "; ".join(setting.described() for setting in SETTINGS) + "."
    )
    return textwrap.fill(text, 100, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False)
