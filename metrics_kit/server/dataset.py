"""Which data set the service serves, in one place: a folder of event exports, prebuilt aggregates
(a file written by ``Aggregates.save``), else the SYNTHETIC demo.

``metrics-kit serve``, the embedded default and ``metrics-kit lab`` all open their service here,
so the demo data is generated, validated and aggregated the same way for each.

The one module that joins the build (``building/``) and serving (``serving/``): prebuilt aggregates
and a data folder's cached ones are read by serving alone; only a data folder that needs a build
imports the build's modules (DuckDB, Ibis), when it does.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from metrics_kit.errors import ConfigurationError
from metrics_kit.server.serving.aggregates import cached, read_prebuilt
from metrics_kit.server.serving.completeness import (
    LAG_ENV,
    WATERMARK_FILE,
    Clock,
    clock_from_environment,
    lag_from_environment,
    lag_text,
    read_declaration,
    utc_text,
)
from metrics_kit.server.serving.service import MetricService
from metrics_kit.spec.catalogue import Catalogue, default_catalogue


def open_service(
    data: str | os.PathLike[str] | None = None,
    catalogue: Catalogue | None = None,
    *,
    rebuild: bool = False,
    log: Callable[[str], Any] = print,
    aggregates_file: str | os.PathLike[str] | None = None,
    watermark: dt.datetime | None = None,
    lag: float | None = None,
    clock: Clock | None = None,
) -> MetricService:
    """The query layer over ``data``'s aggregates (built once per data set, then read from the cache).

    With ``data`` None it serves the synthetic demo data set, generating it on first use. With
    ``aggregates_file`` it serves those prebuilt aggregates instead (no event data, no build), for
    the catalogue they were built for: refused if ``catalogue`` has another chain unit, or if this
    version's metric definitions differ from theirs.

    Which periods are complete (``server/serving/completeness.py``): ``watermark`` declares the data's
    watermark (it wins over the data folder's ``watermark.json``, which wins over the one prebuilt
    aggregates recorded); ``lag`` in seconds (None: ``$METRICS_KIT_LAG``, else 0); ``clock`` the
    service's time (None: the system's, or ``$METRICS_KIT_NOW``'s, a testing hook). A lag applies
    to a derived watermark only: given with ``watermark`` it is refused; from ``$METRICS_KIT_LAG``
    with a declared watermark, or given with one the data declares, ``log`` says once that it does
    not apply."""
    if watermark is not None and lag:
        raise ConfigurationError(
            "lag= does not apply with watermark=: a lag holds back the watermark the service derives "
            "from the data and its clock, and a declared watermark says itself what is in; give one of them",
            argument="lag",
        )
    given_lag = "" if lag is not None else f" ({LAG_ENV})"
    lag = lag_from_environment() if lag is None else lag
    clock = clock or clock_from_environment()
    if aggregates_file is not None:
        if data is not None or rebuild:
            raise ConfigurationError(
                "aggregates_file= serves prebuilt aggregates: give it without data= and rebuild=",
                argument="aggregates_file",
            )
        chain_unit = None if catalogue is None else catalogue.chain_unit
        prebuilt, catalogue = read_prebuilt(Path(aggregates_file), chain_unit)
        log(f"Serving the aggregates {aggregates_file} (built {prebuilt.meta['built_at']})")
        declared = watermark or prebuilt.declared_watermark
        where = f"recorded in {Path(aggregates_file).name} from its data folder"
        _lag_unused(log, lag, given_lag, "the one given" if watermark else where, declared)
        return MetricService(prebuilt, catalogue, watermark=declared, lag=lag, clock=clock)
    catalogue = catalogue or default_catalogue()
    again: Callable[[], Path] | None = None
    if data is None:
        from metrics_kit.server.data import demo

        data, again = demo.ensure_default(), demo.ensure_default
        log(f"Serving the SYNTHETIC demo data set ({data})")
    # Read before the data files: a declaration written after new files never claims them.
    declared = watermark or read_declaration(Path(data))
    _lag_unused(log, lag, given_lag, "the one given" if watermark else f"{WATERMARK_FILE} of the data folder", declared)
    aggregates = None if rebuild else cached(data, catalogue, log=log)
    if aggregates is None:
        from metrics_kit.server.building import build  # only a build loads DuckDB and Ibis

        aggregates = build.build_and_save(data, catalogue, rebuild=rebuild, log=log)
    return MetricService(
        aggregates,
        catalogue,
        events=Path(data),
        watermark=declared,
        lag=lag,
        clock=clock,
        events_again=again,
    )


def _lag_unused(log: Callable[[str], Any], lag: float, given: str, where: str, declared: dt.datetime | None) -> None:
    """Say once that a lag does not apply where a watermark is declared (``where``: by whom)."""
    if lag and declared is not None:
        log(
            f"Note: the lag of {lag_text(lag)}{given} does not apply: a watermark is declared "
            f"({where}: {utc_text(declared)}), which says itself what is in; the lag holds back only a "
            "watermark derived from the last event (docs/service.md, Complete periods)"
        )
