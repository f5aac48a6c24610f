"""A key is never shown, whatever the service echoes: a vendor whose answers repeat the key (its 401
saying "Invalid API key: sk_live_...") has it masked in every form (raw, percent-encoded,
JSON-escaped, in Location and WWW-Authenticate) wherever a service's text goes: the exception, its
verbose traceback, PartialDataWarning, attrs["failed"] and a Parquet file saved from the frame.
Masking is for messages only: a short key that is also part of a date never changes a value.
(The HTTP vendor, the CLI and the notebook panel: tests/service/test_secrets_echoed_http.py and
tests/notebooks/test_controls.py.)"""

from __future__ import annotations

import base64
import html
import json
import traceback
import warnings
from urllib.parse import quote, quote_plus

import pandas as pd
import pytest
from client_fakes import daily_service

import metrics_kit as mk
from metrics_kit.client.settings import Secret
from metrics_kit.client.transports import MockTransport, Request, Response

KEY = 'sk_live/4eC39HqLyjWDarjtT1zdp7dc"&'  # with characters that every escape writes differently
COUNT = "swap_transaction_count"


def forms(key: str) -> dict[str, str]:
    """Every form a service may echo a key in."""
    return {
        "raw": key,
        "quote": quote(key),
        "quote, nothing safe": quote(key, safe=""),
        "quote_plus": quote_plus(key),
        "lower-case hex": "".join(f"%{ord(c):02x}" if not c.isalnum() else c for c in key),
        "every character percent-encoded": "".join(f"%{ord(c):02X}" for c in key),
        "JSON": json.dumps(key)[1:-1],
        "JSON with \\/": json.dumps(key)[1:-1].replace("/", "\\/"),
        "JSON \\u escapes": "".join(f"\\u{ord(c):04x}" for c in key),
        "JSON \\u escapes, upper hex": "".join(f"\\u{ord(c):04X}" for c in key),
        "HTML": html.escape(key),
        "HTML numeric": "".join(f"&#{ord(c)};" for c in key),
    }


FORMS = forms(KEY)


def shows_key(text: str) -> bool:
    return any(form in text for form in FORMS.values()) or "4eC39HqLyjWDarjtT1zdp7dc" in text


def verbose(error: BaseException) -> str:
    """The traceback as %xmode Verbose or pytest --showlocals would print it: every frame's locals."""
    return "".join(traceback.TracebackException.from_exception(error, capture_locals=True).format())


def echoing(status: int, form: str, headers: dict[str, str] | None = None):
    """A vendor that answers ``status`` with a body that repeats the key it was sent, in ``form``."""

    def answer(request: Request) -> Response:
        if request.path != "/metrics":
            return Response(404)
        echoed = forms(request.headers["x-api-key"])[form]
        said = f'"code": "invalid_key_{echoed}", "message": "Invalid API key: {echoed}", "param": "{echoed}"'
        body = f'{{"error": {{{said}}}}}'
        shown = {name: value.replace("{key}", echoed) for name, value in (headers or {}).items()}
        return Response(status, body=body, headers=shown)

    return answer


def client(handler) -> mk.Client:
    return mk.Client(transport=MockTransport(handler, api_key=KEY), cache=False, progress=False)


@pytest.mark.parametrize("form", list(FORMS))
def test_the_key_is_masked_in_every_form(form):
    text = f"Invalid API key: {FORMS[form]}; try again"
    assert Secret(KEY).mask(text) == "Invalid API key: ***; try again"


@pytest.mark.parametrize("form", list(FORMS))
def test_a_401_that_echoes_the_key_never_shows_it(form):
    with client(echoing(401, form)) as c, pytest.raises(mk.AuthenticationError) as caught:
        c.value(COUNT, "demoswap", "1_day", "2025-01-01")
    error = caught.value
    texts = [str(error), repr(error), error.message, str(error.code), str(error.param), verbose(error)]
    assert not any(shows_key(text) for text in texts), texts
    assert "Invalid API key: ***" in str(error)


