"""The one exception tree of metrics_kit.

    MetricsKitError
    ├── ConfigurationError    a setting is missing or wrong (data folder, keys, cache folder)
    └── DataFormatError       an event data folder breaks docs/data-format.md

Every error message says what was wrong and what is allowed.
"""

from __future__ import annotations


class MetricsKitError(Exception):
    """Root of every error metrics_kit raises on purpose."""


class ConfigurationError(MetricsKitError):
    """A setting is missing or has a value that cannot be used."""


class DataFormatError(MetricsKitError, ValueError):
    """An event data folder does not follow the data format."""
