"""Documentation that is generated from the catalogue must match it."""

import re
from pathlib import Path

from metrics_kit.spec.catalogue import default_catalogue
from metrics_kit.tools import docgen

ROOT = Path(__file__).parents[2]


def test_metrics_table_is_current():
    committed = (ROOT / "docs" / "metrics.md").read_text()
    assert committed == docgen.markdown(default_catalogue("sol")), (
        "docs/metrics.md is stale: run `python -m metrics_kit.tools.docgen > docs/metrics.md`"
    )


def test_every_metric_is_documented():
    text = (ROOT / "docs" / "metrics.md").read_text()
    for metric in default_catalogue("sol"):
        assert f"`{metric.name}`" in text


def test_the_files_the_metrics_table_names_exist():
    text = (ROOT / "docs" / "metrics.md").read_text()
    named = re.findall(r"`((?:metrics_kit|docs|tests)/[\w./-]+)`", text)
    assert named, "docs/metrics.md names where it is generated from"
    assert [path for path in named if not (ROOT / path).is_file()] == []
