"""Each metric's definition as one standalone SQL query over the event tables, in DuckDB's dialect and
in Spark SQL's.

The query is generated, never written by hand: from the metric's catalogue entry (its table, its
row selection, its aggregation, the projects it applies to) and the engine's own building blocks
(``expressions``: ``where`` for the selection, ``amount_of`` for what is added up, ``kept_net``
for the per-account nets, ``each_granularity`` for the periods; ``store.coverage_of`` for
the coverage), as Ibis expressions compiled with ``ibis.to_sql`` and pretty-printed by sqlglot. The
same expressions are compiled for each dialect (:data:`DIALECTS`): the Spark SQL query is Ibis's
PySpark compiler's text, made without pyspark or a Spark session.

The engine computes the transaction metrics by a faster scheme (``building/passes.py``), and fills the
periods without events after it (``building/build.py``); a definition is the plain meaning
(``count(DISTINCT signer)``, ``count(DISTINCT tx_id)``, the zeros and carried balances in SQL), so
``tests/service/test_definitions.py`` runs every query on DuckDB over the golden and the demo data
and checks it returns the build's values; ``tests/spark/test_definitions_spark.py`` runs every Spark
SQL query on local Spark over the golden data and checks the same. ``docs/metrics.md``
(``tools/docgen``), the site's metric pages (``tools/docsite``) and ``GET /catalogue`` publish the
queries and the rules in words.

A query reads the tables of ``docs/data-format.md`` under their names (``projects``,
``transactions``, ``fees``, ``token_flows``, ``chain_rewards``; ``block_time`` a UTC timestamp)
and returns exactly what the service serves, for the three granularities at once: a row
``(granularity, project, period_start, value)`` for every project the metric applies to and
every period (UTC day, ISO week, calendar month) that overlaps coverage, a period without events
being 0 (an ending balance: the balance carried from the period before). Its named parts (CTEs):
``coverage``, ``periods``, ``per_period`` (the values of the periods with events),
``projects_with_metric``.
"""

from __future__ import annotations

import functools
import re

import ibis
import ibis.config
import ibis.expr.datatypes as datatypes
import ibis.expr.types as ir
import sqlglot
import sqlglot.expressions as exp

from metrics_kit.server.data.schema import COLUMNS, EVENT_TABLES, TABLES
from metrics_kit.server.data.store import coverage_of
from metrics_kit.server.metrics import expressions
from metrics_kit.server.metrics.expressions import where
from metrics_kit.spec.catalogue import FLOW_SIGNS, Catalogue, Metric

DIALECT = "duckdb"
SPARK = "spark"
# Each dialect a definition is written in -> the name Ibis's compiler has for it (sqlglot's is the key).
DIALECTS = {DIALECT: "duckdb", SPARK: "pyspark"}
COLUMNS_RETURNED = ("granularity", "project", "period_start", "value")
_DTYPES = {"str": datatypes.string, "float": datatypes.float64, "bool": datatypes.boolean, "time": datatypes.timestamp}
# The column a distinct count counts: active users are signers, transactions their tx_id.
DISTINCT = {"distinct_count": "signer", "count": "tx_id"}
_KEYS = ["granularity", "project", "period_start"]
_PLAIN_NAME = re.compile(r"[a-z_][a-z0-9_]*")


# How an analyst loads block_time so that the queries count the days the service counts, whatever
# the timestamp type of the export (with or without a time zone, any unit) and the session's time
# zone: the instant in nanoseconds, truncated to microseconds, as a UTC TIMESTAMP (as
# server/data/store.py normalises it; floor division is exact for times after 1970).
LOAD_BLOCK_TIME = "make_timestamp(epoch_ns(block_time) // 1000) AS block_time"


def _table(name: str) -> ir.Table:
    """The table ``name`` of the data format, by name: the query reads it as the reader has it."""
    return ibis.table({column: _DTYPES[kind] for column, kind in COLUMNS[name].items()}, name=name)


def _coverage() -> ir.Table:
    return coverage_of([_table(name) for name in EVENT_TABLES])


def _periods() -> ir.Table:
    """Every period of each granularity that holds a day of coverage: the days of coverage, each
    in its period of each granularity, as the engine puts an event's time in them."""
    coverage = ibis.table({"first_day": datatypes.date, "last_day": datatypes.date}, name="coverage")
    one_day = ibis.interval(days=1)
    first, last = coverage.first_day.cast(datatypes.timestamp), coverage.last_day.cast(datatypes.timestamp)
    days = coverage.select(block_time=ibis.range(first, last + one_day, one_day).unnest())
    days, period = expressions.each_granularity(days)
    return days.select(granularity=days.granularity, period_start=period).distinct()


