"""Pacing against the real reference service limiting the key (``metrics-kit serve --rate-limit``),
one value per request: the budget its answers state (RateLimit-* headers) is kept, so the server
refuses (almost) nothing; without the headers (``--no-rate-limit-headers``) the client learns the
limit from the 429s and still gets every value. The 429s are counted by the server (its access log)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from support import ServerProcess

from metrics_kit import Client

GOLDEN = Path(__file__).parents[1] / "golden" / "data"
RATE = 10  # requests a second the server allows the key
# 2 series x 30 days = 60 requests (whole_series=False), six seconds of the key's budget.
METRICS, PROJECT, START, END = ["swap_transaction_count", "swap_active_users"], "swapx", "2024-12-28", "2025-01-26"


def _refused(server: ServerProcess) -> int:
    """The 429 answers in the server's access log, once every request made so far is in it."""
    token = uuid.uuid4().hex
    for _ in range(50):  # the marker itself may be refused by the limit: asked until it goes through
        if server.get("/projects", {"mark": token}).status_code == 200:
            break
        time.sleep(0.2)
    deadline = time.monotonic() + 10
    while not any(token in line for line in list(server.output)):
        assert time.monotonic() < deadline, "the marker request never reached the access log"
        time.sleep(0.01)
    return sum('" 429' in line for line in list(server.output) if "/metrics" in line)


@pytest.mark.parametrize("stated", [True, False], ids=["headers", "no_headers"])
def test_a_limited_key_gets_every_value_within_its_budget(tmp_path, stated):
    flags = ["--rate-limit", str(RATE), "--access-log"] + ([] if stated else ["--no-rate-limit-headers"])
    with ServerProcess(GOLDEN, *flags, cache_dir=tmp_path / "server") as server:
        with Client(base_url=server.base_url, api_key=server.key, cache=False, whole_series=False) as client:
            frame = client.frame(METRICS, PROJECT, START, END, shape="long")
        refused = _refused(server)
    assert len(frame) == 60 and "failed" not in frame.attrs
    if stated:
        assert refused <= 1  # kept within the stated budget (the client before this change: dozens)
    else:
        assert refused <= 15  # learnt from the first 429s: far fewer than one a request
