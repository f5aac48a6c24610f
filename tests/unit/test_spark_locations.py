"""Where a Spark build of a URL reads and keeps things, checked before Spark starts: the data URL as
it is read (``exports.normalised``), the refresh state's location (``refresh.checked_state``), a
table given twice, a saved manifest that is not whole, a JVM error's reason, the driver's log.
The Spark side of each: tests/spark/test_refresh_url.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metrics_kit.errors import DataFormatError
from metrics_kit.server.building import exports, refresh, spark
from metrics_kit.tools.cli import main

# A Spark Connect URL no server answers at: a build that got as far as starting Spark would say so.
NO_SERVER = "sc://127.0.0.1:1"


@pytest.mark.parametrize(
    ("given", "read"),
    [
        ("file:/data/events", "file:///data/events"),  # as Spark prints a path
        ("file:///data/events/", "file:///data/events"),
        ("file:///data/x/../events", "file:///data/events"),
        ("file:///data/./events//", "file:///data/events"),
        ("file:///tmp/my%20events", "file:///tmp/my events"),  # as Path.as_uri() writes a space
        ("file:///tmp/100%25", "file:///tmp/100%"),
        ("s3a://bucket/a/../events/", "s3a://bucket/events"),
        ("s3a://bucket/my%20events", "s3a://bucket/my%20events"),  # Hadoop reads this one as it is written
        ("s3a://bucket/", "s3a://bucket"),
        ("/shared/a/../state", "/shared/state"),
    ],
)
def test_a_url_is_read_in_one_spelling(given, read):
    assert exports.normalised(given) == read


def test_a_url_is_a_scheme_and_a_slash_not_a_drive_letter():
    assert exports.is_url("file:/data/events") and exports.is_url("s3a://bucket/events")
    assert not exports.is_url("C:/data/events") and not exports.is_url("events") and not exports.is_url("/data")


def _build(data: str, state: str, capsys) -> tuple[int, str]:
    code = main(["build", "--data", data, "--engine", "spark", "--spark-master", NO_SERVER, "--state", state])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("state", ["relative-state", "state/", "./state", "../elsewhere/state", "~/state"])
def test_a_relative_state_is_refused_before_spark_starts(state, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, err = _build("file:///data/events", state, capsys)
    assert code == 2 and err.startswith(f"metrics-kit: error: --state {state}: a relative path is a folder of"), err
    assert "every machine of the job reaches" in err and "Spark Connect" not in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("data", "state", "said"),
    [
        ("file:///data/events", "file:///data/events", "this is the data folder"),
        ("file:///data/events", "file:/data/events/", "this is the data folder"),
        ("file:///data/events", "file:///data/events/state", "inside the data folder"),
        ("file:///data/events", "file:///data/events/transactions/state", "inside the data folder"),
        ("file:///data/events", "file:///data/other/../events/_state", "inside the data folder"),
        ("file:///data/events", "/data/events/state", "inside the data folder"),
        ("file:///data/my%20events", "file:///data/my events/state", "inside the data folder"),
        ("s3a://bucket/events", "s3a://bucket/events/state", "inside the data folder"),
    ],
)
def test_a_state_in_the_data_folder_is_refused_before_spark_starts(data, state, said, capsys):
    code, err = _build(data, state, capsys)
    assert code == 2 and err.startswith(f"metrics-kit: error: --state {state}: {said} "), err
    assert "whose every file is read as data" in err and "Spark Connect" not in err


@pytest.mark.parametrize(
    ("data", "state"),
    [
        ("file:///data/events", "file:///data/events.metrics-kit-state"),
        ("file:///data/events", "file:///data/eventsX/state"),
        ("file:///data/events", "file:///data"),
        ("s3a://bucket/events", "s3a://other/events/state"),
        ("s3a://bucket/events", "/events/state"),  # on another file system
    ],
)
def test_a_state_beside_or_above_the_data_is_taken(data, state):
    assert refresh.checked_state(exports.normalised(data), state) == exports.normalised(state)


def _listed(*names: str) -> list[tuple[str, int, int]]:
    return [(f"file:/d/{name}", 10, 0) for name in ("projects.csv", *names)]


def _refused(listing) -> str:
    with pytest.raises(DataFormatError) as raised:
        exports._sources("file:///d", listing, lambda paths: [False] * len(paths))
    return str(raised.value)


def test_a_folder_of_parts_of_both_formats_names_the_odd_parts():
    listing = _listed(*(f"fees/2025-01-{day:02}.csv" for day in range(1, 31)), "fees/extra.parquet")
    assert _refused(listing) == (
        "file:///d: fees/ mixes Parquet and CSV parts (fees/extra.parquet, among 30 CSV parts); "
        "use one format per table"
    )


def test_a_table_given_as_a_file_and_a_folder_names_both():
    listing = _listed("fees.csv", *(f"fees/part-{i}.csv" for i in range(7)))
    assert _refused(listing) == "file:///d: table 'fees' is given more than once: fees.csv, fees/ (7 csv files)"


_FILE = {"size": 1, "mtime": 2, "days": [], "last": None}
_WHOLE = {
    "state": refresh.STATE_VERSION,
    "data": "file:///d",
    "catalogue_key": "k",
    "engine": "pyspark",
    "metrics_kit": "0",
    "tables": {
        "projects": {"folder": False, "fmt": "csv", "files": {"projects.csv": _FILE}},
        "fees": {
            "folder": True,
            "fmt": "csv",
            "files": {"fees/a.csv": {**_FILE, "days": [["2025-01-01", "2025-01-02"]], "last": "2025-01-02T10:00:00"}},
        },
    },
}


@pytest.mark.parametrize(
    ("manifest", "said"),
    [
        (None, "its manifest is not a JSON object (NoneType)"),
        ([], "its manifest is not a JSON object (list)"),
        ({"state": refresh.STATE_VERSION}, "its manifest has no 'data', 'catalogue_key', 'engine', 'metrics_kit'"),
        ({**_WHOLE, "tables": []}, "its manifest's tables are not JSON objects"),
        ({**_WHOLE, "tables": {"fees": {"files": {}}}}, "its manifest's table 'fees' lacks folder, fmt, files"),
        (
            json.loads(json.dumps(_WHOLE).replace('"2025-01-02"]', '"January"]')),
            "its manifest's entry of fees file 'fees/a.csv' is damaged",
        ),
        (
            {
                **_WHOLE,
                "tables": {
                    **_WHOLE["tables"],
                    "projects": {**_WHOLE["tables"]["projects"], "files": {"projects.csv": {**_FILE, "mtime": "2"}}},
                },
            },
            "its manifest's entry of projects file 'projects.csv' is damaged",
        ),
    ],
)
def test_a_manifest_without_the_fields_a_refresh_reads_is_damaged(manifest, said):
    assert refresh._manifest_problem(manifest).startswith(said)


def test_a_whole_manifest_or_one_of_another_format_is_not_damaged():
    assert refresh._manifest_problem(_WHOLE) is None
    assert refresh._manifest_problem({"state": refresh.STATE_VERSION + 1}) is None  # _misfit says "another format"


class _JavaError:
    """What py4j gives of a JVM exception (``Py4JJavaError.java_exception``): getMessage, getCause."""

    def __init__(self, message: str | None, cause: _JavaError | None = None):
        self.message, self.cause = message, cause

    def getMessage(self) -> str | None:  # noqa: N802 (the JVM's name)
        return self.message

    def getCause(self) -> _JavaError | None:  # noqa: N802
        return self.cause


class _Py4JJavaError(Exception):
    def __init__(self, java: _JavaError):
        super().__init__("An error occurred while calling o540.parquet.\n: org.apache.spark.SparkException: ...")
        self.java_exception = java


def test_a_jvm_error_is_said_by_its_innermost_reason():
    inner = _JavaError("Parent path is not a directory: file:/tmp/a-file\n\tat ...")
    error = _Py4JJavaError(_JavaError("Job aborted", _JavaError(None, inner)))
    assert exports.one_line(error) == "Parent path is not a directory: file:/tmp/a-file"
    assert exports.one_line(_Py4JJavaError(_JavaError(None))) == "An error occurred while calling o540.parquet."
    assert exports.one_line(ValueError("first\nsecond")) == "first"


def test_a_driver_the_build_starts_logs_errors_only_unless_the_user_configures_its_log(tmp_path):
    plain = {"SPARK_HOME": str(tmp_path), "SPARK_CONF_DIR": str(tmp_path)}
    ours = spark.log_settings(plain)
    assert ours == {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={spark.LOG_CONFIGURATION.as_uri()}"}
    text = spark.LOG_CONFIGURATION.read_text()
    assert "rootLogger.level = error" in text and "alwaysWriteExceptions = false" in text
    for given in ("--driver-java-options -Dx=1 pyspark-shell", "--conf spark.log.level=INFO pyspark-shell"):
        assert spark.log_settings({**plain, "PYSPARK_SUBMIT_ARGS": given}) == {}, given
    assert spark.log_settings({**plain, "PYSPARK_GATEWAY_PORT": "4242"}) == {}  # under spark-submit
    (tmp_path / "log4j2.properties").write_text("rootLogger.level = info\n")
    assert spark.log_settings(plain) == {}
    assert Path(spark.LOG_CONFIGURATION).is_file()
