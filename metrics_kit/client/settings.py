"""Where the client connects: arguments first, then environment variables, then the embedded default."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from metrics_kit.errors import ConfigurationError

BASE_URL_ENV = "METRICS_KIT_BASE_URL"
API_KEY_ENV = "METRICS_KIT_API_KEY"


@dataclass(frozen=True)
class Connection:
    """A remote service (base_url and key) or, with base_url None, the embedded reference service."""

    base_url: str | None
    api_key: str | None = field(default=None, repr=False)

    @property
    def embedded(self) -> bool:
        return self.base_url is None


def resolve(base_url: str | None = None, api_key: str | None = None) -> Connection:
    base_url = base_url or os.environ.get(BASE_URL_ENV) or None
    if base_url is None:
        return Connection(None)
    base_url = base_url.strip().rstrip("/")
    if not base_url.startswith(("http://", "https://")) or "?" in base_url or "#" in base_url:
        raise ConfigurationError(
            f"base_url must be an http:// or https:// address without a query, such as "
            f"https://metrics.example.com/v1, not {base_url[:80]!r}"
        )
    api_key = api_key or os.environ.get(API_KEY_ENV) or None
    if not api_key:
        raise ConfigurationError(
            f"a base URL ({base_url}) needs an API key; give it in one of these ways:\n"
            f"  - Client(base_url=..., api_key='...')\n"
            f"  - the environment variable {API_KEY_ENV}\n"
            f"or leave out base_url (and unset {BASE_URL_ENV}) to use the embedded reference "
            "service on the synthetic demo data, which needs no key"
        )
    return Connection(base_url, api_key)
