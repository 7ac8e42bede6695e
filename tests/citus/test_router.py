"""One workspace, one shard: every statement pgsearch sends is a router query.

The proof has three parts, over a run that exercises everything pgsearch does to a
workspace (ingest of every format, re-ingest, growing files, append by bound arrays
and by COPY, search with every strategy, filter and cursor, windows, listings,
statistics, the agent tools, the asyncio facade, forgetting a session and a
workspace):

1. Execution: every unit bound to a workspace ran with
   ``citus.multi_task_query_log_level = error`` (``PGSEARCH_CITUS_SINGLE_SHARD``), so
   the coordinator would have failed it had any statement needed a second shard.
2. Plans: each distinct statement shape is EXPLAINed through the coordinator: one
   task (a router query), and no sequential scan of a message, session or vocabulary
   shard in the plan the worker made for it.
3. Coverage: every statement name in pgsearch's source was seen, except the named
   few that cross workspaces by nature (`pgsearch.db.citus.CROSS_WORKSPACE`), which
   run only in units bound to no workspace.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgsearch import PgSearch, SessionQueryRequest, Settings
from pgsearch.aio import AsyncPgSearch
from pgsearch.db.citus import CROSS_WORKSPACE
from pgsearch.db.driver import UnitRecord
from pgsearch.db.routing import PRIMARY_POSITION, replay_probe
from pgsearch.search import SearchEngine
from pgsearch.tools import session_tools
from tests.citus.conftest import Schemas, with_options
from tests.helpers import assert_statistics_exact

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
EXAMPLES = REPO / "examples" / "sessions"
T0 = datetime(2026, 1, 1, tzinfo=UTC)
WS = ("router-a", "router-b", "router-c")
#: Statements around a unit's own (the driver's) and savepoint bookkeeping.
INFRASTRUCTURE = {
    "begin",
    "setting",
    "commit",
    "commit lsn",
    "savepoint",
    "release savepoint",
    "rollback to savepoint",
    "explain",
    "explain ",  # the prefix of a unit's EXPLAIN of each statement (`--explain`)
}
WORDS = ["deploy", "cluster", "zanzibar", "flamingo", "migration", "kubernetes", "ingress"]


def _line(i: int, role: str = "user", **extra: Any) -> dict[str, Any]:
    text = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(3)) + f" item{i}"
    when = (T0 + timedelta(minutes=i)).isoformat()
    return {"role": role, "content": text, "created_at": when, **extra}


def _queries() -> list[str]:
    return [
        "",
        "deploy",
        "the and of",
        "a",
        "%",
        "東京",
        "Pokemon",
        "deploy cluster",
        "flamingo zanzibar migration",
        "kubernets",  # typo: the trigram expansion
        "catalgue acents",  # typos of title words: session titles read by the plan
        '"deploy cluster"',
        "resolve_dirs(config)",
        "zzzzzzzzzz",
        "deploy cluster zanzibar flamingo migration kubernetes ingress item3",
    ]


def _filters() -> list[dict[str, Any]]:
    return [
        {},
        {"session_id": "grow"},
        {"roles": ("user",)},
        {"tool_name": "bash"},
        {"since": T0 + timedelta(minutes=5), "until": T0 + timedelta(days=30)},
        {"kinds": ("tool_error", "summary")},
        {"roles": ("assistant",), "kinds": ("assistant_text",), "since": T0},
    ]


def _exercise(dsn: str, tmp: Path) -> list[UnitRecord]:
    """Everything pgsearch does to a workspace; the units the drivers ran."""
    units: list[UnitRecord] = []
    grow = tmp / "grow.jsonl"
    with PgSearch.connect(dsn) as pg, pg._driver.capture() as sink:
        for ws in WS:
            report = pg.ingest_paths([FIXTURES, EXAMPLES], workspace=ws)
            assert report.errors == []
            again = pg.ingest_paths([FIXTURES, EXAMPLES], workspace=ws)  # nothing new
            assert again.messages == 0
        lines = [_line(i, "assistant" if i % 3 else "user") for i in range(10)]
        grow.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
        pg.ingest_file(grow, workspace=WS[0])
        more = [_line(i) for i in range(10, 20)]
        with grow.open("a", encoding="utf-8") as f:
            f.write("".join(json.dumps(x) + "\n" for x in more))
        pg.ingest_file(grow, workspace=WS[0])  # grown: only the new lines
        grow.write_text(json.dumps(_line(99)) + "\n", encoding="utf-8")
        pg.ingest_file(grow, workspace=WS[0])  # rewritten: read again whole
        # A Claude Code log with summary titles, read again whole once rewritten.
        summaries = FIXTURES / "claude-code" / "summaries"
        log = tmp / "claude" / next(summaries.glob("*.jsonl")).name
        log.parent.mkdir()
        original = (summaries / log.name).read_text(encoding="utf-8")
        log.write_text(original, encoding="utf-8")
        pg.ingest_file(log, workspace="router-titles", format="claude-code")
        log.write_text("".join(original.splitlines(keepends=True)[:-1]), encoding="utf-8")
        pg.ingest_file(log, workspace="router-titles", format="claude-code")
        pg.append(workspace=WS[0], session_id="appended", messages=[_line(i) for i in range(5)])
        tool_call = {"id": "c1", "function": {"name": "bash", "arguments": "{}"}}
        pg.append(
            workspace=WS[0],
            session_id="appended",
            messages=[
                _line(5, "assistant", tool_calls=[tool_call]),
                _line(6, "tool", tool_call_id="c1", content="Error: deploy failed"),
            ],
        )
        # A tool result answering a call made in an earlier append.
        pg.append(
            workspace=WS[0],
            session_id="appended",
            messages=[_line(8, "tool", tool_call_id="c1", content="Error: later result")],
        )
        # A file's session forgotten, then asked back; the file moved, then re-homed.
        pg.forget(workspace=WS[0], session_id="grow")
        pg.ingest_file(grow, workspace=WS[0])  # stays forgotten
        pg.ingest_file(grow, workspace=WS[0], include_forgotten=True)
        moved = tmp / "moved.jsonl"
        grow.rename(moved)
        pg.relocate(workspace=WS[0], old=grow, new=moved)
        pg.ingest_file(moved, workspace=WS[0])
        pg.session_info(workspace=WS[0], session_id="grow")
        # API tokens: a reference table, the same on every node.
        token = pg.create_token(workspace=WS[0], label="router")
        pg.tokens()
        pg.tokens(workspace=WS[0])
        pg.revoke_token(token.token.token_id)
        big = [_line(i, "assistant" if i % 2 else "user") for i in range(700)]
        pg.append(workspace=WS[0], session_id="bulk", messages=big)  # COPY path
        # Scope counts left behind, as a writer of an earlier release leaves them: the
        # maintenance below counts them again.
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "UPDATE scope_counts SET n_messages = n_messages + 1 WHERE workspace_id = %s",
                (WS[0],),
            )
        # Its words are frequent enough for term lists: capped plans read through them.
        pg.maintain(workspace=WS[0])
        for settings in (
            Settings.from_env(),
            Settings.from_env().with_(candidate_cap=10, stop_df_ratio=0.2, impact_lists=True),
        ):
            with PgSearch.connect(dsn, settings=settings) as other, other._driver.capture() as s2:
                provider = other.provider(workspace=WS[0])
                for query in _queries():
                    for filters in _filters():
                        for per_session in (True, False):
                            request = SessionQueryRequest(
                                query=query, per_session=per_session, limit=3, **filters
                            )
                            result = provider.search(request)
                            if result.next_cursor:
                                provider.search(
                                    SessionQueryRequest(
                                        query=query,
                                        per_session=per_session,
                                        limit=3,
                                        cursor=result.next_cursor,
                                        **filters,
                                    )
                                )
                provider.explain(SessionQueryRequest(query="deploy cluster"))
                # The exhaustive scorer (bench.oracle) reads every match.
                engine, other._engine = other._engine, SearchEngine(settings, exhaustive=True)
                other.provider(workspace=WS[0]).search(SessionQueryRequest(query="deploy"))
                other._engine = engine
            units += s2
        # Sessions that all end in a frequent word: the best hit per session of a
        # capped search reads the newest sessions' ends (the walked spread).
        for k in range(40):
            lines = [
                {
                    "role": "user" if j % 2 else "assistant",
                    "content": f"status report{k}x{j}" + (" weekly" if j % 5 == 0 else ""),
                    "created_at": (T0 + timedelta(days=40, minutes=30 * k + j)).isoformat(),
                }
                for j in range(20)
            ]
            pg.append(workspace=WS[0], session_id=f"status-{k}", messages=lines)
        capped = Settings.from_env().with_(candidate_cap=10)
        with PgSearch.connect(dsn, settings=capped) as other, other._driver.capture() as s3:
            other.provider(workspace=WS[0]).search(SessionQueryRequest(query="status"))
            # A word in a fifth of them, 16 times the cap: of one kind, a walk would
            # pass mostly entries out of scope, so the newest matches are read from a
            # horizon of the newest sessions.
            other.provider(workspace=WS[0]).search(
                SessionQueryRequest(query="weekly", kinds=("user_text",))
            )
            # Every hit: the newest matches alone, from the same horizon.
            other.provider(workspace=WS[0]).search(
                SessionQueryRequest(query="weekly", kinds=("user_text",), per_session=False)
            )
        units += s3
        assert any(s.name == "candidates per session, walked" for u in s3 for s in u.statements)
        provider = pg.provider(workspace=WS[0])
        provider.around("bulk", 10, before=3, after=3)
        provider.around("bulk", 0, before=0, after=2)
        provider.session_messages("bulk", start_seq=5, limit=10)
        pg.sessions(workspace=WS[0])
        pg.stats(workspace=WS[0])
        tools = {t.name: t for t in session_tools(provider)}
        assert not tools["session_search"].run({"query": "deploy cluster"}).is_error
        assert not tools["session_around"].run({"session_id": "bulk", "seq": 4}).is_error
        assert not tools["session_messages"].run({"session_id": "bulk"}).is_error
        for ws in WS:
            assert_statistics_exact(dsn, ws)
        pg.forget(workspace=WS[1], session_id="pokemon-i18n")
        assert_statistics_exact(dsn, WS[1])
        pg.forget(workspace=WS[2])
        pg.workspaces()  # the cross-workspace reads, in units bound to no workspace
        pg.table_sizes()
        pg._store.after_bulk_load(10**12)  # estimate and maintenance
    units += sink
    units += _exercise_prepared(dsn, tmp)
    units += asyncio.run(_exercise_async(dsn))
    return units


def _exercise_prepared(dsn: str, tmp: Path) -> list[UnitRecord]:
    """Writes repeated on one connection of a server that plans prepared statements
    generically: the driver prepares a statement run five times, and a generic plan
    cannot see the workspace a router query needs (each would reach every shard)."""
    generic = with_options(dsn, plan_cache_mode="force_generic_plan")
    one = Settings.from_env().with_(pool_min=1, pool_max=1)
    with PgSearch.connect(generic, settings=one) as pg, pg._driver.capture() as sink:
        for i in range(8):
            pg.append(
                workspace=WS[0],
                session_id=f"prepared{i % 2}",
                messages=[_line(i), _line(i + 1, "assistant")],
            )
            path = tmp / f"prepared-file{i}.jsonl"
            path.write_text(json.dumps(_line(i)) + "\n", encoding="utf-8")
            pg.ingest_file(path, workspace=WS[0])
            pg.ingest_paths([path], workspace=WS[0])
            pg.forget(workspace=WS[0], session_id=f"prepared{i % 2}")
            pg.provider(workspace=WS[0]).search(SessionQueryRequest(query="deploy cluster"))
            pg.sessions(workspace=WS[0])
        return list(sink)


async def _exercise_async(dsn: str) -> list[UnitRecord]:
    async with await AsyncPgSearch.connect(dsn) as pg:
        with pg._driver.capture() as sink:
            await pg.append(workspace=WS[1], session_id="async", messages=[_line(1), _line(2)])
            provider = pg.provider(workspace=WS[1])
            await provider.around("async", 0)
            await provider.session_messages("async")
            await pg.sessions(workspace=WS[1])
            await pg.stats(workspace=WS[1])
            await pg.forget(workspace=WS[1], session_id="async")
            await pg.schema_versions()
            made = await pg.create_token(workspace=WS[1])
            assert await pg.authenticate(made.secret) is not None
    # The background maintainer of `pgsearch serve` and `pgsearch mcp`: a round that
    # finds the first workspace's lists behind and rebuilds them.
    settings = Settings.from_env(dsn=dsn).with_(maintain_behind=1)
    async with await AsyncPgSearch.connect(settings=settings) as pg:
        with pg._driver.capture() as kept:
            await pg.append(workspace=WS[0], session_id="kept", messages=[_line(1)])

            async def first() -> list[str]:
                return [WS[0]]

            done = await pg.maintainer(first).run_round()
            assert list(done.rebuilt) == [WS[0]]
        return [*sink, *kept]


@pytest.fixture(scope="module")
def proof(schemas: Schemas, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    dsn = schemas.create("router")
    units = _exercise(dsn, tmp_path_factory.mktemp("router"))
    yield dsn, units


def _names_in_source() -> set[str]:
    """Every statement name pgsearch's code gives (``Statement("name", ...)``)."""
    found: set[str] = set()
    for path in (REPO / "pgsearch").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        found |= set(re.findall(r'Statement\(\s*"([^"]+)"', text))
        found |= set(re.findall(r'Statement\[[^\]]*\] = Statement\(\s*"([^"]+)"', text))
    return found


