"""Where a result came from, in its ``attrs``: the service (its address masked), whether its data
is synthetic (the embedded demo's is), and the data version."""

from __future__ import annotations

import pytest
from client_fakes import constant

from metrics_kit import (
    Client,
)
from metrics_kit.client.transports import MockTransport
from metrics_kit.embedded import EMBEDDED_URL

COUNT = "swap_transaction_count"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path))


def test_results_name_their_service_and_data_version():
    transport = MockTransport(constant(5, version="v7"), base_url="https://metrics.example.test/v1")
    with Client(transport=transport, cache=False) as client:
        series = client.series(COUNT, "demoswap", "2025-01-01", "2025-01-02")
        wide = client.frame([COUNT], "demoswap", "2025-01-01", "2025-01-02")
        long = client.frame([COUNT], "demoswap", "2025-01-01", "2025-01-02", shape="long")
    for result in (series, wide, long):
        assert result.attrs["service"] == "https://metrics.example.test/v1"
        assert result.attrs["synthetic"] is False and result.attrs["data_version"] == "v7"


def test_the_embedded_demo_is_marked_synthetic():
    with Client(cache=False) as client:
        series = client.series(COUNT, "demoswap", "2025-01-01", "2025-01-02")
    assert series.attrs["service"] == EMBEDDED_URL and series.attrs["synthetic"] is True
    assert isinstance(series.attrs["data_version"], str) and series.attrs["data_version"]
