"""Cline and Roo Code tasks: ``<extension storage>/tasks/<task id>/ui_messages.json``.

Cline (VS Code extension ``saoudrizwan.claude-dev``, and the Cline CLI under
``~/.cline/data``) and Roo Code (``rooveterinaryinc.roo-cline``, a fork of it) keep
each task in a directory of its own: ``ui_messages.json`` is what the chat showed,
``[{"ts", "type": "say"|"ask", "say"|"ask": <kind>, "text", "images", "partial"}]``,
rewritten whole as the task goes on; ``api_conversation_history.json`` is what was
sent to the model (the same conversation with the tool results inlined, and no
times); Roo Code's ``history_item.json`` names the parent task of a subtask and
the workspace. pgsearch reads the UI messages, with the history item beside them
(`pgsearch.sources`), as one document, read whole on every change. Mapping:

- the first message (the task) and ``user_feedback`` -> ``user_text``;
- ``text``, ``completion_result`` and ``followup`` questions -> ``assistant_text``;
  reasoning is not stored;
- ``ask: tool`` (``{"tool": "readFile", "path": …}``), ``command``,
  ``use_mcp_server`` -> ``tool_input``;
- ``command_output``, ``mcp_server_response``, ``subtask_result`` ->
  ``tool_output`` (``tool_error`` when it reads as an error);
  ``error``, ``diff_error``, ``clineignore_error``/``rooignore_error`` ->
  ``tool_error`` of the call before them;
- failed API requests and mistake limits -> ``system``.

Request bookkeeping (``api_req_started``), checkpoints and messages still being
streamed (``partial``) are not stored; kinds this mapping does not know are skipped
and counted. A Roo Code subtask is linked to its parent task.
"""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import Any

from pgsearch import policy
from pgsearch.adapters.common import (
    Adapter,
    FileHeader,
    LineEntries,
    Parsed,
    ident,
    json_document,
    name_of,
    quiet_time,
    text,
    timestamp,
)
from pgsearch.errors import IngestError

NAME = "cline"
ROO_CODE = "roo-code"
VERSION = 1
LABEL = "Cline"
ROO_LABEL = "Roo Code"
_EDITORS = (
    "${XDG_CONFIG_HOME:-~/.config}/Code/User/globalStorage",
    "${XDG_CONFIG_HOME:-~/.config}/Cursor/User/globalStorage",
    "${XDG_CONFIG_HOME:-~/.config}/VSCodium/User/globalStorage",
    "~/Library/Application Support/Code/User/globalStorage",
    "~/Library/Application Support/Cursor/User/globalStorage",
)
LOCATIONS = (
    *(f"{e}/saoudrizwan.claude-dev/tasks" for e in _EDITORS),
    "${CLINE_DIR:-~/.cline}/data/tasks",
)
ROO_LOCATIONS = tuple(f"{e}/rooveterinaryinc.roo-cline/tasks" for e in _EDITORS)
_ASSISTANT_SAYS = frozenset({"text", "completion_result", "codebase_search_result"})
_RESULT_SAYS = frozenset({"command_output", "mcp_server_response", "subtask_result"})
_ERROR_SAYS = frozenset({"error", "diff_error", "clineignore_error", "rooignore_error"})
_SYSTEM = frozenset(
    {
        "api_req_failed",
        "mistake_limit_reached",
        "shell_integration_warning",
        "condense_context_error",
    }
)
_BOOKKEEPING = frozenset(
    {
        "api_req_started",
        "api_req_finished",
        "api_req_deleted",
        "api_req_retried",
        "api_req_retry_delayed",
        "checkpoint_created",
        "checkpoint_saved",
        "reasoning",
        "resume_task",
        "resume_completed_task",
        "mcp_server_request_started",
        "deleted_api_reqs",
        "task",
        "browser_action_launch",
        "condense_context",
        "sliding_window_truncation",
        "task_progress",
    }
)
#: Tools whose ``content`` is what they read (their result), not an argument.
_READ_TOOLS = frozenset({"readFile", "listFilesTopLevel", "listFilesRecursive", "searchFiles"})


def is_roo(path: str | PurePath | None) -> bool:
    """Whether a task sits in Roo Code's storage."""
    return path is not None and "rooveterinaryinc.roo-cline" in PurePath(path).parts


def looks_like_document(value: Any) -> bool:
    """The assembled task document (`pgsearch.sources`)."""
    return isinstance(value, dict) and "cline_task" in value and "ui_messages" in value


def _messages(doc: dict[str, Any]) -> list[Any]:
    ui = doc.get("ui_messages")
    return ui if isinstance(ui, list) else []


def header(data: bytes, *, default_session: str, path: PurePath | None = None) -> FileHeader:
    """The task id (its directory), the workspace Roo Code names, the first time."""
    doc = json_document(data, looks_like_document)
    task = ident(doc.get("cline_task")) or (path.parent.name if path else None)
    found = doc.get("history_item")
    item: dict[str, Any] = found if isinstance(found, dict) else {}
    first = next((m for m in _messages(doc) if isinstance(m, dict)), {})
    parent = ident(item.get("parentTaskId"))
    return FileHeader(
        session_id=task or default_session,
        cwd=text(item.get("workspace")) or None,
        started_at=quiet_time(first.get("ts")),
        parent_session_id=parent if parent != task else None,
    )


