"""Error wrapping and single connections (migrations, probes).

Driver errors become `StoreError` (or a subclass) here and keep ``__cause__``; the
drivers (`pgsearch.db.driver`) and `pgsearch.db.migrate` use `wrap_errors`.
Connections run in autocommit mode and every unit of work opens an explicit
transaction, so a failure never leaves half a unit behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import TupleRow

from pgsearch.db.dsn import redact_dsn
from pgsearch.errors import InvalidQuery, PgSearchError, SchemaOutOfDate, StoreError

#: The Alembic revision this code needs (a test checks it is the migrations' head).
HEAD_REVISION = "0004"
MIGRATE_HINT = "run `pgsearch migrate` (or `alembic upgrade head`)"

#: Errors after which Postgres has rolled the whole transaction back and asks the
#: client to run it again: a deadlock victim, or a serialization failure.
_TRANSIENT = (pg_errors.DeadlockDetected, pg_errors.SerializationFailure)


@contextmanager
def wrap_errors(context: str = "") -> Iterator[None]:
    """Turn driver errors into pgsearch errors, keeping the driver error as cause."""
    prefix = f"{context}: " if context else ""
    try:
        yield
    except PgSearchError:
        raise
    except pg_errors.QueryCanceled as exc:
        raise StoreError(f"{prefix}statement timed out ({exc.diag.message_primary})") from exc
    except UnicodeEncodeError as exc:
        # Only text with lone surrogates cannot be encoded; it is the caller's text.
        raise InvalidQuery(
            f"{prefix}text contains a lone surrogate (U+{ord(exc.object[exc.start]):04X}), "
            "which is not valid Unicode"
        ) from exc
    except pg_errors.UndefinedTable as exc:
        raise SchemaOutOfDate(
            f"{prefix}the database has no pgsearch schema; {MIGRATE_HINT}"
        ) from exc
    except pg_errors.TransactionRollback as exc:  # a deadlock or serialization failure
        raise StoreError(f"{prefix}{_first_line(exc)}") from exc
    except (pg_errors.DataException, pg_errors.ProgramLimitExceeded) as exc:
        raise InvalidQuery(f"{prefix}{exc.diag.message_primary or exc}") from exc
    except psycopg.OperationalError as exc:
        raise StoreError(f"{prefix}database unavailable: {_first_line(exc)}") from exc
    except psycopg.Error as exc:
        raise StoreError(f"{prefix}{_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return redact_dsn(text[0]) if text else type(exc).__name__


def connect(dsn: str, *, application_name: str = "pgsearch") -> psycopg.Connection[TupleRow]:
    """An autocommit connection; errors name the target without its password."""
    with wrap_errors(f"cannot connect to {redact_dsn(dsn) or 'the default PostgreSQL'}"):
        conn = psycopg.connect(dsn, autocommit=True, application_name=application_name)
    return conn
