"""Citus: pgsearch's tables distributed by workspace over a cluster.

When the ``citus`` extension exists in the database, the migrations distribute every
tenant table by ``workspace_id``, all co-located with ``sessions`` (one workspace's
rows of every table live in shards on the same node, so each statement, which names
one workspace, is a router query to one shard), and make the tables that are the same
for every tenant reference tables (a copy on each node). In a migration the order is
extensions, then tables, then `distribute`, then indexes (built on each shard).

A database that already holds data is converted in place by `convert`
(``pgsearch migrate --distribute``): the tables are distributed with their rows.

Whether a migration distributes what it creates is decided by the database itself
(`distributed_schema`): with the extension and ``sessions`` distributed (or not yet
created), yes; on plain PostgreSQL, or a Citus database whose tables were left
local, the revisions run exactly as on one server.

Every function takes a SQLAlchemy connection (a migration's ``op.get_bind()``);
nothing here runs on the search or ingest path.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

#: The column every distributed table is distributed by.
DISTRIBUTION_COLUMN = "workspace_id"
#: The table every other distributed table is co-located with.
ANCHOR = "sessions"
#: Tenant tables in the order they are distributed (``sessions`` first: ``messages``
#: references it, and every table is co-located with it).
DISTRIBUTED_TABLES = (
    "sessions",
    "messages",
    "vocabulary",
    "workspace_stats",
    "ingested_files",
    "leaf_titles",
    "forgotten_sessions",
    "term_lists",
    "term_list_heads",
    "term_list_state",
    "scope_counts",
)
#: Tables that are the same for every tenant: a copy on each node.
REFERENCE_TABLES = ("pgsearch_meta", "api_tokens")

#: Statements that read every shard by nature; the only ones pgsearch sends that are
#: not router queries. Named by their `Statement.name`; none is on a search or
#: ingest path (see docs/scale-out.md).
CROSS_WORKSPACE = frozenset(
    {
        "workspaces",  # `pgsearch workspaces`: every workspace with data
        "table sizes",  # `pgsearch stats` without a workspace
        "message estimate",  # once after a bulk load: is ANALYZE due?
        "maintenance",  # once after a large bulk load: merge GIN lists, ANALYZE
        "maintenance watermark",  # a term list rebuild waits for writers of any workspace
        "maintenance watermark value",  # then reads the sequence's newest value
    }
)


def _scalar(conn: Any, query: str, **params: Any) -> Any:
    from sqlalchemy import text

    return conn.execute(text(query), params).scalar()


def installed(conn: Any) -> bool:
    """Whether the ``citus`` extension exists in this database."""
    return bool(_scalar(conn, "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')"))


def is_distributed(conn: Any, table: str) -> bool:
    """Whether `table` is a Citus table (distributed or reference)."""
    if not installed(conn):
        return False
    return bool(
        _scalar(
            conn,
            "SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass(:t))",
            t=table,
        )
    )


def distributed_schema(conn: Any) -> bool:
    """Whether migrations distribute the tables they create in this database.

    Yes with the extension when ``sessions`` is distributed, or while the first
    revision runs (none recorded yet); no on plain PostgreSQL, and no in a database
    migrated before the extension came (its tables stay local until `convert`).
    """
    if not installed(conn):
        return False
    if is_distributed(conn, ANCHOR):
        return True
    from pgsearch.db.connector import VERSION_TABLE

    if _scalar(conn, "SELECT to_regclass(:t) IS NULL", t=VERSION_TABLE):
        return True
    return not _scalar(conn, f"SELECT EXISTS (SELECT 1 FROM {VERSION_TABLE})")


def distribute(conn: Any, table: str) -> None:
    """Distribute `table` by workspace, co-located with ``sessions`` (no-op unless
    `distributed_schema`). Call it after creating the table, before its indexes."""
    if not distributed_schema(conn) or is_distributed(conn, table):
        return
    colocate = "none" if table == ANCHOR else ANCHOR
    _scalar(
        conn,
        "SELECT create_distributed_table(:t, :c, colocate_with => :w)",
        t=table,
        c=DISTRIBUTION_COLUMN,
        w=colocate,
    )
    log.info("distributed %s by %s", table, DISTRIBUTION_COLUMN)


def reference(conn: Any, table: str) -> None:
    """Make `table` a reference table (no-op unless `distributed_schema`)."""
    if not distributed_schema(conn) or is_distributed(conn, table):
        return
    _scalar(conn, "SELECT create_reference_table(:t)", t=table)
    log.info("made %s a reference table", table)


#: Foreign keys between tenant tables, dropped while their tables are distributed
#: and added back after (Citus requires both sides distributed and co-located).
_FOREIGN_KEYS = (
    (
        "messages",
        "messages_session_fkey",
        "FOREIGN KEY (workspace_id, session_id) REFERENCES sessions (workspace_id, session_id)"
        " ON DELETE CASCADE",
    ),
)


#: pgsearch's own functions, which searches call on the node holding the workspace.
FUNCTIONS = (
    "pgsearch_edit_distance(text, text, integer, boolean)",
    "pgsearch_workspace_terms(text, tsvector)",
    "pgsearch_workspace_query(text, tsquery)",
)


def convert(conn: Any) -> list[str]:
    """Distribute an existing single-node schema in place, with its rows.

    One transaction: the foreign keys between tenant tables are dropped, each table
    is distributed (rows copied to the shards, then the coordinator's local copy
    truncated), the keys are added back. Returns the tables converted (none when
    every table already is distributed). Needs the extension and at least one
    worker; the caller holds the migration lock.
    """
    from sqlalchemy import text

    from pgsearch.errors import ConfigError

    if not installed(conn):
        raise ConfigError(
            "--distribute needs the citus extension in this database "
            "(CREATE EXTENSION citus, then add the workers with citus_add_node)"
        )
    present = [
        t
        for t in (*REFERENCE_TABLES, *DISTRIBUTED_TABLES)
        if _scalar(conn, "SELECT to_regclass(:t) IS NOT NULL", t=t)
    ]
    if ANCHOR not in present:
        raise ConfigError("--distribute: no pgsearch schema here yet; run `pgsearch migrate` first")
    todo = [t for t in present if not is_distributed(conn, t)]
    if not todo:
        return []
    # Functions created before the extension live on the coordinator only; searches
    # run on the workers (which need the extensions pgsearch uses, as every node does).
    # First: Citus creates no function in a transaction that has written to shards.
    for function in FUNCTIONS:
        if _scalar(
            conn,
            "SELECT to_regprocedure(:f) IS NOT NULL AND NOT EXISTS (SELECT 1 FROM"
            " pg_dist_object WHERE classid = 'pg_proc'::regclass"
            " AND objid = to_regprocedure(:f))",
            f=function,
        ):
            _scalar(conn, "SELECT create_distributed_function(:f)", f=function)
    keys = [
        (table, name, definition)
        for table, name, definition in _FOREIGN_KEYS
        if table in todo
        and _scalar(
            conn,
            "SELECT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = :n"
            " AND conrelid = to_regclass(:t))",
            n=name,
            t=table,
        )
    ]
    for table, name, _ in keys:
        conn.execute(text(f'ALTER TABLE "{table}" DROP CONSTRAINT "{name}"'))
    for table in todo:
        if table in REFERENCE_TABLES:
            _scalar(conn, "SELECT create_reference_table(:t)", t=table)
        else:
            colocate = "none" if table == ANCHOR else ANCHOR
            _scalar(
                conn,
                "SELECT create_distributed_table(:t, :c, colocate_with => :w)",
                t=table,
                c=DISTRIBUTION_COLUMN,
                w=colocate,
            )
        # The rows now live in the shards; the coordinator's copy is dead weight.
        _scalar(conn, "SELECT truncate_local_data_after_distributing_table(:t)", t=table)
    for table, name, definition in keys:
        conn.execute(text(f'ALTER TABLE "{table}" ADD CONSTRAINT "{name}" {definition}'))
    return todo


def alter_table(conn: Any, table: str, clause: str) -> None:
    """``ALTER TABLE table clause``, on each shard too when `table` is distributed.

    For clauses Citus does not propagate (``ALTER COLUMN ... SET STATISTICS``): the
    coordinator's table takes it with propagation off, so that shards created later
    (tenant moves and splits copy its definition) inherit it, and every existing
    shard takes it through ``run_command_on_shards``. The clause is pgsearch's own
    text, never user input.
    """
    from sqlalchemy import text

    if not is_distributed(conn, table):
        conn.execute(text(f"ALTER TABLE {table} {clause}"))
        return
    conn.execute(text("SELECT set_config('citus.enable_ddl_propagation', 'off', true)"))
    conn.execute(text(f"ALTER TABLE {table} {clause}"))
    conn.execute(text("SELECT set_config('citus.enable_ddl_propagation', 'on', true)"))
    failed = conn.execute(
        text(
            "SELECT shardid, result FROM run_command_on_shards(:t, :cmd) WHERE NOT success"
            " ORDER BY shardid"
        ),
        {"t": table, "cmd": f"ALTER TABLE %s {clause}"},
    ).all()
    if failed:
        from pgsearch.errors import StoreError

        raise StoreError(
            f"ALTER TABLE {table} {clause} failed on shard {failed[0][0]}: {failed[0][1]}"
        )
