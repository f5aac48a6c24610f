"""Make the README's and docs/notebooks.md's pictures of a hover label and of a dashboard, from the
browser tests that check them:

    .venv/bin/python tests/browser/screenshots.py

Runs test_charts_in_chromium.py's pointing test (the quickstart in JupyterLab) and
test_dashboard_in_chromium.py on the quickstart, with their screenshots going to a temporary folder
($BROWSER_TEST_SCREENS), then copies two of them: the quickstart's chart with the readout of the
week pointed at (docs/hover.png) and the quickstart served as a dashboard, pointed at
(docs/dashboard.png). The tests must pass: a picture of a failing page is not copied.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DOCS = ROOT / "docs"
TESTS = [
    f"{HERE / 'test_charts_in_chromium.py'}::test_pointing_at_a_week_reads_out_its_value_as_the_library_returns_it",
    f"{HERE / 'test_dashboard_in_chromium.py'}::test_every_notebook_works_as_a_dashboard[01_quickstart]",
]
PICTURES = {"hover-chart.png": "hover.png", "dashboard-hover.png": "dashboard.png"}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="metrics-kit-screens-") as folder:
        env = {**os.environ, "BROWSER_TEST_SCREENS": folder}
        ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS], env=env)
        if ran.returncode != 0:
            print("the browser tests failed: no picture copied", file=sys.stderr)
            return ran.returncode
        for made, name in PICTURES.items():
            shutil.copyfile(Path(folder) / made, DOCS / name)
            print(f"docs/{name} <- {made}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
