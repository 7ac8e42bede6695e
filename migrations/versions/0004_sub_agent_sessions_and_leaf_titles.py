"""Sub-agent sessions, titles that name their session by a message, parser versions.

- ``sessions.parent_session_id``: a sub-agent (sidechain) conversation is a session
  of its own, linked to the session that started it.
- ``sessions.title_auto`` and ``sessions.title_leaf_seq``: whether the title was
  generated (a Claude Code ``summary`` or ``ai-title`` line) rather than chosen
  (``/rename``, a ``title`` field), and for a summary, the seq of the message it
  names; a chosen title is never replaced by a generated one, and a summary naming
  a later message replaces one naming an earlier message.
- ``leaf_titles``: Claude Code ``summary`` lines name their session through the
  uuid of one of its messages (``leafUuid``), which may live in another file or
  arrive in a later run. Each line is kept here until that message is stored;
  the partial index on ``messages.entry_id`` resolves it either way.
- ``ingested_files.parser``: the format and mapping version a file was read with;
  a file read by an older mapping is read again whole.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from pgsearch.db import citus

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Spelled out rather than imported, as in 0002.
POLICY = "pgsearch_workspace_isolation"
BOUND = "workspace_id = current_setting('pgsearch.workspace_id', true)"


def upgrade() -> None:
    op.add_column("sessions", sa.Column("parent_session_id", sa.Text(), nullable=True))
    op.add_column(
        "sessions",
        sa.Column("title_auto", sa.Boolean(), server_default=sa.text("false"), nullable=False),
    )
    op.add_column("sessions", sa.Column("title_leaf_seq", sa.Integer(), nullable=True))
    op.add_column("ingested_files", sa.Column("parser", sa.Text(), nullable=True))
    op.create_index(
        "messages_entry_idx",
        "messages",
        ["workspace_id", "entry_id"],
        postgresql_where=sa.text("entry_id IS NOT NULL"),
    )
    op.create_table(
        "leaf_titles",
        sa.Column("workspace_id", sa.Text(), nullable=False),
        sa.Column("leaf_uuid", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=True),
        sa.Column("leaf_seq", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("workspace_id", "leaf_uuid", name="leaf_titles_pkey"),
    )
    # On Citus, distributed with the other tenant tables before its indexes.
    citus.distribute(op.get_bind(), "leaf_titles")
    op.create_index("leaf_titles_session_idx", "leaf_titles", ["workspace_id", "session_id"])
    op.create_index("leaf_titles_source_idx", "leaf_titles", ["workspace_id", "source"])
    op.execute(f"CREATE POLICY {POLICY} ON leaf_titles USING ({BOUND}) WITH CHECK ({BOUND})")
    op.execute("ALTER TABLE leaf_titles ENABLE ROW LEVEL SECURITY")


def downgrade() -> None:
    op.drop_table("leaf_titles")
    op.drop_index("messages_entry_idx", table_name="messages")
    op.drop_column("ingested_files", "parser")
    op.drop_column("sessions", "title_leaf_seq")
    op.drop_column("sessions", "title_auto")
    op.drop_column("sessions", "parent_session_id")
