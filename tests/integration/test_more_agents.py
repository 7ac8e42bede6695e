"""The agents added after the first four against the real server: ingest, search,
around, titles, sub-agents, idempotent re-ingest and growth under ``--watch``."""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from pgsearch import PgSearch, SessionQueryRequest
from pgsearch.watch import Watcher
from tests.agent_cases import CASES, DOCUMENT_FORMATS, Case
from tests.helpers import assert_statistics_exact


def search(pg: PgSearch, query: str, **kw: object) -> list[tuple[str, str, str | None]]:
    result = pg.provider(workspace="w").search(SessionQueryRequest(query=query, **kw))  # type: ignore[arg-type]
    return [(m.session_id, m.kind, m.tool_name) for m in result.matches]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_ingest_search_around_for_each_agent(case: Case, pg: PgSearch, dsn: str) -> None:
    result = pg.ingest_file(case.path, workspace="w")
    assert (result.error, result.format) == (None, case.format)
    assert result.messages > 0
    hits = pg.provider(workspace="w").search(SessionQueryRequest(query=case.user_word))
    top = hits.matches[0]
    assert (top.session_id, top.kind, top.role) == (case.session_at(case.path), "user_text", "user")
    window = pg.provider(workspace="w").around(top.session_id, top.seq, before=2, after=2)
    assert any(m.seq == top.seq for m in window.messages)
    assert (
        case.user_word
        in window.messages[[m.seq for m in window.messages].index(top.seq)].content.lower()
    )
    errors = search(pg, case.error_words, kinds=("tool_error",))
    assert errors and errors[0][1:] == ("tool_error", case.error_tool)
    sessions = {s.session_id: s for s in pg.sessions(workspace="w")}
    if case.title is not None:
        assert sessions[case.session_id].title == case.title
    if case.child_session is not None:
        assert sessions[case.child_session].parent_session_id == case.session_id
        [child_hit] = [h for h in search(pg, case.child_word or "") if h[0] == case.child_session]
        assert child_hit[1] != "user_text"
    again = pg.ingest_file(case.path, workspace="w")  # its torn last line still waits
    assert (again.messages, again.skipped, again.rewritten, again.bad_lines) == (0, 0, False, 0)
    assert_statistics_exact(dsn, "w")


