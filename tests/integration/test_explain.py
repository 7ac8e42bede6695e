"""Every statement search emits goes through an index: proved with EXPLAIN.

A corpus large enough that the planner has a real choice (tens of thousands of
messages, fresh statistics) is searched with every query shape and filter
combination; each statement the code runs is captured and EXPLAINed (JSON) under
the same transaction settings, and any sequential scan of a pgsearch table fails
the test. The server's own counter of sequential scans on `messages` must not
move while the whole query corpus runs.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg._queries import PostgresQuery
from psycopg.adapt import Transformer

from pgsearch import PgSearch, SessionQueryRequest, Settings
from pgsearch.db.driver import UnitRecord
from pgsearch.db.migrate import migrate
from pgsearch.search import SearchEngine
from tests.conftest import Databases
from tests.helpers import newest_match_per_session

pytestmark = pytest.mark.slow

WORKSPACES = ("ws-a", "ws-b", "ws-c")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
COMMON = ["the", "and", "to", "of", "a", "is", "in", "it", "we", "error", "file", "test"]
ACCENTED = ["café", "naïve", "résumé", "Pokémon", "façade", "jalapeño", "Ærø", "Łódź"]
CJK = ["東京タワー", "日本語の設定", "数据库迁移", "한국어 텍스트"]


def _vocab(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = {"".join(rng.choice(letters) for _ in range(rng.randint(3, 11))) for _ in range(4000)}
    return sorted(words)


def _text(rng: random.Random, vocab: list[str]) -> str:
    n = max(3, int(rng.lognormvariate(2.8, 0.8)))
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.35:
            out.append(rng.choice(COMMON))
        elif r < 0.37:
            out.append(rng.choice(ACCENTED))
        elif r < 0.38:
            out.append(rng.choice(CJK))
        else:
            out.append(vocab[min(int(rng.paretovariate(1.1)) - 1, len(vocab) - 1)])
    return " ".join(out)


@pytest.fixture(scope="module")
def big_dsn(databases: Databases, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    name = databases.create(prefix="explain")
    dsn = databases.dsn(name)
    migrate(dsn)
    rng = random.Random(7)
    vocab = _vocab(rng)
    root = tmp_path_factory.mktemp("explain")
    with PgSearch.connect(dsn) as pg:
        for w, ws in enumerate(WORKSPACES):
            folder = root / ws
            folder.mkdir()
            for s in range(150):
                lines = []
                for i in range(60 if w == 0 else 25):
                    when = (T0 + timedelta(minutes=s * 100 + i)).isoformat()
                    role = rng.choice(["user", "assistant", "assistant", "tool"])
                    line: dict[str, Any] = {
                        "role": role,
                        "content": _text(rng, vocab),
                        "created_at": when,
                    }
                    if role == "assistant" and rng.random() < 0.3:
                        line["tool_calls"] = [
                            {
                                "id": f"c{i}",
                                "function": {
                                    "name": rng.choice(["bash", "grep", "edit"]),
                                    "arguments": "{}",
                                },
                            }
                        ]
                    if role == "tool" and rng.random() < 0.2:
                        line["content"] = "Error: " + line["content"]
                    if i == 0:
                        line["title"] = _text(rng, vocab)[:60]
                    lines.append(json.dumps(line, ensure_ascii=False))
                (folder / f"{ws}-s{s}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
            report = pg.ingest_paths([folder], workspace=ws)
            assert not report.errors
            pg.maintain(workspace=ws)  # term lists, for the bounded searches
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        (count,) = conn.execute("SELECT count(*) FROM messages").fetchone() or (0,)
    assert count >= 10_000
    yield dsn
    databases.drop(name)


def _queries() -> list[str]:
    return [
        "",  # browse
        "the",  # stop-like
        "the and of",  # all stop-like
        "a",  # one character
        "it",  # two characters
        "%",  # punctuation only
        "東",  # CJK 1 char
        "東京",  # CJK 2 chars
        "数据库迁移",  # CJK phrase
        "cafe",  # accent-folded
        "Pokemon",
        "resume naive",
        "error file",
        "errror",  # typo
        "tset",  # short typo
        '"the error"',  # quoted phrase
        "resolve_dirs(config)",
        "zzzzzzzzzz",  # nothing
        "error file test naive cafe resume",  # many words: coverage-ordered candidates
    ]


def _filters() -> list[dict[str, Any]]:
    options: dict[str, list[Any]] = {
        "session_id": [None, "ws-a-s3"],
        "roles": [(), ("user",)],
        "tool_name": [None, "bash"],
        "since": [None, T0 + timedelta(days=2)],
        "until": [None, T0 + timedelta(days=5)],
        "kinds": [(), ("tool_error", "summary")],
    }
    keys = list(options)
    out = []
    for combo in itertools.product(*(options[k] for k in keys)):
        out.append({k: v for k, v in zip(keys, combo, strict=True) if v not in (None, ())})
    return out


def _plan_nodes(plan: Any) -> Iterator[dict[str, Any]]:
    """Every node of an EXPLAIN (FORMAT JSON) document, depth first."""
    if isinstance(plan, dict):
        yield plan
        for value in plan.values():
            yield from _plan_nodes(value)
    elif isinstance(plan, list):
        for item in plan:
            yield from _plan_nodes(item)


def _seq_scans(plan: Any) -> list[str]:
    return [
        node["Relation Name"]
        for node in _plan_nodes(plan)
        if node.get("Node Type") == "Seq Scan"
        and node.get("Relation Name")
        in {"messages", "sessions", "vocabulary", "workspace_stats", "ingested_files"}
    ]


def _messages_seq_scans(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_force_next_flush()")
        row = conn.execute(
            "SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'messages'"
        ).fetchone()
    return int(row[0]) if row else 0


def _record(units: list[UnitRecord], into: dict[str, tuple[Any, dict[str, Any]]]) -> None:
    """Every explainable statement the drivers sent, one per distinct SQL text."""
    for unit in units:
        for statement in unit.statements:
            if statement.explainable:
                into.setdefault(statement.text, (statement.sql, dict(statement.params or {})))


def test_every_statement_shape_uses_an_index(big_dsn: str) -> None:
    captured: dict[str, tuple[Any, dict[str, Any]]] = {}
    before = _messages_seq_scans(big_dsn)
    runs = 0
    # The default cap, and a tiny one so that every candidate strategy (all words,
    # rarest words, coverage-ordered) runs on this corpus.
    for settings in (
        Settings.from_env(),
        Settings.from_env().with_(candidate_cap=10, stop_df_ratio=0.2),
        Settings.from_env().with_(impact_lists=True),
    ):
        with PgSearch.connect(big_dsn, settings=settings) as pg, pg._driver.capture() as units:
            provider = pg.provider(workspace="ws-a")
            for query in _queries():
                for filters in _filters():
                    for per_session in (True, False):
                        result = provider.search(
                            SessionQueryRequest(
                                query=query, per_session=per_session, limit=5, **filters
                            )
                        )
                        runs += 1
                        if result.next_cursor:
                            provider.search(
                                SessionQueryRequest(
                                    query=query,
                                    per_session=per_session,
                                    limit=5,
                                    cursor=result.next_cursor,
                                    **filters,
                                )
                            )
        _record(units, captured)
    with PgSearch.connect(big_dsn) as pg, pg._driver.capture() as units:
        # The reads of the reference ranking: the vocabulary, then every match.
        pg._engine = SearchEngine(pg.settings, exhaustive=True)
        provider = pg.provider(workspace="ws-a")
        for query in ("errror", "tset", "error file"):
            provider.search(SessionQueryRequest(query=query))
        pg._engine = SearchEngine(pg.settings)
        provider.around("ws-a-s3", 10, before=3, after=3)
        provider.session_messages("ws-a-s3", start_seq=5, limit=10)
        pg.sessions(workspace="ws-a")
        pg.stats(workspace="ws-a")
    _record(units, captured)
    assert runs > 500
    assert _messages_seq_scans(big_dsn) == before, "a search ran a sequential scan of messages"
    assert len(captured) >= 20
    assert any("%(unit_q0)s" in text for text in captured), "coverage-ordered path not run"
    spread = "DISTINCT ON (c.session_id COLLATE"
    assert any(spread in text for text in captured), "per-session spread"
    assert any("walk_sessions" in text for text in captured), "walked per-session spread"
    assert any("SELECT 'c' AS tag" in text for text in captured), "spread with candidates"
    assert any("%(horizon)s" in text for text in captured), "newest matches from a horizon"
    assert any("%(horizon)s" in text and "'c' AS tag" not in text for text in captured), (
        "newest candidates alone from a horizon"
    )
    assert any("'x', NULL" in text for text in captured), "spread with best-covering"
    assert any("ORDER BY m.created_at DESC" in text for text in captured)
    assert any("LIMIT %(walk)s" in text for text in captured), "newest-first walk not read"
    assert any("term_list_heads" in text for text in captured), "list heads not read"
    assert any("term_lists l" in text for text in captured), "bounded candidates not read"
    assert any("n.ingest_seq >" in text for text in captured), "tail not read"
    assert any("m.seq < %(seq)s" in text for text in captured), "window statements not run"
    # The entry a session found only by its title or summary is shown at.
    assert any("0 AS pick" in text for text in captured), "session anchors not read"
    # The scope's size by the scope counts (role, tool) and by a count (time).
    assert any("FROM scope_counts c" in text for text in captured), "scope counts not summed"
    assert any(text.startswith("SELECT count(*) FROM messages m") for text in captured)
    # The direct read (vocabulary, typo neighbours and the plan's reads in one
    # statement), with and without the title branch, and for one session.
    direct = [text for text in captured if "pgsearch_edit_distance" in text]
    assert any("FROM sessions s" in text for text in direct)
    assert any("FROM sessions s" not in text for text in direct)
    assert any("s.session_id = %(session_id)s" in text for text in direct)
    bad: list[str] = []
    with psycopg.connect(big_dsn) as conn, conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL jit = off")
        # Searches run their statements prepared with plans made once for any
        # parameters (`Driver._begin`): the plan of each for its values, and that one.
        conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        conn.execute("SET LOCAL max_parallel_workers_per_gather = 0")
        for number, (sql_text, (statement, params)) in enumerate(captured.items()):
            if sql_text.startswith("SELECT set_config"):
                continue
            plan = conn.execute("EXPLAIN (FORMAT JSON) " + statement, params).fetchone()
            assert plan is not None
            scans = _seq_scans(plan[0])
            if scans:
                bad.append(f"{scans}: {sql_text[:300]}")
            generic = _generic_plan(conn, f"shape_{number}", statement, params)
            scans = _seq_scans(generic)
            if scans:
                bad.append(f"generic plan {scans}: {sql_text[:300]}")
            rescans = _cte_rescans(generic)
            if rescans:
                bad.append(f"generic plan rescans {rescans} per row: {sql_text[:300]}")
    assert bad == []


def _cte_rescans(plan: Any) -> list[str]:
    """The CTEs a nested loop scans again for each row of its outer side: a prepared
    plan's row estimates (a few rows for thousands) can choose that for a join of two
    materialized reads, and it then costs their product."""
    found = []
    for node in _plan_nodes(plan):
        children = node.get("Plans", [])
        if node.get("Node Type") == "Nested Loop" and len(children) == 2:
            inner = children[1]
            while inner.get("Node Type") in ("Materialize", "Subquery Scan") and inner.get("Plans"):
                inner = inner["Plans"][0]
            if inner.get("Node Type") == "CTE Scan":
                found.append(str(inner.get("CTE Name")))
    return found


def _generic_plan(conn: psycopg.Connection[Any], name: str, statement: Any, params: Any) -> Any:
    """The plan a statement prepared as the driver prepares it (same text, same
    parameter types) runs with under ``plan_cache_mode = force_generic_plan``."""
    query = PostgresQuery(Transformer(conn))
    query.convert(statement, params)
    prepared = conn.pgconn.prepare(name.encode(), query.query, param_types=query.types)
    assert prepared.status == psycopg.pq.ExecStatus.COMMAND_OK, prepared.error_message
    # EXECUTE takes its arguments as literals, each typed as its parameter.
    row = conn.execute(
        "SELECT parameter_types::text[] FROM pg_prepared_statements WHERE name = %s", [name]
    ).fetchone()
    assert row is not None
    values = [params[key] for key in query._order] if query._order else list(params or ())
    args = ", ".join(
        f"{sql.Literal(value).as_string(conn)}::{kind}"
        for value, kind in zip(values, row[0], strict=True)
    )
    execute = f"EXPLAIN (FORMAT JSON) EXECUTE {name}" + (f"({args})" if args else "")
    plan = conn.execute(execute.encode()).fetchone()  # type: ignore[call-overload]
    assert plan is not None
    conn.execute(f"DEALLOCATE {name}".encode())  # type: ignore[call-overload]
    return plan[0]


def test_plans_use_the_gin_indexes(big_dsn: str) -> None:
    with psycopg.connect(big_dsn) as conn:
        row = conn.execute(
            "SELECT term FROM vocabulary WHERE workspace_id = 'ws-a' AND df BETWEEN 5 AND 50 "
            "AND length(term) BETWEEN 6 AND 8 AND term ~ '^[a-z]+$' ORDER BY term LIMIT 1"
        ).fetchone()
    assert row is not None
    typo = row[0][:2] + row[0][3:]  # one deletion: found only through the trigram index
    with PgSearch.connect(big_dsn) as pg:
        result = pg.provider(workspace="ws-a").explain(SessionQueryRequest(query=typo))
    assert result.matches
    plans = "\n".join(result.explain)
    assert "messages_terms_idx" in plans
    assert "vocabulary_term_trgm_idx" in plans
    assert "Seq Scan on messages" not in plans


def test_title_statements_of_ingest_use_an_index(big_dsn: str) -> None:
    """The statements that keep titles naming a session by one of its messages (Claude
    Code summaries) read ``messages`` through ``messages_entry_idx`` and the title
    table through its keys: no sequential scan however large either grows."""
    from pgsearch.db import queries as q

    ws = "ws-a"
    with psycopg.connect(big_dsn) as conn, conn.transaction(force_rollback=True):
        conn.execute(
            "UPDATE messages SET entry_id = 'leaf-' || session_id || '-' || seq "
            "WHERE workspace_id = %s AND seq < 20",
            (ws,),
        )
        conn.execute(
            "INSERT INTO leaf_titles (workspace_id, leaf_uuid, title, source) "
            "SELECT %s, 'leaf-ws-a-s' || i || '-3', 'title ' || i, 'file-' || (i %% 7) "
            "FROM generate_series(0, 149) AS i",
            (ws,),
        )
        conn.execute("ANALYZE messages, leaf_titles")
        conn.execute("SET LOCAL enable_seqscan = off")
        statements = {
            "resolve": (
                q.RESOLVE_LEAF_TITLES,
                {"ws": ws, "keys": [f"leaf-ws-a-s{i}-3" for i in range(0, 150, 3)]},
            ),
            "unresolve": (q.UNRESOLVE_LEAF_TITLES, {"ws": ws, "session_id": "ws-a-s3"}),
            "forget": (q.FORGET_LEAF_TITLES, {"ws": ws, "source": "file-3"}),
            "save": (
                q.SAVE_LEAF_TITLES,
                {"ws": ws, "leaves": ["leaf-x"], "titles": ["t"], "source": "file-9"},
            ),
        }
        bad = []
        for name, (statement, params) in statements.items():
            plan = conn.execute("EXPLAIN (FORMAT JSON) " + statement, params).fetchone()
            assert plan is not None
            text = json.dumps(plan[0])
            scans = [s for s in _seq_scans(plan[0]) if s in ("messages", "leaf_titles")] + [
                n for n in ("leaf_titles",) if '"Seq Scan"' in text and n in text
            ]
            if scans:
                bad.append(f"{name}: {scans}")
        resolved = conn.execute(q.RESOLVE_LEAF_TITLES, statements["resolve"][1]).fetchall()
        assert len(resolved) == 50  # it does resolve them, through the index
    assert bad == []


def _scanned(plan: Any) -> set[str]:
    """Relations a plan reads with a sequential scan."""
    found: set[str] = set()
    if isinstance(plan, dict):
        if plan.get("Node Type") == "Seq Scan":
            found.add(str(plan.get("Relation Name")))
        for value in plan.values():
            found |= _scanned(value)
    elif isinstance(plan, list):
        for item in plan:
            found |= _scanned(item)
    return found


def _lifecycle_statements() -> dict[str, tuple[Any, dict[str, Any]]]:
    """Statements of the ingest write path beyond inserting: taking files, opening and
    storing sessions, recording files, naming appended tool results after their call,
    tombstones of forgotten sessions, files found again by their digest."""
    from pgsearch.db import queries as q

    ws = "ws-a"
    ids = ["ws-a-s3", "ws-a-s4"]
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return {
        "lock file": (q.LOCK_FILE, {"ws": ws, "paths": ["/logs/a.jsonl", "/logs/b.jsonl"]}),
        "ensure sessions": (
            q.ENSURE_SESSIONS,
            {"ws": ws, "rows": json.dumps({"session_id": ids, "source": ["/x", None]})},
        ),
        "update sessions": (
            q.UPDATE_SESSIONS,
            {
                "ws": ws,
                "rows": json.dumps(
                    [
                        {
                            "session_id": i,
                            "title": "t",
                            "summary": None,
                            "source": "/x",
                            "created_at": now.isoformat(),
                            "updated_at": now.isoformat(),
                            "message_count": 1,
                            "next_seq": 1,
                            "last_turn": 1,
                            "tsv": "'t':1A",
                            "field_len": 1,
                            "parent_session_id": None,
                            "title_auto": False,
                            "title_leaf_seq": None,
                        }
                        for i in ids
                    ]
                ),
            },
        ),
        "record files": (
            q.RECORD_FILES,
            {
                "ws": ws,
                "rows": json.dumps(
                    {
                        "path": ["/logs/a.jsonl"],
                        "size": [10],
                        "lines": [1],
                        "digest": ["0" * 64],
                        "parser": ["openai/1"],
                        "head_digest": ["0" * 64],
                        "tail_digest": ["0" * 64],
                    }
                ),
            },
        ),
        "tool call names": (
            q.TOOL_CALL_NAMES,
            {"ws": ws, "session_id": "ws-a-s3", "ids": ["c1", "c7"]},
        ),
        "stored keys": (
            q.STORED_KEYS,
            {"ws": ws, "session_id": "ws-a-s3", "keys": ["k1", "k2"]},
        ),
        "forget tombstone": (
            q.FORGET_TOMBSTONE,
            {"ws": ws, "session_id": "ws-a-s3", "source": "/logs/ws-a-s3.jsonl"},
        ),
        "forgotten among": (
            q.FORGOTTEN_AMONG,
            {"ws": ws, "ids": ["ws-a-s3", "ws-a-s4"]},
        ),
        "restore forgotten": (q.RESTORE_FORGOTTEN, {"ws": ws, "source": "/logs/ws-a-s3.jsonl"}),
        "sessions from source": (
            q.SESSIONS_FROM_SOURCE,
            {"ws": ws, "source": "/logs/ws-a-s3.jsonl"},
        ),
        "moved candidates": (
            q.MOVED_CANDIDATES,
            {"ws": ws, "heads": ["0" * 64], "ids": ["ws-a-s3", "ws-a-s4"]},
        ),
        "relocate conflicts": (q.RELOCATE_CONFLICTS, {"ws": ws, "new": "/new/logs"}),
        "upsert scope counts": (
            q.UPSERT_SCOPE_COUNTS,
            {
                "ws": ws,
                "rows": json.dumps(
                    {"kind": ["user_text"], "role": ["user"], "tool": [""], "n": [1]}
                ),
            },
        ),
        "prune scope counts": (q.PRUNE_SCOPE_COUNTS, {"ws": ws, "kinds": ["user_text"]}),
        "scope counts behind": (
            q.SCOPE_COUNTS_BEHIND,
            {"ws": ws, "kinds": ["user_text", "assistant_text", "system"]},
        ),
        "lock workspace statistics": (q.LOCK_WORKSPACE_STATS, {"ws": ws}),
        **{
            f"recount scope counts {i}": (statement, {"ws": ws})
            for i, statement in enumerate(q.RECOUNT_SCOPE_COUNTS)
        },
        **{
            f"relocate {i}": (statement, {"ws": ws, "old": "/old/logs", "new": "/new/logs"})
            for i, statement in enumerate(q.RELOCATE)
        },
    }


def test_ingest_lifecycle_statements_use_an_index(big_dsn: str) -> None:
    from pgsearch.db import queries as q

    bad = []
    with psycopg.connect(big_dsn) as conn, conn.transaction(force_rollback=True):
        conn.execute("SET LOCAL enable_seqscan = off")
        for name, (statement, params) in _lifecycle_statements().items():
            plan = conn.execute("EXPLAIN (FORMAT JSON) " + statement, params).fetchone()
            assert plan is not None
            if _scanned(plan[0]) & set(q.TENANT_TABLES):
                bad.append(f"{name}: {sorted(_scanned(plan[0]))}")
        names = conn.execute(
            _lifecycle_statements()["tool call names"][0],
            _lifecycle_statements()["tool call names"][1],
        ).fetchall()
        assert names, "the fixture's tool calls keep their ids"
    assert bad == []


def test_term_list_statements_use_an_index(big_dsn: str) -> None:
    """The compaction's statements read one workspace's messages through its indexes:
    the lag on ``messages_ingest_seq_idx``, the build by the
    workspace's keys (it reads every message of the workspace, once)."""
    from pgsearch import impact
    from pgsearch.db import queries as q
    from pgsearch.ranking import K1, B

    ws = "ws-a"
    params = {
        "ws": ws,
        "fields": q.FIELDS_STAT,
        "min_df": impact.MIN_DF,
        "max_postings": impact.MAX_POSTINGS,
        "chunk": impact.CHUNK,
        "k1": K1,
        "b": B,
        "watermark": 0,
        "limit": 1000,
        "avgdl": 20.0,
        "speaker_kinds": ["user_text", "assistant_text"],
    }
    with psycopg.connect(big_dsn) as conn, conn.transaction(force_rollback=True):
        (built,) = conn.execute(
            "SELECT count(*) FROM term_list_heads WHERE workspace_id = %s", (ws,)
        ).fetchone() or (0,)
        assert built > 0  # built with the corpus
        conn.execute("SET LOCAL enable_seqscan = off")
        bad = []
        for name, statement in {
            "lag": q.LISTS_LAG,
            "build": q.LISTS_BUILD,
            "heads": q.LISTS_HEADS,
            "state": q.LISTS_STATE,
        }.items():
            plan = conn.execute("EXPLAIN (FORMAT JSON) " + statement, params).fetchone()
            assert plan is not None
            if _seq_scans(plan[0]) or "Seq Scan on messages" in json.dumps(plan[0]):
                bad.append(name)
            if name == "lag":
                assert "messages_ingest_seq_idx" in json.dumps(plan[0]), name
    assert bad == []


