"""Reading and writing pgsearch tables: the domain layer's only door to the database.

Each operation is a unit of work (`pgsearch.db.work`): a generator of named
statements with typed rows, run by a driver (`pgsearch.db.driver`) in one
transaction, sync or asyncio alike. Independent statements share a round trip.
Every operation takes the workspace explicitly and every statement filters on it.
Writes keep three derived things exact in the same transaction as the rows they
describe: vocabulary document frequencies, per-workspace per-kind statistics, and
per-session counters. Vocabulary rows are always locked in term order, so
concurrent writers cannot deadlock on them.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, LiteralString, TypeVar

from pgsearch.db import queries as q
from pgsearch.db.connector import HEAD_REVISION
from pgsearch.db.driver import AsyncDriver, Driver, DriverConfig
from pgsearch.db.routing import router_for
from pgsearch.db.work import (
    Statement,
    Unit,
    Work,
    as_tuple,
    execute,
    fetch,
    fetch2,
    fetch_all,
    returning,
    savepoint,
)
from pgsearch.errors import IngestError, NotFound, StoreError
from pgsearch.normalize import stem
from pgsearch.policy import (
    ALL_KINDS,
    ASSISTANT_TEXT,
    USER_TEXT,
    scrub_secrets,
    split_tool_names,
)
from pgsearch.rows import ApiToken, StoredMessage, TableSize
from pgsearch.types import SessionInfo, WorkspaceStats

log = logging.getLogger(__name__)

__all__ = [
    "FIELDS_STAT",
    "HEAD_REVISION",
    "AsyncDriver",
    "Deltas",
    "Driver",
    "DriverConfig",
    "FileRecord",
    "MessageRow",
    "SessionState",
    "Store",
    "Unit",
    "Work",
    "returning",
    "router_for",
    "savepoint",
]

#: The `workspace_stats` row that counts session titles/summaries, not messages.
FIELDS_STAT = q.FIELDS_STAT

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
    #: The title its first prompt that reads as one gives it (`pgsearch.titles`),
    #: shown when it has none of its own; never indexed.
    prompt_title: str | None = None


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
    #: An appended message's key, unique in its session (None: from a file).
    append_key: str | None = None


@dataclass(frozen=True, slots=True)
class FileRecord:
    path: str
    size: int
    lines: int
    digest: str
    #: ``format/version`` of the mapping the file was read with (None: before 0004).
    parser: str | None = None
    #: SHA-256 of the first and of the last `pgsearch.ingest.FILE_WINDOW` bytes read
    #: (None: recorded before 0005, when `digest` covered every byte read).
    head_digest: str | None = None
    tail_digest: str | None = None


@dataclass(slots=True)
class Deltas:
    """Changes to derived statistics accumulated over one transaction."""

    df: Counter[str] = field(default_factory=Counter)
    sf: Counter[str] = field(default_factory=Counter)
    n: Counter[str] = field(default_factory=Counter)
    indexed: Counter[str] = field(default_factory=Counter)
    length: Counter[str] = field(default_factory=Counter)
    #: Messages per (kind, role, tool name or ``''``): the scope counts.
    scoped: Counter[tuple[str, str, str]] = field(default_factory=Counter)

    def clear(self) -> None:
        """Forget the changes (after they were applied)."""
        for counter in (self.df, self.sf, self.n, self.indexed, self.length):
            counter.clear()
        self.scoped.clear()

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
        self.scoped.update(other.scoped)


#: A bulk load refreshes statistics when it added this share of the message table.
ANALYZE_SHARE = 0.1

#: Batches at least this large are written with COPY instead of bound arrays.
_COPY_THRESHOLD = 64


def uses_stage(rows: int) -> bool:
    """Whether `insert_messages` copies `rows` rows through the staging table."""
    return rows >= _COPY_THRESHOLD


def _json(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} in a row set")


def _columns(**columns: Sequence[Any]) -> str:
    """Rows as the one JSON parameter their statement reads: a list a column."""
    return json.dumps(columns, ensure_ascii=False, separators=(",", ":"), default=_jsonable)


def _file_record(row: Sequence[Any]) -> FileRecord:
    return FileRecord(row[0], int(row[1]), int(row[2]), row[3], row[4], row[5], row[6])


def _session_state(row: Sequence[Any]) -> SessionState:
    return SessionState(
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
        prompt_title=row[14],
    )


def _stored_message(row: Sequence[Any]) -> StoredMessage:
    return StoredMessage(
        session_id=row[0],
        seq=int(row[1]),
        entry_id=row[2],
        kind=row[3],
        role=row[4],
        turn=int(row[5]),
        tool_name=row[6],
        created_at=row[7],
        content=row[8],
        arguments=row[9],
    )


def _key(row: Sequence[Any]) -> tuple[str, int]:
    return str(row[0]), int(row[1])


def _first(row: Sequence[Any]) -> Any:
    return row[0]


# --- ingest ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Claim:
    """What a writer learns when it takes its files (`claim_files`)."""

    #: The record of each file recorded before, by path.
    records: dict[str, FileRecord]
    #: Records a file at a new path may have been ingested under (`moved_candidates`).
    candidates: list[FileRecord]
    #: Of the session ids asked about, those the user forgot.
    forgotten: set[str]


def claim_files(
    ws: str, paths: Sequence[str], *, heads: Sequence[str] = (), session_ids: Iterable[str] = ()
) -> Work[Claim]:
    """Take the files `paths` for writing (no other transaction writes them until this
    one ends) and read their records; with `heads` and `session_ids`, also the records
    a new file may have moved from and which of the sessions were forgotten. One round
    trip."""
    paths = sorted(set(paths))
    ids = sorted(set(session_ids))
    statements: list[Statement[Any]] = [
        Statement("lock file key", q.LOCK_FILE_KEY, {"ws": ws, "paths": paths}),
        Statement("lock file", q.LOCK_FILE, {"ws": ws, "paths": paths}, _file_record),
    ]
    if heads:
        statements.append(_moved_candidates(ws, heads, ids))
    if ids:
        statements.append(_forgotten_among(ws, ids))
    _, records, *more = yield from fetch_all(statements)
    return Claim(
        records={r.path: r for r in records},
        candidates=more.pop(0) if heads else [],
        forgotten={str(r) for r in more.pop(0)} if ids else set(),
    )


def file_records(ws: str, paths: list[str]) -> Work[dict[str, FileRecord]]:
    """The records of files as they are now (a snapshot to prepare against; a unit of
    its own, one round trip with its commit)."""
    rows = yield from fetch(
        Statement("file records", q.FILE_RECORDS, {"ws": ws, "paths": paths}, _file_record),
        final=True,
    )
    return {r.path: r for r in rows}


def _record_files(ws: str, records: Sequence[FileRecord]) -> Statement[Any]:
    records = sorted(records, key=lambda r: r.path)
    return Statement(
        "record files",
        q.RECORD_FILES,
        {
            "ws": ws,
            "rows": _columns(
                path=[r.path for r in records],
                size=[r.size for r in records],
                lines=[r.lines for r in records],
                digest=[r.digest for r in records],
                parser=[r.parser for r in records],
                head_digest=[r.head_digest for r in records],
                tail_digest=[r.tail_digest for r in records],
            ),
        },
    )


def _moved_candidates(ws: str, heads: Sequence[str], ids: Sequence[str]) -> Statement[FileRecord]:
    return Statement(
        "moved candidates",
        q.MOVED_CANDIDATES,
        {"ws": ws, "heads": sorted(set(heads)), "ids": list(ids)},
        _file_record,
    )


def moved_candidates(
    ws: str, heads: Sequence[str], session_ids: Iterable[str]
) -> Work[list[FileRecord]]:
    """Records whose first window digest is one of `heads`, or of the files the
    sessions `session_ids` came from (a file seen at a new path may be one of them)."""
    return (yield from fetch(_moved_candidates(ws, heads, sorted(set(session_ids)))))


def relocate(ws: str, old: str, new: str) -> Work[int]:
    """Re-home what was recorded at `old` (a file, or the files under a directory) at
    `new`; returns how many file records moved. Refused when `new` holds records."""
    conflicts = yield from fetch(
        Statement("relocate conflicts", q.RELOCATE_CONFLICTS, {"ws": ws, "new": new}, _first)
    )
    if conflicts and old != new:
        raise IngestError(
            f"cannot relocate to {new}: files are already recorded there in workspace "
            f"{ws!r} ({', '.join(conflicts)})",
            path=new,
        )
    files, *_ = yield from fetch_all(
        [
            Statement("relocate", statement, {"ws": ws, "old": old, "new": new}, _first)
            for statement in q.RELOCATE
        ]
    )
    return len(files)


def open_sessions(
    ws: str, sources: Mapping[str, str | None], *, stage: bool = False
) -> Work[dict[str, SessionState]]:
    """Create the sessions of `sources` that do not exist (each recording its source
    file, None for appends) and lock all of them, in id order; their states. With
    `stage`, the staging table a large insert copies into is made in the same trip."""
    ids = sorted(sources)
    statements: list[Statement[Any]] = [
        Statement(
            "ensure sessions",
            q.ENSURE_SESSIONS,
            {"ws": ws, "rows": _columns(session_id=ids, source=[sources[i] for i in ids])},
        ),
        Statement("lock sessions", q.LOCK_SESSIONS, {"ws": ws, "ids": ids}, _session_state),
    ]
    if stage:
        statements.append(Statement("create stage", q.CREATE_STAGE))
    _, rows, *_ = yield from fetch_all(statements)
    return {state.session_id: state for state in rows}


def open_append(
    ws: str, session_id: str, keys: Sequence[str]
) -> Work[tuple[SessionState, dict[str, int]]]:
    """Create the session of an append if missing and lock it; its state, and which
    of `keys` its messages already carry (key -> seq), read once the lock is held so
    that no other append can store one of them meanwhile. One round trip."""
    statements: list[Statement[Any]] = [
        Statement(
            "ensure sessions",
            q.ENSURE_SESSIONS,
            {"ws": ws, "rows": _columns(session_id=[session_id], source=[None])},
        ),
        Statement(
            "lock sessions", q.LOCK_SESSIONS, {"ws": ws, "ids": [session_id]}, _session_state
        ),
        Statement(
            "stored keys",
            q.STORED_KEYS,
            {"ws": ws, "session_id": session_id, "keys": list(keys)},
            lambda r: (str(r[0]), int(r[1])),
        ),
    ]
    results = yield from fetch_all(statements)
    _, (state,), stored = results
    return state, dict(stored)


def lock_sessions(ws: str, session_ids: Iterable[str]) -> Work[dict[str, SessionState]]:
    """Lock existing sessions (in id order); their states (a missing one is absent)."""
    rows = yield from fetch(
        Statement(
            "lock sessions",
            q.LOCK_SESSIONS,
            {"ws": ws, "ids": sorted(set(session_ids))},
            _session_state,
        )
    )
    return {state.session_id: state for state in rows}


def _copy_row(r: MessageRow) -> tuple[Any, ...]:
    return (
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


def insert_messages(
    ws: str, rows: Sequence[MessageRow], deltas: Deltas, *, staged: bool = False
) -> Work[set[tuple[str, int]]]:
    """Insert rows not already stored; returns the keys inserted, deltas updated.

    A large batch goes through a staging table (`uses_stage`), which `staged` says an
    earlier step of the transaction made (`open_sessions`)."""
    if not rows:
        return set()
    if not uses_stage(len(rows)):
        inserted = yield from fetch(
            Statement(
                "insert messages",
                q.INSERT_MESSAGES,
                {"ws": ws, "rows": _message_rows(rows)},
                _key,
            )
        )
    else:
        # Large batches go through COPY into a session-local staging table: the
        # driver formats rows in C, far cheaper than binding big arrays.
        *_, inserted = yield from fetch_all(
            [
                *([] if staged else [Statement("create stage", q.CREATE_STAGE)]),
                Statement("copy stage", q.COPY_STAGE, copy_rows=[_copy_row(r) for r in rows]),
                Statement("insert from stage", q.INSERT_FROM_STAGE, {"ws": ws}, _key),
            ]
        )
    keys = set(inserted)
    _count_rows((r for r in rows if (r.session_id, r.seq) in keys), deltas)
    return keys


def _message_rows(rows: Sequence[MessageRow], *, keys: bool = False) -> str:
    """`rows` as the JSON object of column arrays the insert statements read (with
    `keys`, their append keys too)."""
    extra = {"append_key": [r.append_key for r in rows]} if keys else {}
    return _columns(
        **extra,
        session_id=[r.session_id for r in rows],
        seq=[r.seq for r in rows],
        entry_id=[r.entry_id for r in rows],
        kind=[r.kind for r in rows],
        role=[r.role for r in rows],
        turn=[r.turn for r in rows],
        tool_name=[r.tool_name for r in rows],
        created_at=[r.created_at for r in rows],
        content=[r.content for r in rows],
        arguments=[r.arguments for r in rows],
        extra=[r.extra for r in rows],
        tsv=[r.tsvector for r in rows],
        token_count=[r.token_count for r in rows],
    )


def _count_rows(rows: Iterable[MessageRow], deltas: Deltas) -> None:
    """Count stored rows into the statistics and vocabulary deltas."""
    for r in rows:
        deltas.n[r.kind] += 1
        deltas.scoped[r.kind, r.role, r.tool_name or ""] += 1
        if r.token_count:
            deltas.indexed[r.kind] += 1
            deltas.length[r.kind] += r.token_count
            deltas.df.update(r.terms)


@dataclass(frozen=True, slots=True)
class SessionFields:
    """A session's title and summary as indexed (`pgsearch.indexing`)."""

    tsvector: str
    terms: tuple[str, ...]
    length: int


