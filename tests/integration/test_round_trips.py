"""Round trips per search: the direct plan read with the vocabulary, never changing a result.

The engine reads, in the statement that reads the vocabulary, the candidates and
title matches of the plan the server makes with the expansions it chose (prefix and
typo ones too); it keeps them only when its own expansions and plan are those.
Searches with and without those early reads return identical results (every
strategy, filters, pages), and a typical search, typos included, takes two network
round trips in all (``BEGIN`` to ``COMMIT``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import psycopg
import pytest

from pgsearch import PgSearch, SessionQueryRequest, SessionQueryResult, Settings
from pgsearch.db import driver
from pgsearch.db.driver import UnitRecord
from pgsearch.db.work import Statement, Step, Unit, Work
from pgsearch.errors import StoreError
from pgsearch.search import SearchEngine
from tests.conftest import Databases
from tests.helpers import SEARCH_FILTERS, SEARCH_QUERIES, search_corpus

WS = "trips"


@pytest.fixture(scope="module")
def corpus_dsn(databases: Databases, template_db: str) -> Iterator[str]:
    name = databases.create(template=template_db, prefix="trips")
    dsn = databases.dsn(name)
    with PgSearch.connect(dsn) as pg:
        search_corpus(pg, WS)
    yield dsn
    databases.drop(name)


def _pages(pg: PgSearch, request: SessionQueryRequest) -> list[SessionQueryResult]:
    out = [pg.search(request, workspace=WS)]
    while out[-1].next_cursor and len(out) < 6:
        out.append(pg.search(replace(request, cursor=out[-1].next_cursor), workspace=WS))
    return out


def _searches(pg: PgSearch, request: SessionQueryRequest) -> list[UnitRecord]:
    with pg._driver.capture() as units:
        pg.search(request, workspace=WS)
    assert len(units) == 1 and units[0].error is None, units
    return units


def test_the_direct_reads_never_change_a_result(corpus_dsn: str) -> None:
    requests = [
        SessionQueryRequest(query=q, limit=4, per_session=per_session, **f)  # type: ignore[arg-type]
        for q in SEARCH_QUERIES
        for f in SEARCH_FILTERS
        for per_session in (True, False)
    ]
    used = 0
    for settings in (
        Settings.from_env({}, dsn=corpus_dsn),
        Settings.from_env({}, dsn=corpus_dsn).with_(candidate_cap=10, stop_df_ratio=0.2),
    ):
        with PgSearch.connect(settings=settings) as pg:
            direct = [_pages(pg, r) for r in requests]
            with pg._driver.capture() as units:
                for r in requests:
                    pg.search(r, workspace=WS)
            used += sum(
                not any(s.name == "candidates" for s in u.statements)
                and any(s.name == "direct search" for s in u.statements)
                for u in units
            )
            pg._engine = SearchEngine(settings, direct=False)
            planned = [_pages(pg, r) for r in requests]
        assert direct == planned
        assert any(r.matches for pages in direct for r in pages)
        assert sum(len(p) > 1 for p in direct) >= 10, "cursors were not exercised"
    assert used >= 40, "the direct candidates were hardly ever used"


def test_a_typical_search_takes_two_round_trips(corpus_dsn: str) -> None:
    with PgSearch.connect(corpus_dsn) as pg:
        pg.search(SessionQueryRequest(query="warm"), workspace=WS)  # reads the cursor key
        for query, filters in (
            ("zephyr", {}),
            ("kestrel", {"roles": ["user"]}),
            ("deploy pipeline", {}),
            ("café", {"session_id": "s5"}),
        ):
            request = SessionQueryRequest(query=query, **filters)  # type: ignore[arg-type]
            (unit,) = _searches(pg, request)
            assert unit.round_trips == 2, (query, filters, [s.name for s in unit.statements])
            assert pg.search(request, workspace=WS).matches, query
        # A browse reads its page with the count in scope.
        for filters in ({}, {"roles": ["user"]}, {"session_id": "s5"}, {"per_session": False}):
            request = SessionQueryRequest(query="", **filters)  # type: ignore[arg-type]
            (unit,) = _searches(pg, request)
            assert unit.round_trips == 1, (filters, [s.name for s in unit.statements])
            assert pg.search(request, workspace=WS).matches, filters
        # A typo's neighbours come with the vocabulary, and the server makes the plan
        # with the expansions it chose among them, as the engine does: two trips too.
        for query in ("zephir", "zehpyr", "kestral pipline", "kes"):
            (unit,) = _searches(pg, SessionQueryRequest(query=query))
            assert unit.round_trips == 2, (query, [s.name for s in unit.statements])
            result = pg.search(SessionQueryRequest(query=query), workspace=WS)
            assert result.matches, query
        # Without the direct reads: the vocabulary, then the plan's reads, then the page.
        pg._engine = SearchEngine(pg.settings, direct=False)
        pg.search(SessionQueryRequest(query="warm"), workspace=WS)
        (unit,) = _searches(pg, SessionQueryRequest(query="zephyr"))
        assert unit.round_trips == 3


def _unit(statements: list[Statement[Any]]) -> Unit[list[list[Any]]]:
    def work() -> Work[list[list[Any]]]:
        return list((yield Step(tuple(statements), final=True)))

    return Unit(work=work, workspace=None, write=False, context="batch")


def test_a_step_runs_its_statements_prepared_from_their_second_time(corpus_dsn: str) -> None:
    named = Statement("named", "SELECT %(a)s::int + 1, %(b)s::text", {"a": 1, "b": "x"})
    rows = Statement("rows", "SELECT g FROM generate_series(1, %(n)s::int) g", {"n": 3})
    listed = Statement(
        "listed", "SELECT name FROM pg_prepared_statements WHERE name LIKE 'pgsearch%%'"
    )
    with PgSearch.connect(corpus_dsn) as pg:
        # One connection, so that every unit sees what the one before prepared.
        pg._driver._pools["primary"].resize(1, 1)
        first = pg._driver.run(_unit([named, rows, listed]))
        assert first == [[(2, "x")], [(1,), (2,), (3,)], []]
        second = pg._driver.run(_unit([replace(named, params={"a": 5, "b": "y"}), rows, listed]))
        assert second[:2] == [[(6, "y")], [(1,), (2,), (3,)]]
        third = pg._driver.run(_unit([named, rows, listed]))
        assert third[:2] == first[:2]
        # Prepared in the second batch, run prepared in the third.
        assert len(third[2]) >= 2, third


def _prepared(pg: PgSearch) -> dict[str, str]:
    listed = Statement(
        "listed",
        "SELECT name, statement FROM pg_prepared_statements"
        " WHERE name LIKE 'pgsearch%%' AND statement NOT LIKE '%%pg_prepared_statements%%'",
    )
    (rows,) = pg._driver.run(_unit([listed]))
    return dict(rows)


def _counted_rows(dsn: str, at_least: int) -> None:
    """Wait until the server's statistics count `at_least` rows in the tables a
    connection's plans follow (its backends report them within seconds)."""
    deadline = time.monotonic() + 60
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            row = conn.execute(driver._SIZES).fetchone()  # type: ignore[call-overload]
            if row is not None and row[0] >= at_least:
                return
            assert time.monotonic() < deadline, f"the statistics count {row} rows"
            time.sleep(0.2)


