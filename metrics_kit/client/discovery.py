"""What the client knows of the service: the data version it answers from, and its own list of its
projects (``GET /projects``), where it offers one.

The data version (``X-Data-Version`` on every answer, ``data_version`` in ``/projects``) files the
cache: values are read only under the version the client trusts. A version is trusted for
``version_ttl`` seconds after it was last seen, in any answer; after that, one ``GET /projects``
asks again (and brings the projects under that version). Only a version this client saw itself is
trusted: its first pull asks, whatever another process saw (the service may have restarted on other
data at the same address). The version, when it was seen and the projects are kept in the cache
too, read only when the service cannot be reached (untrusted). A service that names no version has
the version ``""``.

A service whose ``/projects`` names no version (it offers none: a 404, or refuses it: a 401 or 403,
without the header) names it, if at all, in its ``/metrics`` answers only: then the version is
learnt from them. Until an answer has confirmed it within ``version_ttl``, the version the client
last saw (or the cache file's) is only a candidate (:meth:`Discovery.needs_confirming`): the client
reads cached values under it only once an answer of the pull names it (see ``Client.fetch``).

Discovery is not required by the specification, so nothing depends on it: with it, an unknown
project or a metric that does not apply to a project is a ValidationError before any ``/metrics``
request; without it, the service's answers say so.

What the cache keeps of the service is only what the client uses, and none of the service's text
that holds the key: the version as :func:`~metrics_kit.client.fetching.kept_version` keeps it, and
the projects' used fields (``wire.PROJECT_FIELDS``), left out altogether (not asked, then) when the
key is in any of them.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import threading
from collections.abc import Callable, Mapping
from typing import Any

from metrics_kit.client.cache import ValueCache
from metrics_kit.client.checks import shown_request
from metrics_kit.client.fetching import detached, error_of, kept_version, version_of
from metrics_kit.client.transports import Reply, Transport
from metrics_kit.errors import APIError, ResponseFormatError, TransportError, ValidationError
from metrics_kit.spec import wire
from metrics_kit.spec.catalogue import Metric

log = logging.getLogger("metrics_kit.client")
Mask = Callable[[str], str]
Projects = dict[str, dict[str, Any]]  # {project: {kinds, regular_pools, coverage, metrics}}


class ProjectList(Projects):
    """The service's projects, as its ``/projects`` listed them (a :data:`Projects` dict), with
    ``mask``: what hides the key in the service's text before a message shows it (the names and kinds
    are the service's words). Every message about them is made here (:meth:`known`, :meth:`shown`),
    so that each one masks them. A copy or a pickle is a plain dict."""

    def __init__(self, listed: Mapping[str, dict[str, Any]], mask: Mask = str) -> None:
        super().__init__(listed)
        self.mask = mask

    def __reduce__(self) -> Any:
        return dict, (dict(self),)

    def known(self, project: str) -> dict[str, Any]:
        """What the service says of ``project``; a ValidationError listing its projects (masked)
        when it has none such."""
        info = self.get(project)
        if info is None:
            raise ValidationError(f"unknown project {project!r}; the service has {self.shown(sorted(self))}", "project")
        return info

    def shown(self, words: list[str]) -> str:
        """The service's ``words`` (a project's kinds, its project names) for a message: joined, masked."""
        return self.mask(", ".join(words))


class Discovery:
    """The trusted data version and the projects under it, asked of the service only when not trusted.

    An answer to ``GET /projects`` (a list, or "not offered") stands for the version it came with,
    and for ``version_ttl``; one that names no version leaves the version to the ``/metrics``
    answers. No answer (a transport error, a 429 or a 5xx) is asked again next time, and meanwhile
    the last known version, trusted or not, is used."""

    def __init__(self, clock: Callable[[], float], version_ttl: float) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._ttl = version_ttl
        self._version: str | None = None
        self._seen_at = -math.inf
        self._asked = False  # whether _projects is the service's answer under _version
        self._asked_at = -math.inf  # when /projects last answered
        self._projects: ProjectList | None = None
        # Whether the service itself answered the last time it was asked (False: the version is
        # the one last seen, or the cache file's, while the service did not answer).
        self._confirmed = False
        self._mask: Mask = str  # hides the key in the service's words (the last answer's)
        # Whether /projects names no version, which the /metrics answers then name.
        self._from_answers = False
        self._last_event: dt.datetime | None = None  # the data's last event, as /projects last said
        # The most periods of a GET /series page, as /projects last said (None: not advertised, or
        # not asked of the service by this client: it is never taken from the cache file).
        self._series: int | None = None
        # The last /projects answer when it refused the key (401 or 403): what projects() says.
        self._refused: Reply | None = None

    def version(self, transport: Transport, cache: ValueCache | None) -> str | None:
        """The data version to read cached values under: a trusted one, else asked for; None when no
        version is known and the service cannot be reached."""
        with self._lock:
            self._refresh(transport, cache, need_projects=False)
            return self._version

    def needs_confirming(self) -> bool:
        """Whether the version must be named by an answer of the pull before cached values are read
        under it: the service names it only in its /metrics answers, and none named it within
        ``version_ttl`` (a service whose answers name no version has the version "", which never changes)."""
        with self._lock:
            return self._from_answers and bool(self._version) and not self._trusted()

    def projects(self, transport: Transport, cache: ValueCache | None = None) -> ProjectList | None:
        """{project: {kinds, regular_pools, coverage, metrics}}, or None when not offered (or unreachable)."""
        with self._lock:
            self._refresh(transport, cache, need_projects=True)
            return self._projects if self._asked else None

    def series_limit(self, transport: Transport, cache: ValueCache | None = None) -> int | None:
        """The most periods of a ``GET /series`` page, when the service's ``/projects`` advertises it
        in an answer this client received (``wire.series_offered``); None when it does not, or could
        not be asked (the client then asks one value per request). The cache file never says so: a
        service seen only through it is asked one value per request."""
        with self._lock:
            self._refresh(transport, cache, need_projects=True)
            return self._series if self._asked else None

    def refusal(self) -> APIError | None:
        """The error the service's last ``/projects`` answer stands for when it refused the key (a 401
        or a 403), masked; None when it did not."""
        with self._lock:
            refused = self._refused
        if refused is None:
            return None
        return error_of(refused, shown_request(refused.url))

    def last_event(self) -> dt.datetime | None:
        """The time of the data's last event, as the service's ``/projects`` last said it (None when it
        did not, or was not asked)."""
        with self._lock:
            return self._last_event

    def confirmed(self, version: str) -> bool:
        """Whether ``version`` is the one the service answered from the last time this client asked
        (False: the version last seen, or the cache file's, while the service did not answer or
        named no version)."""
        with self._lock:
            return self._version == version and self._confirmed

    def saw(self, version: str, cache: ValueCache | None) -> None:
        """An answer came from data ``version``: trust it from now. Another version than the known one
        forgets the projects of the old one, and (in the cache) its values."""
        with self._lock:
            now = self._clock()
            if version != self._version and self._version is not None:
                log.info(  # the service's text, masked for the log
                    "the service's data version changed from %s to %s", self._mask(self._version), self._mask(version)
                )
                self._projects, self._asked = None, False
            self._version, self._seen_at = version, max(now, self._seen_at)
            self._confirmed = True
        if cache is not None:
            cache.record_version(version, now)

    def check(self, transport: Transport, metric: Metric, project: str, cache: ValueCache | None = None) -> None:
        """Catch an unknown project, or a metric that does not apply to it, before the network. The
        error is raised without the frames that held the service's list (its words, unmasked)."""
        detached(self._check, transport, metric, project, cache)

    def _check(self, transport: Transport, metric: Metric, project: str, cache: ValueCache | None) -> None:
        projects = self.projects(transport, cache)
        if projects is None:
            return
        info = projects.known(project)
        if not metric.applies_to(info["kinds"], info.get("regular_pools", False)):
            raise ValidationError(
                f"{metric.name} does not apply to {project} (of kind {projects.shown(info['kinds'])}); "
                f"it applies to {metric.restriction}",
                "metric",
            )

    # -- under the lock -------------------------------------------------------------------------

    def _trusted(self) -> bool:
        return self._version is not None and self._clock() - self._seen_at <= self._ttl

    def _must_ask(self, need_projects: bool) -> bool:
        if self._from_answers and self._clock() - self._asked_at <= self._ttl:
            # /projects said, less than version_ttl ago, that it names no version (and offers no
            # projects): asking again would tell nothing new; the answers of the pull will.
            return need_projects and not self._asked
        return not (self._trusted() and (self._asked or not need_projects))

    def _refresh(self, transport: Transport, cache: ValueCache | None, *, need_projects: bool) -> None:
        # Only a version this client has seen itself is trusted: another process's (in the cache
        # file) may be of a server since restarted on other data at the same address.
        if self._must_ask(need_projects):
            self._ask(transport, cache)
            if self._version is None and cache is not None:
                self._load(cache)  # no answer: the last version the cache knows, to read it, untrusted
            if self._from_answers:
                # A version the service named is confirmed only by an answer seen within version_ttl;
                # "" (its answers named none) is one that never changes.
                self._confirmed = self._version == "" or self._trusted()

    def _load(self, cache: ValueCache) -> None:
        """Take what the cache file knows (this or another process wrote it), without trusting it:
        the service is asked again next time."""
        stored = cache.known()
        if stored is None:
            return
        self._version, self._seen_at, self._confirmed = stored.version, -math.inf, False
        if not self._from_answers:  # else /projects has just said it offers none
            self._asked = stored.projects is not None
            listed = json.loads(stored.projects) if stored.projects is not None else None  # "null": none offered
            self._projects = ProjectList(listed, self._mask) if isinstance(listed, dict) else None

    def _ask(self, transport: Transport, cache: ValueCache | None) -> None:
        try:
            reply = transport.get(wire.PROJECTS_PATH, {})
        except TransportError as error:
            log.debug("project discovery unreachable: %s", error)
            self._confirmed = False
            return
        if reply.status == 429 or reply.status >= 500:
            log.debug("project discovery answered %s; asking again later", reply.status)
            self._confirmed = False
            return
        now = self._clock()
        version = version_of(reply)
        self._mask = reply.mask
        self._refused = reply if reply.status in (401, 403) else None
        if reply.status != 200 and version is None:
            # No /projects, or refused, and no version with it: the service names its version, if
            # at all, in its /metrics answers. The version last seen stays, to be confirmed by them.
            log.debug("project discovery answered %s without a data version", reply.status)
            self._projects, self._asked, self._asked_at = None, True, now
            self._from_answers, self._series = True, None
            return
        projects: ProjectList | None = None
        last_event = series = None
        if reply.status == 200:
            try:
                answer = wire.projects_answer(reply.body)
            except ResponseFormatError as error:
                log.debug("project discovery unreadable: %s", error)
            else:
                projects = ProjectList(answer.projects, reply.mask)
                version = kept_version(answer.data_version, reply.mask) if version is None else version
                last_event = answer.last_event
                series = answer.series_limit
        version = version or ""
        if version != self._version and self._version is not None:  # the service's text, masked for the log
            log.info("the service's data version changed from %s to %s", reply.mask(self._version), reply.mask(version))
        self._version, self._seen_at, self._projects, self._asked = version, now, projects, True
        self._asked_at, self._from_answers, self._confirmed = now, False, True
        self._last_event, self._series = last_event, series
        if cache is not None:
            cache.record_version(version, now, _kept(projects, reply.mask))


def _kept(projects: ProjectList | None, mask: Mask) -> str | None:
    """What the cache keeps of a /projects answer: its JSON ('null': none offered), or None (not
    asked) when the key is in it, which the mask would change: a project list with the key masked in
    it would name projects the service does not have."""
    text = json.dumps(projects)
    if mask(text) != text:
        log.debug("the service's project list holds the API key: it is not kept in the cache")
        return None
    return text


def listing(projects: Mapping[str, dict[str, Any]]) -> ProjectList:
    """``projects`` as a ProjectList: itself when it is one (Client.discovery's, with its service's
    mask), else a list of them with nothing to mask (one that no service gave)."""
    return projects if isinstance(projects, ProjectList) else ProjectList(projects)
