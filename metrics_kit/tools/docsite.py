"""The documentation site's generated pages: one page per metric, with an example chart, and the notebooks.

``docs/conf.py`` calls :func:`generate` before Sphinx reads the sources. It writes into
``docs/generated/`` (git-ignored): ``metrics/<name>.md`` for every catalogue entry, ``metrics/index.md``
listing them, and ``notebooks/*.ipynb``, the example notebooks with their stored outputs (the site
renders them, it never runs them). The charts are drawn into the build folder, from the embedded
reference service on the SYNTHETIC demo data set (built once, in the cache folder, as for the
notebooks), and every chart and caption says so.

A file is written only when its content changes, so that Sphinx rebuilds only the pages that did.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from metrics_kit.server.metrics.definitions import definitions, rows_rule, spark_definitions, value_rule
from metrics_kit.spec.catalogue import FAMILIES, Catalogue, Metric, default_catalogue

# The section of a metric's page that holds its standalone SQL query (server/metrics/definitions.py).
SQL_DEFINITION = "SQL definition"
# The example charts' span: half a year of whole weeks inside the demo data's coverage.
EXAMPLE_START, EXAMPLE_END, EXAMPLE_GRANULARITY = "2025-01-06", "2025-06-29", "1_week"
# A notebook output of this type is a live widget; the site shows its stored picture and text instead,
# since drawing the widget would load the widget manager's JavaScript from elsewhere.
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def write_if_changed(path: Path, text: str | bytes) -> bool:
    """Writes ``path`` unless it already holds exactly ``text``; True when it wrote."""
    data = text.encode() if isinstance(text, str) else text
    if path.exists() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return True


# -- the words of a metric's page --------------------------------------------------------------------


def _code(values: Iterable[str]) -> str:
    return ", ".join(f"`{v}`" for v in values)


def example_project(metric: Metric, projects: Sequence[tuple[str, Sequence[str], bool]]) -> str | None:
    """The first of ``projects`` (id, kinds, regular pools) that ``metric`` applies to."""
    for name, kinds, regular in projects:
        if metric.applies_to(kinds, regular):
            return name
    return None


def example_code(metric: Metric, project: str) -> str:
    return (
        "import metrics_kit as mk\n"
        "from metrics_kit.notebook import charts\n\n"
        f'values = mk.series("{metric.name}", "{project}", "{EXAMPLE_START}", "{EXAMPLE_END}", '
        f'"{EXAMPLE_GRANULARITY}")\n'
        f'charts.line_chart(values, title="{chart_title(metric, project)}")\n'
    )


def chart_title(metric: Metric, project: str) -> str:
    from metrics_kit.notebook import charts

    return charts.title(charts.label(metric.name), project, granularity=EXAMPLE_GRANULARITY, synthetic=True)


def metric_page(
    metric: Metric,
    projects: Sequence[tuple[str, Sequence[str], bool]],
    chart: str | None,
    query: str,
    spark_query: str | None = None,
) -> str:
    """The Markdown (MyST) page of one metric. ``chart``: the path of its example chart, relative to
    the page (None: no demo project has the metric, so no chart); ``query``: its SQL definition
    (DuckDB); ``spark_query``: the same in Spark SQL (None: not shown)."""
    applies = [name for name, kinds, regular in projects if metric.applies_to(kinds, regular)]
    example = example_project(metric, projects)
    lines = [
        f"# `{metric.name}`",
        "",
        metric.description,
        "",
        "| | |",
        "|---|---|",
        f"| family | {', '.join(metric.families)} |",
        f"| unit | `{metric.unit}` |",
        f"| aggregation | `{metric.aggregation}` |",
        f"| aliases | {_code(metric.aliases) if metric.aliases else 'none'} |",
        f"| applies to | {metric.restriction} |",
        f"| demo projects it applies to | {_code(applies) if applies else 'none'} |",
        "| granularities | `1_day`, `1_week`, `1_month` |",
        "",
        "## How it is computed",
        "",
        f"For each period (UTC day, ISO week or calendar month), from {rows_rule(metric)}: {value_rule(metric)}.",
        "Periods, coverage and incomplete periods are as in the service's",
        "[How values are computed](../../service.md#how-values-are-computed).",
        "",
        f"## {SQL_DEFINITION}",
        "",
        "One standalone query (DuckDB dialect) over the event tables, generated from the engine's own",
        "definition: this metric's value for every project it applies to and every period of coverage, in",
        "the three granularities, exactly as the service serves them (a period without events is 0). What",
        "it reads and returns: [the definitions](../../metrics.md#definitions).",
        "",
        "```sql",
        query.rstrip("\n"),
        "```",
        "",
        *(
            []
            if spark_query is None
            else [
                "The same in Spark SQL, to run in a Spark session in UTC over the same tables:",
                "",
                "```sql",
                spark_query.rstrip("\n"),
                "```",
                "",
            ]
        ),
        "## Example",
        "",
    ]
    if chart is None or example is None:
        lines += ["No project of the demo data set has this metric, so there is no example chart.", ""]
    else:
        lines += [
            f"**Synthetic demo data.** `{metric.name}` of `{example}`, per week, from the embedded reference",
            "service's made-up demo data set ([what it models](../../demo-data.md)): the shape shows what",
            "the metric looks like, never any real project.",
            "",
            f"![{chart_title(metric, example)}]({chart})",
            "",
            "```python",
            example_code(metric, example).rstrip("\n"),
            "```",
            "",
        ]
    lines += ["See also: [the catalogue](../../metrics.md).", ""]
    return "\n".join(lines)


def index_page(catalogue: Catalogue) -> str:
    """The list of the metric pages, by family."""
    lines = [
        "# Metric pages",
        "",
        "One page per metric of the catalogue: its definition, how it is computed and an example chart",
        "on the synthetic demo data. The same entries in one table: [the catalogue](../../metrics.md).",
        "",
        "```{toctree}",
        ":hidden:",
        "",
        *[m.name for m in catalogue],
        "```",
        "",
    ]
    for family in FAMILIES:
        members = [m for m in catalogue if m.family == family]
        if not members:
            continue
        lines += [f"## {family}", ""]
        lines += [f"- [`{m.name}`]({m.name}.md): {m.description}" for m in members]
        lines.append("")
    return "\n".join(lines)


# -- the notebooks ---------------------------------------------------------------------------------


def static_notebook(text: str) -> str:
    """A notebook's JSON with its live widgets replaced by their stored fallbacks (picture, text) and
    the widget state dropped, so that the page needs no widget JavaScript."""
    notebook = json.loads(text)
    notebook.get("metadata", {}).pop("widgets", None)
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []):
            data = output.get("data")
            if isinstance(data, dict):
                data.pop(WIDGET_VIEW, None)
                data.pop(WIDGET_STATE, None)
    return json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"


def copy_notebooks(source: Path, target: Path) -> list[str]:
    """Every ``source/*.ipynb`` into ``target`` as :func:`static_notebook`; their names, sorted."""
    names = []
    for path in sorted(source.glob("*.ipynb")):
        write_if_changed(target / path.name, static_notebook(path.read_text()))
        names.append(path.name)
    for stale in target.glob("*.ipynb"):
        if stale.name not in names:
            stale.unlink()
    return names


# -- the charts ------------------------------------------------------------------------------------


def demo_projects(client: Any) -> list[tuple[str, list[str], bool]]:
    table = client.projects()
    return [(str(name), list(row["kinds"]), bool(row["regular_pools"])) for name, row in table.iterrows()]


def draw_charts(client: Any, catalogue: Catalogue, projects: Sequence[tuple[str, Sequence[str], bool]], out: Path):
    """Each metric's example chart as ``out/<name>.png``; the names of the metrics drawn.

    The values come from ``client``, which must answer from the synthetic demo data: a chart of any
    other data would be mislabelled, so that is an error."""
    from metrics_kit.notebook import charts

    drawn = {}
    by_project: dict[str, list[Metric]] = {}
    for metric in catalogue:
        project = example_project(metric, projects)
        if project is not None:
            by_project.setdefault(project, []).append(metric)
    for project, metrics in by_project.items():
        frame = client.frame(
            [m.name for m in metrics], [project], EXAMPLE_START, EXAMPLE_END, EXAMPLE_GRANULARITY, progress=False
        )
        if frame.attrs.get("synthetic") is not True:
            raise RuntimeError(f"the example values of {project} are not from the synthetic demo data set")
        for metric in metrics:
            column = frame[[metric.name]]
            column.attrs = dict(frame.attrs)
            fig = charts.line_chart(column, [metric.name], title=chart_title(metric, project))
            write_if_changed(out / f"{metric.name}.png", charts.png(fig))
            drawn[metric.name] = project
    return drawn


def generate(docs: Path, charts_dir: Path, notebooks: Path) -> None:
    """Writes ``docs/generated/`` (the metric pages, the notebooks) and the charts into ``charts_dir``."""
    from metrics_kit import embedded
    from metrics_kit.client.client import Client

    generated = docs / "generated"
    catalogue = default_catalogue()
    with Client(transport=embedded.transport(), cache=False, progress=False) as client:
        projects = demo_projects(client)
        drawn = draw_charts(client, catalogue, projects, charts_dir)
    pages = generated / "metrics"
    queries, spark = definitions(catalogue), spark_definitions(catalogue)
    for metric in catalogue:
        chart = None
        if metric.name in drawn:
            chart = Path("..", "..", charts_dir.relative_to(docs), f"{metric.name}.png").as_posix()
        page = metric_page(metric, projects, chart, queries[metric.name], spark[metric.name])
        write_if_changed(pages / f"{metric.name}.md", page)
    write_if_changed(pages / "index.md", index_page(catalogue))
    copy_notebooks(notebooks, generated / "notebooks")
