"""metrics_kit/errors.py: one field for the argument or setting at fault, ``argument``, on every error;
``ConfigurationError.setting`` is its old name, kept as a deprecated alias."""

from __future__ import annotations

import pytest

import metrics_kit as mk
from metrics_kit.errors import ClientClosedError, ConfigurationError, MetricsKitError, ValidationError


def test_every_error_has_the_field_none_by_default():
    for error in (MetricsKitError("x"), mk.TransportError("x"), mk.FetchError({}, 0), mk.APIError(500, "x")):
        assert error.argument is None


@pytest.mark.parametrize(
    "error",
    [
        ConfigurationError("port must be a number", "port"),
        ConfigurationError("port must be a number", argument="port"),
    ],
)
def test_a_configuration_error_names_its_argument_by_either_keyword(error):
    assert error.argument == "port" and str(error) == "port must be a number"


def test_a_validation_error_names_its_argument():
    assert ValidationError("start is not a date", "start").argument == "start"
    assert ValidationError("start is not a date").argument is None


def test_the_old_name_warns_and_reads_and_sets_the_one_field():
    error = ConfigurationError("x", "port")
    with pytest.warns(DeprecationWarning, match=r"ConfigurationError.setting is deprecated: read .argument") as caught:
        assert error.setting == "port"
    assert caught[0].filename == __file__  # the warning points at the reader, not at errors.py
    with pytest.warns(DeprecationWarning):
        error.setting = "host"
    assert error.argument == "host"


@pytest.mark.parametrize("kind", [ConfigurationError, ClientClosedError])
def test_the_old_keyword_warns_and_sets_the_one_field(kind):
    with pytest.warns(DeprecationWarning, match=r"ConfigurationError.setting is deprecated") as caught:
        error = kind("port must be a number", setting="port")
    assert caught[0].filename == __file__  # the warning points at the caller
    assert error.argument == "port" and str(error) == "port must be a number"


def test_the_old_and_the_new_keyword_together_are_refused():
    with pytest.raises(TypeError, match="give argument= alone"):
        ConfigurationError("x", "port", setting="port")