def test_a_pull_with_echoed_keys_keeps_them_out_of_warnings_attrs_and_parquet(tmp_path):
    with client(echoing(404, "raw")) as c:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            series = c.series(COUNT, "demoswap", "2025-01-01", "2025-01-03", errors="coerce")
        with pytest.raises(mk.FetchError) as failed:
            c.frame([COUNT], ["demoswap"], "2025-01-01", "2025-01-03")
    said = [str(w.message) for w in caught if issubclass(w.category, mk.PartialDataWarning)]
    assert said and not any(shows_key(text) for text in said), said
    assert len(series.attrs["failed"]) == 3 and not shows_key(json.dumps(series.attrs))
    assert "Invalid API key: ***" in series.attrs["failed"][0]["error"]
    assert not shows_key(str(failed.value)) and not shows_key(verbose(failed.value))
    saved = tmp_path / "series.parquet"
    series.to_frame().to_parquet(saved)
    assert b"Invalid API key: ***" in saved.read_bytes() and not shows_key(saved.read_bytes().decode("latin-1"))
    assert pd.read_parquet(saved).attrs["failed"] == series.attrs["failed"]


def test_a_redirect_is_not_followed_and_says_where_it_pointed_masked():
    location = "https://elsewhere.example/{key}/metrics?api_key={key}"
    with client(echoing(302, "quote, nothing safe", {"Location": location})) as c:
        with pytest.raises(mk.APIError) as caught:
            c.value(COUNT, "demoswap", "1_day", "2025-01-01")
    text = str(caught.value)
    assert caught.value.status == 302 and "redirect" in text and "not followed" in text, text
    assert "https://elsewhere.example/***/metrics?..." in text and "base_url" in text, text
    assert not shows_key(text) and not shows_key(verbose(caught.value))


def test_a_401s_challenge_is_reported_masked():
    challenge = 'Bearer realm="api", error="invalid_token", error_description="{key} is revoked"'
    with client(echoing(401, "JSON", {"WWW-Authenticate": challenge})) as c:
        with pytest.raises(mk.AuthenticationError) as caught:
            c.value(COUNT, "demoswap", "1_day", "2025-01-01")
    text = str(caught.value)
    assert 'WWW-Authenticate: Bearer realm="api", error="invalid_token"' in text and "*** is revoked" in text
    assert not shows_key(text)


@pytest.mark.parametrize(
    "body",
    [
        "<html><p>Your key {key} has no plan</p></html>",  # not JSON: its start is shown
        '{"result": "key {key} has no plan"}',  # no value: its start is shown
        '{"value": "key {key} has no plan"}',  # a value that is not a number
        '{"success": false, "value": 0, "error": "key {key} is over its quota"}',  # a failure, with a value
        '{"value": 5, "project": "{key}"}',  # an answer to another question
        '{"value": 5, "period_start": "{key}"}',  # about another period
    ],
)
def test_a_200_that_echoes_the_key_never_shows_it(body):
    def answer(request: Request) -> Response:
        if request.path != "/metrics":
            return Response(404)
        return Response(200, body=body.replace("{key}", json.dumps(request.headers["x-api-key"])[1:-1]))

    with client(answer) as c, pytest.raises(mk.MetricsKitError) as caught:
        c.value(COUNT, "demoswap", "1_day", "2025-01-01")
    assert "***" in str(caught.value), str(caught.value)
    assert not shows_key(str(caught.value)) and not shows_key(verbose(caught.value)), verbose(caught.value)


def test_a_missing_values_reason_that_echoes_the_key_is_masked():
    def answer(request: Request) -> Response:
        if request.path != "/metrics":
            return Response(404)
        return Response(200, json={"value": None, "reason": f"no data for key {request.headers['x-api-key']}"})

    with client(answer) as c:
        with pytest.warns(mk.PartialDataWarning) as caught:
            series = c.series(COUNT, "demoswap", "2025-01-01", "2025-01-02")
        with pytest.raises(mk.MissingValueError) as missing:
            c.value(COUNT, "demoswap", "1_day", "2025-01-01")
    assert series.attrs["missing"][0]["reason"] == "no data for key ***"
    assert not any(shows_key(str(w.message)) for w in caught) and not shows_key(verbose(missing.value))


