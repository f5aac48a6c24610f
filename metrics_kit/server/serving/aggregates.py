"""Aggregates: every metric value of a data set with its meta, as the build writes them (one Parquet
file, ``Aggregates.save``) and the service reads them (``Aggregates.read``); looked up in O(1).

What serving needs of a build, and nothing more: ``metrics-kit serve --aggregates FILE`` reads a
file written by ``metrics-kit build --out`` (:func:`read_prebuilt`) without loading the build's
modules (``building/``), DuckDB or Ibis. The aggregates' catalogue key (:func:`catalogue_key`)
names the metric definitions they were computed with, so aggregates of other definitions are
refused, never served stale.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from metrics_kit import files
from metrics_kit.errors import ConfigurationError
from metrics_kit.server.data.sources import find_sources, fingerprint
from metrics_kit.spec.calendar import GRANULARITIES, period_bounds, period_index, period_starts
from metrics_kit.spec.catalogue import Catalogue, default_catalogue

# Bump when the engine's results change for the same data and catalogue (``building/``): it is part
# of the catalogue key, so aggregates computed before are built again, and prebuilt ones refused.
ENGINE_VERSION = 1


class Aggregates:
    """Every value of a data set, with its meta: the coverage, the projects, the time of the last
    event (``last_event``), the watermark its data folder declared (``watermark``) and how it was
    built. Whether a period is complete is not here: it depends on the time of asking
    (``server/serving/completeness.py``)."""

    def __init__(self, meta: dict, values: dict[tuple[str, str, str], list]):
        self.meta = meta
        self.values = values
        self.projects: dict[str, dict] = meta["projects"]
        coverage = meta["coverage"]
        self.coverage: tuple[dt.date, dt.date] | None = None
        if coverage is not None:
            self.coverage = (dt.date.fromisoformat(coverage[0]), dt.date.fromisoformat(coverage[1]))
        # Per granularity, each period's (start, end) as ISO dates, worked out once rather than per request.
        self.periods: dict[str, list[tuple[str, str]]] = {}
        if self.coverage is not None:
            first, last = self.coverage
            for granularity in GRANULARITIES:
                self.periods[granularity] = [
                    (start.isoformat(), end.isoformat())
                    for start, end in (period_bounds(s, granularity) for s in period_starts(first, last, granularity))
                ]

    @property
    def last_event(self) -> dt.datetime | None:
        """The time of the last event (aware, UTC); None without events or in aggregates built before
        it was recorded (their coverage's last day is then all that is known)."""
        text = self.meta.get("last_event")
        return None if text is None else dt.datetime.fromisoformat(text).astimezone(dt.UTC)

    @property
    def declared_watermark(self) -> dt.datetime | None:
        """The watermark the data folder declared when these aggregates were built (watermark.json)."""
        text = self.meta.get("watermark")
        return None if text is None else dt.datetime.fromisoformat(text).astimezone(dt.UTC)

    def find(self, metric: str, project: str, granularity: str, day: dt.date):
        """(value, period_start, period_end, index) of the period containing ``day``, with ISO dates
        and the period's index in coverage; None when that period is outside coverage or the
        series does not exist."""
        series = self.values.get((metric, project, granularity))
        if series is None or self.coverage is None:  # no coverage: no series either
            return None
        i = period_index(day, self.coverage[0], granularity)
        if not 0 <= i < len(series):
            return None
        return (series[i], *self.periods[granularity][i], i)

    # -- persistence ---------------------------------------------------------------------------

    def save(self, path: Path) -> None:
        keys = list(self.values)
        lengths = [len(self.values[k]) for k in keys]
        table = pa.table(
            {
                "metric": pa.array([k[0] for k in keys]).dictionary_encode(),
                "project": pa.array([k[1] for k in keys]).dictionary_encode(),
                "granularity": pa.array([k[2] for k in keys]).dictionary_encode(),
                "values": pa.array(
                    [np.asarray(self.values[k], dtype="float64") for k in keys], type=pa.list_(pa.float64())
                ),
                "length": pa.array(lengths, pa.int32()),
            }
        ).replace_schema_metadata({"metrics_kit": json.dumps(self.meta)})
        with files.atomic_write(path) as tmp:
            pq.write_table(table, tmp)

    @classmethod
    def read(cls, path: Path) -> Aggregates:
        table = pq.ParquetFile(path).read()  # read_table would import pyarrow.dataset, a slow import
        meta = json.loads(table.schema.metadata[b"metrics_kit"])
        counts = set(meta["count_metrics"])
        values = {}
        for metric, project, granularity, series in zip(
            table["metric"].to_pylist(),
            table["project"].to_pylist(),
            table["granularity"].to_pylist(),
            table["values"].to_pylist(),
            strict=True,
        ):
            values[metric, project, granularity] = [int(v) for v in series] if metric in counts else series
        return cls(meta, values)


def catalogue_key(catalogue: Catalogue) -> str:
    """Changes when what any metric computes changes. Built from sorted plain values: the repr of a
    frozenset follows the per-process string hash seed, so two runs would disagree."""
    canonical = [
        [
            m.name,
            list(m.families),
            m.unit,
            m.aggregation,
            m.source,
            sorted([k, sorted(v)] for k, v in m.select.items()),
            list(m.aliases),
            sorted(m.kinds),
            m.regular_pools_only,
        ]
        for m in catalogue
    ]
    text = json.dumps([sorted(canonical), ENGINE_VERSION])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cache_path(fingerprint: str, catalogue: Catalogue) -> Path:
    """Where the aggregates of the data set of ``fingerprint`` are kept, for ``catalogue``."""
    return files.cache_dir() / "aggregates" / f"{fingerprint}-{catalogue_key(catalogue)}.parquet"


def cached(
    data_dir: str | os.PathLike, catalogue: Catalogue, *, log: Callable[[str], Any] = print
) -> Aggregates | None:
    """The aggregates a build saved of ``data_dir`` as it is now; None when there are none, or
    when they cannot be read (a damaged file is built again, never fatal)."""
    # The fingerprint needs only file names, sizes and times: unchanged data is neither validated
    # nor scanned again.
    path = cache_path(fingerprint(find_sources(Path(data_dir))), catalogue)
    if not path.exists():
        return None
    try:
        aggregates = Aggregates.read(path)
    except Exception as exc:
        log(f"Rebuilding unreadable aggregates {path.name}: {exc}")
        return None
    log(f"Using aggregates built {aggregates.meta['built_at']} ({path.name})")
    return aggregates


def read_prebuilt(aggregates_file: Path, chain_unit: str | None = None) -> tuple[Aggregates, Catalogue]:
    """Aggregates written by ``metrics-kit build --out`` and the catalogue they were built for
    (``metrics-kit serve --aggregates``): refused, never served stale, if this version's catalogue
    differs from theirs."""
    try:
        aggregates = Aggregates.read(aggregates_file)
    except FileNotFoundError:
        raise ConfigurationError(
            f"aggregates_file={aggregates_file}: no such file; write one with metrics-kit build --out",
            argument="aggregates_file",
        ) from None
    except Exception as exc:
        raise ConfigurationError(
            f"aggregates_file={aggregates_file}: not an aggregates file of metrics-kit build --out "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'unreadable'})",
            argument="aggregates_file",
        ) from None
    unit = aggregates.meta["chain_unit"]
    if chain_unit is not None and chain_unit != unit:
        raise ConfigurationError(
            f"chain_unit={chain_unit}: {aggregates_file} was built with chain unit {unit}", argument="chain_unit"
        )
    catalogue = default_catalogue(unit)
    if aggregates.meta.get("catalogue_key") != catalogue_key(catalogue):
        raise ConfigurationError(
            f"aggregates_file={aggregates_file}: built for other metric definitions than this version of "
            "metrics-kit has; build it again with metrics-kit build --out",
            argument="aggregates_file",
        )
    return aggregates, catalogue
