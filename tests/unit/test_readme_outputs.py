"""Running the README's commands from the checkout leaves it clean: what they write is ignored by git."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
READMES = (ROOT / "README.md", ROOT / "notebooks" / "README.md")


def written_by_the_readmes() -> list[str]:
    """The --out of every `metrics-kit report` and `metrics-kit demo-data` example (a folder with its /)."""
    found = []
    for readme in READMES:
        for line in readme.read_text(encoding="utf-8").splitlines():
            command = re.match(r"(?:\.venv/bin/)?metrics-kit (report|demo-data) ", line.strip())
            if command:
                words = shlex.split(line.split("  #")[0])
                out = words[words.index("--out") + 1]
                found.append(out + "/" if command[1] == "demo-data" else out)  # demo-data writes a folder
    return found


def test_the_readmes_write_files():
    assert len(written_by_the_readmes()) >= 4


@pytest.mark.parametrize("written", written_by_the_readmes())
def test_what_a_readme_command_writes_is_ignored_by_git(written):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", "--quiet", written], cwd=ROOT, capture_output=True, timeout=30
    )
    assert done.returncode == 0, f"{written} would be left untracked in the checkout"