def _update_sessions(
    ws: str, changed: Sequence[tuple[SessionState, SessionFields]], deltas: Deltas
) -> Statement[Any]:
    """The statement that stores `changed` sessions; the statistics of their titles
    and summaries (the `FIELDS_STAT` row, the vocabulary's `sf`) go to `deltas`."""
    states = []
    for state, fields in sorted(changed, key=lambda c: c[0].session_id):
        if set(fields.terms) != set(state.field_terms) or fields.length != state.field_len:
            deltas.sf.subtract(state.field_terms)
            deltas.sf.update(fields.terms)
            deltas.indexed[FIELDS_STAT] += bool(fields.terms) - bool(state.field_terms)
            deltas.length[FIELDS_STAT] += fields.length - state.field_len
            state.field_terms = fields.terms
            state.field_len = fields.length
        states.append((state, fields.tsvector or None))
    rows = json.dumps(
        [
            {
                "session_id": s.session_id,
                "title": s.title,
                "summary": s.summary,
                "source": s.source,
                "created_at": s.created_at,
                "updated_at": s.updated_at,
                "message_count": s.message_count,
                "next_seq": s.next_seq,
                "last_turn": s.last_turn,
                "tsv": tsv,
                "field_len": s.field_len,
                "parent_session_id": s.parent_session_id,
                "title_auto": s.title_auto,
                "title_leaf_seq": s.title_leaf_seq,
                "prompt_title": s.prompt_title,
            }
            for s, tsv in states
        ],
        ensure_ascii=False,
        default=_jsonable,
    )
    return Statement("update sessions", q.UPDATE_SESSIONS, {"ws": ws, "rows": rows})


