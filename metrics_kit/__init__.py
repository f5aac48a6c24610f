"""metrics_kit: blockchain protocol metrics for analysts, with a reference service built in."""

__version__ = "0.1.0"

__all__ = ["__version__"]
