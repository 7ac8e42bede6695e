"""Connections, transactions and error wrapping.

Together with `pgsearch.db.migrate` (SQLAlchemy and Alembic, imported only to
migrate) this is where the driver is used; driver errors become `StoreError` (or a
subclass) here and keep ``__cause__``.
Connections run in autocommit mode and every unit of work opens an explicit
transaction, so a failure never leaves half a unit behind.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.rows import TupleRow

from pgsearch.db.dsn import redact_dsn
from pgsearch.errors import ConfigError, InvalidQuery, PgSearchError, SchemaOutOfDate, StoreError

log = logging.getLogger(__name__)

#: The Alembic revision this code needs (a test checks it is the migrations' head).
HEAD_REVISION = "0004"
MIGRATE_HINT = "run `pgsearch migrate` (or `alembic upgrade head`)"

Cursor = psycopg.Cursor[TupleRow]
T = TypeVar("T")

#: Errors after which Postgres has rolled the whole transaction back and asks the
#: client to run it again: a deadlock victim, or a serialization failure.
_TRANSIENT = (pg_errors.DeadlockDetected, pg_errors.SerializationFailure)
#: Attempts `Connector.retrying` makes, and the first back-off ceiling (seconds;
#: doubled per attempt, with full jitter so that colliding writers drift apart).
RETRY_ATTEMPTS = 6
RETRY_BACKOFF = 0.02


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


class Connector:
    """One connection plus the transaction discipline every operation uses."""

    def __init__(
        self,
        conn: psycopg.Connection[TupleRow],
        *,
        rls: bool = False,
        trigram_threshold: float = 0.3,
    ) -> None:
        self.conn = conn
        self.rls = rls
        self.trigram_threshold = trigram_threshold

    @classmethod
    def open(
        cls,
        dsn: str,
        *,
        rls: bool = False,
        trigram_threshold: float = 0.3,
        check_schema: bool = True,
    ) -> Connector:
        connector = cls(connect(dsn), rls=rls, trigram_threshold=trigram_threshold)
        if check_schema:
            try:
                connector.check_schema()
                connector.check_row_security()
            except BaseException:
                connector.close()
                raise
        return connector

    def close(self) -> None:
        self.conn.close()

    def check_schema(self) -> None:
        """Raise `SchemaOutOfDate` unless the database is at `HEAD_REVISION`."""
        with wrap_errors("checking the schema"), self.conn.cursor() as cur:
            cur.execute("SELECT to_regclass('alembic_version') IS NOT NULL")
            row = cur.fetchone()
            if not row or not row[0]:
                raise SchemaOutOfDate(f"the database has no pgsearch schema; {MIGRATE_HINT}")
            cur.execute("SELECT version_num FROM alembic_version")
            versions = [r[0] for r in cur.fetchall()]
        if versions != [HEAD_REVISION]:
            found = ", ".join(versions) or "none"
            raise SchemaOutOfDate(
                f"the database schema is at revision {found}, this pgsearch needs "
                f"{HEAD_REVISION}; {MIGRATE_HINT}"
            )

    def check_row_security(self) -> None:
        """Refuse a role the RLS policies restrict unless this connector binds workspaces.

        Such a role sees no rows outside a bound transaction, so running it without
        ``PGSEARCH_RLS`` would only ever return empty results. The reverse (binding on,
        but a role that bypasses the policies) works, with isolation resting on
        pgsearch's own filters alone, and is logged.
        """
        with wrap_errors("checking row level security"), self.conn.cursor() as cur:
            cur.execute("SELECT row_security_active('messages'), current_user")
            row = cur.fetchone()
        active, role = (bool(row[0]), str(row[1])) if row else (False, "")
        if active and not self.rls:
            raise ConfigError(
                f"role {role!r} is subject to pgsearch's row level security policies; "
                "set PGSEARCH_RLS=on so that each transaction is bound to its workspace"
            )
        if self.rls and not active:
            log.warning(
                "PGSEARCH_RLS is on but role %r bypasses row level security (it owns the "
                "tables, is a superuser or has BYPASSRLS); connect as another role to "
                "have the database enforce workspace isolation",
                role,
            )

    def retrying(self, work: Callable[[], T], *, attempts: int = RETRY_ATTEMPTS) -> T:
        """Run `work`, one whole transaction, again when Postgres asks for a retry.

        A deadlock victim or a serialization failure has been rolled back entirely,
        so running the same unit again is correct as long as `work` opens its own
        transaction and decides everything from what it reads inside it. Any other
        error, and a transient one on the last attempt, propagates.
        """
        for attempt in range(1, attempts + 1):
            try:
                return work()
            except StoreError as exc:
                if (
                    attempt == attempts
                    or not isinstance(exc.__cause__, _TRANSIENT)
                    or self.conn.info.transaction_status != TransactionStatus.IDLE
                ):
                    raise
                log.info("retrying after %s (attempt %d of %d)", exc, attempt, attempts)
                time.sleep(random.uniform(0, RETRY_BACKOFF * 2**attempt))
        raise AssertionError("unreachable")

    @contextmanager
    def transaction(
        self,
        workspace: str | None = None,
        *,
        search: bool = False,
        timeout_ms: int = 0,
        context: str = "",
    ) -> Iterator[Cursor]:
        """A cursor inside one transaction, committed on success, rolled back on error.

        Search transactions forbid sequential scans and JIT locally: the planner's
        estimates for tsvector matches are coarse, and a wrong guess in favour of a
        sequential scan costs seconds on a large table.
        """
        with wrap_errors(context), self.conn.transaction(), self.conn.cursor() as cur:
            # All local settings in one round trip (no parameters: simple protocol).
            local: list[sql.Composable] = []
            if search:
                local.append(sql.SQL("SET LOCAL enable_seqscan = off"))
                local.append(sql.SQL("SET LOCAL jit = off"))
                local.append(
                    sql.SQL("SET LOCAL pg_trgm.similarity_threshold = {}").format(
                        sql.Literal(self.trigram_threshold)
                    )
                )
            if timeout_ms:
                local.append(
                    sql.SQL("SET LOCAL statement_timeout = {}").format(sql.Literal(timeout_ms))
                )
            if self.rls and workspace is not None:
                local.append(
                    sql.SQL("SET LOCAL pgsearch.workspace_id = {}").format(sql.Literal(workspace))
                )
            if local:
                cur.execute(sql.SQL("; ").join(local))
            yield cur

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A savepoint inside the open transaction (rolled back alone on error)."""
        with wrap_errors(), self.conn.transaction():
            yield
