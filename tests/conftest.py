"""Test harness on a real PostgreSQL.

With ``PGSEARCH_TEST_SERVER=embedded`` the run starts its own embedded PostgreSQL
(the ``embedded`` extra's, in a temporary home) and uses it throughout; that is how
the suite runs on PostgreSQL 18 beside the system server. Otherwise the server
comes from ``PGSEARCH_TEST_DSN``, else the local server
(``postgresql://127.0.0.1:5432/postgres``), else a testcontainers PostgreSQL when a
Docker engine answers; otherwise the run fails saying how to provide one.
Each run creates uniquely named databases (a migrated template, cloned per test
where a test writes) and drops exactly those; no other database is touched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgsearch import PgSearch
from pgsearch.db.migrate import migrate

LOCAL_DSN = "postgresql://127.0.0.1:5432/postgres"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "sessions"
RUN_ID = uuid.uuid4().hex[:8]


def _reachable(dsn: str) -> bool:
    try:
        with psycopg.connect(dsn, connect_timeout=3):
            return True
    except psycopg.Error:
        return False


def _candidate_dsns() -> list[str]:
    if os.environ.get("PGSEARCH_TEST_DSN"):
        return [os.environ["PGSEARCH_TEST_DSN"]]
    users = [os.environ.get("PGUSER")] if os.environ.get("PGUSER") else []
    return [LOCAL_DSN] + [make_conninfo(LOCAL_DSN, user=u) for u in [*users, "postgres", "root"]]


def private_home(prefix: str = "pgsearch-test-") -> Path:
    """A new directory for an embedded server's home.

    Made under the system's temporary directory and passable by other users: run as
    root, the server runs as its own account (``pgsearch``), which cannot enter
    pytest's own (mode 0700) temporary directories.
    """
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("PGSEARCH_TEST_TMP")))
    path.chmod(0o711)
    return path


@contextlib.contextmanager
def embedded_server() -> Iterator[str]:
    """A private embedded PostgreSQL for the whole run; yields its admin DSN."""
    from pgsearch import embedded

    if not embedded.available():
        pytest.fail(
            "PGSEARCH_TEST_SERVER=embedded needs the embedded PostgreSQL: "
            "pip install -e '.[test]' (it brings the embedded extra)"
        )
    home = private_home("pgsearch-test-server-")
    server = embedded.EmbeddedServer(home / "home")
    lease = server.lease()
    try:
        yield server.admin_dsn()
    finally:
        lease.release()
        server.stop()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def server_dsn() -> Iterator[str]:
    """An admin DSN for a server the tests may create databases on."""
    if os.environ.get("PGSEARCH_TEST_SERVER") == "embedded":
        with embedded_server() as dsn:
            yield dsn
        return
    if os.environ.get("PGSEARCH_TEST_SERVER"):
        pytest.fail(f"PGSEARCH_TEST_SERVER={os.environ['PGSEARCH_TEST_SERVER']}: only 'embedded'")
    for dsn in _candidate_dsns():
        if _reachable(dsn):
            yield dsn
            return
    if os.environ.get("PGSEARCH_TEST_DSN"):
        given = os.environ["PGSEARCH_TEST_DSN"]
        pytest.fail(f"PGSEARCH_TEST_DSN is set but the server does not answer: {given}")
    container = None
    with contextlib.suppress(Exception):
        from testcontainers.postgres import PostgresContainer  # type: ignore[import-not-found]

        container = PostgresContainer("postgres:16", driver=None)
        container.start()
    if container is None:
        pytest.fail(
            "no PostgreSQL for the tests: set PGSEARCH_TEST_DSN=postgresql://user@host/db, "
            "run one locally on 127.0.0.1:5432, or install the testcontainers extra with "
            "a Docker engine running (docker compose -f docker/compose.yml up -d)"
        )
    try:
        yield container.get_connection_url()
    finally:
        container.stop()


def dsn_for(server_dsn: str, dbname: str) -> str:
    params = conninfo_to_dict(server_dsn)
    params["dbname"] = dbname
    return make_conninfo(**params)  # type: ignore[arg-type]


class Databases:
    """Creates and drops the databases of this test run (and only those)."""

    def __init__(self, server_dsn: str) -> None:
        self.server_dsn = server_dsn
        self.created: list[str] = []
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            ctype = conn.execute(
                "SELECT datctype FROM pg_database WHERE datname = current_database()"
            ).fetchone()
        utf8 = ctype is not None and "utf" in ctype[0].lower()
        self.locale = None if utf8 else "C.UTF-8"

    def create(self, *, template: str | None = None, prefix: str = "t") -> str:
        name = f"pgsearch_test_{RUN_ID}_{prefix}_{uuid.uuid4().hex[:8]}"
        query = sql.SQL("CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(template or "template0")
        )
        if self.locale and template is None:
            query = query + sql.SQL(" LC_COLLATE {} LC_CTYPE {}").format(
                sql.Literal(self.locale), sql.Literal(self.locale)
            )
        with psycopg.connect(self.server_dsn, autocommit=True) as conn:
            conn.execute(query)
        self.created.append(name)
        return name

    def drop(self, name: str) -> None:
        assert name in self.created, "tests only drop databases they created"
        with psycopg.connect(self.server_dsn, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        self.created.remove(name)

    def dsn(self, name: str) -> str:
        return dsn_for(self.server_dsn, name)


@pytest.fixture(scope="session")
def databases(server_dsn: str) -> Iterator[Databases]:
    dbs = Databases(server_dsn)
    yield dbs
    for name in list(reversed(dbs.created)):
        dbs.drop(name)


@pytest.fixture(scope="session")
def template_db(databases: Databases) -> str:
    """A database migrated to head once per run; tests clone it."""
    name = databases.create(prefix="tpl")
    migrate(databases.dsn(name))
    return name


@pytest.fixture
def empty_dsn(databases: Databases) -> Iterator[str]:
    """A fresh database with no schema at all."""
    name = databases.create(prefix="empty")
    yield databases.dsn(name)
    databases.drop(name)


@pytest.fixture
def dsn(databases: Databases, template_db: str) -> Iterator[str]:
    """A fresh migrated database for one test."""
    name = databases.create(template=template_db)
    yield databases.dsn(name)
    databases.drop(name)


@pytest.fixture
def pg(dsn: str) -> Iterator[PgSearch]:
    with PgSearch.connect(dsn) as pg:
        yield pg


CITUS_SUITE = Path(__file__).resolve().parent / "citus"
#: Names the parts the project cannot install itself that must be there: a comma list
#: of ``citus``, ``chromium``, ``server-programs``, or ``all``. Without it a suite whose
#: part is missing is skipped with one line saying how to enable it; CI sets ``all``.
REQUIRE_VARIABLE = "PGSEARCH_REQUIRE"
PARTS = ("citus", "chromium", "server-programs")
#: Why a suite was left out of this run, printed once at its end.
_LEFT_OUT: list[str] = []


def required(part: str) -> bool:
    """Whether `part` must be there (``PGSEARCH_REQUIRE``)."""
    assert part in PARTS, part
    names = {n.strip() for n in os.environ.get(REQUIRE_VARIABLE, "").split(",") if n.strip()}
    return part in names or "all" in names


def missing_part(part: str, how: str) -> NoReturn:
    """Leave out the tests needing `part` (not there): a skip saying `how` to enable
    them, or a failure when ``PGSEARCH_REQUIRE`` says the part must be there."""
    if required(part):
        pytest.fail(f"{REQUIRE_VARIABLE} requires {part}, which is missing: {how}", pytrace=False)
    pytest.skip(f"{part} missing (enable: {how})")


def citus_configured() -> bool:
    """A cluster is named (``PGSEARCH_CITUS_DSN``), or the Citus tools are
    (``PGSEARCH_CITUS_TOOLS``), or the run requires Citus."""
    env = os.environ
    return bool(env.get("PGSEARCH_CITUS_DSN") or env.get("PGSEARCH_CITUS_TOOLS")) or required(
        "citus"
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The Citus suite (tests/citus) runs when named (``pytest tests/citus``) or
    configured (`citus_configured`): it starts a cluster of its own. Otherwise it is
    left out, and the run's summary says so in one line."""
    if collection_path.resolve() != CITUS_SUITE:
        return None
    named = [Path(str(a).split("::")[0]).resolve() for a in config.args]
    if citus_configured() or any(p == CITUS_SUITE or CITUS_SUITE in p.parents for p in named):
        return None
    if any(p in CITUS_SUITE.parents for p in named):
        left_out(
            "tests/citus left out: no Citus cluster configured (enable: PGSEARCH_CITUS_DSN="
            "postgresql://user@coordinator/db, or PGSEARCH_CITUS_TOOLS=<folder with cluster.sh>)"
        )
    return True


def left_out(line: str) -> None:
    """Say at the end of the run, once, that some tests were left out and why."""
    _LEFT_OUT.append(line)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in dict.fromkeys(_LEFT_OUT):
        terminalreporter.write_line(line)
