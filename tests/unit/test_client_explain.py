"""Client.explain against answers a real service will not give on demand: the data changing between
pages, a next page that does not move on, an answer about another week, a body of another shape,
a service without /explain. The real service's answers are tested in tests/service/test_explain.py."""

from __future__ import annotations

import traceback

import pytest

from metrics_kit import Client, ConfigurationError, ResponseFormatError, ValidationError
from metrics_kit.client.transports import MockTransport, Request, Response
from metrics_kit.spec import wire

KEY = "sk-live-TOPSECRET-abcdef0123456789"
ROWS = [[f"2025-01-0{i}T10:00:00.000000Z", f"t{i}", "ivan", "demoswap", "swap", "regular", True] for i in range(1, 6)]
COLUMNS = ["block_time", "tx_id", "signer", "project", "action", "pool_type", "counted"]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path))


def page(request: Request, rows=ROWS, period_start="2024-12-30", page_rows=2, period_end="2025-01-05") -> dict:
    """The reference service's page for ``request``, at most ``page_rows`` rows of ``rows``."""
    offset = int(request.params[wire.OFFSET])
    limit = min(int(request.params[wire.LIMIT]), page_rows)
    shown = rows[offset : offset + limit]
    following = offset + len(shown) if offset + len(shown) < len(rows) else None
    return {
        "metric_name": "swap_transaction_count",
        "project": "demoswap",
        "granularity": "1_week",
        "date": request.params["date"],
        "period_start": period_start,
        "period_end": period_end,
        "unit": "count",
        "value": len(rows),
        "complete": True,
        "aggregation": "count",
        "source": "transactions",
        "select": {"action": ["swap"]},
        "formula": "the number of rows whose counted is true",
        "value_column": None,
        "counted_column": "counted",
        "opening_balance": None,
        "columns": COLUMNS,
        "rows": shown,
        "total_rows": len(rows),
        "offset": offset,
        "limit": limit,
        "next_offset": following,
    }


def client_of(handler, **settings) -> Client:
    def service(request: Request) -> Response:
        if request.path != wire.EXPLAIN_PATH:
            return Response(404, json={"error": {"code": "not_found", "message": "no such path"}})
        return handler(request)

    return Client(transport=MockTransport(service, api_key=KEY), cache=False, **settings)


def test_the_pages_are_followed_and_asked_without_the_key():
    with client_of(lambda r: Response(200, json=page(r), headers={"x-data-version": "v1"})) as client:
        rows = client.explain("swap_transaction_count", "demoswap", "1_week", "2025-01-01", max_rows=50)
        asked = [r for r in client.transport.requests if r.path == wire.EXPLAIN_PATH]  # type: ignore[attr-defined]
    assert rows["tx_id"].tolist() == ["t1", "t2", "t3", "t4", "t5"] and rows.attrs["data_version"] == "v1"
    assert [r.params[wire.OFFSET] for r in asked] == ["0", "2", "4"] and asked[0].params[wire.LIMIT] == "50"
    assert all(KEY not in r.url for r in asked)


def test_a_data_version_changing_between_pages_fetches_the_rows_again():
    versions = iter(["v1", "v2", "v2", "v2", "v2", "v2"])  # the first page of v1, then v2 throughout
    with client_of(lambda r: Response(200, json=page(r), headers={"x-data-version": next(versions)})) as client:
        rows = client.explain("swap_transaction_count", "demoswap", "1_week", "2025-01-01")
    assert rows.attrs["data_version"] == "v2" and len(rows) == 5
    counter = iter(range(1000))
    with client_of(lambda r: Response(200, json=page(r), headers={"x-data-version": f"v{next(counter)}"})) as client:
        with pytest.raises(ResponseFormatError, match="changed 4 times while the rows"):
            client.explain("swap_transaction_count", "demoswap", "1_week", "2025-01-01")


