"""Shared pieces of the reliability suites: snapshots, the CLI, a restricted role."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.conftest import RUN_ID, Databases

#: Every table pgsearch writes, with the columns that order its rows.
TABLE_KEYS = {
    "workspace_stats": "workspace_id, kind",
    "sessions": "workspace_id, session_id",
    "messages": "workspace_id, session_id, seq",
    "vocabulary": "workspace_id, term",
    "ingested_files": "workspace_id, path",
    "leaf_titles": "workspace_id, leaf_uuid",
    "pgsearch_meta": "key",
}


def table_columns(dsn: str) -> dict[str, list[str]]:
    """The columns each pgsearch table has now (tables not created yet are left out)."""
    with psycopg.connect(dsn) as conn:
        found = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = ANY(%s) "
            "ORDER BY table_name, ordinal_position",
            (list(TABLE_KEYS),),
        ).fetchall()
    columns: dict[str, list[str]] = {}
    for table, column in found:
        columns.setdefault(table, []).append(column)
    return columns


def snapshot(
    dsn: str, columns: dict[str, list[str]] | None = None
) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every pgsearch table, in key order, as text (exact comparisons).

    With `columns`, only those tables and columns are read: what a database had
    before a migration added some, compared with what it holds after.
    """
    columns = table_columns(dsn) if columns is None else columns
    out: dict[str, list[tuple[object, ...]]] = {}
    with psycopg.connect(dsn) as conn, conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        for table, keys in TABLE_KEYS.items():
            if table not in columns:
                continue
            # When a file was last read is not part of what it stored.
            kept = [
                c for c in columns[table] if not (table == "ingested_files" and c == "updated_at")
            ]
            row = sql.SQL("({})::text").format(
                sql.SQL(", ").join(sql.SQL("t.{}").format(sql.Identifier(c)) for c in kept)
            )
            query = sql.SQL("SELECT {} FROM {} t ORDER BY {}").format(
                row, sql.Identifier(table), sql.SQL(keys)
            )
            out[table] = [tuple(r) for r in conn.execute(query).fetchall()]
    return out


def row_counts(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        return {
            table: int(
                conn.execute(
                    sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
                ).fetchone()[0]  # type: ignore[index]
            )
            for table in TABLE_KEYS
        }


def messages_seq_scans(dsn: str) -> int:
    """The server's count of sequential scans on `messages` (flushed first)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_force_next_flush()")
        row = conn.execute(
            "SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'messages'"
        ).fetchone()
    return int(row[0]) if row else 0


def wait_for_other_backends(dsn: str, timeout: float = 30.0) -> int:
    """Wait until no other session is connected to the database of `dsn`.

    After a client is killed its server process lingers until it notices; checks of
    committed state must not race a transaction that is still being rolled back.
    Returns how many of those sessions were inside a transaction when first seen.
    """
    name = conninfo_to_dict(dsn).get("dbname")
    deadline = time.monotonic() + timeout
    first: int | None = None
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE xact_start IS NOT NULL) "
                "FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            ).fetchone()
            assert row is not None
            first = int(row[1]) if first is None else first
            if row[0] == 0:
                return first
            if time.monotonic() > deadline:
                raise AssertionError(f"other sessions still connected to {name} after {timeout}s")
            time.sleep(0.05)


def cli(
    *args: str, dsn: str, env: dict[str, str] | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """``python -m pgsearch --dsn DSN ARGS`` as a user runs it (no PGSEARCH_* inherited)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("PGSEARCH_")}
    base["PYTHONIOENCODING"] = "utf-8"
    base.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "pgsearch", "--dsn", dsn, *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        env=base,
        input="",
        timeout=timeout,
    )


def cli_command(dsn: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "pgsearch", "--dsn", dsn, *args]


def role_dsn(dsn: str, role: str) -> str:
    params = conninfo_to_dict(dsn)
    params["user"] = role
    params.pop("password", None)
    return make_conninfo(**params)  # type: ignore[arg-type]


@pytest.fixture
def app_role(dsn: str, databases: Databases) -> Iterator[str]:
    """A uniquely named login role that owns nothing and bypasses nothing.

    It gets the privileges an application role needs on the test database only; the
    role and its privileges are dropped afterwards.
    """
    role = f"pgsearch_test_{RUN_ID}_app_{uuid.uuid4().hex[:8]}"
    ident = sql.Identifier(role)
    with psycopg.connect(databases.server_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOBYPASSRLS").format(ident))
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(ident))
            conn.execute(
                sql.SQL(
                    "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {}"
                ).format(ident)
            )
        yield role
    finally:
        name = conninfo_to_dict(dsn).get("dbname")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE usename = %s AND datname = %s",
                (role, name),
            )
            conn.execute(sql.SQL("DROP OWNED BY {}").format(ident))
        with psycopg.connect(databases.server_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(ident))


def tree(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.jsonl") if p.is_file())
