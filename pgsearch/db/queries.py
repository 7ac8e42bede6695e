"""Every SQL statement pgsearch runs, named, in one place.

Statements are `LiteralString` constants or are composed from `LiteralString`
fragments by the builders below; user text only ever travels as bound parameters.
Each search-time shape has an EXPLAIN test (tests/integration/test_explain.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, LiteralString

from pgsearch.cursor import BrowsePosition
from pgsearch.plan import CandidatePlan, Filters, Group, group_df, match_share
from pgsearch.policy import TOOL_NAME_SEPARATOR
from pgsearch.rows import SearchStats

# --- ingest -------------------------------------------------------------------------

# Sets of rows travel as one JSON parameter holding an array a column (read with
# `json_to_record` and `unnest`): encoding it costs the client a fraction of what
# binding each column as an array parameter does, and a third of a list of objects.

# Writers of one file take turns. A file not recorded yet has no row to lock, and two
# transactions reading it at once would both append an agent log's entries (their
# seqs come from the session, not the line). A writer takes the keys of all its files
# at once, in path order, so that two writers of overlapping files cannot deadlock;
# the volatile lock function runs after the sort.
LOCK_FILE_KEY = """
SELECT pg_advisory_xact_lock(hashtextextended(%(ws)s || chr(31) || p, 7263641122))
FROM unnest(%(paths)s::text[]) AS p
ORDER BY p COLLATE "C"
"""

LOCK_FILE = """
SELECT path, size, lines, digest, parser, head_digest, tail_digest FROM ingested_files
WHERE workspace_id = %(ws)s AND path = ANY(%(paths)s::text[])
ORDER BY path COLLATE "C"
FOR UPDATE
"""

FILE_RECORDS = """
SELECT path, size, lines, digest, parser, head_digest, tail_digest FROM ingested_files
WHERE workspace_id = %(ws)s AND path = ANY(%(paths)s::text[])
"""

RECORD_FILES = """
INSERT INTO ingested_files
    (workspace_id, path, size, lines, digest, parser, head_digest, tail_digest, updated_at)
SELECT %(ws)s, u.path, u.size, u.lines, u.digest, u.parser, u.head_digest, u.tail_digest, now()
FROM json_to_record(%(rows)s::json)
     AS r(path text[], size bigint[], lines int[], digest text[], parser text[],
          head_digest text[], tail_digest text[]),
     unnest(r.path, r.size, r.lines, r.digest, r.parser, r.head_digest, r.tail_digest)
     AS u(path, size, lines, digest, parser, head_digest, tail_digest)
ORDER BY u.path COLLATE "C"
ON CONFLICT (workspace_id, path) DO UPDATE
SET size = EXCLUDED.size, lines = EXCLUDED.lines, digest = EXCLUDED.digest,
    parser = EXCLUDED.parser, head_digest = EXCLUDED.head_digest,
    tail_digest = EXCLUDED.tail_digest, updated_at = EXCLUDED.updated_at
"""

# Each new session records the file its first messages came from (NULL: appends).
ENSURE_SESSIONS = """
INSERT INTO sessions (workspace_id, session_id, source)
SELECT %(ws)s, u.session_id, u.source
FROM json_to_record(%(rows)s::json) AS r(session_id text[], source text[]),
     unnest(r.session_id, r.source) AS u(session_id, source)
ORDER BY u.session_id
ON CONFLICT (workspace_id, session_id) DO NOTHING
"""

LOCK_SESSIONS = """
SELECT session_id, source, title, summary, next_seq, last_turn, message_count,
       created_at, updated_at, tsvector_to_array(tsv), field_len, parent_session_id,
       title_auto, title_leaf_seq, prompt_title
FROM sessions
WHERE workspace_id = %(ws)s AND session_id = ANY(%(ids)s::text[])
ORDER BY session_id
FOR UPDATE
"""

INSERT_MESSAGES = """
INSERT INTO messages (workspace_id, session_id, seq, entry_id, kind, role, turn, tool_name,
                      created_at, content, arguments, extra, tsv, token_count)
SELECT %(ws)s, u.session_id, u.seq, u.entry_id, u.kind, u.role, u.turn, u.tool_name,
       u.created_at, u.content, u.arguments, u.extra, u.tsv::tsvector, u.token_count
FROM json_to_record(%(rows)s::json)
     AS r(session_id text[], seq int[], entry_id text[], kind text[], role text[], turn int[],
          tool_name text[], created_at timestamptz[], content text[], arguments text[],
          extra jsonb[], tsv text[], token_count int[]),
     unnest(r.session_id, r.seq, r.entry_id, r.kind, r.role, r.turn, r.tool_name, r.created_at,
            r.content, r.arguments, r.extra, r.tsv, r.token_count)
     AS u(session_id, seq, entry_id, kind, role, turn, tool_name, created_at, content,
          arguments, extra, tsv, token_count)
ON CONFLICT (workspace_id, session_id, seq) DO NOTHING
RETURNING session_id, seq
"""

# An append's rows, sent with the rest of its transaction in one round trip: their seqs
# continue sessions locked by the same transaction and their keys were looked up
# under that lock (`STORED_KEYS`), so a row or key that is already stored can only be
# a fault, which aborts the append instead of being skipped. Citus copies the rows of
# an INSERT ... SELECT straight into the shard unless the statement returns rows, and
# COPY into a table under row level security is refused: with RETURNING, the shard
# inserts them.
APPEND_MESSAGES = """
INSERT INTO messages (workspace_id, session_id, seq, entry_id, kind, role, turn, tool_name,
                      created_at, content, arguments, extra, tsv, token_count, append_key)
SELECT %(ws)s, u.session_id, u.seq, u.entry_id, u.kind, u.role, u.turn, u.tool_name,
       u.created_at, u.content, u.arguments, u.extra, u.tsv::tsvector, u.token_count,
       u.append_key
FROM json_to_record(%(rows)s::json)
     AS r(session_id text[], seq int[], entry_id text[], kind text[], role text[], turn int[],
          tool_name text[], created_at timestamptz[], content text[], arguments text[],
          extra jsonb[], tsv text[], token_count int[], append_key text[]),
     unnest(r.session_id, r.seq, r.entry_id, r.kind, r.role, r.turn, r.tool_name, r.created_at,
            r.content, r.arguments, r.extra, r.tsv, r.token_count, r.append_key)
     AS u(session_id, seq, entry_id, kind, role, turn, tool_name, created_at, content,
          arguments, extra, tsv, token_count, append_key)
RETURNING seq
"""

# Which keys of an append its session already holds (an earlier attempt of the same
# append whose COMMIT outcome was unknown, or messages sent again with their ids).
STORED_KEYS = """
SELECT append_key, seq FROM messages
WHERE workspace_id = %(ws)s AND session_id = %(session_id)s
  AND append_key = ANY(%(keys)s::text[])
"""

# A session-local staging table for COPY; emptied at every commit.
CREATE_STAGE = """
CREATE TEMP TABLE IF NOT EXISTS pgsearch_stage (
    session_id text, seq int, entry_id text, kind text, role text, turn int,
    tool_name text, created_at timestamptz, content text, arguments text, extra jsonb,
    tsv tsvector, token_count int
) ON COMMIT DELETE ROWS
"""

COPY_STAGE = """
COPY pgsearch_stage (session_id, seq, entry_id, kind, role, turn, tool_name, created_at,
                     content, arguments, extra, tsv, token_count) FROM STDIN
"""

INSERT_FROM_STAGE = """
WITH moved AS (DELETE FROM pgsearch_stage RETURNING *)
INSERT INTO messages (workspace_id, session_id, seq, entry_id, kind, role, turn, tool_name,
                      created_at, content, arguments, extra, tsv, token_count)
SELECT %(ws)s, session_id, seq, entry_id, kind, role, turn, tool_name, created_at, content,
       arguments, extra, tsv, token_count
FROM moved
ON CONFLICT (workspace_id, session_id, seq) DO NOTHING
RETURNING session_id, seq
"""

# Terms are sorted so that concurrent writers lock vocabulary rows in one order.
# Deltas are signed: removals (forgotten or rewritten sessions) go in the same pass.
UPSERT_VOCABULARY = """
INSERT INTO vocabulary AS v (workspace_id, term, stem, df, sf)
SELECT %(ws)s, u.term, u.stem, u.df, u.sf
FROM json_to_record(%(rows)s::json) AS r(term text[], stem text[], df int[], sf int[]),
     unnest(r.term, r.stem, r.df, r.sf) AS u(term, stem, df, sf)
ORDER BY u.term COLLATE "C"
ON CONFLICT (workspace_id, term) DO UPDATE
SET df = v.df + EXCLUDED.df, sf = v.sf + EXCLUDED.sf
"""

# GIN adds a new vocabulary term's trigrams to the trigram index's pending list, which
# every typo lookup scans whole until it is merged into the index; the writer whose
# insert takes the list past `gin_pending_list_limit` merges it. A small write keeps
# the list as short as the message index keeps its own (1 MB, about 1,400 terms); a
# bulk write keeps the server's setting (4 MB unless configured), merged in fewer and
# cheaper steps, and the list is merged when the load ends (`AFTER_BULK_LOAD`). The
# trigram index has no limit of its own, so the setting governs it.
SMALL_WRITE_PENDING: LiteralString = "SET LOCAL gin_pending_list_limit = 1024"

PRUNE_VOCABULARY = """
DELETE FROM vocabulary
WHERE workspace_id = %(ws)s AND term = ANY(%(terms)s::text[]) AND df <= 0 AND sf <= 0
"""

UPSERT_STATS = """
INSERT INTO workspace_stats AS s (workspace_id, kind, n_messages, n_indexed, total_len)
SELECT %(ws)s, u.kind, u.n, u.ni, u.len
FROM json_to_record(%(rows)s::json) AS r(kind text[], n bigint[], ni bigint[], len bigint[]),
     unnest(r.kind, r.n, r.ni, r.len) AS u(kind, n, ni, len)
ORDER BY u.kind
ON CONFLICT (workspace_id, kind) DO UPDATE
SET n_messages = s.n_messages + EXCLUDED.n_messages,
    n_indexed = s.n_indexed + EXCLUDED.n_indexed,
    total_len = s.total_len + EXCLUDED.total_len
"""

# Messages per (kind, role, tool) of a workspace (`Deltas.scoped`), in key order as
# they are locked; rows that fall to zero go (`PRUNE_SCOPE_COUNTS`).
UPSERT_SCOPE_COUNTS = """
INSERT INTO scope_counts AS s (workspace_id, kind, role, tool_name, n_messages)
SELECT %(ws)s, u.kind, u.role, u.tool, u.n
FROM json_to_record(%(rows)s::json) AS r(kind text[], role text[], tool text[], n bigint[]),
     unnest(r.kind, r.role, r.tool, r.n) AS u(kind, role, tool, n)
ORDER BY u.kind, u.role, u.tool
ON CONFLICT (workspace_id, kind, role, tool_name) DO UPDATE
SET n_messages = s.n_messages + EXCLUDED.n_messages
"""

#: A recount holds the workspace's statistics rows, which every writer of its
#: messages updates before it commits (a writer it did not see adds its own changes
#: after it, to the counts it wrote).
LOCK_WORKSPACE_STATS = (
    "SELECT kind FROM workspace_stats WHERE workspace_id = %(ws)s ORDER BY kind FOR UPDATE"
)

RECOUNT_SCOPE_COUNTS: tuple[LiteralString, ...] = (
    "DELETE FROM scope_counts WHERE workspace_id = %(ws)s",
    "INSERT INTO scope_counts AS s (workspace_id, kind, role, tool_name, n_messages) "
    "SELECT m.workspace_id, m.kind, m.role, coalesce(m.tool_name, ''), count(*) "
    "FROM messages m WHERE m.workspace_id = %(ws)s "
    "GROUP BY m.workspace_id, m.kind, m.role, coalesce(m.tool_name, '') "
    "ON CONFLICT (workspace_id, kind, role, tool_name) "
    "DO UPDATE SET n_messages = EXCLUDED.n_messages",
)

PRUNE_SCOPE_COUNTS = """
DELETE FROM scope_counts
WHERE workspace_id = %(ws)s AND kind = ANY(%(kinds)s::text[]) AND n_messages <= 0
"""

# Every session a write changed, in one statement (in id order, as they were locked).
# Sessions go as a list of objects: an UPDATE's row source may not take a column
# definition list on Citus, whose shards would be sent it without one.
UPDATE_SESSIONS = """
UPDATE sessions AS s
SET title = u.title, summary = u.summary, source = u.source, created_at = u.created_at,
    updated_at = u.updated_at, message_count = u.message_count, next_seq = u.next_seq,
    last_turn = u.last_turn, tsv = u.tsv::tsvector, field_len = u.field_len,
    parent_session_id = u.parent_session_id, title_auto = u.title_auto,
    title_leaf_seq = u.title_leaf_seq, prompt_title = u.prompt_title
