"""Pi coding agent sessions, and OpenClaw's, which are written in Pi's format.

Pi keeps each session as ``~/.pi/agent/sessions/--<cwd>--/<time>_<id>.jsonl``;
OpenClaw, built on Pi's agent, as ``~/.openclaw/agents/<agent>/sessions/<id>.jsonl``.
The first line is the header ``{"type": "session", "version": 3, "id", "cwd",
"timestamp"}`` (``parentSession`` names the file a ``/fork`` came from); every
later line is an entry with ``id`` and ``parentId``. Entries form a tree: going
back to an earlier entry (``/tree``) and going on from there adds a branch to the
same file. Every branch's entries belong to the session, in file order (each keeps
its ``id`` and ``parentId``), so nothing said on an abandoned branch is lost.

``message`` entries carry the message by role:

- ``user`` text (images as ``[image]``) -> ``user_text``;
- ``assistant`` text -> ``assistant_text``, each ``toolCall`` block ->
  ``tool_input`` with the tool name; a reply that ended in an error -> its
  ``errorMessage`` as ``system``; thinking blocks are not stored;
- ``toolResult`` -> ``tool_output``, or ``tool_error`` when ``isError`` is set or
  the text reads as an error;
- ``bashExecution`` (a ``!`` command the person ran) -> ``user_text`` ``! command``
  and its output -> ``tool_output`` (``tool_error`` when it exited non-zero, a
  search that found nothing excepted);
- ``custom`` (text an extension adds) -> ``system``; ``branchSummary`` and
  ``compactionSummary`` -> ``summary``.

``compaction`` and ``branch_summary`` entries -> ``summary``; ``custom_message`` ->
``system``; ``session_info`` (``/name``) -> the session's title. Model and
thinking-level changes, labels and extension state are bookkeeping; entry types
this mapping does not know are skipped and counted. A forked session is linked to
the session it came from.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any

from pgsearch import policy
from pgsearch.adapters.common import (
    Adapter,
    FileHeader,
    LineEntries,
    Parsed,
    SessionTitle,
    ToolCall,
    ToolCalls,
    block_text,
    head_objects,
    ident,
    int_or_none,
    name_of,
    quiet_time,
    read_lines,
    shell_command,
    text,
    timestamp,
)
from pgsearch.messages import Entry

NAME = "pi"
OPENCLAW = "openclaw"
VERSION = 1
LABEL = "Pi"
OPENCLAW_LABEL = "OpenClaw"
#: Where Pi keeps sessions (``PI_CODING_AGENT_DIR`` moves ``~/.pi/agent``).
LOCATIONS = ("${PI_CODING_AGENT_DIR:-~/.pi/agent}/sessions",)
#: Where OpenClaw keeps them (``OPENCLAW_STATE_DIR`` moves ``~/.openclaw``; older
#: versions, named Clawdbot, used ``~/.clawdbot``).
OPENCLAW_LOCATIONS = (
    "${OPENCLAW_STATE_DIR:-~/.openclaw}/agents/*/sessions",
    "~/.clawdbot/agents/*/sessions",
)
MESSAGE_ROLES = frozenset(
    {"user", "assistant", "toolResult", "bashExecution", "custom"}
    | {"branchSummary", "compactionSummary", "system"}
)
_BOOKKEEPING = frozenset(
    {"session", "model_change", "thinking_level_change", "label", "custom", "session_info"}
)
_SHELL_TOOLS = frozenset({"bash", "shell", "shell_exec", "exec"})
_UUID_TAIL_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)


def looks_like(obj: dict[str, Any]) -> bool:
    """Whether a decoded line is a Pi session header or entry."""
    kind = name_of(obj.get("type"))
    if kind == "session":
        return "cwd" in obj and "id" in obj and "version" in obj
    message = obj.get("message")
    if kind == "message" and isinstance(message, dict):
        return name_of(message.get("role")) in MESSAGE_ROLES and "parentId" in obj
    return kind in ("compaction", "branch_summary", "session_info") and "parentId" in obj


def is_openclaw(path: str | PurePath | None) -> bool:
    """Whether a file in Pi's format sits where OpenClaw keeps its sessions."""
    if path is None:
        return False
    parts = PurePath(path).parts
    if ".openclaw" in parts or ".clawdbot" in parts:
        return True
    return len(parts) >= 4 and parts[-2] == "sessions" and parts[-4] == "agents"


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _session_of_file(value: Any) -> str | None:
    """The session id of a Pi session file path (``<time>_<id>.jsonl``)."""
    name = PurePath(text(value)).stem if isinstance(value, str) and value else ""
    match = _UUID_TAIL_RE.search(name)
    return match.group(0) if match else ident(name.rsplit("_", 1)[-1] or None)


def header(data: bytes, *, default_session: str, path: PurePath | None = None) -> FileHeader:
    """Session id, working directory and start time from the header line."""
    for obj in head_objects(data, 4):
        if obj.get("type") == "session":
            parent = _session_of_file(obj.get("parentSession"))
            sid = ident(obj.get("id")) or default_session
            return FileHeader(
                session_id=sid,
                cwd=text(obj.get("cwd")) or None,
                started_at=quiet_time(obj.get("timestamp")),
                parent_session_id=parent if parent != sid else None,
            )
    return FileHeader(session_id=_session_of_file(default_session) or default_session)


