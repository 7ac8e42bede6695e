"""The Citus suite: pgsearch on a real cluster (a coordinator and two workers).

The cluster comes from ``PGSEARCH_CITUS_DSN`` (a coordinator database with the
``citus``, ``pg_trgm`` and ``btree_gin`` extensions and its workers added; the tests
own that database: they create schemas in it, add ``fuzzystrmatch`` to its ``public``
schema when missing and empty its pgsearch tables), else the
suite starts one itself with ``cluster.sh`` from the Citus tools folder
(``PGSEARCH_CITUS_TOOLS``, by default ``../shared/tools/citus`` beside the checkout)
on ports from ``PGSEARCH_CITUS_PORT`` (default 56120) and stops it at the end.
Without either it is skipped saying how to provide one, or fails when
``PGSEARCH_REQUIRE`` names ``citus`` (as in CI).

Every pgsearch connection of the suite runs with ``PGSEARCH_CITUS_SINGLE_SHARD=on``:
a transaction bound to a workspace fails on the server if any of its statements
would touch a second shard (``citus.multi_task_query_log_level = error``). Tables
get 8 shards here (Citus' default is 32) to keep migrations short.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgsearch import PgSearch
from pgsearch.db import citus
from pgsearch.db.migrate import migrate
from pgsearch.db.queries import TENANT_TABLES
from tests.conftest import RUN_ID, left_out, missing_part, required

REPO = Path(__file__).resolve().parents[2]
TOOLS = Path(os.environ.get("PGSEARCH_CITUS_TOOLS") or REPO.parent / "shared" / "tools" / "citus")
FIRST_PORT = int(os.environ.get("PGSEARCH_CITUS_PORT", "56120"))
SHARDS = 8
HOW = (
    "the Citus suite needs a cluster: set PGSEARCH_CITUS_DSN=postgresql://user@coordinator/db "
    "(a database the tests may fill, with the citus, pg_trgm and btree_gin extensions and "
    "its workers added with citus_add_node), or provide the Citus tools folder with "
    f"cluster.sh (PGSEARCH_CITUS_TOOLS, looked for at {TOOLS})"
)


def with_options(dsn: str, **settings: str) -> str:
    """`dsn` with server settings added to its ``options``."""
    params = conninfo_to_dict(dsn)
    extra = " ".join(f"-c {k.replace('__', '.')}={v}" for k, v in settings.items())
    params["options"] = f"{params.get('options', '')} {extra}".strip()
    return make_conninfo(**params)  # type: ignore[arg-type]


def with_schema(dsn: str, schema: str) -> str:
    return with_options(dsn, search_path=f"{schema},public")


def _free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without a cluster the suite's tests are left out, with one line saying how to
    provide one (unless ``PGSEARCH_REQUIRE`` names citus: then they fail)."""
    if os.environ.get("PGSEARCH_CITUS_DSN") or (TOOLS / "cluster.sh").is_file():
        return
    if required("citus"):
        return
    mine = [i for i in items if Path(str(i.path)).resolve().is_relative_to(Path(__file__).parent)]
    if not mine:
        return
    config.hook.pytest_deselected(items=mine)
    items[:] = [i for i in items if i not in mine]
    left_out(f"tests/citus left out ({len(mine)} tests): no Citus cluster; {HOW}")


@pytest.fixture(scope="session")
def coordinator() -> Iterator[str]:
    """The coordinator's DSN (a database the suite owns)."""
    given = os.environ.get("PGSEARCH_CITUS_DSN")
    if given:
        try:
            with psycopg.connect(given, connect_timeout=5) as conn:
                row = conn.execute(
                    "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')"
                ).fetchone()
        except psycopg.Error as exc:
            pytest.fail(f"PGSEARCH_CITUS_DSN does not answer ({exc}); {HOW}")
        if not row or not row[0]:
            pytest.fail(f"PGSEARCH_CITUS_DSN names a database without the citus extension; {HOW}")
        yield given
        return
    script = TOOLS / "cluster.sh"
    if not script.is_file():
        missing_part("citus", HOW)
    base = Path(tempfile.mkdtemp(prefix="pgsearch-citus-", dir=os.environ.get("PGSEARCH_TEST_TMP")))
    base.chmod(0o711)
    cluster = base / "cluster"
    try:
        yield _start(script, cluster)
    finally:
        subprocess.run([str(script), "stop", str(cluster)], capture_output=True, timeout=120)
        shutil.rmtree(base, ignore_errors=True)


def _start(script: Path, cluster: Path) -> str:
    """Start the cluster on the first free ports from FIRST_PORT; its DSN.

    A port that looked free can still be taken a moment later by some client's
    outgoing connection (ephemeral ports overlap ours): then the next three are tried.
    """
    port = FIRST_PORT
    for _ in range(5):
        while not all(_free(p) for p in (port, port + 1, port + 2)):
            port += 3
        done = subprocess.run(
            [str(script), "start", str(cluster), str(port)],
            capture_output=True,
            text=True,
            timeout=180,
        )
        if done.returncode == 0:
            dsn = done.stdout.strip().splitlines()[-1]
            _allow_citus_decoding(dsn, [port, port + 1, port + 2])
            return dsn
        logs = "".join(p.read_text(errors="replace")[-600:] for p in cluster.glob("*.log"))
        subprocess.run([str(script), "stop", str(cluster)], capture_output=True, timeout=120)
        if "Address already in use" not in logs:
            pytest.fail(f"cluster.sh could not start a cluster: {done.stderr.strip()}\n{logs}")
        shutil.rmtree(cluster, ignore_errors=True)
        port += 3
    pytest.fail(f"cluster.sh found no free ports from {FIRST_PORT} to {port}")


