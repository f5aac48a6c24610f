"""Spark Connect for real: a Spark Connect server started from pyspark's own jars on 127.0.0.1 builds
the golden data, value for value as DuckDB; and what goes wrong on the way is one line that says
what to do, with any token masked.

One server for the module (a JVM with a ``local[2]`` Spark), started by ``spark-submit --class
SparkConnectServer`` with the spark-connect jar that pyspark's wheel ships (pyspark 4.0: client and
server of the same release), on a port the system picks, stopped by its PID.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from spark_support import ConnectServer, assert_same_values, cli, run_cli
from support import split_by_day

from metrics_kit.server.serving.aggregates import Aggregates

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

GOLDEN = Path(__file__).parent.parent / "golden" / "data"
SECRET = "hunter2-very-secret"


@pytest.fixture(scope="module")
def server(connect) -> ConnectServer:
    return connect


@pytest.fixture(scope="module")
def on_duckdb(tmp_path_factory) -> Aggregates:
    out = tmp_path_factory.mktemp("duckdb") / "duckdb.parquet"
    cli("build", "--data", GOLDEN, "--out", out)
    return Aggregates.read(out)


def _one_line_error(done) -> str:
    """The error of a failed ``metrics-kit``: exit status 2 and one line on stderr, no traceback."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    errors = [line for line in done.stderr.splitlines() if line.startswith("metrics-kit: error:")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    return errors[0]


def test_golden_data_on_spark_connect_equals_duckdb(server, on_duckdb, tmp_path):
    out = tmp_path / "connect.parquet"
    log = cli("build", "--data", GOLDEN, "--engine", "spark", "--spark-master", server.url, "--out", out)
    assert f"(Spark Connect {server.url}) started" in log, log
    assert "verifySchema" not in log, log
    assert assert_same_values(on_duckdb, Aggregates.read(out)) > 2_000


def test_a_url_refreshes_over_spark_connect(server, tmp_path):
    """The refresh state is read and written by the server (no file system of this process's): the
    second build of the URL, a day added, is a refresh with a full build's values."""
    events = tmp_path / "events"
    events.mkdir()
    shutil.copy(GOLDEN / "projects.csv", events)
    for table in ("transactions", "fees", "token_flows", "chain_rewards"):
        split_by_day(GOLDEN, events, table)
    spark = ("--engine", "spark", "--spark-master", server.url)
    cli("build", "--data", events.as_uri(), *spark, "--out", tmp_path / "first.parquet")
    (events / "transactions" / "2025-02-02.csv").write_text(
        "block_time,tx_id,signer,project,action,pool_type\n2025-02-02T09:00:00Z,n1,zoe,swapx,swap,regular\n"
    )
    log = cli("build", "--data", events.as_uri(), *spark, "--out", tmp_path / "refreshed.parquet")
    assert "Updated aggregates incrementally" in log and "1 file added" in log, log
    cli("build", "--data", events, "--out", tmp_path / "duckdb.parquet")
    duckdb, refreshed = (Aggregates.read(tmp_path / f"{n}.parquet") for n in ("duckdb", "refreshed"))
    assert assert_same_values(duckdb, refreshed, same_files=False) > 0
    assert sorted(p.name for p in Path(f"{events}.metrics-kit-state").iterdir()) == [
        "commit-a",
        "commit-b",
        "values-a",
        "values-b",
    ]


def test_spark_remote_is_honoured(server, on_duckdb, tmp_path):
    """No --spark-master: SPARK_REMOTE names the server, as it does for pyspark (no Java needed)."""
    out = tmp_path / "remote.parquet"
    log = cli("build", "--data", GOLDEN, "--engine", "spark", "--out", out, env={"SPARK_REMOTE": server.url})
    assert f"(Spark Connect {server.url}) started" in log, log
    assert assert_same_values(on_duckdb, Aggregates.read(out)) > 2_000


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("sc://127.0.0.1:", "no port after ':'"),
        ("sc://127.0.0.1:http/;token=" + SECRET, "port 'http' is not a number"),
        ("sc://127.0.0.1:15002;token=" + SECRET, "after HOST:PORT comes '/;param=value'"),
        ("sc://127.0.0.1:15002/;token=" + SECRET + ";oops", "'oops' is not param=value"),
        ("sc:/127.0.0.1", "not a Spark Connect URL"),
    ],
)
def test_a_malformed_connect_url_is_one_line_and_masks_the_token(url, said, tmp_path):
    line = _one_line_error(run_cli("build", "--data", GOLDEN, "--engine", "spark", "--spark-master", url))
    assert said in line and "sc://HOST[:PORT]" in line, line
    assert SECRET not in line


def test_a_malformed_spark_remote_is_named(tmp_path):
    done = run_cli("build", "--data", GOLDEN, "--engine", "spark", env={"SPARK_REMOTE": "sc://127.0.0.1:"})
    assert _one_line_error(done).startswith("metrics-kit: error: SPARK_REMOTE 'sc://127.0.0.1:': no port")


def test_a_token_is_masked_when_the_server_refuses(server, tmp_path):
    """A token asks for TLS, which the test server does not speak: the session cannot start, and
    neither the error nor anything else printed shows the token."""
    url = f"{server.url}/;token={SECRET};user_id=analyst"
    done = run_cli(
        "build", "--data", GOLDEN, "--engine", "spark", "--spark-master", url, "--out", tmp_path / "x.parquet"
    )
    line = _one_line_error(done)
    assert f"{server.url}/;token=***;user_id=analyst" in line and "no Spark Connect server answered" in line, line
    assert SECRET not in done.stdout + done.stderr
    assert not (tmp_path / "x").exists()


def test_a_missing_connect_client_package_is_one_line(server, tmp_path):
    """grpcio, which the Connect client needs, made missing by a module that fails to import in its place."""
    hidden = tmp_path / "hide"
    hidden.mkdir()
    (hidden / "grpc.py").write_text("raise ImportError(\"No module named 'grpc'\")\n")
    done = run_cli(
        "build", "--data", GOLDEN, "--engine", "spark", "--spark-master", server.url, env={"PYTHONPATH": str(hidden)}
    )
    line = _one_line_error(done)
    assert "grpcio" in line and "pip install 'metrics-kit[spark]'" in line, line


def test_a_path_the_server_cannot_read_is_named_as_given(server, tmp_path):
    """The build writes the validated data for Spark under its cache folder, here given as a path
    through /proc/self/cwd: this process reads it in its own working directory, the server (another
    process, in another directory) finds nothing there, as a server on another machine would not.
    The error names --data as the user gave it and says what to do."""
    cwd = tmp_path / "client"
    cwd.mkdir()
    done = run_cli(
        *("build", "--data", GOLDEN, "--engine", "spark", "--spark-master", server.url, "--out", cwd / "agg.parquet"),
        env={"METRICS_KIT_CACHE_DIR": "/proc/self/cwd/cache"},
        cwd=cwd,
    )
    line = _one_line_error(done)
    # The flag of the error's argument in its place; the library's words after it (stage=).
    assert f"--data {GOLDEN}: the Spark Connect server at {server.url} cannot read" in line, line
    assert "stage=" in line and "s3a://" in line and "not a normalised layout" not in line, line
    assert not (cwd / "agg.parquet").exists()
