"""The point limit (MAX_POINTS): with ``skip_inapplicable=True`` only the (metric, project) pairs
that apply count, as the service's own project list says; without it every pair counts, before any
request."""

from __future__ import annotations

import datetime as dt

import pytest
from client_fakes import FakeClock, constant

import metrics_kit as mk
from metrics_kit import Client, ValidationError
from metrics_kit.client.client import MAX_POINTS
from metrics_kit.client.transports import MockTransport, Request, Response

TOKENOMICS = [
    "circulating_supply_in_native_token",
    "net_dilution_in_native_token",
    "token_emission_in_native_token",
    "token_buyback_in_native_token",
]
LENDERS = [f"lender{i}" for i in range(24)]
COUNT = "swap_transaction_count"
START, END = dt.date(2020, 1, 1), dt.date(2023, 1, 4)  # 1,100 days


def service(request: Request) -> Response:
    if request.path == "/projects":
        projects = [{"project": "token", "kinds": ["tokenomics"], "regular_pools": False}]
        projects += [{"project": name, "kinds": ["lending"], "regular_pools": False} for name in LENDERS]
        return Response(200, json={"projects": projects})
    return constant(1)(request)


def test_only_the_pairs_that_apply_count_when_the_others_are_skipped():
    assert 4 * 1100 <= MAX_POINTS < 100 * 1100  # 4 applicable pairs of 100
    transport = MockTransport(service)
    with Client(transport=transport, cache=False, progress=False, clock=FakeClock()) as client:
        long = client.frame(TOKENOMICS, ["token", *LENDERS], START, END, shape="long", skip_inapplicable=True)
        assert len(long) == 4 * 1100  # was: refused, "110,000 points (100 metric and project pairs x 1,100 ...)"
        asked = len(transport.requests)
        with pytest.raises(ValidationError, match="110,000 points") as caught:
            client.frame(TOKENOMICS, ["token", *LENDERS], START, END, shape="long")
        assert "100 metric and project pairs" in str(caught.value)
        assert len(transport.requests) == asked  # without skipping: refused before any request


def test_too_many_applicable_pairs_are_refused_after_discovery_and_before_any_value():
    transport = MockTransport(service)
    with Client(transport=transport, cache=False, progress=False, clock=FakeClock()) as client:
        with pytest.raises(ValidationError, match=r"4 applicable metric and project pairs x 36,525 1_day periods"):
            client.frame(TOKENOMICS, ["token", *LENDERS], "1925-01-01", "2024-12-31", skip_inapplicable=True)
        assert [r.path for r in transport.requests] == ["/projects"]
        # A range too long for even one pair is refused before any request at all.
        with pytest.raises(ValidationError, match="3,652,059 points"):
            client.frame(TOKENOMICS, "token", "0001-01-01", "9999-12-31", skip_inapplicable=True)
        assert [r.path for r in transport.requests] == ["/projects"]


def test_a_huge_range_is_refused_before_any_request():
    transport = MockTransport(constant(1))
    with Client(transport=transport, cache=False, progress=False) as client:
        with pytest.raises(mk.ValidationError, match="3,652,059 points") as caught:
            client.series(COUNT, "demoswap", "0001-01-01", "9999-12-31", "1_day")  # was: 3.65 million requests
        assert "100,000" in str(caught.value) and "coarser granularity" in str(caught.value)
        with pytest.raises(mk.ValidationError, match="at most 100,000"):
            client.frame([COUNT, "swap_active_users"], ["demoswap"], "0001-01-01", "2099-12-31", "1_day")
        assert transport.requests == []  # not even discovery: past what even a whole-series service is asked
        # Past the per-value limit but within the whole-series one: only discovery is asked (does the
        # service answer whole series?); this one does not, so no value is asked either.
        with pytest.raises(mk.ValidationError, match="at most 100,000"):
            client.frame([COUNT, "swap_active_users"], ["demoswap"], "1900-01-01", "2099-12-31", "1_day")
        assert [r.path for r in transport.requests] == ["/projects"]
        assert len(client.series(COUNT, "demoswap", "2000-01-01", "2025-12-31", "1_month")) == 312
    assert MAX_POINTS == 100_000  # as docs/client.md says
