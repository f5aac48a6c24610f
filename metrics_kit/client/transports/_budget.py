"""A key's rate limit as a service states it in an answer's headers, read.

Three families of fields say it:

- the IETF httpapi draft's fields (draft-ietf-httpapi-ratelimit-headers up to -06):
  ``RateLimit-Limit``, ``RateLimit-Remaining``, ``RateLimit-Reset`` (a number of seconds) and
  ``RateLimit-Policy: 20;w=1`` (20 requests a window of 1 second), which may list several
  policies: ``10;w=1, 1000;w=3600``;
- the draft's later structured fields: ``RateLimit: "default";r=5;t=1`` (5 left, reset in 1 second)
  with ``RateLimit-Policy: "default";q=20;w=1``, each a list of one item a policy (the draft's own
  example lists a burst policy before a longer one);
- the older ``X-RateLimit-Limit``, ``X-RateLimit-Remaining``, ``X-RateLimit-Reset`` (GitHub's, say).

Every policy is read, and the tightest kept. A policy over a window of up to a minute
(``PACED_UP_TO``) is a pace: the rate is the lowest quota over its window among such policies (where
none states a quota, the lowest of what is left over the time to its reset, of those resetting
within a minute). A policy over a longer window (1,000 an hour, 100,000 a day) is a count, not a
pace: spread evenly over its window it would slow a pull of a few hundred requests to one a second
while most of the budget is left, so requests go at the short policies' pace while it has some
left. Any policy with none left holds every request until its reset (the latest, when several have
none left).

A reset is a number of seconds, the draft says; services also send an epoch time there, in seconds
or in milliseconds. A reset above a year of seconds (``EPOCH_AFTER``) can only be an epoch time,
and one above ``MILLIS_AFTER`` only one in milliseconds (no time in seconds reaches it before the
year 5000): either is counted from the answer's ``Date`` (else the wall clock) and read as the
seconds from then to it (none, when it has passed). A field that cannot be read is left out, never
guessed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from metrics_kit.spec import wire

__all__ = ["Stated", "stated"]

# A reset above this many seconds (a year) is an epoch time, not a number of seconds.
EPOCH_AFTER = 365 * 24 * 3600
# A reset above this is an epoch time in milliseconds (in seconds it would be past the year 5000).
MILLIS_AFTER = 10**11
_LIMIT, _REMAINING, _RESET, _POLICY = (
    wire.RATELIMIT_LIMIT_HEADER,
    wire.RATELIMIT_REMAINING_HEADER,
    wire.RATELIMIT_RESET_HEADER,
    wire.RATELIMIT_POLICY_HEADER,
)
_STRUCTURED = "ratelimit"  # the later draft's one field: "name";r=remaining;t=reset, one item a policy
_X = "x-"  # the older fields: x-ratelimit-limit, x-ratelimit-remaining, x-ratelimit-reset
_WHOLE = re.compile(r"\s*([0-9]{1,15})\s*")
_MOST_ITEMS = 16  # policies read of one field: more is no service's budget
PACED_UP_TO = 60  # seconds: a policy over a longer window counts requests left, it does not pace them


@dataclass(frozen=True)
class Stated:
    """What an answer states of the key's budget, its tightest policy kept: requests a second it
    allows (None: it names no rate), requests left, seconds until that policy's window resets (None:
    not stated). ``remaining`` 0: a policy has none left, and ``reset`` is when it has again."""

    rate: float | None
    remaining: int | None
    reset: float | None


def stated(header: Callable[[str], str | None], wall: float, date: float | None = None) -> Stated | None:
    """The budget ``header`` (an answer's header by name) states; None when it states none. ``wall``:
    the wall clock now (seconds since the epoch); ``date``: the answer's Date, when it has one, which
    an epoch reset is counted from."""
    now = date if date is not None else wall
    limit = _whole(header(_LIMIT))
    left: list[tuple[int | None, float | None]] = []  # (requests left, seconds to the reset) of each policy
    remaining, reset = _whole(header(_REMAINING)), _whole(header(_RESET))
    if remaining is not None or reset is not None:
        left.append((remaining, _seconds(reset, now)))
    for item in _items(header(_STRUCTURED)):
        remaining, reset = _whole(item.get("r")), _whole(item.get("t"))
        if remaining is not None or reset is not None:
            left.append((remaining, _seconds(reset, now)))
    if not left and limit is None:
        limit = _whole(header(_X + _LIMIT))
        remaining, reset = _whole(header(_X + _REMAINING)), _whole(header(_X + _RESET))
        if remaining is not None or reset is not None:
            left.append((remaining, _seconds(reset, now)))
    rates = []
    for policy in _items(header(_POLICY)):
        quota, window = _whole(policy.get("q") or policy.get("")), _whole(policy.get("w"))
        if quota and window and window <= PACED_UP_TO:
            rates.append(quota / window)
    if not left and limit is None and not rates:
        return None
    if not rates:  # no quota stated: what is left over the time to its reset, of a short window
        rates = [r / t for r, t in left if r and t and t <= PACED_UP_TO]
    none_left = [t for r, t in left if r == 0 and t]
    if none_left:
        return Stated(min(rates, default=None), 0, max(none_left))
    known = [(r, t) for r, t in left if r is not None]
    fewest, when = min(known, key=lambda item: item[0]) if known else (None, None)
    return Stated(min(rates, default=None), fewest, when)


def _seconds(reset: int | None, now: float) -> float | None:
    """A reset as seconds from now: a number of seconds, or an epoch time (seconds or milliseconds,
    told apart by its size) counted from ``now``."""
    if reset is None or reset <= EPOCH_AFTER:
        return reset
    at = reset / 1000 if reset > MILLIS_AFTER else reset
    return max(0.0, at - now)


def _whole(text: str | None, default: int | None = None) -> int | None:
    if text is None:
        return default
    found = _WHOLE.fullmatch(text)
    return int(found.group(1)) if found is not None else default


def _items(text: str | None) -> list[dict[str, str]]:
    """Each item of a field such as ``20;w=1, 100;w=60`` or ``"burst";q=5;w=1, "day";q=1000;w=86400``:
    its parameters by name (lower case), a bare number under "" (the draft-06 policy's quota)."""
    if not text:
        return []
    items = []
    for item in text.split(",")[:_MOST_ITEMS]:
        found: dict[str, str] = {}
        for part in item.split(";"):
            name, _, value = part.strip().partition("=")
            if value:
                found[name.strip().lower()] = value.strip()
            elif _WHOLE.fullmatch(name):
                found[""] = name.strip()
        items.append(found)
    return items