def test_plans_made_on_small_tables_are_made_again_once_the_tables_have_grown(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prepared statement keeps the plan made at its first run, from the tables'
    sizes then: made on a nearly empty database its plan can walk every message of a
    workspace for each one (a browse over 6,000 messages took 4.6 s). A connection
    reads the rows the tables hold and, once they have grown past `REPLAN_GROWTH`
    times what its plans were made at, drops them all and prepares them again."""
    monkeypatch.setattr(driver, "SIZES_EVERY", 0.0)  # read the sizes at every unit
    browse = SessionQueryRequest(query="", per_session=True, limit=5)
    with PgSearch.connect(dsn) as pg:
        pg._driver._pools["primary"].resize(1, 1)
        pg.append(workspace=WS, session_id="s0", messages=[{"role": "user", "content": "cron"}])
        _counted_rows(dsn, 1)
        for _ in range(2):  # unprepared, then prepared
            pg.search(browse, workspace=WS)
        small = _prepared(pg)
        assert any("sessions_updated" in t or "s.updated_at" in t for t in small.values()), small
        # Grown by little: the plans stay.
        with PgSearch.connect(dsn) as writer:
            writer.append(
                workspace=WS, session_id="s1", messages=[{"role": "user", "content": "x"}]
            )
        _counted_rows(dsn, 2)
        pg.search(browse, workspace=WS)
        assert _prepared(pg) == small
        # Grown many times over: every plan made at the small size is dropped, and the
        # statements run again are prepared anew (other names, same texts).
        with PgSearch.connect(dsn) as writer:
            for i in range(150):
                writer.append(
                    workspace=WS,
                    session_id=f"s{i % 7}",
                    messages=[{"role": "user", "content": f"grown message {i} " * 20}] * 4,
                )
        # Plans made at a few rows: grown past twice as many and the slack.
        _counted_rows(dsn, driver.REPLAN_GROWTH * 20 + driver.REPLAN_SLACK)
        pg.search(browse, workspace=WS)  # reads the sizes: the plans are dropped next
        pg.search(browse, workspace=WS)  # drops them and prepares again
        grown = _prepared(pg)
        assert not set(small) & set(grown), (small, grown)
        assert set(small.values()) <= set(grown.values())
        # The same answers as a connection that planned at the grown size.
        with PgSearch.connect(dsn) as fresh:
            assert pg.search(browse, workspace=WS) == fresh.search(browse, workspace=WS)


def test_reading_the_tables_sizes_waits_for_no_lock(
    corpus_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sizes are read without locking the tables: a window (which reads no
    vocabulary) is not held up by a lock someone else holds on the vocabulary."""
    monkeypatch.setattr(driver, "SIZES_EVERY", 0.0)
    settings = Settings.from_env({}, dsn=corpus_dsn, statement_timeout_ms=2_000)
    with PgSearch.connect(settings=settings) as pg, psycopg.connect(corpus_dsn) as locker:
        provider = pg.provider(workspace=WS)
        provider.around("s3", 5)
        locker.execute("LOCK TABLE vocabulary IN ACCESS EXCLUSIVE MODE")
        for _ in range(3):
            assert provider.around("s3", 5).messages
            assert provider.session_messages("s3", limit=3).messages
        locker.rollback()


def test_an_error_in_a_step_raises_and_leaves_the_connection_usable(corpus_dsn: str) -> None:
    ok = Statement("ok", "SELECT 1")
    bad = Statement("bad", "SELECT 1 / %(zero)s::int", {"zero": 0})
    with PgSearch.connect(corpus_dsn) as pg:
        pg._driver._pools["primary"].resize(1, 1)
        for _ in range(3):  # unprepared, preparing, prepared
            with pytest.raises(StoreError, match="division by zero"):
                pg._driver.run(_unit([ok, bad, ok]))
            assert pg._driver.run(_unit([ok, ok])) == [[(1,)], [(1,)]]
        assert pg.search(SessionQueryRequest(query="zephyr"), workspace=WS).matches


TYPO_WS = "typos"
#: Terms a few edits apart: swaps (one edit with transpositions, two without), long
#: words two edits away, and neighbours as frequent as each other (ties).
TYPO_TERMS = {
    "kestrel": 6,
    "ketsrel": 2,
    "kestrels": 3,
    "kestral": 3,
    "kestrelx": 3,
    "kesterl": 1,
    "configuration": 5,
    "configuraiton": 2,
    "confgiuraiton": 2,
    "configurations": 4,
    "konfiguration": 4,
    "cnofiguratoin": 1,
    "configuratio": 4,
    "marzipan": 3,
    "marzipna": 3,
    "amrzipan": 3,
    "marzpian": 3,
    "mrazipan": 3,
    "marizpan": 3,
}
TYPO_QUERIES = (
    "kestrle",
    "ketsrle",
    "kestrel",
    "kesterl",
    "confiugration",
    "configuartoin",
    "cnofiguration",
    "configuraiton",
    "marzipna",
    "marzipam",
    "kes",
    "conf",
    "marzpian kestrle",
    "configuraiton ketsrel",
)


def test_the_server_chooses_the_typo_expansions_the_engine_chooses(
    databases: Databases, template_db: str
) -> None:
    name = databases.create(template=template_db, prefix="typos")
    dsn = databases.dsn(name)
    try:
        with PgSearch.connect(dsn) as pg:
            n = 0
            for term, count in TYPO_TERMS.items():
                for k in range(count):
                    n += 1
                    pg.append(
                        workspace=TYPO_WS,
                        session_id=f"s{n % 7}",
                        messages=[{"role": "user", "content": f"{term} note{k} item{n}"}],
                    )
        base = Settings.from_env({}, dsn=dsn)
        for settings in (
            base,
            base.with_(typo_distance="levenshtein"),
            base.with_(max_expansions=2),
            base.with_(realword_df=5, realword_ratio=1.0),
        ):
            with PgSearch.connect(settings=settings) as pg:
                pg.search(SessionQueryRequest(query="warm"), workspace=TYPO_WS)  # cursor key
                direct = []
                for query in TYPO_QUERIES:
                    request = SessionQueryRequest(query=query, limit=20)
                    with pg._driver.capture() as units:
                        direct.append(pg.search(request, workspace=TYPO_WS))
                    (unit,) = units
                    names = [s.name for s in unit.statements]
                    # Every match fits the cap: the direct rows hold exactly when the
                    # server chose the engine's expansions.
                    assert "candidates" not in names, (settings.typo_distance, query, names)
                    assert unit.round_trips == 2, (query, names)
                pg._engine = SearchEngine(settings, direct=False)
                planned = [
                    pg.search(SessionQueryRequest(query=q, limit=20), workspace=TYPO_WS)
                    for q in TYPO_QUERIES
                ]
            assert direct == planned
            assert sum(bool(r.matches) for r in direct) >= 10
    finally:
        databases.drop(name)
