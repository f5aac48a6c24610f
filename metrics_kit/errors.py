"""The one exception tree of metrics_kit::

    MetricsKitError
    ├── ConfigurationError        a setting is missing or wrong (base URL, key, timeouts, cache folder)
    │   └── ClientClosedError     a closed Client was used (it never turns into another client)
    ├── DataFormatError           an event data folder breaks docs/data-format.md
    ├── ValidationError           an argument is wrong; raised before any request
    ├── APIError                  the service answered with an error status
    │   ├── AuthenticationError   401 (no key, or a key the service does not know) and
    │   │                         403 (a known key that may not make this request)
    │   ├── NotFoundError         404
    │   ├── RateLimitError        429 (after the retries)
    │   └── ServerError           5xx (after the retries)
    ├── TransportError            no answer: connection refused or reset, timeout
    ├── ResponseFormatError       an answer that is not a metric value
    ├── MissingValueError         value() of a point the service says it has no value for (null)
    └── FetchError                some points of a range or panel failed (errors="raise")

    PartialDataWarning (a UserWarning): the same, with errors="coerce"; and points without a value (null)
    └── IncompletePeriodWarning   value() of a period that is not complete (its message says why)
    CacheWarning (a UserWarning): a cache write failed (a full disk); the values are returned, not cached
    UnconfirmedDataWarning (a UserWarning): cached values read while the service could not confirm its data version

Every message says what was wrong and what is allowed. An error about one argument or setting names
it in ``argument``, by its Python name (``port``, ``base_url``, ``start``; None when no one argument
is at fault): a program reads which one from there, never from the message, whose wording may
change. ``metrics-kit`` names its flag for it that way. ``ConfigurationError.setting`` is the old
name of ``argument``, kept as a deprecated alias: reading or setting it, or giving the keyword
``setting=``, works and warns (DeprecationWarning).

No message, repr or attribute holds an API key: requests are described by their URL, and the key
travels only in a header; a service's text (an error's message, code and param, the start of a
body, a redirect's Location) is masked for the key in use before it goes into one (Secret.mask),
whatever the service echoes.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from typing import Any


class MetricsKitError(Exception):
    """Root of every error metrics_kit raises on purpose. ``argument`` names the argument or setting
    at fault, when one is."""

    #: The argument or setting at fault, by its Python name (``"port"``, ``"start"``), or None.
    argument: str | None = None


class ConfigurationError(MetricsKitError):
    """A setting is missing or has a value that cannot be used. ``argument`` names it, when one does.

    ``setting`` is its old name: reading or setting it, or giving ``setting=``, warns
    (DeprecationWarning)."""

    def __init__(self, message: str, argument: str | None = None, *, setting: str | None = None):
        if argument is not None and setting is not None:
            raise TypeError("give argument= alone (setting= is its old name)")
        if setting is not None:
            _renamed()
        super().__init__(message)
        self.argument = argument if argument is not None else setting

    @property
    def setting(self) -> str | None:
        """Deprecated: :attr:`argument`."""
        _renamed()
        return self.argument

    @setting.setter
    def setting(self, value: str | None) -> None:
        _renamed()
        self.argument = value


def _renamed() -> None:
    # stacklevel 3: the line that reads or sets ``setting``, not the property.
    warnings.warn(
        "ConfigurationError.setting is deprecated: read .argument, which every MetricsKitError has",
        DeprecationWarning,
        stacklevel=3,
    )


class ClientClosedError(ConfigurationError, RuntimeError):
    """A Client was used after ``close()`` (or after ``configure()`` replaced it as the default).
    A closed client never answers from anywhere: make a new one."""


class DataFormatError(MetricsKitError, ValueError):
    """An event data folder does not follow the data format. ``argument``: the argument that named
    the data (``data``), when the message begins with what it was given."""

    def __init__(self, message: str, argument: str | None = None):
        super().__init__(message)
        self.argument = argument


class ValidationError(MetricsKitError, ValueError):
    """An argument is invalid. ``argument`` names it."""

    def __init__(self, message: str, argument: str | None = None):
        super().__init__(message)
        self.argument = argument


class APIError(MetricsKitError):
    """The service answered with an error status (or a 200 whose body says the request failed, as
    ``{"success": false, "error": "..."}``): its status, code and message, and the request."""

    def __init__(
        self, status: int, message: str, *, code: str | None = None, url: str | None = None, param: str | None = None
    ):
        self.status = status
        self.code = code
        self.message = message
        self.url = url  # never holds the key: it travels in the x-api-key header only
        self.param = param
        where = f" for {url}" if url else ""
        super().__init__(f"{status}{' ' + code if code else ''}: {message}{where}")


class AuthenticationError(APIError):
    """401: the key is missing or not accepted; 403: the key is accepted but may not make this
    request. Both mean "fix the key", so one class; ``status`` tells them apart."""


class NotFoundError(APIError):
    """404: unknown project, metric not offered for it, or a date outside coverage."""


class RateLimitError(APIError):
    """429: still rate limited after the retries. ``retry_after`` is in seconds, if given."""

    def __init__(self, *args: Any, retry_after: float | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.retry_after = retry_after


class ServerError(APIError):
    """5xx: the service failed, still after the retries."""


class TransportError(MetricsKitError):
    """The request got no answer: refused, reset or timed out, still after the retries."""


class ResponseFormatError(MetricsKitError):
    """An answer that cannot be read as a metric value; the message shows its start."""


class MissingValueError(MetricsKitError, LookupError):
    """``value()`` of a point the service answered it has no value for (a ``null`` value): nothing to
    return, and no number is made up. ``reason`` is the service's, when it gave one. ``series()`` and
    ``frame()`` leave such points empty and list them in ``attrs['missing']``, with a PartialDataWarning."""

    def __init__(self, message: str, reason: str | None = None):
        super().__init__(message)
        self.reason = reason


class FetchError(MetricsKitError):
    """Some points of a pull failed. ``failures`` maps each failed point to its exception."""

    def __init__(self, failures: Mapping[Any, BaseException], total: int):
        self.failures = failures
        self.total = total
        lines = [f"  {_point(point)}: {error}" for point, error in list(failures.items())[:20]]
        more = f"\n  ... and {len(failures) - 20} more" if len(failures) > 20 else ""
        super().__init__(
            f"{len(failures)} of {total} points failed "
            "(errors='coerce' returns NaN for them instead):\n" + "\n".join(lines) + more
        )


def _point(point: Iterable[object]) -> str:
    return " ".join(str(part) for part in point)


def for_status(status: int) -> type[APIError]:
    """The APIError subclass for an HTTP status."""
    if status in (401, 403):
        return AuthenticationError
    if status == 404:
        return NotFoundError
    if status == 429:
        return RateLimitError
    if status >= 500:
        return ServerError
    return APIError


class PartialDataWarning(UserWarning):
    """Data that is not all there: some points of a pull failed and are missing (errors='coerce';
    ``attrs['failed']`` lists them), the service has no value for some (``attrs['missing']``, with
    its reasons), or, as IncompletePeriodWarning, a value of a period that is not complete."""


class IncompletePeriodWarning(PartialDataWarning):
    """``value()`` of a period that is not complete, so its value may still change: the period had not
    ended when the value was fetched, or the service flags it not complete (its data do not cover the
    whole period yet). The message says which."""


class CacheWarning(UserWarning):
    """The cache could not be written (a full disk, a file grown past a limit, a file made read-only):
    the pull's values are returned, and what could not be written is fetched again next time."""


class UnconfirmedDataWarning(UserWarning):
    """Values read from the cache under a data version that the service could not confirm (it did not
    answer, or no answer of the pull named the version): they are the data set's as last seen, which
    may have changed since. ``attrs`` of the result say ``data_version_confirmed: False``."""
