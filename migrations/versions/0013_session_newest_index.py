"""A session's entries from its newest: ``messages_session_created_idx``.

The index orders each session's entries by time, then position, newest first. A
search for frequent words shows one entry per session: the newest match of each of
the newest sessions. It is read walking those sessions' ends on this index (a few
entries each) instead of reading every match of the words (`pgsearch.db.queries.
session_spread_walk_sql`).

On Citus the index is made on every shard of ``messages`` like its others.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "messages_session_created_idx",
        "messages",
        ["workspace_id", "session_id", sa.text("created_at DESC"), sa.text("seq DESC")],
    )


def downgrade() -> None:
    op.drop_index("messages_session_created_idx", table_name="messages")
