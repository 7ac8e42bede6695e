"""Migrations on live data: every row, statistic and answer survives an upgrade.

A database is populated (several workspaces, forgotten and rewritten sessions, agent
logs, titles and summaries) and taken down to the first revision, then upgraded to
head, downgraded and upgraded again. All rows of every table (on the columns the
first revision has), the statistics and the answers to a set of searches must come
through unchanged. A last test upgrades while writers and searchers are running.

The library refuses a database whose schema is not the one it needs, so what runs
against the database during an upgrade is the previous release: the live test's
writers and searchers use the statements of the first revision's schema.
"""

from __future__ import annotations

import json
import threading
import time
import traceback
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgsearch import PgSearch, SessionQueryRequest, Settings
from pgsearch.db.connector import HEAD_REVISION
from pgsearch.db.migrate import migrate
from pgsearch.db.schema import TENANT_TABLES
from pgsearch.db.store import Driver, DriverConfig
from tests.conftest import EXAMPLES
from tests.helpers import assert_statistics_exact
from tests.reliability.conftest import snapshot, table_columns

FIRST = "0001"
WORKSPACES = ("alpha", "beta", "gamma")
T0 = datetime(2026, 1, 15, tzinfo=UTC)
QUERIES = ["cron", "refactor", "deploy keys", "pokemon", "summary", "title words", "", "東京"]


def open_at_any_revision(dsn: str) -> PgSearch:
    """The library on a database not at head yet (as a running deployment is)."""
    driver = Driver.open(dsn, DriverConfig(pool_max=2), check_schema=False)
    return PgSearch(driver, Settings.from_env({}, dsn=dsn))


def populate(pg: PgSearch, folder: Path) -> None:
    for w, ws in enumerate(WORKSPACES):
        pg.ingest_paths([EXAMPLES], workspace=ws)
        for s in range(5):
            pg.append(
                workspace=ws,
                session_id=f"s{s}",
                messages=[
                    {
                        "role": ["user", "assistant"][i % 2],
                        "content": f"cron refactor step {i} of session {s} in {ws} 東京",
                        "title": f"title words {s}" if i == 0 else None,
                        "created_at": (T0 + timedelta(hours=w, minutes=s * 10 + i)).isoformat(),
                    }
                    for i in range(12)
                ],
            )
        pg.forget(workspace=ws, session_id="s4")
        log = folder / f"{ws}-log.jsonl"
        for version in ("first words", "second words"):  # the second is a rewrite
            log.write_text(
                "".join(
                    json.dumps(
                        {
                            "type": "user" if i % 2 == 0 else "assistant",
                            "sessionId": log.stem,
                            "uuid": f"{version}-{i}",
                            "timestamp": (T0 + timedelta(seconds=i)).isoformat(),
                            "message": {
                                "role": "user" if i % 2 == 0 else "assistant",
                                "content": f"{version} summary {i}",
                            },
                        }
                    )
                    + "\n"
                    for i in range(6)
                ),
                encoding="utf-8",
            )
            pg.ingest_file(log, workspace=ws)


def answers(pg: PgSearch) -> list[Any]:
    out = []
    for ws in WORKSPACES:
        provider = pg.provider(workspace=ws)
        for query in QUERIES:
            result = provider.search(SessionQueryRequest(query=query, per_session=False, limit=50))
            out.append(
                [
                    (m.session_id, m.seq, m.kind, round(m.score, 6), m.excerpt)
                    for m in result.matches
                ]
                + [result.searched]
            )
    return out


def rls_tables(dsn: str) -> dict[str, tuple[bool, int]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT c.relname, c.relrowsecurity, "
            "(SELECT count(*) FROM pg_policy p WHERE p.polrelid = c.oid) "
            "FROM pg_class c WHERE c.relname = ANY(%s) AND c.relkind = 'r'",
            (list(TENANT_TABLES),),
        ).fetchall()
    return {r[0]: (bool(r[1]), int(r[2])) for r in rows}