def test_an_explain_answer_that_echoes_the_key_never_shows_it():
    def answer(request: Request) -> Response:
        key = request.headers["x-api-key"]
        if request.path == "/explain":
            return Response(501, json={"error": {"code": "explain_unavailable", "message": f"no events for {key}"}})
        return Response(401, json={"error": {"code": "invalid_api_key", "message": f"unknown key {key}"}})

    with client(answer) as c:
        with pytest.raises(mk.ConfigurationError) as unavailable:
            c.explain(COUNT, "demoswap", "1_day", "2025-01-01")
    assert "no events for ***" in str(unavailable.value)
    assert not shows_key(str(unavailable.value)) and not shows_key(verbose(unavailable.value))


def test_a_short_key_never_changes_a_value_it_also_stands_in():
    # "2025" is in every date asked and answered, and is the value itself: masking is for messages only.
    service = daily_service({pd.Timestamp(f"2025-01-0{d}").date(): 2025 for d in (1, 2, 3)})
    with mk.Client(transport=MockTransport(service, api_key="2025"), cache=False, progress=False) as c:
        series = c.series(COUNT, "demoswap", "2025-01-01", "2025-01-03")
        assert series.tolist() == [2025, 2025, 2025] and series.attrs["incomplete"] == []
        assert c.value(COUNT, "demoswap", "1_day", "2025-01-02") == 2025


def test_a_short_key_is_still_masked_in_messages():
    def answer(request: Request) -> Response:
        return Response(401, json={"error": {"code": "invalid_api_key", "message": "unknown key demo"}})

    with mk.Client(transport=MockTransport(answer, api_key="demo"), cache=False) as c:
        with pytest.raises(mk.AuthenticationError) as caught:
            c.value(COUNT, "demoswap", "1_day", "2025-01-01")
    # The code is one the client acts on, and no secret: kept as it is; the service's words are masked.
    assert caught.value.code == "invalid_api_key" and caught.value.message == "unknown key ***"


def test_a_reply_shows_neither_its_body_nor_its_headers():
    # A traceback's locals show a Reply by its repr: the service's text in it is unmasked.
    from metrics_kit.client.transports import Reply

    reply = Reply(401, {"WWW-Authenticate": KEY}, f"Invalid API key: {KEY}".encode(), "mock://service/metrics")
    assert repr(reply) == "Reply(status=401, url='mock://service/metrics')"


def test_an_application_that_fails_with_the_key_in_its_error_never_shows_it():
    from metrics_kit.client.transports import ASGITransport

    async def app(scope, receive, send):
        said = dict(scope["headers"])[b"x-api-key"].decode()
        raise RuntimeError(f"no tenant for key {said}")

    transport = ASGITransport(app, KEY, "asgi://vendor")
    try:
        with pytest.raises(mk.TransportError) as caught:
            transport.get("/metrics", {"metric_name": COUNT})
    finally:
        transport.close()
    assert "no tenant for key ***" in str(caught.value) and not shows_key(verbose(caught.value))


def test_a_project_list_that_echoes_the_key_is_masked_in_the_message():
    def answer(request: Request) -> Response:
        tenant = f"tenant-{request.headers['x-api-key']}"
        return Response(200, json={"projects": [{"project": tenant, "kinds": ["dex"], "regular_pools": True}]})

    with client(answer) as c, pytest.raises(mk.ValidationError, match="the service has tenant-\\*\\*\\*") as caught:
        c.value(COUNT, "demoswap", "1_day", "2025-01-01")
    assert not shows_key(str(caught.value)) and not shows_key(verbose(caught.value))


def test_a_family_helper_masks_the_project_list_and_kinds_as_the_client_does():
    def answer(request: Request) -> Response:
        echoed = request.headers["x-api-key"]
        listed = [
            {"project": f"tenant-{echoed}", "kinds": ["dex"], "regular_pools": False},
            {"project": "demolend", "kinds": [f"kind-{echoed}"], "regular_pools": False},
        ]
        return Response(200, json={"projects": listed})

    with client(answer) as c:
        with pytest.raises(mk.ValidationError, match="the service has demolend, tenant-\\*\\*\\*") as unknown:
            c.dex("demoswap", "2025-01-01", "2025-01-03")
        with pytest.raises(mk.ValidationError, match="of kind kind-\\*\\*\\*") as inapplicable:
            c.dex("demolend", "2025-01-01", "2025-01-03")
    for caught in (unknown, inapplicable):
        assert not shows_key(str(caught.value)) and not shows_key(verbose(caught.value))


