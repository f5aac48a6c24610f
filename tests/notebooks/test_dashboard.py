"""metrics-kit dashboard, up to the server: what it serves (a copy of the notebook, its parameters
injected as report injects them, an offline template), the command line that starts Voilà (the token
never on it), and the errors it gives before anything starts. The served dashboard itself, in
Chromium: tests/browser/test_dashboard_in_chromium.py."""

from __future__ import annotations

import json
import re

import nbformat
import pytest

from metrics_kit.errors import ValidationError
from metrics_kit.tools import dashboard, notebooks
from metrics_kit.tools.cli import main

pytest.importorskip("voila")


def test_the_notebook_served_is_a_copy_with_the_parameters_injected(tmp_path):
    original = notebooks.find("quickstart")
    before = original.read_bytes()
    served = dashboard.prepare(tmp_path, "quickstart", {"granularity": "1_month", "project": "demoswap.clmm"})
    assert served.parent.parent == tmp_path and served.name == original.name
    assert original.read_bytes() == before
    cells = nbformat.read(served, as_version=4).cells
    injected = [c for c in cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1
    assert 'granularity = "1_month"' in injected[0].source and 'project = "demoswap.clmm"' in injected[0].source
    tagged = next(i for i, c in enumerate(cells) if "parameters" in c.metadata.get("tags", []))
    assert cells.index(injected[0]) == tagged + 1  # after the defaults, which it overrides


def test_without_a_notebook_every_notebook_is_served(tmp_path):
    served = dashboard.prepare(tmp_path, None)
    assert sorted(p.name for p in served.glob("*.ipynb")) == [p.name for p in notebooks.available()]


def test_the_template_links_no_other_host(tmp_path):
    dashboard.prepare(tmp_path, "quickstart")
    template = tmp_path / "jupyter" / "voila" / "templates" / dashboard.TEMPLATE
    assert json.loads((template / "conf.json").read_text()) == {"base_template": "lab"}
    index = (template / "index.html.j2").read_text()
    assert "extends 'voila/templates/lab/index.html.j2'" in index and "mermaid" in index


@pytest.mark.parametrize(
    ("notebook", "parameters", "said"),
    [
        ("quickstart", {"colour": "red"}, "has no parameter 'colour'"),
        ("quickstart", {"granularity": "1_year"}, "1_year"),
        (None, {"granularity": "1_month"}, "parameters need a notebook"),
        ("no such notebook", {}, "no notebook 'no such notebook'"),
        # -p reads a number as a number: a date given as one is refused, not handed to the notebook
        ("quickstart", {"start": 12}, "parameter start: a date in the form YYYY-MM-DD (such as 2025-01-01), not 12"),
        ("quickstart", {"end": 20250101}, "parameter end: a date in the form YYYY-MM-DD"),
        ("quickstart", {"end": None}, "parameter end: a date in the form YYYY-MM-DD"),
    ],
)
def test_bad_parameters_are_refused_before_anything_starts(tmp_path, notebook, parameters, said):
    with pytest.raises(ValidationError, match=re.escape(said)):
        dashboard.prepare(tmp_path, notebook, parameters)


def test_the_command_names_the_address_and_port_and_holds_no_token(tmp_path):
    argv = dashboard.command(tmp_path / "01_quickstart.ipynb", ip="127.0.0.1", port=8866)
    assert argv[1:4] == ["-m", "voila", str(tmp_path / "01_quickstart.ipynb")]
    assert "--Voila.ip=127.0.0.1" in argv and "--port=8866" in argv and "--Voila.port_retries=0" in argv
    assert "--token" in argv and not any(a.startswith("--token=") for a in argv)  # the token comes in a file
    assert "--no-browser" in argv and f"--template={dashboard.TEMPLATE}" in argv


def test_the_address_printed_holds_the_token():
    assert dashboard.url("127.0.0.1", 8866, "abc") == "http://127.0.0.1:8866/?token=abc"
    assert dashboard.url("0.0.0.0", 8866, "abc") == "http://127.0.0.1:8866/?token=abc"
    assert dashboard.url("::1", 8866, "abc") == "http://[::1]:8866/?token=abc"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["dashboard", "quickstart", "--port", "70000"], "--port must be 0 to 65535 (0: a free port), not 70000"),
        (["dashboard", "quickstart", "-p", "colour", "red"], "has no parameter 'colour'"),
        (["dashboard", "quickstart", "-p", "start", "2025-01-01", "-p", "start", "2025-02-01"], "given twice"),
        (["dashboard", "quickstart", "-p", "start", "20250101"], "parameter start: a date in the form YYYY-MM-DD"),
    ],
)
def test_the_command_says_what_is_wrong(argv, said, capsys):
    assert main([*argv, "--no-browser"]) == 2
    assert said in capsys.readouterr().err
