"""Huge messages cost a search no more than their indexed prefix, and a search has
one deadline for its statements and its excerpts together.

Tool errors of 2 MB and an accented message of 10 MB hold the searched word; ten
hits on them come back inside the statement timeout with their excerpts centred on
the word, and a page never reads more of a message than its indexed prefix and a
margin. Two statements that each fit the timeout but not together fail as a
timeout.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest

from pgsearch import PgSearch, SessionQueryRequest, Settings, StoreError
from pgsearch.db import reads
from pgsearch.db.work import Statement, Unit, Work, fetch
from pgsearch.deadline import Deadline
from pgsearch.excerpt import READ_MARGIN_CHARS
from tests.conftest import Databases
from tests.helpers import marked

pytestmark = pytest.mark.slow

WS = "huge"
T0 = datetime(2026, 7, 1, tzinfo=UTC)
#: Accented filler: every word needs normalising, the slow path of matching.
FILLER = "Zeitüberschreitung beim Öffnen der Datei für den Prozeß café naïve résumé "


def huge_text(chars: int, at: int) -> str:
    """`chars` characters of filler with the word ``zebrafish`` at about `at`."""
    before = FILLER * (at // len(FILLER))
    after = FILLER * ((chars - at) // len(FILLER))
    return "Error: " + before + " zebrafish " + after


@pytest.fixture(scope="module")
def huge_dsn(databases: Databases, template_db: str) -> Iterator[str]:
    name = databases.create(template=template_db, prefix="huge")
    dsn = databases.dsn(name)
    with PgSearch.connect(dsn) as pg:
        for s in range(10):
            size = 10_000_000 if s == 0 else 2_000_000
            pg.append(
                workspace=WS,
                session_id=f"huge-{s}",
                messages=[
                    {
                        "role": "tool",
                        "content": huge_text(size, at=150_000),
                        "created_at": (T0 + timedelta(minutes=s)).isoformat(),
                    }
                ],
            )
    yield dsn
    databases.drop(name)


def test_ten_hits_on_huge_messages_finish_inside_the_timeout(huge_dsn: str) -> None:
    settings = Settings.from_env({}, dsn=huge_dsn)
    with PgSearch.connect(settings=settings) as pg:
        provider = pg.provider(workspace=WS)
        provider.search(SessionQueryRequest(query="zebrafish", limit=1))  # warm caches
        started = time.monotonic()
        result = provider.search(
            SessionQueryRequest(query="zebrafish", kinds=("tool_error",), limit=10)
        )
        elapsed = time.monotonic() - started
    assert len(result.matches) == 10
    for m in result.matches:
        assert "**zebrafish**" in marked(m)
    assert elapsed * 1000 < settings.statement_timeout_ms, f"{elapsed:.1f}s"


def test_a_page_reads_only_the_indexed_prefix_of_a_message(huge_dsn: str) -> None:
    settings = Settings.from_env({}, dsn=huge_dsn)
    chars = settings.max_indexed_chars + READ_MARGIN_CHARS
    with PgSearch.connect(settings=settings) as pg:
        rows = pg._driver.run(
            Unit(
                work=partial(fetch, reads.page_messages(WS, [("huge-0", 0)], chars=chars)),
                workspace=WS,
                write=False,
            )
        )
    (message,) = rows
    assert len(message.content) == chars  # of 10,000,000 stored


def _two_sleeps() -> Work[list[Any]]:
    first = yield from fetch(Statement("sleep", "SELECT pg_sleep(0.3)"))
    second = yield from fetch(Statement("sleep", "SELECT pg_sleep(0.3)"))
    return [first, second]


def test_statements_share_one_deadline(huge_dsn: str) -> None:
    """Each sleep fits the 500 ms statement timeout; both do not fit its deadline."""
    settings = Settings.from_env({}, dsn=huge_dsn, statement_timeout_ms=500)
    with PgSearch.connect(settings=settings) as pg:
        pg._driver.run(Unit(work=_two_sleeps, workspace=WS, write=False))  # no deadline: fine
        started = time.monotonic()
        with pytest.raises(StoreError, match="statement timed out"):
            pg._driver.run(
                Unit(
                    work=lambda: reads.within(_two_sleeps(), Deadline.start(500), "searching"),
                    workspace=WS,
                    write=False,
                    context="searching",
                )
            )
        elapsed = time.monotonic() - started
    assert elapsed < 0.55 + 0.5, f"{elapsed:.2f}s"
