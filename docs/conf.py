"""Sphinx configuration of the documentation site: `make docs` builds it into docs/_build/html.

The sources are the Markdown files of this folder (read by MyST, so they stay the pages GitHub
shows, with the same relative links), the notebooks with their stored outputs (MyST-NB, never
executed), the docstrings (autodoc) and pages generated from the catalogue before the build
(metrics_kit/tools/docsite.py, into generated/, with the example charts in _build/charts/).

Nothing on a built page is loaded from another host: the theme's fonts and icons are its own
files, widget outputs are shown as their stored pictures (no widget JavaScript), diagrams are code
blocks, and no page has math (MathJax, which MyST-NB loads on a page with
equations, would come from a CDN). tests/browser/test_docs_site.py checks every page for it.
"""

from __future__ import annotations

from pathlib import Path

from metrics_kit.spec.version import __version__

DOCS = Path(__file__).parent
ROOT = DOCS.parent

project = "metrics_kit"
author = "metrics_kit developers"
copyright = "metrics_kit developers"
release = version = __version__

extensions = [
    "myst_nb",  # Markdown (MyST) and notebooks
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
]

exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints"]
root_doc = "index"

# -- MyST ------------------------------------------------------------------------------------------
myst_heading_anchors = 3  # GitHub's heading anchors (performance.md#the-core-install), on the site too
myst_enable_extensions = ["colon_fence"]

# -- notebooks: their stored outputs, never run ----------------------------------------------------
nb_execution_mode = "off"
nb_ipywidgets_js: dict[str, dict[str, str]] = {}  # no require.js or widget manager from a CDN
nb_merge_streams = True

# -- API reference ---------------------------------------------------------------------------------
autodoc_typehints = "signature"
autodoc_member_order = "bysource"
# A date argument takes several types (families.DateLike, an alias of Any): show its name, not Any.
autodoc_type_aliases = {"DateLike": "DateLike"}
autodoc_default_options = {"show-inheritance": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = True

# -- HTML ------------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"metrics_kit {release}"
html_static_path: list[str] = []
html_favicon = "_static/favicon.svg"  # without one, a browser asks for /favicon.ico and logs a 404
html_context = {"default_mode": "auto"}  # light or dark as the reader's system is
html_show_sourcelink = False
html_copy_source = False
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 7,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
    "icon_links": [],
    "analytics": {},
}


def _generate(app) -> None:
    from metrics_kit.tools import docsite

    docsite.generate(Path(app.srcdir), Path(app.srcdir) / "_build" / "charts", ROOT / "notebooks")


def _outside_docs(app, doctree) -> None:
    """A Markdown link to a Markdown file of the repository outside docs/ (``../benchmarks/README.md``)
    works on GitHub; the site has no page for it, so it shows the link's text unlinked. A link to a
    document that does not exist stays a missing reference (a warning, so an error of `make docs`)."""
    from sphinx import addnodes

    for node in list(doctree.findall(addnodes.pending_xref)):
        if node.get("reftype") != "myst" or node.get("refdomain") != "doc":
            continue
        target = Path(node["reftarget"])
        outside = target.is_absolute() and ROOT in target.parents and DOCS not in target.parents
        if outside and any(target.with_name(target.name + suffix).is_file() for suffix in app.config.source_suffix):
            node.replace_self(node[0].deepcopy())


def _link_metric_pages(app, docname, source) -> None:
    """On the site, each metric name in the catalogue's table (docs/metrics.md) links to its page.
    The file itself names no generated page, so its links also work on GitHub."""
    if docname != "metrics":
        return
    from metrics_kit.spec.catalogue import default_catalogue

    text = source[0]
    for metric in default_catalogue():
        text = text.replace(f"| `{metric.name}`", f"| [`{metric.name}`](generated/metrics/{metric.name}.md)", 1)
    source[0] = text


def setup(app):
    from pygments.lexers.special import TextLexer

    app.connect("builder-inited", _generate)
    app.connect("doctree-read", _outside_docs)
    app.connect("source-read", _link_metric_pages)
    # architecture.md's ```mermaid block, which GitHub draws, is shown as its text (the page has the
    # same picture in plain text beside it): drawing it would need mermaid.js from a CDN.
    app.add_lexer("mermaid", TextLexer)
