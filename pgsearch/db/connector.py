"""Connections, transactions, error wrapping and migrations.

This is the one module that imports psycopg, SQLAlchemy and Alembic at run time;
driver errors become `StoreError` (or a subclass) here and keep ``__cause__``.
Connections run in autocommit mode and every unit of work opens an explicit
transaction, so a failure never leaves half a unit behind.
"""

from __future__ import annotations

import logging
import os
import random
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.rows import TupleRow

from pgsearch.errors import ConfigError, InvalidQuery, PgSearchError, SchemaOutOfDate, StoreError

log = logging.getLogger(__name__)

#: The Alembic revision this code needs (a test checks it is the migrations' head).
HEAD_REVISION = "0003"
MIGRATE_HINT = "run `pgsearch migrate` (or `alembic upgrade head`)"
_PASSWORD_RE = re.compile(r"(password\s*=\s*)\S+|(://[^:/@\s]+:)[^@\s]+(@)", re.IGNORECASE)

Cursor = psycopg.Cursor[TupleRow]
T = TypeVar("T")

#: Errors after which Postgres has rolled the whole transaction back and asks the
#: client to run it again: a deadlock victim, or a serialization failure.
_TRANSIENT = (pg_errors.DeadlockDetected, pg_errors.SerializationFailure)
#: Attempts `Connector.retrying` makes, and the first back-off ceiling (seconds;
#: doubled per attempt, with full jitter so that colliding writers drift apart).
RETRY_ATTEMPTS = 6
RETRY_BACKOFF = 0.02


def redact_dsn(dsn: str) -> str:
    """`dsn` with any password replaced, for messages and logs."""
    return _PASSWORD_RE.sub(
        lambda m: f"{m.group(1)}***" if m.group(1) else f"{m.group(2)}***{m.group(3)}", dsn
    )


def migrations_dir() -> Path:
    """Where the Alembic scripts are: inside the installed package, else the checkout."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "_migrations", here.parent / "migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    raise StoreError("pgsearch migration scripts not found; the installation is incomplete")


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


def make_engine(dsn: str | None = None) -> Any:
    """A SQLAlchemy engine over psycopg for `dsn` (else PGSEARCH_DSN / PG* variables)."""
    from sqlalchemy import create_engine

    from pgsearch.settings import Settings

    target = Settings.from_env().dsn if dsn is None else dsn
    return create_engine(
        "postgresql+psycopg://", creator=lambda: psycopg.connect(target), poolclass=None
    )


def _alembic_config(connection: Any) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.attributes["connection"] = connection
    return cfg


#: Serialises concurrent `pgsearch migrate` runs against one database.
_MIGRATE_LOCK = 7_263_641_122
#: How long a migration waits for a table lock before its revision starts over.
#: Shorter than the server's deadlock_timeout (1 s by default): a migration whose
#: lock request would close a cycle with running transactions steps back before the
#: server has to abort one of them, so a deploy never fails a search or a write.
MIGRATE_LOCK_TIMEOUT_MS = 500
#: How long `migrate` keeps starting a revision over before it gives up.
MIGRATE_PATIENCE_S = 120.0


def migrate(dsn: str, revision: str = "head", *, downgrade: bool = False) -> str | None:
    """Upgrade (or downgrade) the schema; returns the revision now current."""
    from alembic import command
    from alembic.runtime.migration import MigrationContext
    from sqlalchemy import text

    engine = make_engine(dsn)
    try:
        with wrap_errors("migrating"), engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _MIGRATE_LOCK})
            conn.commit()
            try:
                conn.execute(text(f"SET lock_timeout = {MIGRATE_LOCK_TIMEOUT_MS}"))
                conn.commit()
                deadline = time.monotonic() + MIGRATE_PATIENCE_S
                while True:
                    try:
                        cfg = _alembic_config(conn)
                        if downgrade:
                            command.downgrade(cfg, revision)
                        else:
                            command.upgrade(cfg, revision)
                        conn.commit()
                        break
                    except Exception as exc:
                        # Each revision is one transaction: the one that could not get
                        # its locks was rolled back whole, and the next run resumes at it.
                        cause = getattr(exc, "orig", None)
                        busy = isinstance(cause, (pg_errors.LockNotAvailable, *_TRANSIENT))
                        if not busy or time.monotonic() > deadline:
                            raise
                        conn.rollback()
                        log.info("migration waiting for busy tables: %s", _first_line(exc))
                        time.sleep(random.uniform(0.05, 0.5))
                current: str | None = MigrationContext.configure(conn).get_current_revision()
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _MIGRATE_LOCK})
                conn.commit()
    except Exception as exc:
        if isinstance(exc, PgSearchError):
            raise
        raise StoreError(f"migrating: {_first_line(exc)}") from exc
    finally:
        engine.dispose()
    return current


def create_database(dsn: str) -> bool:
    """Create the database `dsn` names, if missing, with a UTF-8 encoding.

    Connects to the server's ``postgres`` maintenance database to do it. Returns True
    when the database was created. pg_trgm needs a UTF-8 ``LC_CTYPE``; when the
    server's default is not UTF-8 the new database uses ``C.UTF-8``.
    """
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(dsn)
    name = params.get("dbname") or os.environ.get("PGDATABASE")
    if not name:
        raise StoreError("the connection string names no database to create")
    admin = make_conninfo(dsn, dbname="postgres")
    with wrap_errors(f"creating database {name!r}"), connect(admin) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists:
            return False
        row = conn.execute(
            "SELECT datctype FROM pg_database WHERE datname = current_database()"
        ).fetchone()
        query = sql.SQL("CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE template0").format(
            sql.Identifier(str(name))
        )
        if row is None or "utf" not in str(row[0]).lower():
            query += sql.SQL(" LC_COLLATE 'C.UTF-8' LC_CTYPE 'C.UTF-8'")
        conn.execute(query)
    return True
