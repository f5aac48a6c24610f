"""A client's life: open until it is closed, then never answering again, from anywhere; the default
client, made from the environment and made again when it changes, replaced by ``mk.configure``
(which keeps the settings it was given, and a key only with its base URL); a transport shared by
two clients; a client that cannot be copied or pickled."""

from __future__ import annotations

import copy
import logging
import pickle
import traceback

import pytest
from client_fakes import constant

import metrics_kit as mk
from metrics_kit import (
    Client,
    ClientClosedError,
    ConfigurationError,
)
from metrics_kit.client import api, settings
from metrics_kit.client.transports import MockTransport

COUNT = "swap_transaction_count"
KEY = "sk_live_4f9a8b7c6d5e4f3a2b1c0d9e"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path))


def verbose(error: BaseException) -> str:
    """The traceback as %xmode Verbose or pytest --showlocals would print it: every frame's locals."""
    return "".join(traceback.TracebackException.from_exception(error, capture_locals=True).format())


def test_a_closed_client_raises_and_never_answers_from_another_service():
    transport = MockTransport(constant(164))
    client = Client(transport=transport, cache=False)
    assert client.value(COUNT, "demoswap", "1_day", "2025-01-05") == 164
    client.close()
    client.close()  # twice is fine
    for use in (
        lambda: client.value(COUNT, "demoswap", "1_day", "2025-01-05"),  # the demo has demoswap: no fallback
        lambda: client.series(COUNT, "demoswap", "2025-01-01", "2025-01-03"),
        lambda: client.projects(),
        lambda: client.clear_cache(),
    ):
        with pytest.raises(ClientClosedError, match=r"was closed with close\(\)"):
            use()
    assert client.base_url == "mock://service" and not client.embedded and client.is_closed
    assert "closed" in repr(client)
    with pytest.raises(ClientClosedError):
        transport.get("/metrics", {})  # the transport refuses too


def test_a_default_client_replaced_by_configure_raises_where_a_reference_is_held(fresh_default):
    mk.configure(transport=MockTransport(constant(1)), cache=False)
    held = mk.default_client()  # as a panel would hold it
    assert held.value(COUNT, "demoswap", "1_day", "2025-01-05") == 1
    mk.configure(transport=MockTransport(constant(2)), cache=False)
    assert mk.value(COUNT, "demoswap", "1_day", "2025-01-05") == 2
    with pytest.raises(ClientClosedError, match=r"mk.configure\(\)"):
        held.value(COUNT, "demoswap", "1_day", "2025-01-05")
    assert held.base_url == "mock://service"


