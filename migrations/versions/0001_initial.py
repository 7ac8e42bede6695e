"""Initial schema: sessions, messages, vocabulary, per-workspace statistics.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from pgsearch.db import citus

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    op.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")

    op.create_table(
        "pgsearch_meta",
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pgsearch_meta_pkey"),
    )
    op.create_table(
        "workspace_stats",
        sa.Column("workspace_id", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("n_messages", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("n_indexed", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("total_len", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.PrimaryKeyConstraint("workspace_id", "kind", name="workspace_stats_pkey"),
    )

    op.create_table(
        "sessions",
        sa.Column("workspace_id", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.Column("agent", sa.Text(), nullable=True),
        sa.Column("source", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("message_count", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("next_seq", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("last_turn", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("tsv", postgresql.TSVECTOR(), nullable=True),
        sa.Column("field_len", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.PrimaryKeyConstraint("workspace_id", "session_id", name="sessions_pkey"),
    )
    op.create_table(
        "messages",
        sa.Column("workspace_id", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("entry_id", sa.Text(), nullable=True),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("role", sa.Text(), nullable=False),
        sa.Column("turn", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("tool_name", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("arguments", sa.Text(), server_default=sa.text("''"), nullable=False),
        sa.Column("extra", postgresql.JSONB(), nullable=True),
        sa.Column("tsv", postgresql.TSVECTOR(), nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["workspace_id", "session_id"],
            ["sessions.workspace_id", "sessions.session_id"],
            name="messages_session_fkey",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("workspace_id", "session_id", "seq", name="messages_pkey"),
    )
    # The planner's guesses for tsvector matches drive the choice between the GIN
    # index and the browse index; finer statistics make them better.
    op.execute("ALTER TABLE messages ALTER COLUMN tsv SET STATISTICS 1000")

    op.create_table(
        "vocabulary",
        sa.Column("workspace_id", sa.Text(), nullable=False),
        sa.Column("term", sa.Text(collation="C"), nullable=False),
        sa.Column("stem", sa.Text(collation="C"), nullable=False),
        sa.Column("df", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("sf", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.PrimaryKeyConstraint("workspace_id", "term", name="vocabulary_pkey"),
    )
    op.create_table(
        "ingested_files",
        sa.Column("workspace_id", sa.Text(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("lines", sa.Integer(), nullable=False),
        sa.Column("digest", sa.Text(), nullable=False),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("workspace_id", "path", name="ingested_files_pkey"),
    )

    # On Citus: distributed by workspace (reference for the table every tenant shares)
    # before any index or row, so that each index is built on every shard.
    bind = op.get_bind()
    citus.reference(bind, "pgsearch_meta")
    for table in ("sessions", "messages", "vocabulary", "workspace_stats", "ingested_files"):
        citus.distribute(bind, table)

    # Signs search cursors so a tampered cursor is rejected.
    op.execute(
        sa.text("INSERT INTO pgsearch_meta (key, value) VALUES ('cursor_key', :v)").bindparams(
            v=secrets.token_hex(32)
        )
    )

    op.create_index(
        "sessions_tsv_idx",
        "sessions",
        ["workspace_id", "tsv"],
        postgresql_using="gin",
        postgresql_with={"fastupdate": "off"},
    )
    op.create_index(
        "sessions_updated_idx", "sessions", ["workspace_id", sa.text("updated_at DESC")]
    )

    # New entries go to GIN's pending list and are merged in bulk: about 3x cheaper
    # than inserting each entry into the tree. A small list limit bounds both the
    # merge an unlucky insert pays and the list every search scans; bulk ingest
    # merges the list itself when it finishes (gin_clean_pending_list).
    op.create_index(
        "messages_tsv_idx",
        "messages",
        ["workspace_id", "tsv"],
        postgresql_using="gin",
        postgresql_with={"fastupdate": "on", "gin_pending_list_limit": "1024"},
    )
    op.create_index(
        "messages_created_idx",
        "messages",
        ["workspace_id", sa.text("created_at DESC"), "session_id", "seq"],
    )

    op.create_index(
        "vocabulary_term_trgm_idx",
        "vocabulary",
        ["workspace_id", "term"],
        postgresql_using="gin",
        postgresql_ops={"term": "gin_trgm_ops"},
    )
    op.create_index("vocabulary_stem_idx", "vocabulary", ["workspace_id", "stem"])


def downgrade() -> None:
    op.drop_table("ingested_files")
    op.drop_index("vocabulary_stem_idx", table_name="vocabulary")
    op.drop_index("vocabulary_term_trgm_idx", table_name="vocabulary")
    op.drop_table("vocabulary")
    op.drop_index("messages_created_idx", table_name="messages")
    op.drop_index("messages_tsv_idx", table_name="messages")
    op.drop_table("messages")
    op.drop_index("sessions_updated_idx", table_name="sessions")
    op.drop_index("sessions_tsv_idx", table_name="sessions")
    op.drop_table("sessions")
    op.drop_table("workspace_stats")
    op.drop_table("pgsearch_meta")
