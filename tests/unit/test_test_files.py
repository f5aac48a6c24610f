"""The test tree itself: pytest imports each test module by its file name (the default "prepend"
import mode, with no package in tests/), so two test files of one name in two folders stop the
whole run at collection with "import file mismatch"."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_files_share_a_name():
    names = Counter(path.name for path in TESTS.rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []
