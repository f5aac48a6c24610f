"""A key's rate limit as a service states it in an answer's headers, read.

Three families of fields say it:

- the IETF httpapi draft's fields (draft-ietf-httpapi-ratelimit-headers up to -06):
  ``RateLimit-Limit``, ``RateLimit-Remaining``, ``RateLimit-Reset`` (a number of seconds) and
  ``RateLimit-Policy: 20;w=1`` (20 requests a window of 1 second);
- the draft's later structured fields: ``RateLimit: "default";r=5;t=1`` (5 left, reset in 1 second)
  with ``RateLimit-Policy: "default";q=20;w=1``;
- the older ``X-RateLimit-Limit``, ``X-RateLimit-Remaining``, ``X-RateLimit-Reset``, whose reset is
  either seconds or an epoch time (GitHub's, say): a value larger than a year of seconds is an
  epoch time, and is counted from the answer's ``Date`` (else the wall clock).

What is read: the requests a second the policy allows (quota / window), the requests left and the
seconds until the window resets. A field that cannot be read is left out, never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from metrics_kit.spec import wire

__all__ = ["Stated", "stated"]

# A reset above this many seconds (a year) is an epoch time, not a number of seconds.
EPOCH_AFTER = 365 * 24 * 3600
_LIMIT, _REMAINING, _RESET, _POLICY = (
    wire.RATELIMIT_LIMIT_HEADER,
    wire.RATELIMIT_REMAINING_HEADER,
    wire.RATELIMIT_RESET_HEADER,
    wire.RATELIMIT_POLICY_HEADER,
)
_STRUCTURED = "ratelimit"  # the later draft's one field: "name";r=remaining;t=reset
_X = "x-"  # the older fields: x-ratelimit-limit, x-ratelimit-remaining, x-ratelimit-reset
_WHOLE = re.compile(r"\s*([0-9]{1,15})\s*")


@dataclass(frozen=True)
class Stated:
    """What an answer states of the key's budget: requests a second its policy allows (None: it
    names no window), requests left, seconds until the window resets (None: not stated)."""

    rate: float | None
    remaining: int | None
    reset: float | None


def stated(header: Callable[[str], str | None], wall: float, date: float | None = None) -> Stated | None:
    """The budget ``header`` (an answer's header by name) states; None when it states none. ``wall``:
    the wall clock now (seconds since the epoch); ``date``: the answer's Date, when it has one, which
    an epoch reset is counted from."""
    limit = _whole(header(_LIMIT))
    remaining = _whole(header(_REMAINING))
    reset = _whole(header(_RESET))
    structured = _parameters(header(_STRUCTURED))
    if structured:
        remaining = _whole(structured.get("r"), remaining)
        reset = _whole(structured.get("t"), reset)
    epoch = False
    if remaining is None and reset is None and limit is None:
        limit = _whole(header(_X + _LIMIT))
        remaining = _whole(header(_X + _REMAINING))
        reset = _whole(header(_X + _RESET))
        epoch = reset is not None and reset > EPOCH_AFTER
    policy = _parameters(header(_POLICY))
    quota = _whole(policy.get("q") or policy.get(""), None)
    window = _whole(policy.get("w"), None)
    if remaining is None and reset is None and limit is None and quota is None:
        return None
    seconds: float | None = reset
    if epoch and reset is not None:
        seconds = max(0.0, reset - (date if date is not None else wall))
    rate = quota / window if quota is not None and window else None
    return Stated(rate, remaining, seconds)


def _whole(text: str | None, default: int | None = None) -> int | None:
    if text is None:
        return default
    found = _WHOLE.fullmatch(text)
    return int(found.group(1)) if found is not None else default


def _parameters(text: str | None) -> dict[str, str]:
    """The first item of a field such as ``20;w=1`` or ``"default";q=20;w=1``: its parameters by
    name, a bare number under "" (the draft-06 policy's quota)."""
    if not text:
        return {}
    item = text.split(",")[0]
    found: dict[str, str] = {}
    for part in item.split(";"):
        name, _, value = part.strip().partition("=")
        if value:
            found[name.strip().lower()] = value.strip()
        elif _WHOLE.fullmatch(name):
            found[""] = name.strip()
    return found
