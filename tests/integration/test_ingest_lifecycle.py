"""A stored session's life after its first ingest: appends naming earlier calls,
forgetting, rewrites, moves and the root a file is read under."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from pgsearch import IngestError, PgSearch, SessionQueryRequest
from tests.conftest import Databases
from tests.helpers import assert_statistics_exact, write_jsonl


def _tool_names(dsn: str, ws: str, session_id: str) -> list[tuple[int, str, str | None]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT seq, kind, tool_name FROM messages WHERE workspace_id = %s "
            "AND session_id = %s ORDER BY seq",
            (ws, session_id),
        ).fetchall()
    return [(int(r[0]), str(r[1]), r[2]) for r in rows]


def _call(call_id: str, name: str) -> dict[str, object]:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": call_id, "function": {"name": name, "arguments": "{}"}}],
    }


# --- appends ------------------------------------------------------------------------


def test_appended_tool_results_take_the_name_of_their_call(pg: PgSearch, dsn: str) -> None:
    """In the same append, or in a later one, as file ingest names them."""
    pg.append(
        workspace="w",
        session_id="s",
        messages=[
            {"role": "user", "content": "find the flaky test"},
            _call("call-1", "ripgrep"),
            {"role": "tool", "tool_call_id": "call-1", "content": "Error: no such path"},
        ],
    )
    pg.append(
        workspace="w",
        session_id="s",
        messages=[{"role": "tool", "tool_call_id": "call-1", "content": "Error: still missing"}],
    )
    pg.append(
        workspace="w",
        session_id="s",
        messages=[
            _call("call-2", "read_file"),
            {"role": "tool", "tool_call_id": "call-2", "name": "chosen", "content": "ok"},
            {"role": "tool", "tool_call_id": "unknown", "content": "orphan"},
        ],
    )
    assert _tool_names(dsn, "w", "s") == [
        (0, "user_text", None),
        (1, "tool_input", "ripgrep"),
        (2, "tool_error", "ripgrep"),
        (3, "tool_error", "ripgrep"),
        (4, "tool_input", "read_file"),
        (5, "tool_output", "chosen"),  # a name given with the result stays
        (6, "tool_output", None),
    ]
    hits = pg.search(
        SessionQueryRequest(query="missing", tool_name="ripgrep", kinds=("tool_error",)),
        workspace="w",
    )
    assert [(m.session_id, m.seq) for m in hits.matches] == [("s", 3)]
    assert_statistics_exact(dsn, "w")


def test_a_grown_file_names_results_of_calls_read_in_an_earlier_pass(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", [{"role": "user", "content": "go"}, _call("c9", "ls")])
    pg.ingest_file(path, workspace="w")
    with path.open("a") as fh:
        fh.write('{"role": "tool", "tool_call_id": "c9", "content": "a.txt"}\n')
    pg.ingest_file(path, workspace="w")
    assert _tool_names(dsn, "w", "s")[-1] == (2, "tool_output", "ls")


# --- forgetting ---------------------------------------------------------------------


def _sessions(pg: PgSearch, ws: str = "w") -> dict[str, int]:
    return {s.session_id: s.message_count for s in pg.sessions(workspace=ws)}


def test_a_forgotten_session_stays_forgotten_until_asked_back(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    """Re-ingesting the file, unchanged or grown, in a run or alone, does not bring a
    forgotten session back; `include_forgotten` does, whole."""
    regret = write_jsonl(
        tmp_path / "regret.jsonl",
        [
            {"role": "user", "content": "my password is zebracorn"},
            {"role": "assistant", "content": "ok"},
        ],
    )
    keep = write_jsonl(tmp_path / "keep.jsonl", [{"role": "user", "content": "ordinary words"}])
    pg.ingest_paths([tmp_path], workspace="w")
    assert pg.forget(workspace="w", session_id="regret") == 2
    again = pg.ingest_paths([tmp_path], workspace="w")
    assert (again.messages, _sessions(pg)) == (0, {"keep": 1})
    with regret.open("a") as fh:
        fh.write('{"role": "user", "content": "one more zebracorn"}\n')
    grown = pg.ingest_file(regret, workspace="w")
    assert (grown.messages, grown.forgotten, grown.sessions) == (0, 1, set())
    report = pg.ingest_paths([tmp_path], workspace="w")
    assert report.messages == 0 and _sessions(pg) == {"keep": 1}
    assert not pg.search(SessionQueryRequest(query="zebracorn"), workspace="w").matches
    assert_statistics_exact(dsn, "w")

    back = pg.ingest_paths([tmp_path], workspace="w", include_forgotten=True)
    assert (back.messages, back.restored) == (3, 1)
    assert _sessions(pg) == {"keep": 1, "regret": 3}
    assert "1 forgotten sessions brought back" in back.summary()
    assert_statistics_exact(dsn, "w")
    # Forgotten again: it stays forgotten again.
    pg.forget(workspace="w", session_id="regret")
    assert pg.ingest_file(regret, workspace="w").messages == 0
    assert _sessions(pg) == {"keep": 1}
    assert keep.exists()


def test_a_forgotten_sub_agent_stays_forgotten_while_its_parent_grows(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    """One file, several sessions: forgetting one keeps the others growing."""
    path = write_jsonl(
        tmp_path / "two.jsonl",
        [
            {"role": "user", "content": "first", "session_id": "a"},
            {"role": "user", "content": "second", "session_id": "b"},
        ],
    )
    pg.ingest_file(path, workspace="w")
    pg.forget(workspace="w", session_id="b")
    with path.open("a") as fh:
        fh.write('{"role": "user", "content": "third", "session_id": "a"}\n')
        fh.write('{"role": "user", "content": "fourth", "session_id": "b"}\n')
    result = pg.ingest_file(path, workspace="w")
    assert (result.messages, result.forgotten) == (1, 1)
    assert _sessions(pg) == {"a": 2}
    assert_statistics_exact(dsn, "w")


def test_forgetting_a_workspace_lets_its_files_be_ingested_afresh(
    pg: PgSearch, tmp_path: Path
) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", [{"role": "user", "content": "hello"}])
    pg.ingest_file(path, workspace="w")
    pg.forget(workspace="w", session_id="s")
    pg.forget(workspace="w")
    assert pg.ingest_file(path, workspace="w").messages == 1


# --- rewrites -----------------------------------------------------------------------


def _contents(dsn: str, ws: str = "w") -> list[tuple[str, int, str]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT session_id, seq, content FROM messages WHERE workspace_id = %s "
            "ORDER BY session_id, seq",
            (ws,),
        ).fetchall()
    return [(str(r[0]), int(r[1]), str(r[2])) for r in rows]


def test_a_rewritten_plain_file_replaces_its_sessions_with_its_new_content(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    """Shorter, same size or longer, with its sessions renamed: what is stored is the
    file as it is now, and a secret the user removed is gone from text and index."""
    path = tmp_path / "notes.jsonl"
    write_jsonl(
        path,
        [
            {"role": "user", "content": "deploy with token quokkasecret please"},
            {"role": "assistant", "content": "deployed"},
            {"role": "user", "content": "thanks"},
        ],
    )
    pg.ingest_file(path, workspace="w")
    # The user removes the line they regret (the file shrinks).
    write_jsonl(
        path, [{"role": "user", "content": "deploy please"}, {"role": "assistant", "content": "ok"}]
    )
    shrunk = pg.ingest_file(path, workspace="w")
    assert shrunk.rewritten and shrunk.messages == 2
    assert _contents(dsn) == [("notes", 0, "deploy please"), ("notes", 1, "ok")]
    assert not pg.search(SessionQueryRequest(query="quokkasecret"), workspace="w").matches
    # Same size, one byte changed.
    write_jsonl(
        path, [{"role": "user", "content": "deploy pleaze"}, {"role": "assistant", "content": "ok"}]
    )
    assert pg.ingest_file(path, workspace="w").rewritten
    assert _contents(dsn)[0] == ("notes", 0, "deploy pleaze")
    # Longer, and its lines now name another session.
    write_jsonl(
        path,
        [
            {"role": "user", "content": "first", "session_id": "renamed"},
            {"role": "user", "content": "second", "session_id": "renamed"},
            {"role": "user", "content": "third", "session_id": "renamed"},
        ],
    )
    grown = pg.ingest_file(path, workspace="w")
    assert grown.rewritten and grown.messages == 3
    assert [r[0] for r in _contents(dsn)] == ["renamed"] * 3
    assert {s.session_id for s in pg.sessions(workspace="w")} == {"renamed"}
    assert_statistics_exact(dsn, "w")


def test_a_rewrite_that_does_not_parse_is_an_error_and_keeps_nothing_new(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", [{"role": "user", "content": "old text"}])
    pg.ingest_file(path, workspace="w")
    path.write_text('{"role": "user", "content": "new text"}\n{broken\n', encoding="utf-8")
    report = pg.ingest_paths([path], workspace="w")
    assert [e.line for e in report.errors] == [2]
    assert _contents(dsn) == [("s", 0, "old text")]  # said so, changed nothing
    path.write_text('{"role": "user", "content": "new text"}\n', encoding="utf-8")
    assert pg.ingest_paths([path], workspace="w").messages == 1
    assert _contents(dsn) == [("s", 0, "new text")]


# --- moves --------------------------------------------------------------------------

CLAUDE_LOG = (
    Path(__file__).resolve().parent.parent
    / "fixtures"
    / "claude-code"
    / "3f7c1a52-8d4e-4b8a-9c1e-2a6d5f0b7e91.jsonl"
)


def test_a_moved_log_directory_is_recognised_and_grows_at_its_new_path(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    """Agent logs and plain files alike: found by content, re-homed, appends land."""
    old = tmp_path / "projects"
    old.mkdir()
    lines = CLAUDE_LOG.read_text(encoding="utf-8").splitlines(keepends=True)
    (old / CLAUDE_LOG.name).write_text("".join(lines[:6]), encoding="utf-8")
    write_jsonl(old / "plain.jsonl", [{"role": "user", "content": "plain words"}])
    first = pg.ingest_paths([old], workspace="w")
    assert not first.errors
    before = _sessions(pg)
    new = tmp_path / "renamed"
    old.rename(new)
    with (new / CLAUDE_LOG.name).open("a", encoding="utf-8") as fh:
        fh.write("".join(lines[6:10]))
    report = pg.ingest_paths([new], workspace="w")
    assert report.errors == [] and report.moved == 2
    assert "2 moved files recognised at their new path" in report.summary()
    after = _sessions(pg)
    assert after.keys() == before.keys()
    assert after[CLAUDE_LOG.stem] > before[CLAUDE_LOG.stem] and after["plain"] == 1
    with psycopg.connect(dsn) as conn:
        sources = {r[0] for r in conn.execute("SELECT source FROM sessions").fetchall()}
        paths = {r[0] for r in conn.execute("SELECT path FROM ingested_files").fetchall()}
    assert sources == paths == {str(new / CLAUDE_LOG.name), str(new / "plain.jsonl")}
    assert pg.ingest_paths([new], workspace="w").unchanged == 2
    assert_statistics_exact(dsn, "w")


def test_a_copy_is_not_a_move(pg: PgSearch, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    src = write_jsonl(tmp_path / "a" / "s.jsonl", [{"role": "user", "content": "x"}])
    pg.ingest_file(src, workspace="w")
    copy = tmp_path / "b" / "s.jsonl"
    copy.parent.mkdir()
    copy.write_bytes(src.read_bytes())
    report = pg.ingest_paths([copy], workspace="w")
    assert report.moved == 0 and len(report.errors) == 1
    assert "already holds messages from" in str(report.errors[0])


def test_relocate_rehomes_a_tree_explicitly(pg: PgSearch, dsn: str, tmp_path: Path) -> None:
    old = tmp_path / "logs"
    (old / "x").mkdir(parents=True)
    write_jsonl(old / "x" / "s.jsonl", [{"role": "user", "content": "one"}])
    pg.ingest_paths([old], workspace="w")
    pg.forget(workspace="w", session_id="s")
    new = tmp_path / "moved"
    old.rename(new)
    # Rewritten at the same time: not recognisable by content, but said explicitly.
    write_jsonl(new / "x" / "s.jsonl", [{"role": "user", "content": "changed"}])
    assert pg.relocate(workspace="w", old=old, new=new) == 1
    report = pg.ingest_paths([new], workspace="w")
    assert report.forgotten == 1 and _sessions(pg) == {}  # still forgotten after the move
    back = pg.ingest_paths([new], workspace="w", include_forgotten=True)
    assert back.restored == 1 and _sessions(pg) == {"s": 1}
    with pytest.raises(IngestError, match="already recorded there"):
        pg.relocate(workspace="w", old=tmp_path / "elsewhere", new=new)
    assert_statistics_exact(dsn, "w")


# --- --root at the moment of reading ----------------------------------------------


def test_a_file_swapped_for_a_symlink_after_the_root_check_is_not_read(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    """The file read must be the file confined: a symlink put in its place (or a
    directory on the way swapped for one) between the check and the read is
    refused, and nothing of the outside file is stored."""
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    outside = write_jsonl(tmp_path / "outside.jsonl", [{"role": "user", "content": "exfil"}])
    inside = write_jsonl(root / "sub" / "s.jsonl", [{"role": "user", "content": "fine"}])
    ingestor = pg._ingestor
    job = ingestor.locate(inside, workspace="w", roots=[root])
    assert job.pin is not None
    inside.unlink()
    inside.symlink_to(outside)  # swapped after the check
    with pytest.raises(IngestError, match="symlink now"):
        pg._driver.run(ingestor.prepared_file(job, None))
    # A directory on the way swapped for a symlink to a directory outside.
    inside.unlink()
    inside.write_text('{"role": "user", "content": "fine"}\n', encoding="utf-8")
    job = ingestor.locate(inside, workspace="w", roots=[root])
    (root / "sub").rename(root / "old")
    (tmp_path / "evil").mkdir()
    (tmp_path / "evil" / "s.jsonl").write_bytes(outside.read_bytes())
    (root / "sub").symlink_to(tmp_path / "evil")
    with pytest.raises(IngestError, match="changed after it was confined"):
        pg._driver.run(ingestor.prepared_file(job, None))
    assert _contents(dsn) == []


def test_a_hard_link_into_the_root_is_refused_under_root(pg: PgSearch, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    outside = write_jsonl(tmp_path / "outside.jsonl", [{"role": "user", "content": "exfil"}])
    (root / "linked.jsonl").hardlink_to(outside)
    report = pg.ingest_paths([root], workspace="w", roots=[root])
    assert len(report.errors) == 1 and "2 hard links" in str(report.errors[0])
    with pytest.raises(IngestError, match="hard links"):
        pg.ingest_file(root / "linked.jsonl", workspace="w", roots=[root])
    assert pg.sessions(workspace="w") == []
    # Without --root a hard link is an ordinary file.
    assert pg.ingest_file(root / "linked.jsonl", workspace="w").messages == 1


# --- large files: streamed, checked at their windows --------------------------------

CHUNK = 64 * 1024


def _big_plain(path: Path, messages: int, *, blanks: int = 0) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(messages):
            role = "user" if i % 3 == 0 else "assistant"
            fh.write(f'{{"role": "{role}", "content": "message {i} about walrus{i % 97}"}}\n')
            if i == messages // 2:
                fh.write("\n" * blanks)
    return path


def _read_bytes() -> int:
    with open("/proc/self/io", encoding="ascii") as fh:
        return int(next(line for line in fh if line.startswith("rchar:")).split()[1])


def test_a_large_plain_file_is_streamed_with_the_same_result_as_a_whole_read(
    dsn: str, tmp_path: Path, databases: Databases
) -> None:
    """Chunked within its one transaction: the stored rows, turns and statistics are
    those of reading it whole, and blank lines only count."""
    from pgsearch import Settings

    path = _big_plain(tmp_path / "big.jsonl", 6000, blanks=200_000)
    assert path.stat().st_size > 5 * CHUNK
    streamed = Settings.from_env({}, dsn=dsn).with_(ingest_chunk_bytes=CHUNK)
    with PgSearch.connect(dsn, settings=streamed) as pg:
        result = pg.ingest_file(path, workspace="w")
        assert (result.messages, result.sessions) == (6000, {"big"})
        again = pg.ingest_file(path, workspace="w")
        assert again.unchanged
    other = databases.create(template=None)
    whole_dsn = databases.dsn(other)
    from pgsearch.db.migrate import migrate

    migrate(whole_dsn)
    with PgSearch.connect(whole_dsn) as pg:
        assert pg.ingest_file(path, workspace="w").messages == 6000
    query = "SELECT session_id, seq, kind, turn, content FROM messages ORDER BY 1, 2"
    with psycopg.connect(dsn) as a, psycopg.connect(whole_dsn) as b:
        assert a.execute(query).fetchall() == b.execute(query).fetchall()
        assert a.execute("SELECT max(seq) FROM messages").fetchone() == (6000 + 200_000 - 1,)
    assert_statistics_exact(dsn, "w")
    databases.drop(other)


def test_a_grown_large_file_costs_its_new_bytes(dsn: str, tmp_path: Path) -> None:
    from pgsearch import Settings

    path = _big_plain(tmp_path / "big.jsonl", 40_000)
    size = path.stat().st_size
    assert size > 2 * 1024 * 1024
    settings = Settings.from_env({}, dsn=dsn).with_(ingest_chunk_bytes=CHUNK)
    with PgSearch.connect(dsn, settings=settings) as pg:
        pg.ingest_file(path, workspace="w")
        with path.open("a", encoding="utf-8") as fh:
            fh.write('{"role": "user", "content": "the very last narwhal"}\n')
        before = _read_bytes()
        grown = pg.ingest_file(path, workspace="w")
        cost = _read_bytes() - before
        assert grown.messages == 1 and not grown.rewritten
        # The head (format detection) and the two recorded windows, not the file.
        assert cost < size / 4, cost
        hits = pg.search(SessionQueryRequest(query="narwhal"), workspace="w")
        assert [m.seq for m in hits.matches] == [40_000]
    assert_statistics_exact(dsn, "w")


def _claude_line(i: int, sid: str = "big-claude") -> str:
    import json

    role = "user" if i % 2 == 0 else "assistant"
    return (
        json.dumps(
            {
                "type": role,
                "sessionId": sid,
                "uuid": f"u-{i}",
                "parentUuid": f"u-{i - 1}" if i else None,
                "timestamp": f"2026-01-01T00:{i // 3600 % 60:02d}:{i // 60 % 60:02d}Z",
                "message": {"role": role, "content": f"line {i} of the capybara log"},
            }
        )
        + "\n"
    )


def test_a_grown_large_agent_log_reads_its_new_part_and_a_window_before_it(
    dsn: str, tmp_path: Path
) -> None:
    from pgsearch import Settings

    path = tmp_path / "big-claude.jsonl"
    path.write_text("".join(_claude_line(i) for i in range(6000)), encoding="utf-8")
    size = path.stat().st_size
    assert size > 8 * CHUNK
    settings = Settings.from_env({}, dsn=dsn).with_(ingest_chunk_bytes=CHUNK)
    with PgSearch.connect(dsn, settings=settings) as pg:
        first = pg.ingest_file(path, workspace="w")
        assert first.format == "claude-code" and first.messages == 6000
        with path.open("a", encoding="utf-8") as fh:
            fh.write(_claude_line(6000) + _claude_line(6001))
        before = _read_bytes()
        grown = pg.ingest_file(path, workspace="w")
        cost = _read_bytes() - before
        assert (grown.messages, grown.rewritten) == (2, False)
        assert cost < size / 2, cost
        assert _sessions(pg) == {"big-claude": 6002}
        assert _tool_names(dsn, "w", "big-claude")[-1][:2] == (6001, "assistant_text")
    assert_statistics_exact(dsn, "w")


def test_a_bad_line_in_a_later_chunk_rejects_the_whole_file(dsn: str, tmp_path: Path) -> None:
    from pgsearch import Settings

    path = _big_plain(tmp_path / "big.jsonl", 4000)
    with path.open("a", encoding="utf-8") as fh:
        fh.write("{not json\n")
    settings = Settings.from_env({}, dsn=dsn).with_(ingest_chunk_bytes=CHUNK)
    with PgSearch.connect(dsn, settings=settings) as pg:
        with pytest.raises(IngestError, match="invalid JSON") as caught:
            pg.ingest_file(path, workspace="w")
        assert caught.value.line == 4001
        assert pg.sessions(workspace="w") == []
    assert _contents(dsn) == []
    assert_statistics_exact(dsn, "w")


def test_a_streamed_file_of_ever_new_words_folds_its_counts_as_it_goes(
    dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vocabulary counts are applied every few thousand new terms inside the
    transaction: statistics still equal a recount."""
    from pgsearch import Settings
    from pgsearch.ingest import write

    monkeypatch.setattr(write, "_STREAM_TERMS", 500)
    path = tmp_path / "ids.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for i in range(8000):
            fh.write(f'{{"role": "user", "content": "build id{i:06d}x and again{i % 7}"}}\n')
    settings = Settings.from_env({}, dsn=dsn).with_(ingest_chunk_bytes=CHUNK)
    with PgSearch.connect(dsn, settings=settings) as pg:
        assert pg.ingest_file(path, workspace="w").messages == 8000
        assert pg.stats(workspace="w").vocabulary > 8000
    assert_statistics_exact(dsn, "w")
