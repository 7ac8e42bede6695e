"""Bounded work: one request cannot hold the server, flood the caller, or hang.

- A per-search statement timeout (``statement_timeout_ms``) turns a search, window
  or listing stuck behind a lock into a clear `StoreError` within the timeout, in
  the library and in the CLI.
- Candidate statements never return more rows than ``candidate_cap``, and say so.
- Excerpts, titles, pages, windows and whole results stay under their hard caps
  whatever the stored text and the request ask for.
- The largest query allowed (every distinct word a typo to expand) finishes well
  inside the timeout.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from pgsearch import InvalidQuery, PgSearch, SessionQueryRequest, Settings, StoreError
from pgsearch.db.driver import Driver
from pgsearch.db.work import Statement
from pgsearch.excerpt import utf8_len
from pgsearch.search import MAX_TITLE_BYTES
from pgsearch.types import MAX_EXCERPT_BYTES, MAX_LIMIT, MAX_RESULT_BYTES, MAX_WINDOW
from tests.conftest import Databases
from tests.helpers import text_size
from tests.reliability.conftest import cli

WS = "bounded"
T0 = datetime(2026, 6, 1, tzinfo=UTC)
TIMEOUT_MS = 300


@pytest.fixture(scope="module")
def big_dsn(databases: Databases, template_db: str) -> Iterator[str]:
    """Many messages sharing a word, huge messages, a huge title, a long session."""
    name = databases.create(template=template_db, prefix="bounded")
    dsn = databases.dsn(name)
    words = [f"w{i}x" for i in range(400)]
    with PgSearch.connect(dsn) as pg:
        for s in range(30):
            pg.append(
                workspace=WS,
                session_id=f"many-{s}",
                messages=[
                    {
                        "role": "user" if i % 2 else "assistant",
                        "content": f"common {words[(s * 40 + i) % 400]} {words[i % 400]} word",
                        "created_at": (T0 + timedelta(minutes=s * 100 + i)).isoformat(),
                    }
                    for i in range(40)
                ],
            )
        huge = "filler text " * 1_700 + "needle "  # about 20 KB each side
        pg.append(
            workspace=WS,
            session_id="huge",
            messages=[
                {
                    "role": "user",
                    "content": huge + f"needle{i} " + huge,
                    "title": "needle title " * 10_000 if i == 0 else None,
                    "created_at": (T0 + timedelta(days=10, minutes=i)).isoformat(),
                }
                for i in range(40)
            ],
        )
    yield dsn
    databases.drop(name)


class Statements:
    """Rows each statement returned (observed through the driver, the database is real)."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, int]] = []


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Statements:
    seen = Statements()
    real_pipeline = Driver._pipeline

    def recording_pipeline(
        self: Driver, conn: Any, statements: list[Statement[Any]], rec: Any
    ) -> list[list[Any]]:
        rows = real_pipeline(self, conn, statements, rec)
        seen.rows += [(s.text, len(r)) for s, r in zip(statements, rows, strict=True)]
        return rows

    monkeypatch.setattr(Driver, "_pipeline", recording_pipeline)
    return seen


#: The budget of the calls stuck behind a lock: the search run after the lock is gone
#: (about 20 ms) must fit in it on a machine that runs the other suites beside this one.
LOCKED_TIMEOUT_MS = 1_000


def test_a_search_stuck_behind_a_lock_times_out_clearly(big_dsn: str) -> None:
    settings = Settings.from_env({}, dsn=big_dsn, statement_timeout_ms=LOCKED_TIMEOUT_MS)
    with PgSearch.connect(settings=settings) as pg, psycopg.connect(big_dsn) as blocker:
        provider = pg.provider(workspace=WS)
        provider.search(SessionQueryRequest(query="common"))  # fine before the lock
        blocker.execute("LOCK TABLE messages IN ACCESS EXCLUSIVE MODE")
        calls = {
            "search": lambda: provider.search(SessionQueryRequest(query="common word")),
            "browse": lambda: provider.search(SessionQueryRequest(query="")),
            "around": lambda: provider.around("many-1", 5),
            "listing": lambda: provider.session_messages("many-1"),
        }
        for name, call in calls.items():
            started = time.monotonic()
            with pytest.raises(StoreError, match="statement timed out") as caught:
                call()
            elapsed = time.monotonic() - started
            assert elapsed < 3, f"{name} took {elapsed:.1f}s"
            assert "\n" not in str(caught.value)
        blocker.rollback()
        # The connection is usable again at once.
        assert provider.search(SessionQueryRequest(query="common")).matches


def test_the_cli_reports_a_timeout_in_one_line(big_dsn: str) -> None:
    with psycopg.connect(big_dsn) as blocker:
        blocker.execute("LOCK TABLE messages IN ACCESS EXCLUSIVE MODE")
        started = time.monotonic()
        result = cli(
            "search",
            "-w",
            WS,
            "common",
            dsn=big_dsn,
            env={"PGSEARCH_STATEMENT_TIMEOUT_MS": str(TIMEOUT_MS)},
            timeout=60,
        )
        elapsed = time.monotonic() - started
        blocker.rollback()
    assert result.returncode == 1
    assert result.stderr.startswith("pgsearch: error: searching: statement timed out")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert elapsed < 10