def finish(
    ws: str,
    deltas: Deltas,
    *,
    sessions: Sequence[tuple[SessionState, SessionFields]] = (),
    records: Sequence[FileRecord] = (),
    appended: Sequence[MessageRow] = (),
) -> Work[None]:
    """The last step of a write: store the sessions it changed and the records of the
    files it read, fold `deltas` into vocabulary and statistics, and commit, in one
    round trip. `appended` rows (an append's, whose seqs continue sessions this
    transaction locked) are inserted in the same trip, and counted into `deltas`."""
    statements: list[Statement[Any]] = []
    if appended:
        statements.append(
            Statement(
                "append messages",
                q.APPEND_MESSAGES,
                {"ws": ws, "rows": _message_rows(appended, keys=True)},
            )
        )
        _count_rows(appended, deltas)
    if sessions:
        statements.append(_update_sessions(ws, sessions, deltas))
    if records:
        statements.append(_record_files(ws, records))
    yield from execute(*statements, *_delta_statements(ws, deltas), final=True)


def tool_call_names(ws: str, calls: dict[str, set[str]]) -> Work[dict[str, dict[str, str]]]:
    """For each session of `calls`, the tool name of each of its call ids called
    earlier in that session (the latest call of an id wins); unknown ids are left out.
    One round trip."""
    sessions = sorted(calls)
    results = yield from fetch_all(
        [
            Statement(
                "tool call names",
                q.TOOL_CALL_NAMES,
                {"ws": ws, "session_id": sid, "ids": sorted(calls[sid])},
                lambda r: (r[0] if isinstance(r[0], list) else [], str(r[1] or "")),
            )
            for sid in sessions
        ]
    )
    found: dict[str, dict[str, str]] = {}
    for sid, rows in zip(sessions, results, strict=True):
        names = found.setdefault(sid, {})
        for ids, tool_name in rows:
            for call_id, name in zip(ids, split_tool_names(tool_name), strict=False):
                if isinstance(call_id, str):
                    names.setdefault(call_id, name)
    return found


