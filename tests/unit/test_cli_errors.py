"""Library errors name the library's arguments; ``metrics-kit`` names its flags when it prints them."""

from __future__ import annotations

from pathlib import Path

import pytest

from metrics_kit.client.settings import API_KEY_ENV
from metrics_kit.errors import ConfigurationError, ValidationError
from metrics_kit.server.building.build import build_on_engine
from metrics_kit.server.building.spark import connect_url, local_master, masked
from metrics_kit.server.dataset import open_service
from metrics_kit.spec.catalogue import default_catalogue
from metrics_kit.tools.cli import FLAGS, _parser, main, masked_arguments, said


@pytest.mark.parametrize(
    ("command", "error", "line"),
    [
        # The message begins with the argument: its flag takes the argument's place.
        (
            "serve",
            ConfigurationError("port must be a whole number from 0 to 65535", "port"),
            "--port must be a whole number from 0 to 65535",
        ),
        (
            "serve",
            ConfigurationError("rate_limit must be a number above 0", "rate_limit"),
            "--rate-limit must be a number above 0",
        ),
        (
            "build",
            ConfigurationError("chain_unit=eth: x.parquet was built with chain unit sol", "chain_unit"),
            "--chain-unit eth: x.parquet was built with chain unit sol",
        ),
        (
            "build",
            ConfigurationError("spark_master= 'sc://h:': no port after ':'", "spark_master"),
            "--spark-master 'sc://h:': no port after ':'",
        ),
        (
            "build",
            ConfigurationError("spark_master= is for engine='spark'", "spark_master"),
            "--spark-master is for engine='spark'",
        ),
        (
            "fetch",
            ConfigurationError("api_key must be visible ASCII", "api_key"),
            "METRICS_KIT_API_KEY must be visible ASCII",
        ),
        ("fetch", ValidationError("start '2025-13-01' is not a date", "start"), "--start '2025-13-01' is not a date"),
        # A value is the user's, whatever it holds: only the leading argument is the flag.
        (
            "build",
            ConfigurationError("data=s3a://b/data=1/port=2: only engine='spark' reads a URL", "data"),
            "--data s3a://b/data=1/port=2: only engine='spark' reads a URL",
        ),
        # The message does not begin with the argument: the flag comes first.
        (
            "serve",
            ConfigurationError("cannot listen on 127.0.0.1:80: Permission denied; choose another port=", "port"),
            "--port: cannot listen on 127.0.0.1:80: Permission denied; choose another port=",
        ),
        # No argument, or none the command gives from a flag: the message as it is.
        ("serve", ConfigurationError("port 'http' is not a number"), "port 'http' is not a number"),
        (
            "build",
            ConfigurationError("data=x: the data folder and its stage=y"),
            "data=x: the data folder and its stage=y",
        ),
        ("fetch", ValidationError("unknown metric 'swap'", "metric"), "unknown metric 'swap'"),
        ("fetch", ConfigurationError("version_ttl must be a number", "version_ttl"), "version_ttl must be a number"),
        # report has no --start: a notebook parameter of that name is not a flag.
        (
            "report",
            ValidationError("parameter start: 'x' is not a date", "start"),
            "parameter start: 'x' is not a date",
        ),
    ],
)
def test_the_command_names_the_flag_of_the_errors_argument(command, error, line):
    assert said(error, FLAGS[command]) == line


@pytest.mark.parametrize(
    "message",
    [
        "port must be a whole number from 0 to 65535, not '70000'",
        "port has to be a number from 0 to 65535 (got '70000')",
        "port=70000: not a port",
        "the port is a number from 0 to 65535, not '70000'",
        "70000 is not a port; use 0 to 65535",
        "",
    ],
)
def test_a_reworded_message_names_the_same_flag(message):
    """The flag comes from the error's argument, not from the message: any wording of the library
    names --port, once, and keeps every word of the library's after it."""
    line = said(ConfigurationError(message, "port"), FLAGS["serve"])
    assert line.startswith("--port") and line.count("--") == 1, line
    assert message.removeprefix("port").removeprefix("=") in line, line


def test_every_flag_of_the_table_is_a_flag_of_its_command():
    commands = _commands()
    for command, flags in FLAGS.items():
        options = {option for action in commands[command]._actions for option in action.option_strings}
        assert set(flags.values()) - {API_KEY_ENV} <= options, command


