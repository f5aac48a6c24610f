"""The service's own list of its projects (``GET /projects``), where it offers one.

The specification does not require it, so nothing depends on it: with it, an unknown project or a
metric that does not apply to a project is a ValidationError before any ``/metrics`` request;
without it, the service's answers say so.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from metrics_kit.client.transports import Transport
from metrics_kit.errors import TransportError, ValidationError
from metrics_kit.spec import wire
from metrics_kit.spec.catalogue import Metric

log = logging.getLogger("metrics_kit.client")
Projects = dict[str, dict[str, Any]]


class Discovery:
    """Asks once; an answer (a list, or "not offered") stands, no answer is asked again next time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._asked = False
        self._projects: Projects | None = None

    def projects(self, transport: Transport) -> Projects | None:
        """{project: {kinds, regular_pools, coverage, metrics}}, or None when not offered."""
        with self._lock:
            if not self._asked:
                try:
                    reply = transport.get("/projects", {})
                except TransportError as error:  # no answer: ask again next time, check nothing now
                    log.debug("project discovery unreachable: %s", error)
                    return None
                if reply.status == 200:
                    try:
                        self._projects = {p["project"]: p for p in wire._loads(reply.body)["projects"]}
                    except (ValueError, KeyError, TypeError) as error:
                        log.debug("project discovery unreadable: %s", error)
                self._asked = True
            return self._projects

    def check(self, transport: Transport, metric: Metric, project: str) -> None:
        """Catch an unknown project, or a metric that does not apply to it, before the network."""
        projects = self.projects(transport)
        if projects is None:
            return
        info = known(projects, project)
        if not metric.applies_to(info["kinds"], info.get("regular_pools", False)):
            raise ValidationError(
                f"{metric.name} does not apply to {project} (of kind "
                f"{', '.join(info['kinds'])}); it applies to {metric.restriction}",
                "metric",
            )


def known(projects: Mapping[str, dict[str, Any]], project: str) -> dict[str, Any]:
    """What the service says of ``project``; a ValidationError listing its projects when it has none such."""
    info = projects.get(project)
    if info is None:
        raise ValidationError(f"unknown project {project!r}; the service has {', '.join(sorted(projects))}", "project")
    return info