#: The tenant tables the first revision created (later ones add more).
FIRST_TABLES = ("workspace_stats", "sessions", "messages", "vocabulary", "ingested_files")


@pytest.fixture
def populated(
    empty_dsn: str, tmp_path: Path
) -> Iterator[tuple[str, dict[str, Any], list[Any], dict[str, list[str]]]]:
    assert migrate(empty_dsn) == HEAD_REVISION
    with open_at_any_revision(empty_dsn) as pg:
        populate(pg, tmp_path)
        before_answers = answers(pg)
    assert migrate(empty_dsn, FIRST, downgrade=True) == FIRST
    # Rows are compared on the columns they had: migrations only ever add columns.
    columns = table_columns(empty_dsn)
    before = snapshot(empty_dsn, columns)
    assert sum(len(rows) for rows in before.values()) > 500
    yield empty_dsn, before, before_answers, columns


def test_upgrade_keeps_every_row_statistic_and_answer(
    populated: tuple[str, dict[str, Any], list[Any], dict[str, list[str]]],
) -> None:
    dsn, before, before_answers, columns = populated
    assert rls_tables(dsn) == {t: (False, 0) for t in FIRST_TABLES}
    assert migrate(dsn) == HEAD_REVISION
    assert rls_tables(dsn) == {t: (True, 1) for t in TENANT_TABLES}
    assert snapshot(dsn, columns) == before
    for ws in WORKSPACES:
        assert_statistics_exact(dsn, ws)
    with PgSearch.connect(dsn) as pg:
        assert answers(pg) == before_answers


def test_downgrade_and_upgrade_again_keep_everything(
    populated: tuple[str, dict[str, Any], list[Any], dict[str, list[str]]],
) -> None:
    dsn, before, before_answers, columns = populated
    assert migrate(dsn) == HEAD_REVISION
    assert migrate(dsn, FIRST, downgrade=True) == FIRST
    assert rls_tables(dsn) == {t: (False, 0) for t in FIRST_TABLES}
    assert table_columns(dsn) == columns
    assert snapshot(dsn) == before
    assert migrate(dsn) == HEAD_REVISION
    assert snapshot(dsn, columns) == before
    with PgSearch.connect(dsn) as pg:
        assert answers(pg) == before_answers
    for ws in WORKSPACES:
        assert_statistics_exact(dsn, ws)