def test_a_value_holding_an_arguments_name_is_shown_as_given(tmp_path, capsys):
    """A path or URL is the user's: a ``data=`` in it is not the --data flag (it was: the message
    said '.../--data 1/events')."""
    data = tmp_path / "data=1" / "port=2"
    assert main(["build", "--data", str(data)]) == 2
    err = capsys.readouterr().err
    assert f"'{data}'" in err and "--data 1" not in err and "--port" not in err, err


def _commands():
    parser = _parser()
    actions = [action for action in parser._actions if action.dest == "command"]
    return actions[0].choices


def test_a_build_error_names_the_argument_not_the_flag():
    with pytest.raises(ConfigurationError) as raised:
        build_on_engine("s3a://bucket/events", default_catalogue())
    assert str(raised.value).startswith("data=s3a://bucket/events: only engine='spark' reads a URL")
    assert raised.value.argument == "data" and "--" not in str(raised.value)
    with pytest.raises(ConfigurationError) as raised:
        build_on_engine(Path("events"), default_catalogue(), spark_master="local[2]")
    assert str(raised.value) == "spark_master= is for engine='spark'" and raised.value.argument == "spark_master"


def test_prebuilt_aggregates_are_opened_by_the_library_and_never_beside_data(tmp_path):
    with pytest.raises(ConfigurationError, match="without data= and rebuild=") as raised:
        open_service(tmp_path, aggregates_file=tmp_path / "a.parquet")
    assert raised.value.argument == "aggregates_file"
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
        (
            [*FETCH, "--start", "2025-01-01", "--base-url", "http://u:p@127.0.0.1:9"],
            "--base-url must not hold a user name or password",
        ),
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


@pytest.mark.parametrize(
    ("start", "base_url", "library"),
    [
        ("2025-13-01", "http://127.0.0.1:9", "a datetime.date, a datetime or a pandas Timestamp"),
        ("2025-01-01", "http://u:p@127.0.0.1:9", "the key as api_key= or in METRICS_KIT_API_KEY"),
    ],
)
def test_the_library_s_words_follow_the_flag_as_they_are(start, base_url, library, tmp_path, capsys, monkeypatch):
    """The command names the flag and never rewrites the library's message: the choices it offers a
    library caller stay (these two were cut from the line by a rewrite until issue 28)."""
    monkeypatch.setenv("METRICS_KIT_API_KEY", "k")
    monkeypatch.setenv("METRICS_KIT_CACHE_DIR", str(tmp_path / "cache"))
    assert main([*FETCH, "--start", start, "--base-url", base_url, "--out", str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("metrics-kit: error: --") and err.count("\n") == 1 and library in err, err


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


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["build", "--data", "d", "--spark-master", "local[2]"], "--spark-master is for --engine spark"),
        (["build", "--data", "d", "--spark-stall-timeout", "60"], "--spark-stall-timeout is for --engine spark"),
        (
            ["build", "--data", "s3a://bucket/events"],
            "--data s3a://bucket/events: only --engine spark reads a URL; DuckDB reads a local data folder",
        ),
        (
            ["serve", "--data", "d", "--aggregates", "a.parquet"],
            "--aggregates serves prebuilt aggregates: give it without --data and --rebuild",
        ),
        (
            ["serve", "--rebuild", "--aggregates", "a.parquet"],
            "--aggregates serves prebuilt aggregates: give it without --data and --rebuild",
        ),
    ],
)
def test_flags_that_do_not_go_together_are_said_in_flags(argv, line, capsys):
    assert main(argv) == 2
    assert capsys.readouterr().err == f"metrics-kit: error: {line}\n"


@pytest.mark.parametrize(
    ("base_url", "env", "service"),
    [
        ("http://127.0.0.1:9", {}, "--base-url"),
        (None, {"METRICS_KIT_BASE_URL": "http://127.0.0.1:9"}, "METRICS_KIT_BASE_URL"),
    ],
)
def test_a_missing_key_names_where_the_service_came_from_and_the_variable(
    base_url, env, service, tmp_path, capsys, monkeypatch
):
    """The command's own line, from the error's argument and the environment (it was cut out of the
    library's message at its first ';')."""
    monkeypatch.delenv("METRICS_KIT_API_KEY", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    flags = ["--base-url", base_url] if base_url else []
    assert main([*FETCH, "--start", "2025-01-01", "--out", str(tmp_path / "x.csv"), *flags]) == 2
    assert capsys.readouterr().err == (
        f"metrics-kit: error: the service of {service} needs an API key: set the environment variable "
        "METRICS_KIT_API_KEY (there is no flag for it, so that it stays out of shell history and ps)\n"
    )
