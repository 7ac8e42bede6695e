"""pgsearch: PostgreSQL-backed, workspace-wide search over AI agent session histories.

The public names are loaded on first use (PEP 562), so that importing a submodule
such as ``pgsearch.cli`` or ``pgsearch.embedded`` does not import the whole library:
a command imports only what it runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pgsearch.aio import AsyncPgSearch
    from pgsearch.api import PgSearch, Provider
    from pgsearch.errors import (
        ConfigError,
        IngestError,
        InvalidQuery,
        NotFound,
        OutcomeUnknown,
        PgSearchError,
        SchemaOutOfDate,
        ScopeError,
        StoreError,
        StoreUnavailable,
    )
    from pgsearch.settings import Settings
    from pgsearch.types import (
        SessionMatch,
        SessionQuery,
        SessionQueryRequest,
        SessionQueryResult,
        Window,
    )

#: Where each public name lives.
_HOMES = {
    "AsyncPgSearch": "pgsearch.aio",
    "PgSearch": "pgsearch.api",
    "Provider": "pgsearch.api",
    "ConfigError": "pgsearch.errors",
    "IngestError": "pgsearch.errors",
    "InvalidQuery": "pgsearch.errors",
    "NotFound": "pgsearch.errors",
    "OutcomeUnknown": "pgsearch.errors",
    "PgSearchError": "pgsearch.errors",
    "SchemaOutOfDate": "pgsearch.errors",
    "ScopeError": "pgsearch.errors",
    "StoreError": "pgsearch.errors",
    "StoreUnavailable": "pgsearch.errors",
    "Settings": "pgsearch.settings",
    "SessionMatch": "pgsearch.types",
    "SessionQuery": "pgsearch.types",
    "SessionQueryRequest": "pgsearch.types",
    "SessionQueryResult": "pgsearch.types",
    "Window": "pgsearch.types",
}

__all__ = [
    "AsyncPgSearch",
    "ConfigError",
    "IngestError",
    "InvalidQuery",
    "NotFound",
    "OutcomeUnknown",
    "PgSearch",
    "PgSearchError",
    "Provider",
    "SchemaOutOfDate",
    "ScopeError",
    "SessionMatch",
    "SessionQuery",
    "SessionQueryRequest",
    "SessionQueryResult",
    "Settings",
    "StoreError",
    "StoreUnavailable",
    "Window",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'pgsearch' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
