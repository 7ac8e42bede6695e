"""pgsearch: PostgreSQL-backed, workspace-wide search over AI agent session histories."""

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

__all__ = [
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
