"""`pgsearch migrate` against races, newer schemas, other Alembic applications and
revisions on the wrong side of the current one."""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid

import psycopg
import pytest

from pgsearch import PgSearch, SchemaOutOfDate, SessionQueryRequest
from pgsearch.db.migrate import HEAD_REVISION, VERSION_TABLE, create_database, migrate
from pgsearch.errors import ConfigError
from tests.conftest import EXAMPLES, RUN_ID, Databases

ROUNDS = 12


def fresh_name(databases: Databases) -> str:
    name = f"pgsearch_test_{RUN_ID}_race_{uuid.uuid4().hex[:8]}"
    databases.created.append(name)  # dropped by the fixture whatever happens
    return name


def _create(dsn: str, barrier: threading.Barrier, results: list[bool | BaseException]) -> None:
    barrier.wait()
    try:
        results.append(create_database(dsn))
    except BaseException as exc:
        results.append(exc)


def test_two_creates_at_once_both_succeed(databases: Databases) -> None:
    for _ in range(ROUNDS):
        name = fresh_name(databases)
        dsn = databases.dsn(name)
        barrier = threading.Barrier(2)
        results: list[bool | BaseException] = []
        threads = [threading.Thread(target=_create, args=(dsn, barrier, results)) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results, key=str) == [False, True], results
        databases.drop(name)


def test_two_cli_migrate_create_at_once(databases: Databases) -> None:
    for _ in range(3):
        name = fresh_name(databases)
        command = [sys.executable, "-m", "pgsearch", "--dsn", databases.dsn(name)]
        procs = [
            subprocess.Popen(
                [*command, "migrate", "--create"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        for proc in procs:
            out, err = proc.communicate(timeout=180)
            assert proc.returncode == 0, err
            assert out.strip() == f"schema at revision {HEAD_REVISION}"
        databases.drop(name)


def set_version(dsn: str, version: str, table: str = VERSION_TABLE) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"UPDATE {table} SET version_num = %s", (version,))


def test_a_newer_schema_says_upgrade_pgsearch(dsn: str) -> None:
    set_version(dsn, "0099")
    with pytest.raises(SchemaOutOfDate, match=r"0099, newer than this pgsearch.*upgrade pgsearch"):
        PgSearch.connect(dsn)
    with pytest.raises(SchemaOutOfDate, match=r"does not know.*upgrade pgsearch"):
        migrate(dsn)


def test_another_applications_alembic_table_is_named_and_left_alone(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE alembic_version (version_num varchar(32) PRIMARY KEY)")
        conn.execute("INSERT INTO alembic_version VALUES ('ae1027a6acf')")
    with pytest.raises(SchemaOutOfDate, match=r"another application's Alembic table") as failed:
        PgSearch.connect(empty_dsn)
    assert "schema of its own" in str(failed.value)
    assert migrate(empty_dsn) == HEAD_REVISION
    with psycopg.connect(empty_dsn) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [
            ("ae1027a6acf",)
        ]
    with PgSearch.connect(empty_dsn) as pg:
        assert pg.workspaces() == []


def as_earlier_pgsearch_left_it(dsn: str) -> None:
    """The version table as pgsearch 0.1 created it: Alembic's default name."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE {VERSION_TABLE} RENAME TO alembic_version")
        conn.execute(
            f"ALTER TABLE alembic_version RENAME CONSTRAINT {VERSION_TABLE}_pkc "
            "TO alembic_version_pkc"
        )


def test_a_database_of_the_earlier_pgsearch_upgrades_cleanly(dsn: str) -> None:
    with PgSearch.connect(dsn) as pg:
        assert pg.ingest_paths([EXAMPLES], workspace="w").errors == []
        before = pg.provider(workspace="w").search(SessionQueryRequest(query="deploy"))
        stats = pg.stats(workspace="w")
    as_earlier_pgsearch_left_it(dsn)
    with pytest.raises(SchemaOutOfDate, match=r"migrated by an earlier pgsearch.*migrate"):
        PgSearch.connect(dsn)
    assert migrate(dsn) == HEAD_REVISION
    with psycopg.connect(dsn) as conn:
        tables = conn.execute(
            "SELECT to_regclass('alembic_version'), to_regclass(%s)", (VERSION_TABLE,)
        ).fetchone()
        constraint = conn.execute(
            "SELECT conname FROM pg_constraint WHERE conrelid = to_regclass(%s) AND contype = 'p'",
            (VERSION_TABLE,),
        ).fetchall()
    assert tables == (None, VERSION_TABLE)
    assert constraint == [(f"{VERSION_TABLE}_pkc",)]
    with PgSearch.connect(dsn) as pg:
        assert pg.stats(workspace="w") == stats
        after = pg.provider(workspace="w").search(SessionQueryRequest(query="deploy"))
    assert after.matches == before.matches


def test_an_earlier_pgsearch_at_an_old_revision_upgrades_too(dsn: str) -> None:
    assert migrate(dsn, "0001", downgrade=True) == "0001"
    as_earlier_pgsearch_left_it(dsn)
    assert migrate(dsn) == HEAD_REVISION
    with PgSearch.connect(dsn):
        pass


def test_a_revision_below_the_current_one_is_refused_or_downgraded(dsn: str) -> None:
    with pytest.raises(
        ConfigError, match=rf"at revision {HEAD_REVISION}, later than 0001.*--downgrade"
    ):
        migrate(dsn, "0001")
    with pytest.raises(ConfigError, match=r"--revision base --downgrade"):
        migrate(dsn, "base")
    assert migrate(dsn, "0001", downgrade=True) == "0001"
    with pytest.raises(ConfigError, match=rf"not later than {HEAD_REVISION}.*to upgrade"):
        migrate(dsn, HEAD_REVISION, downgrade=True)
    with pytest.raises(ConfigError, match=r"unknown revision '0042'"):
        migrate(dsn, "0042")
    assert migrate(dsn, HEAD_REVISION) == HEAD_REVISION
    assert migrate(dsn, HEAD_REVISION) == HEAD_REVISION  # already there: nothing to do


def test_the_cli_refuses_an_upgrade_to_an_earlier_revision(dsn: str) -> None:
    from tests.acceptance.test_cli import pgsearch

    refused = pgsearch("migrate", "--revision", "0001", dsn=dsn)
    assert refused.returncode == 1
    assert refused.stderr.startswith(f"pgsearch: error: the schema is at revision {HEAD_REVISION}")
    assert "Traceback" not in refused.stderr
    down = pgsearch("migrate", "--revision", "0002", "--downgrade", dsn=dsn)
    assert down.returncode == 0 and down.stdout.strip() == "schema at revision 0002"
