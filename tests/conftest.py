"""Test isolation: no developer setting leaks in, and nothing is written to the user's cache."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

_saved_environment: dict[str, str] = {}
_session_cache_dir: str | None = None


def pytest_configure(config):
    """Before anything runs, and so before nbval starts the notebooks' kernels (which inherit this
    process's environment, and which the fixtures below do not reach): no METRICS_KIT_* setting of
    the developer's (so the notebooks' defaults run offline against the embedded default), and a
    private cache folder. Also finds the nbval sanitize file when pytest runs from elsewhere."""
    global _session_cache_dir
    _saved_environment.update({k: v for k, v in os.environ.items() if k.startswith("METRICS_KIT_")})
    for name in _saved_environment:
        del os.environ[name]
    _session_cache_dir = tempfile.mkdtemp(prefix="metrics-kit-test-cache-")
    os.environ["METRICS_KIT_CACHE_DIR"] = _session_cache_dir
    sanitize = getattr(config.option, "nbval_sanitize_with", None)
    if sanitize and not Path(sanitize).is_absolute() and not Path(sanitize).exists():
        config.option.nbval_sanitize_with = str(config.rootpath / sanitize)


def pytest_unconfigure(config):
    os.environ.pop("METRICS_KIT_CACHE_DIR", None)
    os.environ.update(_saved_environment)
    _saved_environment.clear()
    if _session_cache_dir:
        shutil.rmtree(_session_cache_dir, ignore_errors=True)


@pytest.fixture(autouse=True, scope="session")
def _isolated_environment(tmp_path_factory):
    saved = {k: v for k, v in os.environ.items() if k.startswith("METRICS_KIT_")}
    for name in saved:
        del os.environ[name]
    os.environ["METRICS_KIT_CACHE_DIR"] = str(tmp_path_factory.mktemp("metrics-kit-cache"))
    yield
    del os.environ["METRICS_KIT_CACHE_DIR"]
    os.environ.update(saved)
