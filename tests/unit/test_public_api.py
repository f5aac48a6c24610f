"""The public surface is deliberate: adding or removing a name must be a decision, not an accident."""

import metrics_kit

EXPECTED = {
    "__version__",
    "Client",
    "configure",
    "default_client",
    "value",
    "explain",
    "series",
    "frame",
    "tokenomics",
    "yields",
    "dex",
    "lending",
    "chain_rewards",
    "financials",
    "metrics",
    "catalogue",  # deprecated: metrics
    "projects",
    "clear_cache",
    "MetricsKitError",
    "ConfigurationError",
    "ClientClosedError",
    "DataFormatError",
    "ValidationError",
    "APIError",
    "AuthenticationError",
    "NotFoundError",
    "RateLimitError",
    "ServerError",
    "TransportError",
    "ResponseFormatError",
    "MissingValueError",
    "FetchError",
    "PartialDataWarning",
    "IncompletePeriodWarning",
    "CacheWarning",
    "UnconfirmedDataWarning",
}


def test_all_is_pinned():
    assert set(metrics_kit.__all__) == EXPECTED
    assert len(metrics_kit.__all__) == len(EXPECTED)


def test_every_exported_name_exists_and_errors_share_one_root():
    for name in metrics_kit.__all__:
        assert hasattr(metrics_kit, name), name
    errors = [getattr(metrics_kit, n) for n in metrics_kit.__all__ if n.endswith("Error")]
    assert all(issubclass(e, metrics_kit.MetricsKitError) for e in errors)


def test_importing_the_client_does_not_load_the_engine():
    import subprocess
    import sys

    code = "import sys, metrics_kit; print('duckdb' in sys.modules, 'ibis' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
