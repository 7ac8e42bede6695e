"""Reading and writing pgsearch tables: the domain layer's only door to the database.

Every method takes the workspace explicitly and every statement filters on it.
Writes keep three derived things exact in the same transaction as the rows they
describe: vocabulary document frequencies, per-workspace per-kind statistics, and
per-session counters. Vocabulary rows are always locked in term order, so
concurrent writers cannot deadlock on them.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from pgsearch.db import queries as q
from pgsearch.db.connector import Connector, Cursor
from pgsearch.db.schema import TENANT_TABLES
from pgsearch.errors import StoreError
from pgsearch.normalize import stem

log = logging.getLogger(__name__)

__all__ = ["Cursor", "FileRecord", "MessageRow", "SessionState", "Store"]

T = TypeVar("T")


@dataclass(slots=True)
class SessionState:
    session_id: str
    source: str | None
    title: str | None
    summary: str | None
    next_seq: int
    last_turn: int
    message_count: int
    created_at: datetime | None
    updated_at: datetime | None
    field_terms: tuple[str, ...] = ()
    field_len: int = 0
    #: The session that started this one (a sub-agent's), if any.
    parent_session_id: str | None = None
    #: The title was generated (not chosen), and for a summary naming one of the
    #: session's messages, that message's seq (`Ingestor._resolve_leaf_titles`).
    title_auto: bool = False
    title_leaf_seq: int | None = None


@dataclass(frozen=True, slots=True)
class MessageRow:
    session_id: str
    seq: int
    entry_id: str | None
    kind: str
    role: str
    turn: int
    tool_name: str | None
    created_at: datetime
    content: str
    arguments: str
    extra: dict[str, Any] | None
    tsvector: str
    terms: tuple[str, ...]
    token_count: int


@dataclass(frozen=True, slots=True)
class FileRecord:
    path: str
    size: int
    lines: int
    digest: str
    #: ``format/version`` of the mapping the file was read with (None: before 0004).
    parser: str | None = None


@dataclass(slots=True)
class Deltas:
    """Changes to derived statistics accumulated over one transaction."""

    df: Counter[str] = field(default_factory=Counter)
    sf: Counter[str] = field(default_factory=Counter)
    n: Counter[str] = field(default_factory=Counter)
    indexed: Counter[str] = field(default_factory=Counter)
    length: Counter[str] = field(default_factory=Counter)

    def merge(self, other: Deltas) -> None:
        """Add `other`'s changes to these."""
        for mine, theirs in (
            (self.df, other.df),
            (self.sf, other.sf),
            (self.n, other.n),
            (self.indexed, other.indexed),
            (self.length, other.length),
        ):
            for key, value in theirs.items():
                mine[key] += value


#: A bulk load refreshes statistics when it added this share of the message table.
ANALYZE_SHARE = 0.1

#: Batches at least this large are written with COPY instead of bound arrays.
_COPY_THRESHOLD = 64