FROM json_to_recordset(%(rows)s::json)
     AS u(session_id text, title text, summary text, source text, created_at timestamptz,
          updated_at timestamptz, message_count int, next_seq int, last_turn int, tsv text,
          field_len int, parent_session_id text, title_auto boolean, title_leaf_seq int,
          prompt_title text)
WHERE s.workspace_id = %(ws)s AND s.session_id = u.session_id
"""

# A title naming its session through the entry id of one of its messages (a Claude
# Code summary's leafUuid); a changed title is resolved again.
SAVE_LEAF_TITLES = """
INSERT INTO leaf_titles AS t (workspace_id, leaf_uuid, title, source)
SELECT %(ws)s, u.leaf, u.title, %(source)s
FROM unnest(%(leaves)s::text[], %(titles)s::text[]) AS u(leaf, title)
ORDER BY u.leaf
ON CONFLICT (workspace_id, leaf_uuid) DO UPDATE
SET title = EXCLUDED.title, source = EXCLUDED.source,
    session_id = CASE WHEN t.title = EXCLUDED.title THEN t.session_id END,
    leaf_seq = CASE WHEN t.title = EXCLUDED.title THEN t.leaf_seq END
"""

# Waiting titles among the keys whose message is stored now: driven by the (small)
# title table, each message found through messages_entry_idx; of several copies of
# one message (a resumed session repeats the last ones), the first session by id.
RESOLVE_LEAF_TITLES = """
UPDATE leaf_titles t SET session_id = m.session_id, leaf_seq = m.seq
FROM leaf_titles p
CROSS JOIN LATERAL (
    SELECT x.session_id, x.seq FROM messages x
    WHERE x.workspace_id = %(ws)s AND x.entry_id = p.leaf_uuid
    ORDER BY x.session_id, x.seq LIMIT 1
) m
WHERE p.workspace_id = %(ws)s AND p.leaf_uuid = ANY(%(keys)s::text[]) AND p.session_id IS NULL
  AND t.workspace_id = %(ws)s AND t.leaf_uuid = p.leaf_uuid
RETURNING t.session_id, t.leaf_seq, t.title
"""

UNRESOLVE_LEAF_TITLES = """
UPDATE leaf_titles SET session_id = NULL, leaf_seq = NULL
WHERE workspace_id = %(ws)s AND session_id = %(session_id)s
"""

FORGET_LEAF_TITLES = """
DELETE FROM leaf_titles WHERE workspace_id = %(ws)s AND source = %(source)s
"""

# The planner's row estimate for messages (-1 before its first ANALYZE).
MESSAGE_ESTIMATE = "SELECT reltuples FROM pg_class WHERE oid = to_regclass('messages')"

AFTER_BULK_LOAD: tuple[LiteralString, ...] = (
    "SELECT gin_clean_pending_list(to_regclass('messages_terms_idx'))",
    "SELECT gin_clean_pending_list(to_regclass('vocabulary_term_trgm_idx'))",
    "ANALYZE messages, vocabulary, sessions",
)

# With the citus extension, the coordinator's distributed tables are empty shells and
# the rows live in shards on the workers: the estimate is summed over the shards
# (unknown while any shard has never been analysed) and the pending lists merged on
# every shard. A table not distributed (yet) is treated as on one PostgreSQL. These
# read every shard, once, at the end of a bulk load (see `pgsearch.db.citus`).
MESSAGE_ESTIMATE_CITUS = """
SELECT CASE
    WHEN NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass('messages'))
    THEN (SELECT reltuples FROM pg_class WHERE oid = to_regclass('messages'))
    ELSE (SELECT CASE WHEN min(result::float8) < 0 THEN -1 ELSE sum(result::float8) END
          FROM run_command_on_shards(
              'messages', $$SELECT reltuples FROM pg_class WHERE oid = '%s'::regclass$$))
END
"""


def _merge_pending_on_shards(table: LiteralString, index: LiteralString) -> LiteralString:
    """Merge the GIN pending lists of `table`: of `index` while the table is not
    distributed, else of every GIN index on every shard; the entries merged."""
    return (
        "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM pg_dist_partition"
        " WHERE logicalrelid = to_regclass('" + table + "'))"
        " THEN gin_clean_pending_list(to_regclass('" + index + "'))"
        " ELSE (SELECT sum(result::bigint) FROM run_command_on_shards('" + table + "', $$"
        "SELECT coalesce(sum(gin_clean_pending_list(i.indexrelid)), 0)"
        " FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " JOIN pg_am a ON a.oid = c.relam"
        " WHERE i.indrelid = '%s'::regclass AND a.amname = 'gin'$$)) END"
    )


AFTER_BULK_LOAD_CITUS: tuple[LiteralString, ...] = (
    _merge_pending_on_shards("messages", "messages_terms_idx"),
    _merge_pending_on_shards("vocabulary", "vocabulary_term_trgm_idx"),
    "ANALYZE messages, vocabulary, sessions",
)

# --- impact-ordered term lists (`pgsearch.impact`) ----------------------------------

# The watermark of a rebuild: once no transaction still writes messages (the SHARE
# lock waits for those that do, and holds new ones back only while it is waited for),
# every ingest_seq handed out so far belongs to a finished transaction, so a build
# that starts afterwards sees every message up to the sequence's newest value; what
# comes later is the tail. The lock is on the table, across workspaces (on Citus on
# every shard): a statement of no workspace, in a transaction of its own.
LISTS_WAIT_WRITERS = "LOCK TABLE messages IN SHARE MODE"
LISTS_WATERMARK = "SELECT pgsearch_ingest_watermark()"

# One builder of a workspace's lists at a time (taken in the build's transaction).
LISTS_BUILD_LOCK = (
    "SELECT pg_advisory_xact_lock(hashtextextended('pgsearch term lists ' || %(ws)s, 0))"
)
# The background maintainer's form (`pgsearch.maintainer`): it never waits for another
# builder of the workspace, it leaves the workspace to it (the same lock as above, so
# it never overlaps `pgsearch maintain` or another server's maintainer either).
LISTS_TRY_BUILD_LOCK = (
    "SELECT pg_try_advisory_xact_lock(hashtextextended('pgsearch term lists ' || %(ws)s, 0))"
)
# The watermark the lists have now, read once the lock is held (a new snapshot): a
# builder that finished meanwhile may already have folded in everything up to ours.
LISTS_STATE_WATERMARK = "SELECT s.watermark FROM term_list_state s WHERE s.workspace_id = %(ws)s"
# Whether the server the writes go to is a standby (its transactions read only).
IN_RECOVERY = "SELECT pg_is_in_recovery()"
LISTS_PLANNER = "SET LOCAL enable_seqscan = off"
LISTS_CLEAR: tuple[LiteralString, ...] = (
    "DELETE FROM term_lists WHERE workspace_id = %(ws)s",
    "DELETE FROM term_list_heads WHERE workspace_id = %(ws)s",
)

# The workspace's state first: its watermark, the average length the lists are
# ordered under (returned, for the build) and its speakers' names.
LISTS_STATE = """
INSERT INTO term_list_state (workspace_id, watermark, avg_len, n_indexed, speakers, built_at)
SELECT w.workspace_id, %(watermark)s,
       coalesce(sum(w.total_len) FILTER (WHERE w.kind <> %(fields)s), 0)::float8
       / greatest(coalesce(sum(w.n_indexed) FILTER (WHERE w.kind <> %(fields)s), 0), 1),
       coalesce(sum(w.n_indexed) FILTER (WHERE w.kind <> %(fields)s), 0),
       ARRAY(SELECT DISTINCT m.tool_name FROM messages m
             WHERE m.workspace_id = %(ws)s AND m.kind = ANY(%(speaker_kinds)s::text[])
               AND m.tool_name IS NOT NULL),
       now()
FROM workspace_stats w WHERE w.workspace_id = %(ws)s
GROUP BY w.workspace_id
ON CONFLICT (workspace_id) DO UPDATE SET watermark = excluded.watermark,
    avg_len = excluded.avg_len, n_indexed = excluded.n_indexed, speakers = excluded.speakers,
    built_at = excluded.built_at
RETURNING avg_len
"""

# Every posting of each term found in at least %(min_df)s messages, ranked by its
# BM25 term impact tf / (tf + k1 (1 - b + b len / avgdl)) under the state's average
# length; the best %(max_postings)s are kept, in chunks of %(chunk)s keys, each with
# its largest impact and the largest of the postings after it. (The workspace comes
# from the rows, not a parameter, so that on Citus the whole statement runs on the
# workspace's shard.)
LISTS_BUILD = """
INSERT INTO term_lists (workspace_id, term, chunk, session_ids, seqs, max_impact, next_impact)
SELECT k.workspace_id, k.term, (k.rn - 1) / %(chunk)s,
       array_agg(k.session_id ORDER BY k.rn), array_agg(k.seq ORDER BY k.rn),
       max(k.impact), coalesce((array_agg(k.next ORDER BY k.rn DESC))[1], 0)
FROM (
    SELECT p.workspace_id, p.term, p.session_id, p.seq, p.impact,
           row_number() OVER w AS rn, lead(p.impact) OVER w AS next
    FROM (
        SELECT m.workspace_id, u.lexeme AS term, m.session_id, m.seq,
               coalesce(array_length(u.positions, 1), 1)::float8
               / (coalesce(array_length(u.positions, 1), 1)
                  + %(k1)s * (1 - %(b)s + %(b)s * m.token_count / %(avgdl)s)) AS impact
        FROM messages m CROSS JOIN LATERAL unnest(m.tsv) AS u
        WHERE m.workspace_id = %(ws)s
          AND u.lexeme IN (SELECT v.term FROM vocabulary v
                           WHERE v.workspace_id = %(ws)s AND v.df >= %(min_df)s)
    ) AS p
    WINDOW w AS (PARTITION BY p.workspace_id, p.term
                 ORDER BY p.impact DESC, p.session_id, p.seq)
) AS k
WHERE k.rn <= %(max_postings)s
GROUP BY k.workspace_id, k.term, (k.rn - 1) / %(chunk)s
"""

# Per listed term: its df, each chunk's largest impact, and the largest impact left
# out of the list (after its last chunk).
LISTS_HEADS = """
INSERT INTO term_list_heads (workspace_id, term, df, chunk_max, theta)
SELECT l.workspace_id, l.term, v.df, array_agg(l.max_impact ORDER BY l.chunk),
       (array_agg(l.next_impact ORDER BY l.chunk DESC))[1]
FROM term_lists l
JOIN vocabulary v ON v.workspace_id = l.workspace_id AND v.term = l.term
WHERE l.workspace_id = %(ws)s
GROUP BY l.workspace_id, l.term, v.df
"""

# Whether the workspace's lists were built, when, and how many messages are newer
# than their watermark (counted up to %(limit)s + 1 on the ingest_seq index).
LISTS_LAG = """
SELECT (SELECT s.built_at FROM term_list_state s WHERE s.workspace_id = %(ws)s),
       (SELECT count(*) FROM (
            SELECT 1 FROM messages m
            WHERE m.workspace_id = %(ws)s
              AND m.ingest_seq > coalesce((SELECT s.watermark FROM term_list_state s
                                           WHERE s.workspace_id = %(ws)s), 0)
            LIMIT %(limit)s) AS t),
       (SELECT count(*) FROM term_list_heads h WHERE h.workspace_id = %(ws)s)
"""

# --- forget -------------------------------------------------------------------------

DELETE_SESSION_MESSAGES = """
DELETE FROM messages WHERE workspace_id = %(ws)s AND session_id = %(session_id)s
RETURNING kind, token_count, tsvector_to_array(tsv), role, coalesce(tool_name, '')
"""

DELETE_SESSION = """
DELETE FROM sessions WHERE workspace_id = %(ws)s AND session_id = %(session_id)s
RETURNING tsvector_to_array(coalesce(tsv, ''::tsvector)), source, field_len
"""

DELETE_SESSION_FILES = """
DELETE FROM ingested_files WHERE workspace_id = %(ws)s AND path = ANY(%(paths)s::text[])
"""

SESSIONS_FROM_SOURCE = """
SELECT session_id FROM sessions
WHERE workspace_id = %(ws)s AND source = %(source)s ORDER BY session_id
"""

# Records a file seen at a new path may have been ingested under: those whose first
# window is this file's, and those of the files its sessions came from.
MOVED_CANDIDATES = """
SELECT path, size, lines, digest, parser, head_digest, tail_digest FROM ingested_files
WHERE workspace_id = %(ws)s AND head_digest = ANY(%(heads)s::text[])
UNION
SELECT f.path, f.size, f.lines, f.digest, f.parser, f.head_digest, f.tail_digest
FROM sessions AS s
JOIN ingested_files AS f ON f.workspace_id = s.workspace_id AND f.path = s.source
WHERE s.workspace_id = %(ws)s AND s.session_id = ANY(%(ids)s::text[])
"""

# A file, or every file under a directory, recorded at `old` is re-homed at `new`:
# its record, the sessions it gave, their waiting titles and their tombstones.
RELOCATE_CONFLICTS = """
SELECT path FROM ingested_files
WHERE workspace_id = %(ws)s AND (path = %(new)s OR starts_with(path, %(new)s || '/'))
ORDER BY path LIMIT 5
"""

RELOCATE: tuple[LiteralString, ...] = (
    """
