"""Agent-log adapters without a database: detection and the mapping to our kinds."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pgsearch import adapters
from pgsearch.adapters import Parsed
from pgsearch.messages import Entry
from tests.conftest import EXAMPLES

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CLAUDE = FIXTURES / "claude-code" / "3f7c1a52-8d4e-4b8a-9c1e-2a6d5f0b7e91.jsonl"
CODEX = (
    FIXTURES / "codex" / "rollout-2025-09-14T10-21-07-0199a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b.jsonl"
)


def parse_all(path: Path, start: int = 0, first_line: int = 0, data: bytes | None = None) -> Parsed:
    data = path.read_bytes() if data is None else data
    adapter = adapters.ADAPTERS[adapters.detect_format(data)]
    header = adapter.header(data, default_session=path.stem, path=path)
    return adapter.parse(data, start, first_line, path=str(path), header=header)


def parse(path: Path, start: int = 0, first_line: int = 0) -> list[Entry]:
    return parse_all(path, start, first_line).entries


def shape(entries: list[Entry]) -> list[tuple[str, str, str | None]]:
    return [(e.role, e.kind, e.tool_name) for e in entries]


def test_formats_are_detected_per_file() -> None:
    assert adapters.detect_format(CLAUDE.read_bytes()) == "claude-code"
    assert adapters.detect_format(CODEX.read_bytes()) == "codex"
    for path in EXAMPLES.glob("*.jsonl"):
        assert adapters.detect_format(path.read_bytes()) == "openai"
    assert adapters.detect_format(b"") == "openai"
    legacy = b'{"id": "abc", "timestamp": "2025-05-07T17:24:21Z", "instructions": null}\n'
    assert adapters.detect_format(legacy) == "codex"


def test_claude_code_blocks_map_to_kinds_roles_and_tools() -> None:
    parsed = parse_all(CLAUDE)
    entries = parsed.entries
    assert shape(entries) == [
        ("system", "system", None),  # isMeta caveat
        ("user", "user_text", None),
        ("assistant", "assistant_text", None),  # the thinking block before it is dropped
        ("assistant", "tool_input", "Grep"),
        ("tool", "tool_output", "Grep"),
        ("assistant", "tool_input", "Bash"),
        ("tool", "tool_error", "Bash"),  # is_error: true
        ("assistant", "assistant_text", None),
        ("assistant", "tool_input", "Edit"),
        ("tool", "tool_output", "Edit"),
        ("user", "user_text", None),  # text + image
        ("assistant", "assistant_text", None),
        ("system", "system", None),  # compact boundary
        ("system", "summary", None),  # isCompactSummary
        ("user", "user_text", None),  # the /cost command the person typed
        ("user", "user_text", None),
        ("assistant", "assistant_text", None),  # text and tool_use in one message
        ("assistant", "tool_input", "Bash"),
        ("tool", "tool_error", "Bash"),  # "permission denied" in the text
    ]
    assert {e.session_id for e in entries} == {"3f7c1a52-8d4e-4b8a-9c1e-2a6d5f0b7e91"}
    # The summary line is a title naming its session through a message, not an entry.
    [leaf] = parsed.leaf_titles
    assert (leaf.title, leaf.leaf_uuid) == (
        "Fix flaky invoice rounding test",
        "a1b2c3d4-0000-4000-8000-000000000019",
    )
    assert entries[1].created_at == datetime(2025, 7, 14, 9, 12, 5, 530000, tzinfo=UTC)
    assert entries[10].content.endswith("[image]")
    assert entries[13].summary is not None and "ROUND_HALF_UP" in entries[13].summary
    assert entries[14].content == "/cost"
    edit = entries[8]
    assert edit.content == "" and edit.arguments.startswith("Edit({")
    assert "quantize" in edit.arguments
    assert entries[16].entry_id is not None and entries[17].entry_id == f"{entries[16].entry_id}#1"
    assert (
        entries[6].extra is not None and entries[6].extra["tool_use_id"] == "toolu_01BashPytest3k"
    )


def test_claude_code_header_names_the_working_directory() -> None:
    data = CLAUDE.read_bytes()
    header = adapters.ADAPTERS["claude-code"].header(data, default_session=CLAUDE.stem)
    assert header.session_id == CLAUDE.stem
    assert header.cwd == "/home/dev/projects/billing-api"


def test_codex_items_map_to_kinds_roles_and_tools() -> None:
    entries = parse(CODEX)
    assert shape(entries) == [
        ("system", "system", None),  # <user_instructions>
        ("system", "system", None),  # <environment_context>
        ("user", "user_text", None),
        ("assistant", "tool_input", "shell"),
        ("tool", "tool_output", "shell"),
        ("assistant", "tool_input", "shell"),
        ("tool", "tool_error", "shell"),  # exit code 1
        ("assistant", "tool_input", "apply_patch"),
        ("tool", "tool_output", "apply_patch"),
        ("assistant", "assistant_text", None),
        ("system", "summary", None),  # compacted
        ("user", "user_text", None),
        ("assistant", "tool_input", "local_shell"),
        ("tool", "tool_output", "local_shell"),
    ]
    assert {e.session_id for e in entries} == {"0199a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b"}
    assert entries[2].created_at == datetime(2025, 9, 14, 10, 21, 31, 4000, tzinfo=UTC)
    assert entries[4].content == "0001_entries.sql\n0002_accounts.sql\n"  # unwrapped output
    assert entries[6].content.startswith("error: while executing migrations")
    assert entries[6].extra is not None and entries[6].extra["exit_code"] == 1
    data = CODEX.read_bytes()
    header = adapters.ADAPTERS["codex"].header(data, default_session=CODEX.stem)
    assert header.cwd == "/home/dev/projects/ledger"


def test_codex_session_id_falls_back_to_the_file_name() -> None:
    header = adapters.ADAPTERS["codex"].header(
        b"", default_session="rollout-2025-01-02T03-04-05-0199a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b"
    )
    assert header.session_id == "0199a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b"


@pytest.mark.parametrize("path", [CLAUDE, CODEX], ids=["claude-code", "codex"])
def test_a_result_read_apart_from_its_call_still_gets_the_tool_name(path: Path) -> None:
    # Reading from any line boundary gives the same tool names as reading the whole file:
    # a result whose call was read in an earlier pass is named from the file's prefix.
    whole = parse(path)
    data = path.read_bytes()
    for cut_line in range(1, data.count(b"\n")):
        start = sum(len(line) + 1 for line in data.split(b"\n")[:cut_line])
        tail = parse(path, start, cut_line)
        assert shape(tail) == shape(whole[len(whole) - len(tail) :])


def test_a_torn_middle_line_is_skipped_naming_file_and_line(tmp_path: Path) -> None:
    lines = CLAUDE.read_text(encoding="utf-8").splitlines()
    lines[4] = '{"type": "assistant", "message": {'
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    parsed = parse_all(path)
    [problem] = parsed.problems
    assert (problem.line, parsed.skipped_lines) == (5, 1)
    assert str(problem).startswith(f"{path}:5: invalid JSON")
    # The rest of the session lands: every entry but the torn line's one.
    assert len(parsed.entries) == len(parse(CLAUDE)) - 1
    assert parsed.consumed == len(path.read_bytes())


def test_a_bad_timestamp_skips_its_line_with_a_warning(tmp_path: Path) -> None:
    event = {"type": "user", "sessionId": "s", "timestamp": "not a time"}
    event["message"] = {"role": "user", "content": "hello"}
    good = {**event, "timestamp": "2025-07-14T09:12:05Z", "message": {"content": "still here"}}
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(event) + "\n" + json.dumps(good) + "\n", encoding="utf-8")
    parsed = parse_all(path)
    [problem] = parsed.problems
    assert str(problem).startswith(f"{path}:1: 'timestamp'")
    assert [e.content for e in parsed.entries] == ["still here"]


def test_unknown_event_types_are_skipped(tmp_path: Path) -> None:
    events = [
        {
            "type": "user",
            "sessionId": "s",
            "uuid": "u1",
            "message": {"role": "user", "content": "hi"},
        },
        {"type": "brand-new-event", "sessionId": "s", "payload": [1, 2]},
        {"type": "assistant", "sessionId": "s", "message": {"role": "assistant", "content": "yo"}},
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    assert shape(parse(path)) == [
        ("user", "user_text", None),
        ("assistant", "assistant_text", None),
    ]
