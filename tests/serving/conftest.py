"""Fixtures of the serving suites: a private primary + streaming standby per run.

These suites restart, stop and cut servers, so they never touch the shared server
the other suites use: the session-scoped `cluster` starts its own (see
`tests.serving.cluster`), migrates a template database on it once, and each test
gets a fresh clone that the standby has replayed before the test begins. They run
alone too, in a process of their own beside the other suites:
``python -m pytest tests/serving``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from pgsearch.db.migrate import migrate
from tests.conftest import missing_part
from tests.serving.cluster import Cluster, MissingServer, Server, find_binaries


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """The private primary and standby of this run, removed at its end."""
    try:
        bins = find_binaries()
    except MissingServer as exc:
        missing = str(exc)
    else:
        missing = ""
    if missing:
        missing_part("server-programs", missing)
    with Cluster.start(bins) as running:
        yield running


@pytest.fixture(scope="session")
def serving_template(cluster: Cluster) -> str:
    """A database on the private primary migrated to head once; tests clone it."""
    name = cluster.create_database(prefix="tpl")
    migrate(cluster.primary.dsn(name))
    return name


@dataclass(frozen=True, kw_only=True)
class Nodes:
    """One test's database, as reached on the primary and on the standby."""

    cluster: Cluster
    dbname: str

    @property
    def primary(self) -> Server:
        return self.cluster.primary

    @property
    def standby(self) -> Server:
        return self.cluster.standby

    @property
    def primary_dsn(self) -> str:
        return self.cluster.primary.dsn(self.dbname)

    @property
    def standby_dsn(self) -> str:
        return self.cluster.standby.dsn(self.dbname)

    def wait_for_replay(self, timeout: float = 60.0) -> str:
        return self.cluster.wait_for_replay(timeout)


@pytest.fixture
def nodes(cluster: Cluster, serving_template: str) -> Iterator[Nodes]:
    """A fresh migrated database on the primary, already replayed by the standby.

    Whatever a test stopped is started again afterwards, so the next test finds
    both servers up and streaming.
    """
    cluster.ensure_running()
    name = cluster.create_database(template=serving_template)
    cluster.wait_for_replay()
    try:
        yield Nodes(cluster=cluster, dbname=name)
    finally:
        cluster.ensure_running()
        cluster.drop_database(name)
