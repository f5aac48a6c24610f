"""Library errors name the library's arguments; ``metrics-kit`` names its flags when it prints them."""

from __future__ import annotations

from pathlib import Path

import pytest

from metrics_kit.errors import ConfigurationError
from metrics_kit.server.building.build import build_on_engine
from metrics_kit.server.building.spark import connect_url, local_master, masked
from metrics_kit.server.dataset import open_service
from metrics_kit.spec.catalogue import default_catalogue
from metrics_kit.tools.cli import flagged, main, masked_arguments


@pytest.mark.parametrize(
    ("library", "command"),
    [
        (
            "data=s3a://bucket/events: only engine='spark' reads a URL",
            "--data s3a://bucket/events: only --engine spark reads a URL",
        ),
        ("spark_master= is for engine='spark'", "--spark-master is for --engine spark"),
        ("spark_master= 'sc://h:': no port after ':'", "--spark-master 'sc://h:': no port after ':'"),
        (
            "aggregates_file= serves prebuilt aggregates: give it without data= and rebuild=",
            "--aggregates serves prebuilt aggregates: give it without --data and --rebuild",
        ),
        (
            "chain_unit=eth: x.parquet was built with chain unit sol",
            "--chain-unit eth: x.parquet was built with chain unit sol",
        ),
        ("chain_unit must be a lowercase identifier", "--chain-unit must be a lowercase identifier"),
        ("port must be a whole number from 0 to 65535", "--port must be a whole number from 0 to 65535"),
        ("rate_limit must be a number above 0", "--rate-limit must be a number above 0"),
        ("latency_ms must be a number from 0", "--latency-ms must be a number from 0"),
        ("granularity must be one of 1_day", "--granularity must be one of 1_day"),
        ("api_key must be visible ASCII", "METRICS_KIT_API_KEY must be visible ASCII"),
        (
            "no user:password@host. Give the address alone, and the key as api_key= or in METRICS_KIT_API_KEY",
            "no user:password@host. Give the address alone, and the key in METRICS_KIT_API_KEY",
        ),
        ("errors='coerce' leaves them empty", "--errors coerce leaves them empty"),
        ("choose another port= (0 picks a free one)", "choose another --port (0 picks a free one)"),
        (
            "a base URL ('http://h:9', from base_url=) needs an API key",
            "a base URL ('http://h:9', from --base-url) needs an API key",
        ),
        # Words that are only English stay as they are.
        ("the data folder and its stage", "the data folder and its stage"),
        ("port 'http' is not a number", "port 'http' is not a number"),
    ],
)
def test_the_command_names_its_flags(library, command):
    assert flagged(library) == command


def test_a_build_error_names_the_argument_not_the_flag():
    with pytest.raises(ConfigurationError) as raised:
        build_on_engine("s3a://bucket/events", default_catalogue())
    assert str(raised.value).startswith("data=s3a://bucket/events: only engine='spark' reads a URL")
    assert raised.value.setting == "data" and "--" not in str(raised.value)
    with pytest.raises(ConfigurationError) as raised:
        build_on_engine(Path("events"), default_catalogue(), spark_master="local[2]")
    assert str(raised.value) == "spark_master= is for engine='spark'" and raised.value.setting == "spark_master"


def test_prebuilt_aggregates_are_opened_by_the_library_and_never_beside_data(tmp_path):
    with pytest.raises(ConfigurationError, match="without data= and rebuild=") as raised:
        open_service(tmp_path, aggregates_file=tmp_path / "a.parquet")
    assert raised.value.setting == "aggregates_file"
    with pytest.raises(ConfigurationError, match="no such file"):
        open_service(aggregates_file=tmp_path / "missing.parquet", log=lambda line: None)


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        (["--api_key=SECRET"], ["--api_key=***"]),
        (["--api-key", "SECRET"], ["--api-key", "***"]),
        (["--key=SECRET", "--verbose"], ["--key=***", "--verbose"]),
    ],
)
def test_unrecognized_arguments_are_shown_without_their_values(given, shown):
    assert masked_arguments(given) == shown


@pytest.mark.parametrize("flags", [["--api_key=SECRET"], ["--api-key", "SECRET"], ["--key=SECRET"]])
def test_an_unknown_flag_of_fetch_shows_the_usage_of_fetch_and_no_value(flags, capsys):
    with pytest.raises(SystemExit) as raised:
        main(["fetch", "m", "--project", "p", "--start", "2025-01-01", "--end", "2025-01-02", "--out", "x.csv", *flags])
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert "SECRET" not in err and "unrecognized arguments: " + flags[0].partition("=")[0] in err
    assert err.startswith("usage: metrics-kit fetch ")


