"""Results save anywhere: attrs are JSON, Parquet keeps them, Feather and CSV keep every value."""

from __future__ import annotations

import datetime as dt
import json

import pandas as pd
import pytest
from client_fakes import daily_service

from metrics_kit import Client, PartialDataWarning
from metrics_kit.client.transports import MockTransport, Request, Response

DAYS = {dt.date(2025, 1, 1) + dt.timedelta(days=i): 10 + i for i in range(40)}


def flaky(request: Request) -> Response:
    if request.params.get("date") == "2025-01-13":
        return Response(404, json={"error": {"code": "date_out_of_coverage", "message": "not covered"}})
    return daily_service(DAYS, complete=request.params.get("date", "") < "2025-01-20")(request)


@pytest.fixture(scope="module")
def client():
    with Client(transport=MockTransport(flaky), cache=False, progress=False) as made:
        yield made


def results(client: Client) -> dict[str, pd.DataFrame]:
    """One of each kind of result, each with failed points and incomplete periods in its attrs."""
    with pytest.warns(PartialDataWarning):
        series = client.series(
            "swap_transaction_count", "demoswap", "2025-01-01", "2025-02-09", "1_week", errors="coerce"
        )
    with pytest.warns(PartialDataWarning):
        wide = client.frame(
            ["swap_transaction_count", "swap_active_users"], "demoswap", "2025-01-01", "2025-01-31", errors="coerce"
        )
    with pytest.warns(PartialDataWarning):
        several = client.frame(
            ["swap_transaction_count"], ["demoswap", "demoswap.clmm"], "2025-01-10", "2025-01-15", errors="coerce"
        )
    with pytest.warns(PartialDataWarning):
        long = client.frame(
            ["swap_active_users"], "demoswap", "2025-01-10", "2025-01-15", shape="long", errors="coerce"
        )
    family = client.dex("demoswap", "2025-01-01", "2025-01-10")
    assert series.attrs["incomplete"] and series.attrs["failed"]
    return {"series": series.to_frame(), "wide": wide, "several": several, "long": long, "family": family}


def test_every_attrs_value_is_json(client):
    for name, result in results(client).items():
        assert json.loads(json.dumps(result.attrs)) == result.attrs, name


def test_parquet_round_trips_values_dtypes_and_attrs(client, tmp_path):
    for name, result in results(client).items():
        path = tmp_path / f"{name}.parquet"
        result.to_parquet(path)
        back = pd.read_parquet(path)
        pd.testing.assert_frame_equal(back, result, check_freq=False)
        assert back.attrs == result.attrs, name


def test_feather_round_trips_every_value(client, tmp_path):
    for name, result in results(client).items():
        flat = result.reset_index()
        if isinstance(flat.columns, pd.MultiIndex):  # Feather takes one level of string names
            flat.columns = ["/".join(filter(None, map(str, c))) for c in flat.columns]
        path = tmp_path / f"{name}.feather"
        flat.to_feather(path)
        pd.testing.assert_frame_equal(pd.read_feather(path), flat, check_freq=False)


def test_csv_round_trips_every_value(client, tmp_path):
    for name, result in results(client).items():
        path = tmp_path / f"{name}.csv"
        result.to_csv(path)
        header = [0, 1] if isinstance(result.columns, pd.MultiIndex) else 0
        back = pd.read_csv(path, index_col=0, header=header)
        assert back.shape == result.shape, name
        assert [str(i)[:10] for i in back.index] == [str(i)[:10] for i in result.index], name
        for column in result.columns:
            expected = result[column]
            if pd.api.types.is_numeric_dtype(expected):
                assert back[column].astype("float64").tolist() == pytest.approx(
                    expected.astype("float64").tolist(), nan_ok=True
                ), (name, column)