def _per_period(metric: Metric) -> ir.Table:
    """The metric's value in every (granularity, project, period) with selected rows."""
    t = _table(metric.source)
    if metric.aggregation in ("positive_net", "negative_net"):  # the engine's own query, for this metric alone
        nets = expressions.nets(t, [metric], expressions.NET_KEY[metric.source], expressions.AMOUNT[metric.source])
        return nets.select(*_KEYS, value=nets[metric.name])
    selected = where(t, metric.select)
    rows, period = expressions.each_granularity(t if selected is None else t.filter(selected))
    groups = {"granularity": rows.granularity, "project": rows.project, "period_start": period}
    if metric.aggregation in DISTINCT:
        return rows.group_by(**groups).aggregate(value=rows[DISTINCT[metric.aggregation]].nunique())
    return rows.group_by(**groups).aggregate(value=expressions.amount_of(rows, metric).sum().cast(datatypes.float64))


def _projects(metric: Metric) -> ir.Table:
    """The projects the metric applies to (``Metric.applies_to``): one of its kinds among the
    project's comma-separated ``kinds``, and regular pools where it needs them."""
    p = _table("projects")
    kinds = p.kinds.replace(" ", "").split(",")
    applies = ibis.or_(*(kinds.contains(kind) for kind in sorted(metric.kinds)))
    if metric.regular_pools_only:
        applies &= p.regular_pools.fill_null(False)
    columns = ["project"]
    if metric.aggregation == "ending_balance":
        columns.append("initial_circulating_supply")
    return p.filter(applies).select(*columns)


def _served(metric: Metric, per_period: ir.Table, projects: ir.Table) -> ir.Table:
    """Every (project, period) the service serves: the value of a period without rows is 0; an
    ending balance is the project's initial supply plus the flows of every period up to this one."""
    periods = ibis.table({"granularity": datatypes.string, "period_start": datatypes.date}, name="periods")
    per_period = ibis.table(per_period.schema(), name="per_period")
    projects = ibis.table(projects.schema(), name="projects_with_metric")
    grid = projects.cross_join(periods)
    joined = grid.left_join(
        per_period,
        [
            grid.granularity == per_period.granularity,
            grid.project == per_period.project,
            grid.period_start == per_period.period_start,
        ],
    )
    value = joined.value.fill_null(0)
    if metric.aggregation == "ending_balance":
        carried = value.cumsum(group_by=[joined.project, joined.granularity], order_by=joined.period_start)
        value = joined.initial_circulating_supply.fill_null(0.0) + carried
    served = joined.select(
        granularity=joined.granularity, project=joined.project, period_start=joined.period_start, value=value
    )
    return served.order_by(*_KEYS)


def _wrapped(node: exp.Expression) -> exp.Expression | None:
    """What ``node`` selects everything of, if it is ``SELECT * FROM (query) AS tN`` with nothing
    else (Ibis writes such wrappers; the same query reads better without them)."""
    if not isinstance(node, exp.Select) or len(node.expressions) != 1 or not isinstance(node.expressions[0], exp.Star):
        return None
    source = node.find(exp.From)
    if source is None or not isinstance(source.this, exp.Subquery) or source.parent is not node:
        return None
    if any(value for key, value in node.args.items() if key not in ("expressions", "from", "from_", "order")):
        return None
    return source.this.this


def _unwrap(node: exp.Expression) -> exp.Expression:
    inner = _wrapped(node)
    if inner is None:
        return node
    order = node.args.get("order")
    if order is None:
        return inner
    # An outer ORDER BY moves into a query that has none, by the names of the columns it returns.
    if not isinstance(inner, exp.Select) or any(inner.args.get(k) for k in ("order", "limit", "distinct")):
        return node
    for column in order.find_all(exp.Column):
        column.set("table", None)
    inner.set("order", order)
    return inner


def _tidy(sql: str, dialect: str) -> exp.Expression:
    """The query as sqlglot reads it, without Ibis's ``SELECT *`` wrappers, its plain lowercase
    names unquoted (as an analyst writes them)."""
    tree = sqlglot.parse_one(sql, read=dialect)
    # The innermost first, so that a wrapper around a wrapper goes too.
    for node in reversed(list(tree.find_all(exp.Select))):
        if node is not tree and (unwrapped := _unwrap(node)) is not node:
            node.replace(unwrapped)
    tree = _unwrap(tree)
    for identifier in tree.find_all(exp.Identifier):
        if _PLAIN_NAME.fullmatch(identifier.name):
            identifier.set("quoted", False)
    return tree


class _PySparkOptions(ibis.config.Config):
    """What Ibis's PySpark compiler reads of ``ibis.options.pyspark``, which only its backend (and so
    pyspark) registers: the backend's own default, so that the Spark SQL needs neither."""

    treat_nan_as_null: bool = False


def _compiled(expr: ir.Table, dialect: str = DIALECT) -> exp.Expression:
    if dialect == SPARK and ibis.options.pyspark is None:
        ibis.options.pyspark = _PySparkOptions()  # the backend, once loaded, puts its own in its place
    return _tidy(ibis.to_sql(expr, dialect=DIALECTS[dialect]), dialect)


@functools.cache
def _shared(dialect: str) -> tuple[exp.Expression, exp.Expression]:
    """The parts every query has alike (coverage, periods), compiled once per dialect."""
    return _compiled(_coverage(), dialect), _compiled(_periods(), dialect)


