"""One `PgSearch` per process: the pool, thread safety, faults and the write timeout.

Against the real server: pooled backends are killed with ``pg_terminate_backend``,
locks are held by other connections, and threads share one object.
"""

from __future__ import annotations

import asyncio
import threading
import time
import traceback
from collections import Counter
from datetime import UTC, datetime

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from pgsearch import PgSearch, SessionQueryRequest, Settings, StoreError
from pgsearch.aio import AsyncPgSearch
from tests.conftest import EXAMPLES
from tests.helpers import assert_statistics_exact

WS = "pool"


def _backends(dsn: str) -> list[int]:
    name = conninfo_to_dict(dsn)["dbname"]
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND application_name = 'pgsearch'"
            " AND pid <> pg_backend_pid()",
            (name,),
        ).fetchall()
    return [int(r[0]) for r in rows]


def _terminate(dsn: str, pids: list[int]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for pid in pids:
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    deadline = time.monotonic() + 10
    while set(pids) & set(_backends(dsn)):
        assert time.monotonic() < deadline, "terminated backends did not go away"
        time.sleep(0.05)


def test_killed_pooled_backends_are_replaced_and_the_next_call_succeeds(dsn: str) -> None:
    with PgSearch.connect(dsn, pool_size=3) as pg:
        pg.ingest_paths([EXAMPLES], workspace=WS)
        provider = pg.provider(workspace=WS)
        expected = provider.search(SessionQueryRequest(query="cron"))
        assert expected.matches
        old = _backends(dsn)
        assert old, "the pool holds connections"
        _terminate(dsn, old)
        with pg._driver.capture() as units:
            again = provider.search(SessionQueryRequest(query="cron"))
            sessions = pg.sessions(workspace=WS)
        assert again == expected
        assert len(sessions) == 3
        assert not set(old) & set(_backends(dsn)), "a dead connection is still pooled"
        # A killed connection costs at most one failed attempt, which was retried.
        failed = [u.error for u in units if u.error is not None]
        assert len(failed) <= len(old)
        assert all("database unavailable" in e for e in failed), failed


def test_eight_threads_sharing_one_pgsearch_search_and_append_without_errors(
    dsn: str,
) -> None:
    """The failure that made a shared PgSearch unusable: 8 threads, searches and
    appends on one object, 320 operations, no error, nothing lost or doubled."""
    errors: list[str] = []
    appended: Counter[str] = Counter()
    lock = threading.Lock()
    with PgSearch.connect(dsn) as pg:
        pg.append(
            workspace=WS, session_id="seed", messages=[{"role": "user", "content": "cron seed"}]
        )

        def worker(index: int) -> None:
            try:
                provider = pg.provider(workspace=WS)
                for i in range(40):
                    if i % 4 == 0:
                        token = f"tok{index}x{i}"
                        pg.append(
                            workspace=WS,
                            session_id=f"s{index % 3}",
                            messages=[{"role": "user", "content": f"cron deploy {token}"}],
                        )
                        with lock:
                            appended[token] += 1
                        found = provider.search(SessionQueryRequest(query=token, per_session=False))
                        assert any(token in m.excerpt for m in found.matches), token
                    elif i % 4 == 1:
                        provider.around("seed", 0)
                    else:
                        provider.search(SessionQueryRequest(query="cron deploy"))
            except Exception:
                with lock:
                    errors.append(traceback.format_exc())

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
            assert not t.is_alive()
    assert errors == [], "\n".join(errors)
    with psycopg.connect(dsn) as conn:
        stored = Counter(
            word
            for (content,) in conn.execute(
                "SELECT content FROM messages WHERE workspace_id = %s", (WS,)
            ).fetchall()
            for word in content.split()
            if word.startswith("tok")
        )
    assert stored == appended and sum(appended.values()) == 80
    assert_statistics_exact(dsn, WS)


def test_the_pool_never_opens_more_than_its_size(dsn: str) -> None:
    with PgSearch.connect(dsn, pool_size=2) as pg:
        pg.ingest_paths([EXAMPLES], workspace=WS)
        peak = 0
        stop = threading.Event()

        def searching() -> None:
            while not stop.is_set():
                pg.provider(workspace=WS).search(SessionQueryRequest(query="deploy keys"))

        threads = [threading.Thread(target=searching) for _ in range(6)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            peak = max(peak, len(_backends(dsn)))
            time.sleep(0.02)
        stop.set()
        for t in threads:
            t.join(30)
    assert 1 <= peak <= 2


def test_a_write_blocked_by_a_lock_fails_within_the_write_timeout(dsn: str) -> None:
    settings = Settings.from_env({}, dsn=dsn, write_timeout_ms=500)
    with PgSearch.connect(settings=settings) as pg:
        pg.append(workspace=WS, session_id="s", messages=[{"role": "user", "content": "one"}])
        with psycopg.connect(dsn) as other:
            other.execute(
                "SELECT 1 FROM sessions WHERE workspace_id = %s AND session_id = 's' FOR UPDATE",
                (WS,),
            )
            started = time.monotonic()
            with pytest.raises(StoreError, match="timed out"):
                pg.append(
                    workspace=WS, session_id="s", messages=[{"role": "user", "content": "two"}]
                )
            elapsed = time.monotonic() - started
            other.rollback()
        assert elapsed < 5, f"the blocked append took {elapsed:.1f}s"
        # Nothing of the failed append was stored; the next write goes through.
        assert (
            pg.append(workspace=WS, session_id="s", messages=[{"role": "user", "content": "three"}])
            == 1
        )
        window = pg.session_messages(workspace=WS, session_id="s")
    assert [m.content for m in window.messages] == ["one", "three"]
    assert_statistics_exact(dsn, WS)


def test_reads_and_forget_take_the_round_trips_their_data_needs(dsn: str) -> None:
    with PgSearch.connect(dsn) as pg:
        pg.ingest_paths([EXAMPLES], workspace=WS)
        session = pg.sessions(workspace=WS)[0].session_id
        with pg._driver.capture() as units:
            pg.around(workspace=WS, session_id=session, seq=2)
            pg.session_messages(workspace=WS, session_id=session)
            pg.sessions(workspace=WS)
            pg.stats(workspace=WS)
            pg.forget(workspace=WS, session_id=session)
    trips = {u.context: u.round_trips for u in units}
    # BEGIN, settings, the reads and COMMIT travel together.
    assert trips["reading a window"] == 1
    assert trips["listing a session"] == 1
    assert trips["listing sessions"] == 1
    assert trips["reading statistics"] == 1
    # Deleting, then folding the deltas in (which depend on what was deleted) + COMMIT.
    assert trips["forgetting"] <= 3
    assert_statistics_exact(dsn, WS)


def test_times_come_back_in_utc_whatever_the_servers_time_zone(dsn: str) -> None:
    """Every pooled session runs in UTC: a database whose `TimeZone` is New York's
    still gives times in `datetime.UTC`, the same instants, sync and async."""
    name = conninfo_to_dict(dsn)["dbname"]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("ALTER DATABASE {} SET TimeZone = 'America/New_York'").format(
                sql.Identifier(name)
            )
        )
    with psycopg.connect(dsn) as conn:  # a new session takes the database's zone
        assert conn.execute("SHOW TimeZone").fetchone() == ("America/New_York",)
    at = datetime(2026, 3, 2, 9, 1, tzinfo=UTC)
    request = SessionQueryRequest(query="advisory lock")
    with PgSearch.connect(dsn) as pg:
        pg.append(
            workspace=WS,
            session_id="tz",
            messages=[
                {"role": "user", "content": "an advisory lock", "created_at": at.isoformat()}
            ],
        )
        (match,) = pg.provider(workspace=WS).search(request).matches
        (session,) = pg.sessions(workspace=WS)

    async def search() -> datetime:
        async with await AsyncPgSearch.connect(dsn) as apg:
            (m,) = (await apg.provider(workspace=WS).search(request)).matches
            return m.created_at

    for got in (match.created_at, session.updated_at, asyncio.run(search())):
        assert got == at
        assert got.tzinfo is UTC
