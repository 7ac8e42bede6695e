"""Parsing JSON Lines session files into entries, and the errors that name file:line."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgsearch import policy
from pgsearch.errors import IngestError
from pgsearch.messages import Entry, iter_jsonl, parse_time


def lines(*objs: Any) -> bytes:
    return b"".join(json.dumps(o).encode() + b"\n" for o in objs)


def parse(data: bytes, *, path: str = "s.jsonl", session_id: str = "s") -> list[Entry]:
    return list(iter_jsonl(data, path=path, session_id=session_id))


def error_of(data: bytes, *, path: str = "dir/s.jsonl") -> IngestError:
    with pytest.raises(IngestError) as info:
        parse(data, path=path)
    return info.value


GOOD = {"role": "user", "content": "hello"}


# -- errors name path:line and the reason -------------------------------------------


@pytest.mark.parametrize(
    ("bad_line", "reason"),
    [
        (b"{oops}", "invalid JSON"),
        (b'{"role": "user", "content": "caf\xe9"}', "invalid UTF-8"),
        (b'{"role": "user", "content": "a\x00b"}', "NUL byte"),
        (b'{"content": "no role"}', "missing 'role'"),
        (b'{"role": "bot", "content": "x"}', "unknown role 'bot'"),
        (b'{"role": 3, "content": "x"}', "unknown role 3"),
        (b'{"role": "user", "content": 5}', "'content' must be"),
        (b'{"role": "user", "content": {"text": "x"}}', "'content' must be"),
        (b'{"role": "user", "content": [5]}', "content[0] must be"),
        (b'{"role": "user", "content": "x", "kind": "gossip"}', "unknown kind 'gossip'"),
        (b'{"role": "user", "content": "x", "is_error": "yes"}', "'is_error' must be"),
        (b'{"role": "user", "content": "x", "created_at": "yesterday"}', "not an ISO 8601"),
        (b'{"role": "user", "content": "x", "created_at": true}', "'created_at' must be"),
        (b'{"role": "user", "content": "x", "created_at": 1e30}', "out of range"),
        (b'{"role": "user", "content": "x", "session_id": ""}', "'session_id' must be"),
        (b'{"role": "user", "content": "x", "title": 7}', "'title' must be a string"),
        (b'["role", "user"]', "expected a JSON object"),
        (b'{"role": "assistant", "tool_calls": [{"function": {}}]}', "function.name"),
        (b'{"role": "assistant", "tool_calls": {"name": "x"}}', "'tool_calls' must be"),
    ],
)
def test_bad_line_is_named_with_its_reason(bad_line: bytes, reason: str) -> None:
    data = lines(GOOD, GOOD) + bad_line + b"\n" + lines(GOOD)
    err = error_of(data)
    assert err.path == "dir/s.jsonl"
    assert err.line == 3
    assert reason in err.reason
    assert str(err).startswith(f"dir/s.jsonl:3: {err.reason}")


def test_truncated_last_line_is_named_as_such() -> None:
    err = error_of(lines(GOOD) + b'{"role": "user", "con')
    assert err.line == 2
    assert "truncated last line" in err.reason


def test_broken_line_in_the_middle_is_not_called_truncated() -> None:
    err = error_of(lines(GOOD) + b'{"role": "user", "con\n' + lines(GOOD))
    assert err.line == 2
    assert "invalid JSON" in err.reason


@pytest.mark.parametrize(
    "nested",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b"[" * 100_000,
        b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    ],
)
def test_deep_nesting_is_an_error_not_a_crash(nested: bytes) -> None:
    err = error_of(lines(GOOD) + b'{"role": "user", "content": "x", "extra": ' + nested + b"}\n")
    assert err.line == 2
    assert "nested too deeply" in err.reason


def test_invalid_utf8_reports_the_byte() -> None:
    err = error_of(b'{"role": "user", "content": "\xff"}\n')
    assert err.reason == "invalid UTF-8 at byte 30"


def test_line_numbers_count_from_first_line() -> None:
    with pytest.raises(IngestError) as info:
        list(iter_jsonl(b"{oops}\n", path="s.jsonl", session_id="s", first_line=41))
    assert info.value.line == 42


# -- numbering, content, sessions -------------------------------------------------------


def test_seq_is_the_zero_based_line_number_and_blank_lines_keep_it() -> None:
    data = lines(GOOD) + b"\n   \n" + lines({"role": "assistant", "content": "hi"}) + b"\r\n"
    entries = parse(data)
    assert [(e.seq, e.role) for e in entries] == [(0, "user"), (3, "assistant")]


def test_utf8_byte_order_mark_is_skipped() -> None:
    entries = list(
        iter_jsonl(b'\xef\xbb\xbf{"role": "user", "content": "hi"}\n', path="x", session_id="s")
    )
    assert [(e.seq, e.content) for e in entries] == [(0, "hi")]


def test_crlf_line_endings_are_accepted() -> None:
    data = b'{"role": "user", "content": "a"}\r\n{"role": "user", "content": "b"}\r\n'
    assert [e.content for e in parse(data)] == ["a", "b"]


def test_first_line_offsets_seq_for_appended_files() -> None:
    entries = list(iter_jsonl(lines(GOOD), path="s.jsonl", session_id="s", first_line=7))
    assert entries[0].seq == 7


def test_escaped_nul_becomes_replacement_character_and_the_rest_is_kept() -> None:
    data = (
        b'{"role": "user", "content": "before\\u0000after", "title": "t\\u0000",'
        b' "meta": {"k\\u0000": ["v\\u0000"]}}\n'
    )
    (entry,) = parse(data)
    assert entry.content == "before\ufffdafter"
    assert entry.title == "t\ufffd"
    assert entry.extra == {"meta": {"k\ufffd": ["v\ufffd"]}}


def test_lone_surrogate_escape_becomes_replacement_character() -> None:
    (entry,) = parse(b'{"role": "user", "content": "a\\ud800b"}\n')
    assert entry.content == "a\ufffdb"
    entry.content.encode("utf-8")


def test_content_parts_are_joined_and_images_noted() -> None:
    obj = {
        "role": "user",
        "content": [
            {"type": "text", "text": "look at"},
            {"type": "image_url", "image_url": {"url": "data:..."}},
            "this",
        ],
    }
    (entry,) = parse(lines(obj))
    assert entry.content == "look at\n[image]\nthis"


def test_null_content_is_empty_text() -> None:
    (entry,) = parse(lines({"role": "assistant", "content": None}))
    assert entry.content == ""
    assert entry.kind == policy.ASSISTANT_TEXT


def test_session_id_defaults_to_the_given_one_and_can_be_overridden() -> None:
    entries = parse(lines(GOOD, {**GOOD, "session_id": "other"}), session_id="file-stem")
    assert [e.session_id for e in entries] == ["file-stem", "other"]


def test_title_summary_and_unknown_fields_are_kept() -> None:
    (entry,) = parse(lines({**GOOD, "title": "Cron", "summary": "so far", "id": "e1", "x": 1}))
    assert (entry.title, entry.summary, entry.entry_id, entry.extra) == (
        "Cron",
        "so far",
        "e1",
        {"x": 1},
    )


# -- kinds and tools ----------------------------------------------------------------------


def test_kinds_follow_roles() -> None:
    entries = parse(
        lines(
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "function": {"name": "grep", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "core.py:42"},
            {"role": "tool", "tool_call_id": "c1", "content": "Error: no such file"},
            {"role": "tool", "content": "fine", "is_error": True},
        )
    )
    assert [e.kind for e in entries] == [
        policy.SYSTEM,
        policy.USER_TEXT,
        policy.ASSISTANT_TEXT,
        policy.TOOL_INPUT,
        policy.TOOL_OUTPUT,
        policy.TOOL_ERROR,
        policy.TOOL_ERROR,
    ]


def test_explicit_kind_wins_and_summary_text_becomes_the_summary() -> None:
    (entry,) = parse(lines({"role": "assistant", "content": "so far so good", "kind": "summary"}))
    assert entry.kind == policy.SUMMARY
    assert entry.summary == "so far so good"


def test_tool_result_gets_its_tool_name_through_tool_call_id() -> None:
    entries = parse(
        lines(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "function": {"name": "grep", "arguments": '{"p": "x"}'}},
                    {"id": "c2", "function": {"name": "bash", "arguments": {"cmd": "ls"}}},
                ],
            },
            {"role": "tool", "tool_call_id": "c2", "content": "a.txt"},
            {"role": "tool", "tool_call_id": "c1", "content": "x:1"},
            {"role": "tool", "tool_call_id": "c1", "name": "named", "content": "x:1"},
            {"role": "tool", "tool_call_id": "unknown", "content": "?"},
        )
    )
    call, *results = entries
    assert call.tool_name == "grep, bash"
    assert call.tool_names() == ["grep", "bash"]
    assert call.arguments == 'grep({"p": "x"})\nbash({"cmd": "ls"})'
    assert [r.tool_name for r in results] == ["bash", "grep", "named", None]
    assert results[0].extra == {"tool_call_id": "c2"}


def test_tool_names_carry_over_between_chunks_of_one_file() -> None:
    calls: dict[str, str] = {}
    first = lines(
        {"role": "assistant", "tool_calls": [{"id": "c9", "function": {"name": "kubectl"}}]}
    )
    list(iter_jsonl(first, path="s.jsonl", session_id="s", tool_names_by_call=calls))
    (result,) = iter_jsonl(
        lines({"role": "tool", "tool_call_id": "c9", "content": "ok"}),
        path="s.jsonl",
        session_id="s",
        first_line=1,
        tool_names_by_call=calls,
    )
    assert result.tool_name == "kubectl"


# -- created_at ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-03-02T09:00:05Z", datetime(2026, 3, 2, 9, 0, 5, tzinfo=UTC)),
        ("2026-03-02T09:00:05z", datetime(2026, 3, 2, 9, 0, 5, tzinfo=UTC)),
        ("2026-03-02T09:00:05.250Z", datetime(2026, 3, 2, 9, 0, 5, 250_000, tzinfo=UTC)),
        ("2026-03-02T09:00:05", datetime(2026, 3, 2, 9, 0, 5, tzinfo=UTC)),
        ("2026-03-02 09:00:05", datetime(2026, 3, 2, 9, 0, 5, tzinfo=UTC)),
        ("2026-03-02", datetime(2026, 3, 2, tzinfo=UTC)),
        (
            "2026-03-02T11:00:05+02:00",
            datetime(2026, 3, 2, 11, 0, 5, tzinfo=timezone(timedelta(hours=2))),
        ),
        (1_767_225_600, datetime(2026, 1, 1, tzinfo=UTC)),
        (1_767_225_600.5, datetime(2026, 1, 1, 0, 0, 0, 500_000, tzinfo=UTC)),
        (1_767_225_600_000, datetime(2026, 1, 1, tzinfo=UTC)),
        (1_767_225_600_250, datetime(2026, 1, 1, 0, 0, 0, 250_000, tzinfo=UTC)),
        (None, None),
    ],
)
def test_parse_time(value: Any, expected: datetime | None) -> None:
    parsed = parse_time(value)
    assert parsed == expected
    if parsed is not None:
        assert parsed.tzinfo is not None


@pytest.mark.parametrize("value", ["soon", "", True, [2026], {"t": 1}, float("nan"), 1e300])
def test_parse_time_rejects(value: Any) -> None:
    with pytest.raises(ValueError):
        parse_time(value)


def test_created_at_reaches_the_entry() -> None:
    (entry,) = parse(lines({**GOOD, "created_at": "2026-03-02T09:00:05Z"}))
    assert entry.created_at == datetime(2026, 3, 2, 9, 0, 5, tzinfo=UTC)


# -- properties ----------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_either_parse_or_raise_ingest_error(data: bytes) -> None:
    try:
        entries = parse(data)
    except IngestError as err:
        assert err.path == "s.jsonl"
        assert err.line is not None and err.line >= 1
        return
    for entry in entries:
        entry.content.encode("utf-8")


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.text(), st.none()), max_size=8))
def test_any_text_content_is_kept_and_storable(texts: list[str | None]) -> None:
    entries = parse(lines(*({"role": "user", "content": t} for t in texts)))
    assert [e.seq for e in entries] == list(range(len(texts)))
    for entry, text in zip(entries, texts, strict=True):
        expected = (text or "").replace("\x00", "\ufffd")
        assert entry.content == expected


@pytest.mark.parametrize(
    "value",
    [1767225600, 1767225600000, 1767225600000000, 1767225600000000000],
    ids=["seconds", "milliseconds", "microseconds", "nanoseconds"],
)
def test_epoch_times_in_any_common_unit_are_read(value: int) -> None:
    assert parse_time(value) == datetime(2026, 1, 1, tzinfo=UTC)


def test_iso_times_with_more_than_microsecond_precision_are_read() -> None:
    assert parse_time("2026-01-01T00:00:00.123456789Z") == datetime(
        2026, 1, 1, 0, 0, 0, 123456, tzinfo=UTC
    )
