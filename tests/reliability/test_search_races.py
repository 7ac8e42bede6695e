"""A search's statements each see the database as it is when they run: a write that
commits between two of them must not turn a search with matches into "no match".

The search runs its real statements on a real connection, one by one in one read
transaction (`pgsearch.db.work.drive`), and an append commits right after the
statistics were read: the vocabulary read next counts one document more for the
query's word than the statistics' N. A word in every document then had a negative
IDF, every candidate scored below zero and the search answered nothing (the empty
answers seen around a Citus tenant move, when appends blocked by the switch-over
land at once).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg

from pgsearch import PgSearch, SessionQueryRequest
from pgsearch.db.work import Results, Step, drive
from pgsearch.ranking import idf

WS = "races"


def _runner(conn: psycopg.Connection[Any], after: str, hook: Callable[[], None]) -> Any:
    """Send each statement of a step in turn; call `hook` once after `after` ran."""
    fired: list[bool] = []

    def run_step(step: Step) -> Results:
        out: list[list[Any]] = []
        for statement in step.statements:
            cur = conn.execute(statement.sql, statement.params)
            rows = cur.fetchall() if cur.description is not None else []
            out.append([statement.decode(r) for r in rows])
            if statement.name == after and not fired:
                fired.append(True)
                hook()
        return tuple(out)

    return run_step


def test_an_append_between_the_statistics_and_the_vocabulary_keeps_the_matches(
    pg: PgSearch, dsn: str
) -> None:
    for i in range(6):
        pg.append(
            workspace=WS,
            session_id=f"s{i}",
            messages=[{"role": "user", "content": f"deploy number{i}"}],
        )
    provider = pg.provider(workspace=WS)
    request = SessionQueryRequest(query="deploy", limit=5)
    unit = pg._engine.unit(provider.scope, request)

    def append_now() -> None:
        pg.append(
            workspace=WS, session_id="late", messages=[{"role": "user", "content": "deploy late"}]
        )

    with psycopg.connect(dsn) as conn:
        conn.execute("BEGIN READ ONLY")
        result = drive(unit.work(), _runner(conn, "search statistics", append_now))
        conn.execute("ROLLBACK")
    assert result.searched >= 6
    assert len(result.matches) == 5, "the documents holding the word are matches"
    # The same search now, all in one state, agrees on what matches.
    assert len(provider.search(request).matches) == 5


def test_idf_is_never_negative_even_when_df_runs_ahead_of_n() -> None:
    assert idf(100, 101) > 0
    assert idf(100, 200) == idf(100, 100)
    assert idf(100, 100) < idf(100, 99)
