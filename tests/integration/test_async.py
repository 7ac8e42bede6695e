"""`AsyncPgSearch` answers exactly as `PgSearch` does, on psycopg's async connections."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest

from pgsearch import NotFound, PgSearch, SessionQueryRequest, SessionQueryResult, Settings
from pgsearch.aio import AsyncPgSearch
from pgsearch.ingest import FileResult
from tests.conftest import EXAMPLES, Databases
from tests.helpers import SEARCH_FILTERS, SEARCH_QUERIES, assert_statistics_exact, search_corpus

WS = "async"


def test_async_reads_equal_sync_reads(dsn: str) -> None:
    with PgSearch.connect(dsn) as pg:
        pg.ingest_paths([EXAMPLES], workspace=WS)
        sessions = pg.sessions(workspace=WS)
        stats = pg.stats(workspace=WS)
        sizes = [t.table for t in pg.table_sizes()]
        windows = [
            pg.around(workspace=WS, session_id=s.session_id, seq=seq, before=b, after=a)
            for s in sessions
            for seq, b, a in ((0, 3, 3), (2, 1, 5), (4, 10, 10))
        ]
        pages = [
            pg.session_messages(workspace=WS, session_id=s.session_id, start_seq=k, limit=3)
            for s in sessions
            for k in (0, 3)
        ]

    async def read() -> None:
        async with await AsyncPgSearch.connect(dsn, pool_size=4) as apg:
            assert await apg.sessions(workspace=WS) == sessions
            assert await apg.stats(workspace=WS) == stats
            assert [t.table for t in await apg.table_sizes()] == sizes
            provider = apg.provider(workspace=WS)
            got = await asyncio.gather(
                *(
                    provider.around(w.session_id, w.anchor_seq, before=b, after=a)
                    for w, (_, b, a) in zip(
                        windows, [(0, 3, 3), (2, 1, 5), (4, 10, 10)] * len(sessions), strict=True
                    )
                )
            )
            assert got == windows
            got_pages = [
                await provider.session_messages(p.session_id, start_seq=p.anchor_seq, limit=3)
                for p in pages
            ]
            assert got_pages == pages
            with pytest.raises(NotFound):
                await provider.around("no-such-session", 0)

    asyncio.run(read())


def test_async_forget_matches_the_rows_it_removed(dsn: str) -> None:
    with PgSearch.connect(dsn) as pg:
        pg.ingest_paths([EXAMPLES], workspace=WS)
        target = pg.sessions(workspace=WS)[0]

    async def forget() -> int:
        async with await AsyncPgSearch.connect(dsn) as apg:
            count = await apg.forget(workspace=WS, session_id=target.session_id)
            with pytest.raises(NotFound):
                await apg.forget(workspace=WS, session_id=target.session_id)
            return count

    assert asyncio.run(forget()) == target.message_count
    with psycopg.connect(dsn) as conn:
        left = conn.execute(
            "SELECT count(*) FROM messages WHERE workspace_id = %s AND session_id = %s",
            (WS, target.session_id),
        ).fetchone()
    assert left == (0,)
    assert_statistics_exact(dsn, WS)


def test_many_tasks_share_one_async_pool(dsn: str) -> None:
    with PgSearch.connect(dsn) as pg:
        pg.ingest_paths([EXAMPLES], workspace=WS)
        session = pg.sessions(workspace=WS)[0].session_id
        expected = pg.around(workspace=WS, session_id=session, seq=1)

    async def many() -> list[object]:
        async with await AsyncPgSearch.connect(dsn, pool_size=3) as apg:
            provider = apg.provider(workspace=WS)
            return list(await asyncio.gather(*(provider.around(session, 1) for _ in range(32))))

    assert asyncio.run(many()) == [expected] * 32


def _stored(dsn: str, workspace: str) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT session_id, seq, kind, role, turn, content, arguments, tsv::text"
            " FROM messages WHERE workspace_id = %s ORDER BY session_id, seq",
            (workspace,),
        ).fetchall()


def test_async_ingest_file_stores_what_the_sync_one_stores(dsn: str, tmp_path: Path) -> None:
    files = sorted(EXAMPLES.glob("*.jsonl"))
    with PgSearch.connect(dsn) as pg:
        expected = [pg.ingest_file(f, workspace="sync") for f in files]
        again = pg.ingest_file(files[0], workspace="sync")

    async def ingest() -> tuple[list[FileResult], FileResult]:
        async with await AsyncPgSearch.connect(dsn) as apg:
            got = [await apg.ingest_file(f, workspace=WS) for f in files]
            return got, await apg.ingest_file(files[0], workspace=WS)

    got, got_again = asyncio.run(ingest())
    assert [replace(r, workspace="sync") for r in got] == expected
    assert replace(got_again, workspace="sync") == again and again.messages == 0
    assert _stored(dsn, WS) == _stored(dsn, "sync") != []
    assert_statistics_exact(dsn, WS)


def test_concurrent_async_appends_are_stored_once_each(dsn: str) -> None:
    async def append_all() -> list[int]:
        async with await AsyncPgSearch.connect(dsn, pool_size=4) as apg:
            return list(
                await asyncio.gather(
                    *(
                        apg.append(
                            workspace=WS,
                            session_id=f"s{i % 4}",
                            messages=[
                                {"role": "user", "content": f"async append token{i}"},
                                {"role": "assistant", "content": "noted"},
                            ],
                        )
                        for i in range(32)
                    )
                )
            )

    assert asyncio.run(append_all()) == [2] * 32
    with PgSearch.connect(dsn) as pg:
        sessions = {s.session_id: s.message_count for s in pg.sessions(workspace=WS)}
        for i in range(32):
            found = pg.search(SessionQueryRequest(query=f"token{i}"), workspace=WS)
            assert [m.session_id for m in found.matches] == [f"s{i % 4}"]
    assert sessions == {f"s{k}": 16 for k in range(4)}
    assert_statistics_exact(dsn, WS)


SEARCH_WS = "same"


def _pages(
    search: Callable[[SessionQueryRequest], SessionQueryResult], request: SessionQueryRequest
) -> list[SessionQueryResult]:
    out = [search(request)]
    while out[-1].next_cursor and len(out) < 6:
        out.append(search(replace(request, cursor=out[-1].next_cursor)))
    return out


def test_async_search_equals_sync_search(databases: Databases, template_db: str) -> None:
    """The same corpus and requests, every strategy, browse, filters and cursors: the
    asyncio facade returns exactly what the sync one does (one engine, two drivers)."""
    name = databases.create(template=template_db, prefix="same")
    dsn = databases.dsn(name)
    try:
        with PgSearch.connect(dsn) as pg:
            search_corpus(pg, SEARCH_WS)
        requests = [
            SessionQueryRequest(query=q, limit=4, per_session=per_session, **f)  # type: ignore[arg-type]
            for q in SEARCH_QUERIES
            for f in SEARCH_FILTERS
            for per_session in (True, False)
        ]
        tiny = Settings.from_env({}, dsn=dsn).with_(candidate_cap=10, stop_df_ratio=0.2)
        for settings in (Settings.from_env({}, dsn=dsn), tiny):
            expected: list[list[SessionQueryResult]] = []
            strategies: set[str] = set()
            with PgSearch.connect(settings=settings) as pg:
                provider = pg.provider(workspace=SEARCH_WS)
                for request in requests:
                    expected.append(_pages(provider.search, request))
                    trace = provider.explain(request).trace
                    if trace is not None and trace.plan is not None:
                        strategies.add(trace.plan.strategy)

            async def run_all(settings: Settings = settings) -> list[list[SessionQueryResult]]:
                async with await AsyncPgSearch.connect(settings=settings, pool_size=3) as apg:
                    provider = apg.provider(workspace=SEARCH_WS)
                    got = []
                    for request in requests:
                        pages = [await provider.search(request)]
                        while pages[-1].next_cursor and len(pages) < 6:
                            cursor = pages[-1].next_cursor
                            pages.append(await provider.search(replace(request, cursor=cursor)))
                        got.append(pages)
                    # Concurrent searches on one pool answer as sequential ones do.
                    first = await asyncio.gather(*(provider.search(r) for r in requests))
                    assert list(first) == [pages[0] for pages in got]
                    assert await apg.search(requests[1], workspace=SEARCH_WS) == got[1][0]
                    return got

            got = asyncio.run(run_all())
            assert got == expected
            assert sum(len(p) > 1 for p in expected) >= 10, "cursors were not exercised"
            assert any(r.matches for pages in expected for r in pages)
            if settings is tiny:
                assert strategies >= {"all_words_newest", "any_unit_by_coverage"}, strategies
            else:
                assert strategies >= {"all_words", "any_unit"}, strategies
    finally:
        databases.drop(name)
