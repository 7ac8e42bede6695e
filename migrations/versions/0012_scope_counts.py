"""How many entries each workspace holds per kind, role and tool: a scope's size.

``scope_counts`` holds, per workspace, the number of messages of each (kind, role,
tool name) found among them (``tool_name`` is ``''`` for none). A search with a role
or tool filter says how many entries its scope held (``searched``) by summing these
rows instead of counting the workspace's messages; writers keep them current with
the per-kind statistics, in the same transaction.

The table is filled from the messages stored so far. Writers of an earlier release
still running during a deploy do not know it: a search takes the sums only while,
kind by kind, they add up to ``workspace_stats`` (which every release keeps), and
counts the messages otherwise; `pgsearch maintain` counts them again.

A tenant table: distributed by workspace on Citus like the others and isolated by
the same row level security policy.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from pgsearch.db import citus

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Spelled out rather than imported, as in 0002.
POLICY = "pgsearch_workspace_isolation"
BOUND = "workspace_id = current_setting('pgsearch.workspace_id', true)"


def upgrade() -> None:
    op.create_table(
        "scope_counts",
        sa.Column("workspace_id", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("role", sa.Text(), nullable=False),
        sa.Column("tool_name", sa.Text(), nullable=False),
        sa.Column("n_messages", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "workspace_id", "kind", "role", "tool_name", name="scope_counts_pkey"
        ),
    )
    # On Citus, distributed with the other tenant tables (co-located by workspace),
    # before its rows: the fill below then runs on each shard.
    citus.distribute(op.get_bind(), "scope_counts")
    op.execute(
        "INSERT INTO scope_counts (workspace_id, kind, role, tool_name, n_messages) "
        "SELECT workspace_id, kind, role, coalesce(tool_name, ''), count(*) FROM messages "
        "GROUP BY workspace_id, kind, role, coalesce(tool_name, '')"
    )
    op.execute(f"CREATE POLICY {POLICY} ON scope_counts USING ({BOUND}) WITH CHECK ({BOUND})")
    op.execute("ALTER TABLE scope_counts ENABLE ROW LEVEL SECURITY")


def downgrade() -> None:
    op.drop_table("scope_counts")
