"""What the store's search reads return: typed rows, built in `pgsearch.db` (pure).

The planner (`pgsearch.plan`) and the engine consume these; only the store layer
knows which columns and encodings (tsvector text, weight letters) they come from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

#: How a vocabulary term was found for a query word.
How = Literal["exact", "stem", "prefix", "fuzzy"]


@dataclass(frozen=True, slots=True, kw_only=True)
class VocabRow:
    """A vocabulary term found for one query word, with its frequencies."""

    #: 0-based index into `ParsedQuery.texts` (the distinct query words, in order).
    word_index: int
    term: str
    #: Messages holding the term (df) and sessions whose title/summary does (sf).
    df: int
    sf: int
    how: How


@dataclass(frozen=True, slots=True, kw_only=True)
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


@dataclass(frozen=True, slots=True, kw_only=True)
class CandidateRow:
    """A message matching the candidate statement, with the query terms' frequencies."""

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


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldRow:
    """A session whose title or summary matches, with the query terms it holds."""

    session_id: str
    field_len: int
    tfs: dict[str, int]
    #: Query terms found in the title, and in the summary.
    in_title: frozenset[str] = field(default=frozenset())
    in_summary: frozenset[str] = field(default=frozenset())


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredMessage:
    """A stored entry as a result shows it (title and summary of its session, if read)."""

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
    title: str | None = None
    summary: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BrowseRow:
    """An entry of a browse page (newest first)."""

    session_id: str
    seq: int
    kind: str
    role: str
    created_at: datetime
