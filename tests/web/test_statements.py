"""The serving statements read through an index: EXPLAINed with sequential scans off,
on tables big enough that the planner has a choice."""

from __future__ import annotations

import json

import psycopg

from pgsearch.db import queries as q
from tests.conftest import Databases


def test_session_and_token_statements_use_an_index(databases: Databases) -> None:
    from pgsearch.db.migrate import migrate

    name = databases.create(prefix="httpx")
    dsn = databases.dsn(name)
    try:
        migrate(dsn)
        with psycopg.connect(dsn) as conn, conn.transaction(force_rollback=True):
            conn.execute(
                "INSERT INTO sessions (workspace_id, session_id) "
                "SELECT 'ws-' || (i % 20), 's' || i FROM generate_series(1, 20000) AS i"
            )
            conn.execute(
                "INSERT INTO api_tokens (token_id, token_hash, workspace_id) "
                "SELECT lpad(to_hex(i), 12, '0'), md5(i::text), 'ws-' || (i % 50) "
                "FROM generate_series(1, 20000) AS i"
            )
            conn.execute("ANALYZE sessions, api_tokens")
            conn.execute("SET LOCAL enable_seqscan = off")
            statements = {
                "session info": (q.SESSION_INFO, {"ws": "ws-3", "session_id": "s23"}),
                "token by hash": (q.TOKEN_BY_HASH, {"token_hash": "abc"}),
                "workspace tokens": (q.LIST_WORKSPACE_TOKENS, {"ws": "ws-7"}),
                "revoke": (q.REVOKE_TOKEN, {"token_id": "0000000000ff"}),
            }
            bad = {}
            for label, (statement, params) in statements.items():
                row = conn.execute("EXPLAIN (FORMAT JSON) " + statement, params).fetchone()
                assert row is not None
                text = json.dumps(row[0])
                if '"Seq Scan"' in text:
                    bad[label] = text
            assert bad == {}
    finally:
        databases.drop(name)
