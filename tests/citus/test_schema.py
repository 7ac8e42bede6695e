"""The distributed schema: what the migrations make on Citus, and converting in place.

- On a database with the citus extension, ``pgsearch migrate`` distributes every
  tenant table by ``workspace_id`` in one co-location group and makes the shared
  table a reference table; the indexes exist on every shard, the statistics target
  reached the shards, and row level security is on for every shard.
- Downgrades run on the distributed schema (down to base and up again).
- A single-node database with data becomes distributed in place with
  ``pgsearch migrate --distribute``: every row kept, search answers the same, and a
  second run does nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgsearch import PgSearch, SessionQueryRequest
from pgsearch.db import citus
from pgsearch.db.migrate import HEAD_REVISION, migrate
from tests.citus.conftest import SHARDS, Schemas, citus_tables, with_options
from tests.conftest import EXAMPLES, RUN_ID
from tests.reliability.conftest import cli, snapshot


def _on_shards(dsn: str, table: str, command: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT success, result FROM run_command_on_shards(%s, %s)", (table, command)
        ).fetchall()
    assert rows and all(ok for ok, _ in rows), rows
    return [str(r) for _, r in rows]


def test_tenant_tables_are_distributed_and_colocated(cluster_dsn: str) -> None:
    placed = citus_tables(cluster_dsn)
    groups = {placed[t][1] for t in citus.DISTRIBUTED_TABLES}
    assert len(groups) == 1, placed  # every tenant table co-located with sessions
    assert {placed[t][0] for t in citus.DISTRIBUTED_TABLES} == {"h"}
    assert placed["pgsearch_meta"][0] == "n"
    with psycopg.connect(cluster_dsn) as conn:
        columns = conn.execute(
            "SELECT c.relname, column_to_column_name(p.logicalrelid, p.partkey)"
            " FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid"
            " WHERE p.partmethod = 'h'"
            " AND c.relnamespace = to_regnamespace(current_schema())::oid"
        ).fetchall()
        shards = conn.execute(
            "SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'messages'::regclass"
        ).fetchone()
        # The version table stays on the coordinator alone.
        local = conn.execute(
            "SELECT count(*) FROM pg_dist_partition"
            " WHERE logicalrelid = to_regclass('pgsearch_alembic_version')"
        ).fetchone()
    assert dict(columns) == {t: "workspace_id" for t in citus.DISTRIBUTED_TABLES}
    assert shards == (SHARDS,)
    assert local == (0,)


def test_every_shard_has_the_indexes_statistics_and_policies(cluster_dsn: str) -> None:
    for table in citus.DISTRIBUTED_TABLES:
        with psycopg.connect(cluster_dsn) as conn:
            wanted = {
                str(r[0])
                for r in conn.execute(
                    "SELECT indexrelid::regclass::text FROM pg_index"
                    " WHERE indrelid = to_regclass(%s)",
                    (table,),
                ).fetchall()
            }
        assert f"{table}_pkey" in wanted
        found = _on_shards(
            cluster_dsn,
            table,
            "SELECT string_agg(regexp_replace(indexrelid::regclass::text, '^.*\\.|_[0-9]+$', '',"
            " 'g'), ',' ORDER BY 1) FROM pg_index WHERE indrelid = '%s'::regclass",
        )
        for names in found:
            assert set(names.split(",")) == {w.rsplit(".", 1)[-1] for w in wanted}, (table, names)
    stattarget = _on_shards(
        cluster_dsn,
        "messages",
        "SELECT attstattarget FROM pg_attribute WHERE attrelid = '%s'::regclass"
        " AND attname = 'tsv'",
    )
    assert set(stattarget) == {"300"}  # revision 0003's target, on every shard
    for table in citus.DISTRIBUTED_TABLES:
        rls = _on_shards(
            cluster_dsn,
            table,
            "SELECT relrowsecurity::text || count(p.*)::text FROM pg_class c"
            " LEFT JOIN pg_policy p ON p.polrelid = c.oid WHERE c.oid = '%s'::regclass"
            " GROUP BY relrowsecurity",
        )
        assert set(rls) == {"true1"}, (table, rls)


def test_the_upkeep_after_a_bulk_load_merges_every_shards_pending_lists(
    dsn: str, pg: PgSearch
) -> None:
    """`Store.after_bulk_load` skips a statement the server refuses (a user who owns
    no table), so its statements are run here directly, as the owner: they merge the
    GIN pending lists of every shard of the message and vocabulary tables."""
    from pgsearch.db import queries as q

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple SCHEMA public")
    for i in range(3):
        pg.append(
            workspace=f"upkeep-{i}",
            session_id="s",
            messages=[{"role": "user", "content": f"zanzibar flamingo upkeep{i}x"}],
        )
    pending = (
        "SELECT coalesce(sum(s.pending_pages), 0) FROM pg_index i"
        " JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam,"
        " LATERAL pgstatginindex(i.indexrelid) s"
        " WHERE i.indrelid = '%s'::regclass AND a.amname = 'gin'"
    )
    assert any(n != "0" for n in _on_shards(dsn, "vocabulary", pending))
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in q.AFTER_BULK_LOAD_CITUS:
            conn.execute(statement)
    for table in ("vocabulary", "messages"):
        assert set(_on_shards(dsn, table, pending)) == {"0"}, table


def test_downgrade_to_base_and_up_again(schemas: Schemas) -> None:
    dsn = schemas.create("down")
    with PgSearch.connect(dsn) as pg:
        pg.ingest_paths([EXAMPLES], workspace="w")
    assert migrate(dsn, "0003", downgrade=True) == "0003"
    assert "leaf_titles" not in citus_tables(dsn)
    assert migrate(dsn) == HEAD_REVISION
    assert "leaf_titles" in citus_tables(dsn)
    with PgSearch.connect(dsn) as pg:
        assert pg.stats(workspace="w").messages > 0  # the data of the kept tables stayed
    assert migrate(dsn, "base", downgrade=True) is None
    assert citus_tables(dsn) == {}
    assert migrate(with_options(dsn, citus__shard_count="4")) == HEAD_REVISION
    assert len(citus_tables(dsn)) == len(citus.DISTRIBUTED_TABLES) + len(citus.REFERENCE_TABLES)


def test_migration_0009_titles_stored_sessions_on_the_cluster(schemas: Schemas) -> None:
    """The backfill of prompt titles runs on the distributed tables (each statement
    a router query), in every workspace."""
    dsn = schemas.create("titles")
    with PgSearch.connect(dsn) as pg:
        for ws in ("w1", "w2", "w3"):
            for i in range(3):
                pg.append(
                    workspace=ws,
                    session_id=f"s{i}",
                    messages=[
                        {"role": "system", "content": "setup"},
                        {"role": "user", "content": f"## fix the **{ws}** job {i}"},
                    ],
                )
    assert migrate(dsn, "0008", downgrade=True) == "0008"
    assert migrate(dsn) == HEAD_REVISION
    with PgSearch.connect(dsn) as pg:
        for ws in ("w1", "w2", "w3"):
            titles = {s.session_id: s.title for s in pg.sessions(workspace=ws)}
            assert titles == {f"s{i}": f"fix the {ws} job {i}" for i in range(3)}


# --- converting a single-node database in place ------------------------------------------


def _nodes(coordinator: str) -> list[tuple[str, int]]:
    with psycopg.connect(coordinator) as conn:
        rows = conn.execute(
            "SELECT nodename, nodeport FROM pg_dist_node WHERE noderole = 'primary'"
            " AND groupid > 0 ORDER BY nodeport"
        ).fetchall()
    return [(str(h), int(p)) for h, p in rows]


def _at(dsn: str, *, host: str | None = None, port: int | None = None, dbname: str) -> str:
    params = conninfo_to_dict(dsn)
    params.pop("options", None)
    params["dbname"] = dbname
    if host is not None:
        params["host"], params["port"] = host, str(port)
    return make_conninfo(**params)  # type: ignore[arg-type]


@pytest.fixture
def single_node(coordinator: str) -> Iterator[tuple[str, list[str]]]:
    """A database on every node of the cluster, without Citus on the coordinator yet
    (a single PostgreSQL as far as pgsearch can tell); the workers have the extension.
    Yields the coordinator database's DSN and the workers' DSNs."""
    name = f"pgsearch_{RUN_ID}_convert"
    workers = [_at(coordinator, host=h, port=p, dbname="postgres") for h, p in _nodes(coordinator)]
    admins = [_at(coordinator, dbname="postgres"), *workers]
    for i, admin in enumerate(admins):
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        if i:
            with psycopg.connect(_at(admin, dbname=name), autocommit=True) as conn:
                for ext in ("citus", "pg_trgm", "btree_gin", "fuzzystrmatch"):
                    conn.execute(sql.SQL("CREATE EXTENSION {}").format(sql.Identifier(ext)))
    try:
        yield _at(coordinator, dbname=name), [_at(w, dbname=name) for w in workers]
    finally:
        for admin in admins:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )


def _answers(dsn: str) -> list[Any]:
    out: list[Any] = []
    with PgSearch.connect(dsn) as pg:
        provider = pg.provider(workspace="w")
        for query in ("cron refactor", "deploy keys", "pokemn accents", "pokmeon", ""):
            result = provider.search(SessionQueryRequest(query=query, limit=20))
            out.append([(m.session_id, m.seq, round(m.score, 9)) for m in result.matches])
    return out


def test_migrate_distribute_converts_a_single_node_database(
    single_node: tuple[str, list[str]],
) -> None:
    dsn, workers = single_node
    migrate(dsn)
    with PgSearch.connect(dsn) as pg:
        assert not pg._driver.citus
        for ws in ("w", "v", "u"):
            report = pg.ingest_paths([EXAMPLES], workspace=ws)
            assert report.errors == []
        pg.append(workspace="v", session_id="more", messages=[{"role": "user", "content": "x"}])
    before = snapshot(dsn)
    answers = _answers(dsn)
    refused = cli("migrate", "--distribute", dsn=dsn)
    assert refused.returncode != 0
    assert "citus extension" in refused.stderr
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION citus")
        conn.execute("SELECT citus_set_coordinator_host('127.0.0.1', %s)", (_port(dsn),))
        for w in workers:
            conn.execute("SELECT citus_add_node('127.0.0.1', %s)", (_port(w),))
    # Migrating without --distribute keeps the local tables local.
    assert cli("migrate", dsn=dsn).returncode == 0
    assert citus_tables(dsn) == {}
    done = cli("migrate", "--distribute", dsn=with_options(dsn, citus__shard_count="4"))
    assert done.returncode == 0, done.stderr
    placed = citus_tables(dsn)
    assert {t: m for t, (m, _) in placed.items()} == {
        **{t: "h" for t in citus.DISTRIBUTED_TABLES},
        **{t: "n" for t in citus.REFERENCE_TABLES},
    }
    assert len({g for t, (_, g) in placed.items() if t in citus.DISTRIBUTED_TABLES}) == 1
    assert snapshot(dsn) == before
    with psycopg.connect(dsn) as conn:
        # The rows live in the shards now, not in the coordinator's own tables.
        local = conn.execute("SELECT pg_relation_size('messages')").fetchone()
        placements = conn.execute(
            "SELECT count(DISTINCT nodeport) FROM pg_dist_shard_placement"
            " WHERE shardid IN (SELECT shardid FROM pg_dist_shard"
            " WHERE logicalrelid = 'messages'::regclass)"
        ).fetchone()
        fkey = conn.execute(
            "SELECT count(*) FROM pg_constraint WHERE conname = 'messages_session_fkey'"
        ).fetchone()
    assert placements == (2,)
    assert fkey == (1,)
    assert local == (0,)
    with PgSearch.connect(dsn) as pg:
        assert pg._driver.citus
    assert _answers(dsn) == answers
    again = cli("migrate", "--distribute", dsn=dsn)
    assert again.returncode == 0, again.stderr
    assert snapshot(dsn) == before


def _port(dsn: str) -> int:
    return int(conninfo_to_dict(dsn).get("port") or 5432)