# --- titles naming their session through a message (Claude Code summaries) ---------


def leaf_titles(
    ws: str, saved: Mapping[str, Mapping[str, str]], keys: Sequence[str]
) -> Work[list[tuple[str, int, str]]]:
    """Keep the titles each file of `saved` gives (source -> message uuid -> title)
    until the message they name is stored (and after); then (session, seq, title) for
    each waiting title among `keys` whose message is stored now, marked resolved. One
    round trip."""
    statements: list[Statement[Any]] = []
    for source, titles in sorted(saved.items()):
        leaves = sorted(titles)
        statements.append(
            Statement(
                "save leaf titles",
                q.SAVE_LEAF_TITLES,
                {
                    "ws": ws,
                    "leaves": leaves,
                    "titles": [titles[k] for k in leaves],
                    "source": source,
                },
            )
        )
    if keys:
        statements.append(
            Statement(
                "resolve leaf titles",
                q.RESOLVE_LEAF_TITLES,
                {"ws": ws, "keys": sorted(set(keys))},
                lambda r: (str(r[0]), int(r[1]), str(r[2])),
            )
        )
    results = yield from fetch_all(statements)
    return results[-1] if keys else []


def forget_sources(ws: str, sources: Sequence[str], deltas: Deltas) -> Work[None]:
    """Forget what the files `sources` stored (they are read again whole): their
    sessions, with their statistics (to `deltas`), and the titles they gave."""
    found = yield from fetch_all(
        [
            Statement(
                "sessions from source", q.SESSIONS_FROM_SOURCE, {"ws": ws, "source": s}, _first
            )
            for s in sorted(set(sources))
        ]
    )
    for session_id in sorted({sid for rows in found for sid in rows}):
        yield from forget_session(ws, session_id, deltas)
    yield from execute(
        *(
            Statement("forget leaf titles", q.FORGET_LEAF_TITLES, {"ws": ws, "source": s})
            for s in sorted(set(sources))
        )
    )


#: A write of at least this many vocabulary terms is a bulk write: it leaves the
#: trigram index's pending list to the server's limit (`queries.SMALL_WRITE_PENDING`).
BULK_TERMS = 1000


def apply_deltas(ws: str, deltas: Deltas, *, final: bool = False) -> Work[None]:
    """Fold accumulated deltas into vocabulary and statistics (sorted, batched).

    Additions and removals go in one statement that locks every changed term in
    sorted order: a writer taking them in two passes could hold a removed term
    that another writer needs while waiting for an added one that writer holds.
    All of it is one round trip.
    """
    yield from execute(*_delta_statements(ws, deltas), final=final)


