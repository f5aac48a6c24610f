"""What a type checker sees of the public API: mypy and pyright (basedpyright, which brings its own
node) run on a snippet that uses mk.*, Client methods and the family helpers with ``assert_type``,
and on calls their signatures refuse. A function typed ``Callable[..., Any]`` fails both: its
results are Any, not the asserted type, and the refused calls' ``type: ignore`` comments go unused.

pandas-stubs (in the [test] extra) gives pandas its types; without them ``pd.Series`` would be Any
and every assertion would pass, so a guard snippet checks that the checkers do tell Any from it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.slow

TYPED = """
import datetime as dt
from typing import assert_type

import numpy as np
import pandas as pd

import metrics_kit as mk
from metrics_kit.client import families

start, end = "2025-01-01", "2025-01-31"
client = mk.Client(cache=False)

assert_type(mk.value("swap_active_users", "demoswap", "1_day", start), int | float)
assert_type(mk.explain("swap_active_users", "demoswap", "1_day", start, max_rows=10), pd.DataFrame)
assert_type(mk.series("swap_active_users", "demoswap", start, end, "1_week", errors="coerce"), pd.Series)
assert_type(mk.frame(["swap_active_users"], "demoswap", start, end, shape="long"), pd.DataFrame)
assert_type(mk.tokenomics("demotoken", start, end), pd.DataFrame)
assert_type(mk.yields("demoswap", start, end, incomplete="drop"), pd.DataFrame)
assert_type(mk.dex("demoswap", start, end, "1_week", refresh=True), pd.DataFrame)
assert_type(mk.lending("demolend", start, end, progress=False), pd.DataFrame)
assert_type(mk.chain_rewards("solana", start, end), pd.DataFrame)
assert_type(mk.financials("demoswap", start, end), pd.DataFrame)
assert_type(mk.clear_cache(), int)
assert_type(mk.metrics(), pd.DataFrame)
assert_type(mk.default_client(), mk.Client)
assert_type(mk.configure(workers=4, week_start="sunday"), mk.Client)

assert_type(client.value("swap_active_users", "demoswap", "1_day", start), int | float)
assert_type(client.explain("swap_active_users", "demoswap", "1_week", start), pd.DataFrame)
assert_type(client.series("swap_active_users", "demoswap", start, end), pd.Series)
assert_type(client.frame("swap_active_users", ["demoswap"], start, end), pd.DataFrame)
assert_type(client.dex("demoswap", start, end, errors="coerce"), pd.DataFrame)
assert_type(client.yields("demoswap", start, end), pd.DataFrame)
assert_type(client.financials("demoswap", start, end), pd.DataFrame)
assert_type(families.dex(client, "demoswap", start, end), pd.DataFrame)
assert_type(families.build(client, "dex", "demoswap", start, end), pd.DataFrame)
# Every kind of date a DateLike is:
assert_type(client.series("swap_active_users", "demoswap", dt.date(2025, 1, 1), pd.Timestamp("2025-01-31")), pd.Series)
assert_type(mk.value("swap_active_users", "demoswap", "1_day", dt.datetime(2025, 1, 1, 12)), int | float)
assert_type(client.periods(np.datetime64("2025-01-01"), "2025-01-31"), list[dt.date])

# What the signatures refuse: each line is an error, so each ignore is used.
mk.series("swap_active_users", "demoswap", start, end, errors="ignore")  # type: ignore[arg-type]
mk.dex("demoswap", start, end, shape="long")  # type: ignore[call-arg]
mk.frame(["swap_active_users"], "demoswap", start, end, shape="tall")  # type: ignore[arg-type]
client.lending("demolend", start)  # type: ignore[call-arg]
mk.configure(wokers=4)  # type: ignore[call-arg]
mk.explain("swap_active_users", "demoswap", "1_day", start, 10)  # type: ignore[call-arg]
mk.value("swap_active_users", "demoswap", "1_day", 20250101)  # type: ignore[arg-type]
client.series("swap_active_users", "demoswap", None, end)  # type: ignore[arg-type]
"""

# Each line must be reported: the checkers see pandas' own types, not Any.
GUARD = """
from typing import Any, assert_type

import pandas as pd


def untyped(*args: Any, **kwargs: Any) -> Any: ...


assert_type(untyped(), pd.Series)
assert_type(untyped(), pd.DataFrame)
"""


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def mypy(folder: Path, snippet: Path) -> subprocess.CompletedProcess[str]:
    """mypy as a user runs it on their own code: strict, the installed metrics_kit read from its source
    (the editable install's import hook is invisible to a checker), errors inside it not reported."""
    config = _write(
        folder,
        "mypy.ini",
        f"""
        [mypy]
        python_version = 3.11
        strict = True
        warn_unused_ignores = True
        follow_imports = silent
        mypy_path = {ROOT}
        cache_dir = {folder / ".mypy_cache"}
        """,
    )
    command = [sys.executable, "-m", "mypy", "--config-file", str(config), "--no-error-summary", str(snippet)]
    return subprocess.run(command, capture_output=True, text=True, cwd=folder, timeout=300)


def pyright(folder: Path, snippet: Path) -> subprocess.CompletedProcess[str]:
    """basedpyright in standard mode, with unused ``type: ignore`` comments as errors."""
    config = {
        "pythonVersion": "3.11",
        "typeCheckingMode": "standard",
        "extraPaths": [str(ROOT)],
        "reportUnnecessaryTypeIgnoreComment": "error",
        "reportAssertTypeFailure": "error",
    }
    (folder / "pyrightconfig.json").write_text(json.dumps(config), encoding="utf-8")
    program = shutil.which("basedpyright", path=str(BIN))
    if program is None:
        pytest.fail("basedpyright is not installed: pip install -e '.[test]'")
    command = [program, "--pythonpath", sys.executable, "--project", str(folder), str(snippet)]
    return subprocess.run(command, capture_output=True, text=True, cwd=folder, timeout=300)


@pytest.mark.parametrize("checker", [mypy, pyright], ids=["mypy", "pyright"])
def test_the_public_api_is_typed(tmp_path, checker):
    done = checker(tmp_path, _write(tmp_path, "typed.py", TYPED))
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("checker", [mypy, pyright], ids=["mypy", "pyright"])
def test_the_checkers_tell_any_from_pandas_types(tmp_path, checker):
    done = checker(tmp_path, _write(tmp_path, "guard.py", GUARD))
    assert done.returncode != 0
    flagged = {line for line in range(1, 12) if f"guard.py:{line}:" in done.stdout}
    assert flagged == {9, 10}, done.stdout + done.stderr