def test_maintainer_statements_use_an_index(big_dsn: str) -> None:
    """A round of the background maintainer (`pgsearch.maintainer`) that rebuilds a
    workspace: every statement it sends is EXPLAINed, none scans a message table, and
    the server's count of sequential scans on `messages` does not move."""
    import asyncio

    from pgsearch.aio import AsyncPgSearch

    ws = "ws-b"
    settings = Settings.from_env(dsn=big_dsn).with_(maintain_behind=1)
    with PgSearch.connect(big_dsn) as pg:
        pg.append(workspace=ws, session_id="kept", messages=[{"role": "user", "content": "x"}])
    before = _messages_seq_scans(big_dsn)

    async def main() -> list[UnitRecord]:
        async with await AsyncPgSearch.connect(settings=settings) as pg:

            async def listed() -> list[str]:
                return [ws]

            with pg._driver.capture() as units:
                done = await pg.maintainer(listed).run_round()
            assert list(done.rebuilt) == [ws]
            return list(units)

    units = asyncio.run(main())
    assert _messages_seq_scans(big_dsn) == before, "the round scanned messages sequentially"
    names = {s.name for u in units for s in u.statements}
    assert {"in recovery", "lists lag", "lists try build lock", "lists state watermark"} <= names
    assert {"lists build", "lists heads", "lists state"} <= names
    bad = []
    with psycopg.connect(big_dsn) as conn:
        for unit in units:
            # Under the settings the unit's transaction ran with: sequential scans
            # off for the build (as `pgsearch maintain` builds), else the defaults.
            seqscan = (
                "off"
                if unit.context in ("building term lists", "recounting scope counts")
                else "on"
            )
            for s in unit.statements:
                if not s.explainable:
                    continue
                with conn.transaction(force_rollback=True):
                    conn.execute("SET LOCAL enable_seqscan = " + seqscan)
                    plan = conn.execute("EXPLAIN (FORMAT JSON) " + s.sql, s.params).fetchone()
                assert plan is not None
                if _seq_scans(plan[0]):
                    bad.append(f"{s.name} {_seq_scans(plan[0])}: {s.text[:200]}")
    assert bad == []