def _delta_statements(ws: str, deltas: Deltas) -> list[Statement[Any]]:
    statements: list[Statement[Any]] = []
    # `get`, not indexing: a Counter's missing key is 0 either way, but indexing calls
    # its `__missing__` in Python for every term a write's other counter lacks.
    df, sf = deltas.df.get, deltas.sf.get
    terms = sorted(t for t in deltas.df.keys() | deltas.sf.keys() if df(t, 0) or sf(t, 0))
    if terms:
        if len(terms) < BULK_TERMS:
            statements.append(Statement("setting", q.SMALL_WRITE_PENDING))
        statements.append(
            Statement(
                "upsert vocabulary",
                q.UPSERT_VOCABULARY,
                {
                    "ws": ws,
                    "rows": _columns(
                        term=terms,
                        stem=[stem(t) for t in terms],
                        df=[df(t, 0) for t in terms],
                        sf=[sf(t, 0) for t in terms],
                    ),
                },
            )
        )
        shrink = [t for t in terms if df(t, 0) < 0 or sf(t, 0) < 0]
        if shrink:
            statements.append(
                Statement("prune vocabulary", q.PRUNE_VOCABULARY, {"ws": ws, "terms": shrink})
            )
    kinds = sorted(set(deltas.n) | set(deltas.indexed) | set(deltas.length))
    if kinds:
        statements.append(
            Statement(
                "upsert statistics",
                q.UPSERT_STATS,
                {
                    "ws": ws,
                    "rows": _columns(
                        kind=kinds,
                        n=[deltas.n[k] for k in kinds],
                        ni=[deltas.indexed[k] for k in kinds],
                        len=[deltas.length[k] for k in kinds],
                    ),
                },
            )
        )
    scoped = sorted(key for key, n in deltas.scoped.items() if n)
    if scoped:
        statements.append(
            Statement(
                "upsert scope counts",
                q.UPSERT_SCOPE_COUNTS,
                {
                    "ws": ws,
                    "rows": _columns(
                        kind=[k for k, _, _ in scoped],
                        role=[r for _, r, _ in scoped],
                        tool=[t for _, _, t in scoped],
                        n=[deltas.scoped[key] for key in scoped],
                    ),
                },
            )
        )
        shrunk = sorted({k for k, r, t in scoped if deltas.scoped[k, r, t] < 0})
        if shrunk:
            statements.append(
                Statement("prune scope counts", q.PRUNE_SCOPE_COUNTS, {"ws": ws, "kinds": shrunk})
            )
    return statements


# --- forget ---------------------------------------------------------------------------


def forget_session(
    ws: str, session_id: str, deltas: Deltas, *, tombstone: bool = False
) -> Work[int]:
    """Delete one session; returns how many messages went (`NotFound` if none existed).

    With `tombstone` (the user forgot it) a session that came from a file is
    remembered as forgotten, and the file's record stays: ingesting the file again
    skips the session (`forgotten_among`) instead of bringing it back. Without, the
    file's record goes too, so the file is read again whole (a rewrite).
    Deltas are updated; the caller applies them in the same transaction.
    """
    messages, _, sessions = yield from fetch_all(
        [
            Statement(
                "delete session messages",
                q.DELETE_SESSION_MESSAGES,
                {"ws": ws, "session_id": session_id},
                as_tuple,
            ),
            # Titles that named this session wait for its messages again.
            Statement(
                "unresolve leaf titles",
                q.UNRESOLVE_LEAF_TITLES,
                {"ws": ws, "session_id": session_id},
            ),
            Statement(
                "delete session", q.DELETE_SESSION, {"ws": ws, "session_id": session_id}, as_tuple
            ),
        ]
    )
    for kind, token_count, terms, role, tool in messages:
        deltas.n[kind] -= 1
        deltas.scoped[kind, role, tool] -= 1
        if token_count:
            deltas.indexed[kind] -= 1
            deltas.length[kind] -= token_count
            for t in terms:
                deltas.df[t] -= 1
    if not sessions:
        if not messages:
            raise NotFound(f"no session {session_id!r} in workspace {ws!r}")
        return len(messages)
    field_terms, source, field_len = sessions[0]
    for t in field_terms:
        deltas.sf[t] -= 1
    if field_terms:
        deltas.indexed[FIELDS_STAT] -= 1
        deltas.length[FIELDS_STAT] -= int(field_len)
    if source and tombstone:
        yield from execute(
            Statement(
                "forget tombstone",
                q.FORGET_TOMBSTONE,
                {"ws": ws, "session_id": session_id, "source": source},
            )
        )
    elif source:
        yield from execute(
            Statement("delete session files", q.DELETE_SESSION_FILES, {"ws": ws, "paths": [source]})
        )
    return len(messages)


def _forgotten_among(ws: str, ids: Sequence[str]) -> Statement[Any]:
    return Statement("forgotten sessions", q.FORGOTTEN_AMONG, {"ws": ws, "ids": list(ids)}, _first)


def forgotten_among(ws: str, session_ids: Iterable[str]) -> Work[set[str]]:
    """Which of `session_ids` the user forgot."""
    rows = yield from fetch(_forgotten_among(ws, sorted(set(session_ids))))
    return {str(r) for r in rows}


def restore_forgotten(ws: str, source: str) -> Work[list[str]]:
    """Drop the tombstones of the sessions forgotten from `source`; returns their ids."""
    return (
        yield from fetch(
            Statement(
                "restore forgotten", q.RESTORE_FORGOTTEN, {"ws": ws, "source": source}, _first
            )
        )
    )


def forget_workspace(ws: str) -> Work[int]:
    """Delete everything of one workspace; returns how many messages went."""
    counts, *_ = yield from fetch_all(
        [
            Statement(
                "message counts",
                "SELECT coalesce(sum(n_messages), 0) FROM workspace_stats "
                "WHERE workspace_id = %(ws)s AND kind <> %(fields)s",
                {"ws": ws, "fields": FIELDS_STAT},
                lambda r: int(r[0]),
            ),
            *(Statement("forget workspace", s, {"ws": ws}) for s in q.FORGET_WORKSPACE),
        ],
        final=True,
    )
    return int(counts[0])


