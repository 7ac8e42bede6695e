"""The same answers on a cluster as on one PostgreSQL.

The bench corpus generator's corpus (a small one here; ``bench/citus.py`` runs the
100k-message, 50-workspace one) is ingested into a database of one server and into
the cluster; every query of every class must give identical hits, in the same order,
with the same BM25 scores. The statistics BM25 uses (document frequencies, per-kind
counts and lengths) are kept per workspace, in the workspace's own shard, so they
are the same numbers on both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.citus import answers, compare
from bench.generate import QUERY_CLASSES, Config, ensure_corpus
from bench.speed import load_queries
from pgsearch import PgSearch
from pgsearch.db.migrate import migrate
from tests.citus.conftest import Schemas
from tests.conftest import Databases


def _ingest(dsn: str, corpus: Path) -> None:
    with PgSearch.connect(dsn) as pg:
        for folder in sorted(p for p in corpus.iterdir() if p.is_dir()):
            assert pg.ingest_paths([folder], workspace=folder.name).errors == []


def test_cluster_and_one_node_give_identical_answers(
    schemas: Schemas, databases: Databases, tmp_path_factory: pytest.TempPathFactory
) -> None:
    out = tmp_path_factory.mktemp("corpus")
    ensure_corpus(Config(messages=1500, workspaces=4, queries_per_class=4), out, quiet=True)
    queries = load_queries(out / "queries.jsonl")
    assert {q["class"] for q in queries} == set(QUERY_CLASSES)
    node = databases.dsn(databases.create(prefix="same"))
    migrate(node)
    cluster = schemas.create("same")
    for dsn in (node, cluster):
        _ingest(dsn, out / "corpus")
    one, _ = answers(node, queries)
    other, _ = answers(cluster, queries)
    by_class = compare(queries, one, other)
    assert sum(c["hits"] for c in by_class.values()) > 3 * len(queries)
    differing = [
        (q["class"], q["query"], a[:3], b[:3])
        for q, a, b in zip(queries, one, other, strict=True)
        if a != b
    ]
    assert differing == []