def test_every_workspace_unit_ran_on_one_shard(proof: Any) -> None:
    _, units = proof
    failed = [f"{u.context}: {u.error}" for u in units if u.error]
    assert failed == []
    bound = [u for u in units if u.workspace is not None]
    assert len(bound) > 500
    # The server enforced it: each of these ran under multi_task_query_log_level=error.
    crossing = {s.name for u in bound for s in u.statements} & CROSS_WORKSPACE
    assert crossing == set(), "a cross-workspace statement ran inside workspace work"
    # Units bound to no workspace: the named cross-workspace reads, and single-task
    # statements on reference or coordinator tables (checked by plan below).
    unbound = {s.name for u in units if u.workspace is None for s in u.statements}
    assert CROSS_WORKSPACE <= unbound


def test_the_server_refuses_a_multi_shard_statement_in_workspace_work(proof: Any) -> None:
    """The check of part 1 bites: the same setting fails a statement over all shards."""
    dsn, _ = proof
    with psycopg.connect(dsn) as conn, conn.transaction():
        conn.execute("SET LOCAL citus.multi_task_query_log_level = error")
        conn.execute("SELECT count(*) FROM messages WHERE workspace_id = %s", (WS[0],))
        with pytest.raises(psycopg.errors.InternalError_, match="multi-task query"):
            conn.execute("SELECT count(*) FROM messages")


