"""Reads on a streaming standby through one `PgSearch` (``PGSEARCH_READ_DSN``).

Writes go to the primary; searches, windows and listings to the standby, which a
read waits for (bounded) until it has replayed this process's own writes. Every
check runs against the real private primary and standby of `tests.serving`:
replay is paused, the standby stopped, and a recovery conflict provoked for real.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from pgsearch import PgSearch, SessionQueryRequest, Settings
from pgsearch.db.driver import UnitRecord
from pgsearch.db.routing import PRIMARY, ReplicaRouter, replay_probe, standby_name
from pgsearch.db.work import Statement, Unit, Work, fetch
from tests.serving.conftest import Nodes

WS = "replica"
STANDBY = standby_name(1)


def _settings(nodes: Nodes, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "dsn": nodes.primary_dsn,
        "read_dsns": (nodes.standby_dsn,),
        "read_wait_ms": 3000,
    }
    values.update(overrides)
    return Settings.from_env({}, **values)


@contextmanager
def _routed(nodes: Nodes, **overrides: Any) -> Iterator[PgSearch]:
    with PgSearch.connect(settings=_settings(nodes, **overrides)) as pg:
        assert isinstance(pg._driver.router, ReplicaRouter)
        yield pg


def _word(i: int) -> str:
    """A word no other message holds (letters only: stemming leaves it alone)."""
    return "zeph" + "".join(chr(ord("a") + int(d)) for d in f"{i:04d}") + "x"


def _append(pg: PgSearch, i: int, session: str = "s") -> None:
    pg.append(
        workspace=WS,
        session_id=session,
        messages=[{"role": "user", "content": f"deploy the {_word(i)} service"}],
    )


def _reads(units: list[UnitRecord]) -> list[UnitRecord]:
    return [u for u in units if not u.write]


def test_a_read_on_the_standby_sees_the_append_just_made(nodes: Nodes) -> None:
    with _routed(nodes) as pg, pg._driver.capture() as units:
        provider = pg.provider(workspace=WS)
        for i in range(25):
            _append(pg, i)
            # Immediately, with no pause: every read below must see message i.
            found = provider.search(SessionQueryRequest(query=_word(i)))
            assert [(m.session_id, m.seq) for m in found.matches] == [("s", i)], i
            window = pg.around(workspace=WS, session_id="s", seq=i)
            assert window.messages[-1].seq == i and _word(i) in window.messages[-1].content
            assert pg.stats(workspace=WS).messages == i + 1
            assert pg.sessions(workspace=WS)[0].message_count == i + 1
    reads = _reads(units)
    assert len(reads) == 100
    assert {u.node for u in reads} == {STANDBY}, {u.node for u in reads}
    assert {u.node for u in units if u.write} == {PRIMARY}
    assert all(u.error is None for u in units)


def test_a_standby_behind_is_waited_for_then_passed_over(nodes: Nodes) -> None:
    with _routed(nodes, read_wait_ms=400, read_max_lag_ms=0) as pg:
        _append(pg, 0)
        nodes.cluster.pause_replay()
        try:
            _append(pg, 1)
            with pg._driver.capture() as units:
                began = time.monotonic()
                found = pg.provider(workspace=WS).search(SessionQueryRequest(query=_word(1)))
                waited = time.monotonic() - began
                # Another workspace has no write of this process to wait for: the
                # paused standby serves it at once.
                assert pg.stats(workspace="elsewhere").messages == 0
            assert [m.seq for m in found.matches] == [1]
            search, other = _reads(units)
            assert search.node == PRIMARY and search.attempts == 2, search
            assert waited >= 0.4, waited  # the bounded wait ran out first
            assert other.node == STANDBY and other.attempts == 1, other
        finally:
            nodes.cluster.resume_replay()
        with pg._driver.capture() as units:
            found = pg.provider(workspace=WS).search(SessionQueryRequest(query=_word(1)))
        assert [m.seq for m in found.matches] == [1]
        assert [u.node for u in _reads(units)] == [STANDBY]


def test_a_standby_lagging_beyond_the_limit_is_skipped(nodes: Nodes) -> None:
    with _routed(nodes, read_wait_ms=0, read_max_lag_ms=200) as pg:
        nodes.cluster.pause_replay()
        try:
            # Someone else writes: the standby receives it but does not apply it.
            with psycopg.connect(nodes.primary_dsn, autocommit=True) as conn:
                conn.execute("INSERT INTO pgsearch_meta (key, value) VALUES ('lag', '1')")
            lag_deadline = time.monotonic() + 30
            with psycopg.connect(nodes.standby_dsn, autocommit=True) as conn:
                while True:
                    row = conn.execute(
                        "SELECT pg_last_wal_receive_lsn() > pg_last_wal_replay_lsn()"
                    ).fetchone()
                    if row == (True,):
                        break
                    assert time.monotonic() < lag_deadline, "the standby never received it"
                    time.sleep(0.02)
            time.sleep(0.3)  # older than the limit now
            with pg._driver.capture() as units:
                assert pg.stats(workspace=WS).messages == 0
                assert pg.stats(workspace=WS).messages == 0
            first, second = _reads(units)
            # The first read finds out (and goes to the primary); the second does
            # not even try the standby.
            assert (first.node, first.attempts) == (PRIMARY, 2), first
            assert (second.node, second.attempts) == (PRIMARY, 1), second
        finally:
            nodes.cluster.resume_replay()


def test_a_standby_stopped_mid_run_is_skipped_and_used_again_once_back(nodes: Nodes) -> None:
    errors: list[BaseException] = []
    done = threading.Event()

    with _routed(nodes, read_connect_timeout_ms=500) as pg:
        for i in range(10):
            _append(pg, i)

        def reader(k: int) -> None:
            provider = pg.provider(workspace=WS)
            n = 0
            while not done.is_set():
                try:
                    i = (k * 7 + n) % 10
                    found = provider.search(SessionQueryRequest(query=_word(i)))
                    assert [m.seq for m in found.matches] == [i]
                    assert pg.stats(workspace=WS).messages == 10
                except BaseException as exc:  # every failure is a test failure
                    errors.append(exc)
                    return
                n += 1

        with pg._driver.capture() as units:
            threads = [threading.Thread(target=reader, args=(k,)) for k in range(4)]
            for t in threads:
                t.start()
            try:
                time.sleep(1.0)
                nodes.standby.stop("fast")
                stopped_at = time.monotonic()
                time.sleep(3.0)
                nodes.standby.start()
                started_at = time.monotonic()
                mark = len(units)
                # Back within the longest back-off a few failures in a row can reach.
                while time.monotonic() < started_at + 30 and not any(
                    u.node == STANDBY and u.error is None for u in units[mark:]
                ):
                    time.sleep(0.1)
                back_after = time.monotonic() - started_at
            finally:
                done.set()
                for t in threads:
                    t.join(60)
            records = list(units)
        served = [u.node for u in records if not u.write and u.error is None]
        assert not any(t.is_alive() for t in threads), "a reader hangs"
    assert errors == [], errors[:3]
    # Failed attempts are recorded (a search's transaction is retried as a whole),
    # but only on the standby: no caller saw them.
    assert {u.node for u in records if u.error} <= {STANDBY}
    assert served.count(PRIMARY) > 10, "nothing went to the primary while the standby was down"
    assert STANDBY in [u.node for u in records[mark:] if u.error is None], (
        "the standby was not used again"
    )
    print(
        f"standby stopped {started_at - stopped_at:.1f} s: {len(served)} reads, "
        f"{served.count(PRIMARY)} on the primary; used again {back_after:.1f} s after it "
        "was back"
    )


def _slow_read_on_standby() -> Work[int]:
    """Holds a lock on `messages`, then sleeps 5 s on a standby (not on the primary)."""
    rows = yield from fetch(Statement("count", "SELECT count(*) FROM messages"))
    yield from fetch(
        Statement(
            "sleep on a standby",
            "SELECT pg_sleep(CASE WHEN pg_is_in_recovery() THEN 5 ELSE 0 END)",
        ),
        final=True,
    )
    return int(rows[0][0])


def test_a_recovery_conflict_is_retried_on_another_node(nodes: Nodes) -> None:
    nodes.standby.configure(max_standby_streaming_delay="'100ms'")
    try:
        with _routed(nodes, statement_timeout_ms=20_000) as pg:
            _append(pg, 0)
            unit = Unit(work=_slow_read_on_standby, workspace=WS, write=False, context="slow")
            result: list[int] = []
            with pg._driver.capture() as units:
                reader = threading.Thread(target=lambda: result.append(pg._driver.run(unit)))
                reader.start()
                # Wait until the read holds its lock on the standby, then take an
                # exclusive lock on the primary: replaying it conflicts with the read.
                deadline = time.monotonic() + 30
                with psycopg.connect(nodes.standby_dsn, autocommit=True) as conn:
                    while not conn.execute(
                        "SELECT EXISTS (SELECT 1 FROM pg_stat_activity "
                        "WHERE query LIKE 'SELECT pg_sleep(CASE%%' AND state = 'active')"
                    ).fetchone() == (True,):
                        assert time.monotonic() < deadline, "the slow read never started"
                        time.sleep(0.02)
                with psycopg.connect(nodes.primary_dsn, autocommit=True) as conn:
                    conn.execute("BEGIN")
                    conn.execute("LOCK TABLE messages IN ACCESS EXCLUSIVE MODE")
                    conn.execute("COMMIT")
                reader.join(30)
                assert not reader.is_alive()
            assert result == [1]
            (record,) = [u for u in units if u.context == "slow"]
            assert record.node == PRIMARY and record.attempts == 2, record
            # A conflict says nothing against the standby: once it has replayed the
            # lock (on a busy machine that can outlast the read-your-writes wait), the
            # next read goes there.
            nodes.wait_for_replay()
            with pg._driver.capture() as units:
                assert pg.stats(workspace=WS).messages == 1
            assert [u.node for u in units] == [STANDBY]
    finally:
        nodes.standby.configure(max_standby_streaming_delay="'30s'")


def test_the_standby_probe_reads_no_table(nodes: Nodes) -> None:
    probe = replay_probe("0/1", 200)
    with psycopg.connect(nodes.standby_dsn) as conn:
        plan = "\n".join(str(r[0]) for r in conn.execute("EXPLAIN " + str(probe.sql), probe.params))
        assert conn.execute(probe.sql, probe.params).fetchall() == [(True, True, True, 0.0)]
    assert "Function Scan on generate_series" in plan and "Seq Scan" not in plan, plan


def test_revoked_tokens_and_forgotten_sessions_are_gone_at_once_on_a_cut_off_standby(
    nodes: Nodes,
) -> None:
    """Another process revokes a token and forgets a session while the standby has
    lost its primary (up, answering, and reporting nothing left to replay)."""
    from pgsearch.web.app import ServeConfig
    from tests.web.conftest import LiveServer, client

    with PgSearch.connect(nodes.primary_dsn) as admin:
        admin.append(
            workspace=WS,
            session_id="plan",
            messages=[{"role": "user", "content": "the quarterly zephyrine merger plan"}],
        )
        admin.append(
            workspace=WS,
            session_id="kept",
            messages=[{"role": "user", "content": "the zephyrine offsite agenda"}],
        )
        doomed = admin.create_token(workspace=WS)
        reader = admin.create_token(workspace=WS).secret
    nodes.wait_for_replay()
    # The server as deployed with a standby (default lag limit), checking tokens
    # on every request.
    config = ServeConfig(token_cache_seconds=0)
    with LiveServer(config, _settings(nodes)) as live:
        assert client(live, doomed.secret).get("/v1/whoami").status_code == 200
        found = client(live, reader).post("/v1/search", {"query": "zephyrine"}).json()
        assert {m["session_id"] for m in found["matches"]} == {"plan", "kept"}
        with nodes.cluster.cut_off():
            with PgSearch.connect(nodes.primary_dsn) as admin:
                assert admin.revoke_token(doomed.token.token_id) is not None
                assert admin.forget(workspace=WS, session_id="plan") == 1
            # At once: the token is checked on the primary, and the standby, which
            # cannot have replayed the forget, is passed over for the primary.
            assert client(live, doomed.secret).get("/v1/whoami").status_code == 401
            for _ in range(3):
                found = client(live, reader).post("/v1/search", {"query": "zephyrine"}).json()
                assert [m["session_id"] for m in found["matches"]] == ["kept"], found
                sessions = client(live, reader).get("/v1/sessions").json()["sessions"]
                assert "plan" not in {s["session_id"] for s in sessions}
                time.sleep(1.0)


def test_a_standby_that_replays_nothing_new_lags_by_the_primary_not_by_what_it_received(
    nodes: Nodes,
) -> None:
    """Replay paused, nothing more received: measured against what it received the
    standby is not behind at all; measured against the primary it is."""
    with _routed(nodes, read_wait_ms=0, read_max_lag_ms=500) as pg:
        _append(pg, 0)
        nodes.wait_for_replay()
        with nodes.cluster.cut_off():
            with PgSearch.connect(nodes.primary_dsn) as admin:
                admin.forget(workspace=WS, session_id="s")
            # The cut-off standby's receiver may be restarted by recovery at any
            # time: the lag against the primary decides even then.
            time.sleep(1.0)
            with psycopg.connect(nodes.standby_dsn) as conn:
                # Measured against what it received, it is not behind at all.
                row = conn.execute(
                    "SELECT pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn()"
                ).fetchone()
            assert row == (True,)
            with pg._driver.capture() as units:
                assert pg.stats(workspace=WS).messages == 0
                assert pg.sessions(workspace=WS) == []
            first, second = _reads(units)
            assert first.node == PRIMARY and second.node == PRIMARY, (first, second)
