"""Agent-log adapters without a database: detection and the mapping to our kinds."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pgsearch import adapters
from pgsearch.adapters import Parsed
from pgsearch.errors import IngestError
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
    assert parse_all(path).unknown == {"brand-new-event": 1}  # skipped, and counted


# --- real shapes, hand-written fixtures -------------------------------------------

COMMANDS = FIXTURES / "claude-code" / "commands" / "9b1d4e7a-2c3f-4a5b-8c6d-7e8f9a0b1c2d.jsonl"
SIDECHAINS = FIXTURES / "claude-code" / "sidechains" / "5e0c3b7d-8a9f-4e1d-b2c3-4d5e6f708192.jsonl"
SUBAGENTS = FIXTURES / "claude-code" / "subagents"
MAIN_UI = "7a6b5c4d-3e2f-4a1b-9c8d-7e6f5a4b3c2d"
GEMINI = (
    FIXTURES
    / "gemini"
    / "tmp"
    / ("3c9e41b7d2a85f60c1e4b9a7d3f28e50c6a1b4d7e9f20a83c5b6d1e4f7a9b2c3")
)
GEMINI_LOG = GEMINI / "chats" / "session-2025-10-02T14-05-7c1e9b2a.jsonl"
OPENCODE_EXPORT = FIXTURES / "opencode" / "export" / "ses_60b1d4e2cffeZz9Yy8Xx7Ww6Vv.json"


def contents(entries: list[Entry]) -> list[tuple[str, str, str]]:
    return [(e.role, e.kind, e.content) for e in entries]


def test_a_last_line_without_a_newline_is_read_when_it_is_complete() -> None:
    data = COMMANDS.read_bytes()
    assert not data.endswith(b"\n")
    parsed = parse_all(COMMANDS)
    assert parsed.entries[-1].content.startswith("Committed as 4e1c2d0")
    assert parsed.consumed == len(data)
    assert parsed.lines == data.count(b"\n") + 1
    for path in (CLAUDE, CODEX, *EXAMPLES.glob("*.jsonl")):
        whole = parse_all(path)
        cut = path.read_bytes().rstrip(b"\n")
        assert shape(parse_all(path, data=cut).entries) == shape(whole.entries), path


def test_a_one_line_codex_rollout_without_a_newline_is_detected_as_codex() -> None:
    first = CODEX.read_bytes().split(b"\n", 1)[0]
    assert adapters.detect_format(first) == "codex"
    one = first + b"\n" + CODEX.read_bytes().split(b"\n")[4]  # session_meta + a prompt
    assert adapters.detect_format(one) == "codex"
    assert [e.kind for e in parse_all(CODEX, data=one).entries] == ["user_text"]


@pytest.mark.parametrize("path", [CLAUDE, CODEX, GEMINI_LOG], ids=["claude", "codex", "gemini"])
def test_a_torn_last_line_waits_for_the_rest_of_it(path: Path) -> None:
    data = path.read_bytes()
    last = data.rstrip(b"\n").rfind(b"\n") + 1
    torn = data[: last + 30]  # the last line, cut short, no newline yet
    parsed = parse_all(path, data=torn)
    assert parsed.problems == [] and parsed.skipped_lines == 0
    assert parsed.consumed == last  # not consumed: the next pass reads it whole
    rest = parse_all(path, last, parsed.lines, data=data)
    assert len(parsed.entries) + len(rest.entries) == len(parse_all(path).entries)


def test_slash_commands_are_the_users_text_and_their_output_tool_output() -> None:
    entries = parse(COMMANDS)
    model = next(i for i, e in enumerate(entries) if e.content == "/model opus")
    assert (entries[model].role, entries[model].kind) == ("user", "user_text")
    output = entries[model + 1]
    assert (output.role, output.kind, output.tool_name) == ("tool", "tool_output", "/model")
    assert output.content == "Set model to opus (claude-opus-4-1-20250805)"
    assert "<command-name>" not in " ".join(e.content for e in entries)


def test_a_shell_command_typed_with_bang_is_user_text_and_its_echo_tool_output() -> None:
    entries = parse(COMMANDS)
    typed = next(i for i, e in enumerate(entries) if e.content == "! git status --short")
    assert (entries[typed].role, entries[typed].kind) == ("user", "user_text")
    echo = entries[typed + 1]
    assert (echo.role, echo.kind) == ("tool", "tool_output")
    assert echo.content.startswith("M app/webhooks.py")


def test_ide_context_and_reminders_are_system_text_not_the_users_words() -> None:
    entries = parse(COMMANDS)
    users = [e.content for e in entries if e.role == "user"]
    assert "Why do the webhook deliveries give up after one try?" in users
    assert "Fix the backoff and commit it." in users
    assert not any("<ide_opened_file>" in u or "system-reminder" in u for u in users)
    system = [e.content for e in entries if e.kind == "system"]
    assert any(s.startswith("<ide_opened_file>The user opened the file") for s in system)
    assert any(s.startswith("<system-reminder>") for s in system)


def test_a_prompt_typed_while_a_tool_runs_is_user_text() -> None:
    entries = parse(COMMANDS)
    [queued] = [e for e in entries if e.extra and e.extra.get("queued")]
    assert (queued.role, queued.kind) == ("user", "user_text")
    assert queued.content == "also check the backoff settings in config/webhooks.toml"
    # Not a person's words: a queued notification or a peer's message.
    line = {
        "type": "attachment",
        "sessionId": "s",
        "uuid": "q1",
        "timestamp": "2025-09-03T08:00:09Z",
        "attachment": {
            "type": "queued_command",
            "prompt": "<task-notification>done</task-notification>",
            "commandMode": "task-notification",
        },
    }
    other = parse_all(COMMANDS, data=json.dumps(line).encode() + b"\n").entries
    assert contents(other) == [("system", "system", "<task-notification>done</task-notification>")]


def test_a_search_that_found_nothing_is_not_a_tool_error() -> None:
    entries = parse(COMMANDS)
    rg = next(i for i, e in enumerate(entries) if e.tool_name == "Bash" and e.kind != "tool_input")
    assert (entries[rg].kind, entries[rg].content) == ("tool_output", "Exit code 1")
    # The failing test run right after it still is one.
    assert [e.kind for e in entries if e.role == "tool" and e.tool_name == "Bash"] == [
        "tool_output",
        "tool_error",
    ]


def test_rename_titles_the_session_with_the_chosen_title() -> None:
    parsed = parse_all(COMMANDS)
    [(sid, title)] = parsed.titles.items()
    assert sid == COMMANDS.stem
    assert (title.title, title.auto) == ("Webhook retry backoff", False)
    ai = b'{"type":"ai-title","aiTitle":"Webhook retries","sessionId":"s"}\n'
    generated = parse_all(COMMANDS, data=ai).titles[COMMANDS.stem]
    assert (generated.title, generated.auto) == ("Webhook retries", True)
    both = parse_all(COMMANDS, data=COMMANDS.read_bytes() + b"\n" + ai).titles[COMMANDS.stem]
    assert both.title == "Webhook retry backoff"  # a generated title never beats a chosen one


def test_sidechains_in_the_parents_file_are_sessions_of_their_own() -> None:
    parsed = parse_all(SIDECHAINS)
    parent = SIDECHAINS.stem
    payments = f"{parent}/sidechain-5e0ca000-0000-4000-8000-000000000001"
    email = f"{parent}/sidechain-5e0cb000-0000-4000-8000-000000000001"
    assert parsed.parents == {payments: parent, email: parent}
    by_session: dict[str, list[tuple[str, str, str | None]]] = {}
    for e in parsed.entries:
        by_session.setdefault(e.session_id, []).append((e.role, e.kind, e.tool_name))
    assert by_session[payments] == [
        ("assistant", "assistant_text", None),  # the prompt, from the parent agent
        ("assistant", "tool_input", "Grep"),
        ("tool", "tool_output", "Grep"),
        ("assistant", "assistant_text", None),
    ]
    assert by_session[email] == [
        ("assistant", "assistant_text", None),
        ("assistant", "assistant_text", None),
    ]
    # The parent's own conversation: two things the person typed, nothing interleaved.
    users = [e.content for e in parsed.entries if e.role == "user"]
    assert users == [
        "Audit the payments and email modules for SQL built from strings.",
        "Go ahead and add a regression test for it.",
    ]
    assert all(
        e.role != "user" for sid in (payments, email) for e in parsed.entries if e.session_id == sid
    )


def test_a_sidechain_line_read_in_a_later_pass_finds_its_session() -> None:
    whole = parse_all(SIDECHAINS).entries
    data = SIDECHAINS.read_bytes()
    for cut_line in range(1, data.count(b"\n")):
        start = sum(len(line) + 1 for line in data.split(b"\n")[:cut_line])
        tail = parse_all(SIDECHAINS, start, cut_line).entries
        assert [(e.session_id, e.content) for e in tail] == [
            (e.session_id, e.content) for e in whole[len(whole) - len(tail) :]
        ]


@pytest.mark.parametrize(
    ("path", "session", "parent"),
    [
        (
            SUBAGENTS / MAIN_UI / "subagents" / "agent-a3f9c21.jsonl",
            f"{MAIN_UI}/agent-a3f9c21",
            MAIN_UI,
        ),
        (
            SUBAGENTS / "agent-de30ae5d.jsonl",
            "0f1e2d3c-4b5a-4968-8776-655443322110/agent-de30ae5d",
            "0f1e2d3c-4b5a-4968-8776-655443322110",
        ),
    ],
    ids=["subagents-dir", "sibling-file"],
)
def test_a_sub_agents_own_file_is_a_session_linked_to_its_parent(
    path: Path, session: str, parent: str
) -> None:
    parsed = parse_all(path)
    assert {e.session_id for e in parsed.entries} == {session}
    assert parsed.parents == {session: parent}
    assert parsed.entries[0].role == "assistant"  # the parent agent's prompt
    assert all(e.role != "user" for e in parsed.entries)


def test_claude_codes_compaction_helper_is_not_stored() -> None:
    path = SUBAGENTS / MAIN_UI / "subagents" / "agent-acompact-5d1e2f.jsonl"
    parsed = parse_all(path)
    assert (parsed.entries, parsed.parents) == ([], {}) and parsed.recognised > 0


def test_summary_lines_title_the_session_of_the_message_they_name() -> None:
    resumed = FIXTURES / "claude-code" / "summaries" / "6a7b8c9d-0e1f-4a2b-8c3d-4e5f6a7b8c9d.jsonl"
    parsed = parse_all(resumed)
    assert [(t.title, t.leaf_uuid) for t in parsed.leaf_titles] == [
        ("Nightly export time zone fix", "1c2d0000-0000-4000-8000-000000000004"),
        ("Export date bug", "1c2d0000-0000-4000-8000-000000000002"),
        ("Flaky cache invalidation test", "2b3c0000-0000-4000-8000-000000000003"),
    ]
    assert parsed.titles == {}  # none of them titles the file's own session
    assert all(e.kind != "system" for e in parsed.entries)


def test_gemini_cli_messages_map_to_kinds_tools_errors_and_times() -> None:
    parsed = parse_all(GEMINI_LOG)
    assert adapters.detect_format(GEMINI_LOG.read_bytes()) == "gemini"
    assert [(e.role, e.kind, e.tool_name) for e in parsed.entries] == [
        ("user", "user_text", None),
        ("assistant", "assistant_text", None),
        ("assistant", "tool_input", "run_shell_command"),
        ("tool", "tool_error", "run_shell_command"),  # make docs exited 2
        ("assistant", "tool_input", "read_file"),
        ("tool", "tool_error", "read_file"),  # the call failed
        ("assistant", "tool_input", "run_shell_command"),
        ("tool", "tool_output", "run_shell_command"),  # grep found nothing: exit 1
        ("system", "system", None),  # an info notice
        ("assistant", "assistant_text", None),
        ("user", "user_text", None),
    ]
    entries = parsed.entries
    assert entries[0].session_id == "7c1e9b2a-4d5e-4f60-8a71-9b0c1d2e3f40"
    assert entries[0].created_at == datetime(2025, 10, 2, 14, 5, 14, 32000, tzinfo=UTC)
    assert entries[-1].content == "Pin it in @docs/requirements.txt"  # what was typed
    assert "make docs" in entries[2].arguments
    title = parsed.titles[entries[0].session_id]
    assert (title.title, title.auto) == ("Fix the docs build missing its Sphinx theme", True)


def test_a_gemini_message_rewritten_in_a_later_pass_makes_the_file_read_again() -> None:
    data = GEMINI_LOG.read_bytes()
    lines = data.split(b"\n")
    # The gemini message is written, then written again with its tool calls.
    start = sum(len(line) + 1 for line in lines[:4])
    assert parse_all(GEMINI_LOG, start, 4).restart
    # Read from a point after every rewrite, the new lines are simply new.
    later = sum(len(line) + 1 for line in lines[:7])
    assert not parse_all(GEMINI_LOG, later, 7).restart
    rewind = data + b'{"$rewindTo":"f1a2b3c4-0003-4a5b-9c6d-7e8f9a0b1c2d"}\n'
    assert parse_all(GEMINI_LOG, len(data), data.count(b"\n"), data=rewind).restart
    whole = parse_all(GEMINI_LOG, data=rewind).entries
    assert whole[-1].content != "Pin it in @docs/requirements.txt"  # rewound away


def test_gemini_session_documents_saved_chats_and_sub_agents() -> None:
    old = parse_all(GEMINI / "chats" / "session-2025-08-11T09-30-4f2a6c1d.json")
    assert [e.kind for e in old.entries] == [
        "user_text",
        "assistant_text",
        "tool_input",
        "tool_output",
        "assistant_text",
    ]
    saved = parse_all(GEMINI / "checkpoint-before%20refactor.json")
    assert [e.kind for e in saved.entries] == [
        "system",  # the context Gemini CLI sends first
        "system",  # and the model's acknowledgement
        "user_text",
        "tool_input",
        "tool_output",
        "assistant_text",  # the thought part before it is not stored
    ]
    [saved_title] = saved.titles.values()
    assert saved_title.title == "before refactor"
    sub = GEMINI / "chats" / "7c1e9b2a-4d5e-4f60-8a71-9b0c1d2e3f40"
    child = parse_all(next(sub.glob("*.jsonl")))
    assert child.parents == {
        "a4b5c6d7-e8f9-4a0b-8c1d-2e3f4a5b6c7d": "7c1e9b2a-4d5e-4f60-8a71-9b0c1d2e3f40"
    }


def test_opencode_exports_map_to_kinds_tools_and_times() -> None:
    parsed = parse_all(OPENCODE_EXPORT)
    assert adapters.detect_format(OPENCODE_EXPORT.read_bytes()) == "opencode"
    assert [(e.role, e.kind, e.tool_name) for e in parsed.entries] == [
        ("user", "user_text", None),
        ("assistant", "tool_input", "bash"),
        ("tool", "tool_output", "bash"),
        ("assistant", "assistant_text", None),
    ]
    first = parsed.entries[0]
    assert first.session_id == "ses_60b1d4e2cffeZz9Yy8Xx7Ww6Vv"
    assert first.created_at == datetime.fromtimestamp(1759600900.5, tz=UTC)
    [title] = parsed.titles.values()
    assert title.title == "Nightly backup cron"
    header = adapters.ADAPTERS["opencode"].header(
        OPENCODE_EXPORT.read_bytes(), default_session="x", path=OPENCODE_EXPORT
    )
    assert header.cwd == "/home/dev/projects/inventory"


@pytest.mark.parametrize(
    ("line", "resembles"),
    [
        ({"role": "_checkpoint", "id": 0}, "Kimi CLI"),
        (
            {"display": "fix the tests", "pastedContents": {}, "timestamp": 1, "project": "/x"},
            "prompt history",
        ),
        ({"session_id": "s", "ts": 1, "text": "fix the tests"}, "Codex CLI's prompt history"),
    ],
)
def test_a_file_from_another_program_says_what_pgsearch_reads_and_what_it_looks_like(
    line: dict[str, object], resembles: str
) -> None:
    with pytest.raises(IngestError) as info:
        adapters.detect_format(json.dumps(line).encode() + b"\n", path="x.jsonl")
    message = str(info.value)
    assert message.startswith("x.jsonl: not a format pgsearch reads")
    assert resembles in message
    assert all(name in message for name in adapters.FORMATS)


def test_the_registry_names_each_adapter_and_its_detection_order() -> None:
    for entry in adapters.REGISTRY:
        found = adapters.adapter(entry.name)
        assert found.name == entry.name
        assert adapters.ADAPTERS[entry.name] is found
        # A format that recognises its own lines has its place in the detection order.
        detects = found.looks_like_line is not None
        assert detects == (entry.name in adapters.LINE_DETECTION), entry.name
    assert set(adapters.LINE_DETECTION) <= set(adapters.FORMATS)
    assert list(adapters.ADAPTERS) == list(adapters.FORMATS)
    with pytest.raises(KeyError):
        adapters.adapter("nothing")


def test_the_registry_imports_no_adapter_until_one_is_needed() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from pgsearch import adapters\n"
        "assert adapters.FORMAT_CHOICES[0] == 'auto'\n"
        "loaded = [m for m in sys.modules if m.startswith('pgsearch.adapters.')]\n"
        "assert loaded == [], loaded\n"
        "adapters.adapter('codex')\n"
        "assert 'pgsearch.adapters.codex' in sys.modules\n"
        "assert 'pgsearch.adapters.kimi' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
