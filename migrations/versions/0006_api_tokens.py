"""API tokens for `pgsearch serve`: bearer credentials that pin a scope.

``api_tokens`` holds one row per token: the SHA-256 of the secret (never the
secret itself), the workspace it is bound to, optionally one session, whether it
may write, and an optional request rate. A token is revoked by stamping
``revoked_at``; revoked rows stay, so that a listing shows what existed.

It is not a tenant table: a request's token is looked up before any workspace is
known, so the table has no Row Level Security policy and its keys do not lead
with ``workspace_id`` (as ``pgsearch_meta``). Only the hash is readable there.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from pgsearch.db import citus

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("token_id", sa.Text(), nullable=False),
        sa.Column("token_hash", sa.Text(), nullable=False),
        sa.Column("workspace_id", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=True),
        sa.Column("can_write", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("rate_per_second", sa.Float(), nullable=True),
        sa.Column("label", sa.Text(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("token_id", name="api_tokens_pkey"),
        sa.UniqueConstraint("token_hash", name="api_tokens_hash_key"),
    )
    # On Citus, a reference table (a copy on every node), as pgsearch_meta: a token is
    # looked up by its hash before any workspace is known.
    citus.reference(op.get_bind(), "api_tokens")
    op.create_index("api_tokens_workspace_idx", "api_tokens", ["workspace_id", "created_at"])


def downgrade() -> None:
    op.drop_table("api_tokens")
