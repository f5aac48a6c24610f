"""metrics-kit report against a service named by the environment: the report says which one answered."""

from __future__ import annotations

import os
import subprocess
import sys

from support import ServerProcess


def test_a_report_names_the_service_of_the_environment(tmp_path):
    out = tmp_path / "quickstart.html"
    with ServerProcess(None) as server:  # the demo data, over HTTP
        environment = {k: v for k, v in os.environ.items() if not k.startswith("METRICS_KIT_")}
        environment |= {
            "METRICS_KIT_CACHE_DIR": str(tmp_path / "client-cache"),
            "METRICS_KIT_BASE_URL": server.base_url,
            "METRICS_KIT_API_KEY": server.key,
        }
        done = subprocess.run(
            [sys.executable, "-m", "metrics_kit", "report", "quickstart", "-p", "granularity", "1_month"]
            + ["--no-input", "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp_path,
            env=environment,
        )
    assert done.returncode == 0, done.stderr
    html = out.read_text(encoding="utf-8")
    assert "answering: None" not in html
    assert f"answering: Client(base_url='{server.base_url}'" in html, "the report does not name the service"
    assert server.key not in html


def test_a_report_that_fails_says_why_and_suggests_no_flag_report_lacks(tmp_path):
    """A key the service refuses (its real 401): the one line says why every point failed, once,
    and suggests no --errors (report has no such option), where it ended on "instead):"."""
    with ServerProcess(None) as server:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("METRICS_KIT_")}
        environment |= {
            "METRICS_KIT_CACHE_DIR": str(tmp_path / "client-cache"),
            "METRICS_KIT_BASE_URL": server.base_url,
            "METRICS_KIT_API_KEY": "not-the-service-key-0123456789",
        }
        done = subprocess.run(
            [sys.executable, "-m", "metrics_kit", "report", "tokenomics", "-p", "granularity", "1_month"]
            + ["--out", str(tmp_path / "tokenomics.html")],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp_path,
            env=environment,
        )
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("metrics-kit: error: 02_tokenomics.ipynb failed in cell "), line
    assert " points failed, " in line and "each with: 401 " in line, line
    assert not line.endswith(":") and "coerce" not in line and "--errors" not in line, line
    assert "not-the-service-key" not in done.stderr