def _newest_plan(dsn: str, query: str, **filters: Any) -> Any:
    with PgSearch.connect(dsn) as pg:
        result = pg.provider(workspace="ws-a").explain(SessionQueryRequest(query=query, **filters))
    assert result.trace is not None and result.trace.plan is not None
    plan = result.trace.plan
    assert plan.newest_first, (query, plan.strategy)
    return plan


def _newest_scope(filters: dict[str, Any]) -> Any:
    """The `Filters` a search of ``ws-a`` with these request filters reads under."""
    from pgsearch.plan import Filters

    return Filters(
        workspace="ws-a",
        kinds=tuple(
            filters.get("kinds", ("user_text", "assistant_text", "tool_input", "tool_error"))
        ),
        roles=tuple(filters.get("roles", ())),
        since=filters.get("since"),
        until=filters.get("until"),
    )


#: Newest-first reads: words common alone and together, a time range, kinds, a role.
NEWEST_READS: list[tuple[str, dict[str, Any]]] = [
    ("the", {}),
    ("the and of", {}),
    ("error", {}),
    ("the", {"since": T0 + timedelta(days=2), "until": T0 + timedelta(days=5)}),
    ("the", {"kinds": ("tool_error", "summary")}),
    ("the", {"roles": ("user",)}),
]