def _tasks(plan: Any) -> list[int]:
    found: list[int] = []
    if isinstance(plan, dict):
        job = plan.get("Distributed Query", {}).get("Job")
        if isinstance(job, dict) and "Task Count" in job:
            found.append(int(job["Task Count"]))
        for value in plan.values():
            found += _tasks(value)
    elif isinstance(plan, list):
        for item in plan:
            found += _tasks(item)
    return found


_SCANNED_SHARD = re.compile(r"^(messages|sessions|vocabulary|workspace_stats|ingested_files)_\d+$")


def _shard_seq_scans(plan: Any) -> list[str]:
    found: list[str] = []
    if isinstance(plan, dict):
        rel = str(plan.get("Relation Name", ""))
        if plan.get("Node Type") == "Seq Scan" and _SCANNED_SHARD.match(rel):
            found.append(rel)
        for value in plan.values():
            found += _shard_seq_scans(value)
    elif isinstance(plan, list):
        for item in plan:
            found += _shard_seq_scans(item)
    return found


def _methods(plan: Any) -> list[str]:
    found: list[str] = []
    if isinstance(plan, dict):
        if "INSERT/SELECT method" in plan:
            found.append(str(plan["INSERT/SELECT method"]))
        for value in plan.values():
            found += _methods(value)
    elif isinstance(plan, list):
        for item in plan:
            found += _methods(item)
    return found


