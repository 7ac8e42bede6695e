"""Tenant isolation under Row Level Security, as a deployment runs it.

The database is migrated by its owner; the application connects as a role that owns
nothing and bypasses nothing, with ``PGSEARCH_RLS`` on, so every transaction is
bound to one workspace and the server itself filters rows. Two workspaces hold
look-alike data (the same session ids, similar text) plus words, tool names, entry
ids, titles and files that exist only in one of them.

A provider bound to ``acme`` is then given every way we know to name ``globex``:
its words, session ids, entry ids, tool names, time ranges, cursors (its own, and
one forged with the real signing key), the workspace field, windows and listings,
and the agent tools. None of it may return anything of ``globex``. Below the
library, raw SQL without any workspace filter, on a connection bound to ``acme``,
must see and touch only ``acme`` rows. Finally, text the indexing policy keeps out
of the index (tool output, secrets) is never a match and never in an excerpt.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgsearch import (
    ConfigError,
    InvalidQuery,
    PgSearch,
    ScopeError,
    SessionQueryRequest,
    Settings,
    StoreError,
)
from pgsearch.api import Provider
from pgsearch.cursor import CursorCodec, request_fingerprint
from pgsearch.db.schema import TENANT_TABLES
from pgsearch.db.work import Statement, Unit, Work, as_tuple, fetch
from pgsearch.errors import NotFound
from pgsearch.policy import ALL_KINDS, DEFAULT_SEARCH_KINDS, ROLES
from pgsearch.tools import session_tools
from pgsearch.types import SessionQueryResult
from tests.helpers import assert_statistics_exact
from tests.reliability.conftest import cli, messages_seq_scans, role_dsn

A, B = "acme", "globex"
T0 = datetime(2026, 4, 1, tzinfo=UTC)
SECRETS = [
    "sk-proj-Zq8xLw3Nv5Tt7Rr9Pp1Mm2Kk4Jj6Hh0Gg",
    "AKIAZ7Q4X2M9K3L8P5R1",
    "hunter2xyzzy",
    "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dBjftJeZ4CVPmB92K27uhbUJU1p1r",
]
TOOL_OUTPUT_WORD = "outputonlyzanzibar"
BULK = 100
#: Messages each workspace holds: three sessions of 8 entries, and the bulk file.
PER_WORKSPACE = 3 * 8 + BULK


def session(ws: str, word: str, tool: str, entry_prefix: str) -> list[dict[str, Any]]:
    """A session with every kind of entry; `word` marks the workspace's own text."""

    def at(i: int) -> str:
        return (T0 + timedelta(minutes=i)).isoformat()

    return [
        {"role": "system", "content": f"system prompt {word}", "created_at": at(0)},
        {
            "role": "user",
            "content": f"please look at the {word} cron refactor",
            "created_at": at(1),
            "id": f"{entry_prefix}-1",
            "title": f"{word} cron title",
        },
        {
            "role": "assistant",
            "content": f"running {tool} for the {word} job",
            "tool_calls": [
                {
                    "id": "c1",
                    "function": {
                        "name": tool,
                        "arguments": json.dumps({"token": SECRETS[0], "q": word}),
                    },
                }
            ],
            "created_at": at(2),
            "id": f"{entry_prefix}-2",
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": f"{TOOL_OUTPUT_WORD} {word} AWS key {SECRETS[1]}",
            "created_at": at(3),
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": f"Error: {tool} failed for {word}",
            "created_at": at(4),
        },
        {
            "role": "user",
            "content": (
                f"the {word} db is postgres://admin:{SECRETS[2]}@db.internal/app, "
                f"github token {SECRETS[3]} and jwt {SECRETS[4]}"
            ),
            "created_at": at(5),
        },
        {"role": "assistant", "content": f"the {word} cron refactor is done", "created_at": at(6)},
        {
            "role": "assistant",
            "content": f"summary of the {word} cron work",
            "kind": "summary",
            "created_at": at(7),
        },
    ]


