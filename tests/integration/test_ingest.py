"""Ingest against the real server: lossless, idempotent, all-or-nothing per file."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from pgsearch import IngestError, PgSearch, SessionQueryRequest, adapters
from tests.conftest import EXAMPLES
from tests.helpers import assert_statistics_exact, message_keys, write_jsonl

SAMPLE = [
    {"role": "system", "content": "You are a helpful agent.", "title": "Résumé parser bugs"},
    {"role": "user", "content": "The résumé parser crashes on naïve dates — can you fix it?"},
    {
        "role": "assistant",
        "content": "Looking at resolve_dirs(config) first.",
        "tool_calls": [
            {"id": "c1", "function": {"name": "read_file", "arguments": '{"path": "parser.py"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "def parse(): pass  # token=abc123secret"},
    {"role": "tool", "tool_call_id": "c1", "content": "Error: FileNotFoundError: config.yaml"},
    {"role": "assistant", "content": "東京の設定ファイルが見つかりません。C++ and foo-bar too."},
    {
        "role": "user",
        "content": "Use Authorization: Bearer sk-abcdefghijklmnopqrstuvwxyz123456 for it",
    },
    {"role": "assistant", "content": "Summary: parser fixed.", "kind": "summary"},
]


def test_realistic_sample_lands_with_kinds_and_stats(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    path = write_jsonl(tmp_path / "s1.jsonl", SAMPLE)
    result = pg.ingest_file(path, workspace="w")
    assert result.messages == len(SAMPLE)
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT seq, kind, role, tool_name, turn, token_count FROM messages "
            "WHERE workspace_id = 'w' ORDER BY seq"
        ).fetchall()
        title, summary = conn.execute(
            "SELECT title, summary FROM sessions WHERE workspace_id = 'w' AND session_id = 's1'"
        ).fetchone() or (None, None)
    kinds = [r[1] for r in rows]
    assert kinds == [
        "system",
        "user_text",
        "tool_input",
        "tool_output",
        "tool_error",
        "assistant_text",
        "user_text",
        "summary",
    ]
    assert rows[3][3] == "read_file" and rows[4][3] == "read_file"  # name via tool_call_id
    assert [r[4] for r in rows] == [0, 1, 1, 1, 1, 1, 2, 2]
    assert rows[0][5] == 0 and rows[3][5] == 0  # system text and tool output not indexed
    assert title == "Résumé parser bugs" and summary == "Summary: parser fixed."
    assert_statistics_exact(dsn, "w")


def test_secrets_never_reach_the_index(pg: PgSearch, dsn: str, tmp_path: Path) -> None:
    pg.ingest_file(write_jsonl(tmp_path / "s1.jsonl", SAMPLE), workspace="w")
    with psycopg.connect(dsn) as conn:
        terms = {r[0] for r in conn.execute("SELECT term FROM vocabulary").fetchall()}
    assert not any(t.startswith("sk") and len(t) > 10 for t in terms)
    assert "abcdefghijklmnopqrstuvwxyz123456" not in terms
    assert "abc123secret" not in terms  # tool output is not indexed at all
    assert "parser" in terms and "resume" in terms


def test_reingest_changes_nothing(pg: PgSearch, dsn: str, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s1.jsonl", SAMPLE)
    pg.ingest_file(path, workspace="w")
    before = (message_keys(dsn, "w"), pg.stats(workspace="w"))
    again = pg.ingest_file(path, workspace="w")
    assert (again.messages, again.skipped, again.unchanged) == (0, 0, True)
    assert (message_keys(dsn, "w"), pg.stats(workspace="w")) == before
    assert_statistics_exact(dsn, "w")


def test_appended_file_adds_only_new_lines(pg: PgSearch, dsn: str, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s1.jsonl", SAMPLE[:4])
    pg.ingest_file(path, workspace="w")
    write_jsonl(path, SAMPLE)
    result = pg.ingest_file(path, workspace="w")
    assert result.messages == len(SAMPLE) - 4
    assert (result.skipped, result.unchanged) == (0, False)  # only the new lines were read
    assert message_keys(dsn, "w") == [("s1", i) for i in range(len(SAMPLE))]
    with psycopg.connect(dsn) as conn:
        turns = [r[0] for r in conn.execute("SELECT turn FROM messages ORDER BY seq").fetchall()]
    assert turns == [0, 1, 1, 1, 1, 1, 2, 2]
    assert_statistics_exact(dsn, "w")


def test_rewritten_file_is_reread_without_duplicates(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    path = write_jsonl(tmp_path / "s1.jsonl", SAMPLE)
    pg.ingest_file(path, workspace="w")
    changed = [{"role": "system", "content": "Another system prompt."}, *SAMPLE[1:]]
    write_jsonl(path, [*changed, {"role": "user", "content": "one more question"}])
    result = pg.ingest_file(path, workspace="w")  # prefix differs: whole file re-read
    assert result.rewritten and result.messages == len(SAMPLE) + 1  # it replaced the old
    assert message_keys(dsn, "w") == [("s1", i) for i in range(len(SAMPLE) + 1)]
    with psycopg.connect(dsn) as conn:
        first = conn.execute("SELECT content FROM messages WHERE seq = 0").fetchone()
    assert first == ("Another system prompt.",)
    assert_statistics_exact(dsn, "w")


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"{not json", "invalid JSON"),
        (b'{"role": "user", "content": "bad \xff byte"}', "invalid UTF-8"),
        (b'{"role": "user", "content": "nul \x00 byte"}', "NUL byte"),
        (b'{"content": "no role"}', "missing 'role'"),
        (b'{"role": "wizard", "content": "x"}', "unknown role"),
        (b'{"role": "user", "content": 42}', "content"),
        (b'["role", "user"]', "expected a JSON object"),
    ],
)
def test_malformed_file_rejected_whole_good_file_lands(
    pg: PgSearch, dsn: str, tmp_path: Path, line: bytes, reason: str
) -> None:
    write_jsonl(tmp_path / "good.jsonl", SAMPLE[:3])
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(json.dumps({"role": "user", "content": "fine"}).encode() + b"\n" + line + b"\n")
    report = pg.ingest_paths([tmp_path], workspace="w")
    assert report.files == 2
    assert len(report.errors) == 1
    error = report.errors[0]
    assert error.path is not None and error.path.endswith("bad.jsonl")
    assert error.line == 2
    assert reason in str(error) and "bad.jsonl:2: " in str(error)
    assert {sid for sid, _ in message_keys(dsn, "w")} == {"good"}
    assert_statistics_exact(dsn, "w")


def test_escaped_nul_inside_content_is_kept_as_replacement(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    path = tmp_path / "n.jsonl"
    path.write_text('{"role": "user", "content": "before\\u0000after \\ud800 lone"}\n')
    pg.ingest_file(path, workspace="w")
    with psycopg.connect(dsn) as conn:
        content = conn.execute("SELECT content FROM messages").fetchone()
    assert content == ("before\ufffdafter \ufffd lone",)
    hits = pg.provider(workspace="w").search(SessionQueryRequest(query="after"))
    assert [m.session_id for m in hits.matches] == ["n"]


def test_huge_message_is_stored_whole_and_searchable(
    pg: PgSearch, dsn: str, tmp_path: Path
) -> None:
    body = "lorem ipsum " * 200_000 + " needleword"
    path = write_jsonl(tmp_path / "big.jsonl", [{"role": "user", "content": "zebra " + body}])
    pg.ingest_file(path, workspace="w")
    with psycopg.connect(dsn) as conn:
        (length,) = conn.execute("SELECT length(content) FROM messages").fetchone() or (0,)
    assert length == len("zebra " + body)
    result = pg.provider(workspace="w").search(SessionQueryRequest(query="zebra"))
    assert result.matches and len(result.matches[0].excerpt.encode()) <= 600


def test_append_is_searchable_on_commit(pg: PgSearch, dsn: str) -> None:
    n = pg.append(
        workspace="w",
        session_id="live",
        messages=[
            {"role": "user", "content": "remember the kraken deployment"},
            {"role": "assistant", "content": "noted"},
        ],
    )
    assert n == 2
    pg.append(workspace="w", session_id="live", messages=[{"role": "user", "content": "and squid"}])
    assert message_keys(dsn, "w") == [("live", 0), ("live", 1), ("live", 2)]
    with PgSearch.connect(dsn) as other:  # another connection sees it
        hits = other.provider(workspace="w").search(SessionQueryRequest(query="kraken"))
    assert [(m.session_id, m.seq) for m in hits.matches] == [("live", 0)]
    assert_statistics_exact(dsn, "w")


def test_append_rejects_bad_message_and_stores_nothing(pg: PgSearch, dsn: str) -> None:
    with pytest.raises(IngestError, match="message 1: missing 'role'"):
        pg.append(
            workspace="w",
            session_id="s",
            messages=[{"role": "user", "content": "ok"}, {"content": "no role"}],
        )
    assert message_keys(dsn, "w") == []


def test_forget_keeps_statistics_exact(pg: PgSearch, dsn: str) -> None:
    pg.ingest_paths([EXAMPLES], workspace="w")
    pg.ingest_paths([EXAMPLES], workspace="other")
    assert_statistics_exact(dsn, "w")
    assert pg.forget(workspace="w", session_id="cron-refactor") == 10
    assert_statistics_exact(dsn, "w")
    assert {s for s, _ in message_keys(dsn, "w")} == {"deploy-keys", "pokemon-i18n"}
    hits = pg.provider(workspace="w").search(SessionQueryRequest(query="advisory lock"))
    assert hits.matches == ()
    pg.forget(workspace="w")
    assert message_keys(dsn, "w") == []
    assert pg.stats(workspace="w").vocabulary == 0
    assert len(message_keys(dsn, "other")) == 21  # other workspace untouched
    assert_statistics_exact(dsn, "other")


def test_forget_then_reingest_restores_only_when_asked(pg: PgSearch, dsn: str) -> None:
    pg.ingest_paths([EXAMPLES], workspace="w")
    pg.forget(workspace="w", session_id="deploy-keys")
    assert pg.ingest_paths([EXAMPLES], workspace="w").messages == 0
    report = pg.ingest_paths([EXAMPLES], workspace="w", include_forgotten=True)
    assert report.messages == 6
    assert_statistics_exact(dsn, "w")


def test_session_from_two_files_is_refused(pg: PgSearch, tmp_path: Path) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", [{"role": "user", "content": "x", "session_id": "s"}])
    b = write_jsonl(tmp_path / "b.jsonl", [{"role": "user", "content": "y", "session_id": "s"}])
    pg.ingest_file(a, workspace="w")
    with pytest.raises(IngestError, match="already holds messages"):
        pg.ingest_file(b, workspace="w")


def test_paths_outside_roots_are_refused(pg: PgSearch, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    outside = write_jsonl(tmp_path / "outside.jsonl", [{"role": "user", "content": "x"}])
    (root / "link.jsonl").symlink_to(outside)
    with pytest.raises(IngestError, match="outside the allowed roots"):
        pg.ingest_file(root / "link.jsonl", workspace="w", roots=[root])
    with pytest.raises(IngestError, match="outside the allowed roots"):
        pg.ingest_file(root / ".." / "outside.jsonl", workspace="w", roots=[root])


def test_a_line_without_a_role_names_the_formats_pgsearch_reads(
    pg: PgSearch, tmp_path: Path
) -> None:
    path = write_jsonl(tmp_path / "notes.jsonl", [{"role": "user", "content": "a"}, {"text": "b"}])
    with pytest.raises(IngestError) as info:
        pg.ingest_file(path, workspace="w", format="openai")
    message = str(info.value)
    assert message.startswith(f"{path}:2: missing 'role'"), message
    assert "not a format pgsearch recognises" in message
    assert all(name in message for name in adapters.FORMATS)
    assert pg.workspaces() == []
