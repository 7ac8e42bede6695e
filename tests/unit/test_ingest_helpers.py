"""Ingest's pure helpers: where a file is read from, and which workspace it names."""

from __future__ import annotations

import hashlib

import pytest

from pgsearch.db.store import FileRecord
from pgsearch.ingest import FILE_WINDOW, Resume, file_windows, resume_point, same_prefix
from pgsearch.userconfig import project_of

PARSER = "claude-code/2"


def record(data: bytes, *, lines: int, parser: str | None = PARSER) -> FileRecord:
    return FileRecord("f", len(data), lines, hashlib.sha256(data).hexdigest(), parser)


def test_a_file_never_read_is_read_from_the_start() -> None:
    assert resume_point(b'{"a":1}\n', None, parser=PARSER) == Resume(0, 0)


def test_a_grown_file_is_read_on_from_where_the_last_pass_stopped() -> None:
    old = b'{"a":1}\n{"b":2}\n'
    assert resume_point(old + b'{"c":3}\n', record(old, lines=2), parser=PARSER) == Resume(
        len(old), 2
    )


def test_an_unchanged_file_is_not_read_again() -> None:
    data = b'{"a":1}\n'
    assert resume_point(data, record(data, lines=1), parser=PARSER) == Resume(
        len(data), 1, unchanged=True
    )


@pytest.mark.parametrize(
    "now",
    [b'{"a":9}\n{"b":2}\n{"c":3}\n', b'{"a":1}\n'],
    ids=["changed-prefix", "truncated"],
)
def test_a_rewritten_or_truncated_file_is_read_again_whole(now: bytes) -> None:
    old = b'{"a":1}\n{"b":2}\n'
    assert resume_point(now, record(old, lines=2), parser=PARSER) == Resume(0, 0, rewrite=True)


def test_a_file_read_by_another_mapping_is_read_again_whole() -> None:
    data = b'{"a":1}\n'
    old = record(data, lines=1, parser="claude-code/1")
    assert resume_point(data + b'{"b":2}\n', old, parser=PARSER).rewrite
    # Records from before parser versions were kept: pgsearch's own format is unchanged.
    legacy = record(data, lines=1, parser=None)
    assert resume_point(data, legacy, parser="openai/1").unchanged
    assert resume_point(data, legacy, parser=PARSER).rewrite


def test_a_last_line_read_without_its_newline_continues_after_the_newline() -> None:
    old = b'{"a":1}\n{"b":2}'  # the last pass read the unterminated second line
    assert resume_point(old + b'\n{"c":3}\n', record(old, lines=2), parser=PARSER) == Resume(
        len(old) + 1, 2
    )
    # More of that same line means it was rewritten, not continued.
    assert resume_point(old + b"5}\n", record(old, lines=2), parser=PARSER).rewrite


def test_a_document_is_read_again_whole_on_any_change() -> None:
    old = b'{"info": {}, "messages": []}'
    now = old + b"\n"
    assert resume_point(now, record(old, lines=0), parser="opencode/1", document=True).rewrite


@pytest.mark.parametrize(
    ("cwd", "project"),
    [
        ("/home/dev/shop/.claude/worktrees/agent-3f9a21", "/home/dev/shop"),
        ("/home/dev/shop/.claude/worktrees/agent-3f9a21/src", "/home/dev/shop"),
        ("C:\\Users\\dev\\shop\\.claude\\worktrees\\fix-login", "C:\\Users\\dev\\shop"),
        ("/home/dev/shop", "/home/dev/shop"),
        ("/home/dev/.claude/projects", "/home/dev/.claude/projects"),
    ],
)
def test_a_worktree_of_a_project_belongs_to_the_project(cwd: str, project: str) -> None:
    assert project_of(cwd) == project


def _windowed(data: bytes, *, lines: int) -> FileRecord:
    digest, head, tail = file_windows(data, len(data))
    return FileRecord("f", len(data), lines, digest, PARSER, head, tail)


def test_a_grown_file_is_checked_at_both_ends_of_what_was_read() -> None:
    """A record keeps digests of the first and last FILE_WINDOW bytes read: a change
    in either is a rewrite; growth after them is read on without hashing the rest."""
    line = b'{"a":"' + b"x" * 1000 + b'"}\n'
    old = line * (3 * FILE_WINDOW // len(line))
    rec = _windowed(old, lines=old.count(b"\n"))
    assert resume_point(old + line, rec, parser=PARSER) == Resume(len(old), rec.lines)
    head_edit = b"{" + b'"b"' + old[4:]
    assert resume_point(head_edit + line, rec, parser=PARSER).rewrite
    tail_edit = old[:-10] + b'yyyyyyy"}\n'
    assert len(tail_edit) == len(old)
    assert resume_point(tail_edit + line, rec, parser=PARSER).rewrite
    assert resume_point(old[:-1], rec, parser=PARSER).rewrite  # shorter


def test_a_record_from_before_windows_is_checked_against_all_it_read() -> None:
    data = b'{"a":1}\n{"b":2}\n'
    legacy = record(data, lines=2)
    assert same_prefix(data + b'{"c":3}\n', legacy)
    assert not same_prefix(b'{"a":9}\n{"b":2}\n{"c":3}\n', legacy)


def test_blank_line_runs_count_as_lines_and_cost_one_match() -> None:
    from pgsearch.messages import iter_jsonl

    data = (
        b'{"role":"user","content":"a"}\n'
        + b"\n \r\n\t\n" * 50_000
        + b'{"role":"user","content":"b"}'
    )
    seqs = [e.seq for e in iter_jsonl(data, path="f", session_id="s")]
    assert seqs == [0, 150_001]


def test_chunks_end_at_a_line_end_and_hold_a_line_longer_than_a_chunk() -> None:
    from pgsearch.ingest import next_chunk

    data = b"aaa\nbbbbbbbbbbbbbbbbbbbb\ncc\nd"
    assert next_chunk(data, 0, 6) == b"aaa\n"
    assert next_chunk(data, 4, 6) == b"bbbbbbbbbbbbbbbbbbbb\n"  # longer than a chunk
    assert next_chunk(data, 25, 6) == b"cc\nd"  # the end of the file as it is
    pieces, at = [], 0
    while at < len(data):
        pieces.append(next_chunk(data, at, 6))
        at += len(pieces[-1])
    assert b"".join(pieces) == data
