"""`pgsearch doctor` on a real server: the buffer cache it reports is the server's own."""

from __future__ import annotations

import json

import psycopg
from click.testing import CliRunner

from pgsearch import PgSearch
from pgsearch.cli import main
from pgsearch.db import diagnose
from pgsearch.types import SessionQueryRequest


def test_doctor_reports_the_servers_cache_against_the_searched_tables(
    pg: PgSearch, dsn: str
) -> None:
    pg.append(
        workspace="w",
        session_id="s",
        messages=[{"role": "user", "content": f"deploy kraken number {i}"} for i in range(50)],
    )
    assert pg.provider(workspace="w").search(SessionQueryRequest(query="kraken")).matches
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT count(*) FROM messages WHERE workspace_id = 'w'")
        # Block counts reach the statistics when a session goes idle, at most once a
        # second unless forced: this session's before the doctor reads them.
        conn.execute("SELECT pg_stat_force_next_flush()")
    runner = CliRunner()
    report = json.loads(runner.invoke(main, ["--dsn", dsn, "doctor", "--json"]).output)
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT pg_size_bytes(current_setting('shared_buffers'))").fetchone()
        sizes = dict(
            conn.execute(
                "SELECT c.relname, pg_table_size(c.oid) + pg_indexes_size(c.oid) FROM pg_class c "
                "WHERE c.relname = ANY(%s) AND c.relkind = 'r'",
                (list(diagnose.SEARCHED_TABLES),),
            ).fetchall()
        )
    assert row is not None
    cache = report["cache"]
    assert cache["shared_buffers_bytes"] == row[0]
    assert set(sizes) == set(diagnose.SEARCHED_TABLES)
    assert cache["searched_bytes"] == sum(sizes.values())
    # The count above read the tables' blocks.
    assert 0.0 < cache["hit_ratio"] <= 1.0
    # A test database is far smaller than any server's cache.
    assert cache["note"] is None
    text = runner.invoke(main, ["--dsn", dsn, "doctor"]).output
    assert "cache: shared_buffers " in text and "cache hint" not in text
