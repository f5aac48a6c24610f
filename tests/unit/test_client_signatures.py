"""What a notebook user sees: every option in the signature (Shift-Tab) and the docstring, names that
complete, and old public names that still work with a DeprecationWarning."""

from __future__ import annotations

import inspect

import pandas as pd
import pytest

import metrics_kit as mk
from metrics_kit.client import families

PULL_OPTIONS = ("errors", "incomplete", "refresh", "progress")
FAMILY_HELPERS = ("tokenomics", "yields", "dex", "lending", "chain_rewards", "financials")


def public_pullers():
    client = mk.Client(cache=False)
    for name in ("series", "frame", *FAMILY_HELPERS):
        yield f"mk.{name}", getattr(mk, name)
        yield f"Client.{name}", getattr(client, name)
    for name in FAMILY_HELPERS:
        yield f"families.{name}", getattr(families, name)
    yield "families.build", families.build


@pytest.mark.parametrize("label, function", list(public_pullers()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_option_is_in_the_signature_and_the_docstring(label, function):
    parameters = inspect.signature(function).parameters
    assert not any(p.kind is p.VAR_KEYWORD or p.kind is p.VAR_POSITIONAL for p in parameters.values()), label
    for option in PULL_OPTIONS:
        assert parameters[option].kind is inspect.Parameter.KEYWORD_ONLY, (label, option)
        assert f"``{option}``" in (function.__doc__ or ""), (label, option)
    assert list(parameters)[:4] in (["metric", "project", "start", "end"], ["metrics", "projects", "start", "end"],
                                   ["project", "start", "end", "granularity"], ["client", "project", "start", "end"],
                                   ["client", "family", "project", "start"])  # fmt: skip


def test_a_helper_refuses_what_its_signature_does_not_take():
    with pytest.raises(TypeError, match=r"dex\(\) got an unexpected keyword argument 'shape'"):
        mk.dex("demoswap", "2025-01-01", "2025-01-02", shape="long")
    with pytest.raises(TypeError, match=r"series\(\)"):
        mk.series("swap_active_users")


ON_DEFAULT = ("value", "explain", "series", "frame", *FAMILY_HELPERS, "clear_cache")


def _less_first(function):
    signature = inspect.signature(function)
    return signature.replace(parameters=list(signature.parameters.values())[1:])


@pytest.mark.parametrize("name", ON_DEFAULT)
def test_each_mk_function_has_the_client_methods_signature_and_docstring(name):
    """mk.* are written out by hand (so a type checker sees them): they cannot drift from Client."""
    function, method = getattr(mk, name), getattr(mk.Client, name)
    assert inspect.signature(function) == _less_first(method)
    assert function.__doc__ == method.__doc__ and function.__name__ == name
    assert function.__module__ == "metrics_kit.client.api"


def test_configure_takes_what_client_takes():
    made = _less_first(mk.Client.__init__)
    assert inspect.signature(mk.configure).parameters == made.parameters
    assert inspect.signature(mk.configure).return_annotation == "Client"
    assert mk.Client.__doc__ in mk.configure.__doc__


@pytest.mark.parametrize("name", FAMILY_HELPERS)
def test_each_family_helper_is_build_less_the_family(name):
    built = inspect.signature(families.build)
    less_family = built.replace(parameters=[p for p in built.parameters.values() if p.name != "family"])
    assert inspect.signature(getattr(families, name)) == less_family
    assert getattr(families, name).__doc__.endswith(families.build.__doc__.split("\n\n", 1)[1])


def test_family_helpers_are_one_definition():
    assert mk.Client.dex is families.dex and mk.Client.yields is families.yields
    assert families.dex.__doc__.startswith("The exchange metrics")


def test_metric_and_project_names_complete():
    metrics = mk.metrics._ipython_key_completions_()
    assert "swap_active_users" in metrics and len(metrics) == len(mk.default_client().catalogue)
    assert "swap_active_users" in mk.metrics and mk.metrics["swap_active_users"]["unit"] == "count"
    assert isinstance(mk.metrics(), pd.DataFrame) and mk.metrics().index.name == "name"
    assert "demoswap" in mk.projects._ipython_key_completions_()
    assert mk.projects()["kinds"]["demoswap"] == ["dex"] or "dex" in mk.projects()["kinds"]["demoswap"]
    with pytest.raises(KeyError, match="no metric 'nope'"):
        mk.metrics["nope"]


def test_renamed_names_still_work_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match=r"metrics_kit.metrics\(\)"):
        table = mk.catalogue()
    pd.testing.assert_frame_equal(table, mk.metrics())
    with pytest.warns(DeprecationWarning, match=r"Client.metrics\(\)"):
        mk.default_client().catalogue_frame()


def test_ipython_completes_metric_names_in_brackets():
    interactive = pytest.importorskip("IPython.core.interactiveshell")
    from IPython.core.completer import provisionalcompleter

    shell = interactive.InteractiveShell.instance()
    try:
        shell.user_ns["mk"] = mk
        line = 'mk.metrics["swap_act'
        with provisionalcompleter():
            matches = [c.text for c in shell.Completer.completions(line, len(line))]
    finally:
        interactive.InteractiveShell.clear_instance()
    assert "swap_active_users" in matches