def _allow_citus_decoding(dsn: str, ports: list[int]) -> None:
    """Let Citus' logical decoding plugin stream shards (tenant moves and splits with
    logical replication), where the server restricts the plugins it loads."""
    for port in ports:
        params = conninfo_to_dict(dsn)
        params["port"] = str(port)
        with psycopg.connect(make_conninfo(**params), autocommit=True) as conn:  # type: ignore[arg-type]
            allowed = conn.execute(
                "SELECT setting FROM pg_settings WHERE name = 'output_plugin_libraries'"
            ).fetchone()
            if allowed is None or "citus" in str(allowed[0]):
                continue
            names = [n.strip().strip('"') for n in str(allowed[0]).split(",") if n.strip()]
            conn.execute(
                sql.SQL("ALTER SYSTEM SET output_plugin_libraries = {}").format(
                    sql.SQL(", ").join(sql.Identifier(n) for n in [*names, "citus"])
                )
            )
            conn.execute("SELECT pg_reload_conf()")


@pytest.fixture(scope="session", autouse=True)
def single_shard() -> Iterator[None]:
    """Every PgSearch of the suite fails a multi-shard statement in workspace work."""
    mp = pytest.MonkeyPatch()
    mp.setenv("PGSEARCH_CITUS_SINGLE_SHARD", "on")
    yield
    mp.undo()


class Schemas:
    """Schemas of the coordinator database made by this run, each migrated, dropped
    at the end (Citus drops their shards on the workers)."""

    def __init__(self, coordinator: str) -> None:
        self.coordinator = coordinator
        self.made: list[str] = []

    def create(self, prefix: str = "s", *, migrated: bool = True) -> str:
        """A new schema; returns a DSN whose search path starts with it."""
        name = f"pgsearch_{RUN_ID}_{prefix}_{uuid.uuid4().hex[:6]}"
        with psycopg.connect(self.coordinator, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        self.made.append(name)
        dsn = with_schema(self.coordinator, name)
        if migrated:
            migrate(with_options(dsn, citus__shard_count=str(SHARDS)))
        return dsn

    def drop_all(self) -> None:
        with psycopg.connect(self.coordinator, autocommit=True) as conn:
            for name in reversed(self.made):
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name))
                )
        self.made.clear()


@pytest.fixture(scope="session")
def schemas(coordinator: str) -> Iterator[Schemas]:
    # The extensions live in ``public``, where every schema's search path finds them:
    # one a migration created would land in the first schema migrated, unseen by the
    # others. Citus creates it on the workers too.
    with psycopg.connect(coordinator, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS fuzzystrmatch SCHEMA public")
    made = Schemas(coordinator)
    yield made
    made.drop_all()


@pytest.fixture(scope="session")
def cluster_dsn(schemas: Schemas) -> str:
    """A schema migrated on the cluster and shared by the suite's tests: each test
    uses workspaces of its own, or the `dsn` fixture, which empties the tables after
    it. (The database's ``public`` schema holds only the extensions: a schema's
    search path ends with it, and must find no pgsearch table there.)"""
    dsn = schemas.create("shared")
    placed = citus_tables(dsn)
    assert {t: m for t, (m, _) in placed.items()} == {
        **{t: "h" for t in citus.DISTRIBUTED_TABLES},
        **{t: "n" for t in citus.REFERENCE_TABLES},
    }
    return dsn


@pytest.fixture
def app_role(cluster_dsn: str) -> Iterator[str]:
    """A login role that owns nothing and bypasses nothing, with an application's
    privileges on the shared schema (Citus creates it, and grants, on every node)."""
    role = f"pgsearch_test_{RUN_ID}_app_{uuid.uuid4().hex[:8]}"
    ident = sql.Identifier(role)
    with psycopg.connect(cluster_dsn, autocommit=True) as conn:
        schema = sql.Identifier(str(conn.execute("SELECT current_schema()").fetchone()[0]))  # type: ignore[index]
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOBYPASSRLS").format(ident))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, ident))
        conn.execute(
            sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {} TO {}").format(
                schema, ident
            )
        )
    try:
        yield role
    finally:
        with psycopg.connect(cluster_dsn, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (role,),
            )
            conn.execute(sql.SQL("DROP OWNED BY {}").format(ident))
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(ident))


@pytest.fixture
def dsn(cluster_dsn: str) -> Iterator[str]:
    """The shared schema, emptied after the test (tests reused from the integration
    suites expect a database of their own)."""
    yield cluster_dsn
    with psycopg.connect(cluster_dsn, autocommit=True) as conn:
        conn.execute("TRUNCATE " + ", ".join(TENANT_TABLES))


@pytest.fixture
def pg(dsn: str) -> Iterator[PgSearch]:
    with PgSearch.connect(dsn) as pg:
        assert pg._driver.citus and pg._driver.config.single_shard
        yield pg


def citus_tables(dsn: str) -> dict[str, tuple[str, int]]:
    """The Citus tables of the DSN's first schema: name -> (method, co-location group);
    method ``h`` is hash-distributed, ``n`` a reference table."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT c.relname, p.partmethod, p.colocationid FROM pg_dist_partition p"
            " JOIN pg_class c ON c.oid = p.logicalrelid"
            " WHERE c.relnamespace = to_regnamespace(current_schema())::oid"
        ).fetchall()
    return {str(r[0]): (str(r[1]), int(r[2])) for r in rows}
