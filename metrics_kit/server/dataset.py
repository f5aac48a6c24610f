"""Which data set the service serves, in one place: a folder of event exports, else the SYNTHETIC demo.

``metrics-kit serve``, the embedded default and ``metrics-kit lab`` all open their service here,
so the demo data is generated, validated and aggregated the same way for each.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from metrics_kit.server import build
from metrics_kit.server.service import MetricService
from metrics_kit.spec.catalogue import Catalogue, default_catalogue


def open_service(
    data: str | os.PathLike[str] | None = None,
    catalogue: Catalogue | None = None,
    *,
    rebuild: bool = False,
    log: Callable[[str], Any] = print,
) -> MetricService:
    """The query layer over ``data``'s aggregates (built once per data set, then read from the cache).

    With ``data`` None it serves the synthetic demo data set, generating it on first use."""
    catalogue = catalogue or default_catalogue()
    if data is None:
        from metrics_kit.server.data import demo

        data = demo.ensure_default()
        log(f"Serving the SYNTHETIC demo data set ({data})")
    aggregates = build.load_or_build(data, catalogue, rebuild=rebuild, log=log)
    return MetricService(aggregates, catalogue)
