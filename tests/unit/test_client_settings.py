"""Every Client setting is checked when the client is made: a bad one is a ConfigurationError that
names it and says what is allowed. No request is made, nothing is built."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import pytest
from client_fakes import constant, daily_service

import metrics_kit as mk
from metrics_kit import Client, ConfigurationError
from metrics_kit.client import options
from metrics_kit.client.options import SETTINGS
from metrics_kit.client.settings import Settings
from metrics_kit.client.transports import ASGITransport, HTTPTransport, MockTransport

ROOT = Path(__file__).resolve().parents[2]

REMOTE = {"base_url": "http://127.0.0.1:9", "api_key": "k-123"}
KEY = "sk-live-TOPSECRET-abcdef0123456789"


@pytest.mark.parametrize(
    "setting, value, allowed",
    [
        ("timeout", 0, "above 0"),
        ("timeout", float("inf"), "finite"),
        ("connect_timeout", -1, "above 0"),
        ("retries", -1, ">= 0"),
        ("retries", 1.5, "whole number"),
        ("incomplete_ttl", -5, ">= 0"),
        ("incomplete_ttl", float("nan"), ">= 0"),
        ("workers", 0, ">= 1"),
        ("workers", True, "whole number"),
        ("rate_limit", 0, "above 0"),
        ("rate_limit", "fast", "above 0"),
        ("week_start", "tuesday", "'monday', 'sunday'"),
        ("chain_unit", "SOL", "lowercase identifier"),
        ("cache", "yes", "True or False"),
        ("refresh", None, "True or False"),
        ("progress", 1, "True, False or None"),
    ],
)
def test_a_bad_setting_names_itself_and_what_is_allowed(setting, value, allowed):
    with pytest.raises(ConfigurationError) as caught:
        Client(**REMOTE, **{setting: value})
    assert caught.value.argument == setting
    assert setting in str(caught.value) and allowed in str(caught.value)


@pytest.mark.parametrize("base_url", ["127.0.0.1:8000", "ftp://host", "https://host/?q=1", "https://"])
def test_a_bad_base_url_is_refused(base_url):
    with pytest.raises(ConfigurationError, match="base_url must be an http") as caught:
        Client(base_url, "k-123")
    assert caught.value.argument == "base_url"


@pytest.mark.parametrize("key", ["with space", "line\nbreak", 42])
def test_a_bad_key_is_refused_without_echo(key):
    with pytest.raises(ConfigurationError) as caught:
        Client("http://127.0.0.1:9", key)
    assert caught.value.argument == "api_key" and str(key) not in str(caught.value)


@pytest.mark.parametrize("setting, value", [("timeout", 10), ("connect_timeout", 1), ("retries", 0)])
def test_connection_settings_are_refused_where_there_is_no_connection(setting, value):
    with pytest.raises(ConfigurationError, match="embedded default") as caught:
        Client(**{setting: value})
    assert caught.value.argument == setting
    with pytest.raises(ConfigurationError, match="the transport you gave"):
        Client(transport=MockTransport(daily_service({})), **{setting: value})


def test_a_transport_and_a_base_url_are_one_too_many():
    with pytest.raises(ConfigurationError, match="not both") as caught:
        Client(transport=MockTransport(daily_service({})), **REMOTE)
    assert caught.value.argument == "transport"
    with pytest.raises(ConfigurationError, match="rate_limit"):
        Client(transport=MockTransport(daily_service({})), rate_limit=5)


def test_a_transport_must_be_one():
    with pytest.raises(ConfigurationError, match="transport must be a Transport") as caught:
        Client(transport="http://127.0.0.1:9")
    assert caught.value.argument == "transport"


def test_good_settings_are_kept_and_shape_the_http_transport():
    with Client(**REMOTE, timeout=2.5, connect_timeout=0.5, retries=0, workers=3, rate_limit=7) as client:
        s = client.settings
        assert (s.timeout, s.connect_timeout, s.retries, s.workers, s.rate_limit) == (2.5, 0.5, 0, 3, 7.0)
        transport = client.transport  # made on first use, without a request
        assert isinstance(transport, HTTPTransport)
        assert transport.timeout == (0.5, 2.5) and transport.retries == 0 and transport.rate_limit == 7
    with Client(cache=False, rate_limit=50) as embedded:  # the embedded default paces its requests too
        assert embedded.settings.rate_limit == 50 and embedded.transport._pacer.rate == 50


def test_the_embedded_services_iso_weeks_refuse_a_sunday_client():
    with Client(cache=False, week_start="sunday") as client:
        assert client.value("swap_transaction_count", "demoswap", "1_day", "2025-01-05") >= 0  # days are days
        with pytest.raises(ConfigurationError, match="weeks start on a monday, not a sunday") as caught:
            client.value("swap_transaction_count", "demoswap", "1_week", "2025-01-05")
    assert caught.value.argument == "week_start"


@pytest.mark.parametrize(
    "options, setting",
    [
        ({"pool_size": 0}, "pool_size"),
        ({"retries": -1}, "retries"),
        ({"read_timeout": 0}, "read_timeout"),
        ({"rate_limit": 0}, "rate_limit"),
        ({"backoff_factor": -1}, "backoff_factor"),
        ({"retry_deadline": "1"}, "retry_deadline"),
    ],
)
def test_the_http_transport_checks_its_options_the_same_way(options, setting):
    with pytest.raises(ConfigurationError) as caught:
        HTTPTransport("http://127.0.0.1:9", "k-123", **options)
    assert caught.value.argument == setting


# -- each setting defined once (client/options.py) -----------------------------------------------------------


def _settings_in(function) -> list[tuple[str, object]]:
    """The settings a signature takes: its keyword-only parameters but ``transport``, with their defaults."""
    parameters = inspect.signature(function).parameters.values()
    return [(p.name, p.default) for p in parameters if p.kind is p.KEYWORD_ONLY and p.name != "transport"]


def test_client_and_configure_take_exactly_the_tables_settings_with_its_defaults():
    table = [(setting.name, setting.keyword) for setting in SETTINGS]
    assert _settings_in(Client.__init__) == table
    assert _settings_in(mk.configure) == table


def test_client_and_configure_describe_every_setting_of_the_table():
    for doc in (Client.__doc__, mk.configure.__doc__):
        said = " ".join(line.strip() for line in (doc or "").splitlines())
        assert " ".join(line.strip() for line in options.described().splitlines()) in said
        listed = said.split("Settings (each checked", 1)[1]
        assert re.findall(r"``(\w+)`` \(", listed) == [setting.name for setting in SETTINGS]


def test_the_transports_defaults_are_the_tables():
    http = inspect.signature(HTTPTransport).parameters
    shaping = [setting for setting in SETTINGS if setting.transport is not None]
    assert {s.name for s in shaping} == {"workers", "rate_limit", "timeout", "connect_timeout", "retries"}
    for setting in shaping:
        assert http[setting.transport].default == setting.default, setting.name
    assert inspect.signature(ASGITransport).parameters["rate_limit"].default == options.default("rate_limit")


def test_the_settings_object_holds_one_field_a_setting():
    fields = {field.name for field in dataclasses.fields(Settings)} - {"connection"}
    assert fields == {setting.name for setting in SETTINGS} - {"week_start"} | {"calendar"}
    made = Settings.make(transport=MockTransport(daily_service({})))
    assert (made.workers, made.version_ttl, made.calendar.week_start) == (16, 60.0, "monday")
    with pytest.raises(TypeError, match="does not know: wokers"):
        Settings.make(transport=MockTransport(daily_service({})), wokers=4)


def test_the_client_docs_table_lists_exactly_the_tables_settings():
    text = (ROOT / "docs" / "client.md").read_text(encoding="utf-8")
    table = text.split("| option | default | allowed | meaning |", 1)[1].split("\n\n", 1)[0]
    listed = [name for row in table.splitlines()[2:] for name in re.findall(r"`(\w+)`", row.split("|")[1])]
    assert sorted(listed) == sorted(["transport", *(setting.name for setting in SETTINGS)])


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999", "http://127.0.0.1:notaport", "https://h.example:-1/v1"])
def test_a_base_url_with_a_bad_port_is_refused_when_the_client_is_made(url):
    from metrics_kit.client.transports import HTTPTransport

    for make in (lambda: Client(url, KEY, cache=False), lambda: HTTPTransport(url, KEY)):
        with pytest.raises(ConfigurationError, match="port") as caught:  # was: urllib3's LocationParseError at use
            make()
        assert caught.value.argument == "base_url"


def test_an_upper_case_scheme_is_accepted():
    from metrics_kit.client.transports import HTTPTransport

    with Client("HTTP://127.0.0.1:8000/v1", KEY, cache=False) as client:  # was refused
        assert client.base_url == "http://127.0.0.1:8000/v1"
        assert client.transport.base_url == "http://127.0.0.1:8000/v1"
    assert HTTPTransport("HTTPS://metrics.example.com", KEY).base_url == "https://metrics.example.com"


@pytest.mark.parametrize("returns", ["x", None, float("nan")])
def test_a_clock_that_returns_no_number_is_refused_when_the_client_is_made(returns):
    with pytest.raises(ConfigurationError, match="clock must return") as caught:  # was: a raw TypeError at use
        Client(transport=MockTransport(constant(1)), clock=lambda: returns)
    assert caught.value.argument == "clock"