@pytest.mark.parametrize(("query", "filters"), NEWEST_READS)
def test_a_newest_first_walk_reads_the_same_candidates(
    big_dsn: str, query: str, filters: dict[str, Any]
) -> None:
    """The newest-first read (`queries.candidates_sql`, ``all_words_newest``) finds the
    same newest `cap` matches whether it walks the scope newest first or reads every
    match from the index: with the walk the plan chose, none, one entry, just too few
    and many entries; and a walk long enough to find them reads no match from the
    index."""
    from pgsearch.db import queries as q

    plan = _newest_plan(big_dsn, query, **filters)
    scope = _newest_scope(filters)
    answers = {}
    with psycopg.connect(big_dsn) as conn:
        for walk in (plan.walk, 0, 1, plan.cap - 1, 10 * plan.cap, 1_000_000):
            sql_text, params = q.candidates_sql(scope, replace(plan, walk=walk))
            rows = conn.execute(sql_text, params).fetchall()  # type: ignore[call-overload]
            answers[walk] = rows
        sql_text, params = q.candidates_sql(scope, replace(plan, walk=1_000_000))
        (doc,) = conn.execute(  # type: ignore[call-overload]
            "EXPLAIN (ANALYZE, FORMAT JSON) " + sql_text, params
        ).fetchone()
    reference = answers[0]
    assert reference
    assert all(rows == reference for rows in answers.values())
    keys = [(r[4], r[0], r[1]) for r in reference]
    assert keys == sorted(keys, key=lambda k: (-k[0].timestamp(), k[1], -k[2]))
    if not filters and query == "the":
        assert len(reference) == plan.cap
        assert 0 < plan.walk < 1_000_000, "the plan walks for a word this common"
    if len(reference) == plan.cap and not scope.roles:
        # A role filter never walks (`queries._walks`): its entries may be few.
        index_reads = _node_loops(doc, "messages_terms_idx")
        assert not any(index_reads), "a walk that found the cap's matches read the index too"