@pytest.mark.parametrize(
    "case", [c for c in CASES if c.format not in DOCUMENT_FORMATS], ids=lambda c: c.id
)
def test_a_log_growing_under_watch_lands_once(
    case: Case, pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    data = case.path.read_bytes()
    if not data.endswith(b"\n") and data.rfind(b"\n") > 0:
        data = data[: data.rfind(b"\n") + 1]
    target = tmp_path / case.path.relative_to(case.path.parents[1])
    target.parent.mkdir(parents=True)
    lines = data.splitlines(keepends=True)
    half = len(lines) // 2
    target.write_bytes(b"".join(lines[:half]))
    watcher = Watcher(lambda p: pg.ingest_file(p, workspace="w"), [tmp_path], interval=0.01)
    first = sum(r.messages for r in watcher.poll())
    assert watcher.poll() == []
    with target.open("ab") as fh:
        fh.write(b"".join(lines[half:]))
    second = sum(r.messages for r in watcher.poll())
    whole = tmp_path / "whole"
    whole.mkdir()
    shutil.copyfile(target, whole / target.name)
    alone = pg.ingest_file(whole / target.name, workspace="w2")
    assert first + second == alone.messages
    assert_statistics_exact(dsn, "w")


def test_unknown_event_types_are_counted_in_the_summary(pg: PgSearch) -> None:
    [case] = [c for c in CASES if c.id == "codex-drift"]
    report = pg.ingest_paths([case.path], workspace="w")
    assert report.errors == [] and report.unknown_events == 2
    assert "; 2 events of unknown types skipped" in report.summary()


#: The first four agents' fixtures, with a word each and what it must be found as.
FIRST_FOUR = (
    ("claude-code", "3f7c1a52-8d4e-4b8a-9c1e-2a6d5f0b7e91", "AssertionError", "tool_error"),
    ("codex", "0199a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b", "migration order", None),
    ("gemini", "7c1e9b2a-4d5e-4f60-8a71-9b0c1d2e3f40", "Sphinx theme", None),
    ("opencode", "ses_5f0a3c21effeq8Rk2Lm9Np4Tv6Wx", "GROUP BY faster", None),
)


def test_a_directory_mixing_every_agent_finds_a_word_from_each(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    from tests.agent_cases import FIXTURES

    mixed = tmp_path / "logs"
    roots = {c.root for c in CASES} | {FIXTURES / n for n in ("claude-code", "codex", "gemini")}
    for root in sorted(roots | {FIXTURES / "opencode"}):
        shutil.copytree(root, mixed / root.name, dirs_exist_ok=True)
    report = pg.ingest_paths([mixed], workspace="w")
    assert report.errors == [], report.errors
    sessions = {s.session_id: s for s in pg.sessions(workspace="w")}
    provider = pg.provider(workspace="w")
    for case in CASES:
        sid = case.session_at(mixed / case.path.relative_to(case.base))
        top = provider.search(SessionQueryRequest(query=case.user_word, session_id=sid)).matches[0]
        assert (top.kind, top.role) == ("user_text", "user"), case.id
        assert case.user_word in top.excerpt.lower(), case.id
        error = provider.search(
            SessionQueryRequest(query=case.error_words, kinds=("tool_error",))
        ).matches[0]
        assert error.tool_name == case.error_tool, case.id
        if case.title is not None:
            assert sessions[case.session_id].title == case.title, case.id
    for name, sid, word, kind in FIRST_FOUR:
        hits = provider.search(SessionQueryRequest(query=word, session_id=sid)).matches
        assert hits, name
        if kind is not None:
            assert hits[0].kind == kind, name
    again = pg.ingest_paths([mixed], workspace="w")
    assert (again.messages, again.errors) == (0, [])
    assert_statistics_exact(dsn, "w")


def test_a_task_rewritten_under_watch_is_read_again_whole(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    [case] = [c for c in CASES if c.format == "cline"]
    task = tmp_path / "saoudrizwan.claude-dev" / "tasks" / case.session_id
    shutil.copytree(case.path.parent, task)
    watcher = Watcher(lambda p: pg.ingest_file(p, workspace="w"), [tmp_path], interval=0.01)
    [first] = watcher.poll()
    assert first.error is None and first.messages > 0
    assert watcher.poll() == []
    messages = json.loads((task / "ui_messages.json").read_text(encoding="utf-8"))
    messages.append(
        {
            "ts": messages[-1]["ts"] + 5000,
            "type": "say",
            "say": "user_feedback",
            "text": "Also widen the footer for long addresses.",
        }
    )
    (task / "ui_messages.json").write_text(json.dumps(messages), encoding="utf-8")
    [second] = watcher.poll()
    assert second.rewritten and second.messages == first.messages + 1
    hits = search(pg, "widen footer addresses")
    assert hits and hits[0][:2] == (case.session_id, "user_text")
    assert_statistics_exact(dsn, "w")


def _crush_copy(tmp_path: Path, journal: str) -> tuple[Path, str]:
    [case] = [c for c in CASES if c.format == "crush"]
    store = tmp_path / "ferryman" / ".crush" / "crush.db"
    store.parent.mkdir(parents=True)
    shutil.copyfile(case.path, store)
    with sqlite3.connect(store) as conn:
        conn.execute(f"PRAGMA journal_mode = {journal}")
    return store, case.session_id


def _add_message(conn: sqlite3.Connection, sid: str, text: str) -> None:
    parts = json.dumps([{"type": "text", "data": {"text": text}}])
    conn.execute(
        "INSERT INTO messages (id, session_id, role, parts, created_at, updated_at)"
        " VALUES (?, ?, 'user', ?, 1768400100, 1768400100)",
        (f"m-{text[:8]}", sid, parts),
    )


def test_a_store_written_while_it_is_ingested_is_read_consistently_and_again(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    store, sid = _crush_copy(tmp_path, "wal")
    writer = sqlite3.connect(store, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        _add_message(writer, sid, "Also check the winter timetable for Orkney.")
        # The agent holds a write transaction: ingest neither waits for it nor sees it.
        first = pg.ingest_file(store, workspace="w")
        assert first.error is None and first.messages > 0
        assert search(pg, "Orkney") == []
        writer.execute("COMMIT")
        watcher = Watcher(lambda p: pg.ingest_file(p, workspace="w"), [tmp_path], interval=0.01)
        [seen] = watcher.poll()  # the commit changed the WAL file: the store is read again
        assert seen.rewritten and seen.messages == first.messages + 1
        assert search(pg, "Orkney")[0][:2] == (sid, "user_text")
        assert watcher.poll() == []
        again = pg.ingest_file(store, workspace="w")
        assert (again.unchanged, again.messages) == (True, 0)
    finally:
        writer.close()
    assert_statistics_exact(dsn, "w")


def test_a_store_locked_by_its_agent_is_waited_for(pg: PgSearch, tmp_path: Path) -> None:
    store, sid = _crush_copy(tmp_path, "delete")
    writer = sqlite3.connect(store, isolation_level=None, check_same_thread=False)
    writer.execute("BEGIN EXCLUSIVE")  # a rollback-journal writer shuts readers out
    _add_message(writer, sid, "Ship the overnight fix today.")
    release = threading.Timer(1.5, lambda: writer.execute("COMMIT"))
    release.start()
    try:
        result = pg.ingest_file(store, workspace="w")
    finally:
        release.join()
        writer.close()
    assert result.error is None
    assert search(pg, "overnight fix today")[0][:2] == (sid, "user_text")