def forget(ws: str, session_id: str | None) -> Work[int]:
    """Delete a session (or the whole workspace) with its statistics, in one unit.

    A forgotten session stays forgotten when its file is ingested again
    (`forget_session`); forgetting a workspace removes everything of it, tombstones
    included, so ingesting its files again starts afresh."""
    if session_id is None:
        return (yield from forget_workspace(ws))
    deltas = Deltas()
    count = yield from forget_session(ws, session_id, deltas, tombstone=True)
    yield from apply_deltas(ws, deltas, final=True)
    return count


# --- reading --------------------------------------------------------------------------


def list_sessions(ws: str, *, limit: int, offset: int) -> Work[list[SessionInfo]]:
    return (
        yield from fetch(
            Statement(
                "list sessions",
                q.LIST_SESSIONS,
                {"ws": ws, "limit": limit, "offset": offset},
                _session_info,
            ),
            final=True,
        )
    )


def workspaces() -> Work[list[str]]:
    return (yield from fetch(Statement("workspaces", q.ALL_WORKSPACES, decode=_first), final=True))


def workspace_stats(ws: str) -> Work[WorkspaceStats]:
    """Per-kind counts, sessions and vocabulary size of one workspace (one round trip)."""
    statements: list[Statement[Any]] = [
        Statement(
            "workspace statistics",
            q.WORKSPACE_STATS,
            {"ws": ws, "fields": FIELDS_STAT},
            lambda r: (str(r[0]), int(r[1]), int(r[2])),
        ),
        Statement(
            "workspace counts",
            q.WORKSPACE_COUNTS,
            {"ws": ws},
            lambda r: (int(r[0]), int(r[1])),
        ),
        Statement(
            "lists lag",
            q.LISTS_LAG,
            {"ws": ws, "limit": 10**9},
            lambda r: ListsLag(built_at=r[0], behind=int(r[1]), terms=int(r[2])),
        ),
    ]
    by_kind, counts, lags = yield from fetch_all(statements, final=True)
    sessions, vocabulary = counts[0]
    lag: ListsLag = lags[0]
    return WorkspaceStats(
        workspace_id=ws,
        sessions=sessions,
        messages=sum(n for _, n, _ in by_kind),
        indexed_messages=sum(ni for _, _, ni in by_kind),
        vocabulary=vocabulary,
        by_kind={k: n for k, n, _ in sorted(by_kind)},
        lists_built_at=lag.built_at,
        lists_behind=lag.behind,
        listed_terms=lag.terms,
    )


def table_sizes(*, citus: bool = False) -> Work[list[TableSize]]:
    """Bytes of each pgsearch table and its indexes (summed over shards on Citus)."""
    return (
        yield from fetch(
            Statement(
                "table sizes",
                q.TABLE_SIZES_CITUS if citus else q.TABLE_SIZES,
                {"tables": list(q.TENANT_TABLES)},
                lambda r: TableSize(table=r[0], table_bytes=int(r[1]), index_bytes=int(r[2])),
            ),
            final=True,
        )
    )


def window(
    ws: str, session_id: str, seq: int, before: int, after: int
) -> Work[tuple[list[StoredMessage], list[StoredMessage]]]:
    """Up to `before` messages before `seq` (nearest first) and `after` + 1 from it on."""
    params = {"ws": ws, "session_id": session_id, "seq": seq}
    statements = [
        Statement("window from", q.WINDOW_FROM, {**params, "n": after + 1}, _stored_message)
    ]
    if before:
        statements.append(
            Statement("window before", q.WINDOW_BEFORE, {**params, "n": before}, _stored_message)
        )
    lists = yield from fetch_all(statements, final=True)
    return lists[0], (lists[1] if before else [])


def session_page(
    ws: str, session_id: str, start_seq: int, limit: int
) -> Work[list[StoredMessage] | None]:
    """Up to `limit` messages from `start_seq` on; None when the session does not exist."""
    exists, rows = yield from fetch2(
        Statement(
            "session exists", q.SESSION_EXISTS, {"ws": ws, "session_id": session_id}, as_tuple
        ),
        Statement(
            "window from",
            q.WINDOW_FROM,
            {"ws": ws, "session_id": session_id, "seq": start_seq, "n": limit},
            _stored_message,
        ),
        final=True,
    )
    return rows if exists else None


def message_estimate(*, citus: bool = False) -> Work[float]:
    """The planner's row estimate for `messages` (-1 before its first ANALYZE)."""
    query = q.MESSAGE_ESTIMATE_CITUS if citus else q.MESSAGE_ESTIMATE
    rows = yield from fetch(Statement("message estimate", query, decode=_first), final=True)
    return float(rows[0]) if rows and rows[0] is not None else -1.0


# --- impact-ordered term lists (`pgsearch.impact`) ----------------------------------


def lists_watermark() -> Work[int]:
    """The newest ingest_seq handed out, once no writer is still storing one below it
    (its own transaction: the lock is held only while it is waited for)."""
    rows = yield from fetch_all(
        [
            Statement("maintenance watermark", q.LISTS_WAIT_WRITERS),
            Statement("maintenance watermark value", q.LISTS_WATERMARK, decode=_first),
        ],
        final=True,
    )
    return int(rows[1][0])


