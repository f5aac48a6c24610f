"""The cache is filed under the transport's identity: its service and a one-way fingerprint of its
key, the same for every transport of that service and key, never the key itself; two handlers, two
applications or two keys never share a cached value; the embedded default's identity is its data set."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from client_fakes import constant

from metrics_kit import (
    AuthenticationError,
    Client,
)
from metrics_kit.client import settings
from metrics_kit.client.transports import ASGITransport, HTTPTransport, MockTransport
from metrics_kit.embedded import EMBEDDED_URL
from metrics_kit.embedded import transport as embedded_transport

COUNT = "swap_transaction_count"
KEY = "sk_live_4f9a8b7c6d5e4f3a2b1c0d9e"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path))


def test_two_mock_handlers_never_share_cached_values():
    with Client(transport=MockTransport(constant(1))) as one:
        assert one.value(COUNT, "demoswap", "1_day", "2025-01-05") == 1
    with Client(transport=MockTransport(constant(2))) as two:
        assert two.value(COUNT, "demoswap", "1_day", "2025-01-05") == 2
    handler = constant(3)  # the same handler is the same service: its values are found again
    with Client(transport=MockTransport(handler)) as three:
        three.value(COUNT, "demoswap", "1_day", "2025-01-05")
    again = MockTransport(handler)
    with Client(transport=again) as four:
        assert four.value(COUNT, "demoswap", "1_day", "2025-01-05") == 3
    assert "/metrics" not in [r.path for r in again.requests]


def keyed_app(good: str):
    """An ASGI service that answers 7 to the key ``good`` and 401 to any other."""

    async def app(scope, receive, send):
        key = dict(scope["headers"]).get(b"x-api-key", b"").decode()
        if scope["path"] != "/metrics":
            status, body = 404, {"error": {"code": "not_found", "message": "no such path"}}
        elif key != good:
            status, body = 401, {"error": {"code": "unauthorized", "message": "unknown key"}}
        else:
            status, body = 200, {"value": 7, "complete": True}
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": json.dumps(body).encode()})

    return app


def test_an_asgi_client_with_a_wrong_key_gets_a_401_not_another_keys_cached_value():
    app = keyed_app("right-key")
    with Client(transport=ASGITransport(app, "right-key", "asgi://svc")) as right:
        assert right.value(COUNT, "demoswap", "1_day", "2025-01-05") == 7
        identity = right.transport.cache_identity
    with Client(transport=ASGITransport(app, "wrong-key", "asgi://svc")) as wrong:
        with pytest.raises(AuthenticationError):
            wrong.value(COUNT, "demoswap", "1_day", "2025-01-05")
    with Client(transport=ASGITransport(keyed_app("right-key"), "right-key", "asgi://svc")) as other_app:
        assert other_app.transport.cache_identity != identity  # another application


def test_every_transport_files_the_cache_by_service_and_key_fingerprint():
    http = HTTPTransport("http://127.0.0.1:9", KEY)
    try:
        made = Client("http://127.0.0.1:9", KEY)
        assert made.transport.cache_identity == http.cache_identity  # the same service and key
        made.close()
        identities = {
            http.cache_identity,
            HTTPTransport("http://127.0.0.1:9", KEY + "x").cache_identity,
            MockTransport(constant(1), api_key=KEY).cache_identity,
            MockTransport(constant(1), api_key=KEY + "x").cache_identity,
        }
        assert len(identities) == 4 and not any(KEY in identity for identity in identities)
    finally:
        http.close()


def test_the_embedded_identity_is_its_data_set_not_its_per_process_key():
    one, two = embedded_transport(), embedded_transport()
    code = "from metrics_kit.embedded import transport; t = transport(); print(t.cache_identity); t.close()"
    restarted = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    try:
        assert one.cache_identity == two.cache_identity == settings.cache_identity(EMBEDDED_URL, None)
        assert restarted.strip() == one.cache_identity  # a restarted kernel files its values the same
        assert one.synthetic
    finally:
        one.close()
        two.close()
