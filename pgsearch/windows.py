"""Windows around a message and pages of a session: checks, reads, shaping.

Each function checks its arguments and returns a unit of work (`pgsearch.db.store`)
that the sync facade (`PgSearch`) and the asyncio one (`AsyncPgSearch`) run on
their own driver, so both answer alike. One round trip each: the window's two reads
(or the page's existence check and read) are independent and travel together.
Bounds and clipping are pure helpers in `pgsearch.excerpt`.
"""

from __future__ import annotations

from collections.abc import Sequence

from pgsearch.db import store
from pgsearch.db.store import Unit, Work
from pgsearch.errors import InvalidQuery, NotFound
from pgsearch.excerpt import clip, window_bounds
from pgsearch.rows import StoredMessage
from pgsearch.types import MAX_RESULT_BYTES, MAX_WINDOW, Window, WindowMessage
from pgsearch.validate import check_key, check_workspace


def _non_negative(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidQuery(f"{name} must be a non-negative integer")


def around(workspace: str, session_id: str, seq: int, before: int, after: int) -> Unit[Window]:
    """Messages around (session, seq): the anchor always included, at most 16 in all."""
    check_workspace(workspace)
    check_key("session_id", session_id)
    for name, value in (("seq", seq), ("before", before), ("after", after)):
        _non_negative(name, value)
    nb, na = window_bounds(before, after, MAX_WINDOW)

    def work() -> Work[Window]:
        from_anchor, earlier = yield from store.window(workspace, session_id, seq, nb, na)
        if not from_anchor or from_anchor[0].seq != seq:
            raise NotFound(f"no message {session_id!r} seq {seq} in workspace {workspace!r}")
        return Window(
            workspace_id=workspace,
            session_id=session_id,
            anchor_seq=seq,
            messages=_messages([*reversed(earlier), *from_anchor], anchor=seq),
        )

    return Unit(
        work=work, workspace=workspace, write=False, search=True, context="reading a window"
    )


def page(workspace: str, session_id: str, start_seq: int, limit: int) -> Unit[Window]:
    """One page of a session's messages from `start_seq`; `next_seq` continues."""
    check_workspace(workspace)
    check_key("session_id", session_id)
    if isinstance(start_seq, bool) or not isinstance(start_seq, int) or start_seq < 0:
        raise InvalidQuery("start_seq must be a non-negative integer")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidQuery("limit must be a positive integer")
    limit = min(limit, MAX_WINDOW)

    def work() -> Work[Window]:
        rows = yield from store.session_page(workspace, session_id, start_seq, limit + 1)
        if rows is None:
            raise NotFound(f"no session {session_id!r} in workspace {workspace!r}")
        more = len(rows) > limit
        rows = rows[:limit]
        return Window(
            workspace_id=workspace,
            session_id=session_id,
            anchor_seq=start_seq,
            messages=_messages(rows, anchor=None),
            next_seq=rows[-1].seq + 1 if more and rows else None,
        )

    return Unit(
        work=work, workspace=workspace, write=False, search=True, context="listing a session"
    )


def _messages(rows: Sequence[StoredMessage], *, anchor: int | None) -> tuple[WindowMessage, ...]:
    per_message = MAX_RESULT_BYTES // max(len(rows), 1)
    out = []
    for m in rows:
        text = m.content if not m.arguments else (
            f"{m.content}\n{m.arguments}" if m.content else m.arguments
        )  # fmt: skip
        out.append(
            WindowMessage(
                session_id=m.session_id,
                seq=m.seq,
                entry_id=m.entry_id or f"{m.session_id}:{m.seq}",
                kind=m.kind,
                role=m.role,
                turn=m.turn,
                tool_name=m.tool_name,
                created_at=m.created_at,
                content=clip(text, per_message),
                anchor=m.seq == anchor,
            )
        )
    return tuple(out)
