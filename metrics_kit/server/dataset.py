"""Which data set the service serves, in one place: a folder of event exports, prebuilt aggregates
(a file written by ``Aggregates.save``), else the SYNTHETIC demo.

``metrics-kit serve``, the embedded default and ``metrics-kit lab`` all open their service here,
so the demo data is generated, validated and aggregated the same way for each.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from metrics_kit.errors import ConfigurationError
from metrics_kit.server import build
from metrics_kit.server.service import MetricService
from metrics_kit.spec.catalogue import Catalogue, default_catalogue


def open_service(
    data: str | os.PathLike[str] | None = None,
    catalogue: Catalogue | None = None,
    *,
    rebuild: bool = False,
    log: Callable[[str], Any] = print,
    aggregates_file: str | os.PathLike[str] | None = None,
) -> MetricService:
    """The query layer over ``data``'s aggregates (built once per data set, then read from the cache).

    With ``data`` None it serves the synthetic demo data set, generating it on first use. With
    ``aggregates_file`` it serves those prebuilt aggregates instead (no event data, no build), for
    the catalogue they were built for: refused if ``catalogue`` has another chain unit, or if this
    version's metric definitions differ from theirs."""
    if aggregates_file is not None:
        if data is not None or rebuild:
            raise ConfigurationError(
                "aggregates_file= serves prebuilt aggregates: give it without data= and rebuild=",
                setting="aggregates_file",
            )
        chain_unit = None if catalogue is None else catalogue.chain_unit
        prebuilt, catalogue = build.read_prebuilt(Path(aggregates_file), chain_unit)
        log(f"Serving the aggregates {aggregates_file} (built {prebuilt.meta['built_at']})")
        return MetricService(prebuilt, catalogue)
    catalogue = catalogue or default_catalogue()
    if data is None:
        from metrics_kit.server.data import demo

        data = demo.ensure_default()
        log(f"Serving the SYNTHETIC demo data set ({data})")
    aggregates = build.load_or_build(data, catalogue, rebuild=rebuild, log=log)
    return MetricService(aggregates, catalogue, events=Path(data))
