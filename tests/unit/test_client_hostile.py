"""The client against a hostile tester's findings after issue 21: each test here fails on the
client before its fix (a key sent to another service, a value stamped complete after its day ended
in flight, the key in a verbose traceback's locals, a token in a URL shown, ...)."""

from __future__ import annotations

import datetime as dt
import traceback

import pytest

import metrics_kit as mk
from metrics_kit import Client, ConfigurationError
from metrics_kit.client import api, settings
from metrics_kit.client.transports import MockTransport, Request, Response

COUNT = "swap_transaction_count"
KEY = "sk-live-TOPSECRET-abcdef0123456789"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path))


@pytest.fixture
def fresh_default(monkeypatch):
    """The default client of mk.* as if nothing had been configured, and put back afterwards."""
    monkeypatch.setattr(api, "_default", None)
    monkeypatch.setattr(api, "_made_from", None)
    monkeypatch.setattr(api, "_arguments", {})
    monkeypatch.setattr(settings, "_noticed", set())
    yield
    if api._default is not None:
        api._default.close()


def constant(value: int, *, complete: bool | None = True):
    """A service answering ``value`` for every point (no discovery)."""

    def answer(request: Request) -> Response:
        if request.path != "/metrics":
            return Response(404, json={"error": {"code": "not_found", "message": "no such path"}})
        body = {"value": value, "period_start": request.params["date"]}
        if complete is not None:
            body["complete"] = complete
        return Response(200, json=body)

    return answer


def verbose(error: BaseException) -> str:
    """The traceback as %xmode Verbose or pytest --showlocals would print it: every frame's locals."""
    return "".join(traceback.TracebackException.from_exception(error, capture_locals=True).format())


def utc(text: str) -> float:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp()


# -- 1. a key given to configure() belongs to the base URL given with it ----------------------------------


def test_configure_refuses_a_key_whose_base_url_is_left_to_the_environment(fresh_default, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_BASE_URL", "http://127.0.0.1:9")
    with pytest.raises(ConfigurationError, match="give base_url= with api_key=") as caught:
        mk.configure(api_key=KEY)  # was accepted, and the key later sent wherever the variable pointed
    assert caught.value.setting == "api_key" and KEY not in verbose(caught.value)
    monkeypatch.setenv("METRICS_KIT_API_KEY", KEY)
    mk.configure(workers=2)  # settings without a key: made again from the environment when it changes
    monkeypatch.setenv("METRICS_KIT_API_KEY", "another-key-0123456789")
    monkeypatch.setenv("METRICS_KIT_BASE_URL", "http://127.0.0.1:10")
    assert "api_key" not in api._arguments
    client = mk.default_client()
    assert client.base_url == "http://127.0.0.1:10" and client.settings.workers == 2
    assert client.settings.connection.api_key == settings.Secret("another-key-0123456789")
