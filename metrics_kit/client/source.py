"""The service a client's values come from, as every call of the client uses it: one home for the
jobs that ``value``, ``series`` and ``frame`` (client.py) and ``explain`` (explain.py) share.

- :meth:`Source.point` resolves a point: a user's metric, project, granularity and date become a
  checked :class:`~metrics_kit.client.frames.Point` (the metric found in the catalogue, the project
  and granularity checked, the date moved to the first day of its period, and the metric checked to
  apply to the project where the service lists its projects);
- :meth:`Source.attrs` says where a result came from, for its ``attrs`` (``frames.SOURCE``);
- :meth:`Source.settled` makes a pull again while the service's data version changes under it, up
  to VERSION_CHANGES times, then gives up with one message.

A :class:`~metrics_kit.client.client.Client` makes one Source and hands it to explain, which uses
these public parts only, never the client's own. The transport and the cache are the client's, made
on first use and refused once it is closed: the Source asks the client for them each time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from metrics_kit.client.cache import ValueCache
from metrics_kit.client.checks import masked_url
from metrics_kit.client.discovery import Discovery
from metrics_kit.client.frames import Point
from metrics_kit.client.transports import Transport, is_synthetic
from metrics_kit.errors import ResponseFormatError, ValidationError
from metrics_kit.spec import ids
from metrics_kit.spec.calendar import Calendar
from metrics_kit.spec.catalogue import Catalogue, Metric

__all__ = ["VERSION_CHANGES", "Source"]

VERSION_CHANGES = 3  # times the data may change during one pull (or one explain) before it gives up
T = TypeVar("T")


@dataclass(frozen=True, repr=False)
class Source:
    """What a client's calls use of its service: the catalogue and calendar they are asked in, what
    discovery knows of the service, the wall clock, and the client's transport and cache (functions:
    each made on first use, and refused with ClientClosedError once the client is closed).
    ``service`` is the service's address as a message shows it (anything that may be a key masked)."""

    catalogue: Catalogue
    calendar: Calendar
    discovery: Discovery
    clock: Callable[[], float]
    transport: Callable[[], Transport]
    cache: Callable[[], ValueCache | None]
    service: str

    def __repr__(self) -> str:  # short, in a traceback's locals: the catalogue is long
        return f"Source({self.service!r})"

    def metric(self, name: object) -> Metric:
        """The catalogue's metric of a name or alias; a ValidationError with did-you-mean when none."""
        if not isinstance(name, str):
            raise ValidationError(f"metric must be a metric name (a string), not {type(name).__name__}", "metric")
        metric = self.catalogue.get(name.strip())
        if metric is None:
            error = ids.unknown_metric(name, self.catalogue.canonical_names, "metrics_kit.metrics()")
            error.argument = "metric"
            raise error
        return metric

    def check_applies(self, metric: Metric, project: str) -> None:
        """A ValidationError, before any request for values, when the service lists its projects and
        ``project`` is not one of them, or ``metric`` does not apply to it (see Discovery.check)."""
        self.discovery.check(self.transport(), metric, project, self.cache())

    def point(self, metric: object, project: object, granularity: object, date: object) -> Point:
        """The one point of ``metric`` for ``project`` over the period of ``granularity`` that holds
        ``date``, every argument checked (a ValidationError naming the one at fault)."""
        found, checked = self.metric(metric), ids.check_project(project)
        granularity = ids.check_granularity(granularity, synonyms=True)
        day = self.calendar.start(ids.to_date(date, "date"), granularity)
        self.check_applies(found, checked)
        return Point(found.name, checked, granularity, day.isoformat())

    def attrs(self, versions: Iterable[str | None], *, fresh: bool = False) -> dict[str, Any]:
        """Where values came from, for a result's ``attrs``: the service (its address, anything that
        may be a key masked), whether its data is synthetic (the embedded demo's), the data version
        (one, a sorted list when the values span several, None when the service names none) and
        whether the service confirmed it. ``fresh``: every value came from the service just now,
        under these versions (explain's pages), so they are confirmed."""
        transport = self.transport()
        named = sorted({version for version in versions if version})
        return {
            "service": masked_url(transport.base_url) or "(not shown)",
            "synthetic": is_synthetic(transport),
            "data_version": named[0] if len(named) == 1 else (named or None),
            "data_version_confirmed": fresh or all(self.discovery.confirmed(version) for version in named),
        }

    def settled(self, attempt: Callable[[], T | None], during: str) -> T:
        """What ``attempt()`` gives, made again while it gives None (the service's data version
        changed under it: its values would mix two versions), at most VERSION_CHANGES times again;
        then a ResponseFormatError saying how often the data changed ``during`` what."""
        for _ in range(VERSION_CHANGES + 1):
            found = attempt()
            if found is not None:
                return found
        raise ResponseFormatError(
            f"the data of {self.service} changed {VERSION_CHANGES + 1} times {during}; ask again when it stays the same"
        )
