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
