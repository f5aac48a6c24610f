"""`metrics-kit build` as a subprocess when writing fails: one line on stderr, never a partial file."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

GOLDEN = Path(__file__).parents[1] / "golden" / "data"


def _full_disk() -> None:
    # A file size limit is the one "disk full" a test can have on demand: writes past it fail with
    # errno 27 (File too large) once SIGXFSZ, which would kill the process, is ignored.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1_000, 1_000))


def test_a_write_that_fails_is_one_line_and_leaves_no_file(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(GOLDEN, data)
    out = tmp_path / "out" / "agg.parquet"
    out.parent.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "metrics_kit", "build", "--data", str(data), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_full_disk,
        # No bytecode written under the limit: a cut-off .pyc would break later imports.
        env={"METRICS_KIT_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("metrics-kit: error: "), done.stderr
    assert "File too large" in done.stderr
    assert list(out.parent.iterdir()) == []


def test_ctrl_c_during_a_build_is_one_line_exit_130_and_no_file(tmp_path):
    data = tmp_path / "demo"
    subprocess.run(
        [sys.executable, "-m", "metrics_kit", "demo-data", "--out", str(data), "--scale", "5"],
        check=True,
        capture_output=True,
        timeout=300,
    )
    out = tmp_path / "out" / "agg.parquet"
    out.parent.mkdir()
    child = subprocess.Popen(
        [sys.executable, "-m", "metrics_kit", "build", "--data", str(data), "--out", str(out), "--rebuild"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "METRICS_KIT_CACHE_DIR": str(tmp_path / "cache")},
    )
    try:
        # Interrupted once it reads the data: inside the build whatever the machine's speed (no fixed pause).
        assert _opens_a_file_under(child.pid, data, seconds=120), "the build never opened its data"
        assert child.poll() is None, "the build ended before the interrupt"
        child.send_signal(signal.SIGINT)
        stdout, stderr = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(30)
    assert child.returncode == 130, stderr
    assert stderr == "metrics-kit: interrupted\n", stderr
    assert list(out.parent.iterdir()) == []


def _opens_a_file_under(pid: int, folder: Path, seconds: float) -> bool:
    """Whether process ``pid`` holds a file under ``folder`` open within ``seconds`` (read from
    /proc: bounded in time and in count of looks)."""
    folder = folder.resolve()
    deadline = time.monotonic() + seconds
    for _ in range(int(seconds / 0.005)):
        if time.monotonic() > deadline:
            break
        try:
            targets = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:  # the process ended, or a descriptor closed while we looked
            targets = []
            if not os.path.exists(f"/proc/{pid}"):
                return False
        if any(target.startswith(f"{folder}/") for target in targets):
            return True
        time.sleep(0.005)
    return False


def _build(data: Path, out: Path, cache: Path, **popen) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "metrics_kit", "build", "--data", str(data), "--out", str(out)],
        text=True,
        timeout=300,
        env={**os.environ, "METRICS_KIT_CACHE_DIR": str(cache)},
        check=False,
        **popen,
    )


def test_a_closed_standard_output_is_not_a_failure_of_the_build(tmp_path):
    """`metrics-kit build ... | head -1`: the reader gone, the build stops printing and ends as it
    would have (exit 0, --out written), not with "Broken pipe (writing --out ...)". The pipe is
    closed before the build prints anything, so every line it prints meets a closed pipe."""
    data = tmp_path / "data"
    shutil.copytree(GOLDEN, data)
    out = tmp_path / "agg.parquet"
    read, write = os.pipe()
    os.close(read)
    try:
        done = _build(data, out, tmp_path / "cache", stdout=write, stderr=subprocess.PIPE)
    finally:
        os.close(write)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr
    assert out.is_file()


def test_every_command_stops_printing_when_its_reader_has_gone(tmp_path):
    """The same for every command's standard output (here demo-data, whose one line is its last act)."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "metrics_kit", "demo-data", "--out", str(tmp_path / "demo"), "--scale", "0.01"],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (0, "")
    assert (tmp_path / "demo" / "projects.parquet").is_file()


def test_a_part_that_cannot_be_read_is_named_as_a_data_file_not_a_write(tmp_path):
    """A symbolic link to nothing in a table folder is a data part that cannot be read: named so,
    not "a file error ... (writing --out, --stage or the cache)"."""
    data = tmp_path / "data"
    shutil.copytree(GOLDEN, data)
    (data / "transactions").mkdir()
    (data / "transactions.csv").rename(data / "transactions" / "part-0.csv")
    (data / "transactions" / "part-1.csv").symlink_to(tmp_path / "nonexistent" / "part-1.csv")
    done = _build(data, tmp_path / "agg.parquet", tmp_path / "cache", capture_output=True)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "metrics-kit: error: transactions/part-1.csv: a data file that cannot be read: No such file or directory "
        "(a symbolic link to a file that does not exist)\n"
    )
    assert not (tmp_path / "agg.parquet").exists()
