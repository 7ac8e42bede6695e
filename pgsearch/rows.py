"""Rows the store reads and the pure core consumes: plain frozen data, no I/O.

They are built inside `pgsearch.db` from result rows; nothing outside `db/` unpacks
a positional tuple.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, NamedTuple


@dataclass(frozen=True, kw_only=True, slots=True)
class StoredMessage:
    """A message as stored (raw content), as windows and pages show it."""

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
    #: The session's title and summary, when the read joins them (search pages).
    title: str | None = None
    summary: str | None = None
    #: The session that started this one (a sub-agent's), when the read joins it.
    parent_session_id: str | None = None
    #: The title the session's first prompt gives it (`pgsearch.titles`), when the
    #: read joins it: shown where `title` is None, never matched.
    prompt_title: str | None = None

    @property
    def shown_title(self) -> str | None:
        """The title the session is shown by: its own, else its first prompt's."""
        return self.title or self.prompt_title


#: How a vocabulary term was found for a query word.
How = Literal["exact", "stem", "prefix", "fuzzy"]


@dataclass(frozen=True, kw_only=True, slots=True)
class VocabRow:
    """A vocabulary term found for one query word, with its frequencies."""

    #: 0-based index into `ParsedQuery.texts` (the distinct query words, in order).
    word_index: int
    term: str
    #: Messages holding the term (df) and sessions whose title/summary does (sf).
    df: int
    sf: int
    how: How


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchStats:
    """The workspace's statistics for one search (kept exact by every write)."""

    #: Indexed messages of every kind and their summed length (BM25's N and avgdl).
    n_indexed: int
    total_len: int
    #: Stored entries of the requested kinds (`searched`, when no other filter applies).
    in_scope: int
    #: Sessions with an indexed title or summary, and those fields' summed length.
    n_fields: int
    fields_len: int
    #: Stored entries of every kind (what a walk of the workspace's entries passes).
    n_messages: int = 0


class CandidateRow(NamedTuple):
    """A message matching the candidate statement, with the query terms' frequencies.

    A named tuple rather than a dataclass: a search makes one per candidate (up to a
    few thousand), and a tuple is made in a quarter of a frozen dataclass's time.
    Build it by keyword outside `pgsearch.db`."""

    session_id: str
    seq: int
    kind: str
    role: str
    created_at: datetime
    #: Indexed length in terms (BM25's document length).
    length: int
    #: Term frequency of each query term the message holds.
    tfs: dict[str, int]
    #: True when the message holds one of the query's phrases in order.
    phrase_hit: bool
    #: The stored ``name`` (a speaker's name for user and assistant text).
    speaker: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class FieldRow:
    """A session whose title or summary matches, with the query terms it holds."""

    session_id: str
    field_len: int
    tfs: dict[str, int]
    #: Query terms found in the title, and in the summary.
    in_title: frozenset[str] = field(default=frozenset())
    in_summary: frozenset[str] = field(default=frozenset())


@dataclass(frozen=True, kw_only=True, slots=True)
class TableSize:
    """Bytes one pgsearch table and its indexes take on disk."""

    table: str
    table_bytes: int
    index_bytes: int

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "table_bytes": self.table_bytes,
            "index_bytes": self.index_bytes,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class ApiToken:
    """A bearer token of `pgsearch serve` as stored (its secret is never stored)."""

    token_id: str
    workspace_id: str
    #: When set, the token opens this one session only.
    session_id: str | None
    can_write: bool
    #: Requests per second this token may make (None: the server's default).
    rate_per_second: float | None
    label: str | None
    created_at: datetime
    revoked_at: datetime | None

    def to_json(self) -> dict[str, Any]:
        return {
            "token_id": self.token_id,
            "workspace_id": self.workspace_id,
            "session_id": self.session_id,
            "write": self.can_write,
            "rate_per_second": self.rate_per_second,
            "label": self.label,
            "created_at": self.created_at.isoformat(),
            "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None,
        }