@pytest.mark.parametrize(
    "url",
    [
        "sc://u:SECRET@127.0.0.1:1",
        "sc://127.0.0.1:1/?token=SECRET",
        "sc://127.0.0.1:1/?x=SECRET",
        "sc://127.0.0.1:1/;token=SECRET",
        "sc://127.0.0.1:SECRET@x",
    ],
)
def test_a_spark_connect_url_never_shows_its_secrets(url):
    try:
        connect_url(url)
    except ConfigurationError as error:
        message = str(error)
    else:
        message = masked(url)
    assert "SECRET" not in message and "***" in message
    assert "SECRET" not in masked(f"Spark said: cannot reach {url} (token=SECRET)")


def test_build_out_and_stage_are_checked_before_the_build(tmp_path, capsys):
    data = tmp_path / "no-data-needed"  # every check comes before the data is read
    (tmp_path / "folder.parquet").mkdir()
    (tmp_path / "file").touch()
    said = {}
    for name, flags in {
        "folder": ["--out", str(tmp_path / "folder.parquet")],
        "csv": ["--out", str(tmp_path / "a.csv")],
        "parent": ["--out", str(tmp_path / "missing" / "a.parquet")],
        "stage": ["--stage", str(tmp_path / "file")],
    }.items():
        assert main(["build", "--data", str(data), *flags]) == 2
        said[name] = capsys.readouterr().err
        assert said[name].count("\n") == 1 and said[name].startswith("metrics-kit: error: ")
    assert "--out" in said["folder"] and "is a folder" in said["folder"]
    assert "--out must end in .parquet" in said["csv"] and "'a.csv'" in said["csv"]
    assert "the folder of --out" in said["parent"] and "does not exist" in said["parent"]
    assert "--stage" in said["stage"] and "is a file" in said["stage"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "folder.parquet"]


FETCH = ["fetch", "swap_active_users", "--project", "p", "--end", "2025-01-02"]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["serve", "--port", "70000"], "--port must be a whole number"),
        (["serve", "--rate-limit", "0"], "--rate-limit must be a number"),
        (["serve", "--latency-ms", "-5"], "--latency-ms must be a number"),
        (["build", "--data", "d", "--chain-unit", "bad unit!"], "--chain-unit must be a lowercase identifier"),
        ([*FETCH, "--start", "2025-01-01", "--base-url", "not a url"], "--base-url must be"),
        ([*FETCH, "--start", "2025-01-01", "--base-url", "http://127.0.0.1:99999"], "--base-url has a port"),
        ([*FETCH, "--start", "2025-01-01", "--base-url", "http://u:p@127.0.0.1:9"], "the key in METRICS_KIT_API_KEY"),
        (
            [*FETCH, "--start", "2025-01-01", "--base-url", "http://127.0.0.1:9", "--granularity", "2_day"],
            "--granularity must be one of",
        ),
        ([*FETCH, "--start", "2025-13-01", "--base-url", "http://127.0.0.1:9"], "--start '2025-13-01' is not a date"),
    ],
)
def test_library_errors_name_the_flags(argv, said, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_API_KEY", "k")
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path / "cache"))
    out = ["--out", str(tmp_path / "x.csv")] if argv[0] == "fetch" else []
    assert main([*argv, *out]) == 2
    err = capsys.readouterr().err
    assert err.startswith("metrics-kit: error: ") and err.count("\n") == 1 and said in err, err
    assert "datetime" not in err and "api_key" not in err, err


def test_a_key_with_a_line_break_names_the_environment_variable(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("METRICS_KIT_API_KEY", "abc\n")
    out = str(tmp_path / "x.csv")
    argv = ["fetch", "m", "--project", "p", "--start", "2025-01-01", "--end", "2025-01-02", "--out", out]
    assert main([*argv, "--base-url", "http://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("metrics-kit: error: METRICS_KIT_API_KEY must be") and "api_key" not in err, err


@pytest.mark.parametrize("master", ["local[0]", "local[x]", "local[", "local[-1]", "localhost", "local[2,0]"])
def test_a_bad_local_master_is_refused_before_spark_starts(master):
    with pytest.raises(ConfigurationError, match=r"not a local master; write local \(one thread\), local\[N\]"):
        local_master(master)


@pytest.mark.parametrize(
    "master", ["local", "local[1]", "local[*]", "local[4,2]", "local[*,3]", "local-cluster[2,1,1024]"]
)
def test_a_good_local_master_is_kept(master):
    assert local_master(master) == master


def test_build_with_a_bad_local_master_is_one_line(tmp_path, capsys):
    assert main(["build", "--data", str(tmp_path), "--engine", "spark", "--spark-master", "local[0]"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "metrics-kit: error: --spark-master 'local[0]': not a local master; write local (one thread), local[N] "
        "(N threads, N from 1), local[*] (a thread per core) or local[N,F] (F retries of a failed task)\n"
    )