def _tool_call_in(line: Any, call_id: str) -> ToolCall | None:
    message = _obj(line.get("message")) if isinstance(line, dict) else {}
    for block in message.get("content") or ():
        if isinstance(block, dict) and block.get("type") == "toolCall":
            if block.get("id") == call_id:
                return _call(block)
    return None


def _call(block: dict[str, Any]) -> ToolCall:
    name = ident(block.get("name")) or "unknown"
    command = shell_command(block.get("arguments")) if name in _SHELL_TOOLS else None
    return ToolCall(name, command)


class _Parser:
    def __init__(self, data: bytes, start: int, *, path: str, header: FileHeader) -> None:
        self.path = path
        self.sid = header.session_id
        self.tools = ToolCalls(data, start, _tool_call_in)
        self.parsed = Parsed()
        if header.parent_session_id is not None:
            self.parsed.parents[self.sid] = header.parent_session_id

    def handle(self, lineno: int, obj: dict[str, Any]) -> list[Entry] | None:
        kind = name_of(obj.get("type"))
        if kind is None or not ("parentId" in obj or kind == "session"):
            return None
        self.parsed.recognised += 1
        if kind == "session_info":
            name = text(obj.get("name")).strip()
            if name:
                self.parsed.titles[self.sid] = SessionTitle(title=name)
            return None
        if kind not in ("message", "compaction", "branch_summary", "custom_message"):
            if kind not in _BOOKKEEPING:
                self.parsed.skip_unknown(kind)
            return None
        created = timestamp(obj.get("timestamp"), path=self.path, line=lineno)
        entry_id = ident(obj.get("id"))
        line = LineEntries(
            self.sid,
            lineno - 1,
            created,
            entry_id=entry_id,
            extra={"line": lineno, "id": entry_id, "parent_id": ident(obj.get("parentId"))},
        )
        if kind in ("compaction", "branch_summary"):
            body = text(obj.get("summary")).strip()
            line.text("system", policy.SUMMARY, body, summary=body or None)
        elif kind == "custom_message":
            line.text("system", policy.SYSTEM, block_text(obj.get("content")))
        else:
            self.message(line, _obj(obj.get("message")))
        return line.out

    def message(self, line: LineEntries, message: dict[str, Any]) -> None:
        role = message.get("role")
        content = message.get("content")
        if role == "user":
            line.text("user", policy.USER_TEXT, block_text(content))
        elif role == "assistant":
            self.assistant(line, message)
        elif role == "toolResult":
            call_id = ident(message.get("toolCallId"))
            call = self.tools.get(call_id)
            name = ident(message.get("toolName")) or (call.name if call else None)
            line.result(
                block_text(content),
                tool_name=name,
                marked=message.get("isError") is True,
                command=call.command if call else None,
                extra={"call_id": call_id},
            )
        elif role == "bashExecution":
            command = text(message.get("command")).strip()
            code = int_or_none(message.get("exitCode"))
            line.text("user", policy.USER_TEXT, f"! {command}" if command else "")
            line.result(
                text(message.get("output")),
                tool_name="!",
                marked=bool(code),
                command=command,
                exit_code=code,
                extra={"exit_code": code},
            )
        elif role in ("branchSummary", "compactionSummary"):
            body = text(message.get("summary")).strip()
            line.text("system", policy.SUMMARY, body, summary=body or None)
        else:  # custom (extension text), system
            line.text("system", policy.SYSTEM, block_text(content))

    def assistant(self, line: LineEntries, message: dict[str, Any]) -> None:
        pending: list[str] = []

        def flush() -> None:
            line.text("assistant", policy.ASSISTANT_TEXT, "\n".join(pending))
            pending.clear()

        for block in message.get("content") or ():
            if isinstance(block, str):
                pending.append(text(block))
            elif isinstance(block, dict) and block.get("type") == "text":
                pending.append(text(block.get("text")))
            elif isinstance(block, dict) and block.get("type") == "toolCall":
                flush()
                call = _call(block)
                call_id = ident(block.get("id"))
                self.tools.add(call_id, call)
                line.call(call.name, block.get("arguments"), extra={"call_id": call_id})
        flush()
        if message.get("stopReason") in ("error", "aborted"):
            error = text(message.get("errorMessage")).strip()
            line.text("system", policy.SYSTEM, error or f"[{message['stopReason']}]")


def parse(data: bytes, start: int, first_line: int, *, path: str, header: FileHeader) -> Parsed:
    """Entries of the lines of ``data[start:]``, under the lenient line policy."""
    parser = _Parser(data, start, path=path, header=header)
    return read_lines(
        data, start, first_line, path=path, parsed=parser.parsed, handle=parser.handle
    )


ADAPTER = Adapter(
    name=NAME,
    version=VERSION,
    header=header,
    parse=parse,
    looks_like_line=looks_like,
    label=LABEL,
    locations=LOCATIONS,
)
#: OpenClaw's sessions: Pi's format, detected as Pi's and told apart by directory.
OPENCLAW_ADAPTER = Adapter(
    name=OPENCLAW,
    version=VERSION,
    header=header,
    parse=parse,
    label=OPENCLAW_LABEL,
    locations=OPENCLAW_LOCATIONS,
)