def test_the_default_client_follows_the_environment(fresh_default, monkeypatch):
    first = mk.default_client()
    assert first.embedded
    mk.metrics()  # any use
    monkeypatch.setenv("METRICS_KIT_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("METRICS_KIT_API_KEY", KEY)
    second = mk.default_client()
    assert second.base_url == "http://127.0.0.1:9" and first.is_closed
    assert mk.default_client() is second  # unchanged environment: the same client
    monkeypatch.setenv("METRICS_KIT_API_KEY", KEY + "x")  # another key: another client
    third = mk.default_client()
    assert third is not second and second.is_closed
    monkeypatch.delenv("METRICS_KIT_BASE_URL")
    monkeypatch.delenv("METRICS_KIT_API_KEY")
    assert mk.default_client().embedded and third.is_closed


def test_configure_keeps_the_settings_it_was_given_when_the_environment_changes(fresh_default, monkeypatch):
    mk.configure(workers=3)
    monkeypatch.setenv("METRICS_KIT_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("METRICS_KIT_API_KEY", KEY)
    client = mk.default_client()
    assert client.base_url == "http://127.0.0.1:9" and client.settings.workers == 3


def test_configure_changes_only_what_it_is_given(fresh_default):
    # Hostile round on issue 27, D8: configure(workers=3) after configure(base_url=..., api_key=...)
    # made the default the synthetic demo, which then answered the vendor's question with its numbers.
    first = mk.configure(base_url="http://127.0.0.1:9", api_key=KEY, cache=False)
    tuned = mk.configure(workers=3)
    assert first.is_closed and mk.default_client() is tuned
    assert not tuned.embedded and tuned.base_url == "http://127.0.0.1:9"
    assert tuned.settings.connection.api_key == settings.Secret(KEY)
    assert tuned.settings.workers == 3 and tuned.settings.cache is False  # both kept
    again = mk.configure(cache=True)  # a setting given its default is given all the same
    assert again.settings.cache is True and again.settings.workers == 3 and again.base_url == "http://127.0.0.1:9"
    rekeyed = mk.configure(api_key="another-key-0123456789")  # a key alone: the configured service's key
    assert rekeyed.base_url == "http://127.0.0.1:9"
    assert rekeyed.settings.connection.api_key == settings.Secret("another-key-0123456789")
    with pytest.raises(ConfigurationError, match="base_url"):
        mk.configure(base_url="http://127.0.0.1:10")  # another service: the key does not follow
    assert not rekeyed.is_closed and mk.default_client() is rekeyed  # a refused call changes nothing
    with pytest.raises(ConfigurationError, match="workers"):
        mk.configure(workers=0)
    assert mk.default_client() is rekeyed and api._configured["workers"] == 3
    back = mk.configure(base_url=None)  # the service handed back to the environment: the demo here
    assert back.embedded and back.settings.workers == 3 and "api_key" not in api._arguments


def test_configure_keeps_a_configured_transport_and_answers_from_it(fresh_default):
    transport = MockTransport(constant(41))
    mk.configure(transport=transport, cache=False)
    mk.configure(workers=2)
    assert mk.value(COUNT, "demoswap", "1_day", "2025-01-05") == 41 and not transport.closed  # was: the demo's
    assert mk.default_client().settings.workers == 2


def test_configure_refuses_a_key_whose_base_url_is_left_to_the_environment(fresh_default, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_BASE_URL", "http://127.0.0.1:9")
    with pytest.raises(ConfigurationError, match="give base_url= with api_key=") as caught:
        mk.configure(api_key=KEY)  # was accepted, and the key later sent wherever the variable pointed
    assert caught.value.argument == "api_key" and KEY not in verbose(caught.value)
    monkeypatch.setenv("METRICS_KIT_API_KEY", KEY)
    mk.configure(workers=2)  # settings without a key: made again from the environment when it changes
    monkeypatch.setenv("METRICS_KIT_API_KEY", "another-key-0123456789")
    monkeypatch.setenv("METRICS_KIT_BASE_URL", "http://127.0.0.1:10")
    assert "api_key" not in api._arguments
    client = mk.default_client()
    assert client.base_url == "http://127.0.0.1:10" and client.settings.workers == 2
    assert client.settings.connection.api_key == settings.Secret("another-key-0123456789")


def test_a_key_without_a_base_url_is_refused(fresh_default):
    for make in (lambda: mk.configure(api_key=KEY), lambda: Client(api_key=KEY)):
        with pytest.raises(ConfigurationError, match="without a base URL") as caught:
            make()
        assert caught.value.argument == "api_key" and KEY not in str(caught.value)


def test_a_key_only_in_the_environment_keeps_the_demo_with_one_notice(fresh_default, monkeypatch, caplog):
    monkeypatch.setenv("METRICS_KIT_API_KEY", KEY)
    with caplog.at_level(logging.WARNING, logger="metrics_kit.client"):
        assert Client(cache=False).embedded
        assert Client(cache=False).embedded
    notices = [r.getMessage() for r in caplog.records if "METRICS_KIT_API_KEY is set" in r.getMessage()]
    assert len(notices) == 1  # once per process
    assert "METRICS_KIT_BASE_URL is not" in notices[0] and KEY not in notices[0]


def test_configure_with_the_same_transport_twice_keeps_it_open(fresh_default):
    transport = MockTransport(constant(5))
    first = mk.configure(transport=transport, cache=False)
    mk.configure(transport=transport, cache=False)  # the same cell run again
    assert mk.value(COUNT, "demoswap", "1_day", "2025-01-05") == 5  # was: ClientClosedError, is_closed False
    assert first.is_closed and not mk.default_client().is_closed and not transport.closed
    with pytest.raises(mk.ClientClosedError, match=r"mk.configure\(\)"):
        first.value(COUNT, "demoswap", "1_day", "2025-01-05")
    mk.configure(transport=MockTransport(constant(6)), cache=False)  # another transport: the old one is closed
    assert transport.closed


def test_a_client_whose_shared_transport_another_closed_says_so():
    transport = MockTransport(constant(5))
    one, two = Client(transport=transport, cache=False), Client(transport=transport, cache=False)
    one.close()  # closing a client closes the transport it was given, as httpx does
    with pytest.raises(mk.ClientClosedError, match="closed by another Client that shared it"):
        two.value(COUNT, "demoswap", "1_day", "2025-01-05")
    assert "closed by another" not in str(
        pytest.raises(mk.ClientClosedError, one.value, COUNT, "demoswap", "1_day", "2025-01-05").value
    )


def test_a_client_cannot_be_copied_or_pickled():

    with Client(transport=MockTransport(constant(1)), cache=False) as client:
        for attempt in (copy.copy, copy.deepcopy, pickle.dumps):
            with pytest.raises(TypeError, match="cannot be copied or pickled"):  # copy.copy shared the transport
                attempt(client)
        assert client.value(COUNT, "demoswap", "1_day", "2025-01-05") == 1
    with pytest.raises(TypeError, match="cannot be copied or pickled"):
        copy.deepcopy(Client(cache=False))  # the embedded default: was "cannot pickle '_thread.lock'"
