"""Rows the store reads and the pure core consumes: plain frozen data, no I/O.

They are built inside `pgsearch.db` from result rows; nothing outside `db/` unpacks
a positional tuple.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


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