#: Statements that read only coordinator-local objects (no distributed table): the
#: advisory lock of a term list rebuild is the coordinator's. The search deadline
#: sets the coordinator's statement timeout, which cancels the shard queries of a
#: statement that outlives it.
LOCAL = {
    "lock file key",
    "schema versions",
    "deadline",
    "lists build lock",
    "lists try build lock",
    "in recovery",
}


def test_every_statement_shape_is_a_router_query(proof: Any) -> None:
    dsn, units = proof
    shapes: dict[str, tuple[str, Any, dict[str, Any], bool]] = {}
    for unit in units:
        for s in unit.statements:
            if s.name in CROSS_WORKSPACE:
                continue
            if s.explainable:
                shapes.setdefault(s.text, (s.name, s.sql, dict(s.params or {}), unit.write))
    assert len(shapes) >= 40, len(shapes)
    # The capped reads: newest first by a walk, by the index, coverage, the spread, from
    # a horizon.
    markers = ("LIMIT %(walk)s", "%(unit_q0)s", 'DISTINCT ON (c.session_id COLLATE "C")')
    for marker in (*markers, "%(horizon)s"):
        assert any(marker in text for text in shapes), marker
    assert any("%(horizon)s" in text and "'c' AS tag" not in text for text in shapes)
    # The scope counts: summed, kept by writers, counted again by maintenance.
    for marker in ("FROM scope_counts c", "INTO scope_counts", "SET n_messages = EXCLUDED"):
        assert any(marker in text for text in shapes), marker
    bad: list[str] = []
    pulled = 0
    with psycopg.connect(dsn) as conn:
        for text, (name, statement, params, _) in shapes.items():
            with conn.transaction(force_rollback=True):
                conn.execute("SET LOCAL enable_seqscan = off")
                conn.execute("SET LOCAL citus.propagate_set_commands = 'local'")
                if "pgsearch_stage" in text:
                    from pgsearch.db import queries as q

                    conn.execute(q.CREATE_STAGE)
                row = conn.execute("EXPLAIN (FORMAT JSON) " + statement, params).fetchone()
            assert row is not None
            plan = row[0]
            tasks = _tasks(plan)
            if name in LOCAL:
                if tasks:
                    bad.append(f"{name}: expected no distributed table, {tasks}: {text[:200]}")
                continue
            if _methods(plan):
                # INSERT ... SELECT from bound arrays (or rows staged by COPY in a
                # temporary table): the rows are made on the coordinator, read no
                # distributed table, and all carry the one workspace in the statement,
                # so they go to its one shard.
                if _methods(plan) != ["pull to coordinator"] or tasks:
                    bad.append(f"{name}: {_methods(plan)} {tasks}: {text[:200]}")
                if not re.search(r"\bSELECT %\(ws\)s,", text):
                    bad.append(f"{name}: the workspace is not the statement's constant")
                pulled += 1
                continue
            if tasks != [1] and not (tasks and all(t == 1 for t in tasks)):
                bad.append(f"{name}: task counts {tasks}: {text[:200]}")
            scans = _shard_seq_scans(plan)
            if scans:
                bad.append(f"{name}: sequential scan of {scans}: {text[:200]}")
    assert bad == [], "\n".join(bad)
    print(f"\nrouter proof: {len(shapes)} statement shapes checked ({pulled} INSERT ... SELECT)")


