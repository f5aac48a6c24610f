"""Documentation generated from the catalogue, so that it cannot drift from the code.

``python -m metrics_kit.tools.docgen > docs/metrics.md`` rewrites the table; a test fails when the
committed file differs from what this prints.
"""

from __future__ import annotations

from metrics_kit.spec.catalogue import FAMILIES, Catalogue, default_catalogue

_HEADER = """# Metric catalogue

Generated from `metrics_kit/spec/catalogue.py` by `python -m metrics_kit.tools.docgen > docs/metrics.md`;
do not edit by hand. Every metric accepts the granularities `1_day`, `1_week` and `1_month`.
Chain reward metrics end in the chain's unit, here `{unit}` (a setting: `--chain-unit`).

| metric | family | unit | aggregation | applies to | description |
|---|---|---|---|---|---|
"""


def markdown(catalogue: Catalogue) -> str:
    rows = []
    for family in FAMILIES:
        for metric in catalogue:
            if metric.family != family:
                continue
            name = f"`{metric.name}`" + "".join(f"<br>alias `{a}`" for a in metric.aliases)
            rows.append(
                f"| {name} | {', '.join(metric.families)} | {metric.unit} | {metric.aggregation} "
                f"| {metric.restriction} | {metric.description} |"
            )
    return _HEADER.format(unit=catalogue.chain_unit) + "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown(default_catalogue("sol")), end="")
