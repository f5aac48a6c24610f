"""Where metrics_kit keeps its files, and how it writes them. A base module: imports nothing of ours.

One cache folder, overridable for tests and CI, and one way to write a file so that readers see the
old file or the whole new one, never a part.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import platformdirs

CACHE_DIR_ENV = "METRICS_KIT_CACHE_DIR"


def cache_dir() -> Path:
    """``$METRICS_KIT_CACHE_DIR``, else the user's cache folder (``~/.cache/metrics-kit`` on Linux)."""
    configured = os.environ.get(CACHE_DIR_ENV)
    return Path(configured) if configured else Path(platformdirs.user_cache_dir("metrics-kit"))


@contextlib.contextmanager
def atomic_write(path: Path) -> Iterator[Path]:
    """Yields a temporary path in the same folder; when the block ends without error it is renamed
    over ``path`` (atomic on one file system), otherwise removed. Per process, so two writers never
    share a temporary file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
