"""Every number explained: the event rows behind each value, recomputed in plain pandas.

For every metric, project and granularity of the golden data, at every week and month of its
coverage (the incomplete first and last ones, ISO week 2025-W01 across the month and year boundary)
and the days of its first two weeks and a few after (an empty day, the last one), ``Client.explain``
brings the rows behind the value, and plain pandas recomputes the value
from those rows alone (plus, for the circulating supply, the opening balance): counts equal to what
``/metrics`` serves exactly, amounts to 1e-9 relative. The recomputation knows only the data format
(docs/data-format.md) and the catalogue's meaning of each aggregation, nothing of the engine.

The service runs in this process (the reference service's ASGI application behind the client's
ASGITransport, the embedded default's path), so the few thousand values take one query each, not a
socket round trip each; the HTTP shell, paging and the errors are tested on a real ``metrics-kit
serve`` child too.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import os
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pandas as pd
import pytest
from support import GOLDEN, ServerProcess

from metrics_kit import Client, ConfigurationError, ValidationError
from metrics_kit.client.transports import ASGITransport
from metrics_kit.errors import APIError
from metrics_kit.server.building.build import load_or_build
from metrics_kit.server.dataset import open_service
from metrics_kit.server.http.app import App
from metrics_kit.server.serving.explain import Events
from metrics_kit.spec import wire
from metrics_kit.spec.calendar import GRANULARITIES, period_bounds, period_starts
from metrics_kit.spec.catalogue import FLOW_SIGNS, default_catalogue

KEY = "explain-test-key-0123456789"
COVERAGE = (dt.date(2024, 12, 28), dt.date(2025, 2, 1))
# Every day of the coverage: each day's rows are explained, as are every week's and month's.
DAYS = list(period_starts(*COVERAGE, "1_day"))
PROJECTS = pd.read_csv(GOLDEN / "projects.csv", keep_default_na=False)
INITIAL = {row.project: float(row.initial_circulating_supply or 0) for row in PROJECTS.itertuples()}


@pytest.fixture(scope="module")
def golden():
    """A client of the reference service on the golden data, in this process."""
    service = open_service(GOLDEN, log=lambda message: None)
    with Client(transport=ASGITransport(App(service, [KEY]), KEY, "http://golden.invalid"), cache=False) as client:
        yield client


def applicable_pairs() -> list[tuple[str, str]]:
    catalogue = default_catalogue()
    pairs = []
    for row in PROJECTS.itertuples():
        kinds = row.kinds.split(",")
        for metric in catalogue.applicable(kinds, row.regular_pools == "true"):
            pairs.append((metric.name, row.project))
    return pairs


def recomputed(aggregation: str, source: str, rows: pd.DataFrame, opening: float | None) -> float:
    """The value from the rows alone, in plain pandas: what each aggregation means (the catalogue)."""
    if aggregation == "distinct_count":
        return rows["signer"].nunique()
    if aggregation == "count":
        return rows["tx_id"].nunique()  # a tx_id repeated in the period counts once
    amount = rows["amount_usd" if source == "fees" else "amount"]
    if aggregation == "sum":
        return amount.sum()
    if aggregation in ("net_sum", "ending_balance"):
        signed = (amount * rows["flow"].map(FLOW_SIGNS)).sum()
        return signed if aggregation == "net_sum" else opening + signed
    nets = amount.groupby(rows["account"]).sum()
    return nets[nets > 0].sum() if aggregation == "positive_net" else nets[nets < 0].sum()


def by_the_attrs(rows: pd.DataFrame, attrs: dict) -> float:
    """The value by the rule the answer states as fields."""
    if attrs["counted_column"] is not None:
        rows = rows[rows[attrs["counted_column"]]]
    part = len(rows) if attrs["value_column"] is None else rows[attrs["value_column"]].sum()
    return (attrs["opening_balance"] or 0.0) + part


def agrees(got: float, served: float, is_count: bool) -> bool:
    if is_count:
        return got == served
    return math.isclose(got, served, rel_tol=1e-9) or got == served == 0


def test_every_value_of_the_golden_data_follows_from_its_rows(golden):
    catalogue = default_catalogue()
    seen = {"incomplete": 0, "split_week": 0, "repeated_tx": 0, "net_dropped": 0, "rows": 0}
    kinds = set()
    checked = 0
    for name, project in applicable_pairs():
        metric = catalogue.get(name)
        assert metric is not None
        for granularity in GRANULARITIES:
            served = golden.series(name, project, *COVERAGE, granularity)
            starts = list(period_starts(*COVERAGE, granularity))
            assert [d.date() for d in served.index] == starts
            explained = DAYS if granularity == "1_day" else starts
            for start, value in zip(starts, served.tolist(), strict=True):
                if start not in explained:
                    continue
                rows = golden.explain(name, project, granularity, start)
                attrs = rows.attrs
                first, last = period_bounds(start, granularity)
                where = f"{name} {project} {granularity} {start}"
                assert attrs["value"] == value and attrs["metric"] == name and attrs["period_start"] == str(first)
                assert attrs["total_rows"] == len(rows) and attrs["aggregation"] == metric.aggregation, where
                # Every row is of the project, the period and the metric's selection.
                times = [c for c in rows.columns if c.endswith("block_time")]
                for column in times:
                    day = rows[column].dt.tz_convert("UTC").dt.date
                    assert ((day >= first) & (day <= last)).all(), where
                for column, values in metric.select.items():
                    if column in rows.columns:
                        assert rows[column].isin(values).all(), where
                if "project" in rows.columns:
                    assert (rows["project"] == project).all(), where
                opening = attrs["opening_balance"]
                if metric.aggregation == "ending_balance":
                    before = served.tolist()[starts.index(start) - 1] if start != starts[0] else INITIAL[project]
                    assert opening == before, where
                if metric.aggregation == "count":  # the first row of each tx_id, in the rows' order
                    assert rows["counted"].tolist() == (~rows["tx_id"].duplicated()).tolist(), where
                if metric.aggregation in ("positive_net", "negative_net"):  # the rows of the accounts kept
                    nets = rows.groupby("account")["amount"].transform("sum")
                    kept = nets > 0 if metric.aggregation == "positive_net" else nets < 0
                    assert rows["counted"].tolist() == kept.tolist(), where
                got = recomputed(metric.aggregation, metric.source, rows, opening)
                assert agrees(got, value, metric.is_count), f"{where}: recomputed {got}, served {value}"
                assert agrees(by_the_attrs(rows, attrs), value, metric.is_count), where
                checked += 1
                kinds.add(metric.aggregation)
                seen["rows"] += len(rows)
                seen["incomplete"] += not attrs["complete"]
                seen["split_week"] += granularity == "1_week" and first.month != last.month
                seen["repeated_tx"] += metric.aggregation == "count" and len(rows) > value
                seen["net_dropped"] += "counted" in rows and metric.is_count is False and not rows["counted"].all()
    n_periods = len(DAYS) + sum(len(list(period_starts(*COVERAGE, g))) for g in GRANULARITIES[1:])
    assert checked == len(applicable_pairs()) * n_periods
    assert kinds == {"distinct_count", "count", "sum", "net_sum", "ending_balance", "positive_net", "negative_net"}
    assert all(seen.values()), seen  # each case the recomputation must get right did occur


def test_the_recomputation_sees_a_row_missing_or_too_many(golden):
    """The check above can fail: one row less, or a row of another selection, changes the value."""
    cases = [
        ("swap_active_users", "swapx", "1_week", "2025-01-01"),
        ("swap_transaction_count", "swapx", "1_month", "2024-12-15"),
        ("reward_negative_rent_in_sol", "solana", "1_month", "2024-12-15"),
        ("circulating_supply_in_native_token", "gov", "1_week", "2025-01-01"),
        ("transaction_fee_revenue_in_usd", "swapx", "1_month", "2024-12-15"),
    ]
    catalogue = default_catalogue()
    for name, project, granularity, date in cases:
        metric = catalogue.get(name)
        assert metric is not None
        rows = golden.explain(name, project, granularity, date)
        value, opening = rows.attrs["value"], rows.attrs["opening_balance"]
        assert agrees(recomputed(metric.aggregation, metric.source, rows, opening), value, metric.is_count)
        # The rows the value is made of: each one missing changes it.
        entering = rows.index[rows["counted"]] if "counted" in rows else rows.index
        assert len(entering) >= 2, name
        for dropped in entering:
            fewer = rows.drop(index=dropped)
            assert not agrees(recomputed(metric.aggregation, metric.source, fewer, opening), value, metric.is_count)
    # A transaction count's rows under another selection (every action, not only swaps) disagree too.
    every_action = golden.explain("liquidity_pool_deposit_transaction_count", "swapx", "1_month", "2025-01-15")
    swaps = golden.explain("swap_transaction_count", "swapx", "1_month", "2025-01-15")
    both = pd.concat([every_action, swaps])
    assert recomputed("count", "transactions", both, None) != swaps.attrs["value"]


def test_what_explain_returns_for_each_kind(golden):
    users = golden.explain("swap_active_users", "swapx", "week", "2025-01-01")
    assert list(users.columns) == ["signer", "transactions", "first_block_time", "last_block_time"]
    assert users[["signer", "transactions"]].values.tolist() == [["ivan", 3], ["judy", 1]]
    assert str(users["first_block_time"].dtype) == "datetime64[us, UTC]" and users.attrs["value"] == 2
    txs = golden.explain("swap_transaction_count", "swapx", "1_month", "2025-01-15")
    assert list(txs.columns) == [*wire_columns("transactions"), "counted"]
    assert txs[["tx_id", "counted"]].values.tolist() == [["w4", True], ["w4", False]]  # repeated: counted once
    assert txs.attrs["value"] == 1 and "counts once" in txs.attrs["formula"]
    supply = golden.explain("circulating_supply_in_native_token", "gov", "1_week", "2025-01-01")
    assert list(supply.columns) == [*wire_columns("token_flows"), "signed_amount"]
    assert supply.attrs["opening_balance"] == 1110 and supply.attrs["value"] == 1124
    assert supply.attrs["opening_balance"] + supply["signed_amount"].sum() == 1124
    rent = golden.explain("reward_positive_rent_in_sol", "solana", "1_month", "2025-01-15")
    assert list(rent.columns) == [*wire_columns("chain_rewards"), "account_net", "counted"]
    assert set(rent.attrs) >= {"service", "synthetic", "data_version", "data_version_confirmed", "formula"}
    assert rent.attrs["service"] == "http://golden.invalid" and rent.attrs["synthetic"] is False
    assert rent.attrs["data_version_confirmed"] is True and len(rent.attrs["data_version"]) == 20
    # An alias is the metric it names.
    alias = golden.explain("farm_withdraw_transaction_count", "farm", "1_month", "2025-01-15")
    assert alias.attrs["metric"] == "farm_withdrawal_transaction_count"
    empty = golden.explain("swap_transaction_count", "swapx", "1_day", "2025-01-15")
    assert empty.empty and list(empty.columns) == [*wire_columns("transactions"), "counted"]
    assert str(empty["block_time"].dtype).startswith("datetime64") and empty.attrs["value"] == 0


def wire_columns(table: str) -> list[str]:
    from metrics_kit.server.data.schema import COLUMNS

    return list(COLUMNS[table])


def test_bad_input_gets_the_errors_value_gets(golden):
    for call, argument in [
        (lambda: golden.explain("swap_users", "swapx", "1_day", "2025-01-01"), "metric"),
        (lambda: golden.explain("swap_active_users", "SwapX", "1_day", "2025-01-01"), "project"),
        (lambda: golden.explain("swap_active_users", "swapx", "hourly", "2025-01-01"), "granularity"),
        (lambda: golden.explain("swap_active_users", "swapx", "1_day", "2025-13-01"), "date"),
        (lambda: golden.explain("swap_active_users", "gov", "1_day", "2025-01-01"), "metric"),
        (lambda: golden.explain("swap_active_users", "swapx", "1_day", "2025-01-01", max_rows=0), "max_rows"),
        (lambda: golden.explain("swap_active_users", "swapx", "1_day", "2025-01-01", max_rows=True), "max_rows"),
    ]:
        with pytest.raises(ValidationError) as raised:
            call()
        assert raised.value.argument == argument
    with pytest.raises(ValidationError, match="did you mean"):
        golden.explain("swap_active_user", "swapx", "1_day", "2025-01-01")
    with pytest.raises(APIError, match="outside the data's coverage") as outside:
        golden.explain("swap_active_users", "swapx", "1_day", "2025-03-01")
    assert outside.value.code == wire.ErrorCode.DATE_OUT_OF_COVERAGE


def test_a_value_with_more_rows_than_max_rows_is_refused_saying_how_many(golden):
    with pytest.raises(ValidationError, match=r"made of 5 event rows; explain returns at most max_rows=3") as raised:
        golden.explain("swap_transaction_count", "swapx", "1_week", "2025-01-01", max_rows=3)
    assert raised.value.argument == "max_rows" and "max_rows=" in str(raised.value)


class _SmallPages:
    """The real application, asked for pages of at most ``rows`` rows: a service whose pages are
    smaller than the client's (the golden values have fewer rows than any page of the reference's)."""

    def __init__(self, app, rows: int):
        self.app, self.rows = app, rows

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"] == wire.EXPLAIN_PATH:
            query = scope["query_string"].decode()
            query = "&".join(
                f"{wire.LIMIT}={self.rows}" if part.startswith(f"{wire.LIMIT}=") else part for part in query.split("&")
            )
            scope = {**scope, "query_string": query.encode()}
        await self.app(scope, receive, send)


def test_the_client_follows_the_pages():
    service = open_service(GOLDEN, log=lambda message: None)
    app = App(service, [KEY])
    whole = Client(transport=ASGITransport(app, KEY, "http://whole.invalid"), cache=False)
    paged = Client(transport=ASGITransport(_SmallPages(app, 2), KEY, "http://paged.invalid"), cache=False)
    with whole, paged:
        for args in [
            ("swap_transaction_count", "swapx", "1_week", "2025-01-01"),  # 5 rows: 3 pages
            ("reward_negative_rent_in_sol", "solana", "1_week", "2024-12-30"),  # 5 rows
            ("net_dilution_in_native_token", "gov", "1_week", "2025-01-01"),  # 6 rows: 3 pages
        ]:
            one, pages = whole.explain(*args), paged.explain(*args)
            assert len(one) > 2
            pd.testing.assert_frame_equal(one, pages)
            assert {k: v for k, v in one.attrs.items() if k != "service"} == {
                k: v for k, v in pages.attrs.items() if k != "service"
            }


# -- the real server --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with ServerProcess(GOLDEN, key=KEY, cache_dir=tmp_path_factory.mktemp("explain-server")) as proc:
        yield proc


def _explain(server, key="default", **params):
    return server.get(wire.EXPLAIN_PATH, params, key=key)


def test_the_endpoint_pages_and_says_how_to_get_the_next_page(server):
    asked = {"metric_name": "net_dilution_in_native_token", "project": "gov", "granularity": "1_week"}
    asked["date"] = "2025-01-01"
    whole = _explain(server, **asked)
    assert whole.status_code == 200 and whole.headers["x-data-version"] and whole.headers["etag"]
    body = whole.json()
    assert list(body) == list(wire.EXPLAIN_FIELDS)
    assert body["total_rows"] == len(body["rows"]) == 6 and body["next_offset"] is None
    assert body["limit"] == wire.EXPLAIN_LIMIT and body["offset"] == 0 and body["value"] == 14.0
    rows, offset, pages = [], 0, 0
    while offset is not None:
        page = _explain(server, **asked, limit="4", offset=str(offset)).json()
        assert page["total_rows"] == 6 and len(page["rows"]) <= 4
        rows += page["rows"]
        offset, pages = page["next_offset"], pages + 1
    assert rows == body["rows"] and pages == 2
    past = _explain(server, **asked, offset="100").json()
    assert past["rows"] == [] and past["total_rows"] == 6 and past["next_offset"] is None


def test_the_endpoint_is_bounded_and_checked_like_metrics(server):
    asked = {"metric_name": "swap_active_users", "project": "swapx", "granularity": "1_day", "date": "2025-01-02"}
    for limit in ("0", str(wire.EXPLAIN_MAX_LIMIT + 1), "-1", "ten", "1.5", ""):
        answer = _explain(server, **asked, limit=limit)
        assert answer.status_code == 400, limit
        error = answer.json()["error"]
        assert error["code"] == "invalid_page" and error["param"] == "limit"
        assert f"from 1 to {wire.EXPLAIN_MAX_LIMIT:,}" in error["message"]
    assert _explain(server, **asked, offset="-3").json()["error"]["param"] == "offset"
    assert _explain(server, **asked, limit=str(wire.EXPLAIN_MAX_LIMIT)).status_code == 200
    missing = _explain(server, metric_name="swap_active_users", project="swapx").json()["error"]
    assert missing["code"] == "missing_parameter" and "/explain needs metric_name" in missing["message"]
    doubled = server.get(wire.EXPLAIN_PATH + "?limit=1&limit=2", asked).json()["error"]
    assert doubled["code"] == "duplicate_parameter" and doubled["param"] == "limit"
    assert _explain(server, key=None, **asked).json()["error"]["code"] == "missing_api_key"
    wrong = _explain(server, key="not-the-key", **asked)
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_api_key"
    assert _explain(server, **{**asked, "project": "nope"}).status_code == 404
    assert server.get(wire.EXPLAIN_PATH, asked, headers={"Accept": "text/html"}).status_code == 406
    assert server.get(wire.EXPLAIN_PATH, asked, method="POST").status_code == 405
    document = server.get("/openapi.json", key=None).json()
    assert document["paths"][wire.EXPLAIN_PATH]["get"]["x-extension"] is True
    # The page parameters' bounds in the document are the ones the server keeps.
    schemas = {p["name"]: p["schema"] for p in document["paths"][wire.EXPLAIN_PATH]["get"]["parameters"]}
    for name, lowest in ((wire.LIMIT, 1), (wire.OFFSET, 0)):
        highest = schemas[name]["maximum"]
        assert schemas[name]["minimum"] == lowest
        assert _explain(server, **asked, **{name: str(highest)}).status_code == 200, name
        assert _explain(server, **asked, **{name: str(highest + 1)}).json()["error"]["param"] == name


def test_the_endpoint_shares_the_rate_limit_of_metrics(tmp_path):
    asked = {"metric_name": "swap_active_users", "project": "swapx", "granularity": "1_day", "date": "2025-01-02"}
    with ServerProcess(GOLDEN, "--rate-limit", "1", key=KEY, cache_dir=tmp_path) as server:
        assert server.metric(*asked.values()).status_code == 200  # takes the key's one request a second
        answers = [_explain(server, **asked) for _ in range(5)]  # a few, in case the machine is slow
    limited = next(answer for answer in answers if answer.status_code == 429)
    assert limited.json()["error"]["code"] == "rate_limited" and int(limited.headers["retry-after"]) >= 1


def test_the_client_explains_from_a_real_server(server):
    with Client(server.base_url, KEY, cache=False) as client:
        rows = client.explain("swap_transaction_count", "swapx", "1_week", "2025-01-01")
        assert rows.attrs["value"] == rows["tx_id"].nunique() == 4 and len(rows) == 5
        assert rows.attrs["service"] == server.base_url and KEY not in repr(rows.attrs)


def test_served_from_aggregates_alone_explain_says_what_it_needs(tmp_path):
    out = tmp_path / "agg.parquet"  # as metrics-kit build --out writes it
    load_or_build(GOLDEN, default_catalogue(), log=lambda message: None).save(out)
    with ServerProcess(None, "--aggregates", str(out), key=KEY, cache_dir=tmp_path / "cache") as server:
        asked = {"metric_name": "swap_active_users", "project": "swapx", "granularity": "1_day", "date": "2025-01-02"}
        answer = _explain(server, **asked)
        assert answer.status_code == 501
        error = answer.json()["error"]
        assert error["code"] == "explain_unavailable" and "--data" in error["message"]
        assert server.metric(*asked.values()).status_code == 200  # its values are served all the same
        with Client(server.base_url, KEY, cache=False) as client:
            with pytest.raises(ConfigurationError, match="cannot explain values") as raised:
                client.explain("swap_active_users", "swapx", "1_day", "2025-01-02")
    message = str(raised.value)
    assert "without their event data" in message and "metrics-kit serve --data DIR" in message
    assert KEY not in message and KEY not in repr(raised.value)


class _Vendor(BaseHTTPRequestHandler):
    """A metrics service of another vendor: /metrics only; any other path is a 404."""

    def do_GET(self):  # noqa: N802 (the handler's name is http.server's)
        if self.path.startswith(wire.METRICS_PATH + "?"):
            status, body = 200, b'{"value": 3}'
        else:
            status, body = 404, b'{"detail": "Not Found"}'
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_service_without_explain_is_told_as_such():
    vendor = ThreadingHTTPServer(("127.0.0.1", 0), _Vendor)
    thread = threading.Thread(target=vendor.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{vendor.server_address[1]}"
        with Client(url, KEY, cache=False, retries=0) as client:
            assert client.value("swap_active_users", "swapx", "1_day", "2025-01-02") == 3
            with pytest.raises(ConfigurationError, match="does not offer explain") as raised:
                client.explain("swap_active_users", "swapx", "1_day", "2025-01-02")
    finally:
        vendor.shutdown()
        vendor.server_close()
        thread.join(5)
    message = str(raised.value)
    assert "extension of the metrics_kit reference service" in message and url in message
    assert KEY not in message and KEY not in repr(raised.value) and KEY not in repr(client)


def test_event_files_changed_under_the_service_are_not_explained(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(GOLDEN, data)
    service = open_service(data, log=lambda message: None)
    with Client(transport=ASGITransport(App(service, [KEY]), KEY, "http://changed.invalid"), cache=False) as client:
        assert client.explain("swap_active_users", "swapx", "1_day", "2025-01-02").attrs["value"] == 1
        with (data / "transactions.csv").open("a") as rows:
            rows.write("2025-01-02T11:00:00Z,w9,zed,swapx,swap,regular\n")
        with pytest.raises(APIError, match="changed after this service built its values") as raised:
            client.explain("swap_active_users", "swapx", "1_day", "2025-01-02")
    assert raised.value.status == 409 and raised.value.code == "events_changed"


class _ChangedBeforeTheRead(Events):
    """The event tables, with the files changed by ``change`` (once set) after the service's check and before
    its read: a race no real folder loses on demand, so only its timing is arranged here; the change
    and the reading are real files and real DuckDB."""

    change = None

    def page(self, *args, **kwargs):
        if self.change is not None:
            self.change()
        return super().page(*args, **kwargs)


def _add_a_signer(data):
    with (data / "transactions.csv").open("a") as rows:
        rows.write("2025-01-02T11:00:00Z,w9,zed,swapx,swap,regular\n")


@pytest.mark.parametrize("change", [_add_a_signer, lambda data: (data / "transactions.csv").unlink()])
def test_event_files_changed_while_they_are_read_are_not_explained(tmp_path, change):
    """A file rewritten between the check and the read would give rows that do not make the value
    served (a signer too many); one removed, a DuckDB error: both are the 409, never a wrong row set
    or a 500."""
    data = tmp_path / "data"
    shutil.copytree(GOLDEN, data)
    service = open_service(data, log=lambda message: None)
    service._events = events = _ChangedBeforeTheRead(data, service.aggregates.meta["fingerprint"])
    with Client(transport=ASGITransport(App(service, [KEY]), KEY, "http://racing.invalid"), cache=False) as client:
        assert client.explain("swap_active_users", "swapx", "1_day", "2025-01-02").attrs["value"] == 1
        events.change = lambda: change(data)  # the views are open now: the next read is of changed files
        with pytest.raises(APIError, match="changed after this service built its values") as raised:
            client.explain("swap_active_users", "swapx", "1_day", "2025-01-02")
    assert raised.value.status == 409 and raised.value.code == "events_changed"


async def _status(app, path: str, query: str = "") -> int:
    """One request to the ASGI application: its status."""
    scope = {"type": "http", "method": "GET", "path": path, "query_string": query.encode()}
    scope["headers"] = [(b"x-api-key", KEY.encode())]
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    await app(scope, receive, send)
    return sent[0]["status"]


def test_explains_waiting_for_the_event_tables_do_not_hold_up_the_catalogue():
    """More /explain pages than the event loop's pool has threads, all waiting for the event tables
    (one DuckDB connection, one query at a time): the first /catalogue is still made meanwhile. The
    test holds the tables' lock itself, so the wait lasts as long as it needs, on any machine."""
    service = open_service(GOLDEN, log=lambda message: None)
    app = App(service, [KEY])
    query = "metric_name=swap_active_users&project=swapx&granularity=1_day&date=2025-01-02"

    async def scenario():
        assert await _status(app, wire.EXPLAIN_PATH, query) == 200  # the event tables are open
        lock = service._events._lock
        lock.acquire()
        try:
            waiting = [asyncio.create_task(_status(app, wire.EXPLAIN_PATH, query)) for _ in range(40)]
            await asyncio.sleep(0.2)  # they take every thread of the pool (at most 32)
            catalogue = await asyncio.wait_for(_status(app, "/catalogue"), 30)
        finally:
            lock.release()
        return catalogue, await asyncio.gather(*waiting)

    catalogue, explained = asyncio.run(scenario())
    assert catalogue == 200 and explained == [200] * 40


def test_the_embedded_default_explains_its_demo_values():
    with Client(cache=False) as client:
        assert client.embedded
        rows = client.explain("swap_active_users", "demoswap", "1_day", "2025-06-18")
        served = client.value("swap_active_users", "demoswap", "1_day", "2025-06-18")
    assert rows.attrs["synthetic"] is True and rows.attrs["service"] == "embedded://demo"
    assert rows.attrs["value"] == served == rows["signer"].nunique() == len(rows) > 0
    assert rows["transactions"].ge(1).all()


def test_the_first_answer_does_not_load_explain():
    """/explain's modules load on its first request, not with the service: /metrics stays as quick to start."""
    script = f"""
import sys
from metrics_kit.server.building.build import load_or_build
from metrics_kit.server.dataset import open_service
from metrics_kit.server.http.app import App
service = open_service({str(GOLDEN)!r}, log=lambda message: None)
App(service, ["k-0123456789"])
asked = [("metric_name", "swap_active_users"), ("project", "swapx"), ("granularity", "1_day"), ("date", "2025-01-02")]
service.answer(asked)
assert "metrics_kit.server.serving.explain" not in sys.modules, "loaded with the service"
service.explain(asked)
assert "metrics_kit.server.serving.explain" in sys.modules
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def test_the_embedded_default_explains_after_the_cache_folder_is_deleted(tmp_path):
    """The embedded default's demo data lives in the cache folder, and its user cannot restart the
    service: the folder deleted mid-session is made again, with the files the values came from."""
    script = """
