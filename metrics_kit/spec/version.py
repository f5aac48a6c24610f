"""The package's version, read once from its installed metadata (pyproject.toml is the one place it is
written). The client sends it in its User-Agent, the server in its OpenAPI document."""

from __future__ import annotations

from importlib import metadata


def _installed() -> str:
    try:
        return metadata.version("metrics-kit")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


__version__ = _installed()
