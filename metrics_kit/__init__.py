"""metrics_kit: blockchain protocol metrics for analysts, with a reference service built in.

    import metrics_kit as mk
    mk.series("swap_active_users", "demoswap", "2025-01-01", "2025-03-31", "1_week")
    mk.metrics()  # every metric (mk.metrics["swa<Tab> completes names); mk.projects() likewise

With no configuration the embedded reference service answers, on synthetic demo data; set
``METRICS_KIT_BASE_URL`` and ``METRICS_KIT_API_KEY`` (or use ``Client(base_url, api_key)``) for a
remote service.
"""

from metrics_kit import embedded as _embedded  # noqa: E402
from metrics_kit.client.api import (
    catalogue,
    chain_rewards,
    clear_cache,
    configure,
    default_client,
    dex,
    explain,
    financials,
    frame,
    lending,
    metrics,
    projects,
    series,
    tokenomics,
    value,
    yields,
)
from metrics_kit.client.client import Client
from metrics_kit.client.transports import set_default_transport as _set_default_transport
from metrics_kit.errors import (
    APIError,
    AuthenticationError,
    CacheWarning,
    ClientClosedError,
    ConfigurationError,
    DataFormatError,
    FetchError,
    IncompletePeriodWarning,
    MetricsKitError,
    MissingValueError,
    NotFoundError,
    PartialDataWarning,
    RateLimitError,
    ResponseFormatError,
    ServerError,
    TransportError,
    UnconfirmedDataWarning,
    ValidationError,
)
from metrics_kit.spec.version import __version__

_set_default_transport(_embedded.transport)

__all__ = [
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
    "catalogue",
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
]