def sql(metric: Metric, dialect: str = DIALECT) -> str:
    """The standalone query of ``metric`` in ``dialect`` (``DIALECT``, DuckDB's, or ``SPARK``; see
    the module's docstring for what it returns)."""
    per_period, projects = _per_period(metric), _projects(metric)
    query = _compiled(_served(metric, per_period, projects), dialect)
    assert isinstance(query, exp.Select)
    coverage, periods = _shared(dialect)
    parts = {
        "coverage": coverage,
        "periods": periods,
        "per_period": _compiled(per_period, dialect),
        "projects_with_metric": _compiled(projects, dialect),
    }
    for name, part in parts.items():
        # In place: the query and the parts compiled here are this call's own (a copy of each, as
        # with_ makes by default, costs more than compiling it); the shared parts are copied.
        own = name in ("per_period", "projects_with_metric")
        query = query.with_(name, as_=part if own else part.copy(), copy=False)
    # The query travels alone (GET /catalogue's sql): it says itself how to load what it reads.
    header = _SPARK_HEADER if dialect == SPARK else _DUCKDB_HEADER
    first = f"-- {metric.name}: one row per (granularity, project, period_start), as the metrics service serves it\n"
    return first + header + query.sql(dialect=dialect, pretty=True) + "\n"


_DUCKDB_HEADER = (
    f"-- Reads the tables {', '.join(TABLES)} (docs/data-format.md), with block_time a UTC\n"
    "-- TIMESTAMP in microseconds, truncated. Load each event table as, for example:\n"
    f"-- CREATE VIEW fees AS SELECT * REPLACE ({LOAD_BLOCK_TIME}) FROM 'fees.parquet'\n"
    "-- which holds for any timestamp column: DuckDB truncates a TIMESTAMPTZ to days in the session's\n"
    "-- time zone, and its cast from nanoseconds rounds 23:59:59.9999996 into the next day.\n"
)
# Spark truncates a TIMESTAMP to days, weeks and months (and reads a CSV time without an offset) in
# the session's time zone: the periods are UTC ones only in a UTC session.
SPARK_TIME_ZONE = "SET TIME ZONE 'UTC'"
_SPARK_HEADER = (
    f"-- Spark SQL. Reads the tables {', '.join(TABLES)}\n"
    "-- (docs/data-format.md), with block_time a TIMESTAMP, in a session in UTC (Spark puts a time in\n"
    "-- its day, week and month in the session's time zone):\n"
    f"-- {SPARK_TIME_ZONE};\n"
    "-- Load each table as, for example:\n"
    "-- CREATE TEMPORARY VIEW fees AS SELECT * FROM parquet.`fees.parquet`\n"
)


def rows_rule(metric: Metric) -> str:
    """Which rows of which event table the metric reads, in words (Markdown)."""
    picks = [f"`{column}` is {' or '.join(f'`{v}`' for v in values)}" for column, values in metric.select.items()]
    where = f", where {' and '.join(picks)}" if picks else ""
    return f"the rows of the `{metric.source}` table of the project{where}"


def value_rule(metric: Metric) -> str:
    """How one period's value follows from those rows, in words (Markdown)."""
    column = expressions.AMOUNT.get(metric.source, "amount")
    key = expressions.NET_KEY.get(metric.source, "account")
    up = " and ".join(f"`{f}`" for f, s in FLOW_SIGNS.items() if s > 0)
    down = " and ".join(f"`{f}`" for f, s in FLOW_SIGNS.items() if s < 0)
    rules = {
        "distinct_count": f"the number of distinct `{DISTINCT['distinct_count']}`s among them in the period",
        "count": f"the number of distinct `{DISTINCT['count']}`s among them in the period (a repeated row counts once)",
        "sum": f"the sum of their `{column}` in the period",
        "ending_balance": (
            f"the project's `initial_circulating_supply`, plus every {up} and less every {down} "
            "from the start of the data up to the end of the period"
        ),
        "net_sum": f"every {up} less every {down} inside the period",
        "positive_net": f"per `{key}`, the net `{column}` inside the period; the sum of the nets above zero",
        "negative_net": f"per `{key}`, the net `{column}` inside the period; the sum of the nets below zero",
    }
    return rules[metric.aggregation]


def in_words(metric: Metric) -> str:
    """How the metric is computed, in plain words (plain text: what GET /catalogue serves)."""
    text = f"For each period (UTC day, ISO week or calendar month), from {rows_rule(metric)}: {value_rule(metric)}."
    return text.replace("`", "")


@functools.cache
def _cached(catalogue: Catalogue, dialect: str) -> dict[str, str]:
    return {metric.name: sql(metric, dialect) for metric in catalogue}


def definitions(catalogue: Catalogue) -> dict[str, str]:
    """Every metric's DuckDB query by canonical name, generated once per catalogue."""
    return _cached(catalogue, DIALECT)


def spark_definitions(catalogue: Catalogue) -> dict[str, str]:
    """Every metric's Spark SQL query by canonical name, generated once per catalogue."""
    return _cached(catalogue, SPARK)