import os, shutil
import metrics_kit as mk
asked = ("swap_active_users", "demoswap", "1_week", "2025-06-18")
before = mk.explain(*asked)
shutil.rmtree(os.environ["METRICS_KIT_CACHE_DIR"])
after = mk.explain(*asked)
assert after.attrs["value"] == before.attrs["value"] == len(after) > 0, (before.attrs, after.attrs)
assert after.equals(before)
assert mk.value(*asked) == after.attrs["value"]
print("explained twice")
"""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("METRICS_KIT_")}
    environment["METRICS_KIT_CACHE_DIR"] = str(tmp_path / "cache")
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=environment, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "explained twice" in done.stdout


def test_the_embedded_default_closes_its_duckdb_connection_before_the_interpreter_exits(tmp_path):
    """The connection /explain opens is closed by an exit handler, not left to the interpreter's
    teardown: there, what a daemon thread still holds (the client's ASGI loop, here a thread of the
    test's) is never freed, and DuckDB's bindings report it ("nanobind: leaked ... instances", which
    DuckDB 2.0.0 prints, at the end of `make test-lowest`)."""
    script = """
import atexit, gc, threading, time

def connections_left_open():  # registered first, so it runs after every other exit handler
    from ibis.backends.duckdb import Backend
    left = 0
    for thing in gc.get_objects():
        if issubclass(type(thing), Backend):
            try:
                thing.con.execute("SELECT 1")
            except Exception:  # closed
                continue
            left += 1
    print(f"DuckDB connections open at exit: {left}", flush=True)

atexit.register(connections_left_open)
import metrics_kit as mk
from metrics_kit import embedded

assert len(mk.explain("swap_active_users", "demoswap", "1_day", "2025-06-18")) > 0
threading.Thread(target=lambda app: time.sleep(3600), args=(embedded.application(),), daemon=True).start()
"""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("METRICS_KIT_")}
    environment["METRICS_KIT_CACHE_DIR"] = os.environ["METRICS_KIT_CACHE_DIR"]
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=environment, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "DuckDB connections open at exit: 0" in done.stdout, done.stdout
    assert "nanobind: leaked" not in done.stderr, done.stderr[-3000:]
