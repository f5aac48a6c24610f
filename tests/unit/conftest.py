"""Fixtures the client unit tests share."""

from __future__ import annotations

import pytest

from metrics_kit.client import api, settings


@pytest.fixture
def fresh_default(monkeypatch):
    """The default client of mk.* as if nothing had been configured, and put back afterwards."""
    monkeypatch.setattr(api, "_default", None)
    monkeypatch.setattr(api, "_made_from", None)
    monkeypatch.setattr(api, "_arguments", {})
    monkeypatch.setattr(api, "_configured", {}, raising=False)
    monkeypatch.setattr(settings, "_noticed", set())
    yield
    if api._default is not None:
        api._default.close()
