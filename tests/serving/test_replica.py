"""Read replicas: a streaming standby answers exactly as the primary does.

The corpus and queries are the benchmark's (every query class, filters and session
scopes included), ingested on the primary and replayed by the standby.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import generate
from bench.speed import load_queries, request_for
from pgsearch import PgSearch, SessionQueryRequest, Settings
from pgsearch.db.routing import standby_name
from tests.serving.conftest import Nodes


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("replica-corpus")
    generate.generate(
        generate.Config(messages=3000, workspaces=3, queries_per_class=8), out, quiet=True
    )
    return out


def _ingest(pg: PgSearch, corpus: Path) -> None:
    for wdir in sorted(p for p in (corpus / "corpus").iterdir() if p.is_dir()):
        report = pg.ingest_paths([wdir], workspace=wdir.name)
        assert not report.errors, report.errors


def test_results_on_the_standby_and_the_primary_are_identical(nodes: Nodes, corpus: Path) -> None:
    queries = load_queries(corpus / "queries.jsonl")
    assert {q["class"] for q in queries} == set(generate.QUERY_CLASSES)
    with PgSearch.connect(nodes.primary_dsn) as primary:
        _ingest(primary, corpus)
    nodes.wait_for_replay()
    with (
        PgSearch.connect(nodes.primary_dsn) as primary,
        PgSearch.connect(nodes.standby_dsn) as standby,
    ):
        pages = windows = 0
        for q in queries:
            for per_session in (True, False):
                request = request_for(q, per_session=per_session)
                scope = {"workspace": q["workspace"], "session_id": q.get("session")}
                on_primary = primary.provider(**scope).search(request)
                on_standby = standby.provider(**scope).search(request)
                assert on_standby == on_primary, (q["class"], q["query"])
                if on_primary.next_cursor:
                    # A cursor made on one node continues on the other.
                    follow = SessionQueryRequest(
                        query=request.query,
                        kinds=request.kinds,
                        roles=request.roles,
                        tool_name=request.tool_name,
                        since=request.since,
                        until=request.until,
                        limit=request.limit,
                        per_session=per_session,
                        cursor=on_standby.next_cursor,
                    )
                    assert standby.provider(**scope).search(follow) == primary.provider(
                        **scope
                    ).search(follow)
                    pages += 1
            if on_primary.matches:
                m = on_primary.matches[0]
                ws = m.workspace_id
                assert standby.around(
                    workspace=ws, session_id=m.session_id, seq=m.seq
                ) == primary.around(workspace=ws, session_id=m.session_id, seq=m.seq)
                assert standby.session_messages(
                    workspace=ws, session_id=m.session_id, start_seq=m.seq
                ) == primary.session_messages(
                    workspace=ws, session_id=m.session_id, start_seq=m.seq
                )
                windows += 1
        for ws in primary.workspaces():
            assert standby.sessions(workspace=ws) == primary.sessions(workspace=ws)
            assert standby.stats(workspace=ws) == primary.stats(workspace=ws)
        assert standby.workspaces() == primary.workspaces()
    print(f"replica: {len(queries)} queries, {pages} cursor pages, {windows} windows")
    assert pages > 10 and windows > 50, (pages, windows)


def test_one_pgsearch_reading_from_the_standby_answers_as_the_primary(
    nodes: Nodes, corpus: Path
) -> None:
    """The same through ``PGSEARCH_READ_DSN``: one object, reads routed to the standby."""
    queries = load_queries(corpus / "queries.jsonl")
    routed_settings = Settings.from_env(
        {}, dsn=nodes.primary_dsn, read_dsns=(nodes.standby_dsn,), read_wait_ms=3000
    )
    with PgSearch.connect(settings=routed_settings) as routed:
        _ingest(routed, corpus)  # writes go to the primary; reads wait for replay
        with PgSearch.connect(nodes.primary_dsn) as primary, routed._driver.capture() as units:
            for q in queries:
                request = request_for(q, per_session=False)
                scope = {"workspace": q["workspace"], "session_id": q.get("session")}
                expected = primary.provider(**scope).search(request)
                assert routed.provider(**scope).search(request) == expected, q["query"]
            for ws in primary.workspaces():
                assert routed.stats(workspace=ws) == primary.stats(workspace=ws)
                assert routed.sessions(workspace=ws) == primary.sessions(workspace=ws)
    assert len(units) > len(queries)
    assert {u.node for u in units} == {standby_name(1)}
