"""Test isolation: no developer setting leaks in, and nothing is written to the user's cache. And
each test's kind (unit, service, notebooks, browser, spark) as a marker, so `pytest -m unit` works."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

KINDS = ("unit", "service", "notebooks", "browser", "spark")
# A test file in tests/<kind>/ is of that kind; so is every notebook nbval collects in notebooks/.

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


def kind_of(path: Path, rootdir: Path) -> str | None:
    """The kind of the test file at ``path``, by its folder; None outside tests/<kind>/ and notebooks/."""
    try:
        parts = path.resolve().relative_to(rootdir.resolve()).parts
    except ValueError:
        return None
    if parts[0] == "notebooks":
        return "notebooks"
    if parts[0] != "tests" or len(parts) < 3:
        return None
    return parts[1] if parts[1] in KINDS else None


def pytest_collection_modifyitems(config, items):
    """Mark every test with its kind. A test file of no known kind stops the run: put it in
    tests/<kind>/."""
    unknown = set()
    for item in items:
        kind = kind_of(item.path, config.rootpath)
        if kind is None:
            unknown.add(str(item.path))
        else:
            item.add_marker(kind)
    if unknown:
        raise pytest.UsageError(
            f"test files of no kind: {sorted(unknown)}; move each into tests/<kind>/, kind one of {KINDS}"
        )
