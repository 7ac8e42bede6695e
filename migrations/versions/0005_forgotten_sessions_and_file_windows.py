"""Forgotten sessions stay forgotten; files are recognised by bounded digests.

- ``forgotten_sessions``: a session forgotten by the user, with the file it came
  from. Ingest (and ``--watch``) skip its entries until ``ingest
  --include-forgotten`` asks for it back.
- ``ingested_files.head_digest`` / ``tail_digest``: SHA-256 of the first and of the
  last 64 KiB of the bytes read (`pgsearch.ingest.FILE_WINDOW`). A grown file is
  checked against those windows and its size instead of hashing everything read
  before, and a file found at a new path is recognised by its head
  (``ingested_files_head_idx``) and re-homed. NULL for files recorded before 0005
  (their whole-prefix ``digest`` is checked once, then the windows are recorded).
- ``sessions_source_idx``: sessions by the file they came from (rewrites, moves).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from pgsearch.db import citus

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Spelled out rather than imported, as in 0002.
POLICY = "pgsearch_workspace_isolation"
BOUND = "workspace_id = current_setting('pgsearch.workspace_id', true)"


def upgrade() -> None:
    op.create_table(
        "forgotten_sessions",
        sa.Column("workspace_id", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("source", sa.Text(), nullable=True),
        sa.Column(
            "forgotten_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("workspace_id", "session_id", name="forgotten_sessions_pkey"),
    )
    # On Citus, distributed with the other tenant tables before its index.
    citus.distribute(op.get_bind(), "forgotten_sessions")
    op.create_index(
        "forgotten_sessions_source_idx", "forgotten_sessions", ["workspace_id", "source"]
    )
    op.execute(f"CREATE POLICY {POLICY} ON forgotten_sessions USING ({BOUND}) WITH CHECK ({BOUND})")
    op.execute("ALTER TABLE forgotten_sessions ENABLE ROW LEVEL SECURITY")
    op.add_column("ingested_files", sa.Column("head_digest", sa.Text(), nullable=True))
    op.add_column("ingested_files", sa.Column("tail_digest", sa.Text(), nullable=True))
    op.create_index("ingested_files_head_idx", "ingested_files", ["workspace_id", "head_digest"])
    op.create_index("sessions_source_idx", "sessions", ["workspace_id", "source"])


def downgrade() -> None:
    op.drop_index("sessions_source_idx", table_name="sessions")
    op.drop_index("ingested_files_head_idx", table_name="ingested_files")
    op.drop_column("ingested_files", "tail_digest")
    op.drop_column("ingested_files", "head_digest")
    op.drop_table("forgotten_sessions")