UPDATE ingested_files SET path = %(new)s || substr(path, length(%(old)s) + 1)
WHERE workspace_id = %(ws)s AND (path = %(old)s OR starts_with(path, %(old)s || '/'))
RETURNING path
""",
    """
UPDATE sessions SET source = %(new)s || substr(source, length(%(old)s) + 1)
WHERE workspace_id = %(ws)s AND (source = %(old)s OR starts_with(source, %(old)s || '/'))
RETURNING session_id
""",
    """
UPDATE leaf_titles SET source = %(new)s || substr(source, length(%(old)s) + 1)
WHERE workspace_id = %(ws)s AND (source = %(old)s OR starts_with(source, %(old)s || '/'))
RETURNING leaf_uuid
""",
    """
UPDATE forgotten_sessions SET source = %(new)s || substr(source, length(%(old)s) + 1)
WHERE workspace_id = %(ws)s AND (source = %(old)s OR starts_with(source, %(old)s || '/'))
RETURNING session_id
""",
)

# A session the user forgot stays forgotten: ingest skips its entries (by its id, or
# by the file it came from) until they are asked for back. The time comes from the
# inserted row's default (Citus evaluates it on the coordinator; it accepts no
# volatile function in DO UPDATE SET).
FORGET_TOMBSTONE = """
INSERT INTO forgotten_sessions (workspace_id, session_id, source)
VALUES (%(ws)s, %(session_id)s, %(source)s)
ON CONFLICT (workspace_id, session_id) DO UPDATE
SET source = EXCLUDED.source, forgotten_at = EXCLUDED.forgotten_at
"""

FORGOTTEN_AMONG = """
SELECT session_id FROM forgotten_sessions
WHERE workspace_id = %(ws)s AND session_id = ANY(%(ids)s::text[])
ORDER BY session_id
"""

RESTORE_FORGOTTEN = """
DELETE FROM forgotten_sessions WHERE workspace_id = %(ws)s AND source = %(source)s
RETURNING session_id
"""

FORGET_WORKSPACE: tuple[LiteralString, ...] = (
    "DELETE FROM messages WHERE workspace_id = %(ws)s",
    "DELETE FROM sessions WHERE workspace_id = %(ws)s",
    "DELETE FROM vocabulary WHERE workspace_id = %(ws)s",
    "DELETE FROM workspace_stats WHERE workspace_id = %(ws)s",
    "DELETE FROM ingested_files WHERE workspace_id = %(ws)s",
    "DELETE FROM leaf_titles WHERE workspace_id = %(ws)s",
    "DELETE FROM forgotten_sessions WHERE workspace_id = %(ws)s",
    "DELETE FROM term_lists WHERE workspace_id = %(ws)s",
    "DELETE FROM term_list_heads WHERE workspace_id = %(ws)s",
    "DELETE FROM term_list_state WHERE workspace_id = %(ws)s",
    "DELETE FROM scope_counts WHERE workspace_id = %(ws)s",
)

# The calls an appended tool result answers, when they came in an earlier append:
# the session's tool calls keep their ids in `extra` (read through the primary key).
TOOL_CALL_NAMES = """
SELECT extra -> 'tool_call_ids', tool_name FROM messages
WHERE workspace_id = %(ws)s AND session_id = %(session_id)s AND kind = 'tool_input'
  AND extra -> 'tool_call_ids' ?| %(ids)s::text[]
ORDER BY seq DESC
"""

# --- reading ------------------------------------------------------------------------

# A session with no title of its own is shown by the title its first prompt gives it
# (`pgsearch.titles`, stored with the session).
LIST_SESSIONS = """
SELECT s.session_id, coalesce(s.title, s.prompt_title), s.message_count, s.created_at,
       s.updated_at, s.source, s.parent_session_id
FROM sessions s WHERE s.workspace_id = %(ws)s
ORDER BY s.updated_at DESC NULLS LAST, s.session_id
LIMIT %(limit)s OFFSET %(offset)s
"""

WORKSPACE_STATS = """
SELECT kind, n_messages, n_indexed, total_len FROM workspace_stats
WHERE workspace_id = %(ws)s AND kind <> %(fields)s
"""

ALL_WORKSPACES = "SELECT DISTINCT workspace_id FROM workspace_stats ORDER BY 1"

WORKSPACE_COUNTS = """
SELECT (SELECT count(*) FROM sessions WHERE workspace_id = %(ws)s),
       (SELECT count(*) FROM vocabulary WHERE workspace_id = %(ws)s)
"""

#: Tables holding tenant rows (all keyed by workspace_id first).
TENANT_TABLES = (
    "workspace_stats",
    "sessions",
    "messages",
    "vocabulary",
    "ingested_files",
    "leaf_titles",
    "forgotten_sessions",
    "term_lists",
    "term_list_heads",
    "term_list_state",
    "scope_counts",
)

TABLE_SIZES = """
SELECT c.relname, pg_table_size(c.oid), pg_indexes_size(c.oid)
FROM pg_class c
WHERE c.relname = ANY(%(tables)s::text[]) AND c.relkind = 'r'
  AND c.relnamespace = to_regnamespace(current_schema())::oid
ORDER BY c.relname
"""

# On Citus a distributed table's size is the sum over its shards.
TABLE_SIZES_CITUS = """
SELECT c.relname, s.table_bytes, s.total_bytes - s.table_bytes
FROM pg_class c
CROSS JOIN LATERAL (
    SELECT CASE WHEN d.logicalrelid IS NULL THEN pg_table_size(c.oid)
                ELSE citus_table_size(c.oid) END AS table_bytes,
           CASE WHEN d.logicalrelid IS NULL THEN pg_total_relation_size(c.oid)
                ELSE citus_total_relation_size(c.oid) END AS total_bytes
    FROM (SELECT c.oid) AS o LEFT JOIN pg_dist_partition d ON d.logicalrelid = o.oid
) s
WHERE c.relname = ANY(%(tables)s::text[]) AND c.relkind = 'r'
  AND c.relnamespace = to_regnamespace(current_schema())::oid
ORDER BY c.relname
"""

# The key signing cursors (none stored: NULL), and whether row level security restricts
# this role's reads of messages (no index then serves a text match: `_holds`).
CURSOR_KEY = (
    "SELECT (SELECT value FROM pgsearch_meta WHERE key = 'cursor_key'),"
    " row_security_active('messages')"
)

# What is left of a request's deadline, as the timeout of the statements after it.
STATEMENT_TIMEOUT = "SELECT set_config('statement_timeout', %(ms)s, true)"

# The vocabulary rows of the query words (`vr`): the terms as written and of the same
# stem, for 3-4 letter words found fewer than `trusted` times the `prefix_limit` most
# frequent terms they start, and for words whose shape allows typos found fewer than
# `below` times the `fuzzy_limit` terms sharing the most trigrams (the trigram index's
# predicate), less those more than twice the allowed distance away in Levenshtein
# edits, which no adjacent swap brings within reach. The direct plan reads on them:
# and each word's expansions as `plan.choose_expansions` keeps them (`e`): its terms
# as written and of the same stem; for a word found fewer than `trusted` times as
# written, the terms it starts (`prefix`) and the neighbours within its `allowed`
# distance (with `osa` an adjacent swap is one edit; `pgsearch_edit_distance`
# settles what `levenshtein_less_equal` cannot), nearest, then most frequent, then
# first in code point order, at most `max_expansions` of them (a word found fewer
# than `below` times also gets the neighbours `realword` times as frequent as it).
# `g` holds each word's group as tsquery text (quoted as `_quote` does) with its
# summed df and largest sf. The candidate and title reads built on it run in the
# statement that returns the vocabulary rows; the engine keeps their rows only when
# its own expansions are those `e` chose and its plan is the one the server made
# (`pgsearch.plan.direct_candidates_hold`).
_DIRECT_WORDS: LiteralString = r"""
WITH q AS MATERIALIZED (
    SELECT * FROM unnest(%(words)s::text[], %(stems)s::text[], %(prefix)s::bool[],
                         %(shaped)s::bool[], %(allowed)s::int[])
        WITH ORDINALITY AS q(word, stem, prefix, shaped, allowed, i)
), x AS MATERIALIZED (
    SELECT q.i, v.term, v.df, v.sf, 'exact'::text AS how, 0 AS lev
    FROM q JOIN vocabulary v ON v.workspace_id = %(ws)s AND v.term = q.word
    UNION ALL
    SELECT q.i, v.term, v.df, v.sf, 'stem', 0
    FROM q JOIN vocabulary v ON v.workspace_id = %(ws)s AND v.stem = q.stem AND v.term <> q.word
), w AS MATERIALIZED (
    SELECT q.*, coalesce((SELECT x.df + x.sf FROM x WHERE x.i = q.i AND x.how = 'exact'), 0)
               AS found
    FROM q
), vr AS MATERIALIZED (
    SELECT * FROM x"""
_DIRECT_PREFIX: LiteralString = r"""
    UNION ALL
    SELECT w.i, p.term, p.df, p.sf, 'prefix', 0
    FROM w CROSS JOIN LATERAL (
        SELECT v.term, v.df, v.sf FROM vocabulary v
        WHERE v.workspace_id = %(ws)s AND v.term > w.word AND v.term < w.word || chr(1114111)
        ORDER BY v.df DESC LIMIT %(prefix_limit)s
    ) p
    WHERE w.prefix AND w.found < %(trusted)s"""
_DIRECT_TYPOS: LiteralString = r"""
    UNION ALL
    SELECT w.i, f.term, f.df, f.sf, 'fuzzy', f.lev
    FROM w CROSS JOIN LATERAL (
        SELECT n.term, n.df, n.sf,
               CASE WHEN length(w.word) <= 255 AND length(n.term) <= 255
                    THEN levenshtein_less_equal(w.word, n.term, 2 * w.allowed)
                    ELSE abs(length(w.word) - length(n.term)) END AS lev
        FROM (
            SELECT v.term, v.df, v.sf FROM vocabulary v
            WHERE v.workspace_id = %(ws)s AND v.term %% w.word AND v.term <> w.word
              AND length(v.term) >= 4 AND v.term !~ '[0-9]'  -- the trigram index's predicate
            ORDER BY similarity(v.term, w.word) DESC, v.df DESC
            LIMIT %(fuzzy_limit)s
        ) n
    ) f
    WHERE w.shaped AND w.found < %(below)s AND f.lev <= 2 * w.allowed
      AND (w.found < %(trusted)s
           OR %(realword)s::float8 > 0
              AND (f.df + f.sf)::float8 >= %(realword)s::float8 * w.found)
), typo AS (
    SELECT t.i, t.term, row_number() OVER (
               PARTITION BY t.i ORDER BY t.d, t.df + t.sf DESC, t.term COLLATE "C") AS rank
    FROM (
        SELECT vr.i, vr.term, vr.df, vr.sf, w.allowed,
               CASE WHEN length(w.word) > 255 OR length(vr.term) > 255
                         OR %(osa)s AND vr.lev > 1
                    THEN pgsearch_edit_distance(w.word, vr.term, w.allowed, %(osa)s)
                    ELSE vr.lev END AS d
        FROM vr JOIN w ON w.i = vr.i
        WHERE vr.how = 'fuzzy'
        OFFSET 0  -- each distance once
    ) t
    WHERE t.d <= t.allowed"""
_DIRECT_CHOSEN: LiteralString = r"""
), e AS MATERIALIZED (
    SELECT DISTINCT ON (vr.i, vr.term) vr.i, vr.term, vr.df, vr.sf,
           '''' || replace(replace(vr.term, '''', ''''''), E'\\', E'\\\\') || '''' AS quoted
    FROM vr"""
_DIRECT_CHOSEN_TYPOS: LiteralString = """
    LEFT JOIN typo ON typo.i = vr.i AND typo.term = vr.term
    WHERE vr.how <> 'fuzzy' OR typo.rank <= %(max_expansions)s"""
_DIRECT_GROUPS: LiteralString = """
), g AS (
    SELECT e.i, sum(e.df) AS df, max(e.sf) AS sf,
           '(' || string_agg(e.quoted, ' | ') || ')' AS tsq
    FROM e GROUP BY e.i
)"""


def _direct_terms(*, prefix: bool, typos: bool) -> LiteralString:
    """`_DIRECT_WORDS` to `_DIRECT_GROUPS`, with the prefix and typo reads only when a
    word's shape allows them (a statement without them is quicker to plan)."""
    sql = _DIRECT_WORDS
    if prefix:
        sql += _DIRECT_PREFIX
    if typos:
        sql += _DIRECT_TYPOS
    sql += _DIRECT_CHOSEN
    if typos:
        sql += _DIRECT_CHOSEN_TYPOS
    return sql + _DIRECT_GROUPS


# The candidate read of the direct plan, as `plan.plan_candidates` decides it from
# the units (`u`: complete when each of its words has a term), the df from which a
# word is stop-like (`t`, `plan.stop_df`) and the selective complete units (`s`),
# when every match fits the cap (so that no order is needed): with fewer than two
# complete units or no selective one, the messages holding every word, when the
# rarest word's df is at most the cap (the stop-like cap when nothing is selective);
# else the messages holding any selective unit, when their df sum is at most the cap.
# Otherwise nothing: the plan reads its own statement.
_DIRECT_UNITS: LiteralString = """, u AS (
    SELECT u.unit, min(g.df) AS df, string_agg(g.tsq, ' & ') AS tsq,
           count(g.i) = count(*) AS complete
    FROM unnest(%(unit_of)s::int[], %(word_of)s::int[]) AS u(unit, i)
    LEFT JOIN g ON g.i = u.i
    GROUP BY u.unit
), t AS (
    SELECT greatest(%(stop_ratio)s::float8 * coalesce(sum(n_indexed), 0)::float8,
                    %(stop_min_df)s) AS df
    FROM workspace_stats WHERE workspace_id = %(ws)s AND kind <> %(fields)s
), s AS (
    SELECT count(*) FILTER (WHERE u.complete) AS units,
           count(*) FILTER (WHERE u.complete AND u.df < t.df) AS selective,
           coalesce(sum(u.df) FILTER (WHERE u.complete AND u.df < t.df), 0) AS selective_df,
           string_agg('(' || u.tsq || ')', ' | ')
               FILTER (WHERE u.complete AND u.df < t.df) AS any_unit
    FROM u CROSS JOIN t
), p AS (
    SELECT CASE WHEN s.units < 2 OR s.selective = 0
                THEN (SELECT string_agg(g.tsq, ' & ') FROM g)
                ELSE s.any_unit END::tsquery AS tsq,
           CASE WHEN (s.units >= 2 AND s.selective > 0) THEN
                    CASE WHEN s.selective_df <= %(cap)s THEN %(cap)s ELSE 0 END
                WHEN (SELECT min(g.df) FROM g) <= CASE WHEN s.selective > 0 THEN %(cap)s
                                                       ELSE least(%(cap)s, %(stop_cap)s) END
                THEN %(cap)s
                ELSE 0 END AS rows
    FROM s
)
"""

# The session-field statistics row and the df from which a word is common among
# titles and summaries (`plan.stop_df`).
_DIRECT_FIELD_STOP: LiteralString = """, ft AS (
    SELECT greatest(%(stop_ratio)s::float8 * coalesce(sum(n_indexed), 0), %(stop_min_df)s) AS df
    FROM workspace_stats WHERE workspace_id = %(ws)s AND kind = %(fields)s
)
"""

#: The `workspace_stats` row that counts session titles/summaries, not messages.
FIELDS_STAT = "~session_fields"

SEARCH_STATS = """
SELECT coalesce(sum(n_indexed) FILTER (WHERE kind <> %(fields)s), 0),
       coalesce(sum(total_len) FILTER (WHERE kind <> %(fields)s), 0),
       coalesce(sum(n_messages) FILTER (WHERE kind = ANY(%(kinds)s::text[])), 0),
       coalesce(sum(n_indexed) FILTER (WHERE kind = %(fields)s), 0),
       coalesce(sum(total_len) FILTER (WHERE kind = %(fields)s), 0),
       coalesce(sum(n_messages) FILTER (WHERE kind <> %(fields)s), 0)
FROM workspace_stats WHERE workspace_id = %(ws)s
"""

SESSION_FIELD_MATCHES = """
SELECT s.session_id, s.field_len,
       (SELECT array_agg(u.lexeme || ' ' || array_length(u.positions, 1) || ' '
                         || array_to_string(u.weights, ''))
        FROM unnest(s.tsv) AS u WHERE u.lexeme = ANY(%(terms)s::text[])) AS tfs
FROM sessions s
WHERE s.workspace_id = %(ws)s AND s.tsv @@ %(tsq)s::tsquery
LIMIT %(cap)s
"""

SESSION_FIELD_MATCHES_ONE = """
SELECT s.session_id, s.field_len,
       (SELECT array_agg(u.lexeme || ' ' || array_length(u.positions, 1) || ' '
                         || array_to_string(u.weights, ''))
        FROM unnest(s.tsv) AS u WHERE u.lexeme = ANY(%(terms)s::text[])) AS tfs
FROM sessions s
WHERE s.workspace_id = %(ws)s AND s.session_id = %(session_id)s AND s.tsv @@ %(tsq)s::tsquery
"""


# The entries of a page, each field read only as far as an excerpt can use it
# (``chars``: the indexed prefix and some room): substr fetches a prefix of a long
# value without reading (or decompressing) all of it.
FETCH_MESSAGES = """
SELECT m.session_id, m.seq, m.entry_id, m.kind, m.role, m.turn, m.tool_name, m.created_at,
       substr(m.content, 1, %(chars)s), substr(m.arguments, 1, %(chars)s),
       substr(s.title, 1, %(chars)s), substr(s.summary, 1, %(chars)s), s.parent_session_id,
       s.prompt_title
FROM messages m
JOIN unnest(%(sids)s::text[], %(seqs)s::int[]) AS k(session_id, seq)
  ON m.workspace_id = %(ws)s AND m.session_id = k.session_id AND m.seq = k.seq
LEFT JOIN sessions s ON s.workspace_id = m.workspace_id AND s.session_id = m.session_id
"""


# The entry a title/summary-only hit points at: the session's latest summary entry
# when it has one (whether its title or its summary matched), else its first entry
# (where it is, not its text). Per session, two reads of the primary key, each
# stopping at its first row: newest first for a summary, oldest first for the first
# entry (a session with no summary is passed through once, without a sort).
SESSION_ANCHOR_ENTRY = """
SELECT a.session_id, a.seq, a.entry_id, a.kind, a.role, a.turn, a.tool_name, a.created_at,
       '' AS content, '' AS arguments
FROM (SELECT DISTINCT unnest(%(sids)s::text[])) AS u(sid)
CROSS JOIN LATERAL (
    (SELECT m.session_id, m.seq, m.entry_id, m.kind, m.role, m.turn, m.tool_name,
            m.created_at, 0 AS pick
     FROM messages m
     WHERE m.workspace_id = %(ws)s AND m.session_id = u.sid AND m.kind = 'summary'
     ORDER BY m.seq DESC LIMIT 1)
    UNION ALL
    (SELECT m.session_id, m.seq, m.entry_id, m.kind, m.role, m.turn, m.tool_name,
            m.created_at, 1
     FROM messages m
     WHERE m.workspace_id = %(ws)s AND m.session_id = u.sid
     ORDER BY m.seq LIMIT 1)
    ORDER BY pick LIMIT 1
) a
"""

WINDOW_BEFORE = """
SELECT m.session_id, m.seq, m.entry_id, m.kind, m.role, m.turn, m.tool_name, m.created_at,
       m.content, m.arguments
FROM messages m
WHERE m.workspace_id = %(ws)s AND m.session_id = %(session_id)s AND m.seq < %(seq)s
ORDER BY m.seq DESC LIMIT %(n)s
"""

# A session's messages from a seq on: a window's anchor and what follows it, or a page.
WINDOW_FROM = """
SELECT m.session_id, m.seq, m.entry_id, m.kind, m.role, m.turn, m.tool_name, m.created_at,
       m.content, m.arguments
FROM messages m
WHERE m.workspace_id = %(ws)s AND m.session_id = %(session_id)s AND m.seq >= %(seq)s
ORDER BY m.seq LIMIT %(n)s
"""

SESSION_EXISTS = """
SELECT message_count FROM sessions WHERE workspace_id = %(ws)s AND session_id = %(session_id)s
"""

# --- search builders ----------------------------------------------------------------
# Each returns a statement's SQL with every one of its parameters; tsquery text is
# built here from the plan's terms (quoted, never spliced into the SQL).

Alias = Literal["m", "n"]


def _quote(term: str) -> str:
    return "'" + term.replace("'", "''").replace("\\", "\\\\") + "'"


def tsquery_and(groups: Sequence[Group] | Sequence[Sequence[Any]]) -> str:
    """Every group (word) present: AND of ORs of its expansions."""
    return " & ".join("(" + " | ".join(_quote(e.term) for e in g) + ")" for g in groups)


def tsquery_or(groups: Sequence[Group] | Sequence[Sequence[Any]]) -> str:
    """Any expansion of any group present."""
    return " | ".join(_quote(e.term) for g in groups for e in g)


def tsquery_phrases(phrases: Sequence[Sequence[str]]) -> str | None:
    """Any phrase of two or more words present in order."""
    parts = ["(" + " <-> ".join(_quote(t) for t in p) + ")" for p in phrases if len(p) > 1]
    return " | ".join(parts) or None


def candidate_tsquery(plan: CandidatePlan) -> str:
    """The candidate statement's match: every word, or any driving unit."""
    if plan.strategy in ("all_words", "all_words_newest"):
        return tsquery_and(plan.drivers[0])
    return " | ".join(f"({tsquery_and(unit)})" for unit in plan.drivers)


def _filter_sql(filters: Filters, a: Alias, *, session: bool = True) -> LiteralString:
    """The WHERE clauses of a search's filters over ``messages <a>``."""
    if a == "m":
        ws: LiteralString = "m.workspace_id = %(ws)s AND m.kind = ANY(%(kinds)s::text[])"
        sid: LiteralString = " AND m.session_id = %(session_id)s"
        roles: LiteralString = " AND m.role = ANY(%(roles)s::text[])"
        tool: LiteralString = " AND %(tool)s = ANY(string_to_array(m.tool_name, '"
        since: LiteralString = " AND m.created_at >= %(since)s"
        until: LiteralString = " AND m.created_at < %(until)s"
    else:
        ws = "n.workspace_id = %(ws)s AND n.kind = ANY(%(kinds)s::text[])"
        sid = " AND n.session_id = %(session_id)s"
        roles = " AND n.role = ANY(%(roles)s::text[])"
        tool = " AND %(tool)s = ANY(string_to_array(n.tool_name, '"
        since = " AND n.created_at >= %(since)s"
        until = " AND n.created_at < %(until)s"
    sql = ws
    if session and filters.session_id is not None:
        sql += sid
    if filters.roles:
        sql += roles
    if filters.tool_name is not None:
        sql += tool + TOOL_NAME_SEPARATOR + "'))"
    if filters.since is not None:
        sql += since
    if filters.until is not None:
        sql += until
    return sql


def _filter_params(filters: Filters) -> dict[str, Any]:
    params: dict[str, Any] = {"ws": filters.workspace, "kinds": list(filters.kinds)}
    if filters.session_id is not None:
        params["session_id"] = filters.session_id
    if filters.roles:
        params["roles"] = list(filters.roles)
    if filters.tool_name is not None:
        params["tool"] = filters.tool_name
    if filters.since is not None:
        params["since"] = filters.since
    if filters.until is not None:
        params["until"] = filters.until
    return params


def filter_clauses(filters: Filters) -> tuple[LiteralString, dict[str, Any]]:
    """The WHERE clauses (over ``messages m``) and parameters of a search's filters."""
    return _filter_sql(filters, "m"), _filter_params(filters)


def _holds(
    filters: Filters, scope: LiteralString, query: LiteralString, keyed: LiteralString
) -> LiteralString:
    """`scope` (`_filter_sql` over ``m``) and ``m`` holding the tsquery `query` (SQL),
    read through ``messages_terms_idx``: the workspace's own posting lists of the
    query's terms (`pgsearch_workspace_terms`, migration 0014), matched by `keyed`,
    the same query with its terms keyed by the workspace (`keyed_tsquery`, or
    ``pgsearch_workspace_query`` for a query the statement builds). The query may hold
    no phrase and no weight (the keyed terms carry neither): phrases are tested on
    ``m.tsv``.

    The keyed match holds only the workspace's rows, so the workspace is tested on
    the rows the index gives (in the ``C`` collation: the same equality, which no
    B-tree of ``messages`` can serve) rather than ANDed with a B-tree read of every
    row of the workspace, which a plan made for any parameters would otherwise choose
    (it takes a tsquery to hold 0.5 % of the rows). Citus still routes the statement
    by it to the workspace's shard. Within one session, whose rows a B-tree gives
    (``messages_session_created_idx``), the query is tested on each row's ``tsv``;
    so it is for a role that row level security restricts (`Filters.keyed`), whose
    text match no index can serve."""
    ws: LiteralString = "m.workspace_id = %(ws)s"
    assert scope.startswith(ws), scope
    if " AND m.session_id = " in scope or not filters.keyed:
        return scope + " AND m.tsv @@ " + query
    return (
        'm.workspace_id = %(ws)s COLLATE "C"'
        + scope[len(ws) :]
        + " AND pgsearch_workspace_terms(m.workspace_id, m.tsv) @@ "
        + keyed
    )


#: A workspace id and a term as one key of ``messages_terms_idx``.
KEY_SEPARATOR = "\x1f"
_QUOTED_TERM = re.compile(r"'((?:[^']|'')*)'")


def keyed_tsquery(workspace: str, tsquery: str | None) -> str | None:
    """`tsquery` (text as `_quote` writes it) with every term keyed by `workspace`, as
    ``pgsearch_workspace_query`` writes it in the server."""
    if tsquery is None:
        return None
    prefix = _quote(workspace + KEY_SEPARATOR)[1:-1]
    return _QUOTED_TERM.sub(lambda m: "'" + prefix + m.group(1) + "'", tsquery)


_CANDIDATE_HEAD: LiteralString = (
    "SELECT m.session_id, m.seq, m.kind, m.role, m.created_at, m.token_count, "
)
#: The query terms' entries of ``m``'s tsvector (positions give tf): marking them
#: with weight A and filtering on it is a binary search per term in C, far cheaper
#: than unnesting long documents.
_ENTRIES: LiteralString = "ts_filter(setweight(m.tsv, 'A', %(terms)s::text[]), '{a}')"
#: Whether ``m`` holds one of the query's phrases in order.
_PHRASE_HIT: LiteralString = (
    "CASE WHEN %(phrase)s::tsquery IS NULL THEN false ELSE m.tsv @@ %(phrase)s::tsquery END"
)
_CANDIDATE_TAIL: LiteralString = _PHRASE_HIT + " AS phrase_hit, m.tool_name FROM messages m WHERE "
_CANDIDATE_COLUMNS: LiteralString = _CANDIDATE_HEAD + _ENTRIES + "::text AS tfs, " + _CANDIDATE_TAIL
#: Newest first: by time, and on equal times (entries without a time of their own
#: take the one before theirs) the later entry of a session first, so what was
#: appended last is on top. ``messages_created_idx`` gives the time and session
#: order; the seq order is an incremental sort within one session's equal times.
NEWEST_FIRST: LiteralString = "m.created_at DESC, m.session_id, m.seq DESC"


#: The columns a capped read picks its rows by, before it reads the query terms'
#: entries of the rows it kept (`_BOUNDED_COLUMNS`): a sort computes its rows' columns
#: before it keeps the first ones, and the entries cost a pass over each document's.
_PICKED: LiteralString = (
    "m.session_id, m.seq, m.kind, m.role, m.created_at, m.token_count, m.tsv, m.tool_name"
)


# When more than the cap match, the cap keeps the documents that cover the most
# IDF-weighted query units (``unit_q<i>``/``unit_w<i>``), newest first on ties. Each
# match's query-term entries (``v``, what ``tfs`` is made of) are taken from its
# tsvector once; every unit is tested on them (a unit's terms are query terms, so a
# document holds the unit exactly when these entries do), with the units' tsqueries
# made once per statement (an InitPlan each) rather than once per match, and their
# weights summed in one expression per match (no subquery per match).
#: The candidate columns of a row of `_PICKED` with its query-term entries ``v``.
_COVERED_COLUMNS: LiteralString = (
    _CANDIDATE_HEAD + "m.v::text AS tfs, " + _PHRASE_HIT + " AS phrase_hit, m.tool_name "
)
#: ``messages m`` with the query-term entries ``v`` of each row, taken once.
_WITH_ENTRIES: LiteralString = (
    "messages m CROSS JOIN LATERAL (SELECT " + _ENTRIES + " AS v OFFSET 0) f"
)
#: `_PICKED` with the query-term entries ``v`` of each match of `where`.
_PICKED_COVERED: LiteralString = "SELECT " + _PICKED + ", f.v FROM " + _WITH_ENTRIES + " WHERE "


def _by_coverage(v: LiteralString, units: int) -> LiteralString:
    """The best-covering `cap` first (the weights of the `units` units its entries `v`
    hold, summed in the units' order), newest first on ties."""
    covered = " + ".join(
        "CASE WHEN " + v + " @@ (SELECT %(unit_q" + str(i) + ")s::tsquery)"
        " THEN %(unit_w" + str(i) + ")s::float8 ELSE 0 END"
        for i in range(units)
    )
    return " ORDER BY (" + (covered or "0") + ") DESC, " + NEWEST_FIRST + " LIMIT %(cap)s"


def _coverage_params(plan: CandidatePlan) -> dict[str, Any]:
    """The units' tsqueries and weights of `_by_coverage`."""
    params: dict[str, Any] = {}
    for i, (unit, weight) in enumerate(plan.coverage):
        params[f"unit_q{i}"] = tsquery_and(unit)
        params[f"unit_w{i}"] = weight
    return params


def _coverage_sql(where: LiteralString, units: int) -> LiteralString:
    return (
        _COVERED_COLUMNS
        + "FROM ("
        + _PICKED_COVERED
        + where
        + _by_coverage("f.v", units)
        + ") AS m"
    )


def _newest_picked(where: LiteralString) -> LiteralString:
    """The newest `cap` rows of ``messages m`` under `where`, `_PICKED` columns."""
    return (
        "SELECT "
        + _PICKED
        + " FROM messages m WHERE "
        + where
        + " ORDER BY "
        + NEWEST_FIRST
        + " LIMIT %(cap)s"
    )


#: What a read of many matches keeps of each until it has picked the few it returns:
#: where the row is (``t``) and what it is ordered and grouped by. Carrying a match's
#: tsvector through a sort or a CTE costs more than reading the row again.
_KEYS: LiteralString = "m.ctid AS t, m.session_id, m.seq, m.created_at"


def _read_again(rows: LiteralString) -> LiteralString:
    """The `_PICKED` columns of `rows` (a FROM item of `_KEYS` rows), read again by
    where each row is, in the same statement (so the same row version), newest first."""
    return (
        "SELECT "
        + _PICKED
        + " FROM "
        + rows
        + " AS r JOIN messages m ON m.workspace_id = %(ws)s AND m.ctid = r.t"
        " ORDER BY r.created_at DESC, r.session_id, r.seq DESC"
    )


def _newest_keyed(where: LiteralString) -> LiteralString:
    """`_newest_picked`, each match's `_KEYS` sorted and the kept ones read again."""
    return _read_again(
        "(SELECT "
        + _KEYS
        + " FROM messages m WHERE "
        + where
        + " ORDER BY "
        + NEWEST_FIRST
        + " LIMIT %(cap)s)"
    )


#: The newest `cap` matches (``all_words_newest``) when the plan walks: first from a
#: walk of the scope's newest ``walk`` entries, each tested by a call (not the ``@@``
#: operator, so that the planner never reads the word's whole posting list for it);
#: when the walk finds fewer, from every match the index gives, sorted
#: (`plan.newest_walk`). The walk's matches are the newest of all when it finds `cap`
#: of them: every entry it leaves is older.
def _newest_sql(scope: LiteralString, where: LiteralString) -> LiteralString:
    return (
        "WITH w AS MATERIALIZED (SELECT "
        + _PICKED
        + " FROM (SELECT "
        + _PICKED
        + " FROM messages m WHERE "
        + scope
        + " ORDER BY "
        + NEWEST_FIRST
        + " LIMIT %(walk)s) AS m WHERE ts_match_vq(m.tsv, %(tsq)s::tsquery)"
        " LIMIT %(cap)s), "
        "picked AS (SELECT w.* FROM w WHERE (SELECT count(*) FROM w) >= %(cap)s "
        "UNION ALL ("
        + _newest_keyed(where + " AND (SELECT count(*) FROM w) < %(cap)s")
        + ")) "
        + _BOUNDED_COLUMNS
        + "FROM picked AS m ORDER BY "
        + NEWEST_FIRST
    )


def _walks(filters: Filters) -> bool:
    """True when a newest-first walk of the scope reads only entries in scope: no
    session (its entries are spread over the workspace's), role or tool filter."""
    return filters.session_id is None and not filters.roles and filters.tool_name is None


def candidates_sql(filters: Filters, plan: CandidatePlan) -> tuple[LiteralString, dict[str, Any]]:
    """Messages matching the plan's tsquery within the filters, with the expanded
    terms' entries, ordered as the plan's strategy says, at most the plan's cap."""
    scope = _filter_sql(filters, "m")
    where = _holds(filters, scope, "%(tsq)s::tsquery", "%(ktsq)s::tsquery")
    params = _candidate_params(filters, plan)
    if plan.strategy == "any_unit_by_coverage":
        params.update(_coverage_params(plan))
        return _coverage_sql(where, len(plan.coverage)), params
    if plan.newest_first:
        walk = plan.walk if _walks(filters) else 0
        if walk:
            params["walk"] = walk
            return _newest_sql(scope, where), params
        if _from_horizon(filters, plan):
            # The matches since the horizon when they hold the newest, else every match.
            params["horizon"] = HORIZON_SESSIONS * plan.cap
            newest: LiteralString = (
                "WITH "
                + _horizon_matches(scope, where, sessions=False)
                + " "
                + _BOUNDED_COLUMNS
                + "FROM ("
                + _read_again("(SELECT m.* FROM a m ORDER BY " + NEWEST_FIRST + " LIMIT %(cap)s)")
                + ") AS m"
            )
            return newest, params
        # Every match from the index, the newest kept.
        return _BOUNDED_COLUMNS + "FROM (" + _newest_keyed(where) + ") AS m", params
    return _CANDIDATE_COLUMNS + where + " LIMIT %(cap)s", params


# --- the bounded read of capped plans (`pgsearch.impact`) -----------------------------

#: The state of a workspace's lists and the heads of the query's listed terms: one
#: row per head (one with no head when none is listed), none before a first build.
LIST_HEADS = """
WITH s AS (
    SELECT s.workspace_id, s.built_at, s.watermark, s.avg_len, s.speakers,
           (SELECT count(*) FROM (
                SELECT 1 FROM messages m
                WHERE m.workspace_id = %(ws)s AND m.ingest_seq > s.watermark
                LIMIT %(limit)s) AS t) AS behind
    FROM term_list_state s WHERE s.workspace_id = %(ws)s
)
SELECT s.built_at, s.watermark, s.avg_len, s.speakers, s.behind,
       h.term, h.df, h.chunk_max, h.theta
FROM s LEFT JOIN term_list_heads h
    ON h.workspace_id = %(ws)s AND h.term = ANY(%(terms)s::text[])
"""

LISTS_BUILT_AT = "SELECT s.built_at FROM term_list_state s WHERE s.workspace_id = %(ws)s"

#: The candidate columns over ``messages m``, for statements naming their own FROM.
#: The plan's match is tested by a call, not the ``@@`` operator, so that the planner
#: never reads a common word's whole posting list to test it.
_BOUNDED_COLUMNS: LiteralString = (
    _CANDIDATE_HEAD + _ENTRIES + "::text AS tfs, " + _PHRASE_HIT + " AS phrase_hit, m.tool_name "
)
_HIT: LiteralString = " AND ts_match_vq(m.tsv, %(tsq)s::tsquery)"


def bounded_candidates_sql(
    filters: Filters,
    plan: CandidatePlan,
    *,
    listed: Sequence[str],
    chunks: tuple[int, int],
    rare: Sequence[str] = (),
    tail: int = 0,
    watermark: int = 0,
    sessions: Sequence[str] = (),
) -> tuple[LiteralString, dict[str, Any]]:
    """The plan's hits (`CandidatePlan.hit_units`, uncapped) among: the messages in chunks
    ``chunks[0]`` to ``chunks[1] - 1`` of the `listed` terms' lists; those holding a
    `rare` term (through the GIN index); the first `tail` messages stored after
    `watermark` (through ``messages_ingest_seq_idx``); those of `sessions`. With the
    columns of `candidates_sql`; a message may come more than once."""
    where = _filter_sql(filters, "m")
    parts: list[LiteralString] = []
    if listed:
        parts.append(
            _BOUNDED_COLUMNS + "FROM (SELECT DISTINCT u.sid, u.seq FROM term_lists l "
            "CROSS JOIN LATERAL unnest(l.session_ids, l.seqs) AS u(sid, seq) "
            "WHERE l.workspace_id = %(ws)s AND l.term = ANY(%(listed)s::text[]) "
            "AND l.chunk >= %(first_chunk)s AND l.chunk < %(end_chunk)s) AS k "
            "JOIN messages m ON m.workspace_id = %(ws)s AND m.session_id = k.sid "
            "AND m.seq = k.seq WHERE " + where + _HIT
        )
    if rare:
        parts.append(
            _BOUNDED_COLUMNS
            + "FROM messages m WHERE "
            + _holds(filters, where, "%(rare)s::tsquery", "%(krare)s::tsquery")
            + _HIT
        )
    if tail:
        parts.append(
            _BOUNDED_COLUMNS + "FROM (SELECT n.workspace_id, n.session_id, n.seq, "
            "n.kind, n.role, n.created_at, n.token_count, n.tsv, n.tool_name "
            "FROM messages n WHERE n.workspace_id = %(ws)s AND n.ingest_seq > %(watermark)s "
            "ORDER BY n.ingest_seq LIMIT %(tail)s) AS m WHERE " + where + _HIT
        )
    if sessions:
        parts.append(
            _BOUNDED_COLUMNS
            + "FROM messages m WHERE "
            + where
            + " AND m.session_id = ANY(%(sessions)s::text[])"
            + _HIT
        )
    assert parts, "a bounded read reads something"
    params = _filter_params(filters)
    params.update(
        terms=list(plan.terms),
        phrase=tsquery_phrases(plan.phrases),
        tsq=" | ".join(f"({tsquery_and(unit)})" for unit in plan.hit_units),
        listed=list(listed),
        first_chunk=chunks[0],
        end_chunk=chunks[1],
        rare=" | ".join(_quote(t) for t in rare) or None,
        tail=tail,
        watermark=watermark,
        sessions=list(sessions),
    )
    params["ktsq"] = keyed_tsquery(filters.workspace, params["tsq"])
    params["krare"] = keyed_tsquery(filters.workspace, params["rare"])
    return " UNION ALL ".join(parts), params


def every_match_sql(filters: Filters, plan: CandidatePlan) -> tuple[LiteralString, dict[str, Any]]:
    """Every hit the plan's rules define within the filters (`CandidatePlan.hit_units`:
    any selective unit, or every word), with the same columns as `candidates_sql`
    and no cap: what an exhaustive run of the scorer ranks (the reference the capped
    reads are checked against)."""
    sql = _CANDIDATE_COLUMNS + _holds(
        filters, _filter_sql(filters, "m"), "%(tsq)s::tsquery", "%(ktsq)s::tsquery"
    )
    params = _filter_params(filters)
    params.update(
        terms=list(plan.terms),
        phrase=tsquery_phrases(plan.phrases),
        tsq=" | ".join(f"({tsquery_and(unit)})" for unit in plan.hit_units),
    )
    params["ktsq"] = keyed_tsquery(filters.workspace, params["tsq"])
    return sql, params


def direct_search_sql(
    filters: Filters,
    *,
    words: Sequence[str],
    stems: Sequence[str],
    prefix: Sequence[bool],
    shaped: Sequence[bool],
    allowed: Sequence[int],
    units: Sequence[Sequence[int]],
    phrases: Sequence[Sequence[str]],
    expansion: Mapping[str, Any],
    cap: int,
    stop_cap: int,
    stop_ratio: float,
    stop_min_df: int,
    titles: bool,
    candidates: bool = True,
) -> tuple[LiteralString, dict[str, Any]]:
    """The vocabulary rows of the query words with the direct plan's reads, in one
    statement (`_direct_terms`, `_DIRECT_UNITS`): each row is tagged ``v`` (a
    vocabulary row, and whether the server chose it as an expansion), ``c`` (a
    candidate, as `candidates_sql` reads it) or, with `titles`, ``f`` (a session whose
    title or summary holds a word not common among them, as `SESSION_FIELD_MATCHES`
    reads it; at most ``cap + 1``: more means the engine reads the titles again with
    the statement of its plan). `units` are the query's units as 0-based word
    indexes; `expansion` the rules of `plan.choose_expansions` as parameters
    (``prefix_limit``, ``fuzzy_limit``, ``trusted``, ``below``, ``realword``,
    ``max_expansions``, ``osa``). Without `candidates`, the vocabulary rows alone."""
    sql: LiteralString = _direct_terms(prefix=any(prefix), typos=any(shaped))
    if candidates:
        sql += _DIRECT_UNITS
    if candidates and titles:
        sql += _DIRECT_FIELD_STOP
    sql += (
        "SELECT 'v' AS tag, vr.i, vr.term, vr.df, vr.sf, vr.how,"
        " EXISTS (SELECT 1 FROM e WHERE e.i = vr.i AND e.term = vr.term) AS chosen,"
        " NULL::text AS session_id, NULL::int AS seq, NULL::text AS kind, NULL::text AS role,"
        " NULL::timestamptz AS created_at, NULL::int AS token_count, NULL::text AS tfs,"
        " NULL::boolean AS phrase_hit, NULL::text AS tool_name, NULL::int AS field_len,"
        " NULL::text[] AS field_tfs FROM vr"
    )
    if candidates:
        sql += (
            " UNION ALL (SELECT 'c', NULL, NULL, NULL, NULL, NULL, NULL, m.session_id, m.seq,"
            " m.kind, m.role, m.created_at, m.token_count,"
            " ts_filter(setweight(m.tsv, 'A', (SELECT array_agg(DISTINCT e.term) FROM e)),"
            " '{a}')::text, "
            + _PHRASE_HIT
            + ", m.tool_name, NULL, NULL FROM messages m WHERE "
            + _holds(
                filters,
                _filter_sql(filters, "m"),
                "(SELECT p.tsq FROM p)",
                "pgsearch_workspace_query(%(ws)s, (SELECT p.tsq FROM p))",
            )
            + " LIMIT (SELECT p.rows FROM p))"
        )
    params = _filter_params(filters)
    params.update(expansion)
    params.update(
        words=list(words),
        stems=list(stems),
        prefix=list(prefix),
        shaped=list(shaped),
        allowed=list(allowed),
        unit_of=[n for n, unit in enumerate(units) for _ in unit],
        word_of=[i + 1 for unit in units for i in unit],
        phrase=tsquery_phrases(phrases),
        cap=cap,
        stop_cap=stop_cap,
        stop_ratio=stop_ratio,
        stop_min_df=stop_min_df,
        fields=FIELDS_STAT,
    )
    if candidates and titles:
        sql += (
            " UNION ALL (SELECT 'f', NULL, NULL, NULL, NULL, NULL, NULL, s.session_id, NULL,"
            " NULL, NULL, NULL, NULL, NULL, NULL, NULL, s.field_len,"
            " (SELECT array_agg(x.lexeme || ' ' || array_length(x.positions, 1) || ' '"
            " || array_to_string(x.weights, '')) FROM unnest(s.tsv) AS x"
            " WHERE x.lexeme = ANY(ARRAY(SELECT e.term FROM e)))"
            " FROM sessions s WHERE s.workspace_id = %(ws)s"
        )
        if filters.session_id is not None:
            sql += " AND s.session_id = %(session_id)s"
        sql += (
            " AND s.tsv @@ (SELECT string_agg(e.quoted, ' | ')::tsquery FROM e JOIN g"
            " ON g.i = e.i WHERE g.sf < (SELECT ft.df FROM ft)) LIMIT %(field_cap)s)"
        )
        params["field_cap"] = cap + 1
    return sql, params


def _candidate_params(filters: Filters, plan: CandidatePlan) -> dict[str, Any]:
    """The filters' parameters and those of the plan's candidate reads."""
    params = _filter_params(filters)
    params.update(
        terms=list(plan.terms),
        phrase=tsquery_phrases(plan.phrases),
        tsq=candidate_tsquery(plan),
        cap=plan.cap,
    )
    params["ktsq"] = keyed_tsquery(filters.workspace, params["tsq"])
    return params


def _sessions_newest(
    rows: LiteralString,
    columns: LiteralString = "c.session_id, c.seq, c.created_at",
    out: LiteralString = "e.session_id, e.seq",
) -> LiteralString:
    """The keys (`out` of `columns`) of the newest row of each session among `rows` (a
    FROM item named ``c`` with ``session_id``, ``seq``, ``created_at``), the newest
    `cap` of those (`NEWEST_FIRST`). Sessions are told apart byte by byte (their order
    here is only a grouping, and equal ids are equal in any collation)."""
    return (
        "SELECT " + out + " FROM ("
        'SELECT DISTINCT ON (c.session_id COLLATE "C") ' + columns + " "
        "FROM " + rows + ' ORDER BY c.session_id COLLATE "C", c.created_at DESC, c.seq DESC) e '
        "ORDER BY e.created_at DESC, e.session_id, e.seq DESC LIMIT %(cap)s"
    )


def session_spread_sql(
    filters: Filters, plan: CandidatePlan, *, scan: int
) -> tuple[LiteralString, dict[str, Any]]:
    """The newest match of each session among the first `scan` matches of the plan's
    tsquery (in index order), newest first, at most the plan's cap, with the same
    columns as `candidates_sql`: when more messages match than the cap, one best hit
    per session then covers the sessions of many more matches than the cap."""
    # Of the sessions' newest matches, only the newest `cap` are read again.
    scanned: LiteralString = (
        "(SELECT m.session_id, m.seq, m.created_at FROM messages m WHERE "
        + _holds(filters, _filter_sql(filters, "m"), "%(tsq)s::tsquery", "%(ktsq)s::tsquery")
        + " LIMIT %(scan)s) c"
    )
    each_newest: LiteralString = (
        "m.workspace_id = %(ws)s AND (m.session_id, m.seq) IN (" + _sessions_newest(scanned) + ")"
    )
    sql = _BOUNDED_COLUMNS + "FROM (" + _newest_picked(each_newest) + ") AS m"
    params = _candidate_params(filters, plan)
    params["scan"] = scan
    return sql, params


#: Sessions a walked spread (`session_spread_walk_sql`) reads beyond the cap, and the
#: entries it reads from the end of each before it stops looking for a match there.
SPREAD_WALK_SLACK = 64
SPREAD_WALK_ROWS = 16
SPREAD_WALK_MORE = 256


def spread_walks(filters: Filters, plan: CandidatePlan, stats: SearchStats, *, scan: int) -> bool:
    """Whether the per-session spread walks the newest sessions from their ends
    (`session_spread_walk_sql`) rather than reading the first `scan` matches: with
    the workspace's kinds alone in scope, when the walk is expected to read fewer
    entries than the scan. A walk of a session reads about ``1 / share`` entries to
    its newest match, `SPREAD_WALK_ROWS` at most; ``share`` is the share of the
    entries it passes (of every kind) that are in scope and match a driving unit, its
    words' share as `pgsearch.plan.match_share` expects it, as for the newest-first
    walk (`pgsearch.plan.newest_walk`). The scan reads every match in scope, `scan`
    at most. A scope of a few kinds (few of the entries a walk passes) thus scans: a
    walk would mostly pass entries out of scope, find no match in most sessions, and
    end in the scan anyway."""
    if not filters.only_kinds or not plan.drivers:
        return False
    n = max(stats.n_indexed, 1)
    in_scope = min(stats.in_scope / max(stats.n_messages, 1), 1.0)
    share = in_scope * max(
        match_share((group_df(g) for g in unit), stats.n_indexed) for unit in plan.drivers
    )
    if share <= 0:
        return False
    matches = sum(min(group_df(g) for g in unit) for unit in plan.drivers)
    matches_in_scope = matches * min(stats.in_scope / n, 1.0)
    walked = (plan.cap + SPREAD_WALK_SLACK) * min(1 / share, SPREAD_WALK_ROWS)
    return walked < min(matches_in_scope, scan)


def _walk_from_end(rows: LiteralString) -> LiteralString:
    """For each session ``x``, the newest match (``seq``, ``created_at``, and where
    the row is, ``t``) among its newest `rows` entries (by time, then position), and,
    when none matched and the session goes on past them, the time of the last of them
    (``past``: no entry after it is newer)."""
    from_end: LiteralString = (
        "FROM messages m WHERE m.workspace_id = %(ws)s AND m.session_id = x.session_id"
        " ORDER BY m.created_at DESC, m.seq DESC"
    )
    return (
        " CROSS JOIN LATERAL (SELECT h.seq, h.created_at, h.t, b.created_at AS past FROM"
        " (SELECT 1) o LEFT JOIN LATERAL (SELECT w.seq, w.created_at, w.t FROM (SELECT"
        " m.seq, m.created_at, m.ctid AS t, m.kind, m.tsv "
        + from_end
        + " LIMIT %("
        + rows
        + ")s) w"
        " WHERE w.kind = ANY(%(kinds)s::text[]) AND w.tsv @@ %(tsq)s::tsquery LIMIT 1) h"
        # Only read when the walk found none (a one-time test in the subquery).
        " ON true LEFT JOIN LATERAL (SELECT m.created_at FROM messages m WHERE h.seq IS NULL"
        " AND m.workspace_id = %(ws)s AND m.session_id = x.session_id"
        " ORDER BY m.created_at DESC, m.seq DESC OFFSET %(" + rows + ")s - 1 LIMIT 1) b ON true) w"
    )


def _cap_th(rows: LiteralString) -> LiteralString:
    """The time of the `cap`-th newest match among `rows` (``-infinity`` when fewer
    matched)."""
    return (
        "CASE WHEN (SELECT count(*) FROM " + rows + " WHERE " + rows + ".seq IS NOT NULL)"
        " < %(cap)s THEN '-infinity'::timestamptz ELSE (SELECT "
        + rows
        + ".created_at FROM "
        + rows
        + " WHERE "
        + rows
        + ".seq IS NOT NULL ORDER BY "
        + rows
        + ".created_at DESC, "
        + rows
        + ".session_id, "
        + rows
        + ".seq DESC OFFSET %(cap)s - 1 LIMIT 1) END"
    )


def session_spread_walk_sql(
    filters: Filters, plan: CandidatePlan, *, scan: int
) -> tuple[LiteralString, dict[str, Any]]:
    """`session_spread_sql`'s rows, read from the newest sessions' ends when that read
    is known to be complete, else (in the same statement) as that statement reads them.

    The sessions are taken newest first by their last entry's time (`cap` and
    `SPREAD_WALK_SLACK` of them); each is walked from its newest entry (by time, then
    position: the order of the spread's "newest"), `SPREAD_WALK_ROWS` entries at most,
    to its newest match. No entry of a session is newer than its last entry, and none
    past the walk's end is newer than the walk's last entry, so the walk's newest
    `cap` matches are every session's newest `cap` when the sessions not read were
    last active, and the walks that found no match ended, before the `cap`-th of them
    (or every session was read and every walk found its match or its session's end):
    then those are the rows; otherwise the spread is read by scanning the matches.

    Where every match is within the scan, both reads give the same rows; where more
    match than the scan, the walk gives each session's newest match of all."""
    walked: LiteralString = (
        "WITH c AS MATERIALIZED (SELECT s.session_id, s.updated_at FROM sessions s"
        " WHERE s.workspace_id = %(ws)s AND s.updated_at IS NOT NULL"
        " ORDER BY s.updated_at DESC LIMIT %(walk_sessions)s), "
        "r AS MATERIALIZED (SELECT x.session_id, w.seq, w.created_at, w.t, w.past FROM c x"
        + _walk_from_end("walk_rows")
        + "), "
        "t1 AS MATERIALIZED (SELECT " + _cap_th("r") + " AS low), "
        # The walks that found no match where the session went on past the walk's end,
        # at that end or later than the cap-th match so far: walked further.
        "u AS MATERIALIZED (SELECT x.session_id, w.seq, w.created_at, w.t, w.past FROM r x"
        + _walk_from_end("walk_more")
        + " WHERE x.seq IS NULL AND x.past >= (SELECT t1.low FROM t1)), "
        "h AS MATERIALIZED (SELECT r.session_id, r.seq, r.created_at, r.t FROM r"
        " WHERE r.seq IS NOT NULL UNION ALL SELECT u.session_id, u.seq, u.created_at, u.t"
        " FROM u WHERE u.seq IS NOT NULL), "
        "k AS MATERIALIZED (SELECT h.session_id, h.seq, h.created_at, h.t FROM h"
        " ORDER BY h.created_at DESC, h.session_id, h.seq DESC LIMIT %(cap)s), "
        "t AS MATERIALIZED (SELECT " + _cap_th("k") + " AS low), "
        "ok AS MATERIALIZED (SELECT ((SELECT count(*) FROM c) < %(walk_sessions)s"
        " OR (SELECT min(c.updated_at) FROM c) < (SELECT t.low FROM t))"
        " AND NOT EXISTS (SELECT 1 FROM u WHERE u.past >= (SELECT t.low FROM t)) AS done) "
    )
    read: LiteralString = (
        "SELECT m.* FROM (SELECT "
        + _PICKED
        # Each kept row read again where the walk found it (the same statement, so
        # the same row version).
        + " FROM k JOIN messages m ON m.workspace_id = %(ws)s AND m.ctid = k.t"
        " WHERE (SELECT ok.done FROM ok) ORDER BY " + NEWEST_FIRST + ") m"
    )
    scanned: LiteralString = (
        "(SELECT m.session_id, m.seq, m.created_at FROM messages m WHERE "
        + _holds(filters, _filter_sql(filters, "m"), "%(tsq)s::tsquery", "%(ktsq)s::tsquery")
        + " LIMIT %(scan)s) c"
    )
    each_newest: LiteralString = (
        "m.workspace_id = %(ws)s AND NOT (SELECT ok.done FROM ok) AND (m.session_id, m.seq) IN ("
        + _sessions_newest(scanned)
        + ")"
    )
    sql = (
        walked
        + _BOUNDED_COLUMNS
        + "FROM ("
        + read
        + " UNION ALL ("
        + _newest_picked(each_newest)
        + ")) AS m"
    )
    params = _candidate_params(filters, plan)
    params.update(
        scan=scan,
        walk_sessions=plan.cap + SPREAD_WALK_SLACK,
        walk_rows=SPREAD_WALK_ROWS,
        walk_more=SPREAD_WALK_MORE,
    )
    return sql, params


#: The scope counts of the filters' kinds agree with the per-kind statistics, kind
#: by kind (a writer of a release before 0012 keeps only the statistics).
_SCOPE_COUNTS_AGREE: LiteralString = (
    "NOT EXISTS (SELECT 1 FROM (SELECT w.kind, w.n_messages FROM workspace_stats w"
    " WHERE w.workspace_id = %(ws)s AND w.kind = ANY(%(kinds)s::text[])) a"
    " FULL JOIN (SELECT c.kind, sum(c.n_messages) AS n FROM scope_counts c"
    " WHERE c.workspace_id = %(ws)s AND c.kind = ANY(%(kinds)s::text[]) GROUP BY c.kind) b"
    " ON b.kind = a.kind WHERE coalesce(a.n_messages, 0) <> coalesce(b.n, 0))"
)

#: Whether a workspace's scope counts of `kinds` (every kind, for a recount) no longer
#: add up to its per-kind statistics: then `RECOUNT_SCOPE_COUNTS`.
SCOPE_COUNTS_BEHIND: LiteralString = "SELECT NOT " + _SCOPE_COUNTS_AGREE


def spread_with_candidates(filters: Filters, plan: CandidatePlan, *, scan: int) -> bool:
    """Whether the per-session spread (`session_spread_sql`, with `scan`) is read with
    the plan's candidates:

    - a newest-first plan that reads every match from the index (it does not walk),
      whose matches are known to be few enough that the spread's scan would read them
      all, with room to spare for messages stored after the statistics were read (its
      words' dfs: half the scan): `newest_and_spread_sql`;
    - a best-covering plan (it reads every match), unless a driving unit of one word
      is found in more messages than the scan: `coverage_and_spread_sql`, which reads
      the spread when its scan would read every match (and says when it would not)."""
    if plan.strategy == "any_unit_by_coverage":
        return all(
            len(unit) > 1 or max((e.df for e in unit[0]), default=0) <= scan
            for unit in plan.drivers
        )
    if not plan.newest_first or (plan.walk and _walks(filters)):
        return False
    return 2 * min(map(group_df, plan.groups)) <= scan


def spread_ahead(filters: Filters, plan: CandidatePlan) -> bool:
    """Whether the per-session spread is read in the candidates' trip, beside them: a
    plan that walks is chosen when many more messages are expected to match than the
    cap (`plan.newest_walk`), so its candidates are expected to fill it."""
    return plan.newest_first and bool(plan.walk) and _walks(filters)


#: A row ``m`` of the spread that is not among the candidates read beside it (``k``;
#: a hashed subplan, which reads them once).
_NOT_CANDIDATE: LiteralString = "(m.session_id, m.seq) NOT IN (SELECT k.session_id, k.seq FROM k)"


def coverage_and_spread_sql(
    filters: Filters, plan: CandidatePlan, *, scan: int
) -> tuple[LiteralString, dict[str, Any]]:
    """The rows of `candidates_sql` for a best-covering plan (tagged ``c``) and, from
    the same read of the matches, those of `session_spread_sql` with `scan` when the
    candidates fill the cap and the scan would read every match (tagged ``s``: the
    newest match of each session, the newest `cap` of those, newest first), less those
    among the candidates (a search adds the spread's others to them). When more
    than `scan` match, one row tagged ``x`` instead of the spread's: it is read on its
    own (`session_spread_sql`)."""
    # The matches are kept with their candidate columns, not their tsvectors; the
    # spread keeps each session's newest whole (no join back by key).
    count: LiteralString = "(SELECT n.n FROM n)"
    columns: LiteralString = (
        "m.session_id, m.seq, m.kind, m.role, m.created_at, m.token_count, m.v::text AS tfs,"
        " m.phrase_hit, m.tool_name"
    )
    sql: LiteralString = (
        "WITH a AS MATERIALIZED (SELECT m.session_id, m.seq, m.kind, m.role, m.created_at,"
        " m.token_count, f.v, "
        + _PHRASE_HIT
        + " AS phrase_hit, m.tool_name FROM "
        + _WITH_ENTRIES
        + " WHERE "
        + _holds(filters, _filter_sql(filters, "m"), "%(tsq)s::tsquery", "%(ktsq)s::tsquery")
        + "), n AS MATERIALIZED (SELECT count(*) AS n FROM a), "
        "s AS ("
        + _sessions_newest("a c", "c.*", "e.*")
        + "), k AS MATERIALIZED (SELECT "
        + columns
        + " FROM a m"
        + _by_coverage("m.v", len(plan.coverage))
        + ") SELECT 'c' AS tag, k.* FROM k UNION ALL SELECT 's', s.* FROM (SELECT "
        + columns
        + " FROM s m WHERE "
        + count
        + " BETWEEN %(cap)s AND %(scan)s AND "
        + _NOT_CANDIDATE
        + " ORDER BY "
        + NEWEST_FIRST
        + ") s UNION ALL SELECT 'x', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL"
        " WHERE " + count + " > %(scan)s"
    )
    params = _candidate_params(filters, plan)
    params.update(_coverage_params(plan), scan=scan)
    return sql, params


def newest_and_spread_sql(
    filters: Filters, plan: CandidatePlan
) -> tuple[LiteralString, dict[str, Any]]:
    """The rows of `candidates_sql` for a newest-first plan that does not walk (tagged
    ``c``) and those of `session_spread_sql` when its scan reads every match (tagged
    ``s``), from one read of the matches: the newest `cap` matches, and the newest
    match of each session that has one, the newest `cap` of those, less those among
    the candidates (a search adds the spread's others to them), each newest first
    (`NEWEST_FIRST`)."""
    scope = _filter_sql(filters, "m")
    where = _holds(filters, scope, "%(tsq)s::tsquery", "%(ktsq)s::tsquery")
    keys: LiteralString = "c.t, c.session_id, c.seq, c.created_at"
    params = _candidate_params(filters, plan)
    if _from_horizon(filters, plan):
        matches = _horizon_matches(scope, where, sessions=True)
        params["horizon"] = HORIZON_SESSIONS * plan.cap
    else:
        matches = "a AS MATERIALIZED (SELECT " + _KEYS + " FROM messages m WHERE " + where + ")"
    sql: LiteralString = (
        "WITH "
        + matches
        + ", s AS ("
        + _sessions_newest("a c", keys, keys.replace("c.", "e."))
        + "), k AS MATERIALIZED (SELECT m.* FROM a m ORDER BY "
        + NEWEST_FIRST
        + " LIMIT %(cap)s) SELECT 'c' AS tag, c.* FROM ("
        + _BOUNDED_COLUMNS
        + "FROM ("
        + _read_again("k")
        + ") AS m) c UNION ALL SELECT 's', s.* FROM ("
        + _BOUNDED_COLUMNS
        + "FROM ("
        + _read_again("(SELECT m.* FROM s m WHERE " + _NOT_CANDIDATE + ")")
        + ") AS m) s"
    )
    return sql, params


#: How many of the workspace's newest sessions a horizon spans, per row of the cap
#: (`_horizon_matches`).
HORIZON_SESSIONS = 2
#: A horizon is read when the words are expected in this many matches per row of the
#: cap or more: its B-tree read costs about a tenth of a heap read per entry it spans,
#: so it pays only where most matches lie outside it.
HORIZON_MATCHES = 16


def _from_horizon(filters: Filters, plan: CandidatePlan) -> bool:
    """Whether a read of every match of a newest-first plan reads them from a horizon
    (`_horizon_matches`): the workspace's kinds alone in scope, its own posting lists,
    and words expected in `HORIZON_MATCHES` matches per row of the cap or more."""
    frequent = min(map(group_df, plan.groups)) >= HORIZON_MATCHES * plan.cap
    return filters.only_kinds and filters.keyed and frequent


def _horizon_matches(
    scope: LiteralString, where: LiteralString, *, sessions: bool
) -> LiteralString:
    """CTEs ending in ``a``: the `_KEYS` of every match of `where` (`_holds` of `scope`)
    that a read of them all would keep, read from a horizon when that is enough.

    The horizon ``h`` is when the workspace's ``horizon``-th newest session was last
    active (``sessions_updated_idx``; none: every time). The matches stored at or
    after it (``b``: `scope`, whose workspace test a B-tree serves, with the time
    bound through ``messages_created_idx``, ANDed with the keyed match) hold the
    newest `cap` matches when they are at least `cap`, and, with `sessions` (a read
    that also keeps each session's newest match), each of the newest `cap` matching
    sessions' newest match when they come from at least `cap` sessions: every other
    match is older than all of them. Then ``a`` is ``b``; else (``ok`` false) every
    match is read, as without a horizon. The bound only chooses what is
    read; which rows come out never depends on it. A frequent word's matches are read
    for the newest sessions instead of the whole workspace: the heap page of every
    match is most of such a read."""
    enough: LiteralString = "count(*) >= %(cap)s"
    if sessions:
        enough += " AND count(DISTINCT b.session_id) >= %(cap)s"
    return (
        "h AS MATERIALIZED (SELECT coalesce((SELECT x.updated_at FROM sessions x"
        " WHERE x.workspace_id = %(ws)s AND x.updated_at IS NOT NULL"
        " ORDER BY x.updated_at DESC OFFSET %(horizon)s LIMIT 1), '-infinity') AS t), "
        "b AS MATERIALIZED (SELECT "
        + _KEYS
        + " FROM messages m WHERE "
        + scope
        + " AND m.created_at >= (SELECT h.t FROM h) AND "
        + where
        + "), ok AS MATERIALIZED (SELECT (SELECT h.t FROM h) = '-infinity' OR "
        + enough
        + " AS ok FROM b), a AS MATERIALIZED (SELECT b.* FROM b WHERE (SELECT ok.ok FROM ok)"
        " UNION ALL SELECT "
        + _KEYS
        + " FROM messages m WHERE NOT (SELECT ok.ok FROM ok) AND "
        + where
        + ")"
    )


def count_sql(filters: Filters) -> tuple[LiteralString, dict[str, Any]]:
    """How many entries the filters cover (when per-kind statistics cannot tell).

    Without a session or time filter, from the scope counts (messages per kind, role
    and tool) while they agree with the statistics; else, and with those filters,
    the scope's messages are counted."""
    counted: LiteralString = "SELECT count(*) FROM messages m WHERE " + _filter_sql(filters, "m")
    params = _filter_params(filters)
    if filters.session_id is not None or filters.since is not None or filters.until is not None:
        return counted, params
    summed: LiteralString = (
        "SELECT coalesce(sum(c.n_messages), 0)::bigint FROM scope_counts c"
        " WHERE c.workspace_id = %(ws)s AND c.kind = ANY(%(kinds)s::text[])"
    )
    if filters.roles:
        summed += " AND c.role = ANY(%(roles)s::text[])"
    if filters.tool_name is not None:
        summed += " AND %(tool)s = ANY(string_to_array(c.tool_name, '" + TOOL_NAME_SEPARATOR + "'))"
    sql: LiteralString = (
        "SELECT CASE WHEN "
        + _SCOPE_COUNTS_AGREE
        + " THEN ("
        + summed
        + ") ELSE ("
        + counted
        + ") END"
    )
    return sql, params


def browse_scan(limit: int) -> int:
    """Sessions a per-session browse of `limit` entries reads below its cursor before
    it can stop: its page twice over, and a few more."""
    return 2 * limit + 8


def _after_sql(a: Alias) -> LiteralString:
    """Entries of ``messages <a>`` after a browse position, in `NEWEST_FIRST` order."""
    if a == "m":
        return (
            " AND (m.created_at < %(c_time)s OR (m.created_at = %(c_time)s"
            " AND (m.session_id > %(c_sid)s OR (m.session_id = %(c_sid)s"
            " AND m.seq < %(c_seq)s))))"
        )
    return (
        " AND (n.created_at < %(c_time)s OR (n.created_at = %(c_time)s"
        " AND (n.session_id > %(c_sid)s OR (n.session_id = %(c_sid)s"
        " AND n.seq < %(c_seq)s))))"
    )


def _browse_sessions_sql(filters: Filters) -> LiteralString:
    """The sessions that can hold an entry in scope (their first and last entries'
    times bound those of all their entries)."""
    sql: LiteralString = "s.workspace_id = %(ws)s AND s.updated_at IS NOT NULL"
    if filters.session_id is not None:
        sql += " AND s.session_id = %(session_id)s"
    if filters.since is not None:
        sql += " AND s.updated_at >= %(since)s"
    if filters.until is not None:
        sql += " AND s.created_at < %(until)s"
    return sql


def browse_sql(
    filters: Filters, *, per_session: bool, after: BrowsePosition | None, limit: int
) -> tuple[LiteralString, dict[str, Any]]:
    """Newest entries in scope (optionally the newest per session), keyset-paged in
    `NEWEST_FIRST` order after the position ``after``.

    Per session, the newest entry of each session is read from its end (one probe of
    the primary key) for the sessions in order of their last entry's time, newest
    first: those above the cursor's time, then `browse_scan` more. No session read
    later can hold an entry newer than its last entry, so the sessions left to read
    are only those last active no earlier than the page's last entry so far (none
    when the page is full of entries newer than every session left, the usual case;
    all of them when the filters left the page short).
    """
    params = _filter_params(filters)
    params["limit"] = limit
    if after is not None:
        params.update(c_time=after[0], c_sid=after[1], c_seq=after[2])
    if not per_session:
        sql: LiteralString = (
            "SELECT m.session_id, m.seq, m.kind, m.role, m.created_at FROM messages m WHERE "
            + _filter_sql(filters, "m")
        )
        if after is not None:
            sql += _after_sql("m")
        return sql + " ORDER BY " + NEWEST_FIRST + " LIMIT %(limit)s", params
    params["scan"] = browse_scan(limit)
    sessions = _browse_sessions_sql(filters)
    newest: LiteralString = (
        " CROSS JOIN LATERAL (SELECT m.session_id, m.seq, m.kind, m.role, m.created_at"
        " FROM messages m WHERE "
        + _filter_sql(filters, "m", session=False)
        + " AND m.session_id = x.session_id ORDER BY m.seq DESC LIMIT 1) n WHERE true"
        + (_after_sql("n") if after is not None else "")
        + " ORDER BY n.created_at DESC, n.session_id, n.seq DESC LIMIT %(limit)s"
    )
    sql = "WITH c AS MATERIALIZED ("
    if after is not None:
        sql += (
            "(SELECT s.session_id, s.updated_at, false AS b FROM sessions s WHERE "
            + sessions
            + " AND s.updated_at > %(c_time)s) UNION ALL "
        )
    sql += "(SELECT s.session_id, s.updated_at, true AS b FROM sessions s WHERE " + sessions
    if after is not None:
        sql += " AND s.updated_at <= %(c_time)s"
    sql += (
        " ORDER BY s.updated_at DESC LIMIT %(scan)s)), "
        "r AS MATERIALIZED (SELECT n.* FROM c x" + newest + "), "
        # The sessions left that can hold an entry of the page: last active no earlier
        # than the page's last entry so far (any, when the page is short), unless
        # every session was read.
        "t AS MATERIALIZED (SELECT CASE"
        " WHEN (SELECT count(*) FROM c WHERE c.b) < %(scan)s THEN NULL"
        " WHEN (SELECT count(*) FROM r) < %(limit)s THEN '-infinity'::timestamptz"
        " ELSE (SELECT min(r.created_at) FROM r) END AS low,"
        " (SELECT min(c.updated_at) FROM c WHERE c.b) AS high), "
        "d AS MATERIALIZED (SELECT s.session_id FROM sessions s WHERE "
        + sessions
        + " AND s.updated_at >= (SELECT t.low FROM t) AND s.updated_at <= (SELECT t.high FROM t)"
        " AND NOT EXISTS (SELECT 1 FROM c WHERE c.session_id = s.session_id)) "
        "SELECT u.* FROM (SELECT * FROM r UNION ALL (SELECT n.* FROM d x" + newest + ")) u"
        " ORDER BY u.created_at DESC, u.session_id, u.seq DESC LIMIT %(limit)s"
    )
    return sql, params


def browse_page_sql(
    filters: Filters,
    *,
    per_session: bool,
    after: BrowsePosition | None,
    limit: int,
    chars: int,
) -> tuple[LiteralString, dict[str, Any]]:
    """`browse_sql`'s entries read as `FETCH_MESSAGES` reads a page, in the same
    order: a browse is one round trip."""
    inner, params = browse_sql(filters, per_session=per_session, after=after, limit=limit)
    params["chars"] = chars
    sql: LiteralString = (
        "SELECT m.session_id, m.seq, m.entry_id, m.kind, m.role, m.turn, m.tool_name,"
        " m.created_at, substr(m.content, 1, %(chars)s), substr(m.arguments, 1, %(chars)s),"
        " substr(s.title, 1, %(chars)s), substr(s.summary, 1, %(chars)s), s.parent_session_id,"
        " s.prompt_title"
        " FROM (" + inner + ") b"
        # One probe of each table per entry of the page, whatever the page's size is
        # guessed at by a plan made once for any `LIMIT` (a hash of the workspace's
        # messages instead: 60 ms at 80,000).
        " CROSS JOIN LATERAL (SELECT m.* FROM messages m WHERE m.workspace_id = %(ws)s"
        " AND m.session_id = b.session_id AND m.seq = b.seq LIMIT 1) m"
        " LEFT JOIN LATERAL (SELECT s.* FROM sessions s WHERE s.workspace_id = %(ws)s"
        " AND s.session_id = b.session_id LIMIT 1) s ON true"
        " ORDER BY " + NEWEST_FIRST
    )
    return sql, params


# --- serving: one session, the schema revision, API tokens ---------------------------

SESSION_INFO = """
SELECT s.session_id, coalesce(s.title, s.prompt_title), s.message_count, s.created_at,
       s.updated_at, s.source, s.parent_session_id
FROM sessions s WHERE s.workspace_id = %(ws)s AND s.session_id = %(session_id)s
"""

SCHEMA_VERSIONS = "SELECT version_num FROM pgsearch_alembic_version"

_TOKEN_COLUMNS = (
    "token_id, workspace_id, session_id, can_write, rate_per_second, label, created_at, revoked_at"
)

CREATE_TOKEN = (
    "INSERT INTO api_tokens (token_id, token_hash, workspace_id, session_id, can_write,"
    " rate_per_second, label)"
    " VALUES (%(token_id)s, %(token_hash)s, %(ws)s, %(session_id)s, %(can_write)s,"
    " %(rate)s, %(label)s)"
    " RETURNING " + _TOKEN_COLUMNS
)

TOKEN_BY_HASH = (
    "SELECT " + _TOKEN_COLUMNS + " FROM api_tokens"
    " WHERE token_hash = %(token_hash)s AND revoked_at IS NULL"
)

LIST_TOKENS = "SELECT " + _TOKEN_COLUMNS + " FROM api_tokens ORDER BY created_at, token_id"

LIST_WORKSPACE_TOKENS = (
    "SELECT " + _TOKEN_COLUMNS + " FROM api_tokens WHERE workspace_id = %(ws)s"
    " ORDER BY created_at, token_id"
)

REVOKE_TOKEN = (
    "UPDATE api_tokens SET revoked_at = now()"
    " WHERE token_id = %(token_id)s AND revoked_at IS NULL"
    " RETURNING " + _TOKEN_COLUMNS
)
