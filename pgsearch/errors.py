"""The exception hierarchy. Every error pgsearch raises on purpose is a `PgSearchError`.

Each class's docstring is its default message, so ``raise StoreError()`` still says
something useful. Driver errors are wrapped in one place (`pgsearch.db.connector`)
and keep the original as ``__cause__``.
"""

from __future__ import annotations


class PgSearchError(Exception):
    """pgsearch failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class ConfigError(PgSearchError):
    """The configuration is invalid."""


class StoreError(PgSearchError):
    """The database could not complete the operation."""


class StoreUnavailable(StoreError):
    """The database could not be reached or the connection was lost; nothing was committed."""


class OutcomeUnknown(StoreError):
    """The connection was lost after COMMIT was sent: whether the work was stored is unknown."""


class StoreClosed(StoreError):
    """This PgSearch was closed; open a new one to go on."""


class SchemaOutOfDate(StoreError):
    """The database schema is not at the version this pgsearch needs; run `pgsearch migrate`."""


class InvalidQuery(PgSearchError):
    """The search request is invalid."""


class ScopeError(InvalidQuery):
    """The request tries to reach outside the scope this provider is bound to."""


class NotFound(PgSearchError):
    """The requested session or message does not exist in this scope."""


class IngestError(PgSearchError):
    """A source could not be ingested."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        self.path = path
        self.line = line
        self.reason = message
        where = path if line is None else f"{path}:{line}"
        super().__init__(f"{where}: {message}" if where else message)
