"""Migrations: up, down, up again; the schema they build equals the metadata."""

from __future__ import annotations

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from pgsearch import PgSearch, SchemaOutOfDate
from pgsearch.db.migrate import (
    HEAD_REVISION,
    VERSION_TABLE,
    make_engine,
    migrate,
    migrations_dir,
)
from pgsearch.db.schema import TENANT_TABLES, metadata


def _tables(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        ).fetchall()
    return {r[0] for r in rows}


def test_head_revision_matches_scripts() -> None:
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    assert ScriptDirectory.from_config(cfg).get_current_head() == HEAD_REVISION


def test_upgrade_downgrade_upgrade(empty_dsn: str) -> None:
    assert migrate(empty_dsn) == HEAD_REVISION
    assert set(TENANT_TABLES) <= _tables(empty_dsn)
    assert migrate(empty_dsn, "base", downgrade=True) is None
    assert _tables(empty_dsn) == {"pgsearch_alembic_version"}
    assert migrate(empty_dsn) == HEAD_REVISION
    assert set(TENANT_TABLES) <= _tables(empty_dsn)


def test_schema_from_migrations_equals_metadata(empty_dsn: str) -> None:
    migrate(empty_dsn)
    engine = make_engine(empty_dsn)
    try:
        with engine.connect() as conn:
            diff = compare_metadata(
                MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}), metadata
            )
    finally:
        engine.dispose()
    assert diff == []


def _options(dsn: str, table: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = to_regclass(%s)", (table,)
        ).fetchone()
    assert row is not None
    return list(row[0])


def test_table_options_follow_the_metadata(empty_dsn: str) -> None:
    """Storage options the comparison above does not see: set by their revision, the
    same as the metadata declares, and gone again when it is downgraded."""
    migrate(empty_dsn)
    for name, table in metadata.tables.items():
        declared = table.dialect_options["postgresql"]["with"] or {}
        assert sorted(_options(empty_dsn, name)) == sorted(
            f"{k}={v}" for k, v in declared.items()
        ), name
    assert "fillfactor=70" in _options(empty_dsn, "vocabulary")
    migrate(empty_dsn, "0006", downgrade=True)
    assert _options(empty_dsn, "vocabulary") == []


def test_every_key_leads_with_workspace(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            """
            SELECT t.relname, i.relname, a.attname
            FROM pg_index x
            JOIN pg_class t ON t.oid = x.indrelid
            JOIN pg_class i ON i.oid = x.indexrelid
            JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = x.indkey[0]
            WHERE t.relname = ANY(%s)
            """,
            (list(TENANT_TABLES),),
        ).fetchall()
    assert rows
    assert all(col == "workspace_id" for _, _, col in rows), rows


def test_open_without_schema_names_the_fix(empty_dsn: str) -> None:
    with pytest.raises(SchemaOutOfDate, match="pgsearch migrate"):
        PgSearch.connect(empty_dsn)


def test_open_on_old_revision_names_the_fix(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE pgsearch_alembic_version SET version_num = '0000'")
    with pytest.raises(SchemaOutOfDate, match=r"revision 0000.*pgsearch migrate"):
        PgSearch.connect(dsn)


def test_migrations_keep_populated_data(dsn: str) -> None:
    """Running `migrate` again on a populated database changes nothing."""
    from tests.conftest import EXAMPLES

    with PgSearch.connect(dsn) as pg:
        pg.ingest_paths([EXAMPLES], workspace="w")
        before = pg.stats(workspace="w")
    assert migrate(dsn) == HEAD_REVISION
    with PgSearch.connect(dsn) as pg:
        assert pg.stats(workspace="w") == before