# -- every form: case, base64, pieces (hostile round on issue 27, D2) ---------------------------------------

LIVE = "sk_live_Zq9XyW3vT7pLm2Kd"  # 24 characters: a run of 12 or more of them is masked


def b64(data: bytes, urlsafe: bool = False) -> str:
    return (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(data).decode()


OTHER_FORMS = {
    "upper case": LIVE.upper(),
    "lower case": LIVE.lower(),
    "upper case, percent-encoded": quote(LIVE.upper(), safe=""),
    "upper case, JSON \\u escapes": "".join(f"\\u{ord(c):04x}" for c in LIVE.upper()),
    "base64 alone": b64(LIVE.encode()),
    "base64 of user:key (basic auth)": b64(b"user:" + LIVE.encode()),
    "base64, one byte before": b64(b"x" + LIVE.encode() + b"yz"),
    "base64, two bytes before": b64(b"xy" + LIVE.encode()),
    "URL-safe base64": b64(b"\xfb\xff" + LIVE.encode() + b"\xfe", urlsafe=True),
    "base64, JSON-escaped": b64(b"a:" + LIVE.encode()).replace("/", "\\/"),
}


def revealed(text: str) -> list[str]:
    """The runs of LIVE (12 characters or more, in any case) or of its base64 forms that ``text`` shows."""
    found = []
    for form in [LIVE.lower()] + [b64(b"\0" * n + LIVE.encode())[2 + n : -4].lower() for n in range(3)]:
        found += [form[i : i + 12] for i in range(len(form) - 11) if form[i : i + 12] in text.lower()]
    return found


@pytest.mark.parametrize("form", list(OTHER_FORMS))
def test_the_key_is_masked_in_any_case_and_base64(form):
    text = f"Invalid API key: {OTHER_FORMS[form]}; try again"
    shown = Secret(LIVE).mask(text)
    assert shown.startswith("Invalid API key: ") and shown.endswith("; try again") and "***" in shown, shown
    assert not revealed(shown), (shown, revealed(shown))


@pytest.mark.parametrize(
    "text",
    [
        f"key {LIVE[:12]} of param {LIVE[12:]}",  # split between two fields
        f"key {LIVE[:13]}...",  # cut
        f"key ...{LIVE[-12:].upper()}",  # the end of it, upper-cased
        f"key {quote(LIVE[5:20], safe='')}",  # a piece, percent-encoded
    ],
)
def test_a_piece_of_the_key_half_its_length_or_more_is_masked(text):
    shown = Secret(LIVE).mask(text)
    assert "***" in shown and not revealed(shown) and LIVE[:12] not in shown and LIVE[12:] not in shown, shown


def test_a_shorter_piece_and_other_words_are_left_as_they_are():
    text = f"key {LIVE[:11]}, date 2025-06-01, project demoswap"  # 11 characters: less than half the key
    assert Secret(LIVE).mask(text) == text
    assert Secret("demo").mask("unknown key DEMO in demoswap") == "unknown key *** in ***swap"  # a short key: whole


def test_a_401_that_echoes_the_key_upper_cased_never_shows_it(tmp_path):
    def answer(request: Request) -> Response:
        said = f"INVALID API KEY: {request.headers['x-api-key'].upper()}"
        return Response(401, json={"error": {"code": "invalid_api_key", "message": said, "param": b64(said.encode())}})

    transport = MockTransport(answer, api_key=LIVE)
    with mk.Client(transport=transport, cache=False, progress=False) as c:
        with pytest.raises(mk.AuthenticationError) as caught:
            c.value(COUNT, "demoswap", "1_day", "2025-01-01")
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            series = c.series(COUNT, "demoswap", "2025-01-01", "2025-01-03", errors="coerce")
    error = caught.value
    texts = [str(error), repr(error), repr(error.args), error.message, str(error.param), verbose(error)]
    texts += [str(w.message) for w in warned] + [json.dumps(series.attrs)]
    series.to_frame().to_parquet(tmp_path / "s.parquet")
    texts.append((tmp_path / "s.parquet").read_bytes().decode("latin-1"))
    assert "INVALID API KEY: ***" in str(error)
    assert not any(revealed(text) for text in texts), [revealed(text) for text in texts]
