"""Impact-ordered postings of a workspace's frequent terms, for bounded searches.

- ``messages.ingest_seq``: the order messages were stored in (from a sequence,
  through a function of its owner so that a writer needs no privilege on it; NULL
  for messages stored before 0010), indexed per workspace where set
  (``messages_ingest_seq_idx``): the messages stored after a workspace's lists were
  built (its *tail*) are read by it.
- ``term_lists``: for each term found in at least `pgsearch.impact.MIN_DF` messages
  of a workspace, its postings with the largest BM25 term impact (at most
  `pgsearch.impact.MAX_POSTINGS`), best first, in chunks of `pgsearch.impact.CHUNK`:
  each row the chunk's message keys, its largest impact and the largest after it.
- ``term_list_heads``: per listed term, its document frequency when built, the
  largest impact of each chunk and of the postings left out (``theta``).
- ``term_list_state``: per workspace, the newest ``ingest_seq`` the lists fold in
  (the watermark), the average length they were ordered with, and the speaker
  names of its messages (a query word naming one scores without being in the text).

All three are tenant tables, distributed by workspace on Citus like the others and
isolated by the same row level security policy. They are rebuilt whole, one
workspace a transaction (`pgsearch.impact`), so losing them loses nothing stored.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from pgsearch.db import citus

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Spelled out rather than imported, as in 0002.
POLICY = "pgsearch_workspace_isolation"
BOUND = "workspace_id = current_setting('pgsearch.workspace_id', true)"
TABLES = ("term_lists", "term_list_heads", "term_list_state")


def upgrade() -> None:
    op.execute("CREATE SEQUENCE IF NOT EXISTS messages_ingest_seq AS bigint")
    # Writers may hold privileges on the tables only: the sequence is advanced by its
    # owner's functions, which every role may call. They name the schema they are
    # made in (their search_path is fixed, as a SECURITY DEFINER function's must be).
    schema = op.get_bind().execute(sa.text("SELECT quote_ident(current_schema())")).scalar()
    seq = f"{schema}.messages_ingest_seq"
    op.execute(
        "CREATE FUNCTION pgsearch_next_ingest_seq() RETURNS bigint LANGUAGE sql VOLATILE "
        f"SECURITY DEFINER SET search_path = pg_catalog, {schema} "
        f"AS $$SELECT nextval('{seq}')$$"
    )
    # The newest value handed out (0 before the first): with writers held back, every
    # message up to it is committed (`pgsearch.db.queries.LISTS_WATERMARK`).
    op.execute(
        "CREATE FUNCTION pgsearch_ingest_watermark() RETURNS bigint LANGUAGE sql STABLE "
        f"SECURITY DEFINER SET search_path = pg_catalog, {schema} "
        f"AS $$SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {seq}$$"
    )
    op.add_column("messages", sa.Column("ingest_seq", sa.BigInteger(), nullable=True))
    op.execute(
        "ALTER TABLE messages ALTER COLUMN ingest_seq SET DEFAULT pgsearch_next_ingest_seq()"
    )
    op.create_index(
        "messages_ingest_seq_idx",
        "messages",
        ["workspace_id", "ingest_seq"],
        postgresql_where=sa.text("ingest_seq IS NOT NULL"),
    )
    op.create_table(
        "term_lists",
        sa.Column("workspace_id", sa.Text(), nullable=False),
        sa.Column("term", sa.Text(collation="C"), nullable=False),
        sa.Column("chunk", sa.Integer(), nullable=False),
        sa.Column("session_ids", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("seqs", postgresql.ARRAY(sa.Integer()), nullable=False),
        sa.Column("max_impact", sa.Float(), nullable=False),
        sa.Column("next_impact", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("workspace_id", "term", "chunk", name="term_lists_pkey"),
    )
    op.create_table(
        "term_list_heads",
        sa.Column("workspace_id", sa.Text(), nullable=False),
        sa.Column("term", sa.Text(collation="C"), nullable=False),
        sa.Column("df", sa.Integer(), nullable=False),
        sa.Column("chunk_max", postgresql.ARRAY(sa.Float()), nullable=False),
        sa.Column("theta", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("workspace_id", "term", name="term_list_heads_pkey"),
    )
    op.create_table(
        "term_list_state",
        sa.Column("workspace_id", sa.Text(), nullable=False),
        sa.Column("watermark", sa.BigInteger(), nullable=False),
        sa.Column("avg_len", sa.Float(), nullable=False),
        sa.Column("n_indexed", sa.BigInteger(), nullable=False),
        sa.Column("speakers", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("built_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("workspace_id", name="term_list_state_pkey"),
    )
    bind = op.get_bind()
    for table in TABLES:
        # On Citus, distributed with the other tenant tables (co-located by workspace).
        citus.distribute(bind, table)
        op.execute(f"CREATE POLICY {POLICY} ON {table} USING ({BOUND}) WITH CHECK ({BOUND})")
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")


def downgrade() -> None:
    if citus.installed(op.get_bind()):
        # Dropping the functions follows DDL on distributed tables: one connection
        # per node for all of it, as Citus requires for function commands.
        op.execute("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'")
    for table in reversed(TABLES):
        op.drop_table(table)
    op.drop_index("messages_ingest_seq_idx", table_name="messages")
    op.drop_column("messages", "ingest_seq")
    op.execute("DROP FUNCTION IF EXISTS pgsearch_ingest_watermark()")
    op.execute("DROP FUNCTION IF EXISTS pgsearch_next_ingest_seq()")
    op.execute("DROP SEQUENCE IF EXISTS messages_ingest_seq")
