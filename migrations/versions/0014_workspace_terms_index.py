"""Each workspace's own posting lists: ``messages_terms_idx`` replaces ``messages_tsv_idx``.

``messages_tsv_idx`` indexed (``workspace_id``, ``tsv``): a term's posting list held
its matches in every workspace, and a search intersected it with its workspace's
entry, a posting list of every message the workspace holds. The new index keys each
term by its workspace: ``pgsearch_workspace_terms(workspace_id, tsv)`` is the message's
terms, each written ``<workspace id><U+001F><term>``, and a search matches it with
``pgsearch_workspace_query(workspace_id, query)``, the query with its terms written the
same way. A term's list in a workspace is read alone, whatever the other workspaces
hold (a workspace id has no control character, so a key splits one way only).

The keyed terms carry no positions or weights: a query with a phrase or a weight is
not matched through them (phrases are checked on ``tsv``, as before).

On Citus both functions are created on the coordinator, which creates them on every
worker, and the index is made on every shard of ``messages``.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from pgsearch.db import citus

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WORKSPACE_TERMS = r"""
CREATE OR REPLACE FUNCTION pgsearch_workspace_terms(workspace_id text, tsv tsvector)
RETURNS tsvector LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT array_to_tsvector(ARRAY(
    SELECT workspace_id || E'\x1f' || t FROM unnest(tsvector_to_array(tsv)) AS t))
$$
"""

# Every quoted term of the query's text form (quotes doubled, backslashes doubled) gets
# the workspace id in front, quoted the same way (and its backslashes doubled once more
# for `regexp_replace`'s replacement text).
WORKSPACE_QUERY = r"""
CREATE OR REPLACE FUNCTION pgsearch_workspace_query(workspace_id text, query tsquery)
RETURNS tsquery LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT regexp_replace(
    query::text,
    '''((?:[^'']|'''')*)''',
    '''' || replace(replace(replace(workspace_id, '''', ''''''), E'\\', E'\\\\'), E'\\', E'\\\\')
        || E'\x1f\\1''',
    'g')::tsquery
$$
"""

WITH = {"fastupdate": "on", "gin_pending_list_limit": "1024"}


def upgrade() -> None:
    op.execute(WORKSPACE_TERMS)
    op.execute(WORKSPACE_QUERY)
    op.create_index(
        "messages_terms_idx",
        "messages",
        [sa.text("pgsearch_workspace_terms(workspace_id, tsv)")],
        postgresql_using="gin",
        postgresql_with=WITH,
    )
    op.drop_index("messages_tsv_idx", table_name="messages")


def downgrade() -> None:
    if citus.installed(op.get_bind()):
        # Dropping the functions follows DDL on distributed tables: one connection
        # per node for all of it, as Citus requires for function commands.
        op.execute("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'")
    op.create_index(
        "messages_tsv_idx",
        "messages",
        ["workspace_id", "tsv"],
        postgresql_using="gin",
        postgresql_with=WITH,
    )
    op.drop_index("messages_terms_idx", table_name="messages")
    op.execute("DROP FUNCTION pgsearch_workspace_query(text, tsquery)")
    op.execute("DROP FUNCTION pgsearch_workspace_terms(text, tsvector)")