def _tool(raw: str) -> tuple[str, Any] | None:
    """(tool name, arguments) of an ``ask: tool`` payload."""
    try:
        payload = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("tool"), str):
        return None
    name = ident(payload["tool"]) or "unknown"
    args = {k: v for k, v in payload.items() if k != "tool"}
    if name in _READ_TOOLS:
        args.pop("content", None)
    return name, args


def _question(raw: str) -> str:
    try:
        payload = json.loads(raw)
    except (ValueError, RecursionError):
        return raw
    if isinstance(payload, dict) and isinstance(payload.get("question"), str):
        options = payload.get("options")
        listed = (
            [text(o) for o in options if isinstance(o, str)] if isinstance(options, list) else []
        )
        return "\n".join([text(payload["question"]), *(f"- {o}" for o in listed)])
    return raw


def parse(data: bytes, start: int, first_line: int, *, path: str, header: FileHeader) -> Parsed:
    """Every entry of the task (always read whole)."""
    doc = json_document(data, looks_like_document)
    parsed = Parsed(consumed=len(data), lines=data.count(b"\n"))
    if not doc:
        return parsed  # nothing of this format: the ingestor says what it looks like
    parsed.recognised = 1
    sid = header.session_id
    if header.parent_session_id is not None:
        parsed.parents[sid] = header.parent_session_id
    last_tool: str | None = None
    for position, message in enumerate(_messages(doc)):
        if not isinstance(message, dict) or message.get("partial") is True:
            continue
        try:
            created = timestamp(message.get("ts"), path=path, line=0)
        except IngestError as exc:
            parsed.problem(IngestError(f"message {position + 1}: {exc.reason}", path=path))
            continue
        line = LineEntries(sid, position, created, extra={"position": position + 1})
        last_tool = _message(
            line, message, position, last_tool, parsed, child=header.parent_session_id is not None
        )
        parsed.entries.extend(line.out)
    return parsed


def _message(
    line: LineEntries,
    message: dict[str, Any],
    position: int,
    last_tool: str | None,
    parsed: Parsed,
    *,
    child: bool,
) -> str | None:
    """Add `message`'s entries to `line`; returns the latest tool called."""
    kind = name_of(message.get("say") if message.get("type") == "say" else message.get("ask"))
    raw = text(message.get("text"))
    images = message.get("images")
    shown = raw + ("\n[image]" * len(images) if isinstance(images, list) else "")
    if position == 0 and child:
        # A subtask's task is written by the task that started it.
        line.text("assistant", policy.ASSISTANT_TEXT, shown, extra={"to_agent": True})
    elif position == 0 or kind == "user_feedback" or kind == "user_feedback_diff":
        line.text("user", policy.USER_TEXT, shown)
    elif kind in _ASSISTANT_SAYS:
        line.text("assistant", policy.ASSISTANT_TEXT, raw)
    elif kind == "followup":
        line.text("assistant", policy.ASSISTANT_TEXT, _question(raw))
    elif kind == "tool" and message.get("type") == "ask":
        tool = _tool(raw)
        if tool is not None:
            line.call(tool[0], tool[1])
            return tool[0]
    elif kind == "command":
        if raw.strip():
            line.call("execute_command", {"command": raw.strip()})
            return "execute_command"
    elif kind == "use_mcp_server":
        try:
            payload = json.loads(raw)
        except (ValueError, RecursionError):
            payload = None
        name = "use_mcp_server"
        if isinstance(payload, dict):
            name = ident(payload.get("toolName")) or ident(payload.get("uri")) or name
        arguments = payload.get("arguments") if isinstance(payload, dict) else raw
        line.call(name, arguments)
        return name
    elif kind in _RESULT_SAYS:
        line.result(raw, tool_name="newTask" if kind == "subtask_result" else last_tool)
    elif kind in _ERROR_SAYS:
        line.result(raw, tool_name=last_tool, marked=True, extra={"say": kind})
    elif kind in _SYSTEM:
        line.text("system", policy.SYSTEM, raw, extra={"event": kind})
    elif kind not in _BOOKKEEPING:
        parsed.skip_unknown(f"{message.get('type')}/{kind}")
    return last_tool


ADAPTER = Adapter(
    name=NAME,
    version=VERSION,
    header=header,
    parse=parse,
    looks_like_line=looks_like_document,
    looks_like_document=looks_like_document,
    is_document=lambda data: True,
    label=LABEL,
    locations=LOCATIONS,
)
ROO_ADAPTER = Adapter(
    name=ROO_CODE,
    version=VERSION,
    header=header,
    parse=parse,
    is_document=lambda data: True,
    label=ROO_LABEL,
    locations=ROO_LOCATIONS,
)
