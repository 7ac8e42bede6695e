"""Agent logs as they really are, against the real server (the shapes real agents write).

Every fixture is hand-written after the shapes of real files: Claude Code sessions
with slash commands, queued prompts, IDE context, sidechains and sub-agent files,
summaries naming sessions in other files; Gemini CLI logs, documents and saved
chats; OpenCode storage and exports.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import psycopg
import pytest

from pgsearch import IngestError, PgSearch, SessionQueryRequest
from pgsearch.watch import Watcher
from tests.helpers import assert_statistics_exact

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CLAUDE = FIXTURES / "claude-code"
ORIGINAL = CLAUDE / "3f7c1a52-8d4e-4b8a-9c1e-2a6d5f0b7e91.jsonl"
COMMANDS = CLAUDE / "commands" / "9b1d4e7a-2c3f-4a5b-8c6d-7e8f9a0b1c2d.jsonl"
SIDECHAINS = CLAUDE / "sidechains" / "5e0c3b7d-8a9f-4e1d-b2c3-4d5e6f708192.jsonl"
GEMINI = FIXTURES / "gemini"
GEMINI_LOG = next(GEMINI.rglob("session-2025-10-02T14-05-7c1e9b2a.jsonl"))
GEMINI_SID = "7c1e9b2a-4d5e-4f60-8a71-9b0c1d2e3f40"
OPENCODE = FIXTURES / "opencode"
OC_MAIN = "ses_5f0a3c21effeq8Rk2Lm9Np4Tv6Wx"
OC_CHILD = "ses_5f0a3b07dffe1Aa2Bb3Cc4Dd5Ee6"


def rows(dsn: str, ws: str, sid: str) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT seq, kind, role, tool_name, content, turn FROM messages "
            "WHERE workspace_id = %s AND session_id = %s ORDER BY seq",
            (ws, sid),
        ).fetchall()


def titles(pg: PgSearch, ws: str) -> dict[str, str | None]:
    return {s.session_id: s.title for s in pg.sessions(workspace=ws)}


def search(pg: PgSearch, query: str, kinds: tuple[str, ...] = ()) -> list[tuple[str, str, str]]:
    result = pg.provider(workspace="w").search(SessionQueryRequest(query=query, kinds=kinds))
    return [(m.session_id, m.kind, m.role) for m in result.matches]


# --- 1: the last line ----------------------------------------------------------------


def test_a_complete_last_line_without_newline_lands_and_a_torn_one_waits(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    path = tmp_path / COMMANDS.name
    shutil.copyfile(COMMANDS, path)
    first = pg.ingest_file(path, workspace="w")
    stored = rows(dsn, "w", COMMANDS.stem)
    assert str(stored[-1][4]).startswith("Committed as 4e1c2d0")  # the line without newline
    assert first.messages == len(stored)
    # The agent writes on: the newline of that line, then a torn line.
    later = {
        "type": "user",
        "sessionId": COMMANDS.stem,
        "uuid": "c0ffee00-0000-4000-8000-000000000099",
        "timestamp": "2025-09-03T08:04:00.000Z",
        "message": {"role": "user", "content": "Push it to the release branch too."},
    }
    line = json.dumps(later).encode()
    with path.open("ab") as fh:
        fh.write(b"\n" + line[:25])
    torn = pg.ingest_file(path, workspace="w")
    assert (torn.messages, torn.bad_lines, torn.error) == (0, 0, None)
    watcher = Watcher(lambda p: pg.ingest_file(p, workspace="w"), [tmp_path], interval=0.01)
    assert [r.messages for r in watcher.poll()] == [0]
    with path.open("ab") as fh:
        fh.write(line[25:])  # complete, still without a newline
    [done] = watcher.poll()
    assert (done.messages, done.rewritten) == (1, False)
    assert rows(dsn, "w", COMMANDS.stem)[-1][4] == "Push it to the release branch too."
    assert len(rows(dsn, "w", COMMANDS.stem)) == len(stored) + 1
    assert_statistics_exact(dsn, "w")


# --- 2: summaries naming sessions in other files ------------------------------------


def test_a_summary_titles_the_session_it_names_in_another_file_or_a_later_run(
    pg: PgSearch, dsn: str
) -> None:
    report = pg.ingest_paths([CLAUDE / "summaries"], workspace="w")
    assert report.errors == []
    names = titles(pg, "w")
    # The summary naming the session's later message wins over the earlier one.
    assert names["1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"] == "Nightly export time zone fix"
    # The file they sit in has no title of its own: it is named by its first prompt.
    assert (
        names["6a7b8c9d-0e1f-4a2b-8c3d-4e5f6a7b8c9d"] == "Now add a test for the export time zone."
    )
    late = "2b3c4d5e-6f70-4812-9a3b-4c5d6e7f8091"
    assert late not in names
    pg.ingest_paths([CLAUDE / "summaries-late"], workspace="w")
    assert titles(pg, "w")[late] == "Flaky cache invalidation test"
    hits = pg.provider(workspace="w").search(SessionQueryRequest(query="flaky invalidation"))
    assert hits.matches[0].session_id == late
    assert_statistics_exact(dsn, "w")


def test_summary_titles_do_not_depend_on_the_order_files_arrive(pg: PgSearch, dsn: str) -> None:
    files = sorted((CLAUDE / "summaries").glob("*.jsonl"))
    for path in reversed(files):  # the summaries first, the sessions they name later
        pg.ingest_file(path, workspace="w")
    pg.ingest_paths(sorted((CLAUDE / "summaries").glob("*.jsonl")), workspace="w2")
    assert titles(pg, "w") == titles(pg, "w2")
    assert titles(pg, "w")["1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"] == (
        "Nightly export time zone fix"
    )
    # A chosen title is never replaced by a summary.
    chosen = CLAUDE / "summaries" / "1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f.jsonl"
    assert pg.forget(workspace="w", session_id=chosen.stem) == 4
    assert_statistics_exact(dsn, "w")
    # Asked back, it comes back titled again from the stored line.
    pg.ingest_file(chosen, workspace="w", include_forgotten=True)
    assert titles(pg, "w")[chosen.stem] == "Nightly export time zone fix"
    assert_statistics_exact(dsn, "w")


# --- 3, 5, 6: what the person typed -------------------------------------------------


def test_commands_queued_prompts_and_ide_context_are_searched_as_what_they_are(
    pg: PgSearch, dsn: str
) -> None:
    pg.ingest_file(COMMANDS, workspace="w")
    sid = COMMANDS.stem
    assert search(pg, "model opus") == [(sid, "user_text", "user")]
    assert search(pg, "backoff settings webhooks.toml") == [(sid, "user_text", "user")]
    # IDE context and reminders are stored (windows show them) but are not the user's.
    assert search(pg, "opened IDE") == []
    assert search(pg, "TodoWrite") == []
    stored = {r[4]: r[1] for r in rows(dsn, "w", sid)}
    assert any(k.startswith("<ide_opened_file>") and v == "system" for k, v in stored.items())
    # rg found nothing (exit 1): not a tool error; the failing test run is one.
    errors = pg.provider(workspace="w").search(
        SessionQueryRequest(query="", kinds=("tool_error",), per_session=False)
    )
    [error] = errors.matches
    assert "test_retry_backoff" in error.excerpt
    assert titles(pg, "w") == {sid: "Webhook retry backoff"}  # from /rename
    # Four things the person typed: prompt, queued prompt, /model, !git, and the last.
    turns = [r[5] for r in rows(dsn, "w", sid)]
    assert max(turns) == 5
    assert_statistics_exact(dsn, "w")


# --- 4: sub-agent sessions ----------------------------------------------------------


def test_sub_agent_sessions_are_their_own_linked_to_their_parent_in_results(
    pg: PgSearch, dsn: str
) -> None:
    report = pg.ingest_paths([SIDECHAINS, CLAUDE / "subagents"], workspace="w")
    assert report.errors == []
    parent = SIDECHAINS.stem
    payments = f"{parent}/sidechain-5e0ca000-0000-4000-8000-000000000001"
    hits = pg.provider(workspace="w").search(SessionQueryRequest(query="refunds"))
    by_session = {m.session_id: m for m in hits.matches}
    assert by_session[payments].parent_session_id == parent
    assert by_session[payments].to_json()["parent_session_id"] == parent
    assert by_session[parent].parent_session_id is None
    sessions = {s.session_id: s for s in pg.sessions(workspace="w")}
    main_ui = "7a6b5c4d-3e2f-4a1b-9c8d-7e6f5a4b3c2d"
    assert sessions[f"{main_ui}/agent-a3f9c21"].parent_session_id == main_ui
    older = "0f1e2d3c-4b5a-4968-8776-655443322110"
    assert sessions[f"{older}/agent-de30ae5d"].parent_session_id == older
    assert f"{main_ui}/agent-acompact-5d1e2f" not in sessions  # compaction helper
    # The parent's seqs and turns hold only its own conversation: two prompts.
    mine = rows(dsn, "w", parent)
    assert [r[0] for r in mine] == list(range(len(mine)))
    assert max(r[5] for r in mine) == 2
    # Nobody typed into a sub-agent: its prompt is the parent agent's.
    users = pg.provider(workspace="w").search(
        SessionQueryRequest(query="", roles=("user",), per_session=False, limit=50)
    )
    assert all("/" not in m.session_id for m in users.matches)
    assert_statistics_exact(dsn, "w")


# --- 7: a wrong --format ------------------------------------------------------------


def test_a_wrong_format_is_an_error_and_records_nothing(pg: PgSearch, dsn: str) -> None:
    with pytest.raises(IngestError) as info:
        pg.ingest_file(ORIGINAL, workspace="w", format="codex")
    assert str(info.value) == f"{ORIGINAL}: no messages in format codex; it looks like claude-code"
    for fmt in ("gemini", "opencode"):
        with pytest.raises(IngestError, match=f"no messages in format {fmt}; it looks like"):
            pg.ingest_file(ORIGINAL, workspace="w", format=fmt)
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM ingested_files").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM sessions").fetchone() == (0,)
    assert pg.ingest_file(ORIGINAL, workspace="w").messages == 19  # nothing was poisoned


# --- 8: the per-line policy ---------------------------------------------------------


def test_a_torn_middle_line_and_a_bad_timestamp_skip_only_their_lines(
    pg: PgSearch, dsn: str
) -> None:
    result = pg.ingest_file(COMMANDS, workspace="w")
    assert result.error is None and result.bad_lines == 2
    assert [(w.path, w.line) for w in result.warnings] == [(str(COMMANDS), 8), (str(COMMANDS), 13)]
    assert "invalid JSON" in result.warnings[0].reason
    assert "'timestamp'" in result.warnings[1].reason
    assert result.messages == len(rows(dsn, "w", COMMANDS.stem)) == 15
    again = pg.ingest_file(COMMANDS, workspace="w")  # skipped lines are not read twice
    assert (again.unchanged, again.bad_lines) == (True, 0)


def test_pgsearch_format_still_rejects_a_file_with_one_bad_line(
    pg: PgSearch, tmp_path: Path
) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text('{"role": "user", "content": "fine"}\n{oops\n', encoding="utf-8")
    with pytest.raises(IngestError, match=r"mine\.jsonl:2: invalid JSON"):
        pg.ingest_file(path, workspace="w")


# --- 9: Gemini CLI and OpenCode -----------------------------------------------------


def test_gemini_cli_sessions_ingest_incrementally_with_exact_statistics(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    report = pg.ingest_paths([GEMINI], workspace="w")
    assert report.errors == [] and report.files == 4  # logs.json is not a session
    sessions = {s.session_id: s for s in pg.sessions(workspace="w")}
    assert sessions[GEMINI_SID].title == "Fix the docs build missing its Sphinx theme"
    assert sessions["a4b5c6d7-e8f9-4a0b-8c1d-2e3f4a5b6c7d"].parent_session_id == GEMINI_SID
    assert sessions["checkpoint-before%20refactor"].title == "before refactor"
    kinds = [r[1] for r in rows(dsn, "w", GEMINI_SID)]
    assert kinds.count("tool_error") == 2 and kinds.count("user_text") == 2
    [error] = (
        pg.provider(workspace="w")
        .search(SessionQueryRequest(query="requirements.txt not found", kinds=("tool_error",)))
        .matches
    )
    assert error.tool_name == "read_file"
    again = pg.ingest_paths([GEMINI], workspace="w")
    assert (again.unchanged, again.messages) == (4, 0)
    # A growing log: a new message is added; a message rewritten in place re-reads.
    log = tmp_path / GEMINI_LOG.name
    shutil.copyfile(GEMINI_LOG, log)
    pg.ingest_file(log, workspace="w2")
    before = rows(dsn, "w2", GEMINI_SID)
    new = {
        "id": "f1a2b3c4-0006-4a5b-9c6d-7e8f9a0b1c2d",
        "timestamp": "2025-10-02T14:06:40.000Z",
        "type": "gemini",
        "content": "Pinned sphinx_rtd_theme==3.0.1 in docs/requirements.txt.",
    }
    with log.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(new) + "\n")
    grown = pg.ingest_file(log, workspace="w2")
    assert (grown.messages, grown.rewritten) == (1, False)
    assert rows(dsn, "w2", GEMINI_SID)[:-1] == before
    with log.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({**new, "content": "Pinned sphinx_rtd_theme==3.0.2 instead."}) + "\n")
    rewritten = pg.ingest_file(log, workspace="w2")
    assert rewritten.rewritten
    assert rows(dsn, "w2", GEMINI_SID)[-1][4] == "Pinned sphinx_rtd_theme==3.0.2 instead."
    assert len(rows(dsn, "w2", GEMINI_SID)) == len(before) + 1
    assert_statistics_exact(dsn, "w")
    assert_statistics_exact(dsn, "w2")


def test_opencode_sessions_ingest_from_storage_and_exports(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    storage = tmp_path / "opencode"
    shutil.copytree(OPENCODE, storage)
    report = pg.ingest_paths([storage], workspace="w")
    assert report.errors == [] and report.files == 3  # two stored sessions and an export
    sessions = {s.session_id: s for s in pg.sessions(workspace="w")}
    assert sessions[OC_MAIN].title == "Speed up the stock report"
    assert sessions[OC_CHILD].parent_session_id == OC_MAIN
    main = rows(dsn, "w", OC_MAIN)
    assert [r[1] for r in main].count("tool_error") == 1  # the read that failed
    grep = [r for r in main if r[3] == "bash" and r[1] != "tool_input"]
    assert [r[1] for r in grep] == ["tool_output", "tool_output"]  # grep exit 1: a miss
    hits = pg.provider(workspace="w").search(SessionQueryRequest(query="GROUP BY faster"))
    assert hits.matches[0].session_id == OC_MAIN
    assert pg.ingest_paths([storage], workspace="w").unchanged == 3
    # OpenCode finishes the running edit in place: the session is read again.
    part = next((storage / "storage" / "part").rglob("prt_a1000000005ffe000000000001.json"))
    data = json.loads(part.read_text(encoding="utf-8"))
    data["state"] = {
        "status": "completed",
        "input": data["state"]["input"],
        "output": "Created migrations/0042_stock_index.sql",
        "title": "Add the index",
        "metadata": {},
        "time": {
            "start": data["state"]["time"]["start"],
            "end": data["state"]["time"]["start"] + 900,
        },
    }
    part.write_text(json.dumps(data), encoding="utf-8")
    report = pg.ingest_paths([storage], workspace="w")
    assert report.unchanged == 2 and report.messages == len(main) + 1
    assert any("0042_stock_index" in str(r[4]) for r in rows(dsn, "w", OC_MAIN))
    assert_statistics_exact(dsn, "w")


# --- 10, 11: workspaces and the report ----------------------------------------------


def test_a_worktree_session_goes_to_its_project_and_no_cwd_is_reported(
    pg: PgSearch, tmp_path: Path
) -> None:
    tree = "/home/dev/projects/shop/.claude/worktrees/agent-5c2e1d"
    path = tmp_path / COMMANDS.name
    path.write_text(
        COMMANDS.read_text(encoding="utf-8").replace("/home/dev/projects/shop", tree),
        encoding="utf-8",
    )
    result = pg.ingest_file(path, workspace="me", workspace_from_cwd=True)
    assert (result.workspace, result.no_cwd) == ("/home/dev/projects/shop", False)
    report = pg.ingest_paths([GEMINI_LOG], workspace="me", workspace_from_cwd=True)
    assert report.no_cwd == {"me": 1}
    assert report.summary().endswith(
        "; 1 file named no working directory and went to workspace 'me'"
    )


def test_an_unchanged_reingest_reports_unchanged_files_not_skipped_lines(pg: PgSearch) -> None:
    first = pg.ingest_paths([CLAUDE / "summaries", SIDECHAINS], workspace="w")
    assert (first.files, first.unchanged, first.skipped) == (3, 0, 0)
    again = pg.ingest_paths([CLAUDE / "summaries", SIDECHAINS], workspace="w")
    assert (again.files, again.unchanged, again.messages, again.skipped) == (3, 3, 0, 0)
    assert again.summary() == (
        "3 files (3 unchanged), 0 sessions, 0 messages added, 0 already stored, "
        "0 bad lines skipped, 0 errors"
    )


def test_a_file_read_by_an_older_mapping_is_read_again(pg: PgSearch, dsn: str) -> None:
    pg.ingest_file(ORIGINAL, workspace="w")
    before = rows(dsn, "w", ORIGINAL.stem)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE ingested_files SET parser = NULL")  # as migration 0004 leaves it
    result = pg.ingest_file(ORIGINAL, workspace="w")
    assert result.rewritten and rows(dsn, "w", ORIGINAL.stem) == before
    assert pg.ingest_file(ORIGINAL, workspace="w").unchanged
    assert_statistics_exact(dsn, "w")