def _json(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


class Store:
    """Named operations over one `Connector`."""

    def __init__(self, connector: Connector) -> None:
        self.connector = connector
        self._cursor_key: bytes | None = None

    @contextmanager
    def transaction(
        self, workspace: str | None, *, search: bool = False, timeout_ms: int = 0, context: str = ""
    ) -> Iterator[Cursor]:
        with self.connector.transaction(
            workspace, search=search, timeout_ms=timeout_ms, context=context
        ) as cur:
            yield cur

    def retrying(self, work: Callable[[], T]) -> T:
        """Run `work`, one whole transaction, again if Postgres aborts it as a deadlock
        victim or serialization failure (see `Connector.retrying`)."""
        return self.connector.retrying(work)

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A nested unit inside the current transaction, rolled back alone on error."""
        with self.connector.savepoint():
            yield

    # --- ingest -------------------------------------------------------------------

    def lock_file(self, cur: Cursor, ws: str, path: str) -> FileRecord | None:
        """The file's record, read once no other transaction is writing that file."""
        cur.execute(q.LOCK_FILE_KEY, {"ws": ws, "path": path})
        cur.execute(q.LOCK_FILE, {"ws": ws, "path": path})
        row = cur.fetchone()
        return None if row is None else FileRecord(path, row[0], row[1], row[2], row[3])

    def file_records(self, cur: Cursor, ws: str, paths: list[str]) -> dict[str, FileRecord]:
        cur.execute(q.FILE_RECORDS, {"ws": ws, "paths": paths})
        return {r[0]: FileRecord(r[0], r[1], r[2], r[3], r[4]) for r in cur.fetchall()}

    def record_file(self, cur: Cursor, ws: str, record: FileRecord) -> None:
        cur.execute(
            q.RECORD_FILE,
            {
                "ws": ws,
                "path": record.path,
                "size": record.size,
                "lines": record.lines,
                "digest": record.digest,
                "parser": record.parser,
            },
        )

    def sessions_from_source(self, cur: Cursor, ws: str, source: str) -> list[str]:
        """Ids of the sessions whose messages came from the file `source`."""
        cur.execute(q.SESSIONS_FROM_SOURCE, {"ws": ws, "source": source})
        return [r[0] for r in cur.fetchall()]

    def lock_sessions(
        self, cur: Cursor, ws: str, session_ids: Iterable[str], source: str | None
    ) -> dict[str, SessionState]:
        """Create missing sessions and lock all of them (in id order)."""
        ids = sorted(set(session_ids))
        cur.execute(q.ENSURE_SESSIONS, {"ws": ws, "ids": ids, "source": source})
        cur.execute(q.LOCK_SESSIONS, {"ws": ws, "ids": ids})
        return {
            row[0]: SessionState(
                session_id=row[0],
                source=row[1],
                title=row[2],
                summary=row[3],
                next_seq=row[4],
                last_turn=row[5],
                message_count=row[6],
                created_at=row[7],
                updated_at=row[8],
                field_terms=tuple(row[9] or ()),
                field_len=int(row[10] or 0),
                parent_session_id=row[11],
                title_auto=bool(row[12]),
                title_leaf_seq=row[13],
            )
            for row in cur.fetchall()
        }

    def insert_messages(
        self, cur: Cursor, ws: str, rows: Sequence[MessageRow], deltas: Deltas
    ) -> set[tuple[str, int]]:
        """Insert rows not already stored; returns the keys inserted, deltas updated."""
        if not rows:
            return set()
        if len(rows) < _COPY_THRESHOLD:
            cur.execute(
                q.INSERT_MESSAGES,
                {
                    "ws": ws,
                    "session_id": [r.session_id for r in rows],
                    "seq": [r.seq for r in rows],
                    "entry_id": [r.entry_id for r in rows],
                    "kind": [r.kind for r in rows],
                    "role": [r.role for r in rows],
                    "turn": [r.turn for r in rows],
                    "tool_name": [r.tool_name for r in rows],
                    "created_at": [r.created_at for r in rows],
                    "content": [r.content for r in rows],
                    "arguments": [r.arguments for r in rows],
                    "extra": [_json(r.extra) for r in rows],
                    "tsv": [r.tsvector for r in rows],
                    "token_count": [r.token_count for r in rows],
                },
            )
        else:
            # Large batches go through COPY into a session-local staging table: the
            # driver formats rows in C, far cheaper than binding big arrays.
            cur.execute(q.CREATE_STAGE)
            with cur.copy(q.COPY_STAGE) as copy:
                for r in rows:
                    copy.write_row(
                        (
                            r.session_id,
                            r.seq,
                            r.entry_id,
                            r.kind,
                            r.role,
                            r.turn,
                            r.tool_name,
                            r.created_at,
                            r.content,
                            r.arguments,
                            _json(r.extra),
                            r.tsvector,
                            r.token_count,
                        )
                    )
            cur.execute(q.INSERT_FROM_STAGE, {"ws": ws})
        inserted = {(sid, seq) for sid, seq in cur.fetchall()}
        for r in rows:
            if (r.session_id, r.seq) in inserted:
                deltas.n[r.kind] += 1
                if r.token_count:
                    deltas.indexed[r.kind] += 1
                    deltas.length[r.kind] += r.token_count
                    deltas.df.update(r.terms)
        return inserted

    def update_session(
        self, cur: Cursor, ws: str, state: SessionState, tsv: str, field_len: int
    ) -> None:
        cur.execute(
            q.UPDATE_SESSION,
            {
                "ws": ws,
                "session_id": state.session_id,
                "title": state.title,
                "summary": state.summary,
                "source": state.source,
                "created_at": state.created_at,
                "updated_at": state.updated_at,
                "message_count": state.message_count,
                "next_seq": state.next_seq,
                "last_turn": state.last_turn,
                "tsv": tsv or None,
                "field_len": field_len,
                "parent": state.parent_session_id,
                "title_auto": state.title_auto,
                "title_leaf_seq": state.title_leaf_seq,
            },
        )

    # --- titles naming their session through a message (Claude Code summaries) -------

    def save_leaf_titles(self, cur: Cursor, ws: str, source: str, titles: dict[str, str]) -> None:
        """Keep each title until the message it names is stored (and after)."""
        leaves = sorted(titles)
        cur.execute(
            q.SAVE_LEAF_TITLES,
            {
                "ws": ws,
                "leaves": leaves,
                "titles": [titles[k] for k in leaves],
                "source": source,
            },
        )

    def resolve_leaf_titles(
        self, cur: Cursor, ws: str, keys: Sequence[str]
    ) -> list[tuple[str, int, str]]:
        """(session, seq, title) for each waiting title among `keys` whose message is
        now stored; those titles are marked resolved."""
        if not keys:
            return []
        cur.execute(q.RESOLVE_LEAF_TITLES, {"ws": ws, "keys": list(keys)})
        return [(r[0], int(r[1]), r[2]) for r in cur.fetchall()]

    def forget_leaf_titles(self, cur: Cursor, ws: str, source: str) -> None:
        """Drop the titles a file gave (it is being read again whole)."""
        cur.execute(q.FORGET_LEAF_TITLES, {"ws": ws, "source": source})

    def apply_deltas(self, cur: Cursor, ws: str, deltas: Deltas) -> None:
        """Fold accumulated deltas into vocabulary and statistics (sorted, batched).

        Additions and removals go in one statement that locks every changed term in
        sorted order: a writer taking them in two passes could hold a removed term
        that another writer needs while waiting for an added one that writer holds.
        """
        terms = sorted(t for t in set(deltas.df) | set(deltas.sf) if deltas.df[t] or deltas.sf[t])
        if terms:
            cur.execute(
                q.UPSERT_VOCABULARY,
                {
                    "ws": ws,
                    "terms": terms,
                    "stems": [stem(t) for t in terms],
                    "df": [deltas.df[t] for t in terms],
                    "sf": [deltas.sf[t] for t in terms],
                },
            )
            shrink = [t for t in terms if deltas.df[t] < 0 or deltas.sf[t] < 0]
            if shrink:
                cur.execute(q.PRUNE_VOCABULARY, {"ws": ws, "terms": shrink})
        kinds = sorted(set(deltas.n) | set(deltas.indexed) | set(deltas.length))
        if kinds:
            cur.execute(
                q.UPSERT_STATS,
                {
                    "ws": ws,
                    "kinds": kinds,
                    "n": [deltas.n[k] for k in kinds],
                    "ni": [deltas.indexed[k] for k in kinds],
                    "len": [deltas.length[k] for k in kinds],
                },
            )

    def after_bulk_load(self, added: int) -> None:
        """Merge the message index's pending list and refresh planner statistics.

        After a large load the planner's row estimates are stale until autovacuum
        catches up; a stale estimate can turn the trigram lookup into a filter over a
        whole workspace vocabulary. Both steps need table ownership; without it they
        are skipped (autovacuum does the same work later).
        """
        with self.transaction(None, context="reading table estimates") as cur:
            cur.execute(q.MESSAGE_ESTIMATE)
            row = cur.fetchone()
        estimate = float(row[0]) if row and row[0] is not None else -1.0
        if 0 <= estimate and added < ANALYZE_SHARE * estimate:
            return
        for statement in q.AFTER_BULK_LOAD:
            try:
                with self.transaction(None, context="refreshing statistics") as cur:
                    cur.execute(statement)
            except StoreError as exc:
                log.info("skipped after a bulk load: %s", exc)

    # --- forget -------------------------------------------------------------------

    def forget_session(self, cur: Cursor, ws: str, session_id: str, deltas: Deltas) -> int:
        """Delete one session; returns how many messages went. Deltas updated."""
        cur.execute(q.DELETE_SESSION_MESSAGES, {"ws": ws, "session_id": session_id})
        count = 0
        for kind, token_count, terms in cur.fetchall():
            count += 1
            deltas.n[kind] -= 1
            if token_count:
                deltas.indexed[kind] -= 1
                deltas.length[kind] -= token_count
                for t in terms:
                    deltas.df[t] -= 1
        cur.execute(q.UNRESOLVE_LEAF_TITLES, {"ws": ws, "session_id": session_id})
        cur.execute(q.DELETE_SESSION, {"ws": ws, "session_id": session_id})
        row = cur.fetchone()
        if row is not None:
            field_terms, source, field_len = row
            for t in field_terms:
                deltas.sf[t] -= 1
            if field_terms:
                deltas.indexed[q.FIELDS_STAT] -= 1
                deltas.length[q.FIELDS_STAT] -= int(field_len)
            if source:
                cur.execute(q.DELETE_SESSION_FILES, {"ws": ws, "paths": [source]})
        elif count == 0:
            return -1
        return count

    def forget_workspace(self, cur: Cursor, ws: str) -> int:
        """Delete everything of one workspace; returns how many messages went."""
        total = sum(n for n, _, _ in self.workspace_stats(cur, ws).values())
        for statement in q.FORGET_WORKSPACE:
            cur.execute(statement, {"ws": ws})
        return total

    # --- reading ------------------------------------------------------------------

    def list_sessions(
        self, cur: Cursor, ws: str, *, limit: int, offset: int
    ) -> list[tuple[Any, ...]]:
        cur.execute(q.LIST_SESSIONS, {"ws": ws, "limit": limit, "offset": offset})
        return cur.fetchall()

    def workspaces(self, cur: Cursor) -> list[str]:
        cur.execute(q.ALL_WORKSPACES)
        return [r[0] for r in cur.fetchall()]

    def workspace_stats(self, cur: Cursor, ws: str) -> dict[str, tuple[int, int, int]]:
        cur.execute(q.WORKSPACE_STATS, {"ws": ws})
        return {k: (int(n), int(ni), int(ln)) for k, n, ni, ln in cur.fetchall()}

    def workspace_counts(self, cur: Cursor, ws: str) -> tuple[int, int]:
        cur.execute(q.WORKSPACE_COUNTS, {"ws": ws})
        row = cur.fetchone()
        assert row is not None
        return int(row[0]), int(row[1])

    def table_sizes(self, cur: Cursor) -> list[tuple[str, int, int]]:
        cur.execute(q.TABLE_SIZES, {"tables": list(TENANT_TABLES)})
        return [(r[0], int(r[1]), int(r[2])) for r in cur.fetchall()]

    def cursor_key(self, cur: Cursor) -> bytes:
        if self._cursor_key is None:
            cur.execute(q.CURSOR_KEY)
            row = cur.fetchone()
            self._cursor_key = (row[0] if row else "pgsearch").encode()
        return self._cursor_key

    # --- running search statements ------------------------------------------------

    def run(
        self,
        cur: Cursor,
        statement: Any,
        params: dict[str, Any],
        *,
        explain: list[str] | None = None,
    ) -> list[tuple[Any, ...]]:
        """Run one statement; with `explain`, append its SQL and plan to that list."""
        if explain is not None:
            cur.execute("EXPLAIN (FORMAT TEXT, COSTS true) " + statement, params)
            plan = "\n".join(r[0] for r in cur.fetchall())
            explain.append(f"{' '.join(str(statement).split())}\n{plan}")
        cur.execute(statement, params)
        return cur.fetchall()
