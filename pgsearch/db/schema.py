"""The database schema as SQLAlchemy metadata; the Alembic migrations must match it.

Every primary key and index leads with ``workspace_id`` (the tenant key), no key
comes from a sequence, and statistics live per workspace, so the schema can be
distributed by workspace later without a rewrite.

- ``messages.tsv`` holds the normalised terms with positions (tf = number of
  positions); its GIN index (with ``workspace_id`` via btree_gin) is the inverted
  index candidates come from. Its pending list is kept small (1 MB) so no insert
  pays a long merge and no search scans a long list.
- ``vocabulary`` has one row per distinct term of a workspace with its document
  frequency over messages (``df``) and over session titles/summaries (``sf``), plus
  its English stem. A trigram GIN on ``term`` makes fuzzy expansion an index lookup.
- ``sessions.tsv`` holds title terms (weight A) and summary terms (weight B).
- ``workspace_stats`` keeps exact per-kind counts: BM25's N and total length, and
  the size of the scope a search covered.
- ``sessions.parent_session_id`` links a sub-agent conversation to the session that
  started it; ``title_auto``/``title_leaf_seq`` say whether the title was generated
  and, for a Claude Code summary, which message it names (migration 0004).
- ``leaf_titles`` holds titles that name their session through one of its messages
  (Claude Code ``summary`` lines, ``leafUuid``) until, and after, that message is
  stored; ``messages_entry_idx`` finds the message.
- ``forgotten_sessions`` keeps the sessions a user forgot (a tombstone with the file
  they came from), so that ingesting that file again does not bring them back;
  ``ingested_files.head_digest``/``tail_digest`` are digests of bounded windows of
  the bytes read, to check a grown file cheaply and to recognise a moved one
  (migration 0005).

- ``api_tokens`` holds the bearer tokens of `pgsearch serve` as SHA-256 hashes, each
  bound to a workspace (optionally one session) and to read or read/write
  (migration 0006). It is not a tenant table: a token is found before its workspace
  is known.
- ``messages.append_key`` is an appended message's key (its own id, else one the
  library assigned to the append call), unique within its session
  (``messages_append_key_idx``): an append run again after a lost ``COMMIT`` stores
  nothing twice (migration 0008).
- ``sessions.prompt_title`` is the title the session's first user prompt gives it
  (`pgsearch.titles`), made when the prompt is stored; it is shown where
  ``title`` is NULL and is not indexed: ``tsv`` holds only the session's own title
  and summary (migration 0009).
- ``messages_session_created_idx`` reads a session's entries from its newest (by
  time, then position): the per-session spread of a frequent word walks the newest
  sessions' ends on it instead of reading every match (migration 0013).

- ``term_lists``, ``term_list_heads``, ``term_list_state`` hold each workspace's
  impact-ordered postings of its frequent terms, and ``messages.ingest_seq`` the
  order messages were stored in, which tells the messages stored since the lists
  were built (migration 0010, `pgsearch.impact`).
- ``scope_counts`` keeps exact counts of messages per kind, role and tool name
  (``''`` for none), kept with the per-kind statistics: the size of a scope a role
  or tool filter narrows, without counting its messages (migration 0012).

Row Level Security on the tenant tables (migration 0002) is not part of this
metadata: its policies show a role that does not own the tables only the rows of
the workspace its transaction is bound to.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR

# Re-exported: the list lives with the SQL so that the store never imports SQLAlchemy.
from pgsearch.db.queries import TENANT_TABLES as TENANT_TABLES

metadata = MetaData()

workspace_stats = Table(
    "workspace_stats",
    metadata,
    Column("workspace_id", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("n_messages", BigInteger, nullable=False, server_default=text("0")),
    Column("n_indexed", BigInteger, nullable=False, server_default=text("0")),
    Column("total_len", BigInteger, nullable=False, server_default=text("0")),
    PrimaryKeyConstraint("workspace_id", "kind", name="workspace_stats_pkey"),
)

sessions = Table(
    "sessions",
    metadata,
    Column("workspace_id", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("title", Text),
    Column("summary", Text),
    Column("agent", Text),
    Column("source", Text),
    Column("created_at", DateTime(timezone=True)),
    Column("updated_at", DateTime(timezone=True)),
    Column("message_count", Integer, nullable=False, server_default=text("0")),
    Column("next_seq", Integer, nullable=False, server_default=text("0")),
    Column("last_turn", Integer, nullable=False, server_default=text("0")),
    Column("tsv", TSVECTOR),
    Column("field_len", Integer, nullable=False, server_default=text("0")),
    Column("parent_session_id", Text),
    Column("title_auto", Boolean, nullable=False, server_default=text("false")),
    Column("title_leaf_seq", Integer),
    Column("prompt_title", Text),
    PrimaryKeyConstraint("workspace_id", "session_id", name="sessions_pkey"),
    Index(
        "sessions_tsv_idx",
        "workspace_id",
        "tsv",
        postgresql_using="gin",
        postgresql_with={"fastupdate": "off"},
    ),
    Index("sessions_updated_idx", "workspace_id", text("updated_at DESC")),
    Index("sessions_source_idx", "workspace_id", "source"),
)

messages = Table(
    "messages",
    metadata,
    Column("workspace_id", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("seq", Integer, nullable=False),
    Column("entry_id", Text),
    Column("kind", Text, nullable=False),
    Column("role", Text, nullable=False),
    Column("turn", Integer, nullable=False, server_default=text("0")),
    Column("tool_name", Text),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("content", Text, nullable=False),
    Column("arguments", Text, nullable=False, server_default=text("''")),
    Column("extra", JSONB),
    Column("tsv", TSVECTOR, nullable=False),
    Column("token_count", Integer, nullable=False),
    Column("append_key", Text),
    Column("ingest_seq", BigInteger, server_default=text("pgsearch_next_ingest_seq()")),
    PrimaryKeyConstraint("workspace_id", "session_id", "seq", name="messages_pkey"),
    ForeignKeyConstraint(
        ["workspace_id", "session_id"],
        ["sessions.workspace_id", "sessions.session_id"],
        name="messages_session_fkey",
        ondelete="CASCADE",
    ),
    # Each workspace's own posting lists (migration 0014).
    Index(
        "messages_terms_idx",
        text("pgsearch_workspace_terms(workspace_id, tsv)"),
        postgresql_using="gin",
        postgresql_with={"fastupdate": "on", "gin_pending_list_limit": "1024"},
    ),
    Index(
        "messages_created_idx",
        "workspace_id",
        text("created_at DESC"),
        "session_id",
        "seq",
    ),
    Index(
        "messages_session_created_idx",
        "workspace_id",
        "session_id",
        text("created_at DESC"),
        text("seq DESC"),
    ),
    Index(
        "messages_entry_idx",
        "workspace_id",
        "entry_id",
        postgresql_where=text("entry_id IS NOT NULL"),
    ),
    Index(
        "messages_append_key_idx",
        "workspace_id",
        "session_id",
        "append_key",
        unique=True,
        postgresql_where=text("append_key IS NOT NULL"),
    ),
    Index(
        "messages_ingest_seq_idx",
        "workspace_id",
        "ingest_seq",
        postgresql_where=text("ingest_seq IS NOT NULL"),
    ),
)

#: Free space left on vocabulary pages, so that a term's counts change in place
#: (migration 0007).
VOCABULARY_FILLFACTOR = 70

vocabulary = Table(
    "vocabulary",
    metadata,
    Column("workspace_id", Text, nullable=False),
    Column("term", Text(collation="C"), nullable=False),
    Column("stem", Text(collation="C"), nullable=False),
    Column("df", Integer, nullable=False, server_default=text("0")),
    Column("sf", Integer, nullable=False, server_default=text("0")),
    PrimaryKeyConstraint("workspace_id", "term", name="vocabulary_pkey"),
    Index(
        "vocabulary_term_trgm_idx",
        "workspace_id",
        "term",
        postgresql_using="gin",
        postgresql_ops={"term": "gin_trgm_ops"},
        # Only terms typo matching can reach (see migration 0003 and `queries._DIRECT_TYPOS`).
        postgresql_where=text("length(term) >= 4 AND term !~ '[0-9]'"),
    ),
    Index("vocabulary_stem_idx", "workspace_id", "stem"),
    postgresql_with={"fillfactor": VOCABULARY_FILLFACTOR},
)

ingested_files = Table(
    "ingested_files",
    metadata,
    Column("workspace_id", Text, nullable=False),
    Column("path", Text, nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("lines", Integer, nullable=False),
    Column("digest", Text, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    Column("parser", Text),
    Column("head_digest", Text),
    Column("tail_digest", Text),
    PrimaryKeyConstraint("workspace_id", "path", name="ingested_files_pkey"),
    Index("ingested_files_head_idx", "workspace_id", "head_digest"),
)

forgotten_sessions = Table(
    "forgotten_sessions",
    metadata,
    Column("workspace_id", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("source", Text),
    Column("forgotten_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    PrimaryKeyConstraint("workspace_id", "session_id", name="forgotten_sessions_pkey"),
    Index("forgotten_sessions_source_idx", "workspace_id", "source"),
)

leaf_titles = Table(
    "leaf_titles",
    metadata,
    Column("workspace_id", Text, nullable=False),
    Column("leaf_uuid", Text, nullable=False),
    Column("title", Text, nullable=False),
    Column("source", Text, nullable=False),
    Column("session_id", Text),
    Column("leaf_seq", Integer),
    PrimaryKeyConstraint("workspace_id", "leaf_uuid", name="leaf_titles_pkey"),
    Index("leaf_titles_session_idx", "workspace_id", "session_id"),
    Index("leaf_titles_source_idx", "workspace_id", "source"),
)

term_lists = Table(
    "term_lists",
    metadata,
    Column("workspace_id", Text, nullable=False),
    Column("term", Text(collation="C"), nullable=False),
    Column("chunk", Integer, nullable=False),
    Column("session_ids", ARRAY(Text), nullable=False),
    Column("seqs", ARRAY(Integer), nullable=False),
    Column("max_impact", Float, nullable=False),
    Column("next_impact", Float, nullable=False),
    PrimaryKeyConstraint("workspace_id", "term", "chunk", name="term_lists_pkey"),
)

term_list_heads = Table(
    "term_list_heads",
    metadata,
    Column("workspace_id", Text, nullable=False),
    Column("term", Text(collation="C"), nullable=False),
    Column("df", Integer, nullable=False),
    Column("chunk_max", ARRAY(Float), nullable=False),
    Column("theta", Float, nullable=False),
    PrimaryKeyConstraint("workspace_id", "term", name="term_list_heads_pkey"),
)

term_list_state = Table(
    "term_list_state",
    metadata,
    Column("workspace_id", Text, nullable=False),
    Column("watermark", BigInteger, nullable=False),
    Column("avg_len", Float, nullable=False),
    Column("n_indexed", BigInteger, nullable=False),
    Column("speakers", ARRAY(Text), nullable=False),
    Column("built_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("workspace_id", name="term_list_state_pkey"),
)

scope_counts = Table(
    "scope_counts",
    metadata,
    Column("workspace_id", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("role", Text, nullable=False),
    Column("tool_name", Text, nullable=False),
    Column("n_messages", BigInteger, nullable=False),
    PrimaryKeyConstraint("workspace_id", "kind", "role", "tool_name", name="scope_counts_pkey"),
)

settings_table = Table(
    "pgsearch_meta",
    metadata,
    Column("key", Text, nullable=False),
    Column("value", Text, nullable=False),
    PrimaryKeyConstraint("key", name="pgsearch_meta_pkey"),
)

api_tokens = Table(
    "api_tokens",
    metadata,
    Column("token_id", Text, nullable=False),
    Column("token_hash", Text, nullable=False),
    Column("workspace_id", Text, nullable=False),
    Column("session_id", Text),
    Column("can_write", Boolean, nullable=False, server_default=text("false")),
    Column("rate_per_second", Float),
    Column("label", Text),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    Column("revoked_at", DateTime(timezone=True)),
    PrimaryKeyConstraint("token_id", name="api_tokens_pkey"),
    UniqueConstraint("token_hash", name="api_tokens_hash_key"),
    Index("api_tokens_workspace_idx", "workspace_id", "created_at"),
)