@pytest.mark.slow
def test_upgrade_while_writers_and_searchers_run(
    populated: tuple[str, dict[str, Any], list[Any], dict[str, list[str]]],
) -> None:
    """The deploy step runs against a live database: the upgrade completes, nobody
    sees an error, and every write made around it is kept."""
    dsn, _, _, _ = populated
    stop = threading.Event()
    errors: list[str] = []
    written: dict[str, int] = {}
    lock = threading.Lock()

    def writer(index: int) -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                n = 0
                while not stop.is_set():
                    ws = WORKSPACES[n % len(WORKSPACES)]
                    sid = f"live-{index}-{n % 3}"
                    _old_append(conn, ws, sid, f"live write {index} {n} cron")
                    with lock:
                        written[f"{ws}/{sid}"] = written.get(f"{ws}/{sid}", 0) + 1
                    n += 1
        except Exception:
            errors.append(traceback.format_exc())

    def searcher() -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                while not stop.is_set():
                    for ws in WORKSPACES:
                        _old_search(conn, ws, "cron")
        except Exception:
            errors.append(traceback.format_exc())

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(3)]
    threads += [threading.Thread(target=searcher) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    started = time.monotonic()
    try:
        assert migrate(dsn) == HEAD_REVISION
        took = time.monotonic() - started
        time.sleep(1.5)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert errors == [], "\n".join(errors)
    assert took < 30
    with psycopg.connect(dsn) as conn:
        for key, count in written.items():
            ws, sid = key.split("/")
            row = conn.execute(
                "SELECT count(*), max(seq) FROM messages WHERE workspace_id = %s "
                "AND session_id = %s",
                (ws, sid),
            ).fetchone()
            assert row == (count, count - 1), key
    # The previous release's writes (system entries) after the upgrade kept the
    # statistics but not the scope counts: a search that would sum those counts
    # the scope's messages instead; the other kinds' counts are still summed.
    behind = 0
    with open_at_any_revision(dsn) as pg, psycopg.connect(dsn) as conn:
        for ws in WORKSPACES:
            assert_statistics_exact(dsn, ws, scope_counts_exact_required=False)
            for kinds, role in ((("system",), "system"), (("user_text",), "user")):
                counted, summed = conn.execute(
                    "SELECT (SELECT count(*) FROM messages WHERE workspace_id = %(ws)s"
                    " AND kind = ANY(%(kinds)s) AND role = %(role)s),"
                    " (SELECT coalesce(sum(n_messages), 0) FROM scope_counts"
                    " WHERE workspace_id = %(ws)s AND kind = ANY(%(kinds)s) AND role = %(role)s)",
                    {"ws": ws, "kinds": list(kinds), "role": role},
                ).fetchone() or (0, 0)
                behind += counted - summed
                result = pg.provider(workspace=ws).search(
                    SessionQueryRequest(query="cron", kinds=kinds, roles=(role,))
                )
                assert result.searched == counted > 0, (ws, kinds)
    assert behind > 0, "writes of the previous release came after the upgrade"
    # `pgsearch maintain` counts them again: exact, and summed by searches again.
    with open_at_any_revision(dsn) as pg:
        for ws in WORKSPACES:
            pg.maintain(workspace=ws)
            assert_statistics_exact(dsn, ws)
    print(f"live upgrade: {took:.2f}s under load, {sum(written.values())} writes around it")


# --- the previous release's statements (the first revision's columns only) ---------


def _old_append(conn: psycopg.Connection[Any], ws: str, sid: str, text: str) -> None:
    """One unindexed message appended as an application at the first revision does,
    keeping session counters and per-kind statistics exact."""
    for attempt in range(20):
        try:
            with conn.transaction():
                conn.execute(
                    "INSERT INTO sessions (workspace_id, session_id) VALUES (%s, %s) "
                    "ON CONFLICT (workspace_id, session_id) DO NOTHING",
                    (ws, sid),
                )
                row = conn.execute(
                    "SELECT next_seq FROM sessions WHERE workspace_id = %s AND session_id = %s "
                    "FOR UPDATE",
                    (ws, sid),
                ).fetchone()
                assert row is not None
                conn.execute(
                    "INSERT INTO messages (workspace_id, session_id, seq, kind, role, turn, "
                    "created_at, content, arguments, tsv, token_count) "
                    "VALUES (%s, %s, %s, 'system', 'system', 0, now(), %s, '', ''::tsvector, 0)",
                    (ws, sid, row[0], text),
                )
                conn.execute(
                    "UPDATE sessions SET next_seq = next_seq + 1, message_count = message_count "
                    "+ 1, created_at = coalesce(created_at, now()), updated_at = now() "
                    "WHERE workspace_id = %s AND session_id = %s",
                    (ws, sid),
                )
                conn.execute(
                    "INSERT INTO workspace_stats AS s (workspace_id, kind, n_messages) "
                    "VALUES (%s, 'system', 1) ON CONFLICT (workspace_id, kind) "
                    "DO UPDATE SET n_messages = s.n_messages + 1",
                    (ws,),
                )
            return
        except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure):
            time.sleep(0.01 * (attempt + 1))
    raise AssertionError("an append kept failing")


def _old_search(conn: psycopg.Connection[Any], ws: str, word: str) -> None:
    with conn.transaction():
        conn.execute(
            "SELECT m.session_id, m.seq FROM messages m WHERE m.workspace_id = %s "
            "AND m.tsv @@ to_tsquery('simple', %s) ORDER BY m.created_at DESC LIMIT 20",
            (ws, word),
        ).fetchall()
        conn.execute(
            "SELECT term, df FROM vocabulary WHERE workspace_id = %s AND term = %s", (ws, word)
        ).fetchall()