@dataclass
class Tenants:
    owner_dsn: str
    app_dsn: str
    settings: Settings
    pg: PgSearch


def _app(app_dsn: str) -> Settings:
    return Settings.from_env({}, dsn=app_dsn, row_level_security=True)


@pytest.fixture
def tenants(dsn: str, app_role: str, tmp_path: Path) -> Iterator[Tenants]:
    app_dsn = role_dsn(dsn, app_role)
    settings = _app(app_dsn)
    with PgSearch.connect(settings=settings) as pg:
        # Written by the application role itself: RLS must let it write its own rows.
        for ws, word, tool, prefix in (
            (A, "apple", "grep", "acme-entry"),
            (B, "grape", "globextool", "globex-entry"),
        ):
            pg.append(workspace=ws, session_id="shared", messages=session(ws, word, tool, prefix))
            pg.append(
                workspace=ws, session_id=f"{ws}-only", messages=session(ws, word, tool, prefix)
            )
            folder = tmp_path / ws
            folder.mkdir()
            path = folder / f"{ws}-file.jsonl"
            path.write_text(
                "".join(json.dumps(m) + "\n" for m in session(ws, word, tool, f"{prefix}-f")),
                encoding="utf-8",
            )
            # Large enough to go through the COPY staging path.
            (folder / f"{ws}-bulk.jsonl").write_text(
                "".join(
                    json.dumps({"role": "user", "content": f"bulk {word} line {i}"}) + "\n"
                    for i in range(BULK)
                ),
                encoding="utf-8",
            )
            # A Claude Code summary naming a message not stored yet: a waiting title.
            (folder / f"{ws}-titles.jsonl").write_text(
                json.dumps(
                    {"type": "summary", "summary": f"{word} title", "leafUuid": f"{ws}-later"}
                )
                + "\n",
                encoding="utf-8",
            )
            # A session ingested from a file and forgotten: a tombstone.
            (folder / f"{ws}-regret.jsonl").write_text(
                json.dumps({"role": "user", "content": f"regretted {word}"}) + "\n",
                encoding="utf-8",
            )
            assert not pg.ingest_paths([folder], workspace=ws).errors
            pg.forget(workspace=ws, session_id=f"{ws}-regret")
        yield Tenants(owner_dsn=dsn, app_dsn=app_dsn, settings=settings, pg=pg)


def globex_leaks(result: SessionQueryResult) -> list[str]:
    return [
        f"{m.workspace_id}/{m.session_id}/{m.seq}: {m.excerpt[:60]}"
        for m in result.matches
        if m.workspace_id != A
        or "grape" in m.excerpt
        or "globex" in m.excerpt
        or (m.title and "grape" in m.title)
    ]


