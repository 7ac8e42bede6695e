"""Appended messages carry a key the store keeps unique within their session.

``messages.append_key``: the message's own id when the caller gave one, else a key
the library assigns per append call (the same on each of its retries); NULL for
messages ingested from files, which files' own records make idempotent. The partial
unique index ``messages_append_key_idx`` on (workspace, session, key) lets an append
whose ``COMMIT`` outcome is unknown be run again: what is already stored is found by
its key and not inserted twice. It holds only appended messages; building it reads
the table once, under a lock that holds writes back meanwhile.

On Citus the index includes ``workspace_id``, the distribution column, as a unique
index there must.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("append_key", sa.Text(), nullable=True))
    op.create_index(
        "messages_append_key_idx",
        "messages",
        ["workspace_id", "session_id", "append_key"],
        unique=True,
        postgresql_where=sa.text("append_key IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("messages_append_key_idx", table_name="messages")
    op.drop_column("messages", "append_key")