def test_pages_that_do_not_add_up_are_refused():
    def stuck(request: Request) -> Response:
        body = page(request)
        body["next_offset"] = 0 if body["next_offset"] is not None else None
        return Response(200, json=body)

    with client_of(stuck) as client, pytest.raises(ResponseFormatError, match="does not move on"):
        client.explain("swap_transaction_count", "demoswap", "1_week", "2025-01-01")

    def short(request: Request) -> Response:
        body = page(request, page_rows=10)
        body["total_rows"] = 6
        return Response(200, json=body)

    with client_of(short) as client, pytest.raises(ResponseFormatError, match="held 5 rows where the answer says 6"):
        client.explain("swap_transaction_count", "demoswap", "1_week", "2025-01-01")
    good = page(Request("/", {"offset": "0", "limit": "9", "date": "x"}, {}, ""))
    for broken in ({"value": 3}, {**good, "rows": 7}, {**good, "value": None}, {**good, "period_end": 5}):
        with client_of(lambda r, b=broken: Response(200, json=b)) as client, pytest.raises(ResponseFormatError):
            client.explain("swap_transaction_count", "demoswap", "1_week", "2025-01-01")


def test_an_answer_about_another_week_names_the_week_start():
    with client_of(lambda r: Response(200, json=page(r, period_start="2024-12-29"))) as client:
        with pytest.raises(ConfigurationError, match="weeks start on a sunday") as raised:
            client.explain("swap_transaction_count", "demoswap", "1_week", "2025-01-01")
    assert raised.value.argument == "week_start"


def test_a_service_without_explain_is_told_so_and_the_key_is_in_no_local():
    def vendor(request: Request) -> Response:
        return Response(404, body="Not Found")

    with client_of(vendor) as client, pytest.raises(ConfigurationError, match="does not offer explain") as raised:
        client.explain("swap_transaction_count", "demoswap", "1_week", "2025-01-01")
    text = "".join(traceback.TracebackException.from_exception(raised.value, capture_locals=True).format())
    assert "extension of the metrics_kit reference service" in text and KEY not in text
    # A 404 about the question is the service's error as it gave it, not "no explain".
    about = {"error": {"code": "date_out_of_coverage", "message": "outside the coverage", "param": "date"}}
    with client_of(lambda r: Response(404, json=about)) as client, pytest.raises(Exception) as other:
        client.explain("swap_transaction_count", "demoswap", "1_week", "2025-01-01")
    assert not isinstance(other.value, ConfigurationError) and "outside the coverage" in str(other.value)


def test_too_many_rows_says_how_many_and_what_to_do():
    with client_of(lambda r: Response(200, json=page(r))) as client:
        with pytest.raises(
            ValidationError, match=r"made of 5 event rows; .* max_rows=4\. Pass a larger max_rows="
        ) as week:
            client.explain("swap_transaction_count", "demoswap", "1_week", "2025-01-01", max_rows=4)
    with client_of(lambda r: Response(200, json=page(r, period_end="2024-12-30"))) as client:
        with pytest.raises(ValidationError) as day:
            client.explain("swap_transaction_count", "demoswap", "1_day", "2024-12-30", max_rows=4)
    assert "granularity='1_day'" in str(week.value) and "granularity=" not in str(day.value)


def test_a_value_without_rows_has_the_same_dtypes_as_one_with_rows():
    """An empty period's frame concatenates with another's without a change of time unit."""
    with client_of(lambda request: Response(200, json=page(request))) as client:
        some = client.explain("swap_transaction_count", "demoswap", "1_week", "2025-01-01")
    with client_of(lambda request: Response(200, json=page(request, rows=[]))) as client:
        none = client.explain("swap_transaction_count", "demoswap", "1_week", "2025-01-01")
    assert len(none) == 0 and len(some) == 5
    assert dict(none.dtypes) == dict(some.dtypes)
    assert str(some["block_time"].dtype) == "datetime64[us, UTC]"
