"""Test isolation: no developer setting leaks in, and nothing is written to the user's cache."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def _isolated_environment(tmp_path_factory):
    saved = {k: v for k, v in os.environ.items() if k.startswith("METRICS_KIT_")}
    for name in saved:
        del os.environ[name]
    os.environ["METRICS_KIT_CACHE_DIR"] = str(tmp_path_factory.mktemp("metrics-kit-cache"))
    yield
    del os.environ["METRICS_KIT_CACHE_DIR"]
    os.environ.update(saved)
