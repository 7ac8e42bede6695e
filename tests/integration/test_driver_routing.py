"""The driver keeps its side of the `Router` seam, for units and open transactions alike.

A scripted router (the seam's protocol, no pools, no I/O of its own) names two nodes:
the primary and a "standby" that is the same server under another name, or a port
nothing listens on. The real server answers every probe, so what the driver sent
before it (``BEGIN READ ONLY``, the settings) shows in the probe's own rows.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import psycopg
import pytest

from pgsearch import PgSearch, SessionQueryRequest, Settings, StoreUnavailable
from pgsearch.db.driver import Driver, DriverConfig
from pgsearch.db.routing import PRIMARY, Choice, Intent
from pgsearch.db.work import Statement
from tests.conftest import EXAMPLES

WS = "routing"
STANDBY = "standby1"

#: What the probe reports: the transaction it runs in, as the driver opened it.
PROBE = Statement(
    "test probe",
    "SELECT current_setting('transaction_read_only'), current_setting('statement_timeout'),"
    " current_setting('enable_seqscan')",
    decode=tuple,
)


class ScriptedRouter:
    """Reads go to the standby while it is not excluded; `verdicts` answer `accept`."""

    def __init__(self, primary: str, standby: str, verdicts: list[bool] | None = None) -> None:
        self._nodes = {PRIMARY: primary, STANDBY: standby}
        self.verdicts = list(verdicts or [])
        self.intents: list[Intent] = []
        self.probes: list[tuple[str, list[Any]]] = []
        self.failures: list[tuple[str, BaseException]] = []
        self.commits: list[tuple[str, str | None, str | None]] = []

    @property
    def nodes(self) -> Mapping[str, str]:
        return self._nodes

    @property
    def wants_commit_lsn(self) -> bool:
        return True

    def choose(self, intent: Intent) -> Choice:
        self.intents.append(intent)
        if intent.write or STANDBY in intent.excluded:
            return Choice(node=PRIMARY)
        return Choice(node=STANDBY, probe=PROBE)

    def accept(self, node: str, probe_rows: list[Any]) -> bool:
        self.probes.append((node, probe_rows))
        return self.verdicts.pop(0) if self.verdicts else True

    def committed(self, node: str, lsn: str | None, workspace: str | None) -> None:
        self.commits.append((node, lsn, workspace))

    def failed(self, node: str, error: BaseException) -> None:
        self.failures.append((node, error))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _open(dsn: str, router: ScriptedRouter) -> PgSearch:
    settings = Settings.from_env({}, dsn=dsn)
    config = replace(DriverConfig.from_settings(settings), standby_pool_timeout=0.5)
    return PgSearch(Driver.open(router, config), settings)


@pytest.fixture
def loaded(dsn: str) -> str:
    with PgSearch.connect(dsn) as pg:
        pg.ingest_paths([EXAMPLES], workspace=WS)
    return dsn


def test_a_search_transaction_sends_the_probe_with_begin_and_settings(loaded: str) -> None:
    expected = _search(loaded, ScriptedRouter(loaded, loaded))
    router = ScriptedRouter(loaded, loaded, verdicts=[True])
    with _open(loaded, router) as pg, pg._driver.capture() as units:
        got = pg.search(SessionQueryRequest(query="cron"), workspace=WS)
    assert got == expected and got.matches
    (node, rows) = router.probes[0]
    # The probe ran inside the read transaction, after its settings.
    assert node == STANDBY
    assert rows == [("on", "5s", "off")]
    (unit,) = units
    assert unit.node == STANDBY and unit.statements[0].name == "test probe"


def test_a_rejected_node_is_passed_over_before_the_search_runs(loaded: str) -> None:
    expected = _search(loaded, ScriptedRouter(loaded, loaded))
    router = ScriptedRouter(loaded, loaded, verdicts=[False])
    with _open(loaded, router) as pg, pg._driver.capture() as units:
        got = pg.search(SessionQueryRequest(query="cron"), workspace=WS)
        window = pg.around(workspace=WS, session_id=got.matches[0].session_id, seq=0)
    assert got == expected
    assert window.messages
    # The search: standby probed and rejected, then the primary (no probe asked).
    assert [i.excluded for i in router.intents[:2]] == [frozenset(), frozenset({STANDBY})]
    assert [u.node for u in units] == [PRIMARY, STANDBY]
    assert len(router.probes) == 2 and router.failures == []


def test_an_unreachable_standby_is_reported_and_reads_go_to_the_primary(loaded: str) -> None:
    down = f"postgresql://127.0.0.1:{_free_port()}/nowhere"
    expected = _search(loaded, ScriptedRouter(loaded, loaded))
    router = ScriptedRouter(loaded, down)
    with _open(loaded, router) as pg, pg._driver.capture() as units:
        got = pg.search(SessionQueryRequest(query="cron"), workspace=WS)
        sessions = pg.sessions(workspace=WS)
    assert got == expected
    assert len(sessions) == 3
    assert [node for node, _ in router.failures] == [STANDBY, STANDBY]
    assert all(isinstance(e, StoreUnavailable) for _, e in router.failures)
    assert {u.node for u in units} == {PRIMARY}
    assert all(u.error is None for u in units)


def test_a_write_reports_its_commit_position_and_workspace(loaded: str) -> None:
    router = ScriptedRouter(loaded, loaded)
    with psycopg.connect(loaded) as conn:
        before = conn.execute("SELECT pg_current_wal_flush_lsn()").fetchone()
    with _open(loaded, router) as pg:
        pg.append(workspace=WS, session_id="w", messages=[{"role": "user", "content": "lsn"}])
        pg.forget(workspace=WS, session_id="w")
    assert [(node, ws) for node, _, ws in router.commits] == [(PRIMARY, WS), (PRIMARY, WS)]
    with psycopg.connect(loaded) as conn:
        for _, lsn, _ in router.commits:
            row = conn.execute(
                "SELECT %s::pg_lsn > %s::pg_lsn, %s::pg_lsn <= pg_current_wal_flush_lsn()",
                (lsn, before[0] if before else None, lsn),
            ).fetchone()
            assert row == (True, True), lsn


def _search(dsn: str, router: ScriptedRouter) -> Any:
    with _open(dsn, router) as pg:
        return pg.search(SessionQueryRequest(query="cron"), workspace=WS)
