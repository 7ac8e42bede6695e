"""Search-time settings take effect on the workers, inside the transaction.

Typo matching compares words with vocabulary terms by trigram similarity on the
shard (``%`` uses ``pg_trgm.similarity_threshold``, which the driver sets with
``SET LOCAL`` after ``SET LOCAL citus.propagate_set_commands = 'local'``). A fuzzy
search must expand to exactly the terms it expands to on one server, at the default
threshold and at a strict one, and the two thresholds must give different
expansions, so the comparison can fail if a setting stayed on the coordinator.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from pgsearch import PgSearch, SessionQueryRequest, Settings
from pgsearch.db.migrate import migrate
from tests.citus.conftest import Schemas
from tests.conftest import Databases

WS = "settings"
WORDS = [
    "migration",
    "migrations",
    "migrating",
    "emigration",
    "immigration",
    "integration",
    "mitigation",
    "migraine",
    "imagination",
    "irrigation",
]
TYPOS = ["migraton", "integraton", "irigation"]


@pytest.fixture(scope="module")
def both(schemas: Schemas, databases: Databases) -> Iterator[tuple[str, str]]:
    node = databases.dsn(databases.create(prefix="settings"))
    migrate(node)
    cluster = schemas.create("settings")
    for dsn in (node, cluster):
        with PgSearch.connect(dsn) as pg:
            for i, word in enumerate(WORDS):
                pg.append(
                    workspace=WS,
                    session_id=f"s{i}",
                    messages=[{"role": "user", "content": f"the {word} step failed again"}],
                )
    yield node, cluster


def _expansions(dsn: str, threshold: float) -> dict[str, list[str]]:
    settings = Settings.from_env().with_(trigram_threshold=threshold)
    out: dict[str, list[str]] = {}
    with PgSearch.connect(dsn, settings=settings) as pg:
        for typo in TYPOS:
            result = pg.provider(workspace=WS).explain(SessionQueryRequest(query=typo))
            plan = result.trace.plan if result.trace is not None else None
            out[typo] = sorted(e.term for g in (plan.groups if plan else ()) for e in g)
    return out


def test_fuzzy_expansions_equal_one_servers_at_every_threshold(both: tuple[str, str]) -> None:
    node, cluster = both
    loose = _expansions(node, 0.25)
    strict = _expansions(node, 0.6)
    assert loose != strict  # the threshold matters for these words
    assert any(loose.values())
    assert _expansions(cluster, 0.25) == loose
    assert _expansions(cluster, 0.6) == strict


def test_set_local_reaches_the_shard_within_the_transaction(both: tuple[str, str]) -> None:
    _, cluster = both
    query = "SELECT count(*) FROM vocabulary WHERE workspace_id = %s AND term %% 'migraton'"
    counts = []
    for threshold in ("0.3", "0.91"):
        with psycopg.connect(cluster) as conn, conn.transaction():
            conn.execute("SET LOCAL citus.propagate_set_commands = 'local'")
            conn.execute(f"SET LOCAL pg_trgm.similarity_threshold = {threshold}")
            row = conn.execute(query, (WS,)).fetchone()
            assert row is not None
            counts.append(row[0])
    # The statement runs on the worker (a router query) with the transaction's value.
    assert counts[0] > 0 and counts[1] == 0
