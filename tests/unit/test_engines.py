"""The engines a build runs on (server/building/engines.py): one protocol, one class per engine, and
code outside the engine classes that asks the engine rather than comparing its name; the names of
the server's objects mean one thing each (``dt``, ``con``, ``backend``)."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import duckdb
import ibis

from metrics_kit.server.building import build
from metrics_kit.server.building.engines import DuckDB, Engine, EngineKind, ReadsURLs
from metrics_kit.server.building.spark import Spark

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "metrics_kit"
# Where an engine's name may be spelt in a comparison: its own class, nowhere else.
ENGINE_MODULES = {PACKAGE / "server" / "building" / "engines.py", PACKAGE / "server" / "building" / "spark.py"}
ENGINE_NAMES = {"duckdb", "spark", "pyspark"}


def _members(protocol: type) -> set[str]:
    return {name for name in protocol.__dict__ if not name.startswith("_")} | set(typing.get_type_hints(protocol))


def test_every_engine_has_every_member_of_the_protocol():
    members = _members(Engine)
    assert {"name", "backend", "hash64", "repeats_by_sorting", "tables", "reused", "unreadable"} <= members
    duckdb_engine = DuckDB(ibis.duckdb.connect())
    assert [m for m in sorted(members) if not hasattr(duckdb_engine, m)] == []
    spark_engine = Spark(backend=None)  # no session: only its members are looked at
    assert [m for m in sorted(members | _members(ReadsURLs)) if not hasattr(spark_engine, m)] == []
    for kind in build.ENGINES.values():
        assert [m for m in sorted(_members(EngineKind)) if not hasattr(kind, m)] == [], kind


def test_the_build_picks_an_engine_by_name_and_only_the_default_reads_the_cache():
    assert build.ENGINES == {"duckdb": DuckDB, "spark": Spark}
    assert [name for name, kind in build.ENGINES.items() if kind.default] == ["duckdb"]


def _compares_an_engine_name(tree: ast.AST) -> list[int]:
    """Lines that compare with an engine's name (==, !=, in, not in a constant), or test whether
    something is an engine's class (isinstance, issubclass, type(...) is)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            constants = set()
            for side in sides:
                elements = side.elts if isinstance(side, ast.Tuple | ast.List | ast.Set) else [side]
                constants |= {e.value for e in elements if isinstance(e, ast.Constant) and isinstance(e.value, str)}
            if constants & ENGINE_NAMES:
                found.append(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("isinstance", "issubclass")
        ):
            named = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)} if len(node.args) > 1 else set()
            if named & {"DuckDB", "Spark"}:
                found.append(node.lineno)
    return found


def test_no_module_outside_the_engine_classes_compares_an_engine_name():
    """The build asks the engine (``Engine``, ``EngineKind``); a name compared anywhere else is a
    decision about one engine made outside its class."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in ENGINE_MODULES:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        found += [f"{path.relative_to(ROOT)}:{line}" for line in _compares_an_engine_name(tree)]
    assert found == []


def test_the_scan_sees_a_name_compared():
    code = (
        "if engine != 'spark':\n    pass\n"
        "if args.engine in ('duckdb', 'x'):\n    pass\n"
        "if isinstance(on, Spark):\n    pass\n"
        "if name == 'parquet':\n    pass\n"
    )
    assert _compares_an_engine_name(ast.parse(code)) == [1, 3, 5]


def test_dt_is_always_the_datetime_module():
    """``dt`` is the datetime module in every module that names it (Ibis's datatypes are ``datatypes``)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for alias in node.names:
                    module = alias.name if isinstance(node, ast.Import) else f"{node.module}.{alias.name}"
                    if (alias.asname or alias.name) == "dt" and module != "datetime":
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {module} as dt")
            elif isinstance(node, ast.Name) and node.id == "dt" and isinstance(node.ctx, ast.Store):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: dt assigned")
            elif isinstance(node, ast.arg) and node.arg == "dt":
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: dt as an argument")
    assert found == []


def test_an_engine_holds_an_ibis_backend_and_con_is_a_duckdb_connection():
    """``backend`` is an Ibis backend (an engine's, an event store's); ``con`` a DuckDB connection."""
    con = duckdb.connect()
    engine = DuckDB(ibis.duckdb.from_connection(con))
    assert isinstance(engine.backend, ibis.BaseBackend) and not hasattr(engine, "con")
    assert engine.backend.con is con


def test_a_local_spark_binds_the_loopback_and_keeps_the_ui_off_unless_the_user_says_otherwise(tmp_path):
    """What a build sets on a Spark of this machine alone: the driver on 127.0.0.1 and the web UI
    off, unless the user's Spark configuration (spark-defaults.conf, PYSPARK_SUBMIT_ARGS) sets them
    itself; nothing for a cluster's master, nor under spark-submit."""
    from metrics_kit.server.building import spark

    loopback = {"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1", "spark.ui.enabled": "false"}
    plain = {"SPARK_HOME": str(tmp_path), "SPARK_CONF_DIR": str(tmp_path)}
    assert spark.local_settings("local[2]", plain) == loopback
    assert spark.local_settings(None, plain) == loopback  # pyspark's own default master is local[*]
    (tmp_path / "spark-defaults.conf").write_text("# mine\nspark.ui.enabled   true\nspark.executor.memory=2g\n")
    assert spark.local_settings("local[2]", plain) == {k: v for k, v in loopback.items() if k != "spark.ui.enabled"}
    given = {**plain, "PYSPARK_SUBMIT_ARGS": "--conf spark.driver.host=10.0.0.5 --master yarn pyspark-shell"}
    assert spark.local_settings("local[1]", given) == {"spark.driver.bindAddress": "127.0.0.1"}
    assert spark.local_settings(None, given) == {}  # yarn, from PYSPARK_SUBMIT_ARGS
    assert spark.local_settings("spark://127.0.0.1:7077", plain) == {}
    assert spark.local_settings(None, {**plain, "PYSPARK_GATEWAY_PORT": "4242"}) == {}  # under spark-submit