def _node_loops(plan: Any, index: str) -> list[int]:
    """How many times each plan node reading `index` ran."""
    return [
        int(node.get("Actual Loops", 0))
        for node in _plan_nodes(plan)
        if node.get("Index Name") == index
    ]


#: The per-session spread as it read before it took the newest `cap` sessions ahead
#: of reading their rows again: every session's newest match among the first `scan`
#: matches, then the newest `cap` of those.
_SPREAD_REFERENCE = (
    "SELECT m.session_id, m.seq, m.created_at FROM messages m "
    "WHERE m.workspace_id = %(ws)s AND (m.session_id, m.seq) IN ("
    'SELECT DISTINCT ON (c.session_id COLLATE "C") c.session_id, c.seq FROM ('
    "SELECT m.session_id, m.seq, m.created_at FROM messages m WHERE {scope}"
    " LIMIT %(scan)s) c "
    'ORDER BY c.session_id COLLATE "C", c.created_at DESC, c.seq DESC) '
    "ORDER BY m.created_at DESC, m.session_id, m.seq DESC LIMIT %(cap)s"
)


@pytest.mark.parametrize(
    ("query", "filters"), [(q, f) for q, f in NEWEST_READS if "kinds" not in f]
)
def test_the_session_spread_is_each_sessions_newest_match(
    big_dsn: str, query: str, filters: dict[str, Any]
) -> None:
    """The per-session spread (`queries.session_spread_sql`) gives, when it scans every
    match, the newest match of each matching session, the newest `cap` of them in
    `NEWEST_FIRST` order; and, for any scan, the rows the statement it replaced read."""
    from pgsearch.db import queries as q

    plan = _newest_plan(big_dsn, query, **filters)
    scope = _newest_scope(filters)
    with psycopg.connect(big_dsn) as conn:
        where = q._filter_sql(scope, "m")
        params = q._filter_params(scope)
        params["tsq"] = q.candidate_tsquery(plan)
        params["ktsq"] = q.keyed_tsquery(scope.workspace, params["tsq"])
        by_time = newest_match_per_session(conn, scope, params["tsq"])
        assert len(by_time) > 20, "many sessions match"
        for cap in (1, 7, plan.cap):
            for scan in (1, 50, 500, 1_000_000):
                spread = replace(plan, cap=cap)
                sql_text, p = q.session_spread_sql(scope, spread, scan=scan)
                rows = conn.execute(sql_text, p).fetchall()  # type: ignore[call-overload]
                got = [(r[0], r[1], r[4]) for r in rows]
                ref_params = dict(params, scan=scan, cap=cap)
                reference = conn.execute(  # type: ignore[call-overload]
                    _SPREAD_REFERENCE.format(
                        scope=q._holds(scope, where, "%(tsq)s::tsquery", "%(ktsq)s::tsquery")
                    ),
                    ref_params,
                ).fetchall()
                assert got == [tuple(r) for r in reference], (cap, scan)
                assert len({sid for sid, _, _ in got}) == len(got), "one per session"
                if scan == 1_000_000:
                    assert got == by_time[:cap], (cap, scan)
            # Read with the candidates of a plan that does not walk: the same rows
            # as the two statements, in the same order.
            index_read = replace(plan, cap=cap, walk=0)
            sql_text, p = q.newest_and_spread_sql(scope, index_read)
            both = conn.execute(sql_text, p).fetchall()  # type: ignore[call-overload]
            sql_text, p = q.candidates_sql(scope, index_read)
            alone = conn.execute(sql_text, p).fetchall()  # type: ignore[call-overload]
            sql_text, p = q.session_spread_sql(scope, index_read, scan=1_000_000)
            spread_alone = conn.execute(sql_text, p).fetchall()  # type: ignore[call-overload]
            assert [tuple(r[1:]) for r in both if r[0] == "c"] == [tuple(r) for r in alone]
            # The spread's rows not among the candidates, in its order.
            keys = {(r[0], r[1]) for r in alone}
            others = [tuple(r) for r in spread_alone if (r[0], r[1]) not in keys]
            assert [tuple(r[1:]) for r in both if r[0] == "s"] == others
            assert len(others) < len(spread_alone) or cap == 1, "no spread row was a candidate"


