"""The harness itself: a real private primary, a real streaming standby, real faults.

The other serving suites rely on these facts, so they are checked first: the
servers run as an unprivileged account on loopback ports of their own range, the
standby streams and refuses writes, a migrated database reaches it, the restart,
stop and terminate helpers do what they say, and a run without server programs
fails with instructions rather than skipping.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import psycopg
import pytest
from psycopg import errors as pg_errors

from pgsearch.db.connector import HEAD_REVISION
from tests.serving.cluster import (
    DIR_PREFIX,
    PORT_RANGE,
    Cluster,
    MissingServer,
    find_binaries,
    reap_stale,
)
from tests.serving.conftest import Nodes


def test_the_standby_streams_from_a_private_primary(cluster: Cluster) -> None:
    assert {cluster.primary.port, cluster.standby.port} <= set(PORT_RANGE)
    assert cluster.primary.port not in (5432, cluster.standby.port)
    with cluster.primary.connect() as conn:
        replication = conn.execute(
            "SELECT state, slot_name FROM pg_stat_replication "
            "JOIN pg_replication_slots ON active_pid = pid"
        ).fetchall()
        assert replication == [("streaming", "pgsearch_test_standby")]
        in_recovery, wal_level, datadir = conn.execute(
            "SELECT pg_is_in_recovery(), current_setting('wal_level'), "
            "current_setting('data_directory')"
        ).fetchone() or (None, None, None)
        assert (in_recovery, wal_level) == (False, "replica")
        assert Path(datadir).is_relative_to(cluster.root)
    with cluster.standby.connect() as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
        assert conn.execute("SHOW hot_standby").fetchone() == ("on",)
        with pytest.raises(pg_errors.ReadOnlySqlTransaction):
            conn.execute("CREATE TABLE nope (x int)")
    # PostgreSQL refuses to run as root; the harness runs it as an unprivileged account.
    owner = (cluster.primary.datadir / "PG_VERSION").stat().st_uid
    if os.geteuid() == 0:
        assert owner == pwd.getpwnam(cluster.bins.os_user or "").pw_uid != 0


def test_a_migrated_database_reaches_the_standby(nodes: Nodes) -> None:
    for dsn in (nodes.primary_dsn, nodes.standby_dsn):
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [
                (HEAD_REVISION,)
            ]
            extensions = {r[0] for r in conn.execute("SELECT extname FROM pg_extension")}
            assert {"pg_trgm", "btree_gin"} <= extensions
            ctype = conn.execute(
                "SELECT datctype FROM pg_database WHERE datname = current_database()"
            ).fetchone()
            assert ctype is not None and "utf" in ctype[0].lower()


def test_a_write_on_the_primary_is_replayed_on_the_standby(nodes: Nodes) -> None:
    with psycopg.connect(nodes.primary_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO pgsearch_meta (key, value) VALUES ('harness', 'replayed')")
    nodes.wait_for_replay()
    with psycopg.connect(nodes.standby_dsn) as conn:
        row = conn.execute("SELECT value FROM pgsearch_meta WHERE key = 'harness'").fetchone()
    assert row == ("replayed",)


def test_a_fast_restart_cuts_sessions_and_the_standby_follows(nodes: Nodes) -> None:
    cluster = nodes.cluster
    with psycopg.connect(nodes.primary_dsn, autocommit=True) as conn:
        before = conn.execute("SELECT pg_postmaster_start_time()").fetchone()
        cluster.primary.restart()
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
    with psycopg.connect(nodes.primary_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT pg_postmaster_start_time()").fetchone() != before
        conn.execute("INSERT INTO pgsearch_meta (key, value) VALUES ('after', 'restart')")
    cluster.wait_streaming()
    nodes.wait_for_replay()
    with psycopg.connect(nodes.standby_dsn) as conn:
        assert conn.execute("SELECT value FROM pgsearch_meta WHERE key = 'after'").fetchone() == (
            "restart",
        )


def test_terminating_backends_cuts_exactly_those_sessions(nodes: Nodes) -> None:
    named = psycopg.connect(nodes.primary_dsn, autocommit=True, application_name="victim")
    other = psycopg.connect(nodes.primary_dsn, autocommit=True, application_name="bystander")
    try:
        assert nodes.primary.terminate_backends(nodes.dbname, application_name="victim") == 1
        with pytest.raises(psycopg.OperationalError):
            named.execute("SELECT 1")
        assert other.execute("SELECT 1").fetchone() == (1,)
        assert nodes.primary.terminate_backends(nodes.dbname) == 1
        with pytest.raises(psycopg.OperationalError):
            other.execute("SELECT 1")
    finally:
        named.close()
        other.close()


def test_a_stopped_standby_refuses_connections_and_comes_back(nodes: Nodes) -> None:
    nodes.standby.stop()
    assert not nodes.standby.running()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(nodes.standby_dsn, connect_timeout=3)
    with psycopg.connect(nodes.primary_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO pgsearch_meta (key, value) VALUES ('while', 'stopped')")
    nodes.standby.start()
    nodes.cluster.wait_streaming()
    nodes.wait_for_replay()  # the slot kept the WAL the standby missed
    with psycopg.connect(nodes.standby_dsn) as conn:
        assert conn.execute("SELECT value FROM pgsearch_meta WHERE key = 'while'").fetchone() == (
            "stopped",
        )


def test_without_server_programs_the_suite_fails_saying_how_to_get_them(tmp_path: Path) -> None:
    with pytest.raises(MissingServer) as info:
        find_binaries({"PGSEARCH_PG_BINDIR": str(tmp_path / "nowhere")})
    message = str(info.value)
    assert "PGSEARCH_PG_BINDIR" in message and "postgresql-15" in message
    assert str(tmp_path / "nowhere") in message


def test_clusters_of_a_dead_run_are_reaped(tmp_path: Path) -> None:
    dead = tmp_path / f"{DIR_PREFIX}dead"
    dead.mkdir()
    # A process id that cannot be alive: beyond the kernel's maximum.
    limit = int(Path("/proc/sys/kernel/pid_max").read_text().strip())
    (dead / "owner").write_text(str(limit + 1))
    alive = tmp_path / f"{DIR_PREFIX}alive"
    alive.mkdir()
    (alive / "owner").write_text(str(os.getpid()))
    assert reap_stale(tmp_path) == 1
    assert not dead.exists() and alive.exists()
