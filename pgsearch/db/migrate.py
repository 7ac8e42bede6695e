"""Schema migrations: Alembic, run by `pgsearch migrate` or `alembic upgrade head`.

SQLAlchemy and Alembic are imported only inside these functions: they are needed to
migrate, never to search or ingest.
"""

from __future__ import annotations

import logging
import os
import random
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql

from pgsearch.db.connector import (
    _TRANSIENT,
    HEAD_REVISION,
    LEGACY_VERSION_TABLE,
    MIGRATE_HINT,
    UPGRADE_HINT,
    VERSION_TABLE,
    _first_line,
    connect,
    wrap_errors,
)
from pgsearch.db.dsn import redact_dsn, redact_message
from pgsearch.errors import ConfigError, PgSearchError, SchemaOutOfDate, StoreError

log = logging.getLogger(__name__)

__all__ = [
    "HEAD_REVISION",
    "MIGRATE_HINT",
    "VERSION_TABLE",
    "adopt_legacy_version_table",
    "create_database",
    "make_engine",
    "migrate",
    "migrations_dir",
]


def migrations_dir() -> Path:
    """Where the Alembic scripts are: inside the installed package, else the checkout."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "_migrations", here.parent / "migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    raise StoreError("pgsearch migration scripts not found; the installation is incomplete")


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


def _script(cfg: Any | None = None) -> Any:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    if cfg is None:
        cfg = Config()
        cfg.set_main_option("script_location", str(migrations_dir()))
    return ScriptDirectory.from_config(cfg)


def adopt_legacy_version_table(connection: Any) -> bool:
    """Rename an earlier pgsearch's ``alembic_version`` to `VERSION_TABLE`.

    Only when pgsearch's own table is absent and every revision recorded in
    ``alembic_version`` is one of pgsearch's scripts: another application's
    table is never touched. Returns True when the table was renamed (committed).
    Instances of the earlier pgsearch still running then report a missing schema
    until they are replaced, as after any migration.
    """
    from sqlalchemy import text

    own, legacy = connection.execute(
        text("SELECT to_regclass(:own) IS NOT NULL, to_regclass(:legacy) IS NOT NULL"),
        {"own": VERSION_TABLE, "legacy": LEGACY_VERSION_TABLE},
    ).one()
    if own or not legacy:
        connection.commit()
        return False
    versions = {
        str(v)
        for (v,) in connection.execute(text(f"SELECT version_num FROM {LEGACY_VERSION_TABLE}"))
    }
    known = {r.revision for r in _script().walk_revisions()}
    if not versions or not versions <= known:
        connection.commit()
        return False
    connection.execute(text(f"ALTER TABLE {LEGACY_VERSION_TABLE} RENAME TO {VERSION_TABLE}"))
    renamed = connection.execute(
        text("SELECT 1 FROM pg_constraint WHERE conname = :old AND conrelid = to_regclass(:table)"),
        {"old": f"{LEGACY_VERSION_TABLE}_pkc", "table": VERSION_TABLE},
    ).first()
    if renamed:
        connection.execute(
            text(
                f"ALTER TABLE {VERSION_TABLE} RENAME CONSTRAINT "
                f"{LEGACY_VERSION_TABLE}_pkc TO {VERSION_TABLE}_pkc"
            )
        )
    connection.commit()
    log.info("renamed %s to %s", LEGACY_VERSION_TABLE, VERSION_TABLE)
    return True


def _check_direction(script: Any, current: str | None, target: str, *, downgrade: bool) -> None:
    """Refuse a target on the wrong side of `current` for the requested direction.

    Alembic's upgrade to an earlier revision, or downgrade to a later one, does
    nothing and reports success; here it is an error saying what to run instead.
    """
    if current is not None:
        try:
            script.get_revision(current)
        except Exception:
            raise SchemaOutOfDate(
                f"the database schema is at revision {current}, which this pgsearch does "
                f"not know (it knows revisions up to {HEAD_REVISION}); {UPGRADE_HINT}"
            ) from None
    if target in ("head", "heads") and not downgrade:
        return
    if target == "base":
        if not downgrade and current is not None:
            raise ConfigError(
                f"the schema is at revision {current}; to remove it run "
                "`pgsearch migrate --revision base --downgrade` (this drops every table)"
            )
        return
    try:
        wanted = script.get_revision(target)
    except Exception as exc:
        raise ConfigError(f"unknown revision {target!r}: {_first_line(exc)}") from None
    if wanted is None:
        raise ConfigError(f"unknown revision {target!r}")
    below = set()
    if current is not None:
        below = {r.revision for r in script.iterate_revisions(current, "base")}
    if not downgrade and wanted.revision in below and wanted.revision != current:
        raise ConfigError(
            f"the schema is at revision {current}, later than {wanted.revision}; "
            f"`pgsearch migrate --revision {wanted.revision} --downgrade` downgrades it "
            "(dropping what later revisions added)"
        )
    if downgrade and wanted.revision not in below:
        raise ConfigError(
            f"the schema is at revision {current or 'base'}, not later than "
            f"{wanted.revision}; run `pgsearch migrate --revision {wanted.revision}` to upgrade"
        )


#: Serialises concurrent `pgsearch migrate` runs against one database.
_MIGRATE_LOCK = 7_263_641_122
#: How long a migration waits for a table lock before its revision starts over.
#: Shorter than the server's deadlock_timeout (1 s by default): a migration whose
#: lock request would close a cycle with running transactions steps back before the
#: server has to abort one of them, so a deploy never fails a search or a write.
MIGRATE_LOCK_TIMEOUT_MS = 500
#: How long `migrate` keeps starting a revision over before it gives up.
MIGRATE_PATIENCE_S = 120.0


def migrate(
    dsn: str, revision: str = "head", *, downgrade: bool = False, distribute: bool = False
) -> str | None:
    """Upgrade (or downgrade) the schema; returns the revision now current.

    With `distribute`, once the revisions ran, tables still local are distributed
    over Citus with their rows, in one transaction (`pgsearch.db.citus.convert`).
    """
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
                adopt_legacy_version_table(conn)
                before = MigrationContext.configure(
                    conn, opts={"version_table": VERSION_TABLE}
                ).get_current_revision()
                conn.commit()
                _check_direction(_script(), before, revision, downgrade=downgrade)
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
                if distribute:
                    from pgsearch.db import citus

                    try:
                        converted = citus.convert(conn)
                    except Exception:
                        conn.rollback()  # the lock is released on a usable connection
                        raise
                    conn.commit()
                    log.info("distributed over Citus: %s", ", ".join(converted) or "nothing to do")
                current: str | None = MigrationContext.configure(
                    conn, opts={"version_table": VERSION_TABLE}
                ).get_current_revision()
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _MIGRATE_LOCK})
                conn.commit()
    except Exception as exc:
        if isinstance(exc, PgSearchError):
            raise
        raise StoreError(f"migrating: {redact_message(_first_line(exc), dsn)}") from exc
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

    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error as exc:
        raise ConfigError(
            f"invalid connection string {redact_dsn(dsn)}: {redact_message(_first_line(exc), dsn)}"
        ) from None
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
        try:
            conn.execute(query)
        except (pg_errors.DuplicateDatabase, pg_errors.UniqueViolation):
            # Another `migrate --create` created it between our check and now.
            return False
    return True