@pytest.mark.parametrize("query", ["the", "the and of", "error"])
def test_newest_matches_from_a_horizon_are_those_of_every_match(big_dsn: str, query: str) -> None:
    """`queries.newest_and_spread_sql` reads the matches since its horizon (when the
    workspace's ``horizon``-th newest session was last active) when they hold the
    cap's matches and sessions, else every match (`queries._horizon_matches`): for
    any horizon, from the newest session alone to past the oldest, and any cap, the
    rows are those of the read of every match, and both reads are taken. So does
    `queries.candidates_sql` when it reads every match (no walk): its rows are the
    candidates of the read with the spread."""
    from pgsearch.db import queries as q
    from pgsearch.plan import group_df

    plan = _newest_plan(big_dsn, query)
    scope = _newest_scope({})
    where = q._filter_sql(scope, "m")
    matches = min(map(group_df, plan.groups))
    caps = [cap for cap in (1, 7, 40, plan.cap) if matches >= q.HORIZON_MATCHES * cap]
    assert caps[:2] == [1, 7], "the words are frequent enough for a horizon"
    enough = "WITH " + q._horizon_matches(
        where, q._holds(scope, where, "%(tsq)s::tsquery", "%(ktsq)s::tsquery"), sessions=True
    )
    taken: set[bool] = set()
    with psycopg.connect(big_dsn) as conn:
        for cap in caps:
            sql_text, p = q.newest_and_spread_sql(scope, replace(plan, cap=cap, walk=0))
            assert "horizon" in p
            every = conn.execute(sql_text, dict(p, horizon=10**9)).fetchall()  # type: ignore[call-overload]
            assert every, "some match"
            alone_sql, alone_p = q.candidates_sql(scope, replace(plan, cap=cap, walk=0))
            assert "horizon" in alone_p
            alone = conn.execute(alone_sql, dict(alone_p, horizon=10**9)).fetchall()  # type: ignore[call-overload]
            assert [tuple(r) for r in alone] == [tuple(r[1:]) for r in every if r[0] == "c"]
            for horizon in (0, 1, 2, 5, 13, 40, 200):
                got = conn.execute(sql_text, dict(p, horizon=horizon)).fetchall()  # type: ignore[call-overload]
                assert got == every, (cap, horizon)
                got = conn.execute(alone_sql, dict(alone_p, horizon=horizon)).fetchall()  # type: ignore[call-overload]
                assert got == alone, (cap, horizon)
                (ok,) = conn.execute(  # type: ignore[call-overload]
                    enough + " SELECT ok.ok FROM ok", dict(p, horizon=horizon)
                ).fetchone()
                taken.add(bool(ok))
    assert taken == {True, False}, "both reads taken"


