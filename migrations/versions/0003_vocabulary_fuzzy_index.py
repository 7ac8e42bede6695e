"""Vocabulary: trigram index only over terms typo matching can use; room for HOT updates.

Typo matching looks only for words of 5+ letters without digits (one edit away can
be 4 letters), so the trigram GIN index leaves out shorter terms, CJK characters and
pairs, numbers and code-like tokens with digits: a smaller index, cheaper to keep up
at ingest and to search. Every ingest updates document frequencies in place; a
fillfactor of 70 leaves room on each page for those updates to stay HOT (no index
entries rewritten). The statistics target of message terms drops to 300, so that
refreshing statistics after a bulk load stays cheap.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from pgsearch.db import citus

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FUZZY_TERMS = "length(term) >= 4 AND term !~ '[0-9]'"


def upgrade() -> None:
    op.drop_index("vocabulary_term_trgm_idx", table_name="vocabulary")
    op.create_index(
        "vocabulary_term_trgm_idx",
        "vocabulary",
        ["workspace_id", "term"],
        postgresql_using="gin",
        postgresql_ops={"term": "gin_trgm_ops"},
        postgresql_where=sa.text(FUZZY_TERMS),
    )
    op.execute("ALTER TABLE vocabulary SET (fillfactor = 70)")
    # 300 keeps ANALYZE's sample (300 x target rows) affordable on large tables while
    # still tracking the common terms the planner weighs against the browse index.
    citus.alter_table(op.get_bind(), "messages", "ALTER COLUMN tsv SET STATISTICS 300")


def downgrade() -> None:
    citus.alter_table(op.get_bind(), "messages", "ALTER COLUMN tsv SET STATISTICS 1000")
    op.execute("ALTER TABLE vocabulary RESET (fillfactor)")
    op.drop_index("vocabulary_term_trgm_idx", table_name="vocabulary")
    op.create_index(
        "vocabulary_term_trgm_idx",
        "vocabulary",
        ["workspace_id", "term"],
        postgresql_using="gin",
        postgresql_ops={"term": "gin_trgm_ops"},
    )
