"""The reliability suites that make sense on a cluster, run on it unchanged.

- Tenant isolation under row level security: the application role owns nothing, each
  transaction is bound to its workspace with ``SET LOCAL``, which reaches the shards
  (``citus.propagate_set_commands = 'local'``), where the policies filter the rows.
  Its tests include raw SQL with no workspace filter on a bound connection, which
  reads every shard by design: this module runs without the single-shard check.
- Crash safety: ``kill -9`` of ingests through the coordinator leaves each file all
  or nothing, its record agreeing, the statistics exact.
- Concurrency: racing ingests, appends and forgets of the same files and sessions
  keep every row once and the statistics exact (deadlock-free term order on shards).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import psycopg
import pytest

from pgsearch.db.schema import TENANT_TABLES
from pgsearch.db.work import Statement, Unit, Work, as_tuple, fetch
from pgsearch.errors import StoreError
from tests.helpers import assert_statistics_exact
from tests.reliability import test_concurrency, test_crash_safety, test_tenant_isolation
from tests.reliability.test_concurrency import *  # noqa: F403
from tests.reliability.test_crash_safety import (
    test_kill_minus_nine_mid_ingest_leaves_each_file_all_or_nothing as test_kill_on_the_cluster,
)
from tests.reliability.test_tenant_isolation import *  # noqa: F403
from tests.reliability.test_tenant_isolation import PER_WORKSPACE, A, B, Tenants

# These two stage a lock wait and a deadlock between a test's own session and the
# library, and watch for it in the coordinator's pg_stat_activity: on a cluster the
# row locks are taken on the workers (and deadlocks across nodes are broken by Citus'
# own detector), so the staging does not apply. The writers-and-searchers race above
# still checks that concurrent writers lose nothing and leave exact statistics.
del test_a_deadlock_victim_is_retried_and_lands_once  # noqa: F821
del test_a_rewrite_and_an_append_take_vocabulary_locks_in_one_order  # noqa: F821
# Replaced by the cluster's version below (moving a row between workspaces is refused
# by Citus with its own error, before the policies are asked).
del test_the_database_enforces_the_binding_below_the_library  # noqa: F821
assert test_concurrency and test_tenant_isolation


@pytest.fixture(autouse=True)
def any_shard(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("PGSEARCH_CITUS_SINGLE_SHARD", "off")
    yield


def test_the_shards_enforce_the_binding_below_the_library(tenants: Tenants) -> None:
    """Raw SQL without a workspace filter, on the application's own pooled connections:
    statements over every shard, each shard's policy filtering by the workspace the
    transaction's ``SET LOCAL`` carried there. Moving a row to another workspace is
    refused by Citus before any policy is asked (the distribution column is fixed)."""
    driver = tenants.pg._driver

    def raw(text: str, *params: object) -> Statement[tuple[object, ...]]:
        return Statement("raw", text, {str(i): p for i, p in enumerate(params)} or None, as_tuple)

    def run(work: Any, workspace: str | None, *, write: bool = True) -> None:
        driver.run(Unit(work=work, workspace=workspace, write=write, context="raw statements"))

    def bound_to_a() -> Work[None]:
        for table in TENANT_TABLES:
            rows = yield from fetch(raw(f"SELECT DISTINCT workspace_id FROM {table}"))
            # Term lists exist only once built (`pgsearch maintain`); none are here.
            expected = [] if table.startswith("term_list") else [A]
            assert [r[0] for r in rows] == expected, table
        changed = yield from fetch(
            raw(
                "UPDATE messages SET content = 'overwritten' "
                "WHERE workspace_id = %(0)s RETURNING 1",
                B,
            )
        )
        assert changed == []
        deleted = yield from fetch(
            raw("DELETE FROM sessions WHERE workspace_id = %(0)s RETURNING 1", B)
        )
        assert deleted == []

    def unbound() -> Work[None]:
        for table in TENANT_TABLES:
            counted = yield from fetch(raw(f"SELECT count(*) FROM {table}"))
            assert counted == [(0,)], f"{table}: unbound transactions see nothing"

    run(bound_to_a, A)
    run(unbound, None, write=False)
    planted = raw("INSERT INTO sessions (workspace_id, session_id) VALUES (%(0)s, 'planted')", B)
    with pytest.raises(StoreError, match="row-level security"):
        run(partial(fetch, planted), A)
    moved = raw("UPDATE sessions SET workspace_id = %(0)s WHERE session_id = 'shared'", B)
    with pytest.raises(StoreError, match="modifying the partition value of rows is not allowed"):
        run(partial(fetch, moved), A)
    # Outside any transaction the setting is gone: a bare statement on a pooled
    # connection sees nothing.
    with driver._pools["primary"].connection() as conn:
        assert conn.execute("SELECT count(*) FROM messages").fetchone() == (0,)
    # Nothing above changed either workspace.
    for ws in (A, B):
        assert_statistics_exact(tenants.owner_dsn, ws)
    with psycopg.connect(tenants.owner_dsn) as conn:
        counts = dict(
            conn.execute("SELECT workspace_id, count(*) FROM messages GROUP BY 1").fetchall()
        )
    assert counts == {A: PER_WORKSPACE, B: PER_WORKSPACE}


# --- crash safety ---------------------------------------------------------------------
# The kill -9 test of tests/reliability, on the cluster, with fewer kills (each run
# ingests through the coordinator). After a kill it waits for the coordinator's
# pgsearch sessions to go (the Citus maintenance daemon stays connected, so "no
# other session at all" never comes); a killed client's coordinator session aborts
# its transaction on the worker with it.


def _pgsearch_sessions_gone(dsn: str, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    first: int | None = None
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE xact_start IS NOT NULL)"
                " FROM pg_stat_activity WHERE datname = current_database()"
                " AND application_name = 'pgsearch' AND pid <> pg_backend_pid()"
            ).fetchone()
            assert row is not None
            first = int(row[1]) if first is None else first
            if row[0] == 0:
                return first
            assert time.monotonic() < deadline, "pgsearch sessions still connected"
            time.sleep(0.05)


@pytest.fixture(autouse=True)
def crash_on_the_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(test_crash_safety, "wait_for_other_backends", _pgsearch_sessions_gone)
    monkeypatch.setattr(
        test_crash_safety, "KILLS", int(os.environ.get("PGSEARCH_CRASH_KILLS", "3"))
    )


assert test_kill_on_the_cluster
