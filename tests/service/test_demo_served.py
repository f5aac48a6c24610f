"""Catalogue-wide: every metric is served, with real activity, for a project of the demo data."""

from __future__ import annotations

import pytest
from support import ServerProcess

from metrics_kit.server.data import demo
from metrics_kit.spec.calendar import GRANULARITIES
from metrics_kit.spec.catalogue import default_catalogue

CATALOGUE = default_catalogue("sol")
MID = "2025-06-18"  # a Wednesday well inside the demo coverage


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo")
    demo.generate(folder)
    with ServerProcess(folder) as server:
        yield server


@pytest.fixture(scope="module")
def projects(server):
    response = server.get("/projects")
    assert response.status_code == 200
    return response.json()["projects"]


@pytest.mark.parametrize("granularity", GRANULARITIES)
@pytest.mark.parametrize("metric", [m.name for m in CATALOGUE])
def test_every_metric_is_served_with_activity(server, projects, metric, granularity):
    applicable = [p["project"] for p in projects if metric in p["metrics"]]
    assert applicable, f"no demo project offers {metric}"
    for project in applicable:
        body = server.metric(metric, project, granularity, MID).json()
        assert body["metric_name"] == metric and body["complete"] is True
        assert body["unit"] == CATALOGUE.get(metric).unit
        if CATALOGUE.get(metric).is_count:
            assert type(body["value"]) is int
        # Demo data exercise every metric: each applicable pair shows activity mid-coverage
        # (day-level values may legitimately be 0 for rare events such as burns).
        if granularity == "1_month":
            assert body["value"] != 0, (metric, project)


def test_demo_has_every_kind_a_dotted_id_and_one_regular_pool_exchange(projects):
    kinds = {k for p in projects for k in p["kinds"]}
    assert kinds == {"tokenomics", "yield", "dex", "lending", "chain"}
    assert any("." in p["project"] for p in projects)
    assert sum(p["regular_pools"] for p in projects) == 1
    assert all(p["project"].startswith("demo") for p in projects)


def test_demo_covers_two_years(server):
    coverage = server.get("/projects").json()["coverage"]
    assert coverage == {"start": demo.DEMO_START.isoformat(), "end": demo.DEMO_END.isoformat()}
