"""`metrics-kit build` as a subprocess when writing fails: one line on stderr, never a partial file."""

from __future__ import annotations

import resource
import shutil
import signal
import subprocess
import sys
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
