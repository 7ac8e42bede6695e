"""Row Level Security on every tenant table, keyed by the bound workspace.

A role that does not own the tables (the application role of a multi-tenant
deployment) sees and writes only rows whose ``workspace_id`` equals the
transaction's ``pgsearch.workspace_id`` setting, which pgsearch sets with
``SET LOCAL`` in every transaction when ``PGSEARCH_RLS`` is on. A transaction that
names no workspace sees nothing. The table owner (who runs migrations) and
superusers bypass the policies, so deployments without RLS are unchanged; pgsearch
refuses to open a connection whose role is subject to the policies while
``PGSEARCH_RLS`` is off, rather than return silently empty results.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Spelled out rather than imported: a migration must keep meaning what it meant
# when it was written, whatever later code says.
TENANT_TABLES = ("workspace_stats", "sessions", "messages", "vocabulary", "ingested_files")
POLICY = "pgsearch_workspace_isolation"
BOUND = "workspace_id = current_setting('pgsearch.workspace_id', true)"


def upgrade() -> None:
    # One statement per transaction: enabling RLS needs an exclusive lock on the
    # table, and a migration holding one table while waiting for the next would
    # deadlock with running searches and writes, which take tables in different
    # orders. Holding one lock at a time, it only ever waits for a table to drain.
    # Each step can be repeated, so a run cut short is simply run again.
    with op.get_context().autocommit_block():
        for table in TENANT_TABLES:
            # The policy first: it does nothing until RLS is on, and RLS without a
            # policy would hide every row from the application role.
            op.execute(f"DROP POLICY IF EXISTS {POLICY} ON {table}")
            op.execute(f"CREATE POLICY {POLICY} ON {table} USING ({BOUND}) WITH CHECK ({BOUND})")
            op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        for table in reversed(TENANT_TABLES):
            op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
            op.execute(f"DROP POLICY IF EXISTS {POLICY} ON {table}")
