"""The API key is a Secret from the moment it is read: in no repr, no message, and no local of a
verbose traceback's frames (a malformed key, a key set where the base URL belongs, a mock request, a
transport refused half made); a base URL that holds it, or a key-like part, is refused without
echoing it. (A service that echoes the key: test_secrets_echoed.py.)"""

from __future__ import annotations

import pickle
import traceback

import pytest

import metrics_kit as mk
from metrics_kit import (
    Client,
    ConfigurationError,
)
from metrics_kit.client.settings import Secret
from metrics_kit.client.transports import HTTPTransport, MockTransport, Request, Response

COUNT = "swap_transaction_count"
KEY = "sk_live_4f9a8b7c6d5e4f3a2b1c0d9e"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path))


def verbose(error: BaseException) -> str:
    """The traceback as %xmode Verbose or pytest --showlocals would print it: every frame's locals."""
    return "".join(traceback.TracebackException.from_exception(error, capture_locals=True).format())


@pytest.mark.parametrize("bad", ["\n", " ", "é", "\t"])
def test_a_malformed_key_is_in_no_local_of_the_traceback(bad, fresh_default, monkeypatch):
    with pytest.raises(ConfigurationError, match="visible ASCII") as given:
        Client("http://127.0.0.1:9", KEY + bad)
    monkeypatch.setenv("METRICS_KIT_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("METRICS_KIT_API_KEY", KEY + bad)
    with pytest.raises(ConfigurationError, match="visible ASCII") as from_environment:
        mk.value(COUNT, "demoswap", "1_day", "2025-01-05")
    for caught in (given, from_environment):
        text = verbose(caught.value)
        assert "check_api_key" in text and KEY not in text  # was: check_api_key's local `text`


def test_a_key_set_as_the_base_url_is_in_no_local_of_the_traceback(fresh_default, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_BASE_URL", KEY)  # the two variables swapped
    monkeypatch.setenv("METRICS_KIT_API_KEY", "https://metrics.example.com")
    with pytest.raises(ConfigurationError, match="base_url") as caught:
        mk.value(COUNT, "demoswap", "1_day", "2025-01-05")
    text = verbose(caught.value)
    assert "default_client" in text and KEY not in text  # was: default_client's local `now`


def test_a_mock_request_holds_the_key_in_no_local():
    def refuse(request: Request) -> Response:
        raise mk.TransportError("no answer")

    with Client(transport=MockTransport(refuse, api_key=KEY), cache=False) as client:
        with pytest.raises(mk.TransportError) as caught:
            client.value(COUNT, "demoswap", "1_day", "2025-01-05")
    text = verbose(caught.value)
    assert "MockTransport" in text and KEY not in text  # was: MockTransport.get's local `headers`


@pytest.mark.parametrize("url", ["not a url", "ftp://example.com", "http://127.0.0.1:99999"])
def test_a_refused_transport_can_be_shown_in_a_verbose_traceback(url):

    with pytest.raises(ConfigurationError) as caught:
        HTTPTransport(url, KEY)
    text = verbose(caught.value)  # was: AttributeError from HTTPTransport.__repr__ while formatting it
    assert "HTTPTransport(<not made>)" in text and KEY not in text


@pytest.mark.parametrize(
    "base_url",
    [
        KEY,  # the arguments swapped
        f"https://metrics.example.test/v1?api_key={KEY}",
        f"https://metrics.example.test/v1#{KEY}",
        f"https://metrics.example.test/{KEY}",
        f"metrics.example.test/{KEY}",
    ],
)
def test_a_key_where_the_base_url_belongs_is_never_echoed(base_url, monkeypatch):
    # Refused as a base URL, or (a key-like path segment) for the missing key: never echoed.
    with pytest.raises(ConfigurationError) as caught:
        Client(base_url)
    assert KEY not in str(caught.value)
    assert "metrics.example.test" in str(caught.value) or "://" not in base_url  # the rest of an address is shown
    monkeypatch.setenv("METRICS_KIT_BASE_URL", base_url)
    with pytest.raises(ConfigurationError) as caught:
        Client()
    assert KEY not in str(caught.value)


def test_the_key_itself_in_the_base_url_is_refused_and_masked():
    with pytest.raises(ConfigurationError, match="must not hold the API key") as caught:
        Client("https://metrics.example.test/v1/k-123", "k-123")
    assert "k-123" not in str(caught.value)


def test_the_key_is_a_secret_in_every_repr():
    client = Client("http://127.0.0.1:9", KEY)
    try:
        shown = [repr(client), repr(client.settings), repr(client.settings.connection), repr(client.transport)]
        shown += [str(vars(client)), str(client.settings.connection.api_key), f"{client.settings.connection.api_key}"]
        assert not any(KEY in text for text in shown)
        with pytest.raises(TypeError):
            pickle.dumps(client.settings.connection.api_key)
        assert Secret(KEY) == Secret(KEY) and Secret(KEY) != Secret(KEY + "x")
    finally:
        client.close()
