"""Where metrics_kit keeps its files: one cache folder, overridable for tests and CI."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

CACHE_DIR_ENV = "METRICS_KIT_CACHE_DIR"


def cache_dir() -> Path:
    """``$METRICS_KIT_CACHE_DIR``, else the user's cache folder (``~/.cache/metrics-kit`` on Linux)."""
    configured = os.environ.get(CACHE_DIR_ENV)
    return Path(configured) if configured else Path(platformdirs.user_cache_dir("metrics-kit"))
