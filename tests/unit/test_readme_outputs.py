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


def python_snippets() -> list[tuple[str, str]]:
    """Every ```python block of the READMEs, with where it is."""
    found = []
    for readme in READMES:
        text = readme.read_text(encoding="utf-8")
        for i, block in enumerate(re.findall(r"^```python\n(.*?)^```", text, flags=re.M | re.S)):
            found.append((f"{readme.relative_to(ROOT)} python block {i + 1}", block))
    return found


@pytest.mark.parametrize(("where", "snippet"), python_snippets(), ids=[w for w, _ in python_snippets()])
def test_a_readme_snippet_defines_every_name_it_uses(where, snippet):
    """Each snippet runs as it is copied, alone: a name it uses is imported or assigned in it (a
    builtin aside), never one another snippet defined (the chart snippet used `client`)."""
    import ast
    import builtins

    tree = ast.parse(snippet)
    defined = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            defined |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    assert sorted(used - defined) == [], f"{where} uses names it does not define"