@pytest.mark.parametrize("query", ["the", "the and of", "error"])
def test_a_walked_session_spread_is_each_sessions_newest_match_or_the_scans(
    big_dsn: str, query: str
) -> None:
    """The per-session spread read walking the newest sessions' ends
    (`queries.session_spread_walk_sql`) gives every session's newest match, the
    newest `cap` of them, whenever it does not give the scan's rows: each walk's
    bounds (sessions read, entries walked, entries walked further) taken down to
    one, so that the walk is cut short where it cannot be sure, and the scan's rows
    (first `scan` matches) then differ from the newest matches."""
    from pgsearch.db import queries as q

    plan = _newest_plan(big_dsn, query)
    scope = _newest_scope({})
    with psycopg.connect(big_dsn) as conn:
        by_time = newest_match_per_session(conn, scope, q.candidate_tsquery(plan))
        assert len(by_time) > 20, "many sessions match"
        walked = scanned = 0
        for cap in (1, 7, 20, plan.cap):
            spread = replace(plan, cap=cap)
            for scan in (5, 1_000_000):
                sql_text, p = q.session_spread_sql(scope, spread, scan=scan)
                scan_rows = conn.execute(sql_text, p).fetchall()  # type: ignore[call-overload]
                for sessions, rows, more in ((0, 1, 1), (0, 2, 4), (3, 1, 2), (0, 16, 256)):
                    sql_text, p = q.session_spread_walk_sql(scope, spread, scan=scan)
                    p.update(walk_sessions=cap + sessions, walk_rows=rows, walk_more=more)
                    got = conn.execute(sql_text, p).fetchall()  # type: ignore[call-overload]
                    assert len({r[0] for r in got}) == len(got), "one per session"
                    if got != scan_rows:
                        assert [(r[0], r[1], r[4]) for r in got] == by_time[:cap]
                    if scan == 5 and [(r[0], r[1], r[4]) for r in scan_rows] != by_time[:cap]:
                        if got == scan_rows:
                            scanned += 1
                        else:
                            walked += 1
                    if scan == 1_000_000:
                        assert [(r[0], r[1], r[4]) for r in got] == by_time[:cap]
                        assert [tuple(r) for r in got] == [tuple(r) for r in scan_rows]
        assert walked > 0, "no walk was complete"
        assert scanned > 0, "no walk was cut short"


