"""Every session has a title: the one its first user prompt gives it, stored.

``sessions.prompt_title``: the title a session's first user prompt that reads as
one gives it (`pgsearch.titles`: markup and Markdown marks out, cut on a word),
made by ingest when that prompt is stored. It is shown wherever the session is
named and has no title of its own (``title`` wins whenever it comes); it is not
indexed, so searching and ranking are what they were.

The sessions stored before are titled here, in batches of `BATCH` sessions of one
workspace each: one statement reads a batch's sessions with their first prompt,
another reads the first `PROMPTS_READ` prompts of those whose first prompt did not
read as a title, and one statement stores the batch's titles. Every statement
names its workspace, so on Citus each is a router query to one shard. The
revision is one transaction: the sessions table is locked meanwhile, and a session
is titled completely or not at all.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from pgsearch.titles import PROMPT_CHARS, PROMPTS_READ, prompt_title

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: Sessions titled per batch.
BATCH = 1000

_WORKSPACES = sa.text("SELECT DISTINCT workspace_id FROM sessions ORDER BY 1")

# A batch of sessions after `after`, each with its first prompt (read through the
# messages' primary key from the session's first entry on).
_FIRST_PROMPT = sa.text("""
SELECT s.session_id, ARRAY(
    SELECT substr(f.content, 1, :chars) FROM messages f
    WHERE f.workspace_id = :ws AND f.session_id = s.session_id AND f.kind = 'user_text'
    ORDER BY f.seq LIMIT 1)
FROM sessions s
WHERE s.workspace_id = :ws AND s.session_id > :after
ORDER BY s.session_id LIMIT :n
""")

# The first prompts of sessions whose first one did not read as a title.
_FIRST_PROMPTS = sa.text("""
SELECT s.session_id, ARRAY(
    SELECT substr(f.content, 1, :chars) FROM messages f
    WHERE f.workspace_id = :ws AND f.session_id = s.session_id AND f.kind = 'user_text'
    ORDER BY f.seq LIMIT :k)
FROM sessions s
WHERE s.workspace_id = :ws AND s.session_id = ANY(:ids)
""")

_STORE = sa.text("""
UPDATE sessions AS s SET prompt_title = u.prompt_title
FROM json_to_recordset(CAST(:rows AS json)) AS u(session_id text, prompt_title text)
WHERE s.workspace_id = :ws AND s.session_id = u.session_id
""")


def upgrade() -> None:
    op.add_column("sessions", sa.Column("prompt_title", sa.Text(), nullable=True))
    conn = op.get_bind()
    for (ws,) in conn.execute(_WORKSPACES).fetchall():
        after = ""
        while True:
            batch = conn.execute(
                _FIRST_PROMPT, {"ws": ws, "after": after, "n": BATCH, "chars": PROMPT_CHARS}
            ).fetchall()
            if not batch:
                break
            _title(conn, ws, batch)
            after = batch[-1][0]
            if len(batch) < BATCH:
                break


def _title(conn: Any, ws: str, batch: Sequence[Any]) -> None:
    """Store the titles of a batch of sessions (read with their first prompt)."""
    titles: dict[str, str] = {}
    again: list[str] = []
    for session_id, prompts in batch:
        title = prompt_title(prompts)
        if title is not None:
            titles[session_id] = title
        elif prompts:
            again.append(session_id)
    if again:
        rows = conn.execute(
            _FIRST_PROMPTS, {"ws": ws, "ids": again, "k": PROMPTS_READ, "chars": PROMPT_CHARS}
        ).fetchall()
        for session_id, prompts in rows:
            title = prompt_title(prompts)
            if title is not None:
                titles[session_id] = title
    if titles:
        rows = [{"session_id": k, "prompt_title": v} for k, v in sorted(titles.items())]
        conn.execute(_STORE, {"ws": ws, "rows": json.dumps(rows, ensure_ascii=False)})


def downgrade() -> None:
    op.drop_column("sessions", "prompt_title")
