"""Every session is named: its own title, else its first user prompt (shown, not searched)."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg

from pgsearch import PgSearch, SessionQueryRequest
from pgsearch.db.migrate import HEAD_REVISION, migrate
from tests.helpers import assert_statistics_exact, write_jsonl


def test_a_session_without_a_title_is_named_by_its_first_prompt(pg: PgSearch) -> None:
    pg.append(
        workspace="w",
        session_id="plain",
        messages=[
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "please push the fix for the flaky login test"},
            {"role": "assistant", "content": "Pushed the fix for the flaky login test."},
        ],
    )
    pg.append(
        workspace="w",
        session_id="titled",
        messages=[{"role": "user", "content": "flaky builds again", "title": "CI triage"}],
    )
    expected = {"plain": "please push the fix for the flaky login test", "titled": "CI triage"}
    assert {s.session_id: s.title for s in pg.sessions(workspace="w")} == expected
    info = pg.session_info(workspace="w", session_id="plain")
    assert info is not None and info.title == expected["plain"]
    # Shown, not searched: a word of the prompt finds the prompt, never a "title" hit.
    result = pg.provider(workspace="w").search(SessionQueryRequest(query="flaky"))
    assert {m.session_id: m.kind for m in result.matches} == {
        "plain": "user_text",
        "titled": "user_text",
    }


# --- made once, at ingest, and kept right -----------------------------------------

CLAUDE_LOG = (
    Path(__file__).resolve().parent.parent
    / "fixtures"
    / "claude-code"
    / "3f7c1a52-8d4e-4b8a-9c1e-2a6d5f0b7e91.jsonl"
)
CLAUDE_PROMPT = "The invoice total test fails randomly on CI with a rounding difference of one…"


def _titles(pg: PgSearch, ws: str = "w") -> dict[str, str | None]:
    return {s.session_id: s.title for s in pg.sessions(workspace=ws)}


def _hit_titles(pg: PgSearch, query: str, ws: str = "w") -> dict[str, str | None]:
    result = pg.search(SessionQueryRequest(query=query), workspace=ws)
    return {m.session_id: m.title for m in result.matches}


def _stored(dsn: str, ws: str = "w") -> dict[str, tuple[str | None, str | None]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT session_id, title, prompt_title FROM sessions WHERE workspace_id = %s",
            (ws,),
        ).fetchall()
    return {r[0]: (r[1], r[2]) for r in rows}


def test_search_hits_and_browsing_show_the_title_made_at_ingest(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    write_jsonl(
        tmp_path / "login.jsonl",
        [
            {"role": "user", "content": "please push the fix for the **flaky** login test"},
            {"role": "assistant", "content": "Pushed: the retry wraps the session cookie."},
        ],
    )
    pg.ingest_file(tmp_path / "login.jsonl", workspace="w")
    title = "please push the fix for the flaky login test"
    # Stored beside the session's own title (none), not indexed as a title.
    assert _stored(dsn) == {"login": (None, title)}
    assert _hit_titles(pg, "cookie") == {"login": title}
    browse = pg.search(SessionQueryRequest(query="", per_session=False), workspace="w")
    assert [m.title for m in browse.matches] == [title, title]
    info = pg.session_info(workspace="w", session_id="login")
    assert info is not None and info.title == title
    with psycopg.connect(dsn) as conn:
        sf = conn.execute(
            "SELECT count(*) FROM vocabulary WHERE workspace_id = 'w' AND sf <> 0"
        ).fetchone()
    assert sf == (0,)
    assert_statistics_exact(dsn, "w")


def test_a_title_the_agent_records_later_replaces_the_prompts(pg: PgSearch, dsn: str) -> None:
    pg.append(
        workspace="w",
        session_id="s",
        messages=[{"role": "user", "content": "why does the cron job run twice"}],
    )
    assert _titles(pg) == {"s": "why does the cron job run twice"}
    pg.append(
        workspace="w",
        session_id="s",
        messages=[{"role": "assistant", "content": "two timers", "title": "Cron runs twice"}],
    )
    assert _titles(pg) == {"s": "Cron runs twice"}
    assert _hit_titles(pg, "timers") == {"s": "Cron runs twice"}
    # The prompt's title stays stored: the session's own title is shown over it.
    assert _stored(dsn) == {"s": ("Cron runs twice", "why does the cron job run twice")}


def test_a_claude_code_summary_arriving_later_replaces_the_prompts_title(
    pg: PgSearch, tmp_path: Path
) -> None:
    lines = CLAUDE_LOG.read_text(encoding="utf-8").splitlines(keepends=True)
    assert '"type":"summary"' in lines[0]
    log = tmp_path / CLAUDE_LOG.name
    log.write_text("".join(lines[1:]), encoding="utf-8")
    pg.ingest_file(log, workspace="w")
    # The caveat Claude Code puts before the prompt is not the title.
    assert _titles(pg) == {CLAUDE_LOG.stem: CLAUDE_PROMPT}
    assert set(_hit_titles(pg, "rounding").values()) == {CLAUDE_PROMPT}
    with log.open("a", encoding="utf-8") as fh:
        fh.write(lines[0])  # the summary, naming a message stored in the first pass
    pg.ingest_file(log, workspace="w")
    assert _titles(pg) == {CLAUDE_LOG.stem: "Fix flaky invoice rounding test"}
    assert set(_hit_titles(pg, "rounding").values()) == {"Fix flaky invoice rounding test"}


def test_a_first_prompt_appended_to_an_untitled_session_titles_it(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    pg.append(
        workspace="w",
        session_id="s",
        messages=[
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "<system-reminder>be brief</system-reminder>"},
        ],
    )
    assert _titles(pg) == {"s": None}
    pg.append(
        workspace="w",
        session_id="s",
        messages=[
            {"role": "user", "content": "rename the billing cron job"},
            {"role": "user", "content": "and then deploy it"},
        ],
    )
    assert _titles(pg) == {"s": "rename the billing cron job"}
    pg.append(workspace="w", session_id="s", messages=[{"role": "user", "content": "later"}])
    assert _titles(pg) == {"s": "rename the billing cron job"}
    # A file that grows (`ingest --watch`, a resumed session): its first prompt comes
    # in a later pass.
    path = write_jsonl(tmp_path / "grown.jsonl", [{"role": "system", "content": "setup"}])
    pg.ingest_file(path, workspace="w")
    assert _titles(pg)["grown"] is None
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"role": "user", "content": "tune the vacuum settings"}) + "\n")
    assert not pg.ingest_file(path, workspace="w").rewritten
    assert _titles(pg)["grown"] == "tune the vacuum settings"
    assert _hit_titles(pg, "vacuum") == {"grown": "tune the vacuum settings"}
    assert_statistics_exact(dsn, "w")


def test_a_rewritten_file_is_titled_by_its_new_first_prompt_and_a_move_keeps_it(
    pg: PgSearch, tmp_path: Path
) -> None:
    old = tmp_path / "logs"
    old.mkdir()
    path = write_jsonl(old / "s.jsonl", [{"role": "user", "content": "first plan"}])
    pg.ingest_paths([old], workspace="w")
    assert _titles(pg) == {"s": "first plan"}
    write_jsonl(path, [{"role": "user", "content": "second plan, rewritten"}])
    assert pg.ingest_file(path, workspace="w").rewritten
    assert _titles(pg) == {"s": "second plan, rewritten"}
    new = tmp_path / "moved"
    old.rename(new)
    assert pg.ingest_paths([new], workspace="w").moved == 1
    assert _titles(pg) == {"s": "second plan, rewritten"}
    # Forgotten and asked back: titled again from its prompt.
    pg.forget(workspace="w", session_id="s")
    assert _titles(pg) == {}
    back = pg.ingest_paths([new], workspace="w", include_forgotten=True)
    assert back.restored == 1 and _titles(pg) == {"s": "second plan, rewritten"}


# --- sessions stored before titles were (migration 0009) -------------------------


def test_migration_titles_the_sessions_stored_before(dsn: str, tmp_path: Path) -> None:
    """Down to 0008 (the column goes) and up again: every session gets the title
    ingest gave it, across workspaces and batches (sessions written at 0008 too)."""
    lines = CLAUDE_LOG.read_text(encoding="utf-8").splitlines(keepends=True)
    (tmp_path / CLAUDE_LOG.name).write_text("".join(lines[1:]), encoding="utf-8")
    with PgSearch.connect(dsn) as pg:
        pg.ingest_file(tmp_path / CLAUDE_LOG.name, workspace="a")
        for ws in ("a", "b"):
            pg.append(
                workspace=ws,
                session_id="plain",
                messages=[{"role": "user", "content": f"# Plan\nship the **{ws}** release"}],
            )
            pg.append(
                workspace=ws,
                session_id="titled",
                messages=[{"role": "user", "content": "flaky builds", "title": "CI triage"}],
            )
            pg.append(
                workspace=ws,
                session_id="silent",
                messages=[{"role": "assistant", "content": "nothing asked"}],
            )
            pg.append(
                workspace=ws,
                session_id="noise-first",
                messages=[
                    {"role": "user", "content": "<system-reminder>x</system-reminder>"},
                    {"role": "user", "content": "<local-command-stdout>ok</local-command-stdout>"},
                    {"role": "user", "content": "then rename the job"},
                ],
            )
        made = {ws: _stored(dsn, ws) for ws in ("a", "b")}
    assert made["a"][CLAUDE_LOG.stem] == (None, CLAUDE_PROMPT)
    assert made["b"] == {
        "plain": (None, "Plan ship the b release"),
        "titled": ("CI triage", "flaky builds"),
        "silent": (None, None),
        "noise-first": (None, "then rename the job"),
    }
    assert migrate(dsn, "0008", downgrade=True) == "0008"
    n = 2500  # more than two batches of one workspace
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "INSERT INTO sessions (workspace_id, session_id, source, message_count, next_seq)"
            " SELECT 'bulk', 's' || lpad(i::text, 5, '0'), NULL, 2, 2"
            " FROM generate_series(1, %s) AS i",
            (n,),
        )
        conn.execute(
            "INSERT INTO messages (workspace_id, session_id, seq, kind, role, created_at,"
            " content, tsv, token_count)"
            " SELECT 'bulk', 's' || lpad(i::text, 5, '0'), k, "
            " CASE k WHEN 0 THEN 'system' ELSE 'user_text' END,"
            " CASE k WHEN 0 THEN 'system' ELSE 'user' END, now(),"
            " CASE k WHEN 0 THEN 'setup' ELSE '`prompt` number ' || i END, ''::tsvector, 0"
            " FROM generate_series(1, %s) AS i, generate_series(0, 1) AS k",
            (n,),
        )
    assert migrate(dsn) == HEAD_REVISION
    assert {ws: _stored(dsn, ws) for ws in ("a", "b")} == made
    bulk = _stored(dsn, "bulk")
    assert len(bulk) == n
    assert all(v == (None, f"prompt number {int(k[1:])}") for k, v in bulk.items())
    with PgSearch.connect(dsn) as pg:
        assert _titles(pg, "b")["plain"] == "Plan ship the b release"
