"""The documentation site's generated pages (metrics_kit/tools/docsite.py): one per metric, and the
notebooks shown without live widgets. The built site itself is checked in the browser
(tests/browser/test_docs_site.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from metrics_kit.server.metrics.definitions import definitions, spark_definitions
from metrics_kit.spec.catalogue import AGGREGATIONS, Metric, default_catalogue
from metrics_kit.tools import docsite

ROOT = Path(__file__).parents[2]
PAGES = ROOT / "docs" / "generated" / "metrics"  # where the pages go: their links are relative to it
CATALOGUE = default_catalogue()
# The demo data set's projects: id, kinds, regular pools (docs/demo-data.md).
DEMO = [
    ("demochain", ["chain"], False),
    ("demofarm", ["tokenomics", "yield"], False),
    ("demogov", ["tokenomics"], False),
    ("demolend", ["lending"], False),
    ("demoswap", ["dex", "tokenomics"], True),
    ("demoswap.clmm", ["dex"], False),
]


def test_every_aggregation_has_its_rule_in_words():
    for aggregation in AGGREGATIONS:
        metric = Metric("m", ("f",), "usd", aggregation, "d", "fees")
        assert docsite.value_rule(metric)


@pytest.mark.parametrize("metric", list(CATALOGUE), ids=lambda m: m.name)
def test_a_metric_page_says_what_the_catalogue_says(metric):
    query, spark_query = definitions(CATALOGUE)[metric.name], spark_definitions(CATALOGUE)[metric.name]
    page = docsite.metric_page(metric, DEMO, f"charts/{metric.name}.png", query, spark_query)
    assert page.startswith(f"# `{metric.name}`\n")
    for fact in (metric.description, f"`{metric.unit}`", f"`{metric.aggregation}`", metric.restriction):
        assert fact in page
    for alias in metric.aliases:
        assert f"`{alias}`" in page
    assert f"`{metric.source}`" in page
    for column, values in metric.select.items():
        assert f"`{column}`" in page and all(f"`{v}`" in page for v in values)
    assert f"## {docsite.SQL_DEFINITION}\n" in page
    # the section holds the metric's generated query, whole
    assert f"```sql\n{query}```\n" in page.split(f"## {docsite.SQL_DEFINITION}\n")[1]
    assert f"```sql\n{spark_query}```\n" in page.split(f"## {docsite.SQL_DEFINITION}\n")[1]
    assert f"](charts/{metric.name}.png)" in page and "Synthetic demo data" in page


def test_the_metric_pages_link_to_pages_and_sections_that_exist():
    page = docsite.metric_page(CATALOGUE.get("swap_active_users"), DEMO, "chart.png", "SELECT 1\n")
    for target in re.findall(r"\]\(([^)]+\.md)(?:#([\w-]+))?\)", page):
        path, anchor = target
        file = (PAGES / path).resolve()
        assert file.is_file(), path
        if anchor:
            headings = re.findall(r"^#+ (.+)$", file.read_text(), re.M)
            slugs = {re.sub(r"[^\w -]", "", h).strip().lower().replace(" ", "-") for h in headings}
            assert anchor in slugs, (path, anchor)


def test_the_example_project_is_one_the_metric_applies_to():
    assert docsite.example_project(CATALOGUE.get("regular_pool_swap_transaction_count"), DEMO) == "demoswap"
    assert docsite.example_project(CATALOGUE.get("swap_active_users"), DEMO) == "demoswap"
    assert docsite.example_project(CATALOGUE.get("borrowing_active_users"), DEMO) == "demolend"
    for metric in CATALOGUE:
        assert docsite.example_project(metric, DEMO) is not None, metric.name
    # no project it applies to: no chart, and the page says so
    page = docsite.metric_page(CATALOGUE.get("swap_active_users"), [("demolend", ["lending"], False)], None, "")
    assert "no example chart" in page and "![" not in page


def test_the_index_lists_every_metric_page():
    index = docsite.index_page(CATALOGUE)
    for metric in CATALOGUE:
        assert f"]({metric.name}.md)" in index


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_a_notebook_on_the_site_shows_its_widgets_stored_picture_and_no_widget(path):
    original = json.loads(path.read_text())
    shown = json.loads(docsite.static_notebook(path.read_text()))
    assert "widgets" not in shown["metadata"]
    assert docsite.WIDGET_VIEW not in json.dumps(shown)
    widgets = 0
    for before, after in zip(original["cells"], shown["cells"], strict=True):
        assert before["source"] == after["source"]
        for out_before, out_after in zip(before.get("outputs", []), after.get("outputs", []), strict=True):
            data = out_before.get("data", {})
            if docsite.WIDGET_VIEW in data:
                widgets += 1
                assert out_after["data"]["image/png"] == data["image/png"]
                assert out_after["data"]["text/plain"] == data["text/plain"]
            else:
                assert out_after == out_before
    assert widgets >= 1  # every example notebook has a panel (notebooks/README.md)


def test_a_file_is_written_only_when_it_changes(tmp_path):
    path = tmp_path / "a" / "page.md"
    assert docsite.write_if_changed(path, "one")
    assert not docsite.write_if_changed(path, "one")
    assert docsite.write_if_changed(path, "two") and path.read_text() == "two"