@pytest.mark.parametrize("filters", [{}, {"roles": ("user",)}, {"kinds": ("tool_error",)}])
def test_best_covering_candidates_read_the_session_spread_with_them(
    big_dsn: str, filters: dict[str, Any]
) -> None:
    """A best-covering plan's candidates and its per-session spread in one read
    (`queries.coverage_and_spread_sql`): the rows of `candidates_sql` (``c``) and, when
    they fill the cap and the scan would read every match, those of
    `session_spread_sql` (``s``), each in its order; when
    more match than the scan, an ``x`` row and no spread; none when the candidates do
    not fill the cap."""
    from pgsearch.db import queries as q

    settings = Settings.from_env().with_(candidate_cap=10, stop_df_ratio=0.2)
    with PgSearch.connect(big_dsn, settings=settings) as pg:
        result = pg.provider(workspace="ws-a").explain(
            SessionQueryRequest(query="error file test naive cafe resume", **filters)
        )
    assert result.trace is not None and result.trace.plan is not None
    plan = result.trace.plan
    assert plan.strategy == "any_unit_by_coverage"
    scope = _newest_scope(filters)
    with psycopg.connect(big_dsn) as conn:
        params = q._filter_params(scope)
        params["tsq"] = q.candidate_tsquery(plan)
        (matches,) = conn.execute(  # type: ignore[call-overload]
            "SELECT count(*) FROM messages m WHERE "
            + q._filter_sql(scope, "m")
            + " AND m.tsv @@ %(tsq)s::tsquery",
            params,
        ).fetchone()
        assert matches > 20, "many messages match"
        seen = set()
        for cap, scan in (
            (7, matches),
            (7, 1_000_000),
            (7, matches - 1),
            (7, 1),
            (matches, matches),
            (matches + 1, 1_000_000),
        ):
            capped = replace(plan, cap=cap)
            sql_text, p = q.coverage_and_spread_sql(scope, capped, scan=scan)
            both = conn.execute(sql_text, p).fetchall()  # type: ignore[call-overload]
            sql_text, p = q.candidates_sql(scope, capped)
            alone = conn.execute(sql_text, p).fetchall()  # type: ignore[call-overload]
            assert [tuple(r[1:]) for r in both if r[0] == "c"] == [tuple(r) for r in alone]
            spread = [tuple(r[1:]) for r in both if r[0] == "s"]
            marked = [r for r in both if r[0] == "x"]
            if matches > scan:
                assert spread == [] and len(marked) == 1, (cap, scan)
                seen.add("x")
                continue
            assert marked == [], (cap, scan)
            if matches < cap:
                assert spread == [], (cap, scan)
                seen.add("uncapped")
                continue
            sql_text, p = q.session_spread_sql(scope, capped, scan=scan)
            reference = conn.execute(sql_text, p).fetchall()  # type: ignore[call-overload]
            # The spread's rows not among the candidates, in its order.
            keys = {(r[0], r[1]) for r in alone}
            assert spread == [tuple(r) for r in reference if (r[0], r[1]) not in keys], (cap, scan)
            assert reference and len({r[0] for r in reference}) == len(reference), "per session"
            seen.add("spread")
    assert seen == {"x", "uncapped", "spread"}
