"""Browsing (an empty query) equals a reference computed from every stored entry.

Per session a browse lists the newest entry in scope of each session, newest first,
keyset-paged. It reads sessions in order of their last entry's time and probes each
one's end; then, of the sessions left, those that could still hold an entry of the
page (last active no earlier than the page's last entry so far). With a few or a
single session read first, over sessions that overlap in time, tie, run their times
backwards, and hold entries of every role, every filter and page size gives exactly
the reference's order, page after page, to the end.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from pgsearch import PgSearch, SessionQueryRequest, policy
from pgsearch.db import queries
from pgsearch.plan import Filters
from tests.conftest import Databases

WS = "browse"
LONG = "browse-long"
TIES = "browse-ties"
T0 = datetime(2026, 4, 1, tzinfo=UTC)
ROLES = ("user", "assistant", "tool")


@dataclass(frozen=True)
class Entry:
    session_id: str
    seq: int
    kind: str
    role: str
    tool_name: str | None
    created_at: datetime


@pytest.fixture(scope="module")
def browse_dsn(databases: Databases, template_db: str) -> Iterator[str]:
    name = databases.create(template=template_db, prefix="browse")
    dsn = databases.dsn(name)
    rng = random.Random(7)
    with PgSearch.connect(dsn) as pg:
        for s in range(40):
            # Lengths from one entry to long sessions; starts spread so that sessions
            # overlap; a few sessions' times run backwards; some share times exactly.
            n = rng.choice([1, 2, 3, 8, 30, 90])
            start = T0 + timedelta(minutes=rng.randrange(0, 600))
            step = -1 if s % 9 == 4 else 1
            messages = []
            for i in range(n):
                role = ROLES[rng.randrange(3)] if n > 1 else "assistant"
                messages.append(
                    {
                        "role": role,
                        "content": f"entry {s} {i}",
                        "tool_name": "bash" if role == "tool" and i % 2 else None,
                        "created_at": (start + timedelta(minutes=step * i)).isoformat()
                        if s % 7
                        else T0.isoformat(),
                    }
                )
            # Two appends: the second continues the session's times.
            half = n // 2
            for part in (messages[:half], messages[half:]):
                if part:
                    pg.append(workspace=WS, session_id=f"s{s:02d}", messages=part)
        # Long sessions, one after another in time, overlapping a little.
        for s in range(30):
            start = T0 + timedelta(minutes=50 * s)
            pg.append(
                workspace=LONG,
                session_id=f"long-{s:02d}",
                messages=[
                    {
                        "role": ROLES[i % 2],
                        "content": f"long {s} {i}",
                        "created_at": (start + timedelta(minutes=i)).isoformat(),
                    }
                    for i in range(60)
                ],
            )
        # Sessions whose every entry has the same time, stored in reverse name order.
        for s in reversed(range(40)):
            pg.append(
                workspace=TIES,
                session_id=f"tie-{s:02d}",
                messages=[{"role": "user", "content": f"tie {s}", "created_at": T0.isoformat()}],
            )
    # Statistics as a loaded database has them, not as far as autovacuum got: the
    # plans EXPLAINed below are then the same on every run.
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    yield dsn
    databases.drop(name)


def _entries(dsn: str, workspace: str = WS) -> list[Entry]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT session_id, seq, kind, role, tool_name, created_at FROM messages"
            " WHERE workspace_id = %s",
            [workspace],
        ).fetchall()
    return [Entry(*row) for row in rows]


def _in_scope(e: Entry, filters: dict[str, Any]) -> bool:
    return (
        e.kind in (filters.get("kinds") or policy.DEFAULT_SEARCH_KINDS)
        and (not filters.get("roles") or e.role in filters["roles"])
        and (filters.get("tool_name") is None or e.tool_name == filters["tool_name"])
        and (filters.get("session_id") is None or e.session_id == filters["session_id"])
        and (filters.get("since") is None or e.created_at >= filters["since"])
        and (filters.get("until") is None or e.created_at < filters["until"])
    )


def _reference(entries: list[Entry], filters: dict[str, Any], per_session: bool) -> list[Any]:
    kept = [e for e in entries if _in_scope(e, filters)]
    if per_session and filters.get("session_id") is None:  # within a session: every entry
        newest: dict[str, Entry] = {}
        for e in kept:
            if e.session_id not in newest or e.seq > newest[e.session_id].seq:
                newest[e.session_id] = e
        kept = list(newest.values())
    kept.sort(key=lambda e: (-e.created_at.timestamp(), e.session_id, -e.seq))
    return [(e.session_id, e.seq) for e in kept]


def _browsed(
    pg: PgSearch, filters: dict[str, Any], per_session: bool, limit: int, workspace: str = WS
) -> list[Any]:
    out: list[Any] = []
    cursor = None
    for _ in range(2_000):
        result = pg.search(
            SessionQueryRequest(
                query="", per_session=per_session, limit=limit, cursor=cursor, **filters
            ),
            workspace=workspace,
        )
        out += [(m.session_id, m.seq) for m in result.matches]
        cursor = result.next_cursor
        if cursor is None:
            return out
    raise AssertionError("more pages than entries")


FILTERS: list[dict[str, Any]] = [
    {},
    {"roles": ("user",)},
    {"kinds": ("user_text",)},
    {"tool_name": "bash"},
    {"session_id": "s03"},
    {"since": T0 + timedelta(minutes=200)},
    {"until": T0 + timedelta(minutes=300)},
    {"since": T0 + timedelta(minutes=100), "until": T0 + timedelta(minutes=400)},
    {"roles": ("tool",), "until": T0 + timedelta(minutes=350)},
]


@pytest.mark.parametrize("scan", ["default", "tiny"])
def test_browsing_equals_the_reference(
    browse_dsn: str, scan: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if scan == "tiny":
        # One session read below the cursor: the sessions left answer the pages.
        monkeypatch.setattr(queries, "browse_scan", lambda limit: 1)
    entries = _entries(browse_dsn)
    assert len({e.session_id for e in entries}) == 40
    with PgSearch.connect(browse_dsn) as pg:
        for filters in FILTERS:
            for per_session in (True, False):
                expected = _reference(entries, filters, per_session)
                for limit in (1, 3, 10, 50) if per_session else (7, 50):
                    got = _browsed(pg, filters, per_session, limit)
                    assert got == expected, (filters, per_session, limit)
        # Sessions one after another: the first sessions read answer every page.
        long = _entries(browse_dsn, LONG)
        for limit in (1, 4, 25):
            for filters in ({}, {"roles": ("user",)}, {"until": T0 + timedelta(minutes=700)}):
                got = _browsed(pg, filters, True, limit, workspace=LONG)
                assert got == _reference(long, filters, True), (filters, limit)
        # Sessions tied on time: ordered by name, whichever the sessions read first.
        ties = _reference(_entries(browse_dsn, TIES), {}, True)
        assert ties[0] == ("tie-00", 0)
        for limit in (1, 3, 10):
            assert _browsed(pg, {}, True, limit, workspace=TIES) == ties, limit


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def test_a_browse_reads_the_ends_of_a_few_sessions(browse_dsn: str) -> None:
    """A first page per session reads a few sessions and one entry at the end of each,
    not the entries of long sessions (nor walks the workspace's entries by time)."""
    filters = Filters(workspace=LONG, kinds=policy.DEFAULT_SEARCH_KINDS)
    sql, params = queries.browse_page_sql(filters, per_session=True, after=None, limit=6, chars=100)
    with psycopg.connect(browse_dsn) as conn:
        # As a search runs its statements (`Driver._begin`): no sequential scans.
        conn.execute("SET enable_seqscan = off")
        row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params).fetchone()
    assert row is not None
    nodes = list(_nodes(row[0][0]["Plan"]))
    read = sum(
        n["Actual Rows"] * n["Actual Loops"] for n in nodes if n.get("Relation Name") == "messages"
    )
    # Which index orders 110 sessions is the planner's call on a table this small
    # (the one on last activity, or the primary key and a sort): what holds either
    # way is that no walk of the workspace's entries by time is made.
    assert not any(n.get("Index Name") == "messages_created_idx" for n in nodes)
    assert not any(n.get("Node Type") == "Seq Scan" for n in nodes)
    assert read <= browse_scan_rows(6), read  # of 1,800 entries


def browse_scan_rows(limit: int) -> int:
    # One entry per session read, and the page's entries read again with their text.
    return queries.browse_scan(limit) + limit
