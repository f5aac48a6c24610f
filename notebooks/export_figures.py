"""Copy one chart per family from the executed notebooks into docs/, for the README.

    .venv/bin/python notebooks/export_figures.py

Each family notebook tags one chart cell ``readme-figure``; the first image/png output of that
cell, exactly as stored in the notebook (so nbval's run and the picture agree), is written to
docs/<family>.png. tests/notebooks/test_notebooks.py fails when a picture and its notebook disagree.
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
DOCS = HERE.parent / "docs"
TAG = "readme-figure"
# docs/<family>.png <- the notebook whose name holds the word
FAMILIES = {
    "tokenomics": "tokenomics",
    "dex": "dex",
    "lending": "lending",
    "chain_rewards": "chain",
    "yield_and_financials": "yield",
}
SIZE_WARNING = 150 * 1024


def figure(path: Path) -> bytes:
    """The first PNG output of the notebook's cell tagged readme-figure."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and TAG in cell.metadata.get("tags", []):
            for output in cell.get("outputs", []):
                if "image/png" in output.get("data", {}):
                    return base64.b64decode(output["data"]["image/png"])
            raise SystemExit(f"{path.name}: the cell tagged {TAG} has no stored PNG output; run the notebook")
    raise SystemExit(f"{path.name}: no cell tagged {TAG}")


def main() -> int:
    notebooks = sorted(HERE.glob("*.ipynb"))
    for family, word in FAMILIES.items():
        found = [p for p in notebooks if word in p.stem]
        if len(found) != 1:
            raise SystemExit(f"expected one notebook named with {word!r} for {family}, found {found}")
        png = figure(found[0])
        out = DOCS / f"{family}.png"
        out.write_bytes(png)
        note = "  (over 150 KiB: lower the figure's size or dpi)" if len(png) > SIZE_WARNING else ""
        print(f"{out.relative_to(HERE.parent)}: {len(png) / 1024:.0f} KiB from {found[0].name}{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
