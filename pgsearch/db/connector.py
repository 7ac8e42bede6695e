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

from pgsearch.db.dsn import redact_dsn, redact_message, redact_text
from pgsearch.errors import InvalidQuery, PgSearchError, SchemaOutOfDate, StoreError

#: The Alembic revision this code needs (a test checks it is the migrations' head).
HEAD_REVISION = "0014"
MIGRATE_HINT = "run `pgsearch migrate` (or `alembic upgrade head`)"
#: pgsearch's own Alembic version table: another Alembic application in the same
#: database (or schema) keeps its ``alembic_version`` to itself.
VERSION_TABLE = "pgsearch_alembic_version"
#: Where pgsearch before 0.2 recorded its revision; `pgsearch migrate` renames it.
LEGACY_VERSION_TABLE = "alembic_version"
UPGRADE_HINT = "upgrade pgsearch (pip install -U pgsearch); do not downgrade the schema"

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
    return redact_text(text[0]) if text else type(exc).__name__


def connect(dsn: str, *, application_name: str = "pgsearch") -> psycopg.Connection[TupleRow]:
    """An autocommit connection; errors name the target without its password."""
    try:
        with wrap_errors(f"cannot connect to {redact_dsn(dsn) or 'the default PostgreSQL'}"):
            conn = psycopg.connect(dsn, autocommit=True, application_name=application_name)
    except PgSearchError as exc:
        # libpq may quote words of a malformed connection string back.
        raise type(exc)(redact_message(str(exc), dsn)) from exc.__cause__
    return conn


def _revision_number(revision: str) -> int | None:
    return int(revision) if revision.isdigit() else None


def raise_unless_current(versions: list[str], *, own: bool, legacy: bool) -> None:
    """`SchemaOutOfDate` naming the fix, unless `versions` is exactly `HEAD_REVISION`.

    `versions` come from pgsearch's version table when `own`, else from a legacy
    ``alembic_version`` table when `legacy`. pgsearch revisions are numbered, so a
    revision above `HEAD_REVISION` is a newer schema, never an older one.
    """
    if own and versions == [HEAD_REVISION]:
        return
    head = _revision_number(HEAD_REVISION) or 0
    numbers = [_revision_number(v) for v in versions]
    found = ", ".join(versions) or "none"
    if not own and legacy:
        if versions and all(n is not None and n <= head for n in numbers):
            raise SchemaOutOfDate(
                f"the database was migrated by an earlier pgsearch (revision {found}, "
                f"recorded in {LEGACY_VERSION_TABLE}); {MIGRATE_HINT}"
            )
        raise SchemaOutOfDate(
            f"the database has no pgsearch schema, but another application's Alembic "
            f"table {LEGACY_VERSION_TABLE} is here (revision {found}); pgsearch records "
            f"its own revision in {VERSION_TABLE} and leaves that table alone, but its "
            f"tables (sessions, messages, ...) may collide with the other application's: "
            f"give pgsearch a schema of its own (e.g. options=-csearch_path=pgsearch in "
            f"the connection string) or its own database, then {MIGRATE_HINT}"
        )
    if not own:
        raise SchemaOutOfDate(f"the database has no pgsearch schema; {MIGRATE_HINT}")
    if any(n is not None and n > head for n in numbers):
        raise SchemaOutOfDate(
            f"the database schema is at revision {found}, newer than this pgsearch "
            f"(which knows revisions up to {HEAD_REVISION}); {UPGRADE_HINT}"
        )
    if any(n is None for n in numbers):
        raise SchemaOutOfDate(
            f"{VERSION_TABLE} holds revision {found}, which is no pgsearch revision; "
            "the table was written by something else"
        )
    raise SchemaOutOfDate(
        f"the database schema is at revision {found}, this pgsearch needs "
        f"{HEAD_REVISION}; {MIGRATE_HINT}"
    )
