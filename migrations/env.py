"""Alembic environment for pgsearch.

The connection comes from the caller (``pgsearch migrate`` passes one in
``config.attributes["connection"]``) or, when run as ``alembic upgrade head`` from a
checkout, from ``-x dsn=...``, ``PGSEARCH_DSN`` or libpq's ``PG*`` variables.
Each revision runs in its own transaction. pgsearch records its revision in its
own table, ``pgsearch_alembic_version`` (another Alembic application in the same
database keeps ``alembic_version``); a database migrated by an earlier pgsearch,
whose ``alembic_version`` holds pgsearch revisions, has that table renamed first.
"""

from __future__ import annotations

from alembic import context

from pgsearch.db.migrate import VERSION_TABLE, adopt_legacy_version_table, make_engine
from pgsearch.db.schema import metadata

config = context.config


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        adopt_legacy_version_table(connection)
        context.configure(
            connection=connection,
            target_metadata=metadata,
            transaction_per_migration=True,
            version_table=VERSION_TABLE,
        )
        with context.begin_transaction():
            context.run_migrations()
        return
    dsn = context.get_x_argument(as_dictionary=True).get("dsn")
    engine = make_engine(dsn)
    with engine.connect() as conn:
        adopt_legacy_version_table(conn)
        context.configure(
            connection=conn,
            target_metadata=metadata,
            transaction_per_migration=True,
            version_table=VERSION_TABLE,
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("pgsearch migrations run online only: give a database to migrate")
run_migrations_online()
