"""Agent logs against the real server: kinds, ids, times, policy, growth and rewrites."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from pgsearch import ConfigError, IngestError, PgSearch, SessionQueryRequest
from pgsearch.tools import run_tool, session_tools
from pgsearch.watch import Watcher
from tests.conftest import EXAMPLES
from tests.helpers import assert_statistics_exact

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CLAUDE = FIXTURES / "claude-code" / "3f7c1a52-8d4e-4b8a-9c1e-2a6d5f0b7e91.jsonl"
CODEX = (
    FIXTURES / "codex" / "rollout-2025-09-14T10-21-07-0199a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b.jsonl"
)
CLAUDE_SID = "3f7c1a52-8d4e-4b8a-9c1e-2a6d5f0b7e91"
CODEX_SID = "0199a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b"


def rows(dsn: str, workspace: str, session_id: str) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT seq, kind, role, tool_name, created_at, turn FROM messages "
            "WHERE workspace_id = %s AND session_id = %s ORDER BY seq",
            (workspace, session_id),
        ).fetchall()


def copy(src: Path, dst_dir: Path, lines: int | None = None) -> Path:
    dst = dst_dir / src.name
    if lines is None:
        shutil.copyfile(src, dst)
    else:
        text = src.read_text(encoding="utf-8").splitlines(keepends=True)
        dst.write_text("".join(text[:lines]), encoding="utf-8")
    return dst


def append_lines(src: Path, dst: Path, start: int, stop: int | None = None) -> None:
    text = src.read_text(encoding="utf-8").splitlines(keepends=True)
    with dst.open("a", encoding="utf-8") as fh:
        fh.write("".join(text[start:stop]))


def test_each_format_ingests_with_kinds_roles_ids_and_times(pg: PgSearch, dsn: str) -> None:
    report = pg.ingest_paths([CLAUDE, CODEX, *sorted(EXAMPLES.glob("*.jsonl"))], workspace="w")
    assert report.errors == []
    claude = rows(dsn, "w", CLAUDE_SID)
    # Consecutive seqs, one per block; the summary line titles, it is not an entry.
    assert [r[0] for r in claude] == list(range(19))
    assert [r[1] for r in claude].count("tool_error") == 2
    assert claude[1][1:4] == ("user_text", "user", None)
    assert claude[1][4] == datetime(2025, 7, 14, 9, 12, 5, 530000, tzinfo=UTC)
    assert claude[6][1:4] == ("tool_error", "tool", "Bash")
    assert max(r[5] for r in claude) == 4  # three prompts and the /cost command
    codex = rows(dsn, "w", CODEX_SID)
    assert len(codex) == 14
    assert codex[6][1:4] == ("tool_error", "tool", "shell")
    assert codex[2][4] == datetime(2025, 9, 14, 10, 21, 31, 4000, tzinfo=UTC)
    sessions = {s.session_id: s for s in pg.sessions(workspace="w")}
    assert sessions[CLAUDE_SID].title == "Fix flaky invoice rounding test"
    assert sessions[CLAUDE_SID].created_at == datetime(2025, 7, 14, 9, 12, 3, 114000, tzinfo=UTC)
    assert sessions[CLAUDE_SID].updated_at == datetime(2025, 7, 14, 9, 41, 10, 215000, tzinfo=UTC)
    assert sessions[CODEX_SID].message_count == 14
    assert "cron-refactor" in sessions  # pgsearch's own format, detected alongside
    assert_statistics_exact(dsn, "w")


def test_a_claude_code_tool_error_is_searchable_as_tool_error(pg: PgSearch) -> None:
    pg.ingest_file(CLAUDE, workspace="w")
    provider = pg.provider(workspace="w")
    result = provider.search(SessionQueryRequest(query="AssertionError", kinds=("tool_error",)))
    assert [(m.session_id, m.kind, m.tool_name) for m in result.matches] == [
        (CLAUDE_SID, "tool_error", "Bash")
    ]
    docker = provider.search(SessionQueryRequest(query="docker daemon socket"))
    assert docker.matches[0].kind == "tool_error"  # "permission denied" in the text


def test_tool_arguments_and_output_follow_the_indexing_policy(pg: PgSearch) -> None:
    pg.ingest_file(CLAUDE, workspace="w")
    provider = pg.provider(workspace="w")
    everything = ("tool_input", "tool_output", "tool_error", "user_text", "assistant_text")
    # "quantize" is only in the Edit call's arguments and the Edit result's output.
    assert provider.search(SessionQueryRequest(query="quantize", kinds=everything)).matches == ()
    assert (
        provider.search(
            SessionQueryRequest(query="DEFAULT_CURRENCY_PRECISION_FACTOR", kinds=everything)
        ).matches
        == ()
    )
    calls = provider.search(SessionQueryRequest(query="Edit", kinds=("tool_input",)))
    assert [(m.seq, m.tool_name) for m in calls.matches] == [(8, "Edit")]  # the name is indexed
    window = provider.around(CLAUDE_SID, 8, before=0, after=1)
    assert "quantize" in window.messages[0].content  # shown, like resuming the session
    assert "quantize" in window.messages[1].content


def test_a_grown_log_adds_only_new_lines_and_continues_the_seqs(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    path = copy(CLAUDE, tmp_path, lines=7)
    first = pg.ingest_file(path, workspace="w")
    assert first.messages == 5 and first.format == "claude-code"
    append_lines(CLAUDE, path, 7, 12)
    second = pg.ingest_file(path, workspace="w")
    assert (second.messages, second.skipped, second.rewritten) == (5, 0, False)
    append_lines(CLAUDE, path, 12)
    pg.ingest_file(path, workspace="w")
    again = pg.ingest_file(path, workspace="w")
    assert (again.messages, again.skipped, again.unchanged) == (0, 0, True)
    # Same rows as ingesting the whole file at once.
    (tmp_path / "whole").mkdir()
    pg.ingest_file(copy(CLAUDE, tmp_path / "whole"), workspace="w2")
    assert rows(dsn, "w", CLAUDE_SID) == rows(dsn, "w2", CLAUDE_SID)
    assert_statistics_exact(dsn, "w")


def test_a_line_still_being_written_waits_for_the_next_pass(pg: PgSearch, tmp_path: Path) -> None:
    path = copy(CLAUDE, tmp_path, lines=3)
    data = CLAUDE.read_bytes().split(b"\n")
    with path.open("ab") as fh:
        fh.write(data[3][:40])  # half a line, no newline yet
    assert pg.ingest_file(path, workspace="w").messages == 2
    with path.open("ab") as fh:
        fh.write(data[3][40:] + b"\n" + data[4] + b"\n")
    assert pg.ingest_file(path, workspace="w").messages == 1  # thinking dropped, text kept


def test_a_rewritten_log_is_re_read_with_exact_statistics(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    path = copy(CODEX, tmp_path)
    pg.ingest_file(path, workspace="w")
    lines = CODEX.read_text(encoding="utf-8").splitlines(keepends=True)
    # The same session, but an earlier line changed and the file is shorter.
    lines[4] = lines[4].replace("Please investigate.", "Please look into it.")
    path.write_text("".join(lines[:12]), encoding="utf-8")
    result = pg.ingest_file(path, workspace="w")
    assert result.rewritten
    assert result.messages == len(rows(dsn, "w", CODEX_SID)) == 8
    provider = pg.provider(workspace="w")
    assert provider.search(SessionQueryRequest(query="investigate")).matches == ()
    assert provider.search(SessionQueryRequest(query="look into")).matches[0].seq == 2
    assert_statistics_exact(dsn, "w")


def test_workspace_from_the_working_directory(pg: PgSearch, tmp_path: Path) -> None:
    report = pg.ingest_paths(
        [CLAUDE, CODEX, EXAMPLES / "cron-refactor.jsonl"],
        workspace="fallback",
        workspace_from_cwd=True,
    )
    assert report.errors == []
    assert [s.session_id for s in pg.sessions(workspace="/home/dev/projects/billing-api")] == [
        CLAUDE_SID
    ]
    assert [s.session_id for s in pg.sessions(workspace="/home/dev/projects/ledger")] == [CODEX_SID]
    assert [s.session_id for s in pg.sessions(workspace="fallback")] == ["cron-refactor"]
    # One file at a time gives the same placement, and re-ingesting adds nothing.
    again = pg.ingest_file(CODEX, workspace="fallback", workspace_from_cwd=True)
    assert (again.workspace, again.messages) == ("/home/dev/projects/ledger", 0)


def test_format_can_be_forced_and_a_mismatch_names_file_and_line(pg: PgSearch) -> None:
    with pytest.raises(IngestError) as info:
        pg.ingest_file(CLAUDE, workspace="w", format="openai")
    assert str(info.value).startswith(f"{CLAUDE}:1: ")
    assert pg.ingest_file(CODEX, workspace="w", format="codex").messages == 14
    with pytest.raises(ConfigError, match="unknown format"):
        pg.ingest_file(CODEX, workspace="w", format="jsonl")


def test_tools_over_a_real_provider(pg: PgSearch) -> None:
    pg.ingest_paths([CLAUDE, CODEX], workspace="w")
    [search, around, messages] = session_tools(pg.provider(workspace="w"))
    text = search('{"query": "migration order"}')
    assert f"session_id={CODEX_SID}" in text
    assert "Next: session_around" in text
    assert ">> seq=6 tool_error role=tool tool=Bash" in around(
        {"session_id": CLAUDE_SID, "seq": 6, "before": 1, "after": 1}
    )
    page = messages({"session_id": CODEX_SID, "limit": 5})
    assert f'Next page: session_messages {{"session_id": "{CODEX_SID}", "start_seq": 5}}' in page
    assert around({"session_id": "nope", "seq": 0}).startswith("error: no message 'nope'")
    pinned = pg.provider(workspace="w", session_id=CODEX_SID)
    refused = run_tool(pinned, "session_around", {"session_id": CLAUDE_SID, "seq": 0})
    assert refused.is_error and "bound to session" in refused.text


def test_factory_offers_no_tool_without_a_schema(empty_dsn: str) -> None:
    from pgsearch.db.store import Driver, DriverConfig
    from pgsearch.settings import Settings

    # A pool on a database nobody migrated: every call would fail.
    driver = Driver.open(empty_dsn, DriverConfig(pool_max=1), check_schema=False)
    pg = PgSearch(driver, Settings(dsn=empty_dsn))
    try:
        assert session_tools(pg.provider(workspace="w")) == []
    finally:
        pg.close()


def test_watcher_ingests_growth_and_rewrites_and_skips_unchanged_files(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    watched = tmp_path / "projects"
    (watched / "p").mkdir(parents=True)
    claude = copy(CLAUDE, watched / "p", lines=5)
    watcher = Watcher(
        lambda p: pg.ingest_file(p, workspace="w"), [watched, tmp_path / "missing"], interval=0.01
    )
    assert [r.messages for r in watcher.poll()] == [3]
    assert watcher.poll() == []  # nothing changed: no ingest at all
    append_lines(CLAUDE, claude, 5)
    codex = copy(CODEX, watched)
    assert sorted((Path(r.path).name, r.messages) for r in watcher.poll()) == [
        (CLAUDE.name, 16),
        (CODEX.name, 14),
    ]
    codex.write_text(CODEX.read_text(encoding="utf-8").replace("Thanks.", "Cheers."), "utf-8")
    [result] = watcher.poll()
    assert result.rewritten and result.messages == 14
    stats = watcher.run(max_polls=2)
    assert (stats.polls, stats.updates, stats.messages, stats.rewritten) == (5, 4, 47, 1)
    assert_statistics_exact(dsn, "w")
