"""The provider seam: `SessionQuery` and its request, match and result types."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from pgsearch.plan import SearchTrace

from pgsearch.errors import ScopeError

#: Results per page when the request does not say, and the most any request gets.
DEFAULT_LIMIT = 10
MAX_LIMIT = 50
#: Excerpt size in UTF-8 bytes: default and hard cap.
DEFAULT_EXCERPT_BYTES = 600
MAX_EXCERPT_BYTES = 2000
#: Around a message: default messages each side, and the most in one window.
DEFAULT_CONTEXT = 3
MAX_WINDOW = 16
#: One result never carries more text than this (bytes, excerpts and titles).
MAX_RESULT_BYTES = 30_000
#: Longest stored key (session id, entry id, tool name), in characters: longer ones
#: are rejected on ingest and could never match in a request.
MAX_ID_CHARS = 256


@dataclass(frozen=True, kw_only=True)
class Scope:
    """Where a provider may look: fixed by the host, never by a request."""

    workspace: str
    session_id: str | None = None

    def narrow(self, session_id: str) -> str:
        """`session_id` when this scope may open it, else `ScopeError`."""
        if self.session_id is not None and session_id != self.session_id:
            raise ScopeError(
                f"this provider is bound to session {self.session_id!r}; "
                f"it cannot open session {session_id!r}"
            )
        return session_id


@dataclass(frozen=True, kw_only=True)
class SessionQueryRequest:
    """What to search. Empty `query` browses the newest entries in scope."""

    query: str = ""
    kinds: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    tool_name: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int = DEFAULT_LIMIT
    excerpt_bytes: int = DEFAULT_EXCERPT_BYTES
    per_session: bool = True
    cursor: str | None = None
    #: Narrow to one session (a session-pinned provider already is).
    session_id: str | None = None
    #: Must equal the provider's workspace when given; never widens scope.
    workspace_id: str | None = None


@dataclass(frozen=True, kw_only=True)
class SessionMatch:
    """One hit: where it is, what it is, and an excerpt with its matched words given
    apart, as code-point ranges of it (`pgsearch.highlight`)."""

    workspace_id: str
    session_id: str
    entry_id: str
    seq: int
    kind: str
    turn: int
    role: str
    tool_name: str | None
    excerpt: str
    created_at: datetime
    score: float
    title: str | None
    #: For a sub-agent's session, the session that started it; else None.
    parent_session_id: str | None = None
    #: The matched words of `excerpt`: ``(start, end)`` code-point offsets, end
    #: exclusive, in order, not overlapping.
    highlights: tuple[tuple[int, int], ...] = ()

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["created_at"] = self.created_at.isoformat()
        data["score"] = round(self.score, 6)
        data["highlights"] = [list(span) for span in self.highlights]
        return data


@dataclass(frozen=True, kw_only=True)
class SessionQueryResult:
    matches: tuple[SessionMatch, ...]
    #: Entries in scope (after filters): "no match in a big log" vs "nearly empty log".
    searched: int
    next_cursor: str | None = None
    #: True when more messages matched than the candidate cap allowed to re-rank.
    candidates_capped: bool = False
    #: True when the ranking may differ from an uncapped run of the same rules: a
    #: cap or the scan limit cut a read (``--explain`` says which). False: exact,
    #: every hit the rules define was scored, so these are the true best matches.
    approximate: bool = False
    #: Why the result is empty when that is not obvious (e.g. no searchable words).
    notice: str | None = None
    #: Diagnostics: the statements run and their plans (``explain=True`` only).
    explain: tuple[str, ...] = field(default=(), compare=False)
    #: Diagnostics: the search's plans and statements (``explain=True`` only).
    trace: SearchTrace | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "matches": [m.to_json() for m in self.matches],
            "searched": self.searched,
            "next_cursor": self.next_cursor,
            "candidates_capped": self.candidates_capped,
            "approximate": self.approximate,
            "notice": self.notice,
        }


@dataclass(frozen=True, kw_only=True)
class SessionInfo:
    """One session as `PgSearch.sessions` lists it."""

    session_id: str
    title: str | None
    message_count: int
    created_at: datetime | None
    updated_at: datetime | None
    source: str | None
    #: For a sub-agent's session, the session that started it.
    parent_session_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "title": self.title,
            "message_count": self.message_count,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "updated_at": self.updated_at.isoformat() if self.updated_at else None,
            "source": self.source,
            "parent_session_id": self.parent_session_id,
        }


@dataclass(frozen=True, kw_only=True)
class WorkspaceStats:
    """Counts of one workspace (`PgSearch.stats`)."""

    workspace_id: str
    sessions: int
    messages: int
    indexed_messages: int
    vocabulary: int
    by_kind: dict[str, int]
    #: When the term lists of bounded searches were last built (None: never), how
    #: many messages were stored since (the compaction's lag), and how many terms
    #: they list (`pgsearch.impact`).
    lists_built_at: datetime | None = None
    lists_behind: int = 0
    listed_terms: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "workspace_id": self.workspace_id,
            "sessions": self.sessions,
            "messages": self.messages,
            "indexed_messages": self.indexed_messages,
            "vocabulary": self.vocabulary,
            "by_kind": dict(self.by_kind),
            "lists_built_at": None
            if self.lists_built_at is None
            else self.lists_built_at.isoformat(),
            "lists_behind": self.lists_behind,
            "listed_terms": self.listed_terms,
        }


@runtime_checkable
class SessionQuery(Protocol):
    """What an agent runtime calls to search session history."""

    def search(self, request: SessionQueryRequest) -> SessionQueryResult: ...


@dataclass(frozen=True, kw_only=True)
class WindowMessage:
    """A stored message as shown in a window (raw content)."""

    session_id: str
    seq: int
    entry_id: str
    kind: str
    role: str
    turn: int
    tool_name: str | None
    created_at: datetime
    content: str
    anchor: bool = False

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["created_at"] = self.created_at.isoformat()
        return data


@dataclass(frozen=True, kw_only=True)
class Window:
    workspace_id: str
    session_id: str
    anchor_seq: int
    messages: tuple[WindowMessage, ...]
    #: Seq to pass as `--seq` for the next page of a session listing, if any.
    next_seq: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "workspace_id": self.workspace_id,
            "session_id": self.session_id,
            "anchor_seq": self.anchor_seq,
            "messages": [m.to_json() for m in self.messages],
            "next_seq": self.next_seq,
        }


class ScopedProvider(Protocol):
    """A `SessionQuery` pinned to a scope that also opens windows and pages
    (`pgsearch.Provider`; the agent tools need no more than this)."""

    @property
    def scope(self) -> Scope: ...

    def search(self, request: SessionQueryRequest) -> SessionQueryResult: ...

    def around(
        self, session_id: str, seq: int, *, before: int = ..., after: int = ...
    ) -> Window: ...

    def session_messages(
        self, session_id: str, *, start_seq: int = ..., limit: int = ...
    ) -> Window: ...


@runtime_checkable
class AsyncSessionQuery(Protocol):
    """`SessionQuery` for asyncio hosts."""

    async def search(self, request: SessionQueryRequest) -> SessionQueryResult: ...


class AsyncScopedProvider(Protocol):
    """`ScopedProvider` with coroutines (`pgsearch.aio.AsyncProvider`)."""

    @property
    def scope(self) -> Scope: ...

    async def search(self, request: SessionQueryRequest) -> SessionQueryResult: ...

    async def around(
        self, session_id: str, seq: int, *, before: int = ..., after: int = ...
    ) -> Window: ...

    async def session_messages(
        self, session_id: str, *, start_seq: int = ..., limit: int = ...
    ) -> Window: ...