def test_a_hanging_server_never_hangs_the_searchers(big_dsn: str) -> None:
    """Several searchers behind one lock all come back, with errors, in bounded time."""
    settings = Settings.from_env({}, dsn=big_dsn, statement_timeout_ms=TIMEOUT_MS)
    outcomes: list[str] = []

    def search() -> None:
        with PgSearch.connect(settings=settings) as pg:
            try:
                pg.provider(workspace=WS).search(SessionQueryRequest(query="common"))
                outcomes.append("result")
            except StoreError as exc:
                outcomes.append(str(exc))

    with psycopg.connect(big_dsn) as blocker:
        blocker.execute("LOCK TABLE messages IN ACCESS EXCLUSIVE MODE")
        threads = [threading.Thread(target=search) for _ in range(6)]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        elapsed = time.monotonic() - started
        blocker.rollback()
    assert len(outcomes) == 6 and all("statement timed out" in o for o in outcomes), outcomes
    assert elapsed < 10


def test_candidates_are_capped_and_the_cap_is_reported(
    big_dsn: str, statements: Statements
) -> None:
    settings = Settings.from_env({}, dsn=big_dsn, candidate_cap=50)
    with PgSearch.connect(settings=settings) as pg:
        result = pg.provider(workspace=WS).search(
            SessionQueryRequest(query="common word", per_session=False, limit=MAX_LIMIT)
        )
    assert result.candidates_capped
    assert result.searched >= 1200
    candidate_rows = [n for sql, n in statements.rows if "pgsearch_workspace_query(" in sql]
    assert candidate_rows and max(candidate_rows) <= 50, statements.rows


def test_excerpts_titles_and_results_stay_under_their_caps(big_dsn: str) -> None:
    with PgSearch.connect(big_dsn) as pg:
        provider = pg.provider(workspace=WS)
        for query in ("needle", "filler text needle", ""):
            result = provider.search(
                SessionQueryRequest(
                    query=query,
                    session_id="huge",
                    per_session=False,
                    limit=10**9,
                    excerpt_bytes=10**9,
                )
            )
            assert 0 < len(result.matches) <= MAX_LIMIT
            assert text_size(result) <= MAX_RESULT_BYTES
            for m in result.matches:
                assert utf8_len(m.excerpt) <= MAX_EXCERPT_BYTES
                assert m.title is None or utf8_len(m.title) <= MAX_TITLE_BYTES


def test_windows_and_listings_stay_under_their_caps(big_dsn: str) -> None:
    with PgSearch.connect(big_dsn) as pg:
        provider = pg.provider(workspace=WS)
        window = provider.around("huge", 20, before=10**6, after=10**6)
        assert len(window.messages) == MAX_WINDOW
        assert any(m.anchor and m.seq == 20 for m in window.messages)
        assert sum(utf8_len(m.content) for m in window.messages) <= MAX_RESULT_BYTES
        listing = provider.session_messages("huge", start_seq=0, limit=10**9)
        assert len(listing.messages) == MAX_WINDOW and listing.next_seq == MAX_WINDOW
        assert sum(utf8_len(m.content) for m in listing.messages) <= MAX_RESULT_BYTES


def test_the_largest_allowed_query_finishes_inside_the_timeout(big_dsn: str) -> None:
    settings = Settings.from_env({}, dsn=big_dsn)
    typos = " ".join(f"w{i}xq{'abcdefgh'[i % 8]}zz" for i in range(settings.max_query_terms))
    with PgSearch.connect(settings=settings) as pg:
        started = time.monotonic()
        result = pg.provider(workspace=WS).search(SessionQueryRequest(query=typos, limit=50))
        elapsed = time.monotonic() - started
    assert elapsed * 1000 < settings.statement_timeout_ms
    assert len(result.matches) <= MAX_LIMIT


def test_the_largest_allowed_cjk_query_finishes_inside_the_timeout(dsn: str) -> None:
    """A CJK run counts as one word, so its pairs are bounded by the lookup limit
    instead: the longest run allowed, every pair a distinct stored term, is cheap."""
    from pgsearch.plan import max_lookups

    settings = Settings.from_env({}, dsn=dsn)
    n_pairs = max_lookups(settings.max_query_terms)
    run = "".join(chr(0x4E00 + i) for i in range(n_pairs + 1))
    with PgSearch.connect(settings=settings) as pg:
        for s in range(20):
            pg.append(
                workspace=WS,
                session_id=f"cjk-{s}",
                messages=[
                    {
                        "role": "user",
                        # Every message holds most pairs; one holds the whole run.
                        "content": run if s == i == 0 else run[: n_pairs - i] + "。",
                        "created_at": (T0 + timedelta(minutes=s * 100 + i)).isoformat(),
                    }
                    for i in range(10)
                ],
            )
        provider = pg.provider(workspace=WS)
        started = time.monotonic()
        result = provider.search(SessionQueryRequest(query=run, limit=50))
        elapsed = time.monotonic() - started
        with pytest.raises(InvalidQuery, match="distinct terms to look up"):
            provider.search(SessionQueryRequest(query=run + "丁"))
    assert elapsed * 1000 < settings.statement_timeout_ms
    assert result.matches[0].session_id == "cjk-0" and result.matches[0].seq == 0
