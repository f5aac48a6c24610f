"""The data-format rules of the event tables as Ibis expressions, the same on every engine.

``docs/data-format.md`` says what each column allows; ``store`` checks a local data folder with
DuckDB SQL of its own (tuned to its scans), and these expressions check the tables of raw exports
on the engine that builds them (``exports``: Spark reads them where they are). Each rule is a
column, what it allows in words, and a predicate over the normalised columns (and the raw ones,
prefixed ``r_``) that flags a row breaking it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import ibis
import ibis.expr.datatypes as datatypes
import ibis.expr.types as ir

from metrics_kit.errors import DataFormatError
from metrics_kit.server.data.schema import (
    ACTIONS,
    COLUMNS,
    FEE_TYPES,
    FLOWS,
    POOL_TYPES,
    RECIPIENTS,
    REWARD_TYPES,
)
from metrics_kit.spec.ids import PROJECT_PATTERN


@dataclass(frozen=True)
class Rule:
    column: str
    allowed: str  # what the rule allows, in words
    bad: Callable[[ir.Table], ir.BooleanValue]  # flags a row that breaks it


def expected(kind: str) -> str:
    """What a column of ``kind`` must be, as an error says it (the same words on every engine)."""
    return {"time": "a timestamp", "float": "double", "str": "varchar", "bool": "boolean"}[kind]


def kind_ok(kind: str, found: datatypes.DataType) -> bool:
    """Whether a column found of type ``found`` is one that the normalisation of ``kind`` reads."""
    if kind == "time":
        return found.is_timestamp() or found.is_date() or found.is_string()
    if kind == "float":
        return found.is_numeric() or found.is_string() or found.is_null()
    if kind == "bool":
        return found.is_boolean() or found.is_string() or found.is_null()
    return not (found.is_array() or found.is_struct() or found.is_map())


T = TypeVar("T")


def part_columns(
    name: str,
    table: str,
    own: Mapping[str, T],
    levels: Mapping[str, str | None],
    type_ok: Callable[[str, T], bool],
    shown: Callable[[T], str] = str,
    header_problem: Callable[[], DataFormatError | None] = lambda: None,
) -> dict[str, str | None]:
    """Check one part's columns against its table's, by the same rule and in the same words on
    every engine: ``own`` are the part's columns with their types as its engine reads them
    (``type_ok`` says whether the format reads a type for a column's kind, ``shown`` writes it),
    ``levels`` its Hive-style folder levels. Every column must be there, in the file or from its
    folders but not both, of a type the format reads; else a DataFormatError naming the part
    (``header_problem``: a better one for missing columns, such as a CSV line that makes the header
    unreadable). Returns the columns its folders supply."""
    wanted = COLUMNS[table]
    given = {column: value for column, value in levels.items() if column in wanted}
    for column, value in given.items():
        if column in own:
            raise DataFormatError(
                f"{name}, column {column!r}: given both in the file and by its folder "
                f"{column}={'' if value is None else value}; give it in one place (a Hive-style folder "
                "level supplies a column the files lack)"
            )
    missing = [c for c in wanted if c not in own and c not in given]
    if missing:
        raise header_problem() or DataFormatError(
            f"{name}: missing column{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}; "
            f"the {table} table has columns {', '.join(wanted)} (found: {', '.join([*own, *given])})"
        )
    for column, kind in wanted.items():
        if column in own and not type_ok(kind, own[column]):
            raise DataFormatError(
                f"{name}, column {column!r}: has type {shown(own[column])}; expected {expected(kind)}"
            )
    return given


def type_problem(table: str, schema: ibis.Schema) -> tuple[str, str] | None:
    """(column, what is wrong) for the first column of ``table`` that is missing or of a type no
    normalisation reads; None when every column is there."""
    missing = [c for c in COLUMNS[table] if c not in schema]
    if missing:
        return missing[0], (
            f"missing column{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}; the {table} table "
            f"has columns {', '.join(COLUMNS[table])} (found: {', '.join(c for c in schema if not c.startswith('_'))})"
        )
    for column, kind in COLUMNS[table].items():
        if not kind_ok(kind, schema[column]):
            return column, f"has type {schema[column]}; expected {expected(kind)}"
    return None


def normalised(raw: ir.Table, table: str) -> dict[str, ir.Value]:
    """Each column of ``table`` as the engine computes from: ``block_time`` a timestamp (UTC: the
    session's zone), text with empty strings as missing, amounts as doubles; a value that does not
    parse becomes missing, which a rule then flags."""
    out: dict[str, ir.Value] = {}
    for column, kind in COLUMNS[table].items():
        value = raw[column]
        if kind == "time":
            out[column] = (
                value.try_cast(datatypes.timestamp) if value.type().is_string() else value.cast(datatypes.timestamp)
            )
        elif kind == "float":
            out[column] = (
                value.strip().try_cast(datatypes.float64) if value.type().is_string() else value.cast(datatypes.float64)
            )
        elif kind == "str":
            text = value if value.type().is_string() else value.cast(datatypes.string)
            out[column] = text.nullif("")
        else:
            out[column] = value
    return out


@dataclass(frozen=True)
class ColumnRule:
    """What one column of an event table allows, as data: both validators build their checks
    from these (``store`` in DuckDB SQL, :func:`rules` in Ibis)."""

    column: str
    kind: str  # "required", "one_of", "one_of_or_empty", "number" or "non_negative"
    allowed: str
    values: tuple[str, ...] = ()


def _listed(column: str, values: tuple[str, ...], nullable: bool = False) -> ColumnRule:
    allowed = "one of " + ", ".join(values) + (" or empty" if nullable else "")
    return ColumnRule(column, "one_of_or_empty" if nullable else "one_of", allowed, values)


TIMESTAMP = "an ISO 8601 timestamp or a Parquet timestamp"
PROJECT_ID = "a lowercase project id (letters, digits, '-', '_', parts joined by dots)"
# Every event table's columns after block_time and project, which every event table checks first.
EVENT_COLUMNS: dict[str, list[ColumnRule]] = {
    "transactions": [
        ColumnRule("tx_id", "required", "a non-empty transaction id"),
        ColumnRule("signer", "required", "a non-empty signer address"),
        _listed("action", ACTIONS),
        _listed("pool_type", POOL_TYPES, nullable=True),
    ],
    "fees": [
        _listed("fee_type", FEE_TYPES),
        _listed("recipient", RECIPIENTS),
        ColumnRule("amount_usd", "number", "a finite number"),
    ],
    "token_flows": [_listed("flow", FLOWS), ColumnRule("amount", "non_negative", "a finite number >= 0")],
    "chain_rewards": [
        ColumnRule("account", "required", "a non-empty account address"),
        _listed("reward_type", REWARD_TYPES),
        ColumnRule("amount", "number", "a finite signed number"),
    ],
}


def project_listed(projects: list[str]) -> str:
    return "a project listed in the projects table: " + ", ".join(projects)


def _ibis(rule: ColumnRule) -> Rule:
    column, values = rule.column, list(rule.values)

    def bad(t: ir.Table) -> ir.BooleanValue:
        value = t[column]
        if rule.kind == "required":
            return value.isnull()
        if rule.kind == "one_of":
            return value.isnull() | ~value.isin(values)
        if rule.kind == "one_of_or_empty":
            return value.notnull() & ~value.isin(values)
        broken = value.isnull() | value.isnan() | value.isinf()
        return broken | (value < 0) if rule.kind == "non_negative" else broken

    return Rule(column, rule.allowed, bad)


def rules(table: str, projects: list[str]) -> list[Rule]:
    """The rules of an event table, given the projects of the projects table."""
    return [
        Rule("block_time", TIMESTAMP, lambda t: t.block_time.isnull()),
        Rule("project", PROJECT_ID, lambda t: t.project.isnull() | ~t.project.re_search(PROJECT_PATTERN)),
        Rule(
            "project",
            project_listed(projects),
            lambda t: t.project.notnull() & (~t.project.isin(projects) if projects else ibis.literal(True)),
        ),
        *map(_ibis, EVENT_COLUMNS[table]),
    ]