def build_lists(ws: str, watermark: int) -> Work[int]:
    """Rebuild the workspace's term lists in one pass (one transaction), folding in
    every message up to `watermark`; returns how many terms are listed."""
    lock: Statement[Any] = Statement("lists build lock", q.LISTS_BUILD_LOCK, {"ws": ws})
    return (yield from _build_lists(ws, watermark, lock))


def build_lists_unless_busy(ws: str, watermark: int) -> Work[int | None]:
    """`build_lists` unless another builder holds the workspace's lock or the lists
    already fold in `watermark` (a build finished since it was read): then nothing is
    written and the result is None."""
    locked, state = yield from fetch_all(
        [
            Statement("lists try build lock", q.LISTS_TRY_BUILD_LOCK, {"ws": ws}, _first),
            Statement("lists state watermark", q.LISTS_STATE_WATERMARK, {"ws": ws}, _first),
        ]
    )
    if not locked[0] or (state and state[0] is not None and int(state[0]) >= watermark):
        return None
    return (yield from _build_lists(ws, watermark))


def in_recovery() -> Work[bool]:
    """Whether the server is a standby (nothing can be written there)."""
    rows = yield from fetch(Statement("in recovery", q.IN_RECOVERY, decode=_first), final=True)
    return bool(rows[0])


def _build_lists(ws: str, watermark: int, *first: Statement[Any]) -> Work[int]:
    from pgsearch import impact
    from pgsearch.ranking import K1, B

    params = {
        "ws": ws,
        "fields": FIELDS_STAT,
        "min_df": impact.MIN_DF,
        "max_postings": impact.MAX_POSTINGS,
        "chunk": impact.CHUNK,
        "k1": K1,
        "b": B,
        "watermark": watermark,
        "speaker_kinds": [USER_TEXT, ASSISTANT_TEXT],
    }
    *_, state = yield from fetch_all(
        [
            # Sequential scans off: the planner would otherwise read every workspace's
            # vocabulary and statistics for the one being built. (Not a search unit's
            # settings: those plan prepared statements once for any parameters.)
            Statement("lists planner", q.LISTS_PLANNER),
            *first,
            *(Statement("lists clear", s, {"ws": ws}) for s in q.LISTS_CLEAR),
            Statement("lists state", q.LISTS_STATE, params, _first),
        ]
    )
    params["avgdl"] = max(float(state[0]), 1e-9) if state else 1.0
    yield from execute(
        Statement("lists build", q.LISTS_BUILD, params),
        Statement("lists heads", q.LISTS_HEADS, params),
    )
    lag = yield from lists_lag(ws, final=True)
    return lag.terms


@dataclass(frozen=True)
class ListsLag:
    """Whether a workspace's term lists exist, and how far behind they are."""

    built_at: datetime | None
    #: Messages stored since the lists' watermark (counted up to a limit).
    behind: int
    terms: int


def recount_scope(ws: str) -> Work[bool]:
    """Count the workspace's scope counts again from its messages if they no longer add
    up to its per-kind statistics (a writer of a release before them ran, so searches
    count their scopes instead); True when they were recounted. One transaction,
    holding the statistics rows every writer updates before it commits. Planned as
    searches are, through the indexes (a recount reads one workspace's messages)."""
    _, (behind,) = yield from fetch_all(
        [
            Statement("scope planner", q.LISTS_PLANNER),
            Statement(
                "scope counts behind",
                q.SCOPE_COUNTS_BEHIND,
                {"ws": ws, "kinds": list(ALL_KINDS)},
                _first,
            ),
        ]
    )
    if not behind:
        return False
    params = {"ws": ws}
    yield from execute(
        Statement("lock workspace statistics", q.LOCK_WORKSPACE_STATS, params),
        *(
            Statement(f"recount scope counts {i}", sql, params)
            for i, sql in enumerate(q.RECOUNT_SCOPE_COUNTS)
        ),
        final=True,
    )
    return True


def lists_lag(ws: str, *, limit: int = 10**9, final: bool = False) -> Work[ListsLag]:
    rows = yield from fetch(
        Statement(
            "lists lag",
            q.LISTS_LAG,
            {"ws": ws, "limit": limit},
            lambda r: ListsLag(built_at=r[0], behind=int(r[1]), terms=int(r[2])),
        ),
        final=final,
    )
    return rows[0]


def maintenance(statement: LiteralString) -> Work[None]:
    yield from execute(Statement("maintenance", statement), final=True)


def _session_info(r: Sequence[Any]) -> SessionInfo:
    # Titles are shown wherever sessions are listed: scrubbed as an excerpt would be;
    # a session without one is shown by the title its first prompt gives it.
    title = r[1]
    return SessionInfo(
        session_id=r[0],
        title=scrub_secrets(title) if title else None,
        message_count=r[2],
        created_at=r[3],
        updated_at=r[4],
        source=r[5],
        parent_session_id=r[6],
    )


def session_info(ws: str, session_id: str) -> Work[SessionInfo | None]:
    """One session as `list_sessions` shows it; None when it does not exist."""
    rows = yield from fetch(
        Statement(
            "session info", q.SESSION_INFO, {"ws": ws, "session_id": session_id}, _session_info
        ),
        final=True,
    )
    return rows[0] if rows else None