def test_the_standby_probe_reads_no_distributed_table(proof: Any) -> None:
    """A read replica's probe (PGSEARCH_READ_DSN, one standby per node's primary)
    asks the node itself and touches no table: nothing for Citus to route."""
    dsn, _ = proof
    with psycopg.connect(dsn) as conn:
        for probe in (replay_probe(None, 0), replay_probe("0/0", 100)):
            row = conn.execute("EXPLAIN (FORMAT JSON) " + str(probe.sql), probe.params).fetchone()
            assert row is not None and _tasks(row[0]) == []
            assert conn.execute(probe.sql, probe.params).fetchall()
        # What a standby's replay is measured against, asked of the primary node.
        row = conn.execute("EXPLAIN (FORMAT JSON) " + str(PRIMARY_POSITION.sql)).fetchone()
        assert row is not None and _tasks(row[0]) == []


#: Statements checked on their own above (not part of the exercised run).
NODE_PROBES = {"standby probe", "primary position"}


def test_every_statement_name_was_exercised(proof: Any) -> None:
    _, units = proof
    seen = {s.name for u in units for s in u.statements} | NODE_PROBES
    missing = _names_in_source() - seen - CROSS_WORKSPACE - INFRASTRUCTURE
    assert missing == set(), f"statements never run by the router proof: {sorted(missing)}"
    assert CROSS_WORKSPACE <= seen
