"""The agents added after the first four, without a database: detection, the mapping
to kinds, tool errors, titles, sub-agents and the per-line policy."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from pgsearch import adapters
from pgsearch.adapters import Parsed
from pgsearch.messages import Entry
from pgsearch.sources import read_source
from tests.agent_cases import CASES, COPILOT_SID, Case


def read(path: Path) -> bytes:
    """What ingest reads for `path`: its bytes, or the session assembled around it."""
    return read_source(path, shown=str(path)).data


#: Formats of JSON lines, which read the same from any line (Aider's Markdown is read
#: on from block boundaries only: `test_aider_reads_on_from_where_each_pass_stopped`).
LINE_CASES = [
    c
    for c in CASES
    if c.format != "aider" and not adapters.ADAPTERS[c.format].is_document(read(c.path))
]


def parse_all(path: Path, start: int = 0, first_line: int = 0, data: bytes | None = None) -> Parsed:
    data = read(path) if data is None else data
    adapter = adapters.ADAPTERS[adapters.detect_format(data, path=str(path))]
    header = adapter.header(data, default_session=path.stem, path=path)
    return adapter.parse(data, start, first_line, path=str(path), header=header)


def shape(entries: list[Entry]) -> list[tuple[str, str, str, str | None]]:
    return [(e.session_id, e.role, e.kind, e.tool_name) for e in entries]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_each_agent_is_detected_without_a_format_and_names_its_session(case: Case) -> None:
    data = read(case.path)
    assert adapters.detect_format(data, path=str(case.path)) == case.format
    header = adapters.ADAPTERS[case.format].header(
        data, default_session=case.path.stem, path=case.path
    )
    assert header.session_id == case.session_at(case.path)
    assert header.cwd == case.cwd


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_each_agent_maps_prompts_tool_errors_titles_and_sub_agents(case: Case) -> None:
    parsed = parse_all(case.path)
    assert parsed.problems == []
    mine = [e for e in parsed.entries if e.session_id == case.session_at(case.path)]
    users = " ".join(e.content.lower() for e in mine if e.kind == "user_text")
    assert case.user_word in users
    errors = [e for e in parsed.entries if e.kind == "tool_error"]
    assert any(e.tool_name == case.error_tool for e in errors)
    assert all(e.role == "tool" for e in errors)
    calls = [e for e in parsed.entries if e.kind == "tool_input"]
    assert calls or case.format == "aider"  # Aider's history names no tool calls
    assert all(e.tool_name and e.arguments.startswith(e.tool_name) for e in calls)
    # Times are the source's (a line without one takes its predecessor's when stored;
    # Cursor's transcripts have none: they take the file's modification time).
    timed = [e.created_at is not None for e in parsed.entries]
    if case.format == "cursor":
        assert not any(timed)
    else:
        assert timed[0] and timed.count(False) <= (1 if case.id == "codex-drift" else 0)
    if case.title is not None:
        assert parsed.titles[case.session_id].title == case.title
    if case.child_session is not None:
        assert parsed.parents[case.child_session] == case.session_id
        child = [e for e in parsed.entries if e.session_id == case.child_session]
        assert child and all(e.role != "user" for e in child)  # nobody typed into it
        assert case.child_word in " ".join(e.content for e in child)


@pytest.mark.parametrize("case", LINE_CASES, ids=lambda c: c.id)
def test_a_torn_last_line_waits_and_the_rest_reads_the_same_from_any_line(case: Case) -> None:
    data = case.path.read_bytes()
    assert not data.endswith(b"\n")  # each fixture ends in a line still being written
    whole = parse_all(case.path)
    assert whole.problems == [] and whole.consumed == data.rfind(b"\n") + 1
    lines = data[: whole.consumed].split(b"\n")
    for cut in range(1, len(lines) - 1):
        start = sum(len(line) + 1 for line in lines[:cut])
        tail = parse_all(case.path, start, cut)
        assert shape(tail.entries) == shape(whole.entries[len(whole.entries) - len(tail.entries) :])


def test_copilot_cli_events_map_to_kinds_tools_and_sub_agents() -> None:
    [case] = [c for c in CASES if c.format == "copilot-cli"]
    parsed = parse_all(case.path)
    sub = f"{COPILOT_SID}/agent-call_task_31"
    assert [(e.session_id == sub, e.role, e.kind, e.tool_name) for e in parsed.entries] == [
        (False, "system", "system", None),  # folder trust notice
        (False, "user", "user_text", None),
        (False, "assistant", "assistant_text", None),
        (False, "assistant", "tool_input", "bash"),
        (False, "tool", "tool_output", "bash"),
        (False, "assistant", "assistant_text", None),
        (False, "assistant", "tool_input", "bash"),
        (False, "tool", "tool_error", "bash"),  # success: false
        (False, "assistant", "tool_input", "task"),
        (True, "assistant", "assistant_text", None),
        (True, "assistant", "tool_input", "view"),
        (True, "tool", "tool_error", "view"),
        (True, "assistant", "assistant_text", None),
        (False, "tool", "tool_output", "task"),
        (False, "assistant", "assistant_text", None),
        (False, "system", "system", None),  # abort
        (False, "system", "system", None),  # session.error
    ]
    user = parsed.entries[1]
    assert user.content.endswith("[file: charts.py]")
    assert parsed.titles[sub].title == "Explore agent" and parsed.titles[sub].auto
    assert parsed.unknown == {"session.snapshot_rewind": 1}  # a newer event type, counted


def test_pi_keeps_every_branch_and_maps_shell_commands_and_summaries() -> None:
    [case] = [c for c in CASES if c.format == "pi"]
    parsed = parse_all(case.path)
    assert [(e.role, e.kind, e.tool_name) for e in parsed.entries] == [
        ("user", "user_text", None),
        ("assistant", "assistant_text", None),  # the thinking block is not stored
        ("assistant", "tool_input", "read"),
        ("tool", "tool_output", "read"),
        ("assistant", "assistant_text", None),
        ("assistant", "tool_input", "bash"),
        ("tool", "tool_error", "bash"),  # isError
        ("user", "user_text", None),  # ! rg … typed by the person
        ("system", "summary", None),  # compaction
        ("system", "summary", None),  # the abandoned branch's summary
        ("user", "user_text", None),  # the new branch, from the first prompt
        ("assistant", "assistant_text", None),
    ]
    entries = parsed.entries
    assert entries[7].content == "! rg -n 'footnote_code' docs/"  # rg found nothing: no error
    assert entries[10].extra is not None and entries[10].extra["parent_id"] == "4a06b82b"
    assert entries[8].summary is not None and "FOOTNOTE_RE" in entries[8].summary
    assert parsed.unknown == {"checkpoint": 1}


def test_openclaw_is_told_from_pi_by_where_it_lives(tmp_path: Path) -> None:
    [case] = [c for c in CASES if c.format == "openclaw"]
    data = case.path.read_bytes()
    assert adapters.detect_format(data, path=str(case.path)) == "openclaw"
    moved = tmp_path / "elsewhere.jsonl"
    assert adapters.detect_format(data, path=str(moved)) == "pi"


def test_kimi_cli_sub_agent_events_form_a_session_and_its_copy_is_not_stored() -> None:
    [case] = [c for c in CASES if c.id == "kimi-cli"]
    parsed = parse_all(case.path)
    sub = f"{case.session_id}/agent-7f2c"
    child = [(e.role, e.kind, e.tool_name) for e in parsed.entries if e.session_id == sub]
    assert child == [
        ("assistant", "assistant_text", None),  # the prompt, from the parent agent
        ("assistant", "tool_input", "ReadFile"),
        ("tool", "tool_output", "ReadFile"),
        ("assistant", "assistant_text", None),
    ]
    kinds = [(e.role, e.kind) for e in parsed.entries if e.session_id == case.session_id]
    assert kinds[-2:] == [("user", "user_text"), ("assistant", "assistant_text")]  # /btw
    assert parsed.unknown == {"McpOAuthPrompt": 1}
    copy = case.path.parent / "subagents" / "agent-7f2c" / "wire.jsonl"
    again = parse_all(copy)
    assert (again.entries, again.recognised) == ([], 1)


def test_kimi_code_agents_other_than_main_are_sub_agent_sessions() -> None:
    from tests.agent_cases import KIMI_CODE_AGENTS, KIMI_CODE_SID

    main = parse_all(KIMI_CODE_AGENTS / "main" / "wire.jsonl")
    assert [e.kind for e in main.entries].count("user_text") == 1  # the prompt, once
    assert main.unknown == {"context.append_loop_event/artifact.preview": 1}
    path = KIMI_CODE_AGENTS / "agent-0" / "wire.jsonl"
    child = parse_all(path)
    sub = f"{KIMI_CODE_SID}/agent-0"
    assert child.parents == {sub: KIMI_CODE_SID}
    assert next((e.session_id, e.role, e.kind) for e in child.entries) == (
        sub,
        "assistant",
        "assistant_text",
    )


def test_a_codex_rollout_of_a_newer_codex_is_read_and_what_is_unknown_counted() -> None:
    [case] = [c for c in CASES if c.id == "codex-drift"]
    parsed = parse_all(case.path)
    assert [(e.role, e.kind, e.tool_name) for e in parsed.entries] == [
        ("user", "user_text", None),  # content as a plain string
        ("assistant", "tool_input", "shell"),  # arguments under a renamed field
        ("tool", "tool_output", "shell"),
        ("assistant", "tool_input", "figma.get_frame"),  # a newer call type
        ("tool", "tool_error", "figma.get_frame"),
        ("assistant", "assistant_text", None),  # no timestamp on the line
        ("system", "summary", None),
    ]
    assert "rg -n 'flipY' src/render" in parsed.entries[1].arguments
    assert parsed.unknown == {"workspace_snapshot": 1, "response_item/ghost_snapshot": 1}
    # A rollout made only of types this mapping does not know is still Codex's.
    line = b'{"timestamp":"2026-06-03T08:00:01Z","type":"world_model","payload":{"x":1}}\n'
    assert adapters.detect_format(line) == "codex"


def test_droid_messages_map_like_the_messages_api_and_reminders_are_system() -> None:
    [case] = [c for c in CASES if c.format == "droid"]
    parsed = parse_all(case.path)
    assert [(e.role, e.kind, e.tool_name) for e in parsed.entries] == [
        ("system", "system", None),  # <system-reminder> before the prompt
        ("user", "user_text", None),
        ("assistant", "assistant_text", None),
        ("assistant", "tool_input", "Grep"),
        ("tool", "tool_output", "Grep"),
        ("assistant", "tool_input", "Execute"),
        ("tool", "tool_error", "Execute"),
        ("assistant", "assistant_text", None),
    ]
    assert parsed.entries[1].content.startswith("The nightly reconcile job")
    assert parsed.unknown == {"tool_permission": 1}


def test_qwen_code_records_rewritten_under_one_uuid_count_once() -> None:
    [case] = [c for c in CASES if c.format == "qwen"]
    parsed = parse_all(case.path)
    assert [(e.role, e.kind, e.tool_name) for e in parsed.entries] == [
        ("user", "user_text", None),
        ("system", "system", None),  # context a hook added to the prompt
        ("assistant", "assistant_text", None),  # the record as completed, once
        ("assistant", "tool_input", "search_file_content"),
        ("tool", "tool_output", "search_file_content"),
        ("assistant", "tool_input", "run_shell_command"),
        ("tool", "tool_error", "run_shell_command"),
        ("assistant", "assistant_text", None),
        ("system", "summary", None),  # the compressed history
    ]
    title = parsed.titles[case.session_id]
    assert (title.title, title.auto) == ("Pear rows skipped after frost", True)
    assert parsed.unknown == {"checkpoint": 1}
    # A record read in an earlier pass and written again: the file is read again.
    data = case.path.read_bytes()
    lines = data.split(b"\n")
    start = sum(len(line) + 1 for line in lines[:2])  # the first, thought-only copy read
    assert parse_all(case.path, start, 2).restart


def test_aider_runs_are_sessions_of_prompts_replies_and_notices() -> None:
    [case] = [c for c in CASES if c.format == "aider"]
    parsed = parse_all(case.path)
    first, second = case.session_at(case.path), case.session_at(case.path)[:-1] + "2"
    by_session = {e.session_id for e in parsed.entries}
    assert by_session == {first, second}
    users = [e.content for e in parsed.entries if e.kind == "user_text"]
    assert users == [
        "/add kestrel/telemetry.py",
        "The altitude readings from the barometer drift upward over long flights. "
        "Can you smooth them?",
        "/run pytest tests/test_telemetry.py -q",
        "Why does the mission planner reject waypoints above 120 m?",
        "Make the ceiling configurable per mission.",
    ]
    reply = next(e for e in parsed.entries if e.kind == "assistant_text")
    assert ">>>>>>> REPLACE" in reply.content  # a code block in a reply stays in it
    run = next(e for e in parsed.entries if e.content.startswith("FAILED"))
    assert run.content.endswith("1 failed, 9 passed in 0.31s")  # unquoted lines follow
    assert {e.created_at for e in parsed.entries if e.session_id == second} == {
        datetime(2025, 11, 5, 16, 40, 2, tzinfo=UTC)
    }


def test_aider_reads_on_from_where_each_pass_stopped() -> None:
    [case] = [c for c in CASES if c.format == "aider"]
    data = case.path.read_bytes()
    whole = parse_all(case.path)
    assert whole.consumed == data.rfind(b"\n") + 1  # the reply being written waits
    # The file as it grew, a line at a time: each pass goes on from the last.
    got: list[Entry] = []
    start = lines = 0
    for end in [i + 1 for i, b in enumerate(data) if b == ord("\n")]:
        step = parse_all(case.path, start, lines, data=data[:end])
        got.extend(step.entries)
        start, lines = step.consumed, step.lines
    assert [(e.session_id, e.kind, e.content) for e in got] == [
        (e.session_id, e.kind, e.content) for e in whole.entries
    ]


def test_cline_tasks_map_the_ui_messages_and_roo_subtasks_link_to_their_parent() -> None:
    [case] = [c for c in CASES if c.format == "cline"]
    parsed = parse_all(case.path)
    assert [(e.role, e.kind, e.tool_name) for e in parsed.entries] == [
        ("user", "user_text", None),  # the task
        ("assistant", "assistant_text", None),  # reasoning and request records dropped
        ("assistant", "tool_input", "readFile"),
        ("assistant", "assistant_text", None),
        ("assistant", "tool_input", "execute_command"),
        ("tool", "tool_output", "execute_command"),
        ("assistant", "tool_input", "editedExistingFile"),
        ("tool", "tool_error", "editedExistingFile"),  # diff_error
        ("assistant", "assistant_text", None),  # the followup question
        ("user", "user_text", None),  # the answer
        ("assistant", "assistant_text", None),  # completion_result
    ]
    assert "footer" in parsed.entries[8].content and "- From the template" in (
        parsed.entries[8].content
    )
    assert '"content"' not in parsed.entries[2].arguments  # what it read is no argument
    assert parsed.unknown == {"say/browser_session_started": 1}
    from tests.agent_cases import ROO_CHILD, ROO_PARENT

    child = parse_all(
        case.path.parents[2].parent
        / "rooveterinaryinc.roo-cline"
        / "tasks"
        / ROO_CHILD
        / "ui_messages.json"
    )
    assert child.parents == {ROO_CHILD: ROO_PARENT}
    assert [(e.role, e.kind) for e in child.entries][:1] == [("assistant", "assistant_text")]
    assert [e.kind for e in child.entries].count("tool_error") == 1  # "error: …" output


def test_cursor_transcripts_strip_the_query_wrapper_and_link_sub_agents() -> None:
    from tests.agent_cases import CURSOR_SID

    [case] = [c for c in CASES if c.format == "cursor"]
    parsed = parse_all(case.path)
    assert [(e.role, e.kind, e.tool_name) for e in parsed.entries] == [
        ("system", "system", None),  # <attached_files>
        ("user", "user_text", None),
        ("assistant", "assistant_text", None),
        ("assistant", "tool_input", "Grep"),
        ("tool", "tool_output", "Grep"),
        ("assistant", "tool_input", "Shell"),
        ("tool", "tool_error", "Shell"),
        ("assistant", "assistant_text", None),
        ("assistant", "tool_input", "Task"),
    ]
    assert parsed.entries[1].content.startswith("The bloom pass makes the HUD text glow")
    assert parsed.unknown == {"checkpoint_created": 1}
    child_path = next((case.path.parent / "subagents").glob("*.jsonl"))
    child = parse_all(child_path)
    sub = f"{CURSOR_SID}/{child_path.stem}"
    assert child.parents == {sub: CURSOR_SID}
    assert child.entries[0].role == "assistant"  # the parent agent's prompt


def test_amp_threads_map_runs_and_exit_codes() -> None:
    [case] = [c for c in CASES if c.format == "amp"]
    parsed = parse_all(case.path)
    assert [(e.role, e.kind, e.tool_name) for e in parsed.entries] == [
        ("user", "user_text", None),
        ("assistant", "assistant_text", None),
        ("assistant", "tool_input", "Grep"),
        ("tool", "tool_output", "Grep"),
        ("assistant", "tool_input", "Bash"),
        ("tool", "tool_error", "Bash"),  # exit code 1
        ("assistant", "tool_input", "Bash"),  # rg that found nothing: no entry, no error
        ("assistant", "assistant_text", None),
    ]
    assert parsed.entries[3].content.startswith("client/ws.py:14:HEARTBEAT_SECONDS = 30")
    assert parsed.entries[0].created_at == datetime(2025, 12, 10, 12, 33, 21, tzinfo=UTC)


def test_crush_store_maps_sessions_sub_agents_and_summaries_without_writing_it() -> None:
    [case] = [c for c in CASES if c.format == "crush"]
    before = (case.path.read_bytes(), case.path.stat().st_mtime_ns)
    siblings = sorted(p.name for p in case.path.parent.iterdir())
    parsed = parse_all(case.path)
    main = [
        (e.role, e.kind, e.tool_name) for e in parsed.entries if e.session_id == case.session_id
    ]
    assert main == [
        ("user", "user_text", None),
        ("assistant", "assistant_text", None),  # reasoning is not stored
        ("assistant", "tool_input", "grep"),
        ("tool", "tool_output", "grep"),
        ("assistant", "tool_input", "bash"),
        ("tool", "tool_error", "bash"),
        ("assistant", "tool_input", "agent"),
        ("tool", "tool_output", "agent"),
        ("assistant", "assistant_text", None),
        ("system", "summary", None),
    ]
    child = [(e.role, e.kind) for e in parsed.entries if e.session_id == case.child_session]
    assert child == [("assistant", "assistant_text"), ("assistant", "assistant_text")]
    assert parsed.titles[case.session_id].auto
    # Read-only: the store and its directory are as they were.
    assert (case.path.read_bytes(), case.path.stat().st_mtime_ns) == before
    assert sorted(p.name for p in case.path.parent.iterdir()) == siblings


def test_cursor_chat_store_maps_bubbles_and_never_reads_the_editors_tokens() -> None:
    [case] = [c for c in CASES if c.format == "cursor-store"]
    data = read(case.path)
    assert b"not-a-real-token" not in data  # only conversation keys are read
    parsed = parse_all(case.path, data=data)
    assert [
        (e.role, e.kind, e.tool_name) for e in parsed.entries if e.session_id == case.session_id
    ] == [
        ("user", "user_text", None),
        ("assistant", "assistant_text", None),  # the thinking-only bubble is not stored
        ("assistant", "tool_input", "codebase_search"),
        ("tool", "tool_output", "codebase_search"),
        ("assistant", "tool_input", "run_terminal_cmd"),
        ("tool", "tool_error", "run_terminal_cmd"),
        ("assistant", "assistant_text", None),
    ]
    older = "a9e3d5b1-2c84-4f07-b6d2-8e1f4a7c3b90"  # inline conversation, no name
    assert [e.kind for e in parsed.entries if e.session_id == older] == [
        "user_text",
        "assistant_text",
    ]
    assert older not in parsed.titles


def test_vscode_copilot_change_logs_replay_into_the_session_and_documents_read_as_they_are() -> (
    None
):
    from tests.agent_cases import VSCODE_CHATS

    [case] = [c for c in CASES if c.format == "vscode-copilot"]
    parsed = parse_all(case.path)
    assert [(e.role, e.kind, e.tool_name) for e in parsed.entries] == [
        ("user", "user_text", None),
        ("assistant", "assistant_text", None),
        ("assistant", "tool_input", "copilot_findTextInFiles"),
        ("tool", "tool_output", "copilot_findTextInFiles"),
        ("assistant", "tool_input", "run_in_terminal"),
        ("tool", "tool_error", "run_in_terminal"),
        ("assistant", "assistant_text", None),  # two Markdown pieces, one text
        ("assistant", "tool_input", "copilot_think"),
        ("user", "user_text", None),
        ("assistant", "assistant_text", None),
        ("system", "system", None),  # the request's error
    ]
    assert "pytest tests/test_moon.py -q" in parsed.entries[4].arguments
    assert parsed.entries[6].content.startswith("The offset is hard-coded to UTC+10, but Hobart")
    assert parsed.problems == []  # the torn last change waits
    assert parsed.unknown == {"response/elicitation": 1}
    older = parse_all(next(VSCODE_CHATS.glob("*.json")))
    [title] = older.titles.values()
    assert title.title == "Leap seconds in the tide table"
    assert [e.kind for e in older.entries] == ["user_text", "assistant_text"]