def schema_versions() -> Work[list[str]]:
    """The revisions the version table records (exactly `HEAD_REVISION` when current)."""
    return (
        yield from fetch(Statement("schema versions", q.SCHEMA_VERSIONS, decode=_first), final=True)
    )


# --- API tokens (`pgsearch serve`) --------------------------------------------------


def _api_token(r: Sequence[Any]) -> ApiToken:
    return ApiToken(
        token_id=r[0],
        workspace_id=r[1],
        session_id=r[2],
        can_write=bool(r[3]),
        rate_per_second=None if r[4] is None else float(r[4]),
        label=r[5],
        created_at=r[6],
        revoked_at=r[7],
    )


def create_token(
    ws: str,
    *,
    token_id: str,
    token_hash: str,
    session_id: str | None,
    can_write: bool,
    rate: float | None,
    label: str | None,
) -> Work[ApiToken]:
    rows = yield from fetch(
        Statement(
            "create token",
            q.CREATE_TOKEN,
            {
                "token_id": token_id,
                "token_hash": token_hash,
                "ws": ws,
                "session_id": session_id,
                "can_write": can_write,
                "rate": rate,
                "label": label,
            },
            _api_token,
        ),
        final=True,
    )
    return rows[0]


def token_by_hash(token_hash: str) -> Work[ApiToken | None]:
    """The live (unrevoked) token whose secret hashes to `token_hash`, if any."""
    rows = yield from fetch(
        Statement("token by hash", q.TOKEN_BY_HASH, {"token_hash": token_hash}, _api_token),
        final=True,
    )
    return rows[0] if rows else None


def list_tokens(ws: str | None) -> Work[list[ApiToken]]:
    if ws is None:
        statement = Statement("list tokens", q.LIST_TOKENS, decode=_api_token)
    else:
        statement = Statement(
            "list workspace tokens", q.LIST_WORKSPACE_TOKENS, {"ws": ws}, _api_token
        )
    return (yield from fetch(statement, final=True))


def revoke_token(token_id: str) -> Work[ApiToken | None]:
    """Revoke a live token; None when no live token has that id."""
    rows = yield from fetch(
        Statement("revoke token", q.REVOKE_TOKEN, {"token_id": token_id}, _api_token),
        final=True,
    )
    return rows[0] if rows else None


class Store:
    """Runs the operations above through a `Driver` (the blocking entry points)."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver

    def read(self, work: Callable[[], Work[T]], workspace: str | None, *, context: str) -> T:
        return self.driver.run(Unit(work=work, workspace=workspace, write=False, context=context))

    def write(self, work: Callable[[], Work[T]], workspace: str | None, *, context: str) -> T:
        return self.driver.run(Unit(work=work, workspace=workspace, write=True, context=context))

    def build_lists(self, ws: str) -> int:
        """Rebuild one workspace's term lists (`pgsearch.impact`): a short transaction
        that waits for the writers of the moment and reads the watermark, then the
        build in one transaction of its own (a crash leaves the old lists whole).
        Returns how many terms are listed."""
        watermark = self.write(lists_watermark, None, context="waiting for writers")
        return self.write(partial(build_lists, ws, watermark), ws, context="building term lists")

    def recount_scope(self, ws: str) -> bool:
        """`recount_scope` of one workspace, in a transaction of its own."""
        return self.write(partial(recount_scope, ws), ws, context="recounting scope counts")

    def lists_lag(self, ws: str) -> ListsLag:
        return self.read(partial(lists_lag, ws, final=True), ws, context="reading list lag")

    def keep_lists_current(self, workspaces: Iterable[str]) -> list[str]:
        """Rebuild the term lists of the workspaces that fell behind: more stored
        since their build than `impact.REBUILD_BEHIND`, or never built and holding a
        term frequent enough to list. Returns the workspaces rebuilt."""
        from pgsearch import impact

        rebuilt = []
        for ws in workspaces:
            lag = self.read(
                partial(lists_lag, ws, limit=impact.REBUILD_BEHIND, final=True),
                ws,
                context="reading list lag",
            )
            built = lag.built_at is not None
            if impact.lists_due(
                built=built, behind=lag.behind, rebuild_behind=impact.REBUILD_BEHIND
            ):
                self.build_lists(ws)
                rebuilt.append(ws)
        return rebuilt

    def after_bulk_load(self, added: int) -> None:
        """Merge the message index's pending list and refresh planner statistics.

        After a large load the planner's row estimates are stale until autovacuum
        catches up; a stale estimate can turn the trigram lookup into a filter over a
        whole workspace vocabulary. Both steps need table ownership; without it they
        are skipped (autovacuum does the same work later).
        """
        citus = self.driver.citus
        estimate = self.read(
            partial(message_estimate, citus=citus), None, context="reading table estimates"
        )
        if 0 <= estimate and added < ANALYZE_SHARE * estimate:
            return
        for statement in q.AFTER_BULK_LOAD_CITUS if citus else q.AFTER_BULK_LOAD:
            try:
                self.write(partial(maintenance, statement), None, context="refreshing statistics")
            except StoreError as exc:
                log.info("skipped after a bulk load: %s", exc)