def test_rls_is_on_for_the_application_role(tenants: Tenants) -> None:
    with psycopg.connect(tenants.app_dsn) as conn:
        row = conn.execute(
            "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        assert row == (False, False)
        for table in TENANT_TABLES:
            active = conn.execute("SELECT row_security_active(%s)", (table,)).fetchone()
            assert active == (True,), table


def test_a_restricted_role_tests_each_rows_terms_and_finds_what_the_owner_finds(
    tenants: Tenants,
) -> None:
    """Row level security keeps a text match from any index (the operator is not
    leakproof, so the policy's test comes first): the application role's searches test
    each row's ``tsv`` instead of computing its keyed terms (`Filters.keyed`), and find
    what the owner, whose searches read the keyed index, finds."""
    requests = [
        SessionQueryRequest(query=query, per_session=per_session)
        for query in ("apple", "cron refactor", "aple", "the apple")
        for per_session in (True, False)
    ]

    def run(pg: PgSearch) -> tuple[list[tuple[str, int, float]], list[str]]:
        with pg._driver.capture() as units:
            results = [pg.provider(workspace=A).search(r) for r in requests]
        texts = [s.text for u in units for s in u.statements]
        return [(m.session_id, m.seq, round(m.score, 9)) for r in results for m in r.matches], texts

    before = messages_seq_scans(tenants.owner_dsn)
    # Its own connections, closed before the count: a backend's statistics are sent
    # when it ends at the latest.
    with PgSearch.connect(settings=tenants.settings) as pg:
        app, app_texts = run(pg)
    # Each row's terms are tested on the workspace's rows, read by a B-tree.
    assert messages_seq_scans(tenants.owner_dsn) == before
    with PgSearch.connect(tenants.owner_dsn) as owner:
        mine, owner_texts = run(owner)
    assert app and app == mine
    assert not any("pgsearch_workspace_terms" in t for t in app_texts)
    assert any("m.tsv @@" in t for t in app_texts)
    assert any("pgsearch_workspace_terms" in t for t in owner_texts)


def test_requests_naming_the_other_workspace_find_nothing_of_it(tenants: Tenants) -> None:
    provider = tenants.pg.provider(workspace=A)
    cases: Counter[str] = Counter()
    queries = [
        "grape",
        "globextool",
        "globex",
        "globex-entry-1",
        "globex-only",
        "grape cron title",
        "summary grape",
        "apple grape",
        "grap",  # a prefix and a typo of the other workspace's word
        "grapes",
        "",
    ]
    filters: list[dict[str, Any]] = [
        {},
        {"kinds": ALL_KINDS},
        {"kinds": ("tool_input",)},
        {"roles": ROLES},
        {"tool_name": "globextool"},
        {"session_id": "globex-only"},
        {"session_id": "shared"},
        {"session_id": "globex-file"},
        {"since": T0 - timedelta(days=1), "until": T0 + timedelta(days=1)},
        {"per_session": False, "limit": 50},
    ]
    for query in queries:
        for extra in filters:
            result = provider.search(SessionQueryRequest(query=query, **extra))
            assert globex_leaks(result) == [], (query, extra)
            if extra.get("session_id") in ("globex-only", "globex-file"):
                assert result.searched == 0 and result.matches == ()
            if extra.get("tool_name") == "globextool":
                assert result.matches == ()
            cases["search"] += 1
    # The provider's own words still work: the isolation is not an empty database.
    found = provider.search(SessionQueryRequest(query="apple", per_session=False, limit=50))
    assert {m.session_id for m in found.matches} >= {"shared", "acme-only", "acme-file"}
    with pytest.raises(ScopeError):
        provider.search(SessionQueryRequest(query="grape", workspace_id=B))
    cases["workspace field"] += 1
    # The facade, given the workspace per call, answers for that one only.
    assert globex_leaks(tenants.pg.search(SessionQueryRequest(query="grape"), workspace=A)) == []
    cases["facade"] += 1
    assert sum(cases.values()) == len(queries) * len(filters) + 2


def test_cursors_cannot_cross_workspaces(tenants: Tenants) -> None:
    mine = tenants.pg.provider(workspace=A)
    theirs = tenants.pg.provider(workspace=B)
    request = SessionQueryRequest(query="cron", per_session=False, limit=1)
    their_cursor = theirs.search(request).next_cursor
    assert their_cursor
    with pytest.raises(InvalidQuery, match="different query or scope"):
        mine.search(
            SessionQueryRequest(query="cron", per_session=False, limit=1, cursor=their_cursor)
        )
    browse = SessionQueryRequest(query="", per_session=False, limit=1)
    their_browse = theirs.search(browse).next_cursor
    assert their_browse
    with pytest.raises(InvalidQuery):
        mine.search(SessionQueryRequest(query="", per_session=False, limit=1, cursor=their_browse))

    # Even with the signing key (read here as the owner), a cursor that names the other
    # workspace's positions only moves within this one.
    with psycopg.connect(tenants.owner_dsn) as conn:
        row = conn.execute("SELECT value FROM pgsearch_meta WHERE key = 'cursor_key'").fetchone()
    assert row is not None
    codec = CursorCodec(row[0].encode())
    for req, position in (
        (
            SessionQueryRequest(query="cron", per_session=False, limit=50),
            [-1e9, -1e12, "globex-only", -1],  # before every hit
        ),
        (
            SessionQueryRequest(query="", per_session=False, limit=50),
            [(T0 + timedelta(days=1)).isoformat(), "globex-only", 0],
        ),
    ):
        forged = codec.encode(request_fingerprint(mine.scope, req, DEFAULT_SEARCH_KINDS), position)
        result = mine.search(dataclasses.replace(req, cursor=forged))
        assert result.matches and globex_leaks(result) == []


def test_windows_and_listings_stay_in_the_workspace(tenants: Tenants) -> None:
    provider = tenants.pg.provider(workspace=A)
    for sid in ("globex-only", "globex-file"):
        with pytest.raises(NotFound):
            provider.around(sid, 1)
        with pytest.raises(NotFound):
            provider.session_messages(sid)
    window = provider.around("shared", 1, before=16, after=16)
    text = " ".join(m.content for m in window.messages)
    assert "apple" in text and "grape" not in text
    listing = provider.session_messages("shared", limit=50)
    assert "grape" not in " ".join(m.content for m in listing.messages)
    sessions = {s.session_id for s in tenants.pg.sessions(workspace=A)}
    assert sessions == {"shared", "acme-only", "acme-file", "acme-bulk"}
    stats = tenants.pg.stats(workspace=A)
    assert stats.sessions == 4 and stats.messages == PER_WORKSPACE
    pinned = tenants.pg.provider(workspace=A, session_id="shared")
    with pytest.raises(ScopeError):
        pinned.around("globex-only", 1)
    with pytest.raises(ScopeError):
        pinned.search(SessionQueryRequest(query="grape", session_id="globex-only"))


def test_agent_tools_bound_to_a_workspace_cannot_reach_another(tenants: Tenants) -> None:
    tools = {t.name: t for t in session_tools(tenants.pg.provider(workspace=A))}
    calls: list[tuple[str, dict[str, Any]]] = [
        ("session_search", {"query": "grape", "workspace_id": B}),
        ("session_search", {"query": "grape"}),
        ("session_search", {"query": "cron", "session_id": "globex-only"}),
        ("session_search", {"query": "cron", "tool_name": "globextool"}),
        ("session_around", {"session_id": "globex-only", "seq": 1}),
        ("session_messages", {"session_id": "globex-file"}),
    ]
    for name, args in calls:
        out = tools[name].run(args)
        assert "grape" not in out.text and "globextool" not in out.text, (name, args, out.text)
        if out.data is not None:
            assert "grape" not in json.dumps(out.data)


def test_the_database_enforces_the_binding_below_the_library(tenants: Tenants) -> None:
    """Raw SQL without a workspace filter, on the application's own pooled connections."""
    driver = tenants.pg._driver

    def raw(text: str, *params: object) -> Statement[tuple[object, ...]]:
        return Statement("raw", text, {str(i): p for i, p in enumerate(params)} or None, as_tuple)

    def run(work: Any, workspace: str | None, *, write: bool = True) -> None:
        driver.run(Unit(work=work, workspace=workspace, write=write, context="raw statements"))

    def bound_to_a() -> Work[None]:
        for table in TENANT_TABLES:
            rows = yield from fetch(raw(f"SELECT DISTINCT workspace_id FROM {table}"))
            # No word of these small workspaces is frequent enough to get a term list.
            assert [r[0] for r in rows] == ([] if table.startswith("term_list") else [A])
        changed = yield from fetch(
            raw(
                "UPDATE messages SET content = 'overwritten' "
                "WHERE workspace_id = %(0)s RETURNING 1",
                B,
            )
        )
        assert changed == []
        deleted = yield from fetch(
            raw("DELETE FROM sessions WHERE workspace_id = %(0)s RETURNING 1", B)
        )
        assert deleted == []

    def unbound() -> Work[None]:
        for table in TENANT_TABLES:
            counted = yield from fetch(raw(f"SELECT count(*) FROM {table}"))
            assert counted == [(0,)], f"{table}: unbound transactions see nothing"

    run(bound_to_a, A)
    run(unbound, None, write=False)
    planted = raw("INSERT INTO sessions (workspace_id, session_id) VALUES (%(0)s, 'planted')", B)
    with pytest.raises(StoreError, match="row-level security"):
        run(partial(fetch, planted), A)
    moved = raw("UPDATE sessions SET workspace_id = %(0)s WHERE session_id = 'shared'", B)
    with pytest.raises(StoreError, match="row-level security"):
        run(partial(fetch, moved), A)
    # Outside any transaction the setting is gone: a bare statement on a pooled
    # connection sees nothing.
    with driver._pools["primary"].connection() as conn:
        assert conn.execute("SELECT count(*) FROM messages").fetchone() == (0,)
    # Nothing above changed either workspace.
    for ws in (A, B):
        assert_statistics_exact(tenants.owner_dsn, ws)
    with psycopg.connect(tenants.owner_dsn) as conn:
        counts = dict(
            conn.execute("SELECT workspace_id, count(*) FROM messages GROUP BY 1").fetchall()
        )
    assert counts == {A: PER_WORKSPACE, B: PER_WORKSPACE}


def test_a_restricted_role_without_rls_binding_is_refused(tenants: Tenants) -> None:
    with pytest.raises(ConfigError, match="PGSEARCH_RLS=on"):
        PgSearch.connect(tenants.app_dsn, settings=Settings.from_env({}))
    with pytest.raises(ConfigError, match="cannot be listed across tenants"):
        tenants.pg.workspaces()
    result = cli("stats", dsn=tenants.app_dsn, env={"PGSEARCH_RLS": "on"})
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().startswith("pgsearch: error: with row level security on")
    result = cli(
        "search", "-w", A, "--json", "grape", dsn=tenants.app_dsn, env={"PGSEARCH_RLS": "on"}
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["matches"] == []
    result = cli("stats", "-w", A, "--json", dsn=tenants.app_dsn, env={"PGSEARCH_RLS": "on"})
    assert result.returncode == 0, result.stderr
    [stats] = json.loads(result.stdout)["workspaces"]
    assert stats["workspace_id"] == A and stats["messages"] == PER_WORKSPACE


@pytest.mark.parametrize("ws", [A, B])
def test_text_kept_out_of_the_index_is_never_a_match(tenants: Tenants, ws: str) -> None:
    """Tool output and secrets: not found by any query, in no excerpt or title."""
    provider: Provider = tenants.pg.provider(workspace=ws)
    hidden = [TOOL_OUTPUT_WORD, *SECRETS, "hunter2", "AKIAZ7Q4X2M9K3L8P5R1"]
    queries = [
        *hidden,
        *(s[:12] for s in SECRETS),
        "zanzibar",
        "outputonly",
        "admin hunter2xyzzy",
        "token",
        "",
    ]
    kinds_options: list[tuple[str, ...]] = [
        (),
        ALL_KINDS,
        ("tool_output",),
        ("system",),
        ("tool_input",),
    ]
    for query in queries:
        for kinds in kinds_options:
            result = provider.search(
                SessionQueryRequest(query=query, kinds=kinds, per_session=False, limit=50)
            )
            shown = " ".join(f"{m.excerpt} {m.title or ''}" for m in result.matches)
            for secret in hidden:
                assert secret not in shown, (query, kinds, secret)
            if query in hidden or query in ("zanzibar", "outputonly"):
                assert result.matches == (), (query, kinds)
